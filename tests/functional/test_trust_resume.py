"""A sweep whose monitor was killed (SIGKILL) resumes: the record knows which monitor ran each
job (the sweep's lock), so a job left "running" by a dead monitor is interrupted and runs again,
and the record says so; a sweep still running elsewhere is not resumed twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import TESTS, wait_until

from tuimon.cli import main
from tuimon.engine.runs.sweep import Sweep

FAKE = str(TESTS / "fake_trainer.py")


def _record(store: Path) -> dict:
    found = list((store / "sweeps").glob("*.json"))
    return json.loads(found[0].read_text()) if found else {}


def _start(store: Path, steps: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuimon", "sweep", "--seeds", "0-1", "--jobs", "1", "--headless",
         "--store", str(store), "--shell", "--",
         f"{sys.executable} {FAKE} --side {{side}} --sleep 0.02 --steps $(cat {steps})"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip


def test_a_sweep_killed_with_sigkill_resumes(tmp_path, capsys):
    store, steps = tmp_path / "store", tmp_path / "steps"
    steps.write_text("100000")  # endless now; 3 steps when resumed
    proc = _start(store, steps)
    try:
        wait_until(lambda: _record(store).get("jobs", [{}])[0].get("status") == "running", 60)
        wait_until(lambda: any(store.glob("*/a.jsonl")), 60)
        sweep_id = _record(store)["id"]
        assert main(["sweep", "--resume", sweep_id, "--store", str(store), "--yes"]) == 2
        assert "still running in another tuimon (pid" in capsys.readouterr().err
    finally:
        proc.kill()  # SIGKILL: no word to the record, which still says "running"
        proc.wait()
    assert _record(store)["jobs"][0]["status"] == "running"

    back = Sweep.load(store, sweep_id)
    first = back.jobs[0]
    assert first.status == "interrupted" and f"pid {proc.pid}" in (first.note or "")
    assert back.todo() == [0, 1]

    steps.write_text("3")
    assert main(["sweep", "--resume", sweep_id, "--store", str(store), "--yes", "--headless"]) == 0
    rec = _record(store)
    assert [j["status"] for j in rec["jobs"]] == ["finished", "finished"]
    assert [j["verdict"] for j in rec["jobs"]] == ["IDENTICAL", "IDENTICAL"]
    assert "was gone (killed)" in rec["jobs"][0]["note"]  # the record says why it ran again
    assert rec["monitor"] == f"pid {os.getpid()} on {os.uname().nodename}"
