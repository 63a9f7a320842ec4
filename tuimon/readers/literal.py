"""Python dicts a script prints -> rows.

`print(logs)` writes a dict as Python shows it, and the Hugging Face Trainer does exactly that
on stdout at every logging step: ``{'loss': 0.6931, 'grad_norm': 1.23, 'learning_rate': 5e-05,
'epoch': 0.01}``, then ``{'eval_loss': 0.69, ..., 'epoch': 1.0}`` and a last
``{'train_runtime': 12.3, ..., 'train_loss': 0.65}``. Such a line is read with
`ast.literal_eval` (literals only: nothing in it runs). Rows with a step key use it; rows
without one (the Trainer's) are numbered in the order they were printed, 0, 1, 2 ..., which is
the same on both sides of a pair that logs the same things.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any

MAX_CHARS = 20_000
"""A longer line is not read as a dict (it stays text)."""
_NONFINITE = re.compile(r"(?<=[\s:,\[(])(-?)(nan|inf)(?=\s*[,}\])])")
"""`nan`, `inf`, `-inf` as Python prints them: not literals, so they are spelled as the
strings a step log uses before `literal_eval`."""


_HUGE = re.compile(
    r"'[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\""  # a string: kept as it is
    r"|(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d{3,}|(?<![\w.])-?\d{20,}"
)
"""A number that may not fit a float64 (`1e400`) or an int64 (20 digits or more)."""


def _quoted(match: re.Match[str]) -> str:
    """A number that does not fit as the string of its text (read as unreadable, never as inf
    or a huge integer); one that fits as it was."""
    text = match[0]
    if text[0] in "'\"":
        return text
    if "e" in text.lower():
        return f"'{text}'" if math.isinf(float(text)) else text
    return f"'{text}'"


def _spelled(match: re.Match[str]) -> str:
    if match[2] == "nan":
        return '"NaN"'
    return '"-Infinity"' if match[1] else '"Infinity"'


def literal_row(text: str) -> dict[str, Any] | None:
    """The dict a printed line shows (`{'loss': 0.69, ...}`), or None when it is not one."""
    s = text.strip()
    if len(s) > MAX_CHARS or not (s.startswith("{'") and s.endswith("}")):
        return None
    if "nan" in s or "inf" in s:
        s = _NONFINITE.sub(_spelled, s)
    s = _HUGE.sub(_quoted, s)
    try:
        with warnings.catch_warnings():  # `'\d'` in a printed string: no warning on the screen
            warnings.simplefilter("ignore")
            value = ast.literal_eval(s)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return value
