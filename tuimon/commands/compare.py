"""`tuimon compare`: judge two existing logs, or a saved pair, and print the verdict."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tuimon.commands.ci_report import (
    add_reports,
    add_tolerance_from,
    band_of,
    check_paths,
    write_reports,
)
from tuimon.commands.options import (
    add_judging,
    add_store,
    check_storable,
    non_negative_float,
    reading,
    select,
)
from tuimon.sanitize import json_text

if TYPE_CHECKING:
    from pathlib import Path

    from tuimon.engine.judge.columns import MetricFilter
    from tuimon.readers import Reading


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="judge two existing step logs, or a saved pair",
        description="Compare two logs or one saved pair directory. A log is read by its "
        "content: a tuimon step log, JSON Lines with a step key, a JSON metrics document or "
        "trainer_state.json, a CSV with a step column (Lightning), TensorBoard events "
        "(a file or a run directory), or printed text (see docs/reading-logs.md).",
        epilog="exit codes: 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE, 2 bad usage",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="two log files, or one pair directory")
    p.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=None,
        help="relative; default 0 (a saved pair: its own tolerance, as replay judges it)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--save", action="store_true", help="save the comparison as a pair")
    add_tolerance_from(p)
    add_reports(p)
    add_judging(p)
    add_store(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    if args.save:
        check_storable(args)
    check_paths(args)
    band = band_of(args, tolerance_given=args.tolerance is not None)
    return _compare_paths(
        args.logs,
        tolerance=args.tolerance,
        as_json=args.json,
        save_to=args.store if args.save else None,
        save=args.save,
        reading=reading(args),
        select=select(args) if args.ignore or args.only else None,
        band=band,
        reports=args,
    )


def _compare_paths(
    paths: list[str],
    *,
    tolerance: float | None,
    as_json: bool,
    save: bool,
    save_to: str | None,
    reading: Reading | None = None,
    select: MetricFilter | None = None,
    band: dict[str, Any] | None = None,
    reports: argparse.Namespace | None = None,
) -> int:
    """The `compare` command; returns the exit code. `band`: `--tolerance-from`'s (a saved
    pair judged at its own tolerance: its own band); `reports`: --junit / --summary."""
    from tuimon.engine.analyses.compare import judge, resolve
    from tuimon.engine.analyses.compare import save as save_pair
    from tuimon.engine.judge.band import Band, saved_band
    from tuimon.engine.judge.verdict import exit_code
    from tuimon.errors import StoreError

    logs = resolve(paths, reading)  # the one loader: a pair is judged as it was (as `replay`)
    select = select if select is not None else logs.select
    own = tolerance is None  # a saved pair judged at its own tolerance: with its own band
    tolerance = logs.tolerance if tolerance is None else tolerance
    chosen = Band.from_dict(band) if band is not None else None
    if band is None and own:
        chosen = saved_band(logs.doc, tolerance)
    judged = judge(logs, tolerance, select, keep=save, band=chosen)
    if chosen is not None:
        judged.doc.more["band"] = chosen.to_dict()
    summary = judged.summary
    saved = None
    save_error: str | None = None
    if save:
        try:
            saved = save_pair(judged, save_to)
        except StoreError as exc:  # the judgement stands; the save failed: exit 3, say why
            save_error = str(exc)
    if as_json:
        out = {
            "pair": str(saved) if saved else None,
            **({"saved": saved is not None} if save else {}),
            **({"save_error": save_error} if save_error else {}),
            **summary.to_dict(),
            **({"artifacts": logs.doc.artifacts} if logs.doc.artifacts else {}),
            **({"replicas": replicas} if (replicas := logs.doc.more.get("replicas")) else {}),
        }
        sys.stdout.write(json_text(out) + "\n")
    else:
        _print_text(judged, logs.doc.artifacts, saved, save_error, logs.doc.more.get("replicas"))
    if reports is not None:
        _write_reports(reports, paths, judged, saved)
    return 3 if save_error else exit_code(summary)


def _write_reports(
    args: argparse.Namespace, paths: list[str], judged: Any, saved: Path | None
) -> None:
    """--junit / --summary (or $GITHUB_STEP_SUMMARY): one test case, the two logs or the pair."""
    from tuimon.report.ci import case_of
    from tuimon.report.wording import headline
    from tuimon.sanitize import clean

    name = " vs ".join(clean(p, 200) for p in paths)
    details = [headline(judged.summary), f"  {judged.summary.coverage_line()}"]
    if saved:
        details.append(f"pair saved in {clean(saved, None)}")
    write_reports(args, "tuimon compare", [case_of(name, judged.summary.to_dict(), details)])


def _print_text(
    judged: Any, artifacts: Any, saved: Path | None, save_error: str | None, replicas: Any = None
) -> None:
    """The verdict, coverage, each metric's largest difference, what else differs, the
    replicas inside each side (a saved pair of `--nproc` runs)."""
    from tuimon.engine.judge.artifacts import lines as artifact_lines
    from tuimon.report.wording import (
        account_lines,
        beyond_line,
        bytes_line,
        headline,
        metric_max_line,
    )
    from tuimon.sanitize import clean

    summary, doc = judged.summary, judged.doc
    print(headline(summary))
    if beyond := beyond_line(summary):
        print(beyond)
    print(f"  {summary.coverage_line()}")
    if checked := bytes_line(summary):
        print(f"  {checked}")
    for line in account_lines(summary):
        print(line)
    for name, m in summary.metric_max.items():
        print(metric_max_line(name, m))
    if doc.env_diff:
        keys = ", ".join(list(doc.env_diff)[:6])
        print(f"  environment differs in: {keys}")
    for line in artifact_lines(artifacts):
        print(f"  {clean(line, None)}")
    if replicas:  # a saved pair of --nproc runs (imported only then: the launcher's modules)
        from tuimon.engine.sources.replicas import replica_lines

        for line in replica_lines(replicas):
            print(f"  {clean(line, None)}")
    if saved:
        print(f"pair saved in {saved}")
    elif save_error:
        print(f"pair NOT saved: {save_error}")
