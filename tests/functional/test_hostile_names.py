"""Names are data everywhere (issue 40): metric names holding a tab, `\\` and `"` read the same
by `compare` (its typed-row decoder refused them: exit 2, a ValueError) and by a live pair of
the same bytes: both DIVERGED at the same step, naming the same metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tuimon.cli import main

NAMES = ["a\tb", "c\\d", 'e"f']
EMIT = "import sys; sys.stdout.write(open(sys.argv[1]).read())"


def _log(path: Path, bump: float) -> None:
    rows = []
    for step in range(3000):
        row: dict[str, float] = {"step": step}
        for i, name in enumerate(NAMES):
            row[name] = 1.0 / (step + 1 + i) + (bump if step == 2000 else 0.0)
        rows.append(json.dumps(row) + "\n")
    path.write_text("".join(rows))


def test_compare_and_a_live_pair_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _log(tmp_path / "log_a.jsonl", 0.0)
    _log(tmp_path / "log_b.jsonl", 1e-12)
    code = main(["compare", "--json", str(tmp_path / "log_a.jsonl"), str(tmp_path / "log_b.jsonl")])
    saved = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    live_argv = ["pair", "--headless", "--json", "--no-save", "--", sys.executable, "-c", EMIT,
                 str(tmp_path / "log_{side}.jsonl")]  # fmt: skip
    live_code = main(live_argv)
    live = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == live_code == 1
    for out in (saved, live):
        assert out["verdict"] == "DIVERGED" and out["first_divergent_step"] == 2000
        assert sorted(out["first_divergent_metrics"]) == sorted(NAMES)
