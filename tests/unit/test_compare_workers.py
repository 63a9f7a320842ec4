"""`compare` of large logs (issue 32): two worker processes read the two logs at once, and the
verdict is the one a single process gives, block for block; the first divergent step's line
is found in the block that held it, as `tuimon.readers.locate` finds it by reading the log."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from tuimon.engine.analyses import compare as engine_compare
from tuimon.readers import Reading, locate
from tuimon.store import SavedLogs


def judged(a: Path, b: Path, workers: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(engine_compare, "CHUNK", 700)  # many blocks, a few rows each
    monkeypatch.setattr(engine_compare, "WORKERS_FROM", 0 if workers else 1 << 60)
    monkeypatch.setattr(engine_compare, "_workers", _forced if workers else _never)
    try:
        got = engine_compare.judge(SavedLogs(a, b, reading=Reading()), 0.0)
    except engine_compare.CompareError as exc:
        return {"error": str(exc)}
    return {
        "summary": got.summary.to_dict(),
        "logs": [(log.steps, log.texts, log.first_text, log.native) for log in got.logs],
    }


def _forced(logs: SavedLogs, keep: bool) -> bool:
    return not keep


def _never(logs: SavedLogs, keep: bool) -> bool:
    return False


def step_log(path: Path, n: int, seed: int, *, plain: bool, odd: bool, part: int | None) -> Path:
    """A step log (or plain JSON Lines) of `n` steps; `odd`: text lines, rows of other keys,
    an integer beyond 64 bits, a step that goes back, a cut last line."""
    rng = random.Random(seed)
    out = []
    if not plain:
        head = {"type": "header", "format": "tuimon.steplog/1", "run": {}, "hyper": {}, "env": {}}
        out.append(orjson.dumps(head))
    step = 0
    for i in range(n):
        row: dict[str, Any] = {} if plain else {"type": "step"}
        row["step"] = step
        rng2 = random.Random(step)
        row |= {"loss": rng2.random(), "lr": 1e-3, "param_digest": f"{step:032x}"}
        if part is not None and step >= part:
            row["loss"] += 1e-9
        if odd and rng.random() < 0.05:
            row["eval_loss"] = rng.random()
        if odd and rng.random() < 0.01:
            out.append(b"epoch done, loss 0.5 after %d" % step)
        line = orjson.dumps(row)
        if odd and i == n // 3:
            line = line.replace(b'"lr":0.001', b'"lr":%d' % 2**70)
        out.append(line)
        step += 1 if not (odd and i == n // 2) else -5
    if not plain:
        out.append(orjson.dumps({"type": "end", "status": "ok", "steps": n, "wall_s": 1.0}))
    data = b"\n".join(out) + b"\n"
    if odd:
        data = data[:-20]  # cut short
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("odd", [False, True])
@pytest.mark.parametrize("compressed", [False, True])
def test_workers_judge_as_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain: bool, odd: bool, compressed: bool
) -> None:
    a = step_log(tmp_path / "a.jsonl", 400, 1, plain=plain, odd=odd, part=None)
    b = step_log(tmp_path / "b.jsonl", 380, 2, plain=plain, odd=odd, part=250)
    if compressed:
        for p in (a, b):
            p.with_name(p.name + ".gz").write_bytes(gzip.compress(p.read_bytes()))
        a, b = a.with_name(a.name + ".gz"), b.with_name(b.name + ".gz")
    one = judged(a, b, False, monkeypatch)
    two = judged(a, b, True, monkeypatch)
    assert one == two
    assert "error" not in one
    lines = one["summary"]["first_divergent_lines"]
    step = one["summary"]["first_divergent_step"]
    if not compressed and lines and step is not None and not odd:
        assert lines == {s: locate(p, Reading(), s, step=step) for s, p in (("a", a), ("b", b))}


def test_a_cut_compressed_log_is_one_line_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = step_log(tmp_path / "a.jsonl", 300, 1, plain=False, odd=False, part=None)
    b = tmp_path / "b.jsonl.gz"
    b.write_bytes(gzip.compress(a.read_bytes())[:-40])
    one, two = (judged(a, b, w, monkeypatch) for w in (False, True))
    assert one == two
    assert "cannot decompress" in one["error"]
