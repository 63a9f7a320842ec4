"""`tuimon pair --nproc`: the reference workload under torch.distributed (gloo on CPU), each
rank's output saved apart, 2 ranks against 2 and 1 against 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import pair_json

from tuimon.cli import main

pytestmark = pytest.mark.torch

TINY = ["--p", "7", "--steps", "8", "--threads", "1"]


def _pair(tmp_path: Path, capsys: pytest.CaptureFixture[str], nproc: str) -> tuple[int, dict]:
    store = tmp_path / "store"
    code = main(
        ["pair", "--seed", "0", "--devices", "cpu,cpu", "--nproc", nproc, *TINY,
         "--headless", "--json", "--store", str(store)]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    return code, out


def test_two_ranks_against_two_are_identical_and_every_rank_is_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    code, out = _pair(tmp_path, capsys, "2")
    assert code == 0, out
    assert out["verdict"] == "IDENTICAL"
    (pair,) = (tmp_path / "store").iterdir()
    doc = pair_json(pair)
    assert doc["nproc"] == [2, 2]
    for side in "ab":
        rank1 = [json.loads(x) for x in (pair / f"{side}.rank1.jsonl").read_text().splitlines()]
        assert rank1[0]["env"]["world_size"] == 2 and rank1[0]["env"]["rank"] == 1
        assert rank1[0]["env"]["backend"] == "gloo"
        assert [r["step"] for r in rank1 if r["type"] == "step"] == list(range(8))
        assert doc["runs"][side]["env"]["rank"] == 0  # the side's step log is rank 0's
        assert "torch.distributed.run" in doc["commands"][side]
        assert (pair / f"emb-{side}.npy").exists()  # rank 0 saves W_E


def test_one_rank_against_two_diverges_the_world_size_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    code, out = _pair(tmp_path, capsys, "1,2")
    assert code == 1, out
    assert out["verdict"] == "DIVERGED"
    (pair,) = (tmp_path / "store").iterdir()
    doc = pair_json(pair)
    assert doc["nproc"] == [1, 2]
    assert "world_size" in doc["env_diff"]
    assert not list(pair.glob("a.rank*"))  # one rank: no other rank's files
    saved = (pair / "b.rank1.jsonl").read_bytes()
    # explain reruns the sides as they ran (1 rank, 2 ranks), rank 0 traced, the other ranks'
    # logs in explain/: the pair's own are never rewritten
    assert main(["explain", str(pair), "--yes", "--repeats", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["first"]["op"].startswith("aten.index")  # the world size changes the shapes
    assert (pair / "b.rank1.jsonl").read_bytes() == saved
    assert (pair / "explain" / "b.rank1.jsonl").exists()
    assert not (pair / "explain" / "a.rank1.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--nproc", "0"], "--nproc takes N or A,B"),
        (["--nproc", "2,x"], "--nproc takes N or A,B"),
        (["--nproc", "1,2,3"], "--nproc takes N or A,B"),
        (["--devices", "mps,cpu", "--nproc", "2"], "mps runs one rank"),
    ],
)
def test_bad_nproc_is_one_line_exit_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pair", *argv, "--headless", "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "s").exists()
