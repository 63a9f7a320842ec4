"""`tuimon replay`: a saved pair or two logs through the live view (or headless)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from tuimon.commands.options import (
    REPLAY_SPEED,
    add_headless,
    add_judging,
    non_negative_float,
    positive_float,
    reading,
    select,
    terminal,
)

if TYPE_CHECKING:
    from tuimon.engine.sources.read_ahead import ReadAhead


def add(sub: argparse._SubParsersAction) -> None:
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
        type=positive_float,
        default=None,
        help=f"steps per second (default {REPLAY_SPEED:g}; full speed into a pipe); with "
        "--realtime, a time multiplier",
    )
    p.add_argument("--realtime", action="store_true", help="pace by the recorded step times")
    p.add_argument("--tolerance", type=non_negative_float, default=None, help="relative")
    add_headless(p)
    add_judging(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    ahead = None
    if not args.headless and sys.stdin.isatty() and sys.stdout.isatty():  # the view (`terminal`)
        # a child reads the logs while this process starts the view (issue 42)
        from tuimon.engine.sources.read_ahead import read_ahead, resolved_blocks

        ahead = read_ahead(lambda: resolved_blocks(args.paths, reading(args)))  # in the child
    try:
        return _run(args, ahead)
    finally:
        if ahead is not None:  # the session closed it at its end; not when it never ran
            ahead.close()


def _run(args: argparse.Namespace, ahead: ReadAhead | None) -> int:
    from tuimon.engine.sources.replay import replay_session
    from tuimon.engine.sources.saved_pair import resolve_logs
    from tuimon.store import resolve_store

    logs = resolve_logs(args.paths, reading(args))
    headless = args.headless or not terminal("replay")
    speed = args.speed
    if speed is None and args.realtime:  # the recorded pace itself (--speed multiplies it)
        speed = 1.0
    if speed is None:  # nobody watches a pipe: no pacing unless asked for
        piped = headless and not sys.stdout.isatty()
        speed = math.inf if piped else REPLAY_SPEED

    # flat out (headless), the pair is judged in blocks as `compare` judges it, no record per
    # step; in the view, the same judge runs beside the paced feed (the verdict said at once),
    # imported when it starts (a second after the first rows: not before them)
    judge = _judge_pair

    def make(on_batch):  # type: ignore[no-untyped-def]
        return replay_session(
            logs,
            speed=speed,
            realtime=args.realtime,
            tolerance=args.tolerance,
            on_batch=on_batch,
            select=select(args) if args.ignore or args.only else None,
            judge=judge,
            stream=not headless,  # the view shows the first rows as soon as they are read
            ahead=ahead,
        )

    if headless:
        from tuimon.report.headless import run_headless

        return run_headless([make], as_json=args.json)
    from tuimon.ui.app import run_app

    return run_app(
        store=resolve_store(None),
        make_session=make,
        replay=True,
        title=f"tuimon replay · {' '.join(args.paths)}",
    )


def _judge_pair(*args: Any, **kwargs: Any) -> Any:
    """`compare.judge_pair`, imported when first called (a view judges a second after its
    first rows: the import is not paid before them)."""
    from tuimon.engine.analyses.compare import judge_pair

    return judge_pair(*args, **kwargs)
