"""What every subcommand shares: the parser class, value types, reading/select/store options."""

from __future__ import annotations

import argparse
import math
import sys
from typing import NoReturn

from tuimon.errors import UsageError

INT64 = (-(2**63), 2**63 - 1)
"""The integers pair.json (and a step log) can hold."""
REPLAY_SPEED = 50.0
"""Steps per second of a replay someone watches (a TUI, or headless in a terminal)."""
SUBSTITUTIONS = (
    "{seed}, {device}, {side} (a or b), {threads}, {pair_dir} and, with --resume-at, "
    "{checkpoint_at}, {checkpoint} and {resume_from}"
)


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and a hint (`try: tuimon pair --help`), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print `PROG: error: MESSAGE` and the hint; exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\ntry: {self.prog} --help\n")


def int64(text: str) -> int:
    """An integer that pair.json can store (64 bits)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not INT64[0] <= value <= INT64[1]:
        raise argparse.ArgumentTypeError(f"{text} does not fit in 64 bits, so it cannot be stored")
    return value


def finite(text: str) -> float:
    """A finite number (JSON has no inf or NaN)."""
    value = number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
    return value


def check_storable(args: argparse.Namespace) -> None:
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


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def non_negative_float(text: str) -> float:
    """A tolerance or a timeout: 0 is meaningful (bitwise; off)."""
    value = number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def positive_float(text: str) -> float:
    """A pace: 0 makes no sense."""
    value = number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text!r}")
    return value


def add_headless(p: argparse.ArgumentParser) -> None:
    """--headless and --json: the verdict without the TUI (pair, sweep, replay, watch)."""
    p.add_argument("--headless", action="store_true", help="no TUI: progress, then the verdict")
    p.add_argument("--json", action="store_true", help="(headless) print the summary as JSON")


def add_judging(p: argparse.ArgumentParser) -> None:
    """How logs are read (--pattern, --map, ...) and which metrics are judged (--ignore ...)."""
    add_reading(p)
    add_select(p)
    p.add_argument(
        "--max-bytes",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="the most a gzip / xz log may expand to (default 256M; also at most 100 times "
        "its compressed size, from 16M): e.g. 2G",
    )


def byte_size(text: str) -> int:
    """A size in bytes: `1000000`, `512K`, `256M`, `2G`."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    body = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = body[-1:] if body[-1:] in units else ""
    try:
        value = int(body[: len(body) - len(unit)]) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256M, 2G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256M, 2G)")
    return value


def add_reading(p: argparse.ArgumentParser) -> None:
    """--pattern, --map, --step-key and --judge: how other tools' logs are read (see
    tuimon.readers)."""
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
    p.add_argument(
        "--step-key",
        default=None,
        metavar="NAME",
        help="the field (JSON key, CSV column, printed name) that holds the step; default: "
        "found by content (step, _step, global_step, iteration, iter, current_steps, ...)",
    )
    p.add_argument(
        "--judge",
        action="append",
        default=[],
        metavar="GLOB",
        help="judge metrics matching GLOB that would be shown only as clocks or throughput "
        "(e.g. 'mfu'; repeatable)",
    )


def reading(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The `Reading` of --pattern / --map / --step-key / --judge; UsageError when one is
    bad."""
    from tuimon.readers import PatternError, Reading, parse_map
    from tuimon.readers.capped import set_max_bytes

    set_max_bytes(getattr(args, "max_bytes", None))
    try:
        key = getattr(args, "step_key", None)
        if key is not None and not key.strip():
            raise ValueError("--step-key takes a field name")
        reading = Reading(
            tuple(args.pattern),
            parse_map(args.map),
            key.strip() if key else None,
            tuple(getattr(args, "judge", ())),
        )
        reading.compiled  # noqa: B018 - compile now: a bad pattern is a usage error
    except (PatternError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return reading


def add_select(p: argparse.ArgumentParser) -> None:
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


def select(args: argparse.Namespace, *, reference: bool = False):  # type: ignore[no-untyped-def]
    """The `MetricFilter` of --ignore / --only; for the reference workload its key frequencies
    are shown, not judged, unless --only chooses (`plan.SHOWN_ONLY`)."""
    from tuimon.engine.judge.columns import MetricFilter
    from tuimon.engine.runs.plan import SHOWN_ONLY

    ignore = tuple(args.ignore)
    if reference and not args.only:
        ignore += tuple(g for g in SHOWN_ONLY if g not in ignore)
    return MetricFilter(ignore, tuple(args.only))


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="where pairs are saved (default $TUIMON_STORE or ./tuimon_pairs)",
    )


def terminal(command: str) -> bool:
    """True in a terminal; otherwise says that `command` runs headless instead."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return True
    print(f"tuimon: no terminal, so {command} runs headless (--headless)", file=sys.stderr)
    return False


def say(message: str) -> None:
    print(f"tuimon: {message}", file=sys.stderr, flush=True)


def add_yes(p: argparse.ArgumentParser) -> None:
    """--yes: run the command lines read from a saved file without asking (they are shown)."""
    p.add_argument(
        "--yes",
        action="store_true",
        help="run the command lines read from the saved file without asking (they are still "
        "printed); without a terminal and without --yes they are printed and nothing runs",
    )


def confirm(what: str, lines: list[str], *, yes: bool) -> bool:
    """Show the command lines (`engine.launch.consent.show`) that `what` would run from a saved
    file, and ask: True with --yes or a `y` on the terminal. Without a terminal and without
    --yes, the lines are printed and UsageError says that nothing ran (exit 2)."""
    shown = "\n".join(lines)
    if yes:
        print(f"tuimon: {what} runs (--yes):\n{shown}", file=sys.stderr, flush=True)
        return True
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        print(f"tuimon: {what} would run these command lines:\n{shown}", file=sys.stderr)
        raise UsageError(
            f"{what} runs command lines read from a saved file: nothing was run without a yes "
            "(no terminal to ask; --yes runs them)"
        )
    sys.stderr.write(f"tuimon: {what} runs these command lines:\n{shown}\nRun them? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if answer.strip().lower() in ("y", "yes"):
        return True
    raise UsageError(f"{what}: not confirmed, nothing was run")
