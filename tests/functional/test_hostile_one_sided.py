"""No value on one side only is silent (issue 40): a `null`, a NaN, a string or a list where the
other run logged a number, or a metric one run did not log at a step both logged, is a
difference named at its step, in every format: JSON Lines, CSV, printed text, TensorBoard event
folders and W&B offline runs (the binary formats have no byte rule behind them: the records'
judge alone must say it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tuimon.cli import main

ODD = {"null": None, "string": "x", "list": [0.5, 1.0]}


def _compare(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", str(a), str(b)])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _diverged_at(code: int, out: dict[str, Any], step: int, name: str) -> None:
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", step), out
    assert name in out["first_divergent_metrics"] and name in out["first_one_sided"]


@pytest.mark.parametrize("odd", ["null", "string", "list", "absent"])
def test_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str], odd: str) -> None:
    def log(path: Path, other: bool) -> Path:
        rows = []
        for step in range(5):
            row: dict[str, Any] = {"step": step, "loss": 1.0 / (step + 1), "acc": 0.5}
            if other and step == 3:
                if odd == "absent":
                    del row["acc"]
                else:
                    row["acc"] = ODD[odd]
            rows.append(json.dumps(row) + "\n")
        path.write_text("".join(rows))
        return path

    code, out = _compare(capsys, log(tmp_path / "a.jsonl", False), log(tmp_path / "b.jsonl", True))
    _diverged_at(code, out, 3, "acc")


@pytest.mark.parametrize("odd", ["null", "x", "", "nan"])
def test_csv_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], odd: str) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("step,loss,acc\n0,1.0,0.5\n1,0.5,5.0\n2,0.25,0.5\n")
    b.write_text(f"step,loss,acc\n0,1.0,0.5\n1,0.5,{odd}\n2,0.25,0.5\n")
    code, out = _compare(capsys, a, b)
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 1)
    assert out["first_divergent_metrics"] == ["acc"]
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("step 0 loss 1.0 acc 0.5\nstep 1 loss 0.5 acc 5.0\nstep 2 loss 0.25 acc 0.5\n")
    b.write_text(f"step 0 loss 1.0 acc 0.5\nstep 1 loss 0.5 acc {odd}\nstep 2 loss 0.25 acc 0.5\n")
    code, out = _compare(capsys, a, b)
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 1)
    assert out["first_divergent_metrics"] == ["acc"]


def test_tensorboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scalar one run did not write at step 3, and a tag only one run wrote (a NaN)."""
    writer_mod = pytest.importorskip("tensorboard.summary")

    def events(folder: Path, skip: bool = False, extra: bool = False) -> Path:
        writer = writer_mod.Writer(str(folder))
        for step in range(5):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
            if not (skip and step == 3):
                writer.add_scalar("acc", 0.5, step)
            if extra:
                writer.add_scalar("gap", float("nan"), step)
        writer.close()
        return folder

    a = events(tmp_path / "a")
    code, out = _compare(capsys, a, events(tmp_path / "b", skip=True))
    _diverged_at(code, out, 3, "acc")
    assert out["values_one_sided"] == 1
    code, out = _compare(capsys, a, events(tmp_path / "c", extra=True))
    _diverged_at(code, out, 0, "gap")
    assert out["metrics_only_b"] == ["gap"] and out["values_one_sided"] == 5


WRITER = """
import sys, wandb
for name in sys.argv[2:]:
    odd = {"a": 0.5, "null": None, "string": "x", "list": [0.5, 1.0]}[name]
    run = wandb.init(project="t", dir=f"{sys.argv[1]}/{name}",
                     settings=wandb.Settings(console="off"))
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1), "acc": odd if step == 3 else 0.5}, step=step)
    run.finish()
"""


@pytest.fixture(scope="module")
def wandb_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("wandb")
    out = tmp_path_factory.mktemp("wandb")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(out)}
    names = ["a", *ODD]
    subprocess.run(
        [sys.executable, "-c", WRITER, str(out), *names],
        env=env, check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    return {n: next((out / n / "wandb").glob("offline-run-*")) for n in names}


@pytest.mark.parametrize("odd", list(ODD))
def test_wandb(wandb_runs: dict[str, Path], capsys: pytest.CaptureFixture[str], odd: str) -> None:
    code, out = _compare(capsys, wandb_runs["a"], wandb_runs[odd])
    _diverged_at(code, out, 3, "acc")
