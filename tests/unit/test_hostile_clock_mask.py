"""Clocks in printed text are masked in time linear in the line (issue 40): a name under which
a number may be a clock is tried where a run of name characters begins, never from each of its
letters (a line of 8,000 letters took ~4 s, a 180 KB log of them 330 s to compare). No timing
assert: the log below compares in well under a second when the masking is linear, and in
minutes when it is not."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from tuimon.cli import main
from tuimon.clocks import mask_clocks


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        ("step 3 loss 0.5 time: 0.51 (0.53)", "step 3 loss 0.5 time: ~"),
        ("data 0.01 loss 2.0", "data ~ loss 2.0"),
        ("--data_time 0.2 lr 0.1", "--data_time ~ lr 0.1"),
        ("train/iter_time=3.5 acc=0.9", "train/iter_time=~ acc=0.9"),
        ("x" * 50 + " loss 1.0", "x" * 50 + " loss 1.0"),
        ("eta 0:01:23 loss 1.5", "eta ~ loss 1.5"),
    ],
)
def test_what_is_masked_is_unchanged(line: str, masked: str) -> None:
    assert mask_clocks(line) == masked


def test_a_log_of_8000_letter_lines_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(0)
    lines = []
    while sum(map(len, lines)) < 180_000:
        letters = "".join(rng.choice(string.ascii_letters) for _ in range(8000))
        s = len(lines)
        lines.append(f"step {s} loss {1.0 / (s + 1)} {letters} time {s % 60}.5 a.b.c-d/e\n")
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("".join(lines))
    b.write_text("".join(lines).replace("time 3.5", "time 4.5"))  # a clock: set aside
    assert main(["compare", "--json", str(a), str(b)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["verdict"] == "IDENTICAL" and out["steps_compared"] == len(lines)
    assert out["bytes"]["set_aside"] == {"clock": 1}
