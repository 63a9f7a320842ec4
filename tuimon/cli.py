"""Command line: `main(argv) -> int`. Subcommands import their engine lazily so --help is fast."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tuimon import __version__
from tuimon.errors import TuimonError, UsageError
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from pathlib import Path

    from tuimon.plan import PairPlan


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="run the reference grokking workload, writing a step log",
        description="Train the one-layer transformer of Nanda et al. (2023) on (a op b) mod p, "
        "writing a tuimon step log (JSON Lines) to --log or stdout.",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for init and data split (default 0)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default cpu)")
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument("--p", type=int, default=113, help="the modulus (default 113)")
    p.add_argument("--task", choices=("add", "sub", "mul"), default="add", help="default add")
    p.add_argument("--frac-train", type=float, default=0.3, help="train fraction (default 0.3)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=1.0, help="AdamW decay (default 1.0)")
    p.add_argument("--warmup", type=int, default=10, help="linear warm-up steps (default 10)")
    p.add_argument(
        "--threads", type=int, default=None, help="intra-op threads (default: torch's; recorded)"
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
    p.add_argument("--eval-every", type=int, default=1, help="test evaluation every N steps")
    p.add_argument("--time-only", action="store_true", help="save nothing but the log")
    p.add_argument("--save-emb", default=None, metavar="PATH", help="save W_E as .npy at the end")
    p.add_argument("--log", default=None, metavar="FILE", help="write the step log here (stdout)")
    p.set_defaults(handler=_run_train)


def _run_train(args: argparse.Namespace) -> int:
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
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _positive_float(text: str) -> float:
    """A pace: 0 makes no sense."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
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
        "grokking workload (tuimon train) runs. In a command, {seed}, {device} and {side} are "
        "substituted.",
        epilog="exit codes (--headless): 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE or a run "
        "failed, 2 bad usage. Example: tuimon pair --seed 0 --devices cpu,cpu -- python "
        "train.py --seed {seed} --device {device}",
    )
    p.add_argument("--seed", type=int, default=0, help="the seed of both runs (default 0)")
    p.add_argument(
        "--devices", default="cpu,cpu", help="two devices, A,B (default cpu,cpu; e.g. mps,mps)"
    )
    p.add_argument("--steps", type=int, default=None, help="steps (reference workload: 300)")
    p.add_argument("--p", type=int, default=None, help="reference workload: the modulus")
    p.add_argument("--task", choices=("add", "sub", "mul"), default=None, help="reference task")
    p.add_argument("--frac-train", type=float, default=None, help="reference: train fraction")
    p.add_argument("--eval-every", type=int, default=None, help="reference: test eval interval")
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
    p.add_argument("--repeat", type=int, default=1, metavar="K", help="run the pair K times")
    p.add_argument("--label", default=None, help="a word added to the pair's directory name")
    p.add_argument(
        "--log-file",
        default=None,
        metavar="TEMPLATE",
        help="the run writes its step log to this file instead of stdout ({side}, {seed}, "
        "{device}, {pair_dir} substituted)",
    )
    _add_reading(p)
    p.add_argument("--shell", action="store_true", help="run the command through the shell (sh -c)")
    p.add_argument("--headless", action="store_true", help="no TUI: progress, then the verdict")
    p.add_argument("--json", action="store_true", help="(headless) print the summary as JSON")
    p.add_argument(
        "--no-save", action="store_true", help="do not save the pair (nothing is written)"
    )
    _add_store(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND TEMPLATE ...")
    p.set_defaults(handler=_run_pair)


def _threads(text: str | None, devices: tuple[str, ...]) -> tuple[int, int]:
    from tuimon.plan import default_threads

    if text is None:
        n = default_threads(devices)
        return n, n
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--threads takes N or A,B (got {text!r})") from None
    if len(values) not in (1, 2) or min(values) < 1:
        raise UsageError(f"--threads takes N or A,B, each at least 1 (got {text!r})")
    return (values[0], values[-1])


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
    if template and any(v is not None for v in _workload(args).values()):
        raise UsageError(
            "--p/--task/--frac-train/--eval-every are for the reference workload; "
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
    }


def _pair_plan(args: argparse.Namespace) -> tuple[PairPlan, Path | None]:
    """The validated plan of `tuimon pair` and its store (None with --no-save)."""
    from tuimon.devices import check
    from tuimon.plan import PairPlan, loss_dtype_for
    from tuimon.store import check_writable, resolve_store

    devices = _pair_devices(args)
    template = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    threads = _check_pair_args(args, template, devices)
    check(list(devices), need_torch=not template)
    store = None
    if not args.no_save:
        store = resolve_store(args.store)
        check_writable(store)
    plan = PairPlan(
        seed=args.seed,
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
    )
    return plan, store


def _check_log_file(args: argparse.Namespace, plan: PairPlan) -> None:
    """A --log-file without {pair_dir} must not exist yet (old lines would read as new)."""
    from tuimon.store import SIDES

    if not args.log_file or "{pair_dir}" in args.log_file:
        return
    if args.repeat > 1:
        raise UsageError("--repeat with --log-file needs {pair_dir} in the template")
    for side in SIDES:
        log = plan.spec(side, None).log_file
        if log is not None and log.exists():
            raise UsageError(
                f"--log-file {log} already exists: remove it, or put {{pair_dir}} in the "
                "template so each pair writes its own"
            )


def _run_pair(args: argparse.Namespace) -> int:
    plan, store = _pair_plan(args)
    _check_log_file(args, plan)
    factories = [plan.session_factory(store) for _ in range(args.repeat)]
    if args.headless or not _terminal("pair"):
        from tuimon.headless import run_headless

        return run_headless(factories, as_json=args.json)
    from tuimon.store import resolve_store
    from tuimon.ui.app import run_app

    code = 0
    for make in factories:
        code = run_app(
            store=store or resolve_store(None),
            make_session=make,
            title=f"tuimon pair · seed {args.seed} · {plan.devices[0]},{plan.devices[1]}",
        )
        if code:
            break
    return code


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
    _add_store(p)
    p.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace) -> int:
    from tuimon.compare import compare_paths

    return compare_paths(
        args.logs,
        tolerance=args.tolerance,
        as_json=args.json,
        save_to=args.store if args.save else None,
        save=args.save,
        reading=_reading(args),
    )


def _add_replay(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a saved pair (or two logs) through the live view",
        description="Replay a saved pair directory, a sample_logs entry, or two log files.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a pair directory or two log files")
    p.add_argument(
        "--speed",
        type=_positive_float,
        default=50.0,
        help="steps per second (default 50); with --realtime, a time multiplier",
    )
    p.add_argument("--realtime", action="store_true", help="pace by the recorded step times")
    p.add_argument("--tolerance", type=_non_negative_float, default=None, help="relative")
    p.add_argument("--headless", action="store_true", help="no TUI: progress, then the verdict")
    p.add_argument("--json", action="store_true", help="(headless) print the summary as JSON")
    _add_reading(p)
    p.set_defaults(handler=_run_replay)


def _run_replay(args: argparse.Namespace) -> int:
    from tuimon.replay import replay_session, resolve_logs
    from tuimon.store import resolve_store

    logs = resolve_logs(args.paths, _reading(args) if args.pattern or args.map else None)

    def make(on_batch):  # type: ignore[no-untyped-def]
        return replay_session(
            logs,
            speed=args.speed,
            realtime=args.realtime,
            tolerance=args.tolerance,
            on_batch=on_batch,
        )

    if args.headless or not _terminal("replay"):
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
    p = sub.add_parser("browse", help="browse past pairs (the default)")
    _add_store(p)
    p.set_defaults(handler=_run_browse)


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


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = argparse.ArgumentParser(
        prog="tuimon",
        description="Does a training run reproduce? Launch two runs, watch them side by side, "
        "and see the first step where they differ.",
    )
    parser.add_argument("--version", action="version", version=f"tuimon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_pair(sub)
    _add_compare(sub)
    _add_replay(sub)
    _add_browse(sub)
    _add_train(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        handler = _run_browse
    try:
        return int(handler(args))
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
