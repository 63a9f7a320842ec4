"""Which values are clocks or throughput: shown, never judged. The one place for the rule
(every reader, `tuimon.steplog` and the judge of text lines ask here); nothing of the package
imported, so anything may use it.

The rule is by principle: a clock needs a clock unit, or a clock name as its whole leaf (the
name's last part, `time/fps` -> `fps`) or as the leaf's last word; a name that only contains a
clock word is a metric (`Duration Loss`, `time_loss`):
- a clock name: `time`, `eta`, `elapsed`, `timestamp`, `runtime`, `duration`, `latency`,
  `wall`, `dt`, `data` (data-loading time), `maintenance` ... as the leaf or its last word
  (`iter_time`, `time/time_elapsed`; a statistic after it is no word: `time_avg`), or first
  before `per` (`time_per_step`);
- a clock unit: the last word (`step_ms`, `total_sec`), the first before `per`
  (`ms_per_iter`, `sec_per_tick`), a unit per thing (`sec/tick`, `sec/kimg`, `s/it`) or in
  brackets (`time(s)`, `Duration [ms]`);
- a clock section: every leaf under `Timing/`, `timers/` is a clock (`Timing/total_sec`);
- a rate is a clock: `*_per_second`, `*/s`, `fps`, `tok/s`, `it/s`, `mfu`, `tflops`,
  `throughput`, `speed`, utilisation;
- a counter is never a clock, whatever its prefix: `total_*`, `num_*`, `*tokens*`,
  `consumed_*`, `*flops*` / `*flos*`, `*count*`, `*steps*`, `tick`, `kimg` (a changed token
  count is a changed data pipeline).

In printed text (`mask_clocks`), the same names before a number, numbers with a time or rate
unit (`0.12s`, `77ms`, `3.4it/s`), dates, times of day and durations (`12:01:33`, `0:01:23`)
are clocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

import orjson

TIME_KEYS = frozenset({"t", "time", "timestamp", "_timestamp", "_runtime", "wall_s", "elapsed"})
"""The clocks of the step-log format (`tuimon.steplog.TIME_KEYS`)."""
CLOCK_NAMES = TIME_KEYS | {
    "dt", "mfu", "lap", "duration", "runtime", "throughput", "it/s", "s/it", "eta", "wps",
    "tps", "ips", "fps", "sps", "ups", "tflops", "gb_free", "remaining", "data", "speed",
    "passed", "left", "time_left", "maintenance",
}  # fmt: skip
"""Whole names that are clocks, throughput or work done per second."""
_UNITS = frozenset(
    {"ms", "us", "ns", "µs", "sec", "secs", "second", "seconds", "min", "mins", "minutes",
     "hr", "hrs", "hours", "days"}
)  # fmt: skip
_UNIT = r"(?:s|ms|us|ns|µs|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?)"
_UNIT_PER = re.compile(rf"(?:^|[/_.\s]){_UNIT}/[a-z]\w*$", re.IGNORECASE)
"""A time unit per thing as the name's tail: `sec/tick`, `sec/kimg`, `s/it`, `ms/step`."""
_UNIT_BRACKETED = re.compile(rf"\S\s*[(\[]\s*{_UNIT}\s*[)\]]$", re.IGNORECASE)
"""A time unit in brackets after a name: `time(s)`, `Duration [ms]`."""
_SECTIONS = frozenset({"timing", "timings", "timer", "timers"})
"""Sections whose every leaf (but a counter) is a clock: `Timing/total_sec`."""
_CLOCK_WORDS = frozenset(n for n in CLOCK_NAMES if len(n) > 1 and n != "data")
"""Clock names that make a clock as a leaf's last word (`eval_eta`, `step_throughput`)."""
_STATS = frozenset(
    {"avg", "mean", "max", "min", "std", "median", "ema", "smooth", "smoothed", "last", "sum",
     "p50", "p90", "p95", "p99"}
)  # fmt: skip
"""Words after a name that say which statistic of it is shown (`iter_time_avg`)."""
_TIMES = frozenset(
    {"time", "times", "timestamp", "timestamps", "runtime", "elapsed", "duration", "wall",
     "walltime", "latency", "dt", "eta", "remaining", "clock", "lap", "timer", "timing",
     "timings"}
)  # fmt: skip
_PHASES = _TIMES | {
    "data", "updt", "update", "fwd", "bwd", "forward", "backward", "load", "loading", "io",
    "sync", "wait", "opt", "optim", "optimizer", "env", "rollout", "inference", "compute",
    "eval", "train",
}  # fmt: skip
"""Words that, before a bare `s` or `h` (`data_s`, `updt_s`, `eval_s`), name time spent on a
phase of work: the `s` is seconds. Before other words (`loss_s`) it is not a unit."""
_RATES = frozenset(
    {"fps", "tps", "wps", "ips", "sps", "ups", "mfu", "tflops", "throughput", "speed", "util",
     "utilization", "utilisation", "persec", "tokps", "hz"}
)  # fmt: skip
_COUNTERS = ("total", "num", "tokens", "token", "consumed", "flops", "flos", "count", "seen")
_RATE_TAIL = re.compile(
    r"(_|\b)per_?(second|sec|s)$|/s(ec)?$|(^|_)(ps|per_s)$|^s/it$|(^|_)(tok|tokens|samples|img|"
    r"images|it|items|ex|examples|seqs|words|updates|steps|batches)_?(ps|s)$",
    re.IGNORECASE,
)
_INDEX = re.compile(r"(?:\[\d+\]|\.\d+)+$")
"""The index of a list's item at the end of a name (`[3]`, `.3`)."""
_WORDS = re.compile(r"[_\s\-]+|(?<=[a-z])(?=[A-Z])")


def leaf(name: str) -> str:
    """The last part of a nested name (`train/time/fps` -> `fps`; `a.b` -> `b`; an item of a
    list is named by its list: `epoch_time[3]`, `epoch_time.3` -> `epoch_time`); a unit
    written with a slash (`tok/s`, `it/s`) stays whole."""
    name = _INDEX.sub("", name) or name
    if re.search(r"/(s|sec|it)$", name, re.IGNORECASE):
        return name.rsplit(".", 1)[-1]
    return re.split(r"[/.]", name)[-1] or name


@lru_cache(maxsize=8192)
def is_clock(name: str) -> bool:
    """True for a clock or a rate (`t`, `time`, `train_runtime`, `eval_samples_per_second`,
    `step_time_ms`, `ms_per_iter`, `time/fps`, `mfu`, `sec/kimg`, `Timing/total_sec` ...),
    which depends on the machine, not on the computation; False for a counter
    (`throughput/total_tokens`, `total_training_Gflops`, `num_tokens`), which is judged, and
    for a name that only contains a clock word (`Duration Loss`, `time_loss`). Cached per name
    (bounded). `--judge NAME` judges a clock anyway."""
    lower = name.lower()
    if lower in CLOCK_NAMES or _UNIT_PER.search(lower) or _UNIT_BRACKETED.search(lower):
        return True
    last = leaf(name)
    low = last.lower()
    if (low in CLOCK_NAMES and len(low) > 1) or _RATE_TAIL.search(low):
        return True  # one letter is a clock only as the whole name (`t`, not `loss.T`)
    words = [w.lower() for w in _WORDS.split(last) if w]
    if any(w in _RATES for w in words):
        return True
    if _counter(words):
        return False
    sections = {part.lower() for part in re.split(r"[/.]", name)[:-1]}
    return bool(sections & _SECTIONS) or _clock_words(words) or low in ("data", "data_time")


def _counter(words: list[str]) -> bool:
    """A counter's words (`total_tokens`, `num_steps`, `consumed_samples`): never a clock,
    unless a clock name or unit ends it (`total_time`, `total_sec`)."""
    if not any(w.startswith(_COUNTERS) or w.endswith(("tokens", "flops", "flos")) for w in words):
        return False
    strong = any(w in ("tokens", "token", "flops", "flos", "num", "consumed") for w in words)
    return strong or not _clock_words(words)


def _clock_words(words: list[str]) -> bool:
    """A leaf's words that make a clock: a clock name or a unit as the last word (a statistic
    after it aside: `iter_time_avg`), or first before `per` (`time_per_step`,
    `ms_per_iter`); a clock word elsewhere names a metric (`time_loss`)."""
    while len(words) > 1 and words[-1] in _STATS:
        words = words[:-1]
    if not words:
        return False
    end = words[-1]
    if end in _TIMES or end.endswith(("time", "timestamp")) or end in _CLOCK_WORDS:
        return True
    if len(words) > 1 and (end in _UNITS or (end in ("s", "h") and set(words) & _PHASES)):
        return True  # `step_ms`, `total_sec`; `time_this_iter_s`, `data_s` (not `loss_s`)
    return len(words) > 2 and words[1] == "per" and (words[0] in _TIMES or words[0] in _UNITS)


def is_media(value: object) -> bool:
    """True for a W&B media object (an image, a table, a histogram file ...): a mapping with a
    string `_type`; its fields (`size`, `sha256`, `path` ...) describe a file, not the run."""
    return isinstance(value, dict) and isinstance(value.get("_type"), str)


# --- clocks in printed text --------------------------------------------------------------------

_NUM = r"[-+]?(?:\d{1,3}(?:_\d{3})+|\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_CLOCK_SPANS = re.compile(
    # dates and times of day: 2023-01-01, 2023/01/01 12:00:00,123, 12:01:33, [00:01<00:02]
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T_ ]\d{1,2}[:.]?\d{2}(?:[:.]?\d{2}(?:[.,]\d+)?)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,3}(?::\d{2}){1,2}(?:[.,]\d+)?\b"
    r"|\b\d+\s*days?,\s*\d+:\d{2}:\d{2}"
    # a duration in units: 1h 02m 03s, 5m 12s, 2d 03h
    r"|\b\d+[dhms](?:\s\d+[hms])+\b"
    # month names (Jan 01, 01-Jan-2023)
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*[ -]+\d{1,2}\b"
    # a number with a time or rate unit: 0.12s, 77 ms, 3.4it/s, 12.3 samples/sec, 5 tok/s
    rf"|(?<![\w.]){_NUM}\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|"
    r"days?)\b(?!/)"
    rf"|(?<![\w.]){_NUM}\s?(?:[A-Za-z]+/(?:s|sec|second|it)\b|s/it\b|it/s\b|/s\b|/sec\b)"
    rf"|(?<![\w.]){_NUM}\s?(?:ms|us|µs|ns|s)/(?:step|it|iter|batch|sample|token|tok|img)\b"
    # a number with a multiplier and a rate (1.2k tok/s)
    rf"|(?<![\w.]){_NUM}[kKMGT]\s?[A-Za-z]*/s\b",
)
_NAMED = re.compile(
    # a name begins where a run of name characters begins (after any `-`, `.` or `/` that
    # opens it) and takes the run whole: time linear in a line (a run of 8,000 letters was
    # tried from each of its letters, each try to its end: seconds a line)
    r"(?<![\w./-])[./-]*+"
    r"(?P<name>[A-Za-z_][\w./-]*+(?:[ ][A-Za-z_][\w./-]*+)?(?:\s?[(\[][A-Za-z%µ/]{1,8}[)\]])?)"
    r"\s*(?:[:=]\s*|\s)"
    rf"(?P<value>{_NUM})(?P<avg>\s*\(\s*{_NUM}\s*\))?"
)
NUMBER = re.compile(rf"(?<![\w.]){_NUM}(?![\w]|\.\d)")
"""A number in printed text that stands alone (not part of a word, a name or a version)."""


def mask_clocks(text: str) -> str:
    """A printed line with its clocks blanked to `~`: dates, times, durations, numbers with
    a time or rate unit, and numbers (with a running average in parentheses) under a clock's
    name (`time: 0.51 (0.53)`, `eta 0:01:23`, `data 0.01`)."""
    text = _CLOCK_SPANS.sub("~", text)

    def named(m: re.Match[str]) -> str:
        words = m["name"].split()
        if any(is_clock(w) for w in (m["name"], words[-1])):
            return m.group(0)[: m.start("value") - m.start()] + "~"
        return m.group(0)

    return _NAMED.sub(named, text)


def text_numbers(text: str) -> tuple[str, ...]:
    """The numbers of a printed line that are judged: every number standing alone, once its
    clocks are masked (`mask_clocks`); a JSON object's values but those under a clock's key
    (`is_clock`), nested ones and list items included."""
    body = text.strip()
    if body[:1] == "{" and body[-1:] == "}":
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            return tuple(_json_numbers(obj))
    return tuple(m.group(0).lstrip("+") for m in NUMBER.finditer(mask_clocks(text)))


def _json_numbers(value: object, depth: int = 0) -> Iterator[str]:
    if depth > 16:
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            if not is_clock(str(key)):
                yield from _json_numbers(inner, depth + 1)
    elif isinstance(value, list):
        for inner in value:
            yield from _json_numbers(inner, depth + 1)
    elif isinstance(value, (bool, int, float)):
        yield repr(value)
    elif isinstance(value, str):
        yield from text_numbers(value)
