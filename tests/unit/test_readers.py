"""Readers: each format written the way its tool writes it, malformed variants, and the CLI."""

from __future__ import annotations

import csv
import json
import math
import os
import random
import sys
from pathlib import Path

import pytest
from helpers import twin
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.cli import main
from tuimon.clocks import is_clock
from tuimon.readers import (
    LineParser,
    ReaderError,
    Reading,
    load,
    log_lines,
    parse_map,
    require_steps,
    streamable,
    to_line,
)
from tuimon.readers.rows_to_steps import as_float
from tuimon.steplog import Header, Step, StepLogger, Text, parse_line


def steps(path: Path, reading: Reading | None = None, side: str = "a") -> list[Step]:
    return require_steps(load(path, reading, side), path)


def summary(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


# --- tuimon step logs and JSON Lines ---------------------------------------------------------


def test_tuimon_log_keeps_its_own_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with StepLogger(path, run={"seed": 0}) as log:
        log.step(0, loss=1.5, param_digest="ab")
        log.step(0, loss=1.5)  # a repeat stays a repeat: never merged away
    loaded = load(path)
    assert loaded.format == "tuimon step log"
    assert loaded.raw == [line for line in path.read_bytes().splitlines(True)]
    assert [r.step for r in loaded.steps] == [0, 0]
    assert log_lines(path) == loaded.raw


@pytest.mark.parametrize("key", ["step", "_step", "global_step", "iteration", "iter", "epoch"])
def test_jsonl_with_any_step_key(tmp_path: Path, key: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps({key: i, "loss": 1 / (i + 1)}) + "\n" for i in range(3)))
    got = steps(path)
    assert [s.step for s in got] == [0, 1, 2]
    assert got[2].metrics == {"loss": 1 / 3}


def test_epoch_is_the_step_only_when_nothing_finer_exists(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"epoch": 1, "step": 10, "loss": 0.5}\n{"epoch": 2, "loss": 0.4}\n')
    first, second = steps(path)
    assert (first.step, first.metrics) == (10, {"epoch": 1.0, "loss": 0.5})
    assert (second.step, second.metrics) == (2, {"loss": 0.4})


def test_wandb_history_rows_of_one_step_merge_and_clocks_are_kept_out(tmp_path: Path) -> None:
    path = tmp_path / "wandb-history.jsonl"
    rows = [
        {"_step": 0, "train/loss": 2.0, "_runtime": 1.2, "_timestamp": 1.7e9},
        {"_step": 0, "val/loss": 2.5, "eval_samples_per_second": 99.0},
        {"_step": 1, "train/loss": 1.5, "_runtime": 2.2},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    got = steps(path)
    assert [(s.step, s.metrics) for s in got] == [
        (0, {"train/loss": 2.0, "val/loss": 2.5}),
        (1, {"train/loss": 1.5}),
    ]
    assert got[0].t == 1.2


def test_a_key_repeated_within_a_step_keeps_both_values_in_order(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    rows = [{"step": 5, "loss": 1.0}, {"step": 5, "acc": 0.5}, {"step": 5, "loss": 2.0}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    got = steps(path)
    assert [(s.step, s.metrics) for s in got] == [
        (5, {"loss": 1.0, "acc": 0.5}),
        (5, {"loss": 2.0}),
    ]


# --- whole-run JSON documents ----------------------------------------------------------------


def lab_metrics(device: str, shift: float) -> dict:
    """A metrics file of the lab's kind: a hyper block, n_train/n_test, time_only, arrays."""
    steps_ = list(range(0, 300, 50))
    return {
        "hyper": {"task": "add_mod_113", "p": 113, "seed": 0, "lr": 1e-3, "steps": 300},
        "n_train": 3831,
        "n_test": 8938,
        "time_only": True,
        "device": device,
        "steps": steps_,
        "train_loss": [4.7 - 0.01 * i + (shift * i) for i in range(len(steps_))],
        "test_loss": [4.8 - 0.01 * i for i in range(len(steps_))],
        "step_time_ms": [12.5] * len(steps_),
    }


def test_lab_metrics_documents_compare_and_their_settings_are_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mps, cpu = tmp_path / "add-s0-mps.json", tmp_path / "add-s0-cpu.json"
    mps.write_text(json.dumps(lab_metrics("mps", 1e-6), indent=2))
    cpu.write_text(json.dumps(lab_metrics("cpu", 0.0), indent=2))
    loaded = load(mps)
    assert loaded.format == "JSON document"
    header = loaded.records[0]
    assert isinstance(header, Header)
    assert header.hyper["n_train"] == 3831 and header.hyper["time_only"] is True
    assert header.hyper["lr"] == 1e-3 and header.env == {"device": "mps"}
    assert all("step_time_ms" not in s.metrics for s in loaded.steps)  # a clock
    assert main(["compare", str(mps), str(cpu), "--json", "--save", "--store", str(tmp_path)]) == 1
    out = summary(capsys)
    assert out["first_divergent_step"] == 50 and out["steps_compared"] == 6
    meta = json.loads((Path(out["pair"]) / "pair.json").read_text())
    assert meta["hyper_diff"] == {} and meta["env_diff"] == {"device": ["mps", "cpu"]}
    assert main(["replay", out["pair"], "--headless", "--json", "--speed", "1e6"]) == 1


def test_document_arrays_of_two_lengths_and_a_list_of_rows(tmp_path: Path) -> None:
    doc = {
        "config": {"lr": 0.1},
        "metrics": {
            "steps": [0, 1, 2, 3],
            "train_loss": [4.0, 3.0, 2.0, 1.0],
            "eval_steps": [0, 2],
            "eval_loss": [4.5, None],
            "odd": [1.0, 2.0, 3.0],
        },
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    records = load(path).records
    got = [(r.step, r.metrics) for r in records if isinstance(r, Step)]
    assert got == [
        (0, {"train_loss": 4.0, "eval_loss": 4.5}),
        (1, {"train_loss": 3.0}),
        (2, {"train_loss": 2.0}),
        (3, {"train_loss": 1.0}),
    ]
    notes = [r.text for r in records if isinstance(r, Text)]
    assert notes == ["tuimon: not read: odd (3 values, no step array of that length)"]
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps({"hyper": {"lr": 1}, "history": [{"step": 0, "loss": 1.0}]}))
    assert [(s.step, s.metrics) for s in steps(rows)] == [(0, {"loss": 1.0})]


def trainer_state(loss_shift: float = 0.0) -> dict:
    """A trainer_state.json as transformers' Trainer.save_state writes it (indent 2)."""
    return {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": 2.0,
        "eval_steps": 10,
        "global_step": 20,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": [
            {"epoch": 1.0, "grad_norm": 3.1, "learning_rate": 4.5e-05, "loss": 2.3, "step": 10},
            {
                "epoch": 1.0,
                "eval_loss": 2.2 + loss_shift,
                "eval_runtime": 1.5,
                "eval_samples_per_second": 66.6,
                "eval_steps_per_second": 8.3,
                "step": 10,
            },
            {"epoch": 2.0, "grad_norm": 2.9, "learning_rate": 4e-05, "loss": 2.1, "step": 20},
            {
                "epoch": 2.0,
                "step": 20,
                "total_flos": 1234.0,
                "train_loss": 2.2,
                "train_runtime": 10.1,
                "train_samples_per_second": 5.0,
                "train_steps_per_second": 1.9,
            },
        ],
        "logging_steps": 10,
        "max_steps": 20,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 2,
        "save_steps": 500,
        "stateful_callbacks": {"TrainerControl": {"args": {"should_save": True}}},
        "total_flos": 1234.0,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }


def test_trainer_state_merges_train_and_eval_rows(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(trainer_state(), indent=2))
    loaded = load(path)
    assert loaded.format == "trainer_state.json"
    header = loaded.records[0]
    assert isinstance(header, Header) and header.hyper["logging_steps"] == 10
    assert "best_metric" not in header.hyper and "global_step" not in header.hyper
    first, last = loaded.steps
    assert first.metrics == {
        "epoch": 1.0, "grad_norm": 3.1, "learning_rate": 4.5e-05, "loss": 2.3, "eval_loss": 2.2,
    }  # fmt: skip
    assert "train_runtime" not in last.metrics and last.metrics["train_loss"] == 2.2


def test_trainer_states_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a" / "trainer_state.json", tmp_path / "b" / "trainer_state.json"
    for path, shift in ((a, 0.0), (b, 1e-7)):
        path.parent.mkdir()
        path.write_text(json.dumps(trainer_state(shift), indent=2))
    assert main(["compare", str(a), str(b), "--json"]) == 1
    out = summary(capsys)
    assert out["first_divergent_step"] == 10 and out["first_divergent_metrics"] == ["eval_loss"]


# --- CSV --------------------------------------------------------------------------------------


def lightning_csv(path: Path, shift: float = 0.0) -> None:
    """metrics.csv as Lightning's CSVLogger writes it: one row per log call, empty cells."""
    rows = []
    for epoch in range(2):
        step = 50 * (epoch + 1) - 1
        for s in range(step - 1, step + 1):
            rows.append({"epoch": epoch, "step": s, "train_loss": 1.0 / (s + 1) + shift})
        rows.append({"epoch": epoch, "step": step, "val_loss": 0.5 / (epoch + 1), "val_acc": 0.8})
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(
            fh, fieldnames=["epoch", "step", "train_loss", "val_acc", "val_loss"]
        )
        writer.writeheader()
        writer.writerows(rows)


def test_lightning_csv_rows_of_one_step_merge(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    lightning_csv(path)
    got = steps(path)
    assert load(path).format == "CSV"
    assert [s.step for s in got] == [48, 49, 98, 99]
    assert got[1].metrics == {"epoch": 0.0, "train_loss": 1 / 50, "val_acc": 0.8, "val_loss": 0.5}


def test_csv_against_jsonl_with_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "metrics.csv"
    lightning_csv(a)
    b = tmp_path / "b.jsonl"
    rows = [{"step": s.step, "loss": s.metrics["train_loss"]} for s in steps(a)]
    b.write_text("\n".join(json.dumps(r) for r in rows if not math.isnan(r["loss"])))
    assert main(["compare", str(a), str(b), "--json"]) == 3  # no metric in common
    capsys.readouterr()
    # the values only the CSV has (epoch, val_*) are values on one side only: differences
    assert main(["compare", str(a), str(b), "--json", "--map", "train_loss=loss"]) == 1
    assert summary(capsys)["metrics_only_a"] == ["epoch", "val_acc", "val_loss"]
    only = ["--map", "train_loss=loss", "--ignore", "epoch", "--ignore", "val_*"]
    assert main(["compare", str(a), str(b), "--json", *only]) == 0
    out = summary(capsys)
    assert out["verdict"] == "IDENTICAL" and out["steps_compared"] == 4


# --- TensorBoard -------------------------------------------------------------------------------


def write_events(folder: Path, shift: float = 0.0) -> None:
    """An event file written by TensorBoard's own writer."""
    writer_mod = pytest.importorskip("tensorboard.summary")
    writer = writer_mod.Writer(str(folder))
    for step in range(4):
        writer.add_scalar("train/loss", 1.0 / (step + 1) + (shift if step >= 2 else 0.0), step)
        if step % 2 == 1:
            writer.add_scalar("val/acc", 0.25 * step, step)
    writer.close()


def test_tensorboard_run_directory_and_event_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    write_events(a)
    write_events(b, shift=1e-3)
    loaded = load(a)
    assert loaded.format == "tensorboard"
    assert [(s.step, s.metrics) for s in loaded.steps][:2] == [
        (0, {"train/loss": 1.0}),
        (1, {"train/loss": 0.5, "val/acc": 0.25}),
    ]
    (event_file,) = a.iterdir()
    assert [s.step for s in steps(event_file)] == [0, 1, 2, 3]
    assert main(["compare", str(a), str(b), "--json"]) == 1
    assert summary(capsys)["first_divergent_step"] == 2
    nested = load(tmp_path / "runs")  # the parent: sub-directories prefix their tags
    assert "a/train/loss" in nested.steps[0].metrics


def test_tensorboard_missing_extra_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1.host").write_bytes(b"\x18\x00\x00\x00brain.Event:2")
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    assert main(["compare", str(run), str(twin(run))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'pip install -e ".[tensorboard]"' in err
    # the check of its records' checksums needs tensorboard too: the same line, never a crash
    monkeypatch.setitem(sys.modules, "tensorboard.compat.tensorflow_stub.pywrap_tensorflow", None)
    assert main(["read", str(run)]) == 2
    assert 'pip install -e ".[tensorboard]"' in capsys.readouterr().err


def test_tensorboard_garbage_event_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tensorboard")
    bad = tmp_path / "events.out.tfevents.1.host"
    bad.write_bytes(b"\x00" * 40 + os.urandom(200))
    assert main(["compare", str(bad), str(twin(bad))]) == 2
    assert "no training steps found" in capsys.readouterr().err


# --- printed text -------------------------------------------------------------------------------

NANOGPT = """\
tokens per iteration will be: 16,384
number of parameters: 0.80M
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2654, time 12008.38ms, mfu -100.00%
iter 10: loss 3.2371, time 77.43ms, mfu 5.00%
step 20: train loss 2.9000, val loss 2.9100
iter 20: loss 2.8000, time 75.01ms, mfu 5.01%
"""


def test_nanogpt_prints(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(NANOGPT)
    loaded = load(path)
    assert loaded.format == "text"
    assert [(s.step, s.metrics) for s in loaded.steps] == [
        (0, {"train_loss": 4.2874, "val_loss": 4.2823, "loss": 4.2654}),
        (10, {"loss": 3.2371}),
        (20, {"train_loss": 2.9, "val_loss": 2.91, "loss": 2.8}),
    ]
    assert [r.text for r in loaded.records if isinstance(r, Text)][
        1
    ] == "number of parameters: 0.80M"


@pytest.mark.parametrize(
    ("line", "step", "metrics"),
    [
        ("step 100: loss 2.31", 100, {"loss": 2.31}),
        ("Epoch 3 | batch 9 | loss=0.12 acc=0.9", 3, {"batch": 9.0, "loss": 0.12, "acc": 0.9}),
        ("step=7 loss=1e-3 grad_norm=0.5 lr=3e-4", 7, {"loss": 1e-3, "grad_norm": 0.5, "lr": 3e-4}),
        ("[step 5] loss: nan | time: 1.2s", 5, {"loss": math.nan}),
        ("Epoch 2, step 120: loss=0.5", 120, {"loss": 0.5, "epoch": 2.0}),
        # llm.c, torchtitan, torchvision's references: throughput and ETAs are clocks, and a
        # number with a thousands comma or a time of day is not read as its first digits
        ("step    1/74 | train loss 11.009184 | norm 15.4055 | lr 1.00e-06 | (102.11 ms | "
         "4999 tok/s)", 1, {"train_loss": 11.009184, "norm": 15.4055, "lr": 1e-06}),
        ("step:  1  loss: 12.2532  memory:  9.41GiB(23.79%)  wps: 3,201  mfu: 1.25%", 1,
         {"loss": 12.2532}),
        ("Epoch: [0]  [   0/5005]  eta: 5:06:52  lr: 0.1  img/s: 30.1  loss: 6.9342 (6.9342)",
         0, {"lr": 0.1, "loss": 6.9342, "loss_avg": 6.9342}),
    ],
)  # fmt: skip
def test_built_in_text_shapes(line: str, step: int, metrics: dict) -> None:
    parser = LineParser()
    assert parser.feed([line.encode() + b"\n"]) == []  # held until the step is over
    got = parser.close()
    assert len(got) == 1 and isinstance(got[0], Step) and got[0].step == step
    assert json.dumps(got[0].metrics) == json.dumps(metrics)  # NaN too


def test_tqdm_progress_is_read_at_its_last_state() -> None:
    line = (
        "Epoch 0:  50%|#####     | 1/2 [00:00<00:00, loss=3.00]\r"
        "Epoch 0: 100%|##########| 2/2 [00:00<00:00, 30.2it/s, loss=2.50]\r\n"
    )
    parser = LineParser()
    (step,) = parser.feed([line.encode()]) + parser.close()
    assert isinstance(step, Step) and step.metrics == {"loss": 2.5}


def test_lines_that_are_not_steps_stay_text() -> None:
    parser = LineParser()
    lines = [b"Saving checkpoint to out/ckpt.pt\n", b"loss went down\n", b"\x00\xff garbage\n"]
    got = parser.feed(lines) + parser.close()
    assert all(isinstance(r, Text) for r in got) and len(got) == 3


def test_user_pattern_replaces_the_built_in_shapes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("it 1 | L=0.5 | step 99: loss 7\nit 2 | L=0.25\n")
    reading = Reading(patterns=(r"it (?P<step>\d+) \| L=(?P<loss>\S+)",))
    assert [(s.step, s.metrics) for s in steps(path, reading)] == [
        (1, {"loss": 0.5}),
        (2, {"loss": 0.25}),
    ]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("(", "not a regular expression"), (r"(?P<loss>\S+)", "named group for the step"),
     (r"step (?P<step>\d+)", "named group per metric")],
)  # fmt: skip
def test_bad_pattern_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pattern: str, message: str
) -> None:
    path = tmp_path / "x.txt"
    path.write_text("step 1: loss 2\n")
    assert main(["compare", str(path), str(twin(path)), "--pattern", pattern]) == 2
    err = capsys.readouterr().err
    assert message in err and err.splitlines()[1:] == ["try: tuimon compare --help"]  # a hint


def test_bad_map_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="A_NAME=B_NAME"):
        parse_map(["loss"])
    path = tmp_path / "x.txt"
    path.write_text("step 1: loss 2\n")
    assert main(["compare", str(path), str(twin(path)), "--map", "=b"]) == 2


def test_text_logs_replay_headless(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(NANOGPT)
    b.write_text(NANOGPT.replace("3.2371", "3.2372"))
    assert main(["replay", str(a), str(b), "--headless", "--json", "--speed", "1e6"]) == 1
    assert summary(capsys)["first_divergent_step"] == 10


# --- malformed files and the streams' rules --------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"hyper": {"lr": 1}, "steps": [0, 1], "loss": [1.0',  # a document cut short
        b'{"hyper": {"lr": 1}}',  # settings and no steps
        b'{"log_history": "nope"}',
        b"epoch,step,loss\nx,y,z\n",
        b'[1, 2, "three"]',
        random.Random(512).randbytes(512).replace(b"\n", b" "),  # seeded: xdist's workers agree
    ],
)
def test_malformed_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["compare", str(path), str(twin(path))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err


def test_a_directory_without_events_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match="without TensorBoard event files"):
        load(tmp_path)


def test_records_written_back_as_lines_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(trainer_state()))
    records = load(path).records
    assert [parse_line(to_line(r)) for r in records] == records


def test_stream_merges_consecutive_rows_and_never_holds_tuimon_steps() -> None:
    parser = LineParser()
    assert parser.feed([b'{"step": 1, "loss": 1.0}\n', b'{"step": 1, "acc": 0.5}\n']) == []
    out = parser.feed([b'{"step": 2, "loss": 0.5}\n'])
    assert out == [Step(1, {"loss": 1.0, "acc": 0.5})]
    assert parser.close() == [Step(2, {"loss": 0.5})]
    tuimon = LineParser()
    assert tuimon.feed([b'{"type": "step", "step": 3, "loss": 1.0}\n']) == [Step(3, {"loss": 1.0})]


def test_map_renames_side_b_only(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step": 0, "val_loss": 1.0}\n')
    reading = Reading(rename=parse_map(["test_loss=val_loss"]))
    assert steps(path, reading, "a")[0].metrics == {"val_loss": 1.0}
    assert steps(path, reading, "b")[0].metrics == {"test_loss": 1.0}
    assert Reading.from_dict(reading.to_dict()) == reading


def test_streamable_heads() -> None:
    assert streamable(b'{"step": 0, "loss": 1}\n{"st')
    assert streamable(b"iter 0: loss 4.2\n")
    assert not streamable(b'{\n  "log_history": [')
    assert not streamable(b"epoch,step,train_loss\n0,1,")
    assert not streamable(b"\x18\x00\x00\x00\x00\x00\x00\x00brain.Event:2")


@pytest.mark.parametrize(
    ("name", "clock"),
    [("t", True), ("train_runtime", True), ("eval_samples_per_second", True), ("mfu", True),
     ("step_time_ms", True), ("_timestamp", True), ("loss", False), ("lr", False),
     ("val_acc", False), ("grad_norm", False), ("epoch", False)],
)  # fmt: skip
def test_clock_rule(name: str, clock: bool) -> None:
    assert is_clock(name) is clock


OVERFLOWS = {
    "jsonl step": '{"step":0,"loss":1.0}\n{"step":1,"loss":%s}\n',
    "jsonl _step": '{"_step":0,"loss":1.0}\n{"_step":1,"loss":%s}\n',
    "document": '{"hyper":{"lr":0.1},"log":[{"step":0,"loss":1.0},{"step":1,"loss":%s}]}',
    "csv": "step,loss\n0,1.0\n1,%s\n",
    "text": "step 0: loss 1.0\nstep 1: loss %s\n",
}


@pytest.mark.parametrize("number", ["1e400", "-1e400", "99999999999999999999999",
                                    "-9223372036854775809", "9223372036854775808"])  # fmt: skip
@pytest.mark.parametrize("kind", OVERFLOWS)
def test_a_number_that_does_not_fit_is_reported_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, number: str
) -> None:
    """`1e400` or an integer beyond int64 is neither dropped nor taken as inf or a rounded
    float: the step is kept, the value named, the verdict INCOMPLETE with the reason."""
    path = tmp_path / ("log.csv" if kind == "csv" else "log.txt" if kind == "text" else "log")
    path.write_text(OVERFLOWS[kind] % number)
    steps = [r for r in load(path).records if isinstance(r, Step)]
    assert [s.step for s in steps] == [0, 1]
    assert steps[1].metrics == {} and steps[1].unreadable == (f"loss={number}",)
    assert main(["compare", str(path), str(twin(path))]) == 3
    out = capsys.readouterr().out
    assert out.startswith("INCOMPLETE") and "do not fit a float64 or an int64" in out
    assert f"step 1: loss={number}" in out


def test_infinity_spelled_out_is_a_value_not_an_overflow() -> None:
    assert as_float("inf") == math.inf and as_float("-Infinity") == -math.inf
    assert math.isnan(as_float("nan") or 0.0) and as_float("1e308") == 1e308


HF_PRINTS = [
    "***** Running training *****",
    "{'loss': 0.6931, 'grad_norm': 1.2345, 'learning_rate': 5e-05, 'epoch': 0.5}",
    "{'loss': nan, 'grad_norm': inf, 'learning_rate': 4.9e-05, 'epoch': 1.0}",
    "{'eval_loss': 0.69, 'eval_accuracy': 0.5, 'eval_runtime': 1.2, "
    "'eval_samples_per_second': 100.0, 'epoch': 1.0}",
    "{'train_runtime': 12.3, 'train_steps_per_second': 1.0, 'train_loss': 0.65, 'epoch': 1.0}",
]


def test_printed_python_dicts_are_rows_numbered_in_order() -> None:
    """What the Hugging Face Trainer prints: dicts without a step, numbered as printed; its
    float epochs are metrics; clocks stay clocks; nan/inf are values."""
    parser = LineParser()
    records = parser.feed([(line + "\n").encode() for line in HF_PRINTS]) + parser.close()
    steps = [r for r in records if isinstance(r, Step)]
    assert [s.step for s in steps] == [0, 1, 2, 3]
    assert steps[0].metrics == {"loss": 0.6931, "grad_norm": 1.2345, "learning_rate": 5e-05,
                                "epoch": 0.5}  # fmt: skip
    assert math.isnan(steps[1].metrics["loss"]) and steps[1].metrics["grad_norm"] == math.inf
    assert "eval_runtime" in steps[2].clocks and "eval_runtime" not in steps[2].metrics
    assert isinstance(records[0], Text)


def test_printed_dicts_with_a_step_key_or_int_epochs_use_it() -> None:
    parser = LineParser()
    lines = [b"{'epoch': 3, 'loss': 0.5}\n", b"{'epoch': 4, 'loss': -inf}\n", b"{'lr': 1.0}\n"]
    steps = [r for r in parser.feed(lines) + parser.close() if isinstance(r, Step)]
    assert [s.step for s in steps] == [3, 4]  # once steps are given, a dict without one is text
    assert steps[1].metrics == {"loss": -math.inf}


@pytest.mark.parametrize("line", [
    "{'x': __import__('os').system('touch /tmp/tuimon-pwned')}",  # never run: literals only
    "{'a': 'b'}",  # no number: text
    "{'a': 1",  # not a dict
    "{1: 2.0}",  # keys are not names
    "{'x': " + "[" * 5000 + "]" * 5000 + "}",  # too deep for the parser
])  # fmt: skip
def test_printed_things_that_are_not_rows_stay_text(line: str) -> None:
    parser = LineParser()
    records = parser.feed([line.encode() + b"\n"]) + parser.close()
    assert len(records) == 1 and isinstance(records[0], Text)
    assert not Path("/tmp/tuimon-pwned").exists()


def test_printed_dict_logs_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("\n".join(HF_PRINTS) + "\n")
    b.write_text("\n".join(HF_PRINTS).replace("0.6931", "0.6932") + "\n")
    assert main(["compare", str(a), str(b), "--json"]) == 1
    out = summary(capsys)
    assert out["first_divergent_step"] == 0 and out["steps_compared"] == 4


FRAGMENTS = ["'a'", "'step'", "'epoch'", ":", ",", "1", "-2", "1e400", "9" * 25, "nan", "-inf",
             "{", "}", "[", "]", "(", ")", "'", "\\", " ", "None", "True", "1j", "b'x'", "...",
             "0x1", "1_0", "f'x'", "__import__('os')", "\x1b[2J"]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(FRAGMENTS)).map("".join)))
def test_any_printed_dict_like_line_is_a_record_or_text(body: str) -> None:
    """Whatever follows `{'` on a line (and ends in `}`), the parser gives a record, never an
    exception."""
    parser = LineParser()
    line = ("{'" + body + "}").encode("utf-8", "replace") + b"\n"
    records = parser.feed([line]) + parser.close()
    assert len(records) == 1 and isinstance(records[0], (Step, Text))
