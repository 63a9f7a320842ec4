"""Helpers shared by the tests: waiting on an app, float bits, processes, what an import loads."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

TESTS = Path(__file__).resolve().parent
"""tests/: the shared fake trainers and launchers live here."""
ROOT = TESTS.parent
"""The repository root."""
FAKE_TRAINER = str(TESTS / "fake_trainer.py")
"""A fake training script (prints tuimon JSONL, misbehaves on request)."""


def pair_json(folder: Path) -> dict[str, Any]:
    """A saved pair's pair.json as written (the raw JSON, not read through `PairDoc`)."""
    return json.loads((folder / "pair.json").read_text())


async def wait_for(pilot: Pilot, ready: Callable[[], bool], timeout: float = 15.0) -> None:
    """Let the app run until `ready()` holds; fail when it does not within `timeout` s."""
    for _ in range(int(timeout / 0.05)):
        if ready():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app did not get there in time")


def wait_until(ready: Callable[[], bool], within: float = 60.0) -> None:
    """Poll `ready()` until it holds; fail when it does not within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.05)
    raise AssertionError("not there in time")


def raw_lines(store: Path, side: str) -> list[bytes]:
    """The raw lines of `side` on disk in the (first) pair of `store` ([] before there is one)."""
    logs = list(store.glob(f"*/{side}.jsonl"))
    return logs[0].read_bytes().splitlines() if logs else []


def wait_for_raw_lines(store: Path, side: str, count: int = 20) -> None:
    """Until a pair in `store` has more than `count` raw lines of `side` on disk (30 s at most)."""
    wait_until(lambda: len(raw_lines(store, side)) > count, within=30)


def bits(x: float) -> int:
    """The 64-bit pattern of a float64."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    """The float64 of a 64-bit pattern."""
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def same_float(x: float, y: float) -> bool:
    """Bitwise the same float64 (any NaN matches any NaN)."""
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return bits(x) == bits(y)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def heavy_modules_after(
    code: str, *argv: str, heavy: tuple[str, ...] = ("textual", "torch")
) -> str:
    """Run `code` in a fresh Python and return which of `heavy` it loaded, as `LOADED [...]`.

    `code` may set `exit_code`; the probe exits with it. stdout/stderr are checked by the caller
    through the returned text (the last stdout line) and AssertionError on a failed run.
    """
    probe = (
        "import sys\n"
        "exit_code = 0\n"
        f"{code}\n"
        f"print('LOADED', [m for m in {heavy!r} if m in sys.modules])\n"
        "sys.exit(exit_code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def twin(path: Path) -> Path:
    """A copy of a log (a file or a run folder) beside it: a log against its twin is a log
    compared with itself (the same path twice is refused, exit 2)."""
    import shutil

    copy = path.with_name(path.name + ".twin")
    if path.is_dir():
        shutil.copytree(path, copy, dirs_exist_ok=True)
    else:
        shutil.copyfile(path, copy)
    return copy


REPLAYED = r"""
import asyncio, hashlib, json, os, sys
from tuimon.engine.sources.read_ahead import read_ahead, resolved_blocks
from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs

paths, use = sys.argv[1:-1], sys.argv[-1] == "ahead"
ahead = read_ahead(lambda: resolved_blocks(paths, None)) if use else None
assert (ahead is not None) == use
rows = []

def on_batch(batch):
    rows.extend(row.to_dict() for row in batch.aligned)

session = replay_session(
    resolve_logs(paths), speed=1e9, on_batch=on_batch, stream=True, ahead=ahead
)
summary = asyncio.run(session.run())
children = [
    int(pid)
    for task in os.listdir("/proc/self/task")
    for pid in open(f"/proc/self/task/{task}/children").read().split()
]
print(json.dumps({
    "verdict": summary.verdict,
    "first": summary.first_divergent_step,
    "rows": len(rows),
    "digest": hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest(),
    "children": children,
}))
"""


def replayed_rows(paths: list[Path], *, ahead: bool) -> dict[str, Any]:
    """What the view's streamed replay of `paths` gives (in a fresh interpreter, where a fork
    is safe): its verdict, first divergent step, aligned rows (count, digest) and the child
    processes left once it ended. `ahead`: the logs read by a forked child (`read_ahead`)."""
    done = subprocess.run(
        [sys.executable, "-c", REPLAYED, *map(str, paths), "ahead" if ahead else "here"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result
