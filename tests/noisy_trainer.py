"""A tiny deterministic "training" with a small noise source, for `--tolerance-from` tests.

`python noisy_trainer.py --seed S --lr LR [--steps N] [--noise E]`: prints a tuimon step log
whose loss follows exp(-lr * step) (a run of a changed learning rate parts from the first step
on) plus noise drawn from the OS (never seeded: two runs of one seed differ by at most 2E).
"""

from __future__ import annotations

import argparse
import math
import os
import struct
import sys

import orjson


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--noise", type=float, default=1e-6)
    args = p.parse_args()
    out = sys.stdout.buffer
    header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": args.seed}}
    out.write(orjson.dumps({**header, "hyper": {"lr": args.lr}, "env": {"device": "cpu"}}) + b"\n")
    for step in range(args.steps):
        (raw,) = struct.unpack("<Q", os.urandom(8))
        jitter = (raw / 2**64 * 2 - 1) * args.noise
        loss = math.exp(-args.lr * step) * (1 + args.seed / 100) + jitter
        out.write(orjson.dumps({"type": "step", "step": step, "loss": loss, "acc": step / 100}))
        out.write(b"\n")
    out.write(orjson.dumps({"type": "end", "status": "ok", "steps": args.steps}) + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
