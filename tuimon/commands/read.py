"""`tuimon read LOG`: how tuimon reads one log, so a guess is checked before a verdict is
trusted: the format and why, the step key (and its levels), the metrics judged, the clocks set
aside, text lines, skipped lines by reason, the first records as read."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuimon.commands.options import add_judging, reading
from tuimon.sanitize import json_text


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "read",
        help="how tuimon reads a log: format, step key, metrics, clocks, skipped lines",
        description="Show how tuimon reads one log (any format compare reads): the format "
        "chosen and why, the step key, the metrics judged, the clocks set aside, text lines, "
        "skipped lines by reason and the first records. --step-key, --judge, --pattern fix "
        "a wrong guess; the same flags work on compare, replay, watch and pair.",
        epilog="exit codes: 0 read, 2 unreadable or bad usage",
    )
    p.add_argument("log", metavar="LOG", help="a log file (or a TensorBoard run folder)")
    p.add_argument("--json", action="store_true", help="print what was read as JSON")
    add_judging(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.sources.log_blocks import read_one
    from tuimon.errors import TuimonError
    from tuimon.readers import ReaderError
    from tuimon.readers.readout import describe

    try:  # a log of rows read by compare's block readers, any other by the readers' load
        found = describe(args.log, reading(args), read_one)
    except ReaderError as exc:  # a file that is not a log: one line, exit 2
        raise TuimonError(str(exc)) from None
    if args.json:
        sys.stdout.write(json_text(found) + "\n")
    else:
        for line in _lines(found):
            print(line)
    return 0


def _names(names: list[str], most: int = 12) -> str:
    more = f", … ({len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more if names else "none"


def _read_by(found: dict[str, Any]) -> list[list[str]]:
    """The rules that read a log of lines and how many lines each (none for other formats)."""
    read_by = found.get("read_by") or {}
    return [[f"{rule} {count}" for rule, count in read_by.items()]] if read_by else []


def _lines(found: dict[str, Any]) -> list[str]:
    from tuimon.sanitize import clean

    out = [
        f"{clean(found['path'], 200)}: {found['format']} ({found['why']})",
        *[f"  lines read as: {clean(_names(read_by), 400)}" for read_by in _read_by(found)],
        f"  step: {clean(found['step_key'], 200)}",
        f"  records: {clean(found['account'], 400)}",
        f"  judged ({len(found['metrics'])}): {clean(_names(found['metrics']), 600)}",
        f"  clocks, not judged ({len(found['clocks'])}): {clean(_names(found['clocks']), 400)}",
        f"  text lines: {found['text_lines']} (judged against the other log's, by position)",
    ]
    for reason, count in found["skipped"].items():
        example = clean(found["first_skipped"].get(reason, ""), 80)
        out.append(f"  skipped: {reason} {count} (first: `{example}`)")
    out.append(f"  first {len(found['first'])} records as read:")
    out += [f"    {clean(r, 300)}" for r in found["first"]]
    return out
