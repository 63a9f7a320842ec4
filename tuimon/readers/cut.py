"""The one line cutter: bytes -> lines, for a live stream (`LineCutter`) and a whole log
(`lines_of`).

Only `\\n` ends a line (a `\\r` redraw stays in its line, read at its last state); a last line
without newline waits for the end and is passed on as it came; a line longer than `MAX_LINE`
is saved whole and passed on as a short note (`too_long_note`), never split or parsed.
"""

from __future__ import annotations

from collections.abc import Callable

from tuimon.steplog import MAX_LINE, too_long_note


class LineCutter:
    """A stream's bytes in, complete lines out (newline kept); each complete line is saved
    (`save`) as it is cut, so the raw log holds exactly the bytes read."""

    def __init__(self, save: Callable[[bytes], None] | None = None) -> None:
        self._save = save or (lambda data: None)
        self._buf = bytearray()
        self._long = 0
        """Bytes of a too-long line saved so far (0: none under way)."""

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes; they are saved when this returns."""
        one = data.find(b"\n") == len(data) - 1 >= 0 and len(data) <= MAX_LINE
        if one and not self._buf and not self._long:
            self._save(data)  # one whole line (a run that flushes each line): as it is
            return [data]
        out: list[bytes] = []
        if self._long:
            nl = data.find(b"\n")
            if nl < 0:
                self._save(data)
                self._long += len(data)
                return out
            self._save(data[: nl + 1])
            out.append(too_long_note(self._long + nl))
            self._long, data = 0, data[nl + 1 :]
        self._buf += data
        end = self._buf.rfind(b"\n")
        if end >= 0:
            chunk = bytes(self._buf[: end + 1])
            del self._buf[: end + 1]
            self._save(chunk)
            lines = [line + b"\n" for line in chunk[:-1].split(b"\n")]
            if len(chunk) > MAX_LINE:  # it may hold a line too long to parse
                lines = [too_long_note(len(x) - 1) if len(x) > MAX_LINE else x for x in lines]
            out += lines
        if len(self._buf) > MAX_LINE:
            self._save(bytes(self._buf))
            self._long = len(self._buf)
            self._buf.clear()
        return out

    def flush(self) -> list[bytes]:
        """The end of the stream: a last line without newline, saved as it came (read back,
        it is the cut line it was live)."""
        if self._long:
            self._long, note = 0, too_long_note(self._long)
            return [note]
        rest = bytes(self._buf)
        self._buf.clear()
        if rest:
            self._save(rest)
        return [rest] if rest else []


def lines_of(data: bytes) -> list[bytes]:
    """A whole log's lines as a `LineCutter` cuts it read live (a last line without newline
    as it is; a long line kept whole: the parser notes it), blank lines left out."""
    *whole, last = data.split(b"\n")
    lines = [line + b"\n" for line in whole if line.strip()]
    return [*lines, last] if last.strip() else lines
