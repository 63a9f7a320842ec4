"""Live and saved read the same bytes the same way: a live pair of two runs that print the
bytes of two logs comes to the verdict `compare` gives for the two logs, for the saved pair,
and a replay of the saved pair (generated logs: `\\r` redraws, repeats, damaged tails,
numbers that do not fit, dicts inside a logger's lines, a line too long to parse)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuimon.cli import main
from tuimon.steplog import MAX_LINE

PRINT = "import sys; sys.stdout.buffer.write(open(sys.argv[1] + '.log', 'rb').read())"
"""A run that prints its side's log as it is."""


def verdict(out: dict[str, Any]) -> tuple[Any, ...]:
    skipped = tuple(tuple(sorted(out["accounts"][s]["skipped"].items())) for s in "ab")
    return (out["verdict"], out["first_divergent_step"], out["steps_compared"], skipped)


def last_json(capsys) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def live_and_saved(
    tmp_path: Path, capsys, a: bytes, b: bytes, flags: tuple[str, ...] = ()
) -> list[tuple[Any, ...]]:
    """The verdicts of a live pair printing `a` and `b` (reading with `flags`), of `compare`
    of the two logs (the same flags), and of `compare` and `replay` of the saved pair (which
    keeps them)."""
    (tmp_path / "a.log").write_bytes(a)
    (tmp_path / "b.log").write_bytes(b)
    store = tmp_path / "store"
    argv = ["pair", "--headless", "--json", "--store", str(store), *flags, "--",
            sys.executable, "-c", PRINT, str(tmp_path / "{side}")]  # fmt: skip
    main(argv)
    live = last_json(capsys)
    main(["compare", "--json", *flags, str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    files = last_json(capsys)
    main(["compare", "--json", live["pair"]])
    pair = last_json(capsys)
    main(["replay", "--headless", "--json", "--speed", "1e6", live["pair"]])
    replay = last_json(capsys)
    return [verdict(live), verdict(files), verdict(pair), verdict(replay)]


def lines(rows: list[str]) -> bytes:
    return "".join(r + "\n" for r in rows).encode()


def redraws(last_loss: float) -> bytes:
    out = []
    for step in range(8):
        bar = "".join(f"\rstep {step}: loss {0.9 - k / 10:.2f} {k}0%" for k in range(3))
        loss = last_loss if step == 5 else 0.5 / (step + 1)
        out.append(f"{bar}\rstep {step}: loss {loss}")
    return lines(out)


def json_rows(n: int, change: int | None = None) -> list[str]:
    return [json.dumps({"step": i, "loss": 0.5 / (i + 1) + (i == change)}) for i in range(n)]


LOGGER = "\x1b[1mINFO\x1b[22m | \x1b[32m2024-04-30 11:16:10\x1b[39m | on_log:226 - "

CASES: dict[str, tuple[bytes, bytes]] = {
    "carriage returns, same last state": (redraws(0.25), redraws(0.25)),
    "carriage returns, another last state": (redraws(0.25), redraws(0.26)),
    "a row logged again": (
        lines([*json_rows(5), json_rows(5)[4], json_rows(5)[4]]),
        lines([*json_rows(5), json_rows(5)[4], json.dumps({"step": 4, "loss": 9.0})]),
    ),
    "a damaged tail": (lines(json_rows(30)), lines(json_rows(30))[:-9]),
    "a step beyond int64": (
        lines([*json_rows(9), json.dumps({"step": 2**64, "loss": 1.0})]),
        lines([*json_rows(9), json.dumps({"step": 2**64, "loss": 2.0})]),
    ),
    "a value beyond float64": (
        lines([*json_rows(9), '{"step": 9, "loss": 1e400}']),
        lines([*json_rows(9), '{"step": 9, "loss": 2e400}']),
    ),
    "dicts in a logger's lines": (
        lines([LOGGER + repr({"loss": 0.5 + i, "epoch": i / 9}) for i in range(9)]),
        lines([LOGGER + repr({"loss": 0.5 + i + (i == 6), "epoch": i / 9}) for i in range(9)]),
    ),
    "a printed table": (
        lines(
            ["epoch     train_loss  valid_loss  time"]
            + [f"{i:<10}{1 / (i + 1):<12.6f}{2 / (i + 1):<12.6f}00:{i:02d}" for i in range(6)]
        ),
        lines(
            ["epoch     train_loss  valid_loss  time"]
            + [
                f"{i:<10}{1 / (i + 1) + (i == 4):<12.6f}{2 / (i + 1):<12.6f}00:{i + 1:02d}"
                for i in range(6)
            ]
        ),
    ),
    "two-level steps and an evaluation line": (
        lines(
            [
                f"Epoch [{e}][{i}/30]  lr: 0.01, time: 0.5, loss: {1 / (e + i):.4f}"
                for e in (1, 2)
                for i in (10, 20, 30)
            ]
            + ["Epoch(val) [2][30]  mAP: 0.4510"]
        ),
        lines(
            [
                f"Epoch [{e}][{i}/30]  lr: 0.01, time: 0.7, loss: {1 / (e + i):.4f}"
                for e in (1, 2)
                for i in (10, 20, 30)
            ]
            + ["Epoch(val) [2][30]  mAP: 0.4511"]
        ),
    ),
    "JSON rows without a step key": (
        lines([json.dumps({"train_loss": 1 / (i + 1), "ap": [0.1, 0.2]}) for i in range(6)]),
        lines(
            [json.dumps({"train_loss": 1 / (i + 1), "ap": [0.1, 0.2 + (i == 3)]}) for i in range(6)]
        ),
    ),
    "an OLMo block": (
        lines([f"[step={s}/90]" for s in range(3)] + ["[step=3/90]", "    loss=2.5"]),
        lines([f"[step={s}/90]" for s in range(3)] + ["[step=3/90]", "    loss=2.6"]),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_live_and_saved_agree(tmp_path: Path, capsys, case: str) -> None:
    a, b = CASES[case]
    live, files, pair, replay = live_and_saved(tmp_path, capsys, a, b)
    assert live == files == pair == replay


def test_live_and_saved_agree_on_a_line_too_long_to_parse(tmp_path: Path, capsys) -> None:
    big = '{"step": 5, "loss": 1.0, "blob": "' + "z" * (MAX_LINE + 10) + '"}'
    other = big.replace('"loss": 1.0', '"loss": 2.0')
    live, files, pair, replay = live_and_saved(
        tmp_path, capsys, lines([*json_rows(5), big]), lines([*json_rows(5), other])
    )
    assert live == files == pair == replay
    assert live[0] == "INCOMPLETE" and live[3][0] == (("unreadable", 1),)


def tuimon_log(shift: int, change: int | None = None) -> bytes:
    """A tuimon step log whose records carry `iter` = 10 x their index and a `step` moved by
    `shift`; the loss at index `change` differs."""
    header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0}}
    steps = [
        {"type": "step", "step": i + shift, "iter": 10 * i, "loss": 0.5 / (i + 1) + (i == change)}
        for i in range(9)
    ]
    end = {"type": "end", "status": "ok", "steps": 9}
    return lines([json.dumps(r) for r in (header, *steps, end)])


def test_live_and_saved_agree_on_a_step_log_stepped_by_another_field(
    tmp_path: Path, capsys
) -> None:
    """`--step-key iter` on tuimon's own step log: its records are stepped by `iter` in every
    path (the runs' `step` fields disagree here, their `iter` fields do not)."""
    live, files, pair, replay = live_and_saved(
        tmp_path, capsys, tuimon_log(0), tuimon_log(1, change=3), ("--step-key", "iter")
    )
    assert live == files == pair == replay
    assert live[:3] == ("DIVERGED", 30, 9)


def test_a_step_key_the_records_lack_is_said(tmp_path: Path, capsys) -> None:
    """`--step-key` naming no field of the records is never ignored: the live pair, its saved
    pair and its replay are INCOMPLETE with the reason; `compare` of the files says it."""
    for side in "ab":
        (tmp_path / f"{side}.log").write_bytes(tuimon_log(0))
    flags = ["--step-key", "nope"]
    main(["pair", "--headless", "--json", "--store", str(tmp_path / "store"), *flags, "--",
          sys.executable, "-c", PRINT, str(tmp_path / "{side}")])  # fmt: skip
    live = last_json(capsys)
    assert verdict(live)[0] == "INCOMPLETE"
    assert verdict(live)[3][0] == (("no field named by --step-key", 9),)
    assert "check the name" in live["reason"]
    main(["compare", "--json", live["pair"]])
    assert verdict(last_json(capsys)) == verdict(live)
    main(["replay", "--headless", "--json", "--speed", "1e6", live["pair"]])
    assert verdict(last_json(capsys)) == verdict(live)
    code = main(["compare", *flags, str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    err = capsys.readouterr().err
    assert code == 2 and "no field named by --step-key" in err and "Traceback" not in err


def _row(step: int, loss: float) -> str:
    return json.dumps({"step": step, "loss": loss})


ODD_LINES = [
    '{"step": 18446744073709551616, "loss": 1.0}',  # a step beyond int64
    '{"step": 3, "loss": 1e400}',  # a value beyond float64
    '{"step": 4, "loss": ' + "[" * 3000 + "]" * 3000 + "}",  # nesting too deep
    '{"step": 5, "lo',  # a damaged record
    "epoch 1 done, saving",  # plain text
    "step 6: loss 0.5\rstep 6: loss 0.25",  # a redraw: its last state counts
    '{"step": 7, "loss": NaN}',  # a NaN token
    "",  # a blank line
    '{"step": 8, "loss": 1' + "0" * 40 + "}",  # an integer beyond float64's exact range
    '{"step": 9.0, "loss": 0.5}',  # a float step
    '{"step": "10", "loss": 0.5}',  # a step as text
    "INFO - {'loss': 0.3, 'epoch': 0.5}",  # a printed dict in a logger's line
    "[step=11/90]\n    loss=0.3",  # an OLMo block
    '{"step": 2, "loss": 0.16666666666666666}',  # a step logged again
]


@st.composite
def log_pair(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two logs of JSON rows with odd lines mixed in: b is a's lines, with a value changed, a
    line dropped, a row repeated or its tail cut, as draws decide."""
    n = draw(st.integers(3, 12))
    lines = [_row(i, 0.5 / (i + 1)) for i in range(n)]
    for odd in draw(st.lists(st.sampled_from(ODD_LINES), max_size=3)):
        lines.insert(draw(st.integers(0, len(lines))), odd)
    b = list(lines)
    change = draw(st.sampled_from(["none", "value", "drop", "repeat", "cut"]))
    at = draw(st.integers(0, len(b) - 1))
    if change == "value":
        b[at] = _row(at, 9.0) if b[at].startswith('{"step"') else b[at]
    elif change == "drop":
        del b[at]
    elif change == "repeat":
        b.insert(at, b[at])
    a_bytes = "".join(x + "\n" for x in lines).encode()
    b_bytes = "".join(x + "\n" for x in b).encode()
    if change == "cut":
        b_bytes = b_bytes[: draw(st.integers(1, len(b_bytes)))]
    return a_bytes, b_bytes


@settings(
    max_examples=int(os.environ.get("TUIMON_FUZZ_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(logs=log_pair())
def test_live_and_saved_agree_on_generated_logs(tmp_path: Path, capsys, logs) -> None:
    """Any mix of the odd lines above, any of the changes: the live pair, `compare` of the
    files, `compare` of the saved pair and its replay give one verdict."""
    a, b = logs
    here = Path(tempfile.mkdtemp(dir=tmp_path))
    live, files, pair, replay = live_and_saved(here, capsys, a, b)
    assert live == files == pair == replay
