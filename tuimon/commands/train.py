"""`tuimon train`: the reference grokking workload, one run (the child process of a pair)."""

from __future__ import annotations

import argparse
import os

from tuimon.commands.options import finite, int64
from tuimon.errors import UsageError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="run the reference grokking workload, writing a step log",
        description="Train the one-layer transformer of Nanda et al. (2023) on (a op b) mod p, "
        "writing a tuimon step log (JSON Lines) to --log or stdout.",
    )
    p.add_argument("--seed", type=int64, default=0, help="seed for init and data split (default 0)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default cpu)")
    p.add_argument("--steps", type=int64, default=300, help="training steps (default 300)")
    p.add_argument("--p", type=int64, default=113, help="the modulus (default 113)")
    p.add_argument("--task", choices=("add", "sub", "mul"), default="add", help="default add")
    p.add_argument("--frac-train", type=finite, default=0.3, help="train fraction (default 0.3)")
    p.add_argument("--lr", type=finite, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=finite, default=1.0, help="AdamW decay (default 1.0)")
    p.add_argument("--warmup", type=int64, default=10, help="linear warm-up steps (default 10)")
    p.add_argument(
        "--threads", type=int64, default=None, help="intra-op threads (default: torch's; recorded)"
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="torch.use_deterministic_algorithms(True) and CUBLAS_WORKSPACE_CONFIG",
    )
    p.add_argument(
        "--loss-dtype",
        choices=("float32", "float64"),
        default=None,
        help="dtype of the cross-entropy (default float64, float32 on MPS)",
    )
    p.add_argument("--eval-every", type=int64, default=1, help="test evaluation every N steps")
    p.add_argument(
        "--gather",
        choices=("view", "contiguous"),
        default="view",
        help="layout of the embedding gather: view (d_model outermost, as the published code; "
        "default) or contiguous (batch, pos, d_model), which races with 2+ CPU threads",
    )
    p.add_argument(
        "--freq-every",
        type=int64,
        default=0,
        metavar="N",
        help="log W_E's top-5 key frequencies (key_freqs.1..5, as a sorted set) every N steps",
    )
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        help="capture the whole step as one CUDA graph and replay it (CUDA only)",
    )
    p.add_argument(
        "--checkpoint-at",
        type=int64,
        default=None,
        metavar="N",
        help="after step N, save a checkpoint to --checkpoint and stop (model, optimizer, every "
        "RNG, the data position; what `tuimon pair --resume-at N` asks of side b)",
    )
    p.add_argument("--checkpoint", default=None, metavar="PATH", help="where --checkpoint-at saves")
    p.add_argument(
        "--resume-from", default=None, metavar="PATH", help="resume from a --checkpoint-at file"
    )
    p.add_argument(
        "--state-digests",
        action="store_true",
        help="log digests of the RNGs, the optimizer state and the data position at each step",
    )
    p.add_argument("--time-only", action="store_true", help="save nothing but the log")
    p.add_argument("--save-emb", default=None, metavar="PATH", help="save W_E as .npy at the end")
    p.add_argument("--log", default=None, metavar="FILE", help="write the step log here (stdout)")
    p.add_argument(
        "--trace-step",
        default=None,
        metavar="N[,M]",
        help="record every op of these steps to --trace-file (what `tuimon explain` uses; "
        "also TUIMON_TRACE_STEP)",
    )
    p.add_argument("--trace-file", default=None, metavar="FILE", help="where --trace-step writes")
    p.set_defaults(handler=run, help_prog=p.prog)


def run(args: argparse.Namespace) -> int:
    if (args.trace_step is None) != (args.trace_file is None):
        raise UsageError("--trace-step and --trace-file go together")
    if args.trace_step is not None:
        from tuimon.tracing import TRACE_FILE_ENV, TRACE_STEP_ENV

        os.environ[TRACE_STEP_ENV], os.environ[TRACE_FILE_ENV] = args.trace_step, args.trace_file
    from tuimon.workload.train import run

    return run(args)
