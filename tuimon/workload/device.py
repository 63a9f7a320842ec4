"""Devices for `tuimon train`: what is available, the one asked for, and its fingerprint."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Any

import torch

from tuimon.devices import DEVICE_NAME, setup_hint
from tuimon.errors import DeviceError, UsageError
from tuimon.steplog import DIGEST_FORMAT


def available_devices() -> list[str]:
    """Device names usable here, e.g. ["cpu", "cuda:0"]."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        names.append("mps")
    return names


def resolve_device(name: str) -> torch.device:
    """The device `name` stands for ("cuda" is "cuda:0"); UsageError when it is not usable here."""
    match = DEVICE_NAME.fullmatch(name.strip().lower())
    available = available_devices()
    if match is None:
        raise UsageError(
            f"device {name!r} is not a device name (use cpu, cuda, cuda:N or mps; "
            f"available here: {', '.join(available)})"
        )
    resolved = {"cuda": "cuda:0", "mps:0": "mps"}.get(match[0], match[0])
    if resolved not in available:  # not a usage error: --help would not help, the hint does
        raise DeviceError(
            f"device {name!r} is not available here (available: {', '.join(available)}); "
            + setup_hint(resolved, "--device cpu")
        )
    return torch.device(resolved)


def torch_loss_dtype(device: torch.device, requested: str | None) -> torch.dtype:
    """The torch dtype of the loss in a run: float64 unless the device lacks it (MPS: float32);
    an explicit request wins if possible. (`plan.loss_dtype_for` picks the flag for a pair.)"""
    if requested is None:
        return torch.float32 if device.type == "mps" else torch.float64
    if requested == "float64" and device.type == "mps":
        raise UsageError("--loss-dtype float64 is not available on mps (use float32)")
    return getattr(torch, requested)


def _cpu_name() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin" and (name := _ask("sysctl", "-n", "machdep.cpu.brand_string")):
        return name
    return platform.processor() or None


def _ask(*argv: str) -> str | None:
    """The first line a system tool prints, or None where it cannot be asked."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split("\n", 1)[0].strip() or None


def device_name(device: torch.device) -> str | None:
    """The GPU's name, or the processor's for cpu and mps (Apple's GPU is part of the chip)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_name()


def apply_settings(seed: int | None, threads: int | None, deterministic: bool) -> dict[str, Any]:
    """Seed torch and `configure` it as a pair asked (a user's script, `tuimon.adopt`); what
    torch reports afterwards."""
    if seed is not None:
        torch.manual_seed(seed)
    configure(threads, deterministic)
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
    }


def seed_generators(seed: int) -> None:
    """Seed the global generators (Python, numpy, torch on every device) from the run's seed.
    The workload draws its weights and split from generators of its own; seeded, the global
    ones start where every run of the seed starts, so a resume that loses them is seen."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def configure(threads: int | None, deterministic: bool) -> None:
    """Set intra-op threads and deterministic algorithms (call CUBLAS setup before CUDA init)."""
    if threads is not None:
        torch.set_num_threads(threads)
    if deterministic:
        torch.use_deterministic_algorithms(True)


def fingerprint(device: torch.device, loss_dtype: torch.dtype, time_only: bool) -> dict[str, Any]:
    """The torch part of the header's env block (StepLogger adds steplog.base_env())."""
    env: dict[str, Any] = {
        "device": str(device),
        "device_name": device_name(device),
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "loss_dtype": str(loss_dtype).removeprefix("torch."),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "time_only": time_only,
        "digest": DIGEST_FORMAT,
    }
    if device.type == "cuda":
        env["cuda"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version()
        env["driver"] = _nvidia_driver()
    return env


def _nvidia_driver() -> str | None:
    """The NVIDIA driver version (nvidia-smi), or None where it cannot be asked."""
    return _ask("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
