"""A pair is a closed box (docs/survival-and-trust.md): `sweep --attach` of a planted record
never writes through a link out of the store nor rewrites a saved pair's pair.json, and a
`replay` never opens the arrays a log's end record names outside the pair directory."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import FAKE_TRAINER, TESTS, wait_until

from tuimon.cli import main

SAMPLE = TESTS.parent / "sample_logs" / "cpu-cpu-threads2"


def _submitted(store: Path) -> tuple[Path, list[Path]]:
    """A sweep of one pair submitted with `setsid -f`, its runs over: its record, its pairs."""
    argv = ["sweep", "--seeds", "0", "--store", str(store), "--submit", "setsid -f", "--",
            sys.executable, FAKE_TRAINER, "--side", "{side}", "--steps", "4"]  # fmt: skip
    assert main(argv) == 0
    (record,) = (store / "sweeps").glob("*.json")
    dirs = [store / j["pair"] for j in json.loads(record.read_text())["jobs"]]
    wait_until(lambda: all((d / f"{s}.exit").exists() for d in dirs for s in "ab"), 30)
    return record, dirs


def _plant(record: Path, **job: object) -> None:
    doc = json.loads(record.read_text())
    doc["jobs"][0].update(job)
    record.write_text(json.dumps(doc))


def _cause(capsys) -> str:
    """Why the sweep's one job failed (its record, as --json prints it)."""
    (job,) = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["jobs"]
    assert (job["status"], job["verdict"]) == ("failed", "INCOMPLETE")
    return job["hints"][0]["cause"]


@pytest.mark.skipif(not shutil.which("setsid"), reason="no setsid (util-linux)")
def test_attach_never_rewrites_a_saved_pair(tmp_path: Path, capsys) -> None:
    record, (pair,) = _submitted(tmp_path / "store")
    assert main(["sweep", "--attach", str(record), "--headless"]) == 0
    saved = (pair / "pair.json").read_bytes()
    assert json.loads(saved)["summary"]["verdict"] == "IDENTICAL"
    _plant(record, status="submitted", verdict=None)  # the record says: follow it again
    assert main(["sweep", "--attach", str(record), "--headless", "--json"]) == 3
    assert "never rewritten" in _cause(capsys)
    assert (pair / "pair.json").read_bytes() == saved


@pytest.mark.skipif(not shutil.which("setsid"), reason="no setsid (util-linux)")
def test_attach_never_writes_through_a_link_out_of_the_store(tmp_path: Path, capsys) -> None:
    record, (pair,) = _submitted(tmp_path / "store")
    outside = tmp_path / "outside"
    shutil.move(pair, outside)
    pair.symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())
    assert main(["sweep", "--attach", str(record), "--headless", "--json"]) == 3
    assert "is a link: not written" in _cause(capsys)
    assert sorted(p.name for p in outside.iterdir()) == before  # no pair.json, no aligned.jsonl


def test_replay_never_opens_arrays_named_outside_the_pair(tmp_path: Path, capsys) -> None:
    pair, outside = tmp_path / "pair", tmp_path / "outside"
    shutil.copytree(SAMPLE, pair)
    outside.mkdir()
    doc = json.loads((pair / "pair.json").read_text())
    doc.pop("artifacts", None)
    (pair / "pair.json").write_text(json.dumps(doc))
    for k, side in enumerate("ab"):
        np.save(outside / f"x-{side}.npy", np.full((8, 8), k, dtype=np.float32))
        lines = (pair / f"{side}.jsonl").read_text().splitlines()
        end = json.loads(lines[-1])
        end["artifacts"] = {"emb": str(outside / f"x-{side}.npy")}
        (pair / f"{side}.jsonl").write_text("\n".join([*lines[:-1], json.dumps(end)]) + "\n")
    assert main(["replay", "--headless", str(pair)]) == 0
    assert "elements differ" not in capsys.readouterr().err  # the planted arrays were not read
    # the same names inside the pair are read
    for side in "ab":
        shutil.copy(outside / f"x-{side}.npy", pair / f"x-{side}.npy")
    assert main(["replay", "--headless", str(pair)]) == 0
    said = capsys.readouterr()
    assert "emb at the end: 64 elements differ" in said.out + said.err  # the report (stdout)
