"""Sweeps over seeds, headless: fake trainers, the reference workload, interrupt and resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, heavy_modules_after

from tuimon.cli import main
from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import (
    Job,
    Sweep,
    SweepError,
    default_jobs,
    key_frequencies,
    parse_seeds,
    row,
)

FAKE = FAKE_TRAINER


def sweep_argv(store: Path, seeds: str, *fake_args: str, extra: tuple[str, ...] = ()) -> list[str]:
    """argv of a headless sweep of two fake trainers per seed."""
    return [
        "sweep", "--seeds", seeds, "--headless", "--store", str(store), *extra,
        "--", sys.executable, FAKE, "--side", "{side}", *fake_args,
    ]  # fmt: skip


def record(store: Path) -> dict:
    (path,) = (store / "sweeps").glob("*.json")
    return json.loads(path.read_text())


def pair_json(store: Path, name: str) -> dict:
    return json.loads((store / name / "pair.json").read_text())


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("0-3", [0, 1, 2, 3]), ("0,3,7", [0, 3, 7]), ("5", [5]), ("0-2, 1, 9", [0, 1, 2, 9])],
)
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "3-1", "1-", "0,,2"])
def test_bad_seeds_are_refused(text):
    with pytest.raises(SweepError):
        parse_seeds(text)


def test_bad_seeds_on_the_command_line_are_one_line(tmp_path, capsys):
    assert main(["sweep", "--seeds", "9-1", "--store", str(tmp_path), "--headless"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "counts down" in lines[0]
    assert lines[1] == "try: tuimon sweep --help"


def test_default_jobs_never_share_a_core(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    cpu = PairPlan(seed=None, devices=("cpu", "cpu"), threads=(1, 1), deterministic=False,
                   loss_dtype=None)  # fmt: skip
    assert default_jobs(cpu) == 4
    assert default_jobs(PairPlan(**{**cpu.__dict__, "threads": (4, 4)})) == 1
    assert default_jobs(PairPlan(**{**cpu.__dict__, "devices": ("cuda", "cuda")})) == 1
    launched = PairPlan(**{**cpu.__dict__, "launch": (None, ("srun",))})
    assert default_jobs(launched) == 8  # only run A uses a local core


def test_three_seed_sweep_of_fake_trainers(tmp_path, capsys):
    store = tmp_path / "store"
    code = main(
        sweep_argv(store, "0-2", "--steps", "6", "--diverge-at", "3", extra=("--jobs", "2"))
    )
    assert code == 1  # every pair DIVERGED
    out = capsys.readouterr().out
    for column in ("seed", "verdict", "first div.", "tensor", "max div.", "likely causes"):
        assert column in out
    assert out.count("DIVERGED") == 3 and "embedding" in out
    rec = record(store)
    assert rec["status"] == "finished" and rec["never_ran"] == [] and rec["exit_code"] == 1
    assert [j["seed"] for j in rec["jobs"]] == [0, 1, 2]
    for job in rec["jobs"]:
        assert job["verdict"] == "DIVERGED" and job["first_step"] == 3
        assert job["first_tensors"] == ["W_E"]
        meta = pair_json(store, job["pair"])
        assert meta["sweep"] == rec["id"] and meta["seed"] == job["seed"]
        assert rec["id"] in job["pair"]  # the label names the sweep too
        assert [h["tag"] for h in meta["hints"]] == ["embedding"]
        assert "--side a" in " ".join(meta["commands"]["a"])
    # the browser still lists every pair (the sweep record is not a pair)
    from tuimon.store import list_pairs

    pairs = list_pairs(store)
    assert len(pairs) == 3 and {p.sweep for p in pairs} == {rec["id"]}


def test_identical_sweep_with_repeats_exits_0(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(sweep_argv(store, "0,5", "--steps", "3", extra=("--repeat", "2"))) == 0
    rec = record(store)
    assert [(j["seed"], j["repeat"]) for j in rec["jobs"]] == [(0, 1), (0, 2), (5, 1), (5, 2)]
    assert {j["verdict"] for j in rec["jobs"]} == {"IDENTICAL"}
    assert all(j["hints"] == [] for j in rec["jobs"])  # nothing differed: nothing to explain


def test_a_failed_pair_makes_the_sweep_incomplete(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(sweep_argv(store, "0-1", "--steps", "5", "--crash-at", "2")) == 3
    assert {j["verdict"] for j in record(store)["jobs"]} == {"INCOMPLETE"}


def test_reference_workload_sweep_at_tiny_settings(tmp_path, capsys):
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "0-2", "--steps", "3", "--p", "7", "--threads", "1",
            "--headless", "--json", "--check-seeds", "--store", str(store)]  # fmt: skip
    assert main(argv) == 0
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [j["verdict"] for j in rec["jobs"]] == ["IDENTICAL"] * 3
    assert rec["seeds_not_applied"] == []  # the workload applies its seed
    meta = pair_json(store, rec["jobs"][1]["pair"])
    assert meta["seed"] == 1 and meta["runs"]["a"]["run"]["seed"] == 1
    assert meta["runs"]["a"]["env"]["host"] == meta["runs"]["b"]["env"]["host"]


def test_sweep_interrupted_then_resumed(tmp_path):
    store = tmp_path / "store"
    steps = tmp_path / "steps"
    steps.write_text("100000")  # endless now; 4 steps when resumed
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "sweep", "--seeds", "0-3", "--jobs", "1", "--headless",
         "--json", "--store", str(store), "--shell", "--",
         f"{sys.executable} {FAKE} --side {{side}} --sleep 0.01 --steps $(cat {steps})"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        logs = list(store.glob("*/b.jsonl"))
        if logs and len(logs[0].read_bytes().splitlines()) > 10:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    rec = json.loads(out.decode().strip().splitlines()[-1])
    assert rec["status"] == "interrupted" and rec["never_ran"] == [1, 2, 3]
    first = rec["jobs"][0]
    assert first["status"] == "interrupted" and first["verdict"] == "INCOMPLETE"
    assert pair_json(store, first["pair"])["status"] == "interrupted"
    assert [j["status"] for j in rec["jobs"][1:]] == ["pending"] * 3

    steps.write_text("4")
    code = subprocess.run(
        [sys.executable, "-m", "tuimon", "sweep", "--resume", rec["id"], "--headless", "--yes",
         "--store", str(store)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert code.returncode == 0, code.stderr
    assert "IDENTICAL" in code.stdout
    again = record(store)
    assert again["status"] == "finished" and again["never_ran"] == []
    assert [j["verdict"] for j in again["jobs"]] == ["IDENTICAL"] * 4
    assert again["jobs"][0]["pair"] != first["pair"]  # the interrupted one ran again
    assert len([p for p in store.iterdir() if p.name != "sweeps"]) == 5  # and is still kept
    assert main(["sweep", "--resume", rec["id"], "--store", str(store), "--headless"]) == 2


def test_resume_of_no_such_sweep_is_one_line(tmp_path, capsys):
    assert main(["sweep", "--resume", "nope", "--store", str(tmp_path), "--headless"]) == 2
    assert "no sweep 'nope'" in capsys.readouterr().err


def test_sweep_record_round_trips(tmp_path):
    plan = PairPlan(
        seed=None,
        devices=("cpu", "mps"),
        threads=(1, 2),
        deterministic=True,
        loss_dtype="float32",
        template=("x", "{seed}"),
        launch=(None, ("ssh", "h")),
    )
    sweep = Sweep.create(tmp_path, plan, [1, 2], 1, 2)
    sweep.save()
    back = Sweep.load(tmp_path, sweep.id)
    assert back.plan == sweep.plan and back.jobs == sweep.jobs and back.at_once == 2


@pytest.mark.parametrize(
    ("artifacts", "shown"),
    [
        ({"key_frequencies": {"a": [14, 35, 41], "b": [14, 35, 42]}}, "a 14 35 41 · b 14 35 42"),
        ({"key_freqs": [3, 7]}, "3 7"),
        ({"emb": {"equal": True}}, None),
        ("not a mapping", None),
    ],
)
def test_key_frequencies_shown_where_the_pair_has_them(artifacts, shown):
    assert key_frequencies({"artifacts": artifacts}) == shown


def test_exit_code_and_running_cells():
    sweep = Sweep(Path("."), PairPlan(None, ("cpu", "cpu"), (1, 1), False, None), [], at_once=1)
    assert sweep.exit_code() == 3  # nothing ran: nothing is IDENTICAL
    sweep.jobs = [
        Job(0, 1, "finished", verdict="IDENTICAL"),
        Job(1, 1, "finished", verdict="CLOSE"),
    ]
    assert sweep.exit_code() == 0
    sweep.jobs.append(Job(2, 1, "finished", verdict="DIVERGED"))
    assert sweep.exit_code() == 1
    sweep.jobs.append(Job(3, 1, "pending"))
    assert sweep.exit_code() == 3 and sweep.never_ran() == [3]
    assert sweep.rest_line() == f"never ran: seeds 3 · `tuimon sweep --resume {sweep.id}` runs them"
    sweep.jobs.insert(0, Job(5, 2, "interrupted", verdict="INCOMPLETE"))
    assert sweep.rest_line().startswith("interrupted: seed 5 r2 · never ran: seeds 3 · ")
    running = Job(4, 1, "running", verdict="INCOMPLETE", step=9, total=40)
    assert row(running)[2:4] == ["running 10/40", "–"]
    running.first_step, running.verdict = 3, "DIVERGED"
    assert row(running)[3] == "DIVERGED so far"


def test_sweep_engine_imports_neither_textual_nor_torch():
    code = "import tuimon.engine.runs.sweep, tuimon.report.sweep, tuimon.engine.judge.hints"
    assert heavy_modules_after(code) == "LOADED []"
