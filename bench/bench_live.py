"""Benchmark: a live pair of two children printing step lines as fast as they can.

    python bench/bench_live.py [--steps N] [--repeat R]

Runs, best of R each, alternating:

  (a) alone         both children at once, stdout to a file (what they cost without tuimon)
  (b) under tuimon  `tuimon pair --headless --json` of the same two children

Each child reports its own wall time (first line to last) on stderr. Prints the children's wall
time alone and under tuimon, their ratio, tuimon's whole-process wall time and the aligned steps
per second per side (steps compared / tuimon's wall time). Never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
side, n = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
print(json.dumps({"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0},
                  "hyper": {"steps": n}, "env": {"device": "cpu"}}), flush=True)
for i in range(n):
    loss = 1.0 / (i + 1)
    print(json.dumps({"type": "step", "step": i, "t": i * 1e-3, "train_loss": loss,
                      "test_loss": 2 * loss, "train_acc": 0.5, "lr": 1e-3,
                      "param_digest": "00"}), flush=True)
print(json.dumps({"type": "end", "status": "ok", "steps": n}), flush=True)
print(f"elapsed {time.perf_counter() - t0:.4f}", file=sys.stderr)
"""


def elapsed(stderr: bytes) -> float:
    """The child's own wall time, from its last stderr line."""
    return float(stderr.decode().strip().splitlines()[-1].split()[1])


def alone(child: Path, steps: int, tmp: Path) -> float:
    """Both children at once, stdout to files: the slower one's wall time."""
    procs = []
    for side in "ab":
        with open(tmp / f"alone-{side}.out", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(child), side, str(steps)],
                    stdout=out,
                    stderr=subprocess.PIPE,
                )
            )
    return max(elapsed(p.communicate()[1]) for p in procs)


def under_tuimon(child: Path, steps: int, tmp: Path) -> tuple[float, float, int]:
    """(children's wall time, tuimon's wall time, steps compared) of one headless pair."""
    store = tmp / f"store-{time.monotonic_ns()}"
    argv = [sys.executable, "-m", "tuimon", "pair", "--headless", "--json", "--store", str(store),
            "--", sys.executable, str(child), "{side}", str(steps)]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False)
    wall = time.perf_counter() - start
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    pair = Path(result["pair"])
    kids = max(elapsed((pair / f"{side}.stderr").read_bytes()) for side in "ab")
    return kids, wall, int(result["steps_compared"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        child = tmp / "child.py"
        child.write_text(CHILD)
        best_alone, best_kids, best_wall, compared = float("inf"), float("inf"), float("inf"), 0
        for _ in range(args.repeat):
            best_alone = min(best_alone, alone(child, args.steps, tmp))
            kids, wall, compared = under_tuimon(child, args.steps, tmp)
            best_kids, best_wall = min(best_kids, kids), min(best_wall, wall)
    print(f"machine: {os.cpu_count()} cores; {args.steps:,} steps per child, best of {args.repeat}")
    print(f"children alone          {best_alone:8.2f} s")
    print(f"children under tuimon   {best_kids:8.2f} s   ({best_kids / best_alone:.2f}x alone)")
    print(f"tuimon, whole process   {best_wall:8.2f} s   ({compared:,} steps compared)")
    print(f"aligned steps/s per side {compared / best_wall:8,.0f}")


if __name__ == "__main__":
    main()
