"""The compiled CPU kernel of `tuimon.devsum/1`: numba, imported by `digest_cpu` only where
numba is installed and the kernel is wanted (its start costs about a second). The arithmetic
is explained in `digest_cpu`'s docstring; compiled once, then loaded from numba's cache.

One call digests many pieces of memory (a piece: the words of a tensor at an address, and a
range of its rows): a small model's tensors cost one call, not one each.
"""

from __future__ import annotations

from typing import Any

import numba
from numba import int64, types, uint32, uint64
from numba.core.extending import intrinsic

C = 4096
"""Words per row (the definition's, `digest_cpu.C`: a constant here, where numba compiles it)."""


@intrinsic  # type: ignore[untyped-decorator,misc,unused-ignore]
def _int32_at(typingctx: Any, address: Any) -> Any:
    """A pointer to int32 at `address` (an int64 from `Tensor.data_ptr()`)."""
    signature = types.CPointer(types.int32)(types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

    return signature, codegen


@numba.njit(nogil=True, cache=True, boundscheck=False)  # type: ignore[untyped-decorator,misc,unused-ignore]
def _rows(w, lo0, hi0, lo1, hi1, h0, h1, r0, r1):  # type: ignore[no-untyped-def]
    """(D_0, D_1) over rows r0..r1 of the words `w` (the last row may be partial)."""
    d0 = uint64(0)
    d1 = uint64(0)
    for r in range(r0, r1):
        row = w[r * C : min(r * C + C, w.size)]
        a0 = uint64(0)
        a1 = uint64(0)
        b0 = uint32(0)
        b1 = uint32(0)
        for c in range(row.size):
            v = int64(row[c])
            a0 += uint64(v * int64(lo0[c]))  # signed 32 x 32 -> 64 bits: exact
            a1 += uint64(v * int64(lo1[c]))
            b0 = uint32(b0 + uint32(row[c] * hi0[c]))  # modulo 2**32
            b1 = uint32(b1 + uint32(row[c] * hi1[c]))
        d0 += (a0 + (uint64(b0) << uint64(32))) * h0[r]
        d1 += (a1 + (uint64(b1) << uint64(32))) * h1[r]
    return d0, d1


_I64, _I32, _U64 = numba.int64[::1], numba.int32[::1], numba.uint64[::1]


@numba.njit(  # type: ignore[untyped-decorator,misc,unused-ignore]
    numba.void(_I64, _I64, _I64, _I64, _I32, _I32, _I32, _I32, _U64, _U64, numba.uint64[:, ::1]),
    nogil=True,
    cache=True,
    boundscheck=False,
)
def pieces_lanes(addresses, sizes, first, end, lo0, hi0, lo1, hi1, h0, h1, out):  # type: ignore[no-untyped-def]
    """out[j] = (D_0, D_1) of rows first[j]..end[j] of the sizes[j] words at addresses[j]."""
    for j in range(addresses.size):
        w = numba.carray(_int32_at(addresses[j]), (sizes[j],))  # type: ignore[call-arg]
        out[j, 0], out[j, 1] = _rows(w, lo0, hi0, lo1, hi1, h0, h1, first[j], end[j])
