"""The Textual view against its targets (issue 9), each measured next to its target.

1. A 25,000-step pair replayed flat out through the view and through the headless reporter
   (the same session, the same batches): the difference is the cost of the view; peak memory
   of each (tracemalloc, a second pass).
2. Key lag while 1,000 steps/s arrive: a replay paced at 1,000 steps/s in the view, with a key
   (f) posted to the app every 50 ms as the terminal driver would; the lag is from the post to
   its action having run (following toggled), p95 and max.
3. Monitor CPU at 100 steps/s: the CPU time (user + system) of this process over the wall time
   while a replay paced at 100 steps/s streams through the view.
4. The browser over a store of 1,000 (or --pairs N ...) pairs: the store's read alone
   (`list_pairs`), first paint (app start to the rows on screen) and the time a filter key
   takes until the table shows its rows.
Prints, never asserts. Usage: python bench/bench_ui.py [--steps 25000] [--pairs 1000 10000]
[--browser-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # its demo pairs
from demo_pairs import write_demo, write_demo_pair

T = TypeVar("T")


def traced(fn: Callable[[], T]) -> tuple[T, float]:
    """fn's result and its peak traced memory in MB (a separate pass: tracing slows Python)."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def bench_headless(logs_dir: Path) -> float:
    """Seconds of the replay with a view that does nothing."""
    logs = resolve_logs([str(logs_dir / "a.jsonl"), str(logs_dir / "b.jsonl")])
    start = time.perf_counter()
    session = replay_session(logs, speed=1e6, on_batch=lambda b: None)
    asyncio.run(session.run())
    return time.perf_counter() - start


def bench_app(logs_dir: Path) -> tuple[float, list[float]]:
    """Seconds of the same replay in the app (Pilot), and the event loop's lateness samples:
    how long the app could not have answered a key, sampled every 10 ms."""
    from tuimon.ui.app import TuimonApp

    logs = resolve_logs([str(logs_dir / "a.jsonl"), str(logs_dir / "b.jsonl")])
    app = TuimonApp(
        store=logs_dir / "store",
        make_session=lambda on_batch: replay_session(logs, speed=1e6, on_batch=on_batch),
        replay=True,
    )
    lags: list[float] = []

    async def probe() -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t0 - 0.01)

    async def drive() -> float:
        start = time.perf_counter()
        async with app.run_test(size=(120, 40)) as pilot:
            prober = asyncio.create_task(probe())
            await pilot.pause(0.2)
            while any(w.is_running for w in app.workers):
                await pilot.pause(0.05)
            took = time.perf_counter() - start
            prober.cancel()
        return took

    took = asyncio.run(drive())
    return took, lags


def bench_paced(logs_dir: Path, speed: float, seconds: float, keys: bool) -> dict[str, float]:
    """A replay paced at `speed` steps/s in the view for about `seconds`: the CPU share of this
    process, and (with `keys`) the lag of key presses sent every 50 ms."""
    from textual import events

    from tuimon.ui.app import TuimonApp
    from tuimon.ui.pair_screen import PairScreen

    logs = resolve_logs([str(logs_dir / "a.jsonl"), str(logs_dir / "b.jsonl")])
    app = TuimonApp(
        store=logs_dir / "store",
        make_session=lambda on_batch: replay_session(logs, speed=speed, on_batch=on_batch),
        replay=True,
    )
    lags: list[float] = []

    async def drive() -> dict[str, float]:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            screen = app.screen
            assert isinstance(screen, PairScreen)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            while time.perf_counter() - wall0 < seconds:
                if keys:  # as a terminal would: a key event posted, then wait for its effect
                    before = screen.panes.follow
                    t0 = time.perf_counter()
                    app.post_message(events.Key("f", "f"))
                    while screen.panes.follow == before:
                        await asyncio.sleep(0.001)
                    lags.append(time.perf_counter() - t0)
                await asyncio.sleep(0.05)
            cpu = time.process_time() - cpu0
            wall = time.perf_counter() - wall0
            steps = screen.model.aligned_count
        lags.sort()
        return {
            "cpu": cpu / wall,
            "p95": lags[int(len(lags) * 0.95)] if lags else 0.0,
            "max": lags[-1] if lags else 0.0,
            "steps": steps,
        }

    return asyncio.run(drive())


def quick_store(store: Path, pairs: int) -> None:
    """`pairs` pair directories fast: 6 demo pairs written once, then for each pair its own
    pair.json (seed, time) beside hard links to a demo pair's logs."""
    templates = []
    for j in range(6):
        devices = (("cpu", "cpu"), ("cpu", "mps"), ("cuda", "cpu"))[j % 3]
        folder = write_demo_pair(store.parent / "templates", f"t{j}", seed=j, steps=10,
                                 devices=devices, diverge=2 if j % 3 else None)  # fmt: skip
        templates.append((folder, json.loads((folder / "pair.json").read_text())))
    store.mkdir(parents=True, exist_ok=True)
    for i in range(pairs):
        folder, doc = templates[i % len(templates)]
        target = store / f"2026010{1 + i % 9}-{i % 240000:06d}_s{i}_cpu-cpu_{i & 0xFFFF:04x}"
        target.mkdir()
        doc["seed"] = i
        doc["created"] = (
            f"2026-01-0{1 + i % 9}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        )
        (target / "pair.json").write_text(json.dumps(doc))
        for name in ("a.jsonl", "b.jsonl", "aligned.jsonl"):
            os.link(folder / name, target / name)


def bench_browser(root: Path, pairs: int) -> tuple[float, float, float, list[float]]:
    """The store's read alone, the browser's first paint (app start to the first frame with
    rows) over `pairs` pairs, the first frame with the whole store's rows, and (once they are
    shown) each filter key's lag: from the key event sent (as the
    terminal driver sends it) to the first frame composed after the filter shows its rows
    (Textual's headless driver: frames composed, not written)."""
    from textual import events

    from tuimon.store import list_pairs
    from tuimon.ui.app import TuimonApp
    from tuimon.ui.browser import BrowserScreen, PairTable

    store = root / "store"
    quick_store(store, pairs)
    start = time.perf_counter()
    list_pairs(store)
    read = time.perf_counter() - start
    start = time.perf_counter()  # first paint: from the app made (it starts the read) to rows
    app = TuimonApp(store=store)
    frames: list[float] = []
    display = app._display

    def timed_display(screen: object, renderable: object) -> None:
        display(screen, renderable)  # type: ignore[arg-type]
        if renderable is not None:
            frames.append(time.perf_counter())

    app._display = timed_display  # type: ignore[method-assign]
    keys: list[float] = []

    async def frame_after(ready: Callable[[], bool]) -> float:
        """When the first frame composed after `ready()` came true was."""
        while not ready():
            await asyncio.sleep(0.0005)
        seen = time.perf_counter()
        while not frames or frames[-1] < seen:
            await asyncio.sleep(0.0005)
        return next(f for f in frames if f >= seen)

    async def press(key: str, char: str | None, query: str) -> None:
        screen = app.screen
        assert isinstance(screen, BrowserScreen) and app._driver is not None
        t0 = time.perf_counter()
        app._driver.send_message(events.Key(key, char))
        table = screen.query_one(PairTable)
        keys.append(await frame_after(
            lambda: screen.query_text == query and table.row_count == len(screen.shown)
        ) - t0)  # fmt: skip

    async def drive() -> tuple[float, float]:
        async with app.run_test(size=(120, 40)) as pilot:
            first = await frame_after(
                lambda: (
                    isinstance(s := app.screen, BrowserScreen)
                    and s.query_one(PairTable).row_count > 0
                )
            )
            whole = await frame_after(
                lambda: (
                    isinstance(s := app.screen, BrowserScreen)
                    and s.listing.complete
                    and s.query_one(PairTable).row_count == pairs
                )
            )
            await pilot.press("slash")
            await pilot.pause(0.2)
            for query in ("s", "s1", "s12"):  # narrower and narrower
                await press(query[-1], query[-1], query)
                await pilot.pause(0.1)
            for query in ("s1", "s", ""):
                await press("backspace", None, query)
                await pilot.pause(0.1)
        return first - start, whole - start

    return read, *asyncio.run(drive()), keys


def print_browser(
    pairs: int, read: float, first: float, whole: float, filters: list[float]
) -> None:
    """One line for a browser measure."""
    keys = ", ".join(f"{k * 1000:.0f}" for k in sorted(filters))
    print(f"browser, {pairs:,} pairs: first paint {first:.2f} s (target <= 0.5 s), every pair "
          f"shown {whole:.2f} s; the store's first read (list_pairs alone, no index yet) "
          f"{read:.2f} s; once all are shown, filter keys s 1 2 then 3 "
          f"backspaces, key to frame: "
          f"{keys} ms sorted (target <= 50 ms); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=25_000)
    parser.add_argument("--pairs", type=int, nargs="+", default=[1000])
    parser.add_argument("--browser-only", action="store_true", help="only the browser rows")
    args = parser.parse_args()
    if args.browser_only:
        for pairs in args.pairs:
            with tempfile.TemporaryDirectory() as tmp:
                print_browser(pairs, *bench_browser(Path(tmp), pairs))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_demo(root, steps=args.steps, diverge=2)
        size = sum(p.stat().st_size for p in root.glob("*.jsonl")) / 2**20
        print(f"pair: 2 x {args.steps} steps, {size:.1f} MB of logs")
        h_time = bench_headless(root)
        a_time, _ = bench_app(root)
        _, h_peak = traced(lambda: bench_headless(root))
        _, a_peak = traced(lambda: bench_app(root))
        keyed = bench_paced(root, 1000, 5.0, keys=True)
        idle = bench_paced(root, 100, 10.0, keys=False)
        browsed = [(n, *bench_browser(root / f"browser{n}", n)) for n in args.pairs]
    print(f"{'':28}{'seconds':>10}{'peak MB':>10}{'steps/s':>12}")
    print(f"{'headless replay':28}{h_time:10.2f}{h_peak:10.1f}{args.steps / h_time:12.0f}")
    print(f"{'Textual pair view replay':28}{a_time:10.2f}{a_peak:10.1f}{args.steps / a_time:12.0f}")
    print(f"view / headless: time {a_time / h_time:.2f}x, memory {a_peak / h_peak:.2f}x")
    rows = [
        ("replay flat out, Textual view", f"{args.steps / a_time:,.0f} steps/s", ">= 20,000/s"),
        ("  same replay, headless (engine)", f"{args.steps / h_time:,.0f} steps/s", "(ceiling)"),
        ("key lag at 1,000 steps/s, p95", f"{keyed['p95'] * 1000:.0f} ms "
         f"(max {keyed['max'] * 1000:.0f})", "<= 100 ms"),
        ("monitor CPU at 100 steps/s", f"{idle['cpu'] * 100:.1f}% of a core", "<= 10%"),
    ]  # fmt: skip
    for n, read, first, _whole, filters in browsed:
        filters.sort()
        rows += [
            (f"browser, {n:,} pairs: first paint", f"{first:.2f} s (read {read:.2f})", "<= 0.5 s"),
            ("browser: filter key, max", f"{filters[-1] * 1000:.0f} ms "
             f"(median {filters[len(filters) // 2] * 1000:.0f})", "<= 50 ms"),
        ]  # fmt: skip
    print()
    print(f"{'Textual view':36}{'measured':>26}   target")
    for name, got, target in rows:
        print(f"{name:36}{got:>26}   {target}")


if __name__ == "__main__":
    main()
