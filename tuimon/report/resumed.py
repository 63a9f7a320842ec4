"""The words of a pair whose side stopped and resumed (`pair --resume-at N`), for the headless
view and the TUI: where the side resumed, and the first step after it where the sides part."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuimon.engine.analyses.resume import parted_at
from tuimon.engine.judge.verdict import DIVERGED, Summary


def resume_lines(doc: Mapping[str, Any] | None, summary: Summary | None) -> list[str]:
    """One line: `resume: run b stopped after step N, saved its checkpoint and resumed from
    it; the sides part at step K, the first step after it` (or how else it went)."""
    resume = doc.get("resume") if isinstance(doc, Mapping) else None
    if not isinstance(resume, Mapping):
        return []
    side, at = resume.get("side"), resume.get("at")
    if side not in ("a", "b") or not isinstance(at, int) or isinstance(at, bool):
        return []
    if resume.get("restarted") is not True:
        return [f"resume: run {side} was to stop after step {at} and resume, but did not restart"]
    line = f"resume: run {side} stopped after step {at}, saved its checkpoint and resumed from it"
    if summary is None:
        return [line]
    first = parted_at(summary.first_divergent_step, summary.bytes)
    if first is not None and first <= at:
        return [f"{line}; the sides part at step {first}, before the resume"]
    if first is not None:
        which = "the first step after it" if first == at + 1 else f"{first - at} steps after it"
        why = "tuimon explain PAIR says what the resume lost"
        return [f"{line}; the sides part at step {first}, {which} ({why})"]
    if summary.verdict == DIVERGED:
        return [f"{line}; the sides part after it (tuimon explain PAIR says what the resume lost)"]
    return [f"{line}; after it the sides are {summary.verdict}"]
