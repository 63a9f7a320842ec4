"""The TUI's question before anything read from a saved file runs: the exact command lines, y/N.

A sweep record (or a pair directory) is data someone else may have written. Before `sweep
--resume` starts a run in the TUI, `CommandsScreen` shows each command line exactly
(`engine.launch.consent.show`: every argument quoted, the shell, the launcher) and answers True
only for `y`; Esc, `n` and the focused No button answer False. Text is shown as `Text`, never
markup.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.text import clean

REFUSED = "not confirmed: nothing was run"


class CommandsScreen(ConfirmScreen):
    """`what` would run these command lines: y runs them, n or Esc runs nothing."""

    DEFAULT_CSS = """
    CommandsScreen { align: center middle; }
    CommandsScreen #commands-box {
        width: 90%; height: auto; max-height: 90%;
        border: thick $warning; background: $panel; padding: 1 2;
    }
    CommandsScreen #commands-list { height: auto; max-height: 20; }
    CommandsScreen #commands-buttons { height: auto; align-horizontal: right; }
    """

    def __init__(self, what: str, lines: list[str]) -> None:
        super().__init__(what, yes="Run them", no="Run nothing")
        self.what = what
        self.lines = lines

    def compose(self) -> ComposeResult:
        title = Text(f"{clean(self.what)} runs these command lines", Style(bold=True))
        title.append("\nread from a saved file: run them only if you trust it", Style(dim=True))
        with Vertical(id="commands-box"):
            yield Static(title, id="commands-title")
            with VerticalScroll(id="commands-list"):
                yield Static(Text("\n".join(clean(line, None) for line in self.lines)))
            with Horizontal(id="commands-buttons"):
                yield Button(f"{self.labels[0]} (y)", variant="error", id="yes")
                yield Button(f"{self.labels[1]} (n)", variant="primary", id="no")
