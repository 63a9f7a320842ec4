"""Live pairs of scripts that print text or write other tools' files, read by the readers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import TESTS

from tuimon.cli import main

FAKE = str(TESTS / "fake_text_trainer.py")


def run_pair(tmp_path: Path, capsys, *args: str, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    argv = [
        "pair", "--headless", "--json", "--store", str(tmp_path / "store"), *extra,
        "--", sys.executable, FAKE, "--side", "{side}", *args,
    ]  # fmt: skip
    code = main(argv)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return code, out


def run_script_pair(tmp_path: Path, capsys, source: str) -> tuple[int, dict]:
    """A pair of a script written here (called with its side as the only argument)."""
    script = tmp_path / "t.py"
    script.write_text(source)
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"),
            "--", sys.executable, str(script), "{side}"]  # fmt: skip
    code = main(argv)
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def saved(out: dict) -> dict:
    return json.loads((Path(out["pair"]) / "pair.json").read_text())


def test_text_printing_trainer_as_a_live_pair(tmp_path: Path, capsys) -> None:
    code, out = run_pair(tmp_path, capsys)
    assert code == 0 and out["verdict"] == "IDENTICAL"
    assert out["steps_compared"] == 6 and out["unmatched_a"] == 0
    meta = saved(out)
    assert meta["deterministic"] is False and meta["applied"]["a"]["known"] is False
    code, out = run_pair(tmp_path, capsys, "--diverge-at", "3")
    assert code == 1 and out["first_divergent_step"] == 3
    assert main(["replay", out["pair"], "--headless", "--json", "--speed", "1e6"]) == 1
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["first_divergent_step"] == 3


def test_pattern_and_map_in_a_live_pair(tmp_path: Path, capsys) -> None:
    pattern = r"iter (?P<step>\d+): loss (?P<loss>\S+),"
    code, out = run_pair(tmp_path, capsys, "--diverge-at", "4", extra=("--pattern", pattern))
    # the lines the pattern leaves out are judged as text: `step 4: ...` follows iter 3's record
    assert code == 1 and out["first_divergent_step"] == 3
    assert out["text"]["first"]["text_b"].startswith("step 4: train loss")
    meta = saved(out)
    assert meta["reading"]["patterns"] == [pattern]
    # replaying the saved pair reads it with the pair's own pattern
    assert main(["compare", out["pair"], "--json"]) == 1
    capsys.readouterr()
    code, out = run_pair(tmp_path, capsys, extra=("--map", "loss=loss"))
    assert code == 0 and saved(out)["reading"]["map"] == {"loss": "loss"}


def test_deterministic_cannot_be_known_from_a_script_that_does_not_say(tmp_path, capsys) -> None:
    _, out = run_pair(tmp_path, capsys, extra=("--deterministic",))
    meta = saved(out)
    assert meta["deterministic_asked"] is True and meta["deterministic"] is None
    assert (
        "does not report" in meta["applied"]["b"]["why"]
        or "no header" in meta["applied"]["b"]["why"]
    )


def test_log_file_rewritten_as_a_whole_is_followed(tmp_path: Path, capsys) -> None:
    code, out = run_pair(
        tmp_path, capsys, "--csv", "{pair_dir}/{side}-metrics.csv", "--diverge-at", "3",
        "--sleep", "0.3", extra=("--log-file", "{pair_dir}/{side}-metrics.csv"),
    )  # fmt: skip
    assert code == 1 and out["first_divergent_step"] == 3
    assert out["steps_compared"] == 6
    assert saved(out)["summary"]["metric_max"]["val_loss"]["step"] >= 3  # merged rows read
    files = [str(Path(out["pair"]) / f"{side}-metrics.csv") for side in "ab"]
    capsys.readouterr()
    assert main(["compare", *files, "--json"]) == 1  # the same bytes read whole: the same
    whole = json.loads(capsys.readouterr().out)
    assert (whole["first_divergent_step"], whole["steps_compared"]) == (3, 6)


def test_a_run_printing_a_number_that_does_not_fit(tmp_path: Path, capsys) -> None:
    """A JSON row without `type` (W&B-like) with `1e400` and an integer below -2**63: the live
    pair keeps both steps, names the values, and says INCOMPLETE, never inf or a rounded float."""
    script = tmp_path / "t.py"
    script.write_text(
        "import sys\n"
        'print(\'{"_step": 0, "loss": 1.0}\')\n'
        "print('{\"_step\": 1, \"loss\": %s}' % ('1e400' if sys.argv[1] == 'b' else '1.0'))\n"
        'print(\'{"_step": 2, "loss": -9223372036854775809}\')\n'
    )
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"),
            "--", sys.executable, str(script), "{side}"]  # fmt: skip
    assert main(argv) == 3
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["verdict"] == "INCOMPLETE" and out["unreadable"] == 3
    assert "b step 1: loss=1e400" in out["unreadable_first"]
    assert "do not fit a float64 or an int64" in out["reason"]


def test_a_script_printing_python_dicts_as_the_hf_trainer_does(tmp_path: Path, capsys) -> None:
    """An unchanged Trainer-style script: dicts without a step, rounded values as strings."""
    code, out = run_script_pair(
        tmp_path,
        capsys,
        "import sys\n"
        "b = sys.argv[1] == 'b'\n"
        "print('***** Running training *****')\n"
        "for i in range(4):\n"
        "    loss = '0.69%d' % (i + (1 if b and i >= 2 else 0))\n"
        "    print({'loss': loss, 'learning_rate': '5e-05', 'epoch': str(0.25 * (i + 1))})\n"
        "print({'train_runtime': '1.2', 'train_loss': '0.69', 'epoch': '1.0'})\n",
    )
    assert code == 1
    assert out["first_divergent_step"] == 2 and out["steps_compared"] == 5
    assert out["first_divergent_metrics"] == ["loss"]


def test_an_unchanged_hugging_face_trainer_script_as_a_live_pair(tmp_path: Path, capsys) -> None:
    """The real Trainer, nothing of tuimon in the script: its printed dicts are the steps."""
    pytest.importorskip("transformers")
    script = str(TESTS / "hf_trainer.py")
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), "--seed", "3",
            "--", sys.executable, script, "{seed}", str(tmp_path / "out-{side}")]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["verdict"] == "IDENTICAL" and out["steps_compared"] >= 10
    assert "train_runtime" in out["ignored"]  # its clocks are shown, not judged
