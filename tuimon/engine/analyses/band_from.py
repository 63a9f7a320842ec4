"""`--tolerance-from SWEEP`: the band per metric measured on a saved sweep of repeats.

Every finished pair of the sweep gives two runs. Runs of one seed are compared two by two (every
pair of runs, not only the two sides of a pair); a metric's band is the largest absolute and the
largest relative difference seen between any two of them at any step they both logged (the first
record of a step), over the whole run, and the widest over the seeds when the sweep has several.
A value that is not finite on one side (a NaN, an inf) gives no finite distance and is left
out of the band. Per step bands would be narrower than the noise of one step by chance: a new
repeat would leave them somewhere in a long run; the band over the run holds every repeat
measured and, with bounded noise, the next one.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np

from tuimon.engine.judge.band import Band
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.ulps import diff_arrays
from tuimon.engine.judge.verdict import INCOMPLETE
from tuimon.engine.runs.sweep import Sweep, SweepError
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.errors import ReplayError, TuimonError
from tuimon.steplog import Step
from tuimon.store import SIDES


class BandError(TuimonError):
    """A sweep no band can be measured on (one line)."""


def band_from_sweep(store: Path, ref: str) -> Band:
    """The band of the saved sweep `ref` (its id or record); BandError when it has fewer
    than two finished runs of one seed, or a pair that cannot be read."""
    try:
        sweep = Sweep.load(store, ref)
    except SweepError as exc:
        raise BandError(str(exc)) from None
    groups: dict[int, list[list[Step]]] = {}
    for job in sweep.jobs:
        if job.status != "finished" or job.verdict in (None, INCOMPLETE) or not job.pair:
            continue
        try:
            logs = resolve_logs([str(sweep.store / job.pair)], sweep.plan.reading)
            runs = [logs.steps(side) for side in SIDES]
        except ReplayError as exc:
            raise BandError(f"sweep {sweep.id}, {job.name}: {exc}") from None
        groups.setdefault(job.seed, []).extend(runs)
    if not any(len(runs) >= 2 for runs in groups.values()):
        raise BandError(
            f"sweep {sweep.id} has no finished pair to measure a band on "
            "(run one seed several times: tuimon sweep --seeds 0 --repeat 5)"
        )
    return measure(groups, sweep.plan.select, source=sweep.id)


def measure(
    groups: dict[int, list[list[Step]]], select: MetricFilter | None = None, *, source: str = ""
) -> Band:
    """The band of runs grouped by seed (runs of one seed compared two by two)."""
    select = select or MetricFilter()
    widest: dict[str, tuple[float, float]] = {}
    steps = 0
    digests_differ = False
    for runs in groups.values():
        tables = [_table(run, select) for run in runs]
        names = dict.fromkeys(name for values, _ in tables for name in values)
        for name in names:
            seen = [values.get(name, {}) for values, _ in tables]
            for x, y in combinations(seen, 2):
                shared = [s for s in x if s in y]
                if not shared:
                    continue
                steps = max(steps, len(shared))
                a = np.fromiter((x[s] for s in shared), float, len(shared))
                b = np.fromiter((y[s] for s in shared), float, len(shared))
                _, absd, rel, _ = diff_arrays(a, b, ulps=False)
                keep = np.isfinite(absd) & np.isfinite(rel)
                top = (float(absd[keep].max()), float(rel[keep].max())) if keep.any() else (0, 0)
                old = widest.get(name, (0.0, 0.0))
                widest[name] = (max(old[0], top[0]), max(old[1], top[1]))
        for (_, dx), (_, dy) in combinations(tables, 2):
            digests_differ = digests_differ or any(dy.get(s, d) != d for s, d in dx.items())
    seeds = sorted(groups)
    count = sum(len(r) for r in groups.values())
    return Band(widest, source, count, seeds, steps, digests_differ)


def _table(
    run: list[Step], select: MetricFilter
) -> tuple[dict[str, dict[int, float]], dict[int, object]]:
    """One run's judged values, name -> step -> value (a step's first record), and its
    parameter digests by step."""
    values: dict[str, dict[int, float]] = {}
    digests: dict[int, object] = {}
    for record in run:
        for name, value in record.metrics.items():
            if select.judged(name):
                values.setdefault(name, {}).setdefault(record.step, float(value))
        if record.digest or record.digests:
            digests.setdefault(record.step, (record.digest, tuple(sorted(record.digests.items()))))
    return values, digests
