#!/usr/bin/env bash
# Every GPU check of issue 21 in one command on the device machine (one NVIDIA H200), about
# 3 minutes of work plus the machine's start:
#
#   run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=600)
#
# Before it (here, at no device time): that machine's image has torch, triton, numpy, pytest and
# rich but not orjson or numba (the compiled CPU digests), so carry their wheels (README of the
# device tool; about 61 MiB, llvmlite's is most of it: the carry limit is 64 MiB):
#   echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"   # .git/info/exclude
#   for pkg in orjson numba==0.68.1 llvmlite==0.50.0; do
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#       -d .whl "$pkg"; done
#
# What it runs, everything printed to stdout and to $OUT/gpu_check.txt:
#   1. the digest and --cuda-graph tests (the CPU ones; the refusal test skips where CUDA is);
#   2. `python bench/bench_train.py --gpu`: CPU and GPU digests of the same bytes equal (every
#      path), the 1B-parameter digests against one read pass and the nominal bandwidth (limit
#      2x), steps/s of eager, --cuda-graph and the bare graph in one run (limit 0.9x), and
#      --cuda-graph twice and against eager, judged by `tuimon compare`;
#   3. the eager path against the H200 sample of 2026-11-30 (seed 0, 300 steps, before the
#      device digests): must be IDENTICAL, digests not comparable (bench/gpu_ref/);
#   4. the README's pair of --cuda-graph against eager (300 steps, headless), and
#      --cuda-graph --deterministic (does deterministic mode still capture?);
#   5. `bench/bench_train.py --digest` on that machine's CPU (numpy and the compiled kernel
#      against a sum of each tensor, on torch's threads: the p=113 model, 64 MiB, a 124M layout).
# Smoke test without a GPU (the plumbing only): GPU_CHECK_SMOKE=1 bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
PY=${PY:-python3}
STEPS=${STEPS:-2000}
mkdir -p "$OUT"
if ! "$PY" -c "import orjson, numba" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl || { echo "orjson/numba missing and no wheels in .whl (top of this script)"; exit 2; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
log=$OUT/gpu_check.txt
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  "$PY" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda,
 'python', sys.version.split()[0], torch.cuda.get_device_name() if torch.cuda.is_available()
 else 'no cuda')"
  echo "== 1. tests"
  "$PY" -m pytest -q -p no:cacheprovider tests/unit/test_digests.py \
    tests/functional/test_cuda_graph.py 2>&1 | tail -5
  if [ -n "${GPU_CHECK_SMOKE:-}" ]; then
    echo "== smoke: CPU digest rows only"
    "$PY" bench/bench_train.py --digest
    exit 0
  fi
  echo "== 2. bench/bench_train.py --gpu"
  "$PY" bench/bench_train.py --gpu --gpu-steps "$STEPS"
  echo "== 3. eager cuda against the 2026-11-30 H200 sample (seed 0, 300 steps)"
  "$PY" -m tuimon train --device cuda --threads 16 --seed 0 --steps 300 --p 113 --time-only \
    --log "$OUT/eager-s0-300.jsonl"
  "$PY" -m tuimon compare bench/gpu_ref/h200-cuda-s0-300.jsonl "$OUT/eager-s0-300.jsonl"
  echo "exit code $?"
  echo "== 4. the README's pair: side b --cuda-graph, side a eager; then --deterministic"
  store=$(mktemp -d)
  side_b='$(test {side} = b && echo --cuda-graph)'
  "$PY" -m tuimon pair --seed 0 --devices cuda,cuda --steps 300 --headless --store "$store" \
    --shell -- "$PY -m tuimon train --seed {seed} --device {device} --steps 300 --save-emb {pair_dir}/emb-{side}.npy $side_b"
  echo "exit code $?"
  "$PY" -m tuimon train --device cuda --cuda-graph --deterministic --steps 200 --time-only \
    --log "$OUT/graph-deterministic.jsonl" && tail -c 300 "$OUT/graph-deterministic.jsonl"
  echo "exit code $?"
  echo "== 5. CPU digest rows on this machine"
  "$PY" bench/bench_train.py --digest
} 2>&1 | tee "$log"
