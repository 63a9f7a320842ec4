"""One-line texts that are drawn again only when they change (a frame costs per widget drawn)."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from rich.text import Text
from textual.widgets import Static

_shown: WeakKeyDictionary[Static, Text] = WeakKeyDictionary()


def show_text(widget: Static, text: Text) -> bool:
    """Put `text` in `widget` (no layout) unless it shows that already; True when it changed."""
    if _shown.get(widget) == text:
        return False
    _shown[widget] = text
    widget.update(text, layout=False)
    return True
