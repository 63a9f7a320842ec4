"""Judging matched records column-wise: a block of one side's records as `Columns` (numpy
arrays over its steps), two blocks of matched rows judged by `judge_block` into a `Block`,
or a few rows judged in plain Python floats by `judge_rows` into `Rows` (the same results).

`MetricFilter` says which metric names are judged at all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import chain, compress
from typing import Any

import numpy as np

from tuimon.engine.judge.ulps import diff_arrays, diff_floats
from tuimon.steplog import Step
from tuimon.store.aligned import AlignedStep, MetricDiff


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

    def __contains__(self, name: object) -> bool:
        return name in self._row

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


def _stacked(values: Mapping[str, np.ndarray], names: Sequence[str], n: int) -> np.ndarray:
    """The values of `names` as one (metrics x rows) array (NaN for a name `values` lacks)."""
    if isinstance(values, RowTable) and all(map(values.__contains__, names)):
        return values.rows(names)
    missing = np.full(n, math.nan)
    return np.stack([values.get(k, missing) for k in names])


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
    unjudged: dict[str, np.ndarray] = field(default_factory=dict)
    """name -> rows where the side logged a value that cannot be judged (`Step.unreadable`:
    `1e400`): reported, never a value on one side only."""

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
            unjudged=_unjudged(records),
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
            unjudged={k: v[index] for k, v in self.unjudged.items()},
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
        unjudged = {
            name: np.concatenate([b.unjudged.get(name, np.zeros(len(b), bool)) for b in blocks])
            for name in dict.fromkeys(k for b in blocks for k in b.unjudged)
        }
        return cls(
            steps=np.concatenate([b.steps for b in blocks]),
            occ=np.concatenate([b.occ for b in blocks]),
            values=values,
            present=present,
            digest=np.concatenate([b.digest for b in blocks]),
            digests=digests,
            records=records,
            unjudged=unjudged,
        )


def _unjudged(records: Sequence[Step]) -> dict[str, np.ndarray]:
    """`Columns.unjudged` of step records (none in the usual block: one pass to tell)."""
    if not any(r.unreadable for r in records):
        return {}
    out: dict[str, np.ndarray] = {}
    for i, record in enumerate(records):
        for name in unreadable_names(record):
            out.setdefault(name, np.zeros(len(records), bool))[i] = True
    return out


def unreadable_names(record: Step) -> set[str]:
    """The names of a record's values that do not fit (`Step.unreadable`: `name=text`)."""
    return {entry.rpartition("=")[0] for entry in record.unreadable}


def _pick(items: list[Any], index: np.ndarray | slice) -> list[Any]:
    if isinstance(index, slice):
        return items[index]
    if index.dtype == bool:
        index = np.flatnonzero(index)
    return [items[i] for i in index.tolist()]


# --- judging matched rows --------------------------------------------------------------------


class MetricDiffs(Mapping[str, tuple[np.ndarray, ...]]):
    """name -> (judged, equal, abs, rel, ulps) of a block's metrics (judged: a value on either
    side; one on one side only differs, rel and abs inf, ulps -1), kept as the
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
        """The metrics whose values differ at `row` (or that one side only has), in order."""
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
    one_sided: np.ndarray | None = None
    """Values per row that one side has and the other lacks (a `null`, a string or a list
    where the other side logged a number, or a metric not logged): each is a difference."""
    lone_only: np.ndarray | None = None
    """Rows whose only differences are values on one side only."""

    def lone(self, row: int) -> list[str]:
        """The metrics that have a value on one side only at `row`."""
        if self.one_sided is None or not self.one_sided[row]:
            return []
        return [
            name
            for name in self.metrics.parted(row)
            if _has(self.a, name, row) != _has(self.b, name, row)
        ]


def _has(side: Columns, name: str, row: int) -> bool:
    present = side.present.get(name)
    return present is not None and bool(present[row])


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
    one_sided = np.zeros(n, np.int64)
    shared_equal = np.ones(n, bool)  # each row's equality with its one-sided values left out
    tables = _same_tables(a.values, b.values)
    names = tables[0].names if tables else list(dict.fromkeys(chain(a.values, b.values)))
    per = max(1, JUDGE_VALUES // max(n, 1))
    for start in range(0, len(names), per):  # every metric, (metrics x rows) at a time
        group = names[start : start + per]
        pa, pb = _presence(a, group, n), _presence(b, group, n)
        both = pa & pb
        if tables:  # two CSVs with the same columns: their rows, as they are
            va, vb = (t.table[start : start + per] for t in tables)
        else:
            va, vb = _stacked(a.values, group, n), _stacked(b.values, group, n)
        eq, absd, rel, dist = diff_arrays(va, vb, ulps=ulps)
        judged = pa | pb
        shared_equal &= (eq | ~both).all(axis=0)
        lone = pa != pb
        if a.unjudged or b.unjudged:  # a value that does not fit: reported, not judged
            lone &= ~(_presence(a, group, n, a.unjudged) | _presence(b, group, n, b.unjudged))
            judged &= both | lone
        eq |= ~judged  # a metric neither side has in a row lacks nothing there
        rel[~both] = 0.0
        if lone.any():  # a value on one side only: a difference beyond any tolerance
            eq &= ~lone
            absd = np.where(lone, math.inf, absd)
            rel[lone] = math.inf
            if dist is not None:
                dist[lone] = -1
            one_sided += lone.sum(axis=0)
        equal &= eq.all(axis=0)
        values += judged.sum(axis=0)
        np.maximum(divergence, rel.max(axis=0), out=divergence)
        keep = np.asarray(judged.any(axis=1))  # a metric neither side has here is not judged
        arrays: tuple[np.ndarray, ...] = (judged, eq, absd, rel, dist)
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
    shared_equal &= ~has | same
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
        same_tensors = np.fromiter((not t for t in tensors), bool, n)
        equal &= same_tensors
        shared_equal &= same_tensors
    empty = _empty_rows(a, b, bool(tables), none_a & none_b)
    return Block(
        a, b, metrics, equal, values, divergence, digest_equal, tensors, apart, empty, one_sided,
        ~equal & shared_equal,
    )  # fmt: skip


def _presence(
    side: Columns, names: Sequence[str], n: int, masks: Mapping[str, np.ndarray] | None = None
) -> np.ndarray:
    """Where each of `names` has a value on one side (or is in `masks`: `Columns.unjudged`),
    as (metrics x rows): a name the side's block lacks has none."""
    absent = np.zeros(n, bool)
    masks = side.present if masks is None else masks
    return np.stack([masks.get(k, absent) for k in names])


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
    n = len(ra)
    cols = [
        list(map(_new_diff, zip(_column(block.a, name, n), _column(block.b, name, n),
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


def _column(side: Columns, name: str, n: int) -> list[float]:
    """A metric's values on one side (NaN where it has none: the side's block lacks it)."""
    values = side.values.get(name)
    return values.tolist() if values is not None else [math.nan] * n


@dataclass(slots=True)
class Rows:
    """A small block judged row by row (`judge_rows`): what `Tally.add_rows` counts."""

    steps: list[AlignedStep]
    equal: list[bool]
    values: list[int]
    """Values compared per row (as `Block.values`)."""
    names: list[str]
    """The block's metric names either side has in some row, in the block's order."""
    apart: int = 0
    """Rows whose digests are of two formats (not judged)."""
    empty: list[bool] = field(default_factory=list)
    """Rows where neither side has a judged value or a digest (as `Block.empty`)."""
    one_sided: int = 0
    """Values one side has and the other lacks (as `Block.one_sided`, summed)."""
    lone_only: list[bool] = field(default_factory=list)
    """Rows whose only differences are values on one side only (as `Block.lone_only`)."""


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
        equal, divergence, lone_seen = True, 0.0, False
        names = order if both is None else [k for k in chain(ma, mb) if k in both]
        for k in names if both is None else dict.fromkeys(names):
            va, vb = ma.get(k), mb.get(k)
            if va is None or vb is None:
                if va is not vb and not (  # a value on one side only: a difference
                    (x.unreadable or y.unreadable)
                    and k in unreadable_names(x) | unreadable_names(y)  # not one that does not fit
                ):
                    diffs[k] = lone = _one_sided(va, vb)
                    equal, divergence, lone_seen = False, lone.rel, True
                    out.one_sided += 1
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
        out.lone_only.append(
            lone_seen
            and not tensors
            and digest_equal is not False
            and all(d.equal for k, d in diffs.items() if k in ma and k in mb)
        )
        out.values.append(values)
        out.apart += apart
    out.names = [k for k in order if k in seen]
    return out


def _one_sided(va: float | None, vb: float | None) -> MetricDiff:
    """A value one side has and the other lacks: apart by more than any tolerance (the
    missing one NaN, as `judge_block` stacks it)."""
    a = math.nan if va is None else float(va)
    b = math.nan if vb is None else float(vb)
    return _new_diff((a, b, False, math.inf, math.inf, -1))


def _row_names(pairs: Sequence[tuple[Step, Step, int]], select: MetricFilter) -> list[str]:
    """The judged names of either side's records, side a's first, in the order they come
    (the metric columns `judge_block` would stack)."""
    judged = select.judged
    if len(pairs) == 1:
        x, y, _ = pairs[0]
        names = dict.fromkeys(chain(x.metrics, y.metrics))
    else:
        names = dict.fromkeys(
            chain(
                chain.from_iterable(x.metrics for x, _, _ in pairs),
                chain.from_iterable(y.metrics for _, y, _ in pairs),
            )
        )
    return [k for k in names if judged(k)]


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
