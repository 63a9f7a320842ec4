#!/usr/bin/env bash
# Re-create the sample pairs: each is `tuimon pair --headless` on this machine, renamed to a
# stable folder name. What they show is what they show. Usage: bash sample_logs/make_samples.sh
# (with `tuimon` on PATH). `--gather view` (the published layout) is the reference workload's
# default; `--gather contiguous` is the layout that races with 2 CPU threads. The folders marked
# "earlier making" in README.md were made before --gather existed, when contiguous was the only
# layout: the lines below with --gather contiguous are the commands that make them today.
set -uo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
pair() {  # pair NAME ARGS...
  local name=$1; shift
  rm -rf "$name"
  tuimon pair --headless --seed 0 --devices cpu,cpu --steps 300 --freq-every 50 \
    --store "$tmp/$name" "$@"
  echo "exit code $?"
  mv "$tmp/$name"/* "$name"
}
pair cpu-cpu-threads1 --threads 1
pair cpu-cpu-threads2 --threads 2
pair cpu-cpu-threads2-contiguous --threads 2 --gather contiguous
pair cpu-cpu-threads2-deterministic --threads 2 --gather contiguous --deterministic
pair cpu-cpu-threads-1-vs-2 --threads 1,2 --gather contiguous
# A real failure: run b is killed with SIGKILL once it has logged 100 steps.
(
  while ! [ "$(cat "$tmp"/cpu-cpu-b-killed/*/b.jsonl 2>/dev/null | grep -c '"type":"step"')" -ge 100 ]; do
    sleep 0.2
  done
  kill -KILL $(pgrep -f "cpu-cpu-b-killed/.*/emb-b.npy")  # run b of this pair, by its id
) &
pair cpu-cpu-b-killed --threads 1 --gather contiguous
wait
# Distributed sides (--nproc, torch.distributed with gloo), small settings: p = 23, 100 steps.
ranks() {  # ranks NAME ARGS...
  local name=$1; shift
  rm -rf "$name"
  tuimon pair --headless --seed 0 --devices cpu,cpu --p 23 --steps 100 --freq-every 50 \
    --threads 1 --store "$tmp/$name" "$@"
  echo "exit code $?"
  mv "$tmp/$name"/* "$name"
}
ranks cpu-cpu-ranks-1-vs-2 --nproc 1,2
ranks cpu-cpu-ranks-2-vs-2 --nproc 2
rm -rf "$tmp"
