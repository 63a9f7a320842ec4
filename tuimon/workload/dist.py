"""`tuimon train` under torch.distributed: the launcher's environment, the process group, the
full batch split across ranks and the gradients summed.

A run started by `torch.distributed.run` (torchrun) has `WORLD_SIZE`, `RANK` and `LOCAL_RANK`
in its environment; without them `tuimon train` is one process, as it always was. Each rank
computes the loss of its shard of the full batch as `sum / n_total`, so that the gradients
summed over ranks (one all-reduce per tensor, in parameter order) are those of the full batch;
the logged losses and right answers are summed the same way. Every rank logs its own step
records (its own parameter digests: the replica check), rank 0 alone saves W_E.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from tuimon.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tuimon.workload.data import Split

BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
"""The collective backend of each device type (MPS runs one rank)."""


def _env_int(name: str, default: int | None = None) -> int | None:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{name}={text!r} in the environment is not an integer") from None


@dataclass(frozen=True)
class World:
    """This rank's place in a torch.distributed job (from the launcher's environment)."""

    rank: int
    size: int
    local_rank: int
    backend: str | None = None
    """gloo / nccl once the process group is up; None for one rank (no collectives)."""

    @property
    def leader(self) -> bool:
        """Rank 0: the rank whose step log is the side's, and that saves W_E."""
        return self.rank == 0

    def fingerprint(self) -> dict[str, object]:
        """What the header's env block records of the job (a pair shows it in `env_diff`)."""
        return {
            "world_size": self.size,
            "rank": self.rank,
            "backend": self.backend or "none (one rank)",
            "NCCL_ALGO": os.environ.get("NCCL_ALGO"),
        }


def from_env() -> World | None:
    """The job this process belongs to, or None when no launcher started it (no WORLD_SIZE)."""
    size = _env_int("WORLD_SIZE")
    if size is None:
        return None
    rank = _env_int("RANK", 0)
    local = _env_int("LOCAL_RANK", rank)
    assert rank is not None and local is not None
    if size < 1 or not 0 <= rank < size:
        raise UsageError(f"RANK={rank} WORLD_SIZE={size} in the environment make no job")
    return World(rank, size, local)


def device_for(world: World | None, name: str) -> str:
    """The device a rank trains on: plain `cuda` is `cuda:LOCAL_RANK` (one GPU a rank); MPS and
    more than one rank is refused (no collective backend runs on MPS)."""
    if world is None:
        return name
    lowered = name.strip().lower()
    if lowered.startswith("mps") and world.size > 1:
        raise UsageError(
            f"mps runs one rank: this job has {world.size} (use --nproc 1 for an mps side, "
            "or cpu / cuda for more ranks)"
        )
    if lowered == "cuda":
        return f"cuda:{world.local_rank}"
    return name


def start(world: World | None, device: torch.device) -> World | None:
    """Join the process group (gloo on CPU, NCCL on CUDA) when there is more than one rank."""
    if world is None or world.size == 1:
        return world
    import torch.distributed as dist

    backend = BACKENDS.get(device.type)
    if backend is None:
        raise UsageError(f"no collective backend for {device.type} with {world.size} ranks")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    return World(world.rank, world.size, world.local_rank, backend)


def stop(world: World | None) -> None:
    """Leave the process group, if one was joined, and free it now: left to the interpreter's
    exit, gloo's threads aborted the process ("terminate called without an active exception")
    in 5 of 8 two-rank runs here (torch 2.13, CPU); collected at once, in none of 10."""
    if world is not None and world.backend is not None:
        import gc

        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        gc.collect()


def shard(world: World, data: Split) -> Split:
    """This rank's contiguous share of the train and test sets (every example in one share)."""
    from tuimon.workload.data import Split

    def part(t: torch.Tensor) -> torch.Tensor:
        n = t.shape[0]
        return t[world.rank * n // world.size : (world.rank + 1) * n // world.size]

    return Split(*(part(t) for t in data))


def loss_correct(
    logits: torch.Tensor, labels: torch.Tensor, total: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """A shard's share of the full-batch mean loss (`sum / total`, in `dtype`) and its right
    answers, on the device."""
    loss = F.cross_entropy(logits.to(dtype), labels, reduction="sum") / total
    return loss, (logits.argmax(dim=-1) == labels).sum()


def summed(world: World, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each value summed over the ranks (detached copies; the same order on every rank)."""
    if world.backend is None:
        return values
    import torch.distributed as dist

    out = {}
    for name, value in values.items():
        copy = value.detach().clone()
        dist.all_reduce(copy)
        out[name] = copy
    return out


def sum_gradients(world: World, params: Iterable[torch.nn.Parameter]) -> None:
    """Sum every gradient over the ranks, one all-reduce per tensor in parameter order."""
    if world.backend is None:
        return
    import torch.distributed as dist

    for param in params:
        if param.grad is not None:
            dist.all_reduce(param.grad)
