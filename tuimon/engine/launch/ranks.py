"""A side of N ranks: its command under torch.distributed's launcher, each rank's output in a
file of its own, and the rank a failed job names.

The side runs `python -m torch.distributed.run --standalone --nproc-per-node N --no-python
sh -c WRAP ...`: torchrun's agent starts N copies of a small `/bin/sh` that `exec`s the
command. Rank 0's is exec'd as it is, so its stdout and stderr are the agent's, which are the
side's pipes: rank 0's output is the side's step log, streamed and saved as any run's. Every
other rank's stdout and stderr go straight to `SIDE.rankR.jsonl` and `SIDE.rankR.stderr` in
the pair directory (no tee, no prefix, nothing in between): every raw line of every rank is on
disk, and the replica check (`tuimon.engine.sources.replicas`) follows those files.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tuimon.engine.launch.runner import RunSpec

TORCHRUN = ("-m", "torch.distributed.run")
WRAP = (
    'd=$1; s=$2; shift 2; if [ "${RANK:-0}" = 0 ]; then exec "$@"; fi; '
    'exec "$@" >"$d/$s.rank$RANK.jsonl" 2>"$d/$s.rank$RANK.stderr"'
)
"""Rank 0 keeps the agent's stdout and stderr; rank R > 0 writes its own two files."""
NOWHERE = "/dev/null"
"""Where the other ranks' output goes when the pair is not saved (`--no-save`)."""


def rank_log(pair_dir: Path, side: str, rank: int) -> Path:
    """The raw stdout of `rank` > 0 of `side` (rank 0's is the side's `SIDE.jsonl`)."""
    return pair_dir / f"{side}.rank{rank}.jsonl"


def under_torchrun(
    spec: RunSpec, nproc: int, pair_dir: Path | None, *, python: str | None = None
) -> RunSpec:
    """`spec` run as `nproc` ranks of one node by torch.distributed's launcher; the other
    ranks' output into the pair directory (nowhere when it is not saved). `python` runs the
    launcher (default: this interpreter; `python3` on the other side of a launcher)."""
    inner: Sequence[str] = ("sh", "-c", spec.argv[0]) if spec.shell else spec.argv
    if pair_dir is None:
        wrap = 'shift 2; if [ "${RANK:-0}" = 0 ]; then exec "$@"; fi; exec "$@" >/dev/null 2>&1'
        where = NOWHERE
    else:
        wrap, where = WRAP, str(pair_dir)
    argv = (
        python or sys.executable,
        *TORCHRUN,
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "--no-python",
        "sh",
        "-c",
        wrap,
        "tuimon-rank",
        where,
        spec.side,
        *inner,
    )
    return replace(spec, argv=argv, shell=False)


_ROOT = re.compile(r"Root Cause \(first observed failure\)")
_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)", re.MULTILINE)
_CODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE)


def failed_rank(stderr: str) -> str | None:
    """What torchrun's failure report in a side's stderr says of the rank that failed first:
    `rank 1 exited with code 3` / `rank 1 was killed by SIGKILL`; None without a report."""
    found = _ROOT.search(stderr)
    if found is None:
        return None
    tail = stderr[found.end() :]
    rank = _RANK.search(tail)
    if rank is None:
        return None
    code = _CODE.search(tail)
    if code is None:
        return f"rank {rank[1]} failed"
    value = int(code[1])
    if value < 0:
        try:
            import signal

            return f"rank {rank[1]} was killed by {signal.Signals(-value).name}"
        except ValueError:
            return f"rank {rank[1]} was killed by signal {-value}"
    return f"rank {rank[1]} exited with code {value}"


MARK = "tuimon-rank"
"""The wrapper's name (`$0`) in a side's recorded command: what follows is DIR, SIDE, COMMAND."""


def rewrap(argv: Sequence[str], side: str, rank_dir: Path, nproc: int | None = None) -> list[str]:
    """A side's recorded command run again: its other ranks' output into `rank_dir` (never
    over the saved pair's rank logs), as `nproc` ranks when given (a command recorded without
    ranks is put under the launcher; one recorded with them keeps its prefix: a launcher,
    `env K=V`)."""
    argv = list(argv)
    if MARK not in argv or "torch.distributed.run" not in argv:
        if nproc is None:
            return argv
        return list(under_torchrun(RunSpec(side, "", tuple(argv)), nproc, rank_dir).argv)
    at = argv.index(MARK)
    head = argv[:at]
    if nproc is not None and "--nproc-per-node" in head:
        head[head.index("--nproc-per-node") + 1] = str(nproc)
    return [*head, MARK, str(rank_dir), argv[at + 2], *argv[at + 3 :]]
