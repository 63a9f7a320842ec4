"""What a resume must restore, saved, restored and digested: every random generator, the
optimizer's state and the data position (`tuimon pair --resume-at N`).

`state_digests` is logged with each step (`log.step(k, ..., state_digests=...)`), taken when
step k begins, so a pair whose side b stopped and resumed says which part of the state the
resume lost at the first step after it (`tuimon explain`). torch and numpy are used only when
the script has imported them: importing this module imports neither.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
import sys
from collections.abc import Mapping
from typing import Any

from tuimon.steplog import RESUME_ENV, STATE_TAG


def resume_settings() -> tuple[int | None, str | None, str | None]:
    """(checkpoint_at, checkpoint, resume_from) from the environment a pair gives a run: side
    b's first run gets the step and the path, its second run the path to resume from, side a
    neither (None where unset or empty)."""
    at, path, resume = (os.environ.get(name, "").strip() or None for name in RESUME_ENV)
    return (int(at) if at is not None and at.lstrip("-").isdigit() else None), path, resume


def rng_state() -> dict[str, Any]:
    """Every random generator's state: Python's `random`, numpy's global one and torch's (CPU,
    every CUDA device once CUDA is started, MPS), where the script imported them."""
    state: dict[str, Any] = {"python": random.getstate()}
    if (np := sys.modules.get("numpy")) is not None:
        state["numpy"] = np.random.get_state()
    if (torch := sys.modules.get("torch")) is not None:
        state["torch"] = torch.get_rng_state()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        mps = getattr(torch, "mps", None)
        if mps is not None and torch.backends.mps.is_available():
            state["mps"] = mps.get_rng_state()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Put back what `rng_state` saved (a generator it did not save is left as it is)."""
    if "python" in state:
        random.setstate(_tuples(state["python"]))
    if "numpy" in state and (np := sys.modules.get("numpy")) is not None:
        np.random.set_state(state["numpy"])
    if (torch := sys.modules.get("torch")) is None:
        return
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])


def _tuples(value: Any) -> Any:
    """Python's generator state with its lists back as tuples (a checkpoint saved as JSON)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def state_digests(optimizer: Any = None, data: Any = None, *, rng: bool = True) -> dict[str, str]:
    """Digests of the state a resume must restore, one per part: `rng.python`, `rng.numpy`,
    `rng.torch`, `rng.cuda`, `rng.mps` (those `rng_state` holds), `optimizer` (a torch
    optimizer, its state dict, or any value) and `data` (the data position: a step, an epoch and
    offset, a sampler's state ...). Log them at the start of each step:
    `log.step(k, ..., state_digests=state_digests(opt, data=k))`."""
    out = {f"rng.{k}": _digest(v) for k, v in (rng_state() if rng else {}).items()}
    if optimizer is not None:
        out["optimizer"] = _digest(_state_dict(optimizer))
    if data is not None:
        out["data"] = _digest(data)
    return out


def _state_dict(optimizer: Any) -> Any:
    return optimizer.state_dict() if hasattr(optimizer, "state_dict") else optimizer


def _digest(value: Any) -> str:
    """`state1:<hex>`: blake2b over the value's exact contents (tensors by their bytes, dtype
    and shape; floats by their bits; containers in order, dicts with their keys)."""
    h = hashlib.blake2b(digest_size=8)
    _feed(h, value)
    return f"{STATE_TAG}:{h.hexdigest()}"


def _feed(h: Any, value: Any) -> None:
    if value is None or isinstance(value, bool):
        h.update(f"<{value}>".encode())
    elif isinstance(value, int):
        h.update(b"i" + str(value).encode() + b";")
    elif isinstance(value, float):
        h.update(b"f" + struct.pack("<d", value))
    elif isinstance(value, str):
        h.update(b"s" + str(len(value)).encode() + b":" + value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, bytes):
        h.update(b"b" + str(len(value)).encode() + b":" + value)
    elif isinstance(value, Mapping):
        h.update(b"{")
        for key in value:  # in order: a state dict's order is part of it
            _feed(h, key)
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for item in value:
            _feed(h, item)
        h.update(b"]")
    elif _is_tensor(value):
        from tuimon.workload.digest import tensor_digest

        h.update(b"t" + tensor_digest(value).encode())
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # numpy arrays and scalars
        h.update(f"n{value.dtype}{getattr(value, 'shape', ())}".encode() + value.tobytes())
    else:
        h.update(b"r" + repr(value).encode())


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)
