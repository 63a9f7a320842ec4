"""TensorBoard event files or run directories -> records, through TensorBoard's own reader.

An optional extra: `pip install "tuimon[tensorboard]"`. Scalars of every tag (and scalar
tensors, as TF2 summaries write them) become metrics; sub-directories (`train/`, `validation/`)
prefix their tags. A tag logged twice at one step keeps both values, in order.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from tuimon.readers.rows import merge
from tuimon.steplog import UNREADABLE, Record, Step, Text

MISSING = 'reading TensorBoard event files needs the extra: pip install "tuimon[tensorboard]"'


class MissingExtra(ImportError):
    """The optional reader is not installed."""


def event_dirs(path: Path) -> list[Path]:
    """Folders holding event files: the folder itself, its sub-folders, or a file's folder."""
    if path.is_file():
        return [path.parent]
    return sorted({f.parent for f in path.rglob("*tfevents*") if f.is_file()})


def _accumulator(target: str) -> Any:
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
    except ImportError:
        raise MissingExtra(MISSING) from None
    acc = ea.EventAccumulator(target, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc


def _scalar_tensor(event: Any) -> float | None:
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(event.tensor_proto)
    except Exception:  # not a numeric tensor (text, images)
        return None
    return float(array) if array.ndim == 0 and array.dtype.kind in "fiub" else None


def damage(file: Path) -> str | None:
    """Where an event file stops being readable (a record cut short, a bad checksum), as a
    note with the byte offset; None when every record is whole. TensorBoard's reader stops
    there without a word; the records after it are not read."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data = file.read_bytes()
    at = count = 0
    while at < len(data):
        head = data[at : at + 12]
        if len(head) < 12:
            return _stopped(file, at, len(data), count, "a record cut short")
        (size,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != masked_crc32c(head[:8]):
            return _stopped(file, at, len(data), count, "a damaged record length")
        body = data[at + 12 : at + 12 + size + 4]
        if len(body) < size + 4:
            return _stopped(file, at, len(data), count, "a record cut short")
        if struct.unpack("<I", body[size:])[0] != masked_crc32c(body[:size]):
            return _stopped(file, at, len(data), count, "a record with a bad checksum")
        at += 12 + size + 4
        count += 1
    return None


def _stopped(file: Path, at: int, size: int, count: int, what: str) -> str:
    return (
        f"tuimon: {file.name}: reading stopped at byte {at} of {size} ({what}, after "
        f"{count} whole records); the rest is not read"
    )


def read_events(path: Path) -> list[Record]:
    """The scalars of an event file or a run directory, as step records; a damaged or cut
    file adds a skipped note that says where reading stopped (`damage`)."""
    notes: list[Record] = []
    for folder in event_dirs(path):
        for file in sorted(folder.glob("*tfevents*")) if path.is_dir() else [path]:
            if file.is_file() and (note := damage(file)) is not None:
                notes.append(Text(note, UNREADABLE))
    return [*notes, *_scalars(path)]


def _scalars(path: Path) -> list[Record]:
    """Every scalar of an event file or a run directory, by TensorBoard's own reader."""
    values: dict[str, dict[int, list[float]]] = {}
    wall: dict[int, float] = {}
    for folder in event_dirs(path):
        target = str(path) if path.is_file() else str(folder)
        acc = _accumulator(target)
        prefix = "" if path.is_file() or folder == path else f"{folder.relative_to(path)}/"
        tags = acc.Tags()
        series: list[tuple[Any, Any, Any]] = [
            (tag, acc.Scalars(tag), None) for tag in tags.get("scalars", [])
        ]
        series += [(tag, acc.Tensors(tag), _scalar_tensor) for tag in tags.get("tensors", [])]
        for tag, events, convert in series:
            for event in events:
                value = event.value if convert is None else convert(event)
                if value is None:
                    continue
                values.setdefault(prefix + tag, {}).setdefault(event.step, []).append(value)
                wall.setdefault(event.step, event.wall_time)
    start = min(wall.values(), default=0.0)
    steps = sorted({s for per in values.values() for s in per})
    records: list[Record] = []
    for step in steps:
        depth = max(len(per.get(step, ())) for per in values.values())
        for k in range(depth):
            metrics = {
                tag: float(per[step][k])
                for tag, per in values.items()
                if k < len(per.get(step, ()))
            }
            records.append(Step(step, metrics, t=wall[step] - start))
    return merge(records)
