"""What a pair comes to: the verdicts and their rule, the exit codes, the `Summary` with its
coverage, and the reasons a pair is not complete.

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
    "DIVERGED as soon as a difference beyond tolerance was seen (even if a run was cut short); "
    "otherwise INCOMPLETE unless both runs ended normally, every aligned step compared at least "
    "one shared value and both sides logged the same steps; then IDENTICAL when bitwise equal, "
    "else CLOSE"
)
"""The verdict rule, the same for headless, the TUI, pair.json, the browser and the docs."""
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
