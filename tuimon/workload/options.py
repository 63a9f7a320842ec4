"""Settings of `tuimon train`, checked before torch is imported, and the header blocks they fill."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuimon.errors import UsageError

TASKS = ("add", "sub", "mul")
D_MODEL, N_HEADS, D_HEAD, D_MLP, N_CTX = 128, 4, 32, 512, 3  # Nanda et al. (2023)
BETAS = (0.9, 0.98)
GATHERS = ("view", "contiguous")  # the embedding gather's layout: published, racing


def n_train_for(p: int, frac_train: float) -> int:
    """Number of training pairs: round(frac_train * p**2)."""
    return round(frac_train * p * p)


@dataclass(frozen=True)
class Settings:
    """Everything one training run was asked for, validated."""

    seed: int = 0
    device: str = "cpu"
    steps: int = 300
    p: int = 113
    task: str = "add"
    frac_train: float = 0.3
    lr: float = 1e-3
    weight_decay: float = 1.0
    warmup: int = 10
    threads: int | None = None
    deterministic: bool = False
    loss_dtype: str | None = None
    eval_every: int = 1
    time_only: bool = False
    save_emb: str | None = None
    log: str | None = None
    gather: str = "view"
    freq_every: int = 0
    cuda_graph: bool = False
    checkpoint_at: int | None = None
    """Save a checkpoint after this step (to `checkpoint`) and stop (`pair --resume-at`)."""
    checkpoint: str | None = None
    resume_from: str | None = None
    """Resume from a checkpoint saved with `checkpoint_at`: model, optimizer, RNGs, step."""
    state_digests: bool = False
    """Log the digests of the RNGs, optimizer state and data position with each step."""

    @property
    def n_train(self) -> int:
        """Number of training pairs."""
        return n_train_for(self.p, self.frac_train)

    @property
    def n_test(self) -> int:
        """Number of test pairs."""
        return self.p * self.p - self.n_train


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The validated settings of a parsed `tuimon train` command line; UsageError when bad."""
    names = Settings.__dataclass_fields__
    settings = Settings(**{k: v for k, v in vars(args).items() if k in names})
    check(settings)
    return settings


def _fail_unless(ok: bool, message: str) -> None:
    if not ok:
        raise UsageError(message)


def check(s: Settings) -> None:
    """Raise UsageError naming the first bad setting."""
    _fail_unless(s.steps >= 1, f"--steps must be at least 1, got {s.steps}")
    _fail_unless(s.p >= 2, f"--p must be at least 2, got {s.p}")
    _fail_unless(s.task in TASKS, f"--task must be one of {', '.join(TASKS)}, got {s.task!r}")
    _fail_unless(0 < s.frac_train < 1, f"--frac-train must be in (0, 1), got {s.frac_train}")
    _fail_unless(
        0 < s.n_train < s.p * s.p,
        f"--frac-train {s.frac_train} leaves {s.n_train} of {s.p * s.p} pairs for training",
    )
    _fail_unless(s.lr >= 0, f"--lr must not be negative, got {s.lr}")
    _fail_unless(s.weight_decay >= 0, f"--weight-decay must not be negative, got {s.weight_decay}")
    _fail_unless(s.warmup >= 0, f"--warmup must not be negative, got {s.warmup}")
    _fail_unless(s.gather in GATHERS, f"--gather must be one of {', '.join(GATHERS)}")
    _fail_unless(s.freq_every >= 0, f"--freq-every must not be negative, got {s.freq_every}")
    _fail_unless(not s.freq_every or s.p >= 3, "--freq-every needs --p of at least 3")
    _fail_unless(s.eval_every >= 1, f"--eval-every must be at least 1, got {s.eval_every}")
    _fail_unless(s.threads is None or s.threads >= 1, f"--threads must be >= 1, got {s.threads}")
    _fail_unless(
        not (s.time_only and s.save_emb), "--time-only saves nothing: drop it or --save-emb"
    )
    _check_resume(s)
    for flag, path in (
        ("--log", s.log),
        ("--save-emb", s.save_emb),
        ("--checkpoint", s.checkpoint),
    ):
        if path is not None:
            folder = Path(path).parent
            _fail_unless(folder.is_dir(), f"{flag} {path}: folder {str(folder)!r} does not exist")


def _check_resume(s: Settings) -> None:
    """--checkpoint-at goes with --checkpoint, before the last step; one process, no graph."""
    at = s.checkpoint_at
    _fail_unless(
        (at is None) == (s.checkpoint is None), "--checkpoint-at and --checkpoint go together"
    )
    _fail_unless(
        at is None or 0 <= at < s.steps - 1,
        f"--checkpoint-at must be from 0 to {s.steps - 2} (--steps {s.steps}), got {at}",
    )
    if at is not None or s.resume_from is not None:
        _fail_unless(
            not s.cuda_graph, "--checkpoint-at / --resume-from do not run with --cuda-graph"
        )
    if s.resume_from is not None:
        _fail_unless(os.path.isfile(s.resume_from),
                     f"--resume-from {s.resume_from}: no such checkpoint file")  # fmt: skip


def lr_at(step: int, lr: float, warmup: int) -> float:
    """Learning rate of the update made at `step`: lr * min(step / warmup, 1); 0 at step 0."""
    return lr * min(step / warmup, 1.0) if warmup > 0 else lr


def emb_path(s: Settings, device: str) -> Path | None:
    """Where W_E is saved at the end: --save-emb, nothing with --time-only, else a default name
    (emb-TASK-sSEED-DEVICE.npy) next to the log file, or in the current folder for stdout."""
    if s.time_only:
        return None
    if s.save_emb:
        return Path(os.path.abspath(s.save_emb))
    folder = Path(s.log).parent if s.log else Path(".")
    name = f"emb-{s.task}-s{s.seed}-{device.replace(':', '')}.npy"
    return Path(os.path.abspath(folder / name))


def run_block(s: Settings, device: str, argv: list[str]) -> dict[str, Any]:
    """The header's run block."""
    return {"name": "grokking", "task": s.task, "seed": s.seed, "device": device, "command": argv}


def hyper_block(s: Settings) -> dict[str, Any]:
    """The header's hyper block: every setting that defines the trajectory."""
    return {
        "task": s.task,
        "p": s.p,
        "seed": s.seed,
        "steps": s.steps,
        "frac_train": s.frac_train,
        "n_train": s.n_train,
        "n_test": s.n_test,
        "d_vocab": s.p + 1,
        "d_model": D_MODEL,
        "n_heads": N_HEADS,
        "d_head": D_HEAD,
        "d_mlp": D_MLP,
        "n_ctx": N_CTX,
        "act": "relu",
        "layernorm": False,
        "optimizer": "AdamW",
        "lr": s.lr,
        "weight_decay": s.weight_decay,
        "betas": list(BETAS),
        "warmup": s.warmup,
        "batch": "full",
        "eval_every": s.eval_every,
        "gather": s.gather,
        **({"cuda_graph": True} if s.cuda_graph else {}),
    }
