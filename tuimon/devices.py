"""Which torch devices exist here, asked of a child process (the monitor never imports torch)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

import orjson

from tuimon.errors import DeviceError

_PROBE = """
import sys
del sys.path[0]  # never import a `torch/` folder of the current directory
import json, torch
out = ["cpu"]
if torch.cuda.is_available():
    out += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
mps = getattr(torch.backends, "mps", None)
if mps is not None and mps.is_available():
    out.append("mps")
print(json.dumps(out))
"""
DEVICE_NAME = re.compile(r"cpu|mps(?::0)?|cuda(?::\d+)?")
"""A torch device name: cpu, mps (or mps:0), cuda, cuda:N (the one pattern tuimon uses)."""


def is_torch_device(name: str) -> bool:
    """True for names torch understands: cpu, mps, cuda, cuda:N."""
    return DEVICE_NAME.fullmatch(name) is not None


def probe(python: str = sys.executable, timeout: float = 60.0) -> list[str] | None:
    """The devices torch sees in `python`, or None when torch cannot be imported there."""
    try:
        out = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, timeout=timeout, check=True
        ).stdout
        devices = orjson.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return [str(d) for d in devices] if isinstance(devices, list) else None


def setup_hint(device: str, cpu: str = "--devices cpu,cpu") -> str:
    """What to do about a device that is not available here (`cpu`: the option that runs on
    the CPU instead, as the command asked takes it)."""
    if device.startswith("mps"):
        setup = "MPS needs macOS on Apple silicon and a torch built with MPS"
    elif device.startswith("cuda"):
        setup = "CUDA needs an NVIDIA GPU, its driver and a torch built with CUDA"
    else:
        setup = "check the device's setup"
    return f"run on the CPU with {cpu}, or set the device up ({setup})"


def check(
    devices: list[str], *, need_torch: bool, say: Callable[[str], None] | None = None
) -> None:
    """Raise DeviceError naming the first unavailable device; cpu needs no probe.

    `say` hears what is being checked before the probe (importing torch can take seconds)."""
    wanted = [d for d in dict.fromkeys(devices) if is_torch_device(d) and d != "cpu"]
    if need_torch:
        bad = [d for d in devices if not is_torch_device(d)]
        if bad:
            raise DeviceError(
                f"device {bad[0]!r} is not a torch device (use cpu, cuda, cuda:N, mps)"
            )
    if not wanted:
        return
    if say is not None:
        say(f"checking that {', '.join(wanted)} is available (importing torch in a child process)…")
    available = probe()
    if available is None:
        if need_torch:
            raise DeviceError("torch cannot be imported here, so no device can be checked")
        return
    for d in wanted:
        if d not in available:
            raise DeviceError(
                f"device {d!r} is not available here (available: {', '.join(available)}); "
                + setup_hint(d)
            )
