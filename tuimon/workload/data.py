"""The modular-arithmetic data set: every pair (a, b) mod p, split by a seeded CPU generator."""

from __future__ import annotations

from typing import NamedTuple

import torch

from tuimon.workload.options import TASKS, n_train_for


class Split(NamedTuple):
    """Inputs (n, 3) and labels (n,) of the train and test sets."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def split_indices(p: int, frac_train: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices a*p + b of the train and test pairs, from a CPU generator seeded with `seed`."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(p * p, generator=generator)
    n_train = n_train_for(p, frac_train)
    return order[:n_train], order[n_train:]


def answers(a: torch.Tensor, b: torch.Tensor, task: str, p: int) -> torch.Tensor:
    """(a op b) mod p for the task add, sub or mul."""
    if task == "add":
        return (a + b) % p
    if task == "sub":
        return (a - b) % p
    if task == "mul":
        return (a * b) % p
    raise ValueError(f"unknown task {task!r} (choose from {', '.join(TASKS)})")


def make_split(p: int, task: str, frac_train: float, seed: int) -> Split:
    """All p**2 inputs [a, b, =] with their answers, split into train and test."""
    index = torch.arange(p * p)
    a, b = index // p, index % p
    x = torch.stack([a, b, torch.full_like(a, p)], dim=1)
    y = answers(a, b, task, p)
    train, test = split_indices(p, frac_train, seed)
    return Split(x[train], y[train], x[test], y[test])
