"""Only regular files are opened: a FIFO, a device or a socket where a log, pair.json, a sweep
record or a .npy is read is refused at once with one line (exit 2), never waited on; a damaged
optional part of a pair never changes the verdict."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import TESTS

from tuimon.cli import main

ROOT = TESTS.parent
IDENTICAL = ROOT / "sample_logs" / "cpu-cpu-threads2"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_two_fifo_logs_are_refused_by_compare_and_replay(tmp_path, fifo, capsys):
    log = IDENTICAL / "a.jsonl"
    assert main(["compare", str(fifo), str(log)]) == 2
    assert main(["replay", "--headless", str(log), str(fifo)]) == 2
    assert main(["compare", "/dev/null", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{fifo} is a FIFO, not a regular file" in err and "/dev/null is a device" in err


def test_a_fifo_sweep_record_is_refused(fifo, capsys):
    assert main(["sweep", "--resume", str(fifo), "--headless"]) == 2
    assert "is a FIFO, not a regular file" in capsys.readouterr().err


def test_emb_check_refuses_a_fifo_alone_or_in_a_folder(tmp_path, fifo, capsys):
    arr = tmp_path / "w.npy"
    np.save(arr, np.ones((4, 6), dtype=np.float32))
    assert main(["emb-check", str(fifo), str(arr)]) == 2
    saved, retrain = tmp_path / "saved", tmp_path / "retrain"
    saved.mkdir()
    retrain.mkdir()
    os.mkfifo(saved / "emb_s0.npy")
    shutil.copy(arr, retrain / "emb_s0.npy")
    assert main(["emb-check", str(saved), str(retrain)]) == 3  # that seed was not compared
    assert capsys.readouterr().out.count("is a FIFO, not a regular file") == 1


def test_a_fifo_pair_json_gives_compare_and_replay_the_same_code(tmp_path):
    pair = tmp_path / "pair"
    shutil.copytree(IDENTICAL, pair)
    (pair / "pair.json").unlink()
    os.mkfifo(pair / "pair.json")
    assert main(["compare", str(pair)]) == 3  # as a pair without pair.json: not finished
    assert main(["replay", "--headless", str(pair)]) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda a: a["emb"].update(key_freqs={"x": 1}),
        lambda a: a["emb"].update(key_freqs=[1, 2]),
        lambda a: a.update(emb=7),
        lambda a: a["emb"].update(max_abs="x", equal=False),
    ],
)
def test_damaged_key_frequencies_never_change_the_verdict(tmp_path, capsys, damage):
    pair = tmp_path / "pair"
    shutil.copytree(IDENTICAL, pair)
    doc = json.loads((pair / "pair.json").read_text())
    damage(doc["artifacts"])
    (pair / "pair.json").write_text(json.dumps(doc))
    assert main(["compare", str(pair)]) == 0
    assert main(["replay", "--headless", str(pair)]) == 0
    out = capsys.readouterr()
    assert "damaged in pair.json" in out.out and "Error" not in out.err
