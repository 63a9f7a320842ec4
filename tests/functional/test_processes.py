"""Processes and lines: signals to the TUI and to headless replay, runs that outlive their
output or their monitor, raw bytes on disk as read, lines too long to parse (fake trainers)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, ROOT, raw_lines, wait_until

from tuimon.cli import main
from tuimon.steplog import MAX_LINE

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def tag() -> str:
    """A word no other process has in its command line."""
    return f"tuimon-test-{os.getpid()}-{time.monotonic_ns()}"


def running(word: str) -> bool:
    """Some process (not a zombie) has `word` in its command line."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            state = (proc / "status").read_text()
        except OSError:
            continue
        if word.encode() in cmd and "State:\tZ" not in state:
            return True
    return False


def gone(word: str, within: float = 20.0) -> bool:
    """Poll until no process has `word` in its command line (False if one still does)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not running(word):
            return True
        time.sleep(0.1)
    return not running(word)


def catches(pid: int, sig: int) -> bool:
    """The process has a handler for `sig` (SigCgt in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def headless(store: Path, *child: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY, "-m", "tuimon", "pair", "--headless", "--json", "--store", str(store), "--", *child],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )


# -- the TUI ------------------------------------------------------------------------------------


def take_the_terminal() -> None:
    """(preexec) Make the pty the child's controlling terminal, so closing it hangs it up."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def drain(master: int, screen: bytearray) -> None:
    """(a thread) The terminal: read everything the app draws into `screen`, until it closes."""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            return
        if not data:
            return
        screen.extend(data)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, "hang-up"])
def test_signal_to_the_tui_stops_both_runs_saves_and_restores_the_terminal(tmp_path, sig):
    word, store = tag(), tmp_path / "store"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [PY, "-m", "tuimon", "pair", "--store", str(store), "--",
         PY, FAKE_TRAINER, "--side", "{side}", "--steps", "100000", "--sleep", "0.02",
         "--tag", word],
        stdin=slave, stdout=slave, stderr=slave, env={**ENV, "TERM": "xterm-256color"},
        start_new_session=True, preexec_fn=take_the_terminal,
    )  # fmt: skip
    os.close(slave)
    screen = bytearray()
    reader = threading.Thread(target=drain, args=(master, screen), daemon=True)
    reader.start()
    try:
        wait_until(lambda: len(raw_lines(store, "b")) > 5 and catches(proc.pid, signal.SIGTERM))
        if sig == "hang-up":  # the terminal goes away (a closed window, a dropped ssh)
            os.close(master)
            assert proc.wait(timeout=60) == 3  # INCOMPLETE, as headless (docs, "Exit codes")
        else:
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == 3
            reader.join(timeout=5)
            assert b"\x1b[?1049l" in screen  # back from the alternate screen
    finally:
        if proc.poll() is None:
            proc.kill()
        if sig != "hang-up":
            os.close(master)
    assert gone(word)
    (pair,) = store.iterdir()
    meta = json.loads((pair / "pair.json").read_text())
    assert meta["status"] == "interrupted"
    assert {run["status"] for run in meta["runs"].values()} == {"interrupted"}
    assert meta["summary"]["verdict"] == "INCOMPLETE"


# -- runs that outlive their output or their monitor --------------------------------------------

HOLDER = r"""
import json, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[1]])
for step in range(5):
    print(json.dumps({"step": step, "loss": 1.0 / (step + 1)}), flush=True)
"""


def test_a_descendant_holding_stdout_does_not_hang_the_pair(tmp_path, capsys):
    word = tag()
    args = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), "--",
            PY, "-c", HOLDER, word]  # fmt: skip
    try:
        code = main(args)
    finally:
        still = running(word)
        subprocess.run(["pkill", "-KILL", "-f", word], check=False)
    assert not still  # the group was killed after the grace
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["steps_compared"] == 5 and code == 0
    (pair,) = (tmp_path / "store").iterdir()
    assert (pair / "pair.json").is_file()


def test_sigkill_of_tuimon_ends_silent_runs(tmp_path):
    word, store = tag(), tmp_path / "store"
    proc = headless(store, PY, FAKE_TRAINER, "--side", "{side}", "--hang-at", "0",
                    "--hang-s", "1000", "--tag", word)  # fmt: skip
    assert_killing_tuimon_ends(proc, store, word)


def assert_killing_tuimon_ends(proc: subprocess.Popen[bytes], store: Path, word: str) -> None:
    """Once each run has logged its line and hangs, SIGKILL tuimon: no process with `word`
    is left."""
    try:
        wait_until(lambda: len(raw_lines(store, "a")) == len(raw_lines(store, "b")) == 1)
        assert running(word)
    finally:
        proc.kill()
        proc.communicate()
    assert gone(word)


def test_sigkill_of_tuimon_ends_a_silent_runs_descendants_too(tmp_path):
    """The run is a shell whose child trains: the parent-death signal reaches only the shell;
    the watchdog ends the rest of the run's process group."""
    word, store = tag(), tmp_path / "store"
    trainer = f"{PY} {FAKE_TRAINER} --side {{side}} --hang-at 0 --hang-s 1000 --tag {word}"
    assert_killing_tuimon_ends(headless(store, "sh", "-c", f"{trainer} & wait"), store, word)


def group_alive(pgid: int) -> bool:
    """A process of the group is alive (not a zombie: a test process that became a child
    subreaper, as tuimon's runs make it, holds its dead orphans until it reaps them)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return not Path("/proc/self").exists()


def test_watchdog_ends_the_group_when_tuimon_goes_without_a_word():
    """As on a system without a parent-death signal: the pipe closes without the word."""
    from tuimon.engine.launch.watchdog import Watchdog

    run = subprocess.Popen(["sh", "-c", "sleep 1000 & sleep 1000; wait"], start_new_session=True)
    dog = Watchdog(run.pid, 0.5)
    os.close(dog._write_end)  # what tuimon's death does to the pipe
    assert run.wait(timeout=20) == -signal.SIGTERM
    wait_until(lambda: not group_alive(run.pid), within=20)  # the sleeping grandchild too


def test_a_released_watchdog_leaves_the_group_alone():
    from tuimon.engine.launch.watchdog import Watchdog

    run = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        dog = Watchdog(run.pid, 0.1)
        dog.release()
        assert dog.proc is not None and dog.proc.returncode == 0
        time.sleep(0.5)
        assert run.poll() is None
    finally:
        run.kill()
        run.wait()


PRINTER = r"""
import fcntl, json, os, struct, sys, termios, time
side, n, copy, done = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(copy, "w") as mine:
    for step in range(n):
        line = json.dumps({"type": "step", "step": step, "loss": 1.0 / (step + 1), "side": 0})
        mine.write(line + "\n")
        print(line, flush=True)
while struct.unpack("i", fcntl.ioctl(1, termios.FIONREAD, b"\0" * 4))[0]:
    time.sleep(0.01)  # until tuimon has read every byte out of the pipe
time.sleep(0.5)
open(done, "w").close()
time.sleep(1000)
"""


def test_raw_lines_are_on_disk_as_read_even_when_tuimon_is_sigkilled_under_load(tmp_path):
    word, store, n = tag(), tmp_path / "store", 60_000
    copy, done = str(tmp_path / "printed-{side}"), str(tmp_path / "done-{side}")
    proc = headless(store, PY, "-c", PRINTER, "{side}", str(n), copy, done, word)
    try:
        wait_until(lambda: all(Path(done.format(side=s)).exists() for s in "ab"), within=120)
        proc.kill()  # judging is far behind: it is still parsing and aligning
        proc.communicate()
        assert gone(word)
        (pair,) = store.iterdir()
        assert not (pair / "pair.json").exists()
        for side in "ab":
            printed = Path(copy.format(side=side)).read_bytes()
            assert (pair / f"{side}.jsonl").read_bytes() == printed
    finally:
        if proc.poll() is None:
            proc.kill()


# -- lines ----------------------------------------------------------------------------------


def test_a_line_too_long_to_parse_is_saved_whole(tmp_path, capsys):
    big = b'{"step": 1, "blob": "' + b"z" * (MAX_LINE + 100) + b'"}'
    printed = tmp_path / "printed"
    printed.write_bytes(b'{"step": 0, "loss": 1.0}\n' + big + b'\n{"step": 2, "loss": 0.5}\n')
    code = f"import sys; sys.stdout.buffer.write(open({str(printed)!r}, 'rb').read())"
    args = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), "--",
            PY, "-c", code]  # fmt: skip
    main(args)
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["steps_compared"] == 2  # steps 0 and 2; the big line is not parsed
    (pair,) = (tmp_path / "store").iterdir()
    lines = (pair / "a.jsonl").read_bytes().splitlines()
    assert lines == [b'{"step": 0, "loss": 1.0}', big, b'{"step": 2, "loss": 0.5}']
    meta = json.loads((pair / "pair.json").read_text())
    assert meta["runs"]["a"]["text_lines"] == 1


# -- headless replay ------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("pace", [("--speed", "0.25"), ("--realtime",)])
def test_headless_replay_ends_promptly_on_a_signal(tmp_path, sig, pace):
    logs = []
    for side in "ab":  # one step an hour in recorded time
        log = tmp_path / f"{side}.jsonl"
        log.write_text(
            "".join(json.dumps({"step": i, "t": 3600.0 * i, "loss": 1.0}) + "\n" for i in range(9))
        )
        logs.append(str(log))
    proc = subprocess.Popen(
        [PY, "-m", "tuimon", "replay", "--headless", "--json", *pace, *logs],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
    )  # fmt: skip
    try:
        wait_until(lambda: catches(proc.pid, signal.SIGTERM))
        time.sleep(0.3)  # the replay is waiting for its next step
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    res = json.loads(out.decode().strip().splitlines()[-1])
    assert res["status"] == "interrupted"
    assert res["steps_compared"] < 9


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            found += [int(child) for child in fh.read().split()]
    return found


def test_the_replay_view_reads_its_logs_in_a_child_it_ends(tmp_path):
    """`tuimon replay` in a terminal: a child process reads the logs while the view starts
    (issue 42); the rows are drawn from it, and once `q` ends the view the child is gone."""
    paths = []
    for side in "ab":
        path = tmp_path / f"{side}.jsonl"
        path.write_text(
            "".join(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in range(30_000))
        )
        paths.append(str(path))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [PY, "-m", "tuimon", "replay", "--speed", "200", *paths],
        stdin=slave, stdout=slave, stderr=slave, env={**ENV, "TERM": "xterm-256color"},
        start_new_session=True, preexec_fn=take_the_terminal,
    )  # fmt: skip
    os.close(slave)
    screen = bytearray()
    threading.Thread(target=drain, args=(master, screen), daemon=True).start()
    try:
        wait_until(lambda: b"0.0001" in screen or b"1e-05" in screen or b"0.001" in screen)
        (child,) = _children(proc.pid)  # the reader, reading or done (the view runs no other)
        os.write(master, b"q")
        assert proc.wait(timeout=60) in (0, 3)  # quit mid-replay: not judged whole
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    wait_until(lambda: not Path(f"/proc/{child}").exists(), within=10)
