"""Whether a file's bytes can be a log at all: binary data (another program's file, random
bytes, a disk image) is said to be unreadable in one line, never read as a log of text.

`why_binary` looks at a file's first bytes, after the formats tuimon reads by content
(TensorBoard event files, gzip, xz) have had their turn: a file format it knows by its
first bytes is named; otherwise bytes a text log has no use for make it binary: NUL and
control bytes (tab, newlines, carriage return and escape aside) past one in ten, or with the
bytes that are not UTF-8 past one in four (a log in Latin-1 has some). A few such bytes (a
line of garbage a run printed) leave a log of lines: its lines are read, the garbage as text,
as a live pair reads it.
"""

from __future__ import annotations

HEAD = 1 << 16
"""Bytes of a file that tell whether it is binary."""

_MAGIC = (
    (b"PAR1", "a parquet file"),
    (b"\x93NUMPY", "a NumPy array (.npy)"),
    (b"PK\x03\x04", "a zip archive (.npz, .pt, .whl, ...)"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"%PDF-", "a PDF document"),
    (b"\x7fELF", "an ELF executable"),
    (b"\x28\xb5\x2f\xfd", "zstd data (tuimon reads gzip and xz)"),
    (b"ARROW1", "an Arrow IPC file"),
)
_CONTROL = bytes((*range(1, 9), 11, 12, *range(14, 27), 28, 29, 30, 31, 127))
"""Control bytes a text log has no use for (tab, newlines, carriage return and escape aside)."""


def why_binary(head: bytes) -> str | None:
    """Why the bytes that begin a file are no log of text (a phrase), or None when they may be
    one. Only the first `HEAD` bytes are looked at."""
    head = head[:HEAD]
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    odd = head.count(0) + len(head) - len(head.translate(None, _CONTROL))
    if odd <= len(head) // 10:
        text = head[:-3] if len(head) == HEAD else head  # a character cut at the end is no fault
        odd += text.decode("utf-8", "replace").count("\ufffd") - text.count("\ufffd".encode())
        if odd <= len(head) // 4:
            return None
    return f"binary data ({odd:,} of its first {_size(len(head))} are NUL, control or not UTF-8)"


def _size(count: int) -> str:
    return f"{count // 1024} KiB" if count >= 1024 else f"{count} bytes"
