"""The headless view of a pair: Rich progress on stderr, the verdict on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID, TextColumn
from rich.table import Column
from rich.text import Text

from tuimon.engine.judge.artifacts import lines as artifact_lines
from tuimon.engine.judge.hints import Hint, likely_causes
from tuimon.engine.judge.seed_check import pair_exit_code, pair_seeds
from tuimon.engine.judge.verdict import Summary, exit_code
from tuimon.engine.sources.replicas import replica_lines
from tuimon.engine.sources.session import Batch, PairSession
from tuimon.report.against import against_lines, pair_headline
from tuimon.report.resumed import resume_lines
from tuimon.report.wording import (
    account_lines,
    beyond_line,
    divergence_line,
    first_divergence_event,
    side_line,
)
from tuimon.sanitize import clean, json_text
from tuimon.signal_owner import owned

PLAIN_EVERY = 15.0
"""Seconds between plain progress lines when stderr is not a terminal."""


class HeadlessReporter:
    """Turns batches into Rich progress lines and one-off event lines."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn(
                "{task.description}  {task.fields[info]}",
                markup=False,  # names and devices come from the runs: never markup
                table_column=Column(no_wrap=True),
            ),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}
        self.first_told = False
        self.next_plain = time.monotonic() + PLAIN_EVERY

    def __enter__(self) -> HeadlessReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, batch: Batch) -> None:
        for side, s in batch.sides.items():
            if side not in self.tasks:
                label = f"{side} {clean(s.device, 80)}"
                self.tasks[side] = self.progress.add_task(label, total=s.total, info="")
            done = (s.step + 1) if s.step is not None else 0
            self.progress.update(self.tasks[side], total=s.total, completed=done, info=side_line(s))
        if "div" not in self.tasks:
            self.tasks["div"] = self.progress.add_task("pair", total=None, info="", start=False)
        div = batch.divergence
        self.progress.update(self.tasks["div"], info=divergence_line(batch.summary, div))
        if not self.console.is_terminal and time.monotonic() >= self.next_plain:
            self.next_plain = time.monotonic() + PLAIN_EVERY
            for side, s in batch.sides.items():  # a log file or CI job sees no live display
                self.console.print(Text(f"{side} {clean(s.device, 80)}  {side_line(s)}"))
        summary = batch.summary
        if summary.first_divergent_step is not None and not self.first_told:
            self.first_told = True
            self.console.print(Text(first_divergence_event(summary)))
        if message := _not_in_report(batch) if batch.done else batch.message:
            self.console.print(Text(clean(message, None)))


def _not_in_report(batch: Batch) -> str:
    """A last batch's message without what the report that follows says (the artifacts'
    lines, `emb at the end: ...; key frequencies ...`, and where the pair is saved)."""
    told: list[str] = []
    dropped = False
    for part in (batch.message or "").split("; "):
        dropped = " at the end:" in part or (dropped and part.startswith("key frequencies"))
        if part and not dropped and part != f"saved to {batch.pair_path}":
            told.append(part)
    return "; ".join(told)


def run_headless(
    sessions: list[Callable[[Callable[[Batch], None]], PairSession]],
    *,
    as_json: bool,
    out: Any = None,
    explain: bool = False,
    reports: list[PairReport] | None = None,
) -> int:
    """Run pairs one after another (`--repeat`), report each, return the worst exit code;
    each pair's `PairReport` is added to `reports` (`--junit`, `--summary`)."""
    out = out or sys.stdout
    console = Console(stderr=True, highlight=False)
    codes = []
    for i, make in enumerate(sessions):
        if len(sessions) > 1:
            console.rule(f"pair {i + 1} of {len(sessions)}")
        began = time.monotonic()
        with HeadlessReporter(console) as reporter:
            session = make(reporter)
            session.aligned = False  # the report reads the last divergence, not every step
            summary = asyncio.run(_run_with_signals(session))
        report = PairReport.of(session, summary)
        report.seconds = time.monotonic() - began
        if reports is not None:
            reports.append(report)
        codes.append(report.code)
        if explain and not session.interrupted:
            from tuimon.engine.analyses.explain import explain_after

            report.explained = explain_after(session, lambda text: console.print(Text(text)))
        elif session.logs is not None and isinstance(session.logs.doc.more.get("explain"), dict):
            report.explained = session.logs.doc.more["explain"]  # a replayed, explained pair
        report.artifacts = end_artifacts(session)
        out.write(report.json_line() if as_json else report.text())
        out.flush()
        if session.interrupted:
            break
    if 3 in codes:
        return 3
    return max(codes) if codes else 3


@dataclass
class PairReport:
    """What `run_headless` says of one finished pair, on stdout."""

    session: PairSession
    summary: Summary
    saved: bool
    save_error: str | None
    hints: list[Hint]
    explained: dict[str, Any] | None = None
    """`pair --explain`'s result."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    """What both runs saved at the end, compared (`end_artifacts`)."""
    doc: dict[str, Any] = field(default_factory=dict)
    """The pair's document (pair.json as written): `against` ..."""
    seconds: float | None = None
    """How long the pair ran (a JUnit test case's time)."""

    @classmethod
    def of(cls, session: PairSession, summary: Summary) -> PairReport:
        """The pair's verdict, whether it was saved, and its likely causes."""
        writer = session.writer
        saved = writer is not None and writer.finished
        save_error = writer.save_error if writer is not None and not saved else None
        doc = session.pair_doc().to_json()
        return cls(session, summary, saved, save_error, likely_causes(doc), doc=doc)

    @property
    def code(self) -> int:
        """The pair's exit code: 3 when it was not saved (a pair not saved is not done)."""
        code = 3 if self.save_error else exit_code(self.summary)
        return pair_exit_code(code, self.doc, self.summary.verdict)  # `--seeds A,B --check-seeds`

    def json_line(self) -> str:
        """`--json`: one line with the summary, the save, the hints and what was explained."""
        session, save_error, artifacts = self.session, self.save_error, self.artifacts
        record = {
            "pair": str(session.pair_path) if session.pair_path else None,
            "saved": self.saved,
            **({"save_error": save_error} if save_error else {}),
            "status": session.status(),
            **self.summary.to_dict(),
            "hints": [h.to_dict() for h in self.hints],
            **({"artifacts": artifacts} if artifacts else {}),
            **({"against": self.doc["against"]} if "against" in self.doc else {}),
            **({"replicas": self.doc["replicas"]} if "replicas" in self.doc else {}),
            **(self._seeds() if "seeds" in self.doc else {}),
            **({"resume": self.doc["resume"]} if "resume" in self.doc else {}),
        }
        if self.explained is not None:
            record["explain"] = self.explained
        return json_text(record) + "\n"

    def _seeds(self) -> dict[str, Any]:
        """`pair --seeds A,B`: the seeds, whether they gave the same log, the exit code."""
        not_applied = self.doc.get("seeds_not_applied", [])
        return {"seeds": self.doc["seeds"], "seeds_not_applied": not_applied,
                "exit_code": self.code}  # fmt: skip

    def detail_lines(self) -> list[str]:
        """The headline and where the pair is saved (a CI report's details)."""
        lines = [pair_headline(self.summary, self.doc), f"  {self.summary.coverage_line()}"]
        if beyond := beyond_line(self.summary):
            lines.insert(1, beyond)
        if self.saved:
            lines.append(f"pair saved in {clean(self.session.pair_path, None)}")
        elif self.save_error:
            lines.append(f"pair NOT saved: {clean(self.save_error, None)}")
        return lines

    def text(self) -> str:
        """The headline, the artifacts, the hints, the explanation and where the pair is."""
        lines = [pair_headline(self.summary, self.doc)]
        if beyond := beyond_line(self.summary):
            lines.append(beyond)
        lines += account_lines(self.summary)
        lines += [clean(line, None) for line in artifact_lines(self.artifacts)]
        lines += against_lines(self.doc)
        lines += resume_lines(self.doc, self.summary)
        lines += [clean(line, None) for line in replica_lines(self.doc.get("replicas"))]
        if (same := pair_seeds(self.doc, self.summary.verdict)) is not None:
            check = " — fails the check (--check-seeds)" if self.doc.get("check_seeds") else ""
            lines.append(same.text() + check)
        lines += [hint.text() for hint in self.hints]
        if self.explained is not None:
            from tuimon.engine.analyses.explained import describe

            lines.append(clean(describe(self.explained), None))
        if self.saved:
            lines.append(f"pair saved in {clean(self.session.pair_path, None)}")
        elif self.save_error:
            lines.append(f"pair NOT saved: {clean(self.save_error, None)}")
        return "".join(line + "\n" for line in lines)


def end_artifacts(session: PairSession) -> dict[str, Any]:
    """What both runs saved at the end, compared: this session's own comparison, or a
    replayed pair's from its pair.json (its runs' files may be gone)."""
    if session.artifacts:
        return session.artifacts
    return dict(session.logs.doc.artifacts or {}) if session.logs is not None else {}


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a pair: both runs' groups terminated, the partial pair saved."""


async def _run_with_signals(session: PairSession) -> Summary:
    loop = asyncio.get_running_loop()
    signals = SIGNALS if owned() else ()  # a test process keeps its own (`signal_owner`)
    for sig in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, session.stop)
    try:
        return await session.run()
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
