"""The one sanitizer: text from a run or a file made safe to show on a terminal or in a widget.

Every string that comes from outside tuimon (step lines, stderr, metric and tensor names, device
and command text, values read back from pair.json) passes `clean` before it is shown. Control
characters, and so every escape sequence (CSI, OSC including OSC 52 clipboard writes and window
titles, DCS), show visibly escaped in caret notation, as ``cat -v`` does; bidirectional
overrides show as ``<U+202E>``. `clean` does not touch ``[`` or ``]``: what it returns is shown
as `rich.text.Text` (or with ``markup=False``), never parsed as Rich/Textual markup.
No textual here: the headless view uses it too.
"""

from __future__ import annotations

import re

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
