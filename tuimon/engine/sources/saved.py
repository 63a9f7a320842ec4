"""Saved logs: a pair directory or two log files, resolved, read and judged as saved."""

from __future__ import annotations

import os
from pathlib import Path

from tuimon.engine.judge.align import MetricFilter, compare_steps
from tuimon.errors import ReplayError, StoreError
from tuimon.readers import PatternError, ReaderError, Reading, log_lines, read_log
from tuimon.steplog import Record, Step, parse_line
from tuimon.store import PAIR_JSON, SIDES, PairDoc, SavedLogs, is_pair_dir, pair_file, special


def saved_select(doc: PairDoc) -> MetricFilter:
    """The `--ignore`/`--only` choice a saved pair was judged with (its summary's `select`)."""
    chosen = doc.summary.get("select") if isinstance(doc.summary, dict) else None
    if not isinstance(chosen, dict):
        return MetricFilter()
    ignore, only = (
        tuple(str(g) for g in v) if isinstance(v := chosen.get(k), list) else ()
        for k in ("ignore", "only")
    )
    return MetricFilter(ignore=ignore, only=only)


def resolve_logs(paths: list[str], reading: Reading | None = None) -> SavedLogs:
    """A saved pair directory, or two log files (any format the readers know), as
    `SavedLogs`; ReplayError otherwise. A pair's own reading (pair.json) unless one is given."""
    if len(paths) == 1:
        path = Path(paths[0])
        if not path.exists():
            raise ReplayError(f"{path}: no such file or directory")
        if not path.is_dir() or not is_pair_dir(path):
            raise ReplayError(f"{path}: not a saved pair (give a pair directory or two log files)")
        damaged = None
        try:
            doc = PairDoc.read(path)
        except StoreError as exc:  # cut (its monitor killed while writing it) or damaged:
            doc = PairDoc()  # judged as a pair without pair.json, which did not finish
            if (path / PAIR_JSON).exists():
                damaged = str(exc).removeprefix(f"{path}: ")
                doc.status = "interrupted"
        try:  # a FIFO, a device or a link leading outside the pair is refused, never opened
            a, b = (pair_file(path, doc.file(side)) for side in SIDES)
        except StoreError as exc:
            raise ReplayError(str(exc)) from None
        if reading is None or not reading.asked:
            reading = saved_reading(path, doc)
        return SavedLogs(a, b, doc, path, reading, damaged)
    if len(paths) == 2:
        for p in paths:
            if not Path(p).exists():
                raise ReplayError(f"{p}: no such log file")
            if kind := special(Path(p)):  # refused at once: reading it could wait forever
                raise ReplayError(f"{p} is {kind}, not a regular file")
        check_two(paths)
        return SavedLogs(Path(paths[0]), Path(paths[1]), reading=reading or Reading())
    raise ReplayError("give one saved pair directory or two log files")


def saved_reading(pair_dir: Path, doc: PairDoc) -> Reading:
    """How a saved pair was read (its pair.json's `reading`); ReplayError naming a saved
    pattern that cannot be used: it is never dropped for a verdict under another reading."""
    try:
        return Reading.from_dict(doc.more.get("reading"))
    except PatternError as exc:
        raise ReplayError(f"{pair_dir / PAIR_JSON}: {exc}") from None


def check_two(paths: list[str]) -> None:
    """ReplayError when the two logs of a pair are one file (a path given twice, a link to
    the other): compared with itself, it would prove nothing."""
    try:
        same = os.path.samefile(paths[0], paths[1])
    except OSError:
        return
    if same:
        raise ReplayError(
            f"{paths[0]} and {paths[1]} are the same file: nothing would be compared "
            "(give the other run's log)"
        )


def read_lines(path: Path, reading: Reading | None = None, side: str = "a") -> list[bytes]:
    """Every non-empty line of a log as step-log lines: a step log's lines as saved, any other
    format read by `tuimon.readers` (ReplayError when it cannot be read)."""
    try:
        return log_lines(path, reading, side)
    except ReaderError as exc:
        raise ReplayError(str(exc)) from None


def read_records(
    path: Path, reading: Reading | None = None, side: str = "a"
) -> tuple[list[bytes], list[Record]]:
    """A log's step-log lines and their records, one for one (`tuimon.readers.read_log`;
    ReplayError when it cannot be read)."""
    try:
        return read_log(path, reading, side)
    except ReaderError as exc:
        raise ReplayError(str(exc)) from None


def steps_of(lines: list[bytes]) -> list[Step]:
    """The step records among lines."""
    return [r for r in map(parse_line, lines) if isinstance(r, Step)]


def first_divergence(
    logs: SavedLogs, tolerance: float = 0.0, select: MetricFilter | None = None
) -> int | None:
    """The first divergent step of two saved logs (vectorised compare)."""
    _, aligner = compare_steps(
        steps_of(read_lines(logs.a, logs.reading, "a")),
        steps_of(read_lines(logs.b, logs.reading, "b")),
        tolerance,
        select or saved_select(logs.doc),
    )
    return aligner.summary().first_divergent_step
