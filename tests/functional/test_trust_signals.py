"""SIGTERM, SIGINT and SIGHUP end a sweep as they end a pair (docs, "Exit codes"): the running
pairs stopped and saved as interrupted, the record never left "running", exit 3 (INCOMPLETE),
headless as in the TUI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, TESTS, wait_until

ROOT = TESTS.parent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_a_headless_sweep_saved_and_exit_3(tmp_path: Path, sig: int) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "sweep", "--seeds", "0-3", "--jobs", "2", "--headless",
         "--json", "--store", str(store), "--", sys.executable, FAKE_TRAINER, "--side", "{side}",
         "--steps", "100000", "--sleep", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: sum(f.stat().st_size for f in store.glob("*/a.jsonl")) > 2000, 60)
        start = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert took < 10  # the README's bound is 2 s (the runs' grace aside); generous here
    (record,) = (store / "sweeps").glob("*.json")
    jobs = json.loads(record.read_text())["jobs"]
    assert "running" not in {j["status"] for j in jobs}
    stopped = [j for j in jobs if j["status"] == "interrupted"]
    assert stopped and all(j["pair"] for j in stopped)
    for job in stopped:
        meta = json.loads((store / job["pair"] / "pair.json").read_text())
        assert meta["status"] == "interrupted"
    assert json.loads(out.decode().strip().splitlines()[-1])["jobs"]
