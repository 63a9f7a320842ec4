"""The plain-text wording both views use: progress, durations, where the runs part, the verdict.

One owner for each phrase, so the headless reporter, the Textual view and `tuimon compare` say
the same thing the same way. Plain strings only (no markup); nothing from tuimon is imported at
run time, so any module may use this one except `tuimon.sanitize` (a leaf): every name that
comes from a run (metric, tensor, device, reason) passes `clean` here, so what these functions
return is safe to print as plain text (never as markup).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tuimon.argv import without_options
from tuimon.readers.account import account_line
from tuimon.readers.text import step_text
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from tuimon.engine.judge.verdict import Summary
    from tuimon.engine.sources.side_state import SideState

NO_ETA = "--:--"
WAITING = "waiting for the first step"


NAMES_SHOWN = 12
"""Names a line lists at most (the reference model's 9 tensors fit; of a CSV of 100,000
columns parting at one step the rest are counted; `--json` and pair.json keep them all)."""


def names(items: Sequence[str]) -> str:
    """Names from a run (metrics, tensors), cleaned and joined; past `NAMES_SHOWN`, counted."""
    shown = ", ".join(clean(x, 80) for x in items[:NAMES_SHOWN])
    rest = len(items) - NAMES_SHOWN
    return f"{shown} and {rest:,} more" if rest > 0 else shown


def count(step: int | None, total: int | None) -> str:
    """Steps done / steps planned, the one count convention: `100/300`, `41` when no plan.

    Steps count from 0, so a run whose last step is 299 has done 300.
    """
    done = 0 if step is None else step + 1
    return f"{done}/{total}" if total else str(done)


def si(value: float) -> str:
    """A rate or count made short: 950, 9.5k, 1.2M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def duration(seconds: float) -> str:
    """Seconds as m:ss or h:mm:ss."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta(seconds: float | None) -> str:
    """An ETA: m:ss or h:mm:ss, ``--:--`` when unknown."""
    return NO_ETA if seconds is None else duration(seconds)


def side_line(s: SideState) -> str:
    """`42/300 steps · 3.2 steps/s · ETA 1:20 · running` for one side (headless progress)."""
    rate = "- steps/s" if not s.rate else f"{s.rate:.{1 if s.rate < 100 else 0}f} steps/s"
    status = status_words(s.status, s.exit_code)
    return f"{count(s.step, s.total)} steps · {rate} · ETA {eta(s.eta)} · {status}"


def side_status(state: SideState, *, live: bool = True, compact: int = 0) -> tuple[str, str]:
    """One line on a side's progress for a pane, and its status name (for styling).

    `compact` 1 drops words for a narrow pane ("running · 138/3000 · 41/s · ETA 1:10"), 2 also
    the total ("running · 138 · 41/s · ETA 1:10"). Counts are steps done / steps planned.
    """
    status = state.status
    parts = [status_words(status, state.exit_code)]
    if state.step is not None:
        done = count(state.step, state.total if compact < 2 else None)
        parts.append(done if compact else f"{done} steps")
    if live and not state.over:
        if state.rate:
            rate = si(state.rate) if state.rate < 10 else si(round(state.rate))
            parts.append(f"{rate}/s" if compact else f"{rate} steps/s")
        if state.eta is not None:
            parts.append(f"ETA {eta(state.eta)}")
    elif status == "finished" and state.exit_code is not None:
        parts.append(f"exit {state.exit_code}")
    return " · ".join(parts), status


def divergence_line(summary: Summary, last: float | None) -> str:
    """The running divergence and the verdict so far (headless progress)."""
    first = summary.first_divergent_step
    if summary.steps_compared == 0 and first is None:
        return WAITING
    where = "none yet" if first is None else f"step {first}"
    if first is not None and summary.first_tensors:
        where += f" ({names(summary.first_tensors)})"
    now = "-" if last is None else f"{last:.3g}"
    return (
        f"div {now} · max {summary.max_divergence:.3g} · first divergent {where} · "
        f"{summary.steps_compared} compared · {summary.verdict}"
    )


def first_divergence_event(summary: Summary) -> str:
    """The one-off line told when the runs first part."""
    tensors = f" (tensors: {names(summary.first_tensors)})" if summary.first_tensors else ""
    metrics = names(summary.first_divergent_metrics) or "parameters"
    return f"first divergent step: {summary.first_divergent_step} in {metrics}{tensors}"


def parting_line(
    step: int | None,
    metrics: Sequence[str],
    tensors: Sequence[str],
    compared: int,
    *,
    complete: bool = False,
    planned: int | None = None,
    equal: str = "bitwise equal",
) -> str:
    """Where the runs part, in one line, for the pair view.

    Without a divergence it says how far the comparison went and never more: "so far" while it
    goes on, "of 300 planned" when the pair ended before its planned steps; `equal` says how
    equal (`equal_phrase`: a log written rounded is equal as printed).
    """
    if step is None:
        if not compared:
            return WAITING
        if not complete:
            return f"no divergence so far: {compared} steps {equal}"
        if planned and compared < planned:
            return f"no divergence in the {compared} of {planned} planned steps compared"
        return f"no divergence: all {compared} steps compared are {equal}"
    what = names(metrics) if metrics else "parameter digests only"
    text = f"first divergence: step {step} ({what})"
    if tensors:
        text += f" · tensors: {names(tensors)}"
    return text


def headline(summary: Summary) -> str:
    """One line: the verdict and where the runs part."""
    s = summary
    verdict = f"{s.verdict} (interrupted)" if s.interrupted else s.verdict
    lines = (s.text or {}).get("compared", 0)
    checked = s.bytes or {}
    if (first_line := bytes_first(s)) is not None:
        text = f"{verdict}: first divergent {line_parting(s, first_line)}"
        if s.reason:
            text += f" [{clean(s.reason, 300)}]"
        return text
    if s.steps_compared == 0 and lines and text_first(s) is None:
        text = f"{verdict}: no step records; {lines} text lines with numbers compared"
        if s.first_divergent_step is None and s.complete and checked.get("applied"):
            text += f", equal {equal_phrase(s)}"
    elif s.steps_compared == 0 and not lines:
        text = f"{verdict}: no step logged by both runs"
        if s.reason == "no step logged by both runs":
            return text
    elif text_first(s) is not None:
        first = text_first(s)
        assert first is not None
        where = (
            "before the first step"
            if first["step"] is None
            else f"after step {step_text(first['step'], s.step_levels)}"
        )
        text = (
            f"{verdict}: first difference in a text line {where}: line {first['line_a']} of a "
            f"`{clean(first['text_a'], 80)}`, line {first['line_b']} of b "
            f"`{clean(first['text_b'], 80)}`"
        )
    elif s.first_divergent_step is None and s.complete:
        text = f"{verdict}: {s.steps_compared} steps {equal_phrase(s)}"
    elif s.first_divergent_step is None:  # no claim of equality where coverage is missing
        text = (
            f"{verdict}: no difference in {s.values_compared} values compared "
            f"over {s.steps_compared} steps"
        )
    else:
        what = names(s.first_divergent_metrics or s.first_tensors or ["digest"])
        most = (
            f"a value in one run only: {names(s.first_one_sided)} (a null, text or a list "
            "where the other logged a number, or not logged at all)"
            if s.first_one_sided
            else f"max divergence {s.max_divergence:.3g} at step "
            f"{step_text(s.max_divergence_step, s.step_levels)}"
            if s.max_divergence_step is not None
            else "values differ in their bits only (-0.0 against 0.0, or a NaN's payload)"
            if s.first_divergent_metrics
            else "no numeric value differs (digests or labels do)"
        )
        first_step = step_text(s.first_divergent_step, s.step_levels)
        text = f"{verdict}: first divergent step {first_step} ({what}); {most}"
        among = s.first_tensors_among
        if s.first_tensors and among and len(s.first_tensors) >= among:  # none led (cuda-cpu)
            text += f"; all {among} tensors parted at once"
        elif s.first_tensors:
            text += f"; tensors that parted first: {names(s.first_tensors)}"
    lines = s.first_divergent_lines or {}
    if any(lines.values()) and text_first(s) is None:
        text += "; " + ", ".join(f"line {n:,} of {side}" for side, n in lines.items() if n)
    elif any(lines.values()):
        for side in ("a", "b"):
            n = lines.get(side)
            shown = f"{n:,}" if n else "?"
            text = text.replace(f" of {side} `", f" of {side} (file line {shown}) `", 1)
    if s.reason:
        text += f" [{clean(s.reason, 300)}]"
    if s.replicas_parted:  # a replica that parted inside a side: named first
        from tuimon.engine.judge.verdict import replica_text

        parted = "; ".join(
            clean(replica_text(p["side"], p["rank"], p["step"], p["tensors"]), 200)
            for p in s.replicas_parted[:4]
        )
        more = f" (and {len(s.replicas_parted) - 4} more)" if len(s.replicas_parted) > 4 else ""
        text = f"{verdict}: {parted}{more}; between the sides: {text.removeprefix(verdict + ': ')}"
    return text


def beyond_line(summary: Summary) -> str | None:
    """Where a DIVERGED pair first went past its tolerance or band, when that is not where
    it first differed bitwise (a tolerance, or a band): `  beyond at step 40: loss a 1.2 b
    1.3, abs diff 0.1, rel diff 0.077, beyond the band abs 2e-06, rel 1e-06 (10 runs of
    sweep ID)`; None otherwise."""
    if summary.verdict != "DIVERGED" or not summary.beyond:
        return None
    if not summary.tolerance and summary.band is None:
        return None  # bitwise: the headline's first divergent step is where it went past
    from tuimon.report.ci import verdict_message

    said = verdict_message(
        {
            "verdict": summary.verdict,
            "beyond": summary.beyond,
            "band": summary.band,
            "tolerance": summary.tolerance,
        }
    )
    return "  " + clean(said.replace("DIVERGED at step", "beyond at step", 1), None)


def equal_phrase(summary: Summary) -> str:
    """How equal an equal pair is: `bitwise equal`, or `equal as printed (4 decimals: a
    difference under 5e-05 would not show)` for a log written rounded (`precision`)."""
    precision = summary.precision or {}
    if not precision or precision.get("kind") == "bitwise":
        return "bitwise equal"
    return f"equal {precision.get('phrase', 'as printed')}"


def bytes_first(summary: Summary) -> dict[str, Any] | None:
    """The first lines whose difference no rule explains, when they are where the runs part
    (no step or text line of a reader names an earlier difference), else None."""
    first = (summary.bytes or {}).get("first")
    if not first or summary.first_divergent_step is not None or text_first(summary):
        return None
    return first


def line_parting(summary: Summary, first: Mapping[str, Any]) -> str:
    """Where two logs part when only their bytes tell it: `line 4,847 of a and b, after step
    1634 (epoch 27): data.loss.T: 7.89 against 7.91 (`...` against `...`)`."""
    a, b = first.get("line_a"), first.get("line_b")
    text = f"line {a:,} of a and b" if a == b else f"line {a:,} of a, line {b:,} of b"
    if after := (summary.bytes or {}).get("after_step"):
        text += f", {after}"
    return text + (
        f": {clean(first['what'], 120)} (`{clean(first['text_a'], 80)}` against "
        f"`{clean(first['text_b'], 80)}`)"
    )


def bytes_line(summary: Summary) -> str | None:
    """What the byte rule found, for people: `bytes: 302 lines, 0 shared byte for byte; 302
    differ (set aside: 300 for clocks, 2 for run header/end records)`; None before it ran."""
    from tuimon.engine.judge.byte_rule import REASONS

    found = summary.bytes or {}
    if not found:
        return None
    if not found.get("applied"):
        return f"bytes: not compared ({clean(str(found.get('why_not')), 120)})"
    total = found["shared_lines"] + found["compared"]
    parts = [f"bytes: {total:,} lines, {found['shared_lines']:,} shared byte for byte"]
    if first := found.get("first"):
        parts[0] = (
            f"bytes: read to line {first['line_a']:,} of a, the first no rule explains "
            f"({found['shared_lines']:,} lines before it shared byte for byte)"
        )
    if found["differ"]:
        aside = sorted(found["set_aside"].items())
        why = ", ".join(f"{n:,} for {REASONS.get(r, r)}" for r, n in aside)  # counts first
        parts.append(f"{found['differ']:,} differ" + (f" (set aside: {why})" if why else ""))
    if found["only_a"] or found["only_b"]:
        parts.append(f"on one side only: a {found['only_a']:,}, b {found['only_b']:,}")
    if precision := (summary.precision or {}).get("phrase"):
        parts.append(f"values compared {precision}")
    return "; ".join(parts)


def text_first(summary: Summary) -> dict[str, Any] | None:
    """The first differing text line when it is where the runs part first, else None."""
    first = (summary.text or {}).get("first")
    metrics = summary.first_divergent_metrics
    if not first or not (metrics and metrics[0].startswith("text line")):
        return None
    return first


def account_lines(summary: Summary) -> list[str]:
    """What every line of each side was: `read a: 120 steps, skipped no step key 3, ...`."""
    return [
        f"  read {side}: {clean(account_line(account), 400)}"
        for side, account in summary.accounts.items()
    ]


def status_words(status: str, code: int | None) -> str:
    """`tuimon.engine.judge.verdict.status_words` (`failed (exit 1)`, `interrupted (SIGTERM
    from tuimon)`), imported when a line needs it."""
    from tuimon.engine.judge.verdict import status_words as words

    return words(status, code)


def metric_max_line(name: str, worst: Mapping[str, Any]) -> str:
    """One metric's largest relative difference (`tuimon compare`): `Summary.metric_max` item."""
    return f"  {clean(name, 80):<16} max rel diff {worst['rel']:.3g} at step {worst['step']}"


def metric_parts_line(name: str, step: int, diff: Any) -> str:
    """Where one metric first parts: its step, both values in full, abs / rel / ULPs apart
    (`diff` a `tuimon.store.aligned.MetricDiff`)."""
    return (
        f"{clean(name, 80)}: step {step} · a {diff.a!r} · b {diff.b!r} · abs {diff.abs:.3g}"
        f" · rel {diff.rel:.3g} · {diff.ulps} ULP{'s' if diff.ulps != 1 else ''}"
    )


def short_command(command: str) -> list[str]:
    """A run's command from the script on: `/x/.venv/bin/python3 -m tuimon train --seed 0` is
    `tuimon train --seed 0`, `python my_train.py --lr 1` is `my_train.py --lr 1`."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1 :]
        if word.endswith(".py") or (i == 0 and "python" not in word.rsplit("/", 1)[-1]):
            return [word.rsplit("/", 1)[-1], *words[i + 1 :]]
    return words


_BOOKKEEPING = ("--save-emb", "--device")
"""Options of the reference workload a pane's title leaves out: tuimon's own file paths, and
the device (the title shows it first)."""


def title_words(command: str) -> list[str]:
    """What a pane's title shows of a run's command: `short_command` without `_BOOKKEEPING`."""
    words = short_command(command)
    if words[:2] != ["tuimon", "train"]:
        return words
    return without_options(words, _BOOKKEEPING)


def _side_only(x: str, y: str) -> bool:
    """`emb-a.npy` against `emb-b.npy`: words that differ only where `{side}` was filled in."""
    if len(x) != len(y):
        return False
    return all(p == q or {p, q} == {"a", "b"} for p, q in zip(x, y, strict=True))


def differing_words(mine: Sequence[str], other: Sequence[str]) -> list[str]:
    """The words of `mine` that differ from `other` (with the option they belong to):
    `--threads 2` when only the thread count differs; words that differ only by the side's
    letter (`{side}` filled in) are not a difference."""
    if list(mine) == list(other):
        return []
    if len(mine) != len(other):
        return [w for w in mine if w not in other]
    out: list[str] = []
    for i, (x, y) in enumerate(zip(mine, other, strict=True)):
        if x != y and not _side_only(x, y):
            if i and mine[i - 1].startswith("-") and mine[i - 1] not in out:
                out.append(mine[i - 1])
            out.append(x)
    return out
