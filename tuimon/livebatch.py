"""Aligning a batch of one side's steps at once (a live pair takes its steps once a tick).

A stand-in until `PairAligner.feed_batch` lands in `tuimon.align`: the same pairing and
accounting as `PairAligner.feed`, but the matched steps' metrics are compared in one
`diff_arrays` call per batch instead of one per step (per step it was most of a live pair's time).
"""

from __future__ import annotations

import numpy as np

from tuimon.align import AlignedStep, MetricDiff, PairAligner, diff_arrays
from tuimon.steplog import Step


def feed_steps(aligner: PairAligner, side: str, steps: list[Step]) -> list[AlignedStep]:
    """Feed `steps` of `side` in order; the aligned steps they complete, in that order."""
    feed_batch = getattr(aligner, "feed_batch", None)
    if feed_batch is not None:  # the aligner's own, once it has one
        return list(feed_batch(side, steps))
    other = "b" if side == "a" else "a"
    seen, mine, theirs = aligner._seen[side], aligner._pending[side], aligner._pending[other]
    pairs: list[tuple[Step, Step]] = []
    for record in steps:
        if record.step in seen:
            aligner.duplicates[side] += 1
            continue
        seen.add(record.step)
        match = theirs.pop(record.step, None)
        if match is None:
            mine[record.step] = record
        else:
            pairs.append((record, match) if side == "a" else (match, record))
    if not pairs:
        return []
    shared = [[n for n in a.metrics if n in b.metrics] for a, b in pairs]
    va = [a.metrics[n] for (a, _), names in zip(pairs, shared, strict=True) for n in names]
    vb = [b.metrics[n] for (_, b), names in zip(pairs, shared, strict=True) for n in names]
    eq, absd, rel, ulps = (
        x.tolist() for x in diff_arrays(np.array(va, np.float64), np.array(vb, np.float64))
    )
    out, i = [], 0
    for (a, b), names in zip(pairs, shared, strict=True):
        diffs = {}
        for n in names:
            diffs[n] = MetricDiff(va[i], vb[i], bool(eq[i]), absd[i], rel[i], int(ulps[i]))
            i += 1
        digest_equal = a.digest == b.digest if a.digest and b.digest else None
        tensors = tuple(k for k, h in a.digests.items() if k in b.digests and b.digests[k] != h)
        divergence = max((d.rel for d in diffs.values()), default=0.0)
        aligned = AlignedStep(a.step, a, b, diffs, digest_equal, tensors, divergence)
        aligner._account(aligned)
        out.append(aligned)
    return out
