"""A bar sparkline drawn with the Line API: one strip per row, cached until the data changes.

Textual's `Sparkline` renders every bar through Rich each frame (a few ms a row); this one
builds each row's segments once per new data and width, in a handful of styles.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.strip import Strip
from textual.widget import Widget

BARS = " ▁▂▃▄▅▆▇█"
SHADES = 12
"""Colours between the low and the high end (bars of close heights share one)."""


def columns(data: Sequence[float], width: int) -> list[float]:
    """One value per column: the data itself when it fits, else the largest of each slice."""
    if len(data) <= width:
        return list(data)
    size = len(data) / width
    return [
        max(data[int(i * size) : max(int(i * size) + 1, int((i + 1) * size))]) for i in range(width)
    ]


class SparkBars(Widget):
    """Bars of `data` over the widget's height, lowest value at the bottom, coloured from the
    `sparkbars--min-color` to the `sparkbars--max-color` component."""

    COMPONENT_CLASSES = {"sparkbars--min-color", "sparkbars--max-color"}  # noqa: RUF012
    DEFAULT_CSS = """
    SparkBars { height: 1; }
    SparkBars > .sparkbars--max-color { color: $primary; }
    SparkBars > .sparkbars--min-color { color: $primary 30%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data: list[float] = []
        self.floor: float | None = None
        """The value drawn as the lowest bar alone (`▁`): anything above it draws higher."""
        self._strips: dict[tuple[int, int], Strip] = {}
        self._shaded: list[Style] = []
        self._heights: tuple[tuple[int, int], list[tuple[int, Style]]] | None = None
        """The bars of the data and size last drawn (`_bars`)."""

    def set_data(self, data: Sequence[float], *, floor: float | None = None) -> None:
        """New values: drawn on the next frame (nothing when they are the same). `floor`: the
        bottom of the scale, the one value drawn as the lowest bar (a pair's bitwise-equal
        steps); every value above it draws at least the bar above, even when no value is at
        it (a step 1e-10 apart is never drawn as equal)."""
        values = list(data)
        if values != self.data or floor != self.floor:
            self.data = values
            self.floor = floor
            self._strips.clear()
            self._heights = None
            self.refresh()

    def notify_style_update(self) -> None:
        """A theme change: draw the rows again."""
        super().notify_style_update()
        self._strips.clear()
        self._shaded = []
        self._heights = None

    def _shades(self) -> list[Style]:
        if not self._shaded:
            self._shaded = self._blend()
        return self._shaded

    def _blend(self) -> list[Style]:
        base = self.rich_style
        background = Color.from_rich_color(base.bgcolor) if base.bgcolor else Color(0, 0, 0)
        low = background + Color.from_rich_color(
            self.get_component_rich_style("sparkbars--min-color").color
        )
        high = background + Color.from_rich_color(
            self.get_component_rich_style("sparkbars--max-color").color
        )
        return [
            base + Style(color=low.blend(high, i / (SHADES - 1)).rich_color) for i in range(SHADES)
        ]

    def _bars(self, width: int, height: int) -> list[tuple[int, Style]]:
        """Each column's height in eighths of a row and its colour, worked out once per new
        data and size (every row of the bars is drawn from it)."""
        if self._heights is not None and self._heights[0] == (width, height):
            return self._heights[1]
        values = columns(self.data, width)
        bars: list[tuple[int, Style]] = []
        if values:
            lo = min(values) if self.floor is None else min(self.floor, *values)
            hi = max(values)
            span = (hi - lo) or 1.0
            least = 1 if self.floor is None else 2  # above the floor: never its bar
            shades = self._shades()
            for value in values:
                norm = (value - lo) / span
                above = self.floor is not None and value > self.floor
                eighths = max(least if above else 1, round(norm * height * 8))
                bars.append((eighths, shades[round(norm * (SHADES - 1))]))
        self._heights = ((width, height), bars)
        return bars

    def render_line(self, y: int) -> Strip:
        """Row `y` (0 at the top) of the bars."""
        width, height = self.size.width, max(1, self.size.height)
        key = (y, width)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        floor = (height - 1 - y) * 8
        segments = [
            Segment(BARS[min(8, max(0, eighths - floor))], style)
            for eighths, style in self._bars(width, height)
        ]
        used = len(segments)
        if used < width:
            segments.append(Segment(" " * (width - used), self.rich_style))
        strip = Strip(segments, width).simplify()
        self._strips[key] = strip
        return strip
