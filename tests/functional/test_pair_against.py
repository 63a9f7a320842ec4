"""`tuimon pair --against SAVED`: one live run against a saved one (fake trainers, no torch)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import FAKE_TRAINER, ROOT, pair_json

from tuimon.cli import main


def live(store: Path, against: str, *fake: str, extra: tuple[str, ...] = ()) -> list[str]:
    """argv of a headless JSON `pair --against` whose live run is a fake trainer (side a)."""
    return [
        "pair", "--headless", "--json", "--store", str(store), "--against", against, *extra,
        "--", sys.executable, FAKE_TRAINER, "--side", "{side}", *fake,
    ]  # fmt: skip


def saved_pair(tmp_path: Path, *fake: str) -> Path:
    """A finished pair of two fake runs (with their W_E), its folder."""
    store = tmp_path / "saved"
    argv = [
        "pair", "--headless", "--store", str(store), "--", sys.executable, FAKE_TRAINER,
        "--side", "{side}", "--emb", "{pair_dir}/emb-{side}.npy", *fake,
    ]  # fmt: skip
    assert main(argv) == 0
    (d,) = store.iterdir()
    return d


def new_pair(store: Path) -> tuple[Path, dict]:
    (d,) = store.iterdir()
    return d, pair_json(d)


def result(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def write_log(path: Path, steps: int, *, header: dict | None = None, end: bool = True) -> Path:
    """A step log as the fake trainer writes it (side a), cut short when `end` is False."""
    lines = []
    if header is not None:
        lines.append({"type": "header", "format": "tuimon.steplog/1", **header})
    for i in range(steps):
        loss = 1.0 / (i + 1)
        lines.append({"type": "step", "step": i, "t": i * 0.01, "train_loss": loss,
                      "test_loss": 2 * loss, "param_digest": "00",
                      "param_digests": {"W_E": "0", "W_U": "0"}})  # fmt: skip
    if end:
        lines.append({"type": "end", "status": "ok", "steps": steps})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_against_a_saved_side_is_identical(tmp_path, capsys):
    saved = saved_pair(tmp_path, "--steps", "20")
    capsys.readouterr()
    store = tmp_path / "store"
    emb = ("--emb", "{pair_dir}/emb-{side}.npy")
    assert main(live(store, f"{saved}/a", "--steps", "20", *emb)) == 0
    res = result(capsys)
    assert (res["verdict"], res["steps_compared"], res["unmatched_b"]) == ("IDENTICAL", 20, 0)
    d, doc = new_pair(store)
    against = doc["against"]
    raw = (saved / "a.jsonl").read_bytes()
    assert against["sha256"] == hashlib.sha256(raw).hexdigest()
    assert (against["side"], against["pair"], against["status"]) == ("a", str(saved), "finished")
    assert against["emb_check"]["verdict"] == "IDENTICAL"
    assert res["against"]["emb_check"]["bitwise_equal"] is True
    assert doc["artifacts"]["emb"]["equal"] is True
    assert (d / "emb-b.npy").read_bytes() == (saved / "emb-a.npy").read_bytes()  # a closed box
    assert (d / "b.jsonl").read_bytes().splitlines() == raw.splitlines()
    assert list(doc["commands"]) == ["a"] and doc["runs"]["b"]["command"].startswith("saved: ")
    assert main(["compare", str(d)]) == 0  # the saved against-pair judges as it did live


def test_a_pair_directory_needs_a_side(tmp_path, capsys):
    saved = saved_pair(tmp_path, "--steps", "5")
    store = tmp_path / "store"
    capsys.readouterr()
    assert main(live(store, str(saved), "--steps", "5")) == 2
    err = capsys.readouterr().err
    assert "give --side a or --side b" in err and "Traceback" not in err
    assert main(live(store, str(saved), "--steps", "5", extra=("--side", "b"))) == 0
    assert result(capsys)["verdict"] == "IDENTICAL"  # the fake's side b equals its a


def test_a_different_retrain_is_diverged(tmp_path, capsys):
    saved = saved_pair(tmp_path, "--steps", "20")
    store = tmp_path / "store"
    capsys.readouterr()
    # the live run prints as the fake's side b does, parting from step 3
    argv = live(store, f"{saved}/a", "--steps", "20", "--diverge-at", "3")
    argv[argv.index("{side}")] = "b"
    assert main(argv) == 1
    res = result(capsys)
    assert (res["verdict"], res["first_divergent_step"], res["steps_compared"]) == (
        "DIVERGED", 3, 20
    )  # fmt: skip


def test_stop_on_divergence_ends_the_live_run(tmp_path, capsys):
    saved = write_log(tmp_path / "golden.jsonl", 200, header={"env": {"device": "cpu"}})
    store = tmp_path / "store"
    argv = live(store, str(saved), "--steps", "200", "--diverge-at", "3", "--sleep", "0.02",
                extra=("--stop-on-divergence",))  # fmt: skip
    argv[argv.index("{side}")] = "b"
    assert main(argv) == 1
    res = result(capsys)
    assert (res["verdict"], res["first_divergent_step"], res["status"]) == (
        "DIVERGED", 3, "stopped"
    )  # fmt: skip
    assert "--stop-on-divergence" in res["reason"]
    _, doc = new_pair(store)
    assert doc["stopped_on_divergence"] == 3
    assert doc["runs"]["a"]["last_step"] < 150  # ended well before its last step
    assert res["unmatched_b"] > 50  # the saved steps it never reached are counted


def test_a_saved_run_cut_short_is_incomplete(tmp_path, capsys):
    cut = write_log(tmp_path / "cut.jsonl", 10, header={"hyper": {"steps": 10}}, end=False)
    store = tmp_path / "store"
    assert main(live(store, str(cut), "--steps", "10", "--no-header")) == 3
    res = result(capsys)
    assert res["verdict"] == "INCOMPLETE" and res["steps_compared"] == 10
    assert "the saved run" in res["reason"] and "cut short at step 9" in res["reason"]
    _, doc = new_pair(store)
    assert doc["against"]["status"] == "interrupted"
    # planned 20, logged 10 (with an end record): cut short too
    planned = write_log(tmp_path / "planned.jsonl", 10, header={"hyper": {"steps": 20}})
    assert main(live(tmp_path / "s2", str(planned), "--steps", "10", "--no-header")) == 3
    assert "cut short at step 9 of 20 planned" in result(capsys)["reason"]


@pytest.mark.parametrize(("saved_steps", "live_steps"), [(10, 20), (20, 10)])
def test_steps_on_one_side_only_are_never_identical(tmp_path, capsys, saved_steps, live_steps):
    log = write_log(tmp_path / "plain.jsonl", saved_steps)  # no header: nothing says it was cut
    store = tmp_path / "store"
    assert main(live(store, str(log), "--steps", str(live_steps), "--no-header")) == 3
    res = result(capsys)
    assert res["verdict"] == "INCOMPLETE"
    assert (res["unmatched_a"], res["unmatched_b"]) == (
        max(0, live_steps - saved_steps), max(0, saved_steps - live_steps)
    )  # fmt: skip


def test_a_saved_run_from_another_device_says_so(tmp_path, capsys):
    log = write_log(tmp_path / "mps.jsonl", 10, header={"env": {"device": "mps"}})
    store = tmp_path / "store"
    argv = live(store, str(log), "--steps", "10", "--no-header")
    argv.remove("--json")
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("IDENTICAL: 10 steps bitwise equal")
    assert out[0].endswith("— the saved run ran on mps, this run on cpu")
    assert any(line.startswith("against the saved run: ") for line in out)
    _, doc = new_pair(store)
    assert doc["devices"] == ["cpu", "mps"] and doc["against"]["device"] == "mps"


def test_a_w_e_that_differs_makes_the_pair_diverged(tmp_path, capsys):
    saved = saved_pair(tmp_path, "--steps", "5")
    other = tmp_path / "other.npy"
    np.save(other, np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    store = tmp_path / "store"
    capsys.readouterr()
    argv = live(store, f"{saved}/a", "--steps", "5", "--emb", "{pair_dir}/emb-{side}.npy",
                extra=("--emb", str(other)))  # fmt: skip
    assert main(argv) == 1
    res = result(capsys)
    assert res["verdict"] == "DIVERGED" and res["first_divergent_step"] is None
    assert "W_E differs from the saved one: 6 of 6 elements" in res["reason"]
    assert res["against"]["emb_check"]["verdict"] == "DIVERGED"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--against", "nowhere.jsonl"), "--against: nowhere.jsonl: no such file or directory"),
        (("--side", "a"), "--side and --emb go with --against SAVED"),
        (("--against", "LOG", "--side", "a"), "--side chooses a side of a saved pair"),
        (("--against", "LOG", "--devices", "cpu,mps"), "--against runs one side"),
        (("--against", "LOG", "--launch-b", "ssh x"), "side b is the saved run"),
        (("--against", "LOG", "--emb", "none.npy"), "--emb none.npy: no such .npy file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, extra, said):
    monkeypatch.chdir(tmp_path)
    log = write_log(tmp_path / "log.jsonl", 3)
    extra = tuple(str(log) if x == "LOG" else x for x in extra)
    argv = ["pair", "--headless", "--store", "st", *extra, "--", sys.executable, FAKE_TRAINER]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "st").exists()  # nothing launched, no pair made


TRAIN = """
import argparse, json, random
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
random.seed(a.seed)
w = 0.0
for step in range(300):
    x = random.random()
    w -= LR * (w - x)
    print(json.dumps({"step": step, "loss": (w - x) ** 2}), flush=True)
"""


def golden_recipe() -> list[str]:
    """The shell lines of the golden-log recipe (docs/retrain-check.md), comments dropped."""
    text = (ROOT / "docs" / "retrain-check.md").read_text()
    start = text.index("**Golden logs in CI.**")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert block is not None
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_golden_log_recipe_runs_as_written(tmp_path):
    lines = golden_recipe()
    assert lines[0].startswith("python train.py") and "golden.jsonl" in lines[0]
    assert lines[1].startswith("tuimon pair --against golden.jsonl")
    assert "--stop-on-divergence" in lines[1]
    here = {
        "python": shlex.quote(sys.executable),
        "tuimon": f"{shlex.quote(sys.executable)} -m tuimon",
    }

    def sh(line: str) -> subprocess.CompletedProcess[str]:
        word, rest = line.split(" ", 1)  # no terminal: the pair runs headless, as in CI
        return subprocess.run(f"{here[word]} {rest}", shell=True, cwd=tmp_path,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=120)  # fmt: skip

    train = tmp_path / "train.py"
    train.write_text(TRAIN.replace("LR", "0.1"))
    assert sh(lines[0]).returncode == 0
    assert len((tmp_path / "golden.jsonl").read_text().splitlines()) == 300
    job = sh(lines[1])
    assert job.returncode == 0, job.stderr
    assert job.stdout.startswith("IDENTICAL: 300 steps bitwise equal")
    train.write_text(TRAIN.replace("LR", "(0.1 if step < 120 else 0.2)"))  # today's change
    job = sh(lines[1])
    assert job.returncode == 1, job.stderr
    assert job.stdout.startswith("DIVERGED: first divergent step 120 (loss)")
    assert "Traceback" not in job.stderr


def sweep_record(store: Path) -> dict:
    (record,) = (store / "sweeps").glob("*.json")
    return json.loads(record.read_text())


def test_sweep_against_a_saved_sweep(tmp_path, capsys):
    saved_store, store = tmp_path / "saved", tmp_path / "store"
    fake = ["--", sys.executable, FAKE_TRAINER, "--side", "{side}", "--steps", "10"]
    assert main(["sweep", "--seeds", "0-2", "--headless", "--store", str(saved_store), *fake]) == 0
    saved_id = sweep_record(saved_store)["id"]
    capsys.readouterr()
    record_path = str(saved_store / "sweeps" / f"{saved_id}.json")
    argv = ["sweep", "--against", record_path, "--headless", "--json", "--store", str(store)]
    assert main([*argv, *fake]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [(j["seed"], j["verdict"]) for j in record["jobs"]] == [
        (0, "IDENTICAL"), (1, "IDENTICAL"), (2, "IDENTICAL")
    ]  # fmt: skip
    assert sorted(record["against"]["seeds"]) == ["0", "1", "2"]
    pairs = sorted(p for p in store.iterdir() if p.name != "sweeps")
    assert [pair_json(p)["against"]["side"] for p in pairs] == ["a", "a", "a"]
    # only some seeds; a seed that was not saved is one line, exit 2
    assert main([*argv, "--seeds", "1", *fake]) == 0
    assert main([*argv, "--seeds", "7", *fake]) == 2
    assert "has no saved run of seed 7" in capsys.readouterr().err
    # such a sweep is not resumed (it would run ordinary pairs)
    assert main(["sweep", "--resume", record["id"], "--store", str(store), "--yes"]) == 2
    assert "ran against saved runs" in capsys.readouterr().err


def test_sweep_against_a_folder_of_logs(tmp_path, capsys):
    folder = tmp_path / "R26"
    folder.mkdir()
    write_log(folder / "run-a.jsonl", 10, header={"run": {"seed": 0}})  # the seed in the header
    write_log(folder / "train_seed_1.jsonl", 10)  # the seed in the name
    (folder / "notes.txt").write_text("no seed here\n")
    different = write_log(folder / "seed2.jsonl", 10)
    different.write_text(different.read_text().replace('"train_loss": 0.25', '"train_loss": 0.5'))
    store = tmp_path / "store"
    argv = ["sweep", "--against", str(folder), "--headless", "--json", "--store", str(store),
            "--", sys.executable, FAKE_TRAINER, "--steps", "10", "--no-header"]  # fmt: skip
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "skipped notes.txt: no seed in its header or its name" in captured.err
    record = json.loads(captured.out)
    assert [(j["seed"], j["verdict"], j["first_step"]) for j in record["jobs"]] == [
        (0, "IDENTICAL", None), (1, "IDENTICAL", None), (2, "DIVERGED", 3)
    ]  # fmt: skip


def test_stop_on_divergence_in_an_ordinary_pair(tmp_path, capsys):
    store = tmp_path / "store"
    argv = ["pair", "--headless", "--json", "--store", str(store), "--stop-on-divergence", "--",
            sys.executable, FAKE_TRAINER, "--side", "{side}", "--steps", "300",
            "--diverge-at", "2", "--sleep", "0.02"]  # fmt: skip
    assert main(argv) == 1
    out, err = capsys.readouterr()
    res = json.loads(out.strip().splitlines()[-1])
    assert (res["verdict"], res["first_divergent_step"], res["status"]) == (
        "DIVERGED", 2, "stopped"
    )  # fmt: skip
    _, doc = new_pair(store)
    # one word for a run tuimon stopped: the pair's and each run's in pair.json, --json's,
    # and the progress lines' (issue 41)
    assert all(doc["runs"][s]["status"] == "stopped" for s in "ab")
    assert max(doc["runs"][s]["last_step"] for s in "ab") < 200
    assert doc["status"] == res["status"] == "stopped"
    err = " ".join(err.split())
    assert "stopped (SIGTERM from tuimon)" in err and "interrupted" not in err
    assert "exit -" not in err and "exit 143" not in err


def test_a_saved_pair_whose_monitor_was_killed_is_incomplete(tmp_path, capsys):
    saved = saved_pair(tmp_path, "--steps", "5")
    (saved / "pair.json").unlink()  # as a SIGKILLed monitor leaves it
    store = tmp_path / "store"
    capsys.readouterr()
    assert main(live(store, f"{saved}/a", "--steps", "5")) == 3
    reason = result(capsys)["reason"]
    assert "the saved run has no pair.json in its pair (its monitor stopped at step 4)" in reason


def test_a_fifo_as_the_saved_side_is_refused(tmp_path, capsys):
    fifo = tmp_path / "log.jsonl"
    os.mkfifo(fifo)
    assert main(live(tmp_path / "store", str(fifo), "--steps", "5")) == 2
    err = capsys.readouterr().err
    assert "--against" in err and "Traceback" not in err
