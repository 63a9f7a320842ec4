"""The one sanitizer: text from a run or a file made safe to show on a terminal or in a widget.

Every string that comes from outside tuimon (step lines, stderr, metric and tensor names, device
and command text, values read back from pair.json) passes `clean` before it is shown. Control
characters, and so every escape sequence (CSI, OSC including OSC 52 clipboard writes and window
titles, DCS), show visibly escaped in caret notation, as ``cat -v`` does; bidirectional
overrides show as ``<U+202E>``. `clean` does not touch ``[`` or ``]``: what it returns is shown
as `rich.text.Text` (or with ``markup=False``), never parsed as Rich/Textual markup.
No textual here: the headless view uses it too.

`json_text` is the one writer of JSON that tuimon prints (every `--json`): JSON's own rules
escape only C0, so it also writes DEL, C1 controls (U+009B is a CSI on many terminals), bidi and
other format characters and line separators as ``\\uXXXX``: the text reads back the same, and a
terminal that shows it receives none of them raw.
"""

from __future__ import annotations

import re

import orjson

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}" if code <= 0x9F else f"<U+{code:04X}>"


def clean(text: object, limit: int | None = 1000) -> str:
    """One display line of untrusted text: tabs expanded, control characters made visible.

    ESC shows as ``^[``, so an ANSI sequence reads ``^[[31m`` and colours nothing; a newline is
    ``^J``; C1 controls show as ``\\xNN``. Text past `limit` characters (None: no limit) is cut
    with an ellipsis. Anything not a string is shown as its ``str``.
    """
    text = _CONTROL.sub(_escape, str(text).expandtabs(4))
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
)
"""DEL, C1, and Unicode's format characters (Cf: bidi controls, zero widths, tags) and line
and paragraph separators (Zl, Zp): what JSON may hold raw but a terminal must not receive."""


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON writes a character past the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(obj: object, *, indent: bool = False) -> str:
    """`obj` as JSON text for a terminal or a pipe (no newline at the end): orjson's, with
    every character of `_JSON_UNSAFE` written as an escape. Outside its strings JSON holds
    ASCII only, so each one replaced lies in a string, and reads back as it was."""
    text = orjson.dumps(obj, option=orjson.OPT_INDENT_2 if indent else None).decode()
    return _JSON_UNSAFE.sub(_json_escape, text)
