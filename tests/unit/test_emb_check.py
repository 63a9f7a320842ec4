"""`tuimon emb-check SAVED RETRAIN`: files and folders, verdicts, exit codes, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_freqs import KNOWN, synthetic

from tuimon.cli import main
from tuimon.engine.judge.emb_check import seed_of

OTHER = {14: 5.0, 35: 4.0, 41: 3.0, 42: 2.0, 17: 1.0}


def emb(freqs: dict[int, float] = KNOWN, seed: int = 0) -> np.ndarray:
    """A (128, 114) float32 W_E with an '=' column, as the reference workload saves it."""
    w = synthetic(freqs, seed=seed)
    eq = np.random.default_rng(seed + 100).normal(size=(w.shape[0], 1))
    return np.concatenate([w, eq], axis=1).astype(np.float32)


def save(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return path


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["emb-check", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code, out, _ = check(capsys, *args, "--json")
    return code, json.loads(out)


def test_identical_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(tmp_path / "saved.npy", emb())
    b = save(tmp_path / "retrain.npy", emb())
    code, out, _ = check(capsys, a, b)
    assert code == 0
    assert "bitwise equal" in out and "key frequency sets agree" in out
    assert "14 35 41 42 52" in out and out.rstrip().endswith(
        "emb-check: IDENTICAL (1 of 1 seeds compared)"
    )


def test_known_difference_is_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = emb()
    v = w.copy()
    v[3, 7] += np.float32(0.25)
    a, b = save(tmp_path / "a.npy", w), save(tmp_path / "b.npy", v)
    code, doc = check_json(capsys, a, b)
    assert code == 1 and doc["verdict"] == "DIVERGED"
    seed = doc["seeds"][0]
    assert seed["elements_differ"] == 1 and seed["elements"] == w.size
    assert seed["bitwise_equal"] is False
    assert seed["max_abs"] == pytest.approx(abs(float(v[3, 7]) - float(w[3, 7])))
    expected_rel = abs(float(v[3, 7]) - float(w[3, 7])) / max(
        abs(float(v[3, 7])), abs(float(w[3, 7]))
    )
    assert seed["max_rel"] == pytest.approx(expected_rel)
    assert seed["key_freqs"]["agree"] is True
    assert seed["key_freqs"]["saved"]["freqs"] == list(KNOWN)
    # within a tolerance the same difference is CLOSE (exit 0)
    code, doc = check_json(capsys, a, b, "--tolerance", str(expected_rel * 1.01))
    assert code == 0 and doc["verdict"] == "CLOSE"


def test_different_key_frequencies_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = save(tmp_path / "a.npy", emb())
    b = save(tmp_path / "b.npy", emb(OTHER))
    code, out, _ = check(capsys, a, b)
    assert code == 1
    assert "key frequency sets differ: only saved [52], only retrain [17]" in out


def test_transposed_and_without_eq_column_compare_as_d_model_by_p(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = emb()
    a = save(tmp_path / "a.npy", w)
    b = save(tmp_path / "b.npy", w[:, :113].T.copy())  # (p, d_model): transposed, no '='
    code, doc = check_json(capsys, a, b)
    seed = doc["seeds"][0]
    assert seed["shape"] == {"saved": [128, 114], "retrain": [113, 128]}
    assert "compared as (d_model, p) (128, 113)" in seed["note"]
    assert seed["elements_differ"] == 0 and seed["bitwise_equal"] is False
    assert code == 0 and seed["verdict"] == "CLOSE"  # equal values, not the same bytes


def test_mismatched_shapes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = save(tmp_path / "a.npy", emb())
    b = save(tmp_path / "b.npy", np.zeros((128, 60), np.float32))
    code, out, err = check(capsys, a, b)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "shapes (128, 114) and (128, 60) differ" in err
    assert "not the same model" in err


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.array([["x"] * 114] * 128), "not a numeric array (dtype <U1)"),
        (np.array([{"a": 1}], dtype=object), "an object array, not numbers"),
        (np.zeros((2, 3, 4)), "W_E must be 2-dimensional"),
    ],
)
def test_non_numeric_arrays_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], array: np.ndarray, message: str
) -> None:
    a = save(tmp_path / "a.npy", emb())
    b = tmp_path / "b.npy"
    np.save(b, array, allow_pickle=True)
    code, _, err = check(capsys, a, b)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(tmp_path / "a.npy", emb())
    code, _, err = check(capsys, a, tmp_path / "missing.npy")
    assert code == 2 and "missing.npy: no such file or folder" in err
    code, _, err = check(capsys, a, tmp_path)
    assert code == 2 and "two .npy files or two folders" in err
    garbage = tmp_path / "g.npy"
    garbage.write_bytes(b"not numpy")
    code, _, err = check(capsys, a, garbage)
    assert code == 2 and "cannot read as .npy" in err and err.count("\n") == 1
    code, _, err = check(capsys, a, a, "--top", "0")
    assert code == 2 and "--top" in err


def test_folders_matched_seed_for_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved, retrain = tmp_path / "saved", tmp_path / "retrain"
    for s in (0, 1, 2):
        save(saved / f"emb-add-s{s}-mps.npy", emb(seed=s))
    save(retrain / "emb-add-s0-cpu.npy", emb(seed=0))
    save(retrain / "W_E_seed_1.npy", emb(seed=1))
    save(retrain / "notes.npy", emb(seed=5))
    code, out, _ = check(capsys, saved, retrain)
    assert code == 3  # seed 2 was not compared
    assert "seed 0: IDENTICAL" in out and "seed 1: IDENTICAL" in out
    assert "seed 2: INCOMPLETE: missing in RETRAIN (saved emb-add-s2-mps.npy)" in out
    assert "no seed in the name, not matched:" in out and "notes.npy" in out
    assert out.rstrip().endswith("emb-check: INCOMPLETE (2 of 3 seeds compared, 1 not compared)")
    code, doc = check_json(capsys, saved, retrain)
    assert code == 3 and doc["verdict"] == "INCOMPLETE"
    assert [(s["seed"], s["verdict"]) for s in doc["seeds"]] == [
        ("0", "IDENTICAL"), ("1", "IDENTICAL"), ("2", "INCOMPLETE")]  # fmt: skip
    assert doc["seeds"][2]["retrain"] is None


def test_folder_divergence_wins_over_a_missing_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved, retrain = tmp_path / "saved", tmp_path / "retrain"
    save(saved / "s0.npy", emb())
    save(saved / "s1.npy", emb(seed=1))
    save(retrain / "s0.npy", emb(OTHER))
    save(retrain / "s7.npy", emb())
    code, out, _ = check(capsys, saved, retrain)
    assert code == 1
    assert "seed 1: INCOMPLETE: missing in RETRAIN" in out
    assert "seed 7: INCOMPLETE: missing in SAVED" in out
    assert "emb-check: DIVERGED" in out


def test_folder_seed_errors_do_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved, retrain = tmp_path / "saved", tmp_path / "retrain"
    save(saved / "s0.npy", emb())
    save(saved / "s1.npy", emb())
    save(retrain / "s0.npy", emb())
    np.save(retrain / "s1.npy", np.array(["x", "y"]))
    save(retrain / "s1-again.npy", emb())
    code, out, _ = check(capsys, saved, retrain)
    assert code == 3 and "seed 0: IDENTICAL" in out
    assert "seed 1: INCOMPLETE: 2 files for this seed in one folder" in out


@pytest.mark.parametrize(
    ("name", "seed"),
    [("emb-add-s0-mps.npy", "0"), ("W_E_seed_12.npy", "12"), ("seed-3.npy", "3"),
     ("s07.npy", "7"), ("run037_s2.npy", "2"), ("emb.npy", None), ("mps0.npy", None)],
)  # fmt: skip
def test_seed_of_file_names(name: str, seed: str | None) -> None:
    assert seed_of(name) == seed


def test_emb_check_imports_neither_textual_nor_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    a = save(tmp_path / "a.npy", emb())
    code = (
        "import sys\n"
        "from tuimon.cli import main\n"
        f"code = main(['emb-check', {str(a)!r}, {str(a)!r}])\n"
        "import tuimon.freqs, tuimon.engine.judge.artifacts\n"
        "bad = [m for m in ('textual', 'torch') if m in sys.modules]\n"
        "sys.exit(f'loaded: {bad}' if bad else code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "IDENTICAL" in proc.stdout
