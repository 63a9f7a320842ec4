"""`tuimon explain`: traced reruns name the op where two runs part."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import TESTS, heavy_modules_after

from tuimon.cli import main
from tuimon.engine.analyses.explain import (
    describe,
    first_difference,
    hint,
    nondeterministic,
    rerun_argv,
    traced_steps,
)
from tuimon.tracing import requested_steps

TRAINER = str(TESTS / "trace_trainer.py")


def _op(i: int, op: str, h: str, phase: str = "forward", **extra: object) -> dict[str, object]:
    return {"type": "op", "i": i, "step": 0, "phase": phase, "op": op, "hashes": [h],
            "shapes": [[2, 2]], "dtypes": ["float32"], "devices": ["cpu"], **extra}  # fmt: skip


def test_traced_steps_are_the_step_before_and_the_step_itself():
    assert traced_steps({"first_divergent_step": 2}) == (2, [1, 2])
    assert traced_steps({"first_divergent_step": 0}) == (0, [0])


def test_rerun_of_the_reference_workload_stops_early_and_saves_nothing():
    argv = ["py", "-m", "tuimon", "train", "--steps", "300", "--save-emb", "/p/emb-a.npy"]
    assert rerun_argv(argv, 2) == ["py", "-m", "tuimon", "train", "--steps", "3", "--time-only"]
    assert rerun_argv(["python", "mine.py", "--steps", "9"], 2) == ["python", "mine.py",
                                                                    "--steps", "9"]  # fmt: skip


def test_requested_steps_need_both_variables():
    assert requested_steps({"TUIMON_TRACE_STEP": "2,1", "TUIMON_TRACE_FILE": "t"}) == [1, 2]
    assert requested_steps({"TUIMON_TRACE_STEP": "2"}) == []


def test_the_table_knows_index_put_with_accumulate_on_cpu_only():
    op = {"op": "aten.index_put.default", "devices": ["cpu"], "accumulate": True}
    assert "accumulate=True" in (nondeterministic(op) or "")
    assert nondeterministic({**op, "accumulate": False}) is None
    assert nondeterministic({"op": "aten.mm.default", "devices": ["cpu"]}) is None
    assert nondeterministic({"op": "aten.scatter_add.default", "devices": ["cuda:0"]})


def test_explain_of_a_two_thread_cpu_pair_prints_the_known_ops_entry_with_its_source(
    tmp_path: Path,
):
    """The op a 2-thread CPU pair of the workload parts at (measured: aten.index_put with
    accumulate in the backward of W_E[:, x]) is the table's entry: its fix and its source."""
    a = [_op(0, "aten.index_put.default", "x", "backward", accumulate=True, params=["W_E"])]
    b = [_op(0, "aten.index_put.default", "y", "backward", accumulate=True, params=["W_E"])]
    first = first_difference(a, b, tmp_path, tmp_path)
    assert first is not None and first["known"]["fix"] == "fixed"
    result = {"status": "explained", "first": first, "repeats": 1, "reproduced": 1,
              "first_counts": {"aten.index_put.default · backward · step 0 · W_E": 1}}  # fmt: skip
    result["hint"] = hint(first, result)
    line = describe(result)
    assert "at aten.index_put.default (accumulate=True) for W_E" in line
    assert "likely cause: a non-deterministic op: --deterministic fixes it" in line
    assert (
        "known: index_put with accumulate=True (the backward of indexing: the embedding's "
        "W_E[:, x]) on cpu with more than one thread: not deterministic; --deterministic "
        "fixes it (source: torch.use_deterministic_algorithms docs "
        "https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html; "
        "pytorch#51366 https://github.com/pytorch/pytorch/issues/51366"
    ) in line


def test_first_difference_is_in_order_and_sees_an_op_only_one_side_runs(tmp_path: Path):
    a = [_op(0, "aten.mm.default", "x"), _op(1, "aten.relu.default", "y")]
    b = [_op(0, "aten.mm.default", "x"), _op(1, "aten.relu.default", "z")]
    found = first_difference(a, b, tmp_path, tmp_path)
    assert found is not None and found["op"] == "aten.relu.default"
    assert found["kind"] == "values" and found["difference"] is None  # nothing saved
    b = [_op(0, "aten.mm.default", "x"), _op(1, "aten.mul_.Tensor", "q"), *b[1:]]
    found = first_difference(a, b, tmp_path, tmp_path)
    assert found is not None and found["kind"] == "sequence"
    assert (found["a_op"], found["b_op"]) == (None, "aten.mul_.Tensor")
    assert first_difference(a, a, tmp_path, tmp_path) is None


def _pair(store: Path, *trainer_args: str) -> Path:
    args = ["pair", "--headless", "--store", str(store), "--threads", "1", "--", sys.executable,
            TRAINER, *trainer_args]  # fmt: skip
    assert main(args) == 1  # DIVERGED
    (pair_dir,) = store.iterdir()
    return pair_dir


@pytest.mark.torch
def test_a_planted_perturbation_is_named_exactly(tmp_path: Path, capsys):
    pair_dir = _pair(tmp_path / "store", "--plant", "b")
    capsys.readouterr()
    assert main(["explain", "--yes", str(pair_dir), "--repeats", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "explained" and result["reproduced"] == 2
    first = result["first"]
    assert (first["op"], first["phase"], first["step"]) == ("aten.mm.default", "forward", 1)
    assert first["params"] == ["2.weight"] and first["module"] == "2 (Linear)"
    assert "trace_trainer.py" in first["line"] and "model(x)" in first["line"]
    assert first["dtypes"] == {"a": ["float32"], "b": ["float32"]}
    assert first["difference"]["elements_differ"] == 1
    assert first["difference"]["max_abs"] == pytest.approx(1e-3, rel=1e-3)
    assert first["nondeterministic"] is None and result["hint"] is None
    assert result["first_counts"] == {"aten.mm.default · forward · step 1 · 2.weight": 2}
    saved = json.loads((pair_dir / "pair.json").read_text())["explain"]
    assert saved["first"]["op"] == "aten.mm.default"
    for run in saved["runs"]:  # the raw traces stay, the saved op outputs do not
        for trace in run["traces"].values():
            assert (pair_dir / trace).is_file()
            assert not (pair_dir / (trace + ".tensors")).exists()
    assert "in 2 of 2 reruns" in describe(saved)


@pytest.mark.torch
def test_a_pair_that_does_not_diverge_on_rerun_says_so(tmp_path: Path, capsys):
    pair_dir = _pair(tmp_path / "store", "--plant", "b", "--plant-once", str(tmp_path / "m"))
    capsys.readouterr()
    assert main(["explain", "--yes", str(pair_dir), "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("explain: the reruns did not diverge") and out.count("\n") == 1
    saved = json.loads((pair_dir / "pair.json").read_text())["explain"]
    assert saved["status"] == "not_reproduced" and saved["reproduced"] == 0


@pytest.mark.torch
def test_a_script_without_the_helper_gets_one_line(tmp_path: Path, capsys):
    pair_dir = _pair(tmp_path / "store", "--plant", "b", "--no-helper")
    capsys.readouterr()
    assert main(["explain", "--yes", str(pair_dir)]) == 3
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "tuimon.tracing.trace_step" in out


@pytest.mark.torch
def test_pair_explain_runs_after_a_diverged_verdict(tmp_path: Path, capsys):
    store = tmp_path / "store"
    args = ["pair", "--headless", "--json", "--explain", "--store", str(store), "--threads", "1",
            "--", sys.executable, TRAINER, "--plant", "a", "--plant-step", "0"]  # fmt: skip
    assert main(args) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "DIVERGED" and record["first_divergent_step"] == 0
    assert record["explain"]["traced_steps"] == [0]
    assert record["explain"]["first"]["op"] == "aten.mm.default"
    (pair_dir,) = store.iterdir()
    assert json.loads((pair_dir / "pair.json").read_text())["explain"]["status"] == "explained"


def test_explain_of_something_that_is_not_a_pair_is_one_line(tmp_path: Path, capsys):
    assert main(["explain", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()  # the error, then where to read more
    assert len(lines) == 2 and lines[1] == "try: tuimon explain --help"
    assert main(["pair", "--explain", "--no-save", "--headless"]) == 2


@pytest.mark.torch
@pytest.mark.alone
def test_a_real_two_thread_cpu_pair_parts_in_the_gather_backward(tmp_path: Path, capsys):
    store = tmp_path / "store"
    # The contiguous gather races with 2 threads (the default view layout nearly never does,
    # and the test skipped); its reruns take ~20 s.
    args = ["pair", "--headless", "--json", "--explain", "--store", str(store), "--threads", "2",
            "--gather", "contiguous", "--p", "23", "--steps", "4", "--eval-every", "4"]  # fmt: skip
    main(args)
    record = json.loads(capsys.readouterr().out)
    if record["verdict"] != "DIVERGED":
        pytest.skip(f"the 2-thread race did not strike this time ({record['verdict']})")
    explained = record["explain"]
    k = record["first_divergent_step"]
    if "widened_from" in explained:  # the state step k-1 starts from differed: from step 0
        assert explained["widened_from"] == [k - 1, k]
        assert explained["traced_steps"] == list(range(k + 1))
    else:
        assert explained["traced_steps"] == [k - 1, k]
    for run in explained["runs"]:
        if run["first"] is not None:  # the race decides whether a rerun parts, not where
            first = run["first"]
            assert (first["op"], first["phase"]) == ("aten.index_put.default", "backward")
            assert first["params"] == ["W_E"] and first["accumulate"] is True
            assert "--deterministic fixes it" in first["nondeterministic"]
            assert "https://github.com/pytorch/pytorch/issues/51366" in first["nondeterministic"]
    if explained.get("first") is not None:
        assert "https://github.com/pytorch/pytorch/issues/51366" in describe(explained)


def test_a_saved_explained_pair_shows_its_line(tmp_path: Path):
    from tuimon.engine.analyses.explained import saved_line

    result = {"status": "not_reproduced", "message": "the reruns did not diverge: x"}
    assert saved_line({"explain": result}) == "explain: the reruns did not diverge: x"
    assert saved_line({}) is None


def test_the_monitor_side_imports_neither_torch_nor_textual():
    code = (
        "import tuimon.engine.analyses.explain, tuimon.tracing\n"
        "from tuimon.tracing import trace_step\n"
        "with trace_step(0):\n"
        "    pass\n"
    )
    assert heavy_modules_after(code) == "LOADED []"


def test_explain_has_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "--help"])
    assert exc.value.code == 0 and "--repeats" in capsys.readouterr().out
