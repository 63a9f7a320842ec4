"""One call that lets `tuimon explain` trace a user's training step (torch imported lazily).

Wrap the body of each training step (forward, backward, optimiser step)::

    from tuimon.tracing import trace_step

    for step in range(steps):
        with trace_step(step, model, optimizer):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

It does nothing unless `tuimon explain` asks, through the environment, for that step to be traced
(TUIMON_TRACE_STEP names the steps, TUIMON_TRACE_FILE the trace file); then it records every op
of the step (see tuimon/tracing/tracer.py). Importing this module does not import torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRACE_STEP_ENV = "TUIMON_TRACE_STEP"
"""Steps to trace: "N" or "N,M" (a comma list)."""
TRACE_FILE_ENV = "TUIMON_TRACE_FILE"
"""The JSONL file the trace goes to (the monitor names it)."""

_tracer: Any = None


def requested_steps(environ: dict[str, str] | None = None) -> list[int]:
    """The steps the environment asks to trace (none when either variable is missing, and in
    every rank but rank 0 of a torch.distributed job: rank 0's trace is the side's)."""
    env = os.environ if environ is None else environ
    text, path = env.get(TRACE_STEP_ENV, "").strip(), env.get(TRACE_FILE_ENV, "").strip()
    if not text or not path or env.get("RANK", "0").strip() not in ("", "0"):
        return []
    steps = []
    for part in text.split(","):
        part = part.strip()
        if part.lstrip("-").isdigit():
            steps.append(int(part))
    return sorted(set(steps))


@contextmanager
def trace_step(step: int, model: Any = None, optimizer: Any = None) -> Iterator[None]:
    """Trace the ops run inside this block when `tuimon explain` asked for `step`; else nothing.

    `model` and `optimizer` (both optional, both recommended) let the trace hash the state the
    step starts from (parameters, gradients, optimiser state), so that a difference carried in
    from an earlier step is seen as such; without `model`, parameters are named after the first
    module whose forward runs in the block.
    """
    global _tracer
    steps = requested_steps()
    if step not in steps:
        yield
        return
    if _tracer is None:
        from tuimon.tracing import tracer as trace

        trace.own_file(__file__)
        _tracer = trace.Tracer(os.environ[TRACE_FILE_ENV], steps)
    _tracer.begin(step, model, optimizer)
    try:
        yield
    finally:
        _tracer.end()
