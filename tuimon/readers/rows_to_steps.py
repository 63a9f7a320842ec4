"""Rows of any format -> `Step` records: the step key, metrics, clocks, merging rows of one step.

Rules shared by every reader:
- the step is the first integer among `STEP_KEYS` (`epoch` only when nothing finer exists);
- numbers are metrics (nested objects as dotted names) unless they are clocks (`is_clock`);
- rows of one step with different keys are merged; a key that comes again within a step with
  another value starts a new `Step` record of the same step, so no value is dropped and repeats
  stay in order.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tuimon.clocks import is_clock, is_media
from tuimon.steplog import (
    LOW_BITS,
    NONFINITE,
    Record,
    Step,
    Unreadable,
    in_int64,
    int_text,
    low_bits,
    number_of,
)

STEP_KEYS = (
    "step", "_step", "global_step", "iteration", "iter", "current_steps", "num_updates",
    "it", "s", "tick", "epoch",
)  # fmt: skip
"""Keys that give a row its step, in order of preference: the first that holds an integer
(`epoch` only as an integer, not HF's 0.37; `--step-key` names another). A row without one
at its top level takes the first found in its nested objects (`step_path`)."""
COUNTERS = frozenset(STEP_KEYS[:7])
"""Step keys that are never metrics, even when another key is the step."""
CLOCK_FIELDS = ("t", "_runtime", "time", "elapsed", "wall_s")
"""Clocks taken as a step's `t` (seconds), in order of preference."""
_SKIP = frozenset({"type", "param_digest", "param_digests"})


def as_int(value: Any) -> int | None:
    """An integer step value (ints, integral floats, digit strings), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if in_int64(value) else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value) if in_int64(int(value)) else None
    if isinstance(value, str):
        text = value.strip()
        if text.removeprefix("-").isdecimal() and len(text) <= 20 and in_int64(int(text)):
            return int(text)
    return None


def as_float(value: Any) -> float | None:
    """A metric value as float, or None when it is not a number (or does not fit a float64,
    see `as_number`)."""
    number = as_number(value)
    return None if isinstance(number, Unreadable) else number


def as_number(value: Any) -> float | Unreadable | None:
    """A metric value as float; its text as `Unreadable` when it is a number that does not fit
    a float64 or an int64 (`1e400`, an integer beyond 64 bits), to be reported; None when it is
    not a number. Unlike a JSON step log, text cells (CSV, printed lines) that read as a number
    are numbers."""
    if isinstance(value, Unreadable):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return Unreadable(str(value))
    if isinstance(value, str) and value not in NONFINITE:
        text = value.strip()
        if not text or (text[-1:].isalpha() and text.lower() not in _NONFINITE_WORDS):
            return None
        try:
            number = float(text)
        except ValueError:
            return None
        digits = text.lstrip("+-").replace("_", "")
        if digits.isdigit() and (len(digits) > 19 or not in_int64(int(text))):
            return Unreadable(text)  # an integer beyond 64 bits (`1_000_000` too)
        if math.isinf(number) and text.lstrip("+-").lower() not in _NONFINITE_WORDS:
            return Unreadable(text)  # `1e400`: it overflowed, it is not an infinity
        return number
    return number_of(value)


_NONFINITE_WORDS = frozenset({"nan", "inf", "-inf", "infinity", "-infinity"})


NESTED_DEPTH = 3
"""Levels of nested objects searched for a step key (`step_path`)."""


def step_path(row: Mapping[str, Any], forced: str | None = None) -> tuple[str, ...] | None:
    """Where a row's step is: the keys down to it, `("step",)` at the top level, else the
    first step key of its nested objects, level by level (`{"data": {"epoch": 27, "iter":
    1634}}` -> `("data", "iter")`); `forced` (`--step-key`) may name a nested one with dots
    (`data.iter`). None when the row has none."""
    if (key := step_key(row, forced)) is not None:
        return (key,)
    if forced is not None:
        *outer, last = forced.split(".")
        inner = _nested(row, tuple(outer))
        return (*outer, last) if outer and inner and step_key(inner, last) else None
    level: list[tuple[tuple[str, ...], Mapping[str, Any]]] = [((), row)]
    for _ in range(NESTED_DEPTH):
        level = [((*path, str(k)), v) for path, m in level for k, v in m.items()
                 if isinstance(v, Mapping) and not is_media(v)]  # fmt: skip
        for path, inner in level:
            if (key := step_key(inner)) is not None:
                return (*path, key)
    return None


def _nested(row: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The object at `path` in a row, or None."""
    inner: Any = row
    for key in path:
        inner = inner.get(key) if isinstance(inner, Mapping) else None
    return inner if isinstance(inner, Mapping) else None


def step_key(row: Mapping[str, Any], forced: str | None = None) -> str | None:
    """The key that holds this row's step (only `forced` when given), or None."""
    if forced is not None:
        return forced if forced in row and as_int(row[forced]) is not None else None
    for key in STEP_KEYS:
        if key in row and as_int(value := row[key]) is not None:
            if key == "epoch" and isinstance(value, float):
                continue  # a float epoch is progress through the data, not a step
            return key
    return None


LEVEL = 10**9
"""A two-level step (epoch, iteration) is `epoch * LEVEL + iteration`: one integer that sorts
and aligns as the pair, shown as both (`tuimon.readers.text.step_text`)."""
LEVELS_NOTE = "steps are two-level (epoch, iteration): step = epoch * 1e9 + iteration"
INNER_KEYS = ("batch", "batch_idx", "batch_id", "batch_nb", "batch_num")
"""Counters within an epoch that are no step key alone: with an integer `epoch` they make
the row's step two-level (`Levels`)."""


class Levels:
    """Two-level steps of rows, told by the data: once a row's counter falls while its
    integer `epoch` rises (the counter starts again each epoch: `epoch, iter`, `epoch,
    step`), or from a row whose step is its epoch beside a batch counter (`INNER_KEYS`:
    `epoch, batch`), every step is `epoch * LEVEL + counter` (a row without an epoch takes
    the last one, an epoch row without the counter the epoch's last one). Rows before keep
    their one-level step, so a log and any beginning of it read alike (live, cut or whole).
    One per log read, fed its rows in order."""

    def __init__(self) -> None:
        self.on = False
        """The counter was seen to start again: steps are two-level from there on."""
        self._last: tuple[int, int] | None = None

    def step(self, row: Mapping[str, Any], key: str, step: int) -> int:
        """The step of a row whose one-level step is `step` under `key`."""
        if key == "epoch":
            epoch: int | None = step
            inner = next((n for k in INNER_KEYS if (n := as_int(row.get(k))) is not None), None)
            self.on = self.on or inner is not None  # a batch counter is within its epoch
        else:
            epoch, inner = as_int(row.get("epoch")), step
        if epoch is not None and inner is not None and levels_fit(epoch, inner):
            before = self._last
            self.on = self.on or (before is not None and epoch > before[0] and inner < before[1])
            self._last = (epoch, inner)
        last = self._last
        if not self.on or last is None:
            return step
        if epoch is None or not levels_fit(epoch, 0):
            epoch = last[0]
        if inner is None or not levels_fit(epoch, inner):
            inner = last[1] if last[0] == epoch else 0
        return epoch * LEVEL + inner


def levels_fit(epoch: int, iteration: int) -> bool:
    """Whether one integer step holds both levels exactly (`epoch * LEVEL + iteration`, an
    int64, never a float encoding)."""
    return 0 <= iteration < LEVEL and epoch >= 0 and epoch * LEVEL + iteration < 2**63


MAX_ITEMS = 1024
"""Items of a list value judged one by one; the rest is said (unreadable), never dropped."""


CONTENT_WORDS = ("step", "iter", "update", "tick", "epoch", "batch")
"""Words in a field's name that make an integer field the step when no step key is there
(`training_iteration`, `timesteps_total`, `num_updates`), best first."""


def content_key(row: Mapping[str, Any]) -> str | None:
    """The field of a row without a step key whose name says it counts steps and whose value
    is an integer (`training_iteration` of RLlib's result.json), or None."""
    found = [
        (rank, str(k))
        for k, v in row.items()
        if type(v) is int and in_int64(v)
        for rank, word in enumerate(CONTENT_WORDS)
        if word in str(k).rsplit("/", 1)[-1].lower()
    ]
    return min(found)[1] if found else None


def numbers(name: str, value: Any, depth: int = 0) -> Iterator[tuple[str, float | Unreadable]]:
    """(name, number) for a number, and for the numbers of a nested object as dotted names; a
    number that does not fit a float64 or an int64 comes as its `Unreadable` text."""
    if isinstance(value, Mapping):
        if depth < 4:
            for key, inner in value.items():
                yield from numbers(f"{name}.{key}", inner, depth + 1)
        return
    if isinstance(value, list):  # judged element by element: `test_coco_eval_bbox[3]`
        if depth < 4:
            for i, inner in enumerate(value[:MAX_ITEMS]):
                yield from numbers(f"{name}[{i}]", inner, depth + 1)
            if len(value) > MAX_ITEMS:
                yield f"{name}[{MAX_ITEMS}:]", Unreadable(f"{len(value) - MAX_ITEMS} more items")
        return
    number = as_number(value)
    if number is not None:
        yield name, number
        exact = int_text(value) if isinstance(value, str) else value
        if not isinstance(number, Unreadable) and (low := low_bits(exact)) is not None:
            yield name + LOW_BITS, low


def row_step(
    row: Mapping[str, Any],
    rename: Mapping[str, str] | None = None,
    key: str | None = None,
    levels: Levels | None = None,
) -> Step | None:
    """The `Step` a row stands for (its step under `key` when given), or None when it has
    no step key. A step found in a nested object (`step_path`) leaves the other values of
    the row metrics under their dotted names (`data.loss.T`), its counters aside. `levels`:
    the log's `Levels`, which makes the step two-level when the counter restarts."""
    path = step_path(row, key)
    if path is None:
        return None
    *outer, key = path
    within = _nested(row, tuple(outer))
    assert within is not None
    step = as_int(within[key])
    assert step is not None
    if levels is not None:
        step = levels.step(within, key, step)
    prefix = "".join(f"{k}." for k in outer)
    apart = {prefix + k for k in (key, *COUNTERS)} if outer else frozenset()
    metrics: dict[str, float] = {}
    clocks: dict[str, float] = {}
    bad: list[str] = []
    for name, value in row.items():
        if name == key or name in _SKIP or name in COUNTERS:
            continue
        for metric, number in numbers(str(name), value):
            if metric in apart:
                continue
            if isinstance(number, Unreadable):
                bad.append(f"{metric}={number}")
            elif is_clock(metric) or is_media(value):
                clocks[metric] = number
            else:
                metrics[(rename or {}).get(metric, metric)] = number
    digests = row.get("param_digests")
    digest = row.get("param_digest")
    return Step(
        step=step,
        metrics=metrics,
        t=next((clocks[k] for k in CLOCK_FIELDS if k in clocks), None),
        digest=digest if isinstance(digest, str) else None,
        digests={str(k): v for k, v in digests.items() if isinstance(v, str)}
        if isinstance(digests, Mapping)
        else {},
        clocks=clocks,
        unreadable=tuple(bad),
    )


def renamed(step: Step, rename: Mapping[str, str]) -> Step:
    """A step with its metrics renamed (`--map`)."""
    if not rename or not any(name in rename for name in step.metrics):
        return step
    metrics = {rename.get(k, k): v for k, v in step.metrics.items()}
    return Step(step.step, metrics, step.t, step.digest, step.digests, step.clocks, step.unreadable)


def _same(a: float, b: float) -> bool:
    """Bitwise equal (NaN equals NaN)."""
    return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)


def combine(a: Step, b: Step) -> Step | None:
    """Two rows of one step as one record, or None when a key has two different values or
    `b` adds nothing new (a row logged again is a repeat, compared in order, never dropped)."""
    if b.metrics and b.metrics.keys() <= a.metrics.keys():
        return None
    for name, value in b.metrics.items():
        if name in a.metrics and not _same(a.metrics[name], value):
            return None
    if a.digest and b.digest and a.digest != b.digest:
        return None
    if any(a.digests.get(k, v) != v for k, v in b.digests.items()):
        return None
    return Step(
        step=a.step,
        metrics={**a.metrics, **b.metrics},
        t=a.t if a.t is not None else b.t,
        digest=a.digest or b.digest,
        digests={**a.digests, **b.digests},
        clocks={**a.clocks, **b.clocks},
        unreadable=a.unreadable + b.unreadable,
    )


def merge(records: Iterable[Record]) -> list[Record]:
    """Rows of one step merged into its latest record; a conflicting row starts a new one."""
    out: list[Record] = []
    latest: dict[int, int] = {}
    for record in records:
        if isinstance(record, Step) and record.step in latest:
            index = latest[record.step]
            merged = combine(out[index], record)  # type: ignore[arg-type]
            if merged is not None:
                out[index] = merged
                continue
        out.append(record)
        if isinstance(record, Step):
            latest[record.step] = len(out) - 1
    return out


class StreamMerger:
    """`merge` for a live stream: a step is held until a row of another step (or the end)
    arrives, so rows of one step printed on consecutive lines become one record."""

    MAX_HELD = 256

    def __init__(self) -> None:
        self._pending: Step | None = None
        self._held: list[Record] = []

    def feed(self, record: Record, *, complete: bool = False) -> list[Record]:
        """Records ready to show; `complete` steps (tuimon's own) are never held."""
        if isinstance(record, Step) and not complete:
            if self._pending is not None and self._pending.step == record.step:
                merged = combine(self._pending, record)
                if merged is not None:
                    self._pending = merged
                    return []
            out = self.close()
            self._pending = record
            return out
        if self._pending is None:
            return [record]
        if isinstance(record, Step) or not hasattr(record, "text"):
            return [*self.close(), record]  # header, end, a complete step: in order
        self._held.append(record)
        return self.close() if len(self._held) >= self.MAX_HELD else []

    @property
    def holding(self) -> bool:
        """A step (or text after it) waits for the next row."""
        return self._pending is not None or bool(self._held)

    def close(self) -> list[Record]:
        """Everything held (at the end, or when the stream went quiet: `LineParser.release`)."""
        out: list[Record] = [self._pending] if self._pending is not None else []
        out += self._held
        self._pending, self._held = None, []
        return out
