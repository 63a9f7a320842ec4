"""`tuimon sweep`: a pair per seed, N at a time, shown as one table; `--resume`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from tuimon.commands.ci_report import asked, write_reports
from tuimon.commands.options import add_store, add_yes, confirm, int64, terminal
from tuimon.commands.pair import add_pair_options, check_log_file, pair_plan
from tuimon.errors import UsageError

if TYPE_CHECKING:
    from tuimon.engine.runs.sweep import Sweep


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a pair for each seed (and repeat), N at a time",
        description="Run one pair per seed (times --repeat), --jobs at a time, each saved as a "
        "pair tagged with the sweep, and show them as one table. Takes the pair options; "
        "--launch 'srun ...' with --jobs 32 lets SLURM do the scheduling.",
        epilog="exit codes: 0 every pair IDENTICAL or CLOSE, 1 any DIVERGED, 3 any INCOMPLETE "
        "(or never ran), 2 bad usage, an unreadable record, or --resume not confirmed. "
        "Example: tuimon sweep --seeds 0-9 --devices cpu,cpu "
        "--threads 1 --jobs 2 --headless",
    )
    p.add_argument("--seeds", default=None, help="seeds: 0-9, 0,3,7 or 0-3,7")
    p.add_argument(
        "--resume",
        default=None,
        metavar="SWEEP",
        help="run the pairs of a saved sweep that never ran or were interrupted (also those "
        "whose monitor was killed); the record's commands are shown first and run only after "
        "a yes (y/N, or --yes)",
    )
    p.add_argument(
        "--jobs",
        type=int64,
        default=None,
        metavar="N",
        help="pairs at once (default: as many as the cores hold without two CPU runs sharing "
        "a core; 1 for GPU or launched pairs)",
    )
    p.add_argument(
        "--submit",
        default=None,
        metavar="PREFIX",
        help="submit each run with this prefix (e.g. 'sbatch -p gpu --gres=gpu:1'; {cmd} "
        "stands for the run's script) and exit: the runs write their logs into their pair "
        "directories; --attach follows them later",
    )
    p.add_argument(
        "--attach",
        default=None,
        metavar="RECORD",
        help="follow and judge the pairs of a submitted sweep (its id or record path); the "
        "record's commands are never run; ends per pair when both runs have ended (or stayed "
        "idle --stall-timeout s)",
    )
    p.add_argument(
        "--no-fail-fast",
        action="store_true",
        help="start every pair even when the first fails before its first step (by default "
        "the first pair runs alone until it logs a step, at most 10 s, and a failure there "
        "stops the sweep)",
    )
    p.add_argument(
        "--against",
        default=None,
        metavar="SWEEP_OR_DIR",
        help="retrain every seed of a saved sweep (its id or record; --side of each pair, "
        "default a) or every log in a folder (the seed from its header or name; a .npy with "
        "the seed in its name is its W_E), each as `pair --against` that seed's saved run",
    )
    p.add_argument(
        "--side",
        choices=("a", "b"),
        default=None,
        help="with --against SWEEP: which side of its pairs (default a)",
    )
    p.add_argument(
        "--check-seeds",
        action="store_true",
        help="fail (exit 1) when runs of different seeds give the same log (the seed is not "
        "applied); without it the sweep only says so",
    )
    add_pair_options(p)
    add_store(p)
    add_yes(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND TEMPLATE ...")
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from tuimon.engine.runs.sweep import (
        Sweep,
        SweepError,
        default_jobs,
        oversubscribed,
        parse_seeds,
    )
    from tuimon.store import resolve_store

    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.json and not args.headless:
        raise UsageError("--json needs --headless")
    if args.attach:
        return _attach(args)
    try:
        if args.resume:
            if args.seeds or args.against:
                raise UsageError("--resume takes the sweep's own seeds: leave out --seeds")
            sweep = Sweep.load(resolve_store(args.store), args.resume, args.jobs)
            if sweep.against_source:
                raise UsageError(
                    f"sweep {sweep.id} ran against saved runs: run `tuimon sweep --against "
                    f"{sweep.against_source}` again (--resume does not take it up)"
                )
            _refuse_submitted(sweep)
            if sweep.running_elsewhere:
                raise UsageError(
                    f"sweep {sweep.id} is still running in another tuimon "
                    f"({sweep.running_elsewhere}): nothing to resume"
                )
            if not sweep.todo():
                raise UsageError(f"sweep {sweep.id} has nothing left to run")
            sweep.claim()
        else:
            if not args.seeds and not args.against:
                raise UsageError("sweep needs --seeds (e.g. 0-9 or 0,3,7) or --resume SWEEP")
            seeds = parse_seeds(args.seeds) if args.seeds else []
            _check_submit(args)
            saved = _against(args, seeds) if args.against else None
            plan, store = pair_plan(args, None, many=True)
            check_log_file(args, plan, many=True)
            assert store is not None
            jobs = args.jobs or default_jobs(plan)
            if saved is not None:
                seeds = saved.seeds(seeds)
            sweep = Sweep.create(store, plan, seeds, args.repeat, jobs)
            sweep.against = saved
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    sweep.fail_fast = not args.no_fail_fast
    sweep.check_seeds = sweep.check_seeds or args.check_seeds
    if args.submit:
        return _submit(args, sweep)
    if oversubscribed(sweep.plan, sweep.at_once):
        print(
            f"tuimon: warning: {sweep.at_once} pair(s) at once ask for more CPU threads than "
            f"there are cores ({os.cpu_count()}): runs compete, timing changes, and so may "
            "results (see --threads, --jobs)",
            file=sys.stderr,
        )
    headless = args.headless or asked(args) or not terminal("sweep")
    if args.resume and (headless or args.yes):
        _consent(sweep, yes=args.yes)
    if headless:
        from tuimon.report.sweep import run_sweep_headless

        code = run_sweep_headless(sweep, as_json=args.json)
        _write_reports(args, sweep)
        return code
    from tuimon.ui.app import run_app

    ask = sweep.consent_lines() if args.resume and not args.yes else None
    return run_app(store=sweep.store, sweep=sweep, title=f"tuimon sweep · {sweep.id}", confirm=ask)


def _write_reports(args: argparse.Namespace, sweep: Sweep) -> None:
    """--junit / --summary (or $GITHUB_STEP_SUMMARY): a test case per seed and repeat."""
    from tuimon.report.ci import case_of
    from tuimon.sanitize import clean
    from tuimon.store import StoreError, read_pair

    cases = []
    many = any(j.repeat > 1 for j in sweep.jobs)
    for job in sweep.jobs:
        summary, details, why = None, [], f"the pair {job.status}"
        if job.pair:
            details.append(f"pair {clean(sweep.store / job.pair, None)}")
            try:
                found = read_pair(sweep.store / job.pair).get("summary")
                summary = found if isinstance(found, dict) and job.verdict else None
            except StoreError as exc:
                why = str(exc)
        name = f"seed {job.seed}" + (f" · repeat {job.repeat}" if many else "")
        cases.append(case_of(name, summary, details, why=why))
    write_reports(args, f"tuimon sweep {sweep.id}", cases)


def _against(args: argparse.Namespace, seeds: list[int]):  # type: ignore[no-untyped-def]
    """`sweep --against`: each seed's saved run; the settings the retrains take from them."""
    from tuimon.commands.options import reading, say
    from tuimon.commands.pair import take_saved_settings
    from tuimon.engine.runs.against_sweep import resolve_saved_sweep
    from tuimon.errors import ReplayError
    from tuimon.store import resolve_store

    if args.submit:
        raise UsageError("--against runs the retrains here: not with --submit")
    if args.side and not args.against:
        raise UsageError("--side goes with --against SWEEP")
    store = resolve_store(args.store)
    try:
        saved = resolve_saved_sweep(args.against, args.side, reading(args), store, say)
    except ReplayError as exc:
        raise UsageError(f"--against: {exc}") from None
    saved.seeds(seeds)  # a seed asked that was not saved: one line, before anything runs
    template = args.command[1:] if args.command[:1] == ["--"] else args.command
    if taken := take_saved_settings(args, saved.settings(), reference=not template):
        say(f"as the saved runs: {' '.join(taken)}")
    return saved


def _consent(sweep, *, yes: bool) -> None:  # type: ignore[no-untyped-def]
    """The commands of a resumed sweep's record, shown; a yes, or UsageError (nothing runs)."""
    try:
        confirm(f"sweep --resume {sweep.id}", sweep.consent_lines(), yes=yes)
    except UsageError:
        sweep.release()
        raise


def _refuse_submitted(sweep: Sweep) -> None:
    """--resume never re-runs a submitted sweep's commands: --attach follows it."""
    if sweep.submit:
        raise UsageError(
            f"sweep {sweep.id} was submitted: `tuimon sweep --attach {sweep.id}` "
            "follows it (a new --submit sweep submits seeds again)"
        )


def _check_submit(args: argparse.Namespace) -> None:
    if not args.submit:
        return
    if args.launch or args.launch_a or args.launch_b:
        raise UsageError("--submit and --launch: give the scheduler's options in --submit")
    if args.log_file:
        raise UsageError("--submit writes each run's stdout into its pair directory: no --log-file")


def _submit(args: argparse.Namespace, sweep: Sweep) -> int:
    """Submit the pairs, say where they go and how to follow them."""
    from tuimon.engine.runs.plan import parse_launcher
    from tuimon.engine.runs.submit import attach_line, submit_sweep

    try:
        prefix = parse_launcher(args.submit)
    except ValueError as exc:
        raise UsageError(f"--submit: {exc} in {args.submit!r}") from None
    if not prefix:
        raise UsageError("--submit needs a prefix, e.g. 'sbatch -p gpu'")
    code = submit_sweep(sweep, prefix, lambda text: print(text, file=sys.stderr))
    if sweep.failing.reason:
        print(f"sweep stopped: {sweep.failing.reason}", file=sys.stderr)
    if args.json:
        from tuimon.sanitize import json_text

        print(json_text(sweep.to_dict()))
        return code
    if line := attach_line(sweep):
        print(line)
    print(f"sweep record: {sweep.path}")
    return code


def _attach(args: argparse.Namespace) -> int:
    """Follow a submitted sweep's pairs (never runs the record's commands)."""
    from tuimon.engine.runs.submit import attach
    from tuimon.engine.runs.sweep import Sweep, SweepError
    from tuimon.store import resolve_store

    if args.seeds or args.resume or args.submit:
        raise UsageError("--attach follows a submitted sweep: leave out --seeds/--resume/--submit")
    try:
        sweep = Sweep.load(resolve_store(args.store), args.attach)
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    if not sweep.submit:
        raise UsageError(f"sweep {sweep.id} was not submitted (--submit): nothing to attach to")
    if not any(j.status == "submitted" for j in sweep.jobs):
        raise UsageError(f"sweep {sweep.id} has no submitted pair left to judge")
    attach(sweep, args.stall_timeout)
    if args.headless or asked(args) or not terminal("sweep"):
        from tuimon.report.sweep import run_sweep_headless

        code = run_sweep_headless(sweep, as_json=args.json)
        _write_reports(args, sweep)
        return code
    from tuimon.ui.app import run_app

    return run_app(store=sweep.store, sweep=sweep, title=f"tuimon sweep · {sweep.id} (attached)")
