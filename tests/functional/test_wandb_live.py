"""W&B runs followed while they are written (issue 42): a real offline run (wandb, offline mode
needs no network) written by a script that stops half way until the test lets it go; the
followed source (`tuimon watch`'s, and the paired side's) gives the steps W&B has flushed
while the writer still runs, and the rest, the summary and the end when it finishes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tuimon.engine.events import Exited, Lines, SourceEvent
from tuimon.engine.sources.follow import FollowSource
from tuimon.steplog import End, Header, Step, Text

pytest.importorskip("wandb")

STEPS = 600
HALF = 400
"""Steps logged before the writer waits: W&B flushes its file 32 KiB at a time, and these
fill more than one block."""
DEADLINE = 90.0
WRITER = """
import os, sys, time
import wandb
out, go = sys.argv[1], sys.argv[2]
run = wandb.init(project="tuimon", dir=out, config={"seed": 0},
                 settings=wandb.Settings(console="off"))
for step in range(%(steps)d):
    if step == %(half)d:
        deadline = time.monotonic() + %(deadline)d
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.05)
    run.log({"train/loss": 1.0 / (step + 1), "lr": 1e-3, "acc": step / %(steps)d}, step=step)
run.summary["best"] = 0.5
run.finish()
"""


def _writer(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, go = tmp_path / "run", tmp_path / "go"
    out.mkdir()
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    script = WRITER % {"steps": STEPS, "half": HALF, "deadline": int(DEADLINE)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(out), str(go)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, out, go


async def _follow(out: Path, go: Path, proc: subprocess.Popen[bytes]) -> dict[str, object]:
    """Follow the run folder as both sides of a watch; once steps have come while the
    writer waits, let it go; gather every record until both sides end."""
    source = FollowSource((out, out), idle=0)
    queue: asyncio.Queue[SourceEvent] = asyncio.Queue()
    task = asyncio.create_task(source.run(queue))
    records: list[object] = []
    ended: list[Exited] = []
    early: list[int] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(ended) < 2:
            event = await asyncio.wait_for(queue.get(), max(0.1, deadline - time.monotonic()))
            if isinstance(event, Lines) and event.side == "a":
                assert event.records is not None
                assert len(event.lines) == len(event.records)  # each record its step-log line
                records += event.records
                if not go.exists() and any(isinstance(r, Step) for r in records):
                    early += [r.step for r in records if isinstance(r, Step)]
                    assert proc.poll() is None  # the writer waits: these came while it runs
                    go.touch()
            elif isinstance(event, Exited):
                ended.append(event)
    finally:
        await source.stop()
        await task
    return {"records": records, "early": early, "ended": ended}


def test_watch_follows_a_run_while_wandb_writes_it(tmp_path: Path) -> None:
    proc, out, go = _writer(tmp_path)
    try:
        got = asyncio.run(_follow(out, go, proc))
    finally:
        go.touch()
        proc.wait(timeout=DEADLINE)
    assert proc.returncode == 0
    early = got["early"]
    assert isinstance(early, list) and 0 < len(early) <= HALF and early[0] == 0
    records = got["records"]
    assert isinstance(records, list) and isinstance(records[0], Header)
    assert records[0].hyper == {"seed": 0}
    steps = [r.step for r in records if isinstance(r, Step)]
    assert steps == list(range(STEPS))
    assert {"train/loss", "lr", "acc"} == set(records[1].metrics)
    assert isinstance(records[-1], End) and records[-1].status == "ok"
    assert any(isinstance(r, Text) and "best=0.5" in r.text for r in records)
    ended = got["ended"]
    assert isinstance(ended, list) and {e.status for e in ended} == {"finished"}


SCRIPT = """
import sys
import wandb
seed, side = int(sys.argv[1]), sys.argv[2]
run = wandb.init(project="demo", mode="offline", config={"seed": seed},
                 settings=wandb.Settings(console="off"))
print("training", flush=True)
w = float(seed)
for step in range(60):
    w = w * 0.9 + 0.1
    if side == "b" and step == 40:
        w += 1e-12
    wandb.log({"train/loss": w * w, "w": w}, step=step)
run.finish()
"""


def test_pair_reads_a_scripts_offline_wandb_run_as_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that calls `wandb.init(mode="offline")` and prints no step: each side runs
    with its own WANDB_DIR in the pair's folder, and the run W&B writes there is its log."""
    import json

    from tuimon.cli import main

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a pair not saved: W&B's runs here
    monkeypatch.setenv("WANDB_SILENT", "true")
    store = tmp_path / "store"
    argv = ["pair", "--seed", "0", "--headless", "--json", "--store", str(store), "--"]
    code = main([*argv, sys.executable, str(script), "{seed}", "{side}"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 40)
    (pair,) = [p for p in store.iterdir() if p.is_dir()]
    assert list((pair / "wandb-a" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert main(["replay", "--headless", "--json", str(pair)]) == 1  # as saved: the same
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (again["verdict"], again["first_divergent_step"]) == ("DIVERGED", 40)
    against = next((pair / "wandb-b" / "wandb").glob("offline-run-*"))
    live = ["--", sys.executable, str(script), "{seed}", "a"]
    code = main(["pair", "--seed", "0", "--headless", "--json", "--no-save", "--against",
                 str(against), *live])  # fmt: skip
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", 40)
    assert main(["spread", str(against)]) == 2  # a run folder is one log, not a pair
    assert "one run's log" in capsys.readouterr().err
