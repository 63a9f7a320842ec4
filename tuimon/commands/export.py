"""`tuimon export`: a pair's aligned rows as CSV, JSON Lines or parquet."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import IO

from tuimon.commands.options import add_judging, reading, select
from tuimon.errors import TuimonError, UsageError

SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="a pair's aligned rows as CSV, JSON Lines or parquet",
        description="Write the aligned rows of a saved pair directory or of two logs (any "
        "format tuimon reads): one row per step both runs logged (a repeated step: one per "
        "occurrence), columns step, occurrence, equal, divergence, digest_equal, "
        "tensors_differ, t.a, t.b, then per judged metric M: M.a, M.b, M.abs, M.rel, M.ulps "
        "(the names of a pair's aligned.jsonl). Parquet needs pyarrow: "
        "pip install 'tuimon[parquet]'.",
        epilog="exit codes: 0 written, 2 bad input, an existing FILE without --force, or no "
        "pyarrow for parquet",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a pair directory or two log files")
    p.add_argument(
        "--format",
        choices=("csv", "jsonl", "parquet"),
        default=None,
        help="default: from FILE's ending (.csv, .jsonl, .parquet), else csv",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the file to write; - for stdout"
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    add_judging(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.analyses import export
    from tuimon.engine.sources.saved import resolve_logs

    fmt = args.format or SUFFIXES.get(Path(args.output).suffix.lower(), "csv")
    export.check(fmt)
    logs = resolve_logs(args.paths, reading(args))
    chosen = select(args) if args.ignore or args.only else None
    aligned = export.aligned_rows(logs, chosen)
    if args.output == "-":
        if fmt == "parquet" and sys.stdout.isatty():
            raise UsageError("parquet is not for a terminal: give -o FILE, or a pipe")
        export.write(aligned, sys.stdout.buffer, fmt)
        sys.stdout.flush()
        return 0
    path = Path(args.output)
    with _opened(path, args.force) as out:
        count = export.write(aligned, out, fmt)
    print(f"tuimon: {count} aligned rows written to {path} ({fmt})", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _opened(path: Path, force: bool):  # type: ignore[no-untyped-def]
    """`path` opened for writing: a new file (an existing one only with `force`); removed
    again when the export fails, so no half file is left."""
    try:
        out: IO[bytes] = open(path, "wb" if force else "xb")  # noqa: SIM115 - closed below
    except FileExistsError:
        raise TuimonError(f"{path} exists: give another name, or --force to replace it") from None
    except OSError as exc:
        raise TuimonError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with out:
            yield out
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
