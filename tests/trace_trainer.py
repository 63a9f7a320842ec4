"""A tiny training script for `tuimon explain` tests: a planted divergence in a known op.

`--plant SIDE` perturbs, on that side only (TUIMON_SIDE), the output of the second `aten.mm`
of the forward of step `--plant-step` (the second Linear, "2.weight") by adding 1e-3 to one
element, through a TorchDispatchMode that sits below the tracer. `--plant-once FILE` plants
only while FILE does not exist (and creates it), so a rerun does not diverge. `--no-helper`
trains without `tuimon.tracing.trace_step`, as a script that has not adopted it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tuimon.steplog import StepLogger
from tuimon.tracing import trace_step

PLANTED = 1e-3


class Plant(TorchDispatchMode):
    """Adds PLANTED to element [0, 0] of the output of the `nth` aten.mm call."""

    def __init__(self, nth: int) -> None:
        super().__init__()
        self.nth, self.seen = nth, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mm.default:
            self.seen += 1
            if self.seen == self.nth:
                out[0, 0] += PLANTED
        return out


def digests(model: torch.nn.Module) -> dict[str, str]:
    """A short hash of the bytes of each parameter."""
    return {
        name: hashlib.blake2b(p.detach().numpy().tobytes(), digest_size=8).hexdigest()
        for name, p in model.named_parameters()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--plant", default=None)
    parser.add_argument("--plant-step", type=int, default=1)
    parser.add_argument("--plant-once", default=None)
    parser.add_argument("--no-helper", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    side = os.environ.get("TUIMON_SIDE")
    plant = args.plant is not None and args.plant == side
    if plant and args.plant_once:
        marker = Path(args.plant_once)
        plant = not marker.exists()
        marker.touch()
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16, bias=False), torch.nn.ReLU(), torch.nn.Linear(16, 4, bias=False)
    )
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log = StepLogger(run={"name": "trace_trainer"}, env={"device": "cpu"})
    for step in range(args.steps):
        planting = plant and step == args.plant_step
        tracing = contextlib.nullcontext() if args.no_helper else trace_step(step, model, opt)
        with Plant(2) if planting else contextlib.nullcontext(), tracing:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            log.step(step, train_loss=loss.item(), param_digests=digests(model))
            opt.zero_grad()
            loss.backward()
            opt.step()
    log.close("ok")


if __name__ == "__main__":
    main()
