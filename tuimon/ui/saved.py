"""A saved pair for the static view: judged once, kept compact (no textual here).

`load_saved` runs in a worker thread: it parses both logs, aligns them (`align.compare_steps`)
and keeps only a `PairModel` (bounded series) and the
last lines of each side for the panes. `window` re-reads the logs for the lines around a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tuimon.engine.analyses.compare import saved_ending
from tuimon.engine.analyses.explain import saved_line
from tuimon.engine.judge.align import compare_steps
from tuimon.engine.sources.replay import SavedLogs
from tuimon.engine.sources.saved import read_lines, resolve_logs, saved_select
from tuimon.engine.sources.session import SideState
from tuimon.steplog import End, Header, Record, Step, parse_line
from tuimon.store import PairDoc
from tuimon.ui.pair_info import replicas_of
from tuimon.ui.pair_model import PairModel

ALIGN_CHUNK = 4096


@dataclass
class SavedPair:
    """What the static view needs of a saved pair."""

    logs: SavedLogs
    model: PairModel
    tails: dict[str, list[Record]]
    stderr: dict[str, list[str]] = field(default_factory=dict)


def side_state(side: str, doc: PairDoc, records: list[Record]) -> SideState:
    """A side's final state from pair.json, else from its log."""
    run = doc.run(side)
    header = next((r for r in records[:5] if isinstance(r, Header)), None)
    end = next((r for r in reversed(records[-5:]) if isinstance(r, End)), None)
    steps = [r for r in records if isinstance(r, Step)]
    device = run.device or (header.env.get("device") if header else None) or "?"
    status = run.status
    if status is None:
        status = "failed" if end is not None and end.status != "ok" else "finished"
    state = SideState(side=side, device=str(device), command=run.command or f"{side}.jsonl")
    state.status = status
    state.exit_code = run.exit_code
    state.step = steps[-1].step if steps else None
    planned = header.hyper.get("steps") if header is not None else None
    if isinstance(planned, int) and planned > 0:  # steps done / steps planned, as live
        state.total = planned
    elif end is not None and end.steps is not None:
        state.total = end.steps
    state.records = len(steps)
    state.header = header
    state.end = end
    return state


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


def load_saved(path: Path, max_lines: int = 2000) -> SavedPair:
    """Read, align and summarise a saved pair directory (ReplayError on a bad path)."""
    logs = resolve_logs([str(path)])
    records = {
        side: [parse_line(x) for x in read_lines(p, logs.reading, side)]
        for side, p in (("a", logs.a), ("b", logs.b))
    }
    steps = {side: [r for r in recs if isinstance(r, Step)] for side, recs in records.items()}
    doc = logs.doc
    aligned, aligner = compare_steps(
        steps["a"], steps["b"], doc.tolerance or 0.0, saved_select(doc)
    )
    ending, interrupted = saved_ending(logs)
    reason = "; ".join(ending) or doc.summary.get("reason")
    complete = not ending and doc.status in (None, "finished")
    model = PairModel(saved=doc, pair_path=logs.pair_dir)
    for side, recs in records.items():
        model.add_records(side, recs)
    model.summary = aligner.summary(  # first: it says which step's values the model keeps
        complete=complete, reason=reason if not complete else None, interrupted=interrupted
    )
    for start in range(0, len(aligned), ALIGN_CHUNK):
        model.add_aligned(aligned[start : start + ALIGN_CHUNK])
    del aligned
    model.sides = {side: side_state(side, doc, recs) for side, recs in records.items()}
    model.done = True
    model.artifacts = dict(doc.artifacts or {})
    told = [f"saved pair {logs.pair_dir}"] if logs.pair_dir else []
    if logs.pair_dir and (explained := saved_line(logs.doc.more)):
        told.append(explained)
    told += replicas_of(logs.doc.to_json())
    model.message = "; ".join([*model.artifact_lines(), *told]) or None
    tails = {side: recs[-max_lines:] for side, recs in records.items()}
    stderr = {side: _stderr_tail(logs, side, max_lines // 4) for side in records}
    return SavedPair(logs=logs, model=model, tails=tails, stderr=stderr)


def window(logs: SavedLogs, step: int, max_lines: int = 2000) -> dict[str, list[Record]]:
    """Each side's lines around `step` (about half before it), for a pane that no longer has it."""
    out = {}
    for side, path in (("a", logs.a), ("b", logs.b)):
        recs = [parse_line(x) for x in read_lines(path, logs.reading, side)]
        at = next((i for i, r in enumerate(recs) if isinstance(r, Step) and r.step == step), None)
        if at is None:
            out[side] = recs[-max_lines:]
            continue
        start = max(0, at - max_lines // 2)
        out[side] = recs[start : start + max_lines]
    return out
