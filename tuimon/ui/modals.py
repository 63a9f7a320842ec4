"""Modal screens: a yes/no confirmation, and the environment differences of the two runs."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Static

from tuimon.ui.pair_model import EnvRow, own_paths
from tuimon.ui.text import clean


class ConfirmScreen(ModalScreen[bool]):
    """Ask one question; dismiss with True (yes) or False (no)."""

    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "Yes", id="yes"),
        Binding("n,escape", "answer(False)", "No", id="no"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__(classes="confirm")
        self.question = question
        self.labels = (yes, no)

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Text(self.question), id="question")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.labels[0]} (y)", variant="error", id="yes")
                yield Button(f"{self.labels[1]} (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        """Focus the safe answer."""
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """A click on either button answers."""
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        """Answer by key."""
        self.dismiss(yes)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    return clean(value if isinstance(value, str) else repr(value), 200)


def _words_apart(a: Any, b: Any) -> tuple[Any, Any]:
    """Two differing command lines (or other long texts of words) as only the words where
    they part, with the word before each (its flag) and "…" for what they share: a reference
    pair's commands differ in `--save-emb .../emb-a.npy` alone, which a full line hid."""
    if not (isinstance(a, str) and isinstance(b, str)) or len(a) + len(b) < 80:
        return a, b
    wa, wb = a.split(" "), b.split(" ")
    shown: tuple[list[str], list[str]] = ([], [])
    matcher = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for out in shown:
                out.append("…")
            continue
        for out, words, start, end in ((shown[0], wa, i1, i2), (shown[1], wb, j1, j2)):
            if start > 0 and out and out[-1] == "…":
                out.append(words[start - 1])  # the flag the changed value belongs to
            out.extend(words[start:end])
    return " ".join(shown[0]), " ".join(shown[1])


class EnvDiffScreen(ModalScreen[None]):
    """The two runs' fingerprints key by key: differing keys first and marked, the rest dimmed."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,e,q", "close", "Close", id="close"),
        Binding("a", "toggle_same", "Identical keys", id="toggle-same"),
    ]

    def __init__(self, rows: list[EnvRow], *, note: str = "") -> None:
        super().__init__(classes="env-diff")
        self.rows = [
            dataclasses.replace(r, differs=False) if r.differs and own_paths(r.a, r.b) else r
            for r in rows
        ]
        self.note = note
        self.show_same = not any(r.differs for r in self.rows)
        """Identical keys shown (dimmed); at first only when no key differs."""

    def compose(self) -> ComposeResult:
        with Vertical(id="env-box"):
            yield Static(Text(""), id="env-title")
            yield DataTable(id="env-table", cursor_type="row", zebra_stripes=True)
            yield Footer()

    def on_mount(self) -> None:
        """Fill the table."""
        table = self.query_one(DataTable)
        table.add_columns("key", "A", "B")
        self._fill()
        table.focus()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        variables = self.app.theme_variables
        warn = Style(color=variables.get("warning"), bold=True)
        dim = Style(dim=True)
        differ = [r for r in self.rows if r.differs]
        for row in self.rows:
            if not row.differs and not self.show_same:
                continue
            style = warn if row.differs else dim
            a, b = _words_apart(row.a, row.b) if row.differs else (row.a, row.b)
            if not row.differs and a != b:  # the same command but each side's own file
                b = "the same, with its own files"
            table.add_row(
                Text(("≠ " if row.differs else "  ") + clean(row.key), style=style),
                Text(_cell(a), style=style),
                Text(_cell(b), style=style),
                key=row.key,
            )
        same = len(self.rows) - len(differ)
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("Environment of the two runs: ", Style(bold=True))
        if differ:
            title.append(f"{len(differ)} keys differ · {same} identical ")
            title.append("(shown dimmed)" if self.show_same else "(hidden: press a)", dim)
        else:
            title.append(f"identical ({same} keys): ", warn)
            title.append("what parts them is not in the recorded environment", dim)
        if not self.rows:
            title = Text("No environment recorded: the logs have no header.")
        elif self.note:
            title.append(f" · {clean(self.note)}", dim)
        self.query_one("#env-title", Static).update(title)

    def action_toggle_same(self) -> None:
        """Show or hide the keys both runs agree on."""
        self.show_same = not self.show_same
        self._fill()

    def action_close(self) -> None:
        """Back to the pair."""
        self.dismiss(None)


HELP_TEXT = (
    "The two panes show the same steps side by side: a row in A is the same step as the row "
    "beside it in B (blank where a side has not logged it). The first digit that differs from "
    "the other side is lit; when a number does not fit, the digits both sides share are cut in "
    "the middle (4.7…260831) so the differing digit stays on screen (w shows every digit, p "
    "each metric's first differing values in full). ▶ marks the first divergent step; the "
    "cursor row (: ] [ / n N Home End) is what y and Y copy. Below: where the runs part, the log10 "
    "divergence (▁ bitwise equal), "
    "now / max, and the verdict. Counts are steps done / steps planned. Text from the runs is "
    "shown escaped (^[ is ESC)."
)


class HelpScreen(ModalScreen[None]):
    """The keys of the view below it and what its panel shows; Esc, ? or q closes it, the
    arrows scroll it."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,question_mark,f1,q", "close", "Close", id="close"),
    ]

    def __init__(self, rows: Sequence[tuple[str, str]], text: str = HELP_TEXT) -> None:
        """`rows`: (keys as shown, what they do), from the view's table (`help_rows`)."""
        super().__init__(classes="help")
        self.text = text
        self.keys = list(rows)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            title = "Keys · Esc closes · ↑ ↓ PgUp PgDn scroll"
            yield Static(Text(title, style=Style(bold=True)), id="help-title")
            with VerticalScroll(id="help-scroll"):
                width = max((len(key) for key, _ in self.keys), default=6)
                width = min(max(width, 6), 12)
                table = Text(no_wrap=False)
                for key, what in self.keys:
                    table.append(f"{key:>{width}}  ", Style(bold=True))
                    table.append(f"{what}\n")
                table.append(f"{'ctrl+c':>{width}}  ", Style(bold=True))
                table.append("Quit, as q (a running pair asks first)\n")
                if not any(key == "ctrl+p" for key, _ in self.keys):
                    table.append(f"{'ctrl+p':>{width}}  ", Style(bold=True))
                    table.append("Every command, searchable")
                yield Static(table, id="help-keys")
                if self.text:
                    yield Static(Text(self.text, style=Style(dim=True)), id="help-text")

    def on_mount(self) -> None:
        """The arrows scroll the keys."""
        self.query_one("#help-scroll").focus()

    def action_close(self) -> None:
        """Back to the view."""
        self.dismiss(None)


class AskScreen(ModalScreen[str | None]):
    """One line of input (a step number, a search); Enter answers, Esc cancels (None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel")]  # noqa: RUF012

    def __init__(self, question: str, *, value: str = "", placeholder: str = "") -> None:
        super().__init__(classes="ask")
        self.question = question
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-box"):
            yield Static(Text(self.question, style=Style(bold=True)), id="ask-question")
            yield Input(self.value, placeholder=self.placeholder, id="ask-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter answers with the text typed."""
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Esc: no answer."""
        self.dismiss(None)


class LinesScreen(ModalScreen[None]):
    """Lines of text to read whole (wrapped, scrollable); Esc or q closes."""

    BINDINGS = [Binding("escape,q,i,p", "close", "Close", id="close")]  # noqa: RUF012

    def __init__(self, title: str, lines: list[Text]) -> None:
        super().__init__(classes="lines")
        self.heading = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical(id="lines-box"):
            yield Static(Text(f"{self.heading} · Esc closes", style=Style(bold=True)))
            with VerticalScroll(id="lines-scroll"):
                for line in self.lines:
                    yield Static(line, classes="line")

    def on_mount(self) -> None:
        """Arrow keys scroll the text."""
        self.query_one("#lines-scroll").focus()

    @property
    def text(self) -> str:
        """Every line as plain text (tests read it)."""
        return "\n".join(line.plain for line in self.lines)

    def action_close(self) -> None:
        """Back to the view."""
        self.dismiss(None)
