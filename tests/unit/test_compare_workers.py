"""`compare` of large logs (issue 32): two worker processes read the two logs at once, and the
verdict is the one a single process gives, block for block; the first divergent step's line
is found in the block that held it, as `tuimon.readers.locate` finds it by reading the log."""

from __future__ import annotations

import gzip
import json
import pickle
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.analyses import compare as engine_compare
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.block_reader import BlockReader, SideLog
from tuimon.engine.sources import log_blocks
from tuimon.readers import Reading, locate
from tuimon.store import SavedLogs


def judged(a: Path, b: Path, workers: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(log_blocks, "CHUNK", 700)  # many blocks, a few rows each
    monkeypatch.setattr(log_blocks, "WORKERS_FROM", 0 if workers else 1 << 60)
    monkeypatch.setattr(log_blocks, "_workers", _forced if workers else _never)
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


_ODD_VALUES = [
    0,
    7,
    -(2**53) + 1,
    2**53,
    2**53 + 1,
    2**70,
    1e300,
    -0.0,
    True,
    None,
    "1.5",
    "a\nb",
    [1],
]
_MUTATIONS = ["value", "extra key", "missing key", "key order", "repeat key", "text", "blank"]


@st.composite
def odd_lines(draw: st.DrawFn, plain: bool) -> list[bytes]:
    """Uniform step rows with a few lines made odd: any value a metric, the step or a digest
    may hold, keys added, dropped, reordered or repeated, text and blank lines, steps that
    do not rise, rows of another type."""
    n = draw(st.integers(1, 60))
    out = []
    for i in range(n):
        row: dict[str, Any] = {} if plain else {"type": "step"}
        row |= {"step": i, "loss": 1.0 + i / 7, "acc": i, "t": 0.5 * i, "param_digest": f"{i:x}"}
        line = json.dumps(row, separators=(",", ":")).encode()
        if draw(st.integers(0, 9)) == 0:
            how = draw(st.sampled_from(_MUTATIONS))
            name = draw(st.sampled_from(sorted(row)))
            if how == "value":
                row[name] = draw(st.sampled_from(_ODD_VALUES))
            elif how == "extra key":
                row["eval_loss"] = 0.25
            elif how == "missing key":
                del row[name]
            elif how == "key order":
                row = dict(reversed(row.items()))
            line = json.dumps(row, separators=(",", ":")).encode()
            if how == "repeat key":
                line = line[:-1] + b',"loss":2.5}'
            elif how == "text":
                line = b"epoch %d done" % i
            elif how == "blank":
                line = b""
        out.append(line + b"\n")
    return out


def prepared(lines: list[bytes], cuts: list[int], plain: bool, typed: bool) -> list[Any]:
    """Each block's `Prepared` as plain data, read by a side's `BlockReader` in turn."""
    log = SideLog(Path("a.jsonl"), plain_key="step" if plain else None)
    aligner = PairAligner(0.0)
    reader = BlockReader("a", log, aligner, False, Reading())
    out = []
    for start, stop in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        if not typed:
            reader.shape = None
        got = reader.prepare(lines[start:stop], log.plain_key, whole=True)
        if typed:  # and sent as a worker sends it
            got = pickle.loads(pickle.dumps(got))
        args = got.args
        if args is not None:
            step, values, ignored, digest, digests = args
            args = (step.tolist(), [(k, v.tobytes()) for k, v in values.items()], ignored, digest)
            args += (digests,)
        out.append((args, got.first, got.final, got.slow, got.rows, got.count, got.size))
    return out


@pytest.mark.parametrize("plain", [False, True])
@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_typed_rows_read_as_the_parsed_rows(plain: bool, data: st.DataObject) -> None:
    """A block read by its shape (msgspec, typed rows) and sent by a worker gives what
    orjson's rows give, to the bit, whatever the lines hold."""
    lines = data.draw(odd_lines(plain))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(len(lines) - 1, 1)), max_size=6))))
    cuts = [c for c in cuts if c < len(lines)]
    assert prepared(lines, cuts, plain, True) == prepared(lines, cuts, plain, False)


def _twins(a: list[bytes], tail: list[bytes], cut: int, how: str) -> tuple[bytes, bytes]:
    """Two logs that share their first bytes: b is a up to `cut` lines, then its own lines
    (`tail`), or a cut at a byte, or a with more lines, or a itself."""
    data = b"".join(a)
    if how == "own tail":
        return data, b"".join(a[:cut] + tail)
    if how == "cut at a byte":
        return data, data[: len(b"".join(a[:cut])) + 3]
    if how == "longer":
        return data, data + b"".join(tail)
    return data, data


@pytest.mark.parametrize("plain", [False, True])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_logs_that_share_their_first_blocks_judge_as_one_process(
    plain: bool, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Side b's worker passes over the blocks it shares with side a (`_SAME`): the verdict,
    counts and first divergent lines are those of one process reading every line, wherever
    the logs part (within a block, at its end, at a cut line, never) and whatever they hold."""
    a = data.draw(odd_lines(plain))
    tail = data.draw(odd_lines(plain))
    cut = data.draw(st.integers(0, len(a)))
    how = data.draw(st.sampled_from(["own tail", "cut at a byte", "longer", "same"]))
    head = b""
    if not plain:
        head = b'{"type":"header","format":"tuimon.steplog/1","run":{},"hyper":{},"env":{}}\n'
    x, y = _twins(a, tail, cut, how)
    folder = tmp_path_factory.mktemp("twins")
    pa, pb = folder / "a.jsonl", folder / "b.jsonl"
    pa.write_bytes(head + x)
    pb.write_bytes(head.replace(b"{}}", b'{"host":"other"}}') + y)  # headers of their own
    with pytest.MonkeyPatch.context() as mp:
        one, two = (judged(pa, pb, w, mp) for w in (False, True))
    assert one == two


def test_the_shared_blocks_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two logs equal for their first 300 steps: side b's worker prepares only the blocks
    after the one where they part (and none for a copy of side a)."""
    a = step_log(tmp_path / "a.jsonl", 600, 1, plain=True, odd=False, part=None)
    b = step_log(tmp_path / "b.jsonl", 600, 1, plain=True, odd=False, part=300)
    calls = tmp_path / "calls"
    prepare = BlockReader.prepare

    def counted(self: Any, lines: list[bytes], key: str | None, *, whole: bool) -> Any:
        with calls.open("a") as fh:  # written by the worker processes
            fh.write(self.side)
        return prepare(self, lines, key, whole=whole)

    monkeypatch.setattr(BlockReader, "prepare", counted)
    got = judged(a, b, True, monkeypatch)
    assert got["summary"]["first_divergent_step"] == 300
    sides = calls.read_text()
    assert sides.count("b") < sides.count("a") / 2 + 2
    calls.unlink()
    copy = tmp_path / "c.jsonl"
    copy.write_bytes(a.read_bytes())
    assert judged(a, copy, True, monkeypatch)["summary"]["verdict"] == "IDENTICAL"
    assert "b" not in calls.read_text()


def test_side_a_is_read_beside_only_when_plain_and_readable(tmp_path: Path) -> None:
    """Side b's worker reads side a's log beside its own only when it is a plain file it can
    open (past its header line for a step log); else it reads every block, and side a's own
    reader tells what is wrong with side a."""
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(b'{"type":"header"}\n{"type":"step","step":0}\n')
    fh = log_blocks._beside(plain, header=True)
    assert fh is not None and fh.read() == b'{"type":"step","step":0}\n'
    fh.close()
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert log_blocks._beside(packed, header=True) is None
    assert log_blocks._beside(tmp_path / "gone.jsonl", header=False) is None
    assert log_blocks._beside(None, header=False) is None
