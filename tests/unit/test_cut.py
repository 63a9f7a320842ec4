"""The one line cutter (`readers.cut`) and the one follower of a growing file
(`engine.launch.follower`): bytes kept exactly, lines cut at `\\n` only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuimon.engine.launch.follower import Follower, NotLines
from tuimon.readers import cut
from tuimon.readers.cut import LineCutter, lines_of
from tuimon.steplog import Step, Text, parse_line


def cut_all(data: bytes, size: int) -> tuple[list[bytes], bytes]:
    """`data` fed in pieces of `size` bytes, then flushed: the lines and the bytes saved."""
    saved = bytearray()
    cutter = LineCutter(saved.extend)
    out: list[bytes] = []
    for i in range(0, len(data), size):
        out += cutter.feed(data[i : i + size])
    return out + cutter.flush(), bytes(saved)


def test_only_newline_ends_a_line_and_bytes_are_kept() -> None:
    cutter = LineCutter()
    assert cutter.feed(b"a\rb") == []
    assert cutter.feed(b"c\r\nd\n\ne") == [b"a\rbc\r\n", b"d\n", b"\n"]
    assert cutter.flush() == [b"e"]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_a_crlf_split_across_chunks_is_one_line(size: int) -> None:
    data = b"one\r\ntwo\r\n\r50%\r100%\nlast"
    lines, saved = cut_all(data, size)
    assert lines == [b"one\r\n", b"two\r\n", b"\r50%\r100%\n", b"last"]
    assert saved == data  # the last line, without its newline, saved as it came


def test_a_last_line_without_newline_waits_for_the_end() -> None:
    saved = bytearray()
    cutter = LineCutter(saved.extend)
    assert cutter.feed(b"") == [] and saved == b""  # nothing read: no line
    assert cutter.feed(b'{"step": 1}') == [] and saved == b""
    assert cutter.flush() == [b'{"step": 1}'] and saved == b'{"step": 1}'
    assert cutter.flush() == []


def test_a_line_over_the_limit_is_saved_whole_and_passed_on_as_a_note(monkeypatch) -> None:
    monkeypatch.setattr(cut, "MAX_LINE", 8)
    saved = bytearray()
    cutter = LineCutter(saved.extend)
    assert cutter.feed(b"ab\ncd") == [b"ab\n"] and saved == b"ab\n"
    assert cutter.feed(b"efghijk") == [] and saved == b"ab\ncdefghijk"  # too long: saved at once
    (note,) = cutter.feed(b"lmn\nop\n")[:1]
    assert b"a line of 12 bytes, too long to parse" in note
    assert saved == b"ab\ncdefghijklmn\nop\n"
    assert isinstance(parse_line(note), Text)
    assert cutter.feed(b"q") == [] and cutter.flush() == [b"q"] and saved.endswith(b"op\nq")


def test_a_long_line_inside_one_chunk_and_one_cut_by_the_end(monkeypatch) -> None:
    monkeypatch.setattr(cut, "MAX_LINE", 8)
    data = b"0123456789\nok\n" + b"x" * 20
    lines, saved = cut_all(data, 1000)
    assert [b"a line of 10 bytes" in lines[0], lines[1]] == [True, b"ok\n"]
    assert b"a line of 20 bytes" in lines[2] and len(lines) == 3
    assert saved == data


def test_steps_after_a_long_line_keep_their_order() -> None:
    lines = [f'{{"step": {i}, "loss": 1.0}}\n'.encode() for i in range(1000)]
    data = b"".join(lines)
    out, saved = cut_all(data, 777)
    assert out == lines and saved == data
    assert [r.step for r in map(parse_line, out) if isinstance(r, Step)] == list(range(1000))


@pytest.mark.parametrize(
    "data",
    [b"a\nb\n", b"a\r\n\n  \nb", b"a\nb\n  ", b"\r1%\r2%\n", b"", b"x"],
)
def test_a_whole_log_is_cut_as_a_stream_of_it(data: bytes) -> None:
    """`lines_of` gives the stream's lines, blank ones left out."""
    lines, _ = cut_all(data, 3)
    assert lines_of(data) == [line for line in lines if line.strip()]


def test_the_follower_reads_what_a_file_gains_and_saves_it(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    saved = bytearray()
    file = Follower(log, saved.extend)
    assert file.read() == [] and not file.appeared  # not there yet
    log.write_bytes(b"one\ntw")
    assert file.read() == [b"one\n"] and file.appeared and file.drained
    with log.open("ab") as fh:
        fh.write(b"o\nthree")
    assert file.read() == [b"two\n"]
    assert file.close() == [b"three"] and saved == b"one\ntwo\nthree"


def test_the_follower_reads_a_truncated_file_again_and_follows_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"1\n2\nhalf")
    file = Follower(log)
    assert file.read() == [b"1\n", b"2\n"]
    log.write_bytes(b"x\n")  # truncated in place: the half line of the old content is gone
    assert file.read() == [b"x\n"] and "was truncated" in file.notes.pop()
    with log.open("ab") as fh:
        fh.write(b"y")
    os.rename(log, tmp_path / "run.log.1")
    log.write_bytes(b"new\n")
    assert file.read() == [b"y"]  # the old file to its end, its last line as it came
    assert "was rotated" in file.notes.pop() and not file.notes
    assert file.read() == [b"new\n"]  # then the new one from its start


def test_a_log_rewritten_as_a_whole_is_not_followed_by_lines(tmp_path: Path) -> None:
    log = tmp_path / "trainer_state.json"
    log.write_text('{\n  "log_history": [\n')
    with pytest.raises(NotLines):
        Follower(log).read()
