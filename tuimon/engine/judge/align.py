"""Aligning two step logs and judging them: per-metric diffs, running divergence, verdicts.

One implementation, column-wise: records of one side become `Columns` (numpy arrays over a
block of steps), matched pairs are judged by `judge_block` and counted by `Tally`. The live
`PairAligner` matches records as they come (`feed_batch`, one tick at a time) and judges the
matches with those functions; whole logs go through the same aligner in one batch per side
(`compare_steps`), or block by block without building records (`ColumnMatcher`,
`tuimon compare`).

Records of one step are matched by occurrence: the k-th record of step s on one side with the
k-th of step s on the other (a key logged twice with other values is compared in order).
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from itertools import chain, compress
from typing import Any, NamedTuple

import numpy as np

from tuimon.engine.judge.text_judge import TextJudge
from tuimon.readers.account import NOTE, Account
from tuimon.readers.text import LEVEL, LEVELS_NOTE
from tuimon.steplog import CUT_TAIL, IN_RECORD, End, Header, Step, Text, jsonable
from tuimon.store import SIDES, other_side

IDENTICAL, CLOSE, DIVERGED, INCOMPLETE = "IDENTICAL", "CLOSE", "DIVERGED", "INCOMPLETE"
VERDICTS = (IDENTICAL, CLOSE, DIVERGED, INCOMPLETE)
PRECEDENCE = (
    "DIVERGED as soon as a difference beyond tolerance was seen (even if a run was cut short); "
    "otherwise INCOMPLETE unless both runs ended normally, every aligned step compared at least "
    "one shared value and both sides logged the same steps; then IDENTICAL when bitwise equal, "
    "else CLOSE"
)
"""The verdict rule, the same for headless, the TUI, pair.json, the browser and the docs."""
_FIRST_UNREADABLE = 5
_NO_STEP = "no step logged by both runs"


class MetricDiff(NamedTuple):
    """One metric of one aligned step, on both sides (a tuple: many are made per second)."""

    a: float
    b: float
    equal: bool
    abs: float
    rel: float
    ulps: int


@dataclass(frozen=True, slots=True)
class AlignedStep:
    """One step both runs logged, with what differs."""

    step: int
    a: Step
    b: Step
    diffs: dict[str, MetricDiff]
    digest_equal: bool | None
    tensors: tuple[str, ...]
    """Parameter tensors whose per-tensor digests differ at this step."""
    divergence: float
    """The largest relative difference over the shared metrics; 0 when bitwise equal."""
    occurrence: int = 0
    """Which record of this step (0 the first): a step logged again is compared in order."""

    @property
    def equal(self) -> bool:
        """Bitwise equal in every shared metric and in the digests."""
        return (
            self.digest_equal is not False
            and not self.tensors
            and all(d.equal for d in self.diffs.values())
        )

    def row(self) -> dict[str, Any]:
        """The aligned row, values as they are: `ROW_COLUMNS`, then `METRIC_COLUMNS` of each
        judged metric (aligned.jsonl and `tuimon export` write it)."""
        row: dict[str, Any] = {
            "step": self.step,
            "occurrence": self.occurrence,
            "equal": self.equal,
            "divergence": self.divergence,
            "digest_equal": self.digest_equal,
            "tensors_differ": list(self.tensors),
            "t.a": self.a.t,
            "t.b": self.b.t,
        }
        for name, (a, b, _, absd, rel, ulps) in self.diffs.items():
            row[f"{name}.a"] = a
            row[f"{name}.b"] = b
            row[f"{name}.abs"] = absd
            row[f"{name}.rel"] = rel
            row[f"{name}.ulps"] = ulps
        return row

    def to_dict(self) -> dict[str, Any]:
        """The row as a line of aligned.jsonl: non-finite floats as strings."""
        # One sum tells whether every float is finite (a NaN, an infinity or an overflow makes
        # it non-finite; a numpy scalar makes it not a float): then the row is written as it
        # is, else `jsonable` writes the non-finite values as strings.
        total = self.divergence + (self.a.t or 0.0) + (self.b.t or 0.0)
        for a, b, _, absd, rel, _ in self.diffs.values():
            total += a + b + absd + rel
        row = self.row()
        return row if type(total) is float and math.isfinite(total) else jsonable(row)


ROW_COLUMNS = (
    "step",
    "occurrence",
    "equal",
    "divergence",
    "digest_equal",
    "tensors_differ",
    "t.a",
    "t.b",
)
"""The columns every aligned row has (`AlignedStep.row`): the step and which of its records
(0 the first), bitwise equal, the largest relative difference, the digests equal, the tensors
whose digests differ, each side's clock."""
METRIC_COLUMNS = ("a", "b", "abs", "rel", "ulps")
"""A judged metric's columns are `<metric>.a`, `.b` (each side's value), `.abs`, `.rel` and
`.ulps` (how far apart): the one naming of aligned.jsonl and `tuimon export`."""


@dataclass(frozen=True)
class MetricFilter:
    """Which metric names are judged: `--ignore GLOB` and `--only GLOB` (repeatable).

    Clocks never reach here (`tuimon.clocks`: shown, never judged)."""

    ignore: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    _cache: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def judged(self, name: str) -> bool:
        """True when `name` is compared between the runs."""
        hit = self._cache.get(name)
        if hit is None:
            hit = not any(fnmatchcase(name, g) for g in self.ignore) and (
                not self.only or any(fnmatchcase(name, g) for g in self.only)
            )
            self._cache[name] = hit
        return hit

    def to_dict(self) -> dict[str, list[str]]:
        """For pair.json and `--json`."""
        return {"ignore": list(self.ignore), "only": list(self.only)}


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


# --- the diff of two float64 columns ---------------------------------------------------------


def _ordered(bits: np.ndarray) -> np.ndarray:
    """float64 bit patterns mapped to int64s that order like the floats."""
    return np.where(bits < 0, -(bits & np.int64(0x7FFFFFFFFFFFFFFF)), bits)


_BITS = struct.Struct("<d")


def same_bits(a: float, b: float) -> bool:
    """One pair of values judged as `diff_arrays` judges arrays: the same 64 bits, or both NaN
    (0.0 and -0.0 differ). The one judge of "differs", for the panes as for the verdict."""
    return _BITS.pack(a) == _BITS.pack(b) or (a != a and b != b)


def diff_arrays(a: np.ndarray, b: np.ndarray, *, ulps: bool = True) -> tuple[Any, ...]:
    """Vectorised diffs of two float64 arrays: (equal, abs, rel, ulps).

    Bitwise equality treats NaN == NaN (any NaN payload); 0.0 and -0.0 differ (by 1 ulp).
    NaN against a number, or inf against anything else, has rel = inf and ulps = -1 for NaN.
    ulps is int64, or an object array of Python ints where a distance does not fit; None
    when not asked for (`ulps=False`: no aligned step will show it).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    equal = a.view(np.int64) == b.view(np.int64)
    if equal.all():  # the usual block of a reproducible pair: every distance is 0
        zeros = np.zeros(a.shape, np.int64) if ulps else None
        return equal, np.zeros(a.shape), np.zeros(a.shape), zeros
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        equal |= nan_a & nan_b
        absd = np.abs(a - b)
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.where(scale > 0, absd / scale, 0.0)
        huge = np.isinf(absd) & np.isfinite(a) & np.isfinite(b)
        if huge.any():  # |a - b| overflowed: take the ratio of scaled values
            rel = np.where(huge, np.abs(a / scale - b / scale), rel)
    odd = (nan_a != nan_b) | (np.isinf(a) | np.isinf(b)) & ~equal
    absd = np.where(equal, 0.0, np.where(odd, np.inf, absd))
    rel = np.where(equal, 0.0, np.where(odd, np.inf, rel))
    return equal, absd, rel, _ulps(a, b, equal, nan_a | nan_b) if ulps else None


def _ulps(a: np.ndarray, b: np.ndarray, equal: np.ndarray, nan: np.ndarray) -> np.ndarray:
    oa, ob = _ordered(a.view(np.int64)), _ordered(b.view(np.int64))
    hi, lo = np.maximum(oa, ob).astype(np.uint64), np.minimum(oa, ob).astype(np.uint64)
    dist = hi - lo  # exact modulo 2**64, and the true distance is below 2**64
    dist = np.where(~equal & (dist == 0), np.uint64(1), dist)  # 0.0 against -0.0
    dist = np.where(equal, np.uint64(0), dist)
    if (dist >= np.uint64(2**63)).any():
        out = dist.astype(object)
        out[nan & ~equal] = -1
        return out
    signed = dist.astype(np.int64)
    signed[nan & ~equal] = -1
    return signed


_INT = struct.Struct("<q")
_SIGN = 0x7FFFFFFFFFFFFFFF
_INF = math.inf


def _ordered_int(x: float) -> int:
    """A float64's bit pattern as an int that orders like the floats (`_ordered`)."""
    bits: int = _INT.unpack(_BITS.pack(x))[0]
    return -(bits & _SIGN) if bits < 0 else bits


def diff_floats(x: float, y: float) -> MetricDiff:
    """`diff_arrays` for one pair of values, in plain Python floats: the same equality
    (`same_bits`), abs, rel and ULPs, bit for bit (a small block's judge)."""
    if x == y:
        if x or math.copysign(1.0, x) == math.copysign(1.0, y):
            return MetricDiff(x, y, True, 0.0, 0.0, 0)
        return MetricDiff(x, y, False, 0.0, 0.0, 1)  # 0.0 against -0.0
    nan_x, nan_y = x != x, y != y
    if nan_x and nan_y:
        return MetricDiff(x, y, True, 0.0, 0.0, 0)
    if nan_x or nan_y:
        return MetricDiff(x, y, False, _INF, _INF, -1)
    dist = abs(_ordered_int(x) - _ordered_int(y)) or 1
    if x in (_INF, -_INF) or y in (_INF, -_INF):
        return MetricDiff(x, y, False, _INF, _INF, dist)
    absd = abs(x - y)
    scale = max(abs(x), abs(y))
    # scale > 0 (x != y); where |x - y| overflowed, the ratio of scaled values
    rel = abs(x / scale - y / scale) if absd == _INF else absd / scale
    return MetricDiff(x, y, False, absd, rel, dist)


# --- columns of a block of records -----------------------------------------------------------


class RowTable(Mapping[str, np.ndarray]):
    """name -> its values, as rows of one (metrics x rows) array: a row is made when asked for
    (a CSV of 100,000 columns holds one array per block, not 100,000 views)."""

    def __init__(self, names: list[str], table: np.ndarray) -> None:
        self.names = names
        self.table = table
        self._index: dict[str, int] | None = None

    @property
    def _row(self) -> dict[str, int]:
        """name -> its row, made when first needed (judging a table against a table with the
        same names needs none)."""
        if self._index is None:
            self._index = dict(zip(self.names, range(len(self.names)), strict=True))
        return self._index

    def __getitem__(self, name: str) -> np.ndarray:
        return self.table[self._row[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def rows(self, names: Sequence[str]) -> np.ndarray:
        """The rows of `names`, stacked (a copy)."""
        return self.table[[self._row[name] for name in names]]


def _same_tables(
    a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]
) -> tuple[RowTable, RowTable] | None:
    """Both sides' values as `RowTable`s of the same names in the same order, else None."""
    if isinstance(a, RowTable) and isinstance(b, RowTable) and a.names == b.names:
        return a, b
    return None


def _stacked(values: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    """The values of `names` as one (metrics x rows) array."""
    if isinstance(values, RowTable):
        return values.rows(names)
    return np.stack([values[k] for k in names])


@dataclass
class Columns:
    """A block of records of one side as columns: step, occurrence, each metric (NaN where a
    record lacks it, with a `present` mask), the aggregate digest and per-tensor digests."""

    steps: np.ndarray
    occ: np.ndarray
    values: Mapping[str, np.ndarray]
    """name -> its values (a dict, or a `RowTable` of a CSV read into one array)."""
    present: dict[str, np.ndarray]
    digest: np.ndarray
    digests: list[dict[str, str]] | None = None
    records: list[Step] | None = None

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def of_steps(cls, records: Sequence[Step], occ: Sequence[int], select: MetricFilter) -> Columns:
        """Columns of step records (the live path and the general whole-log path)."""
        n = len(records)
        metrics = [r.metrics for r in records]
        names = [k for k in dict.fromkeys(chain.from_iterable(metrics)) if select.judged(k)]
        values, present = {}, {}
        for name in names:
            got = [m.get(name) for m in metrics]
            if None in got:
                mask = np.fromiter((v is not None for v in got), bool, n)
                values[name] = np.fromiter((math.nan if v is None else v for v in got), float, n)
            else:  # every record has it (the common case): one conversion
                mask = np.ones(n, bool)
                values[name] = np.array(got, dtype=float)
            present[name] = mask
        digest = np.empty(n, dtype=object)
        digest[:] = [r.digest or None for r in records]
        return cls(
            steps=np.fromiter((r.step for r in records), np.int64, n),
            occ=np.asarray(occ, dtype=np.int64),
            values=values,
            present=present,
            digest=digest,
            digests=[r.digests for r in records] if any(r.digests for r in records) else None,
            records=list(records),
        )

    def take(self, index: np.ndarray | slice) -> Columns:
        """The rows at `index` (an integer or boolean array, or a slice: views)."""
        return Columns(
            steps=self.steps[index],
            occ=self.occ[index],
            values={k: v[index] for k, v in self.values.items()},
            present={k: v[index] for k, v in self.present.items()},
            digest=self.digest[index],
            digests=None if self.digests is None else _pick(self.digests, index),
            records=None if self.records is None else _pick(self.records, index),
        )

    @classmethod
    def concat(cls, blocks: Sequence[Columns]) -> Columns:
        """Blocks one after another; a metric a block lacks is absent there."""
        if len(blocks) == 1:
            return blocks[0]
        names = dict.fromkeys(k for b in blocks for k in b.values)
        values, present = {}, {}
        for name in names:
            values[name] = np.concatenate(
                [b.values.get(name, np.full(len(b), math.nan)) for b in blocks]
            )
            present[name] = np.concatenate(
                [b.present.get(name, np.zeros(len(b), bool)) for b in blocks]
            )
        digests = None
        if any(b.digests is not None for b in blocks):
            digests = [d for b in blocks for d in (b.digests or [{}] * len(b))]
        records = None
        if all(b.records is not None for b in blocks):
            records = [r for b in blocks for r in b.records or ()]
        return cls(
            steps=np.concatenate([b.steps for b in blocks]),
            occ=np.concatenate([b.occ for b in blocks]),
            values=values,
            present=present,
            digest=np.concatenate([b.digest for b in blocks]),
            digests=digests,
            records=records,
        )


def _pick(items: list[Any], index: np.ndarray | slice) -> list[Any]:
    if isinstance(index, slice):
        return items[index]
    if index.dtype == bool:
        index = np.flatnonzero(index)
    return [items[i] for i in index.tolist()]


# --- judging matched rows --------------------------------------------------------------------


class MetricDiffs(Mapping[str, tuple[np.ndarray, ...]]):
    """name -> (both present, equal, abs, rel, ulps) of a block's shared metrics, kept as the
    (metrics x rows) arrays they were diffed in: a metric's five rows are made when asked for
    (a block of 100,000 metrics holds a few arrays, not 500,000 views). ulps is None in a
    block judged without them (`judge_block`)."""

    def __init__(self) -> None:
        self.groups: list[tuple[list[str], tuple[np.ndarray, ...]]] = []
        """(names, (both, equal, abs, rel, ulps)): row i of each array is names[i]'s."""
        self._index: dict[str, tuple[int, int]] | None = None

    def add(self, names: list[str], arrays: tuple[np.ndarray, ...]) -> None:
        """A group of metrics diffed together."""
        self.groups.append((names, arrays))
        self._index = None

    @property
    def _at(self) -> dict[str, tuple[int, int]]:
        """name -> (group, row), made when a metric is first asked for by name."""
        if self._index is None:
            self._index = {
                name: (g, i)
                for g, (names, _) in enumerate(self.groups)
                for i, name in enumerate(names)
            }
        return self._index

    def __getitem__(self, name: str) -> tuple[np.ndarray, ...]:
        group, i = self._at[name]
        return tuple(array[i] for array in self.groups[group][1])

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(names for names, _ in self.groups)

    def __len__(self) -> int:
        return sum(len(names) for names, _ in self.groups)

    def parted(self, row: int) -> list[str]:
        """The metrics present on both sides whose values differ at `row`, in order."""
        out: list[str] = []
        for names, (both, equal, *_) in self.groups:
            out += compress(names, (both[:, row] & ~equal[:, row]).tolist())
        return out


@dataclass
class Block:
    """Matched rows of both sides judged: row i of `a` against row i of `b`."""

    a: Columns
    b: Columns
    metrics: MetricDiffs
    """The diffs of the metrics both blocks have (present on both sides in some row)."""
    equal: np.ndarray
    values: np.ndarray
    """Values compared per row (shared metrics, digests, per-tensor digests)."""
    divergence: np.ndarray
    digest_equal: np.ndarray
    """Object array: True, False, or None where a side has no digest."""
    tensors: list[tuple[str, ...]] | None
    digests_apart: np.ndarray | None = None
    """Rows whose two sides' digests are of different formats (not judged)."""
    empty: np.ndarray | None = None
    """Rows where neither side has a judged value (a media-only row logged by both): they
    share no value, but nothing is missing on either side (`_empty_rows`)."""


JUDGE_VALUES = 1 << 18
"""Values a block's metrics are diffed in at a time (metrics x rows): the diff's temporaries
stay a few MiB however wide the log (a CSV of 100,000 columns); a live block is one group."""


def judge_block(a: Columns, b: Columns, *, ulps: bool = True) -> Block:
    """Judge matched rows: per-metric diffs, per-row equality, divergence, values compared;
    `ulps=False`: no distances in ulps (None: no aligned step of the block is made)."""
    n = len(a)
    equal = np.ones(n, bool)
    values = np.zeros(n, np.int64)
    divergence = np.zeros(n, np.float64)
    metrics = MetricDiffs()
    tables = _same_tables(a.values, b.values)
    names = tables[0].names if tables else [k for k in a.values if k in b.values]
    per = max(1, JUDGE_VALUES // max(n, 1))
    for start in range(0, len(names), per):  # shared metrics, (metrics x rows) at a time
        group = names[start : start + per]
        both = np.stack([a.present[k] & b.present[k] for k in group])
        if tables:  # two CSVs with the same columns: their rows, as they are
            va, vb = (t.table[start : start + per] for t in tables)
        else:
            va, vb = _stacked(a.values, group), _stacked(b.values, group)
        eq, absd, rel, dist = diff_arrays(va, vb, ulps=ulps)
        eq |= ~both
        rel[~both] = 0.0
        equal &= eq.all(axis=0)
        values += both.sum(axis=0)
        np.maximum(divergence, rel.max(axis=0), out=divergence)
        keep = np.asarray(both.any(axis=1))  # a metric neither side has here is not judged
        arrays: tuple[np.ndarray, ...] = (both, eq, absd, rel, dist)
        if not keep.all():
            group = [group[i] for i in np.flatnonzero(keep).tolist()]
            arrays = tuple(array if array is None else array[keep] for array in arrays)
        if group:
            metrics.add(group, arrays)
    none_a, none_b = a.digest == None, b.digest == None  # noqa: E711 - elementwise on objects
    has = ~(none_a | none_b)
    same = a.digest == b.digest
    apart = np.zeros(n, bool)  # digests of two formats: never judged
    rows = np.flatnonzero(has & ~same)
    pairs = (a.digest[rows].tolist(), b.digest[rows].tolist())
    if any(":" in "".join(side) for side in pairs):  # untagged digests are all of one kind
        for i, x, y in zip(rows.tolist(), *pairs, strict=True):
            apart[i] = digest_kind(x) != digest_kind(y)
    has &= ~apart
    digest_equal = np.asarray(np.where(has, same, None), dtype=object)
    equal &= ~has | same
    values += has
    tensors = None
    if a.digests is not None and b.digests is not None:
        tensors = []
        for i, (da, db) in enumerate(zip(a.digests, b.digests, strict=True)):
            differ, shared, other = _tensors_apart(da, db)
            if other:
                apart[i] = True
            tensors.append(differ)
            values[i] += shared - other
        equal &= np.fromiter((not t for t in tensors), bool, n)
    empty = _empty_rows(a, b, bool(tables), none_a & none_b)
    return Block(a, b, metrics, equal, values, divergence, digest_equal, tensors, apart, empty)


def _empty_rows(a: Columns, b: Columns, full: bool, no_digest: np.ndarray) -> np.ndarray:
    """Rows where neither side has a judged value or a digest (`Block.empty`; `no_digest`:
    the rows where neither side has a digest)."""
    n = len(a)
    if (full and (a.values or b.values)) or not no_digest.any():
        return np.zeros(n, bool)  # tables: every row has every column; or a digest each
    empty = no_digest
    for side in (a, b):
        if side.digests is not None:  # per-tensor digests
            empty &= np.fromiter((not d for d in side.digests), bool, n)
    for i, present in enumerate(chain(a.present.values(), b.present.values())):
        empty &= ~present
        if i % 64 == 63 and not empty.any():
            break
    return np.asarray(empty, bool)


def digest_kind(digest: str) -> str:
    """The format of a digest string: the tag before its colon ("devsum1:..."), "" for an
    untagged one (the blake2b digests of earlier versions, or a script's own)."""
    tag, colon, _ = digest.partition(":")
    return tag if colon else ""


_new_diff = functools.partial(tuple.__new__, MetricDiff)
"""A `MetricDiff` from a tuple of its six fields, without a Python-level call (many per block)."""


def aligned_steps(block: Block) -> list[AlignedStep]:
    """The block as `AlignedStep`s (both sides' records needed)."""
    ra, rb = block.a.records, block.b.records
    assert ra is not None and rb is not None
    names = list(block.metrics)
    both = [m[0].tolist() for m in block.metrics.values()]
    cols = [
        list(map(_new_diff, zip(block.a.values[name].tolist(), block.b.values[name].tolist(),
                                eq.tolist(), absd.tolist(), rel.tolist(), ulps.tolist(),
                                strict=True)))
        for name, (_, eq, absd, rel, ulps) in block.metrics.items()
    ]  # fmt: skip
    everywhere = all(all(b) for b in both)
    out = []
    digest_equal = block.digest_equal.tolist()
    divergence = block.divergence.tolist()
    occ = block.a.occ.tolist()
    rows = zip(*cols, strict=True) if everywhere and cols else None
    for i, (x, y) in enumerate(zip(ra, rb, strict=True)):
        if rows is not None:  # every metric on both sides at every step (the common case)
            diffs = dict(zip(names, next(rows), strict=True))
        else:
            diffs = {name: col[i] for name, col, b in zip(names, cols, both, strict=True) if b[i]}
        tensors = block.tensors[i] if block.tensors is not None else ()
        out.append(
            AlignedStep(x.step, x, y, diffs, digest_equal[i], tensors, divergence[i], occ[i])
        )
    return out


def align_step(a: Step, b: Step, select: MetricFilter | None = None) -> AlignedStep:
    """Compare the two records of one step (the same judge as a block)."""
    select = select or MetricFilter()
    block = judge_block(Columns.of_steps([a], [0], select), Columns.of_steps([b], [0], select))
    return aligned_steps(block)[0]


SMALL_BLOCK = 32
"""Matched steps up to which a tick's block is judged in plain Python floats (`judge_rows`):
numpy's cost per call outweighs its gain per value on a few steps. The results are the
same either way (a property test compares the two judges)."""


@dataclass(slots=True)
class Rows:
    """A small block judged row by row (`judge_rows`): what `Tally.add_rows` counts."""

    steps: list[AlignedStep]
    equal: list[bool]
    values: list[int]
    """Values compared per row (as `Block.values`)."""
    names: list[str]
    """The block's metric names both sides have in some row, in the block's order."""
    apart: int = 0
    """Rows whose digests are of two formats (not judged)."""
    empty: list[bool] = field(default_factory=list)
    """Rows where neither side has a judged value or a digest (as `Block.empty`)."""


def sparse(records: Sequence[Step]) -> bool:
    """Records whose metric names are many for their values (a name or two a row, thousands
    in all): as columns they would cost names x rows; they are judged row by row."""
    values = sum(len(r.metrics) for r in records)
    names = len(set().union(*(r.metrics for r in records))) if records else 0
    return names * len(records) > 4 * values + (1 << 16)


def judge_rows(
    pairs: Sequence[tuple[Step, Step, int]], select: MetricFilter, *, per_row: bool = False
) -> Rows:
    """Judge a few matched records (a, b, occurrence) as `judge_block` judges their columns,
    in plain Python (the same names, order, values and verdicts). `per_row`: each row's own
    names only (a sparse block: the cost follows the values, not names x rows)."""
    order = _row_names(pairs, select)
    both = set(order) if per_row else None
    out = Rows([], [], [], [])
    seen: set[str] = set()
    for x, y, occ in pairs:
        ma, mb = x.metrics, y.metrics
        diffs = {}
        equal, divergence = True, 0.0
        for k in order if both is None else [k for k in ma if k in mb and k in both]:
            va, vb = ma.get(k), mb.get(k)
            if va is None or vb is None:
                continue
            if type(va) is not float or type(vb) is not float:
                va, vb = float(va), float(vb)
            if va == vb and va:  # bitwise equal (not NaN, not 0.0 against -0.0): no diff
                diffs[k] = _new_diff((va, vb, True, 0.0, 0.0, 0))
                continue
            d = diffs[k] = diff_floats(va, vb)
            if not d.equal:
                equal = False
                if d.rel > divergence:
                    divergence = d.rel
        seen.update(diffs)
        values = len(diffs)
        digest_equal, apart = _digest_equal(x.digest or None, y.digest or None)
        tensors: tuple[str, ...] = ()
        if x.digests and y.digests:
            tensors, shared, other = _tensors_apart(x.digests, y.digests)
            values += shared - other
            apart = apart or other > 0
        if digest_equal is not None:
            values += 1
            equal = equal and digest_equal
        out.steps.append(AlignedStep(x.step, x, y, diffs, digest_equal, tensors, divergence, occ))
        out.empty.append(
            not (x.digest or y.digest or x.digests or y.digests)
            and not any(map(select.judged, chain(ma, mb)))
        )
        out.equal.append(equal and not tensors)
        out.values.append(values)
        out.apart += apart
    out.names = [k for k in order if k in seen]
    return out


def _row_names(pairs: Sequence[tuple[Step, Step, int]], select: MetricFilter) -> list[str]:
    """The judged names of side a's records that side b's have too, in a's order (the
    metric columns `judge_block` would stack)."""
    judged = select.judged
    if len(pairs) == 1:
        x, y, _ = pairs[0]
        mb = y.metrics
        return [k for k in x.metrics if k in mb and judged(k)]
    names_b = {k for _, y, _ in pairs for k in y.metrics}
    names_a = dict.fromkeys(chain.from_iterable(x.metrics for x, _, _ in pairs))
    return [k for k in names_a if k in names_b and judged(k)]


def _digest_equal(da: str | None, db: str | None) -> tuple[bool | None, bool]:
    """The aggregate digests of a row: equal (None: a side has none, or two formats), and
    whether they are of two formats."""
    if da is None or db is None:
        return None, False
    if da == db:
        return True, False
    if digest_kind(da) != digest_kind(db):
        return None, True
    return False, False


def _kinds_differ(x: str, y: str) -> bool:
    """Two digests of different formats (`digest_kind`)."""
    return (":" in x or ":" in y) and digest_kind(x) != digest_kind(y)


def _tensors_apart(da: dict[str, str], db: dict[str, str]) -> tuple[tuple[str, ...], int, int]:
    """Per-tensor digests of a row: the tensors that differ, how many are shared, how many
    differ in format (not judged)."""
    if da == db:  # the common case, in one comparison
        return (), len(da), 0
    differ: list[str] = []
    shared = other = 0
    for k, x in da.items():  # one pass, in a's order
        if k not in db:
            continue
        shared += 1
        y = db[k]
        if x == y:
            continue
        if _kinds_differ(x, y):
            other += 1
        else:
            differ.append(k)
    return tuple(differ), shared, other


@dataclass
class Tally:
    """What judged blocks add up to; blocks may come in any order (firsts are least steps)."""

    tolerance: float = 0.0
    steps_compared: int = 0
    steps_equal: int = 0
    values_compared: int = 0
    steps_without_values: int = 0
    beyond: bool = False
    first_divergent: tuple[int, int] | None = None
    first_divergent_metrics: list[str] = field(default_factory=list)
    first_digest: tuple[int, int] | None = None
    first_tensor: tuple[int, int] | None = None
    first_tensors: tuple[str, ...] = ()
    max_divergence: float = 0.0
    max_step: tuple[int, int] | None = None
    metric_max: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    digests_not_comparable: int = 0

    def add(self, block: Block) -> None:
        """Count one judged block."""
        n = len(block.equal)
        if not n:
            return
        steps, occ = block.a.steps, block.a.occ
        order = None if _rising(steps) else np.lexsort((occ, steps))  # None: in row order

        def least(mask: np.ndarray) -> int | None:  # the row of the least key where mask
            ordered = mask if order is None else mask[order]
            i = int(ordered.argmax())
            if not ordered[i]:
                return None
            return i if order is None else int(order[i])

        self.steps_compared += n
        self.steps_equal += int(block.equal.sum())
        self.values_compared += int(block.values.sum())
        lonely = block.values == 0
        if block.empty is not None:
            lonely &= ~block.empty  # a row with nothing on either side lacks nothing
        self.steps_without_values += int(lonely.sum())
        if block.digests_apart is not None:
            self.digests_not_comparable += int(block.digests_apart.sum())
        differ = ~block.equal
        div = block.divergence
        if (div > self.tolerance).any() or (self.tolerance == 0 and differ.any()):
            self.beyond = True
        if (i := least(differ)) is not None and _before(
            (k := _key(steps, occ, i)), self.first_divergent
        ):
            self.first_divergent = k
            self.first_divergent_metrics = block.metrics.parted(i)
        digest_differs = block.digest_equal == False  # noqa: E712 - elementwise on objects
        if (i := least(digest_differs)) is not None and _before(
            (k := _key(steps, occ, i)), self.first_digest
        ):
            self.first_digest = k
        if block.tensors is not None:
            some = np.fromiter((bool(t) for t in block.tensors), bool, n)
            if (i := least(some)) is not None and _before(
                (k := _key(steps, occ, i)), self.first_tensor
            ):
                self.first_tensor, self.first_tensors = k, block.tensors[i]
        top = float(div.max())
        if top > 0 and top >= self.max_divergence:
            i = least(div == top)
            assert i is not None
            k = _key(steps, occ, i)
            if top > self.max_divergence or _before(k, self.max_step):
                self.max_divergence, self.max_step = top, k
        if block.metrics:
            self._metric_max(block, order)

    def _metric_max(self, block: Block, order: np.ndarray | None) -> None:
        """Each metric's largest relative difference (the least step among ties), all metrics
        of the block at once (`order`: the rows by step, None when they rise)."""
        if block.equal.all() and self._kept(block):
            return
        for names, (both, _, absd, rel, _) in block.metrics.groups:
            masked = np.where(both, rel, -1.0)
            if order is not None:
                masked = masked[:, order]
            tops = masked.max(axis=1)
            rows = (masked == tops[:, None]).argmax(axis=1)
            if order is not None:
                rows = order[rows]
            steps = block.a.steps[rows].tolist()
            at = zip(names, tops.tolist(), rows.tolist(), steps, strict=True)
            for i, (name, top, row, step) in enumerate(at):
                cur = self.metric_max.get(name)
                if cur is None or top > cur["rel"] or (top == cur["rel"] and step < cur["step"]):
                    self.metric_max[name] = {"rel": top, "abs": float(absd[i, row]), "step": step}

    def _kept(self, block: Block) -> bool:
        """Whether a block whose rows are all equal leaves every metric's maximum as it is:
        each of its metrics already has one, greater than 0 or at a step below the block's
        (the block could only give 0 at one of its steps)."""
        least = int(block.a.steps.min())
        for names, _ in block.metrics.groups:
            for name in names:
                cur = self.metric_max.get(name)
                if cur is None or (cur["rel"] == 0 and (cur["step"] or 0) > least):
                    return False
        return True

    def add_rows(self, rows: Rows) -> None:
        """Count a small block judged row by row (`judge_rows`): the same counts and firsts
        as `add` gives for the same rows as a `Block`."""
        steps = rows.steps
        if not steps:
            return
        order = sorted(steps, key=_row_key) if len(steps) > 1 else steps
        at = {id(row): i for i, row in enumerate(steps)}
        self.steps_compared += len(steps)
        self.steps_equal += sum(rows.equal)
        self.values_compared += sum(rows.values)
        self.steps_without_values += sum(
            v == 0 and not e for v, e in zip(rows.values, rows.empty, strict=True)
        )
        self.digests_not_comparable += rows.apart
        tolerance = self.tolerance
        top, top_row = 0.0, None
        for row in order:
            key = _row_key(row)
            if not rows.equal[at[id(row)]]:
                self.beyond = self.beyond or tolerance == 0
                if _before(key, self.first_divergent):
                    self.first_divergent = key
                    self.first_divergent_metrics = [n for n, d in row.diffs.items() if not d.equal]
            if row.digest_equal is False and _before(key, self.first_digest):
                self.first_digest = key
            if row.tensors and _before(key, self.first_tensor):
                self.first_tensor, self.first_tensors = key, row.tensors
            if row.divergence > tolerance:
                self.beyond = True
            if row.divergence > top:
                top, top_row = row.divergence, row
        if top_row is not None and top >= self.max_divergence:
            key = _row_key(top_row)
            if top > self.max_divergence or _before(key, self.max_step):
                self.max_divergence, self.max_step = top, key
        for name in rows.names:
            self._metric_top(name, order)

    def _metric_top(self, name: str, order: Sequence[AlignedStep]) -> None:
        """One metric's largest relative difference over ordered rows (`_metric_max`)."""
        best: tuple[float, float, int] | None = None
        for row in order:
            d = row.diffs.get(name)
            if d is not None and (best is None or d.rel > best[0]):
                best = (d.rel, d.abs, row.step)
        if best is None:
            return
        top, absd, step = best
        cur: dict[str, Any] | None = self.metric_max.get(name)
        if cur is None or top > cur["rel"] or (top == cur["rel"] and step < cur["step"]):
            self.metric_max[name] = {"rel": top, "abs": absd, "step": step}


def _rising(steps: np.ndarray) -> bool:
    """Whether steps rise row by row (then their rows are in the order of their keys)."""
    return len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())


def _row_key(row: AlignedStep) -> tuple[int, int]:
    return row.step, row.occurrence


def _key(steps: np.ndarray, occ: np.ndarray, i: int) -> tuple[int, int]:
    return int(steps[i]), int(occ[i])


def _before(key: tuple[int, int], current: tuple[int, int] | None) -> bool:
    return current is None or key < current


# --- the aligner -----------------------------------------------------------------------------


class PairAligner:
    """Aligns step records from two runs fed in any interleaving; judges the pair so far."""

    def __init__(self, tolerance: float = 0.0, select: MetricFilter | None = None) -> None:
        if not tolerance >= 0:
            raise ValueError("tolerance must be >= 0")
        self.tolerance = tolerance
        self.select = select or MetricFilter()
        self.tally = Tally(tolerance)
        self._pending: dict[str, dict[tuple[int, int], Step]] = {"a": {}, "b": {}}
        self._count: dict[str, dict[int, int]] = {"a": {}, "b": {}}
        self.top = {"a": -1, "b": -1}
        self.repeats = {"a": 0, "b": 0}
        self.names: dict[str, set[str]] = {"a": set(), "b": set()}
        """Metric names each side has logged (judged ones)."""
        self.ignored: set[str] = set()
        self.unreadable = 0
        self.unreadable_first: list[str] = []
        self.unmatched_extra = {"a": 0, "b": 0}
        """Steps one side only has, counted by a whole-log matcher (`ColumnMatcher`)."""
        self.accounts = {"a": Account(), "b": Account()}
        """What every record of each side was (steps, metadata, text, skipped)."""
        self.text = TextJudge(tolerance)
        """Text lines compared by position between step records (`TextJudge`)."""
        self.last_step: dict[str, int | None] = {"a": None, "b": None}
        self.last_divergence: float | None = None
        """The divergence of the last step aligned (`feed_batch`)."""
        """The step of each side's latest step record (what its next text line follows)."""

    # -- feeding --

    def feed(self, side: str, record: Step) -> AlignedStep | None:
        """Add one step record of `side`; return the aligned step when both now have it."""
        got = self.feed_batch(side, [record])
        return got[0] if got else None

    def feed_batch(
        self, side: str, records: Iterable[Step], *, aligned: bool = True
    ) -> list[AlignedStep]:
        """Add a tick's records of `side` (in order); return the steps that now align, judged
        together (column-wise), in the order they were fed. `aligned=False`: judged and
        counted the same, but a block of them is not made into `AlignedStep`s (none returned:
        nobody shows them; `last_divergence` tells the last one's)."""
        other = other_side(side)
        mine, theirs = self._pending[side], self._pending[other]
        count = self._count[side]
        pairs: list[tuple[Step, Step, int]] = []
        for record in records:
            occ = count.get(record.step, 0)
            count[record.step] = occ + 1
            if occ:
                self.repeats[side] += 1
            self.note(side, record)
            key = (record.step, occ)
            match = theirs.pop(key, None)
            if match is None:
                mine[key] = record
            else:
                pairs.append((record, match, occ) if side == "a" else (match, record, occ))
        if not pairs:
            return []
        wide = len(pairs) > SMALL_BLOCK and sparse([p[0] for p in pairs] + [p[1] for p in pairs])
        if len(pairs) <= SMALL_BLOCK or wide:  # few rows, or many names a row or two each
            rows = judge_rows(pairs, self.select, per_row=wide)
            self.tally.add_rows(rows)
            self.last_divergence = rows.steps[-1].divergence
            return rows.steps
        occs = [p[2] for p in pairs]
        block = self.judge(
            Columns.of_steps([p[0] for p in pairs], occs, self.select),
            Columns.of_steps([p[1] for p in pairs], occs, self.select),
            ulps=aligned,
        )
        self.last_divergence = float(block.divergence[-1])
        return aligned_steps(block) if aligned else []

    def note(self, side: str, record: Step) -> None:
        """What a record tells besides its match: its names, clocks, unreadable values."""
        self.accounts[side].steps += 1
        self.last_step[side] = record.step
        if record.step > self.top[side]:
            self.top[side] = record.step
        names = self.names[side]
        for name in record.metrics:
            if name not in names:
                if self.select.judged(name):
                    names.add(name)
                else:
                    self.ignored.add(name)
        if record.clocks:
            self.ignored.update(record.clocks)
        if record.unreadable:
            self.note_unreadable(side, record.step, record.unreadable)

    def note_other(
        self, side: str, record: Header | End | Text, after: tuple[int, int | None] | None = None
    ) -> None:
        """A record of `side` that is not a step: counted in its account; a text line is
        judged against its counterpart (`TextJudge`). `after`: the step records before it and
        the last one's step, when the side's steps are noted after its text (a live batch)."""
        account = self.accounts[side]
        account.add(record)
        if (
            isinstance(record, Text)
            and not record.text.startswith(NOTE)
            and record.skipped not in (CUT_TAIL, IN_RECORD)  # a line that may be cut: missing
            and record.text.strip()  # a blank line says nothing
        ):
            count, step = after if after is not None else (account.steps, self.last_step[side])
            self.text.add(side, record.text, count, step)

    def note_unreadable(self, side: str, step: int, values: Sequence[str]) -> None:
        """Values of a record that do not fit float64/int64: counted and named, not judged."""
        self.unreadable += len(values)
        for value in values:
            if len(self.unreadable_first) < _FIRST_UNREADABLE:
                self.unreadable_first.append(f"{side} step {step}: {value[:80]}")

    def judge(self, a: Columns, b: Columns, *, ulps: bool = True) -> Block:
        """Judge matched columns and count them in the tally (`judge_block`)."""
        block = judge_block(a, b, ulps=ulps)
        self.tally.add(block)
        return block

    # -- judging --

    def unmatched(self) -> tuple[int, int]:
        """Steps only one side has logged so far."""
        a, b = (len(self._pending[s]) + self.unmatched_extra[s] for s in SIDES)
        return a, b

    def _held_unmatched(self) -> tuple[int, int]:
        """Steps only one side has logged that the other side has already gone past (what
        counts against a pair still running)."""
        a = sum(step < self.top["b"] for step, _ in self._pending["a"])
        b = sum(step < self.top["a"] for step, _ in self._pending["b"])
        return a, b

    def summary(
        self,
        complete: bool = True,
        reason: str | None = None,
        *,
        running: bool = False,
        interrupted: bool = False,
    ) -> Summary:
        """The pair judged on what has been aligned (`PRECEDENCE`); `complete=False` (a run
        failed, was cut short or interrupted) makes it INCOMPLETE with `reason`, unless it
        already DIVERGED.

        `running=True` judges a pair still under way: steps one side has not reached yet are
        not held against it.
        """
        ua, ub = self._held_unmatched() if running else self.unmatched()
        t = self.tally
        ok, why = self._completeness(complete, reason, ua, ub, running=running)
        fd = t.first_divergent
        metrics = list(t.first_divergent_metrics) if fd else []
        first = fd[0] if fd else None
        text = self.text
        if text.first is not None and (first is None or _text_first(text.first.step, first)):
            first = text.first.step
            metrics = [f"text line {text.first.line_a}"]
        judged = verdict(t.steps_compared + text.compared,
                         t.steps_equal + text.compared - text.differ, t.max_divergence,
                         self.tolerance, ok, beyond=t.beyond or text.beyond)  # fmt: skip
        levels = any(LEVELS_NOTE in a.notes for a in self.accounts.values())
        only = {s: sorted(self.names[s] - self.names["b" if s == "a" else "a"]) for s in SIDES}
        return Summary(
            verdict=judged,
            tolerance=self.tolerance,
            steps_compared=t.steps_compared,
            steps_equal=t.steps_equal,
            unmatched_a=ua,
            unmatched_b=ub,
            first_divergent_step=first,
            first_divergent_metrics=metrics,
            first_digest_step=t.first_digest[0] if t.first_digest else None,
            first_tensors=list(t.first_tensors),
            max_divergence=t.max_divergence,
            max_divergence_step=t.max_step[0] if t.max_step else None,
            metric_max=dict(t.metric_max),
            complete=ok,
            reason=why,
            values_compared=t.values_compared,
            steps_without_values=t.steps_without_values,
            metrics_only_a=only["a"],
            metrics_only_b=only["b"],
            repeats_a=self.repeats["a"],
            repeats_b=self.repeats["b"],
            ignored=sorted(self.ignored),
            select=self.select.to_dict(),
            unreadable=self.unreadable,
            unreadable_first=list(self.unreadable_first),
            interrupted=interrupted,
            digests_not_comparable=t.digests_not_comparable,
            accounts={s: self.accounts[s].to_dict() for s in SIDES},
            text=text.to_dict(),
            step_levels=levels,
            first_divergent_at=(
                {"epoch": first // LEVEL, "iteration": first % LEVEL}
                if levels and first is not None and first >= LEVEL
                else None
            ),
        )  # fmt: skip

    def _completeness(
        self, complete: bool, reason: str | None, ua: int, ub: int, *, running: bool = False
    ) -> tuple[bool, str | None]:
        """Whether the pair counts as complete, and why not: `reason` (or that the pair did not
        finish), then what its steps and lines lack (None when nothing is missing)."""
        cover = self._coverage_reasons(ua, ub)
        for side in SIDES:
            self.text.steps_seen(side, self.accounts[side].steps)
        ta, tb = self.text.unmatched(running=running)
        if ta or tb:
            cover.append(
                f"text lines on one side only: a {ta}, b {tb} "
                f"(first: {self.text.first_unmatched()})"
            )
        why = [reason] if reason else [] if complete else ["the pair did not finish"]
        why += [c for c in cover if not (why and c == _NO_STEP)]  # the headline says it
        return complete and not cover, "; ".join(why) or None

    def _coverage_reasons(self, ua: int, ub: int) -> list[str]:
        t = self.tally
        out = []
        if t.steps_compared == 0 and not self.text.compared:
            out.append(_NO_STEP)
        elif t.steps_compared == 0:
            pass  # a log of text lines: judged line by line (`TextJudge`)
        elif t.steps_without_values == t.steps_compared:
            out.append("the two logs share no metric")
        elif t.values_compared == 0 and not self.text.compared:
            out.append("the two logs share no judged value (clocks, or all ignored)")
        elif t.steps_without_values:
            out.append(
                f"{t.steps_without_values} of {t.steps_compared} aligned steps share no value"
            )
        if ua or ub:
            out.append(_unmatched_reason(ua, ub))
        if self.unreadable:
            out.append(
                f"{self.unreadable} values do not fit a float64 or an int64 "
                f"(first: {self.unreadable_first[0]})"
            )
        out += [p for s in SIDES if (p := self.accounts[s].problem(s))]
        return out


EXIT_CODES = {IDENTICAL: 0, CLOSE: 0, DIVERGED: 1}
"""Exit code per verdict; anything else (INCOMPLETE, failed runs) is 3."""


def _text_first(text_step: int | None, step: int) -> bool:
    """Whether a text line after `text_step` (None: before any step) comes before `step`."""
    return text_step is None or text_step < step


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


def _unmatched_reason(ua: int, ub: int) -> str:
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


def compare_steps(
    a: Sequence[Step],
    b: Sequence[Step],
    tolerance: float = 0.0,
    select: MetricFilter | None = None,
) -> tuple[list[AlignedStep], PairAligner]:
    """Align two whole logs at once: each side goes through the aligner in one batch (judged
    column-wise), exactly as a live pair fed in any interleaving. Rows of one step are merged
    by the readers (`tuimon.readers.rows`); what reaches here as several records of one step
    is compared occurrence by occurrence. Aligned steps come in step order."""
    aligner = PairAligner(tolerance, select)
    aligner.feed_batch("a", a)
    aligned = aligner.feed_batch("b", b)
    aligned.sort(key=lambda s: (s.step, s.occurrence))
    return aligned, aligner


# --- whole logs, block by block --------------------------------------------------------------


class ColumnMatcher:
    """Two whole logs matched block by block on the step (a merge on step): columns of each
    side wait until the other side has the same step, then are judged. Only unmatched rows
    are held, so logs written in step order stream in bounded memory. Steps must not repeat
    within a side (`ColumnMatcher.repeated` tells; use `compare_steps` then)."""

    def __init__(self, aligner: PairAligner) -> None:
        self.aligner = aligner
        self._pending: dict[str, Columns | None] = {"a": None, "b": None}
        self._past: dict[str, list[np.ndarray]] = {"a": [], "b": []}
        """Each side's steps so far, while every block's steps rise past the last block's."""
        self._seen: dict[str, set[int] | None] = {"a": None, "b": None}
        """Each side's steps so far, once they did not rise (a set: repeats are found)."""
        self.repeated = False

    def add(self, side: str, block: Columns) -> None:
        """A block of one side's rows (steps unique within the side)."""
        if self._repeats(side, block.steps):
            self.repeated = True
            return
        for name in block.values:
            self.aligner.names[side].add(name)
        other = other_side(side)
        mine = self._pending[side]
        mine = block if mine is None else Columns.concat([mine, block])
        theirs = self._pending[other]
        if theirs is None:
            self._pending[side] = mine
            return
        m = min(len(mine), len(theirs))
        if (
            self._seen[side] is None
            and self._seen[other] is None
            and np.array_equal(mine.steps[:m], theirs.steps[:m])
        ):  # both rising, the same steps in the same order (the usual pair): no search
            if m:
                x, y = mine.take(slice(0, m)), theirs.take(slice(0, m))
                self.aligner.judge(*((x, y) if side == "a" else (y, x)), ulps=False)
                mine, theirs = mine.take(slice(m, None)), theirs.take(slice(m, None))
            self._pending[side], self._pending[other] = mine, theirs
            return
        _, i, j = np.intersect1d(mine.steps, theirs.steps, assume_unique=True, return_indices=True)
        if len(i):
            x, y = mine.take(i), theirs.take(j)
            self.aligner.judge(*((x, y) if side == "a" else (y, x)), ulps=False)
            keep_mine, keep_theirs = np.ones(len(mine), bool), np.ones(len(theirs), bool)
            keep_mine[i], keep_theirs[j] = False, False
            mine, theirs = mine.take(keep_mine), theirs.take(keep_theirs)
        self._pending[side], self._pending[other] = mine, theirs

    def _repeats(self, side: str, steps: np.ndarray) -> bool:
        """Whether a block's steps repeat one of the side's steps so far (or each other)."""
        past, seen = self._past[side], self._seen[side]
        if not len(steps):
            return False
        if seen is None:
            if (not past or steps[0] > past[-1][-1]) and (steps[1:] > steps[:-1]).all():
                past.append(steps)  # rising: no repeat (the usual log, no set of its steps)
                return False
            seen = self._seen[side] = set(np.concatenate(past).tolist()) if past else set()
        listed = steps.tolist()
        if len(set(listed)) != len(listed) or not seen.isdisjoint(listed):
            return True
        seen.update(listed)
        return False

    def finish(self) -> None:
        """Count what is left on each side as steps one side only has."""
        for side in SIDES:
            rest = self._pending[side]
            self.aligner.unmatched_extra[side] = len(rest) if rest is not None else 0
