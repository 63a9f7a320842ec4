"""Benchmark: what the byte rule costs `tuimon compare` (issue 39), one run.

    python bench/bench_byte_rule.py [--steps 1000000] [--repeat 3]

Writes, in a temporary folder, two JSON Lines logs of N steps whose every line differs only in
its clock `t` (the usual IDENTICAL pair: two runs of one seed), and a DIVERGED pair (one value
changed in the middle: the rule is not run there). Then, R rounds, alternating:

  compare   python -m tuimon compare A B        (a whole process, the byte rule included)
  rule      the byte rule alone, in a process   (`byte_rule.check` and `precision.of_logs`)

and prints each round's seconds and the share of compare the rule takes. Prints; never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
RULE = """
import sys, time
from pathlib import Path
from tuimon.engine.judge import byte_rule, precision
a, b = Path(sys.argv[1]), Path(sys.argv[2])
start = time.perf_counter()
byte_rule.check(a, b)
mid = time.perf_counter()
precision.of_logs([a, b])
print(mid - start, time.perf_counter() - mid)
"""


def write(path: Path, n: int, clock: float, change: int | None = None) -> None:
    with path.open("wb") as fh:
        for i in range(n):
            row = {"step": i, "t": i * 0.01 + clock, "loss": 1 / (i + 3), "acc": i / (i + 7),
                   "lr": 0.001 * (1 + i % 10) / 10, "gn": (i % 97) / 13}  # fmt: skip
            if i == change:
                row["loss"] += 1e-9
            fh.write(orjson.dumps(row) + b"\n")


def timed(cmd: list[str], want: int) -> float:
    """Seconds of a whole process; it must exit `want` (a compare that failed is no time)."""
    start = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if code.returncode != want:
        sys.exit(f"{' '.join(cmd)} exited {code.returncode}, not {want}")
    return time.perf_counter() - start


def rule(a: Path, b: Path) -> tuple[float, float]:
    """The byte check's and the precision sample's seconds, measured inside a process."""
    out = subprocess.run([sys.executable, "-c", RULE, str(a), str(b)], cwd=ROOT, text=True,
                         capture_output=True, check=True).stdout.split()  # fmt: skip
    return float(out[0]), float(out[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write(d / "a.jsonl", args.steps, 0.0)
        write(d / "b.jsonl", args.steps, 0.37)
        write(d / "c.jsonl", args.steps, 0.37, change=args.steps // 2)
        pairs = {
            "identical": (d / "a.jsonl", d / "b.jsonl"),
            "diverged": (d / "a.jsonl", d / "c.jsonl"),
        }
        print(f"{args.steps:,} steps a side, {os.path.getsize(d / 'a.jsonl') >> 20} MiB a log, "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        want = {"identical": 0, "diverged": 1}
        for name, (a, b) in pairs.items():
            compare, check, sample = [], [], []
            for _ in range(args.repeat):
                compare.append(timed([py, "-m", "tuimon", "compare", str(a), str(b)], want[name]))
                c, p = rule(a, b)
                check.append(c)
                sample.append(p)
            cost = statistics.median(sample) + (
                statistics.median(check) if name == "identical" else 0
            )
            c = statistics.median(compare)
            print(f"{name:9}  compare {c:6.2f} s, of which the rule {cost:5.2f} s = {cost / c:4.0%} "
                  f"(check {statistics.median(check):.2f} s, precision {statistics.median(sample):.3f} s)  "
                  f"rounds {[round(x, 2) for x in compare]}")  # fmt: skip
        print(
            f"load {os.getloadavg()[0]:.1f}; a DIVERGED pair skips the rule (its difference is "
            "named at a step): only its precision sample is read"
        )


if __name__ == "__main__":
    main()
