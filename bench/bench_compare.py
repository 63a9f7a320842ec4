"""Benchmark: `tuimon compare` as a whole process, per format, side by side in one run.

    python bench/bench_compare.py [--steps 25000] [--repeat 5] [--big-mb 200] [--wide 100000]

For each format — tuimon's own step log, plain JSON Lines (`{"step": 5, "loss": 0.3, ...}`,
what users print most), CSV (a step column and 7 metrics) and a wide CSV (--wide columns,
few rows) — writes two logs of N steps (7 metrics, parting halfway), then runs, alternating,
R times each, as whole processes (interpreter start included):

  tuimon   python -m tuimon compare A B
  pandas   (only where pandas is installed: it is not a dependency) the 10-line script a
           user would write for that format: read both, merge on the step, relative diffs,
           the first divergent step
  floor    (step log only) the interpreter plus orjson parsing every line of both files

and prints the median wall times, the ratio tuimon/pandas per format (target <= 0.35), and
tuimon's peak resident memory against the size of the logs (target <= 3x). With --big-mb M it
also writes two step logs of about M MB each and times one `tuimon compare` of them. Prints;
never asserts.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

METRICS = ("train_loss", "test_loss", "train_acc", "test_acc", "lr", "grad_norm", "weight_norm")
PANDAS = """\
import sys, numpy as np, pandas as pd
a = pd.read_json(sys.argv[1], lines=True); a = a[a["type"] == "step"]
b = pd.read_json(sys.argv[2], lines=True); b = b[b["type"] == "step"]
m = a.merge(b, on="step", suffixes=("_a", "_b"))
names = [c[:-2] for c in m.columns if c.endswith("_a") and c[:-2] not in ("t", "type")]
differs = np.zeros(len(m), dtype=bool)
for n in names:
    xa, xb = m[n + "_a"], m[n + "_b"]
    if xa.dtype.kind == "f": m[n + "_rel"] = (xa - xb).abs() / np.maximum(xa.abs(), xb.abs())
    differs |= (xa != xb).to_numpy()
print(m.loc[differs, "step"].min() if differs.any() else None)
"""
PANDAS_JSONL = """\
import sys, numpy as np, pandas as pd
a = pd.read_json(sys.argv[1], lines=True)
b = pd.read_json(sys.argv[2], lines=True)
m = a.merge(b, on="step", suffixes=("_a", "_b"))
names = [c for c in a.columns if c != "step"]
xa = m[[n + "_a" for n in names]].to_numpy(np.float64)
xb = m[[n + "_b" for n in names]].to_numpy(np.float64)
rel = np.abs(xa - xb) / np.maximum(np.abs(xa), np.abs(xb))
differs = (xa != xb).any(axis=1)
print(m.loc[differs, "step"].min() if differs.any() else None)
"""
PANDAS_CSV = PANDAS_JSONL.replace(
    "pd.read_json(sys.argv[1], lines=True)", "pd.read_csv(sys.argv[1])"
)
PANDAS_CSV = PANDAS_CSV.replace("pd.read_json(sys.argv[2], lines=True)", "pd.read_csv(sys.argv[2])")
FLOOR = """\
import sys, orjson
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        rows = [orjson.loads(line) for line in fh]
"""


def write_log(path: Path, n: int, side: str, part_at: int, start: int = 0) -> int:
    """A tuimon step log of steps [start, start + n); side b parts from `part_at` on."""
    rng = np.random.default_rng(start)
    steps = np.arange(start, start + n)
    cols = {m: 1.0 + rng.random(n) for m in METRICS}
    apart = steps >= part_at
    if side == "b":
        for m in METRICS:
            cols[m] = np.where(apart, cols[m] * (1 + 1e-9 * (1 + steps - part_at)), cols[m])
    values = zip(*(c.tolist() for c in cols.values()), strict=True)
    rows = [dict(zip(METRICS, vals, strict=True)) for vals in values]
    with open(path, "ab") as fh:
        if start == 0:
            header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0}}
            fh.write(orjson.dumps({**header, "hyper": {}, "env": {"device": "cpu"}}) + b"\n")
        out = []
        for s, metrics in zip(steps.tolist(), rows, strict=True):
            tag = f"{side if s >= part_at else 'a'}{s}".encode()
            digest = hashlib.blake2b(tag, digest_size=16).hexdigest()
            out.append(orjson.dumps({"type": "step", "step": s, "t": 0.01 * s, **metrics,
                                     "param_digest": digest}))  # fmt: skip
        fh.write(b"\n".join(out) + b"\n")
    return path.stat().st_size


def end_log(path: Path, n: int) -> None:
    with open(path, "ab") as fh:
        fh.write(orjson.dumps({"type": "end", "status": "ok", "steps": n, "wall_s": 1.0}) + b"\n")


SPAWN = """\
import os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
wall = time.perf_counter() - t0
cpu = usage.ru_utime + usage.ru_stime
print(wall, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
sys.stderr.buffer.write(err[-500:])
"""
"""Spawns one command from a small process, so its peak memory is its own (a child forked
from this bench would count the bench's pages as well)."""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Children compile tuimon's modules once (into PYTHONPYCACHEPREFIX, set in `main`), as an
installed package is: with PYTHONDONTWRITEBYTECODE every run would compile ~50 modules from
source (~0.1 s), which no user's run does and pandas' (compiled in site-packages) does not."""


def run(cmd: list[str]) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds (user + system), peak resident KiB and exit code of one
    whole process."""
    got = subprocess.run(
        [sys.executable, "-c", SPAWN, *cmd], capture_output=True, check=True, env=ENV
    )
    wall, cpu, rss, code = got.stdout.decode().split()
    if int(code) not in (0, 1, 3):
        sys.exit(f"{cmd[:3]} failed ({code}): {got.stderr.decode()}")
    return float(wall), float(cpu), int(rss), int(code)


ROOT = Path(__file__).resolve().parents[1]
"""The checkout this bench belongs to: the tuimon it measures."""


def make_pair(folder: Path, n: int, chunk: int = 200_000) -> tuple[Path, Path, int]:
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    for side, path in (("a", a), ("b", b)):
        for start in range(0, n, chunk):
            write_log(path, min(chunk, n - start), side, n // 2, start)
        end_log(path, n)
    return a, b, a.stat().st_size + b.stat().st_size


def plain_values(n: int, side: str, width: int = len(METRICS)) -> tuple[np.ndarray, np.ndarray]:
    """Steps and a (n, width) array of metric values; side b parts from the middle on."""
    rng = np.random.default_rng(1)
    values = 1.0 + rng.random((n, width))
    steps = np.arange(n)
    if side == "b":
        values[n // 2 :] *= 1 + 1e-9
    return steps, values


def write_jsonl(path: Path, n: int, side: str) -> int:
    """Plain JSON Lines: `{"step": 5, "train_loss": ..., ...}` per line."""
    steps, values = plain_values(n, side)
    with open(path, "wb") as fh:
        for s, row in zip(steps.tolist(), values.tolist(), strict=True):
            fh.write(orjson.dumps({"step": s, **dict(zip(METRICS, row, strict=True))}) + b"\n")
    return path.stat().st_size


def write_csv(path: Path, n: int, side: str, width: int = len(METRICS)) -> int:
    """A CSV with a step column and `width` metric columns."""
    steps, values = plain_values(n, side, width)
    names = METRICS if width == len(METRICS) else [f"m{i}" for i in range(width)]
    with open(path, "w") as fh:
        fh.write(",".join(["step", *names]) + "\n")
        for s, row in zip(steps.tolist(), values.tolist(), strict=True):
            fh.write(f"{s}," + ",".join(map(repr, row)) + "\n")
    return path.stat().st_size


Medians = dict[str, float]


def measure(cmds: dict[str, list[str]], repeat: int) -> tuple[Medians, Medians, dict[str, int]]:
    """Median wall and CPU seconds and peak KiB of each command, run alternating `repeat`
    times after one run each that is not counted (bytecode written, files in the page
    cache). CPU time is what other jobs on the machine disturb least."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    peak = dict.fromkeys(cmds, 0)
    for cmd in cmds.values():
        run(cmd)
    for _ in range(repeat):  # alternating, so load on the machine hits all alike
        for name, cmd in cmds.items():
            wall, cpu, rss, _ = run(cmd)
            times[name].append(wall)
            cpus[name].append(cpu)
            peak[name] = max(peak[name], rss)
    median = statistics.median
    return {k: median(v) for k, v in times.items()}, {k: median(v) for k, v in cpus.items()}, peak


def report(
    label: str, med: tuple[Medians, Medians], peak: dict[str, int], size: int, imports_kib: int
) -> None:
    """One format: the medians (wall, CPU), the ratios against the targets (wall; CPU in
    brackets), tuimon's peak memory against the input and above its imports alone."""
    wall, cpu = med
    print(f"{label}: 2 logs, {size / 1e6:.1f} MB")
    for name in wall:
        print(f"  {name:<7} {wall[name]:6.3f} s  cpu {cpu[name]:6.3f} s  "
              f"peak {peak[name] / 1024:7.1f} MiB")  # fmt: skip

    def ratio(x: str, y: str) -> str:
        return f"{wall[x] / wall[y]:.2f}x (cpu {cpu[x] / cpu[y]:.2f}x)"

    parts = []
    if "pandas" in wall:
        parts.append(f"tuimon / pandas {ratio('tuimon', 'pandas')} (target <= 0.35)")
        if "before" in wall:
            parts.append(f"before / pandas {ratio('before', 'pandas')}")
    else:
        parts.append("pandas not installed: no pandas ratio")
    if "floor" in wall:
        parts.append(f"tuimon / floor {ratio('tuimon', 'floor')} (target <= 1.5)")
    parts.append(f"peak memory / input {peak['tuimon'] * 1024 / size:.2f}x (target <= 3)")
    if "before" in wall:
        parts.append(f"before: {peak['before'] * 1024 / size:.2f}x")
    over = (peak["tuimon"] - imports_kib) * 1024 / size
    parts.append(f"above its imports alone {over:.2f}x")
    print("  " + "; ".join(parts))


IMPORTS = (  # what `tuimon compare` imports, nothing read: the memory floor
    "import tuimon.cli, tuimon.commands.compare, tuimon.engine.analyses.compare, "
    "tuimon.report.wording, tuimon.engine.judge.artifacts"
)


def formats(folder: Path, args: argparse.Namespace) -> dict[str, tuple[Path, Path, int, str]]:
    """Each format's two logs, their size, and the pandas script for it."""
    out = {}
    a, b, size = make_pair(folder / "steplog", args.steps)
    out["tuimon step log"] = (a, b, size, PANDAS)
    sizes = [write_jsonl(folder / f"{s}.jsonl", args.steps, s) for s in "ab"]
    out["plain JSON Lines"] = (folder / "a.jsonl", folder / "b.jsonl", sum(sizes), PANDAS_JSONL)
    sizes = [write_csv(folder / f"{s}.csv", args.steps, s) for s in "ab"]
    out["CSV"] = (folder / "a.csv", folder / "b.csv", sum(sizes), PANDAS_CSV)
    if args.wide:
        rows = max(2, 2_000_000 // args.wide)
        sizes = [write_csv(folder / f"w{s}.csv", rows, s, args.wide) for s in "ab"]
        label = f"CSV of {args.wide:,} columns x {rows} rows"
        out[label] = (folder / "wa.csv", folder / "wb.csv", sum(sizes), PANDAS_CSV)
    return out


def commands(
    label: str, a: Path, b: Path, folder: Path, args: argparse.Namespace, have_pandas: bool
) -> dict[str, list[str]]:
    """What one format's row runs: tuimon (this checkout), `--before`'s, pandas, the floor."""
    py = sys.executable
    tuimon = [py, "-m", "tuimon", "compare", str(a), str(b)]
    cmds = {"tuimon": ["env", f"PYTHONPATH={ROOT}", *tuimon]}
    if args.before:
        cmds["before"] = ["env", f"PYTHONPATH={Path(args.before).resolve()}", *tuimon]
    if have_pandas:
        cmds["pandas"] = [py, str(folder / "pandas_script.py"), str(a), str(b)]
    if label == "tuimon step log":
        cmds["floor"] = [py, str(folder / "floor.py"), str(a), str(b)]
    return cmds


def big_logs(folder: Path, megabytes: float) -> None:
    """Two step logs of about `megabytes` MB each: one `tuimon compare`, timed."""
    big = folder / "big"  # its own folder: `make_pair` appends to the logs it finds
    big.mkdir()
    a, b, size = make_pair(big, 1000)
    n = int(megabytes * 1e6 / (size / 2000))
    for p in (a, b):
        p.unlink()
    a, b, size = make_pair(big, n)
    took, _, rss, _ = run(["env", f"PYTHONPATH={ROOT}", sys.executable, "-m", "tuimon",
                           "compare", str(a), str(b)])  # fmt: skip
    print(f"2 logs x {n} steps, {size / 1e6:.0f} MB: tuimon compare {took:.2f} s "
          f"(target <= 10), peak {rss / 1024:.0f} MiB = {rss * 1024 / size:.2f}x the "
          f"input (target <= 3)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--big-mb", type=float, default=0, help="also two logs of M MB each")
    ap.add_argument("--wide", type=int, default=100_000, help="columns of the wide CSV (0: none)")
    ap.add_argument(
        "--before",
        metavar="DIR",
        help="also time `tuimon compare` of another checkout (its root on PYTHONPATH): a "
        "before/after in the same run",
    )
    args = ap.parse_args()
    try:
        import pandas  # noqa: F401

        have_pandas = True
    except ImportError:
        have_pandas = False
    print(f"{platform.node()} · {os.cpu_count()} cores · {platform.python_version()} · "
          f"{time.strftime('%Y-%m-%d')} · {args.steps} steps · median of {args.repeat}, "
          "whole processes, alternating")  # fmt: skip
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (before)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ENV["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        os.chdir(folder)  # `python -m` looks in the working directory first: none there
        imports = ["env", f"PYTHONPATH={ROOT}", sys.executable, "-c", IMPORTS]
        run(imports)
        _, _, imports_kib, _ = run(imports)
        print(f"interpreter + tuimon compare's imports alone: peak {imports_kib / 1024:.1f} MiB")
        (folder / "steplog").mkdir()
        (folder / "floor.py").write_text(FLOOR)
        for label, (a, b, size, script) in formats(folder, args).items():
            (folder / "pandas_script.py").write_text(script)
            cmds = commands(label, a, b, folder, args, have_pandas)
            wall, cpu, peak = measure(cmds, args.repeat)
            report(label, (wall, cpu), peak, size, imports_kib)
        if args.big_mb:
            big_logs(folder, args.big_mb)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after)")


if __name__ == "__main__":
    main()
