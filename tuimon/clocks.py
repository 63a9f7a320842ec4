"""Which metric names are clocks or throughput: shown, never judged. The one place for the rule
(every reader and `tuimon.steplog` ask `is_clock`); no imports, so anything may use it."""

from __future__ import annotations

import re
from functools import lru_cache

TIME_KEYS = frozenset({"t", "time", "timestamp", "_timestamp", "_runtime", "wall_s", "elapsed"})
"""The clocks of the step-log format (`tuimon.steplog.TIME_KEYS`)."""
CLOCK_NAMES = TIME_KEYS | {
    "dt",
    "mfu",
    "lap",
    "duration",
    "runtime",
    "throughput",
    "it/s",
    "s/it",
    "eta",
    "wps",
    "tps",
    "ips",
    "fps",
    "tflops",
    "ups",
    "gb_free",
    "remaining",
}
"""Names that are clocks, throughput or counters of work done per second."""
_CLOCK = re.compile(
    # clocks: a time, a duration, a timestamp, what is left (eta, remaining)
    r"(^|[_./ -])(time|times|timestamp|runtime|elapsed|duration|wall|latency|dt)"
    r"(_?(s|ms|us|sec|secs|seconds))?$"
    r"|(^|[_./ -])(timestamp|elapsed|remaining|eta)([_./ -]|$)|^eta"
    r"|[_./ -](seconds|secs|sec|ms|us)$|(^|_)(time|dt)_(s|ms|us|sec)(_|$)"
    # throughput and utilisation: per second, tok/s, flops, mfu, utilisation
    r"|_per_(second|sec|s)$|per_second|/s(ec)?$"
    r"|(^|[_./ -])(tok|toks|tokens|img|imgs|images|samples|steps|it|items|ex|examples|seqs"
    r"|words|updates)_?(per_?s|/s|ps|_s)$"
    r"|(^|[_./ -])(tflops|flops|mfu|util|utilization|utilisation|throughput)([_./ -]|$)",
    re.IGNORECASE,
)


@lru_cache(maxsize=8192)
def is_clock(name: str) -> bool:
    """True for a clock or a throughput (`t`, `time`, `train_runtime`, `eval_samples_per_second`,
    `step_time_ms`, `mfu` ...), which depends on the machine, not on the computation. Cached per
    name (bounded): every reader asks it for every metric of every line.

    The rule, by name: ending in `time`/`_runtime`/`_seconds`/`_ms`, `_per_second`, `/s`;
    `eta*`, elapsed, remaining, timestamps; throughput and utilisation (`tok/s`,
    `samples_per_second`, `mfu`, `tflops`, `gpu_util`). `--judge NAME` judges one anyway."""
    return name in CLOCK_NAMES or name.lower() in CLOCK_NAMES or bool(_CLOCK.search(name))


def is_media(value: object) -> bool:
    """True for a W&B media object (an image, a table, a histogram file ...): a mapping with a
    string `_type`; its fields (`size`, `sha256`, `path` ...) describe a file, not the run."""
    return isinstance(value, dict) and isinstance(value.get("_type"), str)
