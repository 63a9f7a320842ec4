"""A user's own DDP script, as `tuimon pair --nproc` runs it (tests): every rank prints its
step log (its shard's loss and its parameter digests, through `tuimon.adopt`), gradients are
summed with gloo. Misbehaves on request, each as RANK:STEP: `--nudge` adds 1e-3 to one weight
of that rank before the step is logged, `--die` exits 3, `--hang` sleeps in place of the
step's all-reduce (its peers wait in the collective). `--pidfile` says where each rank runs.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/ddp_trainer.py
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from tuimon.adopt import StepLogger, apply_pair_settings, model_digests


def _at(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    rank, step = text.split(":")
    return int(rank), int(step)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nudge", default=None)
    p.add_argument("--die", default=None)
    p.add_argument("--hang", default=None)
    p.add_argument("--pidfile", default=None, help="write the pid to PIDFILE.SIDE.RANK")
    args = p.parse_args()
    env = apply_pair_settings(args.seed)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.pidfile:
        side = os.environ.get("TUIMON_SIDE", "x")
        Path(f"{args.pidfile}.{side}.{rank}").write_text(str(os.getpid()))
    torch.manual_seed(args.seed)  # the same weights and data on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = torch.randn(64, 8)
    y = x.sum(1, keepdim=True)
    mine = slice(rank * 64 // world, (rank + 1) * 64 // world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    log = StepLogger(hyper={"steps": args.steps}, env={**env, "rank": rank, "world_size": world})
    for k in range(args.steps):
        if (rank, k) == _at(args.die):
            print(f"rank {rank}: dying at step {k}", file=sys.stderr, flush=True)
            os._exit(3)  # at once, as a crash would (gloo's teardown at exit may abort)
        if (rank, k) == _at(args.nudge):
            with torch.no_grad():
                model[0].weight[0, 0] += 1e-3
        loss = ((model(x[mine]) - y[mine]) ** 2).sum() / 64
        log.step(k, loss=loss.item(), **model_digests(model))
        opt.zero_grad()
        loss.backward()
        if (rank, k) == _at(args.hang):
            time.sleep(3600)
        for param in model.parameters():
            dist.all_reduce(param.grad)
        opt.step()
    log.close()
    dist.destroy_process_group()
    gc.collect()  # free gloo now: at the interpreter's exit its threads may abort the process
    return 0


if __name__ == "__main__":
    sys.exit(main())
