"""CSV with a step column -> records (Lightning's CSVLogger `metrics.csv`, pandas `to_csv` ...).

Lightning writes one row per logging call, with empty cells for the metrics of other calls, so
the train and validation rows of one step are merged.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from tuimon.clocks import is_clock
from tuimon.readers.account import NOTE
from tuimon.readers.rows_to_steps import (
    CLOCK_FIELDS,
    COUNTERS,
    INNER_KEYS,
    LEVELS_NOTE,
    STEP_KEYS,
    Levels,
    as_float,
    merge,
    row_step,
)
from tuimon.readers.table_lines import split
from tuimon.sanitize import clean
from tuimon.steplog import (
    NO_STEP_KEY,
    STEP_RANGE,
    UNJUDGED,
    UNREADABLE,
    Record,
    Step,
    Text,
    in_int64,
)

csv.field_size_limit(1 << 24)


def _cells(first_line: str) -> list[str] | None:
    """The cells of a first line with commas, stripped (None when it has no comma or is no
    CSV)."""
    return (split(first_line, ",") or None) if "," in first_line else None


def csv_columns(first_line: str, key: str | None = None) -> list[str] | None:
    """The columns of a CSV header line that has a step column (`key` when given), or
    None."""
    columns = _cells(first_line)
    keys = (key,) if key is not None else STEP_KEYS
    if columns is None or len(columns) < 2:
        return None
    if not any(c in keys or c.lower() in keys for c in columns):
        return None
    return columns


def csv_hint(first_line: str, key: str | None = None) -> str | None:
    """What a CSV header line lacks when no step column was found in it (`key`, or any of
    `STEP_KEYS`); None when the line is no CSV header (names, not numbers)."""
    columns = None if "{" in first_line else _cells(first_line)
    if columns is None or len(columns) < 2 or not all(columns):
        return None
    if any(as_float(c) is not None for c in columns):  # a row of numbers, not a header
        return None
    shown = ", ".join(clean(c, 40) for c in columns[:12])
    shown += f" and {len(columns) - 12:,} more" if len(columns) > 12 else ""
    if key is not None:
        return f"a CSV header with no column {clean(key, 40)!r} (its columns: {shown})"
    return (
        f"a CSV header with no step column ({', '.join(STEP_KEYS[:4])}, ...; its columns: "
        f"{shown}): --step-key NAME says which column is the step"
    )


def step_names(columns: list[str], key: str | None) -> list[str]:
    """Column names as rows carry them: a step key in any case is that key ("Step" is a
    step), unless it is the one `--step-key` names as it is written."""
    return [c.lower() if c.lower() in STEP_KEYS and c != key else c for c in columns]


def read_csv(text: str, key: str | None = None) -> list[Record]:
    """Every row with a step as a record, rows of one step merged; a row without one is
    kept as skipped (`NO_STEP_KEY`). `key` names the step column (`--step-key`)."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return []
    columns = [c.strip() for c in header]
    names = step_names(columns, key)
    records: list[Record] = []
    cut = not text.endswith("\n")  # the last row may be cut short: not read, said
    rows = list(reader)
    if not cut and (fast := uniform_rows(names, rows, key)) is not None:
        return merge(last_run(fast))
    levels = Levels()
    for number, cells in enumerate(rows, 2):
        if any("\n" in cell for cell in cells):  # a quote that never closed took the rest in
            lines = sum(cell.count("\n") for cell in cells) + 1
            records.append(
                Text(
                    f"{UNJUDGED}row {number}: a quote that does not close; the "
                    f"{lines} lines from there are one cell, not read]",
                    UNREADABLE,
                )
            )
            continue
        row = {name: cell for name, cell in zip(names, cells, strict=False) if cell.strip()}
        if _misshapen(cells, len(names), row):  # its cells cannot be put under their names
            records.append(
                Text(
                    f"{UNJUDGED}row {number}: {len(cells)} cells where the header names "
                    f"{len(names)}; not read] {clean(','.join(cells), 200)}",
                    UNREADABLE,
                )
            )
            continue
        step = row_step(row, key=key, levels=levels)
        if step is not None and cut and number == len(rows) + 1:
            records.append(Text(",".join(cells)[:200] + " [cut short?]", UNREADABLE))
        elif step is not None:
            records.append(step)
        elif row:
            records.append(Text(",".join(cells)[:4096], _why(row, names, key)))
    if levels.on:
        records.insert(0, Text(NOTE + LEVELS_NOTE))
    return merge(last_run(records))


def last_run(records: list[Record]) -> list[Record]:
    """Every record of a file, with a note when it holds several runs (a logger that appends,
    as Keras' CSVLogger does: the steps start again from the first): each run is compared
    with the same run of the other log, step by step in order (repeats of a step are matched
    occurrence by occurrence), so no run is dropped from a verdict."""
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
    note = Text(
        f"tuimon: the file holds {len(starts)} runs (the steps start again); each is "
        "compared with the same run of the other log"
    )
    return [note, *records]


def uniform_rows(names: list[str], rows: list[list[str]], key: str | None) -> list[Record] | None:
    """Rows whose every cell is a number (no empty cell, no text, nothing beyond float64) and
    whose step column holds integers, as steps, with the values converted by numpy at once;
    None when any row is not so (`read_csv` reads those row by row, to the same records)."""
    width = len(names)
    where = key if key is not None else next((k for k in STEP_KEYS if k in names), None)
    if not rows or where is None or any(len(r) != width for r in rows):
        return None
    if where not in names:
        return None
    k = names.index(where)
    texts = [r[k].strip() for r in rows]
    if not all(t.removeprefix("-").isdecimal() and len(t) <= 19 for t in texts):
        return None
    try:
        values = np.array(rows, dtype=np.float64)
    except ValueError:
        return None
    if np.isinf(values).any() or (np.abs(values) >= 2.0**53).any():
        return None  # an infinity or an overflow, a huge integer: `as_number` tells them apart
    if _restarts(names, values, k):
        return None  # two-level steps: `read_csv` reads them row by row (`Levels`)
    metric = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and not is_clock(n)]
    clock = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and is_clock(n)]
    mnames, cnames = [names[i] for i in metric], [names[i] for i in clock]
    t_at = next((cnames.index(c) for c in CLOCK_FIELDS if c in cnames), None)
    steps = [int(t) for t in texts]
    if not all(map(in_int64, steps)):
        return None
    out: list[Record] = []
    by_row = zip(steps, values[:, metric].tolist(), values[:, clock].tolist(), strict=True)
    for step, m, c in by_row:
        out.append(Step(step, dict(zip(mnames, m, strict=True)),
                        t=None if t_at is None else c[t_at],
                        clocks=dict(zip(cnames, c, strict=True))))  # fmt: skip
    return out


def _restarts(names: list[str], values: np.ndarray, k: int) -> bool:
    """Whether the steps are two-level (`Levels`): the step column (`k`) starts again while
    an `epoch` column rises, or the step is the epoch beside a batch counter (`INNER_KEYS`)."""
    if "epoch" not in names:
        return False
    epoch = names.index("epoch")
    inner = k if k != epoch else next((names.index(n) for n in INNER_KEYS if n in names), None)
    if inner is None or inner != k:
        return inner is not None  # a batch counter beside the epoch step: two-level
    if len(values) < 2:
        return False
    rises = values[1:, epoch] > values[:-1, epoch]
    return bool((rises & (values[1:, inner] < values[:-1, inner])).any())


def _misshapen(cells: list[str], width: int, row: dict[str, str]) -> bool:
    """A row of numbers with fewer or more cells than the header has names (empty cells past
    the last name excepted): which value belongs to which name cannot be known."""
    extra = cells[width:]
    if len(cells) == width or (extra and not any(c.strip() for c in extra)):
        return False
    return any(as_float(v) is not None for v in row.values())


def _why(row: dict[str, str], names: list[str], key: str | None) -> str | None:
    """Why a row is not a step: a header line again (a second run appended to the file is
    metadata), numbers without a step, or none (text)."""
    if [row.get(n) for n in names] == names:
        return None
    if any(as_float(v) is not None for v in row.values()):
        step = row.get(key or "") or next((row[k] for k in STEP_KEYS if k in row), None)
        digits = step is not None and step.strip().removeprefix("-").isdecimal()
        return STEP_RANGE if digits else NO_STEP_KEY
    return None
