"""Does a divergence matter at run scale? The gap between a pair's two sides beside the gap
between seeds on the same side.

Each measure is a gap between two runs at the end: W_E's relative distance, the gap in the step
that reached a threshold, the key-frequency sets' Jaccard distance (and, shown but not judged,
the final metrics). "Between sides" is the gap between a and b of one pair; "between seeds" the
gap between two pairs' runs of different seeds on the same side (a with a, b with b); "repeats"
the same for pairs of one seed. The ratio of the two medians is the answer: a divergence
between the sides matters at run scale when it is about as large as what a change of seed does.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuimon.engine.analyses.pair_runs import PairRun, SideRun, SpreadError
from tuimon.engine.judge.seed_check import SameLog, same_logs
from tuimon.store import SIDES, SavedLogs, StoreError

SAME = "SAME AT RUN SCALE"
DIFFERENT = "DIFFERENT AT RUN SCALE"
INCOMPLETE = "INCOMPLETE"
EXIT_CODES = {SAME: 0, DIFFERENT: 1, INCOMPLETE: 3}
FINAL_METRICS = ("train_loss", "test_loss", "train_acc", "test_acc")


@dataclass(frozen=True)
class Options:
    """What `reached` means and where the verdict's line lies."""

    metric: str = "test_acc"
    threshold: float = 0.99
    limit: float = 0.5
    """SAME when every judged ratio (sides' median gap / seeds' median gap) is below this."""
    check_seeds: bool = False
    """`--check-seeds`: seeds whose runs gave the same log fail the report (exit 1)."""


@dataclass
class Measure:
    """One gap, between the sides of each pair and between seeds on the same side."""

    name: str
    judged: bool
    sides: list[float]
    seeds: list[float]
    repeats: list[float]
    note: str | None = None
    """Why it is not judged (nothing to measure), when it is not."""

    @property
    def side_median(self) -> float | None:
        return _median(self.sides)

    @property
    def seed_median(self) -> float | None:
        return _median(self.seeds)

    @property
    def repeat_median(self) -> float | None:
        return _median(self.repeats)

    @property
    def ratio(self) -> float | None:
        """Sides' median gap / seeds' median gap (None: one of them is unknown)."""
        side, seed = self.side_median, self.seed_median
        if side is None or seed is None:
            return None
        if seed == 0:
            return 0.0 if side == 0 else math.inf
        return side / seed

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "judged": self.judged and self.ratio is not None,
            "between_sides": _jsonable(self.sides),
            "between_seeds": _jsonable(self.seeds),
            "repeats": _jsonable(self.repeats),
            "between_sides_median": _num(self.side_median),
            "between_seeds_median": _num(self.seed_median),
            "repeats_median": _num(self.repeat_median),
            "ratio": _num(self.ratio),
            "note": self.note,
        }


@dataclass
class SpreadResult:
    """The measures, the key-frequency counts, the verdict and why."""

    pairs: list[PairRun]
    options: Options
    measures: list[Measure]
    freq_counts: dict[str, Any]
    verdict: str
    reasons: list[str] = field(default_factory=list)
    """Why INCOMPLETE (empty otherwise)."""
    same_seeds: list[SameLog] = field(default_factory=list)
    """Seeds whose runs gave the same log (`judge.seed_check`): the seed is not applied."""

    @property
    def exit_code(self) -> int:
        """The verdict's; with `--check-seeds`, 1 when seeds gave the same log (3 stays)."""
        code = EXIT_CODES[self.verdict]
        return 1 if self.options.check_seeds and self.same_seeds and code != 3 else code

    @property
    def seeds(self) -> list[int]:
        return sorted({p.seed for p in self.pairs if p.seed is not None})


def _median(xs: Sequence[float]) -> float | None:
    return float(np.median(xs)) if xs else None


def _num(x: float | None) -> float | str | None:
    return x if x is None or math.isfinite(x) else str(x)


def _jsonable(xs: Sequence[float]) -> list[float | str | None]:
    return [_num(x) for x in xs]


def we_distance(x: SideRun, y: SideRun) -> float | None:
    """‖W_x − W_y‖ / mean(‖W_x‖, ‖W_y‖), Frobenius norms, W_E as saved (None: one is missing)."""
    if x.emb is None or y.emb is None:
        return None
    if x.emb.shape != y.emb.shape:
        raise SpreadError(
            f"W_E shapes differ ({x.emb.shape} against {y.emb.shape}): the pairs are not of one "
            "model"
        )
    a, b = x.emb.astype(np.float64), y.emb.astype(np.float64)
    scale = (np.linalg.norm(a) + np.linalg.norm(b)) / 2
    return float(np.linalg.norm(a - b) / scale) if scale else 0.0


def freq_distance(x: SideRun, y: SideRun) -> float | None:
    """1 − |A ∩ B| / |A ∪ B| of the two key-frequency sets (0: the same set)."""
    if not x.freqs or not y.freqs:
        return None
    a, b = set(x.freqs), set(y.freqs)
    return 1.0 - len(a & b) / len(a | b)


def reach_gap(metric: str, threshold: float) -> Callable[[SideRun, SideRun], float | None]:
    """Steps between the two runs' first steps at `metric` >= `threshold`; inf when only one
    reached it; None when neither did."""

    def gap(x: SideRun, y: SideRun) -> float | None:
        rx, ry = x.reached(metric, threshold), y.reached(metric, threshold)
        if rx is None and ry is None:
            return None
        if rx is None or ry is None:
            return math.inf
        return float(abs(rx - ry))

    return gap


def final_gap(metric: str) -> Callable[[SideRun, SideRun], float | None]:
    """|final value of x − final value of y| of one metric."""

    def gap(x: SideRun, y: SideRun) -> float | None:
        fx, fy = x.final(metric), y.final(metric)
        return None if fx is None or fy is None else abs(fx - fy)

    return gap


def gaps(
    pairs: Sequence[PairRun], fn: Callable[[SideRun, SideRun], float | None]
) -> tuple[list[float], list[float], list[float]]:
    """The gap between the sides of each pair; between runs of two seeds on the same side; and
    between runs of one seed on the same side in two pairs (repeats). None gaps are left out."""
    sides = [fn(p.sides["a"], p.sides["b"]) for p in pairs]
    seeds: list[float | None] = []
    repeats: list[float | None] = []
    for side in SIDES:
        for p, q in itertools.combinations(pairs, 2):
            bucket = repeats if p.seed == q.seed else seeds
            bucket.append(fn(p.sides[side], q.sides[side]))
    return tuple([g for g in xs if g is not None] for xs in (sides, seeds, repeats))  # type: ignore[return-value]


def _note(measured: list[float], what: str) -> str | None:
    """Why a measure has no gap between sides (None when it has one)."""
    return None if measured else what


def measures(pairs: Sequence[PairRun], o: Options) -> list[Measure]:
    """The judged measures (W_E, the reach step, the key-frequency sets), then the final
    metrics, shown but not judged."""
    out = []
    s, d, r = gaps(pairs, we_distance)
    out.append(Measure("W_E relative distance", True, s, d, r, _note(s, "no W_E saved")))
    s, d, r = gaps(pairs, reach_gap(o.metric, o.threshold))
    logged = any(o.metric in side.series for p in pairs for side in p.sides.values())
    why = f"no run reached {o.metric} >= {o.threshold:g}" if logged else f"no {o.metric} logged"
    out.append(Measure(f"steps to {o.metric} >= {o.threshold:g}", True, s, d, r, _note(s, why)))
    s, d, r = gaps(pairs, freq_distance)
    name = "key-frequency sets (1 - shared/union)"
    out.append(Measure(name, True, s, d, r, _note(s, "no key frequencies")))
    for metric in dict.fromkeys((*FINAL_METRICS, o.metric)):
        s, d, r = gaps(pairs, final_gap(metric))
        if s or d:
            out.append(Measure(f"final {metric}", False, s, d, r))
    return out


def freq_counts(pairs: Sequence[PairRun]) -> dict[str, Any]:
    """How many pairs' sides agree on the set; how many seed comparisons do, and how many
    frequencies two seeds share on average."""
    known = [p for p in pairs if p.sides["a"].freqs and p.sides["b"].freqs]
    agree = sum(set(p.sides["a"].freqs or ()) == set(p.sides["b"].freqs or ()) for p in known)
    shared, same, k = [], 0, 0
    for side in SIDES:
        for p, q in itertools.combinations(known, 2):
            if p.seed == q.seed:
                continue
            x, y = set(p.sides[side].freqs or ()), set(q.sides[side].freqs or ())
            shared.append(len(x & y))
            same += x == y
            k = max(k, len(x), len(y))
    return {
        "pairs": len(known),
        "pairs_agree": agree,
        "seed_comparisons": len(shared),
        "seed_comparisons_same_set": same,
        "seeds_share_mean": float(np.mean(shared)) if shared else None,
        "top": k or max((len(p.sides["a"].freqs or ()) for p in known), default=0),
    }


def incomplete_reasons(pairs: Sequence[PairRun], extra: Sequence[str] = ()) -> list[str]:
    """What keeps the verdict from being known: one seed, a side cut short, no W_E."""
    reasons = list(extra)
    seeds = {p.seed for p in pairs if p.seed is not None}
    if len(seeds) < 2:
        shown = f" ({', '.join(map(str, sorted(seeds)))})" if seeds else ""
        reasons.append(
            f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}{shown}: no gap between seeds to "
            "measure the sides against (give pairs of two or more seeds)"
        )
    for p in pairs:
        if p.seed is None:
            reasons.append(f"{p.name}: no seed recorded")
        for run in p.sides.values():
            if run.cut:
                reasons.append(f"{p.name}: {run.cut}")
            if run.emb is None:
                reasons.append(f"{p.name}: no W_E on side {run.side} ({run.emb_note})")
    return reasons


def judge(pairs: Sequence[PairRun], o: Options, extra: Sequence[str] = ()) -> SpreadResult:
    """The measures and the verdict by the stated rule (`rule`)."""
    if not pairs:
        raise SpreadError("no pairs to put side by side")
    ms = measures(pairs, o)
    reasons = incomplete_reasons(pairs, extra)
    judged = [m for m in ms if m.judged and m.ratio is not None]
    if not reasons and not judged:
        reasons.append("no measure could be computed")
    if reasons:
        verdict = INCOMPLETE
    elif any(m.ratio is not None and m.ratio >= o.limit for m in judged):
        verdict = DIFFERENT
    else:
        verdict = SAME
    return SpreadResult(list(pairs), o, ms, freq_counts(pairs), verdict, reasons, same_seeds(pairs))


def same_seeds(pairs: Sequence[PairRun]) -> list[SameLog]:
    """Seeds whose runs gave the same log: side a of each pair, by seed (`seed_check`)."""
    runs = []
    for p in pairs:
        if p.seed is not None:
            with contextlib.suppress(StoreError, OSError):
                logs = SavedLogs.open(p.path)
                runs.append((p.seed, logs.a))
    return same_logs(runs, None, "a")


def rule(o: Options) -> str:
    """The verdict's rule, in words (printed with the numbers)."""
    return (
        "ratio = median gap between the two sides of a pair / median gap between two seeds on "
        f"the same side, for W_E, the step {o.metric} first reached {o.threshold:g} and the "
        f"key-frequency sets; {SAME} when every ratio is below {o.limit:g}, {DIFFERENT} when "
        f"any reaches it, {INCOMPLETE} when it cannot know (fewer than 2 seeds, a side cut "
        "short, no W_E)"
    )


def _pct(x: float) -> str:
    return "infinitely" if math.isinf(x) else f"{x:.0%}"


def sentence(result: SpreadResult) -> str:
    """The answer in a line: how far apart the sides are, relative to two seeds."""
    parts = []
    for m in result.measures:
        if not m.judged or m.ratio is None:
            continue
        if m.name.startswith("W_E"):
            parts.append(f"the sides' W_E are {_pct(m.ratio)} as far apart as two seeds'")
        elif m.name.startswith("steps to"):
            parts.append(f"they reach {result.options.metric} >= "
                         f"{result.options.threshold:g} {_pct(m.ratio)} as far apart")  # fmt: skip
    c = result.freq_counts
    if c["pairs"]:
        parts.append(f"key-frequency sets agree in {c['pairs_agree']} of {c['pairs']} pairs")
    if c["seeds_share_mean"] is not None:
        parts.append(f"two seeds share {c['seeds_share_mean']:.1f} of {c['top']} frequencies")
    return "; ".join(parts) or "nothing measured"
