"""`--junit FILE` and `--summary FILE` (pair, compare, sweep): the reports a CI job reads, and
`--tolerance-from SWEEP`: the band per metric measured on a saved sweep of repeats.

A report file is written as `export` writes (`export.safe_open`: a temporary file beside it,
renamed over it once whole; an existing regular file is replaced). Without `--summary`, when
`$GITHUB_STEP_SUMMARY` names a file (GitHub Actions), the Markdown summary is appended to it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuimon.commands.export import safe_open
from tuimon.errors import UsageError
from tuimon.sanitize import clean

if TYPE_CHECKING:
    from tuimon.report.ci import Case

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def add_reports(p: argparse.ArgumentParser) -> None:
    """--junit FILE and --summary FILE."""
    p.add_argument(
        "--junit",
        default=None,
        metavar="FILE",
        help="write JUnit XML: one test case per pair (a sweep: per seed and repeat); DIVERGED "
        "is a failure naming the step, the metric, the abs and rel difference and the "
        "tolerance, INCOMPLETE an error (runs headless; FILE is replaced)",
    )
    p.add_argument(
        "--summary",
        default=None,
        metavar="FILE",
        help=f"write the verdicts as a Markdown summary (runs headless; FILE is replaced); "
        f"without it, appended to ${STEP_SUMMARY} when that is set (GitHub Actions)",
    )


def add_tolerance_from(p: argparse.ArgumentParser) -> None:
    """--tolerance-from SWEEP."""
    p.add_argument(
        "--tolerance-from",
        default=None,
        metavar="SWEEP",
        help="judge with a band per metric measured on a saved sweep of repeats (its id or "
        "record; e.g. from tuimon sweep --seeds 0 --repeat 5): the largest abs and rel "
        "difference any two of its runs showed over the run; a difference past either limit is "
        "DIVERGED, named with the band (instead of --tolerance)",
    )


def asked(args: argparse.Namespace) -> bool:
    """Whether a report file was asked for (then the command runs headless)."""
    return bool(getattr(args, "junit", None) or getattr(args, "summary", None))


def band_of(args: argparse.Namespace, *, tolerance_given: bool) -> dict[str, Any] | None:
    """The band of `--tolerance-from` as a dict (`Band.to_dict`), said on stderr; None
    without it. UsageError with --tolerance, or for a sweep no band can be measured on."""
    ref = getattr(args, "tolerance_from", None)
    if ref is None:
        return None
    if tolerance_given:
        raise UsageError("--tolerance-from gives the limits: leave out --tolerance")
    from tuimon.engine.analyses.band_from import BandError, band_from_sweep
    from tuimon.store import resolve_store

    try:
        band = band_from_sweep(resolve_store(args.store), ref)
    except BandError as exc:
        raise UsageError(f"--tolerance-from: {exc}") from None
    if band.exact:
        how = "bitwise equal: judged bitwise"
    else:
        widest = sorted(band.metrics.items(), key=lambda kv: -kv[1][1])[:3]
        how = "; ".join(f"{clean(k, 40)} abs {a:.3g} rel {r:.3g}" for k, (a, r) in widest)
    print(
        f"tuimon: band from sweep {band.source}: {band.runs} runs, {len(band.metrics)} "
        f"metrics, {how}",
        file=sys.stderr,
    )
    return band.to_dict()


def write_reports(args: argparse.Namespace, title: str, cases: Sequence[Case]) -> None:
    """The JUnit file and the Markdown summary asked for (or `$GITHUB_STEP_SUMMARY`'s);
    TuimonError (exit 2) when a file asked for cannot be written."""
    from tuimon.report.ci import junit_xml, markdown

    if args.junit:
        _write(Path(args.junit), junit_xml(title, cases))
        print(f"tuimon: JUnit report written to {clean(args.junit, None)}", file=sys.stderr)
    text = markdown(title, cases)
    if args.summary:
        _write(Path(args.summary), text.encode("utf-8"))
        print(f"tuimon: summary written to {clean(args.summary, None)}", file=sys.stderr)
    elif target := os.environ.get(STEP_SUMMARY):
        try:  # GitHub's step summary: appended, as its documentation says to
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            print(
                f"tuimon: warning: ${STEP_SUMMARY} ({clean(target, None)}) not written: "
                f"{clean(exc.strerror or exc, None)}",
                file=sys.stderr,
            )


def _write(path: Path, data: bytes) -> None:
    with safe_open(path, True) as out:
        out.write(data)


def check_paths(args: argparse.Namespace) -> None:
    """A report named twice, a directory, or a file in a folder that does not exist is
    refused before anything runs."""
    if args.junit and args.summary and os.path.abspath(args.junit) == os.path.abspath(args.summary):
        raise UsageError("--junit and --summary name the same file")
    for flag, name in (("--junit", args.junit), ("--summary", args.summary)):
        if not name:
            continue
        where = os.path.dirname(os.path.abspath(name))
        if os.path.isdir(name):
            raise UsageError(f"{flag} {clean(name, None)} is a directory: give a file name")
        if not os.path.isdir(where):
            raise UsageError(f"{flag} {clean(name, None)}: no folder {clean(where, None)}")
