"""Inside the pair view: where a frame's time goes, and the lag from a key to the frame after it.

Runs `tuimon ARGS...` (any command that opens the view, e.g. `replay A B --speed 1000`) in this
process with timers around Textual's frame (`Screen._on_timer_update`), each widget's
`render_lines`, the session's flush and the cyclic collector, and writes a report when the app
exits: total and max milliseconds per item over the steady state (from `--settle` seconds on),
and each key's lag from its arrival (the event's time) to the end of the next frame, p50 / p95
/ max. Run it in tmux and send keys (`tmux send-keys w`) to measure the lag without tmux's own
capture in it; `bench_view_tmux.py` measures key to pixels. Prints, never asserts.

    python bench/view_probe.py --report /tmp/probe.txt -- replay A B --speed 1000
"""

from __future__ import annotations

import argparse
import atexit
import collections
import gc
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

from tuimon.cli import main as tuimon_main
from tuimon.engine.sources.session import PairSession

total: collections.Counter[str] = collections.Counter()
count: collections.Counter[str] = collections.Counter()
worst: collections.Counter[str] = collections.Counter()
keys: list[float] = []
lags: list[float] = []


def note(what: str, seconds: float) -> None:
    total[what] += seconds
    count[what] += 1
    worst[what] = max(worst[what], seconds)


def timed(cls: type, name: str, label: Callable[[Any], str]) -> None:
    """Wrap `cls.name` so each call's time is noted under `label(self)`."""
    original = getattr(cls, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            note(label(self), time.perf_counter() - start)

    setattr(cls, name, wrapper)


def frame_done() -> None:
    """A frame ended: the key waiting for it (if any) has its lag."""
    if keys:
        lags.append(time.monotonic() - keys[0])
        keys.clear()


def install() -> None:
    timed(Widget, "render_lines", lambda w: f"render {type(w).__name__}#{w.id or ''}")
    timed(PairSession, "_flush", lambda s: "session flush")
    original_frame = Screen._on_timer_update

    def frame(self: Screen[Any]) -> None:
        start = time.perf_counter()
        try:
            original_frame(self)
        finally:
            note("FRAME", time.perf_counter() - start)
            frame_done()

    Screen._on_timer_update = frame  # type: ignore[method-assign]
    original_event = App.on_event

    async def on_event(self: App[Any], event: events.Event) -> None:
        if isinstance(event, events.Key):
            keys.append(event.time)  # the monotonic time it was made, in the driver's thread
        await original_event(self, event)

    App.on_event = on_event  # type: ignore[method-assign]
    started: dict[str, float] = {}

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        elif "t" in started:
            note(f"gc generation {info['generation']}", time.perf_counter() - started.pop("t"))

    gc.callbacks.append(collected)


def report(path: Path) -> None:
    lines = [f"{'total ms':>9} {'calls':>6} {'max ms':>7}  item (steady state)"]
    for what, seconds in total.most_common(25):
        lines.append(f"{seconds * 1e3:9.1f} {count[what]:6d} {worst[what] * 1e3:7.1f}  {what}")
    if lags:
        ms = sorted(x * 1e3 for x in lags)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        lines.append(
            f"key to the end of the next frame: {len(ms)} keys, p50 {ms[len(ms) // 2]:.0f} ms, "
            f"p95 {p95:.0f} ms, max {ms[-1]:.0f} ms"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", type=Path, required=True, help="where the report goes")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds not counted at start")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then tuimon's arguments")
    ns = ap.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    install()

    def settle() -> None:
        for table in (total, count, worst):
            table.clear()
        lags.clear()

    timer = threading.Timer(ns.settle, settle)
    timer.daemon = True
    timer.start()
    atexit.register(report, ns.report)
    return tuimon_main(args)


if __name__ == "__main__":
    sys.exit(main())
