"""`tuimon sweep --nproc 2`: a sweep of pairs of 2-rank sides, locally and through `srun` on the
project's one-node SLURM (`.ci/slurm-up`; skipped, saying why, where there is none)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import TESTS, pair_json
from test_slurm import nothing_left, slurm_missing, tag_for

from tuimon.cli import main

pytestmark = [pytest.mark.torch]
DDP = str(TESTS / "ddp_trainer.py")


def _sweep(tmp_path: Path, *extra: str) -> list[str]:
    return ["sweep", "--seeds", "0-1", "--devices", "cpu,cpu", "--nproc", "2", "--threads", "1",
            "--jobs", "1", "--headless", "--json", "--store", str(tmp_path / "store"), *extra,
            "--", sys.executable, DDP, "--seed", "{seed}", "--steps", "6"]  # fmt: skip


def _check(tmp_path: Path, out: str) -> None:
    record = json.loads(out)
    assert [job["verdict"] for job in record["jobs"]] == ["IDENTICAL", "IDENTICAL"]
    assert record["plan"]["nproc"] == [2, 2]
    for job in record["jobs"]:
        doc = pair_json(tmp_path / "store" / job["pair"])
        assert doc["nproc"] == [2, 2]
        assert doc["replicas"]["a"]["compared"] == 6 and doc["replicas"]["a"]["parted"] is None
        assert (tmp_path / "store" / job["pair"] / "b.rank1.jsonl").exists()


def test_a_sweep_of_two_rank_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    assert main(_sweep(tmp_path)) == 0
    _check(tmp_path, capsys.readouterr().out)


def test_a_sweep_of_two_rank_sides_through_srun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    if reason := slurm_missing():
        pytest.skip(f"SLURM: {reason}")
    tag = tag_for("nproc")
    assert main(_sweep(tmp_path, "--launch", f"srun -N1 -n1 -u -J {tag}")) == 0
    _check(tmp_path, capsys.readouterr().out)
    assert nothing_left(tag)
