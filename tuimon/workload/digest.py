"""Parameter digests computed where the tensors live: format `tuimon.devsum/1`.

The definition (exact integer arithmetic, so the result depends neither on the device nor on the
order of any reduction):

- A tensor's logical contents (C order; a non-contiguous tensor is read as `.contiguous()`
  would lay it out), as bytes, zero-padded to a multiple of 4, are read as little-endian signed
  32-bit words V_k, k = 0 .. n-1 (a 0-d tensor is one element, an empty one has no word).
- Word k sits in row r = k // C, column c = k % C (C = 4096 words).
- Two lanes, l = 0 and 1:  D_l = sum over k of V_k * G_l[c] * H_l[r]  (mod 2**64).
- G_l and H_l are fixed tables of odd 64-bit numbers (`_table`): their low 33 bits are
  2 * P(i) + 1 with P a bijection of [0, 2**32), so two positions in one row (or two rows at
  one column) never share a multiplier modulo 2**33; the upper 31 bits are pseudo-random.
- The tensor's digest is blake2b over the format name, its dtype, its shape and D_0, D_1.

What this guarantees, with no probability involved:
- one bit flipped anywhere changes D_l: V_k changes by +-2**j (j < 32) and its multiplier is
  odd, so the sum moves by a non-zero amount modulo 2**64;
- two different 32-bit words swapped within a row, or between two rows at the same column,
  change D_l: the sum moves by (M_a - M_b) * (V_b - V_a), where V_b - V_a is divisible by at
  most 2**31 (|V_b - V_a| < 2**32) and M_a - M_b by at most 2**32 (M_a != M_b modulo 2**33, one
  of the two factors G or H being the same odd number), a product that is not 0 modulo 2**64
  (for tensors of fewer than 2**32 rows);
- elements of 1 or 2 bytes share a word with their neighbours, so swapping two of them inside
  one word changes that word; elements of 8 bytes are two words.
Other changes (several words at once, swaps across rows and columns) are caught unless a 64-bit
sum happens to cancel in both lanes: about 2**-64 for the 32-bit patterns floats produce. (The
strings written are blake2b of the lanes: 64 bits per tensor, 128 for the whole model.)

Only the two lanes (16 bytes per tensor) leave the device. Four implementations compute the
same integers. On CPU tensors: one compiled pass over the words where they lie, on torch's
threads (`lanes_compiled`; `digest_cpu`, `digest_kernel`: numba, where installed, loaded on a
thread of its own once a process's numpy digests have taken 10 ms), and numpy until then
or without numba (`lanes_numpy`, rows in cache-sized blocks). On any device, torch ops
(`lanes_torch`: no host synchronisation, so it can be captured in a CUDA graph, and it is what
the CPU tests run in place of the GPU). On CUDA, one Triton kernel per tensor (`lanes_triton`,
one pass over the bytes) when Triton is installed; the kernels of all of a model's tensors are
replayed as one CUDA graph from the second call on (`graphed_lanes`).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from tuimon.steplog import DIGEST_FORMAT, DIGEST_TAG
from tuimon.workload import digest_cpu
from tuimon.workload.digest_cpu import C

_LANES = 2
_MASK64 = (1 << 64) - 1
_LOW = (1 << 33) - 1
_ROW_BLOCK = 64
"""Rows per block of the torch path (64 x 4096 x 2 int64 = 4 MiB per temporary)."""
_CPU_ROWS = 8
"""Rows per block of the numpy path (8 x 4096 int64 = 256 KiB: in a core's L2 cache)."""


# --- the tables ------------------------------------------------------------------------------


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wraps modulo 2**64)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _perm32(x: np.ndarray, key: int) -> np.ndarray:
    """A bijection of [0, 2**32): xor, odd multiplications and xorshifts, all modulo 2**32."""
    m = np.uint64((1 << 32) - 1)
    x = (x ^ np.uint64(key)) & m
    x = (x * np.uint64(0x9E3779B1)) & m
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x85EBCA6B)) & m
    x ^= x >> np.uint64(13)
    x = (x * np.uint64(0xC2B2AE35)) & m
    return x ^ (x >> np.uint64(16))


def _table(kind: int, lane: int, n: int) -> np.ndarray:
    """Multipliers 0..n-1 of a table (kind 0: G, columns; 1: H, rows) as int64 bit patterns."""
    i = np.arange(n, dtype=np.uint64)
    salt = np.uint64((kind * _LANES + lane + 1) * 0x632BE59BD9B4E019 & _MASK64)
    high = _splitmix(i ^ salt) & np.uint64(_MASK64 ^ _LOW)
    key = (0x5DEECE66D * (kind * _LANES + lane + 1)) & 0xFFFFFFFF
    low = np.uint64(2) * _perm32(i, key) + np.uint64(1)
    return (high | low).view(np.int64)


_G_NP = np.stack([_table(0, lane, C) for lane in range(_LANES)])  # (lanes, C)
_H_NP = np.stack([_table(1, lane, 1024) for lane in range(_LANES)])  # grown on demand
_G_SPLIT = digest_cpu.split_columns(_G_NP)  # G in 32-bit halves, for the compiled kernel


def _rows_np(rows: int) -> np.ndarray:
    """H as (lanes, >= rows) int64, grown (doubling) when a tensor needs more rows."""
    global _H_NP
    if _H_NP.shape[1] < rows:
        size = max(rows, 2 * _H_NP.shape[1])
        _H_NP = np.stack([_table(1, lane, size) for lane in range(_LANES)])
    return _H_NP


_DEVICE_TABLES: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def device_tables(device: torch.device, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """G (lanes, C) and H (lanes, >= rows) on `device` (cached; made on the host, moved)."""
    got = _DEVICE_TABLES.get(device)
    if got is None or got[1].shape[1] < rows:
        host_h = _rows_np(max(rows, 1))
        got = (
            torch.from_numpy(_G_NP.copy()).to(device),
            torch.from_numpy(host_h.copy()).to(device),
        )
        _DEVICE_TABLES[device] = got
    return got


# --- the bytes of a tensor as words ----------------------------------------------------------


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """The logical contents of `t` as a flat uint8 tensor on its device, 4-byte aligned."""
    t = t.detach().resolve_conj().resolve_neg()
    if t.layout != torch.strided:
        raise TypeError(f"cannot digest a {t.layout} tensor (dense tensors only)")
    if not t.is_contiguous():
        t = t.contiguous()
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=t.device)
    if (flat.storage_offset() * flat.element_size()) % 4:
        flat = flat.clone()  # a view at an odd offset: its words would not be aligned
    return flat.view(torch.uint8)


def _host_words(t: torch.Tensor, keep: list[torch.Tensor]) -> tuple[int, int, bytes]:
    """The address of a CPU tensor's logical contents, their number of whole 32-bit words and
    the bytes of a partial last word: the tensor's own memory where it is laid out so
    (contiguous, no conjugate or negative bit, 4-byte aligned), else a copy, kept in `keep`."""
    if not (
        t.layout == torch.strided
        and t.is_contiguous()
        and not t.is_conj()
        and not t.is_neg()
        and t.data_ptr() % 4 == 0
    ):
        t = _bytes_of(t)
        keep.append(t)
    size = t.numel() * t.element_size()
    tail = bytes(_bytes_of(t)[size - size % 4 :].tolist()) if size % 4 else b""
    return t.data_ptr(), size // 4, tail


def _tail_value(tail: Sequence[int]) -> int:
    """The last, partial word (1-3 bytes, zero-padded): a non-negative int32."""
    return int.from_bytes(bytes(tail), "little")


def _finish(t: torch.Tensor, d0: int, d1: int) -> bytes:
    """The 16-byte digest of a tensor from its lanes, dtype and shape."""
    head = f"{DIGEST_FORMAT}|{str(t.dtype).removeprefix('torch.')}|{list(t.shape)}".encode()
    return hashlib.blake2b(head + struct.pack("<QQ", d0, d1), digest_size=16).digest()


# --- numpy (CPU tensors) ---------------------------------------------------------------------


def _rows_lanes(words: np.ndarray, r0: int, r1: int, h: np.ndarray) -> list[int]:
    """Both lanes' sums over the full rows r0..r1 of `words` (int32), as Python ints: each block
    of `_CPU_ROWS` rows is widened into a buffer that stays in the core's L2 cache, and one
    einsum gives both lanes' row sums (wrapping modulo 2**64)."""
    n = r1 - r0
    sums = np.empty((_LANES, max(n, 1)), np.int64)
    buf = np.empty((min(max(n, 1), _CPU_ROWS), C), np.int64)
    for a in range(0, n, _CPU_ROWS):
        b = min(n, a + _CPU_ROWS)
        rows = buf[: b - a]
        np.copyto(rows, words[(r0 + a) * C : (r0 + b) * C].reshape(-1, C))  # sign-extends
        np.einsum("rc,lc->lr", rows, _G_NP, out=sums[:, a:b])
    per_row = sums[:, :n].view(np.uint64)
    return [int((per_row[lane] * h[lane, r0:r1]).sum()) for lane in range(_LANES)]


def lanes_numpy(t: torch.Tensor) -> tuple[int, int]:
    """(D_0, D_1) of a CPU tensor, by numpy in blocks of rows that stay in cache."""
    raw = _bytes_of(t).numpy()
    n_words = raw.size // 4
    words = raw[: n_words * 4].view(np.int32)
    tail = raw[n_words * 4 :]
    rows, rest = divmod(n_words, C)
    hu = _rows_np(rows + 1).view(np.uint64)
    g = _G_NP.view(np.uint64)
    total = _rows_lanes(words, 0, rows, hu)
    last = words[rows * C :].astype(np.int64).view(np.uint64)
    for lane in range(_LANES):
        part = int((last * g[lane, :rest]).sum()) if rest else 0
        if tail.size:
            part += _tail_value(tail.tolist()) * int(g[lane, rest])
        total[lane] = (total[lane] + (part & _MASK64) * int(hu[lane, rows])) & _MASK64
    return total[0], total[1]


_SCRATCH: list[np.ndarray] = []


def _scratch(rows: int) -> np.ndarray:
    """A (rows, C) int64 buffer, kept between calls (a fresh one costs page faults)."""
    if not _SCRATCH or _SCRATCH[0].shape[0] < rows:
        _SCRATCH[:] = [np.empty((rows, C), np.int64)]
    return _SCRATCH[0][:rows]


def lanes_numpy_many(tensors: Sequence[torch.Tensor]) -> list[tuple[int, int]]:
    """`lanes_numpy` of many CPU tensors at once: each tensor's rows are laid out in one
    zero-padded matrix, multiplied and summed in one pass per lane (small tensors cost one row
    each instead of a call each). Tensors of more than `_ROW_BLOCK` rows go one by one."""
    out: list[tuple[int, int] | None] = [None] * len(tensors)
    small: list[tuple[int, np.ndarray]] = []
    for i, t in enumerate(tensors):
        raw = _bytes_of(t).numpy()
        if raw.size > _ROW_BLOCK * C * 4:
            out[i] = lanes_numpy(t)
        else:
            small.append((i, raw))
    if small:
        counts = [-(-raw.size // (4 * C)) for _, raw in small]
        starts = np.cumsum([0, *counts[:-1]])
        total = int(sum(counts))
        buf = _scratch(max(total, 1))
        local = np.zeros(max(total, 1), np.int64)
        for (_, raw), start, count in zip(small, starts.tolist(), counts, strict=True):
            n_words = raw.size // 4
            row = buf[start : start + count].reshape(-1)
            np.copyto(row[:n_words], raw[: n_words * 4].view(np.int32), casting="unsafe")
            row[n_words:] = 0
            if raw.size % 4:
                row[n_words] = _tail_value(raw[n_words * 4 :].tolist())
            local[start : start + count] = np.arange(count)
        h = _rows_np(int(local.max()) + 1).view(np.uint64)
        sums = np.einsum("rc,lc->lr", buf, _G_NP).view(np.uint64)  # wraps modulo 2**64
        found = []
        for lane in range(_LANES):
            per_row = sums[lane] * h[lane, local]
            at = np.minimum(starts, max(total - 1, 0))
            found.append(np.add.reduceat(per_row, at) if total else np.zeros(len(small)))
        for k, (i, _) in enumerate(small):
            empty = counts[k] == 0  # reduceat gives the next row's value for an empty range
            out[i] = (0, 0) if empty else (int(found[0][k]), int(found[1][k]))
    return [x for x in out if x is not None]


def lanes_compiled(tensors: Sequence[torch.Tensor]) -> list[tuple[int, int]] | None:
    """(D_0, D_1) of CPU tensors by one compiled pass over their words on torch's threads
    (`digest_cpu`), read where they lie; None where it is not wanted yet (`digest_cpu.wanted`)
    or numba is not installed."""
    if not digest_cpu.wanted() or digest_cpu.kernel() is None:
        return None
    keep: list[torch.Tensor] = []  # copies, alive while the kernel reads them
    found = [_host_words(t, keep) for t in tensors]
    sizes = [n for _, n, _ in found]
    h = _rows_np(max(sizes, default=0) // C + 1).view(np.uint64)
    out = digest_cpu.lanes([a for a, _, _ in found], sizes, _G_SPLIT, h, torch.get_num_threads())
    for k, (_, n, tail) in enumerate(found):
        if tail:  # a partial last word, zero-padded: word n of the tensor
            v = _tail_value(tail)
            g, row = _G_NP.view(np.uint64)[:, n % C], h[:, n // C]
            d0, d1 = (out[k][lane] + v * int(g[lane]) * int(row[lane]) for lane in range(_LANES))
            out[k] = (d0 & _MASK64, d1 & _MASK64)
    return out


def lanes_cpu(tensors: Sequence[torch.Tensor]) -> list[tuple[int, int]]:
    """(D_0, D_1) of CPU tensors: compiled where numba is installed, else numpy."""
    got = lanes_compiled(tensors)
    if got is not None:
        return got
    start = time.perf_counter()
    got = lanes_numpy_many(tensors)
    digest_cpu.spent(time.perf_counter() - start)
    return got


# --- torch ops (any device, no host synchronisation) -----------------------------------------


def lanes_torch(t: torch.Tensor) -> torch.Tensor:
    """(D_0, D_1) as an int64 tensor (2,) on `t`'s device, by torch ops alone: nothing waits
    for the device, so this can be captured in a CUDA graph."""
    raw = _bytes_of(t)
    n_words = raw.numel() // 4
    words = raw[: n_words * 4].view(torch.int32)
    rows, rest = divmod(n_words, C)
    g, h = device_tables(raw.device, rows + 1)
    gt = g.T  # (C, lanes)
    acc = torch.zeros(_LANES, dtype=torch.int64, device=raw.device)
    for r0 in range(0, rows, _ROW_BLOCK):
        r1 = min(rows, r0 + _ROW_BLOCK)
        v = words[r0 * C : r1 * C].view(-1, C, 1).to(torch.int64)
        acc += ((v * gt).sum(1) * h[:, r0:r1].T).sum(0)
    tail = raw.numel() - n_words * 4
    if rest or tail:
        last = torch.zeros(rest + (1 if tail else 0), dtype=torch.int64, device=raw.device)
        last[:rest] = words[rows * C :]
        if tail:
            scale = 256 ** torch.arange(3, dtype=torch.int64, device=raw.device)
            last[rest] = (raw[n_words * 4 :].to(torch.int64) * scale[:tail]).sum()
        acc += (last[:, None] * gt[: last.numel()]).sum(0) * h[:, rows]
    return acc


# --- Triton (CUDA tensors) -------------------------------------------------------------------

_triton_kernel: Any = None
_TRITON_BLOCK = 2048


def _load_triton() -> Any:
    """The Triton kernel, compiled on first use; None without Triton (or TUIMON_DIGEST_TRITON=0)."""
    global _triton_kernel
    if _triton_kernel is not None:
        return _triton_kernel or None
    if os.environ.get("TUIMON_DIGEST_TRITON", "1") == "0":
        _triton_kernel = False
        return None
    try:
        import triton  # type: ignore[import-not-found,unused-ignore]
        import triton.language as tl  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        _triton_kernel = False
        return None

    @triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
    def devsum_kernel(  # type: ignore[no-untyped-def]
        w_ptr, n_words, g_ptr, h_ptr, h_stride, out_ptr, C: tl.constexpr, BLOCK: tl.constexpr
    ):
        pid = tl.program_id(0).to(tl.int64)
        start = pid * BLOCK
        offs = start + tl.arange(0, BLOCK).to(tl.int64)
        mask = offs < n_words
        w = tl.load(w_ptr + offs, mask=mask, other=0).to(tl.int64)
        col = offs % C
        row = start // C
        s0 = tl.sum(w * tl.load(g_ptr + col), axis=0)
        s1 = tl.sum(w * tl.load(g_ptr + C + col), axis=0)
        tl.store(out_ptr + pid * 2, s0 * tl.load(h_ptr + row))
        tl.store(out_ptr + pid * 2 + 1, s1 * tl.load(h_ptr + h_stride + row))

    _triton_kernel = devsum_kernel
    return devsum_kernel


def lanes_triton(t: torch.Tensor) -> torch.Tensor | None:
    """(D_0, D_1) of a CUDA tensor by one Triton pass over its words (then a sum of the
    per-block partials); None when Triton is not there."""
    kernel = _load_triton()
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's CPU interpreter: tests
    if kernel is None or (t.device.type != "cuda" and not interpreted):
        return None
    raw = _bytes_of(t)
    n_words = raw.numel() // 4
    if n_words == 0 or raw.numel() % 4:
        return lanes_torch(t)  # nothing to stream, or a partial last word: the general path
    words = raw.view(torch.int32)
    rows = -(-n_words // C)
    g, h = device_tables(raw.device, rows)
    blocks = -(-n_words // _TRITON_BLOCK)
    partial = torch.empty((blocks, _LANES), dtype=torch.int64, device=raw.device)
    kernel[(blocks,)](words, n_words, g, h, h.stride(0), partial, C=C, BLOCK=_TRITON_BLOCK)
    return partial.sum(0)


def _triton_checked(t: torch.Tensor) -> torch.Tensor | None:
    """`lanes_triton`, checked once per process against the torch path (outside a graph
    capture); Triton is left off, with one line on stderr, if it fails or disagrees."""
    global _triton_kernel, _triton_trusted
    if _triton_trusted or (t.device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        return lanes_triton(t)
    try:
        got = lanes_triton(t)
        ok = got is None or bool(torch.equal(got, lanes_torch(t)))
    except Exception as exc:  # a Triton or driver that cannot build the kernel
        got, ok = None, False
        print(
            f"tuimon: Triton digest kernel failed ({exc!r:.200}); using torch ops", file=sys.stderr
        )
    else:
        if not ok:
            print(
                "tuimon: Triton digest kernel disagrees with torch ops; using them", file=sys.stderr
            )
    if not ok:
        _triton_kernel, got = False, None
    _triton_trusted = ok and got is not None
    return got


_triton_trusted = False


# --- what callers use ------------------------------------------------------------------------


def device_lanes(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """The lanes of each tensor, (T, 2) int64 on the first tensor's device, computed on each
    tensor's own device with no host synchronisation (Triton on CUDA where installed)."""
    out = []
    for t in tensors:
        got = _triton_checked(t) if t.device.type == "cuda" else None
        out.append(lanes_torch(t) if got is None else got)
    if not out:
        return torch.zeros((0, _LANES), dtype=torch.int64)
    device = out[0].device
    return torch.stack([x.to(device) for x in out])


_GRAPHS: dict[tuple[Any, ...], tuple[Any, torch.Tensor]] = {}
_SEEN: set[tuple[Any, ...]] = set()
_MAX_GRAPHS = 4


def graphed_lanes(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """`device_lanes` of CUDA tensors on one device, replayed from a CUDA graph from the second
    call with the same tensors on (the same addresses, shapes, strides and dtypes: a model's
    parameters, updated in place, step after step). A kernel launch costs about as much as
    reading a few MB: a model of hundreds of tensors would otherwise spend its digest on
    launches. The first call runs eagerly (Triton compiles and is checked then); anywhere else
    (CPU, several devices, inside a capture, TUIMON_DIGEST_GRAPH=0, a capture that fails) this
    is `device_lanes`."""
    devices = {t.device for t in tensors}
    if (
        len(devices) != 1
        or next(iter(devices)).type != "cuda"
        or os.environ.get("TUIMON_DIGEST_GRAPH", "1") == "0"
        or torch.cuda.is_current_stream_capturing()
    ):
        return device_lanes(tensors)
    key = tuple((t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device) for t in tensors)
    found = _GRAPHS.get(key)
    if found is None:
        if key not in _SEEN:
            _SEEN.add(key)
            return device_lanes(tensors)
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = device_lanes(tensors)
        except Exception as exc:  # never fatal: the digests are still right without it
            print(f"tuimon: digest graph not captured ({exc!r:.200})", file=sys.stderr)
            os.environ["TUIMON_DIGEST_GRAPH"] = "0"
            return device_lanes(tensors)
        if len(_GRAPHS) >= _MAX_GRAPHS:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        found = _GRAPHS[key] = (graph, out)
    graph, out = found
    graph.replay()
    return out.clone()


def lanes_of(tensors: Sequence[torch.Tensor]) -> list[tuple[int, int]]:
    """(D_0, D_1) of each tensor as Python ints: on CUDA by the device path, with one copy of
    the lanes to the host per device; numpy for CPU tensors, and for other devices' (MPS shares
    its memory with the CPU; its int64 arithmetic is not relied on), copied to the CPU first."""
    if all(t.device.type == "cpu" for t in tensors):
        return lanes_cpu(tensors)
    result: list[tuple[int, int] | None] = [None] * len(tensors)
    by_device: dict[torch.device, list[int]] = {}
    host_side: list[int] = []
    for i, t in enumerate(tensors):
        if t.device.type == "cuda":
            by_device.setdefault(t.device, []).append(i)
        else:
            host_side.append(i)
    on_cpu = [tensors[i] if tensors[i].device.type == "cpu" else tensors[i].detach().cpu()
              for i in host_side]  # fmt: skip
    for i, got in zip(host_side, lanes_cpu(on_cpu), strict=True):
        result[i] = got
    for index in by_device.values():
        host = graphed_lanes([tensors[i] for i in index]).cpu().numpy().view(np.uint64)
        for i, row in zip(index, host.tolist(), strict=True):
            result[i] = (row[0], row[1])
    return [x for x in result if x is not None]


def format_digests(
    names: Sequence[str], tensors: Sequence[torch.Tensor], lanes: Sequence[Sequence[int]]
) -> tuple[str, dict[str, str]]:
    """`param_digest` (all tensors, in order, with their names) and one `param_digests` entry
    per tensor, tagged with the format: "devsum1:<hex>"."""
    per: dict[str, str] = {}
    whole = hashlib.blake2b(digest_size=16)
    for name, t, (d0, d1) in zip(names, tensors, lanes, strict=True):
        raw = _finish(t, int(d0) & _MASK64, int(d1) & _MASK64)
        per[name] = f"{DIGEST_TAG}:{raw[:8].hex()}"
        whole.update(name.encode() + b"\0" + raw)
    return f"{DIGEST_TAG}:{whole.hexdigest()}", per


def named_tensors(obj: Any) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of a module (its parameters), a mapping of tensors (a state dict)
    or one tensor (named "tensor")."""
    if isinstance(obj, torch.Tensor):
        return [("tensor", obj)]
    if isinstance(obj, torch.nn.Module):
        return [(n, p) for n, p in obj.named_parameters()]
    if isinstance(obj, Mapping):
        return [(str(k), v) for k, v in obj.items() if isinstance(v, torch.Tensor)]
    raise TypeError(f"cannot digest a {type(obj).__name__}: give a module, tensors or a tensor")


def param_digests(model: Any) -> tuple[str, dict[str, str]]:
    """The digest of all parameters of `model` (or of a mapping of tensors, or a tensor), and
    one per tensor: `tuimon.devsum/1`, computed on each tensor's device."""
    pairs = named_tensors(model)
    names = [n for n, _ in pairs]
    tensors = [t for _, t in pairs]
    return format_digests(names, tensors, lanes_of(tensors))


def tensor_digest(t: torch.Tensor) -> str:
    """The digest of one tensor (its bytes, dtype and shape), "devsum1:<32 hex digits>"."""
    d0, d1 = lanes_of([t])[0]
    return f"{DIGEST_TAG}:{_finish(t, d0, d1).hex()}"
