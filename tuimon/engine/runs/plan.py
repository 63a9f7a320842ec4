"""What a `tuimon pair` command launches: two run specs with identical settings but the device."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.launch.ranks import under_torchrun
from tuimon.engine.launch.resumed import Resume
from tuimon.engine.launch.runner import RunSpec, mistyped_placeholder, substitute
from tuimon.engine.sources.against import AgainstCheck, AgainstSource, copy_saved_emb
from tuimon.engine.sources.against_side import SavedSide
from tuimon.engine.sources.replicas import ReplicaWatch
from tuimon.engine.sources.session import Batch, LiveSource, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.errors import UsageError
from tuimon.readers import Reading
from tuimon.steplog import RESUME_ENV
from tuimon.store import SIDES, PairWriter

REMOTE_PYTHON = "python3"
"""The reference workload through a launcher runs `python3 -m tuimon train` on the other side."""
CMD = "{cmd}"
"""In a launcher, stands for the whole command as one shell-quoted argument."""


def launched(launcher: Sequence[str], spec: RunSpec) -> tuple[str, ...]:
    """`launcher + env K=V ... command`: the environment goes with the command, explicitly.

    The other side does not inherit tuimon's environment, so the pair's variables travel as
    `env K=V` in front of the command. ssh joins its arguments into one string that the remote
    shell parses again, so for ssh (and wherever the launcher says `{cmd}`) the command is one
    shell-quoted string; other launchers (srun, docker exec ...) get it as separate arguments.
    """
    command = list(spec.argv)
    if spec.shell:
        command = ["sh", "-c", spec.argv[0]]
    full = ["env", *(f"{k}={v}" for k, v in spec.env.items()), *command]
    if any(CMD in part for part in launcher):
        return tuple(part.replace(CMD, shlex.join(full)) for part in launcher)
    if Path(launcher[0]).name == "ssh":
        return (*launcher, shlex.join(full))
    return (*launcher, *full)


def parse_launcher(text: str | None) -> tuple[str, ...] | None:
    """`'ssh -tt mac-mini'` -> its words (ValueError on unbalanced quotes); None when empty."""
    if text is None or not text.strip():
        return None
    return tuple(shlex.split(text))


SHOWN_ONLY = ("key_freqs.*",)
"""Metrics of the reference workload that are shown, not judged (an implicit `--ignore`):
its top key frequencies (`--freq-every`) are labels, not quantities. A relative difference of
two frequencies (36 against 25) is not how far the runs are apart, and they can differ only
where W_E, which is judged, already has. The end-of-run comparison of the saved W_E says
whether the two runs' key frequencies agree."""

SUBSTITUTED = (
    "seed", "device", "side", "threads", "pair_dir", "checkpoint_at", "checkpoint", "resume_from"
)  # fmt: skip
"""The `{name}`s substituted in a command template and in --log-file (`pair --help` says so)."""


def python_module(module: str) -> list[str]:
    """`python -m module` that never imports from the current directory (a folder named
    `tuimon/` there must not shadow the package): `-P` on 3.11+, the same by hand on 3.10."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module]
    code = f"import sys, runpy; del sys.path[0]; runpy.run_module({module!r}, run_name='__main__')"
    return [sys.executable, "-c", code]


def default_threads(devices: Sequence[str], nproc: Sequence[int | None] = ()) -> int:
    """Intra-op threads per process: the CPU runs (each rank of a `--nproc` side is one) share
    the cores without oversubscribing them."""
    cores = os.cpu_count() or 1
    ranks = list(nproc) + [None] * (len(devices) - len(nproc))
    on_cpu = sum((n or 1) for d, n in zip(devices, ranks, strict=False) if d == "cpu")
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
    band: dict[str, Any] | None = None
    """`--tolerance-from`: the band per metric (`Band.to_dict`) that judges instead."""
    stall_timeout: float | None = None
    stop_on_fail: bool = False
    label: str | None = None
    reading: Reading = field(default_factory=Reading)
    """How the runs' output is read (`--pattern`, `--map`)."""
    launch: tuple[tuple[str, ...] | None, tuple[str, ...] | None] = (None, None)
    """A launcher prefix per side (`ssh mac-mini`, `srun -p gpu`): that run goes through it."""
    sweep: str | None = None
    """The sweep this pair belongs to (pair.json `sweep`)."""
    select: MetricFilter = field(default_factory=MetricFilter)
    """Which metrics are judged (`--ignore`, `--only`)."""
    stop_on_divergence: bool = False
    against: SavedSide | None = None
    """`pair --against`: the saved run that is side b; only side a is launched."""
    nproc: tuple[int | None, int | None] = (None, None)
    """Ranks of each side under torch.distributed's launcher (`--nproc`); None: one process."""
    resume_at: int | None = None
    """`--resume-at N`: side b stops after step N with a checkpoint and resumes from it."""
    seeds: tuple[int, int] | None = None
    """`pair --seeds A,B`: side a runs seed A, side b seed B (`seed` is A), a check that the
    seed is applied (`judge.seed_check`)."""
    check_seeds: bool = False
    """`--check-seeds`: the exit code is the seed check's (`seed_check.pair_exit_code`)."""

    def seed_of(self, side: str) -> int | None:
        """The seed one side runs (`seeds` when given, else `seed`)."""
        return self.seeds[SIDES.index(side)] if self.seeds else self.seed

    def __post_init__(self) -> None:
        """A mistyped `{name}` in the template or --log-file (`{sed}`) is UsageError: it
        would reach the script as written, without a word."""
        args = [*(self.template or ()), *([self.log_file] if self.log_file else [])]
        if problem := mistyped_placeholder(args, SUBSTITUTED):
            raise UsageError(problem)

    def _scratch(self) -> Path:
        """Where a pair that is not saved lets W&B write its sides' runs: a folder of the
        temporary directory named once per plan, made by W&B only when a run is written there
        (and left for the user: W&B runs are data)."""
        found = self.__dict__.get("_scratch_dir")
        if found is None:
            found = Path(tempfile.gettempdir()) / f"tuimon-wandb-{uuid.uuid4().hex[:12]}"
            self.__dict__["_scratch_dir"] = found
        return found

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
            "TUIMON_SEED": "" if (seed := self.seed_of(side)) is None else str(seed),
        }
        if self.deterministic:
            env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
            env["TUIMON_DETERMINISTIC"] = "1"
        if self.loss_dtype:
            env["TUIMON_LOSS_DTYPE"] = self.loss_dtype
        return env

    def spec(
        self,
        side: str,
        pair_dir: Path | None,
        *,
        ranks: bool = True,
        part: tuple[str, Path] | None = None,
    ) -> RunSpec:
        """The command of one side, as `--nproc` ranks (unless `ranks` is False) and through
        its launcher when it has one; `part` ("stop" or "resume", and the checkpoint): one of
        the two runs of a resumed side (`--resume-at`)."""
        spec = self._local_spec(side, pair_dir, part)
        launcher = self.launch[SIDES.index(side)]
        nproc = self.nproc[SIDES.index(side)]
        if nproc and ranks:
            spec = under_torchrun(spec, nproc, pair_dir, python=REMOTE_PYTHON if launcher else None)
        if not launcher:
            return spec
        return replace(spec, argv=launched(launcher, spec), shell=False)

    def resume(self, pair_dir: Path | None) -> Resume | None:
        """Side b's second run and its checkpoint under `--resume-at` (None without it): the
        checkpoint is `checkpoint-b` in the pair directory, or in a folder of its own with
        `--no-save` (removed with it)."""
        if self.resume_at is None:
            return None
        folder = pair_dir or Path(tempfile.mkdtemp(prefix="tuimon-resume-"))
        checkpoint = folder / "checkpoint-b"
        then = self.spec("b", pair_dir, part=("resume", checkpoint))
        return Resume("b", self.resume_at, checkpoint, then, scratch=pair_dir is None)

    def _resume_values(self, part: tuple[str, Path] | None) -> tuple[str, str, str]:
        """{checkpoint_at}, {checkpoint} and {resume_from} of a run: empty but where they
        apply (the first run of a resumed side stops and saves, its second resumes)."""
        if part is None:
            return "", "", ""
        kind, path = part
        return (
            (str(self.resume_at), str(path), "") if kind == "stop" else ("", str(path), str(path))
        )

    def _local_spec(
        self, side: str, pair_dir: Path | None, part: tuple[str, Path] | None = None
    ) -> RunSpec:
        device = self.devices[SIDES.index(side)]
        remote = bool(self.launch[SIDES.index(side)])
        threads = self.threads[SIDES.index(side)]
        resumed = self._resume_values(part)
        values = dict(
            zip(SUBSTITUTED, (self.seed_of(side), device, side, threads, pair_dir or ".", *resumed),
                strict=True)
        )  # fmt: skip
        told = {k: v for k, v in zip(RESUME_ENV, resumed, strict=True) if v}
        log_file = None
        if self.log_file:
            log_file = Path(substitute([self.log_file], values)[0])
        if self.template:
            argv: tuple[str, ...]
            if self.shell:  # substituted values are shell-quoted: a value is never shell code
                argv = (" ".join(substitute(self.template, values, shlex.quote)),)
            else:
                argv = substitute(self.template, values)
            env = {**self.env(side, device), **told}
            wandb_dir = None
            if log_file is None and not remote and not _wandb_set():
                wandb_dir = (pair_dir or self._scratch()) / f"wandb-{side}"  # its W&B runs
                env["WANDB_DIR"] = str(wandb_dir)
            return RunSpec(
                side, device, argv, env, self.shell, log_file, self.reading, wandb_dir=wandb_dir
            )
        cmd = [
            *([REMOTE_PYTHON, "-m", "tuimon"] if remote else python_module("tuimon")),
            "train",
            "--device",
            device,
            "--threads",
            str(threads),
        ]
        if (seed := self.seed_of(side)) is not None:
            cmd += ["--seed", str(seed)]
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
        if self.resume_at is not None:  # both sides log what a resume must restore
            cmd.append("--state-digests")
        if part is not None and part[0] == "stop":
            cmd += ["--checkpoint-at", str(self.resume_at), "--checkpoint", str(part[1])]
        elif part is not None:
            cmd += ["--resume-from", str(part[1])]
        if pair_dir is None:
            cmd.append("--time-only")
        elif not remote:  # the other machine cannot write into this pair directory
            cmd += ["--save-emb", str(pair_dir / f"emb-{side}.npy")]
        env = {**self.env(side, device), **told}
        return RunSpec(side, device, tuple(cmd), env, reading=self.reading)

    @staticmethod
    def _part(side: str, resume: Resume | None) -> tuple[str, Path] | None:
        """The first run of the resumed side stops with the checkpoint; other sides run whole."""
        return ("stop", resume.checkpoint) if resume is not None and side == resume.side else None

    def shown(self, spec: RunSpec, pair_dir: Path | None) -> str:
        """A side's command as its pane shows it: `2 ranks · python train.py ...` for a side
        under torch.distributed's launcher (pair.json's `commands` holds the whole line)."""
        nproc = self.nproc[SIDES.index(spec.side)]
        if self.resume_at is not None and spec.side == "b":
            return f"resumed after step {self.resume_at} · {spec.command_text()}"
        if not nproc:
            return spec.command_text()
        inner = self.spec(spec.side, pair_dir, ranks=False).command_text()
        return f"{nproc} rank{'s' if nproc > 1 else ''} · {inner}"

    def meta(self, specs: Sequence[RunSpec]) -> dict[str, object]:
        """pair.json fields that describe the launch."""
        launch = {side: list(v) if v else None for side, v in zip(SIDES, self.launch, strict=True)}
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
            **({"sweep": self.sweep} if self.sweep else {}),
            **({"launch": launch} if any(self.launch) else {}),
            **({"nproc": list(self.nproc)} if any(self.nproc) else {}),
            **({"seeds": list(self.seeds), "check_seeds": self.check_seeds} if self.seeds else {}),
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
            saved = self.against
            resume = self.resume(pair_dir)
            specs = tuple(
                self.spec(side, pair_dir, part=self._part(side, resume))
                for side in (SIDES[:1] if saved else SIDES)
            )
            sides = tuple(SideState(s.side, s.device, self.shown(s, pair_dir)) for s in specs)
            options = PairOptions(
                tolerance=self.tolerance,
                band=self.band,
                select=self.select,
                stall_timeout=self.stall_timeout,
                stop_on_fail=self.stop_on_fail,
                stop_on_divergence=self.stop_on_divergence,
                totals=(self.steps, self.steps),
                meta=self.meta(specs),
                replicas=ReplicaWatch(pair_dir, self.nproc, self.reading) or None,
            )
            if resume is not None:
                options.meta["resume"] = resume.record  # `restarted` is set as b starts again
            source = LiveSource(specs, writer=writer, resume=resume)  # type: ignore[arg-type]
            if saved is not None:
                device = self.devices[1]
                sides += (SideState("b", device, f"saved: {shlex.quote(str(saved.log))}"),)
                options.totals = (self.steps, None)
                options.meta["against"] = saved.provenance()
                options.end_check = AgainstCheck(saved, copy_saved_emb(saved, pair_dir))
                source = AgainstSource(specs, saved, writer=writer)
            return PairSession(
                source,
                sides,  # type: ignore[arg-type]
                options=options,
                writer=writer,
                on_batch=on_batch,
            )

        return make


def _wandb_set() -> bool:
    """The user chose where W&B writes (`WANDB_DIR`): a run's W&B folder is left there."""
    return bool(os.environ.get("WANDB_DIR"))
