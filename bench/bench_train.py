"""How much does `tuimon train` cost over a plain training loop of the same model?

Times, in one process and one run, N full-batch steps of:
  (a) a plain loop: forward, float64 cross-entropy, backward, AdamW; no eval, digest or log;
  (b) the real `tuimon train` loop (test evaluation every step, digests, the step log);
  (c) the plain loop plus a test evaluation every step (so b/c is the cost of logging alone);
  (d) `tuimon train --eval-every N` (test evaluated at the first and last step only);
and, alone, the parameter digest and the test evaluation. Every case is timed step by step
(tuimon's steps from the `t` of its log records) and the cases are interleaved, so the median
and the minimum of a step are both shown: on a shared machine the minimum is the steadier one.
Last, the FLOP/s of (a) (the FLOPs of one step counted by torch's FlopCounterMode) against this
machine's float32 matmul FLOP/s.

Digest rows (`--digest`, also part of the default run): the parameter digests
(`tuimon.devsum/1`) against one pass over the same bytes (a `sum` of each tensor on torch's
threads: every byte read once), by numpy and by the compiled kernel (numba: what a process
uses about a second after its numpy digests have taken 10 ms), on the p=113 model, on 64 MiB
of float32 tensors and on GPT-2 small's layout (124M parameters); limit 3x on CPU.
`--threads 1`: both on one thread.

GPU rows (`--gpu`, CUDA only, every row in one go; `bench/gpu_check.sh` runs it):
  - digests of a 1-billion-parameter model (one 4 GB tensor, and a transformer-like layout of
    193 tensors) against one read pass over the same bytes: limit 2x;
  - the CPU and the GPU digest of the same bytes are equal; Triton and the torch path agree;
  - steps/s of `tuimon train --device cuda` (eager), `--cuda-graph`, and the bare CUDA graph
    of the same step (forward, loss, backward, fused capturable AdamW; nothing logged), in one
    run: limit 0.9x the bare graph;
  - `--cuda-graph` twice (bitwise repeatable?) and against eager (does capture change the
    numerics?), judged by `tuimon compare`.
Prints; never asserts.

    python bench/bench_train.py [--p 113] [--steps 30] [--threads N] [--repeats 2]
    python bench/bench_train.py --digest
    python bench/bench_train.py --gpu [--gpu-steps 2000]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace

import orjson
import torch
import torch.nn.functional as F

from tuimon.workload import loop
from tuimon.workload.options import BETAS, Settings, lr_at
from tuimon.workload.train import run_settings


def plain(s: Settings, evaluate: bool) -> list[float]:
    """The loop anyone would write, no digest and no log (no test eval unless asked): the
    seconds of each step."""
    model, data = loop.build(s, torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=BETAS, weight_decay=s.weight_decay)
    times = []
    for k in range(s.steps):
        start = time.perf_counter()
        loss = F.cross_entropy(model(data.train_x).double(), data.train_y)
        loss.item()
        if evaluate:
            loop.evaluate(model, data.test_x, data.test_y, torch.float64)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            group["lr"] = lr_at(k, s.lr, s.warmup)
        opt.step()
        times.append(time.perf_counter() - start)
    return times


def tuimon(s: Settings) -> list[float]:
    """The real `tuimon train` loop, its log in a temporary file: the seconds between records."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        code = run_settings(replace(s, log=log), argv=["bench"])
        assert code == 0, "tuimon train failed"
        with open(log, "rb") as fh:
            clock = [r["t"] for r in map(orjson.loads, fh) if r["type"] == "step"]
    return [b - a for a, b in itertools.pairwise(clock)]


def alone(s: Settings) -> tuple[list[float], list[float]]:
    """Seconds of each call of the parameter digest, and of one test evaluation, alone."""
    model, data = loop.build(s, torch.device("cpu"))
    digests, evals = [], []
    for _ in range(max(3, s.steps // 3)):
        start = time.perf_counter()
        loop.param_digests(model)
        middle = time.perf_counter()
        loop.evaluate(model, data.test_x, data.test_y, torch.float64)
        digests.append(middle - start)
        evals.append(time.perf_counter() - middle)
    return digests, evals


def step_flops(s: Settings) -> int:
    """FLOPs of one plain training step (forward, loss, backward, AdamW), counted by torch."""
    from torch.utils.flop_counter import FlopCounterMode

    model, data = loop.build(s, torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=BETAS, weight_decay=s.weight_decay)
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(model(data.train_x).double(), data.train_y)
        loss.backward()
        opt.step()
    return int(counter.get_total_flops())


def matmul_flops_per_s(n: int = 1024, repeats: int = 20) -> float:
    """This machine's float32 matmul FLOP/s (the best of `repeats` n x n products)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm up
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _row(name: str, value: float, limit: float, what: str) -> None:
    verdict = "met" if value <= limit else "NOT met"
    print(f"  {name:58s} {value:7.2f}x {what} (limit {limit:g}x: {verdict})")


def layout_124m() -> list[tuple[int, ...]]:
    """GPT-2 small's parameter shapes (124M parameters, 148 tensors, 498 MB in float32)."""
    d, vocab, ctx = 768, 50257, 1024
    shapes: list[tuple[int, ...]] = [(vocab, d), (ctx, d)]
    for _ in range(12):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,)]
        shapes += [(d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    return [*shapes, (d,), (d,)]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _digest_cases(tensors: list[torch.Tensor]) -> dict[str, tuple[str, Callable[[], object]]]:
    """What is timed: (TUIMON_DIGEST_NUMBA, the call) by name."""
    from tuimon.workload import digest

    return {
        "one pass": ("", lambda: [t.sum() for t in tensors]),
        "a copy": ("", lambda: [t.clone() for t in tensors]),
        "numpy": ("0", lambda: digest.lanes_of(tensors)),
        "compiled": ("1", lambda: digest.lanes_of(tensors)),
    }


def _fastest(cases: dict[str, tuple[str, Callable[[], object]]], repeats: int) -> dict[str, float]:
    """The fastest of `repeats` calls of each case, the cases timed in turn."""
    best = {k: float("inf") for k in cases}
    for _ in range(repeats):
        for k, (mode, fn) in cases.items():
            os.environ["TUIMON_DIGEST_NUMBA"] = mode
            best[k] = min(best[k], _timed(fn))
    os.environ.pop("TUIMON_DIGEST_NUMBA", None)
    return best


def digest_rows_cpu(p: int, repeats: int = 30) -> None:
    """The digests against one pass over the bytes (a `sum` of each tensor, on torch's
    threads) on the CPU, by numpy and by the compiled kernel (numba, on torch's threads: what a
    process uses about a second after its numpy digests took 10 ms, or at once with
    TUIMON_DIGEST_NUMBA=1); the cases timed in turn, `repeats` times (5 for the 124M model),
    the fastest of each kept."""
    from tuimon.workload import digest, digest_cpu

    model, _ = loop.build(Settings(p=p), torch.device("cpu"))
    params = [q.detach() for q in model.parameters()]
    layouts = {
        f"p={p} model ({sum(t.numel() for t in params):,} params)": (params, repeats),
        "4 x 4M float32 (64 MiB)": ([torch.randn(1 << 22) for _ in range(4)], repeats),
        "GPT-2 small layout (124M params, 498 MB)": (
            [torch.randn(s) for s in layout_124m()], max(3, repeats // 6)),
    }  # fmt: skip
    compiled = digest_cpu.kernel() is not None
    print(f"digests on CPU ({torch.get_num_threads()} threads for the sum and the compiled "
          f"kernel; numpy's runs on one; numba {'yes' if compiled else 'NOT installed'}; "
          f"load average {_load()}), timed in turn:")  # fmt: skip
    for name, (tensors, count) in layouts.items():
        os.environ["TUIMON_DIGEST_NUMBA"] = "1"
        same = "equal" if digest.lanes_of(tensors) == digest.lanes_numpy_many(tensors) else "DIFF"
        best = _fastest(_digest_cases(tensors), count)
        one = best["one pass"]
        size = sum(t.numel() * t.element_size() for t in tensors)
        print(f"  {name}, fastest of {count}: one pass (sum) {one * 1e3:.3f} ms "
              f"({size / one / 1e9:.1f} GB/s), a copy {best['a copy'] * 1e3:.3f} ms, "
              f"digests by numpy {best['numpy'] * 1e3:.3f} ms, compiled "
              f"{best['compiled'] * 1e3:.3f} ms (lanes {same})")  # fmt: skip
        _row(f"digests (numpy) / one pass, {name}", best["numpy"] / one, 3, "a sum of each")
        if compiled:
            _row(f"digests (compiled) / one pass, {name}", best["compiled"] / one, 3,
                 "a sum of each")  # fmt: skip
        print(f"  {'load average now':58s} {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=int, default=113)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each case (default 2)")
    parser.add_argument("--digest", action="store_true", help="the CPU digest rows only")
    parser.add_argument("--gpu", action="store_true", help="every GPU row (CUDA), in one go")
    parser.add_argument("--gpu-steps", type=int, default=2000, help="steps per GPU run")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.gpu:
        from bench_train_gpu import gpu_rows

        gpu_rows(args.p, args.gpu_steps)
        return
    if args.digest:
        digest_rows_cpu(args.p)
        return
    s = Settings(p=args.p, steps=args.steps, threads=args.threads, time_only=True)
    cases: dict[str, Callable[[], list[float]]] = {
        "(a) plain loop, train only": lambda: plain(s, evaluate=False),
        "(b) tuimon train": lambda: tuimon(s),
        "(c) plain loop + test eval every step": lambda: plain(s, evaluate=True),
        f"(d) tuimon train --eval-every {s.steps}": lambda: tuimon(replace(s, eval_every=s.steps)),
    }
    steps: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so drifting load hits every case alike
        for name, case in cases.items():
            steps[name] += case()[2:]  # the first steps warm up allocators and thread pools
    digest, evaluation = alone(s)
    print(
        f"tuimon train benchmark: p={s.p} (n_train {s.n_train}, n_test {s.n_test}), "
        f"{s.steps} steps x {args.repeats}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}"
    )
    base = {"median": statistics.median(steps["(a) plain loop, train only"])}
    base["min"] = min(steps["(a) plain loop, train only"])
    print(f"{'seconds per step':42s} {'median':>8s} {'vs (a)':>7s} {'min':>8s} {'vs (a)':>7s}")
    rows = {**steps, "digest alone": digest, "test evaluation alone": evaluation}
    for name, times in rows.items():
        med, low = statistics.median(times), min(times)
        print(
            f"{name:42s} {med:8.4f} {med / base['median']:7.2f} {low:8.4f} {low / base['min']:7.2f}"
        )
    b, c = steps["(b) tuimon train"], steps["(c) plain loop + test eval every step"]
    print(
        f"{'logging + digests alone, (b) / (c)':42s} {'':8s} "
        f"{statistics.median(b) / statistics.median(c):7.2f} {'':8s} {min(b) / min(c):7.2f}"
    )
    flops, peak = step_flops(s), matmul_flops_per_s()
    achieved = flops / min(steps["(a) plain loop, train only"])
    print(
        f"(a) does {flops / 1e6:.1f} MFLOP a step: {achieved / 1e9:.2f} GFLOP/s at its fastest "
        f"step, {achieved / peak:.1%} of this machine's float32 matmul ({peak / 1e9:.1f} GFLOP/s)"
    )
    digest_rows_cpu(s.p)


if __name__ == "__main__":
    main()
