"""The lanes of `tuimon.devsum/1` (tuimon/workload/digest.py) on the CPU in one compiled pass
over the words, on torch's threads: numba, where it is installed (`pip install -e ".[fast]"` in
the checkout).

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


WARM_AFTER_S = 0.01
"""Seconds of numpy digests after which the kernel is loaded in the background."""
_numpy_seconds = 0.0
_kernel: Any = None
_kernel_lock = threading.Lock()
_loader: tuple[int, threading.Thread] | None = None


def wanted() -> bool:
    """Whether a call should use the kernel now: TUIMON_DIGEST_NUMBA=1 always (loaded at once),
    =0 never. By default once it is loaded: a process whose numpy digests have taken
    WARM_AFTER_S loads it on a thread of its own (importing numba and its cached kernel takes
    about a second) and uses numpy until then, the same integers. A short run never pays the
    start; a long run, a large model or a timing loop switches within a second or so."""
    mode = os.environ.get("TUIMON_DIGEST_NUMBA", "")
    if mode in ("0", "1"):
        return mode == "1"
    if _kernel is not None:
        return bool(_kernel)
    if _numpy_seconds >= WARM_AFTER_S:
        _load_in_background()
    return False


def spent(seconds: float) -> None:
    """Count `seconds` of digests the numpy path took in this process."""
    global _numpy_seconds
    _numpy_seconds += seconds


def _load_in_background() -> None:
    """Start loading the kernel on a daemon thread, once per process (a forked child starts
    its own: the parent's thread did not fork with it)."""
    global _loader
    if _loader is None or _loader[0] != os.getpid():
        thread = threading.Thread(target=kernel, name="tuimon-digest-load", daemon=True)
        _loader = (os.getpid(), thread)
        thread.start()


def kernel() -> Any:
    """The compiled kernel (compiled, or loaded from numba's cache, on first use), or None
    where numba is not installed or cannot load here (digest.py then uses numpy: the same
    integers, slower)."""
    global _kernel
    with _kernel_lock:
        if _kernel is None:
            try:
                from tuimon.workload.digest_kernel import pieces_lanes
            except Exception:  # not installed, or numba refuses this numpy/CPU: numpy it is
                _kernel = False
            else:
                _kernel = pieces_lanes
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


def _run(todo: list[Piece], addresses: Sequence[int], sizes: Sequence[int], tables: Any) -> Any:
    """The kernel over `todo`: (len(todo), 2) uint64 lanes."""
    cols = np.array(todo, dtype=np.int64).reshape(-1, 3).T
    out = np.empty((len(todo), 2), np.uint64)
    at = cols[0]
    where = np.array(addresses, dtype=np.int64)[at]
    words = np.array(sizes, dtype=np.int64)[at]
    kernel()(where, words, np.ascontiguousarray(cols[1]), np.ascontiguousarray(cols[2]),
             *tables, out)  # fmt: skip
    return out


def lanes(
    addresses: Sequence[int], sizes: Sequence[int], g_split: np.ndarray, h: np.ndarray,
    threads: int,
) -> list[Lanes]:  # fmt: skip
    """(D_0, D_1) of the `sizes[i]` int32 words at each of `addresses` (the memory of CPU
    tensors, 4-byte aligned, alive and unchanged during the call): `h` the row multipliers
    (lanes, >= rows) uint64. On up to `threads` threads (one below PARALLEL_MIN_WORDS words in
    all). Requires `kernel()`."""
    tables = (g_split[0, 0], g_split[0, 1], g_split[1, 0], g_split[1, 1], h[0], h[1])
    if threads < 2 or sum(sizes) < PARALLEL_MIN_WORDS:
        whole = [(i, 0, -(-n // C)) for i, n in enumerate(sizes)]  # one piece a tensor
        return [(d0, d1) for d0, d1 in _run(whole, addresses, sizes, tables).tolist()]
    work = pieces(sizes, threads)
    later: list[Future[Any]] = []
    if len(work) > 1:
        pool = _executor(len(work) - 1)
        later = [pool.submit(_run, todo, addresses, sizes, tables) for todo in work[1:]]
    found = [_run(work[0], addresses, sizes, tables), *(f.result() for f in later)]
    out = [[0, 0] for _ in sizes]  # a tensor of no rows has no piece: (0, 0)
    for todo, part in zip(work, found, strict=True):
        for (i, _, _), (d0, d1) in zip(todo, part.tolist(), strict=True):
            out[i][0] += d0
            out[i][1] += d1
    return [(d0 & _MASK64, d1 & _MASK64) for d0, d1 in out]
