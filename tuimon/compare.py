"""`tuimon compare`: judge two existing logs (or a saved pair) at once, optionally save a pair."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import orjson

from tuimon.align import AlignedStep, Summary, compare_steps
from tuimon.errors import CompareError, ReplayError, StoreError
from tuimon.headless import exit_code
from tuimon.readers import Reading, no_steps
from tuimon.replay import read_lines, resolve_logs
from tuimon.session import env_diff
from tuimon.steplog import End, Header, Step, parse_line
from tuimon.store import SIDES, PairDoc, PairWriter, RunDoc, SavedLogs, resolve_store
from tuimon.wording import headline, metric_max_line


def _read(
    path: Path, reading: Reading | None = None, side: str = "a"
) -> tuple[list[bytes], list[Step], Header | None, End | None]:
    try:
        lines = read_lines(path, reading, side)
    except ReplayError as exc:
        raise CompareError(str(exc)) from None
    records = [parse_line(line) for line in lines]
    steps = [r for r in records if isinstance(r, Step)]
    if not steps:
        raise CompareError(no_steps(path, reading))
    header = next((r for r in records if isinstance(r, Header)), None)
    end = next((r for r in reversed(records) if isinstance(r, End)), None)
    return lines, steps, header, end


@dataclass
class Judged:
    """Two logs compared: the summary, the aligned steps, the pair document, the raw lines."""

    summary: Summary
    aligned: list[AlignedStep]
    doc: PairDoc
    lines: tuple[list[bytes], list[bytes]]


def judge(logs: SavedLogs, tolerance: float) -> Judged:
    """Compare two logs at once."""
    la, sa, ha, ea = _read(logs.a, logs.reading, "a")
    lb, sb, hb, eb = _read(logs.b, logs.reading, "b")
    aligned, aligner = compare_steps(sa, sb, tolerance)
    reason = None
    for side, end in zip(SIDES, (ea, eb), strict=True):
        if end is not None and end.status != "ok":
            reason = f"run {side} ended with status {end.status}"
    for side in SIDES:
        status = logs.doc.run(side).status
        if status not in (None, "finished"):
            reason = reason or f"run {side} {status}"
    summary = aligner.summary(complete=reason is None, reason=reason)
    seed = ha.run.get("seed") if ha else None
    device_a, device_b = (str((h.env.get("device") if h else None) or "?") for h in (ha, hb))
    doc = PairDoc(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="finished" if reason is None else "failed",
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        devices=(device_a, device_b),
        tolerance=tolerance,
        more={
            "compared_from": [str(logs.a), str(logs.b)],
            "reading": logs.reading.to_dict(),
        },
        runs={
            side: RunDoc(
                device=(h.env.get("device") if h else None),
                command=str(path),
                status="finished" if e is None or e.status == "ok" else "failed",
                exit_code=None,
                steps=len(s),
                env=h.env if h else None,
                hyper=h.hyper if h else None,
            )
            for side, h, e, s, path in (("a", ha, ea, sa, logs.a), ("b", hb, eb, sb, logs.b))
        },
        env_diff=env_diff(ha.env if ha else {}, hb.env if hb else {}),
        hyper_diff=env_diff(ha.hyper if ha else {}, hb.hyper if hb else {}),
        summary=summary.to_dict(),
    )
    return Judged(summary, aligned, doc, (la, lb))


def compare_paths(
    paths: list[str],
    *,
    tolerance: float,
    as_json: bool,
    save: bool,
    save_to: str | None,
    reading: Reading | None = None,
) -> int:
    """The `compare` command; returns the exit code."""
    judged = judge(resolve_logs(paths, reading), tolerance)
    summary, doc = judged.summary, judged.doc
    saved = None
    save_error: str | None = None
    if save:
        writer = PairWriter.create(
            resolve_store(save_to),
            seed=doc.seed,
            devices=doc.devices or ("?", "?"),
            label="compare",
        )
        for side, lines in zip(SIDES, judged.lines, strict=True):
            writer.raw(side, lines)
        for step in judged.aligned:
            writer.aligned(step.to_dict())
        try:
            saved = writer.finish(doc).parent
        except StoreError as exc:  # the judgement stands; the save failed: exit 3, say why
            save_error = str(exc)
            writer.close()
    if as_json:
        out = {
            "pair": str(saved) if saved else None,
            **({"saved": saved is not None} if save else {}),
            **({"save_error": save_error} if save_error else {}),
            **summary.to_dict(),
        }
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
    else:
        print(headline(summary))
        for name, m in summary.metric_max.items():
            print(metric_max_line(name, m))
        if doc.env_diff:
            keys = ", ".join(list(doc.env_diff)[:6])
            print(f"  environment differs in: {keys}")
        if saved:
            print(f"pair saved in {saved}")
        elif save_error:
            print(f"pair NOT saved: {save_error}")
    return 3 if save_error else exit_code(summary)
