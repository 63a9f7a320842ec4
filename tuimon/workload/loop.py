"""The training loop of `tuimon train`: full-batch AdamW with a step log record per step."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tuimon.freqs import key_frequencies
from tuimon.steplog import StepLogger
from tuimon.tracing import trace_step
from tuimon.workload.data import Split, make_split
from tuimon.workload.model import Transformer
from tuimon.workload.options import BETAS, Settings, emb_path, lr_at


def build(s: Settings, device: torch.device) -> tuple[Transformer, Split]:
    """The model (drawn on the CPU from --seed, then moved) and the data, both on `device`."""
    model = Transformer(s.p, torch.Generator().manual_seed(s.seed), gather=s.gather).to(device)
    split = Split(*(t.to(device) for t in make_split(s.p, s.task, s.frac_train, s.seed)))
    return model, split


def param_digests(model: torch.nn.Module) -> tuple[str, dict[str, str]]:
    """blake2b of the exact bytes of all parameters (in order), and a short one per tensor."""
    params = dict(model.named_parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params.values()]).cpu().numpy()
    whole = hashlib.blake2b(flat, digest_size=16).hexdigest()  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs do not say so
    per, start = {}, 0
    for name, p in params.items():
        chunk = flat[start : start + p.numel()]
        per[name] = hashlib.blake2b(chunk, digest_size=8).hexdigest()  # type: ignore[arg-type]  # as above
        start += p.numel()
    return whole, per


def key_freq_set(model: Transformer) -> dict[str, int]:
    """W_E's top-5 key frequencies as a set, in increasing order: {"1": k1, ..., "5": k5}.

    Numbers, so a pair compares them step by step and names the first step where they part."""
    found = key_frequencies(model.W_E.detach().cpu().numpy(), p=model.W_U.shape[1])
    return {str(i): k for i, k in enumerate(sorted(found.freqs), start=1)}


def _loss_acc(
    logits: torch.Tensor, labels: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, float]:
    loss = F.cross_entropy(logits.to(dtype), labels)
    correct = int((logits.argmax(dim=-1) == labels).sum())
    return loss, correct / labels.numel()


def evaluate(
    model: Transformer, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype
) -> tuple[float, float]:
    """(loss, accuracy) on a data set, without autograd, by the tabled forward."""
    with torch.inference_mode():
        loss, acc = _loss_acc(model.forward_tabled(x), y, dtype)
    return loss.item(), acc


def train(
    s: Settings,
    model: Transformer,
    data: Split,
    loss_dtype: torch.dtype,
    logger: StepLogger,
) -> None:
    """Run s.steps full-batch steps; step k logs the losses of the parameters after k updates."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=s.lr, betas=BETAS, weight_decay=s.weight_decay
    )
    for k in range(s.steps):
        lr = lr_at(k, s.lr, s.warmup)
        digest, digests = param_digests(model)
        with trace_step(k, model, optimizer):  # a no-op unless `tuimon explain` asks for step k
            loss, train_acc = _loss_acc(model(data.train_x), data.train_y, loss_dtype)
            record: dict[str, Any] = {"lr": lr, "train_loss": loss.item(), "train_acc": train_acc}
            if k % s.eval_every == 0 or k == s.steps - 1:
                record["test_loss"], record["test_acc"] = evaluate(
                    model, data.test_x, data.test_y, loss_dtype
                )
            if s.freq_every and (k % s.freq_every == 0 or k == s.steps - 1):
                record["key_freqs"] = key_freq_set(model)
            logger.step(k, t=logger.elapsed(), **record, param_digest=digest, param_digests=digests)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()


def save_embedding(model: Transformer, path: Path) -> None:
    """W_E, shape (d_model, p + 1), as .npy, written atomically (a temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, model.W_E.detach().cpu().numpy())
    os.replace(tmp, path)


def run(
    s: Settings, device: torch.device, loss_dtype: torch.dtype, logger: StepLogger
) -> dict[str, str]:
    """Build, train, save W_E unless --time-only; the artifacts written, e.g. {"emb": path}."""
    model, data = build(s, device)
    train(s, model, data, loss_dtype, logger)
    path = emb_path(s, str(device))
    if path is None:
        return {}
    save_embedding(model, path)
    return {"emb": str(path)}
