"""`tuimon read` reads a log of rows with compare's block readers (`log_blocks.read_one`), not
record by record: what it says is what the readers' `load` says, byte for byte, and a log
those readers do not read whole as rows (text in it, a name its first lines lack, a CSV) is
loaded as before."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from tuimon.engine.sources.log_blocks import CHUNK, read_one
from tuimon.readers import Reading
from tuimon.readers.readout import describe


def _rows(n: int, *, header: bool = False) -> list[bytes]:
    out = []
    if header:
        head = {"type": "header", "format": "tuimon.steplog/1", "run": {}, "hyper": {}, "env": {}}
        out.append(orjson.dumps(head) + b"\n")
    for s in range(n):
        row = {"step": s, "t": 0.01 * s, "loss": 1 / (s + 1), "acc": s % 7, "lr": 1e-3}
        if header:
            row = {"type": "step", **row}
        out.append(orjson.dumps(row) + b"\n")
    return out


def _logs(folder: Path) -> dict[str, tuple[Path, bool]]:
    """Logs of at least a block, and whether the block readers read each."""
    plain, native = _rows(20_000), _rows(20_000, header=True)
    assert sum(map(len, plain)) > CHUNK  # two blocks
    made = {
        "plain": (plain, True),
        "steplog": (native, True),
        "repeats": (plain + plain, True),
        "text": ([*plain[:16_000], b"hello\n", *plain[16_000:]], False),
        "late name": ([*plain, b'{"step": 20000, "extra": 1.5}\n'], False),
    }
    out = {}
    for name, (lines, fast) in made.items():
        path = folder / f"{name.replace(' ', '_')}.jsonl"
        path.write_bytes(b"".join(lines))
        out[name] = (path, fast)
    gz = folder / "plain.jsonl.gz"
    gz.write_bytes(gzip.compress(b"".join(plain), compresslevel=1))
    out["gzip"] = (gz, True)
    return out


@pytest.mark.parametrize("step_key", [None, "step"])
def test_read_of_a_log_of_rows_says_what_load_says(tmp_path, step_key):
    reading = Reading(step_key=step_key)
    for name, (path, fast) in _logs(tmp_path).items():
        assert (read_one(path, reading) is not None) == fast, name
        assert orjson.dumps(describe(path, reading, read_one)) == orjson.dumps(
            describe(path, reading)
        ), name
