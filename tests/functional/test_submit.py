"""`sweep --submit PREFIX` then `sweep --attach RECORD` from another monitor, with any submit
prefix (here `setsid -f`, which starts the run detached and returns at once, as sbatch does)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, pair_json, wait_until

from tuimon.cli import main
from tuimon.engine.runs.submit import submit_argv

pytestmark = pytest.mark.skipif(not shutil.which("setsid"), reason="no setsid (util-linux)")


def submit(store: Path, seeds: str, *more: str) -> list[str]:
    return ["sweep", "--seeds", seeds, "--store", str(store), "--submit", "setsid -f", "--",
            sys.executable, FAKE_TRAINER, "--side", "{side}", *more]  # fmt: skip


def record(store: Path) -> Path:
    (path,) = (store / "sweeps").glob("*.json")
    return path


def test_submitted_sweep_is_judged_by_a_later_attach(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(submit(store, "0-1", "--steps", "6", "--diverge-at", "3")) == 0
    out = capsys.readouterr().out
    assert "`tuimon sweep --attach" in out and "seed 0, seed 1" in out
    rec = json.loads(record(store).read_text())
    assert [j["status"] for j in rec["jobs"]] == ["submitted"] * 2 and rec["submit"]
    dirs = [store / j["pair"] for j in rec["jobs"]]
    wait_until(lambda: all((d / f"{s}.exit").exists() for d in dirs for s in "ab"), 30)
    # the monitor that submitted is gone; another one follows and judges
    argv = ["sweep", "--attach", str(record(store)), "--headless", "--json"]
    assert main(argv) == 1
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(j["status"], j["verdict"], j["first_step"]) for j in rec["jobs"]] == [
        ("finished", "DIVERGED", 3)
    ] * 2
    meta = pair_json(dirs[0])
    assert meta["sweep"] == rec["id"] and meta["submitted"]["a"] is not None
    # the saved pair replays to the same verdict
    assert main(["replay", str(dirs[0]), "--headless", "--json"]) == 1
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["first_divergent_step"] == 3


def test_attach_follows_runs_still_writing(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(submit(store, "0", "--steps", "20", "--sleep", "0.05")) == 0
    capsys.readouterr()
    assert main(["sweep", "--attach", str(record(store)), "--headless", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["jobs"][0]["verdict"] == "IDENTICAL" and rec["jobs"][0]["steps_compared"] == 20


def test_a_run_that_fails_is_incomplete_with_its_error(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(submit(store, "0", "--steps", "5", "--crash-at", "2")) == 0
    capsys.readouterr()
    assert main(["sweep", "--attach", str(record(store)), "--headless", "--json"]) == 3
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    job = rec["jobs"][0]
    assert job["status"] == "failed" and job["verdict"] == "INCOMPLETE"
    meta = pair_json(store / job["pair"])
    assert meta["runs"]["b"]["exit_code"] == 1
    assert "boom at step" in " ".join(meta["runs"]["b"]["stderr_tail"])


def test_a_failed_submission_stops_the_sweep(tmp_path, capsys):
    store = tmp_path / "store"
    argv = submit(store, "0-9", "--steps", "3")
    argv[argv.index("setsid -f")] = "sh -c 'echo sbatch: error: invalid partition >&2; exit 1'"
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("invalid partition") == 2  # the pair's line, then why the sweep stopped
    rec = json.loads(record(store).read_text())
    assert [j["status"] for j in rec["jobs"]] == ["failed"] + ["pending"] * 9


def test_attach_never_runs_the_record_and_refuses_what_it_cannot_follow(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["sweep", "--attach", "nope", "--store", str(store), "--headless"]) == 2
    assert "no sweep 'nope'" in capsys.readouterr().err
    assert main(submit(store, "0", "--steps", "2")) == 0
    assert main(["sweep", "--resume", str(record(store)), "--headless"]) == 2
    assert "was submitted: `tuimon sweep --attach" in capsys.readouterr().err


def test_submit_argv_shapes():
    d = Path("/p/x")
    assert submit_argv(["sbatch", "-p", "gpu"], "S", d, "a") == [
        "sbatch", "-p", "gpu", "--job-name=tuimon-x-a", "--output=/p/x/a.submit.out", "--wrap=S",
    ]  # fmt: skip
    assert submit_argv(["ssh", "host", "nohup sh -c {cmd}"], "S", d, "b") == [
        "ssh", "host", "nohup sh -c S",
    ]  # fmt: skip
    assert submit_argv(["setsid", "-f"], "S", d, "a") == ["setsid", "-f", "sh", "-c", "S"]


def test_submit_json_prints_the_record(tmp_path, capsys):
    store = tmp_path / "store"
    argv = submit(store, "0", "--steps", "2")
    argv = [*argv[:3], "--headless", "--json", *argv[3:]]
    assert main(argv) == 0
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["status"] == "submitted" and rec["jobs"][0]["status"] == "submitted"
    wait_until(lambda: (store / rec["jobs"][0]["pair"] / "b.exit").exists(), 30)
