"""tuimon's start: seconds until `tuimon replay A B`'s first row is on screen, beside `wandb
leet A`'s, and what tuimon imports before it (issue 42: tuimon's first row no later than leet's).

For each of ROUNDS rounds, one after the other, alternated so the machine's load falls on all:

- `wandb leet A` in tmux (200 x 50): seconds until its summary shows a `_step`;
- `tuimon replay --speed 1e9 A B` in tmux, once for each `--tree` (a checkout of tuimon, put
  first on PYTHONPATH: e.g. main beside a branch): seconds until a step row is on screen;
- per tree, a probe (no terminal: Textual headless) run under `python -X importtime` (which
  slows imports): seconds from the process's start until the view's session handed the view its
  first aligned rows (drawn on the next frame), the import time summed over every module
  imported, how many modules, and the tuimon modules with the largest cumulative import time.

Each number is printed with the load average (1 min) read just before it. The capture is polled
every POLL s; after each viewer, its processes are waited for (a tuimon whose terminal hung up
reads on while it saves), so none shares the CPU with the next one; the trees take turns going
first. Prints, never asserts. With no wandb run given, A and B are written as
`bench_wandb_leet.py` writes them (`--dir` keeps them):

    python bench/bench_startup.py [--tree /work/main --tree .] [--rounds 3] [--dir DIR]
    python bench/bench_startup.py --runs A B    # two run folders (or logs) already there
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_wandb_leet import _tree  # the process tree under a pid (/proc)

POLL = 0.05
PROBE = r"""
import sys, threading
import tuimon.ui.app as app
from tuimon.cli import main

shown = threading.Event()
Init = app.TuimonApp.__init__

def init(self, **kw):
    make = kw.get("make_session")
    if make is not None:
        def wrapped(on_batch):
            def noted(batch):
                on_batch(batch)
                if batch.aligned:
                    shown.set()
            return make(noted)
        kw["make_session"] = wrapped
    Init(self, **kw)

async def pilot(p):
    while not shown.is_set():
        await p.pause(0.01)
    # not `await p.pause()`: it waits for the app to be idle, up to 1 s while batches arrive
    print("FIRST", flush=True)
    p.app.exit(0)

Run = app.TuimonApp.run
app.TuimonApp.__init__ = init
app.TuimonApp.run = lambda self, **kw: Run(self, headless=True, auto_pilot=pilot)
app.terminate_leftovers = lambda sessions: [s.stop() for s in sessions]
import tuimon.commands.replay as replay
replay.terminal = lambda command: True
sys.exit(main(["replay", "--speed", "1e9", *sys.argv[1:]]))
"""
STEP_ROW = re.compile(r"│\s+\d+ +-?\d")
LEET_ROW = re.compile(r"_step\s+\d+")


def load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def first_row(name: str, command: str, row: re.Pattern[str], limit: float) -> float | None:
    """Start `command` in a tmux session (200 x 50): seconds until `row` is on its screen."""
    session = f"startup-bench-{name}-{os.getpid()}"
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    new = ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", command]
    for _ in range(5):  # a tmux server whose last session just ended may refuse once
        began = time.perf_counter()
        if subprocess.run(new, capture_output=True).returncode == 0:
            break
        time.sleep(0.5)
    shown = ["tmux", "display", "-p", "-t", session, "#{pane_pid}"]
    pane = int(subprocess.run(shown, capture_output=True, text=True, check=True).stdout)
    pids: set[int] = set()
    try:
        while (now := time.perf_counter() - began) < limit:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout
            pids.update(_tree(pane))
            if row.search(screen):
                return now
            time.sleep(POLL)
    finally:
        pids.update(_tree(pane))
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        _reap(pids)
    return None


def _reap(pids: set[int], wait: float = 30.0) -> None:
    """Wait until the viewer's processes are gone (a tuimon whose terminal hung up saves its
    pair first; its readers run on meanwhile), so none shares the CPU with the next viewer;
    SIGKILL what is left after `wait` s."""
    deadline = time.monotonic() + wait
    while (alive := [p for p in pids if os.path.exists(f"/proc/{p}")]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def probe(tree: Path, a: Path, b: Path) -> dict[str, object]:
    """The headless probe of `tree`: seconds to the first rows' frame, and its imports."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-c", PROBE, str(a), str(b)],
        cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    first = None
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if line.startswith("FIRST") and first is None:
            first = time.perf_counter() - began
    err = proc.stderr.read()
    proc.wait()
    self_us = 0
    cumulative: dict[str, int] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, cum, name = line[len("import time:") :].split("|")
        self_us += int(own)
        cumulative[name.strip()] = int(cum)
    top = sorted(
        ((us, name) for name, us in cumulative.items() if name.startswith("tuimon.")), reverse=True
    )[:6]
    return {
        "first": first,
        "imports_s": self_us / 1e6,
        "modules": len(cumulative),
        "tuimon": sum(name.startswith("tuimon") for name in cumulative),
        "numpy": "numpy" in cumulative,
        "top": ", ".join(f"{name} {us / 1e6:.2f}" for us, name in top),
        "exit": proc.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", help="a tuimon checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=Path, nargs=2, metavar=("A", "B"))
    parser.add_argument("--dir", type=Path, default=None, help="where written runs are kept")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--limit", type=float, default=120.0, help="seconds a viewer gets")
    parser.add_argument("--no-leet", action="store_true", help="time tuimon only")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    trees = [t.resolve() for t in args.tree or [here.parent]]
    if args.runs:
        a, b = args.runs
    else:
        sys.path.insert(0, str(here))
        from bench_wandb_leet import write_runs

        root = args.dir or Path(tempfile.mkdtemp(prefix="bench-startup-"))
        a, b = write_runs(root, args.steps, args.metrics)
    wandb = Path(sys.executable).with_name("wandb")
    print(f"runs: {a} {b}", flush=True)
    for n in range(1, args.rounds + 1):
        if not args.no_leet:
            at = load()
            seconds = first_row("leet", f"{wandb} leet {a}", LEET_ROW, args.limit)
            print(f"round {n} load {at}: leet first row {seconds} s", flush=True)
        for tree in trees if n % 2 else trees[::-1]:  # each tree first in every other round
            at = load()
            command = f"cd {tree} && PYTHONPATH={tree} {sys.executable} -m tuimon replay "
            seconds = first_row("tuimon", command + f"--speed 1e9 {a} {b}", STEP_ROW, args.limit)
            print(f"round {n} load {at}: tuimon ({tree}) first row {seconds} s", flush=True)
        for tree in trees if n % 2 else trees[::-1]:
            at = load()
            print(f"round {n} load {at}: probe ({tree}) {probe(tree, a, b)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
