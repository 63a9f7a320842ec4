"""A 25,000-step pair through the live view against the headless reporter, side by side.

Both replay the same two logs as fast as the engine goes (the same session, the same batches);
the difference is the cost of the Textual view. Also prints the peak memory (tracemalloc, in a
second pass) of each, and how late the app's event loop ran while the replay streamed (how long
a key press would wait). Prints, never asserts. Usage: python bench/bench_ui.py [--steps 25000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tuimon.demo import write_demo
from tuimon.replay import replay_session, resolve_logs

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=25_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_demo(root, steps=args.steps, diverge=2)
        size = sum(p.stat().st_size for p in root.glob("*.jsonl")) / 2**20
        print(f"pair: 2 x {args.steps} steps, {size:.1f} MB of logs")
        h_time = bench_headless(root)
        a_time, lags = bench_app(root)
        _, h_peak = traced(lambda: bench_headless(root))
        _, a_peak = traced(lambda: bench_app(root))
    print(f"{'':28}{'seconds':>10}{'peak MB':>10}{'steps/s':>12}")
    print(f"{'headless replay':28}{h_time:10.2f}{h_peak:10.1f}{args.steps / h_time:12.0f}")
    print(f"{'Textual pair view replay':28}{a_time:10.2f}{a_peak:10.1f}{args.steps / a_time:12.0f}")
    print(f"view / headless: time {a_time / h_time:.2f}x, memory {a_peak / h_peak:.2f}x")
    lags.sort()
    p99 = lags[int(len(lags) * 0.99)] if lags else 0.0
    print(
        f"event-loop lateness during the view replay (a key waits this long): "
        f"median {lags[len(lags) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {lags[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
