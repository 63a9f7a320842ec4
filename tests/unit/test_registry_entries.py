"""One test over every entry of the registry of formats (issue 38), as harlequin's shared
adapter tests run over every adapter: each entry names a writer of a small sample of its shape
(`SAMPLES`, written here, never real data). A sample gives records; it is read as that entry;
for a format of lines, the live path (`LineParser` fed line by line, and the one follower of a
growing file) gives the records the saved path (`readers.load`) gives, each line read by a rule
of that entry; and `Format.streams` is what happens: a streaming entry is followed and read a
block at a time, a non-streaming one is refused by the follower and read whole."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

import tuimon.readers as readers
from tuimon.engine.launch.follower import Follower, FollowError, NotLines, RunFollower
from tuimon.readers import FORMATS, LineParser, head_format, load, read_blocks, streamable
from tuimon.readers.entry import Format
from tuimon.steplog import Record, dumps

STEPS = 40
"""Steps a sample holds: enough bytes for several blocks when a block is small."""


def _loss(step: int) -> float:
    return 1.0 / (step + 1) + step * 1e-7


_WANDB = """
import sys, wandb
run = wandb.init(project="tuimon", dir=sys.argv[1], settings=wandb.Settings(console="off"))
for step in range(int(sys.argv[2])):
    run.log({"train/loss": 1.0 / (step + 1) + step * 1e-7}, step=step)
run.finish()
"""
_WANDB_RUNS: dict[str, Path] = {}
"""The W&B sample, written once per session by the real wandb (a process of its own)."""


def _wandb(path: Path) -> Path:
    pytest.importorskip("wandb")
    if "run" not in _WANDB_RUNS:
        out = Path(tempfile.mkdtemp(prefix="tuimon-wandb-sample-"))
        atexit.register(shutil.rmtree, out, True)
        env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
        subprocess.run([sys.executable, "-c", _WANDB, str(out), str(STEPS)],
                       env=env, check=True, timeout=120, capture_output=True)  # fmt: skip
        (_WANDB_RUNS["run"],) = (out / "wandb").glob("offline-run-*")
    shutil.copytree(_WANDB_RUNS["run"], path / "run")
    return path / "run"


def _tensorboard(path: Path) -> Path:
    writer_mod = pytest.importorskip("tensorboard.summary")
    writer = writer_mod.Writer(str(path / "run"))
    for step in range(STEPS):
        writer.add_scalar("train/loss", _loss(step), step)
    writer.close()
    return path / "run"


def _mlflow(path: Path) -> Path:
    metrics = path / "run" / "metrics"
    metrics.mkdir(parents=True)
    rows = [f"{1700000000000 + step} {_loss(step)!r} {step}" for step in range(STEPS)]
    (metrics / "loss").write_text("\n".join(rows) + "\n")
    return path / "run"


def _json_files(path: Path) -> Path:
    folder = path / "run"
    folder.mkdir()
    for epoch in range(STEPS):
        (folder / f"metrics_epoch_{epoch}.json").write_text(json.dumps({"loss": _loss(epoch)}))
    return folder


def _trainer_state(path: Path) -> Path:
    rows = [{"step": step, "loss": _loss(step)} for step in range(1, STEPS)]
    return _write(path / "trainer_state.json", json.dumps({"log_history": rows}, indent=2))


def _sacred(path: Path) -> Path:
    doc = {
        "loss": {
            "steps": list(range(STEPS)),
            "values": [_loss(s) for s in range(STEPS)],
            "timestamps": [f"2024-01-01T00:00:{s % 60:02d}" for s in range(STEPS)],
        }
    }
    return _write(path / "metrics.json", json.dumps(doc, indent=2))


def _document(path: Path) -> Path:
    rows = [{"iteration": step, "loss": _loss(step)} for step in range(STEPS)]
    return _write(path / "metrics.json", json.dumps(rows, indent=1))


def _csv(path: Path) -> Path:
    rows = [f"{step},{_loss(step)!r}" for step in range(STEPS)]
    return _write(path / "metrics.csv", "step,loss\n" + "\n".join(rows) + "\n")


def _steplog(path: Path) -> Path:
    lines = [dumps({"type": "header", "format": "tuimon.steplog/1", "run": {}, "env": {}})]
    lines += [dumps({"type": "step", "step": s, "t": s * 0.5, "train_loss": _loss(s)})
              for s in range(STEPS)]  # fmt: skip
    lines.append(dumps({"type": "end", "status": "ok", "steps": STEPS, "wall_s": 1.0}))
    return _write(path / "run.log", b"".join(lines).decode())


def _json_lines(path: Path) -> Path:
    rows = [json.dumps({"_step": s, "loss": _loss(s), "_runtime": s * 0.5}) for s in range(STEPS)]
    return _write(path / "history.jsonl", "\n".join(rows) + "\n")


def _table(path: Path) -> Path:
    rows = [f"{step:<8}{_loss(step)!r:<24}{step * 0.01:.4f}" for step in range(STEPS)]
    return _write(path / "progress.txt", "Epoch   AverageLoss             Acc\n" + "\n".join(rows))


def _text(path: Path) -> Path:
    rows = [f"iter {step}: loss {_loss(step):.6f}, time 12.{step:02d}ms" for step in range(STEPS)]
    return _write(path / "train.log", "starting\n" + "\n".join(rows) + "\ndone\n")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


SAMPLES: dict[str, Callable[[Path], Path]] = {
    "W&B run": _wandb,
    "tensorboard": _tensorboard,
    "MLflow run": _mlflow,
    "JSON files": _json_files,
    "trainer_state.json": _trainer_state,
    "sacred metrics.json": _sacred,
    "JSON document": _document,
    "CSV": _csv,
    "tuimon step log": _steplog,
    "JSON Lines": _json_lines,
    "table": _table,
    "text": _text,
}
"""Each registry entry's sample writer, by the entry's name."""


def test_every_entry_names_a_sample() -> None:
    assert list(SAMPLES) == [entry.name for entry in FORMATS]


@pytest.fixture(params=FORMATS, ids=lambda entry: entry.name)
def entry(request: pytest.FixtureRequest) -> Format:
    return request.param  # type: ignore[no-any-return]


def _live(path: Path) -> tuple[list[Record], LineParser]:
    """A log of lines as a live stream is read: one line at a time."""
    parser = LineParser()
    records: list[Record] = []
    for line in path.read_bytes().splitlines(keepends=True):
        if line.strip():  # blank lines left out, as a saved log's are
            records += parser.feed([line])
    return records + parser.close(), parser


def _followed(path: Path) -> list[Record]:
    """A log of lines as the one follower of a growing file reads it (`watch`, `--log-file`)."""
    follower = Follower(path)
    parser = LineParser()
    records: list[Record] = []
    while lines := follower.read():
        records += parser.feed([line for line in lines if line.strip()])
    lines = follower.close()
    return records + parser.feed([line for line in lines if line.strip()]) + parser.close()


def test_a_sample_gives_records_read_as_its_entry(entry: Format, tmp_path: Path) -> None:
    loaded = load(SAMPLES[entry.name](tmp_path))
    assert loaded.format == entry.name
    assert len(loaded.steps) >= STEPS - 1
    assert all(step.metrics for step in loaded.steps)


def test_live_and_saved_give_the_same_records(entry: Format, tmp_path: Path) -> None:
    if not entry.lines:
        pytest.skip(f"{entry.name} is read whole, never as a stream of lines")
    path = SAMPLES[entry.name](tmp_path)
    saved = load(path)
    live, parser = _live(path)
    assert live == saved.records
    assert _followed(path) == saved.records
    assert parser.format is entry  # the format that read it is known, not guessed
    rules = {rule.name for rule in entry.lines}
    assert parser.read_by() and set(parser.read_by()) <= rules
    assert saved.rules == parser.read_by()


def test_streams_is_what_happens(
    entry: Format, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = SAMPLES[entry.name](tmp_path)
    whole = load(path).records
    monkeypatch.setattr(readers, "BLOCK", 256)  # a sample of a few kB is many blocks
    blocks = read_blocks(path)
    if entry.records:  # a W&B run: a block at a time and followed, by its records
        assert blocks is not None and not entry.streams
        got = [r for block in blocks for r in block]
        assert got == whole
        follower = RunFollower(path)
        followed = [*follower.read(), *follower.close()]
        assert followed == whole
        return
    if path.is_dir():
        assert not entry.streams
        assert blocks is None  # read whole
        with pytest.raises(FollowError):
            Follower(path).read()
        return
    head = path.read_bytes()[:65536]
    told = head_format(head)  # the entry that reads it, as a growing file is told
    assert told is not None and told.streams is entry.streams
    if entry.head is not None or entry.lines:  # a trainer_state is a document to its head
        assert told is entry
    assert streamable(head) is entry.streams
    if entry.streams:
        assert blocks is not None
        got = list(blocks)
        assert sum(1 for block in got if block) > 1  # read incrementally
        assert [r for block in got for r in block] == whole
        assert Follower(path).read()  # followed line by line
    else:
        assert blocks is None  # read whole
        with pytest.raises(NotLines):
            Follower(path).read()
