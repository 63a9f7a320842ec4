"""Fail fast: a sweep whose first pair fails before its first step stops, says why once, and
leaves one failed pair; pairs that fail later, or differently, do not stop a sweep."""

from __future__ import annotations

import json
import sys

from helpers import FAKE_TRAINER

from tuimon.cli import main
from tuimon.engine.runs.fail_fast import SAME_ERRORS, FailFast

BROKEN = "sh -c 'echo \"launcher: error: no partition gpu\" >&2; exit 1' launcher"
"""A launcher that fails every job before it starts (as `srun -p gpu` where there is none)."""


def sweep(store, *more: str) -> list[str]:
    return ["sweep", "--seeds", "0-7", "--jobs", "8", "--headless", "--json", "--store",
            str(store), *more, "--", sys.executable, FAKE_TRAINER, "--side", "{side}",
            "--steps", "3"]  # fmt: skip


def test_first_pair_failing_before_its_first_step_stops_the_sweep(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(sweep(store, "--launch-b", BROKEN)) == 3
    out = capsys.readouterr().out
    rec = json.loads(out.strip().splitlines()[-1])
    assert [j["status"] for j in rec["jobs"]] == ["failed"] + ["pending"] * 7
    assert rec["stopped"] == (
        "the first pair failed before the first step: run b: launcher: error: no partition gpu"
    )
    assert rec["never_ran"] == list(range(1, 8))
    pairs = [p for p in store.iterdir() if p.name != "sweeps"]
    assert len(pairs) == 1  # one failed pair, not eight


def test_no_fail_fast_runs_them_all(tmp_path, capsys):
    store = tmp_path / "store"
    argv = sweep(store, "--launch-b", BROKEN, "--no-fail-fast")
    argv[2] = "0-2"
    assert main(argv) == 3
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [j["status"] for j in rec["jobs"]] == ["failed"] * 3 and "stopped" not in rec


def test_the_table_says_why_once(tmp_path, capsys):
    argv = [a for a in sweep(tmp_path / "store", "--launch-b", BROKEN) if a != "--json"]
    assert main(argv) == 3
    out = capsys.readouterr().out
    assert out.count("no partition gpu") == 1 and "sweep stopped: the first pair" in out
    assert "`tuimon sweep --resume" in out


def test_later_pairs_stop_after_the_same_error_only():
    same = FailFast()
    assert not same.ended(None, alone=True)  # the first pair logged a step
    fresh = FailFast()
    results = [fresh.ended("run a: boom", alone=False) for _ in range(SAME_ERRORS)]
    assert results == [False] * (SAME_ERRORS - 1) + [True]
    assert (
        fresh.reason == f"the first {SAME_ERRORS} pairs failed before the first step: run a: boom"
    )
    mixed = FailFast()
    assert not mixed.ended("run a: boom", alone=False)
    assert not mixed.ended("run b: other", alone=False)
    assert not any(mixed.ended("run a: boom", alone=False) for _ in range(5))
