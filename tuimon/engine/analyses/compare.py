"""`tuimon compare`: judge two existing logs (or a saved pair) at once, optionally save a pair.

The logs are read block by block and matched on the step as they stream
(`tuimon.engine.sources.log_blocks.read_both`, each block read into columns by
`tuimon.engine.judge.block_reader`): memory holds the unmatched rows, not the logs. A log whose
steps repeat, or a saved comparison (`--save`, which writes every aligned row), goes through
`align.compare_steps` instead: the same judge, record by record. Here: the verdict of the two
sides, the lines where they part, the pair document, and its saving.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuimon.engine.judge.align import PairAligner, compare_steps
from tuimon.engine.judge.band import Band, saved_band
from tuimon.engine.judge.block_reader import SideLog
from tuimon.engine.judge.byte_rule import hold
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.judge.matcher import ColumnMatcher
from tuimon.engine.judge.verdict import Ending, Summary, hold_replicas
from tuimon.engine.sources.log_blocks import Progress, located, read_both
from tuimon.engine.sources.saved_pair import SavedPair, resolve_logs, saved_ending
from tuimon.errors import CompareError, ReplayError, StoreError
from tuimon.readers import Account, Reading, locate, no_steps
from tuimon.readers.csv_records import csv_hint
from tuimon.store import SIDES, PairDoc, RunDoc, SavedLogs
from tuimon.store.aligned import AlignedStep


def resolve(paths: list[str], reading: Reading | None) -> SavedPair:
    """A saved pair directory or two log files, opened by the one loader (`resolve_logs`);
    CompareError when they cannot be."""
    try:
        return resolve_logs(paths, reading)
    except ReplayError as exc:
        raise CompareError(str(exc)) from None


@dataclass
class Judged:
    """Two logs compared: the summary, the aligned steps (when kept), the pair document, the
    logs' raw lines (when kept)."""

    summary: Summary
    aligned: list[AlignedStep]
    doc: PairDoc
    logs: tuple[SideLog, SideLog]


def judge(
    logs: SavedLogs,
    tolerance: float,
    select: MetricFilter | None = None,
    *,
    keep: bool = False,
    band: Band | None = None,
) -> Judged:
    """Compare two logs at once; `keep` also keeps every aligned step and the raw lines;
    `band`: a band per metric judges instead of `tolerance` (`--tolerance-from`)."""
    aligner = PairAligner(tolerance, select, band)
    sides, matcher = read_both(logs, aligner, keep)
    empty = [(side, log) for side, log in zip(SIDES, sides, strict=True) if not log.steps]
    if aligner.text.compared and logs.reading.step_key is None:  # text logs: lines judged
        empty = []
    if len(empty) == 2 and logs.pair_dir is None:  # two files with no step: not logs it reads
        side, log = empty[0]
        raise CompareError(_no_steps(log, logs.reading, aligner.accounts[side]))
    aligned, aligner = _settled(logs, aligner, matcher, keep)
    ending = _ending(logs, sides, aligner)  # a run that logged no step: INCOMPLETE, as live
    summary = aligner.summary(
        complete=ending.complete, reason=ending.reason, interrupted=ending.interrupted
    )
    summary.first_divergent_lines = first_lines(logs, aligner, summary, sides)
    hold(summary, logs.a, logs.b, reading=logs.reading, select=select, devices=_devices(sides))
    hold_replicas(summary, logs.doc.more.get("replicas"))  # a saved pair of --nproc runs
    return Judged(summary, aligned, _doc(logs, sides, summary, whole=keep), sides)


def judge_pair(
    logs: SavedLogs,
    tolerance: float,
    select: MetricFilter | None = None,
    progress: Progress | None = None,
    *,
    fork: bool = True,
) -> tuple[PairAligner, tuple[SideLog, SideLog]]:
    """Both logs judged as `judge` judges them (the block readers, the worker processes, the
    prefix the logs share parsed once), for a replay that shows the verdict without reading
    a record per step: the aligner that judged every step, and each side's header, end
    record, text lines and steps counted (`SideLog`). `progress` is told after each block.
    `fork`: worker processes may read the logs (not from a thread of a process whose event
    loop handles signals: a forked worker would share its wakeup pipe).
    Two logs with no step are not refused here: the replay says so as a live pair does.
    A saved pair judged at its own tolerance is judged with its own band, if it has one."""
    aligner = PairAligner(tolerance, select, saved_band(logs.doc, tolerance))
    sides, matcher = read_both(logs, aligner, False, progress, fork=fork)
    return _settled(logs, aligner, matcher, False)[1], sides


def _settled(
    logs: SavedLogs, aligner: PairAligner, matcher: ColumnMatcher | None, keep: bool
) -> tuple[list[AlignedStep], PairAligner]:
    """The steps still held by the matcher judged; a log whose steps repeat (or a pair kept
    whole) judged again record by record, in order (its accounts and text as streamed)."""
    aligned: list[AlignedStep] = []
    if keep or (matcher is not None and matcher.repeated):  # record by record, in order
        accounts, text = aligner.accounts, aligner.text
        aligned, judged = _by_records(logs, aligner.tolerance, aligner.select, aligner.band)
        judged.accounts, judged.text = accounts, text
        return aligned, judged
    if matcher is not None:
        matcher.finish()
    return aligned, aligner


def _devices(sides: tuple[SideLog, SideLog]) -> tuple[str, str] | None:
    """The two sides' devices, as their step logs' headers name them (None when one does not)."""
    named = [str(log.header.env.get("device") or "") if log.header else "" for log in sides]
    return (named[0], named[1]) if all(named) else None


def first_lines(
    logs: SavedLogs,
    aligner: PairAligner,
    summary: Summary,
    sides: tuple[SideLog, SideLog] | None = None,
) -> dict[str, int | None] | None:
    """The line of each log where the runs part first (a text line or a step record), so a
    user opens both files there; None without a divergence. `sides`: the logs as `compare`
    streamed them (a step's line found in the block that held it)."""
    first = aligner.text.first
    metrics = summary.first_divergent_metrics
    by_text = bool(metrics) and metrics[0].startswith("text line")
    if summary.first_divergent_step is None and not by_text:
        return None
    where: dict[str, int | None] = {}
    for i, side in enumerate(SIDES):
        path = getattr(logs, side)
        log = sides[i] if sides is not None else None
        if by_text and first is not None:
            index = first.line_a if side == "a" else first.line_b
            where[side] = locate(path, logs.reading, side, text=index)
        else:
            key = aligner.tally.first_divergent or (summary.first_divergent_step, 0)
            found = located(log, key) if log is not None else None
            if found is None:
                found = locate(path, logs.reading, side, step=key[0], occurrence=key[1])
            where[side] = found
    return where


def _by_records(
    logs: SavedLogs, tolerance: float, select: MetricFilter | None, band: Band | None = None
) -> tuple[list[AlignedStep], PairAligner]:
    """The steps of both logs through the one loader (`SavedPair`), judged record by record."""
    pair = SavedPair.of(logs)
    try:
        return compare_steps(pair.steps("a"), pair.steps("b"), tolerance, select, band)
    except ReplayError as exc:
        raise CompareError(str(exc)) from None


def _no_steps(log: SideLog, reading: Reading, account: Account) -> str:
    message = no_steps(log.path, reading)
    if why := account.why(every=True):  # records skipped: why, and the flag that helps
        return f"{message}; skipped {why}"
    if log.first_text is not None and (hint := csv_hint(log.first_text, reading.step_key)):
        return f"{message}; {hint}"
    if log.first_text is not None:
        shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in log.first_text[:80])
        message += f"; {log.texts} lines, first: `{shown}`"
    return message


def _ending(logs: SavedLogs, sides: tuple[SideLog, SideLog], aligner: PairAligner) -> Ending:
    """How the pair ended (`saved_ending`), from the end records and the lines streamed."""
    by_side = dict(zip(SIDES, sides, strict=True))
    return saved_ending(
        logs,
        {side: log.end for side, log in by_side.items()},
        [side for side, log in by_side.items() if log.tuimon],
        {side: (log.steps, log.texts, log.first_text) for side, log in by_side.items()},
        aligner.text.compared,
    )


def _doc(
    logs: SavedLogs, sides: tuple[SideLog, SideLog], summary: Summary, *, whole: bool = True
) -> PairDoc:
    """The pair document of a comparison; with its summary when `whole` (a comparison to be
    saved; `save` adds it otherwise): the summary of 100,000 metrics takes seconds to write."""
    ha, hb = (log.header for log in sides)
    seed = ha.run.get("seed") if ha else None
    env_a, env_b = (h.env if h else {} for h in (ha, hb))
    hyper_a, hyper_b = (h.hyper if h else {} for h in (ha, hb))
    diff: dict[str, dict[str, list[Any]]] = {"env": {}, "hyper": {}}
    if env_a != env_b or hyper_a != hyper_b:
        diff = {"env": env_diff(env_a, env_b), "hyper": env_diff(hyper_a, hyper_b)}
    return PairDoc(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="finished" if summary.complete or summary.reason is None else "failed",
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        devices=tuple(str((h.env.get("device") if h else None) or "?") for h in (ha, hb)),  # type: ignore[arg-type]
        tolerance=summary.tolerance,
        more={
            "compared_from": [str(logs.a), str(logs.b)],
            "reading": logs.reading.to_dict(),
        },
        runs={
            side: RunDoc(
                device=(log.header.env.get("device") if log.header else None),
                command=str(log.path),
                status="finished" if log.end is None or log.end.status == "ok" else "failed",
                exit_code=None,
                steps=log.steps,
                env=log.header.env if log.header else None,
                hyper=log.header.hyper if log.header else None,
            )
            for side, log in zip(SIDES, sides, strict=True)
        },
        env_diff=diff["env"],
        hyper_diff=diff["hyper"],
        summary=summary.to_dict() if whole else {},
    )


def save(judged: Judged, save_to: str | None) -> Path:
    """Save a judged comparison as a pair in the store `save_to` names; its directory."""
    from tuimon.store import PairWriter, resolve_store

    doc = judged.doc
    if not doc.summary:
        doc.summary = judged.summary.to_dict()
    writer = PairWriter.create(
        resolve_store(save_to), seed=doc.seed, devices=doc.devices or ("?", "?"), label="compare"
    )
    for side, log in zip(SIDES, judged.logs, strict=True):
        writer.raw_bytes(side, b"".join(log.lines))  # as read: a cut last line stays cut
    for step in judged.aligned:
        writer.aligned(step.to_dict())
    try:
        return writer.finish(doc).parent
    except StoreError:
        writer.close()
        raise
