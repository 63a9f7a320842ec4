"""`tuimon spread`: does the gap between a pair's sides matter beside the gap between seeds?"""

from __future__ import annotations

import argparse

from tuimon.commands.options import add_store, finite, positive_float


def add_options(p: argparse.ArgumentParser) -> None:
    """--metric, --threshold, --ratio (spread and plot share them)."""
    p.add_argument(
        "--metric", default="test_acc", help="the metric that 'reached' reads (default test_acc)"
    )
    p.add_argument(
        "--threshold",
        type=finite,
        default=0.99,
        help="reached: the first logged step with METRIC >= this (default 0.99)",
    )
    p.add_argument(
        "--ratio",
        type=positive_float,
        default=0.5,
        help="DIFFERENT AT RUN SCALE when a ratio reaches this (default 0.5)",
    )


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spread",
        help="is the gap between a pair's sides larger than the gap between two seeds?",
        description="Put the gap between the two sides of each pair (the device, the layout, "
        "the thread count) beside the gap between seeds on the same side, at the end of the "
        "runs: W_E's relative distance, the step a metric first reached a threshold, the "
        "key-frequency sets, the final metrics, the first divergent steps. Give saved pair "
        "directories of two or more seeds (one pair per seed, or repeats), or one sweep "
        "record (its id in --store, or the path of its .json).",
        epilog="rule: ratio = median gap between sides / median gap between seeds on the same "
        "side, per measure; SAME AT RUN SCALE when every ratio is below --ratio. exit codes: 0 "
        "SAME AT RUN SCALE, 1 DIFFERENT AT RUN SCALE, 3 INCOMPLETE (fewer than 2 seeds, a side "
        "cut short, no W_E), 2 bad input",
    )
    p.add_argument("pairs", nargs="+", metavar="PAIR", help="pair directories, or one sweep")
    add_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--check-seeds",
        action="store_true",
        help="exit 1 when runs of different seeds gave the same log (the seed is not applied); "
        "without it the report only says so",
    )
    add_store(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.analyses.pair_runs import load_pair, pair_inputs
    from tuimon.engine.analyses.seed_gaps import Options, judge
    from tuimon.report.seed_gaps_text import as_dict, text
    from tuimon.sanitize import json_text
    from tuimon.store import resolve_store

    inputs, missing = pair_inputs(args.pairs, resolve_store(args.store))
    pairs = [load_pair(path, name) for path, name in inputs]
    options = Options(metric=args.metric, threshold=args.threshold, limit=args.ratio,
                      check_seeds=args.check_seeds)  # fmt: skip
    result = judge(pairs, options, missing)
    if args.json:
        print(json_text(as_dict(result), indent=True))
    else:
        print(text(result))
    return result.exit_code
