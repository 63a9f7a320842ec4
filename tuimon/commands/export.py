"""`tuimon export`: a pair's aligned rows as CSV, JSON Lines or parquet."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO

from tuimon.commands.options import add_judging, reading, select
from tuimon.errors import TuimonError, UsageError
from tuimon.sanitize import clean

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
    from tuimon.engine.sources.saved_pair import resolve_logs

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
    with safe_open(path, args.force) as out:
        count = export.write(aligned, out, fmt)
    said = clean(path, None)  # the name as given: data, never a terminal's control
    print(f"tuimon: {count} aligned rows written to {said} ({fmt})", file=sys.stderr)
    return 0


@contextlib.contextmanager
def safe_open(path: Path, force: bool):  # type: ignore[no-untyped-def]
    """`path` opened for writing, so that a failed export never touches what was there.

    A regular file (an existing one only with `force`) or a new name: written to a temporary
    file beside it, renamed over it only once every row is written (through a link: over the
    file the link names, the link kept); a failure removes the temporary file and leaves the
    old one as it was. A FIFO or a character device (/dev/null, /dev/stdout, a process
    substitution) is written in place and never removed. Anything else (a directory, a block
    device, a socket) is refused."""
    real = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise TuimonError(f"cannot write {path}: {exc.strerror or exc}") from None
    if info is not None and (stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode)):
        try:
            out: IO[bytes] = open(real, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TuimonError(f"cannot write {path}: {exc.strerror or exc}") from None
        with _said(path), out:
            yield out
        return
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise TuimonError(f"{path} is a directory: give the name of a file to write")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise TuimonError(f"{path} is not a regular file: give another name")
    if info is not None and not force:
        raise TuimonError(f"{path} exists: give another name, or --force to replace it")
    try:
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as exc:
        raise TuimonError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with _said(path):
            # the mode a plain open would give a new file, or the replaced file's own
            mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
            os.fchmod(fd, mode)
            if info is not None:  # and owner, where this process may give it
                with contextlib.suppress(OSError):
                    os.fchown(fd, info.st_uid, info.st_gid)
            with open(fd, "wb") as out:
                yield out
            if not force:  # never over a file made meanwhile (FileExistsError)
                try:
                    os.link(tmp, real)
                except FileExistsError:
                    raise
                except OSError:  # a file system without hard links
                    if os.path.lexists(real):
                        raise FileExistsError from None
                else:
                    os.unlink(tmp)
                    tmp = ""
            if tmp:
                os.replace(tmp, real)
            tmp = ""
    except FileExistsError:
        raise TuimonError(f"{path} exists: give another name, or --force to replace it") from None
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@contextlib.contextmanager
def _said(path: Path):  # type: ignore[no-untyped-def]
    """An OS error while writing `path` (a full disk, /dev/full) as one line; one that names
    a file (a log that could not be read) is not this write's and passes."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or isinstance(exc, FileExistsError):
            raise
        raise TuimonError(f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
