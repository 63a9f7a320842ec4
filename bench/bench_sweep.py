"""Benchmark: one monitor with many live pairs (a sweep), at a fixed step rate per run.

    python bench/bench_sweep.py [--pairs 64] [--rate 10] [--seconds 15] [--keys 60]

Starts a sweep of `--pairs` pairs, all at once, of fake runs (a `python -c` script like
tests/fake_trainer.py: a header, then one step line a `1/rate` s with seven metrics and nine
tensor digests, as the reference workload logs them). Once every pair runs, it measures over
`--seconds`, twice, side by side in one run:

  (1) headless   the engine alone (`Sweep.run`, as `sweep --headless`)
  (2) TUI        the sweep screen in a headless Textual app (`App.run_test`), and the lag of
                 `--keys` key presses spread over the window (down/up in the table, put on the
                 app's queue as a terminal's keys arrive: from the press to the table's cursor
                 having moved, i.e. the event loop's delay in handling it; the repaint follows
                 on the next refresh)

For each: the monitor's memory per live pair (RSS growth over the monitor before the sweep,
divided by the pairs), its CPU per live pair (user+sys of the monitor's process, all threads,
over the window, in % of one core), and the watchdog shells' memory (one /bin/sh per run, a
process of its own). The runs' own cost is not the monitor's and is not counted. Prints the
numbers against the targets (<= 20 MB and <= 0.5% of a core per pair, key lag p95 <= 100 ms);
never asserts. On a busy machine, CPU and lag include the wait for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Sweep

FAKE = r"""
import json, sys, time
steps, pause = int(sys.argv[1]), float(sys.argv[2])
names = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U")
print(json.dumps({"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0},
                  "hyper": {"steps": steps}, "env": {"device": "cpu"}}), flush=True)
start = time.monotonic()
for i in range(steps):
    loss = 1.0 / (i + 1)
    digests = {n: f"{hash((n, i)) & 0xffffffff:08x}" for n in names}
    print(json.dumps({"type": "step", "step": i, "t": time.monotonic() - start,
                      "train_loss": loss, "test_loss": 2 * loss, "train_acc": 1 - loss,
                      "test_acc": 1 - 2 * loss, "lr": 1e-3, "grad_norm": loss / 3,
                      "weight_norm": 10 + loss, "param_digest": "".join(digests.values()),
                      "param_digests": digests}), flush=True)
    time.sleep(max(0.0, start + (i + 1) * pause - time.monotonic()))
"""
TARGET_MB, TARGET_CPU, TARGET_LAG = 20.0, 0.5, 0.100


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process, MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def watchdogs_mb() -> tuple[int, float]:
    """The watchdog shells of this monitor: how many, their resident memory in MB."""
    count, total = 0, 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"tuimon-watchdog" in cmd and b"/bin/sh" in cmd:
            count += 1
            total += rss_mb(proc.name)
    return count, total


def cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def make_sweep(store: Path, pairs: int, rate: float, seconds: float) -> Sweep:
    steps = int(rate * (seconds + 300))  # longer than the window: they are stopped after it
    template = (sys.executable, "-c", FAKE, str(steps), str(1.0 / rate))
    plan = PairPlan(None, ("cpu", "cpu"), (1, 1), False, None, template=template)
    return Sweep.create(store, plan, list(range(pairs)), 1, pairs)


async def all_running(sweep: Sweep, pairs: int, within: float = 300.0) -> None:
    """Until every pair runs and both sides of each have logged a step."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        sessions = list(sweep.sessions.values())
        if len(sessions) == pairs and all(
            s.records for session in sessions for s in session.sides.values()
        ):
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"the {pairs} pairs were not all running within {within:g} s")


async def window(seconds: float) -> tuple[float, float]:
    """CPU seconds of the monitor over `seconds` of wall time; (cpu, wall)."""
    c0, t0 = cpu_s(), time.monotonic()
    await asyncio.sleep(seconds)
    return cpu_s() - c0, time.monotonic() - t0


async def headless(store: Path, args: argparse.Namespace, base: float) -> dict[str, float]:
    sweep = make_sweep(store, args.pairs, args.rate, args.seconds)
    task = asyncio.create_task(sweep.run())
    await all_running(sweep, args.pairs)
    cpu, wall = await window(args.seconds)
    result = measure(args, base, cpu, wall, sweep)
    sweep.stop()
    await task
    return result


def measure(
    args: argparse.Namespace, base: float, cpu: float, wall: float, sweep: Sweep
) -> dict[str, float]:
    dogs, dogs_mb = watchdogs_mb()
    steps = sum(s.records for se in sweep.sessions.values() for s in se.sides.values())
    return {
        "mb_per_pair": (rss_mb() - base) / args.pairs,
        "cpu_per_pair": 100 * cpu / wall / args.pairs,
        "dog_mb_per_pair": dogs_mb / args.pairs,
        "watchdogs": dogs,
        "steps_seen": steps,
    }


async def tui(store: Path, args: argparse.Namespace, base: float) -> dict[str, float]:
    from textual import events

    from tuimon.ui.app import GC_THRESHOLD, TuimonApp
    from tuimon.ui.sweep_table import SweepTable

    sweep = make_sweep(store, args.pairs, args.rate, args.seconds)
    app = TuimonApp(store=store, sweep=sweep)
    gc.set_threshold(*GC_THRESHOLD)  # as `run_app` runs the app
    async with app.run_test(size=(160, 50)) as pilot:
        await all_running(sweep, args.pairs)
        c0, t0 = cpu_s(), time.monotonic()
        lags = []
        table = app.screen.query_one("#jobs", SweepTable)
        down = True
        for _ in range(args.keys):
            before = table.cursor_row
            start = time.perf_counter()
            if before in (0, table.row_count - 1):  # turn at either end of the table
                down = before == 0
            key = events.Key("down" if down else "up", None)
            key.set_sender(app)
            app._driver.send_message(key)  # type: ignore[union-attr]  # as a terminal's key arrives
            while table.cursor_row == before and time.perf_counter() - start < 10:
                await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - start)
            await asyncio.sleep(max(0.0, args.seconds / args.keys - lags[-1]))
        result = measure(args, base, cpu_s() - c0, time.monotonic() - t0, sweep)
        lags.sort()
        result["lag_p50"] = statistics.median(lags)
        result["lag_p95"] = lags[int(0.95 * (len(lags) - 1))]
        sweep.stop()
        while sweep.sessions:
            await pilot.pause(0.2)
        app.exit(0)
    return result


def report(name: str, r: dict[str, float]) -> None:
    """The numbers against the targets."""

    def ok(good: bool) -> str:
        return "ok" if good else "OVER"

    mb, cpu, dogs = r["mb_per_pair"], r["cpu_per_pair"], int(r["watchdogs"])
    mb_ok, cpu_ok = ok(mb <= TARGET_MB), ok(cpu <= TARGET_CPU)
    print(f"{name}:")
    print(f"  monitor memory per live pair  {mb:7.2f} MB  (<= {TARGET_MB:g}: {mb_ok})")
    print(f"  monitor CPU per live pair     {cpu:7.3f} %  (<= {TARGET_CPU:g}: {cpu_ok})")
    print(f"  watchdog shells               {dogs} x, {r['dog_mb_per_pair']:.2f} MB per pair")
    if "lag_p95" in r:
        p50, p95 = r["lag_p50"] * 1000, r["lag_p95"] * 1000
        good = ok(r["lag_p95"] <= TARGET_LAG)
        print(f"  key lag p50 / p95             {p50:7.1f} / {p95:.1f} ms (p95 <= 100: {good})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=64)
    p.add_argument("--rate", type=float, default=10.0, help="steps per second of each run")
    p.add_argument("--seconds", type=float, default=15.0, help="the measured window")
    p.add_argument("--keys", type=int, default=60, help="key presses in the TUI window")
    p.add_argument("--only", choices=("headless", "tui"), default=None)
    args = p.parse_args()
    import textual.app  # noqa: F401 - loaded before the baseline, as the TUI case needs it

    if args.only is None:
        print(f"{args.pairs} live pairs at {args.rate:g} steps/s per run, {os.cpu_count()} cores, "
              f"window {args.seconds:g} s", flush=True)  # fmt: skip
    if args.only is None:  # each case in a fresh process: memory freed by one is not reused
        import subprocess

        for case in ("headless", "tui"):
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--only", case], check=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="tuimon-bench-sweep-") as tmp:
        if args.only in (None, "headless"):
            base = rss_mb()
            report("(1) headless (engine only)", asyncio.run(headless(Path(tmp) / "h", args, base)))
        if args.only in (None, "tui"):
            base = rss_mb()
            report("(2) TUI (sweep screen)", asyncio.run(tui(Path(tmp) / "t", args, base)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
