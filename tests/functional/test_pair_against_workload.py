"""`pair --against` with the reference workload (tiny: p 7, 20 steps): the lab's retrain check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import pair_json

from tuimon.cli import main

pytestmark = pytest.mark.torch


def test_a_retrain_of_a_saved_run_seed_for_seed(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    saved_store, store = tmp_path / "saved", tmp_path / "store"
    tiny = ["--p", "7", "--steps", "20", "--threads", "1"]
    assert main(["pair", "--headless", "--store", str(saved_store), *tiny]) == 0
    (saved,) = saved_store.iterdir()
    capsys.readouterr()
    # the same seed and settings, taken from the saved run's header
    assert (
        main(["pair", "--headless", "--json", "--store", str(store), "--against", f"{saved}/a"])
        == 0
    )
    captured = capsys.readouterr()
    assert "as the saved run: --seed 0 --threads 1 --steps 20 --p 7" in captured.err
    res = json.loads(captured.out.splitlines()[-1])
    assert (res["verdict"], res["steps_compared"]) == ("IDENTICAL", 20)
    check = res["against"]["emb_check"]
    assert (check["verdict"], check["bitwise_equal"], check["key_freqs"]["agree"]) == (
        "IDENTICAL", True, True
    )  # fmt: skip
    # another seed: its W_E and steps part at once
    argv = ["pair", "--headless", "--store", str(store), "--against", f"{saved}/a",
            "--seed", "1", "--stop-on-divergence"]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert out.startswith("DIVERGED: first divergent step 0")
    newest = max(store.iterdir())
    assert pair_json(newest)["summary"]["verdict"] == "DIVERGED"
