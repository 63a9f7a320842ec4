"""Plain text a training script prints -> steps: built-in shapes and user patterns (`--pattern`).

Built in, for any line that names a step and at least one number:

    step 100: loss 2.31                          iter 100: loss 2.3100, time 77.43ms, mfu 5.00%
    step 100: train loss 2.3100, val loss 2.32   Epoch 3: 100%|███| 50/50 [00:01, loss=0.12]
    step=100 loss=2.31 acc=0.5                   [step 100] loss: 2.31 | lr: 1e-3

A value with a time unit (`77.43ms`, `1.2s`) is a clock, never compared. tqdm-style progress
(`\\r` redraws) is read at its last state; terminal colour codes are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from tuimon.clocks import is_clock
from tuimon.readers.rows_to_steps import LEVEL as LEVEL
from tuimon.readers.rows_to_steps import LEVELS_NOTE as LEVELS_NOTE
from tuimon.readers.rows_to_steps import as_int, as_number, levels_fit
from tuimon.steplog import LOW_BITS, Step, Unreadable, int_text, low_bits

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_NUM = r"[-+]?(?:\d{1,3}(?:_\d{3})+|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b"
_STEP = re.compile(
    r"(?<![\w./])(?P<key>global[_ ]step|num_updates|step|iteration|iter|batch_id|it|tick|epoch)\b"
    r"\s*[:=#]?\s*\[?\s*"
    r"(?P<n>\d+)(?![,.]\d)(?P<of>\s*/\s*\d+)?\b"
    r"|^\s*(?P<key2>s):(?P<n2>\d+)\b",  # llm.c: `s:5000 trl:3.63 lr:0.0006 norm:0.31`
    re.IGNORECASE,
)


@lru_cache(maxsize=16)
def _named_step(key: str) -> re.Pattern[str]:
    """The step of a printed line under the name `--step-key` gives."""
    return re.compile(
        r"(?<![\w.])(?P<key>" + re.escape(key) + r")\s*[:=#]?\s*\[?\s*(?P<n>\d+)(?:\s*/\s*\d+)?\b"
    )


_TWO_LEVEL = re.compile(
    # Epoch [7][2750/6207] (mmcv), Epoch: [108]  [ 50/500] (MetricLogger), Train Epoch: 1
    # [640/60000 (1%)] (PyTorch examples), Train: 3 [ 50/625 ( 8%)] (timm), [1,  2000] loss:
    r"(?<![\w./])(?:epoch|train|training)\b\s*[:=#]?\s*\[?\s*(?P<outer>\d+)\s*(?:/\s*\d+\s*)?\]?"
    r"\s*[\[(]\s*(?P<inner>\d+)\s*(?:/\s*\d+)?\s*(?:\(\s*[\d.]+%\s*\))?\s*[\])]"
    r"|^\s*\[\s*(?P<outer2>\d+)\s*,\s*(?P<inner2>\d+)\s*\]",
    re.IGNORECASE,
)


_BAR = re.compile(r"\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[\d+:\d+(?::\d+)?<")
"""A tqdm bar: `| 1/475 [00:07<59:23, 7.52s/it]` (its count is a step when nothing else is)."""


def _epoch_and_of(steps: list[re.Match[str]], best: re.Match[str] | None) -> tuple[int, int] | None:
    """(epoch, iteration) of a line that names an epoch, then a finer counter out of a total
    (`epoch 1 - iter 0/4`: the iteration restarts each epoch), else None."""
    epoch = next((m for m in steps if _key(m) == "epoch"), None)
    if epoch is None or best is None or best is epoch or not best.groupdict().get("of"):
        return None
    outer, inner = as_int(_n(epoch)), as_int(_n(best))
    if best.start() < epoch.start() or outer is None or inner is None:
        return None
    return (outer, inner) if levels_fit(outer, inner) else None


def two_level(text: str) -> tuple[int, int, int] | None:
    """(epoch, iteration, where the levels end) of a line whose step has two levels, or None:
    bracketed (`_bracketed`) or named (`epoch 1 - iter 0/4`)."""
    found = _bracketed(text)
    if found is None:
        steps = list(_STEP.finditer(text))
        best = min(steps, key=lambda m: _RANK.get(_key(m), 9)) if steps else None
        pair = _epoch_and_of(steps, best)
        return (*pair, steps[0].start()) if pair else None
    return found


def _bracketed(text: str) -> tuple[int, int, int] | None:
    """(epoch, iteration, where the levels end) of `Epoch [7][2750/6207]`-like steps; None
    for a line without them, or whose levels one step cannot hold (`levels_beyond`)."""
    found = _bracketed_levels(text)
    return found if found is not None and levels_fit(found[0], found[1]) else None


def _bracketed_levels(text: str) -> tuple[int, int, int] | None:
    """`_bracketed`'s levels as printed, whether or not one step can hold them."""
    m = _TWO_LEVEL.search(text)
    if m is None:
        return None
    first = m["outer"] is not None
    outer, inner = (m["outer"], m["inner"]) if first else (m["outer2"], m["inner2"])
    if len(outer) > 40 or len(inner) > 40:
        return int("9" * 40), 0, m.end()  # beyond any step (not parsed: a digit bomb)
    return int(outer), int(inner), m.end()


def levels_beyond(text: str) -> bool:
    """A line that prints two-level steps one step cannot hold (`levels_fit`): it is skipped
    and said (`STEP_RANGE`), never read as its epoch alone (the iteration dropped)."""
    found = _bracketed_levels(text)
    return found is not None and not levels_fit(found[0], found[1])


def step_text(step: int, levels: bool) -> str:
    """A step as a person reads it: `2750 (epoch 7)` for a two-level step, else the number."""
    if levels and step >= LEVEL:
        return f"{step % LEVEL} (epoch {step // LEVEL})"
    return str(step)


def _key(m: re.Match[str]) -> str:
    found = m.groupdict()
    return (found["key"] or found.get("key2") or "").lower()


def _n(m: re.Match[str]) -> str:
    found = m.groupdict()
    return str(found["n"] if found["n"] is not None else found.get("n2"))


_PAIR = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z_][\w./-]*(?: [A-Za-z_][\w./-]*)?"
    r"(?:\s?[(\[][A-Za-z%µ/]{1,8}[)\]])?)\s*(?:[:=]\s*|\s)"
    r"(?P<value>" + _NUM + r")(?:(?P<unit>ms|us|µs|s|%)|\s(?P<unit2>sec|secs|seconds|ms|s)\b)?"
    r"(?![\w.]|[,:]\d)"  # not 3,201 or 5:06
    r"(?:\s*\(\s*(?P<avg>" + _NUM + r")\s*\))?",  # a running average: `loss 1.23 (1.45)`
    re.IGNORECASE,
)
_RANK = {
    "global step": 0, "global_step": 0, "num_updates": 0, "step": 1, "iteration": 2, "iter": 2,
    "batch_id": 2, "it": 3, "s": 3, "tick": 3,
}  # fmt: skip
STEP_GROUPS = ("step", "iter", "iteration", "global_step", "epoch")
"""Group names a `--pattern` may use for the step."""


class PatternError(ValueError):
    """A `--pattern` that cannot be used (one line for the user)."""


def compile_pattern(text: str) -> Any:
    """A user's `--pattern`: a regex with a named group for the step and one per metric.
    Compiled by the `regex` module (the syntax of `re`), whose matches take a time limit and
    let other threads run (`tuimon.readers.reading.Guarded`)."""
    import regex  # only for a --pattern (16 ms of every start otherwise)

    try:
        pattern = regex.compile(text)
    except (regex.error, RecursionError, OverflowError, ValueError) as exc:
        raise PatternError(f"--pattern {text!r}: not a regular expression ({exc})") from None
    groups = set(pattern.groupindex)
    if not groups & set(STEP_GROUPS):
        raise PatternError(
            f"--pattern {text!r} needs a named group for the step, e.g. (?P<step>\\d+)"
        )
    if not groups - set(STEP_GROUPS):
        raise PatternError(
            f"--pattern {text!r} needs a named group per metric, e.g. (?P<loss>[-+.\\deE]+)"
        )
    return pattern


def last_state(text: str) -> str:
    """A line as a terminal shows it: the last `\\r` redraw, without colour codes."""
    text = text.rstrip("\r\n")
    if "\r" in text:
        text = next((part for part in reversed(text.split("\r")) if part.strip()), "")
    return _ANSI.sub("", text) if "\x1b" in text else text


def _name(raw: str) -> str:
    return re.sub(r"[\s/-]+", "_", raw.strip()).strip("_").lower()


def parse_text(
    text: str,
    patterns: Sequence[re.Pattern[str]] = (),
    key: str | None = None,
    *,
    bare: bool = False,
) -> Step | None:
    """The step a printed line stands for, or None. User patterns, when given, replace the
    built-in shapes; `key` (`--step-key`) names the step. Only what follows the first mention
    of a step is read (a logger's prefix before it, `host:0 module:990`, is not data).
    `bare`: a line that names a step and nothing else is a step without values (it may open
    a block of `name=value` lines, `block_value`)."""
    if patterns:
        return _by_patterns(text, patterns)
    levels = _bracketed(text) if key is None else None
    if key is None and levels is None and levels_beyond(text):
        return None  # skipped and said (`step_beyond_int64`), never its epoch alone
    steps = list((_named_step(key) if key else _STEP).finditer(text))
    if not steps and levels is None and (key is not None or not _BAR.search(text)):
        return None
    # the finest counter on the line: step/iter over epoch ("Epoch 3, step 120: ...")
    best = min(steps, key=lambda m: _RANK.get(_key(m), 9)) if steps else None
    if levels is None and (pair := _epoch_and_of(steps, best)) is not None:  # `epoch 1 - iter 0/4`
        spans = [m.span() for m in steps]
        return _values(text, steps[0].start(), spans, pair[0] * LEVEL + pair[1], bare)
    if levels is None and best is None and (bar := _BAR.search(text)) is not None:
        step = as_int(bar["n"])  # a tqdm bar's count, values before it (allennlp)
        if step is not None:
            return _values(text[: bar.start()], 0, [], step, False)
    if best is None and levels is None:
        return None
    if levels is not None and (best is None or _key(best) == "epoch"):
        return _values(text, levels[2], [(0, levels[2])], levels[0] * LEVEL + levels[1], bare)
    assert best is not None
    spans = [m.span() for m in steps]
    epochs = [int(_n(m)) for m in steps if m is not best and _key(m) == "epoch"]
    step = as_int(_n(best))
    if step is None:  # beyond int64: skipped
        return None
    found = _values(text, steps[0].start(), spans, step, bare)
    if found is None or not (found.metrics or found.unreadable):  # `loss = 0.12, step = 1001`
        before = _values(text[: steps[0].start()], 0, spans, step, False)
        found = before if before is not None else found
    if found is not None and epochs:  # an integer, compared as one (`low_bits`)
        found.metrics["epoch"] = float(epochs[-1])
        if (low := low_bits(epochs[-1])) is not None:
            found.metrics["epoch" + LOW_BITS] = low
    return found


_FUNCTION_WORDS = frozenset(
    {"of", "no", "any", "the", "a", "an", "for", "with", "without", "is", "are", "was", "were",
     "has", "had", "all", "if", "to", "in", "on"}
)  # fmt: skip


def heading_values(text: str, step: int) -> Step | None:
    """The values a line prints under a heading that named only a step (Keras' `Epoch 3/10`,
    then `1563/1563 [====] - 5s - loss: 0.3 - accuracy: 0.9`), when it names no step itself."""
    if _STEP.search(text) is not None:
        return None
    found = _values(text, 0, [], step, False)
    return found if found is not None and found.metrics else None


def _values(
    text: str, start: int, spans: list[tuple[int, int]], step: int, bare: bool
) -> Step | None:
    """The step of a line whose step is known: the `name value` pairs from `start` on (a
    running average in parentheses, `loss: 1.23 (1.45)`, as `loss_avg`). A pair inside a
    named section is named by it (`tr=[loss=1.2] valid=[loss=1.4]` -> `tr/loss`,
    `valid/loss`); a name that comes again on the line is never dropped (`loss#2`)."""
    metrics: dict[str, float] = {}
    clocks: dict[str, float] = {}
    bad: list[str] = []
    sections = _sections(text)
    for m in _PAIR.finditer(text, start):
        if any(start <= m.start("value") < end for start, end in spans):
            continue
        name = _name(m["name"])
        words = name.split("_")
        if words[-1] in ("step", "iter", "epoch", "it") and len(words) > 1:
            continue
        value = as_number(m["value"])
        if value is None or name in _RANK:
            continue
        if words[-1] in _FUNCTION_WORDS and m["value"][-1:].isalpha():
            continue  # `number of nan iterations`: `nan` is a word there, not a value
        if isinstance(value, Unreadable):
            bad.append(f"{name}={value}")
            continue
        unit = (m["unit"] or m["unit2"] or "").lower()
        clock = unit in ("ms", "us", "µs", "s", "sec", "secs", "seconds") or is_clock(name)
        clock = clock or is_clock(m["name"].strip())  # `sec/tick`, as printed
        section = next((n for b, e, n in sections if b <= m.start() < e), None)
        name = f"{section}/{name}" if section else name
        name = _again(name, metrics, clocks)
        (clocks if clock else metrics)[name] = value
        if not clock and (low := low_bits(int_text(m["value"]))) is not None:
            metrics[name + LOW_BITS] = low  # an integer beyond 2**53: judged exactly
        if m["avg"] is not None and (avg := as_number(m["avg"])) is not None:
            if isinstance(avg, Unreadable):
                bad.append(f"{name}_avg={avg}")
            else:
                (clocks if clock else metrics)[f"{name}_avg"] = avg
    if not metrics and not bad and not bare:
        return None
    return Step(step=step, metrics=metrics, clocks=clocks, unreadable=tuple(bad))


_SECTION = re.compile(r"(?<![\w.])(?P<name>[A-Za-z_][\w.-]*)\s*[:=]?\s*(?P<open>[\[({])")
_CLOSE = {"[": "]", "(": ")", "{": "}"}


def _sections(text: str) -> list[tuple[int, int, str]]:
    """The named sections of a line: `tr=[...]`, `valid: (...)`, `eval {...}`
    as (where its inside begins, where it ends, its name)."""
    found: list[tuple[int, int, str]] = []
    for m in _SECTION.finditer(text):
        end = text.find(_CLOSE[m["open"]], m.end())
        if end > m.end():
            found.append((m.end(), end, _name(m["name"])))
    return found


def _again(name: str, *seen: dict[str, float]) -> str:
    """A name not yet used on the line: `name`, else `name#2`, `name#3` ..."""
    if not any(name in names for names in seen):
        return name
    n = 2
    while any(f"{name}#{n}" in names for names in seen):
        n += 1
    return f"{name}#{n}"


def step_beyond_int64(text: str, key: str | None = None) -> bool:
    """A printed line that names a step too big for an int64, or two-level steps one step
    cannot hold (`levels_fit`): skipped and said, not text."""
    if key is None and levels_beyond(text):
        return True
    return any(as_int(_n(m)) is None for m in (_named_step(key) if key else _STEP).finditer(text))


_BLOCK_LINE = re.compile(
    r"^\s+(?P<name>[A-Za-z_][^=:]*?)\s*[=:]\s*(?P<value>[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|"
    + _NUM
    + r")\s*$",
    re.IGNORECASE,
)


def block_value(text: str) -> tuple[str, str] | None:
    """An indented `name=value` line (OLMo prints one per metric under `[step=200/10000]`):
    the name and the number's text (thousands separators taken out), or None."""
    m = _BLOCK_LINE.match(text)
    if m is None:
        return None
    return m["name"].strip(), m["value"].replace(",", "")


_NAMED = re.compile(
    r"(?<![\w.])[A-Za-z_][\w./-]*\s*[:=]\s*(?:" + _NUM + r")(?![\w.]|[,:]\d)", re.IGNORECASE
)


def metric_like(text: str) -> bool:
    """True for a printed line with a number under a name (`loss=2.31`, `s:5 trl:3.6`, a
    printed dict) that no shape read: a record nobody read, if its shape repeats."""
    return "{'" in text or _NAMED.search(text) is not None


def _by_patterns(text: str, patterns: Sequence[Any]) -> Step | None:
    """The step the first matching `--pattern` reads. A pattern's `search` gives None for a
    line it gave up on (`Guarded`: over its time limit), as for a line it does not match."""
    for pattern in patterns:
        m = pattern.search(text)
        if m is None:
            continue
        found = m.groupdict()
        step = next((as_int(found[g]) for g in STEP_GROUPS if found.get(g) is not None), None)
        if step is None:
            continue
        metrics: dict[str, float] = {}
        bad: list[str] = []
        for name, raw in found.items():
            if name in STEP_GROUPS or raw is None or is_clock(name):
                continue
            value = as_number(raw)
            if isinstance(value, Unreadable):
                bad.append(f"{name}={value}")
            elif value is not None:
                metrics[name] = value
        if metrics or bad:
            return Step(step=step, metrics=metrics, unreadable=tuple(bad))
    return None
