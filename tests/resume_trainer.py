"""A training script that stops and resumes as `tuimon pair --resume-at N` asks (its command
takes {checkpoint_at}, {checkpoint} and {resume_from}); `--forget rng|optimizer|data` makes
its resume lose that part of the state. Pure Python: no torch, so a pair of it takes a moment."""

from __future__ import annotations

import argparse
import os
import pickle
import random

from tuimon.adopt import StepLogger, rng_state, set_rng_state, state_digests

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--checkpoint-at", default="")
p.add_argument("--checkpoint", default="")
p.add_argument("--resume-from", default="")
p.add_argument("--forget", choices=("nothing", "rng", "optimizer", "data"), default="nothing")
p.add_argument("--no-digests", action="store_true", help="log no state digests")
args = p.parse_args()

random.seed(int(os.environ.get("TUIMON_SEED") or 0))
data = [i / 16 for i in range(16)]  # read in order, from a position the checkpoint keeps
w, velocity, start, position = 0.0, 0.0, 0, 0
if args.resume_from:
    with open(args.resume_from, "rb") as fh:
        saved = pickle.load(fh)
    w, start = saved["w"], saved["next_step"]
    if args.forget != "data":
        position = saved["position"]
    if args.forget != "optimizer":
        velocity = saved["velocity"]
    if args.forget != "rng":
        set_rng_state(saved["rng"])
log = StepLogger(run={"name": "resume-test"}, hyper={"steps": args.steps})
for step in range(start, args.steps):
    state = state_digests({"velocity": velocity}, data=position)  # as the step begins
    x = random.random() + data[position % len(data)]
    position += 1
    digests = {} if args.no_digests else {"state_digests": state}
    log.step(step, loss=(w - x) ** 2, w=w, param_digest=repr(w), **digests)
    velocity = 0.9 * velocity + (w - x)
    w -= 0.1 * velocity
    if args.checkpoint_at and step == int(args.checkpoint_at):
        with open(args.checkpoint, "wb") as fh:
            saved = {"w": w, "velocity": velocity, "rng": rng_state(), "next_step": step + 1}
            pickle.dump({**saved, "position": position}, fh)
        break
log.close()
