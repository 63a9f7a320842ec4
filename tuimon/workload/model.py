"""The one-layer transformer of Nanda et al. (2023), "Progress measures for grokking".

No LayerNorm, ReLU MLP, causal attention; logits are read at the last position and cover the
p answer classes. Parameter names, shapes, draw order and initialisation follow the paper's
code, except W_U: (d_model, p) here, where the paper's has p + 1 columns and drops the last logit.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tuimon.workload.options import D_HEAD, D_MLP, D_MODEL, GATHERS, N_CTX, N_HEADS


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
        gather: str = "view",
    ) -> None:
        super().__init__()
        if gather not in GATHERS:
            raise ValueError(f"gather must be one of {', '.join(GATHERS)}, got {gather!r}")
        self.gather = gather
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (batch, p) at the last position for token ids `x` (batch, 3).

        Only what those logits depend on is computed: keys and values at every position; the
        query, MLP and unembedding at the last one (which, under the causal mask, attends to
        all three positions, so no mask is needed).
        """
        # The residual stream (batch, pos, d_model). Its memory layout matters beyond speed:
        # "view" keeps d_model outermost as the published code does (W_E[:, x] permuted as a
        # view); "contiguous" copies it to (batch, pos, d_model), and then the backward of the
        # gather adds rows of samples into W_E's columns, which is not deterministic on CPU
        # with more than one thread (see DESIGN.md, and docs/workload-and-digests.md "Against
        # the published code").
        embedded = self.W_E[:, x].permute(1, 2, 0)
        if self.gather == "contiguous":
            embedded = embedded.contiguous()
        resid = embedded + self.W_pos
        last = resid[:, -1]
        q = last @ self.W_Q.flatten(0, 1).T
        k = resid @ self.W_K.flatten(0, 1).T
        v = resid @ self.W_V.flatten(0, 1).T
        return self._readout(last, q, k, v)

    def forward_tabled(self, x: torch.Tensor) -> torch.Tensor:
        """The same logits as `forward`, cheaper for evaluation: each position holds one token,
        so queries, keys and values are computed once per (position, token) and gathered."""
        resid = self.W_E.T + self.W_pos[:, None]  # (pos, token, d_model)
        k = resid @ self.W_K.flatten(0, 1).T
        v = resid @ self.W_V.flatten(0, 1).T
        pos = torch.arange(x.shape[1], device=x.device)
        last_token = x[:, -1]
        q = (resid[-1] @ self.W_Q.flatten(0, 1).T)[last_token]
        return self._readout(resid[-1][last_token], q, k[pos, x], v[pos, x])

    def _readout(
        self, last: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """Attention of the last position (q: batch, heads*d_head) over keys and values
        (batch, pos, heads*d_head), then the MLP and the unembedding."""
        batch = last.shape[0]
        heads = (batch, -1, self.n_heads, self.d_head)
        scores = (q.view(batch, 1, self.n_heads, self.d_head) * k.view(heads)).sum(-1)
        pattern = torch.softmax(scores / math.sqrt(self.d_head), dim=1)  # (batch, pos, head)
        z = (pattern.unsqueeze(-1) * v.view(heads)).sum(1).flatten(1)  # (batch, heads*d_head)
        last = last + z @ self.W_O.T
        hidden = torch.relu(torch.addmm(self.b_in, last, self.W_in.T))
        last = last + torch.addmm(self.b_out, hidden, self.W_out.T)
        return last @ self.W_U
