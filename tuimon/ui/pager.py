"""Moving through a pair like in a pager: a cursor row, jump to a step, next / previous
divergence, search, copy, export as CSV. The pair's panes (`PairPanes`) own one `Pager`.

The cursor is a step (or a text row) both panes mark; every move puts it in the middle of the
panes. Moves look through the rows the panes keep (the last `max_lines`); a jump to a step they
no longer hold reads the lines around it from the logs on disk, when there are logs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from tuimon.engine.analyses import export
from tuimon.engine.judge.align import compare_steps
from tuimon.engine.sources.saved_pair import SavedPair
from tuimon.steplog import Record, Step
from tuimon.store import SavedLogs
from tuimon.store.aligned import AlignedStep
from tuimon.ui.pair_model import DIVERGENCE, PairModel, PairRows
from tuimon.ui.text import clean, fmt_number, same_bits

SIDE_NAMES = ("a", "b")


class PagerHost(Protocol):
    """What the pager needs of the view it moves through (the pair's panes)."""

    @property
    def model(self) -> PairModel: ...
    @property
    def series(self) -> str: ...
    @property
    def rows(self) -> PairRows: ...
    def show_cursor(self, index: int) -> None: ...
    def jump_far(self, step: int) -> bool: ...
    def search_far(self, needle: str, anchor: int | None, forward: bool) -> bool: ...
    def notify(self, message: str, *, timeout: float | None = None) -> None: ...


def row_differs(rows: PairRows, step: int) -> bool:
    """Both sides logged `step` and some shared metric differs in its bits."""
    a, b = rows.metrics_of(step, "a"), rows.metrics_of(step, "b")
    if a is None or b is None:
        return False
    return any(name in b and not same_bits(value, b[name]) for name, value in a.items())


def row_words(rows: PairRows, index: int) -> str:
    """A kept row as one line of text (what search looks in and copy copies)."""
    step, slots = rows.entries[index]
    if step is None:
        return " | ".join(f"{side}: {slots[side][1]}" for side in SIDE_NAMES if side in slots)
    parts = [f"step {step}"]
    for side in SIDE_NAMES:
        metrics = rows.metrics_of(step, side)
        if metrics is not None:
            values = " ".join(f"{k}={fmt_number(v, 17)}" for k, v in metrics.items())
            parts.append(f"{side}: {values}")
    return " | ".join(parts)


_NUMBER = re.compile(r"[-+]?(?P<mantissa>\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")


def shows_number(rows: PairRows, index: int, needle: str) -> bool:
    """True when a value of the kept row reads as the number `needle` rounded to as many
    significant digits as `needle` has: the panes round (0.1509286 shows as `0.15093`)."""
    step = rows.entries[index][0]
    if step is None:
        return False
    values = [v for side in SIDE_NAMES for v in (rows.metrics_of(step, side) or {}).values()]
    return reads_as(values, needle)


def reads_as(values: Iterable[float], needle: str) -> bool:
    """A value reads as the number `needle`, rounded to as many significant digits as it has."""
    found = _NUMBER.fullmatch(needle.strip())
    if found is None:
        return False
    wanted = float(found[0])
    digits = len(found["mantissa"].replace(".", "").lstrip("0")) or 1
    return any(float(fmt_number(v, min(digits, 17))) == wanted for v in values)


def as_step(needle: str) -> int | None:
    """The step a number searched for names (`287`), None for other text."""
    try:
        return int(needle.strip())
    except ValueError:
        return None


def row_holds(rows: PairRows, index: int, needle: str) -> bool:
    """A kept row holds `needle` (lower case): a number is a step of that number or a value
    that reads as it (`shows_number`), never digits inside another value; other text is a
    part of the row's text (`row_words`). A text row holds what its text holds."""
    step = rows.entries[index][0]
    if step is not None and _NUMBER.fullmatch(needle.strip()):
        return step == as_step(needle) or shows_number(rows, index, needle)
    return needle in row_words(rows, index).lower()


def step_words(side: str, step: Step) -> str:
    """One side's record of a step as search reads it (as `row_words` writes that side)."""
    values = " ".join(f"{k}={fmt_number(v, 17)}" for k, v in step.metrics.items())
    return f"step {step.step} | {side}: {values}"


def steps_matching(logs: SavedLogs, needle: str) -> list[int]:
    """(thread) The steps of either log whose record holds `needle` (lower case), as
    `row_holds` reads a row, in order: both logs streamed a block at a time, never held whole."""
    found: set[int] = set()
    number, step = _NUMBER.fullmatch(needle.strip()) is not None, as_step(needle)

    def holds(side: str, record: Step) -> bool:
        if number:
            return record.step == step or reads_as(record.metrics.values(), needle)
        return needle in step_words(side, record).lower()

    def look(side: str, records: list[Record]) -> None:
        for record in records:
            if isinstance(record, Step) and holds(side, record):
                found.add(record.step)

    pair = SavedPair.of(logs)
    held = pair.held
    try:
        for _ in pair.stream(on_records=look):
            pass
    finally:
        if not held:
            pair.forget()
    return sorted(found)


def next_match(matches: list[int], anchor: int | None, forward: bool) -> tuple[int, bool] | None:
    """The match after (or before) the step `anchor` (None: from the start, or the end), and
    whether the search wrapped around the log's end to get it."""
    if not matches:
        return None
    if forward:
        later = [s for s in matches if anchor is None or s > anchor]
        return (later[0], False) if later else (matches[0], True)
    earlier = [s for s in matches if anchor is None or s < anchor]
    return (earlier[-1], False) if earlier else (matches[-1], True)


class Pager:
    """The pager moves of one pair view."""

    def __init__(self, host: PagerHost) -> None:
        self.host = host
        self.cursor: int | None = None
        """Absolute index (`PairRows.start` based) of the row under the cursor."""
        self.query = ""

    @property
    def rows(self) -> PairRows:
        """The kept rows of both panes."""
        return self.host.rows

    def index(self) -> int | None:
        """The cursor's position among the kept rows (None: no cursor, or its row is gone)."""
        if self.cursor is None:
            return None
        at = self.cursor - self.rows.start
        return at if 0 <= at < len(self.rows) else None

    def cursor_step(self) -> int | None:
        """The step under the cursor (None on a text row or without a cursor)."""
        at = self.index()
        return self.rows.entries[at][0] if at is not None else None

    def put(self, index: int) -> None:
        """The cursor on a kept row, shown in the middle of both panes."""
        self.cursor = self.rows.start + index
        self.host.show_cursor(index)

    def _from(self) -> int:
        at = self.index()
        return at if at is not None else len(self.rows) - 1

    # -- moves --------------------------------------------------------------------------------

    def jump_to_step(self, text: str) -> None:
        """The cursor on step N (the nearest kept step at or after it, else read from disk)."""
        try:
            step = int(text.strip().replace(",", "").replace("_", ""))
        except ValueError:
            self.host.notify(f"not a step number: {clean(text, 40)}", timeout=3)
            return
        at = self.rows.index_of(step)
        if at is not None:
            self.put(at)
            return
        if self.host.jump_far(step):
            return
        kept = [(s, i) for i, (s, _) in enumerate(self.rows.entries) if s is not None]
        later = [(s, i) for s, i in kept if s >= step]
        if later:
            self.put(later[0][1])
            self.host.notify(f"step {step} not logged; at step {later[0][0]}", timeout=3)
        else:
            self.host.notify(f"step {step} is not among the rows kept", timeout=3)

    def divergence(self, forward: bool) -> None:
        """The cursor on the next (or previous) step whose values differ."""
        found = self._find(lambda i: _differs_at(self.rows, i), forward)
        if found is None:
            where = "after" if forward else "before"
            self.host.notify(f"no differing step {where} this row among the rows kept", timeout=3)
            return
        self.put(found)

    def search(self, query: str, forward: bool = True) -> None:
        """The cursor on the next row that holds `query` (`row_holds`: a step number, a value
        as the panes round it, text, case-insensitive): the rows kept
        from the cursor on, then (an ended pair with logs on disk) both whole logs, wrapping
        at the end; else the rows kept, wrapping."""
        if query:
            self.query = query
        needle = self.query.lower()
        if not needle:
            self.host.notify("no search yet: / searches", timeout=3)
            return

        def hit(i: int) -> bool:
            return row_holds(self.rows, i, needle)

        found = self._find(hit, forward)
        if found is not None:
            self.put(found)
            return
        if self.host.search_far(needle, self._anchor(), forward):
            return  # the logs are searched (a worker), then the cursor goes to the match
        start = -1 if forward else len(self.rows)
        found = next((i for i in _around(start, len(self.rows), forward) if hit(i)), None)
        if found is None:
            self.host.notify(f"not found: {clean(self.query, 60)}", timeout=3)
            return
        had_cursor = self.index() is not None
        self.put(found)
        if had_cursor:
            self.host.notify(wrapped(forward), timeout=2)

    def _anchor(self) -> int | None:
        """The step a search of the logs goes on from: the cursor's, or the last step before
        its text row (None: no cursor, the search starts at an end)."""
        at = self.index()
        if at is None:
            return None
        before = reversed(list(self.rows.entries)[: at + 1])
        return next((step for step, _ in before if step is not None), None)

    def _find(self, hit: Callable[[int], bool], forward: bool) -> int | None:
        for i in _around(self._from(), len(self.rows), forward):
            if hit(i):
                return i
        return None

    # -- copying and exporting ----------------------------------------------------------------

    def row_text(self) -> str | None:
        """The row under the cursor as one line (None without a cursor)."""
        at = self.index()
        return row_words(self.rows, at) if at is not None else None

    def value_text(self) -> str | None:
        """The cursor row's value of the metric the sparkline follows (else the first
        differing metric, else the first column) on both sides, with their difference."""
        step = self.cursor_step()
        if step is None:
            return None
        a = self.rows.metrics_of(step, "a") or {}
        b = self.rows.metrics_of(step, "b") or {}
        name = self._value_name(a, b)
        if name is None:
            return None
        va, vb = a.get(name), b.get(name)
        text = f"step {step} {name}: a={fmt_number(va, 17)} b={fmt_number(vb, 17)}"
        if va is not None and vb is not None:
            text += f" diff={fmt_number(vb - va, 17)}"
        return text

    def _value_name(self, a: dict[str, float], b: dict[str, float]) -> str | None:
        if self.host.series != DIVERGENCE and (self.host.series in a or self.host.series in b):
            return self.host.series
        differing = [k for k, v in a.items() if k in b and not same_bits(v, b[k])]
        names = differing or list(self.host.model.columns) or list(a) or list(b)
        return next((n for n in names if n in a or n in b), None)


def wrapped(forward: bool) -> str:
    """What the bottom line says when a search went round the end."""
    return "search wrapped to the top" if forward else "search wrapped to the bottom"


def _differs_at(rows: PairRows, index: int) -> bool:
    step = rows.entries[index][0]
    return step is not None and row_differs(rows, step)


def _around(start: int, count: int, forward: bool) -> Iterator[int]:
    """Positions after (or before) `start`, not wrapping."""
    return iter(range(start + 1, count)) if forward else iter(range(start - 1, -1, -1))


def export_rows(
    logs: SavedLogs | None, kept: tuple[dict[int, dict[str, float]], ...], target: Path
) -> tuple[Path, int, str]:
    """Write a pair's aligned rows as CSV (`tuimon.engine.analyses.export`, the columns of
    `tuimon export`) to `target`, or the first free numbered name beside it (else in the current
    folder): every step of both logs when the logs are on disk, else `kept` (the steps the panes
    keep, copied on the app's loop). Returns (where, rows, where they came from)."""
    aligned: Iterable[AlignedStep]
    if logs is None:
        a, b = ([Step(s, metrics) for s, metrics in sorted(side.items())] for side in kept)
        aligned, source = compare_steps(a, b)[0], "the rows kept in the panes"
    else:
        aligned, source = export.aligned_rows(logs), "both logs"
    try:
        out, path = open_new(target)
    except OSError:
        out, path = open_new(Path.cwd() / target.name)
    with out:
        return path, export.write(aligned, out, "csv"), source


def open_new(path: Path) -> tuple[BinaryIO, Path]:
    """`path` opened as a new file; when that name is taken (a file, a folder, a link, even one
    that points nowhere: a saved pair is data, never a way to write elsewhere), the first free
    numbered name."""
    target, n = path, 1
    while True:
        try:
            return open(target, "xb"), target  # O_EXCL: never through a link
        except (FileExistsError, IsADirectoryError):
            target = path.with_name(f"{path.stem}-{n}{path.suffix}")
            n += 1
