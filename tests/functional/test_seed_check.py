"""Seeds that do nothing: a sweep (and `spread`, `pair --seeds A,B`) whose runs of different
seeds give the same log says "the seed is not applied"; `--check-seeds` makes it a failure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER

from tuimon.cli import main
from tuimon.engine.judge.seed_check import SameLog, log_fingerprint, same_logs

IGNORES_SEED = (
    "import json, sys\n"
    "seed = int(sys.argv[1])  # taken, and never used: the bug\n"
    "print(json.dumps({'type': 'header', 'format': 'tuimon.steplog/1', 'run': {'seed': seed}}))\n"
    "for k in range(4):\n"
    "    print(json.dumps({'step': k, 't': 0.1 * k + seed, 'loss': 1 / (k + 1)}))\n"
)
USES_SEED = IGNORES_SEED.replace("'loss': 1 / (k + 1)", "'loss': 1 / (k + 1 + seed)")


def _sweep(tmp_path: Path, script: str, *extra: str) -> list[str]:
    path = tmp_path / "train.py"
    path.write_text(script)
    return ["sweep", "--seeds", "0-2", "--headless", "--jobs", "1", "--store",
            str(tmp_path / "store"), *extra, "--", sys.executable, str(path), "{seed}"]  # fmt: skip


def test_a_script_that_ignores_its_seed_makes_a_3_seed_sweep_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_sweep(tmp_path, IGNORES_SEED)) == 0  # said, not failed
    out = capsys.readouterr().out
    said = "the seed is not applied: seeds 0 and 1 gave the same log (as did seed 2) (side a)"
    assert said in out and "seed not applied" in out  # under the table, and in its rows
    assert main([*_sweep(tmp_path, IGNORES_SEED, "--check-seeds", "--json")]) == 1
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["exit_code"] == 1 and record["check_seeds"] is True
    assert record["seeds_not_applied"] == [{"seeds": [0, 1, 2], "side": "a", "text": said}]
    assert [j["same_log_as"] for j in record["jobs"]] == [[1, 2], [0, 2], [0, 1]]


def test_a_script_that_applies_its_seed_is_not_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_sweep(tmp_path, USES_SEED, "--check-seeds", "--json")) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["seeds_not_applied"] == [] and record["exit_code"] == 0


def test_only_the_step_records_count_clocks_and_the_header_do_not(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    a.write_text('{"type":"header","format":"tuimon.steplog/1","run":{"seed":0}}\n'
                 '{"step":0,"t":1.5,"loss":0.5}\n')  # fmt: skip
    b.write_text('{"type":"header","format":"tuimon.steplog/1","run":{"seed":1}}\n'
                 '{"step":0,"t":9.0,"loss":0.5}\n')  # fmt: skip
    c.write_text('{"step":0,"loss":0.5000000000000001}\n')
    assert log_fingerprint(a) == log_fingerprint(b) != log_fingerprint(c)
    assert same_logs([(0, a), (0, c), (1, b), (2, c)]) == [SameLog((0, 1))]
    (tmp_path / "empty").write_text("no steps here\n")
    assert log_fingerprint(tmp_path / "empty") is None  # nothing to compare: never named


def test_a_fake_trainer_sweep_is_named_only_across_seeds_not_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    argv = ["sweep", "--seeds", "4", "--repeat", "2", "--headless", "--json", "--check-seeds",
            "--store", str(store), "--", sys.executable, FAKE_TRAINER, "--side", "{side}",
            "--steps", "3"]  # fmt: skip
    assert main(argv) == 0  # one seed twice: its repeats are meant to agree
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["seeds_not_applied"] == []


def test_spread_of_two_seeds_with_the_same_log_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    from spread_pairs import SETS, embedding, make_pair

    w = embedding(SETS[0], np.random.default_rng(0))
    pairs = [str(make_pair(tmp_path, f"s{seed}", seed, w, w)) for seed in (0, 1)]
    said = "the seed is not applied: seeds 0 and 1 gave the same log (side a)"
    code = main(["spread", *pairs])
    assert said in capsys.readouterr().out and code == 0
    assert main(["spread", "--json", "--check-seeds", *pairs]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["seeds_not_applied"][0]["seeds"] == [0, 1] and report["exit_code"] == 1
    other = make_pair(tmp_path, "s2", 2, w, w, reach=(21, 21))  # seed 2's log differs
    assert main(["spread", "--json", "--check-seeds", pairs[0], str(other)]) == 0
    assert json.loads(capsys.readouterr().out)["seeds_not_applied"] == []


def _pair(tmp_path: Path, script: str, *extra: str) -> list[str]:
    path = tmp_path / "train.py"
    path.write_text(script)
    return ["pair", "--seeds", "0,1", "--headless", "--store", str(tmp_path / "store"), *extra,
            "--", sys.executable, str(path), "{seed}"]  # fmt: skip


def test_a_pair_of_two_seeds_says_when_the_seed_is_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_pair(tmp_path, IGNORES_SEED)) == 0  # IDENTICAL, and said
    out = capsys.readouterr().out
    assert out.startswith("IDENTICAL") and "the seed is not applied: seeds 0 and 1 gave the " \
        "same log\n" in out  # fmt: skip
    assert main(_pair(tmp_path, IGNORES_SEED, "--check-seeds", "--json")) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["seeds"] == [0, 1] and record["exit_code"] == 1
    assert record["seeds_not_applied"][0]["seeds"] == [0, 1]
    assert record["hints"] == []  # the seeds differ: no "maybe:" for the sides
    assert main(_pair(tmp_path, USES_SEED, "--check-seeds", "--json")) == 0  # DIVERGED: applied
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "DIVERGED" and record["seeds_not_applied"] == []
    saved = [json.loads((d / "pair.json").read_text()) for d in (tmp_path / "store").iterdir()]
    assert sorted(len(d.get("seeds_not_applied", [])) for d in saved) == [0, 1, 1]
    assert all(d["commands"]["b"][-1] == "1" for d in saved)  # side b ran seed 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--seeds", "3"], "--seeds takes two seeds, A,B (got '3')"),
        (["--seeds", "2,2"], "two different seeds"),
        (["--seeds", "0,1", "--seed", "4"], "not with --seed or --against"),
        (["--check-seeds"], "--check-seeds goes with --seeds A,B"),
    ],
)
def test_bad_seeds_of_a_pair_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert main(["pair", "--headless", "--store", str(tmp_path), *argv]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.torch
def test_the_workload_applies_its_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    argv = ["pair", "--seeds", "0,1", "--check-seeds", "--steps", "2", "--p", "7", "--threads",
            "1", "--headless", "--json", "--store", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "DIVERGED" and record["seeds_not_applied"] == []
