"""Pairs and sweeps through a real SLURM (`srun`, `sbatch`, `scancel`, `squeue`).

`.ci/slurm-up` starts a one-node SLURM; where there is none (or it does not run a job), every
test here is skipped with the reason. The jobs are tiny fake trainers with short sleeps.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, pair_json, wait_for_raw_lines, wait_until

from tuimon.cli import main

PY = sys.executable


@functools.cache
def slurm_missing() -> str | None:
    """Why SLURM cannot be used here (None when `srun` runs a job)."""
    try:
        proc = subprocess.run(
            ["srun", "-N1", "-n1", "--time=1", "true"], capture_output=True, text=True, timeout=20
        )
    except FileNotFoundError:
        return "no srun on PATH (run .ci/slurm-up as root)"
    except subprocess.TimeoutExpired:
        return "srun did not run a job within 20 s (is slurmd up? .ci/slurm-up)"
    if proc.returncode != 0:
        return f"srun cannot run a job: {proc.stderr.strip()[-200:]} (.ci/slurm-up)"
    return None


@pytest.fixture(autouse=True)
def _needs_slurm() -> None:
    if reason := slurm_missing():
        pytest.skip(f"SLURM: {reason}")


def tag_for(name: str) -> str:
    """A job name and command-line tag no other test shares."""
    return f"tuimon-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def jobs_named(name: str) -> list[str]:
    """Job ids in squeue whose name starts with `name`."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=20
    ).stdout
    rows = (line.split(None, 1) for line in out.splitlines())
    return [r[0] for r in rows if len(r) == 2 and r[1].startswith(name)]


def processes(tag: str) -> list[str]:
    """Command lines of live processes that carry `tag` (not the test's own pgrep)."""
    out = subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def nothing_left(tag: str, within: float = 30.0) -> bool:
    """No job named `tag*` in squeue and no process with `tag`, within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not jobs_named(tag) and not processes(tag):
            return True
        time.sleep(0.2)
    return False


def fake(tag: str, *more: str) -> list[str]:
    return [PY, FAKE_TRAINER, "--side", "{side}", "--tag", tag, *more]


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_pair_through_srun(tmp_path, capsys):
    tag = tag_for("pair")
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path), "--launch",
            f"srun -N1 -n1 -J {tag}", "--", *fake(tag, "--steps", "6")]  # fmt: skip
    assert main(argv) == 0
    res = last_json(capsys.readouterr().out)
    assert res["verdict"] == "IDENTICAL" and res["steps_compared"] == 6
    meta = pair_json(Path(res["pair"]))
    assert meta["launch"]["a"][:2] == ["srun", "-N1"] and meta["commands"]["b"][0] == "srun"
    assert nothing_left(tag)


def test_sweep_through_srun(tmp_path, capsys):
    tag = tag_for("sweep")
    argv = ["sweep", "--seeds", "0-2", "--jobs", "3", "--headless", "--json", "--store",
            str(tmp_path), "--launch", f"srun -J {tag}", "--",
            *fake(tag, "--steps", "4", "--diverge-at", "2")]  # fmt: skip
    assert main(argv) == 1  # every pair DIVERGED at step 2
    rec = last_json(capsys.readouterr().out)
    assert [j["verdict"] for j in rec["jobs"]] == ["DIVERGED"] * 3
    assert {j["first_step"] for j in rec["jobs"]} == {2}
    assert nothing_left(tag)


def start_pair(store: Path, tag: str, err: Path) -> subprocess.Popen[bytes]:
    """A long pair through srun, as a separate tuimon process."""
    with err.open("wb") as stderr:
        return subprocess.Popen(
            [PY, "-m", "tuimon", "pair", "--headless", "--json", "--store", str(store),
             "--launch", f"srun -J {tag}", "--",
             *fake(tag, "--steps", "100000", "--sleep", "0.02")],
            stdout=subprocess.PIPE, stderr=stderr,
        )  # fmt: skip


def test_ctrl_c_ends_the_jobs(tmp_path):
    tag = tag_for("sigint")
    proc = start_pair(tmp_path / "store", tag, tmp_path / "err")
    wait_for_raw_lines(tmp_path / "store", "b", 5)
    assert len(jobs_named(tag)) == 2
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, (tmp_path / "err").read_text()
    res = last_json(out.decode())
    assert res["status"] == "interrupted"
    meta = pair_json(Path(res["pair"]))
    assert {meta["runs"][s]["status"] for s in "ab"} == {"interrupted"}
    assert nothing_left(tag), (jobs_named(tag), processes(tag))


def test_sigkill_of_tuimon_leaves_no_job_and_no_orphan(tmp_path):
    tag = tag_for("sigkill")
    proc = start_pair(tmp_path / "store", tag, tmp_path / "err")
    wait_for_raw_lines(tmp_path / "store", "a", 5)
    assert len(jobs_named(tag)) == 2 and processes(tag)
    proc.kill()
    proc.wait(timeout=10)
    assert nothing_left(tag), (jobs_named(tag), processes(tag))


def test_scancel_fails_the_pair_and_says_so(tmp_path):
    tag = tag_for("scancel")
    proc = start_pair(tmp_path / "store", tag, tmp_path / "err")
    wait_for_raw_lines(tmp_path / "store", "b", 5)
    subprocess.run(["scancel", "-n", tag], check=True, timeout=20)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3
    res = last_json(out.decode())
    assert res["status"] == "failed" and res["verdict"] == "INCOMPLETE"
    meta = pair_json(Path(res["pair"]))
    tails = " ".join(meta["runs"]["a"]["stderr_tail"] + meta["runs"]["b"]["stderr_tail"])
    assert "CANCELLED" in tails
    assert meta["runs"]["b"]["steps"] >= 5  # what ran before is kept and compared
    assert nothing_left(tag)


def test_job_that_cannot_start_is_one_failed_side(tmp_path, capsys):
    tag = tag_for("nopart")
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path), "--launch-b",
            f"srun -p no-such-partition -J {tag}", "--", *fake(tag, "--steps", "3")]  # fmt: skip
    assert main(argv) == 3
    res = last_json(capsys.readouterr().out)
    assert res["verdict"] == "INCOMPLETE"
    meta = pair_json(Path(res["pair"]))
    assert meta["runs"]["b"]["status"] == "failed" and meta["runs"]["b"]["steps"] == 0
    assert "invalid partition" in " ".join(meta["runs"]["b"]["stderr_tail"])
    assert meta["runs"]["a"]["steps"] == 3
    assert nothing_left(tag)


def sbatch(tag: str, log: Path, *args: str) -> str:
    """Submit the fake trainer with sbatch, its log written to `log`; the job id."""
    cmd = " ".join([PY, FAKE_TRAINER, "--tag", tag, "--stdout-file", str(log), *args])
    out = subprocess.run(
        ["sbatch", "--parsable", "-J", tag, "-o", "/dev/null", f"--wrap={cmd}"],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout  # fmt: skip
    return out.strip().split(";")[0]


def test_watch_two_sbatch_jobs(tmp_path, capsys):
    tag = tag_for("watch")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for side, log in (("a", a), ("b", b)):
        sbatch(tag, log, "--side", side, "--steps", "8", "--sleep", "0.05", "--diverge-at", "5")
    argv = ["watch", str(a), str(b), "--headless", "--json", "--stall-timeout", "20",
            "--store", str(tmp_path / "store")]  # fmt: skip
    assert main(argv) == 1
    res = last_json(capsys.readouterr().out)
    assert res["verdict"] == "DIVERGED" and res["first_divergent_step"] == 5
    assert nothing_left(tag)


def test_sweep_to_a_missing_partition_fails_fast(tmp_path, capsys):
    tag = tag_for("failfast")
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "0-15", "--jobs", "16", "--headless", "--json", "--store",
            str(store), "--launch", f"srun -p no-such-partition -J {tag}", "--",
            *fake(tag, "--steps", "3")]  # fmt: skip
    assert main(argv) == 3
    rec = last_json(capsys.readouterr().out)
    assert "invalid partition" in rec["stopped"].lower()
    assert [j["status"] for j in rec["jobs"]].count("failed") == 1
    assert len([p for p in store.iterdir() if p.name != "sweeps"]) == 1
    assert nothing_left(tag)


def test_sweep_submitted_with_sbatch_then_attached(tmp_path, capsys):
    tag = tag_for("submit")
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "0-1", "--store", str(store), "--submit", f"sbatch -J {tag}",
            "--", *fake(tag, "--steps", "6", "--sleep", "0.05")]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    (record,) = (store / "sweeps").glob("*.json")
    assert len(jobs_named(tag)) + len(list(store.glob("*/a.exit"))) > 0
    attach = ["sweep", "--attach", str(record), "--headless", "--json", "--stall-timeout", "60"]
    assert main(attach) == 0
    rec = last_json(capsys.readouterr().out)
    assert [(j["status"], j["verdict"]) for j in rec["jobs"]] == [("finished", "IDENTICAL")] * 2
    assert all("Submitted batch job" in j["submitted"]["a"] for j in rec["jobs"])
    assert nothing_left(tag)


def test_attached_job_cancelled_with_scancel_is_incomplete(tmp_path, capsys):
    tag = tag_for("subcancel")
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "0", "--store", str(store), "--submit", f"sbatch -J {tag}",
            "--", *fake(tag, "--steps", "100000", "--sleep", "0.02")]  # fmt: skip
    assert main(argv) == 0
    (record,) = (store / "sweeps").glob("*.json")
    (pair,) = [p for p in store.iterdir() if p.name != "sweeps"]
    wait_until(lambda: (pair / "b.jsonl").stat().st_size > 500, within=30)
    subprocess.run(["scancel", "-n", tag], check=True, timeout=20)
    capsys.readouterr()
    attach = ["sweep", "--attach", str(record), "--headless", "--json", "--stall-timeout", "2"]
    assert main(attach) == 3
    rec = last_json(capsys.readouterr().out)
    assert rec["jobs"][0]["verdict"] == "INCOMPLETE" and rec["jobs"][0]["steps_compared"] > 0
    assert nothing_left(tag)


def test_sigkill_of_a_sweep_through_srun_leaves_nothing(tmp_path):
    tag = tag_for("sweepkill")
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [PY, "-m", "tuimon", "sweep", "--seeds", "0-3", "--jobs", "2", "--headless", "--store",
         str(store), "--launch", f"srun -J {tag}", "--",
         *fake(tag, "--steps", "100000", "--sleep", "0.02")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # past the first pair's gate, every run started (a kill while an srun waits for its
    # allocation leaves that allocation to SLURM's InactiveLimit, 10 s in .ci/slurm-up)
    wait_until(lambda: len(jobs_named(tag)) == 4 and len(processes(tag)) >= 5, within=60)
    proc.kill()
    proc.wait(timeout=10)
    assert nothing_left(tag), (jobs_named(tag), processes(tag))


def test_attach_waits_for_a_job_still_pending(tmp_path, capsys):
    tag = tag_for("pending")
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "0", "--store", str(store), "--submit",
            f"sbatch -J {tag} --begin=now+4", "--", *fake(tag, "--steps", "4")]  # fmt: skip
    assert main(argv) == 0
    (record,) = (store / "sweeps").glob("*.json")
    capsys.readouterr()
    attach = ["sweep", "--attach", str(record), "--headless", "--json", "--stall-timeout", "1"]
    assert main(attach) == 0  # silent past the stall timeout, but PENDING: not over
    rec = last_json(capsys.readouterr().out)
    assert rec["jobs"][0]["verdict"] == "IDENTICAL"
    tail = " ".join(pair_json(store / rec["jobs"][0]["pair"])["runs"]["a"]["stderr_tail"])
    assert "the job is pending in the scheduler's queue" in tail
    assert nothing_left(tag)
