"""`tuimon explain`: name the op where a diverged pair's runs part."""

from __future__ import annotations

import argparse
import os
import shutil

from tuimon.commands.options import add_yes, confirm, int64, positive_float
from tuimon.sanitize import clean


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="name the op where a diverged pair's runs part",
        description="Re-run both sides of a saved pair with its recorded settings, trace every "
        "op of the steps where they part, and name the first op whose outputs differ (op, "
        "parameter, forward/backward, dtypes, size of the difference, line of code).",
        epilog="The commands come from pair.json: they are shown first and run only after a "
        "yes (y/N on a terminal, or --yes). exit codes: 0 an op named (or the reruns did not "
        "diverge), 3 it could not trace, 2 bad usage, an unreadable pair or no yes. Your own "
        "script needs `with tuimon.tracing.trace_step(step, model, optimizer):` around each "
        "step (docs/explain-emb-check-spread-plot.md, "
        "'`tuimon explain`: the op where two runs part').",
    )
    p.add_argument("pair", metavar="PAIR", help="a saved pair directory")
    p.add_argument("--repeats", type=int64, default=3, help="traced reruns (default 3)")
    p.add_argument(
        "--timeout", type=positive_float, default=900.0, metavar="S", help="per rerun (900)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--nproc",
        default=None,
        metavar="N[,M]",
        help="rerun each side as N ranks under torch.distributed's launcher (A,B: each its "
        "own; default: as the pair ran); rank 0 is traced, the other ranks' logs go to "
        "PAIR/explain/",
    )
    add_yes(p)
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.analyses.explain import ExplainError, run_explain
    from tuimon.engine.launch.consent import Planned, show

    def agreed(commands: list[Planned]) -> bool:
        for command in commands:  # before the reruns are announced (a pair from elsewhere)
            program = command.argv[0] if command.argv and not command.shell else None
            if program is not None and not shutil.which(program):
                where = "is not an executable file" if os.sep in program else "is not on PATH"
                raise ExplainError(
                    f"{command.who}: cannot start {clean(program, 200)!r}: it {where} here (a "
                    "pair made on another machine?); nothing was started"
                )
        return confirm("explain", show(commands), yes=args.yes)

    from tuimon.commands.pair import nproc_of

    nproc = nproc_of(args.nproc, ())
    return run_explain(
        args.pair,
        repeats=args.repeats,
        timeout=args.timeout,
        as_json=args.json,
        confirm=agreed,
        nproc=nproc,
    )
