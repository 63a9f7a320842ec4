"""Seeds that do nothing: runs of different seeds whose logs come out bitwise equal.

A script that never passes its seed on (DeepSpeed #5717, LLaVA #1588, torchtune #2335) gives
the same run for every seed; a sweep, `spread` or `pair --seeds A,B` says so: "the seed is not
applied: seeds 0 and 1 gave the same log". Two logs are the same when their step records are:
every step, every value (bitwise: a float's exact repr), every parameter digest, in order.
Clocks and throughput (`Step.clocks`), the header (it names the seed) and text lines are set
aside, as the verdict sets them aside. A log with no step holding a value proves nothing and
is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL
from tuimon.readers import ReaderError, Reading, load, read_blocks
from tuimon.steplog import Record, Step

NOT_APPLIED = "the seed is not applied"


def _records(path: Path, reading: Reading | None) -> Iterator[Record]:
    """A log's records, a block at a time where it is a large log of lines."""
    blocks = read_blocks(path, reading)
    if blocks is None:
        yield from load(path, reading).records
        return
    for block in blocks:
        yield from block


def log_fingerprint(path: Path, reading: Reading | None = None) -> str | None:
    """A hash of a log's step records (steps, values bitwise, digests, in order); None when the
    log cannot be read or has no step with a value."""
    h = hashlib.blake2b(digest_size=16)
    valued = False
    try:
        for record in _records(Path(path), reading):
            if not isinstance(record, Step):
                continue
            values = sorted((k, repr(v)) for k, v in record.metrics.items())
            digests = sorted(record.digests.items())
            valued = valued or bool(values or record.digest or digests)
            mark = (record.step, values, record.digest, digests, record.unreadable)
            h.update(repr(mark).encode() + b"\n")
    except (ReaderError, OSError):
        return None
    return h.hexdigest() if valued else None


@dataclass(frozen=True, slots=True)
class SameLog:
    """Seeds whose runs gave the same log (two or more, in the order they were given)."""

    seeds: tuple[int, ...]
    side: str | None = None
    """The side of the pairs whose logs were compared (a sweep's), None for `pair --seeds`."""

    def text(self) -> str:
        """`the seed is not applied: seeds 0 and 1 gave the same log (as did seed 2)`."""
        first, second, *rest = self.seeds
        text = f"{NOT_APPLIED}: seeds {first} and {second} gave the same log"
        if rest:
            more = ", ".join(map(str, rest))
            text += f" (as did seed{'s' if len(rest) > 1 else ''} {more})"
        return text + (f" (side {self.side})" if self.side else "")

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": list(self.seeds), "side": self.side, "text": self.text()}


def same_logs(
    runs: Iterable[tuple[int, Path]], reading: Reading | None = None, side: str | None = None
) -> list[SameLog]:
    """Among runs of different seeds (`(seed, log)`), each group of seeds whose logs are the
    same; a seed's repeats count once (its first log that can be read)."""
    groups: dict[str, list[int]] = {}
    seen: set[int] = set()
    for seed, log in runs:
        if seed in seen:
            continue
        fingerprint = log_fingerprint(log, reading)
        if fingerprint is None:
            continue
        seen.add(seed)
        groups.setdefault(fingerprint, []).append(seed)
    return [SameLog(tuple(seeds), side) for seeds in groups.values() if len(seeds) > 1]


def _seeds(meta: Mapping[str, Any]) -> tuple[int, int] | None:
    seeds = meta.get("seeds")
    if not isinstance(seeds, list) or len(seeds) != 2:
        return None
    return (seeds[0], seeds[1]) if all(type(s) is int for s in seeds) else None


def pair_seeds(meta: Mapping[str, Any], verdict: str | None) -> SameLog | None:
    """`pair --seeds A,B` (pair.json `seeds`): the seed is not applied when the two runs, of
    seeds A and B, are IDENTICAL (every byte that differs set aside by rule: the header, clocks);
    None otherwise, or for a pair of one seed."""
    seeds = _seeds(meta)
    if seeds is None or seeds[0] == seeds[1] or verdict != IDENTICAL:
        return None
    return SameLog(seeds)


def pair_exit_code(code: int, meta: Mapping[str, Any], verdict: str | None) -> int:
    """The exit code of `pair --seeds A,B --check-seeds` (pair.json `check_seeds`): the seed
    check is what is asked, so 1 when the seed is not applied, 0 when the runs differ, 3 stays
    (a run failed, the pair is incomplete or not saved); any other pair: `code` as it is."""
    if meta.get("check_seeds") is not True or _seeds(meta) is None or code == 3:
        return code
    if verdict not in (IDENTICAL, CLOSE, DIVERGED):
        return 3
    return 1 if pair_seeds(meta, verdict) is not None else 0
