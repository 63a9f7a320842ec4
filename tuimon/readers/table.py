"""A table of numbers under a header line, told by content: its delimiter (comma, tab, runs of
spaces), leading `#` comment lines (`#{"t_start": ...}` of a monitor.csv), and its step column
by content when no column has a step name: an integer column that rises row by row
(`time/total_timesteps`), preferring one whose name says step, iteration or epoch; with none,
the row number is the step, and a note says so. The table is then read as a CSV is
(`tuimon.readers.tabular.read_csv`), so its rows are merged and judged the same way.
"""

from __future__ import annotations

import csv
import io
import re
from itertools import pairwise

from tuimon.readers.rows import as_float, as_int
from tuimon.steplog import Record, Text

ROW = "row"
"""The step column added when a table has none: the row's number (1 = the first row)."""
_SAMPLE = 50
_SPACES = re.compile(r"\s{2,}|\t")
_PREFERRED = ("step", "iter", "update", "epoch", "batch")
"""Words that name a step column, best first (an integer column that rises comes last)."""


def _split(line: str, delimiter: str) -> list[str]:
    if delimiter == " ":
        return (
            [c for c in _SPACES.split(line.strip()) if c]
            if "  " in line or "\t" in line
            else (line.split())
        )
    try:
        return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        return []


def _is_name(cell: str) -> bool:
    return bool(cell) and as_float(cell) is None and not cell.startswith(("{", "["))


def sniff(text: str, key: str | None = None) -> tuple[str, int, list[str], str | None] | None:
    """(delimiter, index of the header line, column names, step column or None for the row
    number) of a table of numbers, or None when the text is not one."""
    lines = text[: 1 << 20].split("\n")
    start = 0
    while start < len(lines) and (lines[start].startswith("#") or not lines[start].strip()):
        start += 1
    if start >= len(lines) or start > 20:
        return None
    header = lines[start].rstrip("\r")
    body = [line.rstrip("\r") for line in lines[start + 1 : start + 1 + _SAMPLE] if line.strip()]
    if len(body) < 2:
        return None
    for delimiter in (",", "\t", " "):
        names = _split(header, delimiter)
        least = 3 if delimiter == " " else 2
        if len(names) < least or not all(_is_name(n) for n in names):
            continue
        rows = [_split(line, delimiter) for line in body]
        fit = [r for r in rows if len(r) == len(names)]
        if len(fit) < max(2, 0.8 * len(rows)):
            continue
        cells = [c for r in fit for c in r]
        if sum(as_float(c) is not None for c in cells) < 0.5 * len(cells):
            continue
        if key is not None and key not in names:
            return None  # `--step-key` names no column: said as for a CSV (`csv_hint`)
        return delimiter, start, names, _step_column(names, fit, key)
    return None


def _step_column(names: list[str], rows: list[list[str]], key: str | None) -> str | None:
    """The column whose values are the step: `key`, else an integer column rising row by row
    (a name that says step first), else None (the row number)."""
    if key is not None:
        return key if key in names else None
    rising = []
    for i, name in enumerate(names):
        values = [as_int(r[i]) for r in rows if r[i].strip()]
        if len(values) < 2 or any(v is None for v in values):
            continue
        if all(x < y for x, y in pairwise(values)):  # type: ignore[operator]
            rising.append(name)
    ranked = sorted(
        rising,
        key=lambda n: next(
            (i for i, word in enumerate(_PREFERRED) if word in n.lower()), len(_PREFERRED)
        ),
    )
    return ranked[0] if ranked else None


def as_csv(text: str, found: tuple[str, int, list[str], str | None]) -> tuple[str, str, Text]:
    """The table as CSV text with a step column, its step key, and a note on how it was
    read."""
    delimiter, start, names, step = found
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    key = step or ROW
    writer.writerow(names if step else [ROW, *names])
    lines = text.split("\n")
    body = lines[start + 1 :]
    number = 0
    for line in body:
        if not line.strip() or line.startswith("#"):
            continue
        number += 1
        cells = _split(line.rstrip("\r"), delimiter)
        writer.writerow(cells if step else [str(number), *cells])
    if not text.endswith("\n"):  # a cut last row stays cut
        out.seek(out.tell() - 1)
        out.truncate()
    kind = {",": "comma", "\t": "tab", " ": "space"}[delimiter]
    how = f"step column {step!r} (by content)" if step else "no step column: the row number"
    note = Text(f"tuimon: a {kind}-separated table; {how} is the step")
    return out.getvalue(), key, note


def read_table(text: str, key: str | None = None) -> list[Record] | None:
    """A table told by content as records (`sniff`), or None when the text is not one."""
    from tuimon.readers.tabular import read_csv

    found = sniff(text, key)
    if found is None:
        return None
    body, step, note = as_csv(text, found)
    return [note, *read_csv(body, step)]
