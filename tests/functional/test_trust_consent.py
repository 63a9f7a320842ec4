"""A saved pair or sweep record is data: nothing it holds runs without being shown and agreed
to; values of the wrong type are one line and exit 2."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import TESTS

from tuimon.cli import main
from tuimon.commands import options
from tuimon.engine.launch.consent import Planned, command_line, quote
from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Sweep
from tuimon.errors import UsageError

ROOT = TESTS.parent
DIVERGED = ROOT / "sample_logs" / "cpu-cpu-threads2-contiguous"
FAKE = str(TESTS / "fake_trainer.py")


def planted(tmp_path: Path, **fields: object) -> tuple[Path, Path]:
    """A DIVERGED pair directory whose pair.json holds `fields`, and the file its planted
    command would create."""
    pair = tmp_path / "pair"
    shutil.copytree(DIVERGED, pair)
    mark = tmp_path / "ran"
    doc = json.loads((pair / "pair.json").read_text())
    doc["commands"] = {s: ["sh", "-c", f"echo {s} >> {mark}"] for s in "ab"}
    doc.update(fields)
    (pair / "pair.json").write_text(json.dumps(doc))
    return pair, mark


def test_explain_shows_a_planted_command_and_runs_nothing_without_a_yes(tmp_path, capsys):
    pair, mark = planted(tmp_path)
    assert main(["explain", str(pair)]) == 2
    err = capsys.readouterr().err
    assert f"run a: sh -c 'echo a >> {mark}'" in err
    assert "nothing was run without a yes" in err and "--yes" in err
    assert not mark.exists()


def test_explain_shows_a_shell_command_as_the_shell_runs_it(tmp_path, capsys):
    shell = {s: [f"touch {tmp_path}/x; id"] for s in "ab"}
    pair, _ = planted(tmp_path, shell=True, commands=shell)
    assert main(["explain", str(pair)]) == 2
    err = capsys.readouterr().err
    assert f"run a (through the shell): /bin/sh -c 'touch {tmp_path}/x; id'" in err
    assert not (tmp_path / "x").exists()


def test_explain_with_yes_runs_what_it_showed(tmp_path, capsys):
    pair, mark = planted(tmp_path)
    assert main(["explain", "--yes", str(pair), "--repeats", "1"]) == 3  # no trace: it could not
    assert sorted(mark.read_text().split()) == ["a", "b"]
    assert "explain runs (--yes)" in capsys.readouterr().err


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "ran"), [("y\n", True), ("n\n", False), ("", False)])
def test_on_a_terminal_a_y_runs_and_anything_else_does_not(monkeypatch, answer, ran):
    monkeypatch.setattr(sys, "stdin", Tty(answer))
    monkeypatch.setattr(sys, "stderr", Tty())
    if ran:
        assert options.confirm("explain", ["  run a: true"], yes=False)
    else:
        with pytest.raises(UsageError, match="not confirmed"):
            options.confirm("explain", ["  run a: true"], yes=False)
    assert "run a: true\nRun them? [y/N] " in sys.stderr.getvalue()


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"commands": {"a": "sh -c id", "b": ["x"]}}, "'commands' must map"),
        ({"commands": {"a": [1, 2], "b": ["x"]}}, "'commands' must map"),
        ({"commands": ["x"]}, "'commands' must map"),
        ({"threads": ["x", 2]}, "'threads' must be"),
        ({"threads": "2"}, "'threads' must be"),
        ({"devices": "cpu"}, "'devices' must be"),
        ({"shell": "yes"}, "'shell' must be"),
        ({"seed": 1.5}, "'seed' must be"),
    ],
)
def test_wrong_types_in_pair_json_are_one_line_and_exit_2(tmp_path, capsys, fields, said):
    pair, mark = planted(tmp_path, **fields)
    assert main(["explain", "--yes", str(pair)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Error" not in err and "Traceback" not in err
    assert not mark.exists()


def test_a_command_that_cannot_start_is_one_line(tmp_path, capsys):
    pair, _ = planted(tmp_path, commands={s: ["/no/such/program"] for s in "ab"})
    assert main(["explain", "--yes", str(pair)]) == 2
    assert "cannot start '/no/such/program'" in capsys.readouterr().err


def test_control_characters_in_a_command_are_shown_escaped():
    assert quote("a\x1b]52;c;eA==\x07") == "$'a\\x1b]52;c;eA==\\x07'"
    assert quote("x\u202ey") == "$'x\\u202ey'"
    assert quote("it's") == "'it'\"'\"'s'"
    assert command_line(Planned("run a", ("printf", "a\nb"))) == "printf $'a\\nb'"


def test_replay_and_compare_of_a_planted_pair_run_nothing(tmp_path):
    pair, mark = planted(tmp_path)
    assert main(["compare", str(pair)]) == 1
    assert main(["replay", "--headless", str(pair)]) == 1
    assert not mark.exists()


def planted_sweep(store: Path, mark: Path) -> Sweep:
    plan = PairPlan(
        seed=None, devices=("cpu", "cpu"), threads=(1, 1), deterministic=False, loss_dtype=None,
        template=("sh", "-c", f"echo {{side}} >> {mark}; {sys.executable} {FAKE} --steps 2"),
    )  # fmt: skip
    sweep = Sweep.create(store, plan, [0, 1], 1, 1)
    sweep.save()
    return sweep


def test_sweep_resume_shows_a_planted_template_and_runs_nothing_without_a_yes(tmp_path, capsys):
    mark = tmp_path / "ran"
    sweep = planted_sweep(tmp_path / "store", mark)
    argv = ["sweep", "--resume", str(sweep.path), "--headless"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"run a, seed 0: sh -c 'echo a >> {mark};" in err
    assert "and the same with {seed} = 1 (2 pairs in all)" in err
    assert not mark.exists()
    assert main([*argv, "--yes"]) == 0
    assert sorted(mark.read_text().split()) == ["a", "a", "b", "b"]


@pytest.mark.parametrize(
    ("where", "key", "value", "said"),
    [
        ("plan", "template", "sh -c id", "plan 'template' must be"),
        ("plan", "launch", [["ssh"]], "plan 'launch' must be"),
        ("plan", "shell", 1, "plan 'shell' must be"),
        ("plan", "threads", [1, "x"], "plan 'threads' must be"),
        ("plan", "workload", {"p": [1]}, "plan 'workload' must be"),
        ("job", "pair", "../../etc", "job 1 'pair' must be"),
        ("job", "status", "done", "job 1 'status' must be"),
        ("job", "seed", "0", "job 1 'seed' must be"),
        ("top", "id", "../x", "'id' must be a plain name"),
        ("top", "jobs", {}, "'jobs' must be a list"),
    ],
)
def test_wrong_types_in_a_sweep_record_are_one_line(tmp_path, capsys, where, key, value, said):
    mark = tmp_path / "ran"
    sweep = planted_sweep(tmp_path / "store", mark)
    doc = json.loads(sweep.path.read_text())
    target = {"plan": doc["plan"], "job": doc["jobs"][0], "top": doc}[where]
    target[key] = value
    sweep.path.write_text(json.dumps(doc))
    assert main(["sweep", "--resume", str(sweep.path), "--headless", "--yes"]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and "Error:" not in err
    assert not mark.exists()
