"""Two-level steps with huge epochs (issue 40): a step holds both of its levels exactly
(`epoch * 10**9 + iteration`, an int64, never a float), up to the largest epoch an int64 holds;
a line whose levels one step cannot hold is skipped and said, never read as its epoch alone
with the iteration dropped (`[E][2/10]` against `[E][7/10]` was IDENTICAL from epoch
9,007,199,254 on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuimon.cli import main
from tuimon.readers.rows_to_steps import LEVEL, Levels, levels_fit
from tuimon.readers.text import parse_text, step_beyond_int64

HUGE = 9_007_199_254
LAST = (2**63 - 1) // LEVEL  # the largest epoch one step holds with its iteration


def _compare(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", str(a), str(b)])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("epoch", [7, HUGE, LAST - 1])
def test_a_printed_step_keeps_both_levels(epoch: int) -> None:
    step = parse_text(f"Epoch [{epoch}][2/10] loss: 0.5")
    assert step is not None and type(step.step) is int
    assert divmod(step.step, LEVEL) == (epoch, 2)
    named = parse_text(f"epoch {epoch} - iter 3/4 loss 0.5")
    assert named is not None and divmod(named.step, LEVEL) == (epoch, 3)


@pytest.mark.parametrize("epoch", [LAST + 1, 10**30])
def test_levels_no_step_holds_are_skipped_and_said(epoch: int) -> None:
    line = f"Epoch [{epoch}][2/10] loss: 0.5"
    assert not levels_fit(epoch, 2)
    assert parse_text(line) is None  # never the epoch alone, its iteration dropped
    assert step_beyond_int64(line)


def test_an_iteration_of_ten_digits_is_never_dropped() -> None:
    line = "Epoch [7][1000000000/2000000000] loss: 0.5"
    assert parse_text(line) is None and step_beyond_int64(line)


def test_json_rows_of_huge_epochs_keep_their_iteration() -> None:
    levels = Levels()  # two-level once the counter starts again as the epoch rises
    rows = ((0, 5), (1, 0), (1, 1))
    got = [levels.step({"epoch": HUGE + e, "iter": i}, "iter", i) for e, i in rows]
    assert got[0] == 5 and [divmod(s, LEVEL) for s in got[1:]] == [(HUGE + 1, 0), (HUGE + 1, 1)]


@pytest.mark.parametrize("epoch", [HUGE, LAST + 1])
def test_other_iterations_are_never_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], epoch: int
) -> None:
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    a.write_text(f"Epoch [{epoch}][2/10] loss: 0.5\nEpoch [{epoch}][3/10] loss: 0.25\n")
    b.write_text(f"Epoch [{epoch}][7/10] loss: 0.5\nEpoch [{epoch}][8/10] loss: 0.25\n")
    c.write_text(f"Epoch [{epoch}][2/10] loss: 0.5\nEpoch [{epoch}][3/10] loss: 0.75\n")
    code, out = _compare(capsys, a, b)
    assert code in (1, 3) and out["verdict"] != "IDENTICAL"
    code, out = _compare(capsys, a, c)
    if epoch == HUGE:  # held exactly: the step that parts is named by both levels
        assert (code, out["verdict"]) == (1, "DIVERGED")
        assert out["first_divergent_at"] == {"epoch": HUGE, "iteration": 3}
    else:  # skipped and said, its lines judged as text: the value that differs is named
        assert (code, out["verdict"]) == (1, "DIVERGED")
        assert out["first_divergent_metrics"] == ["text line 2"]
        assert "step beyond int64" in out["reason"]
