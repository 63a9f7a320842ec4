"""TensorBoard event files or run directories -> records, through TensorBoard's own reader.

An optional extra (`pip install -e ".[tensorboard]"` in the checkout). Scalars of every tag
(and scalar tensors, as TF2 summaries write them) become metrics; sub-directories (`train/`,
`validation/`) prefix their tags. A tag logged twice at one step keeps both values, in order.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

from tuimon.readers.capped import TooLarge, open_regular
from tuimon.readers.rows_to_steps import merge
from tuimon.steplog import UNREADABLE, Record, Step, Text

MISSING = (
    "reading TensorBoard event files needs tensorboard: pip install tensorboard "
    '(in the tuimon checkout: pip install -e ".[tensorboard]")'
)


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


MAX_RECORD = 1 << 31
"""No TensorBoard record is larger (a protobuf message is under 2 GiB): a length field that
says more is damage, said as such, and nothing of that size is allocated."""


def damage(file: Path) -> tuple[str, int] | None:
    """Where an event file stops being readable (a record cut short, a bad checksum), as a
    note with the byte offset, and that offset; None when every record is whole. Every length
    field is checked against the bytes that exist before anything is read (`TooLarge`, one
    line, for a length no record can have)."""
    try:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    except ImportError:
        raise MissingExtra(MISSING) from None

    with open_regular(file) as fh:
        data = fh.read()
    at = count = 0
    while at < len(data):
        head = data[at : at + 12]
        if len(head) < 12:
            return _stopped(file, at, len(data), count, "a record cut short")
        (size,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != masked_crc32c(head[:8]):
            return _stopped(file, at, len(data), count, "a damaged record length")
        if size >= MAX_RECORD:
            raise TooLarge(
                f"a record length of {size} bytes at byte {at} of {len(data)}: "
                f"no TensorBoard record is that large (damaged or hostile; not read)"
            )
        if at + 12 + size + 4 > len(data):
            return _stopped(file, at, len(data), count, "a record cut short")
        body = data[at + 12 : at + 12 + size + 4]
        if struct.unpack("<I", body[size:])[0] != masked_crc32c(body[:size]):
            return _stopped(file, at, len(data), count, "a record with a bad checksum")
        at += 12 + size + 4
        count += 1
    return None


def _stopped(file: Path, at: int, size: int, count: int, what: str) -> tuple[str, int]:
    note = (
        f"tuimon: {file.name}: reading stopped at byte {at} of {size} ({what}, after "
        f"{count} whole records); the rest is not read"
    )
    return note, at


def read_events(path: Path) -> list[Record]:
    """The scalars of an event file or a run directory, as step records; a damaged or cut
    file adds a skipped note that says where reading stopped (`damage`), and TensorBoard's
    reader is given only its whole records (a length field past the end is never read)."""
    notes: list[Record] = []
    cut: dict[Path, int] = {}
    for folder in event_dirs(path):
        for file in sorted(folder.glob("*tfevents*")) if path.is_dir() else [path]:
            if file.is_file() and (found := damage(file)) is not None:
                notes.append(Text(found[0], UNREADABLE))
                cut[file] = found[1]
    if not cut:
        return [*notes, *_scalars(path)]
    with tempfile.TemporaryDirectory(prefix="tuimon-events-") as tmp:
        return [*notes, *_scalars(_whole_records(path, cut, Path(tmp)))]


def _whole_records(path: Path, cut: dict[Path, int], tmp: Path) -> Path:
    """``path`` mirrored under ``tmp``: each damaged event file cut to its whole records, the
    others linked as they are."""
    files = (
        [path] if path.is_file() else [f for d in event_dirs(path) for f in d.glob("*tfevents*")]
    )
    for file in files:
        if not file.is_file():
            continue
        target = tmp / (file.name if path.is_file() else file.relative_to(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        if file in cut:
            with open_regular(file) as fh:
                target.write_bytes(fh.read(cut[file]))
        else:
            target.symlink_to(file.resolve())
    return tmp / path.name if path.is_file() else tmp


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
