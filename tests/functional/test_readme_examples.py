"""The worked examples of README's "Use with your script", run as they are written."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from tuimon.cli import main
from tuimon.readers import LineParser, Reading
from tuimon.steplog import Step

README = ROOT / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Use with your script")
    return text[start : text.index("\n## ", start + 1)]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", section(), re.S)


def run_pair(tmp_path: Path, capsys, script: str, *extra: str) -> tuple[int, dict, dict]:
    path = tmp_path / "train.py"
    path.write_text(script)
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), *extra, "--"]
    code = main([*argv, sys.executable, str(path), "{seed}"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return code, out, json.loads((Path(out["pair"]) / "pair.json").read_text())


def test_the_minimum_one_print_line(tmp_path: Path, capsys) -> None:
    minimum = python_blocks()[0]
    assert "print(json.dumps(" in minimum
    code, out, meta = run_pair(tmp_path, capsys, minimum)
    assert code == 0 and out["verdict"] == "IDENTICAL" and out["steps_compared"] == 20
    assert meta["applied"]["a"]["known"] is False  # it does not say what it applied


def test_the_helpers_report_what_they_applied(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    helpers = python_blocks()[1]
    assert "apply_pair_settings" in helpers and "model_digests" in helpers
    code, out, meta = run_pair(tmp_path, capsys, helpers, "--deterministic", "--threads", "1")
    assert code == 0 and out["verdict"] == "IDENTICAL" and out["steps_compared"] == 20
    assert meta["deterministic"] is True and meta["deterministic_asked"] is True
    assert meta["applied"]["a"]["known"] and meta["applied"]["a"]["threads"] == 1
    assert meta["applied"]["b"]["seed"] == 0
    aligned = (Path(out["pair"]) / "aligned.jsonl").read_text().splitlines()
    assert json.loads(aligned[0])["digest_equal"] is True


def test_the_pattern_example_and_the_printed_shapes() -> None:
    text = section()
    (pattern,) = re.findall(r"--pattern '([^']+)'", text)
    parser = LineParser(Reading(patterns=(pattern,)))
    (step,) = parser.feed([b"it 3 | L=0.5\n"]) + parser.close()
    assert step == Step(3, {"loss": 0.5})
    block = text[text.index("**Printed text works too.**") :].split("```")[1]
    shapes = [s.strip() for line in block.splitlines() for s in re.split(r"\s{3,}", line)]
    shapes = [s for s in shapes if s]
    assert len(shapes) == 6
    for shape in shapes:
        parser = LineParser()
        got = parser.feed([shape.encode() + b"\n"]) + parser.close()
        assert len(got) == 1 and isinstance(got[0], Step), shape
