"""SIGTERM, SIGINT and SIGHUP end a sweep as they end a pair (docs, "Exit codes"): the running
pairs stopped and saved as interrupted, the record never left "running", exit 3 (INCOMPLETE),
headless as in the TUI."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, TESTS, alive, wait_until

ROOT = TESTS.parent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_a_headless_sweep_saved_and_exit_3(tmp_path: Path, sig: int) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "sweep", "--seeds", "0-3", "--jobs", "2", "--headless",
         "--json", "--store", str(store), "--", sys.executable, FAKE_TRAINER, "--side", "{side}",
         "--steps", "100000", "--sleep", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: sum(f.stat().st_size for f in store.glob("*/a.jsonl")) > 2000, 60)
        start = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert took < 10  # the README's bound is 2 s (the runs' grace aside); generous here
    (record,) = (store / "sweeps").glob("*.json")
    jobs = json.loads(record.read_text())["jobs"]
    assert "running" not in {j["status"] for j in jobs}
    stopped = [j for j in jobs if j["status"] == "interrupted"]
    assert stopped and all(j["pair"] for j in stopped)
    for job in stopped:
        meta = json.loads((store / job["pair"] / "pair.json").read_text())
        assert meta["status"] == "interrupted"
    assert json.loads(out.decode().strip().splitlines()[-1])["jobs"]


def _children(pid: int) -> list[int]:
    """The pids of a process's children (Linux: /proc/PID/task/*/children)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_a_signal_to_compare_leaves_no_reader_behind(tmp_path: Path) -> None:
    """Two logs large enough for compare's reader processes (`_workers`): SIGTERM to compare
    ends them with it (they read on and held its stdout open, so its caller waited too)."""
    import os

    from tuimon.engine.sources import log_blocks

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("compare reads in worker processes only with more than one CPU")
    line = b'{"step": %d, "loss": 0.123456789012345, "acc": 0.5}\n'
    count = log_blocks.WORKERS_FROM // len(line % 0) + 20_000
    body = b"".join(line % step for step in range(count))
    (tmp_path / "a.jsonl").write_bytes(body)
    (tmp_path / "b.jsonl").write_bytes(body.replace(b"0.5}", b"0.6}"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "compare", "a.jsonl", "b.jsonl", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    workers: list[int] = []
    try:
        wait_until(lambda: bool(workers.extend(_children(proc.pid)) or workers), 30)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)  # its stdout closed: no reader holds it
        assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
        wait_until(lambda: not any(alive(pid) for pid in workers), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in workers:  # this test's own processes, if the fix fails
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _hung_up(argv: list[str], cwd: Path, ready: Callable[[], bool]) -> int:
    """Run tuimon on a terminal of its own (a pty) until `ready()`, then hang the terminal up
    (its window closed: the kernel's SIGHUP, and one sent) and return tuimon's exit code."""
    import os
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: tuimon, the pty its controlling terminal
        os.chdir(cwd)
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-m", "tuimon", *argv])
    status = None
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert time.monotonic() < deadline, "tuimon never got going"
            if select.select([fd], [], [], 0.05)[0]:
                with contextlib.suppress(OSError):
                    os.read(fd, 1 << 16)  # what it draws, never left to fill the pty
        os.close(fd)  # the hang-up
        os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        raise AssertionError("tuimon did not end after the hang-up")
    finally:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


@pytest.mark.parametrize("how", ["pair --headless", "watch --headless", "watch"])
def test_a_hang_up_saves_the_partial_pair_and_exits_3(tmp_path: Path, how: str) -> None:
    """The survival table: SIGHUP to tuimon, or its terminal closing, stops the pair and saves
    it as interrupted, exit 3, headless as in the TUI (a write to the hung-up terminal, EIO,
    was an internal error, exit 2, and the pair was never saved; the TUI's input thread
    failing on it ended the app before the save)."""
    store = tmp_path / "store"
    if how.startswith("pair"):
        argv = ["pair", "--headless", "--store", str(store), "--", sys.executable, FAKE_TRAINER,
                "--side", "{side}", "--steps", "100000", "--sleep", "0.01"]  # fmt: skip

        def ready() -> bool:
            return sum(f.stat().st_size for f in store.glob("*/a.jsonl")) > 2000
    else:
        for side in "ab":
            rows = [json.dumps({"step": s, "loss": 1 / (s + 1)}) for s in range(5)]
            (tmp_path / f"{side}.jsonl").write_text("\n".join(rows) + "\n")
        argv = ["watch", "a.jsonl", "b.jsonl", "--store", str(store), *how.split()[1:]]

        def ready() -> bool:
            return sum(f.stat().st_size for f in store.glob("*/b.jsonl")) > 100

    assert _hung_up(argv, tmp_path, ready) == 3
    (saved,) = store.glob("*/pair.json")
    assert json.loads(saved.read_text())["status"] == "interrupted"
