"""The examples of README.md and of every page of docs/, run or parsed as they are written: the
scripts of docs/your-script.md run as pairs, every `tuimon ...` line of a shell block parses, the
ones that name sample_logs/ run."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from tuimon.cli import main
from tuimon.readers import LineParser, Reading
from tuimon.steplog import Step

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README and every page of the documentation site."""
    return [README, *sorted(DOCS.glob("*.md"))]


def section() -> str:
    """The page "Use with your script" (its examples run below)."""
    return (DOCS / "your-script.md").read_text()


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
    block = text[text.index("## Printed text") :].split("```")[1]
    shapes = [s.strip() for line in block.splitlines() for s in re.split(r"\s{3,}", line)]
    shapes = [s for s in shapes if s]
    assert len(shapes) == 6
    for shape in shapes:
        parser = LineParser()
        got = parser.feed([shape.encode() + b"\n"]) + parser.close()
        assert len(got) == 1 and isinstance(got[0], Step), shape


# --- every command example of the README and the docs -----------------------------------------

REPO = README.parent


def command_examples() -> list[str]:
    """Every `tuimon ...` line of the shell blocks of README.md and docs/*.md (continuations
    joined, comments, `[optional]` groups and `...` left out): what a user would paste."""
    out = []
    text = "\n".join(page.read_text() for page in pages())
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if lang not in ("", "sh", "bash", "console", "shell"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            part = line.split("&&")[-1].strip()
            if not part.startswith("tuimon ") or part.startswith("tuimon pair: error"):
                continue
            part = re.sub(r"\s+#\s.*$", "", part)  # a comment after two spaces or more
            part = re.sub(r"\[[^\]]*\]", "", part).replace(" ...", "")
            out.append(" ".join(part.split()))
    return out


def test_the_readme_and_docs_have_their_command_examples() -> None:
    examples = command_examples()
    assert len(examples) >= 25
    assert any(e.startswith("tuimon replay sample_logs/") for e in examples)
    assert "tuimon pair --seed 0 --devices cpu,cpu --headless" in examples  # the CPU quick start


@pytest.mark.parametrize("example", command_examples())
def test_every_readme_command_parses_as_written(example: str) -> None:
    """Each example's subcommand takes each of its options (no unknown flag, no bad value)."""
    from tuimon.cli import build_parser

    argv = shlex.split(example)[1:]
    try:
        args, extra = build_parser().parse_known_args(argv)
    except SystemExit as exc:  # argparse said why on stderr
        pytest.fail(f"{example!r} does not parse (exit {exc.code})")
    assert not extra, f"{example!r}: unknown arguments {extra}"
    assert getattr(args, "handler", None) is not None


def test_readme_replay_and_compare_of_the_sample_logs_run(capsys, monkeypatch, tmp_path) -> None:
    """The examples that name files of the repository run as written, from a folder that has
    them as the repository's root has them (what they write, e.g. `-o pair.svg`, lands there,
    not in the checkout)."""
    (tmp_path / "sample_logs").symlink_to(REPO / "sample_logs")  # the folder they name
    monkeypatch.chdir(tmp_path)
    runnable = [
        e
        for e in command_examples()
        if any((REPO / word).exists() for word in shlex.split(e)[2:] if "/" in word)
    ]
    assert runnable
    for example in runnable:
        code = main(shlex.split(example)[1:])
        err = capsys.readouterr().err
        assert code in (0, 1), f"{example!r}: exit {code}: {err}"
        assert "Traceback" not in err


@pytest.mark.parametrize(
    "example",
    [e for e in command_examples() if re.search(r"--devices? \S*(mps|cuda)", e)],
)
def test_gpu_and_mps_examples_refuse_clearly_here(example: str, capsys, tmp_path: Path) -> None:
    """On a machine without the device, a GPU / MPS example ends with one line that says what
    to do, in the options of the command that was run (exit 2, no traceback)."""
    pytest.importorskip("torch")
    from tuimon.workload.device import available_devices

    wanted = re.findall(r"(mps|cuda)", example)
    if all(any(d.startswith(w) for d in available_devices()) for w in wanted):
        pytest.skip("this machine has the device: the example would run")
    argv = shlex.split(example)[1:]
    if "--launch" in argv or "--launch-a" in argv or "--launch-b" in argv:
        pytest.skip("runs on another machine (ssh, srun): only parsed here")
    argv = [a.replace("run.jsonl", str(tmp_path / "run.jsonl")) for a in argv]
    if argv[0] in ("pair", "sweep"):
        argv += ["--store", str(tmp_path / "store")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "not available here" in err
    cpu = "--device cpu" if argv[0] == "train" else "--devices cpu,cpu"
    assert cpu in err and (argv[0] != "train" or "--devices" not in err)
