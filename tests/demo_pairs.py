"""Demo pairs for the tests and benchmarks: two small diverging step logs (deterministic: no
clock, no randomness), saved pairs as `PairSession` leaves them, and a store of them."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.sources.saved_pair import SavedPair
from tuimon.steplog import FORMAT, dumps
from tuimon.store import SIDES, PairDoc, RunDoc, pair_files

TENSORS = ("W_E", "W_pos", "W_Q", "W_U")


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _demo_header(side: str, steps: int) -> bytes:
    threads = 2 if side == "a" else 1
    env: dict[str, Any] = {
        "device": "cpu",
        "torch": "2.13.0",
        "python": "3.11.7",
        "threads": threads,
        "deterministic": False,
        "loss_dtype": "float64",
        "env_vars": {"OMP_NUM_THREADS": str(threads)},
    }
    return dumps(
        {
            "type": "header",
            "format": FORMAT,
            "run": {"name": f"demo-{side}"},
            "hyper": {"steps": steps, "lr": 1e-3, "seed": 0, "p": 113},
            "env": env,
        }
    )


def _demo_step(side: str, step: int, diverge: int | None) -> dict[str, Any]:
    """One step record; side "b" wobbles away from "a" from step `diverge` on."""
    apart = side == "b" and diverge is not None and step >= diverge
    wobble = 1e-10 * 1.35 ** min(step - diverge, 60) if apart and diverge is not None else 0.0
    wobble = min(wobble, 0.05)
    train = 4.73 * math.exp(-step / 60) + 0.012 + 0.004 * math.sin(step / 7)
    test = 4.75 * math.exp(-step / 400) + 0.05 + 0.002 * math.cos(step / 11)
    record: dict[str, Any] = {
        "type": "step",
        "step": step,
        "t": step * 0.02,
        "train_loss": train * (1 + wobble),
        "test_loss": test * (1 - wobble / 2),
        "train_acc": min(1.0, step / 120) * (1 - wobble / 3),
        "test_acc": min(1.0, max(0.0, (step - 150) / 100)),
        "lr": 1e-3 * min(1.0, (step + 1) / 10),
    }
    tensors = {
        name: _digest(name, step, apart and (name == "W_E" or step > (diverge or 0)))
        for name in TENSORS
    }
    record["param_digest"] = _digest(step, tuple(sorted(tensors.values())))
    record["param_digests"] = tensors
    return record


def demo_records(
    side: str, *, steps: int = 300, diverge: int | None = 2, extra: Sequence[tuple[int, str]] = ()
) -> list[bytes]:
    """The lines of one side's log; side "b" parts from "a" at step `diverge` (None: never).

    `extra` puts non-log text lines (step, text) after a step's record.
    """
    lines = [_demo_header(side, steps)]
    texts: dict[int, list[str]] = {}
    for at, text in extra:
        texts.setdefault(at, []).append(text)
    for step in range(steps):
        lines.append(dumps(_demo_step(side, step, diverge)))
        lines += [f"{text}\n".encode() for text in texts.get(step, [])]
    lines.append(dumps({"type": "end", "status": "ok", "steps": steps, "wall_s": steps * 0.02}))
    return lines


def write_demo(
    folder: Path,
    *,
    steps: int = 300,
    diverge: int | None = 2,
    extra: dict[str, Sequence[tuple[int, str]]] | None = None,
) -> tuple[Path, Path]:
    """Write ``a.jsonl`` and ``b.jsonl`` in `folder`; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for side in SIDES:
        path = folder / f"{side}.jsonl"
        lines = demo_records(side, steps=steps, diverge=diverge, extra=(extra or {}).get(side, ()))
        path.write_bytes(b"".join(lines))
        paths.append(path)
    return paths[0], paths[1]


def _demo_runs(
    pair: SavedPair, *, seed: int, devices: tuple[str, str], status: str
) -> dict[str, RunDoc]:
    """Each side's run as `PairSession` records it: the command, how it ended (side b ends
    with `status`) and the env and hyper-parameters of its log's header."""
    headers = {side: pair.header(side) for side in SIDES}
    return {
        side: RunDoc(
            device=devices[i],
            command=f"tuimon train --seed {seed} --device {devices[i]}",
            status="finished" if side == "a" else status,
            exit_code=0 if side == "a" or status == "finished" else 1,
            env={**head.env, "device": devices[i]} if head else {},
            hyper=head.hyper if head else {},
        )
        for i, (side, head) in enumerate(headers.items())
    }


def write_demo_pair(
    root: Path,
    name: str,
    *,
    created: str = "2026-01-02T03:04:05+00:00",
    seed: int = 0,
    devices: tuple[str, str] = ("cpu", "cpu"),
    steps: int = 40,
    diverge: int | None = 2,
    status: str = "finished",
) -> Path:
    """A saved pair directory as `PairSession` would leave it (logs, aligned.jsonl, pair.json)."""
    folder = root / name
    pair = SavedPair(*write_demo(folder, steps=steps, diverge=diverge))
    aligned, aligner = pair.judged
    complete = status == "finished"
    summary = aligner.summary(complete=complete, reason=None if complete else f"run b {status}")
    (folder / "aligned.jsonl").write_bytes(b"".join(dumps(s.to_dict()) for s in aligned))
    runs = _demo_runs(pair, seed=seed, devices=devices, status=status)
    PairDoc(
        created=created,
        seed=seed,
        devices=devices,
        status=status,
        tolerance=0.0,
        runs=runs,
        env_diff=env_diff(runs["a"].env or {}, runs["b"].env or {}),
        summary=summary.to_dict(),
        files=pair_files(folder),
    ).write(folder)
    return folder


DEMO_PAIRS = (
    "20260104-030405_s2_cuda-cpu_ef56",
    "20260103-030405_s1_cpu-mps_cd34",
    "20260102-030405_s0_cpu-cpu_ab12",
)
"""The pairs of `write_demo_store`, newest first."""
DEMO_DAMAGED = "20260101-000000_s3_cpu-cpu_dead"


def write_demo_store(root: Path) -> Path:
    """A store of three pairs and a damaged one (fixed times, for the browser).

    Newest first: DIVERGED at step 10 with a failed run b (cuda vs cpu), IDENTICAL (cpu vs
    mps), DIVERGED at step 2 (cpu vs cpu); the damaged one has a pair.json that is not JSON.
    """
    pairs: list[dict[str, Any]] = [  # oldest first
        {"seed": 0, "diverge": 2},
        {"seed": 1, "devices": ("cpu", "mps"), "diverge": None},
        {"seed": 2, "devices": ("cuda", "cpu"), "diverge": 10, "status": "failed"},
    ]
    for day, (name, how) in enumerate(zip(reversed(DEMO_PAIRS), pairs, strict=True), start=2):
        write_demo_pair(root, name, created=f"2026-01-{day:02d}T03:04:05+00:00", **how)
    damaged = root / DEMO_DAMAGED
    damaged.mkdir()
    (damaged / "a.jsonl").write_text("{}\n")
    (damaged / "pair.json").write_text("{not json")
    os.utime(damaged, (1767225600, 1767225600))  # 2026-01-01 00:00 UTC: the oldest
    return root
