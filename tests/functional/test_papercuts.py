"""Issue 31, item 8: what a new user met first (each fixed, or the docs say what happens)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TESTS

from tuimon import cli

SAMPLES = TESTS.parent / "sample_logs"


def test_the_flagship_samples_headline_is_a_judged_metric(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its key frequencies are labels, shown but not judged (the pair.json records the
    implicit --ignore 'key_freqs.*' as a pair made now does): 0.306 at step 250 was 36 vs 25."""
    assert cli.main(["compare", str(SAMPLES / "cpu-cpu-threads2-contiguous")]) == 1
    head = capsys.readouterr().out.splitlines()[0]
    assert "max divergence 0.131 at step 61" in head, head


@pytest.mark.parametrize("command", [["spread"], ["plot", "-o", "x.svg"]])
def test_a_mistyped_pair_is_not_called_a_missing_sweep(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*command, str(tmp_path / "nope"), "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no such pair directory, nor a sweep of that id" in err, err


def test_explains_advice_names_a_docs_section_and_the_optimizer() -> None:
    import re

    from tuimon.engine.analyses.explain import NO_HELPER

    section = re.search(r"(docs/[\w-]+\.md), '(.+)'\)", NO_HELPER)
    assert section is not None, NO_HELPER
    page = (TESTS.parent / section[1]).read_text()
    headings = {h.strip() for h in re.findall(r"^#+ (.+)$", page, re.MULTILINE)}
    assert section[2] in headings
    assert "trace_step(step, model, optimizer)" in NO_HELPER
    assert "trace_step(step, model, optimizer)" in page


@pytest.mark.parametrize(
    "command", [["pair", "--headless"], ["sweep", "--headless", "--seeds", "0,1"]]
)
def test_a_mistyped_placeholder_is_refused(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*command, "--store", str(tmp_path), "--", "python", "-c", "pass", "--seed", "{sed}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "{sed} in '{sed}' is not substituted: did you mean {seed}?" in err, err
    assert not any(tmp_path.iterdir())  # nothing started, nothing made


def test_braces_of_the_command_itself_pass() -> None:
    from tuimon.engine.launch.runner import mistyped_placeholder
    from tuimon.engine.runs.plan import SUBSTITUTED

    own = ["python", "-c", 'print(f"{i}")', "awk", "{print}", "${HOME}", "{{size}}", "{seed}"]
    assert mistyped_placeholder(own, SUBSTITUTED) is None
    assert "did you mean {pair_dir}" in (mistyped_placeholder(["{pairdir}/x"], SUBSTITUTED) or "")


def test_minus_zero_against_zero_says_the_bits_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 0.0}\n')
    b.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": -0.0}\n')
    assert cli.main(["compare", str(a), str(b)]) == 1
    head = capsys.readouterr().out.splitlines()[0]
    assert "first divergent step 1 (loss); values differ in their bits only (-0.0" in head, head


def test_the_emb_line_is_said_once_headless() -> None:
    """The last batch's message held the artifacts' lines that the report prints after it."""
    from tuimon.engine.sources.session import Batch
    from tuimon.report.headless import _not_in_report

    emb = "emb at the end: bitwise equal; key frequencies a 3 1 2 | b 3 1 2: sets agree"
    where = Path("/store/pair")
    message = f"run b ended; {emb}; saved to {where}"
    batch = Batch({}, {}, [], {}, None, done=True, pair_path=where, message=message)  # type: ignore[arg-type]
    assert _not_in_report(batch) == "run b ended"


def test_train_with_a_log_file_says_its_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal here: a line every 30 s (`every` shortened), the log itself unchanged."""
    from tuimon.steplog import parse_line
    from tuimon.workload.train import _Progress

    log = _Progress(str(tmp_path / "run.jsonl"), 3)
    assert not log.tty
    log.every = log.next = 0.0
    for step in range(3):
        log.step(step, train_loss=0.5, test_acc=0.25)
    log.close("ok")
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("tuimon train: step 2 (3/3 steps, "), err
    assert err[-1].endswith("train_loss 0.5 test_acc 0.25")
    lines = (tmp_path / "run.jsonl").read_bytes().splitlines()
    assert len(lines) == 5 and parse_line(lines[1]).step == 0  # type: ignore[union-attr]


def test_the_env_view_of_a_reference_pair_is_not_its_own_paths() -> None:
    """Commands that differ only in each side's own file (`emb-a.npy`, `emb-b.npy`) are no
    difference; a real one shows only the words where the commands part."""
    from tuimon.ui.modals import EnvDiffScreen, _words_apart
    from tuimon.ui.pair_model import EnvRow

    a = "python -m tuimon train --device cpu --threads 2 --seed 0 --save-emb /s/p/emb-a.npy"
    b = a.replace("emb-a", "emb-b")
    screen = EnvDiffScreen([EnvRow("command", a, b, True), EnvRow("env.torch", "2", "2", False)])
    assert not any(r.differs for r in screen.rows) and screen.show_same
    other = b.replace("--device cpu", "--device cuda")
    screen = EnvDiffScreen([EnvRow("command", a, other, True)])
    assert screen.rows[0].differs
    assert _words_apart(a, other) == (
        "… --device cpu … --save-emb /s/p/emb-a.npy",
        "… --device cuda … --save-emb /s/p/emb-b.npy",
    )
