"""The step-log format v1: records, a tolerant line reader, and `StepLogger` for training scripts.

One JSON object per line, written with orjson so float64 values round-trip exactly. Non-finite
floats are written as the strings "NaN", "Infinity" and "-Infinity" (valid JSON everywhere); the
reader also takes the bare NaN/Infinity tokens that Python's `json` writes.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tuimon.clocks import TIME_KEYS as _TIME_KEYS
from tuimon.clocks import is_clock, is_media

FORMAT = "tuimon.steplog/1"
STEP_KEYS = ("step", "_step", "global_step", "iteration")
"""Keys that make a JSON object a step record, in order of preference."""
TIME_KEYS = _TIME_KEYS
"""Numeric keys that are clocks, never compared between runs (`tuimon.clocks.is_clock` has
the whole rule: `*_runtime`, `*_per_second`, `time_ms` ...)."""
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MAX_TEXT = 4096
DIGEST_FORMAT = "tuimon.devsum/1"
"""The parameter digests written by this version (`tuimon.workload.digest`): named in the
header's env block as `digest`; logs without it carry the blake2b digests of earlier versions."""
DIGEST_TAG = "devsum1"
"""The prefix of every digest string of that format ("devsum1:<hex>"), so that a judge can tell
digests of two formats apart in the records themselves (they are never compared)."""
STATE_DIGESTS = "state_digests"
"""A step's digests of what a resume must restore, as that step begins: `rng.python`,
`rng.numpy`, `rng.torch`, `rng.cuda`, `rng.mps`, `optimizer`, `data` (`tuimon.adopt`)."""
STATE_TAG = "state1"
"""The prefix of a state digest ("state1:<16 hex digits>"): never a number, never a
parameter digest."""
RESUME_ENV = ("TUIMON_CHECKPOINT_AT", "TUIMON_CHECKPOINT", "TUIMON_RESUME_FROM")
"""What `tuimon pair --resume-at N` tells the runs of its resumed side (as `{checkpoint_at}`,
`{checkpoint}`, `{resume_from}` in the command): the first run, the step after which it saves
its checkpoint and stops, and where; the second, the checkpoint to resume from. Unset where
they do not apply (side a, which runs through)."""


@dataclass(frozen=True, slots=True)
class Header:
    """The first record of a tuimon log: who ran, with which settings, where."""

    run: dict[str, Any]
    hyper: dict[str, Any]
    env: dict[str, Any]
    format: str = FORMAT


@dataclass(frozen=True, slots=True)
class Step:
    """One training step: comparable metrics, the clock, and parameter digests."""

    step: int
    metrics: dict[str, float]
    t: float | None = None
    digest: str | None = None
    digests: dict[str, str] = field(default_factory=dict)
    clocks: dict[str, float] = field(default_factory=dict, compare=False)
    """Clocks, throughput and media metadata of the record: shown, never judged."""
    unreadable: tuple[str, ...] = ()
    """`name=text` of values that do not fit a float64 (`1e400`, an integer beyond int64):
    reported by the judge, never silently dropped."""


@dataclass(frozen=True, slots=True)
class End:
    """The last record of a run."""

    status: str
    steps: int | None = None
    wall_s: float | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Text:
    """Any line that is not a record: warnings, tracebacks, garbage. Kept, shown, never parsed."""

    text: str
    skipped: str | None = field(default=None, compare=False)
    """Why a line that looks like a record (numbers under names, a JSON object) is not one:
    one of `SKIP_REASONS`; None for plain text (`tuimon.readers.account` counts them)."""


NO_STEP_KEY = "no step key"
"""A record with numbers but no step key the readers know (`--step-key` names one)."""
KEY_ABSENT = "no field named by --step-key"
"""A record with numbers but without the field `--step-key` names."""
STEP_RANGE = "step beyond int64"
"""A record whose step does not fit a signed 64-bit integer."""
UNREADABLE = "unreadable"
"""A record that cannot be read: damaged or cut JSON, nesting too deep, a number too long."""
UNMATCHED_TEXT = "printed numbers without a step"
"""A printed line with `name: number` pairs that no built-in shape or `--pattern` reads."""
CUT_TAIL = "last line without its newline"
"""A log's last line that did not end: it may have been cut mid-number (`loss 0.12` of `loss
0.1234`), so a step it would give is skipped and said, but, like a run that stopped early, it
leaves a step missing rather than making the side's reading a minority (`Account.why`)."""
PATTERN_TIMEOUT = "--pattern timed out"
"""A printed line a `--pattern` could not be matched against within its time limit
(catastrophic backtracking, `(a|aa)+` on `aaa...!`), or not tried after the pattern gave up
on too many lines (`tuimon.readers.reading.Guarded`): its content was not read."""
IN_RECORD = "a row of a record"
"""A line that is part of a record printed over several lines (a `| key | value |` row of a
dumped table): read into that record, neither text nor skipped."""
SKIP_REASONS = (
    NO_STEP_KEY,
    KEY_ABSENT,
    STEP_RANGE,
    UNREADABLE,
    UNMATCHED_TEXT,
    CUT_TAIL,
    PATTERN_TIMEOUT,
)
MAX_LINE = 16 * 1024 * 1024
"""A longer line is not parsed, live or saved: it is skipped as `UNREADABLE` (`too_long_note`
stands for it in a live stream; the raw log keeps it whole)."""
_TOO_LONG = b"[tuimon: a line of "
UNJUDGED = "[tuimon: "
"""How the text of a line whose content tuimon could not read begins (a line too long to
parse, a CSV quote that never closes): it is not judged as text, and it blocks a verdict."""


def too_long_note(size: int) -> bytes:
    """The line passed on for a line too long to parse (the raw log holds it whole)."""
    note = f"[tuimon: a line of {size:,} bytes, too long to parse; saved whole in the raw log]"
    return note.encode() + b"\n"


def too_long(line: bytes) -> bool:
    """A line too long to parse, or the note that stands for one."""
    return len(line) > MAX_LINE or line.startswith(_TOO_LONG)


INT64 = (-(2**63), 2**63)
"""The steps a record may have: a signed 64-bit integer, [low, high)."""


def in_int64(value: int) -> bool:
    """True when an integer fits a signed 64-bit integer (what a step must)."""
    return INT64[0] <= value < INT64[1]


Record = Header | Step | End | Text


def number_of(value: Any) -> float | None:
    """A JSON metric value as float, or None when it is not a number (strings only for the
    non-finite "NaN", "Infinity", "-Infinity")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value) if abs(value) < 2**1023 else None
    if isinstance(value, str):
        return NONFINITE.get(value)
    return None


EXACT = 2**53
"""Integers from here on (in magnitude) do not all fit a float64: they are judged exactly by
their float and the rest (`low_bits`)."""
LOW_BITS = ".low_bits"
"""The metric that carries what an integer's float64 drops: `tokens.low_bits`."""


def low_bits(value: Any) -> float | None:
    """What an integer of at least 2**53 in magnitude loses as a float64 (an exact, small
    float: 1.0 for 2**53 + 1), so that two integers that round to the same float still differ;
    None for anything else. Integers are compared as integers: by this and their float."""
    if type(value) is not int or -EXACT < value < EXACT:
        return None
    return float(value - int(float(value)))


def int_text(text: str) -> int | None:
    """An integer written in text (`9007199254740993`, `-12`), or None."""
    digits = text.strip().removeprefix("-").removeprefix("+")
    return int(text) if digits.isdigit() and len(digits) < 400 else None


def _as_text(line: bytes, skipped: str | None = None) -> Text:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    if len(text) > _MAX_TEXT:
        text = f"{text[:_MAX_TEXT]}… [{len(text) - _MAX_TEXT} more characters]"
    return Text(text, skipped)


class Unreadable(str):
    """The text of a JSON number that does not fit a float64 or an int64 (kept to report)."""


def _checked_float(text: str) -> float | Unreadable:
    value = float(text)
    return Unreadable(text) if math.isinf(value) else value


def _checked_int(text: str) -> int | float | Unreadable:
    if len(text) > 20:  # beyond int64 (and Python's limit on digits may refuse it)
        return Unreadable(text)
    if text == "-0":
        return -0.0  # its sign kept, as a CSV cell or a printed `-0` is read (`float()`)
    value = int(text)
    return value if -(2**63) <= value < 2**63 else Unreadable(text)


NEGATIVE_ZERO = re.compile(rb"-0(?![\d.eE])(?<=[:\[,\s]-0)")
"""A JSON number `-0` (after `:`, `[`, `,` or a blank): orjson reads it as the integer 0, its
sign lost; a line holding one is read by `loads_checked`, which keeps it as -0.0 (one way in
every format: a CSV cell or a printed `-0` is -0.0 too, bitwise apart from 0)."""


def signed_zero(data: bytes) -> bool:
    """Whether JSON text holds the number `-0` (`NEGATIVE_ZERO`; `-0` inside a string too,
    which only sends it the slower way)."""
    return b"-0" in data and NEGATIVE_ZERO.search(data) is not None


HUGE = float(2**63)
"""orjson reads an integer beyond 64 bits (or below -2**63) as a float without a word: a value
this large is read again by Python's json (which tells) before it is believed."""


def _loads(line: bytes) -> Any:
    if signed_zero(line):
        return loads_checked(line)
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return loads_checked(line)


def loads_checked(line: bytes) -> Any:
    """Python's json: takes NaN / Infinity tokens, and keeps numbers that do not fit a float64
    or an int64 as `Unreadable` text."""
    return json.loads(line, parse_float=_checked_float, parse_int=_checked_int)


def suspect(step: Step) -> bool:
    """A metric so large that it may be an integer beyond 64 bits read as a float."""
    values = step.metrics.values()
    return bool(values) and max(map(abs, values)) >= HUGE and not all(map(math.isinf, values))


_NOT_METRICS = frozenset((*STEP_KEYS, "type", "param_digests"))
_CLOCK_KEYS = ("t", "_runtime", "time")
"""Keys of a step's clock (`Step.t`), in order of preference."""


def parse_obj(obj: Mapping[str, Any]) -> Record | None:
    """The record a decoded JSON object stands for, or None when it is not one."""
    kind = obj.get("type")
    if kind == "header":
        return _header(obj)
    if kind == "end":
        return _end(obj)
    step = obj.get("step")
    if step == 0 and type(step) is float and math.copysign(1.0, step) < 0:
        step = 0  # `"step": -0`, read with its sign (`NEGATIVE_ZERO`): step 0
    if not (type(step) is int and -(2**63) <= step < 2**63):  # else the general rule:
        step = _step_of(obj)
        if step is None:
            return None
    metrics: dict[str, float] = {}
    clocks: dict[str, float] = {}
    bad: list[str] = []
    for name, value in obj.items():
        if name in _NOT_METRICS:
            continue
        # Fast paths for a flat record (what `_add_metrics` does with a float, an int64, a string)
        kind = type(value)
        if kind is float:
            (clocks if is_clock(name) else metrics)[name] = value
        elif kind is int and -EXACT < value < EXACT:
            (clocks if is_clock(name) else metrics)[name] = float(value)
        elif kind is str:
            if value in NONFINITE:
                (clocks if is_clock(name) else metrics)[name] = NONFINITE[value]
        else:
            _add_metrics(metrics, clocks, bad, name, value)
    digests = obj.get("param_digests")
    digest = obj.get("param_digest")
    clock = None
    for key in _CLOCK_KEYS:
        if key in obj:
            clock = number_of(obj[key])
            break
    return Step(
        step=step,
        metrics=metrics,
        t=clock,
        digest=digest if isinstance(digest, str) else None,
        digests={k: v for k, v in digests.items() if isinstance(v, str)}
        if isinstance(digests, dict)
        else {},
        clocks=clocks,
        unreadable=tuple(bad),
    )


def _header(obj: Mapping[str, Any]) -> Header:
    """A header record's fields (a missing or mistyped one: empty, or the current format)."""
    return Header(
        run=_dict(obj.get("run")),
        hyper=_dict(obj.get("hyper")),
        env=_dict(obj.get("env")),
        format=_str(obj.get("format"), FORMAT),
    )


def _end(obj: Mapping[str, Any]) -> End:
    """An end record's fields (a missing or mistyped one: "ok" or None)."""
    steps = obj.get("steps")
    return End(
        status=_str(obj.get("status"), "ok"),
        steps=steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
        wall_s=number_of(obj.get("wall_s")),
        artifacts=_dict(obj.get("artifacts")),
    )


def _step_of(obj: Mapping[str, Any]) -> int | None:
    """The step of a record under the first of `STEP_KEYS` that holds an integer in range
    (None when none does)."""
    for key in STEP_KEYS:
        step = obj.get(key)
        if isinstance(step, int) and not isinstance(step, bool) and in_int64(step):
            return step
    return None


_STEP_LIKE = (*STEP_KEYS, "iter", "current_steps", "it", "epoch")


def why_not_step(obj: Mapping[str, Any], key: str | None = None) -> str | None:
    """Why a decoded JSON object that is not a record was skipped (`SKIP_REASONS`): a step key
    (`key` when given) out of range, or numbers without a step key; None when it holds no
    number (metadata)."""
    for name in (key,) if key is not None else _STEP_LIKE:
        step = obj.get(name)
        if isinstance(step, Unreadable) or (type(step) is int and not in_int64(step)):
            return STEP_RANGE
        if isinstance(step, float) and abs(step) >= HUGE:
            return STEP_RANGE
    numeric = (int, float, Unreadable)
    if any(isinstance(v, numeric) and not isinstance(v, bool) for v in obj.values()):
        return KEY_ABSENT if key is not None and key not in obj else NO_STEP_KEY
    return None


def _add_metrics(
    out: dict[str, float],
    clocks: dict[str, float],
    bad: list[str],
    name: str,
    value: Any,
    depth: int = 0,
    shown: bool = False,
) -> None:
    """A number as a metric, or into `clocks` when it is a clock or media metadata (or under
    one); a nested object's numbers as dotted names (`train.loss`); a number too big for a
    float64 or an int64 into `bad`."""
    shown = shown or is_clock(name)
    if isinstance(value, dict):
        if depth < 4:
            shown = shown or is_media(value)
            for key, inner in value.items():
                _add_metrics(out, clocks, bad, f"{name}.{key}", inner, depth + 1, shown)
        return
    if isinstance(value, Unreadable) or (
        isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63
    ):
        bad.append(f"{name}={value}")
        return
    number = number_of(value)
    if number is not None:
        (clocks if shown else out)[name] = number
        if not shown and (low := low_bits(value)) is not None:
            out[name + LOW_BITS] = low


def _str(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


_NAMED_NUMBER = re.compile(rb"""['"]\s*:\s*[-+]?[\d.]""")


def damaged(stripped: bytes) -> str | None:
    """`UNREADABLE` for an object that cannot be read but holds a number under a name (a
    record cut short, nested too deep, a number too long); None for garbage in braces."""
    return UNREADABLE if _NAMED_NUMBER.search(stripped[: 1 << 20]) else None


def parse_line(line: bytes) -> Record:
    """One line of a step log as a record. Never raises: what is not a record is `Text`."""
    if too_long(line):  # the note a live stream passes on for it: the same text saved and live
        return _as_text(
            line if line.startswith(_TOO_LONG) else too_long_note(len(line)), UNREADABLE
        )
    stripped = line.strip()
    if not stripped.startswith(b"{"):
        return _as_text(line)
    try:
        obj = _loads(stripped)
    except (ValueError, RecursionError):
        return _as_text(line, damaged(stripped))
    if not isinstance(obj, dict):
        return _as_text(line)
    try:
        record = parse_obj(obj)
        if isinstance(record, Step) and suspect(record):
            record = parse_obj(loads_checked(stripped)) or record
        return record or _as_text(line, why_not_step(obj))
    except (RecursionError, ValueError):
        return _as_text(line, damaged(stripped))


def _plain(value: Any) -> Any:
    """numpy / torch scalars and arrays as Python values; anything else as it is."""
    if hasattr(value, "tolist") and getattr(value, "ndim", 1) != 0:
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return value


def _default(value: Any) -> Any:
    plain = _plain(value)
    if plain is not value:
        return plain
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to a step log")


def jsonable(value: Any) -> Any:
    """Non-finite floats (at any depth) as the strings "NaN", "Infinity", "-Infinity"."""
    value = _plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(obj: Mapping[str, Any]) -> bytes:
    """One record as a line of bytes (newline included), floats lossless, non-finite as strings."""
    return orjson.dumps(jsonable(dict(obj)), default=_default) + b"\n"


def base_env() -> dict[str, Any]:
    """The part of the environment fingerprint that needs no framework."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "env_vars": {
            k: os.environ[k]
            for k in (
                "OMP_NUM_THREADS",
                "OMP_WAIT_POLICY",
                "OMP_PROC_BIND",
                "GOMP_SPINCOUNT",
                "KMP_BLOCKTIME",
                "MKL_NUM_THREADS",
                "CUBLAS_WORKSPACE_CONFIG",
                "PYTORCH_ENABLE_MPS_FALLBACK",
                "CUDA_VISIBLE_DEVICES",
                "PYTHONHASHSEED",
            )
            if k in os.environ
        },
    }


class StepLogger:
    """Writes a tuimon step log from any training script.

    >>> log = StepLogger(run={"name": "mine"}, hyper={"lr": 1e-3})   # header, to stdout
    >>> log.step(0, train_loss=4.7)                                   # one step record
    >>> log.close("ok")                                               # end record
    """

    def __init__(
        self,
        file: str | Path | IO[bytes] | None = None,
        *,
        run: Mapping[str, Any] | None = None,
        hyper: Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
    ) -> None:
        if file is None:
            self._fh: IO[bytes] = sys.stdout.buffer
            self._owned = False
        elif isinstance(file, (str, Path)):
            self._fh = open(file, "wb")  # noqa: SIM115 - closed in close()
            self._owned = True
        else:
            self._fh = file
            self._owned = False
        self._start = time.perf_counter()
        self._steps = 0
        self._closed = False
        self._write(
            {
                "type": "header",
                "format": FORMAT,
                "run": dict(run or {}),
                "hyper": dict(hyper or {}),
                "env": {**base_env(), **dict(env or {})},
            }
        )

    def _write(self, obj: Mapping[str, Any]) -> None:
        self._fh.write(dumps(obj))
        self._fh.flush()

    def elapsed(self) -> float:
        """Seconds since the logger was opened."""
        return time.perf_counter() - self._start

    def step(self, step: int, **metrics: Any) -> None:
        """Write one step record; `t` (seconds since start) is added unless given."""
        metrics.setdefault("t", self.elapsed())
        self._write({"type": "step", "step": int(step), **metrics})
        self._steps += 1

    def close(self, status: str = "ok", **extra: Any) -> None:
        """Write the end record (once) and close a file the logger opened."""
        if self._closed:
            return
        self._closed = True
        self._write(
            {
                "type": "end",
                "status": status,
                "steps": self._steps,
                "wall_s": self.elapsed(),
                **extra,
            }
        )
        if self._owned:
            self._fh.close()

    def __enter__(self) -> StepLogger:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close("ok" if exc_type is None else "error")
