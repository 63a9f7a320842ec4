"""What a pair comes to: the verdicts and their rule, the exit codes, the `Summary` with its
coverage, how a pair ended (`how_it_ended`) and the reasons a pair is not complete.

Every path that judges a pair (live, replay, the browser, export, `tuimon compare`) ends here:
the aligner (`tuimon.engine.judge.align`) counts, and `verdict` names the outcome.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tuimon.steplog import jsonable

IDENTICAL, CLOSE, DIVERGED, INCOMPLETE = "IDENTICAL", "CLOSE", "DIVERGED", "INCOMPLETE"
VERDICTS = (IDENTICAL, CLOSE, DIVERGED, INCOMPLETE)
PRECEDENCE = (
    "DIVERGED as soon as a difference beyond tolerance was seen, or a replica parted inside a "
    "side (a fact even if a run was cut short); otherwise INCOMPLETE unless both runs ended "
    "normally, every aligned step compared at least one shared value and both sides logged the "
    "same steps; then IDENTICAL when bitwise equal, else CLOSE"
)
"""The rule `verdict` applies, in words: docs/verdicts-and-divergence.md says it word for word
(tests/unit/test_docs.py checks that it does). Nothing prints it."""
NO_STEP = "no step logged by both runs"
BY_TUIMON = ("interrupted", "stopped")
"""A run's status when tuimon ended it: `interrupted` (quit, Ctrl-C, a signal to tuimon) or
`stopped` (its own rule: `--stop-on-divergence`, `--stop-on-fail`); pair.json, the panes,
headless output and `--json` use the same word."""


def signal_name(number: int) -> str:
    """`SIGKILL` for 9 (`signal 99` for a number no signal has)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_words(code: int | None, status: str | None = None) -> str:
    """How a run's process ended, said one way everywhere (panes, headless, `i`, the reasons
    of pair.json and `--json`), after its status (`status_words`): a run tuimon ended
    (`BY_TUIMON`) `SIGTERM from tuimon`, or `SIGKILL from tuimon` when it had to kill it after
    the grace, whatever code the run then exited with; another signal `killed by SIGKILL`,
    from the -N asyncio gives or the 128 + N a shell or a handler exits with; else `exit N`;
    no code: `did not start`."""
    killed = -code if code is not None and code < 0 else None
    if code is not None and 128 < code <= 128 + 64:
        killed = code - 128
    if status in BY_TUIMON:
        return f"{signal_name(9 if killed == 9 else 15)} from tuimon"
    if code is None:
        return "did not start"
    if killed is not None:
        return f"killed by {signal_name(killed)}"
    return f"exit {code}"


def status_words(status: str, code: int | None) -> str:
    """A run's status and, when it did not simply finish, how its process ended:
    `failed (exit 1)`, `interrupted (SIGTERM from tuimon)`, `stopped (SIGKILL from tuimon)`,
    `failed (killed by SIGSEGV)`; `finished`, `running`, `interrupted` (no process)."""
    if code is None or (code == 0 and status not in BY_TUIMON) or status == "finished":
        return status
    return f"{status} ({exit_words(code, status)})"


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
    replicas_parted: list[dict[str, Any]] = field(default_factory=list)
    """`--nproc`: each rank whose replica parted from its side's rank 0 (`side`, `rank`,
    `step`, `tensors`); any makes the pair DIVERGED (`hold_replicas`)."""
    beyond: dict[str, Any] | None = None
    """Where the pair first went beyond its tolerance (or band): step, metric (None when only
    parameter digests differ), a, b, abs, rel, tolerance, band (`Tally._beyond`)."""
    band: dict[str, Any] | None = None
    """`--tolerance-from`: the band per metric it was judged with (`Band.to_dict`)."""
    first_tensor_step: int | None = None
    """The step where per-tensor digests first differ (`first_tensors` are those of it)."""
    first_tensors_among: int = 0
    """Tensors both sides digested at `first_tensor_step`: the first tensors parted before the
    others only when they are fewer."""

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


def replica_text(side: Any, rank: Any, step: Any, tensors: Sequence[str] = ()) -> str:
    """`side a: rank 1 parted from rank 0 at step 5 (W_E)`."""
    shown = ", ".join(tensors[:6]) + (", ..." if len(tensors) > 6 else "")
    return f"side {side}: rank {rank} parted from rank 0 at step {step}" + (
        f" ({shown})" if tensors else ""
    )


def replica_partings(replicas: Any) -> list[dict[str, Any]]:
    """Each parted rank in pair.json's `replicas` (`ranks_parted`, else the side's first
    `parted`; values of the wrong type skipped), by step, side and rank."""
    found: list[dict[str, Any]] = []
    for side, info in replicas.items() if isinstance(replicas, dict) else ():
        if not isinstance(info, dict):
            continue
        ranks = info.get("ranks_parted")
        parted = list(ranks.values()) if isinstance(ranks, dict) else [info.get("parted")]
        for p in parted:
            if not isinstance(p, dict):
                continue
            rank, step, tensors = p.get("rank"), p.get("step"), p.get("tensors")
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in (rank, step)):
                continue
            names = [t for t in tensors if isinstance(t, str)] if isinstance(tensors, list) else []
            found.append({"side": str(side), "rank": rank, "step": step, "tensors": names})
    return sorted(found, key=lambda p: (p["step"], p["side"], p["rank"]))


def hold_replicas(summary: Summary, replicas: Any) -> None:
    """A replica that parted inside a side (`--nproc`: a rank whose digests left rank 0's)
    fails the pair as Megatron's replica check fails a run: DIVERGED, each parted rank named
    with its step (`summary.replicas_parted`). Every path that ends a pair calls this after
    the byte rule: live and replay with what their check found, `compare`, the browser and a
    saved pair's summary with pair.json's `replicas`."""
    summary.replicas_parted = replica_partings(replicas)
    if summary.replicas_parted:
        summary.verdict = DIVERGED


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
    note: str | None = None
    """What else is known of its failure (a rank that failed first)."""
    where: bool = False
    """Say where its log stops (`last_step`) in the words of a side that did not end normally
    (the saved run of `pair --against`)."""
    last_step: int | None = None
    """The last step its log holds (None: none)."""
    planned: int | None = None
    """The steps its header planned: a log without a monitor that stops before them was cut
    short (with `last_step`)."""
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
    why: dict[str, str] = field(default_factory=dict)
    """What each side that did not end normally came to, in the words that follow `run a`."""

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
    why: dict[str, str] = {}
    for run in runs:
        side, status = run.side, run.status
        failed = run.end is not None and run.end != "ok"
        last = "no step" if run.last_step is None else f"step {run.last_step}"
        at = f" at {last}" if run.where else ""
        short = run.where and run.planned is not None and run.last_step is not None
        if no_doc and run.where:
            why[side] = f"has no pair.json in its pair (its monitor stopped at {last})"
        elif status in BY_TUIMON and stopped_at is not None:
            why[side] = (
                f"stopped at step {stopped_at}, the first judged DIVERGED (--stop-on-divergence)"
            )
        elif status not in (None, "finished"):
            interrupted = interrupted or status == "interrupted"
            note = f": {run.note}" if run.note else ""
            why[side] = status_words(status, run.exit_code) + at + note
        elif failed:
            why[side] = f"ended with status {run.end}{at}"
        elif run.cut_short and at:
            why[side] = f"was cut short{at} (its log has no end record)"
        elif run.cut_short:
            reasons.append(f"run {side}'s log has no end record (cut short?)")
        elif short and run.last_step < run.planned - 1:  # type: ignore[operator]
            why[side] = f"was cut short{at} of {run.planned} planned"
        if side in why and not (no_doc and run.where):
            reasons.append(f"run {side} {why[side]}")
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
    return Ending(exits, reasons, interrupted, why)
