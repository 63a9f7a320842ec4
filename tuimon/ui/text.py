"""Plain-text helpers for the views: numbers, first differing digit; `clean` from `tuimon.sanitize`.

Nothing here imports textual; what is shown of a run's output is built as `rich.text.Text`, never
as markup, so `[bold]` or `[@click=...]` in a log line stays literal.
"""

from __future__ import annotations

import functools
import math

from tuimon.engine.judge.ulps import same_bits
from tuimon.sanitize import clean as clean  # the one sanitizer, re-exported for the views

MAX_SIG = 17
"""Significant digits that tell any two distinct float64 values apart."""


def fmt_number(value: float | None, sig: int, *, zeros: bool = False) -> str:
    """`value` with `sig` significant digits (general format); "·" when there is none.

    `zeros` keeps trailing zeros, so two numbers shown with the same digits line up; without
    them, 17 digits or more means the shortest text that reads back as the same float.
    """
    if value is None:
        return "·"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if zeros:
        return f"{value:#.{sig}g}"
    return repr(value) if sig >= MAX_SIG else f"{value:.{sig}g}"


def first_difference(a: str, b: str) -> int | None:
    """Index of the first character where two strings differ, None when equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _digits_to_differ(a: float, b: float, start: int) -> int | None:
    """The fewest digits from `start` on whose text tells `a` from `b` (None: only bits do)."""
    for digits in range(start, MAX_SIG + 1):
        if fmt_number(a, digits, zeros=True) != fmt_number(b, digits, zeros=True):
            return digits
    return None


def cell(
    mine: float | None, other: float | None, width: int, sig: int = 6
) -> tuple[str, int | None]:
    """`_cell`, cached: rows are drawn again as they scroll. The signs are part of the key, as
    -0.0 == 0.0 (and hash alike) but differ in their bits."""
    return _cached(mine, other, width, sig, _negative(mine), _negative(other))


def _negative(value: float | None) -> bool:
    return value is not None and math.copysign(1.0, value) < 0


@functools.lru_cache(maxsize=16384)
def _cached(
    mine: float | None, other: float | None, width: int, sig: int, _a: bool, _b: bool
) -> tuple[str, int | None]:
    return _cell(mine, other, width, sig)


def _cell(
    mine: float | None, other: float | None, width: int, sig: int = 6
) -> tuple[str, int | None]:
    """`mine` in at most `width` cells, and the index where its text first differs from `other`.

    Equal values (or no other value) show `sig` digits, fewer when they would not fit. Differing
    values show as many digits as it takes to tell them apart (trailing zeros kept, so both
    sides line up). When that does not fit, the digits the two share are cut in the middle
    (`4.74…6123`): the leading digits, "…", then the digits from a little before the first
    differing one, so the differing digit is always on screen and two different numbers never
    read the same. Only when not even that fits does the marker "…" carry the difference.
    """
    if mine is None:
        return "·", None
    if other is None or same_bits(mine, other):
        for digits in range(sig, 0, -1):
            text = fmt_number(mine, digits)
            if len(text) <= width:
                return text, None
        return text[: width - 1] + "…", None
    digits = _digits_to_differ(mine, other, sig) or MAX_SIG
    text = fmt_number(mine, digits, zeros=True)
    at = first_difference(text, fmt_number(other, digits, zeros=True))
    if len(text) <= width:
        return text, at
    if at is not None and (elided := _elide(text, at, width)) is not None:
        return elided
    for fewer in range(digits, 0, -1):
        text = fmt_number(mine, fewer, zeros=True)
        if len(text) < width:
            at = first_difference(text, fmt_number(other, fewer, zeros=True))
            return (text, at) if at is not None else (text + "…", len(text))
    return "…", 0


def _elide(text: str, at: int, width: int) -> tuple[str, int] | None:
    """`text` cut in the middle to `width` cells, keeping its exponent and the digits from
    just before `at` (the first differing character); None when they do not fit."""
    mark = text.find("e")
    mantissa, exponent = (text, "") if mark < 0 else (text[:mark], text[mark:])
    if at >= len(mantissa):  # the difference is in the exponent, and it did not fit
        return None
    point = mantissa.find(".")
    lead = 2 if mantissa.startswith("-") else 1  # the sign and the first digit
    head = point + 2 if 0 <= point < at else lead  # up to the point and one digit after it
    for keep in (head, lead, 0):
        room = width - keep - 1 - len(exponent)
        start = len(mantissa) - room
        if room > 0 and keep < start <= at:
            shown = mantissa[:keep] + "…" + mantissa[start:] + exponent
            return shown, keep + 1 + at - start
        if room > 0 and start <= keep:  # it would fit whole: not ours to cut
            return None
    return None


def fit(text: str, width: int, diff_at: int | None) -> tuple[str, int | None]:
    """Cut `text` to `width` cells; a difference past the cut moves onto the ellipsis."""
    if len(text) <= width:
        return text, diff_at
    cut = text[: width - 1] + "…"
    if diff_at is not None and diff_at >= width - 1:
        diff_at = width - 1
    return cut, diff_at


def sci(value: float | None) -> str:
    """A divergence for people: 3.2e-05, 0 for bitwise equal, "–" for none."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return f"{value:.3g}" if 1e-3 <= abs(value) < 1e3 else f"{value:.2e}"
