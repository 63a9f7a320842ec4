#!/usr/bin/env bash
# The GPU samples of issue 11, made by ONE command on the device machine (one NVIDIA H200), sized
# to fit its 15 minutes of device time (about 9 minutes of work here, plus the machine's start):
#
#   run(command="bash sample_logs/make_gpu_samples.sh", carry=[".whl"], timeout_s=600)
#
# Before it (here, at no device time): that machine's image has torch, numpy and rich but not
# orjson, so carry orjson's wheel (README of the device tool):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_17_x86_64 -d .whl orjson
#
# Phase 1 (p=113, seed 0, 300 steps, the README's table): cuda,cuda; cuda,cuda --deterministic;
# cuda,cpu. Phase 2 (the key-frequency question, STEPS=25000 by default, --freq-every 250):
#   kf-s0-cuda-cpu         seed 0, cuda against cpu (another device: the lab's MPS-vs-CPU case)
#   kf-sN-cuda-layout      seeds 0, 1, 2, cuda against cuda, side a --gather view (the published
#                          layout), side b --gather contiguous: the same maths in another kernel
#                          order, the GPU analogue of the CPU thread race
# Every pair stops at DEADLINE seconds (default 470) with SIGINT, so a pair that could not finish
# is saved INCOMPLETE with what it logged (its key_freqs every 250 steps still answer "when").
# What comes back in $OUT: summary.txt (environment, each pair's headless output and verdict,
# key-frequency sets), short.tar.xz (the three 300-step pairs, whole), and one kf-*.tar.xz per
# 25,000-step pair (pair.json, a.jsonl, b.jsonl, emb-a.npy, emb-b.npy; aligned.jsonl is left out
# for size: `tuimon compare a.jsonl b.jsonl --save` rebuilds it, or replay the folder as it is).
# Timing is a guess (no GPU was lent to the session that wrote this): 25,000 steps in about
# 400 s needs about 16 ms a step. The cuda,cpu pair's CPU side (8 threads, p = 113) is probably
# slower and may end INCOMPLETE; its key_freqs every 250 steps still show whether the sets part
# while it ran. If the cuda,cuda pairs also end INCOMPLETE, rerun with SEEDS=0 (3 GPU runs
# instead of 7) or fewer STEPS, and say so.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
STEPS=${STEPS:-25000}
DEADLINE=${DEADLINE:-470}  # the pairs stop here; packing the results takes the rest
SEEDS=${SEEDS:-0 1 2}
# Smoke test without a GPU (only the plumbing): GPU=cpu PY=.venv/bin/python P=23 SHORT=5 \
#   STEPS=20 DEADLINE=300 OUT=/tmp/gpu-smoke bash sample_logs/make_gpu_samples.sh
GPU=${GPU:-cuda}
PY=${PY:-python3}
P=${P:-113}
SHORT=${SHORT:-300}
mkdir -p "$OUT"
if ! "$PY" -c "import orjson" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl || { echo "orjson missing and no wheel in .whl (see the top of this script)"; exit 2; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
summary=$OUT/summary.txt
store=$(mktemp -d)
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda,
 'cudnn', torch.backends.cudnn.version(), 'python', sys.version.split()[0]);
print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'no cuda')"
  nproc
} > "$summary" 2>&1

left() { local s=$((DEADLINE - SECONDS)); echo $((s > 1 ? s : 1)); }

pair() {  # pair NAME ARGS...: a headless pair saved as $store/NAME, stopped at the deadline
  local name=$1; shift
  timeout -s INT -k 30 "$(left)" "$PY" -m tuimon pair --headless --store "$store/$name.tmp" \
    "$@" > "$store/$name.txt" 2>&1
  echo "exit code $?" >> "$store/$name.txt"
  mv "$store/$name.tmp"/* "$store/$name" 2>/dev/null
  rmdir "$store/$name.tmp" 2>/dev/null
}

# Phase 1: the three 300-step samples, side by side (each GPU run needs one core, cpu runs 8).
pair cuda-cuda --seed 0 --devices "$GPU,$GPU" --steps "$SHORT" --p "$P" &
pair cuda-cuda-deterministic --seed 0 --devices "$GPU,$GPU" --steps "$SHORT" --p "$P" --deterministic &
pair cuda-cpu --seed 0 --devices "$GPU,cpu" --steps "$SHORT" --p "$P" --threads 8 &
wait
echo "phase 1 done at ${SECONDS}s" >> "$summary"

# Phase 2: the 25,000-step key-frequency pairs, all at once.
KF=(--steps "$STEPS" --p "$P" --eval-every 100 --freq-every 250)
pair kf-s0-cuda-cpu --seed 0 --devices "$GPU,cpu" --threads 8 "${KF[@]}" &
for seed in $SEEDS; do
  # shellcheck disable=SC2016  # {side}, {device}, {pair_dir} are tuimon's, not the shell's
  pair "kf-s$seed-cuda-layout" --seed "$seed" --devices "$GPU,$GPU" --threads 1 --shell -- \
    "$PY -m tuimon train --device {device} --seed {seed} --threads 1" "${KF[*]}" \
    '--gather $(test {side} = a && echo view || echo contiguous)' \
    '--save-emb {pair_dir}/emb-{side}.npy' &
done
wait
echo "phase 2 done at ${SECONDS}s" >> "$summary"

for name in cuda-cuda cuda-cuda-deterministic cuda-cpu kf-s0-cuda-cpu kf-s0-cuda-layout \
  kf-s1-cuda-layout kf-s2-cuda-layout; do
  {
    echo "== $name"
    tail -n 12 "$store/$name.txt"
    if [ -f "$store/$name/emb-a.npy" ] && [ -f "$store/$name/emb-b.npy" ]; then
      "$PY" -m tuimon emb-check "$store/$name/emb-a.npy" "$store/$name/emb-b.npy"
    fi
  } >> "$summary" 2>&1
done
(cd "$store" && tar -I "xz -T0 -4" -cf "$OUT/short.tar.xz" cuda-cuda cuda-cuda-deterministic \
  cuda-cpu ./*.txt)
for name in kf-s0-cuda-cpu kf-s0-cuda-layout kf-s1-cuda-layout kf-s2-cuda-layout; do
  [ -d "$store/$name" ] || continue
  (cd "$store" && tar -I "xz -T0 -4" -cf "$OUT/$name.tar.xz" --exclude=aligned.jsonl "$name" \
    "$name.txt")
done
ls -la "$OUT" >> "$summary"
cat "$summary"
