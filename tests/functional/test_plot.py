"""`tuimon plot`: a pair's figure and the figure of several seeds, as SVG and PNG."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from spread_pairs import SETS, embedding, make_pair, seeds_pairs

from tuimon.cli import main
from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Job, Sweep

pytest.importorskip("matplotlib")


def test_a_pair_as_svg_and_png(tmp_path: Path, capsys) -> None:
    pair = seeds_pairs(tmp_path / "p", seeds=(0,))[0]
    svg, png = tmp_path / "pair.svg", tmp_path / "pair.png"
    assert main(["plot", str(pair), "-o", str(svg)]) == 0
    assert main(["plot", str(pair), "-o", str(png)]) == 0
    assert "figure written to" in capsys.readouterr().out
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    for words in ("first divergent step 2", "side a", "side b", "key frequencies a {1 2 3 4 5}"):
        assert words in text  # matplotlib names each drawn text in a comment
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_identical_pair_without_w_e(tmp_path: Path) -> None:
    pair = make_pair(tmp_path, "same", 0, None, None, shift=0.0)
    out = tmp_path / "same.svg"
    assert main(["plot", str(pair), "-o", str(out)]) == 0
    assert "no divergence: all 40 steps compared are equal" in out.read_text()


def test_several_seeds_and_a_sweep(tmp_path: Path) -> None:
    pairs = seeds_pairs(tmp_path, near=True)
    out = tmp_path / "spread.svg"
    assert main(["plot", *map(str, pairs), "-o", str(out), "--threshold", "0.9"]) == 0
    text = out.read_text()
    assert "SAME AT RUN SCALE" in text and "key-frequency sets: the sides agree in 3 of 3" in text
    assert "where each pair" in text and "ratio" in text


def test_a_sweep_record(tmp_path: Path) -> None:
    store = tmp_path / "store"
    pairs = seeds_pairs(store, near=False)
    jobs = [Job(i, 1, status="finished", pair=p.name) for i, p in enumerate(pairs)]
    sweep = Sweep(store, PairPlan(None, ("cpu", "cpu"), (1, 1), False, None), jobs, at_once=1)
    sweep.save()
    out = tmp_path / "sweep.png"
    assert main(["plot", "--store", str(store), sweep.id, "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_bad_output_or_no_matplotlib_is_exit_2(tmp_path: Path, capsys, monkeypatch) -> None:
    w = embedding(SETS[0], np.random.default_rng(0))
    pair = make_pair(tmp_path, "p", 0, w, w)
    assert main(["plot", str(pair), "-o", str(tmp_path / "x.txt")]) == 2
    assert "give a file ending in .svg, .png, .pdf" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["plot", str(pair), "-o", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "tuimon: error: tuimon plot needs matplotlib: pip install matplotlib "
        '(in the tuimon checkout: pip install -e ".[plot]")'
    )
    assert not (tmp_path / "x.svg").exists()
