"""Runs stored one series per metric, told by content:

- MLflow's file store: a run folder whose `metrics/` holds one file per metric (nested names as
  folders, `train/loss`), each line `timestamp value step`;
- sacred's `metrics.json`: one object per metric holding `steps`, `values`, `timestamps`.

The series are put back together step by step: the values of one step are one record; a metric
logged twice at a step is a repeat, compared in order; timestamps are clocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuimon.readers.rows_to_steps import as_int, as_number
from tuimon.steplog import UNREADABLE, Record, Step, Text, Unreadable

MAX_FILES = 10_000
"""Metric files read from one MLflow run, at most (the rest is said, never dropped silently)."""


def _records(series: dict[str, list[tuple[int, Any, Any]]]) -> list[Record]:
    """(step, value, timestamp) per metric -> a record per step and occurrence, in order."""
    rows: dict[tuple[int, int], Step] = {}
    for name, points in series.items():
        seen: dict[int, int] = {}
        for step, value, stamp in points:
            occ = seen.get(step, 0)
            seen[step] = occ + 1
            row = rows.setdefault((step, occ), Step(step, {}))
            number = as_number(value)
            if isinstance(number, Unreadable):
                rows[(step, occ)] = Step(
                    step, row.metrics, None, None, {}, row.clocks, (*row.unreadable,
                                                                   f"{name}={number}")
                )  # fmt: skip
            elif number is not None:
                row.metrics[name] = number
            if (t := as_number(stamp)) is not None and not isinstance(t, Unreadable):
                row.clocks[f"{name}.timestamp"] = t
    return [rows[k] for k in sorted(rows)]


def is_sacred(doc: Any) -> bool:
    """A sacred `metrics.json`: every value an object with `steps` and `values` lists."""
    return (
        isinstance(doc, Mapping)
        and bool(doc)
        and all(
            isinstance(v, Mapping)
            and isinstance(v.get("steps"), list)
            and isinstance(v.get("values"), list)
            for v in doc.values()
        )
    )


def read_sacred(doc: Mapping[str, Any]) -> list[Record]:
    """The records of a sacred `metrics.json` (`is_sacred`)."""
    series: dict[str, list[tuple[int, Any, Any]]] = {}
    notes: list[Record] = []
    for name, block in doc.items():
        steps, values = block["steps"], block["values"]
        stamps = block.get("timestamps")
        stamps = stamps if isinstance(stamps, list) and len(stamps) == len(values) else None
        if len(steps) != len(values):
            notes.append(Text(f"tuimon: {name}: {len(steps)} steps for {len(values)} values: "
                              "not read", UNREADABLE))  # fmt: skip
            continue
        points = []
        for i, (step, value) in enumerate(zip(steps, values, strict=True)):
            if (s := as_int(step)) is not None:
                points.append((s, value, stamps[i] if stamps else None))
        series[str(name)] = points
    return [*notes, *_records(series)]


def mlflow_metrics(path: Path) -> Path | None:
    """The `metrics` folder of an MLflow run folder (or the folder itself), else None."""
    for folder in (path / "metrics", path):
        if folder.name == "metrics" and folder.is_dir() and not folder.is_symlink():
            return folder
    return None


def read_mlflow(metrics: Path) -> list[Record]:
    """The records of an MLflow run's `metrics/` folder: each file a metric, each line
    `timestamp value step`."""
    series: dict[str, list[tuple[int, Any, Any]]] = {}
    notes: list[Record] = []
    files = sorted(p for p in metrics.rglob("*") if p.is_file() and not p.is_symlink())
    if len(files) > MAX_FILES:
        notes.append(Text(f"tuimon: {len(files) - MAX_FILES} metric files beyond the first "
                          f"{MAX_FILES} not read", UNREADABLE))  # fmt: skip
    for file in files[:MAX_FILES]:
        name = file.relative_to(metrics).as_posix()
        points = []
        with open(file, "rb") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 3 and (step := as_int(parts[2].decode())) is not None:
                    points.append((step, parts[1].decode(), parts[0].decode()))
                elif line.strip():
                    text = line.decode("utf-8", "replace").strip()[:200]
                    notes.append(Text(f"{name}: {text}", UNREADABLE))
        series[name] = points
    return [*notes, *_records(series)]
