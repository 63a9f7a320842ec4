"""A sweep: one pair per seed (and repeat), N at a time, each saved as a normal pair.

A sweep is a `PairPlan` with the seed left open, a list of jobs (seed, repeat) and a record,
``<store>/sweeps/<id>.json``, rewritten atomically whenever a job starts or ends. Every pair of
the sweep is an ordinary pair directory whose pair.json says ``"sweep": "<id>"``; the record
names each job's pair, its verdict, and which jobs never ran, so ``tuimon sweep --resume ID``
runs only those (and the ones that were interrupted). Nothing here imports textual or torch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import orjson

from tuimon.engine.judge.artifacts import describe_freqs
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.hints import likely_causes
from tuimon.engine.judge.seed_check import SameLog, same_logs
from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL
from tuimon.engine.launch.consent import Planned, quote, show
from tuimon.engine.runs.fail_fast import FailFast, early_error, gate
from tuimon.engine.runs.plan import SIDES, PairPlan
from tuimon.engine.runs.sweep_check import check_record
from tuimon.engine.sources.session import Batch, PairSession
from tuimon.errors import TuimonError
from tuimon.readers import Reading
from tuimon.store import (
    LockHeld,
    SavedLogs,
    StoreError,
    hold_lock,
    lock_owner,
    read_regular,
    release_lock,
    write_json_atomic,
)


class AgainstSaved(Protocol):
    """What a sweep asks of `sweep --against` (`tuimon.engine.runs.against_sweep.SavedSweep`,
    which loads a saved sweep with `Sweep.load`: the import goes that way only)."""

    def plan_for(self, plan: PairPlan) -> PairPlan:
        """A job's plan: its seed's saved run as side b."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The sweep record's `against`."""
        ...


SWEEP_FORMAT = "tuimon.engine.runs.sweep/1"
SWEEPS_DIR = "sweeps"
OK_VERDICTS = (IDENTICAL, CLOSE)
MANY_AT_ONCE = 8
MANY_BATCH = 0.5
"""With more than `MANY_AT_ONCE` pairs at once, each pair's session batches every `MANY_BATCH`
seconds: its steps are judged a batch at a time, and the aligner's cost is per call more than
per step (bench/bench_sweep.py)."""
_SEEDS = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")
_TUPLE_FIELDS = ("devices", "threads", "template", "nproc")


class SweepError(TuimonError):
    """A one-line, user-facing message (bad seeds, no such sweep, unreadable record)."""


def parse_seeds(text: str) -> list[int]:
    """`0-9`, `0,3,7` or `0-3,7` -> seeds in the order given, each once."""
    seeds: list[int] = []
    for part in text.split(","):
        match = _SEEDS.match(part)
        if match is None:
            raise SweepError(f"--seeds takes 0-9 or 0,3,7 (got {text!r})")
        lo = int(match[1])
        hi = int(match[2]) if match[2] is not None else lo
        if hi < lo:
            raise SweepError(f"--seeds: {part.strip()} counts down (use {hi}-{lo})")
        if hi - lo >= 100_000:
            raise SweepError(f"--seeds: {part.strip()} is more than 100000 seeds")
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    return seeds


def default_jobs(plan: PairPlan) -> int:
    """Pairs at once: as many as the cores hold without two local CPU runs sharing a core.

    Each run uses the threads the plan gives it (`plan.default_threads` when the user did not
    choose), so with the default a CPU pair takes every core and a sweep runs one pair at a
    time; `--threads 1` lets `cores / 2` CPU pairs run together. Pairs with no local CPU run
    (GPUs, launchers) run one at a time unless `--jobs` says otherwise.
    """
    local_cpu = _local_cpu(plan)
    if not local_cpu:
        return 1
    return max(1, (os.cpu_count() or 1) // local_cpu)


def oversubscribed(plan: PairPlan, jobs: int) -> bool:
    """True when `jobs` pairs at once ask for more local CPU threads than there are cores."""
    return _local_cpu(plan) * jobs > (os.cpu_count() or 1)


def _local_cpu(plan: PairPlan) -> int:
    """The CPU threads a pair's local runs take: threads times ranks (`--nproc`) a side."""
    sides = zip(plan.devices, plan.threads, plan.launch, plan.nproc, strict=True)
    return sum(t * (n or 1) for d, t, launcher, n in sides if d == "cpu" and not launcher)


def key_frequencies(meta: Mapping[str, Any]) -> str | None:
    """The pair's key frequencies (pair.json `artifacts`, where a workload reports them)."""
    artifacts = meta.get("artifacts")
    if not isinstance(artifacts, Mapping):
        return None
    for name, value in artifacts.items():
        nested = value.get("key_freqs") if isinstance(value, Mapping) else None
        if isinstance(nested, Mapping):  # the reference workload's, under its embedding
            with contextlib.suppress(KeyError, TypeError):
                return describe_freqs(nested).removeprefix("; key frequencies ")
        if "freq" not in str(name).lower():
            continue
        if isinstance(value, Mapping) and any(s in value for s in SIDES):
            parts = [f"{s} {_words(value.get(s))}" for s in SIDES if value.get(s) is not None]
            return " · ".join(parts)
        if isinstance(value, Mapping) and "key_frequencies" in value:
            return _words(value["key_frequencies"])
        return _words(value)
    return None


def _words(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


@dataclass
class Job:
    """One pair of the sweep."""

    seed: int
    repeat: int
    """1-based."""
    status: str = "pending"
    """pending (never ran) / running / finished / failed / interrupted"""
    pair: str | None = None
    """The pair directory's name in the store."""
    verdict: str | None = None
    first_step: int | None = None
    first_tensors: list[str] = field(default_factory=list)
    max_divergence: float | None = None
    steps_compared: int | None = None
    key_frequencies: str | None = None
    hints: list[dict[str, str]] = field(default_factory=list)
    note: str | None = None
    """Why the job is to run again (its monitor was gone), for the record."""
    submitted: dict[str, str] = field(default_factory=dict)
    """`--submit`: what each run's submission said (e.g. `Submitted batch job 12`)."""
    same_log_as: list[int] = field(default_factory=list)
    """The other seeds whose runs gave this seed's log (`judge.seed_check`): the seed is not
    applied."""
    step: int | None = None
    """Live only: the furthest step either side has logged."""
    total: int | None = None

    @property
    def name(self) -> str:
        """`seed 3` or `seed 3 r2`."""
        return f"seed {self.seed}" + (f" r{self.repeat}" if self.repeat > 1 else "")

    def to_dict(self) -> dict[str, Any]:
        """The job in the sweep record (live fields left out)."""
        d = dataclasses.asdict(self)
        d.pop("step")
        d.pop("total")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Job:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def take(self, meta: Mapping[str, Any], status: str) -> None:
        """Fill in what a finished pair says (its pair.json document)."""
        summary = meta.get("summary")
        summary = summary if isinstance(summary, Mapping) else {}
        self.status = status
        self.verdict = summary.get("verdict")
        self.first_step = summary.get("first_divergent_step")
        self.first_tensors = list(summary.get("first_tensors") or [])
        div = summary.get("max_divergence")
        self.max_divergence = div if isinstance(div, (int, float)) else None
        self.steps_compared = summary.get("steps_compared")
        self.key_frequencies = key_frequencies(meta)
        self.hints = [h.to_dict() for h in likely_causes(meta)]


def _plan_to_dict(plan: PairPlan) -> dict[str, Any]:
    out = dataclasses.asdict(plan)
    out["reading"] = plan.reading.to_dict()
    out["select"] = plan.select.to_dict()
    return out


def _plan_from_dict(d: Mapping[str, Any]) -> PairPlan:
    names = {f.name for f in dataclasses.fields(PairPlan)}
    kwargs = {k: v for k, v in d.items() if k in names}
    for key in _TUPLE_FIELDS:
        if kwargs.get(key) is not None:
            kwargs[key] = tuple(kwargs[key])
    if "launch" in kwargs:
        kwargs["launch"] = tuple(tuple(x) if x else None for x in kwargs["launch"])
    kwargs["reading"] = Reading.from_dict(kwargs.get("reading"))
    raw = kwargs.get("select")
    select: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    kwargs["select"] = MetricFilter(
        tuple(str(g) for g in select.get("ignore") or ()),
        tuple(str(g) for g in select.get("only") or ()),
    )
    return PairPlan(**kwargs)


def sweeps_dir(store: Path) -> Path:
    """Where sweep records live: `<store>/sweeps/` (not a pair directory: the browser skips it)."""
    return Path(store) / SWEEPS_DIR


def new_id() -> str:
    """`20261130-122000-9f3c`: local time and four random hex digits."""
    return f"{datetime.now().astimezone():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class Sweep:
    """The jobs of a sweep, run N at a time through `PairPlan.session_factory`."""

    def __init__(
        self,
        store: Path,
        plan: PairPlan,
        jobs: list[Job],
        *,
        at_once: int,
        sweep_id: str | None = None,
        created: str | None = None,
    ) -> None:
        self.store = Path(store)
        self.id = sweep_id or new_id()
        self.plan = dataclasses.replace(plan, seed=None, sweep=self.id)
        self.jobs = jobs
        self.at_once = max(1, at_once)
        self.created = created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.sessions: dict[int, PairSession] = {}
        """Running pairs, by job index."""
        self.stopping = False
        self.running_elsewhere: str | None = None
        """The live monitor that still runs this sweep (`recover`), if one does."""
        self.monitor: str | None = None
        """Which monitor ran (or runs) the sweep: `pid N on HOST`."""
        self._lock: int | None = None
        self.fail_fast = True
        """Stop when the first pairs fail before their first step (`engine.fail_fast`)."""
        self.failing = FailFast()
        self.submit: list[str] | None = None
        """`--submit`: the prefix the runs were submitted with (`engine.submit`)."""
        self.make_session: Callable[[int, PairPlan], Any] | None = None
        """`--attach`: a job's session factory (follows files); None: launch its runs."""
        self.on_change: Callable[[int], None] = lambda index: None
        """Called with a job's index when it starts, ends, or (live) moves on."""
        self.against: AgainstSaved | None = None
        """`sweep --against`: each seed's saved run, side b of its pair."""
        self.against_source: str | None = None
        """What a saved record's `--against` named (such a sweep is not resumed)."""
        self.check_seeds = False
        """`--check-seeds`: seeds whose runs gave the same log fail the sweep (exit 1)."""

    @classmethod
    def create(
        cls, store: Path, plan: PairPlan, seeds: Sequence[int], repeat: int, at_once: int
    ) -> Sweep:
        """A new sweep of `seeds` x `repeat` pairs."""
        jobs = [Job(seed, r) for seed in seeds for r in range(1, repeat + 1)]
        return cls(store, plan, jobs, at_once=at_once)

    @classmethod
    def load(cls, store: Path, ref: str, at_once: int | None = None) -> Sweep:
        """A saved sweep by id (or its record's path); SweepError when there is none."""
        path = Path(ref)
        if not os.path.lexists(path) or path.is_dir():
            path = sweeps_dir(store) / f"{ref}.json"
            if not os.path.lexists(path):
                raise SweepError(f"no sweep {ref!r} in {sweeps_dir(store)}")
        try:
            doc = orjson.loads(read_regular(path))  # a FIFO or a device is refused at once
        except StoreError as exc:
            raise SweepError(str(exc)) from None
        except orjson.JSONDecodeError:
            raise SweepError(f"{path} is not valid JSON") from None
        if not isinstance(doc, dict) or doc.get("format") != SWEEP_FORMAT:
            raise SweepError(f"{path} is not a tuimon sweep record")
        try:
            check_record(doc)
            plan = _plan_from_dict(doc["plan"])
            jobs = [Job.from_dict(j) for j in doc["jobs"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SweepError(f"{path} is damaged: {exc}") from None
        store = path.parent.parent if path.parent.name == SWEEPS_DIR else Path(store)
        sweep = cls(
            store,
            plan,
            jobs,
            at_once=at_once or int(doc.get("at_once") or 1),
            sweep_id=str(doc.get("id") or path.stem),
            created=str(doc["created"]) if doc.get("created") else None,
        )
        sweep.monitor = doc.get("monitor")
        sweep.check_seeds = doc.get("check_seeds") is True
        submit = doc.get("submit")
        sweep.submit = [str(x) for x in submit] if isinstance(submit, list) else None
        against = doc.get("against")
        sweep.against_source = str(against.get("source")) if isinstance(against, dict) else None
        sweep.recover()
        return sweep

    @property
    def lock_path(self) -> Path:
        """Held (flock) by the monitor running the sweep, for as long as it runs it."""
        return sweeps_dir(self.store) / f"{self.id}.lock"

    def recover(self) -> None:
        """Jobs the record calls running whose monitor is gone (killed: it holds the sweep's
        lock no longer) are interrupted, and the record says so; while that monitor lives,
        `running_elsewhere` names it and nothing changes."""
        running = [j for j in self.jobs if j.status == "running"]
        if not running:
            return
        try:
            fd = hold_lock(self.lock_path, lock_owner())
        except LockHeld as held:
            self.running_elsewhere = str(held)
            return
        except StoreError:
            fd = None
        release_lock(fd)
        for job in running:
            job.status = "interrupted"
            job.note = (
                f"its monitor ({self.monitor or 'unknown'}) was gone (killed) while it ran; "
                f"pair {job.pair or '(not yet created)'} left unfinished; run again"
            )

    def claim(self) -> None:
        """Take the sweep's lock before running it (SweepError when another tuimon runs it)."""
        if self._lock is not None:
            return
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = hold_lock(self.lock_path, lock_owner())
        except LockHeld as held:
            raise SweepError(f"sweep {self.id} is running in another tuimon ({held})") from None
        except (StoreError, OSError) as exc:
            raise SweepError(f"cannot lock {self.lock_path}: {exc}") from None
        self.monitor = lock_owner()

    def abandon(self) -> None:
        """The monitor exits without waiting for pairs still running (asked twice to quit,
        its terminal gone): they are marked interrupted and the record saved, so it never
        says "running" after its monitor; `--resume` runs them again."""
        running = [j for j in self.jobs if j.status == "running"]
        for job in running:
            job.status = "interrupted"
            job.note = f"tuimon quit before pair {job.pair or '(not yet created)'} was saved"
        if running:
            with contextlib.suppress(StoreError):
                self.save()

    def release(self) -> None:
        """Let go of the sweep's lock (the record is final)."""
        release_lock(self._lock)
        self._lock = None

    def consent_lines(self) -> list[str]:
        """`planned` in lines to show before a resumed sweep runs anything."""
        todo = self.todo()
        lines = show(self.planned())
        if self.plan.log_file:
            lines.append(f"  each run's step log is read from: {quote(self.plan.log_file)}")
        others = sorted({self.jobs[i].seed for i in todo[1:]} - {self.jobs[todo[0]].seed})
        if others:
            seeds = ", ".join(map(str, others))
            lines.append(f"  and the same with {{seed}} = {seeds} ({len(todo)} pairs in all)")
        elif len(todo) > 1:
            lines.append(f"  ({len(todo)} pairs in all, repeats of this seed)")
        return lines

    def planned(self) -> list[Planned]:
        """The command lines the jobs still to run would start, each side of the first one
        exactly (`{pair_dir}` is the new pair directory); the others differ by the seed."""
        todo = self.todo()
        if not todo:
            return []
        first = self.jobs[todo[0]]
        plan = dataclasses.replace(self.plan, seed=first.seed)
        out = []
        for side in SIDES:
            spec = plan.spec(side, Path("{pair_dir}"))
            launcher = plan.launch[SIDES.index(side)]
            out.append(Planned(f"run {side}, seed {first.seed}", spec.argv, spec.shell, launcher))
        return out

    @property
    def path(self) -> Path:
        """The sweep record."""
        return sweeps_dir(self.store) / f"{self.id}.json"

    def todo(self) -> list[int]:
        """Indexes of the jobs still to run: never started, or interrupted."""
        statuses = ("submitted",) if self.make_session else ("pending", "interrupted")
        return [i for i, j in enumerate(self.jobs) if j.status in statuses]

    def never_ran(self) -> list[int]:
        """Seeds with a job that never started."""
        return sorted({j.seed for j in self.jobs if j.status == "pending"})

    def rest_line(self) -> str | None:
        """What `--resume` would run, in a line (None when nothing is left)."""
        interrupted = [
            j.name + (" (its monitor was gone)" if j.note else "")
            for j in self.jobs
            if j.status == "interrupted"
        ]
        never = self.never_ran()
        parts = [f"interrupted: {', '.join(interrupted)}"] if interrupted else []
        if never:
            parts.append(f"never ran: seeds {', '.join(map(str, never))}")
        if not parts:
            return None
        return " · ".join([*parts, f"`tuimon sweep --resume {self.id}` runs them"])

    def status(self) -> str:
        """running / interrupted / finished."""
        if self.sessions:
            return "running"
        if any(j.status == "submitted" for j in self.jobs):
            return "submitted"
        return "interrupted" if self.todo() else "finished"

    def to_dict(self) -> dict[str, Any]:
        """The sweep record."""
        return {
            "format": SWEEP_FORMAT,
            "id": self.id,
            "created": self.created,
            "status": self.status(),
            "at_once": self.at_once,
            "seeds": list(dict.fromkeys(j.seed for j in self.jobs)),
            "repeat": max((j.repeat for j in self.jobs), default=1),
            "never_ran": self.never_ran(),
            "exit_code": self.exit_code(),
            "monitor": self.monitor,
            **({"stopped": self.failing.reason} if self.failing.reason else {}),
            "plan": _plan_to_dict(self.plan),
            "jobs": [j.to_dict() for j in self.jobs],
            **({"submit": self.submit} if self.submit else {}),
            **({"against": self.against.to_dict()} if self.against else {}),
            "check_seeds": self.check_seeds,
            "seeds_not_applied": [s.to_dict() for s in same_seeds(self.jobs)],
        }

    def save(self) -> None:
        """Write the record atomically (StoreError on failure)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.to_dict())

    def exit_code(self) -> int:
        """0 every pair IDENTICAL or CLOSE, 1 any DIVERGED (or, with `--check-seeds`, seeds
        that gave the same log), 3 any INCOMPLETE or not run."""
        verdicts = [j.verdict if j.status in ("finished", "failed") else None for j in self.jobs]
        if not verdicts or any(v not in (*OK_VERDICTS, DIVERGED) for v in verdicts):
            return 3
        if self.check_seeds and any(j.same_log_as for j in self.jobs):
            return 1
        return 1 if DIVERGED in verdicts else 0

    def check_same_seeds(self) -> list[SameLog]:
        """Seeds whose runs gave the same log (side a of their pairs, `judge.seed_check`),
        noted on their jobs (`same_log_as`); read from the saved pairs once the sweep ends."""
        runs = []
        for index, job in enumerate(self.jobs):
            job.same_log_as = []
            path = self.pair_path(index)
            if job.status == "finished" and path is not None and path.is_dir():
                with contextlib.suppress(StoreError, OSError):
                    runs.append((job.seed, SavedLogs.open(path).a))
        found = same_logs(runs, self.plan.reading, "a")
        for group in found:
            for job in self.jobs:
                if job.seed in group.seeds:
                    job.same_log_as = [s for s in group.seeds if s != job.seed]
        return found

    def stop(self) -> None:
        """Start no more pairs; stop the running ones (each is saved as interrupted)."""
        self.stopping = True
        for session in list(self.sessions.values()):
            session.stop()

    async def run(self) -> int:
        """Run the jobs still to do, `at_once` at a time, holding the sweep's lock; the
        sweep's exit code. With `fail_fast`, the first runs alone until it has logged a step
        (`engine.fail_fast`)."""
        self.claim()
        try:
            queue = self.todo()
            self.save()
            alone = self.fail_fast and len(queue) > 1

            async def worker(first: int | None = None) -> None:
                if first is not None:
                    await self._run_job(first, alone=True)
                while queue and not self.stopping:
                    await self._run_job(queue.pop(0))

            if alone:
                index = queue.pop(0)
                first = asyncio.create_task(worker(index))
                await gate(lambda: self.sessions.get(index), first)
            workers = [worker() for _ in range(min(self.at_once - alone, len(queue)))]
            await asyncio.gather(*workers, *([first] if alone else []))
            for group in self.check_same_seeds():  # their rows say so: drawn again
                for index, job in enumerate(self.jobs):
                    if job.seed in group.seeds:
                        self.on_change(index)
            self.save()
        finally:
            self.release()
        return self.exit_code()

    async def _run_job(self, index: int, *, alone: bool = False) -> None:
        job = self.jobs[index]
        label = f"{self.plan.label}_sweep-{self.id}" if self.plan.label else f"sweep-{self.id}"
        plan = dataclasses.replace(self.plan, seed=job.seed, label=label)
        if self.against is not None:
            plan = self.against.plan_for(plan)
        make = (
            self.make_session(index, plan)
            if self.make_session
            else plan.session_factory(self.store)
        )

        def on_batch(batch: Batch) -> None:
            steps = [s.step for s in batch.sides.values() if s.step is not None]
            totals = [s.total for s in batch.sides.values() if s.total is not None]
            job.step = max(steps) if steps else None
            job.total = max(totals) if totals else None
            if not batch.done:
                job.verdict = batch.summary.verdict
                job.first_step = batch.summary.first_divergent_step
                job.first_tensors = list(batch.summary.first_tensors)
                job.max_divergence = batch.summary.max_divergence
                job.steps_compared = batch.summary.steps_compared
                self.on_change(index)

        try:
            session = make(on_batch)
        except StoreError as exc:
            job.status, job.verdict = "failed", "INCOMPLETE"
            job.hints = [{"tag": "store", "cause": str(exc), "evidence": "the store"}]
            self.on_change(index)
            return
        if self.at_once > MANY_AT_ONCE:  # many pairs in one monitor: fewer, larger batches
            session.options.batch_interval = max(session.options.batch_interval, MANY_BATCH)
        self.sessions[index] = session
        job.status = "running"
        job.pair = session.pair_path.name if session.pair_path else None
        self._save_quietly()
        self.on_change(index)
        try:
            await session.run()
        finally:
            del self.sessions[index]
        job.take(session.pair_doc().to_json(), session.status())
        if session.pair_path:
            job.pair = session.pair_path.name
        if self.make_session and job.status == "interrupted":
            job.status = "submitted"  # an attach that stops: the next one follows it again
        if self.fail_fast and self.failing.ended(early_error(session), alone=alone):
            self.stopping = True  # start no more: they would fail the same way
        self._save_quietly()
        self.on_change(index)

    def _save_quietly(self) -> None:
        with contextlib.suppress(StoreError):  # the pairs are saved; the final save() reports
            self.save()

    def pair_path(self, index: int) -> Path | None:
        """The pair directory of a job, once it has one."""
        name = self.jobs[index].pair
        return self.store / name if name else None


COLUMNS = (
    "seed",
    "repeat",
    "status",
    "verdict",
    "first div.",
    "tensor",
    "max div.",
    "key freqs",
    "likely causes",
    "pair",
)


def row(job: Job) -> list[str]:
    """A job's cells, for the headless table and the sweep screen alike."""
    status = job.status
    tags = [h.get("tag", "?") for h in job.hints]
    if status == "running" and job.step is not None:
        status += f" {job.step + 1}" + (f"/{job.total}" if job.total else "")
    return [
        str(job.seed),
        str(job.repeat),
        status,
        _verdict(job),
        "–" if job.first_step is None else str(job.first_step),
        ", ".join(job.first_tensors) or "–",
        _max_divergence(job),
        job.key_frequencies or "–",
        ", ".join([*(["seed not applied"] if job.same_log_as else []), *tags]) or "–",
        job.pair or "–",
    ]


def _max_divergence(job: Job) -> str:
    """The largest divergence seen; "–" while no step was compared (a failed or new pair)."""
    if job.max_divergence is None or not job.steps_compared:
        return "–"
    return f"{job.max_divergence:.3g}"


def _verdict(job: Job) -> str:
    """The verdict; while running, only a divergence already seen (`DIVERGED so far`)."""
    if job.status == "running":
        return f"{job.verdict} so far" if job.first_step is not None and job.verdict else "–"
    return job.verdict or "–"


def same_seeds(jobs: Sequence[Job]) -> list[SameLog]:
    """The groups of seeds whose runs gave the same log, as the jobs note them."""
    groups: dict[frozenset[int], list[int]] = {}
    for job in jobs:
        if job.same_log_as:
            seeds = groups.setdefault(frozenset([job.seed, *job.same_log_as]), [])
            if job.seed not in seeds:
                seeds.append(job.seed)
    return [SameLog(tuple(seeds), "a") for seeds in groups.values() if len(seeds) > 1]


def seed_lines(jobs: Sequence[Job], check: bool = False) -> list[str]:
    """`the seed is not applied: seeds 0 and 1 gave the same log (as did seed 2) (side a)`,
    one line per group; with `--check-seeds`, said to fail the sweep."""
    return [s.text() + (" — fails the sweep (--check-seeds)" if check else "")
            for s in same_seeds(jobs)]  # fmt: skip


def hint_lines(jobs: Sequence[Job]) -> list[str]:
    """One line per likely cause: which pairs it fits, with one pair's evidence."""
    seen: dict[str, tuple[list[str], str]] = {}
    for job in jobs:
        for hint in job.hints:
            names, _ = seen.setdefault(hint.get("cause", "?"), ([], hint.get("evidence", "")))
            names.append(job.name)
    return [
        f"maybe: {cause} — {', '.join(names)} (evidence, {names[0]}: {evidence})"
        for cause, (names, evidence) in seen.items()
    ]
