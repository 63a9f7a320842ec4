"""A sweep submitted to a scheduler (`tuimon sweep --submit 'sbatch ...'`), followed later.

Submitting: each pair gets its directory in the store first; each of its two runs is submitted
through the prefix as a small shell script that runs the command with its environment, writes
the run's stdout and stderr straight into the pair directory (`a.jsonl`, `a.stderr`: the raw
logs a live pair would have) and, when the run ends, its exit code (`a.exit`). The monitor may
then exit: the jobs are the scheduler's. `tuimon sweep --attach RECORD` later follows those files
with the same session and aligner as a live pair (`engine.sources.follow`) and judges whatever
has run; the commands in the record are data there, never run. Nothing here imports textual.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.runs.plan import CMD, PairPlan
from tuimon.engine.runs.sweep import Sweep
from tuimon.engine.sources.follow import FollowSource
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.sanitize import clean
from tuimon.store import SIDES, PairWriter, StoreError, open_pair_dir

SUBMIT_TIMEOUT = 120.0
"""Seconds one submission (an `sbatch` call) may take."""
ALIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
"""SLURM job states in which a silent job is not over."""
SessionFactory = Callable[[Callable[[Batch], None]], PairSession]


def job_script(spec: RunSpec, pair_dir: Path, cwd: Path) -> str:
    """The shell script a submitted run executes: its command, logs into `pair_dir`."""
    command = ["sh", "-c", spec.argv[0]] if spec.shell else list(spec.argv)
    full = ["env", *(f"{k}={v}" for k, v in spec.env.items()), *command]
    q = shlex.quote
    side = spec.side
    log, err, done = (pair_dir / f"{side}{ext}" for ext in (".jsonl", ".stderr", ".exit"))
    return (
        f"cd {q(str(cwd))} && {shlex.join(full)} > {q(str(log))} 2> {q(str(err))}; "
        f"echo $? > {q(str(done))}.tmp && mv {q(str(done))}.tmp {q(str(done))}"
    )


def submit_argv(prefix: Sequence[str], script: str, pair_dir: Path, side: str) -> list[str]:
    """The submission: `{cmd}` in the prefix stands for the script; `sbatch` gets it as
    `--wrap` (its own output next to the logs); any other prefix gets `sh -c SCRIPT`."""
    if any(CMD in part for part in prefix):
        return [part.replace(CMD, script) for part in prefix]
    if Path(prefix[0]).name == "sbatch":  # the user's own -J / -o win
        named = any(p in ("-J", "--job-name") or p.startswith("--job-name=") for p in prefix)
        told = any(p in ("-o", "--output") or p.startswith("--output=") for p in prefix)
        name = [] if named else [f"--job-name=tuimon-{pair_dir.name}-{side}"]
        out = [] if told else [f"--output={pair_dir / f'{side}.submit.out'}"]
        return [*prefix, *name, *out, f"--wrap={script}"]
    return [*prefix, "sh", "-c", script]


def submit_one(argv: Sequence[str]) -> tuple[bool, str]:
    """Run one submission; (it worked, its last line of output or its error)."""
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SUBMIT_TIMEOUT,
        )
    except FileNotFoundError:
        return False, f"cannot submit: {argv[0]!r} is not found"
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot submit with {argv[0]!r}: {exc}"
    lines = [line for line in (proc.stdout + "\n" + proc.stderr).splitlines() if line.strip()]
    last = clean(lines[-1].strip(), 300) if lines else f"exit {proc.returncode}"
    return proc.returncode == 0, last


def submit_sweep(sweep: Sweep, prefix: Sequence[str], say: Callable[[str], None]) -> int:
    """Submit the sweep's pending pairs; 0 when all were submitted, else 3. The first pair's
    failed submission stops the rest (fail fast: they would fail the same way)."""
    sweep.submit = list(prefix)
    for index in sweep.todo():
        job = sweep.jobs[index]
        plan = dataclasses.replace(sweep.plan, seed=job.seed, label=pair_label(sweep))
        try:
            writer = PairWriter.create(
                sweep.store, seed=job.seed, devices=plan.devices, label=plan.label
            )
        except StoreError as exc:
            say(f"{job.name}: not submitted: {exc}")
            break
        writer.close()  # the jobs write the raw logs; --attach writes pair.json
        job.pair = writer.path.name
        error = _submit_pair(plan, writer.path, prefix, job.submitted)
        job.status = "failed" if error else "submitted"
        say(f"{job.name}: " + (f"not submitted: {error}" if error else "submitted"))
        if error:
            job.verdict = "INCOMPLETE"
            job.hints = [{"tag": "submit", "cause": error, "evidence": "the submission"}]
            if sweep.fail_fast and not any(j.status == "submitted" for j in sweep.jobs):
                sweep.failing.reason = f"the first pair's submission failed: {error}"
                break
        sweep.save()
    sweep.save()
    return 0 if all(j.status == "submitted" for j in sweep.jobs) else 3


def _submit_pair(
    plan: PairPlan, pair_dir: Path, prefix: Sequence[str], out: dict[str, str]
) -> str | None:
    """Submit both runs of a pair; the first error (None when both went)."""
    for side in SIDES:
        spec = plan.spec(side, pair_dir)
        ok, text = submit_one(
            submit_argv(prefix, job_script(spec, pair_dir, Path.cwd()), pair_dir, side)
        )
        out[side] = text
        if not ok:
            (pair_dir / f"{side}.stderr").write_text(f"tuimon: submission failed: {text}\n")
            return f"run {side}: {text}"
    return None


def pair_label(sweep: Sweep) -> str:
    """The label of the sweep's pair directories (as a live sweep names them)."""
    return f"{sweep.plan.label}_sweep-{sweep.id}" if sweep.plan.label else f"sweep-{sweep.id}"


def attach(sweep: Sweep, idle: float) -> None:
    """Make `sweep.run()` follow the submitted pairs' files instead of launching anything:
    every submitted pair at once, each ending when its runs wrote their exit codes (or stayed
    idle `idle` seconds)."""

    def factory(index: int, plan: PairPlan) -> SessionFactory:
        job = sweep.jobs[index]
        pair_dir = sweep.store / str(job.pair)
        return follow_factory(plan, pair_dir, idle, dict(job.submitted))

    sweep.make_session = factory
    sweep.fail_fast = False
    sweep.at_once = max(1, len(sweep.todo()))


def follow_factory(
    plan: PairPlan, pair_dir: Path, idle: float, submitted: dict[str, str]
) -> SessionFactory:
    """A session over one submitted pair's files; its pair.json is written into `pair_dir`."""

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        open_pair_dir(pair_dir.parent, pair_dir.name)  # no link out, never a finished pair
        specs = [plan.spec(side, pair_dir) for side in SIDES]  # data for pair.json: never run
        sides = tuple(SideState(s.side, s.device, s.command_text()) for s in specs)
        options = PairOptions(
            tolerance=plan.tolerance,
            select=plan.select,
            meta={**plan.meta(specs), "submitted": submitted},
        )
        source = FollowSource.of_pair_dir(pair_dir, idle=idle, reading=plan.reading)
        for side, tail in source.tails.items():
            tail.queued = slurm_state(submitted.get(side))
        writer = PairWriter(pair_dir, created="")
        return PairSession(source, sides, options=options, writer=writer, on_batch=on_batch)  # type: ignore[arg-type]

    return make


def slurm_state(submitted: str | None) -> Callable[[], str | None] | None:
    """For a run `sbatch` took (`Submitted batch job 123`): a question to `squeue` about that
    job (its state while it is queued or running, None once it is gone); None otherwise."""
    match = re.search(r"Submitted batch job (\d+)", submitted or "") or re.fullmatch(
        r"(\d+)(;\S+)?", (submitted or "").strip()
    )
    if match is None or not shutil.which("squeue"):
        return None
    job = match.group(1)

    def ask() -> str | None:
        try:
            proc = subprocess.run(
                ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        state = proc.stdout.strip().splitlines()
        return state[0] if proc.returncode == 0 and state and state[0] in ALIVE else None

    return ask


def attach_line(sweep: Sweep) -> str | None:
    """What is still out there, in a line (None when no pair is submitted and unjudged)."""
    out = [j.name for j in sweep.jobs if j.status == "submitted"]
    if not out:
        return None
    follow = f"`tuimon sweep --attach {sweep.path}` follows them"
    return f"submitted, not judged yet: {', '.join(out)} · {follow}"
