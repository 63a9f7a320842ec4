"""`tuimon emb-check`: does a retrain reproduce a saved W_E?"""

from __future__ import annotations

import argparse

from tuimon.commands.options import int64, positive_float
from tuimon.errors import UsageError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "emb-check",
        help="does a retrain reproduce a saved W_E? (two .npy files or two folders)",
        description="Compare a saved W_E with a retrain's: two .npy files, or two folders whose "
        ".npy files are matched by the seed in their names (s0, seed0, seed_0). Per seed: "
        "shapes, bitwise equal or not, max abs / max relative difference, and the key "
        "frequencies of both. W_E may be (d_model, p+1), (d_model, p) or transposed.",
        epilog="exit codes: 0 IDENTICAL or CLOSE, 1 DIVERGED, 3 INCOMPLETE (a seed missing or "
        "unreadable), 2 bad usage",
    )
    p.add_argument("saved", metavar="SAVED", help="the saved W_E (.npy) or a folder of them")
    p.add_argument("retrain", metavar="RETRAIN", help="the retrain's W_E (.npy) or a folder")
    p.add_argument("--tolerance", type=positive_float, default=0.0, help="relative; default 0")
    p.add_argument("--top", type=int64, default=5, metavar="K", help="key frequencies (default 5)")
    p.add_argument("--p", type=int64, default=None, help="the modulus, when the shape is ambiguous")
    p.add_argument(
        "--layout",
        choices=("auto", "d_model-first", "residues-first"),
        default="auto",
        help="which axis holds d_model (default auto: see docs/explain-emb-check-spread-plot.md)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.judge.emb_check import Options, main_check

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.p is not None and args.p < 3:
        raise UsageError("--p must be at least 3")
    options = Options(tolerance=args.tolerance, top=args.top, p=args.p, layout=args.layout)
    return main_check(args.saved, args.retrain, options, as_json=args.json)
