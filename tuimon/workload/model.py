"""The one-layer transformer of Nanda et al. (2023), "Progress measures for grokking".

No LayerNorm, ReLU MLP, causal attention; logits are read at the last position and cover the
p answer classes. Parameter names, shapes and initialisation follow the paper's code.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tuimon.workload.options import D_HEAD, D_MLP, D_MODEL, N_CTX, N_HEADS


def _randn(generator: torch.Generator, *shape: int, scale: float) -> nn.Parameter:
    return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(scale))


class Transformer(nn.Module):
    """One attention layer plus one MLP on a residual stream; inputs are (batch, 3) token ids.

    Weights are drawn on the CPU from `generator` in a fixed order (W_E, W_pos, W_K, W_Q, W_V,
    W_O, W_in, b_in, W_out, b_out, W_U); move the module to a device afterwards, so that every
    device starts from the same bytes.
    """

    def __init__(
        self,
        p: int,
        generator: torch.Generator,
        d_model: int = D_MODEL,
        n_heads: int = N_HEADS,
        d_head: int = D_HEAD,
        d_mlp: int = D_MLP,
    ) -> None:
        super().__init__()
        d_vocab = p + 1  # the tokens 0..p-1 and "=" (token p)
        g = generator
        self.n_heads, self.d_head = n_heads, d_head
        self.W_E = _randn(g, d_model, d_vocab, scale=d_model)
        self.W_pos = _randn(g, N_CTX, d_model, scale=d_model)
        self.W_K = _randn(g, n_heads, d_head, d_model, scale=d_model)
        self.W_Q = _randn(g, n_heads, d_head, d_model, scale=d_model)
        self.W_V = _randn(g, n_heads, d_head, d_model, scale=d_model)
        self.W_O = _randn(g, d_model, n_heads * d_head, scale=d_model)
        self.W_in = _randn(g, d_mlp, d_model, scale=d_model)
        self.b_in = nn.Parameter(torch.zeros(d_mlp))
        self.W_out = _randn(g, d_model, d_mlp, scale=d_model)
        self.b_out = nn.Parameter(torch.zeros(d_model))
        self.W_U = _randn(g, d_model, p, scale=d_vocab)
        self.register_buffer("mask", torch.tril(torch.ones(N_CTX, N_CTX)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (batch, p) at the last position for token ids `x` (batch, 3)."""
        resid = self.W_E[:, x].permute(1, 2, 0) + self.W_pos  # (batch, pos, d_model)
        resid = resid + self._attention(resid)
        hidden = torch.relu(resid @ self.W_in.T + self.b_in)
        resid = resid + hidden @ self.W_out.T + self.b_out
        return resid[:, -1] @ self.W_U

    def _attention(self, resid: torch.Tensor) -> torch.Tensor:
        k = torch.einsum("ihd,bpd->biph", self.W_K, resid)
        q = torch.einsum("ihd,bpd->biph", self.W_Q, resid)
        v = torch.einsum("ihd,bpd->biph", self.W_V, resid)
        scores = q @ k.transpose(-1, -2)  # (batch, head, query, key)
        scores = scores.masked_fill(self.mask == 0, -1e10) / math.sqrt(self.d_head)
        z = torch.softmax(scores, dim=-1) @ v  # (batch, head, query, d_head)
        z = z.permute(0, 2, 1, 3).reshape(resid.shape[0], resid.shape[1], -1)
        return z @ self.W_O.T
