"""A folder of JSON files, one per epoch or step (AllenNLP's `metrics_epoch_3.json`, a
trainer's `eval_step_500.json`): each file a row, stepped by its own step key or, without one,
by the number in its name; a file that is not a JSON object is said, never dropped."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from tuimon.readers.rows_to_steps import merge, row_step, step_key
from tuimon.steplog import UNREADABLE, Record, Step, Text

MAX_FILE = 16 << 20
"""Bytes of one file read at most (a larger one is said, not read)."""
_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def json_files(folder: Path) -> list[tuple[int, Path]]:
    """The JSON files of a folder with a number in their name, by that number (none when the
    folder holds fewer than two)."""
    found = []
    for path in folder.iterdir():
        m = _NUMBER.search(path.stem)
        if path.suffix == ".json" and m and path.is_file() and not path.is_symlink():
            found.append((int(m.group(1)), path))
    return sorted(found) if len(found) >= 2 else []


def read_folder(files: list[tuple[int, Path]]) -> list[Record]:
    """The rows of the files (`json_files`), with a note that says how they are stepped."""
    note = f"tuimon: a folder of {len(files)} JSON files, one row each, stepped by their step key"
    out: list[Record] = [Text(note + ", else the number in their name")]
    for number, path in files:
        if path.stat().st_size > MAX_FILE:
            out.append(
                Text(f"[tuimon: {path.name}: over {MAX_FILE >> 20} MiB, not read]", UNREADABLE)
            )
            continue
        try:
            doc = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            out.append(Text(f"[tuimon: {path.name}: not JSON, not read]", UNREADABLE))
            continue
        if not isinstance(doc, dict):
            out.append(Text(f"[tuimon: {path.name}: not a JSON object, not read]", UNREADABLE))
            continue
        key = step_key(doc)
        step = row_step(doc if key else {"file_number": number, **doc}, key=key or "file_number")
        out.append(step if step is not None else Text(f"{path.name}: no step", UNREADABLE))
    return [out[0], *merge([r for r in out[1:] if isinstance(r, (Step, Text))])]
