"""What a CI job reads (issue 43): --junit and --summary on pair, compare, sweep and
pair --against, and --tolerance-from a sweep of repeats (tests/noisy_trainer.py: a loss with
noise of 1e-6 whose sign alternates run by run)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import junitparser
import pytest
from helpers import pair_json

from tuimon.cli import main

NOISY = str(Path(__file__).parent.parent / "noisy_trainer.py")


def noisy(noise_file: Path, lr: str = "0.1") -> list[str]:
    return ["--", sys.executable, NOISY, "--seed", "{seed}", "--lr", lr,
            "--noise-file", str(noise_file)]  # fmt: skip


def cases(path: Path) -> list[junitparser.TestCase]:
    """The test cases of a JUnit file, read by a real JUnit parser."""
    xml = junitparser.JUnitXml.fromfile(str(path))
    return [case for suite in xml for case in suite]


@pytest.fixture(scope="module")
def repeats(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A saved sweep of 5 repeats of seed 0 (10 runs): its store, id and JUnit report."""
    store = tmp_path_factory.mktemp("store")
    junit = store.parent / "sweep.xml"
    argv = ["sweep", "--seeds", "0", "--repeat", "5", "--jobs", "1", "--headless",
            "--store", str(store), "--junit", str(junit),
            *noisy(store.parent / "noise")]  # fmt: skip
    assert main(argv) == 1  # bitwise (no tolerance): every repeat DIVERGED at step 0
    (record,) = (store / "sweeps").glob("*.json")
    return store, record.stem, junit


def test_sweep_junit_has_a_failing_case_per_repeat_naming_step_and_tolerance(
    repeats: tuple[Path, str, Path],
) -> None:
    _, _, junit = repeats
    got = cases(junit)
    assert [c.name for c in got] == [f"seed 0 · repeat {r}" for r in range(1, 6)]
    for case in got:
        (failure,) = case.result
        assert isinstance(failure, junitparser.Failure)
        assert failure.type == "DIVERGED"
        assert failure.message.startswith("DIVERGED at step 0: loss a ")
        assert "abs diff 2e-06" in failure.message
        assert "beyond the tolerance 0 (bitwise)" in failure.message


def test_tolerance_from_repeats_a_changed_lr_diverges_a_repeat_is_close(
    repeats: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, sweep, _ = repeats
    noise = store.parent / "noise"
    saved = next(p for p in store.iterdir() if p.name.endswith("sweep-" + sweep)) / "a"
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    common = ["--headless", "--store", str(store), "--tolerance-from", sweep,
              "--junit", str(junit), "--summary", str(summary)]  # fmt: skip
    assert main(["pair", *common, "--against", str(saved), *noisy(noise, "0.1001")]) == 1
    (case,) = cases(junit)
    (failure,) = case.result
    assert isinstance(failure, junitparser.Failure)
    message = failure.message
    assert message.startswith("DIVERGED at step 1: loss a ")  # step 0 has lr * 0: inside
    found = re.search(r"abs diff (\S+), rel diff (\S+), ", message)
    assert found is not None  # exp(-0.1) - exp(-0.1001), give or take the noise
    assert 8e-5 < float(found[1]) < 1e-4 and 8e-5 < float(found[2]) < 1.1e-4
    assert "beyond the band abs 2e-06, rel " in message
    assert f"(10 runs of sweep {sweep})" in message
    md = summary.read_text()
    assert "0 passed, 1 failed (DIVERGED)" in md
    assert "| ❌ | seed 0 · cpu against " in md and "DIVERGED at step 1: loss" in md
    assert "beyond at step 1: loss" in capsys.readouterr().out  # the headless report says it
    # a repeat of the same settings, both sides live: inside the band
    assert main(["pair", *common, *noisy(noise)]) == 0
    (case,) = cases(junit)
    assert case.is_passed
    assert "| ✅ | seed 0 · cpu,cpu | CLOSE | CLOSE: 20 steps compared" in summary.read_text()
    # saved with its band: compare judges it so, unless given a --tolerance of its own
    docs = {p: pair_json(p) for p in store.iterdir() if (p / "pair.json").exists()}
    (pair,) = [p for p, doc in docs.items() if "band" in doc and "against" not in doc]
    capsys.readouterr()
    assert main(["compare", str(pair)]) == 0
    assert main(["compare", str(pair), "--tolerance", "0"]) == 1


def test_compare_reports_incomplete_as_an_error_and_appends_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 0.5}\n')
    b.write_text('{"step": 0, "loss": 1.0}\n')
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    junit = tmp_path / "out.xml"
    assert main(["compare", str(a), str(b), "--junit", str(junit)]) == 3
    (case,) = cases(junit)
    (error,) = case.result
    assert isinstance(error, junitparser.Error)
    assert error.type == "INCOMPLETE" and "steps logged by one run only" in error.message
    text = step_summary.read_text()
    assert text.startswith("earlier step\n### tuimon compare\n")  # appended, not replaced
    assert "0 passed, 0 failed (DIVERGED), 1 errors (INCOMPLETE or not run) of 1" in text
    capsys.readouterr()
