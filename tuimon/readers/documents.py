"""Whole-run JSON documents -> records: settings as the header, then one record per step.

- Hugging Face `trainer_state.json`: `log_history` entries (train and eval rows of one step
  merged); the trainer's settings (`logging_steps`, `train_batch_size` ...) as the header.
- Any other object: a settings block (`hyper`, `config`, `args` ...) and the top-level scalars
  (`n_train`, `n_test`, `time_only` ...) as the header; the steps as a list of per-step objects,
  or as per-metric arrays beside a step array (`{"steps": [0, 10], "train_loss": [..]}`), else
  by their position (per-epoch lists); arrays may sit in a `metrics` / `history` block, or in
  any other block, named by it (`{"training": {"loss": [..]}}` -> `training/loss`). The
  lab's metrics files are of this kind.
- A top-level list of per-step objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from tuimon.readers.account import NOTE
from tuimon.readers.rows_to_steps import (
    LEVELS_NOTE,
    STEP_KEYS,
    Levels,
    as_float,
    as_int,
    merge,
    row_step,
)
from tuimon.steplog import NO_STEP_KEY, UNREADABLE, Header, Record, Step, Text

SETTINGS = ("hyper", "hyperparameters", "hparams", "config", "args", "settings", "params")
ENVS = ("env", "environment", "system", "fingerprint", "versions")
SERIES = ("metrics", "history", "log", "logs", "series", "curves", "results", "data", "log_history")
ENV_SCALARS = frozenset(
    {"device", "device_name", "torch", "torch_version", "python", "platform", "threads",
     "deterministic", "dtype", "loss_dtype", "cuda", "cudnn", "hostname", "machine"}
)  # fmt: skip
RESULTS = frozenset(
    {"best_metric", "best_model_checkpoint", "best_global_step", "global_step", "epoch",
     "total_flos", "trial_name", "trial_params"}
)  # fmt: skip
"""Top-level fields of a trainer state that are outcomes, not settings."""
STEP_ARRAYS = frozenset({*STEP_KEYS, "steps", "iterations", "iters", "epochs", "global_steps"})


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _header(doc: Mapping[str, Any], source: str, skip: frozenset[str]) -> Header:
    hyper: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for key in SETTINGS:
        if isinstance(doc.get(key), Mapping):
            hyper.update(doc[key])
    for key in ENVS:
        if isinstance(doc.get(key), Mapping):
            env.update(doc[key])
    for key, value in doc.items():
        if key in skip or not _scalar(value):
            continue
        (env if key in ENV_SCALARS else hyper).setdefault(key, value)
    return Header(run={"source": source}, hyper=hyper, env=env, format=source)


def _rows(items: list[Any], key: str | None = None) -> list[Record]:
    """The steps of a list of rows; a row with numbers but no step is kept as skipped."""
    out: list[Record] = []
    levels = Levels()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if (step := row_step(item, key=key, levels=levels)) is not None:
            out.append(step)
        elif any(as_float(v) is not None for v in item.values()):
            out.append(Text(_shown(item), NO_STEP_KEY))
    return [Text(NOTE + LEVELS_NOTE), *out] if levels.on else out


def _shown(item: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in list(item.items())[:8])[:300]


def _is_step_array(name: str, values: list[Any]) -> bool:
    lower = name.lower()
    named = lower in STEP_ARRAYS or lower.endswith(("_step", "_steps", "_iters", "_epochs"))
    return named and bool(values) and all(as_int(v) is not None for v in values)


def _is_series(values: list[Any]) -> bool:
    return bool(values) and all(v is None or as_float(v) is not None for v in values)


def _prefix(name: str) -> str:
    return name.lower().split("_")[0]


def _arrays(block: Mapping[str, Any], prefix: str = "") -> tuple[list[Record], list[str]]:
    """Steps from per-metric arrays beside step arrays, named `prefix` + the array's name;
    notes on arrays that could not be read."""
    lists = {k: v for k, v in block.items() if isinstance(v, list)}
    steps = {k: v for k, v in lists.items() if _is_step_array(k, v)}
    series = {k: v for k, v in lists.items() if k not in steps and _is_series(v)}
    notes: list[str] = []
    if not steps:
        if not series:
            return [], notes
        lengths = {len(v) for v in series.values()}
        if len(lengths) != 1:
            return [], [f"per-metric arrays of lengths {sorted(lengths)} and no step array"]
        n = lengths.pop()
        steps = {"(position)": list(range(n))}
        where = f"{prefix}*: " if prefix else ""
        notes.append(f"{where}no step array: array positions 0..n-1 taken as the steps")
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for name, values in series.items():
        fits = [k for k, v in steps.items() if len(v) == len(values)]
        if not fits:
            notes.append(
                f"not read: {prefix}{name} ({len(values)} values, no step array of that length)"
            )
            continue
        key = next((k for k in fits if _prefix(k) == _prefix(name)), None)
        fits.sort(key=lambda k: (k.lower() not in STEP_ARRAYS, k.lower().startswith("epoch")))
        key = key or fits[0]
        for i, (step, value) in enumerate(zip(steps[key], values, strict=True)):
            if value is not None:
                rows.setdefault((key, i), {"step": as_int(step)})[prefix + name] = value
    order = sorted(rows, key=lambda ki: (as_int(steps[ki[0]][ki[1]]), ki[0] != "steps", ki))
    out: list[Record] = []
    for k in order:
        if (step := row_step(rows[k])) is not None:
            out.append(step)
    return out, notes


def _blocks(
    doc: Mapping[str, Any], prefix: str = "", depth: int = 0
) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects of a document that may hold per-metric arrays, with the prefix of their
    names: the document and its `SERIES` blocks as they are (`metrics`, `history`), any
    other object but settings by its key (`{"training": {"loss": [..]}, "validation":
    {"loss": [..]}}` -> `training/loss`, `validation/loss`), two levels down at most."""
    found = [(prefix, doc)]
    if depth >= 2:
        return found
    for key, value in doc.items():
        if not isinstance(value, Mapping) or key in SETTINGS or key in ENVS:
            continue
        inner = prefix if key in SERIES and not depth else f"{prefix}{key}/"
        found += _blocks(value, inner, depth + 1)
    return found


def read_document(doc: Any, key: str | None = None) -> list[Record]:
    """The records of a whole-run JSON document (empty when it holds no steps); `key` names
    the step key of its rows (`--step-key`)."""
    if isinstance(doc, list):
        return merge(_rows(doc, key))
    if not isinstance(doc, Mapping):
        return []
    if isinstance(doc.get("log_history"), list):
        header = _header(doc, "trainer_state.json", RESULTS | {"log_history"})
        return [header, *merge(_rows(doc["log_history"], key))]
    header = _header(doc, "json document", frozenset())
    listed = [*SERIES, *(k for k, v in doc.items() if k not in SERIES and isinstance(v, list))]
    for name in listed:  # rows under a known key first, then under any key (`iterations`)
        if isinstance(doc.get(name), list):
            steps = _rows(doc[name], key)
            if any(isinstance(r, Step) for r in steps):
                return [header, *merge(steps)]
    records: list[Record] = []
    notes: list[str] = []
    for prefix, block in _blocks(doc):
        found, said = _arrays(block, prefix)
        records += found
        notes += said
    if not any(isinstance(r, Step) for r in records):
        return []
    return [header, *merge(records), *(Text(f"tuimon: {note}") for note in notes)]


_CLOSE = {ord("{"): b"}", ord("["): b"]"}
MAX_TRIES = 64
"""Row ends tried (from the last) when a document is cut short."""


_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
"""A JSON string (skipped whole) or a bracket."""


def _row_ends(body: bytes) -> list[tuple[int, bytes]]:
    """Where each object closes (outside strings), with the brackets still open there."""
    ends: list[tuple[int, bytes]] = []
    stack = bytearray()
    for m in _TOKENS.finditer(body):
        c = body[m.start()]
        if c in _CLOSE:
            stack.append(c)
        elif c in (0x7D, 0x5D) and stack:
            stack.pop()
            if c == 0x7D:
                ends.append((m.end(), bytes(stack)))
    return ends


def cut_document(body: bytes) -> tuple[Any, Text] | None:
    """A JSON document cut short (or damaged near its end), read up to its last whole row:
    the document, and a note with the byte offset where reading stopped; None when no cut
    point gives a document (it is not one)."""
    if len(body) > 1 << 28:
        return None
    ends = _row_ends(body)
    if any(not open_ for _, open_ in ends):
        return None  # a whole value closes: lines of JSON, or damage elsewhere than the end
    for end, open_ in reversed(ends[-MAX_TRIES:]):
        closers = b"".join(_CLOSE[c] for c in reversed(open_))
        try:
            doc = orjson.loads(body[:end] + closers)
        except orjson.JSONDecodeError:
            continue
        return doc, Text(
            f"tuimon: the JSON document is cut short or damaged: read up to byte {end} "
            f"of {len(body)}; the rest is not read",
            UNREADABLE,
        )
    return None
