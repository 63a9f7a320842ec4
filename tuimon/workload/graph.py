"""`tuimon train --cuda-graph`: the whole step captured once as a CUDA graph and replayed.

The step (`Program.train_step`: the parameters' digest lanes, forward, loss, right answers,
backward, fused AdamW with capturable state and the learning rate read from a device table) and the
test evaluation (`Program.eval_step`) are device work only: no `.item()`, no host copy, no
allocation that depends on the step. Each writes its values into a ring buffer on the device,
in the slot of a step counter that lives on the device too. `Runner` replays the two graphs
(evaluation first, at the steps that evaluate) and every `DRAIN` steps queues one copy of the
ring's filled half to pinned host memory; the lines of that half are written while the GPU runs
the next half, through the same record writer as the eager loop (`loop.write_record`), so the
step log has the same format. Nothing waits for the GPU but that copy, once per `DRAIN` steps,
and `--freq-every` (W_E is read at those steps).

The seam: with `capture=False` the runner calls the same step functions eagerly, on any device,
with the eager loop's optimiser (a float learning rate set before each step), and drains the
ring the same way. The tests run that on the CPU and check that its lines are the eager loop's.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from tuimon.errors import UsageError
from tuimon.steplog import StepLogger
from tuimon.workload import digest
from tuimon.workload.data import Split
from tuimon.workload.loop import _loss_correct, evaluate_tensors, key_freq_set, write_record
from tuimon.workload.model import Transformer
from tuimon.workload.options import BETAS, Settings, lr_at

DRAIN = 64
"""Steps between two copies of the ring buffer to the host (the ring holds two such halves)."""
WARMUP = 3
"""Eager steps run (and undone) before capture: Triton's compilation, cuBLAS workspaces, AdamW
state."""
_FIELDS = ("train_loss", "train_correct", "test_loss", "test_correct")


class Program:
    """The device work of one step, written into a ring buffer (capturable: nothing in it
    waits for the host or allocates by step)."""

    def __init__(
        self,
        s: Settings,
        model: Transformer,
        data: Split,
        loss_dtype: torch.dtype,
        optimizer: torch.optim.Optimizer,
        slots: int,
        lr: torch.Tensor | None = None,
    ) -> None:
        self.s, self.model, self.data, self.loss_dtype = s, model, data, loss_dtype
        self.optimizer = optimizer
        self.params = list(model.parameters())
        device = data.train_x.device
        self.slots = slots
        self.counter = torch.zeros(1, dtype=torch.int64, device=device)
        self.values = torch.zeros((slots, len(_FIELDS)), dtype=torch.float64, device=device)
        self.lanes = torch.zeros((slots, len(self.params), 2), dtype=torch.int64, device=device)
        self.lr = lr
        self.lr_table: torch.Tensor | None = None
        if lr is not None:  # the learning rate of every step, read by the step counter
            table = [lr_at(k, s.lr, s.warmup) for k in range(s.steps + WARMUP)]
            self.lr_table = torch.tensor(table, dtype=lr.dtype, device=device)

    def _slot(self) -> torch.Tensor:
        return torch.remainder(self.counter, self.slots)

    def eval_step(self) -> None:
        """Test loss and right answers of the current parameters into the current slot."""
        loss, correct = evaluate_tensors(
            self.model, self.data.test_x, self.data.test_y, self.loss_dtype
        )
        row = torch.stack([loss.to(torch.float64), correct.to(torch.float64)])
        self.values[:, 2:].index_copy_(0, self._slot(), row.view(1, 2))

    def train_step(self) -> None:
        """Digests of the current parameters, the training loss, the update; one step on."""
        slot = self._slot()
        self.lanes.index_copy_(0, slot, digest.device_lanes(self.params).unsqueeze(0))
        loss, correct = _loss_correct(
            self.model(self.data.train_x), self.data.train_y, self.loss_dtype
        )
        row = torch.stack([loss.to(torch.float64), correct.to(torch.float64)])
        self.values[:, :2].index_copy_(0, slot, row.view(1, 2))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.lr is not None and self.lr_table is not None:
            self.lr.copy_(torch.index_select(self.lr_table, 0, self.counter).view(()))
        self.optimizer.step()
        self.counter += 1


class Runner:
    """Replays the step (or calls it, `capture=False`) and writes the ring's lines in halves."""

    def __init__(self, program: Program, logger: StepLogger, *, capture: bool) -> None:
        self.program = program
        self.logger = logger
        self.capture = capture
        self.names = [n for n, _ in program.model.named_parameters()]
        self.half = program.slots // 2
        self.pending: list[tuple[int, dict[str, Any]]] = []
        self.queued: tuple[list[tuple[int, dict[str, Any]]], torch.Tensor, torch.Tensor, Any] | None
        self.queued = None
        self._host: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.graphs: dict[str, Any] = {}

    # -- capture ----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Capture the two graphs (CUDA), after warm-up steps that are undone again."""
        if not self.capture:
            return
        prog = self.program
        saved = [p.detach().clone() for p in prog.params]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                prog.eval_step()
                prog.train_step()
        torch.cuda.current_stream().wait_stream(side)
        self._reset(saved)
        eval_graph, train_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(eval_graph):
            prog.eval_step()
        with torch.cuda.graph(train_graph, pool=eval_graph.pool()):
            prog.train_step()
        self.graphs = {"eval": eval_graph, "train": train_graph}
        torch.cuda.synchronize()

    def _reset(self, saved: list[torch.Tensor]) -> None:
        """Back to the state before warm-up: the parameters' bytes, AdamW's state zeroed (as
        it is made on the first step), the counter and the ring at zero."""
        prog = self.program
        with torch.no_grad():
            for p, b in zip(prog.params, saved, strict=True):
                p.copy_(b)
            for state in prog.optimizer.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        value.zero_()
            prog.counter.zero_()
            prog.values.zero_()
            prog.lanes.zero_()

    # -- running ----------------------------------------------------------------------------

    def run(self) -> None:
        """All steps of the run; every line written when it returns (or raises)."""
        s, prog = self.program.s, self.program
        try:
            for k in range(s.steps):
                host: dict[str, Any] = {
                    "lr": lr_at(k, s.lr, s.warmup),
                    "n_train": prog.data.train_y.numel(),
                    "n_test": prog.data.test_y.numel(),
                }
                evaluates = k % s.eval_every == 0 or k == s.steps - 1
                if s.freq_every and (k % s.freq_every == 0 or k == s.steps - 1):
                    host["key_freqs"] = key_freq_set(prog.model)  # reads W_E: waits for the GPU
                if not evaluates:
                    host["no_eval"] = True
                self._one(k, evaluates, host["lr"])
                self.pending.append((k, host))
                if len(self.pending) == self.half:
                    self._queue()
        except BaseException:
            with contextlib.suppress(Exception):  # what was computed is written; the error stands
                self._queue()
                self._write_queued()
            raise
        self._queue()
        self._write_queued()

    def _one(self, k: int, evaluates: bool, lr: float) -> None:
        if self.capture:
            if evaluates:
                self.graphs["eval"].replay()
            self.graphs["train"].replay()
            return
        if self.program.lr is None:  # the eager loop's optimiser: a float set before the step
            for group in self.program.optimizer.param_groups:
                group["lr"] = lr
        if evaluates:
            self.program.eval_step()
        self.program.train_step()

    def _queue(self) -> None:
        """Copy the half of the ring that the pending steps filled to the host (no wait), then
        write the half queued before it."""
        if not self.pending:
            return
        prog = self.program
        first = self.pending[0][0] % prog.slots
        rows = slice(first, first + len(self.pending))
        turn = (first // self.half) % 2
        if not self._host:
            self._host = [self._host_pair() for _ in range(2)]
        values, lanes = self._host[turn]
        n = len(self.pending)
        values[:n].copy_(prog.values[rows], non_blocking=True)
        lanes[:n].copy_(prog.lanes[rows], non_blocking=True)
        event = None
        if values.is_pinned():
            event = torch.cuda.Event()
            event.record()
        self._write_queued()
        self.queued = (self.pending, values, lanes, event)
        self.pending = []

    def _host_pair(self) -> tuple[torch.Tensor, torch.Tensor]:
        prog = self.program
        pin = prog.values.device.type == "cuda"
        return (
            torch.empty((self.half, len(_FIELDS)), dtype=torch.float64, pin_memory=pin),
            torch.empty((self.half, len(prog.params), 2), dtype=torch.int64, pin_memory=pin),
        )

    def _write_queued(self) -> None:
        if self.queued is None:
            return
        steps, values, lanes, event = self.queued
        self.queued = None
        if event is not None:
            event.synchronize()
        rows = values[: len(steps)].tolist()
        raw = lanes[: len(steps)].numpy().view("uint64").tolist()
        for (k, host), row, lane in zip(steps, rows, raw, strict=True):
            got = dict(zip(_FIELDS, row, strict=True))
            if host.get("no_eval"):
                del got["test_loss"], got["test_correct"]
            pairs = [(a, b) for a, b in lane]
            write_record(self.logger, self.names, self.program.params, k, host, got, pairs)


def make(
    s: Settings,
    model: Transformer,
    data: Split,
    loss_dtype: torch.dtype,
    logger: StepLogger,
    *,
    capture: bool,
    capturable: bool | None = None,
    drain: int = DRAIN,
) -> Runner:
    """A runner for `s`: capturable AdamW and a device learning rate when capturing (or when
    `capturable` says so), else the eager loop's AdamW (a float learning rate set by the
    runner); the ring holds two halves of `drain` steps."""
    if capture and os.environ.get("TUIMON_TRACE_STEP"):
        raise UsageError("--cuda-graph cannot be traced (`tuimon explain` reruns the eager path)")
    lr: torch.Tensor | None = None
    if capture if capturable is None else capturable:
        lr = torch.tensor(s.lr, dtype=torch.float32, device=data.train_x.device)  # fused: float
        optimizer = torch.optim.AdamW(  # fused: the foreach capturable path divides by lr,
            model.parameters(),  # which is 0 at step 0 (warm-up): NaN wherever a gradient is 0
            lr=lr,
            betas=BETAS,
            weight_decay=s.weight_decay,
            capturable=True,
            fused=True,
        )
    else:
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=s.lr, betas=BETAS, weight_decay=s.weight_decay
        )
    program = Program(s, model, data, loss_dtype, optimizer, 2 * drain, lr)
    return Runner(program, logger, capture=capture)


def train(
    s: Settings, model: Transformer, data: Split, loss_dtype: torch.dtype, logger: StepLogger
) -> None:
    """`tuimon train --cuda-graph`: capture, then replay every step."""
    runner = make(s, model, data, loss_dtype, logger, capture=True)
    runner.prepare()
    runner.run()
