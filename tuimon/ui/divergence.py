"""The panel under the panes: where the runs part, the divergence sparkline, the verdict so far."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import Static

from tuimon.engine.judge.verdict import VERDICTS
from tuimon.report.wording import WAITING
from tuimon.ui.pair_model import DIVERGENCE, PairFeed
from tuimon.ui.series import EQUAL_LEVEL, ZERO_LEVEL
from tuimon.ui.sparkbars import SparkBars
from tuimon.ui.statics import show_text
from tuimon.ui.text import clean, sci


def spark_data(levels: list[float]) -> tuple[list[float], float | None, float | None, float]:
    """Sparkline values with bitwise-equal steps at a floor below every real level.

    Returns (values, lowest real level, highest real level, the floor); the levels are log10
    relative differences, so the floor always draws lower than the smallest real difference,
    and only a bitwise-equal step is at it (`SparkBars` draws the floor alone as its lowest
    bar, the legend's "bitwise equal"). Levels are rounded to 1e-6 first: a last-bit
    difference in log10 between CPUs (SIMD kernels) must not move a bar.
    """
    levels = [round(v, 6) for v in levels]
    real = [v for v in levels if v > ZERO_LEVEL]
    if not real:
        floor = EQUAL_LEVEL
        return [floor if v <= EQUAL_LEVEL else ZERO_LEVEL for v in levels], None, None, floor
    lo, hi = min(real), max(real)
    gap = max(1.0, (hi - lo) * 0.25)
    floor, zero = lo - gap, lo - gap / 2
    out = [floor if v <= EQUAL_LEVEL else zero if v <= ZERO_LEVEL else v for v in levels]
    return out, lo, hi, floor


class DivergencePanel(Vertical):
    """First divergence, a bounded sparkline of log10 divergence, current/max, the verdict."""

    _verdict = ""
    _message: str | None = None
    _note_timer: Timer | None = None
    notes: deque[str]
    """The last notes shown (tests read them)."""

    def __init__(self, feed: PairFeed, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.feed = feed
        self.series = DIVERGENCE
        """What the sparkline follows: the divergence, or a shared metric (`m`)."""
        self.notes = deque(maxlen=20)

    def compose(self) -> ComposeResult:
        yield Static(Text("no step compared yet"), id="first-divergence")
        with Horizontal(id="spark-row"):
            yield SparkBars(id="spark")
            yield Static(Text(""), id="spark-legend")
        with Horizontal(id="numbers-row"):
            yield Static(Text(""), id="numbers")
            yield Static(Text(""), id="verdict")
        yield Static(Text(""), id="message")

    def action_cycle_metric(self) -> None:
        """The sparkline follows the next shared metric (then the divergence again)."""
        names = self.feed.model.series_names()
        at = names.index(self.series) + 1 if self.series in names else 0
        self.series = names[at % len(names)]
        self.show()
        self.screen.notify(f"sparkline follows {clean(self.series, 80)}", markup=False, timeout=2)

    def show(self) -> None:
        """Draw what the model holds, the sparkline following `series`."""
        model, series = self.feed.model, self.series
        first = self.query_one("#first-divergence", Static)
        show_text(first, Text(model.first_line(), no_wrap=True, overflow="ellipsis"))
        first.set_class(model.first_divergent_step is not None, "diverged")
        bucket = model.spark.get(series) or model.spark[DIVERGENCE]
        values, lo, hi, floor = spark_data(bucket.data())
        self.query_one("#spark", SparkBars).set_data(values, floor=floor)
        legend = Text(no_wrap=True, overflow="ellipsis")
        legend.append(f"{clean(series)} (m)\n", "bold")
        if lo is None:
            legend.append("log10: –\n")
        else:
            legend.append(f"log10 {lo:.1f} … {hi:.1f}\n")
        legend.append("▁ bitwise equal")
        show_text(self.query_one("#spark-legend", Static), legend)

        summary = model.summary
        numbers = Text(no_wrap=True, overflow="ellipsis")
        waiting = model.aligned_count == 0 and not model.done
        if not waiting:
            numbers.append(f"now {sci(model.current)}")
        if summary is not None and not waiting:
            at = summary.max_divergence_step
            numbers.append(f" · max {sci(summary.max_divergence)}")
            if at is not None and summary.max_divergence:
                numbers.append(f" at step {at}")
        if not waiting:
            numbers.append(f" · {model.aligned_count} steps compared")
            skipped = summary.accounts if summary is not None else {}
            counts = {s: sum(a.get("skipped", {}).values()) for s, a in skipped.items()}
            if any(counts.values()):  # lines that looked like records, not read: said
                numbers.append(" · skipped " + ", ".join(f"{s} {n}" for s, n in counts.items()))
        if bucket.width > 1:
            numbers.append(f" · {bucket.width} steps/bar")
        show_text(self.query_one("#numbers", Static), numbers)

        verdict_widget = self.query_one("#verdict", Static)
        verdict = summary.verdict if summary is not None else None
        label = "verdict" if model.done else "verdict so far"
        if waiting:
            verdict = None
        shown = WAITING if waiting else f"{label}: {verdict or '–'}"
        if shown != self._verdict:  # its width follows its text: a layout only when it changes
            self._verdict = shown
            verdict_widget.update(Text(shown, no_wrap=True))
        for name in VERDICTS:
            verdict_widget.set_class(verdict == name, f"verdict-{name.lower()}")
        self._message = model.message or self._message
        if model.message and self._note_timer is None:
            show_text(
                self.query_one("#message", Static),
                Text(clean(model.message), no_wrap=True, overflow="ellipsis"),
            )

    def say(self, message: str) -> None:
        """Replace the status line."""
        self._message = message
        if self._note_timer is None:
            show_text(self.query_one("#message", Static), Text(clean(message), no_wrap=True))

    def note(self, message: str, *, severity: str = "information", timeout: float = 4) -> None:
        """A passing note on the status line for `timeout` seconds, then the status again (a
        toast would cover pane B's rows on a narrow terminal)."""
        if self._note_timer is not None:
            self._note_timer.stop()
        # lines joined first, then each cleaned (cleaned first, a newline showed as a literal ^J)
        line = " · ".join(clean(part, None) for part in message.splitlines() if part.strip())
        widget = self.query_one("#message", Static)
        show_text(widget, Text(line, no_wrap=True, overflow="ellipsis"))
        widget.set_class(severity == "error", "note-error")
        widget.set_class(severity == "warning", "note-warning")
        widget.add_class("note")
        self.notes.append(line)
        self._note_timer = self.set_timer(max(0.5, timeout), self._end_note)

    def _end_note(self) -> None:
        self._note_timer = None
        widget = self.query_one("#message", Static)
        widget.remove_class("note", "note-error", "note-warning")
        text = Text(clean(self._message or ""), no_wrap=True, overflow="ellipsis")
        show_text(widget, text)
