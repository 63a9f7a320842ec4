"""`tuimon pair`: two runs of one seed launched, watched and judged; the options a sweep shares."""

from __future__ import annotations

import argparse
import math
import os
import shutil
from typing import TYPE_CHECKING

from tuimon.commands.ci_report import (
    add_reports,
    add_tolerance_from,
    asked,
    band_of,
    check_paths,
    write_reports,
)
from tuimon.commands.options import (
    INT64,
    SUBSTITUTIONS,
    add_headless,
    add_judging,
    add_store,
    check_storable,
    finite,
    int64,
    non_negative_float,
    reading,
    say,
    select,
    terminal,
)
from tuimon.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from tuimon.engine.runs.plan import PairPlan
    from tuimon.report.headless import PairReport


def add(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument(
        "--seed",
        type=int64,
        default=None,
        help="the seed of both runs (default 0; with --against, the saved run's)",
    )
    p.add_argument(
        "--seeds",
        default=None,
        metavar="A,B",
        help="a pair of two seeds: side a runs seed A, side b seed B; when they give the same "
        "log, the seed is not applied, and the pair says so",
    )
    p.add_argument(
        "--check-seeds",
        action="store_true",
        help="with --seeds A,B: the exit code is the seed check's (1 the seed is not applied, "
        "0 it is, 3 incomplete)",
    )
    add_pair_options(p)
    add_against(p)
    p.add_argument(
        "--no-save", action="store_true", help="do not save the pair (nothing is written)"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="after a DIVERGED verdict, run `tuimon explain` on the pair (names the op)",
    )
    p.add_argument(
        "--resume-at",
        type=int64,
        default=None,
        metavar="N",
        help="side b stops after step N with a checkpoint and is started again from it; side "
        "a runs through: does the resumed run follow the unbroken one? (your command takes "
        "{checkpoint_at}, {checkpoint} and {resume_from})",
    )
    add_store(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND TEMPLATE ...")
    p.set_defaults(handler=run, help_prog=p.prog)


def add_pair_options(p: argparse.ArgumentParser) -> None:
    """Options shared by `pair` and `sweep`: devices, workload, judging, launchers ..."""
    p.add_argument(
        "--devices",
        default=None,
        help="two devices, A,B (default cpu,cpu; e.g. mps,mps); with --against, the live run's "
        "one device (default cpu)",
    )
    p.add_argument("--steps", type=int64, default=None, help="steps (reference workload: 300)")
    p.add_argument("--p", type=int64, default=None, help="reference workload: the modulus")
    p.add_argument("--task", choices=("add", "sub", "mul"), default=None, help="reference task")
    p.add_argument("--frac-train", type=finite, default=None, help="reference: train fraction")
    p.add_argument("--eval-every", type=int64, default=None, help="reference: test eval interval")
    p.add_argument(
        "--gather",
        choices=("view", "contiguous"),
        default=None,
        help="reference: embedding gather layout (view, the published one; contiguous races)",
    )
    p.add_argument(
        "--freq-every", type=int64, default=None, metavar="N", help="reference: key_freqs every N"
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
        type=non_negative_float,
        default=0.0,
        help="relative difference still judged CLOSE (default 0: bitwise)",
    )
    add_tolerance_from(p)
    p.add_argument(
        "--stall-timeout",
        type=non_negative_float,
        default=120.0,
        metavar="S",
        help="flag a run silent for S seconds as stalled (default 120; 0 off)",
    )
    p.add_argument("--stop-on-fail", action="store_true", help="stop the other run when one fails")
    p.add_argument(
        "--stop-on-divergence",
        action="store_true",
        help="end the live runs at the first step judged DIVERGED (the partial pair is saved; "
        "exit 1)",
    )
    p.add_argument("--repeat", type=int64, default=1, metavar="K", help="run the pair K times")
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
    add_judging(p)
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
    add_nproc(p)
    add_headless(p)
    add_reports(p)


def add_nproc(p: argparse.ArgumentParser) -> None:
    """--nproc N or A,B: each side as N ranks under torch.distributed's launcher."""
    p.add_argument(
        "--nproc",
        default=None,
        metavar="N[,M]",
        help="run each side as N ranks (python -m torch.distributed.run --standalone "
        "--nproc-per-node N, through --launch when given); A,B gives each side its own (1,2: "
        "does the world size change the run?); rank 0's output is the side's step log, the "
        "others' are saved beside it and their parameter digests checked against rank 0's",
    )


def nproc_of(text: str | None, devices: tuple[str, ...]) -> tuple[int | None, int | None]:
    """The ranks of each side from `--nproc N` or `A,B` (None, None without it); UsageError
    when bad, or more than one rank on MPS."""
    if text is None:
        return None, None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--nproc takes N or A,B (got {text!r})") from None
    if len(values) not in (1, 2) or min(values) < 1 or max(values) > 1024:
        raise UsageError(f"--nproc takes N or A,B, each from 1 to 1024 (got {text!r})")
    nproc = (values[0], values[-1])
    for device, n in zip(devices, nproc, strict=False):
        if device.startswith("mps") and n > 1:
            raise UsageError(
                f"--nproc {text}: mps runs one rank (no collective backend runs on MPS); "
                "give an mps side 1, or use cpu / cuda for more ranks"
            )
    return nproc


def _threads(
    text: str | None, devices: tuple[str, ...], nproc: tuple[int | None, ...] = ()
) -> tuple[int, int]:
    from tuimon.engine.runs.plan import default_threads

    if text is None:
        n = default_threads(devices, nproc)
        return n, n
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--threads takes N or A,B (got {text!r})") from None
    if len(values) not in (1, 2) or min(values) < 1 or max(values) > INT64[1]:
        raise UsageError(f"--threads takes N or A,B, each at least 1 (got {text!r})")
    return (values[0], values[-1])


def _launchers(args: argparse.Namespace) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    from tuimon.engine.runs.plan import parse_launcher

    out = []
    for flag, text in (("--launch-a", args.launch_a), ("--launch-b", args.launch_b)):
        try:
            out.append(parse_launcher(text if text is not None else args.launch))
        except ValueError as exc:
            raise UsageError(f"{flag}/--launch: {exc} in {text or args.launch!r}") from None
    return out[0], out[1]


def add_against(p: argparse.ArgumentParser) -> None:
    """`pair --against SAVED [--side a|b] [--emb NPY]`: one live run against a saved one."""
    p.add_argument(
        "--against",
        default=None,
        metavar="SAVED",
        help="run one side live against a saved run, which is side b: a log file (any format "
        "tuimon reads), a side of a saved pair (PAIR/a), or a pair directory with --side; the "
        "reference workload takes the saved run's seed, settings and threads unless given",
    )
    p.add_argument(
        "--side",
        choices=("a", "b"),
        default=None,
        help="with --against PAIR_DIR: which side of the saved pair",
    )
    p.add_argument(
        "--emb",
        default=None,
        metavar="NPY",
        help="with --against: the saved run's W_E (default: the pair's emb-SIDE.npy, or the "
        "file its end record names), checked against the retrain's at the end",
    )


def _pair_devices(args: argparse.Namespace) -> tuple[str, str]:
    if getattr(args, "against", None):
        return _against_device(args), "saved"
    devices = tuple(d.strip() for d in (args.devices or "cpu,cpu").split(","))
    if len(devices) != 2 or not all(devices):
        raise UsageError(f"--devices takes two devices, A,B (got {args.devices!r})")
    return devices[0], devices[1]


def _against_device(args: argparse.Namespace) -> str:
    devices = [d.strip() for d in (args.devices or "cpu").split(",")]
    if len(devices) == 2 and devices[0] == devices[1]:
        devices = devices[:1]
    if len(devices) != 1 or not devices[0]:
        raise UsageError(f"--against runs one side: give one device (got --devices {args.devices})")
    return devices[0]


def _check_pair_args(
    args: argparse.Namespace, template: tuple[str, ...], devices: tuple[str, str]
) -> tuple[int, int]:
    """The checks of `tuimon pair` flags that need no device and no store; the thread counts."""
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.steps is not None and args.steps < 1:
        raise UsageError("--steps must be at least 1")
    threads = _threads(args.threads, devices, nproc_of(getattr(args, "nproc", None), devices))
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
    if not getattr(args, "against", None) and (
        getattr(args, "side", None) or getattr(args, "emb", None)
    ):
        raise UsageError("--side and --emb go with --against SAVED")
    if getattr(args, "against", None) and getattr(args, "explain", False):
        raise UsageError("--explain re-runs both sides of a pair: not with --against")
    _check_resume(args, template)
    return threads


def _check_resume(args: argparse.Namespace, template: tuple[str, ...]) -> None:
    """--resume-at N: a step before the last, side b's stdout, one process on this machine."""
    at = getattr(args, "resume_at", None)
    if at is None:
        return
    steps = args.steps if args.steps is not None else (None if template else 300)
    if at < 0 or (steps is not None and at >= steps - 1):
        last = f" (--steps {steps}: 0 to {steps - 2})" if steps is not None else ""
        raise UsageError(f"--resume-at must be a step before the last{last}, got {at}")
    for flag, value in (("--against", getattr(args, "against", None)),
                        ("--log-file", args.log_file), ("--nproc", getattr(args, "nproc", None)),
                        ("--launch-b", args.launch_b or args.launch)):  # fmt: skip
        if value:
            raise UsageError(
                f"--resume-at restarts side b on this machine from its stdout: not with {flag}"
            )
    if template and not any(
        "{checkpoint_at}" in word or "{resume_from}" in word for word in template
    ):
        raise UsageError(
            "--resume-at: the command takes neither {checkpoint_at} nor {resume_from}, so "
            "side b would never stop nor resume (docs/your-script.md, 'Resume')"
        )


def _workload(args: argparse.Namespace) -> dict[str, object]:
    return {
        "p": args.p,
        "task": args.task,
        "frac_train": args.frac_train,
        "eval_every": args.eval_every,
        "gather": args.gather,
        "freq_every": args.freq_every,
    }


def pair_plan(
    args: argparse.Namespace, seed: int | None, *, many: bool = False
) -> tuple[PairPlan, Path | None]:
    """The validated plan of `tuimon pair` (or a sweep's, `seed` None) and its store (None with
    --no-save)."""
    from tuimon.devices import check
    from tuimon.engine.runs.plan import PairPlan, loss_dtype_for
    from tuimon.store import check_writable, resolve_store

    check_storable(args)
    devices = _pair_devices(args)
    template = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    threads = _check_pair_args(args, template, devices)
    check_paths(args)
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
        stop_on_divergence=args.stop_on_divergence,
        label=args.label,
        reading=reading(args),
        launch=launch,
        select=select(args, reference=not template),
        nproc=nproc_of(getattr(args, "nproc", None), devices),
        resume_at=getattr(args, "resume_at", None),
    )
    if template and not args.shell:
        _check_programs(plan)
    plan.band = band_of(args, tolerance_given=bool(args.tolerance))
    local = [d for d, launcher in zip(devices, launch, strict=True) if not launcher]
    if getattr(args, "against", None):  # side b is saved: nothing of it runs
        if args.launch_b:
            raise UsageError("--against: side b is the saved run, nothing to launch (--launch-b)")
        plan.launch, local = (launch[0], None), [] if launch[0] else [devices[0]]
    if local:  # a launched side's device is on the other machine: it checks it itself
        check(local, need_torch=not template, say=say)
    store = None
    if not getattr(args, "no_save", False):
        store = resolve_store(args.store)
        check_writable(store)
    return plan, store


def _check_programs(plan: PairPlan) -> None:
    """The program of each side exists and can be run (UsageError before anything starts)."""
    from tuimon.store import SIDES

    for side in SIDES:
        program = plan.spec(side, None, ranks=False).argv[0]
        if "{pair_dir}" in (plan.template or ("",))[0] or shutil.which(program):
            continue
        where = "is not an executable file" if os.sep in program else "is not found on PATH"
        raise UsageError(f"program {program!r} {where}; nothing was started")


def check_log_file(args: argparse.Namespace, plan: PairPlan, *, many: bool = False) -> None:
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


def against_plan(args: argparse.Namespace) -> tuple[PairPlan, Path | None]:
    """`pair --against`: the saved side read, the settings the retrain takes from it (said on
    stderr), then the plan with the saved run as side b."""
    from tuimon.engine.sources.against_side import resolve_saved
    from tuimon.errors import ReplayError

    check_storable(args)
    try:
        saved = resolve_saved(args.against, args.side, reading(args), args.emb)
    except ReplayError as exc:  # a saved side that cannot be read: one line, before any run
        raise ReplayError(f"--against: {exc}") from None
    template = args.command[1:] if args.command[:1] == ["--"] else args.command
    if taken := take_saved_settings(args, saved.settings(), reference=not template):
        say(f"as the saved run: {' '.join(taken)}")
    plan, store = pair_plan(args, 0 if args.seed is None else args.seed)
    plan.against = saved
    plan.devices = (plan.devices[0], saved.device or "saved")
    return plan, store


SAVED_FLAGS: dict[str, type | tuple[str, ...]] = {
    "seed": int,
    "threads": int,
    "steps": int,
    "p": int,
    "task": ("add", "sub", "mul"),
    "frac_train": float,
    "eval_every": int,
    "gather": ("view", "contiguous"),
    "loss_dtype": ("float32", "float64"),
}
"""What a retrain takes from the saved run when not given: its type, or its choices."""


def take_saved_settings(
    args: argparse.Namespace, settings: dict[str, object], *, reference: bool
) -> list[str]:
    """Set the flags not given from the saved run's settings (the workload's only for the
    reference workload); the flags taken, as typed."""
    taken = []
    for key, kind in SAVED_FLAGS.items():
        value = settings.get(key)
        if (key not in ("seed", "threads") and not reference) or not hasattr(args, key):
            continue  # a sweep has no --seed
        if getattr(args, key) is not None or value is None or isinstance(value, bool):
            continue
        if not _fits(value, kind):
            continue
        setattr(args, key, str(value) if key == "threads" else value)
        taken.append(f"--{key.replace('_', '-')} {value}")
    if reference and settings.get("deterministic") is True and not args.deterministic:
        args.deterministic = True
        taken.append("--deterministic")
    return taken


def _fits(value: object, kind: type | tuple[str, ...]) -> bool:
    """A saved setting is one the flag takes (a planted header value is never passed on)."""
    if isinstance(kind, tuple):
        return value in kind
    if kind is int:
        return isinstance(value, int) and INT64[0] <= value <= INT64[1]
    return isinstance(value, (int, float)) and math.isfinite(value)


def _two_seeds(args: argparse.Namespace) -> tuple[int, int] | None:
    """`--seeds A,B`: two seeds (UsageError otherwise, or with --seed or --against)."""
    if args.seeds is None:
        if args.check_seeds:
            raise UsageError("--check-seeds goes with --seeds A,B (a pair of two seeds)")
        return None
    if args.seed is not None or args.against:
        raise UsageError("--seeds A,B gives each side its seed: not with --seed or --against")
    parts = [p.strip() for p in args.seeds.split(",")]
    try:
        seeds = [int64(p) for p in parts]
    except (argparse.ArgumentTypeError, ValueError):
        seeds = []
    if len(seeds) != 2:
        raise UsageError(f"--seeds takes two seeds, A,B (got {args.seeds!r})")
    if seeds[0] == seeds[1]:
        raise UsageError(f"--seeds {args.seeds}: two different seeds (one seed: --seed)")
    return seeds[0], seeds[1]


def _write_reports(args: argparse.Namespace, plan: PairPlan, reports: list[PairReport]) -> None:
    """--junit / --summary (or $GITHUB_STEP_SUMMARY): a test case per pair run."""
    from tuimon.report.ci import case_of
    from tuimon.sanitize import clean

    devices = ",".join(plan.devices)
    name = f"seed {plan.seed} · {devices}"
    if plan.against is not None:
        name = f"seed {plan.seed} · {plan.devices[0]} against {clean(plan.against.log, 200)}"
    cases = []
    for i, report in enumerate(reports, 1):
        repeat = f" · repeat {i}" if args.repeat > 1 else ""
        cases.append(case_of(name + repeat, report.summary.to_dict(), report.detail_lines(),
                             seconds=report.seconds))  # fmt: skip
    write_reports(args, "tuimon pair", cases)


def run(args: argparse.Namespace) -> int:
    seeds = _two_seeds(args)
    if args.against:
        plan, store = against_plan(args)
    else:
        plan, store = pair_plan(args, seeds[0] if seeds else (args.seed or 0))
    plan.seeds, plan.check_seeds = seeds, args.check_seeds
    args.seed = plan.seed
    check_log_file(args, plan)
    factories = [plan.session_factory(store) for _ in range(args.repeat)]
    if args.headless or asked(args) or not terminal("pair"):
        from tuimon.report.headless import run_headless

        reports: list[PairReport] = []
        code = run_headless(factories, as_json=args.json, explain=args.explain, reports=reports)
        _write_reports(args, plan, reports)
        return code
    from tuimon.store import resolve_store
    from tuimon.ui.app import run_app

    codes = []
    for make in factories:
        codes.append(
            run_app(
                store=store or resolve_store(None),
                make_session=make,
                title=f"tuimon pair · seed{'s ' + args.seeds if seeds else ' ' + str(args.seed)}"
                f" · {plan.devices[0]},{plan.devices[1]}" + (" (saved)" if plan.against else ""),
                explain=args.explain,
            )
        )
        if codes[-1] not in (0, 1):  # stopped, failed or not saved: no more repeats
            break
    return 3 if 3 in codes else max(codes)
