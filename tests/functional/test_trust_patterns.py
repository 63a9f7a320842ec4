"""Patterns are data too (issue 31, item 6): a `--pattern` saved in a pair.json that does not
compile is one line naming it, exit 2 (never a verdict under another reading), and a pattern
that backtracks without end (`(a|aa)+$` on fifty `a`s and a `!`) never hangs tuimon: the line
is skipped as `--pattern timed out`, and after a few such lines the pattern is given up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TESTS

from tuimon import cli
from tuimon.errors import ReplayError
from tuimon.readers import LineParser, Reading
from tuimon.readers.account import Account
from tuimon.readers.reading import GIVE_UP
from tuimon.steplog import PATTERN_TIMEOUT, Step, Text

EVIL = r"it (?P<step>\d+) (?P<loss>(a|aa)+)$"
BROKEN = r"it (?P<step>\d+ (?P<loss>"
EVIL_LINE = "it 5 " + "a" * 50 + "!"


def saved_pair(folder: Path, pattern: str, evil_lines: int = 1) -> Path:
    """A finished pair of two equal text logs, read by `pattern` as it was saved."""
    folder.mkdir()
    text = "".join(f"it {i} loss {0.5 + i / 10}\n" for i in range(5))
    text += f"{EVIL_LINE}\n" * evil_lines
    for side in "ab":
        (folder / f"{side}.log").write_text(text)
    doc = {
        "format": "tuimon.pair/1",
        "status": "finished",
        "files": {"a": "a.log", "b": "b.log"},
        "reading": {"patterns": [pattern], "map": {}, "step_key": None, "judge": []},
    }
    (folder / "pair.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("command", [["compare"], ["replay", "--headless"]])
def test_a_saved_pattern_that_does_not_compile_is_an_error_naming_it(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    pair = saved_pair(tmp_path / "pair", BROKEN)
    assert cli.main([*command, str(pair)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "pair.json" in err[0] and repr(BROKEN) in err[0] and "not a regular expression" in err[0]


def test_the_browsers_saved_view_says_the_pattern_too(tmp_path: Path) -> None:
    from tuimon.ui.saved_view_model import load_saved

    pair = saved_pair(tmp_path / "pair", BROKEN)
    with pytest.raises(ReplayError, match="not a regular expression") as caught:
        load_saved(pair)
    assert repr(BROKEN) in str(caught.value)


def test_a_catastrophic_saved_pattern_ends_and_says_why(tmp_path: Path) -> None:
    pair = saved_pair(tmp_path / "pair", EVIL)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tuimon", "compare", str(pair)],
        capture_output=True, text=True, timeout=60, cwd=TESTS.parent,
    )  # fmt: skip
    assert time.monotonic() - start < 30  # it ran for hours before (generous bound)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"skipped {PATTERN_TIMEOUT} 1" in proc.stdout


def test_a_catastrophic_given_pattern_on_many_lines_is_given_up(tmp_path: Path) -> None:
    """Every line over the limit, on both sides: the pattern is tried on `GIVE_UP` lines only
    (each ends at its limit), the rest are skipped untried, and the reason is said."""
    logs = []
    for side in "ab":
        log = tmp_path / f"{side}.log"
        log.write_text("".join(f"it {i} " + "a" * 60 + "!\n" for i in range(2000)))
        logs.append(str(log))
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tuimon", "compare", *logs, "--pattern", EVIL],
        capture_output=True, text=True, timeout=120, cwd=TESTS.parent,
    )  # fmt: skip
    assert time.monotonic() - start < 60
    said = proc.stdout + proc.stderr  # no step read: INCOMPLETE, or no steps found (exit 2)
    assert proc.returncode in (2, 3), said
    assert f"({PATTERN_TIMEOUT} 2000: " in said


def test_a_timed_out_line_is_skipped_and_blocks_and_others_still_read() -> None:
    """The line is a skipped record whose content was not read (`BLOCKING`); a second pattern
    that reads the line quickly still gives its step; a later good line is read as before."""
    parser = LineParser(Reading(patterns=(EVIL,)))
    record, _ = parser.parse(f"{EVIL_LINE}\n".encode())
    assert isinstance(record, Text) and record.skipped == PATTERN_TIMEOUT
    account = Account()
    account.add(record)
    assert account.problem("a") is not None and PATTERN_TIMEOUT in account.problem("a")

    both = LineParser(Reading(patterns=(EVIL, r"it (?P<step>\d+) (?P<n>\d+)")))
    record, _ = both.parse(b"it 5 7\n")
    assert isinstance(record, Step) and record.metrics == {"n": 7}
    record, _ = both.parse(f"{EVIL_LINE}\n".encode())
    assert isinstance(record, Text) and record.skipped == PATTERN_TIMEOUT
    record, _ = both.parse(b"a plain line\n")  # what the line before left is not this one's
    assert isinstance(record, Text) and record.skipped is None


def test_a_pattern_given_up_skips_every_later_line() -> None:
    parser = LineParser(Reading(patterns=(EVIL,)))
    for _ in range(GIVE_UP):
        parser.parse(f"{EVIL_LINE}\n".encode())
    start = time.monotonic()
    record, _ = parser.parse(b"it 6 aaaa\n")
    assert time.monotonic() - start < 5
    assert isinstance(record, Text) and record.skipped == PATTERN_TIMEOUT
