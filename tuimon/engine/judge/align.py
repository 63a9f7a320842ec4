"""Aligning two step logs: records of both runs matched step by step, judged, and counted.

The live `PairAligner` matches records as they come (`feed_batch`, one tick at a time) and
judges the matches column-wise (`tuimon.engine.judge.columns`), a few rows in plain Python
floats; `Tally` adds up what the judged blocks say, and `PairAligner.summary` turns it into a
`Summary` (`tuimon.engine.judge.verdict`). Whole logs go through the same aligner in one
batch per side (`compare_steps`), or block by block without building records
(`tuimon.engine.judge.matcher.ColumnMatcher`, `tuimon compare`).

Records of one step are matched by occurrence: the k-th record of step s on one side with the
k-th of step s on the other (a key logged twice with other values is compared in order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuimon.engine.judge.band import Band
from tuimon.engine.judge.columns import (
    Block,
    Columns,
    MetricFilter,
    Rows,
    aligned_steps,
    judge_block,
    judge_rows,
    sparse,
)
from tuimon.engine.judge.step_counts import StepCounts
from tuimon.engine.judge.text_judge import TextJudge
from tuimon.engine.judge.verdict import (
    DIVERGED,
    INCOMPLETE,
    NO_STEP,
    Summary,
    unmatched_reason,
    verdict,
)
from tuimon.readers.account import NOTE, Account
from tuimon.readers.text import LEVEL, LEVELS_NOTE
from tuimon.steplog import CUT_TAIL, IN_RECORD, UNREADABLE, End, Header, Step, Text
from tuimon.store import SIDES, other_side
from tuimon.store.aligned import AlignedStep

_FIRST_UNREADABLE = 5

SMALL_BLOCK = 32
"""Matched steps up to which a tick's block is judged in plain Python floats (`judge_rows`):
numpy's cost per call outweighs its gain per value on a few steps. The results are the
same either way (a property test compares the two judges)."""


@dataclass
class Tally:
    """What judged blocks add up to; blocks may come in any order (firsts are least steps)."""

    tolerance: float = 0.0
    steps_compared: int = 0
    steps_equal: int = 0
    values_compared: int = 0
    steps_without_values: int = 0
    beyond: bool = False
    first_divergent: tuple[int, int] | None = None
    first_divergent_metrics: list[str] = field(default_factory=list)
    first_digest: tuple[int, int] | None = None
    first_tensor: tuple[int, int] | None = None
    first_tensors: tuple[str, ...] = ()
    first_tensors_among: int = 0
    """Tensors both sides digested at the step where the first tensors parted."""
    max_divergence: float = 0.0
    max_step: tuple[int, int] | None = None
    metric_max: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    digests_not_comparable: int = 0
    band: Band | None = None
    """`--tolerance-from`: a band per metric instead of `tolerance` (`tuimon.engine.judge.band`)."""
    first_beyond: tuple[int, int] | None = None
    beyond_at: dict[str, Any] | None = None
    """Where the pair first went beyond its tolerance (or band): `Summary.beyond`."""
    one_sided: int = 0
    """Values one side has at an aligned step and the other lacks (each a difference)."""
    first_one_sided: list[str] = field(default_factory=list)
    """Of the first divergent step's metrics, those with a value on one side only."""
    shared_beyond: bool = False
    """A difference beyond tolerance other than values on one side only was seen."""

    def add(self, block: Block) -> None:
        """Count one judged block."""
        n = len(block.equal)
        if not n:
            return
        steps, occ = block.a.steps, block.a.occ
        order = None if _rising(steps) else np.lexsort((occ, steps))  # None: in row order

        def least(mask: np.ndarray) -> int | None:  # the row of the least key where mask
            ordered = mask if order is None else mask[order]
            i = int(ordered.argmax())
            if not ordered[i]:
                return None
            return i if order is None else int(order[i])

        self.steps_compared += n
        self.steps_equal += int(block.equal.sum())
        self.values_compared += int(block.values.sum())
        lonely = block.values == 0
        if block.empty is not None:
            lonely &= ~block.empty  # a row with nothing on either side lacks nothing
        self.steps_without_values += int(lonely.sum())
        if block.digests_apart is not None:
            self.digests_not_comparable += int(block.digests_apart.sum())
        if block.one_sided is not None:
            self.one_sided += int(block.one_sided.sum())
        differ = ~block.equal
        div = block.divergence
        outside = self._outside(block)
        if outside is None:
            outside = div > self.tolerance
            if self.tolerance == 0:
                outside |= differ
        if outside.any():
            self.beyond = True
            if (i := least(outside)) is not None and _before(
                (k := _key(steps, occ, i)), self.first_beyond
            ):
                self.first_beyond, self.beyond_at = k, self._beyond_in_block(block, i)
            shared = outside if block.lone_only is None else outside & ~block.lone_only
            self.shared_beyond = self.shared_beyond or bool(shared.any())
        if (i := least(differ)) is not None and _before(
            (k := _key(steps, occ, i)), self.first_divergent
        ):
            self.first_divergent = k
            self.first_divergent_metrics = block.metrics.parted(i)
            self.first_one_sided = block.lone(i)
        digest_differs = block.digest_equal == False  # noqa: E712 - elementwise on objects
        if (i := least(digest_differs)) is not None and _before(
            (k := _key(steps, occ, i)), self.first_digest
        ):
            self.first_digest = k
        if block.tensors is not None:
            some = np.fromiter((bool(t) for t in block.tensors), bool, n)
            if (i := least(some)) is not None and _before(
                (k := _key(steps, occ, i)), self.first_tensor
            ):
                self.first_tensor, self.first_tensors = k, block.tensors[i]
                da, db = block.a.digests, block.b.digests
                self.first_tensors_among = _shared(da[i], db[i]) if da and db else 0
        top = float(div.max())
        if top > 0 and top >= self.max_divergence:
            i = least(div == top)
            assert i is not None
            k = _key(steps, occ, i)
            if top > self.max_divergence or _before(k, self.max_step):
                self.max_divergence, self.max_step = top, k
        if block.metrics:
            self._metric_max(block, order)

    def _outside(self, block: Block) -> np.ndarray | None:
        """Rows with a value outside the band (None without a band: the tolerance decides)."""
        if self.band is None:
            return None
        rows = np.zeros(len(block.equal), bool)
        for names, (both, eq, absd, rel, _) in block.metrics.groups:
            rows |= self.band.outside_rows(names, self.tolerance, both, eq, absd, rel).any(axis=0)
        return rows

    def _beyond_in_block(self, block: Block, i: int) -> dict[str, Any]:
        """The metric of row `i` furthest beyond the tolerance (or band), as `beyond`."""
        found: list[tuple[str, float, float]] = []
        for names, (both, eq, absd, rel, _) in block.metrics.groups:
            col = (both[:, i] & ~eq[:, i]).copy()
            if self.band is not None:
                col &= self.band.outside_rows(
                    names, self.tolerance, both[:, i : i + 1], eq[:, i : i + 1],
                    absd[:, i : i + 1], rel[:, i : i + 1],
                )[:, 0]  # fmt: skip
            elif self.tolerance > 0:
                col &= ~(rel[:, i] <= self.tolerance)
            for j in np.flatnonzero(col).tolist():
                found.append((names[j], float(absd[j, i]), float(rel[j, i])))
        if found:
            name, d_abs, d_rel = _widest(found)
            va, vb = (_value_at(side, name, i) for side in (block.a, block.b))
            return self._beyond(int(block.a.steps[i]), name, va, vb, d_abs, d_rel)
        tensors = block.tensors[i] if block.tensors is not None else ()
        return self._beyond(int(block.a.steps[i]), None, tensors=tensors)

    def _beyond(
        self,
        step: int,
        name: str | None,
        a: float | None = None,
        b: float | None = None,
        absd: float | None = None,
        rel: float | None = None,
        tensors: Sequence[str] = (),
    ) -> dict[str, Any]:
        """`Summary.beyond`: the step, the metric (None: digests only), both values, their
        absolute and relative difference, and the limit they went past."""
        out: dict[str, Any] = {
            "step": step,
            "metric": name,
            "a": a,
            "b": b,
            "abs": absd,
            "rel": rel,
            "tolerance": self.tolerance,
        }
        if self.band is not None and name is not None:
            got = self.band.limit(name)
            out["band"] = {"abs": got[0], "rel": got[1]} if got else None
        if tensors:
            out["tensors"] = list(tensors)
        return out

    def _metric_max(self, block: Block, order: np.ndarray | None) -> None:
        """Each metric's largest relative difference (the least step among ties), all metrics
        of the block at once (`order`: the rows by step, None when they rise)."""
        if block.equal.all() and self._kept(block):
            return
        for names, (both, _, absd, rel, _) in block.metrics.groups:
            masked = np.where(both, rel, -1.0)
            if order is not None:
                masked = masked[:, order]
            tops = masked.max(axis=1)
            rows = (masked == tops[:, None]).argmax(axis=1)
            if order is not None:
                rows = order[rows]
            steps = block.a.steps[rows].tolist()
            at = zip(names, tops.tolist(), rows.tolist(), steps, strict=True)
            for i, (name, top, row, step) in enumerate(at):
                cur = self.metric_max.get(name)
                if cur is None or top > cur["rel"] or (top == cur["rel"] and step < cur["step"]):
                    self.metric_max[name] = {"rel": top, "abs": float(absd[i, row]), "step": step}

    def _kept(self, block: Block) -> bool:
        """Whether a block whose rows are all equal leaves every metric's maximum as it is:
        each of its metrics already has one, greater than 0 or at a step below the block's
        (the block could only give 0 at one of its steps)."""
        least = int(block.a.steps.min())
        for names, _ in block.metrics.groups:
            for name in names:
                cur = self.metric_max.get(name)
                if cur is None or (cur["rel"] == 0 and (cur["step"] or 0) > least):
                    return False
        return True

    def add_rows(self, rows: Rows) -> None:
        """Count a small block judged row by row (`judge_rows`): the same counts and firsts
        as `add` gives for the same rows as a `Block`."""
        steps = rows.steps
        if not steps:
            return
        order = sorted(steps, key=_row_key) if len(steps) > 1 else steps
        at = {id(row): i for i, row in enumerate(steps)}
        self.steps_compared += len(steps)
        self.steps_equal += sum(rows.equal)
        self.values_compared += sum(rows.values)
        self.steps_without_values += sum(
            v == 0 and not e for v, e in zip(rows.values, rows.empty, strict=True)
        )
        self.digests_not_comparable += rows.apart
        self.one_sided += rows.one_sided
        tolerance = self.tolerance
        top, top_row = 0.0, None
        band = self.band
        for row in order:
            key = _row_key(row)
            i = at[id(row)]
            equal = rows.equal[i]
            if not equal and _before(key, self.first_divergent):
                self.first_divergent = key
                self.first_divergent_metrics = [n for n, d in row.diffs.items() if not d.equal]
                self.first_one_sided = [
                    n
                    for n in self.first_divergent_metrics
                    if (n in row.a.metrics) != (n in row.b.metrics)
                ]
            if row.digest_equal is False and _before(key, self.first_digest):
                self.first_digest = key
            if row.tensors and _before(key, self.first_tensor):
                self.first_tensor, self.first_tensors = key, row.tensors
                self.first_tensors_among = _shared(row.a.digests, row.b.digests)
            out: list[str] = []
            if band is not None and not equal:  # an equal row is inside any band
                out = [
                    n for n, d in row.diffs.items()
                    if not d.equal and band.outside(n, tolerance, d.abs, d.rel)
                ]  # fmt: skip
                beyond = bool(out)
            elif band is None:
                beyond = row.divergence > tolerance or (tolerance == 0 and not equal)
                if beyond and _before(key, self.first_beyond):
                    out = [
                        n for n, d in row.diffs.items()
                        if not d.equal and (tolerance == 0 or not d.rel <= tolerance)
                    ]  # fmt: skip
            else:
                beyond = False
            if beyond:
                self.beyond = True
                self.shared_beyond = self.shared_beyond or not rows.lone_only[i]
                if _before(key, self.first_beyond):
                    self.first_beyond = key
                    if out:
                        name = _widest([(n, row.diffs[n].abs, row.diffs[n].rel) for n in out])[0]
                        d = row.diffs[name]
                        va = d.a if name in row.a.metrics else None  # one side only: no value
                        vb = d.b if name in row.b.metrics else None
                        self.beyond_at = self._beyond(row.step, name, va, vb, d.abs, d.rel)
                    else:
                        self.beyond_at = self._beyond(row.step, None, tensors=row.tensors)
            if row.divergence > top:
                top, top_row = row.divergence, row
        if top_row is not None and top >= self.max_divergence:
            key = _row_key(top_row)
            if top > self.max_divergence or _before(key, self.max_step):
                self.max_divergence, self.max_step = top, key
        for name in rows.names:
            self._metric_top(name, order)

    def _metric_top(self, name: str, order: Sequence[AlignedStep]) -> None:
        """One metric's largest relative difference over ordered rows (`_metric_max`)."""
        best: tuple[float, float, int] | None = None
        for row in order:
            d = row.diffs.get(name)
            if d is not None and (best is None or d.rel > best[0]):
                best = (d.rel, d.abs, row.step)
        if best is None:
            return
        top, absd, step = best
        cur: dict[str, Any] | None = self.metric_max.get(name)
        if cur is None or top > cur["rel"] or (top == cur["rel"] and step < cur["step"]):
            self.metric_max[name] = {"rel": top, "abs": absd, "step": step}


def _value_at(side: Columns, name: str, i: int) -> float | None:
    """One side's value of `name` at row `i`; None where that side has none (a value on one
    side only)."""
    column, present = side.values.get(name), side.present.get(name)
    if column is None or (present is not None and not present[i]):
        return None
    return float(column[i])


def _widest(found: Sequence[tuple[str, float, float]]) -> tuple[str, float, float]:
    """Of (name, abs, rel) beyond the limit at one step, the largest relative difference
    (the least name among ties): the same whichever order a judge met them in."""
    return min(found, key=lambda f: (-f[2], f[0]))


def _rising(steps: np.ndarray) -> bool:
    """Whether steps rise row by row (then their rows are in the order of their keys)."""
    return len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())


def _row_key(row: AlignedStep) -> tuple[int, int]:
    return row.step, row.occurrence


def _key(steps: np.ndarray, occ: np.ndarray, i: int) -> tuple[int, int]:
    return int(steps[i]), int(occ[i])


def _before(key: tuple[int, int], current: tuple[int, int] | None) -> bool:
    return current is None or key < current


def _shared(da: dict[str, str], db: dict[str, str]) -> int:
    """How many tensors both sides digested in a row (the first tensors parted before the rest
    only when fewer parted)."""
    return len(da.keys() & db.keys())


# --- the aligner -----------------------------------------------------------------------------


class PairAligner:
    """Aligns step records from two runs fed in any interleaving; judges the pair so far."""

    def __init__(
        self, tolerance: float = 0.0, select: MetricFilter | None = None, band: Band | None = None
    ) -> None:
        if not tolerance >= 0:
            raise ValueError("tolerance must be >= 0")
        self.tolerance = tolerance
        self.select = select or MetricFilter()
        self.band = band
        """`--tolerance-from`: a bitwise band (repeats bitwise equal) judges as tolerance 0."""
        self.tally = Tally(tolerance, band=None if band is None or band.exact else band)
        self._pending: dict[str, dict[tuple[int, int], Step]] = {"a": {}, "b": {}}
        self._count = {"a": StepCounts(), "b": StepCounts()}
        self.top = {"a": -1, "b": -1}
        self.repeats = {"a": 0, "b": 0}
        self.names: dict[str, set[str]] = {"a": set(), "b": set()}
        """Metric names each side has logged (judged ones)."""
        self.ignored: set[str] = set()
        self.unreadable = 0
        self.unreadable_first: list[str] = []
        self.unmatched_extra = {"a": 0, "b": 0}
        """Steps one side only has, counted by a whole-log matcher (`ColumnMatcher`)."""
        self.accounts = {"a": Account(), "b": Account()}
        """What every record of each side was (steps, metadata, text, skipped)."""
        self.text = TextJudge(tolerance)
        """Text lines compared by position between step records (`TextJudge`)."""
        self.last_step: dict[str, int | None] = {"a": None, "b": None}
        self.last_divergence: float | None = None
        """The divergence of the last step aligned (`feed_batch`)."""
        """The step of each side's latest step record (what its next text line follows)."""

    # -- feeding --

    def feed(self, side: str, record: Step) -> AlignedStep | None:
        """Add one step record of `side`; return the aligned step when both now have it."""
        got = self.feed_batch(side, [record])
        return got[0] if got else None

    def feed_batch(
        self, side: str, records: Iterable[Step], *, aligned: bool = True
    ) -> list[AlignedStep]:
        """Add a tick's records of `side` (in order); return the steps that now align, judged
        together (column-wise), in the order they were fed. `aligned=False`: judged and
        counted the same, but a block of them is not made into `AlignedStep`s (none returned:
        nobody shows them; `last_divergence` tells the last one's)."""
        other = other_side(side)
        mine, theirs = self._pending[side], self._pending[other]
        count = self._count[side].add
        pairs: list[tuple[Step, Step, int]] = []
        for record in records:
            occ = count(record.step)
            if occ:
                self.repeats[side] += 1
            self.note(side, record)
            key = (record.step, occ)
            match = theirs.pop(key, None)
            if match is None:
                mine[key] = record
            else:
                pairs.append((record, match, occ) if side == "a" else (match, record, occ))
        if not pairs:
            return []
        wide = len(pairs) > SMALL_BLOCK and sparse([p[0] for p in pairs] + [p[1] for p in pairs])
        if len(pairs) <= SMALL_BLOCK or wide:  # few rows, or many names a row or two each
            rows = judge_rows(pairs, self.select, per_row=wide)
            self.tally.add_rows(rows)
            self.last_divergence = rows.steps[-1].divergence
            return rows.steps
        occs = [p[2] for p in pairs]
        block = self.judge(
            Columns.of_steps([p[0] for p in pairs], occs, self.select),
            Columns.of_steps([p[1] for p in pairs], occs, self.select),
            ulps=aligned,
        )
        self.last_divergence = float(block.divergence[-1])
        return aligned_steps(block) if aligned else []

    def note(self, side: str, record: Step) -> None:
        """What a record tells besides its match: its names, clocks, unreadable values."""
        self.accounts[side].steps += 1
        self.last_step[side] = record.step
        if record.step > self.top[side]:
            self.top[side] = record.step
        names = self.names[side]
        for name in record.metrics:
            if name not in names:
                if self.select.judged(name):
                    names.add(name)
                else:
                    self.ignored.add(name)
        if record.clocks:
            self.ignored.update(record.clocks)
        if record.unreadable:
            self.note_unreadable(side, record.step, record.unreadable)

    def note_other(
        self, side: str, record: Header | End | Text, after: tuple[int, int | None] | None = None
    ) -> None:
        """A record of `side` that is not a step: counted in its account; a text line is
        judged against its counterpart (`TextJudge`). `after`: the step records before it and
        the last one's step, when the side's steps are noted after its text (a live batch)."""
        account = self.accounts[side]
        account.add(record)
        if (
            isinstance(record, Text)
            and not record.text.startswith(NOTE)
            and record.skipped not in (CUT_TAIL, IN_RECORD)  # a line that may be cut: missing
            and record.text.strip()  # a blank line says nothing
        ):
            count, step = after if after is not None else (account.steps, self.last_step[side])
            self.text.add(side, record.text, count, step)

    def note_unreadable(self, side: str, step: int, values: Sequence[str]) -> None:
        """Values of a record that do not fit float64/int64: counted and named, not judged."""
        self.unreadable += len(values)
        for value in values:
            if len(self.unreadable_first) < _FIRST_UNREADABLE:
                self.unreadable_first.append(f"{side} step {step}: {value[:80]}")

    def judge(self, a: Columns, b: Columns, *, ulps: bool = True) -> Block:
        """Judge matched columns and count them in the tally (`judge_block`)."""
        block = judge_block(a, b, ulps=ulps)
        self.tally.add(block)
        return block

    # -- judging --

    def unmatched(self) -> tuple[int, int]:
        """Steps only one side has logged so far."""
        a, b = (len(self._pending[s]) + self.unmatched_extra[s] for s in SIDES)
        return a, b

    def _held_unmatched(self) -> tuple[int, int]:
        """Steps only one side has logged that the other side has already gone past (what
        counts against a pair still running)."""
        a = sum(step < self.top["b"] for step, _ in self._pending["a"])
        b = sum(step < self.top["a"] for step, _ in self._pending["b"])
        return a, b

    def summary(
        self,
        complete: bool = True,
        reason: str | None = None,
        *,
        running: bool = False,
        interrupted: bool = False,
    ) -> Summary:
        """The pair judged on what has been aligned (`PRECEDENCE`); `complete=False` (a run
        failed, was cut short or interrupted) makes it INCOMPLETE with `reason`, unless it
        already DIVERGED.

        `running=True` judges a pair still under way: steps one side has not reached yet are
        not held against it.
        """
        ua, ub = self._held_unmatched() if running else self.unmatched()
        t = self.tally
        ok, why = self._completeness(complete, reason, ua, ub, running=running)
        fd = t.first_divergent
        metrics = list(t.first_divergent_metrics) if fd else []
        first = fd[0] if fd else None
        text = self.text
        if text.first is not None and (first is None or _text_first(text.first.step, first)):
            first = text.first.step
            metrics = [f"text line {text.first.line_a}"]
        limit = math.inf if t.band is not None else self.tolerance  # a band: `t.beyond` says
        judged = verdict(t.steps_compared + text.compared,
                         t.steps_equal + text.compared - text.differ, t.max_divergence,
                         limit, ok, beyond=t.beyond or text.beyond)  # fmt: skip
        if judged == DIVERGED and self._gaps_only(complete):
            judged = INCOMPLETE  # values on one side only where nothing is shared, or lost
        levels = any(LEVELS_NOTE in a.notes for a in self.accounts.values())
        only = {s: sorted(self.names[s] - self.names["b" if s == "a" else "a"]) for s in SIDES}
        return Summary(
            verdict=judged,
            tolerance=self.tolerance,
            steps_compared=t.steps_compared,
            steps_equal=t.steps_equal,
            unmatched_a=ua,
            unmatched_b=ub,
            first_divergent_step=first,
            first_divergent_metrics=metrics,
            first_digest_step=t.first_digest[0] if t.first_digest else None,
            first_tensors=list(t.first_tensors),
            first_tensor_step=t.first_tensor[0] if t.first_tensor else None,
            first_tensors_among=t.first_tensors_among,
            max_divergence=t.max_divergence,
            max_divergence_step=t.max_step[0] if t.max_step else None,
            metric_max=dict(t.metric_max),
            complete=ok,
            reason=why,
            values_compared=t.values_compared,
            steps_without_values=t.steps_without_values,
            metrics_only_a=only["a"],
            metrics_only_b=only["b"],
            repeats_a=self.repeats["a"],
            repeats_b=self.repeats["b"],
            ignored=sorted(self.ignored),
            select=self.select.to_dict(),
            unreadable=self.unreadable,
            unreadable_first=list(self.unreadable_first),
            interrupted=interrupted,
            digests_not_comparable=t.digests_not_comparable,
            values_one_sided=t.one_sided,
            first_one_sided=[m for m in t.first_one_sided if m in metrics],
            accounts={s: self.accounts[s].to_dict() for s in SIDES},
            text=text.to_dict(),
            step_levels=levels,
            beyond=t.beyond_at,
            band=self.band.to_dict() if self.band is not None else None,
            first_divergent_at=(
                {"epoch": first // LEVEL, "iteration": first % LEVEL}
                if levels and first is not None and first >= LEVEL
                else None
            ),
        )  # fmt: skip

    def _gaps_only(self, complete: bool) -> bool:
        """Whether every difference seen is a value on one side only, and those are gaps,
        not differences: the two logs share no metric (nothing was compared), or a log was
        not read whole (its run cut short or failed, a record damaged or cut: what it lacks
        may be what was lost)."""
        t = self.tally
        if not t.beyond or t.shared_beyond or self.text.beyond or not t.one_sided:
            return False
        lost = not complete or any(
            a.unjudged or a.skipped.get(UNREADABLE) or a.skipped.get(CUT_TAIL)
            for a in self.accounts.values()
        )
        return lost or t.values_compared == t.one_sided

    def _completeness(
        self, complete: bool, reason: str | None, ua: int, ub: int, *, running: bool = False
    ) -> tuple[bool, str | None]:
        """Whether the pair counts as complete, and why not: `reason` (or that the pair did not
        finish), then what its steps and lines lack (None when nothing is missing)."""
        cover = self._coverage_reasons(ua, ub)
        for side in SIDES:
            self.text.steps_seen(side, self.accounts[side].steps)
        ta, tb = self.text.unmatched(running=running)
        if ta or tb:
            cover.append(
                f"text lines on one side only: a {ta}, b {tb} "
                f"(first: {self.text.first_unmatched()})"
            )
        why = [reason] if reason else [] if complete else ["the pair did not finish"]
        why += [c for c in cover if not (why and c == NO_STEP)]  # the headline says it
        return complete and not cover, "; ".join(why) or None

    def _coverage_reasons(self, ua: int, ub: int) -> list[str]:
        t = self.tally
        out = []
        if t.steps_compared == 0 and not self.text.compared:
            out.append(NO_STEP)
        elif t.steps_compared == 0:
            pass  # a log of text lines: judged line by line (`TextJudge`)
        elif t.steps_without_values == t.steps_compared or t.values_compared == t.one_sided:
            out.append("the two logs share no metric")
        elif t.values_compared == 0 and not self.text.compared:
            out.append("the two logs share no judged value (clocks, or all ignored)")
        elif t.steps_without_values:
            out.append(
                f"{t.steps_without_values} of {t.steps_compared} aligned steps share no value"
            )
        if ua or ub:
            out.append(unmatched_reason(ua, ub))
        if self.unreadable:
            out.append(
                f"{self.unreadable} values do not fit a float64 or an int64 "
                f"(first: {self.unreadable_first[0]})"
            )
        out += [p for s in SIDES if (p := self.accounts[s].problem(s))]
        return out


def _text_first(text_step: int | None, step: int) -> bool:
    """Whether a text line after `text_step` (None: before any step) comes before `step`."""
    return text_step is None or text_step < step


def compare_steps(
    a: Sequence[Step],
    b: Sequence[Step],
    tolerance: float = 0.0,
    select: MetricFilter | None = None,
    band: Band | None = None,
) -> tuple[list[AlignedStep], PairAligner]:
    """Align two whole logs at once: each side goes through the aligner in one batch (judged
    column-wise), exactly as a live pair fed in any interleaving. Rows of one step are merged
    by the readers (`tuimon.readers.rows_to_steps`); what reaches here as several records of
    one step is compared occurrence by occurrence. Aligned steps come in step order."""
    aligner = PairAligner(tolerance, select, band)
    aligner.feed_batch("a", a)
    aligned = aligner.feed_batch("b", b)
    aligned.sort(key=lambda s: (s.step, s.occurrence))
    return aligned, aligner
