"""Benchmark: the live pair's engine alone, in one process, without children or pipes.

    python bench/bench_live_engine.py [--steps N] [--tick T]

The lines `bench_live.py`'s children print are made in memory first; then, a tick of T lines
at a time for each side: `LineParser.feed` -> `PairAligner.feed_batch` -> `AlignedStep.to_dict`
-> the bytes of an aligned.jsonl row. Prints the aligned steps per second per side in CPU time
of this process (what the machine's other jobs move least) and in wall time. Never asserts.
"""

from __future__ import annotations

import argparse
import json
import time

import orjson

from tuimon.engine.judge.align import PairAligner
from tuimon.readers import LineParser
from tuimon.steplog import Step


def lines(steps: int) -> list[bytes]:
    """The lines of one child of `bench_live.py`."""
    head = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0},
            "hyper": {"steps": steps}, "env": {"device": "cpu"}}  # fmt: skip
    out = [json.dumps(head).encode() + b"\n"]
    for i in range(steps):
        loss = 1.0 / (i + 1)
        row = {"type": "step", "step": i, "t": i * 1e-3, "train_loss": loss,
               "test_loss": 2 * loss, "train_acc": 0.5, "lr": 1e-3,
               "param_digest": "00"}  # fmt: skip
        out.append(json.dumps(row).encode() + b"\n")
    out.append(json.dumps({"type": "end", "status": "ok", "steps": steps}).encode() + b"\n")
    return out


def run(data: list[bytes], tick: int) -> int:
    """Parse, align and serialise both sides; the number of aligned rows."""
    parsers = {"a": LineParser(side="a"), "b": LineParser(side="b")}
    aligner = PairAligner()
    rows = 0
    for start in range(0, len(data), tick):
        chunk = data[start : start + tick]
        for side, parser in parsers.items():
            steps = [r for r in parser.feed(chunk) if isinstance(r, Step)]
            for aligned in aligner.feed_batch(side, steps):
                orjson.dumps(aligned.to_dict(), option=orjson.OPT_APPEND_NEWLINE)
                rows += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--tick", type=int, default=500)
    args = parser.parse_args()
    data = lines(args.steps)
    wall, cpu = time.perf_counter(), time.process_time()
    rows = run(data, args.tick)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{args.steps:,} steps per side, {args.tick} lines a tick: {rows:,} aligned rows")
    print(f"aligned steps/s per side  {rows / cpu:10,.0f} (CPU time)  {rows / wall:10,.0f} (wall)")


if __name__ == "__main__":
    main()
