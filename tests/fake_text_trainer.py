"""A fake training script that prints text the way common trainers do (nanoGPT lines, a tqdm
bar redrawn with \\r), or writes a Lightning-style metrics.csv rewritten as a whole (--csv)."""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--side", default="a")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--diverge-at", type=int, default=-1)
    p.add_argument("--csv", default=None, help="write metrics.csv here instead of printing")
    p.add_argument("--sleep", type=float, default=0.0)
    a = p.parse_args()
    print("number of parameters: 0.80M", flush=True)
    rows: list[dict[str, object]] = []
    for i in range(a.steps):
        loss = 4.0 / (i + 1) + (1e-4 if a.side == "b" and 0 <= a.diverge_at <= i else 0.0)
        if a.csv:
            rows.append({"epoch": 0, "step": i, "train_loss": loss})
            if i % 2 == 1:
                rows.append({"epoch": 0, "step": i, "val_loss": loss * 2})
            tmp = a.csv + ".tmp"
            with open(tmp, "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=["epoch", "step", "train_loss", "val_loss"])
                w.writeheader()
                w.writerows(rows)
            os.replace(tmp, a.csv)
        else:
            sys.stdout.write(f"training:  50%|#   | {i}/{a.steps} [loss={loss:.2f}]\r")
            if i % 2 == 0:
                print(f"step {i}: train loss {loss:.6f}, val loss {loss * 2:.6f}")
            print(f"iter {i}: loss {loss:.6f}, time {10 + i * 0.37:.2f}ms, mfu 5.00%", flush=True)
        time.sleep(a.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
