"""One hub thread drains many runs' pipes: bytes saved as read, lines taken once, ends told."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from tuimon.engine.launch.pipes import PipeReader, waker


def until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def reader_of(saved: bytearray) -> tuple[PipeReader, int]:
    r, w = os.pipe()
    lock = threading.Lock()

    def save(data: bytes) -> None:
        with lock:
            saved.extend(data)

    reader = PipeReader(r, "test", save=save, lines=True)
    reader.start()
    return reader, w


def test_many_pipes_one_hub_every_line_saved_and_taken_once() -> None:
    saved = [bytearray() for _ in range(40)]
    pipes = [reader_of(s) for s in saved]
    taken: list[list[bytes]] = [[] for _ in pipes]
    for i, (_, w) in enumerate(pipes):
        os.write(w, f"{i} one\n{i} two\n{i} th".encode())
    for i, (reader, _) in enumerate(pipes):
        until(lambda i=i: bytes(saved[i]) == f"{i} one\n{i} two\n".encode())  # on disk as read
        taken[i] += reader.take()
    for i, (reader, w) in enumerate(pipes):
        os.write(w, b"ree\n")
        os.close(w)
        reader.join(10)
        assert reader.eof.is_set()
        taken[i] += reader.take()
        assert taken[i] == [f"{i} one\n".encode(), f"{i} two\n".encode(), f"{i} three\n".encode()]
        assert reader.take() == []


def test_a_last_line_without_newline_is_saved_as_it_came() -> None:
    """Read back, the saved line is the cut line it was live (not a whole line)."""
    saved = bytearray()
    reader, w = reader_of(saved)
    os.write(w, b"one\nno newline")
    os.close(w)
    reader.join(10)
    assert reader.take() == [b"one\n", b"no newline"] and bytes(saved) == b"one\nno newline"


def test_stop_ends_a_pipe_whose_writer_stays_open() -> None:
    reader, w = reader_of(bytearray())
    reader.stop()
    reader.join(10)
    assert reader.eof.is_set()
    os.close(w)


def test_notify_wakes_a_waiting_pump_once_data_comes() -> None:
    async def main() -> list[bytes]:
        reader, w = reader_of(bytearray())
        came = asyncio.Event()
        assert reader.notify(waker(came))  # nothing yet: armed
        os.write(w, b"x\n")
        await asyncio.wait_for(came.wait(), 10)
        assert not reader.notify(waker(asyncio.Event()))  # data waits: no need to wait
        os.close(w)
        return reader.take()

    assert asyncio.run(main()) == [b"x\n"]
