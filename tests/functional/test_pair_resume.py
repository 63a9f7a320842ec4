"""`tuimon pair --resume-at N`: side b stops after step N with a checkpoint and runs again from
it; the verdict names the first step after N where the sides part, and `explain` says what the
resume lost (a pure-Python script that forgets part of its state; the workload on CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import TESTS, pair_json

from tuimon.cli import main

TRAINER = str(TESTS / "resume_trainer.py")
RESUMES = ["--checkpoint-at", "{checkpoint_at}", "--checkpoint", "{checkpoint}",
           "--resume-from", "{resume_from}"]  # fmt: skip


def _pair(
    store: Path, capsys: pytest.CaptureFixture[str], forget: str, *more: str
) -> tuple[int, dict]:
    command = [sys.executable, TRAINER, "--forget", forget, *RESUMES, *more]
    argv = ["pair", "--seed", "0", "--resume-at", "3", "--headless", "--json", "--store",
            str(store), "--", *command]  # fmt: skip
    code = main(argv)
    return code, json.loads(capsys.readouterr().out.splitlines()[-1])


def _explain(pair: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["explain", str(pair), "--json"]) == 0  # no rerun, so nothing to agree to
    return json.loads(capsys.readouterr().out)


def test_a_resume_that_restores_everything_is_identical(tmp_path: Path, capsys) -> None:
    code, res = _pair(tmp_path, capsys, "nothing")
    assert (code, res["verdict"], res["steps_compared"]) == (0, "IDENTICAL", 8)
    assert res["resume"] == {"side": "b", "at": 3, "command": res["resume"]["command"],
                             "restarted": True}  # fmt: skip
    (pair,) = tmp_path.iterdir()
    doc = pair_json(pair)
    assert "--checkpoint-at" in doc["commands"]["b"] and "3" in doc["commands"]["b"]
    assert "--resume-from" in doc["resume"]["command"]
    assert doc["runs"]["b"]["command"].startswith("resumed after step 3 · ")
    assert not (pair / "checkpoint-b").exists()  # the scratch is removed with the run
    stderr = (pair / "b.stderr").read_text()
    assert "run b stopped after step 3 and saved its checkpoint; restarted from it" in stderr
    said = _explain(pair, capsys)
    assert (said["status"], said["lost"], said["how"]) == ("resume", [], "digests")


def test_a_resume_that_forgets_its_rng_parts_at_the_next_step(tmp_path: Path, capsys) -> None:
    code, res = _pair(tmp_path, capsys, "rng")
    assert (code, res["verdict"], res["first_divergent_step"]) == (1, "DIVERGED", 4)
    (pair,) = tmp_path.iterdir()
    said = _explain(pair, capsys)
    assert said["lost"] == ["rng.python"]
    assert "the resume lost the RNG state (python): at step 4" in said["message"]


def test_a_resume_that_forgets_its_optimizer_state_is_named(tmp_path: Path, capsys) -> None:
    code, res = _pair(tmp_path, capsys, "optimizer")
    assert (code, res["verdict"], res["first_divergent_step"]) == (1, "DIVERGED", 5)
    (pair,) = tmp_path.iterdir()
    said = _explain(pair, capsys)
    assert said["lost"] == ["optimizer"]
    assert "the resume lost the optimizer state" in said["message"]


def test_a_resume_that_loses_its_data_position_is_named(tmp_path: Path, capsys) -> None:
    code, res = _pair(tmp_path, capsys, "data")
    assert (code, res["verdict"], res["first_divergent_step"]) == (1, "DIVERGED", 4)
    (pair,) = tmp_path.iterdir()
    said = _explain(pair, capsys)
    assert said["lost"] == ["data"]
    assert "the resume lost the data order (its position): at step 4" in said["message"]


def test_the_headless_report_names_the_step_after_the_resume(tmp_path: Path, capsys) -> None:
    argv = ["pair", "--resume-at", "3", "--headless", "--store", str(tmp_path), "--",
            sys.executable, TRAINER, "--forget", "rng", *RESUMES]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert (
        "resume: run b stopped after step 3, saved its checkpoint and resumed from it; the "
        "sides part at step 4, the first step after it" in out
    )


@pytest.mark.parametrize(
    ("forget", "lost", "said"),
    [
        ("rng", ["data or RNG"], "at step 4 the weights agree but the losses differ: the resume "
         "lost the data order or an RNG state"),
        ("optimizer", ["optimizer"], "at step 4 the weights and losses agree, at step 5 the "
         "weights differ: the resume lost the optimizer state"),
    ],
)  # fmt: skip
def test_without_state_digests_the_records_tell_what_they_can(
    tmp_path: Path, capsys, forget, lost, said
) -> None:
    code, _ = _pair(tmp_path, capsys, forget, "--no-digests")
    assert code == 1
    (pair,) = tmp_path.iterdir()
    found = _explain(pair, capsys)
    assert (found["lost"], found["how"]) == (lost, "records")
    assert said in found["message"]


def test_pair_explain_says_it_at_once(tmp_path: Path, capsys) -> None:
    argv = ["pair", "--resume-at", "3", "--headless", "--explain", "--store", str(tmp_path),
            "--", sys.executable, TRAINER, "--forget", "rng", *RESUMES]  # fmt: skip
    assert main(argv) == 1
    assert "the resume lost the RNG state (python): at step 4" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--resume-at", "-1"], "--resume-at must be a step before the last"),
        (["--resume-at", "299"], "(--steps 300: 0 to 298), got 299"),
        (["--resume-at", "2", "--steps", "3"], "got 2"),
        (
            ["--resume-at", "1", "--log-file", "{pair_dir}/{side}.log", "--", "true"],
            "not with --log-file",
        ),
        (
            ["--resume-at", "1", "--", "python", "train.py"],
            "the command takes neither {checkpoint_at} nor {resume_from}",
        ),
        (
            ["--resume-at", "1", "--", "python", "t.py", "{resume_from}", "{checkpont_at}"],
            "did you mean {checkpoint_at}?",
        ),
    ],
)
def test_bad_resume_settings_are_one_line(tmp_path: Path, capsys, extra, said) -> None:
    assert main(["pair", "--headless", "--store", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_a_script_that_does_not_stop_at_n_is_not_restarted(tmp_path: Path, capsys) -> None:
    argv = ["pair", "--resume-at", "3", "--headless", "--store", str(tmp_path), "--",
            sys.executable, TRAINER, "--resume-from", "{resume_from}"]  # fmt: skip
    assert main(argv) == 3  # a failed run: INCOMPLETE
    captured = capsys.readouterr()
    assert "run b went on past step 3 (to step 7)" in captured.err
    assert (
        "its script does not stop at {checkpoint_at}"
        in (pair_dir := next(tmp_path.iterdir()) / "b.stderr").read_text()
    )
    assert pair_json(pair_dir.parent)["resume"]["restarted"] is False


@pytest.mark.torch
def test_the_workload_resumed_on_cpu_is_identical(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    tiny = ["--steps", "3", "--p", "5", "--threads", "1"]
    argv = ["pair", "--seed", "0", "--devices", "cpu,cpu", "--resume-at", "1", *tiny,
            "--headless", "--json", "--store", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (res["verdict"], res["steps_compared"], res["resume"]["restarted"]) == (
        "IDENTICAL", 3, True
    )  # fmt: skip
    assert res["artifacts"]["emb"]["equal"] is True
    (pair,) = tmp_path.iterdir()
    steps = [json.loads(x) for x in (pair / "b.jsonl").read_text().splitlines()]
    assert [r["type"] for r in steps].count("header") == 2  # two runs, one side
    assert set(steps[1]["state_digests"]) == {"rng.python", "rng.numpy", "rng.torch",
                                              "optimizer", "data"}  # fmt: skip
