"""Pairs whose sides run through a launcher (a stand-in for ssh / srun), and their interruption."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
from helpers import FAKE_TRAINER, TESTS, wait_for_raw_lines

from tuimon.cli import main
from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.runs.plan import PairPlan, launched

FAKE = FAKE_TRAINER
LAUNCHER = str(TESTS / "fake_launcher.py")
SRUN = f"{shlex.quote(sys.executable)} {shlex.quote(LAUNCHER)}"


def running(tag: str) -> bool:
    """Some process has `tag` in its command line."""
    return subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 0


def gone(tag: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and running(tag):
        time.sleep(0.1)
    return not running(tag)


def result(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture
def ssh(tmp_path: Path) -> str:
    """The stand-in launcher under the name `ssh`, so tuimon quotes for a remote shell."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").symlink_to(LAUNCHER)
    return str(bin_dir / "ssh")


def test_launched_command_carries_its_environment():
    spec = RunSpec("b", "cpu", ("python", "t.py", "--x", "a b"), {"K": "v w", "T": "1"})
    assert launched(("srun", "-p", "gpu"), spec) == (
        "srun", "-p", "gpu", "env", "K=v w", "T=1", "python", "t.py", "--x", "a b",
    )  # fmt: skip
    (host_cmd,) = launched(("ssh", "-tt", "mac"), spec)[3:]
    assert shlex.split(host_cmd) == ["env", "K=v w", "T=1", "python", "t.py", "--x", "a b"]
    wrapped = launched(("docker", "exec", "box", "sh", "-c", "{cmd}"), spec)
    assert shlex.split(wrapped[-1]) == ["env", "K=v w", "T=1", "python", "t.py", "--x", "a b"]


def test_reference_workload_through_a_launcher_runs_python3_there():
    plan = PairPlan(seed=3, devices=("cpu", "cuda"), threads=(2, 2), deterministic=False,
                    loss_dtype=None, launch=(None, ("srun", "--gres=gpu:1")))  # fmt: skip
    a, b = plan.spec("a", Path("/p")), plan.spec("b", Path("/p"))
    assert a.argv[0] == sys.executable and "--save-emb" in a.argv
    assert b.argv[:3] == ("srun", "--gres=gpu:1", "env")
    assert "TUIMON_SEED=3" in b.argv and "python3" in b.argv and "--save-emb" not in b.argv
    meta = plan.meta([a, b])
    assert meta["launch"] == {"a": None, "b": ["srun", "--gres=gpu:1"]}


def test_side_b_through_a_launcher(tmp_path, capsys):
    store = tmp_path / "store"
    argv = ["pair", "--headless", "--json", "--store", str(store), "--launch-b", SRUN,
            "--", sys.executable, FAKE, "--side", "{side}", "--steps", "5"]  # fmt: skip
    assert main(argv) == 0
    res = result(capsys)
    assert res["verdict"] == "IDENTICAL"
    meta = json.loads((Path(res["pair"]) / "pair.json").read_text())
    # the launcher gives its command a bare environment: OMP_NUM_THREADS came in the command
    assert meta["runs"]["b"]["env"]["threads"] == meta["runs"]["a"]["env"]["threads"] is not None
    assert meta["runs"]["b"]["command"].startswith(SRUN + " env ")
    assert meta["launch"]["a"] is None and meta["launch"]["b"][-1] == LAUNCHER


def test_ssh_quoting_survives_the_remote_shell(tmp_path, capsys, ssh):
    store = tmp_path / "store"
    argv = ["pair", "--headless", "--json", "--store", str(store), "--launch", f"{ssh} -tt host",
            "--", sys.executable, FAKE, "--side", "{side}", "--steps", "4",
            "--tag", "it's a $HOME; `x`"]  # fmt: skip
    assert main(argv) == 0
    assert result(capsys)["verdict"] == "IDENTICAL"


def test_bad_launcher_is_one_line(tmp_path, capsys):
    argv = ["pair", "--headless", "--store", str(tmp_path), "--launch-b", "ssh 'host",
            "--", "true"]  # fmt: skip
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()  # the error, then where to read more
    assert len(lines) == 2 and "--launch-b" in lines[0] and lines[1] == "try: tuimon pair --help"


def start_launched_pair(
    store: Path, tag: str, stderr: int | IO[bytes] = subprocess.PIPE, **env: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuimon", "pair", "--headless", "--json", "--store", str(store),
         "--launch-b", SRUN, "--", sys.executable, FAKE, "--side", "{side}", "--steps", "100000",
         "--sleep", "0.01", "--tag", tag],
        stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, **env},
    )  # fmt: skip


def test_interrupting_a_launched_pair_ends_the_remote_run(tmp_path):
    store = tmp_path / "store"
    tag = f"launched-{os.getpid()}-{time.monotonic_ns()}"
    proc = start_launched_pair(store, tag)
    wait_for_raw_lines(store, "b", 10)
    assert running(tag)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    res = json.loads(out.decode().strip().splitlines()[-1])
    assert res["status"] == "interrupted"
    meta = json.loads((Path(res["pair"]) / "pair.json").read_text())
    assert meta["runs"]["b"]["status"] == "interrupted" and meta["runs"]["b"]["steps"] > 5
    assert gone(tag)  # the launcher forwarded the signal: no run is left behind


def test_dropped_connection_fails_that_side(tmp_path):
    store = tmp_path / "store"
    tag = f"dropped-{os.getpid()}-{time.monotonic_ns()}"
    monitor_err = tmp_path / "monitor.stderr"
    with monitor_err.open("wb") as err:
        proc = start_launched_pair(store, tag, err, FAKE_LAUNCHER_DROP_AFTER="1.5")
    deadline = time.monotonic() + 60
    # wait until the monitor has seen side B end, not only the launcher's last words:
    # an interrupt between the two would (rightly) make B's end an interruption
    while time.monotonic() < deadline and b"run b failed" not in monitor_err.read_bytes():
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # run A would go on for a long time
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3
    res = json.loads(out.decode().strip().splitlines()[-1])
    meta = json.loads((Path(res["pair"]) / "pair.json").read_text())
    assert meta["runs"]["b"]["exit_code"] == 255 and meta["runs"]["b"]["status"] == "failed"
    assert "Connection to fake-host closed" in " ".join(meta["runs"]["b"]["stderr_tail"])
    assert gone(tag)


def test_sweep_through_a_launcher(tmp_path, capsys):
    store = tmp_path / "store"
    fake = [sys.executable, FAKE, "--side", "{side}", "--steps", "4"]
    argv = ["sweep", "--seeds", "0,1", "--headless", "--json", "--store", str(store),
            "--launch-b", SRUN, "--", *fake]  # fmt: skip
    assert main(argv) == 0
    rec = result(capsys)
    assert rec["plan"]["launch"] == [None, [sys.executable, LAUNCHER]]
    for job in rec["jobs"]:
        meta = json.loads((store / job["pair"] / "pair.json").read_text())
        assert "TUIMON_SEED=" + str(job["seed"]) in meta["commands"]["b"]
