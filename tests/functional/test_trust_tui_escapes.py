"""Data never reaches the terminal as control (docs/survival-and-trust.md): the TUI driven in
tmux, with OSC 52 (clipboard), OSC 0 (window title) and CSI planted in the store's path and a
pair's name. The raw bytes the app wrote carry none of them; tmux's title and paste buffers
are untouched."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import TESTS, wait_until

ROOT = TESTS.parent
SAMPLE = ROOT / "sample_logs" / "cpu-cpu-threads2"
OSC52 = "\x1b]52;c;cGxhbnRlZA==\x07"
OSC0 = "\x1b]0;PLANTED-TITLE\x07"
CSI = "\x1b[2J\x1b[31m"

pytestmark = pytest.mark.skipif(not shutil.which("tmux"), reason="no tmux")


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=30
    ).stdout


def test_planted_escapes_in_the_store_path_never_reach_the_terminal(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # the header shows ~60 characters
    store = short / f"s{OSC52}{OSC0}{CSI}"
    store.mkdir()
    shutil.copytree(SAMPLE, store / f"20261130-101502_s0_cpu-cpu_3f9a{OSC0}")
    raw, socket = tmp_path / "raw.bin", f"tuimon-test-{os.getpid()}"
    (tmp_path / "store.txt").write_text(str(store))
    launcher = tmp_path / "launch.py"  # the path travels in a file: never typed into a shell
    launcher.write_text(
        "import os, sys, time\n"
        f"os.environ['TUIMON_STORE'] = open({str(tmp_path / 'store.txt')!r}).read()\n"
        f"os.environ['PYTHONPATH'] = {str(ROOT)!r}\n"
        "time.sleep(1)\n"  # pipe-pane is set up first
        "os.execv(sys.executable, [sys.executable, '-m', 'tuimon', 'browse'])\n"
    )
    run = f"TERM=xterm-256color {shlex.quote(sys.executable)} {shlex.quote(str(launcher))}"
    _tmux(socket, "-f", "/dev/null", "new-session", "-d", "-x", "400", "-y", "30", run)
    try:
        _tmux(socket, "set-option", "-g", "set-titles", "on")
        _tmux(socket, "resize-window", "-x", "400", "-y", "30")
        _tmux(socket, "pipe-pane", "-o", f"cat >> {shlex.quote(str(raw))}")
        wait_until(lambda: raw.exists() and b"pairs in" in raw.read_bytes(), 60)
        time.sleep(1)  # the rows and the status line after the header
        _tmux(socket, "send-keys", "q")
        wait_until(lambda: b"\x1b[?1049l" in raw.read_bytes(), 30)
        title = _tmux(socket, "display-message", "-p", "#{pane_title}")
        buffers = _tmux(socket, "list-buffers")
    finally:
        _tmux(socket, "kill-server")
        shutil.rmtree(short, ignore_errors=True)
    data = raw.read_bytes()
    assert b"^[]52;c;cGxhbnRlZA==^G" in data  # shown, escaped: the path is still readable
    for planted in (OSC52, OSC0, CSI):
        assert planted.encode() not in data
    assert b"\x1b]52" not in data and b"PLANTED-TITLE\x07" not in data
    assert "PLANTED" not in title and buffers.strip() == ""
