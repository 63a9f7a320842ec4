"""`tuimon browse` (and `tuimon` alone): the store's past pairs."""

from __future__ import annotations

import argparse
import sys

from tuimon.commands.options import add_store
from tuimon.errors import UsageError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "browse",
        help="browse past pairs (the default)",
        description="Browse the pairs of the store, newest first: open one (Enter), replay it "
        "(r), filter (/), delete (d, asks first; a pair still running cannot be deleted). "
        "`tuimon` alone does the same.",
    )
    add_store(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.store import resolve_store
    from tuimon.ui.app import run_app

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("browsing needs a terminal; `tuimon compare PAIR_DIR` judges one pair")
    return run_app(store=resolve_store(getattr(args, "store", None)))
