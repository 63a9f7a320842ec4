"""Descendants end with the pair: a grandchild that calls setsid() (and closes its output) and
keeps running is found and ended after a normal end, a Ctrl-C and a SIGKILL of tuimon."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS, alive, raw_lines, wait_until

SETSID_TRAINER = str(TESTS / "setsid_trainer.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


def _tuimon(tmp_path: Path, *trainer_args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, SETSID_TRAINER, "--pidfile", str(tmp_path / "gc-{side}")]
    store = str(tmp_path / "store")
    return subprocess.Popen(
        [sys.executable, "-m", "tuimon", "pair", "--headless", "--store", store, "--",
         *command, *trainer_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip


def _grandchildren(tmp_path: Path) -> list[int]:
    files = [tmp_path / f"gc-{side}" for side in "ab"]
    wait_until(lambda: all(f.exists() and f.read_text() for f in files), within=30)
    return [int(f.read_text()) for f in files]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("extra", [[], ["--clear-env", "--ignore-term"]])
def test_a_setsid_grandchild_ends_after_a_normal_end(tmp_path: Path, extra: list[str]) -> None:
    """Tagged or not (an empty environment), ignoring SIGTERM or not: gone when tuimon is."""
    proc = _tuimon(tmp_path, "--steps", "3", *extra)
    pids = _grandchildren(tmp_path)
    try:
        assert proc.wait(timeout=60) == 0
        assert not [p for p in pids if alive(p)]  # ended before tuimon returned
    finally:
        _cleanup(pids)


def test_a_setsid_grandchild_ends_after_ctrl_c(tmp_path: Path) -> None:
    proc = _tuimon(tmp_path, "--steps", "600", "--sleep", "0.1")
    pids = _grandchildren(tmp_path)
    try:
        assert all(alive(p) for p in pids)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 3  # INCOMPLETE: interrupted
        assert not [p for p in pids if alive(p)]
    finally:
        _cleanup(pids)


@pytest.mark.parametrize("extra", [[], ["--clear-env"]])
def test_a_setsid_grandchild_ends_after_sigkill_of_tuimon(tmp_path: Path, extra: list[str]) -> None:
    """The watchdog finds it by its tag, or (environment cleared) by the pid tuimon told it."""
    proc = _tuimon(tmp_path, "--steps", "600", "--sleep", "0.1", *extra)
    pids = _grandchildren(tmp_path)
    try:
        assert all(alive(p) for p in pids)
        # the first step comes 1.2 s after the grandchild: tuimon has walked the tree since
        wait_until(lambda: all(raw_lines(tmp_path / "store", side) for side in "ab"), within=30)
        proc.kill()
        proc.wait(timeout=30)
        wait_until(lambda: not [p for p in pids if alive(p)], within=30)
    finally:
        _cleanup(pids)


def test_explain_reruns_end_when_tuimon_is_killed(tmp_path: Path) -> None:
    """`explain --yes` re-runs the pair's commands; a SIGKILL of tuimon ends them (and what
    they started outside their group) through their watchdogs."""
    pair = tmp_path / "pair"
    shutil.copytree(TESTS.parent / "sample_logs/cpu-cpu-threads2-contiguous", pair)
    doc = json.loads((pair / "pair.json").read_text())
    doc["commands"] = {
        s: ["sh", "-c", f"setsid sleep 300 & echo $! > {tmp_path}/gc-{s}; sleep 300"] for s in "ab"
    }
    (pair / "pair.json").write_text(json.dumps(doc))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "explain", "--yes", str(pair)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    pids = _grandchildren(tmp_path)
    try:
        assert all(alive(p) for p in pids)
        proc.kill()
        proc.wait(timeout=30)
        wait_until(lambda: not [p for p in pids if alive(p)], within=30)
    finally:
        _cleanup(pids)
