"""Loss curves of both runs overlaid on a braille canvas (log scale), drawn with Rich only."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import ContentSwitcher

from tuimon.store import SIDES
from tuimon.ui.pair_model import PairFeed, curve_metrics
from tuimon.ui.series import finite_log10
from tuimon.ui.text import clean

AXIS_WIDTH = 9
_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.int32)
"""Braille dot bits by (row within the cell, column within the cell)."""


def dot_mask(
    x: np.ndarray, y: np.ndarray, xr: tuple[float, float], yr: tuple[float, float], w: int, h: int
) -> np.ndarray:
    """A (h, w) boolean dot grid with the curve through (x, y) drawn as a connected line."""
    mask = np.zeros((h, w), dtype=bool)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if not x.size:
        return mask
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    cols = np.arange(w)
    span_x = (xr[1] - xr[0]) or 1.0
    span_y = (yr[1] - yr[0]) or 1.0
    xs = xr[0] + cols / max(1, w - 1) * span_x
    inside = (xs >= x[0]) & (xs <= x[-1]) if x.size > 1 else np.abs(xs - x[0]) <= span_x / w
    ys = np.interp(xs, x, y)
    rows = np.clip(np.round((yr[1] - ys) / span_y * (h - 1)), 0, h - 1).astype(int)
    prev: int | None = None
    for c in np.flatnonzero(inside):
        r = int(rows[c])
        lo, hi = (r, r) if prev is None else (min(prev, r), max(prev, r))
        if prev is not None and hi - lo > 1:  # join steep segments without doubling the end
            lo, hi = (lo + 1, hi) if prev == lo else (lo, hi - 1)
        mask[lo : hi + 1, c] = True
        prev = r
    return mask


def braille(mask: np.ndarray) -> np.ndarray:
    """Cell codes (int bits 0..255) of a dot grid whose shape is a multiple of (4, 2)."""
    h, w = mask.shape
    cells = mask.reshape(h // 4, 4, w // 2, 2).astype(np.int32)
    return np.einsum("ryxc,yc->rx", cells, _BITS)


class LossChart(Widget):
    """One metric of both runs against the step: A, B, and where they overlap."""

    COMPONENT_CLASSES = {  # noqa: RUF012 - Textual's own declaration style
        "loss-chart--a",
        "loss-chart--b",
        "loss-chart--both",
        "loss-chart--axis",
        "loss-chart--title",
    }

    def __init__(self, metric: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.metric = metric
        self.curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def set_curves(self, metric: str, curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The (step, value) arrays of each side to draw."""
        self.metric = metric
        self.curves = curves
        self.refresh()

    def _title(self, log: bool) -> Text:
        """The metric's name and the legend."""
        style = self.get_component_rich_style
        title = Text(no_wrap=True, overflow="ellipsis", end="")
        title.append(
            f"{clean(self.metric)}{' (log scale)' if log else ''}  ", style("loss-chart--title")
        )
        title.append("⣿ A ", style("loss-chart--a"))
        title.append("⣿ B ", style("loss-chart--b"))
        title.append("⣿ A = B", style("loss-chart--both"))
        return title

    def _canvas_row(self, label: str, a: np.ndarray, b: np.ndarray) -> Text:
        """One row of the canvas: the y label (or the axis), then braille cells by side."""
        style = self.get_component_rich_style
        styles = {
            1: style("loss-chart--a"),
            2: style("loss-chart--b"),
            3: style("loss-chart--both"),
        }
        line = Text(
            f"{label:>{AXIS_WIDTH - 1}}┤" if label else " " * (AXIS_WIDTH - 1) + "│",
            style=style("loss-chart--axis"),
            no_wrap=True,
            end="",
        )
        kind = (a > 0).astype(int) + 2 * (b > 0).astype(int)
        codes = a | b
        start, width = 0, len(codes)
        for c in range(1, width + 1):  # one span per run of the same kind
            if c == width or kind[c] != kind[start]:
                chunk = "".join(chr(0x2800 + int(v)) if v else " " for v in codes[start:c])
                line.append(chunk, styles.get(int(kind[start])))
                start = c
        return line

    def render(self) -> RenderResult:
        """Title row, the canvas with y labels, an x axis row."""
        width, height = self.size.width, self.size.height
        style = self.get_component_rich_style
        values = [v for _, v in self.curves.values() if v.size]
        pos = np.concatenate(values) if values else np.array([])
        log = bool(pos.size) and bool(np.all(pos[np.isfinite(pos)] > 0))
        title = self._title(log)
        plot_w, plot_h = max(1, width - AXIS_WIDTH), max(1, height - 2)
        if not pos.size or height < 3 or width <= AXIS_WIDTH:
            return Text("\n").join([title, Text("no data yet", style("loss-chart--axis"))])
        ys = {s: (finite_log10(v) if log else v) for s, (_, v) in self.curves.items()}
        xs = {s: x for s, (x, _) in self.curves.items()}
        all_x = np.concatenate([x for x in xs.values() if x.size])
        all_y = np.concatenate([y[np.isfinite(y)] for y in ys.values()])
        if not all_y.size:
            return Text("\n").join([title, Text("no finite values", style("loss-chart--axis"))])
        xr = (float(all_x.min()), float(all_x.max()))
        yr = (float(all_y.min()), float(all_y.max()))
        cells = {}
        for side in SIDES:
            if side in xs:
                mask = dot_mask(xs[side], ys[side], xr, yr, plot_w * 2, plot_h * 4)
                cells[side] = braille(mask)
        a = cells.get("a", np.zeros((plot_h, plot_w), np.int32))
        b = cells.get("b", np.zeros((plot_h, plot_w), np.int32))
        lines = [title]
        axis = style("loss-chart--axis")
        top = 10 ** yr[1] if log else yr[1]
        bottom = 10 ** yr[0] if log else yr[0]
        for r in range(plot_h):
            label = f"{top:.3g}" if r == 0 else (f"{bottom:.3g}" if r == plot_h - 1 else "")
            lines.append(self._canvas_row(label, a[r], b[r]))
        left, right = f"step {xr[0]:g}", f"{xr[1]:g}"
        pad = max(1, plot_w - len(left) - len(right))
        lines.append(Text(" " * AXIS_WIDTH + left + " " * pad + right, style=axis, no_wrap=True))
        return Text("\n").join(lines)


class CurvesView(Vertical):
    """Train and test loss of both runs, one chart each; `c` swaps it with the panes (the
    `ContentSwitcher` it sits in)."""

    def __init__(self, feed: PairFeed, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.feed = feed
        self._stale = True

    def compose(self) -> ComposeResult:
        yield LossChart("train_loss", id="chart-0")
        yield LossChart("test_loss", id="chart-1")

    def action_curves(self) -> None:
        """Switch between the panes and the loss curves."""
        switcher = self.query_ancestor(ContentSwitcher)
        switcher.current = "panes" if switcher.current == self.id else self.id
        self.show(changed=False)

    def show(self, *, changed: bool = True) -> None:
        """Draw the model's decimated curves, when shown (else once shown again)."""
        self._stale |= changed
        if not self._stale or self.query_ancestor(ContentSwitcher).current != self.id:
            return
        self._stale = False
        model = self.feed.model
        metrics = curve_metrics(model.columns)
        for i in range(2):
            chart = self.query_one(f"#chart-{i}", LossChart)
            chart.display = i < len(metrics)
            if i < len(metrics):
                metric = metrics[i]
                curves = {
                    side: model.curves[(side, metric)].arrays()
                    for side in SIDES
                    if (side, metric) in model.curves
                }
                chart.set_curves(metric, curves)
