"""Benchmark: `tuimon compare` and the headless replay of long runs (issue 32), one run.

    python bench/bench_scale.py [--steps 1000000] [--repeat 2] [--formats steplog,jsonl,csv,...]

Writes, in a temporary folder (removed at the end, never in the checkout), two logs of N steps
a side for each format — the tuimon step log (7 metrics, `t` and a parameter digest, parting
at step N/2 + 1, the pair of issue 32), plain JSON Lines (`{"step": 5, ...}`, 7 metrics and a
digest), a CSV (a step column and 7 metrics), and the step log compressed with gzip and xz —
then runs, alternating, R rounds of whole processes after one round not counted (interpreter
start included, bytecode already written; peak memory is each child's own ru_maxrss: the
largest of its processes, a worker's included):

  tuimon   python -m tuimon compare A B
  polars   (where polars is installed: it is not a dependency) the script a user would
           write: read both (read_ndjson / read_csv), join on the step, relative diffs, the
           first divergent step
  floor    the interpreter plus orjson parsing every line of both files in one process (a
           CSV line as the JSON array of its cells; a compressed file expanded as a stream)

and the headless replay against `compare` on the 25,000-step sample pair
(sample_logs/cuda-cuda-p113-grok-layout-s0), both whole processes. It prints one table with
every ratio beside its target, each round's ratio (the spread), and the load average.
Prints; never asserts.
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compare import ENV, METRICS, ROOT, run

SAMPLE = ROOT / "sample_logs" / "cuda-cuda-p113-grok-layout-s0"

POLARS_JSONL = """\
import sys, polars as pl
def load(path):
    df = pl.read_ndjson(path, infer_schema_length=None, ignore_errors=True) if not path.endswith(("gz", "xz")) else pl.read_ndjson(__import__("io").BytesIO(__import__("gzip" if path.endswith("gz") else "lzma").open(path).read()), infer_schema_length=None)
    if "type" in df.columns:
        df = df.filter(pl.col("type") == "step")
    return df.select([c for c in df.columns if c in NAMES])
NAMES = {{"step", "param_digest", {}}}
a, b = load(sys.argv[1]), load(sys.argv[2])
m = a.join(b, on="step", suffix="_b")
metrics = [c for c in a.columns if c not in ("step", "param_digest")]
rel = [((pl.col(n) - pl.col(n + "_b")).abs() / pl.max_horizontal(pl.col(n).abs(), pl.col(n + "_b").abs())).alias(n + "_rel") for n in metrics]
differs = pl.any_horizontal([pl.col(n) != pl.col(n + "_b") for n in metrics] + [pl.col("param_digest") != pl.col("param_digest_b")])
m = m.with_columns(rel).with_columns(differs.alias("differs"))
print(m.filter(pl.col("differs"))["step"].min())
""".format(", ".join(repr(n) for n in METRICS))
POLARS_CSV = """\
import sys, polars as pl
a, b = pl.read_csv(sys.argv[1]), pl.read_csv(sys.argv[2])
m = a.join(b, on="step", suffix="_b")
metrics = [c for c in a.columns if c != "step"]
rel = [((pl.col(n) - pl.col(n + "_b")).abs() / pl.max_horizontal(pl.col(n).abs(), pl.col(n + "_b").abs())).alias(n + "_rel") for n in metrics]
differs = pl.any_horizontal([pl.col(n) != pl.col(n + "_b") for n in metrics])
m = m.with_columns(rel).with_columns(differs.alias("differs"))
print(m.filter(pl.col("differs"))["step"].min())
"""
FLOOR = """\
import gzip, lzma, sys, orjson
for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as fh:
        if path.endswith(".csv"):
            fh.readline()
            for line in fh:
                orjson.loads(b"[" + line + b"]")
        else:
            for line in fh:
                orjson.loads(line)
"""


def values(n: int, side: str) -> tuple[np.ndarray, list[str]]:
    """(n, 7) metric values and n digests; side b parts from step n/2 + 1 on."""
    rng = np.random.default_rng(0)
    vals = 1.0 + rng.random((n, len(METRICS)))
    part = n // 2 + 1
    if side == "b":
        vals[part:] *= 1 + 1e-9
    raw = rng.bytes(16 * n)
    digests = [raw[i : i + 16].hex() for i in range(0, 16 * n, 16)]
    if side == "b":
        digests[part:] = [d[::-1] for d in digests[part:]]
    return vals, digests


def write_steplog(path: Path, n: int, side: str) -> None:
    vals, digests = values(n, side)
    head = {
        "type": "header",
        "format": "tuimon.steplog/1",
        "run": {"seed": 0},
        "hyper": {},
        "env": {"device": "cpu"},
    }
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(head) + b"\n")
        for start in range(0, n, 100_000):
            rows = vals[start : start + 100_000].tolist()
            out = []
            for s, row, digest in zip(
                range(start, start + len(rows)), rows, digests[start:], strict=False
            ):
                rec = {
                    "type": "step",
                    "step": s,
                    "t": 0.01 * s,
                    **dict(zip(METRICS, row, strict=False)),
                    "param_digest": digest,
                }
                out.append(orjson.dumps(rec))
            fh.write(b"\n".join(out) + b"\n")
        fh.write(orjson.dumps({"type": "end", "status": "ok", "steps": n, "wall_s": 1.0}) + b"\n")


def write_jsonl(path: Path, n: int, side: str) -> None:
    vals, digests = values(n, side)
    with open(path, "wb") as fh:
        for start in range(0, n, 100_000):
            rows = vals[start : start + 100_000].tolist()
            out = [
                orjson.dumps(
                    {"step": s, **dict(zip(METRICS, row, strict=False)), "param_digest": digest}
                )
                for s, row, digest in zip(
                    range(start, start + len(rows)), rows, digests[start:], strict=False
                )
            ]
            fh.write(b"\n".join(out) + b"\n")


def write_csv(path: Path, n: int, side: str) -> None:
    vals, _ = values(n, side)
    with open(path, "w") as fh:
        fh.write(",".join(["step", *METRICS]) + "\n")
        for start in range(0, n, 100_000):
            rows = vals[start : start + 100_000].tolist()
            fh.write(
                "".join(
                    f"{s}," + ",".join(map(repr, r)) + "\n"
                    for s, r in zip(range(start, start + len(rows)), rows, strict=False)
                )
            )


def compress(src: Path, suffix: str) -> Path:
    out = src.with_name(src.name + suffix)
    opener = gzip.open if suffix == ".gz" else lzma.open
    kw = {"compresslevel": 1} if suffix == ".gz" else {"preset": 0}
    with open(src, "rb") as fh, opener(out, "wb", **kw) as dst:  # type: ignore[operator]
        while chunk := fh.read(1 << 22):
            dst.write(chunk)
    return out


FORMATS = ("steplog", "jsonl", "csv", "steplog.gz", "steplog.xz")


def make(folder: Path, fmt: str, n: int) -> tuple[Path, Path, int]:
    """The two logs of a format and their size on disk."""
    base = fmt.split(".")[0]
    paths = []
    for side in "ab":
        plain = folder / f"{side}.{base}"
        if not plain.exists():
            {"steplog": write_steplog, "jsonl": write_jsonl, "csv": write_csv}[base](plain, n, side)
        paths.append(plain if fmt == base else compress(plain, "." + fmt.split(".")[1]))
    return paths[0], paths[1], sum(p.stat().st_size for p in paths)


def round_of(cmds: dict[str, list[str]]) -> dict[str, tuple[float, float, int]]:
    return {name: run(cmd)[:3] for name, cmd in cmds.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--replay-repeat", type=int, default=3)
    ap.add_argument(
        "--tuimon",
        metavar="DIR",
        default=str(ROOT),
        help="the checkout measured (default: this one)",
    )
    ap.add_argument("--before", metavar="DIR", help="also another checkout, alternating")
    args = ap.parse_args()
    try:
        import polars

        have_polars = f"polars {polars.__version__}"
    except ImportError:
        have_polars = ""
    py = sys.executable
    print(
        f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"{time.strftime('%Y-%m-%d %H:%M')} · {args.steps:,} steps a side · {args.repeat} "
        f"rounds, whole processes alternating · {have_polars or 'polars not installed'}"
    )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (before)")
    trees = {"tuimon": args.tuimon} | ({"before": args.before} if args.before else {})
    rows: list[tuple[str, list[float], float, bool]] = []
    with tempfile.TemporaryDirectory(prefix="bench_scale") as tmp:
        folder = Path(tmp)
        ENV["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        os.chdir(folder)
        (folder / "floor.py").write_text(FLOOR)
        (folder / "polars_jsonl.py").write_text(POLARS_JSONL)
        (folder / "polars_csv.py").write_text(POLARS_CSV)
        for fmt in args.formats.split(","):
            t0 = time.perf_counter()
            a, b, size = make(folder, fmt, args.steps)
            base = fmt.split(".")[0]
            plain = sum((folder / f"{s}.{base}").stat().st_size for s in "ab")
            print(
                f"{fmt}: 2 logs, {size / 2**20:.0f} MiB on disk, {plain / 2**20:.0f} MiB "
                f"expanded (written in {time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
            cmds = {
                name: ["env", f"PYTHONPATH={tree}", py, "-m", "tuimon", "compare", str(a), str(b)]
                for name, tree in trees.items()
            }
            if fmt != base:  # a log expands past the 256 MiB cap on a compressed file
                cmds = {k: [*v, "--max-bytes", "2G"] for k, v in cmds.items()}
            if have_polars:
                script = "polars_csv.py" if base == "csv" else "polars_jsonl.py"
                cmds["polars"] = [py, str(folder / script), str(a), str(b)]
            cmds["floor"] = [py, str(folder / "floor.py"), str(a), str(b)]
            round_of(cmds)  # bytecode written, files in the page cache: not counted
            rounds = [round_of(cmds) for _ in range(args.repeat)]
            rows += show(fmt, size, plain, rounds)
            for p in folder.glob(f"*.{fmt}"):
                if fmt != base:
                    p.unlink()
        rows += replay(py, trees, args.replay_repeat)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after)")
    print("\nevery ratio of issue 32, median of the rounds [min-max], target, met:")
    width = max(len(r[0]) for r in rows)
    for what, each, target, low in rows:
        mid = statistics.median(each)
        f = ",.0f" if target >= 100 else ".2f"
        met = mid >= target if low else mid <= target
        print(
            f"  {what:<{width}}  {mid:>7{f}} [{min(each):{f}}-{max(each):{f}}]  "
            f"{'>=' if low else '<='} {target:{f}}  {'met' if met else 'NOT met'}"
        )


def show(
    fmt: str, size: int, plain: int, rounds: list[dict[str, tuple[float, float, int]]]
) -> list[tuple[str, list[float], float, bool]]:
    """One format: every round's times, and the ratios against the targets (returned too:
    what, each round's value, target, whether the target is a floor)."""
    for i, r in enumerate(rounds):
        print(
            f"  round {i + 1}: "
            + " · ".join(
                f"{k} {w:.2f} s (cpu {c:.2f}) {m / 1024:.0f} MiB" for k, (w, c, m) in r.items()
            )
        )
    out = []
    for tree in [k for k in rounds[0] if k in ("tuimon", "before")]:
        for other, target in (("polars", 1.0), ("floor", 1.5)):
            if other in rounds[0]:
                each = [r[tree][0] / r[other][0] for r in rounds]
                out.append((f"{fmt} {tree}/{other}", each, target, False))
        out.append(
            (f"{fmt} {tree} memory/input", [r[tree][2] * 1024 / plain for r in rounds], 1.0, False)
        )
    for what, each, target, _ in out:
        print(
            f"  {what} {statistics.median(each):.2f}x [{min(each):.2f}-{max(each):.2f}] (<= {target})"
        )
    print(
        f"  (peak memory of tuimon {max(r['tuimon'][2] for r in rounds) / 1024:.0f} MiB)",
        flush=True,
    )
    return out


def replay(
    py: str, trees: dict[str, str], repeat: int
) -> list[tuple[str, list[float], float, bool]]:
    """The headless replay against `compare` on the 25,000-step sample pair."""
    if not SAMPLE.is_dir() or repeat < 1:
        print(f"no replay row ({'--replay-repeat 0' if repeat < 1 else f'no {SAMPLE}'})")
        return []
    cmds = {}
    for name, tree in trees.items():
        tm = ["env", f"PYTHONPATH={tree}", py, "-m", "tuimon"]
        cmds[f"{name} compare"] = [*tm, "compare", str(SAMPLE)]
        cmds[f"{name} replay"] = [*tm, "replay", str(SAMPLE), "--headless", "--json"]
    for cmd in cmds.values():
        run(cmd)  # bytecode written, files in the page cache
    rounds = [round_of(cmds) for _ in range(repeat)]
    steps = 25_000
    print(f"replay: {SAMPLE.name} ({steps:,} steps a side), {repeat} rounds")
    out = []
    for name in trees:
        each = [r[f"{name} replay"][0] / r[f"{name} compare"][0] for r in rounds]
        rate = [steps / r[f"{name} replay"][0] for r in rounds]
        cpu = [steps / r[f"{name} replay"][1] for r in rounds]
        print(
            f"  {name}: replay {statistics.median([r[f'{name} replay'][0] for r in rounds]):.2f} s, "
            f"compare {statistics.median([r[f'{name} compare'][0] for r in rounds]):.2f} s · "
            f"replay/compare {statistics.median(each):.2f}x [{min(each):.2f}-{max(each):.2f}] "
            f"(<= 1.5) · replay {statistics.median(rate):,.0f} steps/s "
            f"[{min(rate):,.0f}-{max(rate):,.0f}] (>= 20,000; per CPU second "
            f"{statistics.median(cpu):,.0f}), whole command",
            flush=True,
        )
        out.append((f"replay {name} replay/compare", each, 1.5, False))
        out.append((f"replay {name} steps/s", rate, 20_000, True))
    return out


if __name__ == "__main__":
    main()
