"""A fake training script for engine tests: prints tuimon JSONL and misbehaves on request."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--side", default="a")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--diverge-at", type=int, default=-1, help="side b differs from this step")
    p.add_argument("--crash-at", type=int, default=-1, help="exit 1 with a traceback at this step")
    p.add_argument("--crash-side", default="b")
    p.add_argument("--hang-at", type=int, default=-1, help="go silent for --hang-s at this step")
    p.add_argument("--hang-s", type=float, default=2.0)
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    p.add_argument("--garbage", action="store_true", help="garbage, binary and markup lines")
    p.add_argument("--bigline", action="store_true", help="a 2 MB line at step 1")
    p.add_argument(
        "--chatter", action="store_true", help="at step 1, a markup line and a stderr warning"
    )
    p.add_argument("--nan-at", type=int, default=-1, help="train_loss NaN on side b from here")
    p.add_argument("--extra-steps", type=int, default=0, help="side b logs this many more")
    p.add_argument("--no-header", action="store_true")
    p.add_argument("--stdout-file", default=None, help="write the log to this file instead")
    p.add_argument("--tag", default="", help="ignored: lets a test find its processes")
    p.add_argument("--emb", default=None, help="save a small array here at the end (.npy)")
    a = p.parse_args()
    out = open(a.stdout_file, "w") if a.stdout_file else sys.stdout  # noqa: SIM115
    emit = lambda obj: (out.write(json.dumps(obj) + "\n"), out.flush())  # noqa: E731
    if not a.no_header:
        emit(
            {
                "type": "header",
                "format": "tuimon.steplog/1",
                "run": {"seed": 0},
                "hyper": {"steps": a.steps},
                "env": {
                    "device": "cpu",
                    "pid_side": a.side,
                    "threads": os.environ.get("OMP_NUM_THREADS"),
                },
            }
        )
    steps = a.steps + (a.extra_steps if a.side == "b" else 0)
    for i in range(steps):
        if i == a.crash_at and a.side == a.crash_side:
            print(
                "Traceback (most recent call last):\nRuntimeError: boom at step",
                i,
                file=sys.stderr,
                flush=True,
            )
            return 1
        if i == a.hang_at:
            time.sleep(a.hang_s)
        loss = 1.0 / (i + 1)
        if a.side == "b" and 0 <= a.diverge_at <= i:
            loss += 1e-7 * (i - a.diverge_at + 1)
        if a.side == "b" and 0 <= a.nan_at <= i:
            loss = float("nan")
        digests = {"W_E": "e" if a.side == "b" and 0 <= a.diverge_at <= i else "0", "W_U": "0"}
        emit(
            {
                "type": "step",
                "step": i,
                "t": i * 0.01,
                "train_loss": loss,
                "test_loss": 2 * loss,
                "param_digest": "".join(digests.values()),
                "param_digests": digests,
            }
        )
        if a.garbage and i == 1:
            out.write("UserWarning: [bold red]not markup[/] \x1b[31mred\x1b[0m\n")
            out.flush()
            sys.stdout.buffer.write(b'\xff\xfe\x00 binary junk\n{"broken": \n[1, 2, 3]\n')
            sys.stdout.buffer.flush()
        if a.chatter and i == 1:
            out.write(f"[bold red]boom[/] from {a.side}\n")
            out.flush()
            print(f"warning on stderr {a.side}", file=sys.stderr, flush=True)
        if a.bigline and i == 1:
            out.write('{"step": "x", "blob": "' + "z" * 2_000_000 + '"}\n')
            out.flush()
        if a.sleep:
            time.sleep(a.sleep)
    artifacts = {}
    if a.emb:
        import numpy as np

        emb = np.arange(6, dtype=np.float32).reshape(2, 3)
        if a.side == "b" and a.diverge_at >= 0:
            emb[1, 2] += 1e-3
        np.save(a.emb, emb)
        artifacts["emb"] = a.emb
    emit({"type": "end", "status": "ok", "steps": steps, "artifacts": artifacts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
