"""The end of a run, as `tuimon spread` and `tuimon plot` read it: one saved pair's two sides.

A pair directory is read only through the one loader of a saved pair (`SavedPair`), so a
compressed log (`a.jsonl.xz`) reads as any other. Per side: the metric series, how far it ran
(and whether it was cut short), its W_E and key frequencies. Per pair: the first divergent
step and the divergence per step, judged by the same judge as `tuimon compare`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tuimon.engine.judge.emb_check import load as load_npy
from tuimon.engine.sources.saved_pair import SavedPair, resolve_logs
from tuimon.errors import TuimonError
from tuimon.freqs import FreqError, key_frequencies
from tuimon.steplog import Header, Step
from tuimon.store import SIDES, PairDoc, StoreError, pair_file

FREQ_PREFIX = "key_freqs."
"""Logged key frequencies: `key_freqs.1` .. `key_freqs.5` (rank 1 first)."""


class SpreadError(TuimonError):
    """Pairs that cannot be put side by side (one line for the user; exit 2)."""


@dataclass
class Series:
    """One metric of one side: the steps it was logged at and its values."""

    steps: np.ndarray
    values: np.ndarray

    def final(self) -> float | None:
        """The last finite value."""
        finite = np.flatnonzero(np.isfinite(self.values))
        return float(self.values[finite[-1]]) if finite.size else None

    def reached(self, threshold: float) -> int | None:
        """The first step whose value is at least `threshold` (None: never)."""
        hits = np.flatnonzero(self.values >= threshold)
        return int(self.steps[hits[0]]) if hits.size else None


@dataclass
class SideRun:
    """One side of a pair at the end of its run."""

    side: str
    device: str | None
    seed: int | None
    series: dict[str, Series]
    last_step: int | None
    planned: int | None
    cut: str | None
    """Why the side did not run to its end (None: it did)."""
    emb: np.ndarray | None = None
    emb_note: str | None = None
    """Why there is no W_E (None when there is one)."""
    freqs: tuple[int, ...] | None = None
    freq_source: str | None = None
    """`W_E` (computed from the saved W_E) or `log` (the last logged key_freqs)."""
    p: int | None = None
    """The modulus, when the header gives it (which axis of W_E holds the residues)."""

    def final(self, metric: str) -> float | None:
        """The last finite value of `metric` (None when it was never logged)."""
        s = self.series.get(metric)
        return s.final() if s is not None else None

    def reached(self, metric: str, threshold: float) -> int | None:
        """The first step at which `metric` is at least `threshold`."""
        s = self.series.get(metric)
        return s.reached(threshold) if s is not None else None


@dataclass
class PairRun:
    """A saved pair: its two sides, and how and where they parted."""

    path: Path
    name: str
    seed: int | None
    sides: dict[str, SideRun]
    verdict: str
    first_divergent: int | None
    first_metrics: list[str] = field(default_factory=list)
    first_tensors: list[str] = field(default_factory=list)
    divergence: Series | None = None
    """The divergence of every aligned step (the judge's largest relative difference)."""
    differs: list[str] = field(default_factory=list)
    """What pair.json says differs between the sides (environment, hyperparameters)."""


def _series(steps: list[Step]) -> dict[str, Series]:
    """Each metric's logged steps and values (non-numbers skipped)."""
    cols: dict[str, tuple[list[int], list[float]]] = {}
    for s in steps:
        for name, value in s.metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                xs, ys = cols.setdefault(name, ([], []))
                xs.append(s.step)
                ys.append(float(value))
    return {
        k: Series(np.asarray(x, np.int64), np.asarray(y, np.float64)) for k, (x, y) in cols.items()
    }


def _cut(pair: SavedPair, side: str, last: int | None) -> str | None:
    """Why a side did not run to its end: how the pair ended (`SavedPair.ending`), then
    whether its log reached the steps its header planned."""
    header, end = pair.header(side), pair.end(side)
    if end is not None and end.status != "ok" and pair.doc.run(side).status in (None, "finished"):
        return f"run {side} ended with status {end.status}"
    if (status := pair.ending.exits[side][1]) != "finished":
        return f"run {side} {status}" + (f" after step {last}" if last is not None else "")
    planned = _planned(header)
    if planned is not None and (last is None or last + 1 < planned):
        return f"run {side} stopped at step {last} of {planned}"
    if end is None and header is not None and header.format.startswith("tuimon"):
        return f"run {side}'s log has no end record (cut short?)"
    return None


def _planned(header: Header | None) -> int | None:
    steps = header.hyper.get("steps") if header is not None else None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def _emb(pair: SavedPair, side: str) -> tuple[np.ndarray | None, str | None]:
    """The side's saved W_E, or why there is none."""
    path = pair.pair_dir or pair.a.parent
    name = pair.doc.files.get(f"emb_{side}") or f"emb-{side}.npy"
    try:
        return load_npy(pair_file(path, name)), None
    except TuimonError as exc:  # StoreError (missing, not a file), EmbCheckError (not W_E)
        return None, str(exc).removeprefix(f"{path}: ")


def _freqs(run: SideRun, p: int | None) -> None:
    """Key frequencies from W_E (the reference's rule), else the last logged ones."""
    if run.emb is not None:
        try:
            kf = key_frequencies(run.emb, p=p)
            run.freqs, run.freq_source = kf.freqs, "W_E"
            return
        except FreqError:
            pass
    logged = sorted(
        (int(k.removeprefix(FREQ_PREFIX)), s.final())
        for k, s in run.series.items()
        if k.startswith(FREQ_PREFIX) and k.removeprefix(FREQ_PREFIX).isdigit()
    )
    values = [v for _, v in logged if v is not None and math.isfinite(v)]
    if values:
        run.freqs, run.freq_source = tuple(int(v) for v in values), "log"


def _side(pair: SavedPair, side: str) -> SideRun:
    doc, header, steps = pair.doc, pair.header(side), pair.steps(side)
    last = max((s.step for s in steps), default=None)
    hyper = header.hyper if header is not None else {}
    seed = doc.seed if doc.seed is not None else hyper.get("seed")
    run = SideRun(
        side=side,
        device=doc.run(side).device or (doc.devices[SIDES.index(side)] if doc.devices else None),
        seed=seed if isinstance(seed, int) else None,
        series=_series(steps),
        last_step=last,
        planned=_planned(header),
        cut=_cut(pair, side, last),
    )
    p = hyper.get("p")
    run.p = p if isinstance(p, int) and not isinstance(p, bool) else None
    run.emb, run.emb_note = _emb(pair, side)
    _freqs(run, run.p)
    return run


def load_pair(path: Path, name: str | None = None) -> PairRun:
    """A saved pair directory at the end of its run; SpreadError when it cannot be read."""
    try:
        pair = resolve_logs([str(path)])
        sides = {side: _side(pair, side) for side in SIDES}
    except (TuimonError, StoreError) as exc:
        raise SpreadError(str(exc)) from None
    for side, run in sides.items():
        if run.last_step is None:
            raise SpreadError(f"{path}: side {side} logged no steps")
    aligned, aligner = pair.judged
    cuts = [r.cut for r in sides.values() if r.cut]
    summary = aligner.summary(complete=not cuts, reason="; ".join(cuts) or None)
    div = Series(
        np.fromiter((s.step for s in aligned), np.int64, len(aligned)),
        np.fromiter((s.divergence for s in aligned), np.float64, len(aligned)),
    )
    return PairRun(
        path=path,
        name=name or path.name,
        seed=sides["a"].seed if sides["a"].seed is not None else sides["b"].seed,
        sides=sides,
        verdict=summary.verdict,
        first_divergent=summary.first_divergent_step,
        first_metrics=list(summary.first_divergent_metrics),
        first_tensors=list(summary.first_tensors),
        divergence=div,
        differs=_differs(pair.doc),
    )


def _differs(doc: PairDoc) -> list[str]:
    """`gather view/contiguous`: what pair.json says differs between the sides."""
    out = []
    for diff in (doc.hyper_diff, doc.env_diff):
        for key, values in diff.items():
            shown = "/".join(map(str, values)) if isinstance(values, list) else str(values)
            out.append(f"{key} {shown}")
    return out


def pair_inputs(refs: list[str], store: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """The pair directories named (each once), or those of one sweep record (a path or an id
    in `store`), with a name each; and the sweep's jobs that have no pair (why not)."""
    if len(refs) == 1 and not Path(refs[0]).is_dir():
        return _sweep_pairs(refs[0], store)
    out: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for ref in refs:
        path = Path(ref)
        if not path.is_dir():
            raise SpreadError(f"{ref}: not a pair directory (give pair directories or one sweep)")
        if path.resolve() in seen:
            raise SpreadError(f"{ref}: given twice")
        seen.add(path.resolve())
        out.append((path, path.name or str(path)))
    return out, []


def _sweep_pairs(ref: str, store: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    from tuimon.engine.runs.sweep import Sweep, SweepError

    try:
        sweep = Sweep.load(store, ref)
    except SweepError as exc:
        if not os.path.lexists(ref) and str(exc).startswith("no sweep"):  # a mistyped pair?
            raise SpreadError(
                f"{ref}: no such pair directory, nor a sweep of that id in {store}"
                " (give pair directories or one sweep)"
            ) from None
        if Path(ref).is_file() and str(exc).endswith(("is not valid JSON", "sweep record")):
            raise SpreadError(  # a log given where a pair is meant (`plot run.jsonl`)
                f"{ref}: a file that is no sweep record: give a pair directory, several, or one "
                "sweep (its record or id); a log is read by tuimon read, two by tuimon compare"
            ) from None
        raise SpreadError(str(exc)) from None
    pairs, missing = [], []
    for i, job in enumerate(sweep.jobs):
        path = sweep.pair_path(i)
        if path is None or not path.is_dir():
            missing.append(f"{job.name}: {job.status}, no pair directory")
        else:
            pairs.append((path, job.name))
    return pairs, missing
