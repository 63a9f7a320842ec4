"""The GPU rows of `bench/bench_train.py --gpu` (CUDA only): digests against the bandwidth
limit, the digests of one model on CPU and GPU, and steps/s of eager, `--cuda-graph` and the
bare graph in one run. Prints; never asserts. See bench_train.py's docstring."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import orjson
import torch
import torch.nn.functional as F

from tuimon.workload import digest, loop
from tuimon.workload.options import BETAS, Settings, lr_at

NOMINAL_TB_S = 4.8
"""The H200's nominal memory bandwidth (TB/s): reading 4 GB takes about 0.83 ms."""


def _sync() -> None:
    torch.cuda.synchronize()


def _best(fn: Callable[[], object], repeats: int = 10) -> float:
    fn()
    _sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync()
        best = min(best, time.perf_counter() - start)
    return best


def _row(name: str, value: float, limit: float, what: str, higher: bool = False) -> None:
    ok = value >= limit if higher else value <= limit
    sign = ">=" if higher else "<="
    print(
        f"  {name:60s} {value:7.2f}x {what} (limit {sign} {limit:g}x: {'met' if ok else 'NOT met'})"
    )


def _layout_1b() -> list[tuple[int, ...]]:
    """A transformer-like 1.02B-parameter layout: embedding, 24 blocks of 4 attention
    matrices, 2 MLP matrices and 2 norms (193 tensors)."""
    d, ff = 2048, 5632
    shapes: list[tuple[int, ...]] = [(32000, d)]
    for _ in range(24):
        shapes += [(d, d)] * 4 + [(ff, d), (d, ff), (d,), (d,)]
    return shapes


def digest_rows() -> None:
    dev = torch.device("cuda")
    print(f"digests on {torch.cuda.get_device_name()} (Triton: "
          f"{'yes' if digest._load_triton() is not None else 'no'}):")  # fmt: skip
    layouts = {
        "one 1B float32 tensor (4 GB)": [(1 << 30,)],
        "1.02B params in 193 tensors": _layout_1b(),
    }
    for name, shapes in layouts.items():
        tensors = [torch.randn(s, device=dev) for s in shapes]
        size = sum(t.numel() * t.element_size() for t in tensors)
        one = _best(lambda ts=tensors: [t.sum() for t in ts])
        lanes = _best(lambda ts=tensors: digest.device_lanes(ts))  # a launch per kernel
        whole = _best(lambda ts=tensors: digest.lanes_of(ts))  # a replayed graph, to the host
        print(
            f"  {name}: {size / 1e9:.2f} GB; one read pass (sum) {one * 1e3:.3f} ms "
            f"({size / one / 1e12:.2f} TB/s); digests launched one by one {lanes * 1e3:.3f} ms, "
            f"replayed as a graph and copied to the host {whole * 1e3:.3f} ms; nominal "
            f"{size / NOMINAL_TB_S / 1e9:.3f} ms"
        )
        _row(f"digests / one read pass, {name}", whole / one, 2, "a sum of each tensor")
        _row(f"digests / nominal bandwidth, {name}", whole / (size / NOMINAL_TB_S / 1e12), 2,
             f"{NOMINAL_TB_S} TB/s")  # fmt: skip
        del tensors
        torch.cuda.empty_cache()


def equality_rows() -> None:
    """The same bytes give the same digest on CPU and GPU, by every path."""
    g = torch.Generator().manual_seed(0)
    cases = [
        torch.randn(3 * digest.C + 5, generator=g),
        torch.randn(4097, 3, generator=g).T,
        torch.randn(11, generator=g).half(),
        torch.randn(1001, generator=g).bfloat16(),
        torch.randint(-100, 100, (4099,), dtype=torch.int8, generator=g),
        torch.randn(7, generator=g).double(),
        torch.tensor(2.5),
        torch.empty(0),
        torch.randn(1 << 22, generator=g),
    ]
    os.environ["TUIMON_DIGEST_NUMBA"] = "0"
    cpu = digest.lanes_of(cases)  # numpy
    os.environ["TUIMON_DIGEST_NUMBA"] = "1"
    compiled = digest.lanes_of(cases)  # numba, where installed
    os.environ.pop("TUIMON_DIGEST_NUMBA")
    gpu = digest.lanes_of([t.cuda() for t in cases])
    torch_path = [
        tuple(int(x) & ((1 << 64) - 1) for x in digest.lanes_torch(t.cuda()).tolist())
        for t in cases
    ]
    print(f"  CPU and GPU digests of {len(cases)} tensors (dtypes, views, 0-d, empty): "
          f"{'equal' if cpu == gpu else 'DIFFERENT'}; the GPU torch path "
          f"{'equal' if torch_path == cpu else 'DIFFERENT'}; the compiled CPU path "
          f"{'equal' if compiled == cpu else 'DIFFERENT'}")  # fmt: skip
    model, _ = loop.build(Settings(p=113), torch.device("cpu"))
    a = digest.param_digests(model)
    b = digest.param_digests(model.cuda())
    print(f"  p=113 model, CPU and GPU: {'equal' if a == b else 'DIFFERENT'}")


def bare_graph(s: Settings, steps: int) -> float:
    """Steps/s of the bare step (forward, float64 loss, backward, fused capturable AdamW with a
    device learning rate) captured once and replayed; nothing logged."""
    model, data = loop.build(s, torch.device("cuda"))
    lr = torch.tensor(s.lr, dtype=torch.float32, device="cuda")  # fused AdamW reads a float
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=BETAS, weight_decay=s.weight_decay,
                            capturable=True, fused=True)  # fmt: skip
    table = torch.tensor([lr_at(k, s.lr, s.warmup) for k in range(steps + 3)], device="cuda",
                         dtype=torch.float32)  # fmt: skip
    counter = torch.zeros(1, dtype=torch.int64, device="cuda")

    def step() -> None:
        loss = F.cross_entropy(model(data.train_x).double(), data.train_y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lr.copy_(torch.index_select(table, 0, counter).view(()))
        opt.step()
        counter.add_(1)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    _sync()
    start = time.perf_counter()
    for _ in range(steps):
        graph.replay()
    _sync()
    return steps / (time.perf_counter() - start)


def _train(args: list[str], log: str) -> float:
    """Run `tuimon train` in a child; its steps/s from the log's clock (first to last line)."""
    cmd = [sys.executable, "-m", "tuimon", "train", "--time-only", "--log", log, *args]
    subprocess.run(cmd, check=True)
    with open(log, "rb") as fh:
        recs = [r for r in map(orjson.loads, fh) if r["type"] == "step"]
    first, last = recs[0], recs[-1]
    return (last["step"] - first["step"]) / (last["t"] - first["t"])


def _compare(a: str, b: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tuimon", "compare", a, b],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.splitlines()[0] if done.stdout else done.stderr.strip()


def step_rows(p: int, steps: int) -> None:
    s = Settings(p=p, steps=steps, device="cuda")
    common = ["--device", "cuda", "--p", str(p), "--steps", str(steps)]
    print(f"steps/s, p={p} (n_train {s.n_train}), {steps} steps each, one run:")
    with tempfile.TemporaryDirectory() as tmp:
        logs = {k: os.path.join(tmp, f"{k}.jsonl") for k in ("eager", "graph", "graph2", "rare")}
        rates = {
            "tuimon train --device cuda (eager)": _train(common, logs["eager"]),
            "tuimon train --cuda-graph": _train([*common, "--cuda-graph"], logs["graph"]),
            "tuimon train --cuda-graph --eval-every 100":
                _train([*common, "--cuda-graph", "--eval-every", "100"], logs["rare"]),
            "bare CUDA graph (no eval, no digest, no log)": bare_graph(s, steps),
        }  # fmt: skip
        _train([*common, "--cuda-graph"], logs["graph2"])
        for name, rate in rates.items():
            print(f"  {name:50s} {rate:8.1f} steps/s")
        bare = rates["bare CUDA graph (no eval, no digest, no log)"]
        for name in itertools.islice(rates, 1, 3):
            _row(f"{name} / bare graph", rates[name] / bare, 0.9, "steps/s", higher=True)
        print(f"  --cuda-graph twice:        {_compare(logs['graph'], logs['graph2'])}")
        print(f"  --cuda-graph against eager: {_compare(logs['eager'], logs['graph'])}")


def gpu_rows(p: int, steps: int) -> None:
    if not torch.cuda.is_available():
        print("--gpu: no CUDA here")
        return
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}")
    equality_rows()
    digest_rows()
    step_rows(p, steps)
