"""Benchmark: judging a pair of 25,000-step logs, measured side by side in one run.

    python bench/bench_align.py [--steps N] [--repeat R]

Builds two synthetic step logs with 7 metrics that part at step 2 (as the design's measured runs
do), then times, best of R:

  (a) compare_steps         the whole logs at once (numpy), as `tuimon compare` / replay do
  (b) PairAligner.feed      one record at a time, alternating sides
  (b2) feed_batch           a tick's records of a side at once, as a live pair does (256 and
                            4 per tick: a slow run's tick, judged in plain Python floats)
  (e) headless replay       the engine alone (read + parse, then `PairSession` over a
                            `ReplaySource`, flat out): `tuimon replay A B --headless` less
                            the interpreter's start
  (c) parse_line            the 2 x N lines read back into records
  (d) pandas                (only if importable) the script a user would write instead:
                            read_json(lines=True) both, merge on step, rel diffs, first step

and the peak traced memory (tracemalloc) of (a) and (b). Prints ratios; never asserts.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tuimon.engine.judge.align import PairAligner, compare_steps
from tuimon.steplog import Step, dumps, parse_line

METRICS = ("train_loss", "test_loss", "train_acc", "test_acc", "lr", "grad_norm", "weight_norm")
TENSORS = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U")
DIVERGE_AT = 2


def hexdigest(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


def build_logs(n: int, seed: int = 0) -> tuple[list[bytes], list[bytes]]:
    """Two logs as lines of bytes: equal through step 1, apart from step 2 on (6e-10 in train
    loss at step 2, growing to ~5e-4 by step 50 and levelling off), W_E parting first."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    base = {
        "train_loss": 4.7 * np.exp(-steps / 3000) + 0.01 * rng.random(n),
        "test_loss": 4.8 * np.exp(-steps / 9000) + 0.01 * rng.random(n),
        "train_acc": np.minimum(1.0, steps / 2000 + 0.01 * rng.random(n)),
        "test_acc": np.minimum(1.0, steps / 15000 + 0.01 * rng.random(n)),
        "lr": np.full(n, 1e-3),
        "grad_norm": 1.0 + rng.random(n),
        "weight_norm": 30.0 + np.cumsum(rng.random(n)) * 1e-3,
    }
    growth = np.where(
        steps < DIVERGE_AT, 0.0, 6e-10 * np.exp(np.minimum(steps - DIVERGE_AT, 48) / 3.5)
    )
    lines_a, lines_b = [], []
    header = {"type": "header", "run": {"name": "bench"}, "hyper": {"p": 113}, "env": {}}
    lines_a.append(dumps({**header, "run": {"name": "a"}}))
    lines_b.append(dumps({**header, "run": {"name": "b"}}))
    for s in range(n):
        ma = {m: float(base[m][s]) for m in METRICS}
        mb = dict(ma)
        if s >= DIVERGE_AT:
            for i, m in enumerate(METRICS):
                if m != "lr" and (s > DIVERGE_AT or m == "train_loss"):
                    mb[m] = ma[m] * (1 + growth[s] * (1 + i / 7))
        ta = {name: hexdigest("a", name, s) for name in TENSORS}
        tb = dict(ta)
        if s >= DIVERGE_AT:
            for name in TENSORS if s > DIVERGE_AT else ("W_E",):
                tb[name] = hexdigest("b", name, s)
        for lines, m, t in ((lines_a, ma, ta), (lines_b, mb, tb)):
            lines.append(
                dumps(
                    {
                        "type": "step",
                        "step": s,
                        "t": 0.01 * s,
                        **m,
                        "param_digest": hexdigest(sorted(t.items())),
                        "param_digests": t,
                    }
                )
            )
    for lines in (lines_a, lines_b):
        lines.append(dumps({"type": "end", "status": "ok", "steps": n, "wall_s": 0.01 * n}))
    return lines_a, lines_b


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_memory(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def steps_of(lines: list[bytes]) -> list[Step]:
    return [r for line in lines if isinstance(r := parse_line(line), Step)]


def parse_both(lines_a: list[bytes], lines_b: list[bytes]) -> tuple[list[Step], list[Step]]:
    return steps_of(lines_a), steps_of(lines_b)


def run_compare(a: list[Step], b: list[Step]) -> int | None:
    _, aligner = compare_steps(a, b)
    return aligner.summary().first_divergent_step


def run_live(a: list[Step], b: list[Step]) -> int | None:
    aligner = PairAligner()
    feed = aligner.feed
    for ra, rb in zip(a, b, strict=True):
        feed("a", ra)
        feed("b", rb)
    return aligner.summary().first_divergent_step


def run_ticks(a: list[Step], b: list[Step], tick: int = 256) -> int | None:
    """A live pair's way with a fast run: each tick's records of a side in one `feed_batch`."""
    aligner = PairAligner()
    for i in range(0, len(a), tick):
        aligner.feed_batch("a", a[i : i + tick])
        aligner.feed_batch("b", b[i : i + tick])
    return aligner.summary().first_divergent_step


def run_replay(path_a: Path, path_b: Path) -> tuple[float, float, int | None]:
    """A headless replay flat out: (seconds reading + parsing, seconds of the session, first
    divergent step)."""
    import asyncio

    from tuimon.engine.sources.replay import replay_session
    from tuimon.engine.sources.saved_pair import resolve_logs

    t0 = time.perf_counter()
    session = replay_session(resolve_logs([str(path_a), str(path_b)]), speed=math.inf)
    t1 = time.perf_counter()
    summary = asyncio.run(session.run())
    return t1 - t0, time.perf_counter() - t1, summary.first_divergent_step


def pandas_script(path_a: Path, path_b: Path) -> Any:
    """What a user would write with pandas instead (defaults, as people write it)."""
    import pandas as pd

    a = pd.read_json(path_a, lines=True)
    b = pd.read_json(path_b, lines=True)
    a = a[a["type"] == "step"]
    b = b[b["type"] == "step"]
    m = a.merge(b, on="step", suffixes=("_a", "_b"))
    differs = np.zeros(len(m), dtype=bool)
    for name in METRICS:
        xa, xb = m[f"{name}_a"].astype(float), m[f"{name}_b"].astype(float)
        m[f"{name}_rel"] = (xa - xb).abs() / np.maximum(xa.abs(), xb.abs())
        differs |= (xa != xb).to_numpy()
    differs |= (m["param_digest_a"] != m["param_digest_b"]).to_numpy()
    first = m.loc[differs, "step"].min() if differs.any() else None
    return None if first is None else int(first)


def pandas_inexact(path_a: Path, a: list[Step]) -> tuple[int, int]:
    """How many metric values pandas' default reader did not keep bit for bit (of how many)."""
    import pandas as pd

    df = pd.read_json(path_a, lines=True)
    df = df[df["type"] == "step"]
    bad = total = 0
    for name in METRICS:
        theirs = df[name].astype(float).to_numpy()
        ours = np.array([s.metrics[name] for s in a])
        bad += int(np.count_nonzero(theirs.view(np.int64) != ours.view(np.int64)))
        total += len(ours)
    return bad, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, r = args.steps, args.repeat

    t0 = time.perf_counter()
    lines_a, lines_b = build_logs(n)
    size = sum(map(len, lines_a)) + sum(map(len, lines_b))
    print(
        f"built 2 logs x {n} steps, {len(METRICS)} metrics, parting at step {DIVERGE_AT}: "
        f"{size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s; best of {r}"
    )

    t_parse, (a, b) = best_of(r, lambda: parse_both(lines_a, lines_b))
    t_cmp, first_cmp = best_of(r, lambda: run_compare(a, b))
    t_live, first_live = best_of(r, lambda: run_live(a, b))
    mem_cmp = peak_memory(lambda: run_compare(a, b))
    mem_live = peak_memory(lambda: run_live(a, b))
    t_tick, first_tick = best_of(r, lambda: run_ticks(a, b))
    t_tick4, first_tick4 = best_of(r, lambda: run_ticks(a, b, 4))

    rows = [
        ("(a) compare_steps (numpy)", t_cmp, first_cmp, mem_cmp),
        ("(b) PairAligner.feed per record", t_live, first_live, mem_live),
        ("(b2) feed_batch, 256 per tick", t_tick, first_tick, None),
        ("(b2) feed_batch, 4 per tick", t_tick4, first_tick4, None),
        ("(c) parse_line, 2 x N lines", t_parse, None, None),
    ]

    t_pd = first_pd = None
    inexact = (0, 0)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    with tempfile.TemporaryDirectory() as tmp:
        path_a, path_b = Path(tmp, "a.jsonl"), Path(tmp, "b.jsonl")
        path_a.write_bytes(b"".join(lines_a))
        path_b.write_bytes(b"".join(lines_b))
        replays = [run_replay(path_a, path_b) for _ in range(r)]
        if pd is not None:
            t_pd, first_pd = best_of(r, lambda: pandas_script(path_a, path_b))
            inexact = pandas_inexact(path_a, a)
    t_read, t_session, first_replay = min(replays, key=lambda x: x[0] + x[1])
    rows.append(("(e) replay: session + aligner", t_session, first_replay, None))
    rows.append(("(e) replay: read + parse + session", t_read + t_session, first_replay, None))
    if pd is not None:
        rows.append((f"(d) pandas {pd.__version__} script", t_pd, first_pd, None))

    print("peak MB: tracemalloc peak; (a) returns all N aligned steps, (b) keeps none of them")
    print(f"{'':34} {'best s':>9} {'per step':>10} {'x (a)':>8} {'first step':>11} {'peak MB':>9}")
    for name, t, first, mem in rows:
        print(
            f"{name:34} {t:9.4f} {t / n * 1e6:8.2f}us {t / t_cmp:8.2f} "
            f"{'-' if first is None else first:>11} {'-' if mem is None else f'{mem / 1e6:.1f}':>9}"
        )
    print()
    print(f"live feed / whole-log numpy:      {t_live / t_cmp:6.2f}x")
    print(
        f"headless replay, engine alone:    {n / t_session:,.0f} steps/s "
        f"(with reading and parsing: {n / (t_read + t_session):,.0f}; target >= 20,000)"
    )
    print(f"parse / compare:                  {t_parse / t_cmp:6.2f}x")
    print(f"tuimon parse + compare, total:    {t_parse + t_cmp:.4f} s")
    print(f"tuimon parse + live feed, total:  {t_parse + t_live:.4f} s")
    if t_pd is None:
        print("(d) pandas not importable: skipped")
    else:
        print(f"pandas / (tuimon parse+compare):  {t_pd / (t_parse + t_cmp):6.2f}x")
        print(f"pandas / (tuimon parse+live):     {t_pd / (t_parse + t_live):6.2f}x")
        print(
            f"pandas read_json (defaults) changed {inexact[0]} of {inexact[1]} metric values "
            "of log a in the last bits (tuimon: 0, lossless)"
        )
    firsts = {first_cmp, first_live, first_replay} | ({first_pd} if t_pd is not None else set())
    print(f"first divergent step: {sorted(firsts, key=str)} (expected {DIVERGE_AT})")


if __name__ == "__main__":
    main()
