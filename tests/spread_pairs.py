"""Small saved pairs for the spread and plot tests: step logs, pair.json and W_E, written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tuimon.store import PairDoc, RunDoc
from tuimon.store.doc import pair_files

P = 23
"""The modulus of the small W_E (11 frequencies, top 5)."""
D_MODEL = 8


def embedding(freqs: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A (d_model, p+1) W_E whose energy lies on `freqs` (random phases), plus a little noise."""
    n = np.arange(P)
    w = np.zeros((D_MODEL, P + 1))
    for rank, k in enumerate(freqs):
        amp = 1.0 - 0.1 * rank
        for row in range(D_MODEL):
            phase = rng.uniform(0, 2 * np.pi)
            w[row, :P] += amp * np.cos(2 * np.pi * k * n / P + phase)
    w += 0.01 * rng.standard_normal(w.shape)
    return w.astype(np.float32)


def _lines(seed: int, steps: int, reach: int | None, last: int, end: bool, shift: float) -> str:
    header = {
        "type": "header",
        "format": "tuimon.steplog/1",
        "run": {"name": "small", "seed": seed},
        "hyper": {"seed": seed, "steps": steps, "p": P},
        "env": {},
    }
    out = [header]
    for s in range(last + 1):
        acc = 1.0 if reach is not None and s >= reach else 0.5 * s / steps
        loss = 1.0 / (s + 1) + (shift if s >= 2 else 0.0)
        out.append({"type": "step", "step": s, "train_loss": loss, "test_acc": acc})
    if end:
        out.append({"type": "end", "status": "ok", "steps": last + 1})
    return "".join(json.dumps(o) + "\n" for o in out)


def make_pair(
    root: Path,
    name: str,
    seed: int,
    w_a: np.ndarray | None,
    w_b: np.ndarray | None,
    *,
    steps: int = 40,
    reach: tuple[int | None, int | None] = (20, 20),
    b_last: int | None = None,
    shift: float = 1e-6,
) -> Path:
    """A saved pair: side b parts from a at step 2 by `shift` in train_loss; b may stop early."""
    d = root / name
    d.mkdir(parents=True)
    b_stop = steps - 1 if b_last is None else b_last
    (d / "a.jsonl").write_text(_lines(seed, steps, reach[0], steps - 1, True, 0.0))
    (d / "b.jsonl").write_text(_lines(seed, steps, reach[1], b_stop, b_last is None, shift))
    for side, w in (("a", w_a), ("b", w_b)):
        if w is not None:
            np.save(d / f"emb-{side}.npy", w)
    status = "finished" if b_last is None else "interrupted"
    runs = {"a": RunDoc(device="cpu", status="finished"), "b": RunDoc(device="cpu", status=status)}
    PairDoc(
        status=status,
        seed=seed,
        devices=("cpu", "cpu"),
        tolerance=0.0,
        runs=runs,
        hyper_diff={"gather": ["view", "contiguous"]},
        files=pair_files(d),
    ).write(d)
    return d


SETS = ((1, 2, 3, 4, 5), (3, 5, 7, 9, 11), (2, 4, 6, 8, 10))
"""Key-frequency sets of seeds 0, 1, 2 (seeds 0 and 1 share 3 and 5; 0 and 2 share 2 and 4)."""


def seeds_pairs(root: Path, near: bool = True, seeds: tuple[int, ...] = (0, 1, 2)) -> list[Path]:
    """One pair per seed; side b's W_E is a's plus 1% noise (`near`) or another draw."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        w_a = embedding(SETS[seed % 3], rng)
        if near:
            w_b = w_a + 0.01 * np.abs(w_a).mean() * rng.standard_normal(w_a.shape).astype("f4")
        else:
            w_b = embedding(SETS[seed % 3], rng)
        out.append(make_pair(root, f"s{seed}", seed, w_a, w_b, reach=(10 + 5 * seed,) * 2))
    return out
