"""`tuimon spread`: the gap between a pair's sides beside the gap between seeds, and its rule."""

from __future__ import annotations

import gzip
import itertools
import json
import lzma
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    ROOT,
    heavy_modules_after,
)
from spread_pairs import SETS, embedding, make_pair, seeds_pairs

from tuimon.cli import main
from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Job, Sweep
from tuimon.readers import ReaderError, load, log_lines


def spread(capsys, *args: str) -> tuple[int, dict]:
    code = main(["spread", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def measure(report: dict, prefix: str) -> dict:
    return next(m for m in report["measures"] if m["name"].startswith(prefix))


def rel(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x.astype(np.float64), y.astype(np.float64)
    return float(np.linalg.norm(x - y) / ((np.linalg.norm(x) + np.linalg.norm(y)) / 2))


def test_sides_closer_than_seeds_are_the_same_at_run_scale(tmp_path: Path, capsys) -> None:
    pairs = seeds_pairs(tmp_path, near=True)
    code, report = spread(capsys, *map(str, pairs))
    assert code == 0 and report["verdict"] == "SAME AT RUN SCALE" and report["reasons"] == []
    w = {(i, s): np.load(p / f"emb-{s}.npy") for i, p in enumerate(pairs) for s in "ab"}
    sides = sorted(rel(w[i, "a"], w[i, "b"]) for i in range(3))
    seeds = sorted(
        rel(w[i, s], w[j, s]) for s in "ab" for i, j in itertools.combinations(range(3), 2)
    )
    we = measure(report, "W_E")
    assert we["between_sides_median"] == pytest.approx(np.median(sides))
    assert we["between_seeds_median"] == pytest.approx(np.median(seeds))
    assert we["ratio"] == pytest.approx(np.median(sides) / np.median(seeds))
    reach = measure(report, "steps to test_acc >= 0.99")
    assert reach["between_sides"] == [0, 0, 0]
    assert sorted(reach["between_seeds"]) == [5, 5, 5, 5, 10, 10]
    sets = report["key_frequency_sets"]
    assert sets["pairs_agree"] == 3 and sets["seed_comparisons_same_set"] == 0
    assert sets["seeds_share_mean"] == pytest.approx((2 + 2 + 0) / 3)
    assert [p["sides"]["a"]["key_freqs"] for p in report["pairs"]] == [list(s) for s in SETS]
    assert all(p["first_divergent_step"] == 2 for p in report["pairs"])


def test_sides_as_far_apart_as_seeds_differ(tmp_path: Path, capsys) -> None:
    pairs = seeds_pairs(tmp_path, near=False)
    code, report = spread(capsys, *map(str, pairs))
    assert code == 1 and report["verdict"] == "DIFFERENT AT RUN SCALE"
    assert measure(report, "W_E")["ratio"] > 0.5
    main(["spread", *map(str, pairs)])
    out = capsys.readouterr().out
    assert "rule: ratio = median gap between the two sides" in out
    assert out.rstrip().splitlines()[-1].startswith("DIFFERENT AT RUN SCALE: the sides' W_E are")


def test_a_reach_gap_alone_makes_it_different(tmp_path: Path, capsys) -> None:
    for seed in (0, 1):
        w = embedding(SETS[seed], np.random.default_rng(seed))
        make_pair(tmp_path, f"s{seed}", seed, w, w, reach=(10 + seed, 30 + seed))
    code, report = spread(capsys, str(tmp_path / "s0"), str(tmp_path / "s1"))
    reach = measure(report, "steps to")
    assert reach["between_sides"] == [20, 20] and reach["between_seeds"] == [1, 1]
    assert code == 1 and report["verdict"] == "DIFFERENT AT RUN SCALE"
    code, report = spread(capsys, "--threshold", "0.4", str(tmp_path / "s0"), str(tmp_path / "s1"))
    assert measure(report, "steps to test_acc >= 0.4")["name"].endswith(">= 0.4")


def test_one_seed_is_incomplete_and_repeats_are_summarised(tmp_path: Path, capsys) -> None:
    w = embedding(SETS[0], np.random.default_rng(0))
    a = make_pair(tmp_path, "r1", 0, w, w)
    b = make_pair(tmp_path, "r2", 0, w, w + 0.001)
    code, report = spread(capsys, str(a), str(b))
    assert code == 3 and report["verdict"] == "INCOMPLETE"
    assert any("1 seed (0): no gap between seeds" in r for r in report["reasons"])
    we = measure(report, "W_E")
    assert we["between_seeds"] == [] and len(we["repeats"]) == 2 and we["ratio"] is None


def test_a_side_cut_short_or_without_w_e_is_incomplete(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    w0, w1 = embedding(SETS[0], rng), embedding(SETS[1], rng)
    cut = make_pair(tmp_path, "cut", 0, w0, w0, b_last=15)
    none = make_pair(tmp_path, "none", 1, w1, None)
    code, report = spread(capsys, str(cut), str(none))
    assert code == 3
    reasons = " | ".join(report["reasons"])
    assert "cut: run b interrupted after step 15" in reasons
    assert "none: no W_E on side b (missing emb-b.npy)" in reasons
    assert report["pairs"][0]["sides"]["b"]["cut_short"].startswith("run b interrupted")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "file.txt").write_text("x")
    pair = seeds_pairs(tmp_path / "p", seeds=(0,))[0]
    cases = (
        [str(pair), str(tmp_path / "file.txt")],
        [str(pair), str(pair)],
        [str(tmp_path / "nothing")],
    )
    for args in cases:
        assert main(["spread", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tuimon: error: ") and "Traceback" not in err
    other = make_pair(tmp_path, "other", 1, np.zeros((8, 30), "f4"), np.zeros((8, 30), "f4"))
    assert main(["spread", str(pair), str(other)]) == 2
    assert "W_E shapes differ" in capsys.readouterr().err


def test_a_sweep_record_and_its_missing_jobs(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    pairs = seeds_pairs(store, near=True)
    jobs = [Job(i, 1, status="finished", pair=p.name) for i, p in enumerate(pairs)]
    plan = PairPlan(None, ("cpu", "cpu"), (1, 1), False, None)
    sweep = Sweep(store, plan, [*jobs, Job(3, 1)], at_once=1)
    sweep.save()
    code, report = spread(capsys, "--store", str(store), sweep.id)
    assert code == 3 and report["seeds"] == [0, 1, 2]
    assert report["reasons"] == ["seed 3: pending, no pair directory"]
    code, report = spread(capsys, str(sweep.path))
    assert code == 3 and len(report["pairs"]) == 3


def test_compressed_logs_read_as_the_log(tmp_path: Path) -> None:
    pair = seeds_pairs(tmp_path, seeds=(0,))[0]
    raw = (pair / "a.jsonl").read_bytes()
    (tmp_path / "a.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "a.xz").write_bytes(lzma.compress(raw))
    plain = log_lines(pair / "a.jsonl")
    assert log_lines(tmp_path / "a.gz") == plain == log_lines(tmp_path / "a.xz")
    assert load(tmp_path / "a.xz").steps == load(pair / "a.jsonl").steps
    (tmp_path / "cut.xz").write_bytes(lzma.compress(raw)[:100])
    with pytest.raises(ReaderError, match="cannot decompress"):
        log_lines(tmp_path / "cut.xz")


def test_the_shipped_p41_pairs_two_seeds(capsys) -> None:
    pairs = [ROOT / "sample_logs" / f"cpu-cpu-p41-grok-contiguous{s}" for s in ("", "-s1")]
    code, report = spread(capsys, *map(str, pairs))
    assert report["seeds"] == [0, 1] and report["reasons"] == []
    assert report["key_frequency_sets"]["pairs_agree"] == 2
    assert [p["first_divergent_step"] for p in report["pairs"]] == [2, 6]
    assert [p["sides"]["a"]["key_freqs"] for p in report["pairs"]] == [
        [3, 20, 10, 12, 17],
        [15, 10, 2, 4, 3],
    ]
    assert code == 0 and report["verdict"] == "SAME AT RUN SCALE"
    assert measure(report, "W_E")["ratio"] == pytest.approx(0.033, abs=0.002)
    assert measure(report, "steps to")["between_sides"] == [30, 30]  # 1,100/1,130 and 930/900


def test_help_loads_neither_textual_torch_nor_matplotlib() -> None:
    code = (
        "from tuimon.cli import main\n"
        "for c in ('spread', 'plot'):\n"
        "    try:\n        main([c, '--help'])\n    except SystemExit:\n        pass\n"
    )
    assert heavy_modules_after(code, heavy=("textual", "torch", "matplotlib")) == "LOADED []"
