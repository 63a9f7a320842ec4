"""CSV with a step column -> records (Lightning's CSVLogger `metrics.csv`, pandas `to_csv` ...).

Lightning writes one row per logging call, with empty cells for the metrics of other calls, so
the train and validation rows of one step are merged.
"""

from __future__ import annotations

import csv
import io

from tuimon.readers.rows import STEP_KEYS, merge, row_step
from tuimon.steplog import Record

csv.field_size_limit(1 << 24)


def csv_columns(first_line: str) -> list[str] | None:
    """The columns of a CSV header line that has a step column, or None."""
    if "," not in first_line:
        return None
    try:
        columns = [c.strip() for c in next(csv.reader([first_line]))]
    except (csv.Error, StopIteration):
        return None
    if len(columns) < 2 or not any(c.lower() in STEP_KEYS for c in columns):
        return None
    return columns


def read_csv(text: str) -> list[Record]:
    """Every row with a step as a record, rows of one step merged."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return []
    columns = [c.strip() for c in header]
    names = [c.lower() if c.lower() in STEP_KEYS else c for c in columns]  # "Step" is a step
    steps: list[Record] = []
    for cells in reader:
        row = {name: cell for name, cell in zip(names, cells, strict=False) if cell.strip()}
        step = row_step(row)
        if step is not None:
            steps.append(step)
    return merge(steps)
