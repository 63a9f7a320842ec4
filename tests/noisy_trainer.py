"""A tiny deterministic "training" with a small noise source, for `--tolerance-from` tests.

`python noisy_trainer.py --seed S --lr LR [--steps N] [--noise E] [--noise-file F]`: prints a
tuimon step log whose loss follows exp(-lr * step) (a run of a changed learning rate parts from
step 1 on) plus E or -E for the whole run: its sign drawn from the OS (never seeded), or with
--noise-file alternating run by run (each run appends a byte to F; an odd count gives +E), so
any two runs of one seed differ by 0 or 2E at each step, and the runs that share F show both.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import orjson


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--noise", type=float, default=1e-6)
    p.add_argument("--noise-file", default=None)
    args = p.parse_args()
    if args.noise_file:  # an append is atomic: each run gets its own count
        fd = os.open(args.noise_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, b".")
        odd = os.lseek(fd, 0, os.SEEK_CUR) % 2 == 1
        os.close(fd)
    else:
        odd = os.urandom(1)[0] % 2 == 1
    jitter = args.noise if odd else -args.noise
    out = sys.stdout.buffer
    header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": args.seed}}
    out.write(orjson.dumps({**header, "hyper": {"lr": args.lr}, "env": {"device": "cpu"}}) + b"\n")
    for step in range(args.steps):
        loss = math.exp(-args.lr * step) * (1 + args.seed / 100) + jitter
        out.write(orjson.dumps({"type": "step", "step": step, "loss": loss, "acc": step / 100}))
        out.write(b"\n")
    out.write(orjson.dumps({"type": "end", "status": "ok", "steps": args.steps}) + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
