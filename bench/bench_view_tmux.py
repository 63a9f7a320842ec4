"""The pair view in a real terminal (tmux), beside the same replay headless.

1. A 25,000-step pair replayed headless flat out (stdout a pipe): steps/s of the engine alone.
2. The same pair in the TUI in tmux (120x40) at 100 and at 1,000 steps/s: CPU of the tuimon
   process (user + system from /proc/PID/stat) over a window of wall time after a settle
   ("steady"), and from its start to the window's end ("from start": its imports, the first
   blocks read and the judge that runs beside the feed included). Each rate in `--rounds`
   rounds; with `--before DIR` (a copy of the code before a change) the two trees alternate
   in each round, and the table at the end puts both rates of both trees side by side:
   median [min-max] of the rounds.
3. Key lag while 1,000 steps/s arrive: `w` sent with `tmux send-keys`, the time until the
   pane's column header on screen changes (capture-pane polled), p50 / p95 / max. This is key to
   pixels: it includes tmux and the terminal side.
4. The TUI flat out (--speed 1e6): wall time until the screen says "finished", as steps/s.

Prints, never asserts. Linux only (/proc). Usage:
    python bench/bench_view_tmux.py [--steps 25000] [--window 10] [--rounds 3] [--keys 20]
        [--before DIR] [--size 120x40]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # its demo pairs
from demo_pairs import write_demo

SESSION = f"tuimon-bench-view-{os.getpid()}"
TICKS = os.sysconf("SC_CLK_TCK")
RATES = ((100, 5.0), (1000, 15.0))
"""Steps a second, and the target CPU of the view in % of a core."""
SIZE = ("120", "40")
PYCACHE: Path | None = None
"""Where the children write their bytecode (a temporary folder, never the checkout): a
tuimon installed has its modules compiled, so the view's start is measured with them
compiled too, whatever PYTHONDONTWRITEBYTECODE this shell has (with it set, each start
compiled ~130 modules: ~0.6 s of CPU in "from start")."""


def child_env() -> dict[str, str]:
    """This process's environment for a child: bytecode written under `PYCACHE`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if PYCACHE is not None:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def warm_up(a: Path, b: Path, workdir: Path, code: str | None) -> None:
    """One replay of the view flat out (not counted): the bytecode of every module it imports
    (tuimon's, textual's, the standard library's) written under `PYCACHE`."""
    start_view(a, b, 1e6, workdir, code)
    wait_screen(lambda s: "finished" in s.splitlines()[0], 120)
    tmux("kill-session", "-t", SESSION)


def tmux(*args: str) -> str:
    """Run a tmux command; its stdout."""
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def start_view(a: Path, b: Path, speed: float, workdir: Path, code: str | None = None) -> int:
    """The replay's TUI in a fresh tmux session (the tree `code` on PYTHONPATH, else this
    process's); the pid of the tuimon process."""
    tmux("kill-session", "-t", SESSION)
    path = code if code is not None else os.environ.get("PYTHONPATH", "")
    env = f"-u PYTHONDONTWRITEBYTECODE PYTHONPATH={shlex.quote(path)}"
    if PYCACHE is not None:
        env += f" PYTHONPYCACHEPREFIX={shlex.quote(str(PYCACHE))}"
    cmd = (
        f"cd {shlex.quote(str(workdir))} && exec env {env} {shlex.quote(sys.executable)} "
        f"-m tuimon replay {shlex.quote(str(a))} {shlex.quote(str(b))} --speed {speed:g}"
    )
    pid = None
    for _ in range(3):  # the tmux server is shared: a session now and then fails to start
        tmux("new-session", "-d", "-s", SESSION, "-x", SIZE[0], "-y", SIZE[1], cmd)
        panes = tmux("list-panes", "-t", SESSION, "-F", "#{pane_pid}").split()
        if panes:
            pid = int(panes[0])
            break
        time.sleep(1)
    if pid is None:
        raise SystemExit(f"tmux did not start the view: {cmd}")
    wait_screen(lambda s: "step" in s and "train_loss" in s, 30)
    return pid


def screen() -> str:
    """The pane's text now."""
    return tmux("capture-pane", "-p", "-t", SESSION)


def wait_screen(ready, timeout: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds until `ready(screen text)`, or the timeout."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if ready(screen()):
            break
        time.sleep(0.01)
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def cpu_percent(pid: int, window: float) -> float:
    """The process's CPU over `window` seconds of wall time, in % of one core."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(window)
    return 100 * (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)


def header_line() -> str:
    """The panes' column header row (it changes when `w` toggles every digit)."""
    return next((line for line in screen().splitlines() if "train_loss" in line), "")


def key_lags(count: int) -> list[float]:
    """Seconds from `tmux send-keys w` to the header row changing on screen, `count` times."""
    lags = []
    for _ in range(count):
        before = header_line()
        start = time.perf_counter()
        tmux("send-keys", "-t", SESSION, "w")
        while header_line() == before and time.perf_counter() - start < 5:
            time.sleep(0.002)
        lags.append(time.perf_counter() - start)
        time.sleep(0.15)
    return lags


def headless_rate(a: Path, b: Path, steps: int, workdir: Path) -> float:
    """Steps/s of the same replay headless, flat out (stdout a pipe)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tuimon", "replay", str(a), str(b), "--headless"],
        cwd=workdir,
        env=child_env(),
        capture_output=True,
        check=False,
    )
    return steps / (time.perf_counter() - start)


def measure(
    a: Path, b: Path, speed: float, work: Path, code: str | None, settle: float, window: float
) -> tuple[float, float]:
    """(steady, from start) CPU of the view at `speed`, in % of a core."""
    launched = time.perf_counter()
    pid = start_view(a, b, speed, work, code)
    time.sleep(settle)
    steady = cpu_percent(pid, window)
    since = 100 * cpu_seconds(pid) / (time.perf_counter() - launched)
    tmux("kill-session", "-t", SESSION)
    return steady, since


def spread(values: list[float]) -> str:
    """median [min-max], in % of a core."""
    return f"{statistics.median(values):.1f}% [{min(values):.1f}-{max(values):.1f}]"


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> None:
    """Measure and print each number beside its target."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--window", type=float, default=10.0, help="seconds of CPU sampling")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before the window")
    ap.add_argument("--rounds", type=int, default=1, help="measurements of each rate and tree")
    ap.add_argument("--before", help="a copy of the code before (its root goes on PYTHONPATH)")
    ap.add_argument("--keys", type=int, default=20, help="key lag samples (0: none)")
    ap.add_argument("--no-flat-out", action="store_true", help="skip the TUI flat out")
    ap.add_argument("--size", default="120x40", help="the tmux window, COLSxROWS")
    args = ap.parse_args()
    global SIZE, PYCACHE
    cols, rows = args.size.split("x")
    SIZE = (cols, rows)
    trees: dict[str, str | None] = {"this tree": None}
    if args.before:
        trees["before"] = str(Path(args.before).resolve())
    got: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        PYCACHE = work / "pycache"
        a, b = write_demo(work / "logs", steps=args.steps, diverge=2)
        for code in trees.values():
            warm_up(a, b, work, code)
        rate = headless_rate(a, b, args.steps, work)
        print(f"headless replay flat out: {rate:,.0f} steps/s ({args.steps:,} steps)")
        for round_ in range(1, args.rounds + 1):
            order = list(trees.items())
            if round_ % 2 == 0:
                order.reverse()  # alternate which tree goes first
            for name, code in order:
                for speed, target in RATES:
                    steady, since = measure(a, b, speed, work, code, args.settle, args.window)
                    got.setdefault((name, speed), []).append((steady, since))
                    print(
                        f"round {round_} {name}: TUI at {speed:,} steps/s: CPU {steady:.1f}% "
                        f"of a core steady, {since:.1f}% from start (target <= {target:g}%; "
                        f"load {load()})",
                        flush=True,
                    )
        print(
            f"\nCPU of the view, {args.size}, {args.window:g} s after {args.settle:g} s "
            f"settle, median [min-max] of {args.rounds} round(s):"
        )
        head = "| tree | " + " | ".join(
            f"{speed:,} steps/s steady (<= {target:g}%) | from start" for speed, target in RATES
        )
        print(head + " |")
        print("|---" * (1 + 2 * len(RATES)) + "|")
        for name in trees:
            cells = []
            for speed, _ in RATES:
                runs = got[(name, speed)]
                cells += [spread([s for s, _ in runs]), spread([f for _, f in runs])]
            print(f"| {name} | " + " | ".join(cells) + " |")
        if args.keys:
            start_view(a, b, 1000, work)
            time.sleep(args.settle)
            lags = sorted(key_lags(args.keys))
            p95 = lags[min(len(lags) - 1, int(0.95 * len(lags)))]
            print(
                f"key lag at 1,000 steps/s (send-keys to screen): p50 "
                f"{statistics.median(lags) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms, max "
                f"{lags[-1] * 1e3:.0f} ms (target p95 <= 50 ms)"
            )
            tmux("kill-session", "-t", SESSION)
        if not args.no_flat_out:
            start_view(a, b, 1e6, work)
            took = wait_screen(lambda s: "finished" in s.splitlines()[0], 600)
            print(
                f"TUI flat out: {args.steps / took:,.0f} steps/s ({took:.1f} s to 'finished'; "
                f"headless {rate:,.0f}; target >= 20,000)"
            )
            tmux("kill-session", "-t", SESSION)


if __name__ == "__main__":
    main()
