"""The registry of formats: every format tuimon reads, how it is recognised, who writes it, how
it is read and whether it streams live. `read_path` is the one dispatch by content (never by
file name alone); `tuimon read` shows an entry's rule, the docs list the entries (a test checks
them against this registry), and a new format is one entry here and its reader module.

Folders and binary files are told by what they hold; a file that is one JSON value is a
document; a CSV with a step column is read whole; every other file is lines, read by the one
line parser that reads a live run (`tuimon.readers.lines.LineParser`), which tells a tuimon
step log, JSON Lines, a table and printed text apart as it reads.
"""

from __future__ import annotations

import gzip
import lzma
import re
from pathlib import Path
from typing import IO

import orjson

from tuimon.readers.binary import why_binary
from tuimon.readers.capped import open_capped, open_regular
from tuimon.readers.csv_records import csv_columns, read_csv
from tuimon.readers.cut import lines_of
from tuimon.readers.documents import cut_document, read_document
from tuimon.readers.entry import Format as Format
from tuimon.readers.entry import Loaded as Loaded
from tuimon.readers.folder import json_files, read_folder
from tuimon.readers.line_formats import JSON_LINES as JSON_LINES
from tuimon.readers.line_formats import LINE_FORMATS
from tuimon.readers.line_formats import STEPLOG as STEPLOG
from tuimon.readers.line_formats import TABLE as TABLE
from tuimon.readers.line_formats import TEXT as TEXT
from tuimon.readers.lines import BOM, LineParser, load_document
from tuimon.readers.per_metric import is_sacred, mlflow_metrics, read_mlflow, read_sacred
from tuimon.readers.reading import Reading
from tuimon.readers.rows_to_steps import renamed, step_key
from tuimon.readers.tensorboard import event_dirs, read_events
from tuimon.readers.wandb_run import is_wandb, read_wandb, run_files
from tuimon.steplog import Record, Step

HELP = "see docs/reading-logs.md; --pattern REGEX reads other printed lines"
_CORRUPT = (EOFError, lzma.LZMAError, gzip.BadGzipFile)


class ReaderError(Exception):
    """A file no reader can read (one line for the user)."""


def _wandb_folder(path: Path) -> Loaded | None:
    return Loaded(WANDB.name, read_wandb(path), step_key="_step") if run_files(path) else None


def _wandb_file(path: Path, data: bytes, reading: Reading) -> Loaded | None:
    return Loaded(WANDB.name, read_wandb(path, data), step_key="_step") if is_wandb(data) else None


def _tensorboard_folder(path: Path) -> Loaded | None:
    return Loaded(TENSORBOARD.name, read_events(path)) if event_dirs(path) else None


def _mlflow_folder(path: Path) -> Loaded | None:
    metrics = mlflow_metrics(path)
    return Loaded(MLFLOW.name, read_mlflow(metrics)) if metrics is not None else None


def _json_folder(path: Path) -> Loaded | None:
    files = json_files(path)
    return Loaded(JSON_FILES.name, read_folder(files)) if files else None


def _tensorboard_file(path: Path, data: bytes, reading: Reading) -> Loaded | None:
    if b"brain.Event:" in data[:256] or ("tfevents" in path.name and b"\x00" in data[:64]):
        return Loaded(TENSORBOARD.name, read_events(path))
    return None


def _csv_file(path: Path, data: bytes, reading: Reading) -> Loaded | None:
    if _binary(data[:65536]):
        return None
    first = data.lstrip().partition(b"\n")[0][: 1 << 24].decode("utf-8", "replace")
    if not csv_columns(first.strip(), reading.step_key):
        return None
    return Loaded(CSV.name, read_csv(data.decode("utf-8", "replace"), reading.step_key))


def _tensorboard_head(head: bytes) -> bool:
    return b"brain.Event:" in head


def _document_head(head: bytes) -> bool:
    """A JSON document's start: `[` opening rows, or a first line that opens an object and
    does not close it (a `[11/19 08:55:03] INFO` line is not one)."""
    body = head.lstrip()
    first = body.split(b"\n", 1)[0].strip()
    return bool(body[:1] == b"[" and _DOCUMENT.match(body)) or (
        body[:1] == b"{" and not first.endswith(b"}")
    )


def _csv_head(head: bytes) -> bool:
    first = head.lstrip().split(b"\n", 1)[0].strip()
    return csv_columns(first.decode("utf-8", "replace")) is not None


WANDB = Format(
    "W&B run",
    "a W&B transaction log (`:W&B` LevelDB-style records of W&B's protobuf records): a "
    "`.wandb` file, a run folder holding one, or a wandb/ folder of one run and its resumptions",
    "wandb offline runs (wandb/offline-run-*/run-*.wandb), runs whose sync failed",
    streams=False,
    records=True,
    folder=_wandb_folder,
    file=_wandb_file,
    head=is_wandb,
)
TENSORBOARD = Format(
    "tensorboard",
    "TensorBoard event records (`brain.Event`): an event file, or a run folder holding them",
    "torch.utils.tensorboard, Keras' TensorBoard callback, TF summaries",
    streams=False,
    folder=_tensorboard_folder,
    file=_tensorboard_file,
    head=_tensorboard_head,
)
MLFLOW = Format(
    "MLflow run",
    "a folder whose metrics/ holds a file per metric, lines `timestamp value step`",
    "MLflow's file store (mlruns/<experiment>/<run>)",
    streams=False,
    folder=_mlflow_folder,
)
JSON_FILES = Format(
    "JSON files",
    "a folder of numbered JSON files, one row each (its step key, else the number in its name)",
    "AllenNLP's metrics_epoch_N.json, per-step eval dumps",
    streams=False,
    folder=_json_folder,
)
TRAINER_STATE = Format(
    "trainer_state.json",
    "a JSON document with a log_history list",
    "the Hugging Face Trainer",
    streams=False,
)
SACRED = Format(
    "sacred metrics.json",
    "a JSON document of one object per metric holding steps, values and timestamps lists",
    "sacred",
    streams=False,
)
DOCUMENT = Format(
    "JSON document",
    "one JSON value over one or many lines: a list of rows, rows under a key, or per-metric "
    "arrays beside a step array",
    "metrics files, detectron2's metrics.json, W&B summaries",
    streams=False,
    file=lambda path, data, reading: _json_document(path, data, reading),  # trainer_state, sacred
    head=_document_head,
)
CSV = Format(
    "CSV",
    "a header line with a step column, comma-separated, read whole (rows of one step merged)",
    "Lightning's CSVLogger, Keras' CSVLogger, pandas to_csv",
    streams=False,
    file=_csv_file,
    head=_csv_head,
)
FORMATS: tuple[Format, ...] = (
    WANDB, TENSORBOARD, MLFLOW, JSON_FILES, TRAINER_STATE, SACRED, DOCUMENT, CSV, *LINE_FORMATS,
)  # fmt: skip
"""Every format, in the order they are tried (folders first, then files, then the formats of
lines, whose rules `LineParser` asks in this order: `tuimon.readers.line_formats`)."""
BY_NAME = {f.name: f for f in FORMATS}
FORMATS_TRIED = ", ".join(f.name for f in FORMATS)


def _binary(head: bytes) -> bool:
    """Bytes that are no text log: a NUL, or more than 10% control bytes that text has not."""
    if b"\x00" in head:
        return True
    control = sum(
        head.count(bytes([c])) for c in (*range(1, 9), 11, 12, *range(14, 27), 28, 29, 30, 31, 127)
    )
    return control > len(head) // 10


def log_folder(path: Path) -> bool:
    """Whether a folder is a log a reader takes (a W&B run, TensorBoard events, an MLflow run,
    numbered JSON files), told without reading it."""
    try:
        return bool(
            run_files(path) or event_dirs(path) or mlflow_metrics(path) is not None
            or json_files(path)
        )  # fmt: skip
    except OSError:
        return False


def read_path(path: Path, reading: Reading, side: str) -> Loaded:
    """A log by content, through the registry: a folder by the entries' folder readers, a
    file by their file readers in order (a TensorBoard file, a JSON document, a CSV with a
    step column), else lines (`_line_log`)."""
    if path.is_dir():
        for entry in FORMATS:
            if entry.folder is not None and (loaded := entry.folder(path)) is not None:
                return as_asked(loaded, reading, side)
        raise ReaderError(
            f"{path}: a directory without TensorBoard event files, a W&B .wandb file, an "
            f"MLflow metrics/ folder or numbered JSON files ({HELP})"
        )
    data = read_bytes(path).removeprefix(BOM)
    for entry in FORMATS:
        if entry.file is not None and (loaded := entry.file(path, data, reading)) is not None:
            return as_asked(loaded, reading, side)
    if (why := why_binary(data)) is not None:  # not a log: said, never read as text
        raise ReaderError(f"{path}: unreadable: {why}, not a log tuimon reads")
    return _line_log(data, reading, side)


def open_log(path: Path) -> IO[bytes]:
    """A log file's bytes, decompressed when it is gzip or xz (told by content, not name) as
    a stream capped in what it expands to (`capped`). Regular files only, opened without
    blocking: a FIFO or a device is `NotRegular` (an OSError), never read."""
    fh = open_regular(path)
    try:
        magic = fh.read(6)
        fh.seek(0)
        return open_capped(fh, magic) or fh
    except BaseException:
        fh.close()
        raise


def read_bytes(path: Path) -> bytes:
    """A log file's bytes, decompressed: the one place a reader opens a file (OSError when it
    cannot, `TooLarge` past the cap on expansion)."""
    with open_log(path) as fh:
        return fh.read()


def as_asked(loaded: Loaded, reading: Reading, side: str) -> Loaded:
    """Records renamed (`--map`) and with the clocks `--judge` names judged."""
    rename = reading.renames(side)
    if rename or reading.judge:
        loaded.records = [reading.promote(renamed(r, rename)) if isinstance(r, Step) else r
                          for r in loaded.records]  # fmt: skip
    return loaded


_DOCUMENT = re.compile(rb"""[\[{]\s*(["{\[]|$)""")
"""The first line of a JSON document written over lines: `{`, `[`, `{"key": ...`, `[{...`."""


def _rows_follow(rest: bytes, lines: int = 16) -> bool:
    """After a first line that opens JSON but does not parse: whether whole JSON objects follow
    on lines of their own (JSON Lines whose first lines are damaged, read as a live pair reads
    them), or nothing does (one line cut short); a document over lines has rows that end in
    `,` or does not close them on one line."""
    body = rest.strip()
    if not body:
        return True
    for line in body.split(b"\n", lines)[:-1] or [body]:
        line = line.strip()
        if line[:1] == b"{" and line[-1:] == b"}":
            try:
                if isinstance(orjson.loads(line), dict):
                    return True
            except orjson.JSONDecodeError:
                continue
    return False


def _json_document(path: Path, data: bytes, reading: Reading) -> Loaded | None:
    """A whole-file JSON document (trainer_state.json, a list of rows, per-metric arrays) as
    its steps; None when the data is not one (a JSON Lines file of one line is not).
    ReaderError when it is one without steps. One cut short is read up to its last whole
    row, with a note that says where it stopped (`cut_document`)."""
    body = data.lstrip()
    if body[:1] not in (b"{", b"["):
        return None
    first, _, rest = body.partition(b"\n")
    if first.rstrip()[-1:] in (b"}", b"]") and rest.strip():
        return None  # a whole value on the first line, and more lines: JSON Lines
    notes: list[Record] = []
    try:
        doc = load_document(body)
    except (ValueError, RecursionError) as exc:
        cut = cut_document(body)
        opened = _DOCUMENT.match(first) and first.rstrip()[-1:] not in (b"}", b"]")
        if cut is None and opened and not _rows_follow(rest):
            at = getattr(exc, "pos", None)
            where = f" at byte {at}" if isinstance(at, int) else ""
            raise ReaderError(
                f"{path}: a JSON document that cannot be read: cut short or damaged{where}, "
                f"before any whole row"
            ) from None
        if cut is None:
            return None
        doc, note = cut
        notes.append(note)
    single_row = (  # a JSON Lines file of one line
        isinstance(doc, dict)
        and b"\n" not in body.strip()
        and ("type" in doc or step_key(doc) is not None)
    )
    if single_row:
        return None
    if is_sacred(doc):
        return Loaded(SACRED.name, [*notes, *read_sacred(doc)])
    records = read_document(doc, reading.step_key)
    kind = TRAINER_STATE.name if isinstance(doc, dict) and "log_history" in doc else DOCUMENT.name
    if not records:
        raise ReaderError(
            f"{path}: a JSON document with no steps (no list of objects with a step "
            f"key, no per-metric arrays beside a step array; {HELP})"
        )
    return Loaded(kind, [*notes, *records])


def _line_log(data: bytes, reading: Reading, side: str) -> Loaded:
    """A log of lines: a tuimon step log, JSON Lines, a table or printed text, as the entry
    whose rules read it says (`LineParser.format`)."""
    lines = lines_of(data)
    parser = LineParser(reading, side)
    records = parser.feed(lines) + parser.close()  # as a live stream is read: the same rows
    kind = parser.format
    if kind is STEPLOG:
        raw = lines if reading.as_written(side) else None
        return Loaded(kind.name, records, raw, rules=parser.read_by())
    return Loaded(kind.name, records, step_key=parser.first_key, rules=parser.read_by())
