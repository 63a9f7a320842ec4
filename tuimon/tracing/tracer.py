"""The op tracer behind `tuimon explain`: every op of the traced steps, hashed (child side only).

A `TorchDispatchMode` sees each aten op after autograd; for each one it writes a JSON line: the
op, the phase (forward, backward, optimiser, eval), the module and parameters it belongs to, the
shapes and dtypes of its outputs, a blake2b hash of their exact bytes, and the line of training
code that called it. A `TorchFunctionMode` above autograd remembers which code line, module and
parameters made each autograd node, so an op of the backward is named after the forward code
that needs it (the backward itself runs inside `loss.backward()`). The outputs of non-view ops
are saved as .npy files next to the trace (up to a byte budget), so that the monitor can
measure how far apart the first differing ops are. PyTorch's own `torch.utils._debug_mode`
hashes ops too, but knows nothing of phases, parameters or user lines.

Ops that return uninitialised memory (`empty`, `new_empty_strided` ...) differ from run to run
by nature and are not hashed (see DESIGN.md, "Determinism facts").
"""

from __future__ import annotations

import hashlib
import linecache
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import orjson
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

TRACE_FORMAT = "tuimon.trace/1"
UNINITIALISED = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}
)
"""Ops whose output is whatever memory they got: never hashed."""
DEFAULT_BUDGET = 2 * 1024**3
"""Bytes of op outputs saved per trace (TUIMON_TRACE_BUDGET overrides); past it, hashes only."""

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_FILES = {os.path.abspath(__file__)}
_SKIP_PARTS = ("contextlib.py", "<frozen ")


def own_file(path: str) -> None:
    """Treat frames of `path` (a helper such as tuimon/tracing.py) as the tracer's own."""
    _OWN_FILES.add(os.path.abspath(path))


def _user_frame(frame: FrameType | None) -> FrameType | None:
    while frame is not None:
        name = frame.f_code.co_filename
        if not (
            name.startswith(_TORCH_DIR)
            or os.path.abspath(name) in _OWN_FILES
            or any(part in name for part in _SKIP_PARTS)
        ):
            return frame
        frame = frame.f_back
    return None


def user_line() -> str | None:
    """`file:line in function: code` of the innermost frame outside torch and the tracer."""
    frame = _user_frame(sys._getframe(1))
    if frame is None:
        return None
    path = frame.f_code.co_filename
    code = linecache.getline(path, frame.f_lineno).strip()
    try:
        shown = os.path.relpath(path)
        if shown.startswith(".."):
            shown = path
    except ValueError:
        shown = path
    return f"{shown}:{frame.f_lineno} in {frame.f_code.co_name}: {code}"


def _tensors(value: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _short(name: str) -> str:
    """aten.index_put.default -> index_put; the overload is kept in the record's op."""
    return name.split(".")[1] if name.startswith("aten.") else name


def _bytes_of(t: torch.Tensor) -> np.ndarray | None:
    """The exact bytes of a dense tensor, on the CPU, as uint8 (None for sparse and friends)."""
    if t.layout != torch.strided or t.is_quantized:
        return None
    flat = t.detach().contiguous().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.view(torch.uint8).numpy()


def _hash(raw: np.ndarray | None) -> str | None:
    """A tensor's bytes (`_bytes_of`) as a 128-bit BLAKE2b hex digest (None without bytes)."""
    return None if raw is None else hashlib.blake2b(raw.tobytes(), digest_size=16).hexdigest()


class _Context:
    """What the tracer knows of the code around an op: module stack, phase, node origins."""

    def __init__(self) -> None:
        self.modules: list[str] = []
        self.module_names: dict[int, str] = {}
        self.params: dict[int, str] = {}
        """Storage data pointer of each known parameter -> its qualified name."""
        self.nodes: dict[Any, dict[str, Any]] = {}
        """Autograd node -> {line, module, params} of the forward call that made it."""
        self.in_optimiser = 0

    def adopt(self, root: torch.nn.Module) -> None:
        """Learn names of `root`'s modules and parameters (the first module run is the root)."""
        kind = type(root).__name__
        for name, module in root.named_modules():
            label = f"{name} ({type(module).__name__})" if name else kind
            self.module_names.setdefault(id(module), label)
        for name, param in root.named_parameters():
            self.params.setdefault(_ptr(param), name)

    def params_of(self, tensors: list[torch.Tensor]) -> list[str]:
        names: list[str] = []
        for t in tensors:
            name = self.params.get(_ptr(t))
            if name is not None and name not in names:
                names.append(name)
        return names


def _ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -1


class _Origins(TorchFunctionMode):
    """Above autograd: the code line, module and parameters that made each autograd node."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__()
        self.ctx = ctx

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        outs = [t for t in _tensors(out) if t.grad_fn is not None]
        if not outs:
            return out
        ctx = self.ctx
        info = {
            "line": user_line(),
            "module": ctx.modules[-1] if ctx.modules else None,
            "params": ctx.params_of(_tensors((args, kwargs))),
        }
        todo = [t.grad_fn for t in outs]
        budget = 64
        while todo and budget:  # nodes made inside this call (stop at ones known already)
            node = todo.pop()
            budget -= 1
            if node is None or node in ctx.nodes or not hasattr(node, "next_functions"):
                continue
            if type(node).__name__ == "AccumulateGrad":
                continue
            ctx.nodes[node] = info
            todo.extend(n for n, _ in node.next_functions)
        return out


class _Recorder(TorchDispatchMode):
    """Below autograd: hash and describe every op, write one JSON line each."""

    def __init__(self, ctx: _Context, tracer: Tracer) -> None:
        super().__init__()
        self.ctx = ctx
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        with torch._C.DisableTorchFunction():
            self.tracer.record(func, args, kwargs, out)
        return out


class Tracer:
    """Traces the ops of the steps it is told about into a JSONL file (and .npy outputs)."""

    def __init__(self, path: str | os.PathLike[str], steps: list[int]) -> None:
        self.path = Path(path)
        self.tensor_dir = self.path.with_name(self.path.name + ".tensors")
        self.tensor_dir.mkdir(parents=True, exist_ok=True)
        self.steps = sorted(set(steps))
        self.budget = int(os.environ.get("TUIMON_TRACE_BUDGET", DEFAULT_BUDGET))
        self.saved_bytes = 0
        self.index = 0
        self.step: int | None = None
        self.done: set[int] = set()
        self.ctx = _Context()
        self.fh = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._hooks: list[Any] = []
        self._modes: list[Any] = []
        self._write(
            {
                "type": "trace_header",
                "format": TRACE_FORMAT,
                "steps": self.steps,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "deterministic": torch.are_deterministic_algorithms_enabled(),
                "pid": os.getpid(),
            }
        )

    def _write(self, obj: dict[str, Any]) -> None:
        self.fh.write(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))
        self.fh.flush()

    # -- hooks that tell where an op is ------------------------------------------------------

    def _install(self) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        ctx = self.ctx

        def pre(module: torch.nn.Module, args: Any) -> None:
            if not ctx.modules or id(module) not in ctx.module_names:
                ctx.adopt(module)
            ctx.modules.append(ctx.module_names.get(id(module), type(module).__name__))

        def post(module: torch.nn.Module, args: Any, out: Any) -> None:
            if ctx.modules:
                ctx.modules.pop()

        def opt_pre(opt: Any, args: Any, kwargs: Any) -> None:
            for group in opt.param_groups:
                for p in group["params"]:
                    ctx.params.setdefault(_ptr(p), f"param{len(ctx.params)}")
            with torch._C.DisableTorchFunction():
                for group in opt.param_groups:
                    for p in group["params"]:
                        for key, value in opt.state.get(p, {}).items():
                            if isinstance(value, torch.Tensor):
                                self.record_state(f"state.{key}", p, value, "optimiser")
            ctx.in_optimiser += 1

        def opt_post(opt: Any, args: Any, kwargs: Any) -> None:
            ctx.in_optimiser = max(0, ctx.in_optimiser - 1)

        self._hooks = [
            nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post),
            optim.register_optimizer_step_pre_hook(opt_pre),
            optim.register_optimizer_step_post_hook(opt_post),
        ]

    def adopt(self, model: torch.nn.Module | None) -> None:
        """Name the parameters of `model` (otherwise learnt when its forward first runs)."""
        if model is not None:
            self.ctx.adopt(model)

    # -- a traced step -----------------------------------------------------------------------

    def begin(self, step: int, model: torch.nn.Module | None = None, optimizer: Any = None) -> None:
        """Start recording the ops of `step` (hashing first the state it starts from)."""
        self.adopt(model)
        self.step = step
        self._install()
        self._write({"type": "step_begin", "step": step})
        if model is not None:  # the state the step starts from: parameters, gradients
            with torch.no_grad():
                for param in model.parameters():
                    self.record_state("state.param", param, param, "forward")
                    if param.grad is not None:
                        self.record_state("state.grad", param, param.grad, "forward")
                    state = optimizer.state.get(param, {}) if optimizer is not None else {}
                    for key, value in state.items():
                        if isinstance(value, torch.Tensor):
                            self.record_state(f"state.{key}", param, value, "forward")
        self._modes = [_Origins(self.ctx), _Recorder(self.ctx, self)]
        for mode in self._modes:
            mode.__enter__()

    def end(self) -> None:
        """Stop recording; after the last requested step, write the trace's end record."""
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self.ctx.modules.clear()
        self.ctx.nodes.clear()
        if self.step is not None:
            self.done.add(self.step)
            self._write({"type": "step_end", "step": self.step})
        self.step = None
        if self.done >= set(self.steps):
            self.close()

    def close(self) -> None:
        """Write the end record and close the file (idempotent)."""
        if self.fh.closed:
            return
        self._write({"type": "trace_end", "ops": self.index, "saved_bytes": self.saved_bytes})
        self.fh.close()

    def _phase(self) -> tuple[str, Any]:
        node = torch._C._current_autograd_node()
        if self.ctx.in_optimiser:
            return "optimiser", None
        if node is not None:
            return "backward", node
        if torch.is_inference_mode_enabled() or not torch.is_grad_enabled():
            return "eval", None
        return "forward", None

    def record_state(self, what: str, param: torch.Tensor, value: torch.Tensor, phase: str) -> None:
        """A tensor the step starts from (a parameter, its gradient, optimiser state)."""
        raw = _bytes_of(value)
        entry: dict[str, Any] = {
            "type": "op",
            "i": self.index,
            "step": self.step,
            "phase": phase,
            "op": what,
            "state": True,
            "module": None,
            "params": self.ctx.params_of([param]),
            "line": None,
            "view": False,
            "shapes": [list(value.shape)],
            "dtypes": [str(value.dtype).removeprefix("torch.")],
            "devices": [str(value.device)],
            "hashes": [_hash(raw)],
        }
        if raw is not None and (name := self._save(value, 0)):
            entry["files"] = [name]
        self.index += 1
        self._write(entry)

    def record(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """One op: describe it, hash its outputs, maybe save them."""
        name = str(func)
        short = _short(name)
        if short in UNINITIALISED:
            return
        outs = _tensors(out)
        phase, node = self._phase()
        entry: dict[str, Any] = {
            "type": "op",
            "i": self.index,
            "step": self.step,
            "phase": phase,
            "op": name,
        }
        if phase == "backward" and node is not None:
            entry.update(self._backward_origin(node))
        else:
            ctx = self.ctx
            entry["module"] = ctx.modules[-1] if ctx.modules else None
            entry["params"] = ctx.params_of(_tensors((args, kwargs)) + outs)
            entry["line"] = user_line()
        if short in ("index_put", "index_put_", "_index_put_impl_", "put_", "put"):
            accumulate = kwargs.get("accumulate", args[3] if len(args) > 3 else False)
            entry["accumulate"] = bool(accumulate)
        schema = func._schema
        entry["view"] = bool(
            schema.returns
            and schema.returns[0].alias_info is not None
            and not schema.returns[0].alias_info.is_write
        )
        shapes, dtypes, devices, hashes, files = [], [], [], [], []
        for j, t in enumerate(outs):
            shapes.append(list(t.shape))
            dtypes.append(str(t.dtype).removeprefix("torch."))
            devices.append(str(t.device))
            raw = _bytes_of(t)
            hashes.append(_hash(raw))
            files.append(None if raw is None or entry["view"] else self._save(t, j))
        entry.update(shapes=shapes, dtypes=dtypes, devices=devices, hashes=hashes)
        if any(files):
            entry["files"] = files
        self.index += 1
        self._write(entry)

    def _backward_origin(self, node: Any) -> dict[str, Any]:
        """A backward op's autograd node, and the module, parameters and calling line of the
        forward op that made it (an AccumulateGrad: the parameter it accumulates into)."""
        out: dict[str, Any] = {"node": node.name()}
        origin = self.ctx.nodes.get(node)
        if type(node).__name__ == "AccumulateGrad":
            variable = getattr(node, "variable", None)
            params = self.ctx.params_of([variable]) if variable is not None else []
            origin = {"line": None, "module": None, "params": params}
        if origin is not None:
            out.update(module=origin["module"], params=origin["params"])
            out["line"] = origin["line"] or user_line()
        else:
            out.update(module=None, params=[], line=user_line())
        return out

    def _save(self, t: torch.Tensor, j: int) -> str | None:
        """Save one output as .npy (float32 for dtypes numpy lacks); None past the budget."""
        size = t.numel() * t.element_size()
        if self.saved_bytes + size > self.budget:
            return None
        value = t.detach()
        if value.dtype in (torch.bfloat16, torch.complex32) or value.dtype.itemsize == 1:
            value = value.float()
        try:
            array = value.cpu().numpy()
        except (TypeError, RuntimeError):
            return None
        name = f"{self.index:06d}-{j}.npy"
        np.save(self.tensor_dir / name, array)
        self.saved_bytes += size
        return name
