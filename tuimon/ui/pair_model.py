"""What the pair view shows, kept compact and bounded; built from batches or a saved pair.

`PairModel` and `LineBuffer` never import textual (toolong's split): the screen feeds them and
draws what they hold. No `AlignedStep` is kept beyond the batch it came in, except what the
first divergent step says.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuimon.engine.judge import fingerprints
from tuimon.engine.judge.artifacts import lines as artifact_lines
from tuimon.engine.judge.verdict import Summary
from tuimon.engine.sources.session import Batch
from tuimon.engine.sources.side_state import SideState
from tuimon.report.wording import bytes_first, equal_phrase, line_parting, parting_line
from tuimon.steplog import End, Header, Record, Step, Text
from tuimon.store import SIDES, PairDoc
from tuimon.store.aligned import AlignedStep, MetricDiff
from tuimon.ui.series import BucketSeries, CurveSeries, levels
from tuimon.ui.text import clean

DIVERGENCE = "divergence"
"""The sparkline's default series: the largest relative difference over the metrics."""
PREFERRED = ("train_loss", "test_loss", "train_acc", "test_acc")
MAX_SERIES = 12
"""Metrics that get a sparkline series of their own (the first columns)."""
SPARK_BUCKETS = 200
CURVE_POINTS = 1024


@dataclass(frozen=True)
class FirstDivergence:
    """The first step where the runs differ, as much as the view needs of it."""

    step: int
    metrics: dict[str, tuple[float, float, float, int]]
    """Metrics that differ there: (a, b, rel, ulps)."""
    tensors: tuple[str, ...]
    digest_equal: bool | None
    divergence: float


@dataclass(frozen=True)
class EnvRow:
    """One key of the two runs' fingerprints."""

    key: str
    a: Any
    b: Any
    differs: bool
    """The two runs disagree on this key (`fingerprints.env_diff` decides)."""


def choose_columns(metrics: Iterable[str]) -> list[str]:
    """Columns of the step lines: the usual loss/accuracy first, then the rest as logged."""
    names = list(dict.fromkeys(metrics))
    return [n for n in PREFERRED if n in names] + [n for n in names if n not in PREFERRED]


def curve_metrics(columns: Sequence[str]) -> list[str]:
    """The two metrics the curves view plots: train and test loss, or the first columns."""
    losses = [c for c in columns if "loss" in c]
    return (losses or list(columns))[:2]


def env_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[EnvRow]:
    """Every key of two fingerprints: differing keys first, each group sorted."""
    return [EnvRow(*row) for row in fingerprints.env_rows(a, b)]


HARD_CAP = 10
"""Rows kept at most, in `max_lines`, while one side is far behind the other."""
PRELUDE = 64
"""Text lines of a side that has logged no step yet placed before the other side's steps (a
late file's header, a late run's start-up lines); later ones go to the end."""


def _in_place(kind: str, text: str) -> bool:
    """A side's line that stays beside its last step when the other side is ahead: its header
    and end records and tuimon's own words (a run stopped and restarted by `--resume-at`)."""
    return kind == "note" or (kind == "stderr" and text.startswith("tuimon: "))


class PairRows:
    """The last `max_lines` rows of both panes, aligned by step (one buffer, two views).

    A row is a step (each side shows its metrics for that step, a blank where it has not logged
    it) or text (a non-log stdout line, stderr, a header/end note) with a slot per side: a
    side's text fills the text row right after its own last row when that slot is free (else a
    new row at the end; a header/end note or tuimon's own line goes in a new row there, so a
    side that restarts behind the other shows it where it did), so the two sides' headers,
    notes and stderr lines sit side by side. Text is cleaned on entry.
    """

    def __init__(self, max_lines: int = 2000) -> None:
        self.max_lines = max_lines
        self.entries: deque[tuple[int | None, dict[str, tuple[str, str]]]] = deque()
        """(step, {}) for a step row; (None, {side: (kind, text)}) for a text row."""
        self.start = 0
        """Absolute index of the first row kept."""
        self.rows_of: dict[int, int] = {}
        """step -> absolute index of its row, for the steps still kept."""
        self.metrics: dict[str, dict[int, dict[str, float]]] = {}
        """side -> step -> metrics, for the steps still kept."""
        self.widest = 0
        """The widest text line ever added (cells, capped)."""
        self.gone = -1
        """The highest step whose row was dropped (a late side's line for it passes unseen)."""
        self._fill: dict[str, int] = {}
        self._prelude: dict[str, int] = {}
        """Text rows put before the other side's steps, per side (`PRELUDE`)."""
        self.running: set[str] = set()
        """Sides still logging (the view set it from the session): the view follows the one
        that is behind, so both panes show the steps they share."""
        self.auto_scrolling = False
        """Set while a pane scrolls both panes itself (not the user)."""
        self.changes = 0
        """Counts the batches that changed the rows (a view with nothing new draws nothing)."""
        self.shifts = 0
        """Counts the rows put before others (`_insert`): a row's absolute index then names
        another row, so a pane draws every row afresh."""
        self.written: dict[int, int] = {}
        """step -> the serial of the last write of its values (either side): a step logged
        again (a restarted run, a row after a pause) is drawn afresh, never from a row drawn
        with its old values."""
        self._serial = 0

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def end(self) -> int:
        """Absolute index after the last row."""
        return self.start + len(self.entries)

    def _step(self, side: str, step: int, metrics: dict[str, float]) -> None:
        if step not in self.rows_of:
            if step <= self.gone:
                return
            self.rows_of[step] = self.end
            self.entries.append((step, {}))
        self.metrics.setdefault(side, {})[step] = metrics
        self._serial += 1
        self.written[step] = self._serial
        self._fill[side] = self.rows_of[step] + 1

    def _text(self, side: str, kind: str, text: str) -> None:
        self.widest = max(self.widest, len(text) + 2)
        at = max(self._fill.get(side, 0), self.start)
        if at < self.end and self.entries[at - self.start][0] is None:
            self.entries[at - self.start][1].setdefault(side, (kind, text))
        elif at < self.end and side not in self.metrics and self._prelude.get(side, 0) < PRELUDE:
            self._insert(at, side, (kind, text))  # a late side's first lines come first
        elif at < self.end and side in self.metrics and _in_place(kind, text):
            self._insert(at, side, (kind, text))  # a side behind: its restart where it came
        else:
            at = self.end
            self.entries.append((None, {side: (kind, text)}))
        self._fill[side] = at + 1

    def _insert(self, at: int, side: str, line: tuple[str, str]) -> None:
        """A text row of `side` at absolute index `at`, before the rows there."""
        self._prelude[side] = self._prelude.get(side, 0) + 1
        self.entries.insert(at - self.start, (None, {side: line}))
        self.rows_of = {step: i + (i >= at) for step, i in self.rows_of.items()}
        self._fill = {s: i + (i > at) for s, i in self._fill.items()}
        self.changes += 1
        self.shifts += 1

    def follow_end(self) -> int:
        """Where a following view ends (a position among the kept rows, exclusive): after the
        last row of the running side that is furthest behind, once both sides have logged;
        else after the last row."""
        behind = [self._fill[s] for s in self.running if s in self._fill]
        if len(self._fill) < 2 or not behind:
            return len(self.entries)
        return max(0, min(min(behind) - self.start, len(self.entries)))

    def _reached(self) -> int:
        """Rows before this position were reached by every running side (a running side that
        has not logged yet has reached none)."""
        fills = [self._fill.get(s, self.start) - self.start for s in self.running]
        return min(fills, default=len(self.entries))

    def _trim(self) -> int:
        over = len(self.entries) - self.max_lines
        if over > 0 and len(self.entries) <= HARD_CAP * self.max_lines:
            # rows the side behind has not reached stay, and half a buffer of rows before them
            over = min(over, self._reached() - self.max_lines // 2)
        dropped = max(0, over)
        for _ in range(dropped):
            step, _ = self.entries.popleft()
            if step is not None:
                self.rows_of.pop(step, None)
                self.written.pop(step, None)
                self.gone = max(self.gone, step)
                for by_step in self.metrics.values():
                    by_step.pop(step, None)
            self.start += 1
        return dropped

    def add(self, side: str, records: Sequence[Record], stderr: Sequence[str] = ()) -> int:
        """Append one batch of a side's records then stderr lines; the rows dropped."""
        before = self.start
        if records or stderr:
            self.changes += 1
        if len(records) > self.max_lines:  # a huge batch: only its tail can stay
            records = records[-self.max_lines :]
        for rec in records:
            if isinstance(rec, Step):
                self._step(side, rec.step, rec.metrics)
            elif isinstance(rec, Text):
                self._text(side, "text", clean(rec.text))
            elif isinstance(rec, Header):
                device = rec.env.get("device")
                note = f"header · {rec.format}" + (f" · {device}" if device else "")
                self._text(side, "note", clean(note))
            elif isinstance(rec, End):
                steps = f" · {rec.steps} steps" if rec.steps is not None else ""
                self._text(side, "note", clean(f"end · {rec.status}{steps}"))
        for line in stderr[-self.max_lines :]:
            self._text(side, "stderr", clean(line))
        self._trim()
        return self.start - before

    def index_of(self, step: int, side: str | None = None) -> int | None:
        """Position of a step's row among the kept rows (logged by `side`, when given)."""
        at = self.rows_of.get(step)
        if at is None or (side is not None and step not in self.metrics.get(side, {})):
            return None
        return at - self.start

    def metrics_of(self, step: int, side: str) -> dict[str, float] | None:
        """A kept step's metrics on one side."""
        return self.metrics.get(side, {}).get(step)

    def clear(self) -> None:
        """Forget every row (the absolute count goes on)."""
        self.changes += 1
        self.start += len(self.entries)
        self.entries.clear()
        self.rows_of.clear()
        self.written.clear()
        self.metrics.clear()
        self._fill.clear()
        self._prelude.clear()
        self.gone = -1


class SideRows:
    """One side's view of the shared `PairRows` (what its pane asks)."""

    def __init__(self, rows: PairRows, side: str) -> None:
        self.rows = rows
        self.side = side

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def max_lines(self) -> int:
        """Rows kept at most."""
        return self.rows.max_lines

    def index_of(self, step: int) -> int | None:
        """Position of the row of a step this side logged."""
        return self.rows.index_of(step, self.side)

    def metrics_of(self, step: int) -> dict[str, float] | None:
        """This side's metrics of a kept step."""
        return self.rows.metrics_of(step, self.side)


@dataclass
class PairModel:
    """Columns, bounded sparkline series, curves and the judgement of one pair."""

    columns: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    """Shared metrics with a sparkline series, in column order."""
    spark: dict[str, BucketSeries] = field(default_factory=dict)
    curves: dict[tuple[str, str], CurveSeries] = field(default_factory=dict)
    first: FirstDivergence | None = None
    """The values at the summary's first divergent step (`first_divergent_step`)."""
    current: float | None = None
    """Divergence of the newest aligned step."""
    aligned_count: int = 0
    first_step: int | None = None
    last_step: int | None = None
    summary: Summary | None = None
    sides: dict[str, SideState] = field(default_factory=dict)
    headers: dict[str, Header] = field(default_factory=dict)
    saved: PairDoc = field(default_factory=PairDoc)
    """pair.json of a saved pair, when there is one."""
    pair_path: Path | None = None
    message: str | None = None
    done: bool = False
    artifacts: dict[str, Any] = field(default_factory=dict)
    """What both runs saved at the end, compared (pair.json's `artifacts`, e.g. W_E)."""
    parts: dict[str, tuple[int, MetricDiff]] = field(default_factory=dict)
    """Where each metric first parts (its first step whose two values differ), in order seen."""
    _known: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self.spark.setdefault(DIVERGENCE, BucketSeries(SPARK_BUCKETS))

    # -- feeding ------------------------------------------------------------------------------

    def apply(self, batch: Batch) -> None:
        """Take one batch of a session."""
        for side, records in batch.records.items():
            self.add_records(side, records)
        self.summary = batch.summary  # judged with this batch's rows: says where they part
        self.add_aligned(batch.aligned)
        self.sides = batch.sides
        for side, state in batch.sides.items():
            if state.header is not None:
                self.headers.setdefault(side, state.header)
        if batch.pair_path is not None:
            self.pair_path = batch.pair_path
        if batch.message:
            self.message = batch.message
        self.done = batch.done

    def add_records(self, side: str, records: Sequence[Record]) -> None:
        """Columns from the first step record; headers; loss curve points."""
        steps = [r for r in records if isinstance(r, Step)]
        for rec in records:
            if isinstance(rec, Header):
                self.headers.setdefault(side, rec)
                break
        if not steps:
            return
        self._add_columns(steps)
        xs = np.fromiter((s.step for s in steps), np.float64, len(steps))
        for metric in curve_metrics(self.columns):
            ys = np.fromiter((s.metrics.get(metric, np.nan) for s in steps), np.float64, len(steps))
            curve = self.curves.setdefault((side, metric), CurveSeries(CURVE_POINTS))
            curve.extend(xs, ys)

    def _add_columns(self, steps: Sequence[Step]) -> None:
        """Columns from the first step record, and each metric that appears later (a
        validation loss logged every N steps, an `lr` on odd steps) gets its own at the end."""
        if not self.columns:
            self.columns = choose_columns(steps[0].metrics)
        known = self._known
        known.update(self.columns)
        for s in steps:
            if not known.issuperset(s.metrics):
                late = [m for m in s.metrics if m not in known]
                self.columns = [*self.columns, *late]
                known.update(late)

    def add_aligned(self, aligned: Sequence[AlignedStep]) -> None:
        """Sparkline levels, the current divergence, the first divergent step."""
        n = len(aligned)
        if not n:
            return
        self._add_series(aligned)
        div = np.fromiter((s.divergence for s in aligned), np.float64, n)
        equal = np.fromiter((s.equal for s in aligned), bool, n)
        self.spark[DIVERGENCE].extend(levels(div, equal))
        for metric in self.metrics:
            rel = np.fromiter(
                (s.diffs[metric].rel if metric in s.diffs else 0.0 for s in aligned), np.float64, n
            )
            eq = np.fromiter(
                (s.diffs[metric].equal if metric in s.diffs else True for s in aligned), bool, n
            )
            self.spark.setdefault(metric, BucketSeries(SPARK_BUCKETS)).extend(levels(rel, eq))
        differing = np.flatnonzero(~equal)
        if len(differing):
            self._add_parts(aligned, [int(i) for i in differing])
        step = self.first_divergent_step
        if step is not None and (self.first is None or self.first.step != step):
            self._keep_first(step, [aligned[int(i)] for i in np.flatnonzero(~equal)])
        self.aligned_count += n
        self.current = float(div[-1])
        self.first_step = aligned[0].step if self.first_step is None else self.first_step
        self.last_step = aligned[-1].step

    def _add_series(self, aligned: Sequence[AlignedStep]) -> None:
        """Shared metrics get a sparkline series (column order, late ones too, bounded)."""
        if len(self.metrics) >= MAX_SERIES:
            return
        shared: dict[str, None] = {}
        for s in (aligned[0], aligned[-1]):
            shared.update(dict.fromkeys(s.diffs))
        new = [c for c in self.columns if c in shared and c not in self.metrics]
        new += [m for m in shared if m not in self.metrics and m not in new]
        self.metrics += new[: MAX_SERIES - len(self.metrics)]

    def _add_parts(self, aligned: Sequence[AlignedStep], differing: Sequence[int]) -> None:
        """Where each metric first parts: its step and both values, once."""
        parts = self.parts
        first, last = aligned[differing[0]].diffs.keys(), aligned[-1].diffs.keys()
        if parts.keys() >= first and parts.keys() >= last:
            return  # every metric has parted already (the usual case once the runs diverge)
        for i in differing:
            s = aligned[i]
            for name, d in s.diffs.items():
                if not d.equal and name not in parts:
                    parts[name] = (s.step, d)

    def _keep_first(self, step: int, differing: Sequence[AlignedStep]) -> None:
        """The values at the summary's first divergent step, when its row is among these."""
        for s in differing:
            if s.step == step:
                self.first = FirstDivergence(
                    step=s.step,
                    metrics={
                        k: (d.a, d.b, d.rel, d.ulps) for k, d in s.diffs.items() if not d.equal
                    },
                    tensors=s.tensors,
                    digest_equal=s.digest_equal,
                    divergence=s.divergence,
                )
                return

    # -- reading ------------------------------------------------------------------------------

    @property
    def first_divergent_step(self) -> int | None:
        """Where the runs part: the aligner's summary says (the one owner of which step)."""
        return self.summary.first_divergent_step if self.summary is not None else None

    def series_names(self) -> list[str]:
        """What the sparkline can follow: the divergence, then each shared metric."""
        return [DIVERGENCE, *self.metrics]

    def env(self, side: str) -> dict[str, Any]:
        """A side's fingerprint (env and hyper) from its header, else from pair.json."""
        header = self.headers.get(side)
        if header is not None:
            return {"env": header.env, "hyper": header.hyper}
        run = self.saved.runs.get(side)
        if run is not None:
            return {"env": run.env or {}, "hyper": run.hyper or {}}
        return {}

    def env_rows(self) -> list[EnvRow]:
        """Both fingerprints key by key, differing keys first (else pair.json's env_diff)."""
        rows = env_rows(self.env("a"), self.env("b"))
        if not rows:
            rows = [
                EnvRow(str(k), v[0], v[1], True)  # pair.json's env_diff: the differing keys
                for k, v in sorted(self.saved.env_diff.items())
                if isinstance(v, list) and len(v) == 2
            ]
        a, b = self.sides.get("a"), self.sides.get("b")
        if rows and a is not None and b is not None:  # the full commands (titles are short)
            apart = a.command != b.command and not own_paths(a.command, b.command)
            rows.insert(0, EnvRow("command", a.command, b.command, apart))
        return rows

    def artifact_lines(self) -> list[str]:
        """One line per compared artifact: `emb at the end: bitwise equal`."""
        return artifact_lines(self.artifacts)

    def planned(self) -> int | None:
        """Steps planned (the larger of the sides' totals), when known."""
        totals = [s.total for s in self.sides.values() if s.total]
        return max(totals) if totals else None

    def first_line(self) -> str:
        """Where the runs part, in one line."""
        summary = self.summary
        step = self.first_divergent_step
        metrics = list(summary.first_divergent_metrics) if summary else []
        tensors = list(summary.first_tensors) if summary else []
        if summary is not None and (first := bytes_first(summary)) is not None:
            return f"first divergence: {line_parting(summary, first)}"
        return parting_line(
            step,
            metrics,
            tensors,
            self.aligned_count,
            complete=self.done,
            planned=self.planned(),
            equal=equal_phrase(summary) if summary is not None else "bitwise equal",
        )


_SIDE = re.compile(r"(?<=[-_/.])a(?=[-_.])|^a(?=[-_.])")


def own_paths(a: Any, b: Any) -> bool:
    """Two command lines that differ only in each side's own file (`--save-emb .../emb-a.npy`
    against `.../emb-b.npy`): no difference between the runs (two log paths alone still are).
    The one rule of the environment views (`e`) and the pair's information (`i`)."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    wa, wb = a.split(" "), b.split(" ")
    return 1 < len(wa) == len(wb) and all(
        x == y or (("/" in x + y or "." in x + y) and _SIDE.sub("b", x) == y)
        for x, y in zip(wa, wb, strict=True)
    )


class PairFeed:
    """What a pair view holds of a pair, batch by batch: its model and the panes' rows.

    A view feeds its own. A sweep feeds one per running pair from the pair's first batch, so a
    view opened mid-run starts from everything seen so far and goes on with the next batch:
    nothing read twice, nothing missed, nothing read from disk.
    """

    def __init__(self, max_lines: int = 2000) -> None:
        self.model = PairModel()
        self.rows = PairRows(max_lines)
        self.dropped = 0
        """Rows dropped since the view last drew (its panes keep their place)."""
        self.ended: Batch | None = None
        """The last batch, once the pair has ended."""

    def take(self, batch: Batch) -> None:
        """One batch of the session: the model, then the rows (which follow the running side
        that is behind)."""
        self.model.apply(batch)
        self.rows.running = {side for side, state in batch.sides.items() if not state.over}
        self.add(batch.records, batch.stderr)
        if batch.done:
            self.ended = batch

    def add(
        self,
        records: Mapping[str, Sequence[Record]],
        stderr: Mapping[str, Sequence[str]],
        *,
        stderr_first: bool = False,
    ) -> None:
        """Rows of both sides (a saved pair: its stderr file's tail first, then the log's)."""
        for side in SIDES:
            if stderr_first:
                self.dropped += self.rows.add(side, [], stderr.get(side, []))
                self.dropped += self.rows.add(side, records.get(side, []))
            else:
                self.dropped += self.rows.add(side, records.get(side, []), stderr.get(side, []))

    def take_dropped(self) -> int:
        """The rows dropped since the last call."""
        dropped, self.dropped = self.dropped, 0
        return dropped
