"""tuimon against `wandb leet` (W&B's terminal viewer) on W&B offline runs, side by side in one
run (issue 42): two runs of one seed, METRICS metrics x STEPS steps, written by the real wandb
(offline: no network), then each viewer started in its own tmux session of one size:

- `wandb leet RUN_A` and `tuimon replay --speed 1e9 RUN_A RUN_B`: seconds until the first row
  is on screen (leet: its summary shows a `_step`; tuimon: a step row in the pair view), until
  the last step is (`_step` STEPS-1 in leet's summary; a row of step STEPS-1 in tuimon's view),
  and the peak memory of the viewer's processes (the sum of each one's VmHWM, sampled from
  /proc while it runs: W&B's viewer is a Python launcher and a Go process);
- `tuimon compare RUN_A RUN_B` (headless, the verdict printed): seconds and peak memory.

The capture is polled every POLL s (the times are that coarse). Ratios are tuimon / leet; the
issue's targets: tuimon's first row no later than leet's (ratio <= 1), and tuimon's time to
judge two runs at most twice leet's time to open one (ratio <= 2). Run:

    python bench/bench_wandb_leet.py [--steps 50000] [--metrics 20] [--dir DIR]

DIR keeps the runs between invocations (written again only when missing).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLL = 0.05
WRITER = """
import math, sys
import wandb
out, seed, steps, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
run = wandb.init(project="bench", dir=out, config={"seed": seed},
                 settings=wandb.Settings(console="off"))
for step in range(steps):
    run.log({f"m{i:02d}": math.sin(step * 0.001 * (i + 1)) + seed for i in range(metrics)},
            step=step)
run.finish()
"""


def write_runs(root: Path, steps: int, metrics: int) -> tuple[Path, Path]:
    """Two runs of seed 0 (their run folders), written with wandb unless there already."""
    runs = []
    for name in ("a", "b"):
        out = root / f"{name}-{steps}x{metrics}"
        found = sorted((out / "wandb").glob("offline-run-*"))
        if not found:
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
            env.pop("WANDB_DIR", None)
            began = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", WRITER, str(out), "0", str(steps), str(metrics)],
                env=env, check=True,
            )  # fmt: skip
            print(f"wrote run {name}: {time.perf_counter() - began:.1f} s", flush=True)
            found = sorted((out / "wandb").glob("offline-run-*"))
        runs.append(found[0])
    return runs[0], runs[1]


def _tree(root: int) -> list[int]:
    """The process `root` and its descendants (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parents.get(pid, [])
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def view(name: str, command: str, first: re.Pattern[str], last: re.Pattern[str],
         limit: float) -> dict[str, float | None]:  # fmt: skip
    """Start `command` in a tmux session; seconds until `first` and `last` match the screen,
    and the peak memory (MB) of its processes."""
    session = f"i42bench-{name}-{os.getpid()}"
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    began = time.perf_counter()
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", command], check=True
    )
    shown = ["tmux", "display", "-p", "-t", session, "#{pane_pid}"]
    pane = int(subprocess.run(shown, capture_output=True, text=True, check=True).stdout)
    peaks: dict[int, int] = {}
    seen_first = seen_last = None
    sampled = 0.0
    try:
        while time.perf_counter() - began < limit:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout
            now = time.perf_counter() - began
            if seen_first is None and first.search(screen):
                seen_first = now
            if last.search(screen):
                seen_last = now
                seen_first = seen_first if seen_first is not None else now
            if now - sampled > 0.25 or seen_last is not None:
                sampled = now
                for pid in _tree(pane):
                    peaks[pid] = max(peaks.get(pid, 0), _hwm_kb(pid))
            if seen_last is not None:
                break
            time.sleep(POLL)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return {"first": seen_first, "last": seen_last, "mb": sum(peaks.values()) / 1024}


def compare(a: Path, b: Path, python: str) -> dict[str, float | None]:
    """`tuimon compare a b`: seconds, peak memory (MB), and its verdict line."""
    began = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "tuimon", "compare", str(a), str(b)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - began
    verdict = next((line for line in out.decode().splitlines() if line.split(":")[0].isupper()),
                   "")  # fmt: skip
    print(f"compare: exit {os.waitstatus_to_exitcode(status)}: {verdict[:100]}", flush=True)
    return {"first": None, "last": seconds, "mb": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=None, help="where the runs are kept")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a viewer gets")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-wandb-"))
    a, b = write_runs(root, args.steps, args.metrics)
    python = sys.executable
    wandb = str(Path(python).with_name("wandb"))
    repo = Path(__file__).resolve().parent.parent
    end = args.steps - 1
    with open("/proc/loadavg") as fh:
        print(f"runs: {a} {b}; load before: {fh.read().split()[0]}", flush=True)
    leet = view("leet", f"{wandb} leet {a}", re.compile(r"_step\s+\d+"),
                re.compile(rf"_step\s+{end}\b"), args.limit)  # fmt: skip
    print(f"leet: {leet}", flush=True)
    tuimon = view(
        "tuimon",
        f"cd {repo} && PYTHONPATH={repo} {python} -m tuimon replay --speed 1e9 {a} {b}",
        re.compile(r"│\s+\d+ +-?\d"),
        re.compile(rf"│\s+{end} +-?\d"),
        args.limit,
    )
    print(f"tuimon replay: {tuimon}", flush=True)
    judged = compare(a, b, python)
    with open("/proc/loadavg") as fh:
        print(f"load after: {fh.read().split()[0]}")

    def ratio(x: float | None, y: float | None) -> str:
        return f"{x / y:.2f}" if x is not None and y else "-"

    def cell(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "never"

    print(f"\n{args.metrics} metrics x {args.steps:,} steps, "
          f"{sum(f.stat().st_size for f in a.glob('*.wandb')) / 1e6:.0f} MB a run")  # fmt: skip
    print(f"{'':34}{'wandb leet':>12}{'tuimon':>12}{'tuimon/leet':>13}")
    print(f"{'first row on screen (s)':34}{cell(leet['first']):>12}{cell(tuimon['first']):>12}"
          f"{ratio(tuimon['first'], leet['first']):>13}   target <= 1")  # fmt: skip
    print(f"{'last step on screen (s)':34}{cell(leet['last']):>12}{cell(tuimon['last']):>12}"
          f"{ratio(tuimon['last'], leet['last']):>13}")  # fmt: skip
    print(f"{'peak memory of the viewer (MB)':34}{leet['mb']:>12.0f}{tuimon['mb']:>12.0f}"
          f"{ratio(tuimon['mb'], leet['mb']):>13}")  # fmt: skip
    print(f"{'judge two runs (compare, s)':34}{cell(leet['last']):>12}{cell(judged['last']):>12}"
          f"{ratio(judged['last'], leet['last']):>13}   target <= 2 (leet: open one)")  # fmt: skip
    print(f"{'compare peak memory (MB)':34}{'':>12}{judged['mb']:>12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
