"""Command line: `main(argv) -> int` dispatches to one module per subcommand (tuimon.commands).

Each subcommand module has `add(sub)` (its arguments) and `run(args) -> int`; engines are
imported lazily there, so --help is fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from tuimon import __version__
from tuimon.commands import (
    browse,
    compare,
    emb_check,
    explain,
    export,
    pair,
    plot,
    read,
    replay,
    spread,
    sweep,
    train,
    watch,
)
from tuimon.commands.guarded_streams import guarded
from tuimon.commands.options import Parser
from tuimon.errors import TuimonError, UsageError
from tuimon.sanitize import clean
from tuimon.signal_owner import own

COMMANDS = (
    pair,
    sweep,
    watch,
    compare,
    export,
    read,
    emb_check,
    spread,
    plot,
    replay,
    browse,
    train,
    explain,
)
"""The subcommands, in the order --help lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = Parser(
        prog="tuimon",
        description="Does a training run reproduce? Launch two runs, watch them side by side, "
        "and see the first step where they differ.",
    )
    parser.add_argument("--version", action="version", version=f"tuimon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (the same when stdout or stderr is a pipe
    whose reader has gone: see `tuimon.commands.guarded_streams`). Called without `argv`
    (the entry point), tuimon owns the process's signals (`tuimon.signal_owner`)."""
    if argv is None:
        own()
    try:
        with guarded():
            return _main(argv)
    except Exception as exc:  # raised while the streams were put back, or by the guard itself
        if os.environ.get("TUIMON_DEBUG"):
            raise
        return internal_error(exc)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand's parser, so the hint names its --help
        Parser(prog=getattr(args, "help_prog", None) or "tuimon").error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    handler = getattr(args, "handler", None)
    if handler is None:
        handler = browse.run
    try:
        return int(handler(args))
    except UsageError as exc:  # a bad command line: the message and where to read more
        prog = getattr(args, "help_prog", None) or "tuimon"
        print(f"tuimon: error: {clean(exc, None)}\ntry: {prog} --help", file=sys.stderr)
        return 2
    except TuimonError as exc:  # every one-line error of tuimon: the message, exit 2
        print(f"tuimon: error: {clean(exc, None)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tuimon: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tuimon train | head`: its binary step log has no reader left
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug, an OS error nobody foresaw, MemoryError, RecursionError:
        # one line and exit 2, never 0 or 1 (IDENTICAL and DIVERGED to a CI job)
        if os.environ.get("TUIMON_DEBUG"):
            raise
        return internal_error(exc)


def internal_error(exc: BaseException) -> int:
    """An error nobody foresaw: one line on stderr, exit 2."""
    why = f"{type(exc).__name__}: {clean(exc, None)}"
    if isinstance(exc, MemoryError):
        why = "out of memory (MemoryError)"
    with contextlib.suppress(Exception):
        print(f"tuimon: error: {why} (TUIMON_DEBUG=1 shows where)", file=sys.stderr)
    return 2
