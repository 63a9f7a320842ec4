"""One side of a pair: its title and status, and its bounded, lazily drawn step lines."""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from tuimon.engine.sources.side_state import SideState
from tuimon.report.wording import differing_words, side_status, title_words
from tuimon.store import other_side
from tuimon.ui.pair_model import PairRows, SideRows
from tuimon.ui.statics import show_text
from tuimon.ui.text import cell, clean, fit

STEP_WIDTH = 8
MIN_COLUMN = 11
MAX_COLUMN = 18
WIDE_COLUMN = 25
"""Room for every digit of a float64: -1.2345678901234567e-305."""
MAX_TEXT_WIDTH = 1000


class StepPane(ScrollView, can_focus=True, inherit_bindings=False):
    """One run's side of the shared rows (`PairRows`), drawn only where visible (Line API).

    Both panes draw the same rows, so a row in A is the same step as the row beside it in B
    (blank where a side has not logged it), and they scroll together, up and down and sideways.
    The step column stays put when scrolling sideways; a number cut at the pane's edge ends
    in "…". A sticky first row names the columns. In each number the first digit that
    differs from the other pane's value for the same step is highlighted from there on. Text
    lines from the run (stdout that is not a record, stderr) are drawn in their own styles,
    never as markup. Its keys are the pair view's (`pair_keys`): it binds none of its own.
    """

    COMPONENT_CLASSES = {  # noqa: RUF012 - Textual's own declaration style
        "step-pane--header",
        "step-pane--step",
        "step-pane--mark",
        "step-pane--diff",
        "step-pane--text",
        "step-pane--stderr",
        "step-pane--note",
        "step-pane--cursor",
    }

    class UserScrolledUp(Message):
        """The user scrolled up: the view stops following new lines."""

    class UserScrolledEnd(Message):
        """The user went to the end: the view follows new lines again."""

    def __init__(
        self,
        side: str,
        *,
        rows: PairRows | None = None,
        max_lines: int = 2000,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id, classes="following")
        self._follow = True
        self.side = side
        self.rows = rows if rows is not None else PairRows(max_lines)
        self.buffer = SideRows(self.rows, side)
        self.columns: list[str] = []
        self.partner: StepPane | None = None
        self.marked: int | None = None
        """A step whose number is marked (the first divergence)."""
        self._seen: tuple[int, int | None, int] | None = None
        """The rows' change count, the marked step and the sides running when `rows_added` last
        drew."""
        self.cursor: int | None = None
        """Absolute index (`PairRows.start` based) of the row under the pager's cursor."""
        self._styles: dict[str, Style] = {}
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        """Rows already drawn, by what their look depends on."""
        self._other = other_side(side)
        self._columns_key = 0
        self.wide = False
        """Every digit (wide columns, scroll sideways) instead of what fits."""
        self._frame_width: int | None = None

    # -- feeding ------------------------------------------------------------------------------

    def set_columns(self, columns: Sequence[str]) -> None:
        """The metrics shown, in order."""
        if list(columns) != self.columns:
            self.columns = list(columns)
            self._columns_key += 1
            self._resize_virtual()
            self.refresh()

    @property
    def follow(self) -> bool:
        """The pane follows new rows (and shows no vertical scrollbar: while following it
        would move, and be drawn again, every frame)."""
        return self._follow

    @follow.setter
    def follow(self, follow: bool) -> None:
        self._follow = follow
        self.set_class(follow, "following")

    def rows_added(self, dropped: int) -> None:
        """The shared rows grew (and lost `dropped` old rows): follow or hold the view. Nothing
        new (no row changed, none dropped, the same step marked): nothing to draw."""
        seen = (self.rows.changes, self.marked, len(self.rows.running))
        if not dropped and seen == self._seen:
            return
        self._seen = seen
        self._resize_virtual()
        if self.follow:  # now (forced: scrollbars may not be laid out yet) and after layout
            self.scroll_follow()
            self.call_after_refresh(self._keep_following)
        elif dropped:
            self.scroll_to(
                y=max(0, self.scroll_y - dropped), animate=False, immediate=True, force=True
            )
        self.refresh()

    def _keep_following(self) -> None:
        if self.follow:
            self.scroll_follow()

    def scroll_follow(self) -> None:
        """Follow new rows: the last rows of the side that is behind at the bottom (so a slow
        side's steps stand beside the fast side's same steps), or the end."""
        behind = len(self.rows) - self.rows.follow_end()
        self.rows.auto_scrolling = True
        try:
            if behind <= 0:
                self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
            else:
                y = max(0, self.max_scroll_y - behind)
                self.scroll_to(y=y, animate=False, immediate=True, force=True)
        finally:
            self.rows.auto_scrolling = False

    def set_wide(self, wide: bool) -> None:
        """Show every digit, or what fits the pane."""
        self.wide = wide
        self._resize_virtual()
        self.refresh()

    def _column_width(self, width: int) -> int:
        if self.wide:
            return WIDE_COLUMN
        if not self.columns:
            return MIN_COLUMN
        fair = (width - STEP_WIDTH) // len(self.columns)
        return max(MIN_COLUMN, min(MAX_COLUMN, fair))

    def _table_width(self, width: int) -> int:
        return STEP_WIDTH + self._column_width(width) * len(self.columns)

    def _resize_virtual(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        wide = max(self._table_width(width), min(self.rows.widest + 1, MAX_TEXT_WIDTH))
        size, old = Size(wide, len(self.rows) + 1), self.virtual_size
        if size == old:
            return
        view = self.size
        same_bars = (old.width > view.width) == (size.width > view.width) and (
            old.height > view.height
        ) == (size.height > view.height)
        # while following the pane shows no scrollbars (`.following`): nothing to lay out
        if (same_bars or self.follow) and self.is_mounted and view.area:
            # the scrollbars stay as they are: no layout of the whole screen, only the bars
            self.set_reactive(StepPane.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
        else:
            self.virtual_size = size

    def on_resize(self) -> None:
        """Column widths follow the pane's width."""
        self._resize_virtual()
        if self.follow:
            self.scroll_follow()

    # -- scrolling ----------------------------------------------------------------------------

    def scroll_to_index(self, index: int) -> None:
        """Put a kept row in the middle of the pane."""
        rows = max(1, self.size.height - 1)
        self.scroll_to(y=max(0, index - rows // 2), animate=False, immediate=True, force=True)
        self.refresh()

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        partner = self.partner
        if partner is not None and partner.is_mounted and partner.scroll_x != new_value:
            partner.scroll_to(x=new_value, animate=False, immediate=True, force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        partner = self.partner
        if partner is not None and partner.is_mounted and partner.scroll_y != new_value:
            # the partner moves with this pane, not by the user's hand: it posts nothing (a
            # resize clamps one pane first, and the other, taller for a moment, would read
            # the move as the user's scroll up and drop following)
            auto, self.rows.auto_scrolling = self.rows.auto_scrolling, True
            try:
                partner.scroll_to(y=new_value, animate=False, immediate=True, force=True)
            finally:
                self.rows.auto_scrolling = auto
        user_up = new_value < old_value and new_value < self.max_scroll_y  # not a resize clamp
        if user_up and self.follow and self.is_mounted and not self.rows.auto_scrolling:
            self.post_message(self.UserScrolledUp())

    def action_scroll_end(self) -> None:
        """End key: follow again (the last rows, or those of the side that is behind)."""
        self.post_message(self.UserScrolledEnd())
        self.scroll_follow()

    # -- drawing ------------------------------------------------------------------------------

    def _style(self, component: str) -> Style:
        """A component's style ("" for the pane's own), kept for one frame (the DOM walk behind
        it costs more than drawing the line)."""
        style = self._styles.get(component)
        if style is None:
            style = self.get_component_rich_style(component) if component else self.rich_style
            self._styles[component] = style
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        """One frame: styles are looked up afresh; a change of style forgets the drawn rows;
        the width is looked up once (it walks the DOM: a third of a row's cost)."""
        styles = self._styles
        self._styles = {}
        if styles and styles.get("") != self._style(""):
            self._strips.clear()
        self._frame_width = self._content_width()
        try:
            return super().render_lines(crop)
        finally:
            self._frame_width = None

    def _content_width(self) -> int:
        """The width rows are drawn in (the frame's, while one is drawn)."""
        if self._frame_width is not None:
            return self._frame_width
        return self.scrollable_content_region.width or self.size.width

    def notify_style_update(self) -> None:
        """A theme or CSS change: draw every row afresh."""
        super().notify_style_update()
        self._strips.clear()

    def line_text(self, index: int) -> Text:
        """Row `index` of the kept rows as this side shows it (also what tests read)."""
        step, slots = self.rows.entries[index]
        if step is None:
            slot = slots.get(self.side)
            if slot is None:
                return Text("", no_wrap=True, end="")
            kind, payload = slot
            style = self._style(f"step-pane--{kind}")
            prefix = "! " if kind == "stderr" else ("· " if kind == "note" else "")
            return Text(prefix + payload, style=style, no_wrap=True, end="")
        metrics = self.buffer.metrics_of(step)
        if metrics is None:  # the other side logged this step, this one not (yet)
            return Text("", no_wrap=True, end="")
        return self._step_text(step, metrics)

    def _step_text(self, step: int, metrics: dict[str, float]) -> Text:
        plain, spans = self._step_spans(step, metrics)
        return Text(plain, no_wrap=True, end="", spans=[Span(a, b, st) for a, b, st in spans])

    def _step_spans(
        self, step: int, metrics: dict[str, float]
    ) -> tuple[str, list[tuple[int, int, Style]]]:
        """A step row as plain text and its styled spans (in order, never overlapping)."""
        width = self._content_width()
        col = self._column_width(width)
        sig = 17 if self.wide else max(3, min(10, col - 6))
        diff_style = self._style("step-pane--diff")
        mark = step == self.marked
        head = f"{'▶' if mark else ' '}{step:>{STEP_WIDTH - 2}} "
        parts = [head]
        spans = [(0, len(head), self._style("step-pane--mark" if mark else "step-pane--step"))]
        pos = len(head)
        other = self.partner.buffer.metrics_of(step) if self.partner is not None else None
        for name in self.columns:
            theirs = other.get(name) if other is not None else None
            shown, at = cell(metrics.get(name), theirs, col - 1, sig)
            if at is not None:
                spans.append((pos + at, pos + len(shown), diff_style))
            parts.append(shown.ljust(col))
            pos += max(col, len(shown))
        return "".join(parts), spans

    def _header_text(self) -> Text:
        width = self._content_width()
        col = self._column_width(width)
        text = Text(f"{'step':>{STEP_WIDTH - 1}} ", no_wrap=True, end="")
        for name in self.columns:
            label, _ = fit(clean(name), col - 1, None)
            text.append(label.ljust(col))
        return text

    def render_line(self, y: int) -> Strip:
        """Row 0 names the columns; the rows below show the kept rows from the scroll offset.

        On a table row the step column stays put and the metrics scroll sideways under it; a
        number cut at either edge shows "…" there, so a cut number never reads as a value.
        """
        scroll_x, scroll_y = self.scroll_offset
        width = self._content_width()
        base = self._style("")
        if y == 0:
            text = self._header_text()
            text.stylize(self._style("step-pane--header"))
            return self._text_strip(text, True, scroll_x, width, base)
        index = scroll_y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, base)
        step, slots = self.rows.entries[index]
        at = self.rows.start + index
        rows = self.rows
        key = (  # what the row's look depends on: a row once drawn is drawn again for free
            at,
            rows.shifts,
            step,
            step is not None and rows.written.get(step),
            step is not None and self.buffer.metrics_of(step) is not None,
            step is not None and rows.metrics_of(step, self._other) is not None,
            len(slots),
            step is not None and step == self.marked,
            at == self.cursor,
            width,
            scroll_x,
            self.wide,
            self._columns_key,
        )
        strip = self._strips.get(key)
        if strip is None:
            if step is not None and (metrics := self.buffer.metrics_of(step)) is not None:
                strip = self._step_strip(step, metrics, scroll_x, width, base)
            else:
                strip = self._text_strip(
                    self.line_text(index), step is not None, scroll_x, width, base
                )
            if at == self.cursor:
                strip = _over(strip, self._style("step-pane--cursor"))
            self._strips[key] = strip
        return strip

    def _text_strip(self, text: Text, table: bool, scroll_x: int, width: int, base: Style) -> Strip:
        """A row drawn from rich text: the header, a text line, a blank beside the other side's
        step (a table row keeps its step column put)."""
        if table and len(text) > STEP_WIDTH and width > STEP_WIDTH:
            fixed, rest = text[:STEP_WIDTH], text[STEP_WIDTH:]
            text = fixed + _visible(rest, scroll_x, width - STEP_WIDTH)
            scroll_x = 0
        strip = Strip(list(text.render(self.app.console)), text.cell_len)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)

    def _step_strip(
        self, step: int, metrics: dict[str, float], scroll_x: int, width: int, base: Style
    ) -> Strip:
        """A step row drawn straight to segments (no rich Text: a row costs tens of µs): the
        step column fixed, the metrics from `scroll_x`, a number cut at an edge shown "…"."""
        plain, spans = self._step_spans(step, metrics)
        if width <= STEP_WIDTH:
            return Strip(_cut(plain, spans, 0, width, base), width)
        segments = _cut(plain, spans, 0, STEP_WIDTH, base)
        lo = STEP_WIDTH + scroll_x
        hi = lo + width - STEP_WIDTH
        if lo < len(plain):
            visible = plain[:hi]
            if lo > STEP_WIDTH and visible[lo - 1 : lo].strip() and visible[lo : lo + 1].strip():
                visible = visible[:lo] + "…" + visible[lo + 1 :]
            if hi < len(plain) and plain[hi - 1 : hi].strip() and plain[hi : hi + 1].strip():
                visible = visible[: hi - 1] + "…"
            segments += _cut(visible, spans, lo, min(hi, len(visible)), base)
        used = sum(len(seg.text) for seg in segments)
        if used < width:
            segments.append(Segment(" " * (width - used), base))
        return Strip(segments, width)


def _cut(
    plain: str, spans: list[tuple[int, int, Style]], lo: int, hi: int, base: Style
) -> list[Segment]:
    """Segments of `plain[lo:hi]`, each span in the base style with its own laid over it."""
    out = []
    pos = lo
    for start, end, style in spans:
        start, end = max(start, lo), min(end, hi)
        if start >= end:
            continue
        if start > pos:
            out.append(Segment(plain[pos:start], base))
        out.append(Segment(plain[start:end], base + style))
        pos = end
    if pos < hi:
        out.append(Segment(plain[pos:hi], base))
    return out


def _over(strip: Strip, style: Style) -> Strip:
    """`strip` with `style` laid over each segment's own (the cursor row's background)."""
    segments = [Segment(t, (s or Style()) + style, c) for t, s, c in strip]
    return Strip(segments, strip.cell_length)


def _visible(text: Text, start: int, width: int) -> Text:
    """`width` cells of `text` from `start`; a word cut at either edge shows "…" there."""
    plain = text.plain
    end = start + width
    out = text[start:end]
    if len(out) == 0:
        return out
    if start > 0 and plain[start - 1 : start].strip() and plain[start : start + 1].strip():
        out = Text("…", end="") + out[1:]
    if end < len(plain) and plain[end - 1 : end].strip() and plain[end : end + 1].strip():
        out = out[:-1] + Text("…", end="")
    return out


class SideHeader(Vertical):
    """A side's title (side, device, command) and its status line."""

    def __init__(self, side: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="side-header")
        self.side = side
        self._status = "starting"
        self._state: SideState | None = None
        self._other: SideState | None = None
        self._live = True

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.side.upper()} · …", no_wrap=True), classes="side-title")
        yield Static(Text("starting", no_wrap=True), classes="side-status status-starting")

    def show(self, state: SideState, *, live: bool = True, other: SideState | None = None) -> None:
        """Update the title and the status line from a side's state.

        The title shows the device, what differs from the other side's command (lit), then the
        command from the script on; the full command is in the environment view (e).
        """
        self._state, self._live = state, live
        self._other = other if other is not None else self._other
        title = Text(no_wrap=True, overflow="ellipsis", end="")
        title.append(f"{self.side.upper()} ", Style(bold=True))
        title.append(f"· {clean(state.device, 40)} · ")
        words = title_words(state.command)
        if self._other is not None:
            differ = differing_words(words, title_words(self._other.command))
            if differ:
                shown = " ".join(w.rsplit("/", 1)[-1] for w in differ)  # a path: its name
                title.append(clean(shown, 60), Style(bold=True, reverse=True))
                title.append(" · ")
        title.append(clean(" ".join(words), 300), Style(italic=True))
        show_text(self.query_one(".side-title", Static), title)
        line, status = side_status(state, live=live)
        width = self.content_size.width
        for compact in (1, 2):
            if not width or len(line) <= width:
                break
            line, status = side_status(state, live=live, compact=compact)
        widget = self.query_one(".side-status", Static)
        show_text(widget, Text(line, no_wrap=True, overflow="ellipsis", end=""))
        if status != self._status:
            widget.remove_class(f"status-{self._status}")
            widget.add_class(f"status-{status}")
            self._status = status

    def on_resize(self) -> None:
        """The status line takes the compact form when the pane is narrow."""
        if self._state is not None:
            self.show(self._state, live=self._live)

    @property
    def status_text(self) -> str:
        """The status line as plain text."""
        return str(self.query_one(".side-status", Static).render())
