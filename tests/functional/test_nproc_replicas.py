"""`--nproc` with a user's own DDP script (`tests/ddp_trainer.py`, gloo on CPU): rank 0 is the
side's step log, the other ranks' digests are checked against it; a dead rank is named; a rank
hanging in a collective is caught by the stall watchdog; tuimon's end ends every rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS, alive, pair_json, wait_until

from tuimon.cli import main

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc"),
]
DDP = str(TESTS / "ddp_trainer.py")


def _pair(tmp_path: Path, *trainer: str, extra: tuple[str, ...] = ()) -> list[str]:
    return ["pair", "--devices", "cpu,cpu", "--nproc", "2", "--threads", "1", *extra,
            "--headless", "--store", str(tmp_path / "store"), "--",
            sys.executable, DDP, "--steps", "10", *trainer]  # fmt: skip


def test_a_users_ddp_script_two_ranks_against_two_identical_replicas_equal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    code = main(_pair(tmp_path, extra=("--json",)))
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "IDENTICAL", (out["reason"], out["status"])
    for side in "ab":
        assert out["replicas"][side]["parted"] is None
        assert out["replicas"][side]["compared"] == 10


def test_a_parted_replica_fails_the_pair_naming_its_rank_live_saved_and_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sides agree (both were nudged the same way), but a replica parted inside each:
    DIVERGED, exit 1, as Megatron's replica check fails a run; compare and replay agree."""
    pytest.importorskip("torch")
    code = main(_pair(tmp_path, "--nudge", "1:5"))
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith(
        "DIVERGED: side a: rank 1 parted from rank 0 at step 5 (0.weight); side b: rank 1 "
        "parted from rank 0 at step 5 (0.weight); between the sides: 10 steps bitwise equal"
    ), out
    assert "side b: rank 1 parted from rank 0 at step 5 (0.weight)" in out
    (pair,) = (tmp_path / "store").iterdir()
    doc = pair_json(pair)
    assert doc["replicas"]["a"]["parted"] == {"rank": 1, "step": 5, "tensors": ["0.weight"]}
    assert doc["summary"]["verdict"] == "DIVERGED"
    assert doc["summary"]["replicas_parted"][0] == {
        "side": "a", "rank": 1, "step": 5, "tensors": ["0.weight"]}  # fmt: skip
    assert main(["compare", str(pair), "--json"]) == 1
    compared = json.loads(capsys.readouterr().out)
    assert compared["verdict"] == "DIVERGED"
    assert compared["replicas_parted"] == doc["summary"]["replicas_parted"]
    assert main(["replay", str(pair), "--headless"]) == 1
    assert "DIVERGED: side a: rank 1 parted from rank 0 at step 5" in capsys.readouterr().out
    # every raw line of every rank is on disk: rank 0's as the side's log, rank 1's beside it
    assert len((pair / "a.jsonl").read_text().splitlines()) == 12
    assert len((pair / "a.rank1.jsonl").read_text().splitlines()) == 12


def test_a_dead_rank_makes_the_side_incomplete_naming_the_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    code = main(_pair(tmp_path, "--die", "1:4", extra=("--json",)))
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["verdict"] == "INCOMPLETE"
    assert "rank 1 exited with code 3" in out["reason"]
    assert out["replicas"]["a"]["failed"] == "rank 1 exited with code 3"
    (pair,) = (tmp_path / "store").iterdir()
    assert "dying at step 4" in (pair / "a.rank1.stderr").read_text()


def _ours(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (agents, ranks, launchers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_rank_hanging_in_a_collective_is_stalled_and_tuimon_ends_every_rank(
    tmp_path: Path, sig: signal.Signals
) -> None:
    pytest.importorskip("torch")
    pids = tmp_path / "pid"
    argv = _pair(tmp_path, "--hang", "1:3", "--pidfile", str(pids),
                 extra=("--stall-timeout", "3"))  # fmt: skip
    err = tmp_path / "err"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "tuimon", *argv], stderr=fh,
                                stdout=subprocess.DEVNULL,
                                env={**os.environ, "COLUMNS": "400"})  # fmt: skip
    try:
        said = "stalled: no output for 3 s (rank 0 at step 3, rank 1 at step 3: a rank may wait"
        wait_until(lambda: said in err.read_text(), within=300)  # 7 processes start
        ranks = [int(pids.with_name(f"pid.{s}.{r}").read_text()) for s in "ab" for r in (0, 1)]
        assert all(alive(pid) for pid in ranks)
        assert len(_ours(str(tmp_path))) >= 6  # tuimon, 2 agents, 4 ranks
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        assert code == (3 if sig == signal.SIGTERM else -signal.SIGKILL)
        wait_until(lambda: not any(alive(pid) for pid in ranks), within=30)
        wait_until(lambda: not _ours(str(tmp_path)), within=30)  # the agents too
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _ours(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
