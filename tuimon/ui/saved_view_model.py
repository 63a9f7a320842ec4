"""A saved pair for the static view, opened at once and judged beside it (no textual here).

The view holds what it shows, not every record of both logs (issue 38). Three steps, each in
a worker thread of the view:

- `open_saved`: the pair's document, each log's last lines (read from its end), its header,
  the stderr tails: the panes are drawn at once.
- `judge_saved`: compare's judge (`judge_pair`, the block readers) gives the verdict, the
  first divergence and how each run ended, as `tuimon compare` gives them.
- `detail_saved`: the aligned steps streamed a block at a time (`SavedPair.stream`) give the
  bounded sparklines, where each metric parts, the values at the first divergence and the
  curves of the whole pair.

`load_saved` runs the three at once (for callers without a view). `window` reads the logs
around a step for a pane that no longer has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tuimon.engine.analyses.explained import saved_line
from tuimon.engine.judge.byte_rule import hold
from tuimon.engine.judge.verdict import Summary, hold_replicas
from tuimon.engine.sources.saved_pair import SavedPair, boxed_end, resolve_logs, saved_ending
from tuimon.engine.sources.side_state import SideState
from tuimon.errors import CompareError, ReplayError
from tuimon.steplog import Record
from tuimon.store import SIDES, SavedLogs
from tuimon.store.aligned import AlignedStep
from tuimon.ui.pair_info import hints_of, replicas_of
from tuimon.ui.pair_model import PairModel

ALIGN_CHUNK = 4096
DETAILS = ("spark", "metrics", "parts", "first", "aligned_count", "first_step", "last_step")
"""What `detail_saved` gives the view's model (with `current`, the curves and late columns)."""


@dataclass
class SavedView:
    """What the static view needs of a saved pair (its logs not held: read again if asked)."""

    logs: SavedPair
    model: PairModel
    tails: dict[str, list[Record]]
    stderr: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Judgement:
    """A saved pair as compare's judge read it: its summary and each run's final state."""

    summary: Summary
    sides: dict[str, SideState]


def _stderr_tail(logs: SavedLogs, side: str, lines: int) -> list[str]:
    path = logs.stderr(side)
    if path is None:
        return []
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        data = fh.read()
    tail = data.decode("utf-8", "replace").splitlines()[-lines:]
    return [f"── {path.name}: last {len(tail)} lines ──", *tail] if tail else []


def open_saved(path: Path, max_lines: int = 2000) -> SavedView:
    """A saved pair directory opened (ReplayError on a bad path): its document, each log's
    last `max_lines` records and header, the stderr tails; not judged yet (`judge_saved`)."""
    pair = resolve_logs([str(path)])
    doc = pair.doc
    model = PairModel(saved=doc, pair_path=pair.pair_dir)
    tails = {side: pair.tail(side, max_lines) for side in SIDES}
    for side in SIDES:
        if (header := pair.head(side)) is not None:
            model.headers[side] = header
        model.add_records(side, tails[side])  # columns; curves of the tail until the details
    model.sides = {side: pair.side_state(side, quick=True) for side in SIDES}
    model.artifacts = dict(doc.artifacts or {})
    told = [f"saved pair {pair.pair_dir}"] if pair.pair_dir else []
    if pair.pair_dir and (explained := saved_line(doc.more)):
        told.append(explained)
    told += replicas_of(doc.to_json())
    hints = hints_of(doc.to_json(), brief=True)  # the next step first, as headless says it
    model.message = "; ".join([*hints, *model.artifact_lines(), *told]) or None
    stderr = {side: _stderr_tail(pair, side, max_lines // 4) for side in SIDES}
    return SavedView(logs=pair.forget(), model=model, tails=tails, stderr=stderr)


def judge_saved(pair: SavedPair) -> Judgement:
    """The pair judged as `tuimon compare` judges it (`judge_pair`: the block readers, no
    record per step kept; no worker process forked, from a thread of the view) with its own
    tolerance and choice of metrics: the summary (how it ended, the byte rule) and each run's
    final state."""
    from tuimon.engine.analyses.compare import judge_pair  # not paid for until a pair is opened

    try:
        aligner, read = judge_pair(pair, pair.tolerance, pair.select, None, fork=False)
    except CompareError as exc:
        raise ReplayError(str(exc)) from None
    logs = dict(zip(SIDES, read, strict=True))
    ending = saved_ending(
        pair,
        {side: log.end for side, log in logs.items()},
        [side for side, log in logs.items() if log.tuimon],
        {side: (log.steps, log.texts, log.first_text) for side, log in logs.items()},
        aligner.text.compared,
    )
    summary = aligner.summary(
        complete=ending.complete, reason=ending.reason, interrupted=ending.interrupted
    )
    named = [str(log.header.env.get("device") or "") if log.header else "" for log in read]
    devices = pair.doc.devices if len(pair.doc.devices or ()) == 2 else None
    if devices is None and all(named):
        devices = (named[0], named[1])
    hold(summary, pair.a, pair.b, reading=pair.reading, select=pair.select, devices=devices)
    hold_replicas(summary, pair.doc.more.get("replicas"))
    sides = {}
    for side, log in logs.items():
        state = pair.side_state(side, quick=True)
        state.exit_code, state.status = ending.exits[side]
        state.step = aligner.last_step[side] if log.steps else None
        header = log.header
        planned = header.hyper.get("steps") if header is not None else None
        if isinstance(planned, int) and planned > 0:  # steps done / steps planned, as live
            state.total = planned
        elif log.end is not None and log.end.steps is not None:
            state.total = log.end.steps
        state.records = log.steps
        state.header = header
        state.end = boxed_end(log.end, pair.pair_dir or getattr(pair, side).parent)
        sides[side] = state
    return Judgement(summary, sides)


def detail_saved(pair: SavedPair, summary: Summary, columns: Iterable[str] = ()) -> PairModel:
    """What the view shows of every aligned step (bounded: sparklines, where each metric
    parts, the values at the summary's first divergent step, the curves), from the aligned
    steps streamed a block at a time; the logs are let go after."""
    detail = PairModel(columns=list(columns), summary=summary)
    chunk: list[AlignedStep] = []
    try:
        for step in pair.stream(on_records=detail.add_records):
            chunk.append(step)
            if len(chunk) >= ALIGN_CHUNK:
                detail.add_aligned(chunk)
                chunk = []
        detail.add_aligned(chunk)
    finally:
        pair.forget()
    return detail


def apply_judgement(model: PairModel, judged: Judgement) -> None:
    """The verdict and how each run ended, on the view's model."""
    model.summary = judged.summary
    model.aligned_count = model.aligned_count or judged.summary.steps_compared
    model.sides = judged.sides
    for side, state in judged.sides.items():
        if state.header is not None:
            model.headers.setdefault(side, state.header)
    model.done = True


def apply_details(model: PairModel, detail: PairModel) -> None:
    """What `detail_saved` read, on the view's model (curves of the whole pair)."""
    for name in DETAILS:
        setattr(model, name, getattr(detail, name))
    model.current = detail.current
    model.curves = detail.curves
    model.columns = [*model.columns, *(c for c in detail.columns if c not in model.columns)]


def load_saved(path: Path, max_lines: int = 2000) -> SavedView:
    """`open_saved`, `judge_saved` and `detail_saved` at once (ReplayError on a bad path)."""
    view = open_saved(path, max_lines)
    judged = judge_saved(view.logs)
    apply_judgement(view.model, judged)
    apply_details(view.model, detail_saved(view.logs, judged.summary, view.model.columns))
    return view


def window(logs: SavedLogs, step: int, max_lines: int = 2000) -> dict[str, list[Record]]:
    """Each side's lines around `step` (about half before it), for a pane that no longer has
    it: read around the step (`SavedPair.window`), the logs never held whole."""
    pair = SavedPair.of(logs)
    held = pair.held
    try:
        return pair.window(step, max_lines)
    finally:
        if not held:
            pair.forget()
