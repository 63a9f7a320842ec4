"""What a pair comes to: the verdicts and their rule, the exit codes, the `Summary` with its
coverage, how a pair ended (`how_it_ended`) and the reasons a pair is not complete.

Every path that judges a pair (live, replay, the browser, export, `tuimon compare`) ends here:
the aligner (`tuimon.engine.judge.align`) counts, and `verdict` names the outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tuimon.steplog import jsonable

IDENTICAL, CLOSE, DIVERGED, INCOMPLETE = "IDENTICAL", "CLOSE", "DIVERGED", "INCOMPLETE"
VERDICTS = (IDENTICAL, CLOSE, DIVERGED, INCOMPLETE)
PRECEDENCE = (
    "DIVERGED as soon as a difference beyond tolerance was seen (a fact even if a run was cut "
    "short); otherwise INCOMPLETE unless both runs ended normally, every aligned step compared "
    "at least one shared value and both sides logged the same steps; then IDENTICAL when "
    "bitwise equal, else CLOSE"
)
"""The rule `verdict` applies, in words: docs/verdicts-and-divergence.md says it word for word
(tests/unit/test_docs.py checks that it does). Nothing prints it."""
NO_STEP = "no step logged by both runs"


@dataclass(slots=True)
class Summary:
    """What a pair comes to, with its coverage (what was compared at all)."""

    verdict: str
    tolerance: float
    steps_compared: int
    steps_equal: int
    unmatched_a: int
    unmatched_b: int
    first_divergent_step: int | None
    first_divergent_metrics: list[str]
    first_digest_step: int | None
    first_tensors: list[str]
    max_divergence: float
    max_divergence_step: int | None
    metric_max: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    complete: bool = True
    reason: str | None = None
    values_compared: int = 0
    """Metric values and digests compared, over all aligned steps."""
    steps_without_values: int = 0
    """Aligned steps whose two records shared no value (they prove nothing)."""
    metrics_only_a: list[str] = field(default_factory=list)
    metrics_only_b: list[str] = field(default_factory=list)
    repeats_a: int = 0
    """Records of a step already logged by that side (compared occurrence by occurrence)."""
    repeats_b: int = 0
    ignored: list[str] = field(default_factory=list)
    """Names shown but never judged: clocks, throughput, media metadata, `--ignore`/`--only`."""
    select: dict[str, list[str]] = field(default_factory=lambda: {"ignore": [], "only": []})
    unreadable: int = 0
    """Values that do not fit a float64 or an int64 (`1e400`): reported, never judged."""
    unreadable_first: list[str] = field(default_factory=list)
    interrupted: bool = False
    digests_not_comparable: int = 0
    """Aligned steps whose digests are of two formats (`devsum1:` against blake2b): not judged."""
    values_one_sided: int = 0
    """Values one side has at an aligned step and the other lacks (a `null`, a string or a
    list against a number, or a metric not logged there): each a difference."""
    first_one_sided: list[str] = field(default_factory=list)
    """Of `first_divergent_metrics`, those with a value on one side only."""
    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per side, what its records were (`tuimon.readers.account.Account.to_dict`)."""
    text: dict[str, Any] = field(default_factory=dict)
    """Text lines judged by position (`tuimon.engine.judge.text_judge.TextJudge.to_dict`)."""
    step_levels: bool = False
    """Steps are two-level (epoch * 1e9 + iteration: `tuimon.readers.text.step_text`)."""
    first_divergent_at: dict[str, int] | None = None
    """The first divergent step's levels (`{"epoch": 7, "iteration": 2750}`), when two-level."""
    first_divergent_lines: dict[str, int | None] | None = None
    """Where the first difference is in each log: its line (1-based), for logs of lines."""
    bytes: dict[str, Any] = field(default_factory=dict)
    """The byte rule over the two logs (`tuimon.engine.judge.byte_rule.ByteCheck.to_dict`):
    what differs and why it may; empty until a path that ends the pair holds it to the bytes."""
    precision: dict[str, Any] = field(default_factory=dict)
    """How exactly the values were compared (`tuimon.engine.judge.precision.Precision`)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite floats as strings); `jsonable` copies every container, so
        no deep copy first (a summary of 100,000 metrics)."""
        return jsonable({f.name: getattr(self, f.name) for f in fields(self)})

    def coverage_line(self) -> str:
        """What was compared: steps, values, what one side only has, what was ignored."""
        parts = [f"compared {self.steps_compared} steps, {self.values_compared} values"]
        if self.unmatched_a or self.unmatched_b:
            parts.append(f"steps on one side only: a {self.unmatched_a}, b {self.unmatched_b}")
        for side, names in (("a", self.metrics_only_a), ("b", self.metrics_only_b)):
            if names:
                parts.append(f"metrics only {side} has: {_names(names)}")
        if self.values_one_sided:
            n = self.values_one_sided
            parts.append(f"{n} value{'s' * (n != 1)} on one side only (each a difference)")
        if self.repeats_a or self.repeats_b:
            parts.append(f"repeated steps: a {self.repeats_a}, b {self.repeats_b}")
        if self.text.get("compared"):
            parts.append(
                f"{self.text['compared']} text lines with numbers compared"
                + (f" ({self.text['differ']} differ)" if self.text.get("differ") else "")
            )
        if self.ignored:
            parts.append(f"not judged: {_names(self.ignored)} (clocks, or as asked)")
        if self.digests_not_comparable:
            parts.append(
                f"digests not comparable at {self.digests_not_comparable} steps "
                "(two digest formats: metrics compared only)"
            )
        for side, account in self.accounts.items():
            if skipped := account.get("skipped"):
                counts = ", ".join(f"{k} {v}" for k, v in skipped.items())
                parts.append(f"skipped in {side}: {counts}")
        return "; ".join(parts)


def _names(names: Sequence[str], most: int = 6) -> str:
    more = f", … ({len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


EXIT_CODES = {IDENTICAL: 0, CLOSE: 0, DIVERGED: 1}
"""Exit code per verdict; anything else (INCOMPLETE, failed runs) is 3."""


def exit_code(summary: Summary) -> int:
    """0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE."""
    return EXIT_CODES.get(summary.verdict, 3)


def no_step_reason(side: str, lines: int, first: str | None) -> str:
    """Why a run gave nothing to judge: how many lines it printed and what the first looked
    like (escaped), and where the docs say how to log steps."""
    if not lines:
        return f"run {side} printed no line"
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in (first or "")[:80])
    return (
        f"run {side} printed {lines} lines, none read as a step; "
        f"first: `{shown}` (see docs/your-script.md)"
    )


def unmatched_reason(ua: int, ub: int) -> str:
    return f"steps logged by one run only: a {ua}, b {ub}"


def verdict(
    compared: int,
    equal: int,
    max_div: float,
    tolerance: float,
    complete: bool,
    *,
    beyond: bool = False,
) -> str:
    """IDENTICAL / CLOSE / DIVERGED / INCOMPLETE from the counts (`PRECEDENCE`).

    Tolerance 0 means bitwise: any difference is DIVERGED. A divergence beyond tolerance is
    DIVERGED even when the pair is incomplete (that much is known); otherwise an incomplete pair
    (a run cut short, or coverage missing) is INCOMPLETE.
    """
    beyond = (
        beyond
        or max_div > tolerance
        or math.isnan(max_div)
        or (tolerance == 0 and equal < compared)
    )
    if beyond:
        return DIVERGED
    if not complete or compared == 0:
        return INCOMPLETE
    return IDENTICAL if equal == compared else CLOSE


NO_DOC = "the pair has no pair.json: its monitor did not finish (killed?)"


@dataclass(frozen=True, slots=True)
class RunEnd:
    """What is known of how one side's run ended: what its monitor recorded (the live session,
    or the pair.json it wrote), the end record of its log, and what the log held."""

    side: str
    status: str | None = None
    """The monitor's word for the run: finished, failed, interrupted, stalled ... (None: no
    monitor recorded it: a log file read on its own, or a pair without pair.json)."""
    exit_code: int | None = None
    end: str | None = None
    """The status of the log's end record ("ok", "error"; None: no end record)."""
    cut_short: bool = False
    """A log that ends with an end record (a tuimon step log) has none, and no monitor says
    how its run ended: it was cut short."""
    exit: str | None = None
    """Its exit in words (`exit 1`, `killed by SIGKILL`): said when its code is not 0."""
    note: str | None = None
    """What else is known of its failure (a rank that failed first)."""
    steps: int | None = None
    """Step records read (None: not counted: how the runs ended, not what they logged)."""
    texts: int = 0
    """Lines that were not step records, and the first of them (a run that logged no step
    is told by what it printed: `no_step_reason`)."""
    first_text: str | None = None


@dataclass(frozen=True, slots=True)
class Ending:
    """How a pair ended: each side's exit (code, status), why the pair is not complete (none
    when both runs ended normally and each logged steps), and whether it was interrupted."""

    exits: dict[str, tuple[int | None, str]]
    reasons: list[str]
    interrupted: bool

    @property
    def reason(self) -> str | None:
        """The reasons in one line (None: complete)."""
        return "; ".join(dict.fromkeys(self.reasons)) or None

    @property
    def complete(self) -> bool:
        """Both runs ended normally (and logged steps, where counted)."""
        return not self.reasons


def how_it_ended(
    runs: Sequence[RunEnd],
    *,
    interrupted: bool = False,
    stopped_at: int | None = None,
    no_doc: bool = False,
    damaged: bool = False,
    pair_status: str | None = None,
    pair_reason: str | None = None,
    text_compared: int = 0,
    step_key: bool = False,
) -> Ending:
    """How a pair ended, the one rule for the live session and a saved pair (replay, the
    browser, `compare`): each side in order, its monitor's status first (a side interrupted
    by `--stop-on-divergence` at `stopped_at` says so), else its end record's status, else a
    tuimon log without its end record (`cut_short`); "interrupted" (the pair, or a side) when
    nothing of that says why; then each side that logged no step (where counted, and not in a
    log of text lines judged line by line: `text_compared` without a `step_key`); the pair's
    own status (`pair_status`, `pair_reason`: a saved pair.json) when nothing else says why.

    `no_doc`: the pair has no pair.json (its monitor did not finish); `damaged`: its
    pair.json cannot be read. Then no side's exit is known."""
    reasons = [NO_DOC] if no_doc else []
    exits: dict[str, tuple[int | None, str]] = {}
    for run in runs:
        side, status = run.side, run.status
        failed = run.end is not None and run.end != "ok"
        if status == "interrupted" and stopped_at is not None:
            reasons.append(
                f"run {side} stopped at the first divergent step {stopped_at} "
                "(--stop-on-divergence)"
            )
        elif status not in (None, "finished"):
            interrupted = interrupted or status == "interrupted"
            said = f" ({run.exit})" if run.exit and run.exit_code not in (None, 0) else ""
            reasons.append(f"run {side} {status}{said}" + (f": {run.note}" if run.note else ""))
        elif failed:
            reasons.append(f"run {side} ended with status {run.end}")
        elif run.cut_short:
            reasons.append(f"run {side}'s log has no end record (cut short?)")
        if no_doc or damaged:
            exits[side] = (None, "interrupted")
        elif status is not None:
            exits[side] = (run.exit_code, status)
        else:
            exits[side] = (None, "failed") if failed else (0, "finished")
    if interrupted and not reasons:
        reasons.append("interrupted")
    if not text_compared or step_key:  # a log of text lines is judged line by line
        reasons += [
            no_step_reason(run.side, run.texts, run.first_text) for run in runs if run.steps == 0
        ]
    if pair_status not in (None, "finished") and not reasons:
        reasons.append(pair_reason or str(pair_status))
    return Ending(exits, reasons, interrupted)
