"""Exit codes mean the same everywhere (docs/survival-and-trust.md): the verdict's 0/1/3, 2 for bad
usage or an unreadable input, in every subcommand, also when stdout or stderr is a pipe whose
reader has gone (`| head`): no traceback, no 141."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TESTS

from tuimon.cli import main

ROOT = TESTS.parent
SAMPLES = ROOT / "sample_logs"
SAME, APART = SAMPLES / "cpu-cpu-threads2", SAMPLES / "cpu-cpu-threads2-contiguous"
FAKE = str(TESTS / "fake_trainer.py")


def tuimon(args: list[str], closed: str | None = None) -> tuple[int, str]:
    """Run `tuimon ARGS` with `closed` ("stdout" or "stderr") a pipe nobody reads; the exit
    code and what stderr said (when it is not the closed one)."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    if closed:
        streams[closed] = w
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tuimon", *args], stdin=subprocess.DEVNULL, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, **streams,  # type: ignore[arg-type]
        )  # fmt: skip
    finally:
        os.close(w)
    return proc.returncode, (proc.stderr or b"").decode(errors="replace")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("inputs")
    arr = tmp / "w.npy"
    np.save(arr, np.ones((4, 6), dtype=np.float32))
    planted = tmp / "planted"
    shutil.copytree(APART, planted)
    doc = json.loads((planted / "pair.json").read_text())
    doc["commands"] = {s: ["sh", "-c", f"touch {tmp}/ran"] for s in "ab"}
    (planted / "pair.json").write_text(json.dumps(doc))
    return {"npy": str(arr), "planted": str(planted), "tmp": str(tmp)}


CASES = [
    ("compare IDENTICAL", ["compare", str(SAME)], 0),
    ("compare DIVERGED", ["compare", str(APART)], 1),
    ("compare --json DIVERGED", ["compare", "--json", str(APART)], 1),
    ("compare no such path", ["compare", "/no/such/pair"], 2),
    ("replay IDENTICAL", ["replay", "--headless", str(SAME)], 0),
    ("replay DIVERGED", ["replay", "--headless", str(APART)], 1),
    ("replay no such path", ["replay", "--headless", "/no/such/pair"], 2),
    ("emb-check equal", ["emb-check", "{npy}", "{npy}"], 0),
    ("emb-check missing", ["emb-check", "{npy}", "/no/such.npy"], 2),
    ("explain without a yes", ["explain", "{planted}"], 2),
    ("sweep no such record", ["sweep", "--resume", "nope", "--store", "{tmp}"], 2),
    ("sweep bad seeds", ["sweep", "--seeds", "x", "--store", "{tmp}"], 2),
    ("browse without a terminal", ["browse", "--store", "{tmp}"], 2),
    (
        "pair IDENTICAL",
        [
            "pair",
            "--headless",
            "--no-save",
            "--threads",
            "1",
            "--",
            sys.executable,
            FAKE,
            "--steps",
            "3",
            "--side",
            "{{side}}",
        ],
        0,
    ),
    ("pair bad usage", ["pair", "--devices", "cpu"], 2),
    ("help", ["compare", "--help"], 0),
]


def broken_pipe() -> io.TextIOWrapper:
    """A text stream into a pipe whose reader has gone: every write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return io.TextIOWrapper(os.fdopen(w, "wb"), write_through=True)


@pytest.mark.parametrize(("name", "args", "code"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_exit_code_with_a_closed_pipe(monkeypatch, inputs, name, args, code, closed):
    """In this process (quick): `main` with stdout or stderr a pipe nobody reads."""
    stream = broken_pipe()
    monkeypatch.setattr(sys, closed, stream)
    try:
        got = main([a.format(**inputs) for a in args])
    except SystemExit as exc:  # argparse's --help and usage errors
        got = exc.code
    finally:
        monkeypatch.undo()
        with contextlib.suppress(OSError):
            stream.close()
    assert got == code
    assert not Path(inputs["tmp"], "ran").exists()


@pytest.mark.parametrize(
    ("args", "closed", "code"),
    [
        (["compare", str(SAME)], "stdout", 0),
        (["replay", "--headless", str(APART)], "stderr", 1),
        (["compare", "/no/such/pair"], "stdout", 2),
    ],
)
def test_python_m_tuimon_into_a_closed_pipe(args, closed, code):
    """The whole program, final flush included: the same codes, no traceback."""
    got, err = tuimon(args, closed=closed)
    assert got == code, err
    assert "Traceback" not in err and "Exception ignored" not in err
