"""`tuimon explain PAIR`: re-run both sides of a diverged pair, trace every op of the step where
they part, and name the first op whose outputs differ.

The step log says *when* two runs part (step k's record differs); the trace says *where*. Step
k's record holds the parameters after k updates and the losses computed from them, so the
divergence was made either in step k-1 (its backward or optimiser step changed the parameters
differently) or in step k's forward (same parameters, different loss). Both steps are traced;
the first op that differs, in order, is the answer.

The children run the recorded commands with the recorded settings (devices, threads, seed,
deterministic flag, loss dtype) plus TUIMON_TRACE_STEP / TUIMON_TRACE_FILE, which
`tuimon.tracing.trace_step` (and the reference workload) honour. Traces are kept in
``PAIR/explain/``; the op outputs saved beside them are only read to measure the first
differing ops, then removed. Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tuimon.argv import without_options
from tuimon.engine.analyses.explained import describe
from tuimon.engine.analyses.explained import first_value as _first
from tuimon.engine.analyses.explained import op_label as _label
from tuimon.engine.analyses.resume import explain_resume, resume_of
from tuimon.engine.judge.known_ops import FIX_WORDS, KnownOp, known_op
from tuimon.engine.launch.consent import Planned
from tuimon.engine.launch.descendants import RUN_ENV, Tree, new_tag
from tuimon.engine.launch.ranks import MARK, rewrap
from tuimon.engine.launch.runner import die_with_parent
from tuimon.engine.launch.watchdog import Watchdog
from tuimon.engine.runs.plan import PairPlan
from tuimon.errors import StoreError, TuimonError, UsageError
from tuimon.readers.capped import read_npy
from tuimon.readers.cut import lines_of
from tuimon.sanitize import clean, json_text
from tuimon.steplog import Step, parse_line
from tuimon.store import SIDES, PairDoc, pair_file, read_pair
from tuimon.tracing import TRACE_FILE_ENV, TRACE_STEP_ENV

DEFAULT_REPEATS = 3
WIDEN_UP_TO = 20
"""When the runs differ already where the traced window starts, trace from step 0 if the
divergent step is at most this (tracing costs about a few steps' time each)."""
DEFAULT_TIMEOUT = 900.0
"""Seconds one traced rerun (both sides) may take."""
NO_HELPER = (
    "the training script does not honour trace requests: wrap each step in "
    "`with tuimon.tracing.trace_step(step, model, optimizer):` "
    "(docs/explain-emb-check-spread-plot.md, '`tuimon explain`: the op where two runs part')"
)


def short_op(name: str) -> str:
    """aten.index_put.default -> index_put."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else name


def known(op: dict[str, Any]) -> KnownOp | None:
    """The known-ops table's entry for a traced op on its device (`known_ops`), or None."""
    return known_op(str(op.get("op", "")), op.get("devices") or [], op.get("accumulate"))


def nondeterministic(op: dict[str, Any]) -> str | None:
    """What is known about this op on its device, with its source (the table's line), or None
    when the table does not list it."""
    entry = known(op)
    return entry.line() if entry is not None else None


class ExplainError(Exception):
    """The pair cannot be explained (one line for the user)."""


class Refused(ExplainError):
    """The commands of pair.json were shown and not agreed to: nothing ran."""

    def __init__(self, commands: list[Planned]) -> None:
        super().__init__("not confirmed: nothing was run")
        self.commands = commands


# -- re-running the two sides -----------------------------------------------------------------


def traced_steps(summary: dict[str, Any]) -> tuple[int, list[int]]:
    """(first divergent step k, the steps to trace: k-1 and k, or 0 alone)."""
    k = summary.get("first_divergent_step")
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ExplainError("the pair has no divergent step: nothing to explain")
    return k, sorted({max(0, k - 1), k})


def _is_reference(argv: Sequence[str]) -> bool:
    return "tuimon" in argv and "train" in argv


def rerun_argv(argv: Sequence[str], last_step: int) -> list[str]:
    """The recorded command; for the reference workload, stopped after `last_step` and told
    to save nothing (the pair's saved W_E stays as it is)."""
    argv = list(argv)
    if not _is_reference(argv):
        return argv
    out = without_options(
        argv,
        (
            "--save-emb",
            "--steps",
            "--log",
            "--trace-step",
            "--trace-file",
            "--checkpoint-at",
            "--checkpoint",
            "--resume-from",
        ),
        ("--time-only",),
    )
    return [*out, "--steps", str(last_step + 1), "--time-only"]


def side_env(doc: dict[str, Any], side: str) -> dict[str, str]:
    """The environment the pair gave this side (threads, seed, device, flags); ExplainError
    (one line) when pair.json holds a value of the wrong type."""
    check_settings(doc)
    devices = doc.get("devices") or ["cpu", "cpu"]
    threads = doc.get("threads")
    if isinstance(threads, list):
        pair_threads = (threads[0], threads[1])
    elif isinstance(threads, int):
        pair_threads = (threads, threads)
    else:
        pair_threads = (os.cpu_count() or 1,) * 2
    plan = PairPlan(
        seed=doc.get("seed"),
        devices=(devices[0], devices[1]),
        threads=pair_threads,
        deterministic=bool(doc.get("deterministic")),
        loss_dtype=doc.get("loss_dtype"),
    )
    return plan.env(side, devices[SIDES.index(side)])


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1 << 20


SETTINGS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("devices", lambda v: v is None or (isinstance(v, list) and len(v) == 2
                                        and all(isinstance(d, str) and d for d in v)),
     "a list of two device names"),
    ("threads", lambda v: v is None or _count(v) or (isinstance(v, list) and len(v) == 2
                                                     and all(_count(t) for t in v)),
     "a thread count or a list of two"),
    ("seed", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
     "an integer or null"),
    ("deterministic", lambda v: v is None or isinstance(v, bool), "true or false"),
    ("loss_dtype", lambda v: v is None or isinstance(v, str), "a dtype name or null"),
    ("shell", lambda v: v is None or isinstance(v, bool), "true or false"),
)  # fmt: skip
"""The settings of pair.json a rerun uses, what each must be, and how to say it."""


def check_settings(doc: dict[str, Any]) -> None:
    """ExplainError (one line) when a setting a rerun uses has the wrong type in pair.json."""
    for key, valid, what in SETTINGS:
        if not valid(doc.get(key)):
            raise ExplainError(f"pair.json: {key!r} must be {what} (got {_shown(doc.get(key))})")


def _shown(value: object) -> str:
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return clean(text if len(text) <= 60 else text[:59] + "…", None)


def planned(
    doc: dict[str, Any],
    steps: list[int],
    rank_dir: Path | None = None,
    nproc: tuple[int | None, int | None] = (None, None),
) -> list[Planned]:
    """The exact commands a traced rerun runs, one per side (ExplainError when pair.json holds
    none, or one of the wrong type). A side of ranks (`--nproc`) runs again under the launcher,
    its other ranks' output into `rank_dir` (the pair's `explain/`); `nproc` changes the ranks
    of a side (`explain --nproc`)."""
    check_settings(doc)
    commands = _commands(doc)
    launch = doc.get("launch")
    launchers: dict[str, Any] = launch if isinstance(launch, dict) else {}
    out = []
    for side, ranks in zip(SIDES, nproc, strict=True):
        recorded = commands[side]
        shell = bool(doc.get("shell")) and MARK not in recorded  # ranks: a list of words
        argv = recorded[:1] if shell else rerun_argv(recorded, max(steps))
        if rank_dir is not None and (ranks is not None or MARK in recorded):
            argv, shell = (
                rewrap(["sh", "-c", argv[0]] if shell else argv, side, rank_dir, ranks),
                False,
            )
        words = launchers.get(side)
        ok = isinstance(words, list) and all(isinstance(w, str) for w in words)
        launcher = tuple(words) if ok and words else None
        out.append(Planned(f"run {side}", tuple(argv), shell, launcher))
    return out


@dataclass
class SideRun:
    """One side of one traced rerun: its trace, or why there is none."""

    side: str
    trace: Path
    problem: str | None = None
    tree: Tree = field(default_factory=lambda: Tree(new_tag()))
    """Its processes, also those that leave its group (`descendants`)."""
    watchdog: Watchdog | None = None
    """Ends them if tuimon is killed."""


def _trace_ended(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256))
            return b'"trace_end"' in fh.read()
    except OSError:
        return False


def _last_step(path: Path) -> int | None:
    """The last step record in a child's captured stdout (tail only)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            lines = lines_of(fh.read())  # cut as the live stream was
    except OSError:
        return None
    for line in reversed(lines):
        record = parse_line(line)
        if isinstance(record, Step):
            return record.step
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _commands(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Each side's recorded command; ExplainError when the pair has none (it was compared,
    not launched)."""
    commands = doc.get("commands")
    if commands is None:
        raise ExplainError(
            "pair.json has no commands to re-run (a compared pair, not a launched one)"
        )
    if not isinstance(commands, dict) or not all(
        isinstance(commands.get(s), list)
        and commands[s]
        and all(isinstance(a, str) and a and "\0" not in a for a in commands[s])
        for s in SIDES
    ):
        raise ExplainError(
            "pair.json: 'commands' must map a and b to lists of words (non-empty strings) "
            f"(got {_shown(commands)})"
        )
    return {side: list(commands[side]) for side in SIDES}


def _fresh_trace(out_dir: Path, side: str, tag: str) -> Path:
    """Where this side's trace of rerun `tag` goes, with an earlier one (and its saved op
    outputs) removed."""
    trace = out_dir / f"{side}-{tag}.trace.jsonl"
    stdout = out_dir / f"{side}-{tag}.stdout"
    olds = (trace, trace.with_name(trace.name + ".tensors"), stdout, stdout.with_suffix(".stderr"))
    for old in olds:  # whatever was there (a FIFO would block the rerun's output) goes
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        elif os.path.lexists(old):
            old.unlink()
    return trace


def _start_side(
    doc: dict[str, Any], command: Planned, steps: list[int], run: SideRun, stdout: Path
) -> subprocess.Popen[bytes]:
    """Start one side's rerun (the command shown and agreed to) with the pair's settings, told
    to trace `steps` into `run.trace`, with a watchdog; its stdout goes to `stdout`, its
    stderr beside it (`.stderr`). ExplainError (one line) when it cannot start."""
    side = command.who.removeprefix("run ")
    env = {
        **os.environ,
        **side_env(doc, side),
        TRACE_STEP_ENV: ",".join(map(str, steps)),
        TRACE_FILE_ENV: str(run.trace),
        RUN_ENV: run.tree.tag,  # what it starts is found and ended with it (`descendants`)
    }
    with open(stdout, "wb") as out, open(stdout.with_suffix(".stderr"), "wb") as err:
        try:
            proc = subprocess.Popen(
                command.argv[0] if command.shell else list(command.argv),
                shell=command.shell,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ExplainError(
                f"run {side}: cannot start {clean(command.argv[0], 200)!r}: {why}"
            ) from None
    run.watchdog = Watchdog(proc.pid, 2.0, run.tree.tag)  # ends them if tuimon is killed
    return proc


def run_traced(
    doc: dict[str, Any],
    commands: list[Planned],
    out_dir: Path,
    steps: list[int],
    tag: str,
    timeout: float,
) -> dict[str, SideRun]:
    """Run both sides at once (as the pair did), each tracing `steps` with the `commands`
    agreed to; stop each when its trace is complete, when it runs past the steps without
    tracing, or at the timeout."""
    runs: dict[str, SideRun] = {}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    outs = {side: out_dir / f"{side}-{tag}.stdout" for side in SIDES}
    try:
        for side in SIDES:
            runs[side] = SideRun(side, _fresh_trace(out_dir, side, tag))
            command = commands[SIDES.index(side)]
            procs[side] = _start_side(doc, command, steps, runs[side], outs[side])
        deadline = time.monotonic() + timeout
        pending = set(SIDES)
        while pending:
            for side in sorted(pending):
                proc, run = procs[side], runs[side]
                if _trace_ended(run.trace):
                    _kill(proc)
                    pending.discard(side)
                elif proc.poll() is not None:
                    run.problem = _why_no_trace(run.trace, proc.returncode, out_dir, side, tag)
                    pending.discard(side)
                elif not run.trace.exists() and (_last_step(outs[side]) or -1) > max(steps) + 1:
                    _kill(proc)
                    run.problem = NO_HELPER
                    pending.discard(side)
                elif time.monotonic() > deadline:
                    _kill(proc)
                    run.problem = f"no complete trace after {timeout:.0f} s (stopped)"
                    pending.discard(side)
            if pending:
                time.sleep(0.1)
    finally:
        for side, proc in procs.items():
            _kill(proc)
            runs[side].tree.end(1.0, proc.pid)  # what it started, also outside its group
            if (dog := runs[side].watchdog) is not None:
                dog.release()
    return runs


def _why_no_trace(trace: Path, code: int | None, out_dir: Path, side: str, tag: str) -> str:
    if not trace.exists():
        if code == 0:
            return NO_HELPER
        err = out_dir / f"{side}-{tag}.stderr"
        tail = err.read_text(errors="replace").strip().splitlines()[-1:] if err.exists() else []
        return f"exited with code {code} before tracing" + (f": {tail[0][:200]}" if tail else "")
    return f"exited with code {code} before its trace was complete"


# -- comparing two traces ---------------------------------------------------------------------


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The op records of a trace file."""
    ops = []
    with open(path, "rb") as fh:
        for line in fh:
            with contextlib.suppress(orjson.JSONDecodeError):
                obj = orjson.loads(line)
                if isinstance(obj, dict) and obj.get("type") == "op":
                    ops.append(obj)
    return ops


def _key(op: dict[str, Any]) -> tuple[Any, ...]:
    return (op.get("step"), op.get("phase"), op.get("op"))


def _measure(
    a: dict[str, Any], b: dict[str, Any], dir_a: Path, dir_b: Path
) -> dict[str, Any] | None:
    """Largest absolute and relative difference over the outputs that differ (saved ones)."""
    files_a, files_b = a.get("files") or [], b.get("files") or []
    worst: dict[str, Any] | None = None
    for j, (ha, hb) in enumerate(zip(a.get("hashes") or [], b.get("hashes") or [], strict=False)):
        if ha == hb or j >= len(files_a) or j >= len(files_b) or not files_a[j] or not files_b[j]:
            continue
        try:
            xa = read_npy(pair_file(dir_a, files_a[j])).astype(np.float64)
            xb = read_npy(pair_file(dir_b, files_b[j])).astype(np.float64)
        except (OSError, ValueError, TuimonError):  # missing, outside the trace's folder, too big
            continue
        if xa.shape != xb.shape:
            continue
        diff = np.abs(xa - xb)
        scale = np.maximum(np.abs(xa), np.abs(xb))
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0.0)
        item = {
            "output": j,
            "max_abs": float(np.nanmax(diff)) if diff.size else 0.0,
            "max_rel": float(np.nanmax(rel)) if rel.size else 0.0,
            "elements_differ": int(np.count_nonzero(xa != xb)),
            "elements": int(xa.size),
        }
        if worst is None or item["max_abs"] > worst["max_abs"]:
            worst = item
    return worst


def _describe_op(a: dict[str, Any], b: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": a.get("i"),
        "op": a.get("op"),
        "step": a.get("step"),
        "phase": a.get("phase"),
        "module": a.get("module"),
        "params": a.get("params") or [],
        "node": a.get("node"),
        "line": a.get("line"),
        "accumulate": a.get("accumulate"),
        "shapes": {"a": a.get("shapes")},
        "dtypes": {"a": a.get("dtypes")},
        "devices": {"a": a.get("devices")},
    }
    if b is not None:
        out["shapes"]["b"] = b.get("shapes")
        out["dtypes"]["b"] = b.get("dtypes")
        out["devices"]["b"] = b.get("devices")
        if not out["params"]:
            out["params"] = b.get("params") or []
    entry = known(a) or (known(b) if b else None)
    out["nondeterministic"] = entry.line() if entry is not None else None
    out["known"] = entry.to_dict() if entry is not None else None
    if a.get("state"):
        out["state"] = True
    return out


def first_difference(
    ops_a: list[dict[str, Any]], ops_b: list[dict[str, Any]], dir_a: Path, dir_b: Path
) -> dict[str, Any] | None:
    """The first op, in order, whose outputs differ (or where the op sequences part)."""
    matcher = difflib.SequenceMatcher(None, [_key(o) for o in ops_a], [_key(o) for o in ops_b],
                                      autojunk=False)  # fmt: skip
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            a = ops_a[i1] if i1 < i2 else None
            b = ops_b[j1] if j1 < j2 else None
            found = _describe_op(a or b or {}, b if a else None)
            found["kind"] = "sequence"
            found["a_op"] = a.get("op") if a else None
            found["b_op"] = b.get("op") if b else None
            return found
        for a, b in zip(ops_a[i1:i2], ops_b[j1:j2], strict=True):
            if (a.get("hashes") or []) != (b.get("hashes") or []):
                found = _describe_op(a, b)
                found["kind"] = "values"
                found["difference"] = _measure(a, b, dir_a, dir_b)
                return found
    return None


# -- the whole explanation --------------------------------------------------------------------


def explain_pair(
    path: Path,
    *,
    confirm: Callable[[list[Planned]], bool],
    repeats: int = DEFAULT_REPEATS,
    timeout: float = DEFAULT_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    nproc: tuple[int | None, int | None] = (None, None),
) -> dict[str, Any]:
    """Rerun and trace the pair `repeats` times; the result that goes into pair.json.

    pair.json is data: the commands it holds run only when `confirm` (shown them exactly)
    says yes; otherwise `Refused`, and nothing runs."""
    say = progress or (lambda text: None)
    if (resumed := _resumed(Path(path))) is not None:
        return resumed  # what a resume lost is read from the logs: nothing is re-run
    doc, k, steps, commands = _prepare(Path(path), confirm, nproc)
    out_dir = Path(path) / "explain"
    result = _new_result(doc, k, steps, repeats)
    firsts: list[dict[str, Any]] = []
    r = 0
    while r < repeats:
        say(f"rerun {r + 1} of {repeats}: tracing step{'s' if len(steps) > 1 else ''} "
            f"{', '.join(map(str, steps))} on both sides")  # fmt: skip
        runs = run_traced(doc, commands, out_dir, steps, f"r{r}", timeout)
        problems = {s: run.problem for s, run in runs.items() if run.problem}
        if problems:
            _cleanup(runs)
            result.update(_failure(problems))
            return result
        ops, found = _compare_traces(runs)
        if found is not None and found.get("state") and steps[0] > 0 and k <= WIDEN_UP_TO:
            # The runs differ already where the window starts (e.g. in AdamW's state after a
            # step whose learning rate was 0, which left the parameters equal): trace from 0.
            say(f"the runs differ before step {steps[0]} ({found['op']} of "
                f"{', '.join(found.get('params') or ['?'])}): tracing from step 0")  # fmt: skip
            result["widened_from"] = steps
            steps = list(range(k + 1))
            result["traced_steps"] = steps
            result["runs"], result["reproduced"], firsts, r = [], 0, [], 0
            continue
        result["runs"].append({
            "repeat": r,
            "ops": {s: len(v) for s, v in ops.items()},
            "traces": {s: str(run.trace.relative_to(path)) for s, run in runs.items()},
            "first": found,
        })  # fmt: skip
        if found is not None:
            result["reproduced"] += 1
            firsts.append(found)
        r += 1
    return _conclude(result, firsts, steps, repeats)


def _resumed(path: Path) -> dict[str, Any] | None:
    """A pair run with `--resume-at N` that parted after N (or never): what the resume lost
    (`resume.explain_resume`); None for any other pair."""
    doc = PairDoc.from_json(read_pair(path)).to_json()
    resume = resume_of(doc)
    summary = doc["summary"] if isinstance(doc.get("summary"), dict) else {}
    first = summary.get("first_divergent_step")
    if resume is None or (isinstance(first, int) and first <= resume[1]):
        return None  # no resume, or the sides parted before it: the op is traced
    return explain_resume(path, doc)


def _prepare(
    path: Path,
    confirm: Callable[[list[Planned]], bool],
    nproc: tuple[int | None, int | None] = (None, None),
) -> tuple[dict[str, Any], int, list[int], list[Planned]]:
    """pair.json checked as written, the divergent step, the steps to trace and the commands
    agreed to (`Refused` when they are not); the pair's `explain/` folder made ready."""
    raw = read_pair(path)
    check_settings(raw)  # as written: a value of the wrong type is said, not read as missing
    doc = PairDoc.from_json(raw).to_json()
    summary = doc.get("summary")
    k, steps = traced_steps(summary if isinstance(summary, dict) else {})
    commands = planned(doc, steps, path / "explain", nproc)
    if not confirm(commands):
        raise Refused(commands)
    out_dir = path / "explain"
    if out_dir.is_symlink() or (os.path.lexists(out_dir) and not out_dir.is_dir()):
        raise ExplainError(f"{out_dir} is not a directory of the pair (a link or a file)")
    out_dir.mkdir(exist_ok=True)
    return doc, k, steps, commands


def _new_result(doc: dict[str, Any], k: int, steps: list[int], repeats: int) -> dict[str, Any]:
    """The explanation before any rerun: what is traced, on which devices."""
    devices = [str(d) for d in doc.get("devices") or []]
    return {
        "divergent_step": k,
        "traced_steps": steps,
        "repeats": repeats,
        "reproduced": 0,
        "runs": [],
        "cross_device": len(set(devices)) > 1,
        "devices": devices,
    }


def _failure(problems: dict[str, str]) -> dict[str, str]:
    """The status and message of a rerun that left a side without a trace."""
    if any(p == NO_HELPER for p in problems.values()):
        return {"status": "no_helper", "message": NO_HELPER}
    text = "; ".join(f"run {s}: {p}" for s, p in problems.items())
    return {"status": "failed", "message": f"traced rerun failed: {text}"}


def _compare_traces(
    runs: dict[str, SideRun],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any] | None]:
    """One rerun's two traces: their ops, and the first op that differs (None when they are
    equal). The saved op outputs are removed once measured."""
    ops = {s: read_trace(run.trace) for s, run in runs.items()}
    found = first_difference(
        ops["a"],
        ops["b"],
        *(run.trace.with_name(run.trace.name + ".tensors") for run in runs.values()),
    )
    _cleanup(runs)
    return ops, found


def _conclude(
    result: dict[str, Any], firsts: list[dict[str, Any]], steps: list[int], repeats: int
) -> dict[str, Any]:
    """The result once every rerun is in: the op most often first to differ (with a hint and
    a message), or that the reruns did not diverge."""
    counts = Counter(_label(f) for f in firsts)
    result["first_counts"] = dict(counts.most_common())
    if not firsts:
        result.update(
            status="not_reproduced",
            first=None,
            message=f"the reruns did not diverge: all {repeats} traced reruns were bitwise equal "
            f"in steps {', '.join(map(str, steps))} (a rare race, or a cause outside these steps)",
        )
        return result
    label, _ = counts.most_common(1)[0]
    first = next(f for f in firsts if _label(f) == label)
    result.update(status="explained", first=first)
    result["hint"] = hint(first, result)
    result["message"] = describe(result)
    return result


def _cleanup(runs: dict[str, SideRun]) -> None:
    for run in runs.values():
        shutil.rmtree(run.trace.with_name(run.trace.name + ".tensors"), ignore_errors=True)


def hint(first: dict[str, Any], result: dict[str, Any]) -> str | None:
    """The likely cause in a few words, where one applies."""
    entry = first.get("known")
    if isinstance(entry, dict) and entry.get("fix") in FIX_WORDS:
        return f"a non-deterministic op: {FIX_WORDS[entry['fix']]} (tuimon pair --deterministic)"
    if first.get("nondeterministic"):  # an explanation saved before the table had `fix`
        return "a non-deterministic op (tuimon pair --deterministic may make the runs equal)"
    if result.get("cross_device"):
        dtypes = first.get("dtypes") or {}
        return (
            f"the devices differ ({' vs '.join(result.get('devices') or [])}): their kernels "
            "sum in different orders, so cross-device pairs usually part in the first matmul of "
            f"step 0 (dtype a: {_first(dtypes.get('a'))}, b: {_first(dtypes.get('b'))})"
        )
    return None


def save_result(path: Path, result: dict[str, Any]) -> None:
    """Add the result to pair.json under "explain"."""
    doc = PairDoc.read(path)
    doc.more["explain"] = result
    doc.write(Path(path))


def run_explain(
    pair: str,
    *,
    repeats: int,
    timeout: float,
    as_json: bool,
    confirm: Callable[[list[Planned]], bool],
    out: Any = None,
    nproc: tuple[int | None, int | None] = (None, None),
) -> int:
    """The `explain` command: 0 when an op was named or the reruns agreed, 3 when it could not;
    UsageError (exit 2) for a pair that cannot be explained or commands not agreed to."""
    out = out or sys.stdout
    if repeats < 1:
        raise UsageError("--repeats must be at least 1")
    try:
        result = explain_pair(
            Path(pair), repeats=repeats, timeout=timeout, confirm=confirm,
            progress=lambda text: print(f"tuimon: {text}", file=sys.stderr, flush=True),
            nproc=nproc,
        )  # fmt: skip
        save_result(Path(pair), result)
    except (StoreError, ExplainError) as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        out.write(json_text({"pair": str(pair), **result}) + "\n")
    else:
        out.write(describe(result) + "\n")
    out.flush()
    return 0 if result["status"] in ("explained", "not_reproduced", "resume") else 3


def explain_after(session: Any, say: Callable[[str], None]) -> dict[str, Any] | None:
    """`pair --explain`: explain a finished live pair when it DIVERGED and was saved. Its
    commands are the ones typed on this command line, so they run without asking again (they
    are checked against the live pair's own)."""
    from tuimon.engine.judge.verdict import DIVERGED
    from tuimon.store import StoreError

    summary = getattr(session, "summary", None)
    path = getattr(session, "pair_path", None)
    if summary is None or path is None or summary.verdict != DIVERGED:
        return None
    sides = getattr(session, "sides", {})
    typed = {side: _as_typed(state.command) for side, state in sides.items()}

    def same_as_typed(commands: list[Planned]) -> bool:
        """pair.json still holds the commands this pair ran (nobody changed it meanwhile)."""
        doc = PairDoc.read(Path(path)).to_json()
        recorded = doc.get("commands") or {}
        shell = bool(doc.get("shell"))
        return all(
            typed.get(s) == (recorded[s][0] if shell else shlex.join(recorded[s])) for s in SIDES
        )

    try:
        result = explain_pair(
            Path(path), confirm=same_as_typed, progress=lambda text: say(f"explain: {text}")
        )
        save_result(Path(path), result)
    except (StoreError, ExplainError) as exc:
        return {"status": "failed", "message": str(exc)}
    return result


def _as_typed(shown: str) -> str:
    """A side's command as run, from its pane's title (`resumed after step N · COMMAND`)."""
    if shown.startswith("resumed after step ") and " · " in shown:
        return shown.split(" · ", 1)[1]
    return shown
