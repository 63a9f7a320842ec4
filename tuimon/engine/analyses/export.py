"""The one export of a pair's aligned rows (`tuimon export`, the pair view's `x`).

The rows are the aligner's (`AlignedStep.row`: steps matched by step and occurrence), named as
aligned.jsonl names them: `ROW_COLUMNS`, then `<metric>.a`, `.b`, `.abs`, `.rel`, `.ulps` per
judged metric (`METRIC_COLUMNS`), in step and occurrence order. Streamed from the loader through
a spool on disk as CSV or JSON Lines, or as parquet in row groups (pyarrow, the `parquet`
extra, imported only then): memory holds a block of the logs, not the rows. In a CSV a cell of
text from a log (a metric or tensor name) that a spreadsheet would read as a formula is written
with a `'`.
"""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import IO, Any

import orjson

from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.sources.saved_pair import SavedPair
from tuimon.errors import TuimonError
from tuimon.steplog import NONFINITE
from tuimon.store import SavedLogs
from tuimon.store.aligned import METRIC_COLUMNS, ROW_COLUMNS, AlignedStep

FORMATS = ("csv", "jsonl", "parquet")
PARQUET_VALUES = 1 << 22
"""Cells of one parquet row group (rows = this / columns): memory is bounded by it."""
_FORMULA = tuple("=+-@\t\r")


class ExportError(TuimonError):
    """Rows that cannot be exported as asked (no pyarrow for parquet, an unknown format)."""


def aligned_rows(logs: SavedLogs, select: MetricFilter | None = None) -> Iterator[AlignedStep]:
    """The aligned steps of a saved pair or two logs, through the one loader (streamed: two
    large logs of lines are read a block at a time), with the pair's own tolerance, and its
    own choice of metrics unless `select` is given."""
    return SavedPair.of(logs).stream(select)


def columns(names: Iterable[str]) -> list[str]:
    """Every column of the rows, for the judged metrics `names` in the order they first come;
    each once (a metric named `t`, judged with --judge t, has the clock's `t.a` and `t.b`: its
    values, as the row holds them)."""
    parts = (f"{name}.{part}" for name in names for part in METRIC_COLUMNS)
    return list(dict.fromkeys([*ROW_COLUMNS, *parts]))


def check(fmt: str) -> None:
    """ExportError unless rows can be written as `fmt` here (before a file is made)."""
    if fmt not in FORMATS:
        raise ExportError(f"cannot export as {fmt!r}: give one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        _pyarrow()


def write(aligned: Iterable[AlignedStep], out: IO[bytes], fmt: str) -> int:
    """Write the rows to `out` as `fmt`, in step and occurrence order; how many rows. They are
    spooled as aligned.jsonl lines to a temporary file first (memory holds none of them; the
    CSV header and the parquet schema need every metric's name): sorted there only when the
    steps did not come in order (a resumed run's)."""
    check(fmt)
    names: dict[str, None] = {}
    count, last, ordered = 0, (-(2**63), 0), True
    with tempfile.TemporaryFile() as spool:
        for step in aligned:  # the bytes of aligned.jsonl
            spool.write(orjson.dumps(step.to_dict(), option=orjson.OPT_APPEND_NEWLINE))
            names.update(dict.fromkeys(step.diffs))
            ordered = ordered and (step.step, step.occurrence) >= last
            last, count = (step.step, step.occurrence), count + 1
        spool.seek(0)
        lines: Iterable[bytes] = spool if ordered else sorted(spool, key=_order)
        if fmt == "jsonl":
            out.writelines(lines)
        elif fmt == "csv":
            _csv(lines, columns(names), out)
        else:
            _parquet(lines, columns(names), out)
    return count


def _order(line: bytes) -> tuple[int, int]:
    row = orjson.loads(line)
    return row["step"], row["occurrence"]


def _rows(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The spooled rows, values as `AlignedStep.row` has them (a non-finite float again)."""
    for line in lines:
        row = orjson.loads(line)
        if b'"NaN"' in line or b'Infinity"' in line:
            for name, value in row.items():
                if value.__class__ is str and value in NONFINITE:
                    row[name] = float(value)
        yield row


def _csv(lines: Iterable[bytes], names: list[str], out: IO[bytes]) -> None:
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
    flags = [i for i, n in enumerate(names) if n in ("equal", "digest_equal")]
    tensors = names.index("tensors_differ")
    try:
        writer = csv.writer(text, lineterminator="\n")
        _row(writer, text, [_text(n) for n in names])
        for row in _rows(lines):
            cells = [row.get(n) for n in names]  # a float as repr, None as an empty cell
            for i in flags:
                if cells[i] is not None:
                    cells[i] = "true" if cells[i] else "false"
            cells[tensors] = tensor_names = _text(" ".join(cells[tensors] or ()))
            if "\r" in tensor_names:
                _row(writer, text, cells)
            else:
                writer.writerow(cells)
        text.flush()
    finally:
        text.detach()  # `out` stays open: its owner closes it


def _row(writer: Any, text: IO[str], cells: list[Any]) -> None:
    """One CSV row, a cell that holds a CR quoted (RFC 4180): the csv module before Python
    3.13 quotes only the characters of its line terminator, so a name holding CR was written
    bare and a reader split the row there."""
    if not any(cell.__class__ is str and "\r" in cell for cell in cells):
        writer.writerow(cells)
        return
    one = io.StringIO()
    csv.writer(one, lineterminator="\r\n").writerow(cells)
    text.write(one.getvalue()[:-2] + "\n")


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


def _parquet(lines: Iterable[bytes], names: list[str], out: IO[bytes]) -> None:
    pa = _pyarrow()
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
    rows = _rows(lines)
    with pa.parquet.ParquetWriter(out, schema) as writer:
        while chunk := list(islice(rows, group)):
            table = {n: [row.get(n) for row in chunk] for n in names}
            writer.write_table(pa.table(table, schema=schema))
