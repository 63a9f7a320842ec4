"""`tuimon compare`: judge two existing logs (or a saved pair) at once, optionally save a pair."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from tuimon.align import AlignedStep, Summary, compare_steps
from tuimon.headless import exit_code
from tuimon.readers import Reading, no_steps
from tuimon.replay import ReplayError, SavedLogs, read_lines, resolve_logs
from tuimon.session import env_diff
from tuimon.steplog import End, Header, Step, parse_line
from tuimon.store import PairWriter, StoreError, resolve_store


class CompareError(Exception):
    """Logs that cannot be compared (one line for the user)."""


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
    """Two logs compared: the summary, the aligned steps, pair.json fields, the raw lines."""

    summary: Summary
    aligned: list[AlignedStep]
    meta: dict[str, Any]
    lines: tuple[list[bytes], list[bytes]]


def judge(logs: SavedLogs, tolerance: float) -> Judged:
    """Compare two logs at once."""
    la, sa, ha, ea = _read(logs.a, logs.reading, "a")
    lb, sb, hb, eb = _read(logs.b, logs.reading, "b")
    aligned, aligner = compare_steps(sa, sb, tolerance)
    reason = None
    for side, end in (("a", ea), ("b", eb)):
        if end is not None and end.status != "ok":
            reason = f"run {side} ended with status {end.status}"
    runs = logs.meta.get("runs") if isinstance(logs.meta.get("runs"), dict) else {}
    for side in ("a", "b"):
        run = runs.get(side) if isinstance(runs.get(side), dict) else {}
        if run.get("status") not in (None, "finished"):
            reason = reason or f"run {side} {run.get('status')}"
    summary = aligner.summary(complete=reason is None, reason=reason)
    meta = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": "finished" if reason is None else "failed",
        "seed": (ha.run.get("seed") if ha else None),
        "devices": [str((h.env.get("device") if h else None) or "?") for h in (ha, hb)],
        "tolerance": tolerance,
        "compared_from": [str(logs.a), str(logs.b)],
        "reading": logs.reading.to_dict(),
        "runs": {
            side: {
                "device": (h.env.get("device") if h else None),
                "command": str(path),
                "status": "finished" if e is None or e.status == "ok" else "failed",
                "exit_code": None,
                "steps": len(s),
                "env": h.env if h else None,
                "hyper": h.hyper if h else None,
            }
            for side, h, e, s, path in (("a", ha, ea, sa, logs.a), ("b", hb, eb, sb, logs.b))
        },
        "env_diff": env_diff(ha.env if ha else {}, hb.env if hb else {}),
        "hyper_diff": env_diff(ha.hyper if ha else {}, hb.hyper if hb else {}),
        "summary": summary.to_dict(),
        "files": {"a": "a.jsonl", "b": "b.jsonl", "aligned": "aligned.jsonl"},
    }
    return Judged(summary, aligned, meta, (la, lb))


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
    from tuimon.cli import UsageError

    try:
        judged = judge(resolve_logs(paths, reading), tolerance)
    except (ReplayError, CompareError) as exc:
        raise UsageError(str(exc)) from None
    summary, meta = judged.summary, judged.meta
    saved = None
    if save:
        try:
            seed = meta["seed"] if isinstance(meta["seed"], int) else None
            writer = PairWriter.create(
                resolve_store(save_to),
                seed=seed,
                devices=tuple(meta["devices"]),  # type: ignore[arg-type]
                label="compare",
            )
            writer.raw("a", judged.lines[0])
            writer.raw("b", judged.lines[1])
            saved = writer.finish(meta, (s.to_dict() for s in judged.aligned)).parent
        except StoreError as exc:
            raise UsageError(str(exc)) from None
    if as_json:
        out = {"pair": str(saved) if saved else None, **summary.to_dict()}
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
    else:
        print(summary.headline())
        for name, m in summary.metric_max.items():
            print(f"  {name:<16} max rel diff {m['rel']:.3g} at step {m['step']}")
        if meta["env_diff"]:
            keys = ", ".join(list(meta["env_diff"])[:6])
            print(f"  environment differs in: {keys}")
        if saved:
            print(f"pair saved in {saved}")
    return exit_code(summary)
