"""Formats users have, read right without flags. Each test writes its own small log in the
shape the tool writes (no log from elsewhere is committed), and checks: the steps and metrics
read, clocks shown not judged, a changed value at a known step found, a copy cut short
INCOMPLETE."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import twin

from tuimon.cli import main
from tuimon.readers import load
from tuimon.readers.lines import BOM, LineParser


def compare(capsys, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *args])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def olmo(loss: Callable[[int], float], clock: float = 1.0) -> str:
    lines = [
        "2025-12-27 22:11:53.985\thost-03:0\ttrain:417\tINFO\tCLI environment prepared",
        "2025-12-27 22:11:54.019\thost-03:0\ttrain:98\tINFO\tTrainConfig(d_model=768, seed=6)",
    ]
    for step in range(10, 110, 10):
        lines += [
            f"2025-12-27 22:12:56.867\thost-03:0\tolmo.train:990\tINFO\t[step={step}/1000,epoch=0]",
            f"    optim/total_grad_norm={1.5 + step / 1000}",
            f"    train/CrossEntropyLoss={loss(step)}",
            "    train/Perplexity=8,641",
            f"    throughput/device/tokens_per_second={105_477 * clock:,.0f}",
            "    System/Peak GPU Memory (MB)=38,869",
        ]
    return "\n".join(lines) + "\n"


def llmc(loss: Callable[[int], float], clock: float = 1.0) -> str:
    out = []
    for s in range(40):
        if s % 10 == 0:
            out.append(f"s:{s} tel:{loss(s) + 0.1:.4f}")
        out.append(f"s:{s} trl:{loss(s):.4f} lr:0.000{s + 1:03d} norm:{1 + s / 10:.2f}")
    return "\n".join(out) + "\n"


def autotrain(loss: Callable[[int], float], clock: float = 1.0) -> str:
    pre = "\x1b[1mINFO    \x1b[22m | \x1b[32m2024-04-30 11:16:10\x1b[39m | trainer:on_log:226 - "
    out = [pre + "Starting to train..."]
    for i in range(30):
        bar = f"{i}/30 [00:0{i % 10}<00:{clock * 10:02.0f}, {clock:.2f}it/s]"
        row = {"loss": loss(i), "grad_norm": 0.5 + i, "learning_rate": 2e-6 * i, "epoch": i / 30}
        out.append(f" {i * 3}%|███ | {bar}\r{pre}{row!r}")
    out.append(pre + repr({"train_runtime": 12.3 * clock, "train_loss": 0.65, "epoch": 1.0}))
    return "\n".join(out) + "\n"


def llama_factory(loss: Callable[[int], float], clock: float = 1.0) -> str:
    rows = [
        {"current_steps": 10 * i, "total_steps": 300, "loss": loss(i), "reward": None,
         "learning_rate": 1e-4 / i, "epoch": round(i / 30, 2), "percentage": i / 3,
         "elapsed_time": f"0:00:{int(26 * clock):02d}", "remaining_time": "8:45:50"}
        for i in range(1, 31)
    ]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def detectron2(loss: Callable[[int], float], clock: float = 1.0) -> str:
    rows = [{"data_time": 0.004 * clock, "eta_seconds": 99.8 * clock, "iteration": 19,
             "loss_cls": loss(0), "lr": 1e-5, "time": 0.35 * clock, "total_loss": 2.1}]  # fmt: skip
    rows += [
        {"data_time": 0.004 * clock, "eta_seconds": 90.0 - i * clock, "iteration": 19 + 20 * i,
         "loss_cls": loss(i), "lr": 1e-5 * i, "rank_data_time": 0.004 * clock,
         "time": 0.35 * clock, "total_loss": 2.1 - i / 10}
        for i in range(10)
    ]  # fmt: skip  # iteration 19 twice: the repeat is compared in order, and said
    return "".join(json.dumps(r) + "\n" for r in rows)


def mmengine(loss: Callable[[int], float], clock: float = 1.0) -> str:
    rows = [
        {"lr": 0.01, "data_time": 0.01 * clock, "loss": loss(i), "time": 0.3 * clock,
         "epoch": 1, "iter": 10 * i, "memory": 3000, "step": 10 * i}
        for i in range(1, 21)
    ]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def fairseq(loss: Callable[[int], float], clock: float = 1.0) -> str:
    rows = [
        {"epoch": 1, "update": round(i / 20, 3), "loss": f"{loss(i):.3f}", "nll_loss": "7.2",
         "ppl": "150.3", "wps": f"{1234 * clock:.0f}", "ups": f"{2.1 * clock:.2f}",
         "wpb": "2048", "bsz": "16", "num_updates": str(100 * i), "lr": "0.0005",
         "gnorm": "1.3", "train_wall": f"{40 * clock:.0f}", "gb_free": f"{10.2 * clock:.1f}",
         "wall": f"{52 * i * clock:.0f}"}
        for i in range(1, 21)
    ]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def megatron(loss: Callable[[int], float], clock: float = 1.0) -> str:
    return "".join(
        f" iteration      {i}/  250000 | consumed samples:       {1024 * i} | elapsed time per "
        f"iteration (ms): {86545.2 * clock:.1f} | learning rate: 9.150E-06 | global batch size: "
        f" 1024 | lm loss: {loss(i):.6E} | loss scale: 1.0 | grad norm: 0.231 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n"
        for i in range(100, 130)
    )


def torchtitan(loss: Callable[[int], float], clock: float = 1.0) -> str:
    return "".join(
        f"[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: {s}  loss: "
        f"{loss(s):.5f}  grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: "
        f"{7282 * clock:,.0f}  tflops: {0.52 * clock:.2f}  mfu: {0.17 * clock:.2f}%\n"
        for s in range(1, 30)
    )


def keras_twice(loss: Callable[[int], float], clock: float = 1.0) -> str:
    first = [f"{e},0.8,{0.5 - e / 100},0.80,0.55\r\n" for e in range(5)]  # an earlier run
    last = [f"{e},0.9,{loss(e)},0.81,0.52\r\n" for e in range(30)]
    return "epoch,acc,loss,val_acc,val_loss\r\n" + "".join(first + last)


def trainer_state(loss: Callable[[int], float], clock: float = 1.0) -> str:
    history = [{"epoch": i / 30, "grad_norm": 1.0, "learning_rate": 1e-5, "loss": loss(i),
                "step": 5 * i} for i in range(1, 31)]  # fmt: skip
    history.append({"epoch": 1.0, "step": 150, "train_runtime": 100.0 * clock,
                    "train_samples_per_second": 9.1 / clock, "train_loss": 0.7})  # fmt: skip
    return json.dumps({"best_metric": None, "global_step": 150, "log_history": history},
                      indent=2)  # fmt: skip


FORMATS: dict[str, tuple[Callable[..., str], str, str]] = {
    # name: (writer, a metric it logs, the file's name)
    "olmo": (olmo, "train/CrossEntropyLoss", "train.log"),
    "llm.c": (llmc, "trl", "main.log"),
    "autotrain": (autotrain, "loss", "output.log"),
    "llama-factory": (llama_factory, "loss", "trainer_log.jsonl"),
    "detectron2": (detectron2, "loss_cls", "metrics.json"),
    "mmengine": (mmengine, "loss", "scalars.json"),
    "fairseq": (fairseq, "loss", "train.log"),
    "megatron": (megatron, "lm_loss", "megatron.log"),
    "torchtitan": (torchtitan, "loss", "titan.log"),
    "keras": (keras_twice, "loss", "training.log"),
    "trainer_state": (trainer_state, "loss", "trainer_state.json"),
}


def base(i: int) -> float:
    return 3.0 / (i + 1) + 0.01


@pytest.fixture(params=sorted(FORMATS))
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_format_against_itself_a_change_clocks_and_a_cut(tmp_path: Path, capsys, fmt) -> None:
    writer, metric, name = FORMATS[fmt]
    a = tmp_path / "a" / name
    a.parent.mkdir()
    a.write_text(writer(base))
    steps = load(a).steps
    assert len(steps) >= 10 and all(metric in s.metrics for s in steps if s.metrics.get(metric))
    assert sum(metric in s.metrics for s in steps) >= 10
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"]) == (0, "IDENTICAL"), out["reason"]
    assert not any(account["skipped"] for account in out["accounts"].values())
    clocks = tmp_path / "clocks" / name
    clocks.parent.mkdir()
    clocks.write_text(writer(base, clock=1.7))
    code, out = compare(capsys, str(a), str(clocks))
    assert (code, out["verdict"]) == (0, "IDENTICAL"), out["metric_max"]
    target = sorted(s.step for s in steps if metric in s.metrics)[5]
    changed = tmp_path / "changed" / name
    changed.parent.mkdir()
    changed.write_text(writer(lambda i: base(i) + 0.5 if _step_of(fmt, i) == target else base(i)))
    code, out = compare(capsys, str(a), str(changed))
    assert code == 1 and out["first_divergent_step"] == target
    assert out["first_divergent_metrics"] == [metric]
    cut = tmp_path / "cut" / name
    cut.parent.mkdir()
    data = a.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    code, out = compare(capsys, str(a), str(cut))
    assert code == 3 and out["verdict"] == "INCOMPLETE"


def _step_of(fmt: str, i: int) -> int:
    """The step the writer of `fmt` logs for its i-th value."""
    return {
        "olmo": i,
        "llama-factory": 10 * i,
        "detectron2": 19 + 20 * i,
        "mmengine": 10 * i,
        "fairseq": 100 * i,
        "trainer_state": 5 * i,
        "autotrain": i,
    }.get(fmt, i)


def test_detectron2_repeats_are_said(tmp_path: Path, capsys) -> None:
    a = tmp_path / "metrics.json"
    a.write_text(detectron2(base))
    code, out = compare(capsys, str(a), str(twin(a)))
    assert code == 0 and out["repeats_a"] == 1 and "eta_seconds" in out["ignored"]


def test_keras_appended_says_the_file_holds_two_runs(tmp_path: Path, capsys) -> None:
    a = tmp_path / "training.log"
    a.write_text(keras_twice(base))
    code, out = compare(capsys, str(a), str(twin(a)))
    assert code == 0 and out["steps_compared"] == 35  # both runs, each against its own
    assert "2 runs" in out["accounts"]["a"]["notes"][0]
    assert main(["compare", str(a), str(twin(a))]) == 0
    assert "the file holds 2 runs" in capsys.readouterr().out


def test_a_json_document_cut_short_says_where(tmp_path: Path, capsys) -> None:
    a = tmp_path / "trainer_state.json"
    a.write_text(trainer_state(base))
    cut = tmp_path / "cut.json"
    data = a.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    code, out = compare(capsys, str(a), str(cut))
    assert code == 3 and out["steps_compared"] >= 10
    (note,) = out["accounts"]["b"]["notes"]
    assert "cut short" in note and "byte" in note


def test_a_damaged_or_cut_tensorboard_file_says_where_reading_stopped(
    tmp_path: Path, capsys
) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run = tmp_path / "run"
    writer = EventFileWriter(str(run))
    for step in range(40):
        value = Summary.Value(tag="train/loss", simple_value=base(step))
        writer.add_event(Event(step=step, wall_time=1.0 + step, summary=Summary(value=[value])))
    writer.close()
    (events,) = run.glob("*tfevents*")
    data = events.read_bytes()
    for kind, damaged in (("cut", data[: len(data) // 2]), ("bad", _flip(data))):
        other = tmp_path / kind
        other.mkdir()
        (other / events.name).write_bytes(damaged)
        code, out = compare(capsys, str(run), str(other))
        assert code == 3 and out["verdict"] == "INCOMPLETE"
        (note,) = out["accounts"]["b"]["notes"]
        assert "reading stopped at byte" in note


def _flip(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    return bytes(damaged)


def test_a_short_text_log_without_a_final_newline_against_itself(tmp_path: Path, capsys) -> None:
    """The last line of a text log that did not end is skipped and said (it may be cut), but it
    is a missing step, not a reading failure: the log against itself stays IDENTICAL; the whole
    log against a copy cut in the middle of its last number is INCOMPLETE, never DIVERGED."""
    text = llmc(base).rstrip("\n")
    a, b, cut = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "cut.log"
    a.write_text(text)
    b.write_text(text)
    cut.write_text(text[:-2])
    code, out = compare(capsys, str(a), str(b))
    assert (code, out["verdict"]) == (0, "IDENTICAL")
    assert out["accounts"]["a"]["skipped"] == {"last line without its newline": 1}
    whole = tmp_path / "whole.log"
    whole.write_text(text + "\n")
    code, out = compare(capsys, str(whole), str(cut))
    assert (code, out["verdict"]) == (3, "INCOMPLETE")


def test_a_byte_order_mark_is_not_data(tmp_path: Path, capsys, fmt) -> None:
    """A file a Windows tool saved with UTF-8's byte-order mark reads as the same file without
    it (every format), and a live line that starts with one reads as the line without it."""
    writer, _, name = FORMATS[fmt]
    a = tmp_path / "a" / name
    a.parent.mkdir()
    a.write_text(writer(base))
    marked = tmp_path / "marked" / name
    marked.parent.mkdir()
    marked.write_bytes(BOM + a.read_bytes())
    code, out = compare(capsys, str(a), str(marked))
    assert (code, out["verdict"]) == (0, "IDENTICAL"), out["reason"]
    assert not any(account["skipped"] for account in out["accounts"].values())
    line = b'{"step": 3, "loss": 0.5}\n'
    assert LineParser().parse(BOM + line) == LineParser().parse(line)
