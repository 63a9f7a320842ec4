"""`tuimon train --cuda-graph` without a GPU: the refusal, and the graph path's step and ring
buffer run eagerly on the CPU through the seam (`capture=False`), line for line the eager
loop's."""

from __future__ import annotations

import io
import subprocess
import sys
from dataclasses import replace
from typing import Any

import orjson
import pytest

torch = pytest.importorskip("torch")

from tuimon.steplog import StepLogger  # noqa: E402
from tuimon.workload import graph, loop  # noqa: E402
from tuimon.workload.options import Settings  # noqa: E402

SETTINGS = Settings(p=13, steps=11, eval_every=3, freq_every=5, time_only=True, threads=1)


def _lines(fn: Any) -> list[dict[str, Any]]:
    buf = io.BytesIO()
    logger = StepLogger(buf)
    fn(logger)
    records = [orjson.loads(line) for line in buf.getvalue().splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    for r in steps:
        del r["t"]  # a clock: when the line was written
    return steps


def _eager(s: Settings) -> list[dict[str, Any]]:
    model, data = loop.build(s, torch.device("cpu"))
    return _lines(lambda logger: loop.train(s, model, data, torch.float64, logger))


def _graph_path(s: Settings, **kw: Any) -> list[dict[str, Any]]:
    model, data = loop.build(s, torch.device("cpu"))

    def go(logger: StepLogger) -> None:
        runner = graph.make(s, model, data, torch.float64, logger, capture=False, drain=4, **kw)
        runner.prepare()
        runner.run()

    return _lines(go)


def test_the_graph_step_and_ring_write_the_eager_lines() -> None:
    torch.set_num_threads(1)
    eager = _eager(SETTINGS)
    assert [r["step"] for r in eager] == list(range(11))
    assert "test_loss" in eager[3] and "test_loss" not in eager[4] and "key_freqs" in eager[5]
    assert _graph_path(SETTINGS) == eager  # 11 steps through 8 slots: the ring wraps


def test_an_interrupted_graph_run_writes_every_step_it_ran() -> None:
    torch.set_num_threads(1)
    s = replace(SETTINGS, freq_every=0)
    model, data = loop.build(s, torch.device("cpu"))
    ran: list[int] = []

    def go(logger: StepLogger) -> None:
        runner = graph.make(s, model, data, torch.float64, logger, capture=False, drain=4)
        real = runner._one

        def one(k: int, evaluates: bool, lr: float) -> None:
            if k == 6:
                raise KeyboardInterrupt
            real(k, evaluates, lr)
            ran.append(k)

        runner._one = one  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            runner.run()

    lines = _lines(go)
    assert [r["step"] for r in lines] == ran == list(range(6))
    assert lines == _eager(s)[:6]


def test_the_eager_gpu_reading_one_step_behind_writes_the_same_lines() -> None:
    """The eager loop as it runs on a GPU (one packed copy a step, the line written once the
    next step is queued), on the CPU: the same lines as reading at once."""
    torch.set_num_threads(1)
    model, data = loop.build(SETTINGS, torch.device("cpu"))
    lines = _lines(
        lambda logger: loop.train(SETTINGS, model, data, torch.float64, logger, pipelined=True)
    )
    assert lines == _eager(SETTINGS)


def test_capturable_adamw_with_a_device_learning_rate_runs_the_same_maths() -> None:
    """What the CUDA graph runs, on the CPU: fused AdamW(capturable=True) with the learning
    rate read from a device table by the step counter. (The foreach capturable AdamW divides by
    the learning rate, 0 at step 0: NaN wherever a gradient is 0. Fused does not.)"""
    torch.set_num_threads(1)
    s = replace(SETTINGS, steps=6, freq_every=0)
    eager, captured = _eager(s), _graph_path(s, capturable=True)
    assert [r.keys() for r in captured] == [r.keys() for r in eager]
    for a, b in zip(eager, captured, strict=True):
        assert a["lr"] == b["lr"]
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
    assert eager[:2] == captured[:2]  # step 0 has learning rate 0: nothing moved yet


def test_cuda_graph_without_cuda_is_one_line_and_exit_2() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for extra in ([], ["--device", "cuda"]):
        done = subprocess.run(
            [sys.executable, "-m", "tuimon", "train", "--cuda-graph", "--steps", "2", *extra],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.strip().count("\n") == 0 and "--cuda-graph needs CUDA" in done.stderr


def test_cuda_graph_is_recorded_in_the_header() -> None:
    from tuimon.workload.options import hyper_block

    assert hyper_block(replace(SETTINGS, cuda_graph=True))["cuda_graph"] is True
    assert "cuda_graph" not in hyper_block(SETTINGS)
