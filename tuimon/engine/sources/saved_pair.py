"""The one loader of a saved pair (a pair directory or two log files): `resolve_logs` opens
it as a `SavedPair`, which replay, the saved view, `compare`, `spread` and `plot` take. Each
side is read once by the readers' registry (records never written as text and parsed again);
it gives the aligned steps, the summary, how the pair ended and the sides' states."""

from __future__ import annotations

import contextlib
import io
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import fields, replace
from functools import cached_property
from itertools import islice
from pathlib import Path
from typing import IO

from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.band import saved_band
from tuimon.engine.judge.byte_rule import hold
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.verdict import Ending, RunEnd, Summary, hold_replicas, how_it_ended
from tuimon.engine.sources.side_state import SideState
from tuimon.errors import ReplayError, StoreError
from tuimon.readers import (
    LineParser,
    PatternError,
    ReaderError,
    Reading,
    open_log,
    read_blocks,
    read_log,
)
from tuimon.readers.formats import log_folder
from tuimon.steplog import End, Header, Record, Step, Text, parse_line
from tuimon.store import SIDES, PairDoc, SavedLogs, is_pair_dir, pair_file, special
from tuimon.store.aligned import AlignedStep


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


def saved_ending(
    logs: SavedLogs,
    ends: Mapping[str, End | None],
    tuimon: Iterable[str] = (),
    counts: Mapping[str, tuple[int, int, str | None]] | None = None,
    text_compared: int = 0,
) -> Ending:
    """How a saved pair ended (`how_it_ended`, the one rule, live and saved), from what it
    holds: its pair.json (missing or damaged: its monitor did not finish), then each log's
    end record (`ends`). `tuimon`: the sides whose log is a tuimon step log, which ends with
    an end record (two logs without one were cut short). `counts`: once the logs are read,
    each side's step records, its other lines and the first of them (a side that logged no
    step is then a reason); `text_compared`: the text lines judged by position."""
    doc, runs = logs.doc, []
    for side in SIDES:
        run, end = doc.run(side), ends.get(side)
        steps, texts, first = counts[side] if counts is not None else (None, 0, None)
        runs.append(
            RunEnd(side, run.status, run.exit_code, None if end is None else end.status,
                   cut_short=end is None and side in tuimon and logs.pair_dir is None,
                   steps=steps, texts=texts, first_text=first)
        )  # fmt: skip
    stopped = doc.more.get("stopped_on_divergence")
    reason = doc.summary.get("reason") if isinstance(doc.summary, dict) else None
    return how_it_ended(
        runs,
        interrupted=doc.status == "interrupted",
        stopped_at=stopped if type(stopped) is int else None,
        no_doc=logs.no_doc,
        damaged=logs.damaged is not None,
        pair_status=doc.status,
        pair_reason=str(reason) if reason else None,
        text_compared=text_compared,
        step_key=logs.reading.step_key is not None,
    )


class SavedPair(SavedLogs):
    """Two saved logs and what the store says of them, read once (kept until `forget`)."""

    @classmethod
    def of(cls, logs: SavedLogs) -> SavedPair:
        """`logs` as the loader (itself when it is one already)."""
        if isinstance(logs, SavedPair):
            return logs
        return cls(**{f.name: getattr(logs, f.name) for f in fields(logs)})

    @cached_property
    def _read(self) -> dict[str, tuple[list[bytes], list[Record]]]:
        out = {}
        for side in SIDES:
            lines, records = read_records(getattr(self, side), self.reading, side)
            out[side] = lines, _boxed(records, self.pair_dir or getattr(self, side).parent)
        return out

    @property
    def held(self) -> bool:
        """Whether its records are read and kept."""
        return "_read" in self.__dict__

    def forget(self) -> SavedPair:
        """Let go of what was read (read again when asked): for a view that keeps a summary."""
        for name in ("_read", "judged", "ending"):
            self.__dict__.pop(name, None)
        return self

    def lines(self, side: str) -> list[bytes]:
        """A side's log as step-log lines, one for each record (what a replay feeds)."""
        return self._read[side][0]

    def records(self, side: str) -> list[Record]:
        """A side's records as the readers read them (a skipped line keeps its reason); an
        end record names its artifacts only inside the pair (`_boxed`)."""
        return self._read[side][1]

    def steps(self, side: str) -> list[Step]:
        """A side's step records."""
        return [r for r in self.records(side) if isinstance(r, Step)]

    def header(self, side: str) -> Header | None:
        """A side's header record, if its log has one."""
        return next((r for r in self.records(side)[:5] if isinstance(r, Header)), None)

    def head(self, side: str) -> Header | None:
        """A side's header without reading its log when its records are not held: a tuimon
        step log's first line as written (None for any other log: `SavedPair.side_state`
        with `quick`)."""
        if self.held:
            return self.header(side)
        path: Path = getattr(self, side)
        if not self.reading.as_written(side) or not path.is_file():
            return None
        try:
            with open_log(path) as fh:
                first = fh.readline(1 << 20)
        except (OSError, EOFError, ValueError):  # the judge tells it
            return None
        if b'"header"' not in first or b"tuimon.steplog" not in first:
            return None
        record = parse_line(first)
        return record if isinstance(record, Header) else None

    def end(self, side: str) -> End | None:
        """A side's end record, if its log has one."""
        return next((r for r in reversed(self.records(side)[-5:]) if isinstance(r, End)), None)

    @property
    def tolerance(self) -> float:
        """The tolerance the pair was judged with (0 for two logs)."""
        return self.doc.tolerance or 0.0

    @property
    def select(self) -> MetricFilter:
        """The `--ignore`/`--only` choice the pair was judged with."""
        return saved_select(self.doc)

    def judge(self, tolerance: float | None = None, select: MetricFilter | None = None) -> tuple[
        list[AlignedStep], PairAligner
    ]:  # fmt: skip
        """Every record of both sides through one aligner as a live pair feeds it (steps
        matched on step and occurrence, text judged, the account kept); steps in order."""
        tolerance = self.tolerance if tolerance is None else tolerance
        aligner = PairAligner(tolerance, select, saved_band(self.doc, tolerance))
        aligned: list[AlignedStep] = []
        for side in SIDES:
            aligned += _feed(aligner, side, self.records(side), (0, None))[0]
        aligned.sort(key=lambda s: (s.step, s.occurrence))
        return aligned, aligner

    @cached_property
    def judged(self) -> tuple[list[AlignedStep], PairAligner]:
        """`judge` with the pair's own tolerance and choice of metrics."""
        return self.judge(self.tolerance, self.select)

    def stream(
        self,
        select: MetricFilter | None = None,
        on_records: Callable[[str, list[Record]], None] | None = None,
    ) -> Iterator[AlignedStep]:
        """The aligned steps as they match (what an export writes), with the pair's tolerance
        and its choice of metrics unless `select` is given. Two large logs of lines are read a
        block at a time, side by side (memory holds a block and the unmatched steps, not the
        logs); other logs, or records already read, are judged whole (`judge`)."""
        try:
            found = {s: read_blocks(getattr(self, s), self.reading, s) for s in SIDES}
            blocks = {s: b for s, b in found.items() if b is not None}
            if self.held or len(blocks) < len(SIDES):
                if on_records is not None:
                    for side in SIDES:
                        on_records(side, self.records(side))
                yield from (self.judged if select is None else self.judge(None, select))[0]
                return
            aligner = PairAligner(
                self.tolerance, select or self.select, saved_band(self.doc, self.tolerance)
            )
            counts: dict[str, tuple[int, int | None]] = dict.fromkeys(SIDES, (0, None))
            while blocks:
                for side, block in list(blocks.items()):
                    if (records := next(block, None)) is None:
                        del blocks[side]
                        continue
                    if on_records is not None:
                        on_records(side, records)
                    matched, counts[side] = _feed(aligner, side, records, counts[side])
                    yield from matched
        except ReaderError as exc:
            raise ReplayError(str(exc)) from None

    def first_divergent_step(self, tolerance: float) -> int | None:
        """The first divergent step at `tolerance` (a replay's jump to it)."""
        return self.judge(tolerance, self.select)[1].summary().first_divergent_step

    @cached_property
    def ending(self) -> Ending:
        """How the pair's runs ended (`saved_ending`; what they logged is not counted: the
        summary's part)."""
        return saved_ending(self, {s: self.end(s) for s in SIDES}, self._tuimon())

    def _tuimon(self) -> list[str]:
        """The sides whose log is a tuimon step log."""
        return [s for s in SIDES if (h := self.header(s)) and h.format.startswith("tuimon")]

    def summary(self) -> Summary:
        """The judgement of the pair: its aligned steps, and why it is not complete (how it
        ended, a side that logged no step)."""
        aligner = self.judged[1]
        counts = {}
        for side in SIDES:
            steps, texts = aligner.accounts[side].steps, []
            if not steps:  # what it printed instead (`no_step_reason`)
                texts = [r.text for r in self.records(side) if isinstance(r, Text)]
            counts[side] = steps, len(texts), texts[0] if texts else None
        ends = {s: self.end(s) for s in SIDES}
        ending = saved_ending(self, ends, self._tuimon(), counts, aligner.text.compared)
        reason = ending.reason
        summary = aligner.summary(
            complete=reason is None, reason=reason, interrupted=ending.interrupted
        )
        devices = self.doc.devices if len(self.doc.devices or ()) == 2 else None
        hold(summary, self.a, self.b, reading=self.reading, select=self.select, devices=devices)
        hold_replicas(summary, self.doc.more.get("replicas"))
        return summary

    def side_state(self, side: str, *, final: bool = False, quick: bool = False) -> SideState:
        """A side's state: its device and command (pair.json's record, else its log's), and
        with `final` how far it ran and how it ended (what a replay reaches at its end).
        `quick`: its log is not read (only a step log's header line, `head`)."""
        run = self.doc.run(side)
        header = self.head(side) if quick and not final else self.header(side)
        state = SideState(side, self.device(side, header), run.command or str(getattr(self, side)))
        if not final:
            return state
        steps, end = self.steps(side), self.end(side)
        state.exit_code, state.status = self.ending.exits[side]
        state.step = steps[-1].step if steps else None
        planned = header.hyper.get("steps") if header is not None else None
        if isinstance(planned, int) and planned > 0:  # steps done / steps planned, as live
            state.total = planned
        elif end is not None and end.steps is not None:
            state.total = end.steps
        state.records = len(steps)
        state.header, state.end = header, end
        return state

    def device(self, side: str, header: Header | None) -> str:
        """A side's device: pair.json's record, else its log's header's, else `?`."""
        device = self.doc.run(side).device or (header.env.get("device") if header else None)
        return str(device or "?")

    def tail(self, side: str, max_lines: int) -> list[Record]:
        """A side's last `max_lines` records (an end record's artifacts inside the pair): its
        held records, else read from the end of its log (`side_tail`)."""
        if self.held:
            return self.records(side)[-max_lines:]
        path: Path = getattr(self, side)
        try:
            recs = side_tail(path, self.reading, side, max_lines)
        except ReaderError as exc:
            raise ReplayError(str(exc)) from None
        if recs is None:  # a small log, or not lines: read whole
            recs = read_records(path, self.reading, side)[1][-max_lines:]
        return _boxed(recs, self.pair_dir or path.parent)

    def window(self, step: int, max_lines: int = 2000) -> dict[str, list[Record]]:
        """Each side's records around `step` (about half before it; the last `max_lines` of
        a side that did not log it). Records held are sliced; else each log is read only
        around the step (`side_window`): a block at a time, never held whole."""
        out = {}
        for side in SIDES:
            if self.held:
                out[side] = _around(self.records(side), step, max_lines)
                continue
            path: Path = getattr(self, side)
            try:
                recs = side_window(path, self.reading, side, step, max_lines)
            except ReaderError as exc:
                raise ReplayError(str(exc)) from None
            if recs is None:  # a small log, or not lines: read whole
                recs = _around(read_records(path, self.reading, side)[1], step, max_lines)
            out[side] = _boxed(recs, self.pair_dir or path.parent)
        return out


def _around(records: list[Record], step: int, max_lines: int) -> list[Record]:
    """The records around the first step record of `step` (`max_lines // 2` before it), or
    the last `max_lines`."""
    at = next((i for i, r in enumerate(records) if isinstance(r, Step) and r.step == step), -1)
    start = len(records) - max_lines if at < 0 else at - max_lines // 2
    return records[max(0, start) :][:max_lines]


WINDOW_HEAD = 64
"""Lines of a log's head read before a window of it: how its lines are read (a step log's
header, JSON rows by key) is known before the window's lines are parsed."""
PROBE_LINES = 64
"""Lines read at a probe of the bisection for the first step record after an offset."""
SEEK_FROM = 1 << 20
"""Bytes of a log from which a window is found by offsets (a smaller one is read whole)."""


def side_window(
    path: Path, reading: Reading, side: str, step: int, max_lines: int
) -> list[Record] | None:
    """A log's records around `step`, as `_around` gives them, reading only near it: a plain
    file of JSON rows (one record a line, steps rising) by a bisection over byte offsets, then
    the lines around the offset found; any other large log of lines a block at a time
    (`read_blocks`), holding `max_lines` records at most. None for a log `read_blocks` reads
    whole (small, or not lines)."""
    found = _seek_window(path, reading, side, step, max_lines)
    if found is not None:
        return found
    blocks = read_blocks(path, reading, side)
    if blocks is None:
        return None
    before: deque[Record] = deque(maxlen=max_lines)
    out: list[Record] | None = None
    for block in blocks:
        for record in block:
            if out is not None:
                out.append(record)
                if len(out) >= max_lines:
                    return out
            elif isinstance(record, Step) and record.step == step:
                half = max_lines // 2
                out = [*(list(before)[len(before) - half :] if half else []), record]
            else:
                before.append(record)
    return out if out is not None else list(before)


def side_tail(path: Path, reading: Reading, side: str, max_lines: int) -> list[Record] | None:
    """A log's last `max_lines` records, reading only its end: a plain file of JSON rows
    from an offset near its end (its head read first), any other large log of lines a block
    at a time holding `max_lines` records. None for a log `read_blocks` reads whole."""
    found = _seek_tail(path, reading, side, max_lines)
    if found is not None:
        return found
    blocks = read_blocks(path, reading, side)
    if blocks is None:
        return None
    kept: deque[Record] = deque(maxlen=max_lines)
    for block in blocks:
        kept.extend(block)
    return list(kept)


def _seek_tail(path: Path, reading: Reading, side: str, max_lines: int) -> list[Record] | None:
    """`side_tail` by byte offsets (None: not a plain log of JSON rows)."""
    with _opened(path) as fh:
        head = _json_rows_head(fh, reading, side)
        if head is None:
            return None
        size = os.fstat(fh.fileno()).st_size
        back = 2 * max(1, fh.tell() // max(1, len(head))) * (max_lines + 1)
        while True:
            start = max(0, size - back)
            fh.seek(start)
            if start:
                fh.readline()  # the rest of a line cut by the offset
            parser = LineParser(reading, side)
            if start:
                parser.feed(head)
                parser.close()
            kept: deque[Record] = deque(_records_of(fh, parser), maxlen=max_lines)
            if len(kept) >= max_lines or not start:
                return list(kept)
            back *= 4  # longer lines near the end than in the head


def _opened(path: Path) -> IO[bytes]:
    """A log's bytes (`open_log`); a file that cannot be opened is a one-line ReaderError."""
    try:
        return open_log(path)
    except OSError as exc:
        raise ReaderError(f"{path}: {exc.strerror or exc}") from None


def _json_rows_head(fh: IO[bytes], reading: Reading, side: str) -> list[bytes] | None:
    """The first lines of a plain (uncompressed) log of at least `SEEK_FROM` bytes whose
    lines are JSON rows, one record a line (`fh` left after them); None for any other."""
    if not isinstance(fh, io.BufferedReader):  # compressed: no seeking by offset
        return None
    if os.fstat(fh.fileno()).st_size < SEEK_FROM:
        return None
    head = [line for line in islice(fh, WINDOW_HEAD) if line.strip()]
    probe = LineParser(reading, side)
    probe.feed(head)
    if not (probe.json_rows or probe.tuimon) or probe.levels or probe.numbered or probe.notes:
        return None
    return head


def _seek_window(
    path: Path, reading: Reading, side: str, step: int, max_lines: int
) -> list[Record] | None:
    """`side_window` by byte offsets, for an uncompressed log of JSON rows read one record a
    line; None when the log is not one, or when its steps do not rise around `step`."""
    with _opened(path) as fh:
        head = _json_rows_head(fh, reading, side)
        if head is None:
            return None
        size = os.fstat(fh.fileno()).st_size
        probe = LineParser(reading, side)
        probe.feed(head)
        width = max(1, fh.tell() // max(1, len(head)))
        lo, hi = 0, size
        while hi - lo > 1 << 16:  # the last offset whose next step is below `step`
            mid = (lo + hi) // 2
            at = _next_step(fh, mid, probe)
            if at is None or at >= step:
                hi = mid
            else:
                lo = mid
        start = max(0, lo - 2 * width * (max_lines // 2 + 1))
        fh.seek(start)
        if start:
            fh.readline()  # the rest of a line cut by the offset
        parser = LineParser(reading, side)
        if start:
            parser.feed(head)  # read as the log's head says (its records are not kept)
            parser.close()
        before: deque[Record] = deque(maxlen=max(1, max_lines // 2))
        out: list[Record] | None = None
        first = True
        for record in _records_of(fh, parser):
            if out is not None:
                out.append(record)
                if len(out) >= max_lines:
                    break
            elif isinstance(record, Step):
                if first and start and record.step >= step:
                    return None  # backed up too little: steps do not rise as a bisection needs
                first = False
                if record.step == step:
                    out = [*before, record]
                elif record.step > step:
                    return None  # passed it: not logged here, or steps that do not rise
                else:
                    before.append(record)
            else:
                before.append(record)
        return out


def _records_of(fh: IO[bytes], parser: LineParser) -> Iterator[Record]:
    """The records of the lines left in `fh`, then what the parser holds at the end."""
    for line in fh:
        if line.strip():
            yield from parser.feed([line])
    yield from parser.close()


def _next_step(fh: IO[bytes], offset: int, parser: LineParser) -> int | None:
    """The step of the first step record on a whole line after `offset` (None: none within
    `PROBE_LINES` lines)."""
    fh.seek(offset)
    fh.readline()
    for line in islice(fh, PROBE_LINES):
        record, _ = parser.parse(line)
        if isinstance(record, Step):
            return record.step
    return None


def _feed(
    aligner: PairAligner, side: str, records: list[Record], at: tuple[int, int | None]
) -> tuple[list[AlignedStep], tuple[int, int | None]]:
    """A side's records through the aligner, a record not a step noted where it comes (`at`:
    steps seen, the last one); what aligns now and the new `at`."""
    (seen, last), steps = at, []
    for record in records:
        if isinstance(record, Step):
            steps.append(record)
            last = record.step
        else:
            aligner.note_other(side, record, (seen + len(steps), last))
    return aligner.feed_batch(side, steps), (seen + len(steps), last)


def boxed_end(end: End | None, box: Path) -> End | None:
    """An end record as `_boxed` leaves it (its artifacts, files inside ``box``)."""
    if end is None:
        return None
    record = _boxed([end], box)[0]
    return record if isinstance(record, End) else end


def _boxed(records: list[Record], box: Path) -> list[Record]:
    """Records whose end names artifacts by the files of that name inside ``box`` (a pair is a
    closed box: a log that names `/elsewhere/x.npy` never makes a reader open it); one that is
    not a regular file there is left out."""
    out = records
    for i, end in enumerate(records):
        if isinstance(end, End) and isinstance(end.artifacts, dict) and end.artifacts:
            kept = {}
            for name, value in end.artifacts.items():
                with contextlib.suppress(StoreError, TypeError, ValueError):
                    kept[name] = str(pair_file(box, Path(str(value)).name))
            out = out if out is not records else list(records)
            out[i] = replace(end, artifacts=kept)
    return out


def resolve_logs(paths: list[str], reading: Reading | None = None) -> SavedPair:
    """A saved pair directory, or two log files (any format the readers know), opened as the
    loader (nothing read yet); ReplayError otherwise. A pair's own reading unless one is
    given."""
    if len(paths) == 1:
        path = Path(paths[0])
        if not path.exists():
            raise ReplayError(f"{path}: no such file or directory")
        if path.is_dir() and not is_pair_dir(path) and log_folder(path):
            raise ReplayError(
                f"{path}: one run's log (a run folder), not a pair: compare it with another "
                "run's (`tuimon compare A B`; --save keeps the pair for replay, spread, plot)"
            )
        if not path.is_dir() or not is_pair_dir(path):
            raise ReplayError(f"{path}: not a saved pair (give a pair directory or two log files)")
        try:  # a FIFO, a device or a link leading outside the pair is refused, never opened
            logs = SavedLogs.open(path, reading)
        except StoreError as exc:
            raise ReplayError(str(exc)) from None
        if reading is None or not reading.asked:
            logs.reading = saved_reading(path, logs.doc)
        return SavedPair.of(logs)
    if len(paths) == 2:
        for p in paths:
            if not Path(p).exists():
                raise ReplayError(f"{p}: no such log file")
            if kind := special(Path(p)):  # refused at once: reading it could wait forever
                raise ReplayError(f"{p} is {kind}, not a regular file")
        check_two(paths)
        return SavedPair(Path(paths[0]), Path(paths[1]), reading=reading or Reading())
    raise ReplayError("give one saved pair directory or two log files")


def saved_reading(pair_dir: Path, doc: PairDoc) -> Reading:
    """How a saved pair was read (its pair.json's `reading`); ReplayError naming a saved
    pattern that cannot be used: it is never dropped for a verdict under another reading."""
    try:
        return Reading.from_dict(doc.more.get("reading"))
    except PatternError as exc:
        raise ReplayError(f"{PairDoc.where(pair_dir)}: {exc}") from None


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


def read_records(
    path: Path, reading: Reading | None = None, side: str = "a"
) -> tuple[list[bytes], list[Record]]:
    """A log's step-log lines and their records, one for one (`tuimon.readers.read_log`;
    ReplayError when it cannot be read)."""
    try:
        return read_log(path, reading, side)
    except ReaderError as exc:
        raise ReplayError(str(exc)) from None
