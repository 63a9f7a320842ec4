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

Then one judging pipeline (issue 38), on the 50,000-step pair of 20 metrics and a clock `t`
(plain JSON Lines, about 40 MB a log, parting at step 30,000; plain and gzip) and on the
step-log pair of --steps: in the same rounds, `compare A B`, `replay --headless A B` and
`read A` of each checkout, their peak memory against the two logs' size on disk, and in tmux
(120x40) `replay A B`'s time until its first row is on screen and until its verdict is
(`--pipeline-only` runs this part alone; `--tui-timeout` caps a wait).
Prints; never asserts.
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
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


WIDE = 20
"""Metrics of a row of the wide pair (issue 38: 50,000 steps x 20 metrics, ~40 MB a log)."""


def write_wide(path: Path, n: int, side: str) -> None:
    """Plain JSON Lines of `WIDE` metrics and a clock `t` a row (W&B-like names, values over
    five decades); side b parts at step 0.6 n (after the middle)."""
    rng = np.random.default_rng(2)
    names = [f"train/metric_{i:02d}" for i in range(WIDE)]
    vals = rng.standard_normal((n, WIDE)) * np.logspace(-3, 2, WIDE)
    if side == "b":
        vals[n * 3 // 5 :] *= 1 + 1e-9
    with open(path, "wb") as fh:
        for start in range(0, n, 10_000):
            rows = vals[start : start + 10_000].tolist()
            fh.write(
                b"".join(
                    orjson.dumps(
                        {
                            "step": s,
                            "t": round(0.05 * s + 1e-3 * (s % 7), 6),
                            **dict(zip(names, r, strict=True)),
                        }
                    )
                    + b"\n"
                    for s, r in zip(range(start, start + len(rows)), rows, strict=False)
                )
            )


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
WRITERS = {"steplog": write_steplog, "jsonl": write_jsonl, "csv": write_csv, "wide": write_wide}


def make(folder: Path, fmt: str, n: int) -> tuple[Path, Path, int]:
    """The two logs of a format and their size on disk."""
    base = fmt.split(".")[0]
    paths = []
    for side in "ab":
        plain = folder / f"{side}.{base}"
        if not plain.exists():
            WRITERS[base](plain, n, side)
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
    ap.add_argument("--wide-steps", type=int, default=50_000, help="issue 38's wide pair")
    ap.add_argument("--pipeline-only", action="store_true", help="issue 38's part alone")
    ap.add_argument("--pipeline-repeat", type=int, default=3)
    ap.add_argument("--tui-timeout", type=float, default=60.0, help="seconds a TUI wait lasts")
    ap.add_argument(
        "--pipeline-pairs",
        default="wide,wide.gz,steplog",
        help="issue 38's pairs measured (none: the TUI alone)",
    )
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
        for fmt in [] if args.pipeline_only else args.formats.split(","):
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
        if not args.pipeline_only:
            rows += replay(py, trees, args.replay_repeat)
        rows += pipeline(folder, py, trees, args)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after)")
    print("\nevery ratio (issues 32 and 38), median of the rounds [min-max], target, met:")
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


def pipeline(
    folder: Path, py: str, trees: dict[str, str], args: argparse.Namespace
) -> list[tuple[str, list[float], float, bool]]:
    """Issue 38: compare, headless replay and read of one log, side by side in each round, on
    the wide pair (plain, gzip) and the step-log pair; then the replay's TUI in tmux."""
    out: list[tuple[str, list[float], float, bool]] = []
    pairs = [("wide", args.wide_steps), ("wide.gz", args.wide_steps), ("steplog", args.steps)]
    wide: tuple[Path, Path] | None = None
    chosen = args.pipeline_pairs.split(",")
    for fmt, n in [p for p in pairs if p[0] in chosen or p[0] == "wide"]:
        if fmt not in chosen:  # the TUI's pair, written and not measured here
            wide = make(folder, fmt, n)[:2]
            continue
        t0 = time.perf_counter()
        a, b, size = make(folder, fmt, n)
        wide = (a, b) if fmt == "wide" else wide
        print(
            f"\npipeline {fmt}: {n:,} steps a side, 2 logs {size / 2**20:.0f} MiB on disk "
            f"(written in {time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        more = ["--max-bytes", "2G"] if fmt.endswith((".gz", ".xz")) else []
        cmds = {}
        for name, tree in trees.items():
            tm = ["env", f"PYTHONPATH={tree}", py, "-m", "tuimon"]
            cmds[f"{name} compare"] = [*tm, "compare", str(a), str(b), *more]
            cmds[f"{name} replay"] = [*tm, "replay", str(a), str(b), "--headless", *more]
            cmds[f"{name} read"] = [*tm, "read", str(a), *more]
        round_of(cmds)  # bytecode written, files in the page cache: not counted
        rounds = [round_of(cmds) for _ in range(args.pipeline_repeat)]
        for i, r in enumerate(rounds):
            print(
                f"  round {i + 1}: "
                + " · ".join(f"{k} {w:.2f} s {m / 1024:.0f} MiB" for k, (w, _, m) in r.items()),
                flush=True,
            )
        got = []
        for name in trees:
            wall = {k: [r[f"{name} {k}"][0] for r in rounds] for k in ("compare", "replay", "read")}
            got.append((f"{fmt} {name} replay/compare", div(wall["replay"], wall["compare"]), 1.5))
            got.append((f"{fmt} {name} read/compare", div(wall["read"], wall["compare"]), 1.0))
            for k in ("compare", "replay", "read"):
                mem = [r[f"{name} {k}"][2] * 1024 / size for r in rounds]
                got.append((f"{fmt} {name} {k} memory/logs", mem, 1.0))
            print(
                f"  {name}: "
                + " · ".join(f"{k} {statistics.median(w):.2f} s" for k, w in wall.items())
                + " · peak "
                + " · ".join(
                    f"{k} {max(r[f'{name} {k}'][2] for r in rounds) / 1024:.0f} MiB"
                    for k in ("compare", "replay", "read")
                )
            )
        if "before" in trees:
            each = [r["tuimon compare"][0] / r["before compare"][0] for r in rounds]
            got.append((f"{fmt} compare tuimon/before", each, 1.1))
        for what, each, target in got:
            print(
                f"  {what} {statistics.median(each):.2f}x [{min(each):.2f}-{max(each):.2f}] "
                f"(<= {target})"
            )
        out += [(what, each, target, False) for what, each, target in got]
        for p in folder.glob(f"*.{fmt}"):
            if fmt != fmt.split(".")[0]:
                p.unlink()
    if wide is not None and shutil.which("tmux"):
        out += tui(wide, py, trees, args.pipeline_repeat, args.tui_timeout)
    elif wide is not None:
        print("no TUI row: tmux is not installed")
    return out


def div(xs: list[float], ys: list[float]) -> list[float]:
    return [x / y for x, y in zip(xs, ys, strict=True)]


TMUX = "tuimon-bench-scale"
FIRST_ROW = re.compile(r"│\s+\d+ [-\d]")
"""A pane's row of a step (the replay's first row on screen: at the default pace it may be a
later step than 0 when the rows due by then come together)."""


def tui(
    pair: tuple[Path, Path], py: str, trees: dict[str, str], repeat: int, timeout: float
) -> list[tuple[str, list[float], float, bool]]:
    """`tuimon replay A B` in tmux (120x40, the default pace): seconds from the start of the
    command until the first row is on screen and until the verdict (DIVERGED) is, each
    checkout in turn, `repeat` rounds (capture-pane polled every 20 ms)."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(repeat):
        for name, tree in trees.items():
            cmd = (
                f"exec env PYTHONPATH={shlex.quote(tree)} {shlex.quote(py)} -m tuimon replay "
                f"{shlex.quote(str(pair[0]))} {shlex.quote(str(pair[1]))}"
            )
            subprocess.run(["tmux", "kill-session", "-t", TMUX], capture_output=True, check=False)
            start = time.perf_counter()
            subprocess.run(
                ["tmux", "new-session", "-d", "-s", TMUX, "-x", "120", "-y", "40", cmd],
                check=True,
                env=ENV,
            )
            first = verdict = math.inf
            while time.perf_counter() - start < timeout and math.inf in (first, verdict):
                text = subprocess.run(
                    ["tmux", "capture-pane", "-p", "-t", TMUX],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
                now = time.perf_counter() - start
                if first == math.inf and FIRST_ROW.search(text):
                    first = now
                if verdict == math.inf and "DIVERGED" in text:
                    verdict = now
                time.sleep(0.02)
            subprocess.run(["tmux", "send-keys", "-t", TMUX, "q"], check=False)
            time.sleep(0.5)
            subprocess.run(["tmux", "kill-session", "-t", TMUX], capture_output=True, check=False)
            times[name].append((first, verdict))
    print(
        f"\nTUI in tmux (replay of the wide pair, default pace), {repeat} rounds, "
        f"a wait capped at {timeout:.0f} s (inf: not on screen by then):"
    )
    out = []
    for name, each in times.items():
        firsts, verdicts = [f for f, _ in each], [v for _, v in each]
        print(
            f"  {name}: first row {' '.join(f'{f:.2f}' for f in firsts)} s · verdict "
            f"{' '.join(f'{v:.2f}' for v in verdicts)} s (no target)"
        )
        out.append((f"tui {name} first row s", firsts, 2.0, False))
    return out


if __name__ == "__main__":
    main()
