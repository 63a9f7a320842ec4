"""`tuimon plot`: a figure of a pair, or of pairs of several seeds (a sweep, spread)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuimon.commands import spread
from tuimon.commands.options import add_store


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="a figure to share: a pair, or pairs of several seeds (SVG, PNG or PDF)",
        description="Draw one saved pair (both sides' loss and accuracy, the divergence per "
        "step on a log scale with the first divergent step marked, W_E's energy per "
        "frequency), or several pairs / one sweep record as `tuimon spread` sees them (the "
        "first divergent step per pair, the gaps between sides beside the gaps between seeds, "
        "the reach curves, the key-frequency sets). Needs matplotlib: "
        'pip install matplotlib (in the tuimon checkout: pip install -e ".[plot]"). '
        "Readable in black and white.",
        epilog="exit codes: 0 written, 2 bad input or no matplotlib",
    )
    p.add_argument("pairs", nargs="+", metavar="PAIR", help="a pair directory, several, or a sweep")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.svg, .png or .pdf")
    spread.add_options(p)
    add_store(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.analyses.pair_runs import load_pair, pair_inputs
    from tuimon.engine.analyses.seed_gaps import Options, judge
    from tuimon.report.figure import check_output, pair_figure, save
    from tuimon.report.seed_gaps_figure import spread_figure
    from tuimon.store import resolve_store

    out = Path(args.output)
    check_output(out)
    inputs, missing = pair_inputs(args.pairs, resolve_store(args.store))
    pairs = [load_pair(path, name) for path, name in inputs]
    if len(args.pairs) == 1 and Path(args.pairs[0]).is_dir():
        fig = pair_figure(pairs[0])
    else:
        options = Options(metric=args.metric, threshold=args.threshold, limit=args.ratio)
        fig = spread_figure(judge(pairs, options, missing))
    save(fig, out)
    print(f"tuimon: figure written to {out}")
    return 0
