"""Adopting a training script in one import: the step logger, parameter digests, and the pair's
settings applied and reported.

    from tuimon.adopt import StepLogger, apply_pair_settings, model_digests

    env = apply_pair_settings()              # TUIMON_SEED / _THREADS / _DETERMINISTIC, reported
    log = StepLogger(hyper={"lr": lr}, env=env)
    for step in range(steps):
        ...
        log.step(step, loss=loss.item(), **model_digests(model))
    log.close()

torch is used only through `tuimon.workload`, imported inside the functions that need it (a
user's script has torch already); importing this module never imports torch. Callbacks:
`tuimon.integrations.lightning` and `tuimon.integrations.huggingface`.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Mapping
from typing import Any

from tuimon.applied import reported
from tuimon.steplog import DIGEST_FORMAT, StepLogger
from tuimon.workload.state import resume_settings, rng_state, set_rng_state, state_digests

__all__ = [
    "DIGEST_FORMAT",
    "StepBuffer",
    "StepLogger",
    "apply_pair_settings",
    "model_digests",
    "param_digests",
    "reported",
    "resume_settings",
    "rng_state",
    "set_rng_state",
    "state_digests",
    "tensor_digest",
]


_applied: dict[str, Any] | None = None


def param_digests(model: Any) -> tuple[str, dict[str, str]]:
    """The digest of all parameters of a `torch.nn.Module` (in order; or of a mapping of
    tensors such as a state dict), and one per tensor: the reference workload's own function.

    Computed on the device where each tensor lives (`tuimon.devsum/1`: exact integer sums of
    the tensor's bits times position multipliers); 16 bytes per tensor come back to the host.
    """
    from tuimon.workload.loop import param_digests as reference

    return reference(model)


def model_digests(model: Any) -> dict[str, Any]:
    """`param_digest` and `param_digests` of a module, ready for `log.step(k, **...)`."""
    whole, per = param_digests(model)
    return {"param_digest": whole, "param_digests": per}


def tensor_digest(tensor: Any) -> str:
    """The digest of one tensor: its bytes (logical order), dtype and shape."""
    from tuimon.workload.loop import tensor_digest as reference

    return reference(tensor)


def _env_int(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    return int(text) if text.lstrip("-").isdigit() else None


def apply_pair_settings(seed: int | None = None) -> dict[str, Any]:
    """Apply what `tuimon pair` asked for, and return the header's env block that reports it.

    - `TUIMON_SEED` (or `seed` when the pair gave none): Python's, numpy's and torch's
      generators are seeded with it;
    - `TUIMON_THREADS`: torch's intra-op threads;
    - `TUIMON_DETERMINISTIC=1`: `torch.use_deterministic_algorithms(True)` (and
      `CUBLAS_WORKSPACE_CONFIG`, set before CUDA starts).

    The block holds `applied` (what was asked and what torch reports now), `device`
    (`TUIMON_DEVICE`, e.g. for `.to(env["device"])`), `threads` and `deterministic`; pass it
    as `StepLogger(env=...)` so the pair records what this run really did. Without torch,
    only the Python and numpy seeds are set, and the block says so.
    """
    global _applied
    asked_seed = _env_int("TUIMON_SEED")
    seed = asked_seed if asked_seed is not None else seed
    threads = _env_int("TUIMON_THREADS")
    deterministic = os.environ.get("TUIMON_DETERMINISTIC") == "1"
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    applied: dict[str, Any] = {"seed": seed, "asked": {
        "seed": asked_seed, "threads": threads, "deterministic": deterministic,
    }}  # fmt: skip
    applied.update(_apply_torch(seed, threads, deterministic))
    if seed is not None:
        random.seed(seed)
        if "numpy" in sys.modules:  # after torch, which imports it
            sys.modules["numpy"].random.seed(seed % 2**32)
    _applied = applied
    return {
        "applied": applied,
        "digest": DIGEST_FORMAT,
        "device": os.environ.get("TUIMON_DEVICE") or "cpu",
        "threads": applied["threads"],
        "deterministic": applied["deterministic"],
        "torch": applied["torch"],
    }


def _apply_torch(seed: int | None, threads: int | None, deterministic: bool) -> dict[str, Any]:
    """`tuimon.workload.device.apply_settings` (torch is imported there, only now); all None
    where torch is not installed."""
    try:
        from tuimon.workload.device import apply_settings
    except ImportError:  # no torch
        return {"torch": None, "threads": None, "deterministic": None}
    return apply_settings(seed, threads, deterministic)


def applied_env(device: str) -> dict[str, Any]:
    """A header's env block for `device`, with what `apply_pair_settings` applied (if called)."""
    env: dict[str, Any] = {"device": device, "digest": DIGEST_FORMAT}
    if _applied is not None:
        env.update(applied=_applied, threads=_applied.get("threads"))
        env["deterministic"] = _applied.get("deterministic")
    return env


def _number(value: Any) -> float | None:
    """A plain number, a numpy or a one-element torch scalar as float; None otherwise."""
    if hasattr(value, "item"):  # one-element tensors and numpy scalars; larger ones raise
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class StepBuffer:
    """Rows of one step from several hooks (train, then eval) written as one record: a step is
    written when another starts, when a key comes again with another value, or at `flush`."""

    def __init__(self, logger: StepLogger) -> None:
        self.logger = logger
        self.step: int | None = None
        self.fields: dict[str, Any] = {}

    def add(self, step: int, values: Mapping[str, Any]) -> None:
        """Numbers of `values` (tensors too) and digests join the record of `step`."""
        clean: dict[str, Any] = {}
        for key, value in values.items():
            if key in ("param_digest", "param_digests"):
                clean[key] = value
            elif (number := _number(value)) is not None:
                clean[key] = number
        clash = any(k in self.fields and self.fields[k] != v for k, v in clean.items())
        if self.step is not None and (step != self.step or clash):
            self.flush()
        self.step = step
        self.fields.update(clean)

    def flush(self) -> None:
        """Write the held step, if any."""
        if self.step is not None:
            self.logger.step(self.step, **self.fields)
        self.step, self.fields = None, {}
