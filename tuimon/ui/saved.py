"""A saved pair for the static view: judged once, kept compact (no textual here).

`load_saved` runs in a worker thread: it reads the pair through the one loader
(`engine.sources.saved.SavedPair`) and keeps only a `PairModel` (bounded series) and the last
lines of each side for the panes. `window` reads the logs again for the lines around a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tuimon.engine.analyses.explain import saved_line
from tuimon.engine.sources.saved import SavedPair, resolve_logs
from tuimon.steplog import Record
from tuimon.store import SIDES, SavedLogs
from tuimon.ui.pair_info import replicas_of
from tuimon.ui.pair_model import PairModel

ALIGN_CHUNK = 4096


@dataclass
class SavedView:
    """What the static view needs of a saved pair (its logs not held: read again if asked)."""

    logs: SavedPair
    model: PairModel
    tails: dict[str, list[Record]]
    stderr: dict[str, list[str]] = field(default_factory=dict)


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


def load_saved(path: Path, max_lines: int = 2000) -> SavedView:
    """Read, align and summarise a saved pair directory (ReplayError on a bad path)."""
    pair = resolve_logs([str(path)])
    doc = pair.doc
    model = PairModel(saved=doc, pair_path=pair.pair_dir)
    for side in SIDES:
        model.add_records(side, pair.records(side))
    model.summary = pair.summary()  # first: it says which step's values the model keeps
    aligned = pair.judged[0]
    for start in range(0, len(aligned), ALIGN_CHUNK):
        model.add_aligned(aligned[start : start + ALIGN_CHUNK])
    model.sides = {side: pair.side_state(side, final=True) for side in SIDES}
    model.done = True
    model.artifacts = dict(doc.artifacts or {})
    told = [f"saved pair {pair.pair_dir}"] if pair.pair_dir else []
    if pair.pair_dir and (explained := saved_line(doc.more)):
        told.append(explained)
    told += replicas_of(doc.to_json())
    model.message = "; ".join([*model.artifact_lines(), *told]) or None
    tails = {side: pair.records(side)[-max_lines:] for side in SIDES}
    stderr = {side: _stderr_tail(pair, side, max_lines // 4) for side in SIDES}
    return SavedView(logs=pair.forget(), model=model, tails=tails, stderr=stderr)


def window(logs: SavedLogs, step: int, max_lines: int = 2000) -> dict[str, list[Record]]:
    """Each side's lines around `step` (about half before it), for a pane that no longer has
    it; what was read is let go again."""
    pair = SavedPair.of(logs)
    held = pair.held
    try:
        return pair.window(step, max_lines)
    finally:
        if not held:
            pair.forget()
