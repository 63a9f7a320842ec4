"""Everything the view knows of a pair, as lines of text (no textual here).

The `i` screen shows them whole, and the shell keeps `summary_lines` after quitting: the same
lines `pair --headless` prints (headline, artifacts, hints, explain, where the pair is saved),
with the runs' errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuimon.engine.analyses.explained import saved_line
from tuimon.engine.judge.hints import likely_causes
from tuimon.engine.sources.replicas import replica_lines
from tuimon.engine.sources.side_state import SideState
from tuimon.report.against import against_lines, pair_headline
from tuimon.report.resumed import resume_lines
from tuimon.report.wording import account_lines, metric_parts_line, status_words
from tuimon.ui.pair_model import PairModel
from tuimon.ui.text import clean

MAX_ENV = 30


def run_errors(sides: Mapping[str, SideState]) -> list[str]:
    """A line per side that failed: its exit code, its end record, its last stderr line."""
    lines = []
    for side, state in sorted(sides.items()):
        failed = state.status == "failed" or (state.exit_code not in (None, 0))
        end_bad = state.end is not None and state.end.status != "ok"
        if not (failed or end_bad):
            continue
        parts = [f"run {side} {status_words(state.status, state.exit_code)}"]
        if state.end is not None and state.end.status != "ok":
            parts.append(f"end: {state.end.status}")
        tail = [line for line in state.stderr_tail if line.strip()]
        if tail:
            parts.append(f"last stderr: {tail[-1].strip()}")
        lines.append(clean(" · ".join(parts), None))
    return lines


def hints_of(doc: Mapping[str, Any] | None, *, brief: bool = False) -> list[str]:
    """`maybe: …` lines for a pair document (pair.json, or a session's), as headless prints
    them; `brief`: as the bottom line shows them (what to try first, no evidence: `Hint.line`)."""
    if not doc:
        return []
    try:
        hints = likely_causes(doc)
    except (KeyError, TypeError, ValueError, AttributeError):
        return []
    return [clean(hint.line() if brief else hint.text(), None) for hint in hints]


def replicas_of(doc: Mapping[str, Any] | None) -> list[str]:
    """`side a: rank 1 parted from rank 0 at step 5` ... of a pair of `--nproc` sides."""
    return [clean(line, None) for line in replica_lines(doc.get("replicas"))] if doc else []


def summary_lines(
    model: PairModel, doc: Mapping[str, Any] | None, *, replayed: bool = False
) -> list[str]:
    """What the shell keeps after the view: as `pair --headless` prints, and the runs' errors
    (`replayed`: the pair was replayed or opened, not saved, by this view)."""
    if model.summary is None:
        return []
    lines = [pair_headline(model.summary, doc), *account_lines(model.summary)]
    lines += [clean(line, None) for line in model.artifact_lines()]
    lines += against_lines(doc)
    lines += [clean(line, None) for line in resume_lines(doc, model.summary)]
    lines += replicas_of(doc)
    lines += run_errors(model.sides)
    lines += hints_of(doc)
    explained = saved_line(dict(doc)) if doc else None
    if explained:
        lines.append(clean(explained, None))
    if model.pair_path is not None:
        lines.append(
            f"pair {'replayed from' if replayed else 'saved in'} {clean(model.pair_path, None)}"
        )
    return lines


def info_lines(
    model: PairModel, doc: Mapping[str, Any] | None, *, replayed: bool = False
) -> list[tuple[str, str]]:
    """Every line the view knows of the pair, each with its kind (heading or text)
    (`replayed`: as `summary_lines`)."""
    out: list[tuple[str, str]] = [("head", "Verdict")]
    if model.summary is not None:
        out.append(("text", pair_headline(model.summary, doc)))
        out.append(("text", model.summary.coverage_line()))
    out.append(("text", model.first_line()))
    if model.parts:
        out.append(("head", "Where each metric first parts"))
        out += [
            ("text", metric_parts_line(name, step, d)) for name, (step, d) in model.parts.items()
        ]
    told = summary_lines(model, doc, replayed=replayed)[1:]
    if told:
        out.append(("head", "Artifacts, errors, hints, explain"))
        out += [("text", line) for line in told]
    if model.message:
        out.append(("head", "The bottom line, whole"))
        out += [("text", clean(part, None)) for part in model.message.split("; ")]
    env = [row for row in model.env_rows() if row.differs]
    if env:
        out.append(("head", f"Environment differences ({len(env)})"))
        for row in env[:MAX_ENV]:
            out.append(("text", clean(f"{row.key}: a {row.a!r} · b {row.b!r}", 400)))
        if len(env) > MAX_ENV:
            out.append(("text", f"… {len(env) - MAX_ENV} more (e shows them all)"))
    return out
