"""Command line: `main(argv) -> int`. Subcommands import their engine lazily so --help is fast."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from tuimon import __version__
from tuimon.errors import TuimonError, UsageError
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from pathlib import Path

    from tuimon.plan import PairPlan


INT64 = (-(2**63), 2**63 - 1)
"""The integers pair.json (and a step log) can hold."""
REPLAY_SPEED = 50.0
"""Steps per second of a replay someone watches (a TUI, or headless in a terminal)."""
SUBSTITUTIONS = "{seed}, {device}, {side} (a or b), {threads} and {pair_dir}"


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and a hint (`try: tuimon pair --help`), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print `PROG: error: MESSAGE` and the hint; exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\ntry: {self.prog} --help\n")


def _int64(text: str) -> int:
    """An integer that pair.json can store (64 bits)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not INT64[0] <= value <= INT64[1]:
        raise argparse.ArgumentTypeError(f"{text} does not fit in 64 bits, so it cannot be stored")
    return value


def _finite(text: str) -> float:
    """A finite number (JSON has no inf or NaN)."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
    return value


def _check_storable(args: argparse.Namespace) -> None:
    """Every text of the command line can be stored in pair.json and passed to a process:
    UTF-8 (no undecodable bytes from the shell) and no NUL; UsageError otherwise."""
    for key, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            name = "the command" if key == "command" else "--" + key.replace("_", "-")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                try:  # the bytes the shell passed, as \xNN
                    raw = text.encode("utf-8", "surrogateescape")
                except UnicodeEncodeError:
                    raw = text.encode("utf-8", "backslashreplace")
                shown = raw.decode("utf-8", "backslashreplace")
                raise UsageError(
                    f"{name} {shown} is not valid UTF-8, so it cannot be stored"
                ) from None
            if "\0" in text:
                raise UsageError(f"{name} contains a NUL character")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="run the reference grokking workload, writing a step log",
        description="Train the one-layer transformer of Nanda et al. (2023) on (a op b) mod p, "
        "writing a tuimon step log (JSON Lines) to --log or stdout.",
    )
    p.add_argument(
        "--seed", type=_int64, default=0, help="seed for init and data split (default 0)"
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default cpu)")
    p.add_argument("--steps", type=_int64, default=300, help="training steps (default 300)")
    p.add_argument("--p", type=_int64, default=113, help="the modulus (default 113)")
    p.add_argument("--task", choices=("add", "sub", "mul"), default="add", help="default add")
    p.add_argument("--frac-train", type=_finite, default=0.3, help="train fraction (default 0.3)")
    p.add_argument("--lr", type=_finite, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=_finite, default=1.0, help="AdamW decay (default 1.0)")
    p.add_argument("--warmup", type=_int64, default=10, help="linear warm-up steps (default 10)")
    p.add_argument(
        "--threads", type=_int64, default=None, help="intra-op threads (default: torch's; recorded)"
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="torch.use_deterministic_algorithms(True) and CUBLAS_WORKSPACE_CONFIG",
    )
    p.add_argument(
        "--loss-dtype",
        choices=("float32", "float64"),
        default=None,
        help="dtype of the cross-entropy (default float64, float32 on MPS)",
    )
    p.add_argument("--eval-every", type=_int64, default=1, help="test evaluation every N steps")
    p.add_argument(
        "--gather",
        choices=("view", "contiguous"),
        default="view",
        help="layout of the embedding gather: view (d_model outermost, as the published code; "
        "default) or contiguous (batch, pos, d_model), which races with 2+ CPU threads",
    )
    p.add_argument(
        "--freq-every",
        type=_int64,
        default=0,
        metavar="N",
        help="log W_E's top-5 key frequencies (key_freqs.1..5, as a sorted set) every N steps",
    )
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        help="capture the whole step as one CUDA graph and replay it (CUDA only)",
    )
    p.add_argument("--time-only", action="store_true", help="save nothing but the log")
    p.add_argument("--save-emb", default=None, metavar="PATH", help="save W_E as .npy at the end")
    p.add_argument("--log", default=None, metavar="FILE", help="write the step log here (stdout)")
    p.add_argument(
        "--trace-step",
        default=None,
        metavar="N[,M]",
        help="record every op of these steps to --trace-file (what `tuimon explain` uses; "
        "also TUIMON_TRACE_STEP)",
    )
    p.add_argument("--trace-file", default=None, metavar="FILE", help="where --trace-step writes")
    p.set_defaults(handler=_run_train, help_prog=p.prog)


def _run_train(args: argparse.Namespace) -> int:
    if (args.trace_step is None) != (args.trace_file is None):
        raise UsageError("--trace-step and --trace-file go together")
    if args.trace_step is not None:
        from tuimon.tracing import TRACE_FILE_ENV, TRACE_STEP_ENV

        os.environ[TRACE_STEP_ENV], os.environ[TRACE_FILE_ENV] = args.trace_step, args.trace_file
    from tuimon.workload.train import run

    return run(args)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _non_negative_float(text: str) -> float:
    """A tolerance or a timeout: 0 is meaningful (bitwise; off)."""
    value = _number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def _positive_float(text: str) -> float:
    """A pace: 0 makes no sense."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text!r}")
    return value


def _add_reading(p: argparse.ArgumentParser) -> None:
    """--pattern and --map: how other tools' logs are read (see tuimon.readers)."""
    p.add_argument(
        "--pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="read printed lines with this regex: a named group for the step (step, iter, "
        "epoch) and one per metric, e.g. 'it (?P<step>\\d+) loss (?P<loss>\\S+)' "
        "(repeatable; replaces the built-in text patterns)",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="A_NAME=B_NAME",
        help="compare run A's metric A_NAME with run B's B_NAME (repeatable)",
    )


def _reading(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The `Reading` of --pattern / --map; UsageError when one is bad."""
    from tuimon.readers import PatternError, Reading, parse_map

    try:
        reading = Reading(tuple(args.pattern), parse_map(args.map))
        reading.compiled  # noqa: B018 - compile now: a bad pattern is a usage error
    except (PatternError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return reading


def _add_select(p: argparse.ArgumentParser) -> None:
    """--ignore / --only: which metrics are judged (clocks never are)."""
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="GLOB",
        help="show but never judge metrics matching GLOB, e.g. 'eval_*' (repeatable)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="judge only metrics matching GLOB (repeatable)",
    )


def _select(args: argparse.Namespace, *, reference: bool = False):  # type: ignore[no-untyped-def]
    """The `MetricFilter` of --ignore / --only; for the reference workload its key frequencies
    are shown, not judged, unless --only chooses (`plan.SHOWN_ONLY`)."""
    from tuimon.align import MetricFilter
    from tuimon.plan import SHOWN_ONLY

    ignore = tuple(args.ignore)
    if reference and not args.only:
        ignore += tuple(g for g in SHOWN_ONLY if g not in ignore)
    return MetricFilter(ignore, tuple(args.only))


def _add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="where pairs are saved (default $TUIMON_STORE or ./tuimon_pairs)",
    )


def _add_pair(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pair",
        help="launch two runs of the same seed and watch them side by side",
        description="Launch two runs with the same seed and settings, one per device, compare "
        "them step by step and save the pair. Without a command after --, the reference "
        f"grokking workload (tuimon train) runs. In a command (and --log-file), {SUBSTITUTIONS} "
        "are substituted, each value once (it is never expanded again; with --shell it is "
        "shell-quoted). A program that does not exist is refused before anything starts.",
        epilog="exit codes (--headless): 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE, a run "
        "failed or the pair could not be saved, 2 bad usage. Example: tuimon pair --seed 0 "
        "--devices cpu,cpu -- python train.py --seed {seed} --device {device}",
    )
    p.add_argument("--seed", type=_int64, default=0, help="the seed of both runs (default 0)")
    _add_pair_options(p)
    p.add_argument(
        "--no-save", action="store_true", help="do not save the pair (nothing is written)"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="after a DIVERGED verdict, run `tuimon explain` on the pair (names the op)",
    )
    _add_store(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND TEMPLATE ...")
    p.set_defaults(handler=_run_pair, help_prog=p.prog)


def _add_pair_options(p: argparse.ArgumentParser) -> None:
    """Options shared by `pair` and `sweep`: devices, workload, judging, launchers ..."""
    p.add_argument(
        "--devices", default="cpu,cpu", help="two devices, A,B (default cpu,cpu; e.g. mps,mps)"
    )
    p.add_argument("--steps", type=_int64, default=None, help="steps (reference workload: 300)")
    p.add_argument("--p", type=_int64, default=None, help="reference workload: the modulus")
    p.add_argument("--task", choices=("add", "sub", "mul"), default=None, help="reference task")
    p.add_argument("--frac-train", type=_finite, default=None, help="reference: train fraction")
    p.add_argument("--eval-every", type=_int64, default=None, help="reference: test eval interval")
    p.add_argument(
        "--gather",
        choices=("view", "contiguous"),
        default=None,
        help="reference: embedding gather layout (view, the published one; contiguous races)",
    )
    p.add_argument(
        "--freq-every", type=_int64, default=None, metavar="N", help="reference: key_freqs every N"
    )
    p.add_argument(
        "--threads",
        default=None,
        metavar="N[,M]",
        help="intra-op threads of each run (default: cores / CPU runs, so they do not "
        "oversubscribe); the same on both sides unless given as A,B (e.g. 1,2 to test the "
        "thread count itself); recorded",
    )
    p.add_argument(
        "--deterministic", action="store_true", help="deterministic algorithms on both sides"
    )
    p.add_argument(
        "--loss-dtype",
        choices=("float32", "float64"),
        default=None,
        help="loss dtype of both sides (default: float32 when either side is MPS)",
    )
    p.add_argument(
        "--tolerance",
        type=_non_negative_float,
        default=0.0,
        help="relative difference still judged CLOSE (default 0: bitwise)",
    )
    p.add_argument(
        "--stall-timeout",
        type=_non_negative_float,
        default=120.0,
        metavar="S",
        help="flag a run silent for S seconds as stalled (default 120; 0 off)",
    )
    p.add_argument("--stop-on-fail", action="store_true", help="stop the other run when one fails")
    p.add_argument("--repeat", type=_int64, default=1, metavar="K", help="run the pair K times")
    p.add_argument(
        "--label", default=None, help="a word added to the pair's directory name (and pair.json)"
    )
    p.add_argument(
        "--log-file",
        default=None,
        metavar="TEMPLATE",
        help=f"the run writes its step log to this file instead of stdout ({SUBSTITUTIONS} "
        "substituted)",
    )
    _add_reading(p)
    _add_select(p)
    p.add_argument(
        "--shell",
        action="store_true",
        help="run the command through the shell (sh -c); substituted values are shell-quoted",
    )
    p.add_argument(
        "--launch",
        default=None,
        metavar="PREFIX",
        help="run both sides through this launcher, e.g. 'srun -p gpu --gres=gpu:1'",
    )
    p.add_argument(
        "--launch-a", default=None, metavar="PREFIX", help="launcher of run A, e.g. 'ssh -tt mac'"
    )
    p.add_argument("--launch-b", default=None, metavar="PREFIX", help="launcher of run B")
    p.add_argument("--headless", action="store_true", help="no TUI: progress, then the verdict")
    p.add_argument("--json", action="store_true", help="(headless) print the summary as JSON")


def _threads(text: str | None, devices: tuple[str, ...]) -> tuple[int, int]:
    from tuimon.plan import default_threads

    if text is None:
        n = default_threads(devices)
        return n, n
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--threads takes N or A,B (got {text!r})") from None
    if len(values) not in (1, 2) or min(values) < 1 or max(values) > INT64[1]:
        raise UsageError(f"--threads takes N or A,B, each at least 1 (got {text!r})")
    return (values[0], values[-1])


def _launchers(args: argparse.Namespace) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    from tuimon.plan import parse_launcher

    out = []
    for flag, text in (("--launch-a", args.launch_a), ("--launch-b", args.launch_b)):
        try:
            out.append(parse_launcher(text if text is not None else args.launch))
        except ValueError as exc:
            raise UsageError(f"{flag}/--launch: {exc} in {text or args.launch!r}") from None
    return out[0], out[1]


def _pair_devices(args: argparse.Namespace) -> tuple[str, str]:
    devices = tuple(d.strip() for d in args.devices.split(","))
    if len(devices) != 2 or not all(devices):
        raise UsageError(f"--devices takes two devices, A,B (got {args.devices!r})")
    return devices[0], devices[1]


def _check_pair_args(
    args: argparse.Namespace, template: tuple[str, ...], devices: tuple[str, str]
) -> tuple[int, int]:
    """The checks of `tuimon pair` flags that need no device and no store; the thread counts."""
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.steps is not None and args.steps < 1:
        raise UsageError("--steps must be at least 1")
    threads = _threads(args.threads, devices)
    if args.json and not args.headless:
        raise UsageError("--json needs --headless")
    if getattr(args, "explain", False) and getattr(args, "no_save", False):
        raise UsageError("--explain re-runs a saved pair: drop --no-save")
    if template and any(v is not None for v in _workload(args).values()):
        raise UsageError(
            "--p/--task/--frac-train/--eval-every/--gather/--freq-every are for the reference "
            "workload; "
            "pass your script's own flags in its command"
        )
    if args.shell and not template:
        raise UsageError("--shell needs a command after --")
    return threads


def _workload(args: argparse.Namespace) -> dict[str, object]:
    return {
        "p": args.p,
        "task": args.task,
        "frac_train": args.frac_train,
        "eval_every": args.eval_every,
        "gather": args.gather,
        "freq_every": args.freq_every,
    }


def _pair_plan(
    args: argparse.Namespace, seed: int | None, *, many: bool = False
) -> tuple[PairPlan, Path | None]:
    """The validated plan of `tuimon pair` (or a sweep's, `seed` None) and its store (None with
    --no-save)."""
    from tuimon.devices import check
    from tuimon.plan import PairPlan, loss_dtype_for
    from tuimon.store import check_writable, resolve_store

    _check_storable(args)
    devices = _pair_devices(args)
    template = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    threads = _check_pair_args(args, template, devices)
    launch = _launchers(args)
    plan = PairPlan(
        seed=seed,
        devices=devices,
        threads=threads,
        deterministic=args.deterministic,
        loss_dtype=loss_dtype_for(devices, args.loss_dtype) if not template else args.loss_dtype,
        template=template or None,
        shell=args.shell,
        log_file=args.log_file,
        steps=args.steps,
        workload=_workload(args),
        tolerance=args.tolerance,
        stall_timeout=args.stall_timeout or None,
        stop_on_fail=args.stop_on_fail,
        label=args.label,
        reading=_reading(args),
        launch=launch,
        select=_select(args, reference=not template),
    )
    if template and not args.shell:
        _check_programs(plan)
    local = [d for d, launcher in zip(devices, launch, strict=True) if not launcher]
    if local:  # a launched side's device is on the other machine: it checks it itself
        check(local, need_torch=not template, say=_say)
    store = None
    if not getattr(args, "no_save", False):
        store = resolve_store(args.store)
        check_writable(store)
    return plan, store


def _say(message: str) -> None:
    print(f"tuimon: {message}", file=sys.stderr, flush=True)


def _check_programs(plan: PairPlan) -> None:
    """The program of each side exists and can be run (UsageError before anything starts)."""
    from tuimon.store import SIDES

    for side in SIDES:
        program = plan.spec(side, None).argv[0]
        if "{pair_dir}" in (plan.template or ("",))[0] or shutil.which(program):
            continue
        where = "is not an executable file" if os.sep in program else "is not found on PATH"
        raise UsageError(f"program {program!r} {where}; nothing was started")


def _check_log_file(args: argparse.Namespace, plan: PairPlan, *, many: bool = False) -> None:
    """A --log-file without {pair_dir} must not exist yet (old lines would read as new)."""
    from tuimon.store import SIDES

    if not args.log_file or "{pair_dir}" in args.log_file:
        return
    if many or args.repeat > 1:
        raise UsageError("--repeat or a sweep with --log-file needs {pair_dir} in the template")
    for side in SIDES:
        log = plan.spec(side, None).log_file
        if log is not None and log.exists():
            raise UsageError(
                f"--log-file {log} already exists: remove it, or put {{pair_dir}} in the "
                "template so each pair writes its own"
            )


def _run_pair(args: argparse.Namespace) -> int:
    plan, store = _pair_plan(args, args.seed)
    _check_log_file(args, plan)
    factories = [plan.session_factory(store) for _ in range(args.repeat)]
    if args.headless or not _terminal("pair"):
        from tuimon.headless import run_headless

        return run_headless(factories, as_json=args.json, explain=args.explain)
    from tuimon.store import resolve_store
    from tuimon.ui.app import run_app

    code = 0
    for make in factories:
        code = run_app(
            store=store or resolve_store(None),
            make_session=make,
            title=f"tuimon pair · seed {args.seed} · {plan.devices[0]},{plan.devices[1]}",
            explain=args.explain,
        )
        if code:
            break
    return code


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a pair for each seed (and repeat), N at a time",
        description="Run one pair per seed (times --repeat), --jobs at a time, each saved as a "
        "pair tagged with the sweep, and show them as one table. Takes the pair options; "
        "--launch 'srun ...' with --jobs 32 lets SLURM do the scheduling.",
        epilog="exit codes: 0 every pair IDENTICAL or CLOSE, 1 any DIVERGED, 3 any INCOMPLETE "
        "(or never ran), 2 bad usage. Example: tuimon sweep --seeds 0-9 --devices cpu,cpu "
        "--threads 1 --jobs 2 --headless",
    )
    p.add_argument("--seeds", default=None, help="seeds: 0-9, 0,3,7 or 0-3,7")
    p.add_argument(
        "--resume",
        default=None,
        metavar="SWEEP",
        help="run the pairs of a saved sweep that never ran or were interrupted",
    )
    p.add_argument(
        "--jobs",
        type=_int64,
        default=None,
        metavar="N",
        help="pairs at once (default: as many as the cores hold without two CPU runs sharing "
        "a core; 1 for GPU or launched pairs)",
    )
    _add_pair_options(p)
    _add_store(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND TEMPLATE ...")
    p.set_defaults(handler=_run_sweep, help_prog=p.prog)


def _run_sweep(args: argparse.Namespace) -> int:
    from tuimon.store import resolve_store
    from tuimon.sweep import Sweep, SweepError, default_jobs, oversubscribed, parse_seeds

    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.json and not args.headless:
        raise UsageError("--json needs --headless")
    try:
        if args.resume:
            if args.seeds:
                raise UsageError("--resume takes the sweep's own seeds: leave out --seeds")
            sweep = Sweep.load(resolve_store(args.store), args.resume, args.jobs)
            if not sweep.todo():
                raise UsageError(f"sweep {sweep.id} has nothing left to run")
        else:
            if not args.seeds:
                raise UsageError("sweep needs --seeds (e.g. 0-9 or 0,3,7) or --resume SWEEP")
            seeds = parse_seeds(args.seeds)
            plan, store = _pair_plan(args, None, many=True)
            _check_log_file(args, plan, many=True)
            assert store is not None
            jobs = args.jobs or default_jobs(plan)
            sweep = Sweep.create(store, plan, seeds, args.repeat, jobs)
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    if oversubscribed(sweep.plan, sweep.at_once):
        print(
            f"tuimon: warning: {sweep.at_once} pair(s) at once ask for more CPU threads than "
            f"there are cores ({os.cpu_count()}): runs compete, timing changes, and so may "
            "results (see --threads, --jobs)",
            file=sys.stderr,
        )
    if args.headless or not _terminal("sweep"):
        from tuimon.sweep_headless import run_sweep_headless

        return run_sweep_headless(sweep, as_json=args.json)
    from tuimon.ui.app import run_app

    return run_app(store=sweep.store, sweep=sweep, title=f"tuimon sweep · {sweep.id}")


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="judge two existing step logs, or a saved pair",
        description="Compare two logs or one saved pair directory. A log is read by its "
        "content: a tuimon step log, JSON Lines with a step key, a JSON metrics document or "
        "trainer_state.json, a CSV with a step column (Lightning), TensorBoard events "
        "(a file or a run directory), or printed text (see README: Use with your script).",
        epilog="exit codes: 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE, 2 bad usage",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="two log files, or one pair directory")
    p.add_argument("--tolerance", type=_non_negative_float, default=0.0, help="relative; default 0")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--save", action="store_true", help="save the comparison as a pair")
    _add_reading(p)
    _add_select(p)
    _add_store(p)
    p.set_defaults(handler=_run_compare, help_prog=p.prog)


def _run_compare(args: argparse.Namespace) -> int:
    from tuimon.compare import compare_paths

    if args.save:
        _check_storable(args)
    return compare_paths(
        args.logs,
        tolerance=args.tolerance,
        as_json=args.json,
        save_to=args.store if args.save else None,
        save=args.save,
        reading=_reading(args),
        select=_select(args),
    )


def _add_emb_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "emb-check",
        help="does a retrain reproduce a saved W_E? (two .npy files or two folders)",
        description="Compare a saved W_E with a retrain's: two .npy files, or two folders whose "
        ".npy files are matched by the seed in their names (s0, seed0, seed_0). Per seed: "
        "shapes, bitwise equal or not, max abs / max relative difference, and the key "
        "frequencies of both. W_E may be (d_model, p+1), (d_model, p) or transposed.",
        epilog="exit codes: 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE (a seed missing or "
        "unreadable), 2 bad usage",
    )
    p.add_argument("saved", metavar="SAVED", help="the saved W_E (.npy) or a folder of them")
    p.add_argument("retrain", metavar="RETRAIN", help="the retrain's W_E (.npy) or a folder")
    p.add_argument("--tolerance", type=_positive_float, default=0.0, help="relative; default 0")
    p.add_argument("--top", type=_int64, default=5, metavar="K", help="key frequencies (default 5)")
    p.add_argument(
        "--p", type=_int64, default=None, help="the modulus, when the shape is ambiguous"
    )
    p.add_argument(
        "--layout",
        choices=("auto", "d_model-first", "residues-first"),
        default="auto",
        help="which axis holds d_model (default auto: see README)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_run_emb_check, help_prog=p.prog)


def _run_emb_check(args: argparse.Namespace) -> int:
    from tuimon.emb_check import Options, main_check

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.p is not None and args.p < 3:
        raise UsageError("--p must be at least 3")
    options = Options(tolerance=args.tolerance, top=args.top, p=args.p, layout=args.layout)
    return main_check(args.saved, args.retrain, options, as_json=args.json)


def _add_replay(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a saved pair (or two logs) through the live view",
        description="Replay a saved pair directory, a sample_logs entry, or two log files. "
        "Headless with stdout not a terminal (a pipe, a file), the replay runs at full speed "
        "unless --speed or --realtime is given.",
        epilog="exit codes (headless): 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE, 2 bad usage",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a pair directory or two log files")
    p.add_argument(
        "--speed",
        type=_positive_float,
        default=None,
        help=f"steps per second (default {REPLAY_SPEED:g}; full speed into a pipe); with "
        "--realtime, a time multiplier",
    )
    p.add_argument("--realtime", action="store_true", help="pace by the recorded step times")
    p.add_argument("--tolerance", type=_non_negative_float, default=None, help="relative")
    p.add_argument("--headless", action="store_true", help="no TUI: progress, then the verdict")
    p.add_argument("--json", action="store_true", help="(headless) print the summary as JSON")
    _add_reading(p)
    _add_select(p)
    p.set_defaults(handler=_run_replay, help_prog=p.prog)


def _run_replay(args: argparse.Namespace) -> int:
    from tuimon.replay import replay_session, resolve_logs
    from tuimon.store import resolve_store

    logs = resolve_logs(args.paths, _reading(args) if args.pattern or args.map else None)
    headless = args.headless or not _terminal("replay")
    speed = args.speed
    if speed is None:  # nobody watches a pipe: no pacing unless asked for
        piped = headless and not args.realtime and not sys.stdout.isatty()
        speed = math.inf if piped else REPLAY_SPEED

    def make(on_batch):  # type: ignore[no-untyped-def]
        return replay_session(
            logs,
            speed=speed,
            realtime=args.realtime,
            tolerance=args.tolerance,
            on_batch=on_batch,
            select=_select(args) if args.ignore or args.only else None,
        )

    if headless:
        from tuimon.headless import run_headless

        return run_headless([make], as_json=args.json)
    from tuimon.ui.app import run_app

    return run_app(
        store=resolve_store(None),
        make_session=make,
        replay=True,
        title=f"tuimon replay · {' '.join(args.paths)}",
    )


def _add_browse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "browse",
        help="browse past pairs (the default)",
        description="Browse the pairs of the store, newest first: open one (Enter), replay it "
        "(r), filter (/), delete (d, asks first; a pair still running cannot be deleted). "
        "`tuimon` alone does the same.",
    )
    _add_store(p)
    p.set_defaults(handler=_run_browse, help_prog=p.prog)


def _terminal(command: str) -> bool:
    """True in a terminal; otherwise says that `command` runs headless instead."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return True
    print(f"tuimon: no terminal, so {command} runs headless (--headless)", file=sys.stderr)
    return False


def _run_browse(args: argparse.Namespace) -> int:
    from tuimon.store import resolve_store
    from tuimon.ui.app import run_app

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("browsing needs a terminal; `tuimon compare PAIR_DIR` judges one pair")
    return run_app(store=resolve_store(getattr(args, "store", None)))


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="name the op where a diverged pair's runs part",
        description="Re-run both sides of a saved pair with its recorded settings, trace every "
        "op of the steps where they part, and name the first op whose outputs differ (op, "
        "parameter, forward/backward, dtypes, size of the difference, line of code).",
        epilog="exit codes: 0 an op named (or the reruns did not diverge), 3 it could not "
        "trace, 2 bad usage. Your own script needs tuimon.tracing.trace_step (README).",
    )
    p.add_argument("pair", metavar="PAIR", help="a saved pair directory")
    p.add_argument("--repeats", type=_int64, default=3, help="traced reruns (default 3)")
    p.add_argument(
        "--timeout", type=_positive_float, default=900.0, metavar="S", help="per rerun (900)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=_run_explain, help_prog=p.prog)


def _run_explain(args: argparse.Namespace) -> int:
    from tuimon.explain import run_explain

    return run_explain(args.pair, repeats=args.repeats, timeout=args.timeout, as_json=args.json)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = Parser(
        prog="tuimon",
        description="Does a training run reproduce? Launch two runs, watch them side by side, "
        "and see the first step where they differ.",
    )
    parser.add_argument("--version", action="version", version=f"tuimon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_pair(sub)
    _add_sweep(sub)
    _add_compare(sub)
    _add_emb_check(sub)
    _add_replay(sub)
    _add_browse(sub)
    _add_train(sub)
    _add_explain(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand's parser, so the hint names its --help
        Parser(prog=getattr(args, "help_prog", None) or "tuimon").error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    handler = getattr(args, "handler", None)
    if handler is None:
        handler = _run_browse
    try:
        return int(handler(args))
    except UsageError as exc:  # a bad command line: the message and where to read more
        prog = getattr(args, "help_prog", None) or "tuimon"
        print(f"tuimon: error: {exc}\ntry: {prog} --help", file=sys.stderr)
        return 2
    except TuimonError as exc:  # every one-line error of tuimon: the message, exit 2
        print(f"tuimon: error: {clean(exc, None)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tuimon: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tuimon ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug or an OS error nobody foresaw: one line, not a traceback
        if os.environ.get("TUIMON_DEBUG"):
            raise
        why = f"{type(exc).__name__}: {clean(exc, None)}"
        print(f"tuimon: error: {why} (TUIMON_DEBUG=1 shows where)", file=sys.stderr)
        return 1
