"""W&B offline runs (`.wandb`, issue 42) written by the real wandb package (offline mode needs
no network), read through the registry: two runs of one seed are IDENTICAL, one value changed at
step 120 is DIVERGED at 120, a file cut mid-record or with a bad checksum is INCOMPLETE (never a
traceback), a nested metric keeps its name, and read, compare, replay and export take a run
folder like any log. The runs are written once for the module, by one process."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import replayed_rows

from tuimon.cli import main
from tuimon.readers import load
from tuimon.readers.wandb_run import BLOCK, frames
from tuimon.steplog import End, Header, Text

pytest.importorskip("wandb")

STEPS = 300
WRITER = """
import math, sys
import wandb
out, runs = sys.argv[1], sys.argv[2:]
for spec in runs:
    name, seed, changed, *flags = spec.split(":")
    pieces = ((0, 150), (150, %(steps)d)) if "resume" in flags else ((0, %(steps)d),)
    for first, stop in pieces:  # a resumed run: its second part a folder of its own
        run = wandb.init(project="tuimon", dir=f"{out}/{name}", id=f"tuimon{name}",
                         resume="allow", config={"seed": int(seed), "lr": 1e-3},
                         settings=wandb.Settings(console="off"))
        for step in range(first, stop):
            loss = 1.0 / (step + 1) + int(seed) * 1e-3 + math.sin(step) * 1e-6
            if step == int(changed):
                loss += 1e-12
            row = {"train/loss": loss, "eval": {"acc": step / %(steps)d}, "lr": 1e-3}
            if "media" in flags and step %% 100 == 0:
                import numpy as np
                row["sample"] = wandb.Image(np.full((4, 4, 3), step %% 256, dtype=np.uint8))
                row["table"] = wandb.Table(columns=["x"], data=[[step]])
                row["gap"] = float("nan")
            run.log(row, step=step)
        if stop < %(steps)d:
            run.finish()
    run.summary["best_loss"] = 1.0 / %(steps)d
    run.finish()
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Offline runs: `a` and `b` of seed 0, `c` of seed 0 with its loss changed at step 120,
    `m` of seed 0 with an image, a table and a NaN every 100 steps, `r` of seed 0 stopped at
    step 150 and resumed; each name maps to its run folder (wandb/offline-run-*), `r` to its
    wandb/ folder (the run and its resumption, a folder each)."""
    out = tmp_path_factory.mktemp("wandb")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(out)}
    specs = ["a:0:-1", "b:0:-1", "c:0:120", "m:0:-1:media", "r:0:-1:resume"]
    subprocess.run(
        [sys.executable, "-c", WRITER % {"steps": STEPS}, str(out), *specs],
        env=env, check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    found = {}
    for spec in specs:
        name = spec.split(":")[0]
        folders = list((out / name / "wandb").glob("offline-run-*"))
        found[name] = folders[0] if len(folders) == 1 else out / name / "wandb"
    return found


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *args])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_run_folder_and_its_file_read_as_a_wandb_run(runs: dict[str, Path]) -> None:
    folder = runs["a"]
    (file,) = folder.glob("*.wandb")
    for path in (folder, file):
        loaded = load(path)
        assert loaded.format == "W&B run" and loaded.step_key == "_step"
        steps = loaded.steps
        assert [s.step for s in steps] == list(range(STEPS))
        assert set(steps[0].metrics) == {"train/loss", "eval.acc", "lr"}  # nested: dotted
        assert {"_runtime", "_timestamp"} <= set(steps[0].clocks)
        assert steps[5].metrics["train/loss"] == 1.0 / 6 + math.sin(5) * 1e-6
        header = loaded.records[0]
        assert isinstance(header, Header)
        assert header.run["seed"] == 0 and header.hyper == {"seed": 0, "lr": 1e-3}
        assert {"host", "python", "wandb", "command"} <= set(header.env)
        (end,) = [r for r in loaded.records if isinstance(r, End)]
        assert end.status == "ok" and end.steps == STEPS
        (summary,) = [r for r in loaded.records if isinstance(r, Text) and "summary:" in r.text]
        assert f"best_loss={1.0 / STEPS!r}" in summary.text


def test_two_runs_of_one_seed_are_identical(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _compare(capsys, str(runs["a"]), str(runs["b"]))
    assert (code, out["verdict"]) == (0, "IDENTICAL")


def test_one_value_changed_at_step_120_is_diverged_at_120(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _compare(capsys, str(runs["a"]), str(runs["c"]))
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 120)


def test_the_view_shows_runs_read_ahead_as_read_in_its_process(runs: dict[str, Path]) -> None:
    """The replay view's feed over W&B runs read by a forked child (`read_ahead`): the rows,
    verdict and first divergence it gives when reading them in its own process."""
    for other, verdict, first in (("b", "IDENTICAL", None), ("c", "DIVERGED", 120)):
        pair = [runs["a"], runs[other]]
        ahead = replayed_rows(pair, ahead=True)
        assert ahead == replayed_rows(pair, ahead=False)
        assert (ahead["verdict"], ahead["first"], ahead["rows"]) == (verdict, first, STEPS)
        assert ahead["children"] == []


def _cut_and_damaged(file: Path, tmp_path: Path) -> dict[str, Path]:
    data = file.read_bytes()
    records, stopped = frames(data)
    assert stopped is None and len(records) > 100
    middle = len(data) // 2 + 3  # inside a record (records are far smaller than the file)
    flipped = bytearray(data)
    flipped[BLOCK + 100] ^= 0x01
    out = {}
    for kind, damaged in (("cut", data[:middle]), ("bad", bytes(flipped))):
        folder = tmp_path / kind
        folder.mkdir()
        (folder / file.name).write_bytes(damaged)
        out[kind] = folder
    return out


def test_a_file_cut_mid_record_or_damaged_is_incomplete(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (file,) = runs["a"].glob("*.wandb")
    for kind, folder in _cut_and_damaged(file, tmp_path).items():
        loaded = load(folder)
        assert 0 < len(loaded.steps) < STEPS
        assert not any(isinstance(r, End) for r in loaded.records)
        code, out = _compare(capsys, str(runs["a"]), str(folder))
        assert (code, out["verdict"]) == (3, "INCOMPLETE"), kind
        notes = out["accounts"]["b"]["notes"]
        assert any("reading stopped at byte" in note for note in notes)


def test_a_run_killed_before_its_exit_record_is_incomplete(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that ends on a whole record, without W&B's exit record (killed, or still
    being written): its steps are read, and the pair is INCOMPLETE."""
    (file,) = runs["b"].glob("*.wandb")
    data = file.read_bytes()
    at = 7
    ends = []
    while at < len(data):  # the end of each whole record: a file killed between two
        left = BLOCK - at % BLOCK
        if left < 7:
            at += left
            continue
        at += 7 + int.from_bytes(data[at + 4 : at + 6], "little")
        ends.append(at)
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / file.name).write_bytes(data[: ends[len(ends) * 2 // 3]])
    loaded = load(killed)
    assert 0 < len(loaded.steps) < STEPS
    code, out = _compare(capsys, str(runs["a"]), str(killed))
    assert (code, out["verdict"]) == (3, "INCOMPLETE")
    assert any("no exit record" in note for note in out["accounts"]["b"]["notes"])


def test_read_explains_a_run_folder(runs: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    assert main(["read", str(runs["a"])]) == 0
    out = capsys.readouterr().out
    assert "W&B run" in out and "step: _step" in out
    assert "_runtime" in out and "_timestamp" in out and "train/loss" in out


def test_replay_and_export_take_a_run_folder(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["replay", "--headless", "--json", str(runs["a"]), str(runs["c"])])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 120)
    target = tmp_path / "ac.csv"
    assert main(["export", str(runs["a"]), str(runs["c"]), "-o", str(target)]) == 0
    rows = target.read_text().splitlines()
    assert "train/loss.a" in rows[0] and len(rows) == STEPS + 1


def test_without_wandb_one_line_and_exit_2(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tuimon.readers.wandb_run as wandb_run

    monkeypatch.setattr(wandb_run, "_RECORD", None)
    monkeypatch.setitem(sys.modules, "wandb.proto", None)  # import wandb.proto fails
    monkeypatch.setitem(sys.modules, "wandb.proto.wandb_internal_pb2", None)
    assert main(["read", str(runs["a"])]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert "needs wandb" in line and ".[wandb]" in line


def test_a_saved_pair_of_two_runs_replays_identical(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The saved pair holds each run's records as step-log lines: W&B writes a row's items in
    any order, and the lines of two runs of one seed must not differ by it."""
    store = tmp_path / "store"
    assert main(["compare", str(runs["a"]), str(runs["b"]), "--save", "--store", str(store)]) == 0
    capsys.readouterr()
    (pair,) = [p for p in store.iterdir() if p.is_dir()]
    code = main(["replay", "--headless", "--json", str(pair)])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, out["verdict"]) == (0, "IDENTICAL")


def test_media_and_tables_are_named_not_judged(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = load(runs["m"])
    steps = {s.step: s for s in loaded.steps}
    assert len(steps) == STEPS
    assert math.isnan(steps[100].metrics["gap"]) and "gap" not in steps[101].metrics
    assert not any(name.startswith(("sample", "table")) for name in steps[100].metrics)
    assert {"sample.size", "table.nrows"} <= set(steps[100].clocks)
    notes = [r.text for r in loaded.records if isinstance(r, Text) and "media" in r.text]
    assert "sample (image-file)" in notes[0] and "table (table-file)" in notes[0]
    code, out = _compare(capsys, str(runs["a"]), str(runs["m"]))
    # the NaN one run logged is a value on one side only: a difference, named (issue 40)
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 0)
    assert out["first_divergent_metrics"] == out["first_one_sided"] == ["gap"]
    assert out["metrics_only_b"] == ["gap"] and out["values_one_sided"] == 3
    code, out = _compare(capsys, str(runs["a"]), str(runs["m"]), "--ignore", "gap")
    assert (code, out["verdict"]) == (0, "IDENTICAL")  # the media: not judged


def test_a_run_resumed_reads_as_one_run_from_its_wandb_folder(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """W&B gives a resumption a folder of its own (`offline-run-<time>-<id>`): the wandb/
    folder of one run id reads its parts in order, as one run, against an unbroken run."""
    assert len(list(runs["r"].glob("offline-run-*"))) == 2
    loaded = load(runs["r"])
    assert [s.step for s in loaded.steps] == list(range(STEPS))
    header = loaded.records[0]
    assert isinstance(header, Header) and header.run["resumed"] is True
    code, out = _compare(capsys, str(runs["a"]), str(runs["r"]))
    assert (code, out["verdict"]) == (0, "IDENTICAL")
