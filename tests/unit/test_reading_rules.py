"""Reading by principle: every line judged, clocks and counters by name and unit, two-level
steps, running averages, where the runs part named by line, one file given twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import twin

from tuimon.cli import main
from tuimon.clocks import is_clock, mask_clocks, text_numbers
from tuimon.readers import load, locate
from tuimon.readers.text import LEVEL, parse_text


def compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *args])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "name",
    ["ms_per_iter", "time/fps", "data_time", "eta", "iter_time", "train_runtime", "tok/s",
     "eval_samples_per_second", "perf/throughput", "timers/iteration_time", "step_ms",
     "time/time_elapsed", "tokens_per_sec", "mfu", "data", "_timestamp", "speed"],
)  # fmt: skip
def test_clocks_by_leaf_name_and_unit(name: str) -> None:
    assert is_clock(name)


@pytest.mark.parametrize(
    "name",
    ["throughput/total_tokens", "total_training_Gflops", "num_tokens", "consumed_samples",
     "time/total_timesteps", "total_flos", "loss", "lr", "time/iterations", "max_mem",
     "grad_norm", "loss_s", "rollout/ep_rew_mean"],
)  # fmt: skip
def test_counters_and_metrics_are_never_clocks(name: str) -> None:
    assert not is_clock(name)


def test_clocks_in_text_are_masked_and_the_rest_is_judged() -> None:
    line = (
        "2023-01-01 12:00:00,123 - INFO - Epoch: [108]  [ 50/500]  eta: 0:01:23  lr: 0.0001  "
        "loss: 1.2345 (1.3456)  time: 0.5123 (0.52)  data: 0.0123  max mem: 1234 12.5it/s 3ms/step"
    )
    assert text_numbers(line) == ("108", "50", "500", "0.0001", "1.2345", "1.3456", "1234")
    assert "0.5123" not in mask_clocks(line) and "12:00" not in mask_clocks(line)


@pytest.mark.parametrize(
    ("line", "epoch", "iteration", "metrics"),
    [
        ("Epoch [7][2750/6207]\tlr: 1.000e-02, eta: 1 day, 2:03:04, time: 0.512, "
         "data_time: 0.010, memory: 3456, loss: 0.7643", 7, 2750, {"lr", "memory", "loss"}),
        ("Epoch: [108]  [ 50/500]  eta: 0:01:23  lr: 0.000100  loss: 1.2345 (1.3456)  "
         "time: 0.5123  data: 0.0123", 108, 50, {"lr", "loss", "loss_avg"}),
        ("Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.29", 1, 640, {"loss"}),
        ("Train: 3 [ 50/625 (  8%)]  Loss: 3.456 (3.567)  Time: 0.123s,  520.3/s  "
         "LR: 1.000e-03  Data: 0.012 (0.015)", 3, 50, {"loss", "loss_avg", "lr"}),
        ("[1,  2000] loss: 2.187", 1, 2000, {"loss"}),
    ],
)  # fmt: skip
def test_two_level_steps(line: str, epoch: int, iteration: int, metrics: set[str]) -> None:
    step = parse_text(line)
    assert step is not None and step.step == epoch * LEVEL + iteration
    assert set(step.metrics) == metrics


def test_a_banner_with_a_thousands_separator_is_not_a_step() -> None:
    assert parse_text("tokens/iter = 393,216 | batch = 12 | vocab = 16384") is None


def _mmcv(path: Path, bump: bool = False, clock: float = 0.0) -> Path:
    lines = []
    for ep in range(1, 4):
        for it in range(50, 301, 50):
            loss = 1.0 / (ep * 1000 + it) + (0.001 if bump and (ep, it) == (2, 150) else 0.0)
            lines.append(
                f"2023-01-01 12:00:{it % 60:02d},123 - mmdet - INFO - Epoch [{ep}][{it}/300]\t"
                f"lr: 1.000e-02, eta: 0:0{ep}:00, time: {0.5 + clock:.3f}, data_time: 0.010, "
                f"memory: 3456, loss: {loss:.4f}"
            )
        lines.append(f"2023-01-01 12:00:00,123 - mmdet - INFO - Epoch(val) [{ep}][300]\t"
                     f"bbox_mAP: {0.3 + ep / 100:.4f}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_mmcv_log_itself_a_change_clocks_and_a_cut(tmp_path: Path, capsys) -> None:
    a = _mmcv(tmp_path / "a.log")
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 18)
    assert out["step_levels"] and out["text"]["compared"] == 3
    code, out = compare(capsys, str(a), str(_mmcv(tmp_path / "c.log", clock=0.25)))
    assert (code, out["verdict"]) == (0, "IDENTICAL")
    code, out = compare(capsys, str(a), str(_mmcv(tmp_path / "b.log", bump=True)))
    assert code == 1 and out["first_divergent_at"] == {"epoch": 2, "iteration": 150}
    assert out["first_divergent_lines"] == {"a": 10, "b": 10}
    cut = tmp_path / "cut.log"
    cut.write_bytes(a.read_bytes()[: a.stat().st_size * 3 // 5])
    assert compare(capsys, str(a), str(cut))[0] == 3


def test_an_evaluation_line_nobody_reads_is_judged_as_text(tmp_path: Path, capsys) -> None:
    def log(path: Path, avg: str) -> Path:
        lines = []
        for ep in (1, 2):
            lines += [f"step {ep * 10 + i}: loss {1 / (ep + i):.6f}" for i in range(5)]
            lines += ["", f"Test set: Average loss: {avg if ep == 2 else '0.0400'}, Accuracy: "
                      f"9898/10000 (99%)", "Saving to /tmp/run-x/model.pt"]  # fmt: skip
        path.write_text("\n".join(lines) + "\n")
        return path

    a = log(tmp_path / "a.log", "0.0326")
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"]) == (0, "IDENTICAL")
    code, out = compare(capsys, str(a), str(log(tmp_path / "b.log", "0.0327")))
    assert code == 1 and out["first_divergent_step"] == 24
    assert out["text"]["first"]["text_b"].startswith("Test set: Average loss: 0.0327")
    assert out["first_divergent_lines"] == {"a": 15, "b": 15}
    main(["compare", str(a), str(tmp_path / "b.log")])
    assert "Test set: Average loss: 0.0327" in capsys.readouterr().out.splitlines()[0]


def test_text_on_one_side_only_is_incomplete(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a.log"
    a.write_text("step 1: loss 0.5\nstep 2: loss 0.4\nfinal accuracy 0.93\n")
    b = tmp_path / "b.log"
    b.write_text("step 1: loss 0.5\nstep 2: loss 0.4\n")
    code, out = compare(capsys, str(a), str(b))
    assert code == 3 and "text lines on one side only: a 1, b 0" in out["reason"]


def test_a_list_value_and_a_running_average_are_judged(tmp_path: Path, capsys) -> None:
    rows = [{"epoch": i, "loss": 1 / (i + 1), "test_coco_eval_bbox": [0.1 * i, 0.2, 0.3]}
            for i in range(5)]  # fmt: skip
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows[3]["test_coco_eval_bbox"][2] = 0.31
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "test_coco_eval_bbox[2]" in load(a).steps[0].metrics
    code, out = compare(capsys, str(a), str(b))
    assert code == 1 and out["first_divergent_step"] == 3
    assert out["first_divergent_metrics"] == ["test_coco_eval_bbox[2]"]


def test_one_file_given_twice_is_said(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a.log"
    a.write_text("step 1: loss 0.5\n")
    assert main(["compare", str(a), str(a)]) == 2
    assert "the same file" in capsys.readouterr().err
    link = tmp_path / "link.log"
    link.symlink_to(a)
    assert main(["replay", str(a), str(link), "--headless"]) == 2


def test_locate_finds_a_step_and_a_text_line(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    a.write_text("hello\n\nstep 1: loss 0.5\nstep 2: loss 0.4\nstep 1: loss 0.3\nbye 3\n")
    assert locate(a, step=2) == 4 and locate(a, step=1, occurrence=1) == 5
    assert locate(a, text=2) == 6 and locate(a, step=9) is None


def _table(path: Path, header: str, rows: list[str], comment: str = "") -> Path:
    path.write_text(comment + header + "\n" + "".join(r + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("header", "row", "comment", "how"),
    [
        ("time/fps,time/iterations,time/time_elapsed,time/total_timesteps,train/loss",
         "{fps},{i},{t},{ts},{loss}", "", "step column 'time/total_timesteps'"),
        ("r,l,t", "{loss},200,{t}", '#{"t_start": 1700000000.1, "env_id": "CartPole-v1"}\n',
         "no step column: the row number"),
        ("Epoch\tAverageEpRet\tTotalEnvInteracts\tTime", "{i}\t{loss}\t{ts}\t{t}", "",
         "step column 'Epoch'"),
        ("epoch     train_loss  valid_loss  time", "{i:<10}{loss:<12}{loss:<12}00:{i:02d}", "",
         "step column 'epoch'"),
    ],
)  # fmt: skip
def test_tables_told_by_content(
    tmp_path: Path, capsys, header: str, row: str, comment: str, how: str
) -> None:
    def rows(bump: int | None = None, clock: float = 0.0) -> list[str]:
        return [
            row.format(
                fps=900 + i + int(clock),
                i=i,
                t=f"{i * 1.5 + clock:.3f}",
                ts=2048 * i,
                loss=f"{1 / (i + 1) + (0.01 if i == bump else 0):.5f}",
            )
            for i in range(1, 30)
        ]

    a = _table(tmp_path / "a.txt", header, rows(), comment)
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 29)
    assert any(how in note for note in out["accounts"]["a"]["notes"])
    clocks = _table(tmp_path / "c.txt", header, rows(clock=0.5), comment)
    assert compare(capsys, str(a), str(clocks))[0] == 0
    changed = _table(tmp_path / "b.txt", header, rows(bump=12), comment)
    code, out = compare(capsys, str(a), str(changed))
    assert code == 1 and out["first_divergent_lines"] is not None
    cut = tmp_path / "cut.txt"
    cut.write_bytes(a.read_bytes()[: a.stat().st_size * 3 // 5])
    assert compare(capsys, str(a), str(cut))[0] == 3


def test_read_shows_format_step_key_metrics_and_clocks(tmp_path: Path, capsys) -> None:
    a = _mmcv(tmp_path / "a.log")
    assert main(["read", str(a), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["format"] == "text" and "epoch and iteration" in got["step_key"]
    assert got["metrics"] == ["lr", "memory", "loss"] and got["clocks"] == ["time", "data_time"]
    assert got["steps"] == 18 and got["text_lines"] == 3 and len(got["first"]) == 5
    rows = tmp_path / "r.jsonl"
    rows.write_text("".join(json.dumps({"iter": i, "loss": 0.5, "ms_per_iter": 3}) + "\n"
                            for i in range(4)))  # fmt: skip
    assert main(["read", str(rows)]) == 0
    out = capsys.readouterr().out
    assert "step: iter" in out and "clocks, not judged (1): ms_per_iter" in out
    assert main(["read", str(tmp_path / "nope.log")]) == 2


def test_a_csv_quote_that_never_closes_is_incomplete_never_identical(
    tmp_path: Path, capsys
) -> None:
    rows = ["step,loss,note", *(f"{i},{1 / (i + 1)},ok" for i in range(100))]
    rows[5] = '4,0.2,"unclosed'
    a = tmp_path / "a.csv"
    a.write_text("\n".join(rows) + "\n")
    rows[50] = "49,9.0,ok"  # swallowed by the open quote on both sides
    b = tmp_path / "b.csv"
    b.write_text("\n".join(rows) + "\n")
    code, out = compare(capsys, str(a), str(b))
    assert code == 3 and "quote that does not close" in out["reason"]


@pytest.mark.parametrize("row", ["49,9.0,ok,7", "49,9.0", "49,0.02,ok,1,2"])
def test_a_csv_row_with_more_or_fewer_cells_is_never_read_silently(
    tmp_path: Path, capsys, row: str
) -> None:
    """A row of numbers whose cells do not match the header's names: which value is whose
    cannot be known, so it is not read, and the verdict says so (on both sides alike too)."""
    rows = ["step,loss,note", *(f"{i},{1 / (i + 1)},ok" for i in range(100))]
    a = tmp_path / "a.csv"
    a.write_text("\n".join(rows) + "\n")
    rows[50] = row
    b = tmp_path / "b.csv"
    b.write_text("\n".join(rows) + "\n")
    code, out = compare(capsys, str(a), str(b))
    assert code == 3 and "cells where the header names 3" in out["reason"], out
    (twin := tmp_path / "b2.csv").write_bytes(b.read_bytes())
    code, out = compare(capsys, str(b), str(twin))
    assert code == 3 and out["verdict"] == "INCOMPLETE"


def test_empty_cells_past_the_header_are_no_cells(tmp_path: Path, capsys) -> None:
    rows = ["step,loss", *(f"{i},{1 / (i + 1)}," for i in range(10))]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("\n".join(rows) + "\n")
    b.write_text("\n".join(rows) + "\n")
    code, out = compare(capsys, str(a), str(b))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 10)


def _mlflow(run: Path, bump: bool = False, clock: int = 0) -> Path:
    for name in ("loss", "train/acc"):
        path = run / "metrics" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            f"{1700000000000 + 10 * i + clock} {1 / (i + 1) + (0.5 if bump and i == 7 else 0)} {i}"
            for i in range(20)
        ]
        path.write_text("\n".join(lines) + "\n")
    return run


def test_an_mlflow_run_folder(tmp_path: Path, capsys) -> None:
    a = _mlflow(tmp_path / "a")
    code, out = compare(capsys, str(a), str(_mlflow(tmp_path / "a2")))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 20)
    assert compare(capsys, str(a), str(_mlflow(tmp_path / "c", clock=3)))[0] == 0
    code, out = compare(capsys, str(a), str(_mlflow(tmp_path / "b", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 7
    cut = _mlflow(tmp_path / "cut")
    (cut / "metrics" / "loss").write_text("1700000000000 1.0 0\n17000")
    assert compare(capsys, str(a), str(cut))[0] == 3


def _sacred(path: Path, bump: bool = False, clock: float = 0.0) -> Path:
    doc = {
        name: {"steps": list(range(0, 50, 5)),
               "values": [i / 7 + (1 if bump and i == 20 and name == "test.acc" else 0)
                          for i in range(0, 50, 5)],
               "timestamps": [f"2020-01-01T00:00:{i + clock:02.0f}" for i in range(10)]}
        for name in ("train.loss", "test.acc")
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def test_a_sacred_metrics_json(tmp_path: Path, capsys) -> None:
    a = _sacred(tmp_path / "metrics.json")
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 10)
    assert compare(capsys, str(a), str(_sacred(tmp_path / "c.json", clock=3)))[0] == 0
    code, out = compare(capsys, str(a), str(_sacred(tmp_path / "b.json", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 20
    assert out["first_divergent_metrics"] == ["test.acc"]


def test_a_step_named_after_its_values(tmp_path: Path, capsys) -> None:
    def log(path: Path, bump: bool = False) -> Path:
        path.write_text("".join(f"loss = {1 / (i + 1) + (0.1 if bump and i == 30 else 0):.5f}, "
                                f"step = {1000 + i}\n" for i in range(50)))  # fmt: skip
        return path

    a = log(tmp_path / "a.log")
    assert compare(capsys, str(a), str(twin(a)))[1]["steps_compared"] == 50
    code, out = compare(capsys, str(a), str(log(tmp_path / "b.log", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 1030
    assert out["first_divergent_lines"] == {"a": 31, "b": 31}


def test_a_cut_document_is_incomplete_however_little_is_missing(tmp_path: Path, capsys) -> None:
    a = _sacred(tmp_path / "metrics.json")
    cut = tmp_path / "cut.json"
    cut.write_bytes(a.read_bytes()[: a.stat().st_size * 6 // 10])
    code, out = compare(capsys, str(a), str(cut))
    assert code == 3 and "cut short" in out["reason"]


@pytest.mark.parametrize(
    ("name", "a", "b"),
    [
        ("x.jsonl", '{"step": 1, "tokens": 9007199254740993}\n',
         '{"step": 1, "tokens": 9007199254740992}\n'),
        ("x.csv", "step,tokens\n1,9007199254740993\n", "step,tokens\n1,9007199254740992\n"),
        ("x.log", "step 1: tokens 9007199254740993\n", "step 1: tokens 9007199254740992\n"),
        ("t.jsonl",
         '{"type": "step", "step": 1, "tokens": 9007199254740993}\n',
         '{"type": "step", "step": 1, "tokens": 9007199254740992}\n'),
    ],
)  # fmt: skip
def test_integers_are_compared_as_integers(
    tmp_path: Path, capsys, name: str, a: str, b: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pa, pb = tmp_path / "a" / name, tmp_path / "b" / name
    pa.write_text(a * 3)
    pb.write_text(b * 3)
    code, out = compare(capsys, str(pa), str(pb))
    assert code == 1 and out["first_divergent_metrics"] == ["tokens.low_bits"]
    assert compare(capsys, str(pa), str(twin(pa)))[0] == 0


def test_an_integer_beyond_64_bits_with_underscores_is_never_equal(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a.log"
    a.write_text("step 0: tokens 1_000_000_000_000_000_000_001\n")
    b = tmp_path / "b.log"
    b.write_text("step 0: tokens 1_000_000_000_000_000_000_000\n")
    assert compare(capsys, str(a), str(b))[0] == 3


def _dumped(path: Path, bump: bool = False) -> Path:
    lines = ["Logging to /tmp/openai-2018", "-" * 40, "env info: python 3.8", "-" * 40]
    for i in range(6):
        ret = -100 + i + (0.5 if bump and i == 3 else 0)
        lines += ["-" * 39, f"| rollout/return   | {ret:<8} |",
                  f"| total/steps      | {2000 * (i + 1):<8} |",
                  f"| total/duration   | {i * 3.3:<8.3g} |", "-" * 39]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_dumped_table_is_a_record_stepped_by_its_step_key(tmp_path: Path, capsys) -> None:
    a = _dumped(tmp_path / "a.txt")
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["steps_compared"]) == (0, 6) and "total/duration" in out["ignored"]
    code, out = compare(capsys, str(a), str(_dumped(tmp_path / "b.txt", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 8000
    assert main(["read", str(a)]) == 0
    assert "step: total/steps" in capsys.readouterr().out


def _folder(path: Path, bump: bool = False) -> Path:
    path.mkdir()
    for e in range(5):
        doc = {"training_loss": 1 / (e + 1) + (0.5 if bump and e == 3 else 0),
               "training_duration": f"0:0{e}:00", "best_epoch": 0}  # fmt: skip
        (path / f"metrics_epoch_{e}.json").write_text(json.dumps(doc))
    return path


def test_a_folder_of_json_files_one_per_epoch(tmp_path: Path, capsys) -> None:
    a = _folder(tmp_path / "a")
    code, out = compare(capsys, str(a), str(_folder(tmp_path / "c")))
    assert (code, out["steps_compared"]) == (0, 5)
    code, out = compare(capsys, str(a), str(_folder(tmp_path / "b", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 3


def test_json_rows_stepped_by_a_counter_found_by_its_name(tmp_path: Path, capsys) -> None:
    rows = [{"episode_reward_mean": 10 + i, "training_iteration": i + 1,
             "time_this_iter_s": 3.2 + i} for i in range(8)]  # fmt: skip
    a = tmp_path / "result.json"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["steps_compared"]) == (0, 8) and "time_this_iter_s" in out["ignored"]
    assert main(["read", str(a)]) == 0
    assert "training_iteration (by content" in capsys.readouterr().out


def _keras(path: Path, bump: bool = False, clock: int = 0) -> Path:
    lines = []
    for e in range(1, 6):
        loss = 1 / e + (0.001 if bump and e == 3 else 0)
        lines += [f"Epoch {e}/5", f"1563/1563 [==============================] - {e + clock}s "
                  f"3ms/step - loss: {loss:.4f} - accuracy: {0.5 + e / 20:.4f}"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_values_printed_under_a_heading_are_its_step(tmp_path: Path, capsys) -> None:
    a = _keras(tmp_path / "a.log")
    code, out = compare(capsys, str(a), str(_keras(tmp_path / "c.log", clock=2)))
    assert (code, out["steps_compared"]) == (0, 5)
    code, out = compare(capsys, str(a), str(_keras(tmp_path / "b.log", bump=True)))
    assert code == 1 and out["first_divergent_step"] == 3


def test_fairseq_steps_by_num_updates_and_words_that_are_not_values() -> None:
    line = "| epoch 001 | loss 9.834 | ppl 912.47 | wps 12345 | num_updates 100 | lr 0.0005"
    step = parse_text(line)
    assert step is not None and step.step == 100 and step.metrics["epoch"] == 1.0
    nan = parse_text("step 5: number of nan iterations: 0")
    assert nan is not None and nan.metrics == {"iterations": 0.0}
    loss = parse_text("step 5: train loss nan, val loss 2.1")
    assert loss is not None and set(loss.metrics) == {"train_loss", "val_loss"}


def test_thousands_of_metric_names_stay_in_bounded_memory(tmp_path: Path) -> None:
    """A log with a new metric name every step: judged row by row (memory follows the values,
    not names x steps); measured in a child process."""
    import subprocess
    import sys

    for side in "ab":
        rows = (json.dumps({"step": i, f"m{i}": 0.5 + (side == "b" and i == 7000)})
                for i in range(10_000))  # fmt: skip
        (tmp_path / f"{side}.jsonl").write_text("\n".join(rows) + "\n")
    child = (  # a child of a child: RUSAGE_CHILDREN is tuimon's alone
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(p.stdout)"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, sys.executable, "-m", "tuimon", "compare", "--json",
         str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")],
        capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    head, _, rest = done.stdout.partition("\n")
    code, peak_kib = map(int, head.split())
    out = json.loads(rest.strip().splitlines()[-1])
    assert code == 1 and out["first_divergent_step"] == 7000
    assert peak_kib < 600 * 1024  # was 5 GiB
