"""The lanes of `tuimon.devsum/1` (tuimon/workload/digest.py) on the CPU in one compiled pass
over the words, on torch's threads: numba, where it is installed (`pip install tuimon[fast]`).

The same integers as the definition, computed with the products a CPU's vector units have. Split
each column multiplier G = G_lo + 2**32 * G_hi (halves of 32 bits) and read G_lo as a signed
32-bit number L = G_lo - 2**32 * b (b its top bit). Then, modulo 2**64,

    V * G = V * L + 2**32 * (V * (G_hi + b) mod 2**32)

so a row's sum S = sum_c V_c * G[c] is A + 2**32 * B with A = sum_c V_c * L[c] (signed 32 x 32 ->
64-bit products, exact, summed modulo 2**64) and B = sum_c V_c * U[c] modulo 2**32 (U = G_hi + b:
32-bit products and sums). No 64 x 64-bit product per word: on AVX2 a word costs one `vpmuldq`
and one `vpmulld` per lane. Then D = sum_r S_r * H[r] (mod 2**64), one product per row.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

C = 4096
"""Words per row (the definition's)."""
_MASK64 = (1 << 64) - 1
PARALLEL_MIN_WORDS = 1 << 18
"""Below this many words (1 MiB) in all, one thread: handing work to another costs more."""

Lanes = tuple[int, int]
Piece = tuple[int, int, int]
"""(index of a tensor, first row, end row)."""


def split_columns(g: np.ndarray) -> np.ndarray:
    """The column multipliers G (lanes, C) as uint64 split into (lanes, 2, C) int32: L (G's low
    half read as signed) and U (G's high half plus the low half's top bit, modulo 2**32)."""
    g = g.view(np.uint64)
    low = g & np.uint64(0xFFFFFFFF)
    high = ((g >> np.uint64(32)) + (low >> np.uint64(31))) & np.uint64(0xFFFFFFFF)
    out = np.stack([low, high], axis=1).astype(np.uint32).view(np.int32)
    return np.ascontiguousarray(out)


_kernel: Any = None
_kernel_lock = threading.Lock()


def _compile() -> Any:
    """The row kernel, compiled by numba (cached on disk), or False without numba."""
    try:
        import numba
    except ImportError:
        return False
    from numba import int64, uint32, uint64

    def rows(words, lo0, hi0, lo1, hi1, h0, h1, r0, r1):  # type: ignore[no-untyped-def]
        """(D_0, D_1) over rows r0..r1 of `words` (the last row may be partial)."""
        d0 = uint64(0)
        d1 = uint64(0)
        for r in range(r0, r1):
            w = words[r * C : min(r * C + C, words.size)]
            a0 = uint64(0)
            a1 = uint64(0)
            b0 = uint32(0)
            b1 = uint32(0)
            for c in range(w.size):
                v = int64(w[c])
                a0 += uint64(v * int64(lo0[c]))
                a1 += uint64(v * int64(lo1[c]))
                b0 = uint32(b0 + uint32(w[c] * hi0[c]))
                b1 = uint32(b1 + uint32(w[c] * hi1[c]))
            d0 += (a0 + (uint64(b0) << uint64(32))) * h0[r]
            d1 += (a1 + (uint64(b1) << uint64(32))) * h1[r]
        return d0, d1

    i32, u64 = numba.int32[::1], numba.uint64[::1]
    signature = numba.types.UniTuple(numba.uint64, 2)(i32, i32, i32, i32, i32, u64, u64,
                                                      numba.int64, numba.int64)  # fmt: skip
    return numba.njit(signature, nogil=True, cache=True, boundscheck=False)(rows)


SWITCH_WORDS = 1 << 30
"""Words read by numpy before the kernel is worth its start (TUIMON_DIGEST_NUMBA unset)."""
_numpy_words = 0


def wanted(words: int) -> bool:
    """Whether a call digesting `words` words should use the kernel: TUIMON_DIGEST_NUMBA=1
    always, =0 never; by default once the process's digests have read SWITCH_WORDS words
    (4 GiB) this call included. Numba's start (importing it, loading the cached kernel: about
    1.5 s) costs what numpy loses over about that many words, so a short run never pays it,
    and a long run or a large model pays it once: at most twice the better of the two."""
    global _numpy_words
    mode = os.environ.get("TUIMON_DIGEST_NUMBA", "")
    if mode in ("0", "1"):
        return mode == "1"
    if _kernel is None:
        _numpy_words += words
        return _numpy_words >= SWITCH_WORDS
    return True


def kernel() -> Any:
    """The compiled kernel (compiled, or loaded from numba's cache, on first use), or None
    where numba is not installed (digest.py then uses numpy: the same integers, slower)."""
    global _kernel
    with _kernel_lock:
        if _kernel is None:
            _kernel = _compile()
    return _kernel or None


def pieces(sizes: Sequence[int], groups: int) -> list[list[Piece]]:
    """The rows of tensors of `sizes` words cut into at most `groups` lists of about equal
    rows (a tensor is cut at row boundaries only)."""
    rows = [-(-n // C) for n in sizes]
    share = max(1, -(-sum(rows) // max(groups, 1)))
    out: list[list[Piece]] = [[]]
    room = share
    for i, count in enumerate(rows):
        start = 0
        while start < count:
            if room == 0:
                out.append([])
                room = share
            end = min(count, start + room)
            out[-1].append((i, start, end))
            room -= end - start
            start = end
    return out


_pool: tuple[int, int, ThreadPoolExecutor] | None = None


def _executor(workers: int) -> ThreadPoolExecutor:
    """A pool of at least `workers` threads, made again in a forked child (its threads did not
    fork with it) or when more are asked for."""
    global _pool
    if _pool is None or _pool[0] != os.getpid() or _pool[1] < workers:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="tuimon-digest")
        _pool = (os.getpid(), workers, pool)
    return _pool[2]


def lanes(
    words: Sequence[np.ndarray], g_split: np.ndarray, h: np.ndarray, threads: int
) -> list[Lanes]:
    """(D_0, D_1) of each int32 array of `words` (C-contiguous, aligned), without a partial
    last word: `h` the row multipliers (lanes, >= rows) uint64. Requires `kernel()`."""
    run = kernel()
    args = (g_split[0, 0], g_split[0, 1], g_split[1, 0], g_split[1, 1], h[0], h[1])

    def group(todo: list[Piece]) -> list[tuple[int, int, int]]:
        return [(i, *run(words[i], *args, r0, r1)) for i, r0, r1 in todo]

    if threads < 2 or sum(w.size for w in words) < PARALLEL_MIN_WORDS:
        return [run(w, *args, 0, -(-w.size // C)) for w in words]
    work = pieces([w.size for w in words], threads)
    later: list[Future[list[tuple[int, int, int]]]] = []
    if len(work) > 1:
        pool = _executor(len(work) - 1)
        later = [pool.submit(group, todo) for todo in work[1:]]
    found = [group(work[0]), *(f.result() for f in later)]
    out = [[0, 0] for _ in words]
    for part in found:
        for i, d0, d1 in part:
            out[i][0] += d0
            out[i][1] += d1
    return [(d0 & _MASK64, d1 & _MASK64) for d0, d1 in out]
