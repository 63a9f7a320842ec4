"""The browser of past pairs: a table of the store, newest first; open, replay, filter, delete."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.errors import ReplayError
from tuimon.store import PairInfo, StoreError, delete_pair, list_newest, list_pairs
from tuimon.ui.command_palette import ScreenActions
from tuimon.ui.keymap import Key, KeyedScreen, KeyFooter
from tuimon.ui.line_table import MOVES, PADDING, Column, LineTable
from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.statics import show_text
from tuimon.ui.text import clean, sci
from tuimon.ui.workers import ReportsWorkerErrors, read_then_show

COLUMNS = ("when", "seed", "devices", "steps", "verdict", "status", "1st div", "max div", "pair")
VERDICT_COLOURS = {
    "IDENTICAL": "success",
    "CLOSE": "warning",
    "DIVERGED": "error",
    "INCOMPLETE": "warning",
    "DAMAGED": "error",
    "RUNNING": "accent",
}
STATUSES = ("finished", "failed", "interrupted", "stopped", "running", "damaged")
WIDTHS = {
    "verdict": max(map(len, VERDICT_COLOURS)),
    "status": max(map(len, STATUSES)),
}
"""Columns whose width fits every word they may hold, so no state is ever cut."""
RIGHT = frozenset({"seed", "steps", "1st div", "max div"})
"""Columns of numbers, aligned right."""
REPLAY_SPEED = 50.0
SELECTION_ACTIONS = ("open", "replay", "same_sweep", "delete", "clear_filter")
"""The actions whose state depends on the pair under the cursor or the filter."""
PREVIEW = 200
"""Pairs shown first, while the rest of a large store is read (more than a screen holds)."""
NARROWER = ("status", "seed", "short when", "when")
"""What a narrow screen gives up first so the last columns (max div, the pair's name) stay:
the status (the status line says a state other than finished), the seed and the time (the
pair's name holds both), the year."""
PAIR_ROOM = 24
"""Cells the pair's name keeps before another column gives way."""
SHORT_WHEN = 11
"""`mm-dd HH:MM`: the time without its year."""


@dataclass(frozen=True)
class Layout:
    """The columns a width shows: their indexes in `COLUMNS`, and the time without its year."""

    shown: tuple[int, ...]
    short_when: bool = False

    def columns(self, columns: Sequence[Column]) -> list[Column]:
        """The shown columns (the time narrowed to `SHORT_WHEN`)."""
        out = [columns[i] for i in self.shown]
        if self.short_when and COLUMNS.index("when") in self.shown:
            at = self.shown.index(COLUMNS.index("when"))
            out[at] = replace(out[at], width=min(out[at].width, SHORT_WHEN))
        return out

    def cells(self, cells: Sequence[Text]) -> list[Text]:
        """A row's cells as the shown columns hold them."""
        out = [cells[i] for i in self.shown]
        if self.short_when and COLUMNS.index("when") in self.shown:
            at = self.shown.index(COLUMNS.index("when"))
            text = out[at]
            out[at] = text[len(text) - SHORT_WHEN :] if len(text) > SHORT_WHEN else text
        return out


def fit(columns: Sequence[Column], width: int) -> Layout:
    """The layout that leaves the pair's name `PAIR_ROOM` cells at `width` (giving up
    `NARROWER` in order), every column when the width holds them all."""
    layout = Layout(tuple(range(len(COLUMNS))))
    for step in (None, *NARROWER):
        if step == "short when":
            layout = replace(layout, short_when=True)
        elif step is not None:
            layout = Layout(tuple(i for i in layout.shown if COLUMNS[i] != step), layout.short_when)
        used = sum(c.width + 2 * PADDING for c in layout.columns(columns)[:-1])
        if width - used - 2 * PADDING >= min(PAIR_ROOM, columns[-1].width):
            break
    return layout


def when(created: str | None) -> str:
    """An ISO time as local 'YYYY-mm-dd HH:MM'."""
    if not created:
        return "?"
    try:
        stamp = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return clean(created)[:16]
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone()
    return f"{stamp:%Y-%m-%d %H:%M}"


def haystack(info: PairInfo) -> str:
    """The text a filter matches against: name, devices, verdict, seed, status, damage."""
    parts = [info.name, info.verdict or "", info.status or "", info.damaged or ""]
    if info.running:
        parts.append("running")
    if info.devices:
        parts += [*info.devices, "-".join(info.devices), " vs ".join(info.devices)]
    if info.seed is not None:
        parts += [f"seed {info.seed}", f"s{info.seed}", f"seed={info.seed}"]
    if info.damaged and not info.running:
        parts.append("damaged")
    if info.sweep:
        parts += ["sweep", info.sweep]
    return " ".join(parts).lower()


def verdict_of(info: PairInfo) -> str:
    """RUNNING while its monitor writes it, DAMAGED when pair.json is unusable, else its verdict."""
    if info.running:
        return "RUNNING"
    return "DAMAGED" if info.damaged else (info.verdict or "–")


def status_of(info: PairInfo) -> str:
    """running / damaged / the status pair.json records (finished, failed, interrupted)."""
    if info.running:
        return "running"
    if info.damaged:
        return "damaged"
    return info.status or "–"


class Haystack(NamedTuple):
    """A pair's filter text and its whole words, made once per read of the store."""

    text: str
    tokens: frozenset[str]

    @classmethod
    def of(cls, info: PairInfo) -> Haystack:
        text = haystack(info)
        return cls(text, frozenset(re.split(r"[^a-z0-9.]+", text)))

    def matches(self, query: str) -> bool:
        """The query appears in the text, or each of its words does (numbers whole)."""
        return self.matches_normal(normal_query(query))

    def matches_normal(self, query: str) -> bool:
        """`matches` for a query already through `normal_query`."""
        if query in self.text:
            return True
        return all(w in self.tokens if w.isdigit() else w in self.text for w in query.split())


def normal_query(query: str) -> str:
    """A filter as matched: lower case, words separated by one space."""
    return " ".join(query.lower().split())


def matching(hay: Sequence[Haystack], query: str) -> list[int]:
    """The indexes of the haystacks `query` matches (as `Haystack.matches`), fast for one
    word: a word is in the text whenever it is one of its words."""
    query = normal_query(query)
    if not query:
        return list(range(len(hay)))
    if " " not in query:
        return [i for i, h in enumerate(hay) if query in h.text]
    return [i for i, h in enumerate(hay) if h.matches_normal(query)]


def matches(info: PairInfo, query: str) -> bool:
    """The query appears in the pair's text, or each of its words does (numbers whole)."""
    return Haystack.of(info).matches(query)


def width(text: str) -> int:
    """Cells that `text` takes on screen."""
    return len(text) if text.isascii() else cell_len(text)


def plain_row(info: PairInfo) -> tuple[str, ...]:
    """A pair's cells as plain text, in `COLUMNS` order (styles are added when drawn)."""
    devices = " vs ".join(info.devices) if info.devices else "?"
    damaged = info.damaged and not info.running
    note = f"{info.name} ({info.damaged})" if damaged else info.name
    if info.sweep:
        note += f" [sweep {info.sweep}]"
    first = info.first_divergent_step
    return (
        when(info.created),
        "–" if info.seed is None else str(info.seed),
        clean(devices, 40),
        "–" if info.steps is None else str(info.steps),
        clean(verdict_of(info), 20),
        clean(status_of(info), WIDTHS["status"]),
        "–" if first is None else str(first),
        sci(info.max_divergence),
        clean(note),
    )


@dataclass(frozen=True)
class Listing:
    """One read of the store, made ready to show (in the reading thread): the pairs, their
    filter texts, their cells as plain text, and the columns that fit them; not `complete`
    when it is the newest pairs only, shown while the rest of the store is read."""

    pairs: list[PairInfo]
    hay: list[Haystack]
    plain: list[tuple[str, ...]]
    columns: list[Column]
    complete: bool = True

    @classmethod
    def of(cls, pairs: list[PairInfo], *, complete: bool = True) -> Listing:
        plain = [plain_row(p) for p in pairs]
        widths = [max(map(width, column), default=0) for column in zip(*plain, strict=False)]
        columns = [
            Column(
                name,
                WIDTHS.get(name) or max(cell_len(name), widths[i] if widths else 0),
                "right" if name in RIGHT else "left",
            )
            for i, name in enumerate(COLUMNS)
        ]
        return cls(pairs, [Haystack.of(p) for p in pairs], plain, columns, complete)

    def without(self, path: Path) -> Listing:
        """The same listing less the pair at `path` (deleted)."""
        keep = [i for i, p in enumerate(self.pairs) if p.path != path]
        return Listing(
            [self.pairs[i] for i in keep],
            [self.hay[i] for i in keep],
            [self.plain[i] for i in keep],
            self.columns,
            self.complete,
        )


class PairTable(LineTable[int]):
    """The pairs, one per row (keys: indexes in the listing), drawn only where on screen;
    Enter (or a click on the selected row) opens one."""


BROWSER_KEYS = (
    Key("open", "enter", "select_cursor", "Open", "Open the pair (static view)", 20, view="table"),
    Key("open-pair", "o", "open", "Open", "Open the pair (static view)"),
    Key("replay", "r", "replay", "Replay", "Replay the pair", 20),
    Key(
        "filter",
        "slash",
        "filter",
        "Filter",
        "Filter by devices, verdict, seed or name",
        20,
        "/",
        priority=True,  # at once, so the keys typed right after it reach the filter
    ),
    Key("delete", "d", "delete", "Delete", "Delete the pair (asks first)", 10),
    Key(
        "same-sweep",
        "w",
        "same_sweep",
        "Same sweep",
        "Show only the pairs of the selected pair's sweep",
    ),
    Key("clear-filter", "escape", "clear_filter", "Clear filter", "Clear and hide the filter"),
    Key("reload", "f5,ctrl+r", "reload", "Reload", "Read the store again"),
    *MOVES,
    Key("help", "question_mark", "app.help", "Help", "These keys (F1 too)", 20, "?"),
    Key("quit", "q", "quit", "Quit", "Quit tuimon", 20),
)
"""The browser's keys, one table (`keymap`): its Footer, in this order, and what `?` lists."""


class BrowserScreen(KeyedScreen, ReportsWorkerErrors, Screen[None]):
    """Every pair in the store: when, seed, devices, steps, verdict, first divergence, max."""

    KEYS = BROWSER_KEYS
    COMMANDS = {ScreenActions}  # noqa: RUF012

    def __init__(self, store: Path) -> None:
        super().__init__()
        self.store = Path(store)
        self.listing = Listing.of([])
        self.shown: list[PairInfo] = []
        self._shown: list[int] = []
        """The indexes in `listing` of the rows shown."""
        self.query_text = ""
        self.columns_shown = Layout(tuple(range(len(COLUMNS))))
        """The columns the screen's width shows (`fit`)."""
        self._cells: dict[int, list[Text]] = {}
        """Drawn rows by index in `listing`, for the theme in `_cells_theme` (a filter draws
        no row twice)."""
        self._cells_theme = ""
        self._bindings_state: tuple[bool | None, ...] = ()
        self._deleted: set[Path] = set()
        """Pairs deleted since the read in progress began (it may still list them)."""
        self._rest_failed: str | None = None
        """Why the rest of the store could not be read after its newest pairs were shown."""

    @property
    def pairs(self) -> list[PairInfo]:
        """Every pair read from the store, newest first."""
        return self.listing.pairs

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≈")
        yield Input(placeholder="filter: devices, verdict, seed, name …", id="filter")
        columns = self.columns_shown.columns(self.listing.columns)
        yield PairTable(columns, self._cells_of, id="pairs")
        yield Static(Text(""), id="browser-status")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        """The header now, rows when the store has been read (in a thread)."""
        self.sub_title = f"pairs in {clean(self.store, None)}"
        self.query_one("#filter", Input).display = False
        self.query_one(PairTable).focus()
        self.action_reload()

    def on_screen_resume(self) -> None:
        """Back from a pair: read the store again (a pair may have been added)."""
        if self.pairs:
            self.action_reload()

    def action_reload(self) -> None:
        """Read the store again; on the first read, the newest pairs are shown first (a large
        store paints its first screen before the rest is read)."""
        store, preview = self.store, not self.pairs
        self._deleted.clear()
        self._rest_failed = None

        def read() -> Listing:
            newest = list_newest(store, PREVIEW) if preview else None
            if newest is not None:
                self.app.call_from_thread(self._show_pairs, Listing.of(newest, complete=False))
            try:
                return Listing.of(list_pairs(store))
            except StoreError as exc:
                if newest is not None:
                    self.app.call_from_thread(self._rest_not_read, str(exc))
                raise

        read_then_show(
            self,
            read,
            self._show_pairs,
            group="store",
            what=f"reading the store {clean(store, None)}",
        )

    def _show_pairs(self, listing: Listing) -> None:
        for path in self._deleted:
            listing = listing.without(path)
        if listing.complete and not self.listing.complete and listing.pairs == self.pairs:
            self.listing = replace(self.listing, complete=True)  # the newest were all of them
            self._show_status()
            return
        self.listing = listing
        self.columns_shown = fit(listing.columns, self._room())
        self._cells.clear()
        table = self.query_one(PairTable)
        table.set_columns(self.columns_shown.columns(listing.columns))
        table.forget()
        self._fill(force=True)

    def _room(self) -> int:
        """Cells the table's columns may take (a vertical scrollbar's kept free)."""
        return (self.size.width or 120) - 1

    def on_resize(self) -> None:
        """The columns for the new width (`fit`); the Footer's keys too (`KeyedScreen`)."""
        super().on_resize()
        layout = fit(self.listing.columns, self._room())
        if layout != self.columns_shown:
            self.columns_shown = layout
            self._cells.clear()
            table = self.query_one(PairTable)
            table.set_columns(layout.columns(self.listing.columns))
            table.forget()
            table.refresh()

    def _rest_not_read(self, reason: str) -> None:
        """The newest pairs stay shown; the status line says the rest could not be read."""
        self._rest_failed = reason
        self._show_status()

    def _row(self, info: PairInfo, plain: tuple[str, ...]) -> list[Text]:
        variables = self.app.theme_variables
        colour = VERDICT_COLOURS.get(plain[4])
        style = Style(color=variables.get(colour), bold=True) if colour else Style()
        damaged = bool(info.damaged and not info.running)
        cells = [Text(cell) for cell in plain]
        cells[4].stylize(style)
        cells[5].stylize(Style(dim=plain[5] == "finished"))
        cells[-1].stylize(Style(dim=damaged))
        return cells

    def _cells_of(self, index: int) -> list[Text]:
        if self._cells_theme != self.app.theme:
            self._cells.clear()
            self._cells_theme = self.app.theme
        cells = self._cells.get(index)
        if cells is None:
            listing = self.listing
            full = self._row(listing.pairs[index], listing.plain[index])
            cells = self._cells[index] = self.columns_shown.cells(full)
        return cells

    def _fill(self, *, force: bool = False) -> None:
        """Show the pairs the filter matches; the table is given new rows only when that set
        changed (or `force`: the pairs were read again). Only the rows on screen are drawn."""
        old = self.selected()
        shown = matching(self.listing.hay, self.query_text)
        if not force and shown == self._shown:
            self._show_status()  # the same rows: only the filter in the status line changed
            return
        before = self._shown[self.query_one(PairTable).cursor_row] if old is not None else None
        self._shown = shown
        self.shown = [self.pairs[i] for i in shown]
        cursor = 0  # the cursor stays on the pair it was on, if it is still shown
        if old is not None and force:  # another listing: found by its path
            cursor = next((j for j, p in enumerate(self.shown) if p.path == old.path), 0)
        elif before is not None:  # the same listing: found by its index (fast)
            where = bisect_left(shown, before)
            cursor = where if where < len(shown) and shown[where] == before else 0
        self.query_one(PairTable).set_rows(shown, cursor=cursor)
        self._show_status()

    def _show_status(self) -> None:
        """The count of pairs, the filter, and what the selected pair's state means, in full."""
        status = self.query_one("#browser-status", Static)
        if not self.pairs:
            where = clean(self.store, None)
            show_text(status, Text(f"No pairs in {where} yet: run `tuimon pair …` to make one."))
            return
        store = clean(self.store, None)
        text = f"{len(self.shown)} of {len(self.pairs)} pairs in {store}"
        if not self.listing.complete:
            text = f"{len(self.shown)} of the newest {len(self.pairs)} pairs in {store}"
            if self._rest_failed is None:
                text += " (reading the rest …)"
            else:
                text += f" (the rest could not be read: {self._rest_failed}; F5 reads again)"
        if self.query_text:
            text += f" · filter: {self.query_text}"
        info = self.selected()  # its whole name (the column may be cut) and what its state means
        if info is not None:
            text += f" · {info.name}"
            if info.running:
                text += ": still running (it cannot be deleted)"
            elif info.damaged:
                text += f": {info.damaged}"
            elif info.status not in (None, "finished"):
                text += f": {info.status}"
        show_text(status, Text(clean(text)))

    def selected(self) -> PairInfo | None:
        """The pair under the cursor."""
        table = self.query_one(PairTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    # -- actions ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Pair actions need a pair; Clear filter needs a filter."""
        if action in ("open", "replay"):
            return self.selected() is not None
        if action == "same_sweep":
            info = self.selected()
            return info is not None and info.sweep is not None
        if action == "delete":  # a pair still being written is not deleted: shown, disabled
            info = self.selected()
            return None if info is not None and info.running else info is not None
        if action == "clear_filter":  # None: listed by `?`, off until there is a filter
            return bool(self.query_text) or self.query_one("#filter", Input).display or None
        return super().check_action(action, parameters)

    @property
    def table(self) -> PairTable:
        """The table of pairs (its moves are bound here: `line_table.MOVES`)."""
        return self.query_one(PairTable)

    @on(PairTable.RowSelected)
    def _row_selected(self, event: PairTable.RowSelected) -> None:
        self.action_open()

    @on(PairTable.RowHighlighted)
    def _row_highlighted(self) -> None:
        self._refresh_bindings_if_changed()
        self._show_status()

    def _refresh_bindings_if_changed(self) -> None:
        """The footer again only when a key's state changed (it is made again: a layout)."""
        state = tuple(self.check_action(action, ()) for action in SELECTION_ACTIONS)
        if state != self._bindings_state:
            self._bindings_state = state
            self.refresh_bindings()

    def action_open(self) -> None:
        """The selected pair in the static pair view."""
        info = self.selected()
        if info is None:
            return
        self.app.push_screen(PairScreen(saved=info.path, can_go_back=True))

    def action_replay(self) -> None:
        """Replay the selected pair in the pair view."""
        info = self.selected()
        if info is None:
            return
        from tuimon.engine.analyses.compare import judge_pair  # the judge beside the feed

        try:
            logs = resolve_logs([str(info.path)])
        except ReplayError as exc:
            self.notify(clean(exc), severity="error", markup=False)
            return
        self.app.push_screen(
            PairScreen(
                make_session=lambda on_batch: replay_session(  # as `tuimon replay` shows one
                    logs, speed=REPLAY_SPEED, on_batch=on_batch, judge=judge_pair, stream=True
                ),
                replay=True,
                can_go_back=True,
            )
        )

    def action_same_sweep(self) -> None:
        """w: filter by the selected pair's sweep (Esc clears it)."""
        info = self.selected()
        if info is None or info.sweep is None:
            return
        field = self.query_one("#filter", Input)
        field.display = True
        field.value = info.sweep  # Input.Changed fills the table
        self.query_one(PairTable).focus()
        self.refresh_bindings()

    def action_filter(self) -> None:
        """Show the filter input."""
        field = self.query_one("#filter", Input)
        field.display = True
        self.set_focus(field)  # at once: the keys typed right behind `/` go to it
        self.refresh_bindings()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self._fill()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(PairTable).focus()

    def action_clear_filter(self) -> None:
        """Esc: clear and hide the filter."""
        field = self.query_one("#filter", Input)
        field.value = ""
        field.display = False
        self.query_text = ""
        self._fill()
        self.query_one(PairTable).focus()
        self.refresh_bindings()

    def action_delete(self) -> None:
        """Delete the selected pair after a confirmation."""
        info = self.selected()
        if info is None:
            return
        if info.running:
            self.notify(f"{clean(info.name)} is still running; not deleting", markup=False)
            return

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            try:
                delete_pair(info.path)
            except StoreError as exc:
                self.notify(clean(exc), severity="error", markup=False)
                return
            self.notify(f"deleted {clean(info.name)}", markup=False)
            self._deleted.add(info.path)
            self._show_pairs(self.listing.without(info.path))

        self.app.push_screen(
            ConfirmScreen(
                f"Delete the pair {clean(info.name)}?\n{clean(info.path)}", yes="Delete", no="Keep"
            ),
            answer,
        )

    def action_quit(self) -> None:
        """Leave tuimon."""
        self.app.exit(0)
