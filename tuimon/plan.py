"""What a `tuimon pair` command launches: two run specs with identical settings but the device."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuimon.align import MetricFilter
from tuimon.readers import Reading
from tuimon.runner import RunSpec, expand_template
from tuimon.session import Batch, LiveSource, PairOptions, PairSession, SideState
from tuimon.store import SIDES, PairWriter


def default_threads(devices: Sequence[str]) -> int:
    """Intra-op threads per run: two CPU runs share the cores without oversubscribing them."""
    cores = os.cpu_count() or 1
    on_cpu = sum(d == "cpu" for d in devices)
    return max(1, cores // max(1, on_cpu))


def loss_dtype_for(devices: Sequence[str], asked: str | None) -> str | None:
    """The loss dtype both sides use: float32 on both when either is MPS (it has no float64)."""
    if asked:
        return asked
    return "float32" if any(d.startswith("mps") for d in devices) else None


@dataclass
class PairPlan:
    """A pair ready to start: settings shared by both sides, and each side's command."""

    seed: int | None
    devices: tuple[str, str]
    threads: tuple[int, int]
    """Intra-op threads of run a and run b: the same unless the user asked otherwise."""
    deterministic: bool
    loss_dtype: str | None
    template: tuple[str, ...] | None = None
    shell: bool = False
    log_file: str | None = None
    steps: int | None = None
    workload: dict[str, object] = field(default_factory=dict)
    """Reference-workload flags (p, task, eval_every ...) when no template is given."""
    tolerance: float = 0.0
    stall_timeout: float | None = None
    stop_on_fail: bool = False
    label: str | None = None
    reading: Reading = field(default_factory=Reading)
    """How the runs' output is read (`--pattern`, `--map`)."""
    select: MetricFilter = field(default_factory=MetricFilter)
    """Which metrics are judged (`--ignore`, `--only`)."""

    def env(self, side: str, device: str) -> dict[str, str]:
        """The child's environment additions: the same on both sides but for the device."""
        threads = str(self.threads[SIDES.index(side)])
        env = {
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "TUIMON_THREADS": threads,
            "TUIMON_SIDE": side,
            "TUIMON_DEVICE": device,
            "TUIMON_SEED": "" if self.seed is None else str(self.seed),
        }
        if self.deterministic:
            env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
            env["TUIMON_DETERMINISTIC"] = "1"
        if self.loss_dtype:
            env["TUIMON_LOSS_DTYPE"] = self.loss_dtype
        return env

    def spec(self, side: str, pair_dir: Path | None) -> RunSpec:
        """The command of one side."""
        device = self.devices[SIDES.index(side)]
        threads = self.threads[SIDES.index(side)]
        values = {
            "seed": self.seed,
            "device": device,
            "side": side,
            "threads": threads,
            "pair_dir": pair_dir or ".",
        }
        log_file = None
        if self.log_file:
            log_file = Path(expand_template([self.log_file], **values)[0])
        if self.template:
            argv = expand_template(self.template, **values)
            if self.shell:
                argv = (" ".join(argv),)
            env = self.env(side, device)
            return RunSpec(side, device, argv, env, self.shell, log_file, self.reading)
        cmd = [
            sys.executable,
            "-m",
            "tuimon",
            "train",
            "--device",
            device,
            "--threads",
            str(threads),
        ]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.steps is not None:
            cmd += ["--steps", str(self.steps)]
        for key, value in self.workload.items():
            if value is not None and value is not False:
                flag = "--" + key.replace("_", "-")
                cmd += [flag] if value is True else [flag, str(value)]
        if self.deterministic:
            cmd.append("--deterministic")
        if self.loss_dtype:
            cmd += ["--loss-dtype", self.loss_dtype]
        if pair_dir is not None:
            cmd += ["--save-emb", str(pair_dir / f"emb-{side}.npy")]
        else:
            cmd.append("--time-only")
        return RunSpec(side, device, tuple(cmd), self.env(side, device), reading=self.reading)

    def meta(self, specs: Sequence[RunSpec]) -> dict[str, object]:
        """pair.json fields that describe the launch."""
        return {
            "seed": self.seed,
            "devices": list(self.devices),
            "label": self.label,
            "threads": self.threads[0]
            if self.threads[0] == self.threads[1]
            else list(self.threads),
            "deterministic": self.deterministic,
            "loss_dtype": self.loss_dtype,
            "commands": {s.side: list(s.argv) for s in specs},
            "shell": self.shell,
            "reading": self.reading.to_dict(),
        }

    def session_factory(
        self, store: Path | None
    ) -> Callable[[Callable[[Batch], None]], PairSession]:
        """A function that, given a view's batch callback, creates the pair dir and session."""

        def make(on_batch: Callable[[Batch], None]) -> PairSession:
            writer = (
                PairWriter.create(store, seed=self.seed, devices=self.devices, label=self.label)
                if store is not None
                else None
            )
            pair_dir = writer.path if writer else None
            specs = tuple(self.spec(side, pair_dir) for side in SIDES)
            sides = tuple(SideState(s.side, s.device, s.command_text()) for s in specs)
            options = PairOptions(
                tolerance=self.tolerance,
                select=self.select,
                stall_timeout=self.stall_timeout,
                stop_on_fail=self.stop_on_fail,
                totals=(self.steps, self.steps),
                meta=self.meta(specs),
            )
            return PairSession(
                LiveSource(specs),  # type: ignore[arg-type]
                sides,  # type: ignore[arg-type]
                options=options,
                writer=writer,
                on_batch=on_batch,
            )

        return make
