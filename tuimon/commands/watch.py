"""`tuimon watch A B`: follow two growing log files of runs tuimon did not launch, as a pair."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuimon.commands.options import (
    add_headless,
    add_judging,
    add_store,
    check_storable,
    non_negative_float,
    reading,
    select,
    terminal,
)
from tuimon.errors import UsageError

DEFAULT_IDLE = 120.0


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="follow two growing log files (runs tuimon did not launch) as a pair",
        description="Follow two step logs as they grow (sbatch jobs writing to a shared "
        "filesystem, a colleague's run, any two files `tail -f` could follow) and judge them "
        "step by step exactly as a live pair: the same view, the same verdict, saved in the "
        "store. A file not there yet is waited for; a file truncated in place is read again "
        "from its start; a rotated file is read to its end, then the new one. A side ends with "
        "its end record; the watch ends when every side still open has written nothing for "
        "--stall-timeout seconds (or on Ctrl-C / q). A W&B run (its .wandb file, its run folder, "
        "or a folder W&B writes runs under, whose first run is followed once it appears) is "
        "followed by its records as W&B flushes them; it ends with its exit record.",
        epilog="exit codes: 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE (a file never "
        "appeared, a run logged an error, the watch was stopped), 2 bad usage. Example: "
        "tuimon watch /scratch/run-a/log.jsonl /scratch/run-b/log.jsonl --stall-timeout 600",
    )
    p.add_argument("a", metavar="A", help="the log file of run A (or a W&B run folder)")
    p.add_argument("b", metavar="B", help="the log file of run B (or a W&B run folder)")
    p.add_argument(
        "--stall-timeout",
        type=non_negative_float,
        default=DEFAULT_IDLE,
        metavar="S",
        help=f"end when both files have been idle for S seconds (default {DEFAULT_IDLE:g}; "
        "0: only end records or Ctrl-C end it)",
    )
    p.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=0.0,
        help="relative difference still judged CLOSE (default 0: bitwise)",
    )
    p.add_argument("--no-save", action="store_true", help="do not save the pair in the store")
    add_headless(p)
    add_judging(p)
    add_store(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def wandb_ready(path: Path) -> None:
    """A W&B run is read with the wandb package: its absence is one line (exit 2)."""
    from tuimon.readers.tensorboard import MissingExtra
    from tuimon.readers.wandb_run import records_type

    try:
        records_type()
    except MissingExtra as exc:
        raise UsageError(f"{path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.launch.follower import RunFollower, follows_run
    from tuimon.engine.sources.follow import watch_factory
    from tuimon.engine.sources.session import PairOptions
    from tuimon.store import check_writable, resolve_store, special

    check_storable(args)
    if args.json and not args.headless:
        raise UsageError("--json needs --headless")
    paths = (Path(args.a), Path(args.b))
    for path in paths:
        if path.is_dir() and RunFollower(path).find() is None and any(path.iterdir()):
            raise UsageError(
                f"{path} is a directory without a W&B run (.wandb): watch takes two log files "
                "or W&B run folders"
            )
        if follows_run(path):
            wandb_ready(path)
        if kind := special(path):  # refused at once, never opened (it could block or never end)
            raise UsageError(f"{path} is {kind}, not a log file: watch takes regular files")
    if paths[0].resolve() == paths[1].resolve():
        raise UsageError("A and B are the same file: nothing would be compared")
    store = None
    if not args.no_save:
        store = resolve_store(args.store)
        check_writable(store)
    options = PairOptions(tolerance=args.tolerance, select=select(args))
    make = watch_factory(
        paths, store, idle=args.stall_timeout, options=options, reading=reading(args)
    )
    if args.headless or not terminal("watch"):
        from tuimon.report.headless import run_headless

        return run_headless([make], as_json=args.json)
    from tuimon.ui.app import run_app

    title = f"tuimon watch · {paths[0].name} · {paths[1].name}"
    return run_app(store=store or resolve_store(None), make_session=make, title=title)
