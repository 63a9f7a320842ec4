"""A replay's logs read ahead by a forked child (`engine.sources.read_ahead`): the same records
as read in the view's process, errors said the same way, and no child left behind. Each fork
runs in a fresh interpreter (a subprocess): a test worker has threads of its own, and a fork
is only taken where none runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, replayed_rows, wait_until

from tuimon.engine.sources.read_ahead import read_ahead

SAME = r"""
import json, os, sys
from tuimon.engine.sources.read_ahead import read_ahead, resolved_blocks, side_blocks
from tuimon.engine.sources.saved_pair import resolve_logs

paths = sys.argv[1:3]
ahead = read_ahead(lambda: resolved_blocks(paths, None))
assert ahead is not None
got = {side: list(ahead.blocks(side)) for side in ("b", "a")}  # either side first
here = {side: list(side_blocks(resolve_logs(paths), side)) for side in ("a", "b")}
pid = ahead.pid
ahead.close()
try:
    os.waitpid(pid, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({
    "same": all(got[s] == here[s] for s in "ab"),
    "blocks": {s: len(got[s]) for s in "ab"},
    "records": {s: sum(map(len, got[s])) for s in "ab"},
    "reaped": reaped,
}))
"""

FAILS = r"""
import json, sys
from tuimon.engine.sources.read_ahead import read_ahead
from tuimon.errors import ReplayError

class Odd(Exception):
    def __init__(self, a, b):  # pickles, but does not unpickle: said by its words
        super().__init__(f"odd {a} {b}")

def prepare():
    if sys.argv[1] == "prepare":
        raise ReplayError("cannot open the logs")
    def blocks(side):
        yield [side]
        if side == "b":
            raise Odd(1, 2)
        raise ReplayError("log a: cut short")
    return blocks

ahead = read_ahead(prepare)
said = {}
for side in ("a", "b"):
    taken = []
    try:
        for block in ahead.blocks(side):
            taken.append(block)
    except Exception as exc:
        said[side] = [type(exc).__name__, str(exc), taken]
ahead.close()
print(json.dumps(said))
"""

LEFT = r"""
import sys, time
from tuimon.engine.sources.read_ahead import read_ahead

def prepare():
    def blocks(side):
        while True:  # a long log: the pipe fills, the child waits on it
            yield [side * 4096]
    return blocks

ahead = read_ahead(prepare)
print(ahead.pid, flush=True)
time.sleep(float(sys.argv[1]))
"""


def _python(script: str, *args: str, timeout: float = 60) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _jsonl(path: Path, steps: int, *, part_at: int | None = None) -> Path:
    with path.open("w") as fh:
        for step in range(steps):
            loss = 1.0 / (step + 1) + (1e-9 if part_at is not None and step >= part_at else 0.0)
            fh.write(json.dumps({"step": step, "loss": loss, "acc": step / steps}) + "\n")
    return path


@pytest.mark.parametrize("steps", [30_000, 40], ids=["blocks", "whole"])
def test_the_child_reads_the_records_read_here(tmp_path: Path, steps: int) -> None:
    """A log of lines read in blocks (over `BLOCK`) and a small one read whole: the same records
    in the same blocks, either side taken first, and the child reaped by `close`."""
    a, b = _jsonl(tmp_path / "a.jsonl", steps), _jsonl(tmp_path / "b.jsonl", steps, part_at=7)
    got = json.loads(_python(SAME, str(a), str(b)))
    assert got["same"] and got["reaped"]
    assert got["records"] == {"a": steps, "b": steps}
    if steps > 1000:
        assert got["blocks"]["a"] > 1


def test_errors_are_said_as_the_reader_in_the_view_says_them() -> None:
    """An error opening the logs, or one a reader raises after its first block: the view gets
    the blocks before it, then the error (its words where it does not survive pickling)."""
    said = json.loads(_python(FAILS, "blocks"))
    assert said["a"] == ["ReplayError", "log a: cut short", [["a"]]]
    assert said["b"] == ["ReplayError", "odd 1 2", [["b"]]]
    said = json.loads(_python(FAILS, "prepare"))
    assert said["a"] == said["b"] == ["ReplayError", "cannot open the logs", []]


def _state(pid: int) -> str | None:
    """A process's state letter (Z: ended, not reaped), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_the_child_ends_with_the_view_and_ignores_ctrl_c() -> None:
    """Ctrl-C reaches the terminal's whole process group: the child reads on (the view decides
    what a Ctrl-C means); when the view's process goes without closing it, its next write
    fails and it ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LEFT, "1"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        os.kill(child, signal.SIGINT)
        time.sleep(0.2)
        assert _state(child) not in (None, "Z")
    finally:
        proc.wait(timeout=30)
    wait_until(lambda: _state(child) in (None, "Z"), within=10)


def test_no_fork_while_another_thread_runs() -> None:
    """A lock another thread holds would stay held in the child: the view reads in its own
    process then (None)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert read_ahead(lambda: lambda side: iter([])) is None
    finally:
        stop.set()
        thread.join()


def test_a_streamed_replay_gives_the_same_rows_read_ahead_or_not(tmp_path: Path) -> None:
    """The view's feed (paced, a block at a time) over logs read ahead by the child: every
    aligned row, the verdict and the first divergence as when read in the view's process."""
    a, b = _jsonl(tmp_path / "a.jsonl", 20_000), _jsonl(tmp_path / "b.jsonl", 20_000, part_at=9)
    ahead, here = replayed_rows([a, b], ahead=True), replayed_rows([a, b], ahead=False)
    assert ahead == here
    assert ahead["verdict"] == "DIVERGED" and ahead["first"] == 9
    assert ahead["rows"] == 20_000
    assert ahead["children"] == []
