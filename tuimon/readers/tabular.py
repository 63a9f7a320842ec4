"""CSV with a step column -> records (Lightning's CSVLogger `metrics.csv`, pandas `to_csv` ...).

Lightning writes one row per logging call, with empty cells for the metrics of other calls, so
the train and validation rows of one step are merged.
"""

from __future__ import annotations

import csv
import io

from tuimon.readers.rows import STEP_KEYS, as_float, merge, row_step
from tuimon.steplog import NO_STEP_KEY, STEP_RANGE, UNREADABLE, Record, Step, Text

csv.field_size_limit(1 << 24)


def csv_columns(first_line: str, key: str | None = None) -> list[str] | None:
    """The columns of a CSV header line that has a step column (`key` when given), or
    None."""
    if "," not in first_line:
        return None
    try:
        columns = [c.strip() for c in next(csv.reader([first_line]))]
    except (csv.Error, StopIteration):
        return None
    keys = (key,) if key is not None else STEP_KEYS
    if len(columns) < 2 or not any(c in keys or c.lower() in keys for c in columns):
        return None
    return columns


def read_csv(text: str, key: str | None = None) -> list[Record]:
    """Every row with a step as a record, rows of one step merged; a row without one is
    kept as skipped (`NO_STEP_KEY`). `key` names the step column (`--step-key`)."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return []
    columns = [c.strip() for c in header]
    names = [c.lower() if c.lower() in STEP_KEYS else c for c in columns]  # "Step" is a step
    records: list[Record] = []
    cut = not text.endswith("\n")  # the last row may be cut short: not read, said
    for cells in reader:
        row = {name: cell for name, cell in zip(names, cells, strict=False) if cell.strip()}
        step = row_step(row, key=key)
        if step is not None and cut and reader.line_num == _last_line(text):
            records.append(Text(",".join(cells)[:200] + " [cut short?]", UNREADABLE))
        elif step is not None:
            records.append(step)
        elif row:
            records.append(Text(",".join(cells)[:4096], _why(row, names, key)))
    return merge(last_run(records))


def last_run(records: list[Record]) -> list[Record]:
    """The records of the last run when a file holds several (a logger that appends, as
    Keras' CSVLogger does: the steps start again from the first), with a note that says so;
    all records when it holds one."""
    starts = [0]
    first = prev = None
    for i, record in enumerate(records):
        if not isinstance(record, Step):
            continue
        if first is None:
            first = record.step
        elif prev is not None and record.step < prev and record.step <= first:
            starts.append(i)
            first = record.step
        prev = record.step
    if len(starts) == 1:
        return records
    before = sum(isinstance(r, Step) for r in records[: starts[-1]])
    note = Text(
        f"tuimon: the file holds {len(starts)} runs (the steps start again); the last is "
        f"compared, the {before} rows before it are not"
    )
    return [note, *records[starts[-1] :]]


def _last_line(text: str) -> int:
    """The number of the last line of a CSV text (as `csv.reader.line_num` counts)."""
    return text.count("\n") + 1


def _why(row: dict[str, str], names: list[str], key: str | None) -> str | None:
    """Why a row is not a step: a header line again (a second run appended to the file is
    metadata), numbers without a step, or none (text)."""
    if [row.get(n) for n in names] == names:
        return None
    if any(as_float(v) is not None for v in row.values()):
        step = row.get(key or "") or next((row[k] for k in STEP_KEYS if k in row), None)
        return (
            STEP_RANGE if step is not None and step.strip().lstrip("-").isdigit() else NO_STEP_KEY
        )
    return None
