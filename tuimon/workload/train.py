"""`tuimon train`: the reference grokking workload, writing a tuimon step log.

Settings are checked before torch is imported, so a bad value fails in a fraction of a second;
an unusable device fails before any work. Both are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tuimon.errors import DeviceError, UsageError
from tuimon.steplog import StepLogger
from tuimon.workload.options import Settings, emb_path, hyper_block, run_block, settings_from_args

if TYPE_CHECKING:
    import torch

    from tuimon.workload.dist import World


class Terminated(BaseException):
    """SIGTERM arrived: stop training, write the end record, exit 143."""


class _Hold:
    """SIGTERM held while a step record is written and counted (`_WholeSteps`): the end
    record's step count is the records the log holds, never one less."""

    depth = 0
    pending = False


def _raise_terminated(signum: int, frame: object) -> None:
    if _Hold.depth:
        _Hold.pending = True
        return
    raise Terminated


class _WholeSteps(StepLogger):
    """A step log whose step records are written whole with their count (`_Hold`)."""

    def step(self, step: int, **metrics: Any) -> None:
        _Hold.depth += 1
        try:
            super().step(step, **metrics)
        finally:
            _Hold.depth -= 1
        if _Hold.pending and not _Hold.depth:
            _Hold.pending = False
            raise Terminated


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into `Terminated` while training (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Progress(_WholeSteps):
    """A step log written to `--log FILE`, with its progress on stderr (the terminal saw
    nothing for minutes): redrawn in place on a terminal, a line every 30 s otherwise."""

    def __init__(self, file: str, total: int | None, **blocks: Any) -> None:
        super().__init__(file, **blocks)
        self.total = total
        self.tty = sys.stderr.isatty()
        self.every = 0.25 if self.tty else 30.0
        self.next = self.elapsed() + (0.0 if self.tty else self.every)
        self.drawn = False
        self.last: tuple[int, dict[str, Any]] | None = None

    def step(self, step: int, **metrics: Any) -> None:
        super().step(step, **metrics)
        self.last = (step, metrics)
        if self.elapsed() >= self.next:
            self.next = self.elapsed() + self.every
            self._say(step, metrics)

    def _say(self, step: int, metrics: dict[str, Any]) -> None:
        done = self._steps
        rate = done / max(self.elapsed(), 1e-9)
        of = f"/{self.total}" if self.total else ""
        values = " ".join(
            f"{k} {v:.4g}" for k, v in metrics.items() if k in ("train_loss", "test_acc")
        )
        line = f"tuimon train: step {step} ({done}{of} steps, {rate:.1f} steps/s) {values}"
        with contextlib.suppress(OSError):
            sys.stderr.write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
            sys.stderr.flush()
            self.drawn = True

    def close(self, status: str = "ok", **extra: Any) -> None:
        closed = self._closed
        super().close(status, **extra)
        if not closed and self.tty and self.drawn and self.last is not None:
            self._say(*self.last)  # where it ended
            with contextlib.suppress(OSError):
                sys.stderr.write("\n")


def _open_logger(s: Settings, **blocks: Any) -> StepLogger:
    try:
        if s.log:
            return _Progress(s.log, s.steps, **blocks)
        return _WholeSteps(s.log, **blocks)
    except OSError as exc:
        raise UsageError(f"cannot write the log {s.log}: {exc.strerror or exc}") from None


def run_settings(s: Settings, argv: list[str] | None = None) -> int:
    """Train with checked settings; the exit code (0 ok, 1 error, 130/143 interrupted)."""
    if s.deterministic:  # cuBLAS reads it when CUDA starts: set it before any torch call
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    from tuimon.workload import device as dev
    from tuimon.workload import dist

    if s.cuda_graph and not dev.torch.cuda.is_available():
        raise DeviceError(
            "--cuda-graph needs CUDA, and torch sees no CUDA device here: run without it"
        )
    world = dist.from_env()  # a torch.distributed launcher started this process
    resumed = s.checkpoint_at is not None or s.resume_from is not None
    if resumed and world is not None and world.size > 1:
        raise UsageError("--checkpoint-at / --resume-from run one process, this job has "
                         f"{world.size}: run without them")  # fmt: skip
    if s.cuda_graph and world is not None and world.size > 1:
        raise UsageError(f"--cuda-graph runs one rank, this job has {world.size}: run without it")
    device = dev.resolve_device(dist.device_for(world, s.device))
    if s.cuda_graph and device.type != "cuda":
        raise UsageError(f"--cuda-graph runs on CUDA only: add --device cuda (not {device})")
    loss_dtype = dev.torch_loss_dtype(device, s.loss_dtype)
    dev.configure(s.threads, s.deterministic)
    dev.seed_generators(s.seed)
    world = dist.start(world, device)
    env = dev.fingerprint(device, loss_dtype, s.time_only)
    logger = _open_logger(
        s,
        run=run_block(s, str(device), list(sys.argv if argv is None else argv)),
        hyper=hyper_block(s),
        env={**env, **(world.fingerprint() if world else {})},
    )
    try:
        with _sigterm_raises():
            artifacts = _train_and_save(s, device, loss_dtype, logger, world)
    except KeyboardInterrupt:
        return _finish(logger, 130, "interrupted", signal="SIGINT")
    except Terminated:
        return _finish(logger, 143, "interrupted", signal="SIGTERM")
    except BrokenPipeError:  # the reader of the log went away (`| head`, a killed monitor)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no noise at exit
        return 141
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return _finish(logger, 1, "error", error=f"{type(exc).__name__}: {exc}")
    finally:
        dist.stop(world)
    return _finish(logger, 0, "ok", **({"artifacts": artifacts} if artifacts else {}))


def _finish(logger: StepLogger, code: int, status: str, **extra: Any) -> int:
    with contextlib.suppress(OSError):  # the reader went away; the exit code still tells
        logger.close(status, **extra)
    return code


def run(args: argparse.Namespace) -> int:
    """Entry point of `tuimon train` (see tuimon.cli); UsageError for bad settings or device."""
    return run_settings(settings_from_args(args))


def _train_and_save(
    s: Settings,
    device: torch.device,
    loss_dtype: torch.dtype,
    logger: StepLogger,
    world: World | None = None,
) -> dict[str, str]:
    """Build, train, save W_E unless --time-only (rank 0 alone under torch.distributed); the
    artifacts written, e.g. {"emb": path}."""
    from tuimon.workload import graph, loop

    model, data = loop.build(s, device)
    if s.cuda_graph:  # the same record, two ways to step
        graph.train(s, model, data, loss_dtype, logger)
    else:
        loop.train(s, model, data, loss_dtype, logger, world=world)
    path = emb_path(s, str(device))
    if s.checkpoint_at is not None:  # stopped with a checkpoint: the run goes on elsewhere
        return {}
    if path is None or (world is not None and not world.leader):
        return {}
    loop.save_embedding(model, path)
    return {"emb": str(path)}
