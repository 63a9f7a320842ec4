"""Key frequencies of an embedding W_E: where its norm lies in the Fourier basis of the residues.

The basis over the p residues is orthonormal: the constant, then cos(2*pi*k*n/p) and
sin(2*pi*k*n/p) for k = 1..(p-1)/2 (for an even p also the cosine at k = p/2). A frequency k
combines its cos and sin rows: its energy is the squared norm of W_E's projection on both, summed
over d_model. The key frequencies are the k with the most energy (the constant is not a
frequency; its share is reported apart). A share is a fraction of W_E's squared norm over the p
residue columns, so all shares and the constant's add up to 1 (Parseval).

Layout. W_E may be (d_model, p+1) as the reference workload and the published code save it,
(d_model, p), or either transposed; a `p+1`-th residue column is the `=` token and is dropped.
Which axis holds the residues is decided in this order (`layout="auto"`):

1. with `p` given, the one axis whose length is p or p+1;
2. with `d_model` given, the other axis;
3. otherwise the other axis of the one axis of length 128 (the d_model of the paper and of
   `tuimon train`);

anything else is ambiguous and a `FreqError` asks for `p` or `layout`. Without `p`, an even
number of residue columns is read as p+1 (the `=` column last, p odd, as moduli are primes) and
an odd number as p; pass `p` when that is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

LAYOUTS = ("auto", "d_model-first", "residues-first")
REFERENCE_D_MODEL = 128
TOP = 5


class FreqError(ValueError):
    """An array that is not a W_E this module can read, or whose layout is ambiguous."""


@dataclass(frozen=True)
class Embedding:
    """W_E as (d_model, p) float64, the residue columns only, and how it was read."""

    matrix: np.ndarray
    p: int
    layout: str
    eq_column: bool

    def describe(self) -> str:
        """E.g. `(d_model 128, p 113), d_model-first, '=' column dropped`."""
        eq = "'=' column dropped" if self.eq_column else "no '=' column"
        return f"(d_model {self.matrix.shape[0]}, p {self.p}), {self.layout}, {eq}"


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def _residue_axis(shape: tuple[int, int], p: int | None, d_model: int | None) -> int:
    hint = "pass p (--p) or the layout (--layout)"
    if p is not None:
        axes = [i for i in (0, 1) if shape[i] in (p, p + 1)]
        if len(axes) == 1:
            return axes[0]
        if not axes:
            raise FreqError(f"shape {_shape(shape)} has no axis of length p={p} or p+1")
        raise FreqError(f"shape {_shape(shape)}: both axes fit p={p}; pass the layout (--layout)")
    d = REFERENCE_D_MODEL if d_model is None else d_model
    axes = [i for i in (0, 1) if shape[i] == d]
    if len(axes) == 1:
        return 1 - axes[0]
    if not axes:
        raise FreqError(f"shape {_shape(shape)} has no axis of length d_model={d}: {hint}")
    raise FreqError(f"shape {_shape(shape)}: both axes are {d} long, which holds the residues? "
                    f"{hint}")  # fmt: skip


def as_embedding(
    w: Any, *, p: int | None = None, layout: str = "auto", d_model: int | None = None
) -> Embedding:
    """W_E in any of the accepted layouts as (d_model, p) float64; FreqError when it is not one."""
    if layout not in LAYOUTS:
        raise FreqError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    arr = np.asarray(w)
    if arr.dtype.kind not in "fiu":
        raise FreqError(f"not a numeric array (dtype {arr.dtype})")
    if arr.ndim != 2:
        raise FreqError(f"W_E must be 2-dimensional, got shape {_shape(arr.shape)}")
    shape = (int(arr.shape[0]), int(arr.shape[1]))
    if layout == "auto":
        axis = _residue_axis(shape, p, d_model)
    else:
        axis = 1 if layout == "d_model-first" else 0
    if d_model is not None and shape[1 - axis] != d_model:
        raise FreqError(f"shape {_shape(shape)} has no d_model axis of length {d_model} "
                        f"where layout {layout} puts it")  # fmt: skip
    m = (arr if axis == 1 else arr.T).astype(np.float64)
    n = m.shape[1]
    if p is None:
        p = n - 1 if n % 2 == 0 else n
    if n not in (p, p + 1):
        raise FreqError(f"shape {_shape(shape)}: the residue axis has {n} entries, not p={p} "
                        f"or p+1")  # fmt: skip
    if p < 3:
        raise FreqError(f"p={p}: too few residues for a frequency")
    if not np.isfinite(m).all():
        raise FreqError("W_E holds NaN or infinite values")
    return Embedding(m[:, :p], p, "d_model-first" if axis == 1 else "residues-first", n == p + 1)


def energies(matrix: np.ndarray) -> np.ndarray:
    """Squared norm per frequency of a (d_model, p) W_E: index 0 the constant, k for cos/sin k."""
    p = matrix.shape[1]
    spectrum = np.abs(np.fft.rfft(matrix, axis=1)) ** 2 / p  # (d_model, p // 2 + 1)
    energy = spectrum.sum(axis=0)
    top = p // 2 if p % 2 else p // 2 - 1  # the last k with both a cos and a sin row
    energy[1 : top + 1] *= 2.0  # cos k and sin k: 2|X_k|^2 / p together
    return energy


@dataclass(frozen=True)
class KeyFreqs:
    """The top frequencies of one W_E, by energy, with their shares of the squared norm."""

    freqs: tuple[int, ...]
    shares: tuple[float, ...]
    constant_share: float
    embedding: Embedding

    @property
    def set(self) -> frozenset[int]:
        """The frequencies as a set (what two runs agree on or not)."""
        return frozenset(self.freqs)

    def to_dict(self) -> dict[str, Any]:
        """For JSON: freqs in rank order, their shares, p and how W_E was read."""
        e = self.embedding
        return {
            "freqs": list(self.freqs),
            "shares": [round(s, 6) for s in self.shares],
            "top_share": round(sum(self.shares), 6),
            "constant_share": round(self.constant_share, 6),
            "p": e.p,
            "d_model": int(e.matrix.shape[0]),
            "layout": e.layout,
            "eq_column": e.eq_column,
        }

    def describe(self) -> str:
        """E.g. `14 35 41 42 52 (82% of the norm)`."""
        return f"{' '.join(map(str, self.freqs))} ({sum(self.shares):.0%} of the norm)"


def key_frequencies(
    w: Any,
    top: int = TOP,
    *,
    p: int | None = None,
    layout: str = "auto",
    d_model: int | None = None,
) -> KeyFreqs:
    """The `top` key frequencies of W_E (ties: the smaller k first); FreqError for a bad array."""
    if top < 1:
        raise FreqError(f"top must be at least 1, got {top}")
    emb = as_embedding(w, p=p, layout=layout, d_model=d_model)
    energy = energies(emb.matrix)
    total = float(energy.sum())
    if total == 0.0:
        raise FreqError("W_E is all zeros: it has no key frequencies")
    order = np.argsort(-energy[1:], kind="stable")[:top] + 1
    return KeyFreqs(
        freqs=tuple(int(k) for k in order),
        shares=tuple(float(energy[k] / total) for k in order),
        constant_share=float(energy[0] / total),
        embedding=emb,
    )


def agreement(a: KeyFreqs, b: KeyFreqs) -> dict[str, Any]:
    """Whether two sets agree (as sets: the rank order may differ), and what they do not share."""
    return {
        "agree": a.set == b.set,
        "same_order": a.freqs == b.freqs,
        "common": sorted(a.set & b.set),
        "only_a": sorted(a.set - b.set),
        "only_b": sorted(b.set - a.set),
    }
