"""Papercuts a new user met (issue 40): `plot run.jsonl` says what plot takes (it said "is not
valid JSON"), `export -o DIR` never suggests --force, a failed `export --force -o /dev/full`
leaves the device, `browse --store sample_logs` would write no index into the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuimon.cli import main


def _pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for log in (a, b):
        log.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 0.5}\n')
    store = tmp_path / "store"
    assert main(["compare", str(a), str(b), "--save", "--store", str(store)]) == 0
    capsys.readouterr()
    (pair,) = [p for p in store.iterdir() if p.is_dir()]
    return pair


@pytest.mark.parametrize("command", ["plot", "spread"])
def test_a_log_given_to_plot_says_what_plot_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text('{"step": 0, "loss": 1.0}\n')
    out = ["-o", str(tmp_path / "x.png")] if command == "plot" else []
    assert main([command, str(log), *out, "--store", str(tmp_path / "s")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "not valid JSON" not in line and "give a pair directory" in line
    assert "tuimon read" in line


def test_export_to_a_directory_never_suggests_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = _pair(tmp_path, capsys)
    for force in ([], ["--force"]):
        assert main(["export", str(pair), "-o", str(tmp_path), *force]) == 2
        err = capsys.readouterr().err
        assert "is a directory" in err and "--force" not in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failed_export_to_a_device_leaves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = _pair(tmp_path, capsys)
    before = os.stat("/dev/full")
    assert main(["export", str(pair), "--force", "-o", "/dev/full"]) == 2
    assert "No space left" in capsys.readouterr().err
    after = os.stat("/dev/full")
    assert (after.st_ino, after.st_rdev, after.st_mode) == (
        before.st_ino,
        before.st_rdev,
        before.st_mode,
    )


def test_listing_a_folder_in_a_checkout_writes_no_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`browse --store sample_logs` listed the checkout's sample pairs and wrote
    sample_logs/.tuimon-index into it; a store tuimon made (in a checkout too) keeps one."""
    from tuimon.store.index import INDEX_FILE, list_pairs

    pair = _pair(tmp_path, capsys)
    made = pair.parent
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    samples = checkout / "sample_logs"
    samples.mkdir()
    pair.rename(samples / pair.name)
    (samples / "README.md").write_text("sample pairs\n")  # someone else's file
    assert [p.name for p in list_pairs(samples)] == [pair.name]
    assert not (samples / INDEX_FILE).exists()
    (samples / pair.name).rename(made / pair.name)  # outside a checkout, a README too:
    (made / "README.md").write_text("mine\n")  # cached
    assert len(list_pairs(made)) == 1 and (made / INDEX_FILE).exists()
    store = checkout / "tuimon_pairs"  # pairs alone, inside a checkout: cached too
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    assert main(["compare", a, b, "--save", "--store", str(store)]) == 0
    assert len(list_pairs(store)) == 1 and (store / INDEX_FILE).exists()


def test_explain_of_a_pair_from_another_machine_says_so_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its commands name a Python that is not here: one line, exit 2, no rerun announced."""
    import json
    import sys

    from helpers import FAKE_TRAINER

    store = tmp_path / "s"
    argv = ["pair", "--headless", "--store", str(store), "--", sys.executable, FAKE_TRAINER,
            "--side", "{side}", "--steps", "4", "--diverge-at", "2"]  # fmt: skip
    assert main(argv) == 1
    (pair,) = [p for p in store.iterdir() if p.is_dir()]
    doc = json.loads((pair / "pair.json").read_text())
    doc["commands"] = {
        k: ["/elsewhere/.venv/bin/python", *v[1:]] for k, v in doc["commands"].items()
    }
    (pair / "pair.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["explain", str(pair), "--yes"]) == 2
    captured = capsys.readouterr()
    assert "another machine" in captured.err and "/elsewhere/.venv/bin/python" in captured.err
    assert "rerun" not in captured.out.lower()
