"""`-0` against `0` is judged one way in every format (issue 40): a JSON `-0` is read with its
sign, as a CSV cell or a printed `-0` is (-0.0, bitwise apart from 0.0): DIVERGED at tolerance
0, CLOSE within a tolerance, in JSON Lines (read line by line, live, or a block at a time by
compare), CSV and text alike (JSON Lines said IDENTICAL within a tolerance where the others
said CLOSE)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tuimon.cli import main
from tuimon.engine.sources import log_blocks
from tuimon.readers.line_formats import loads
from tuimon.steplog import Step, parse_line, signed_zero


def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *argv])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _negative(value: float) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0


def test_json_minus_zero_keeps_its_sign() -> None:
    assert signed_zero(b'{"step":1,"n":[-0]}')
    for line in (b'{"step": 1, "n": -0}', b'{"step":1,"n":-0}', b'{"step": 1, "n":\t-0 }'):
        assert signed_zero(line)
        record = parse_line(line + b"\n")
        assert isinstance(record, Step) and _negative(record.metrics["n"])
    assert _negative(loads(b'{"n": -0}')["n"])
    step = parse_line(b'{"step": -0, "n": 1}\n')  # a step of -0 is step 0
    assert isinstance(step, Step) and step.step == 0
    for line in (b'{"n": -0.5, "m": 1e-05}', b'{"layer-0": 1}', b'{"n": -0.0}'):
        assert not signed_zero(line)


@pytest.mark.parametrize("rows", [3, 3000])  # a block at a time (compare) as line by line
def test_one_way_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    monkeypatch.setattr(log_blocks, "CHUNK", 4096)  # many blocks
    at = rows // 2
    for side, zero in (("a", "0"), ("b", "-0")):
        body = [(s, zero if s == at else "0") for s in range(rows)]
        (tmp_path / f"{side}.jsonl").write_text(
            "".join(f'{{"step": {s}, "loss": 1.5, "n": {n}}}\n' for s, n in body)
        )
        (tmp_path / f"{side}.csv").write_text(
            "step,loss,n\n" + "".join(f"{s},1.5,{n}\n" for s, n in body)
        )
        (tmp_path / f"{side}.log").write_text(
            "".join(f"step {s} loss 1.5 n {n}\n" for s, n in body)
        )
    for ext in ("jsonl", "csv", "log"):
        a, b = str(tmp_path / f"a.{ext}"), str(tmp_path / f"b.{ext}")
        code, out = _compare(capsys, a, b)
        assert (code, out["verdict"], out["first_divergent_step"]) == (1, "DIVERGED", at), ext
        code, out = _compare(capsys, a, b, "--tolerance", "1e-3")
        assert (code, out["verdict"], out["first_divergent_step"]) == (0, "CLOSE", at), ext
