"""The precision a log was written with: "bitwise" only for values that round-trip a float64.

Each number keeps the text it was written with. A metric is written at full precision when one
of its values has 15 or more significant digits (a float's shortest repr, or 17 digits) or is
written in hex; it was rounded when a value shows a zero no shortest repr writes (`4.4660`), or
when three or more of its values are short decimals that no float64 holds exactly (`4.4664`,
`4.2137`, `3.9981`: a computation's floats are not short decimals). Integers are exact. Short
values that may be a float's own repr (`0.5`, `0.001`, a warm-up's `0.0001`, `0.0002`, `0.0003`:
one or two significant digits) prove nothing either way.

Two logs equal as printed are then IDENTICAL "as printed": `4 decimals: a difference under 5e-05
would not show`. Binary float32 sources (TensorBoard scalars) are float32.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from tuimon.clocks import NUMBER, is_clock, mask_clocks
from tuimon.engine.judge.line_tokens import (
    name_before,
    row_cells,
    table_header,
    text_tokens,
    ungroup,
)
from tuimon.readers import open_log

SAMPLE = 1 << 18
"""Bytes of a log read from its start for its precision: a JSON log's `"name": number` pairs
are found in one pass over them (and over `TAIL` bytes from the middle of a longer plain
file); a log of printed lines is read line by line, its first `LINES`."""
TAIL = 1 << 18
LINES = 20_000
PER_NAME = 256
"""Values of a name looked at, at most (a metric's precision shows in its first few)."""
FULL_DIGITS = 15
"""Significant digits from which a value round-trips a float64 as written."""
SHORT_VALUES = 3
"""Distinct short values that no float64 holds exactly, from which a metric was rounded."""
SHORT_DIGITS = 3
"""Significant digits a short value needs to count as rounded: a value of one or two
(`0.0001`, `0.0003`, `0.25`) is the shortest repr of a schedule's float as often as a rounding
(a learning rate's warm-up written by repr)."""
_JSON_PAIR = re.compile(
    rb'"((?:[^"\\]|\\.){1,200})"\s*:\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)'
)
_MANTISSA = re.compile(r"^[-+]?(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?$")
BITWISE, PRINTED, FLOAT32 = "bitwise", "printed", "float32"


@dataclass
class Precision:
    """How exactly two logs' values were compared."""

    kind: str = BITWISE
    """`bitwise` (every value round-trips a float64), `printed` (rounded when written),
    `float32` (a binary float32 source)."""
    decimals: int | None = None
    """The fewest decimals a rounded metric was written with (fixed-point)."""
    digits: int | None = None
    """The fewest significant digits a rounded metric was written with (exponent form)."""
    names: list[str] = field(default_factory=list)
    """The metrics written rounded (the first few)."""

    @property
    def bitwise(self) -> bool:
        return self.kind == BITWISE

    def phrase(self) -> str:
        """`bitwise`, or what equal means here: `as printed (4 decimals: a difference under
        5e-05 would not show)`."""
        if self.kind == FLOAT32:
            return "as float32 (the log holds float32 values, not the run's float64)"
        if self.kind == BITWISE:
            return "bitwise"
        if self.decimals is not None:
            step = f"{5 * 10.0 ** -(self.decimals + 1):.0e}"
            return (
                f"as printed ({self.decimals} decimal{'s' if self.decimals != 1 else ''}: "
                f"a difference under {step} would not show)"
            )
        step = f"{5 * 10.0 ** -(self.digits or 1):.0e}"
        return (
            f"as printed ({self.digits} significant digits: a relative difference under "
            f"{step} would not show)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "decimals": self.decimals,
            "digits": self.digits,
            "names": list(self.names),
            "phrase": self.phrase(),
        }


@dataclass
class _Metric:
    full: bool = False
    fixed: bool = False
    short: set[str] = field(default_factory=set)
    decimals: int = 0
    digits: int = 0
    exponent: bool = False

    def add(self, text: str) -> None:
        if self.full:
            return
        if "x" in text.lower():
            self.full = True
            return
        m = _MANTISSA.match(text)
        if m is None:
            return
        whole, frac, exp = m.group(1), m.group(2), m.group(3)
        if frac is None and exp is None:
            return  # an integer: exact
        frac = frac or ""
        digits = (whole + frac).lstrip("0")
        if len(digits) >= FULL_DIGITS:
            self.full = True
            return
        if len(frac) >= 2 and frac.endswith("0"):
            self.fixed = True
        self.digits = max(self.digits, len(digits))
        if exp is not None:
            self.exponent = True
        else:
            self.decimals = max(self.decimals, len(frac))
        if len(self.short) < SHORT_VALUES and len(digits) >= SHORT_DIGITS and not _exact(text):
            self.short.add(text)

    @property
    def significant(self) -> bool:
        """Written to significant digits (`%g`, exponent form: `0.0013889`, `0.12278`), not
        to fixed decimals: more decimals than any value has digits."""
        return self.exponent or self.decimals > self.digits

    @property
    def rounded(self) -> bool:
        return not self.full and (self.fixed or len(self.short) >= SHORT_VALUES)


def _exact(text: str) -> bool:
    """Whether a float64 holds the decimal exactly (`0.25`: yes; `0.1`: no)."""
    try:
        return Decimal(text) == Decimal(float(text))
    except (InvalidOperation, ValueError, OverflowError):
        return False


def of_logs(paths: list[Path], *, float32: bool = False) -> Precision:
    """The precision of two logs' values: the coarsest of what either was written with."""
    if float32:
        return Precision(FLOAT32)
    metrics: dict[str, _Metric] = {}
    for path in paths:
        try:
            _scan(path, metrics)
        except (OSError, ValueError, EOFError):
            continue
    rounded = {n: m for n, m in metrics.items() if m.rounded}
    if not rounded:
        return Precision()
    fixed = [m.decimals for m in rounded.values() if not m.significant]
    sig = [m.digits for m in rounded.values() if m.significant]
    return Precision(
        PRINTED,
        decimals=min(fixed) if fixed else None,
        digits=None if fixed else min(sig),
        names=sorted(rounded)[:12],
    )


def _scan(path: Path, metrics: dict[str, _Metric]) -> None:
    with open_log(path) as fh:
        data = fh.read(SAMPLE)
        more = b""
        size = path.stat().st_size
        if isinstance(fh, io.BufferedReader) and size > 4 * SAMPLE:
            fh.seek(size // 2)
            more = fh.read(TAIL)
            more = more[more.find(b"\n") + 1 :]
    if b"\0" in data[:4096]:
        return
    if data.lstrip()[:1] == b"{":
        values: dict[bytes, list[bytes]] = {}
        for body in (data, more):
            for key, number in _JSON_PAIR.findall(body):
                got = values.setdefault(key, [])
                if len(got) < PER_NAME:
                    got.append(number)
        for key, numbers in values.items():
            name = key.decode("utf-8", "replace")
            if not is_clock(name) and name != "type":
                metric = metrics.setdefault(name, _Metric())
                for number in numbers:
                    metric.add(number.decode())
        return
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()[:LINES]
    if len(data) == SAMPLE and len(lines) < LINES:
        lines.pop()  # a line cut by the sample's end
    header = table_header(lines[0]) if lines else None
    for line in lines:
        _line(line, header, metrics)


def _line(line: str, header: tuple[str, list[str]] | None, metrics: dict[str, _Metric]) -> None:
    body = line.strip()
    if body[:1] == "{":
        for key, number in _JSON_PAIR.findall(body.encode()):
            name = key.decode("utf-8", "replace")
            if not is_clock(name) and name != "type":
                metrics.setdefault(name, _Metric()).add(number.decode())
        return
    if header is not None:
        cells = row_cells(body, header)
        if cells is not None:
            for name, cell in zip(header[1], cells, strict=True):
                cell = cell.strip()
                if NUMBER.fullmatch(cell) and not is_clock(name):
                    metrics.setdefault(name, _Metric()).add(cell)
            return
    tokens = text_tokens(mask_clocks(ungroup(line)))
    for i, (tok, number) in enumerate(tokens):
        if number:
            name = name_before(tokens, i)
            if name and not is_clock(name):
                metrics.setdefault(name, _Metric()).add(tok.lstrip("+"))
