"""`pair --against`: one live run (side a) aligned live against a saved one (side b).

The saved side is fed to the same `PairSession` as records at full speed, before the live run
starts (a running summary never holds the steps the live run has not reached against it); the
live run is a `LiveSource` of one run. When both have ended, `AgainstCheck` judges what the
steps cannot: a saved run cut short, and the saved W_E against the retrain's (`emb_check`).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from tuimon.engine.events import Exited, Lines, SourceEvent
from tuimon.engine.judge.artifacts import compare_artifacts
from tuimon.engine.judge.emb_check import Options, compare_arrays, load
from tuimon.engine.judge.verdict import DIVERGED, IDENTICAL, INCOMPLETE, Summary
from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.sources.against_side import SAVED_SIDE, SavedSide
from tuimon.engine.sources.session import LiveSource, PairSession
from tuimon.errors import EmbCheckError
from tuimon.readers import read_bytes

SAVED_EMB = f"emb-{SAVED_SIDE}.npy"
"""The saved W_E, copied into the new pair (a pair is a closed box)."""


class AgainstSource(LiveSource):
    """The saved side's records at once, then one live run."""

    def __init__(self, specs: tuple[RunSpec, ...], saved: SavedSide, **how: Any) -> None:
        super().__init__(specs, **how)  # type: ignore[arg-type]
        self.saved = saved

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        saved = self.saved
        if saved.lines:
            await queue.put(Lines(SAVED_SIDE, _as_written(saved), saved.records))
        code, status, _ = saved.ending()
        await queue.put(Exited(SAVED_SIDE, code, status))
        await super().run(queue)


def _as_written(saved: SavedSide) -> list[bytes]:
    """The saved log's own bytes, for the new pair to hold as they were (its byte rule then
    reads what the saved run wrote, as `compare` of the two logs does); the lines it was read
    as where its file cannot be read so (a folder, binary events)."""
    try:
        data = read_bytes(saved.log) if saved.log.is_file() else b""
    except (OSError, ValueError):
        data = b""
    if not data or b"\0" in data[:4096]:
        return saved.lines
    return [data]


def copy_saved_emb(saved: SavedSide, pair_dir: Path | None) -> Path | None:
    """The saved W_E as the new pair's emb-b.npy (None without a pair or a saved W_E)."""
    if pair_dir is None or saved.emb is None:
        return None
    target = pair_dir / SAVED_EMB
    try:
        shutil.copyfile(saved.emb, target)
    except OSError:
        return None
    return target


class AgainstCheck:
    """At the end of an against pair: the saved run's ending and its W_E join the verdict."""

    def __init__(self, saved: SavedSide, saved_emb: Path | None) -> None:
        self.saved = saved
        self.saved_emb = saved_emb

    def __call__(self, session: PairSession) -> None:
        against = session.options.meta.setdefault("against", self.saved.provenance())
        emb = self._emb(session)
        if emb is not None:
            against["emb_check"] = emb
        _, _, cut = self.saved.ending()
        session.summary = judged(session.summary, cut, emb)

    def _emb(self, session: PairSession) -> dict[str, Any] | None:
        """The saved W_E against the retrain's, as `tuimon emb-check` judges them."""
        saved = self.saved_emb or self.saved.emb
        end = session.sides["a"].end
        named = end.artifacts.get("emb") if end is not None else None
        if saved is None:
            return None
        if not isinstance(named, str) or not Path(named).is_file():
            return {"verdict": None, "error": "the retrain saved no W_E (stopped, or --no-save)"}
        session.artifacts = compare_artifacts({"emb": named}, {"emb": str(saved)})
        try:
            data = compare_arrays(
                load(saved), load(Path(named)), Options(tolerance=session.options.tolerance)
            )
        except EmbCheckError as exc:
            return {"verdict": INCOMPLETE, "error": str(exc)}
        return {"saved": str(saved), "retrain": named, **data}


def judged(summary: Summary, cut: str | None, emb: dict[str, Any] | None) -> Summary:
    """The pair's verdict with the saved run's ending and the W_E check: DIVERGED when either
    diverged; else INCOMPLETE when the saved run was cut short or its W_E could not be
    compared; IDENTICAL only when the W_E is bitwise equal too."""
    reasons = [r for r in (summary.reason or "").split("; ") if r]
    if cut is not None:  # the session says "run b interrupted": say what it was
        reasons = [r for r in reasons if not r.startswith(f"run {SAVED_SIDE} ")]
        reasons.append(f"the saved run {cut}")
    emb_verdict = emb.get("verdict") if emb else None
    verdict = summary.verdict
    if emb_verdict == DIVERGED:
        reasons.append(
            f"W_E differs from the saved one: {emb['elements_differ']} of {emb['elements']} "  # type: ignore[index]
            f"elements, max rel {emb['max_rel']:.3g}"  # type: ignore[index]
        )
        verdict = DIVERGED
    elif emb_verdict == INCOMPLETE:
        reasons.append(f"W_E not compared: {emb['error']}")  # type: ignore[index]
    complete = summary.complete and cut is None and emb_verdict != INCOMPLETE
    if verdict != DIVERGED and not complete:
        verdict = INCOMPLETE
    elif verdict == IDENTICAL and emb_verdict == "CLOSE":
        verdict = "CLOSE"
        reasons.append("W_E equal in value, not in bytes")
    return replace(summary, verdict=verdict, complete=complete, reason="; ".join(reasons) or None)
