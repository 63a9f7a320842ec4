"""The training loop of `tuimon train`: full-batch AdamW with a step log record per step."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tuimon.freqs import key_frequencies
from tuimon.steplog import STATE_DIGESTS, StepLogger
from tuimon.tracing import trace_step
from tuimon.workload import digest, dist
from tuimon.workload.data import Split, make_split
from tuimon.workload.digest import param_digests, tensor_digest
from tuimon.workload.dist import World
from tuimon.workload.model import Transformer
from tuimon.workload.options import BETAS, Settings, lr_at
from tuimon.workload.state import rng_state, set_rng_state, state_digests

__all__ = ["build", "param_digests", "save_embedding", "tensor_digest", "train"]


def build(s: Settings, device: torch.device) -> tuple[Transformer, Split]:
    """The model (drawn on the CPU from --seed, then moved) and the data, both on `device`."""
    model = Transformer(s.p, torch.Generator().manual_seed(s.seed), gather=s.gather).to(device)
    split = Split(*(t.to(device) for t in make_split(s.p, s.task, s.frac_train, s.seed)))
    return model, split


def key_freq_set(model: Transformer) -> dict[str, int]:
    """W_E's top-5 key frequencies as a set, in increasing order: {"1": k1, ..., "5": k5}.

    Numbers, so a pair compares them step by step and names the first step where they part."""
    found = key_frequencies(model.W_E.detach().cpu().numpy(), p=model.W_U.shape[1])
    return {str(i): k for i, k in enumerate(sorted(found.freqs), start=1)}


def _loss_correct(
    logits: torch.Tensor, labels: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss (in `dtype`) and the number of right answers, both still on the device."""
    loss = F.cross_entropy(logits.to(dtype), labels)
    return loss, (logits.argmax(dim=-1) == labels).sum()


def evaluate_tensors(
    model: Transformer, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, right answers) on a data set, on the device, by the tabled forward."""
    with torch.inference_mode():
        return _loss_correct(model.forward_tabled(x), y, dtype)


def evaluate(
    model: Transformer, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype
) -> tuple[float, float]:
    """(loss, accuracy) on a data set, without autograd, by the tabled forward."""
    loss, correct = evaluate_tensors(model, x, y, dtype)
    return loss.item(), int(correct) / y.numel()


class StepReader:
    """The values of a step read from the device in one copy, and written one step later on a
    GPU (the copy goes to pinned memory without waiting; the line is written once the next
    step is queued), at once on the CPU. The numbers are those of a `.item()` per value; the
    digests are `tuimon.devsum/1`, computed on the device (16 bytes per tensor come back)."""

    def __init__(
        self,
        model: torch.nn.Module,
        device: torch.device,
        logger: StepLogger,
        pipelined: bool | None = None,
    ) -> None:
        self.logger = logger
        pairs = list(model.named_parameters())
        self.names = [n for n, _ in pairs]
        self.params = [p for _, p in pairs]
        self.device = device
        self.cuda = device.type == "cuda"
        self.pipelined = self.cuda if pipelined is None else pipelined  # tests: CPU, pipelined
        self._buffers: list[torch.Tensor] = []
        self._turn = 0
        self._pending: tuple[int, dict[str, Any], list[str], torch.Tensor, Any] | None = None

    def lanes(self) -> Any:
        """The parameters' digest lanes now: ints on the CPU, a device tensor on a GPU."""
        if not self.pipelined:
            return digest.lanes_of(self.params)
        return digest.graphed_lanes(self.params).reshape(-1)

    def add(
        self, step: int, host: dict[str, Any], values: dict[str, torch.Tensor], lanes: Any
    ) -> None:
        """Step `step`: values known on the host (lr, key frequencies), device scalars
        (`train_loss`, `train_correct`, maybe `test_loss`, `test_correct`) to read, and the
        parameters' digest lanes (`lanes()`, taken before the step's forward)."""
        names = list(values)
        if not self.pipelined:
            got = {k: v.item() for k, v in values.items()}
            self._write(step, host, names, got, lanes)
            return
        packed = torch.cat([torch.stack([v.to(torch.float64) for v in values.values()]),
                            lanes.view(torch.float64)])  # fmt: skip
        if not self._buffers or self._buffers[0].numel() != packed.numel():
            self._buffers = [
                torch.empty(packed.numel(), dtype=torch.float64, pin_memory=self.cuda) for _ in "ab"
            ]
        buf = self._buffers[self._turn]
        self._turn ^= 1
        self.flush()  # the previous step's line: its copy was queued a step ago
        buf.copy_(packed, non_blocking=self.cuda)
        event = None
        if self.cuda:
            event = torch.cuda.Event()
            event.record()
        self._pending = (step, host, names, buf, event)

    def flush(self) -> None:
        """Write the step still held (waits for its copy)."""
        if self._pending is None:
            return
        step, host, names, buf, event = self._pending
        self._pending = None
        if event is not None:
            event.synchronize()
        k = len(names)
        got = dict(zip(names, buf[:k].tolist(), strict=True))
        raw = buf[k:].view(torch.int64).numpy().view(np.uint64).reshape(-1, 2).tolist()
        self._write(step, host, names, got, [(a, b) for a, b in raw])

    def _write(
        self,
        step: int,
        host: dict[str, Any],
        names: list[str],
        got: dict[str, float],
        lanes: list[tuple[int, int]],
    ) -> None:
        write_record(self.logger, self.names, self.params, step, host, got, lanes)


def write_record(
    logger: StepLogger,
    names: list[str],
    params: Sequence[torch.Tensor],
    step: int,
    host: dict[str, Any],
    got: dict[str, float],
    lanes: list[tuple[int, int]],
) -> None:
    """One step record from what was read: `host` (lr, n_train, n_test, maybe key_freqs),
    `got` (train_loss, train_correct, maybe test_loss and test_correct, as read from the
    device) and the parameters' digest lanes. The one writer of the eager and graph paths."""
    record: dict[str, Any] = {"lr": host["lr"], "train_loss": got["train_loss"]}
    record["train_acc"] = int(got["train_correct"]) / host["n_train"]
    if "test_loss" in got:
        record["test_loss"] = got["test_loss"]
        record["test_acc"] = int(got["test_correct"]) / host["n_test"]
    if "key_freqs" in host:
        record["key_freqs"] = host["key_freqs"]
    whole, per = digest.format_digests(names, params, lanes)
    if STATE_DIGESTS in host:
        record[STATE_DIGESTS] = host[STATE_DIGESTS]
    logger.step(step, t=logger.elapsed(), **record, param_digest=whole, param_digests=per)


def save_checkpoint(
    path: str, model: Transformer, optimizer: torch.optim.Optimizer, step: int
) -> None:
    """What step `step + 1` needs to go on exactly: the model, the optimizer, every RNG and the
    data position (the next step: the batch is full), written atomically."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "rng": rng_state(), "next_step": step + 1}  # fmt: skip
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str, model: Transformer, optimizer: torch.optim.Optimizer) -> int:
    """Restore a `save_checkpoint` file; the step to go on from."""
    device = next(model.parameters()).device
    state = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    rng = state["rng"]
    for key in ("torch", "cuda", "mps"):  # generator states live on the host
        if key in rng:
            rng[key] = [t.cpu() for t in rng[key]] if isinstance(rng[key], list) else rng[key].cpu()
    set_rng_state(rng)
    return int(state["next_step"])


def train(
    s: Settings,
    model: Transformer,
    data: Split,
    loss_dtype: torch.dtype,
    logger: StepLogger,
    pipelined: bool | None = None,
    world: World | None = None,
) -> None:
    """Run s.steps full-batch steps; step k logs the losses of the parameters after k updates.
    The values of a step are read one step later on a GPU (`pipelined`, see `StepReader`).
    Under torch.distributed (`world`) each rank takes its shard of the full batch and the
    gradients and logged values are summed over the ranks (`tuimon.workload.dist`)."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=s.lr, betas=BETAS, weight_decay=s.weight_decay
    )
    device = data.train_x.device
    reader = StepReader(model, device, logger, pipelined)
    sizes = {"n_train": data.train_y.numel(), "n_test": data.test_y.numel()}
    mine = data if world is None else dist.shard(world, data)
    start = 0 if s.resume_from is None else load_checkpoint(s.resume_from, model, optimizer)
    try:
        for k in range(start, s.steps):
            lr = lr_at(k, s.lr, s.warmup)
            lanes = reader.lanes()  # outside the traced step, as the digests always were
            with trace_step(k, model, optimizer):  # a no-op unless `tuimon explain` asks for k
                host: dict[str, Any] = {"lr": lr, **sizes}
                if s.state_digests:  # as step k begins: what a resume before it must restore
                    host[STATE_DIGESTS] = state_digests(optimizer, data={"next_step": k})
                loss, correct = _shard_loss(model(mine.train_x), mine.train_y, sizes["n_train"],
                                            loss_dtype, world)  # fmt: skip
                values = {"train_loss": loss, "train_correct": correct}
                if k % s.eval_every == 0 or k == s.steps - 1:
                    values["test_loss"], values["test_correct"] = _shard_eval(
                        model, mine, sizes["n_test"], loss_dtype, world
                    )
                if s.freq_every and (k % s.freq_every == 0 or k == s.steps - 1):
                    host["key_freqs"] = key_freq_set(model)
                reader.add(k, host, values if world is None else dist.summed(world, values), lanes)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if world is not None:
                    dist.sum_gradients(world, model.parameters())
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.step()
            if k == s.checkpoint_at and s.checkpoint is not None:
                reader.flush()
                save_checkpoint(s.checkpoint, model, optimizer, k)
                return
    except BaseException:
        with contextlib.suppress(Exception):  # what was computed is written; the error stands
            reader.flush()
        raise
    reader.flush()


def _shard_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    total: int,
    dtype: torch.dtype,
    world: World | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss and right answers of one process: the full batch's mean alone, a shard's share
    of it (`sum / total`) under torch.distributed."""
    if world is None:
        return _loss_correct(logits, labels, dtype)
    return dist.loss_correct(logits, labels, total, dtype)


def _shard_eval(
    model: Transformer, mine: Split, total: int, dtype: torch.dtype, world: World | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The test loss and right answers of one process (a shard's share under distributed)."""
    if world is None:
        return evaluate_tensors(model, mine.test_x, mine.test_y, dtype)
    with torch.inference_mode():
        return dist.loss_correct(model.forward_tabled(mine.test_x), mine.test_y, total, dtype)


def save_embedding(model: Transformer, path: Path) -> None:
    """W_E, shape (d_model, p + 1), as .npy, written atomically (a temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, model.W_E.detach().cpu().numpy())
    os.replace(tmp, path)
