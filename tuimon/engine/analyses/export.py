"""The one export of a pair's aligned rows (`tuimon export`, the pair view's `x`).

The rows are the aligner's (`AlignedStep.row`: steps matched by step and occurrence), named as
aligned.jsonl names them: `ROW_COLUMNS`, then `<metric>.a`, `.b`, `.abs`, `.rel`, `.ulps` per
judged metric (`METRIC_COLUMNS`). Written row by row as CSV or JSON Lines, or as parquet in row
groups (pyarrow, the `parquet` extra, imported only then). In a CSV a cell of text from a log
(a metric or tensor name) that a spreadsheet would read as a formula is written with a `'`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import IO, Any

import orjson

from tuimon.engine.judge.align import METRIC_COLUMNS, ROW_COLUMNS, AlignedStep, MetricFilter
from tuimon.engine.sources.saved import SavedPair
from tuimon.errors import TuimonError
from tuimon.store import SavedLogs

FORMATS = ("csv", "jsonl", "parquet")
PARQUET_VALUES = 1 << 22
"""Cells of one parquet row group (rows = this / columns): memory is bounded by it."""
_FORMULA = tuple("=+-@\t\r")


class ExportError(TuimonError):
    """Rows that cannot be exported as asked (no pyarrow for parquet, an unknown format)."""


def aligned_rows(logs: SavedLogs, select: MetricFilter | None = None) -> list[AlignedStep]:
    """The aligned steps of a saved pair or two logs, through the one loader: judged with the
    pair's own tolerance, and its own choice of metrics unless `select` is given."""
    pair = SavedPair.of(logs)
    return pair.judge(None, select)[0] if select else pair.judged[0]


def columns(aligned: Iterable[AlignedStep]) -> list[str]:
    """Every column of the rows, in the order the metrics first come."""
    names = dict.fromkeys(name for step in aligned for name in step.diffs)
    return [*ROW_COLUMNS, *(f"{name}.{part}" for name in names for part in METRIC_COLUMNS)]


def check(fmt: str) -> None:
    """ExportError unless rows can be written as `fmt` here (before a file is made)."""
    if fmt not in FORMATS:
        raise ExportError(f"cannot export as {fmt!r}: give one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        _pyarrow()


def write(aligned: Sequence[AlignedStep], out: IO[bytes], fmt: str) -> int:
    """Write the rows to `out` as `fmt`; how many rows."""
    check(fmt)
    if fmt == "jsonl":
        for step in aligned:  # the bytes of aligned.jsonl
            out.write(orjson.dumps(step.to_dict(), option=orjson.OPT_APPEND_NEWLINE))
    elif fmt == "csv":
        _csv(aligned, out)
    else:
        _parquet(aligned, out)
    return len(aligned)


def _csv(aligned: Sequence[AlignedStep], out: IO[bytes]) -> None:
    names = columns(aligned)
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
    try:
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow([_text(n) for n in names])
        for step in aligned:
            row = step.row()
            writer.writerow([_cell(row.get(n)) for n in names])
        text.flush()
    finally:
        text.detach()  # `out` stays open: its owner closes it


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # every bit: 0.1 + 0.2 is 0.30000000000000004, nan, inf
    if isinstance(value, list):
        return _text(" ".join(value))
    return str(value)


def _text(text: str) -> str:
    """Text from a log as a CSV cell no spreadsheet runs: `'` before a formula's first sign."""
    if text.startswith(_FORMULA):
        try:
            float(text)
        except ValueError:
            return "'" + text
    return text


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet  # the writer
    except ImportError:
        raise ExportError("parquet needs pyarrow: pip install 'tuimon[parquet]'") from None
    return pa


def _parquet(aligned: Sequence[AlignedStep], out: IO[bytes]) -> None:
    pa = _pyarrow()
    names = columns(aligned)
    kinds = {
        "step": pa.int64(),
        "occurrence": pa.int64(),
        "equal": pa.bool_(),
        "digest_equal": pa.bool_(),
        "tensors_differ": pa.list_(pa.string()),
    }
    # ULPs run up to 2**64 - 1 (-1: NaN against a number): exact in a decimal, not in an int64
    ulps = pa.decimal128(20, 0)
    schema = pa.schema(
        [(n, kinds.get(n) or (ulps if n.endswith(".ulps") else pa.float64())) for n in names]
    )
    group = max(1, PARQUET_VALUES // len(names))
    steps = iter(aligned)
    with pa.parquet.ParquetWriter(out, schema) as writer:
        while chunk := [s.row() for s in islice(steps, group)]:
            table = {n: [row.get(n) for row in chunk] for n in names}
            writer.write_table(pa.table(table, schema=schema))
