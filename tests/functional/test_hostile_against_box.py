"""`pair --against` reads the saved W_E only inside the saved run (issue 40): an `emb-a.npy`
that links outside the saved pair is refused before anything runs, and a W_E its end record
names by an absolute path is taken by its name in the saved run's folder alone (it was read
from wherever the path led: an IDENTICAL resting on a file that is not part of the run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import FAKE_TRAINER

from tuimon.cli import main


def _saved(tmp_path: Path) -> Path:
    store = tmp_path / "saved"
    argv = ["pair", "--headless", "--store", str(store), "--", sys.executable, FAKE_TRAINER,
            "--side", "{side}", "--emb", "{pair_dir}/emb-{side}.npy", "--steps", "5"]  # fmt: skip
    assert main(argv) == 0
    (d,) = store.iterdir()
    return d


def _live(tmp_path: Path, against: str) -> list[str]:
    return ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), "--against",
            against, "--", sys.executable, FAKE_TRAINER, "--side", "{side}", "--steps", "5",
            "--emb", "{pair_dir}/emb-{side}.npy"]  # fmt: skip


def test_a_w_e_linking_outside_the_saved_pair_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = _saved(tmp_path)
    outside = tmp_path / "outside.npy"
    (saved / "emb-a.npy").rename(outside)
    (saved / "emb-a.npy").symlink_to(outside)
    capsys.readouterr()
    assert main(_live(tmp_path, f"{saved}/a")) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "leads outside the saved run" in line and "emb-a.npy" in line
    assert not (tmp_path / "store").exists()  # refused before anything ran


def test_a_w_e_named_by_an_absolute_path_is_looked_for_in_the_saved_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log given by itself whose end record names its W_E by an absolute path elsewhere:
    that file is never read; one of its name beside the log is."""
    saved = _saved(tmp_path)
    folder = tmp_path / "given"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (saved / "emb-a.npy").rename(elsewhere / "w.npy")
    rows = [json.loads(x) for x in (saved / "a.jsonl").read_text().splitlines()]
    rows[-1]["artifacts"] = {"emb": str(elsewhere / "w.npy")}
    log = folder / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(_live(tmp_path, str(log))) == 0
    assert (
        "emb_check" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])["against"]
    )  # not read: the file is not part of the saved run
    np.save(folder / "w.npy", np.load(elsewhere / "w.npy"))  # beside the log: read
    for d in (tmp_path / "store").iterdir():
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    assert main(_live(tmp_path, str(log))) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["against"]["emb_check"]["verdict"] == "IDENTICAL"
