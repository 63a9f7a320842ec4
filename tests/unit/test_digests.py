"""Parameter digests `tuimon.devsum/1` (tuimon/workload/digest.py): the three implementations
agree with a plain-Python reading of the definition; bit flips, swaps, negation, dtype and shape
change a digest; equal bytes give equal digests; old and new digests are never judged against
each other."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tuimon.engine.judge.align import compare_steps  # noqa: E402
from tuimon.steplog import Step  # noqa: E402
from tuimon.workload import digest as D  # noqa: E402

MASK = (1 << 64) - 1


def reference(t: Any) -> tuple[int, int]:
    """The definition, word by word in Python integers."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    raw += b"\0" * (-len(raw) % 4)
    words = np.frombuffer(raw, dtype="<i4").tolist()
    g = D._G_NP.view(np.uint64)
    h = D._rows_np(len(words) // D.C + 1).view(np.uint64)
    out = []
    for lane in range(2):
        total = 0
        for k, v in enumerate(words):
            total += v * int(g[lane, k % D.C]) * int(h[lane, k // D.C])
        out.append(total & MASK)
    return out[0], out[1]


def cases() -> list[Any]:
    g = torch.Generator().manual_seed(0)
    return [
        torch.randn(5, generator=g),
        torch.randn(2 * D.C + 7, generator=g),  # three rows, the last partial
        torch.randn(3, 7, generator=g).half(),  # 42 bytes: a partial last word
        torch.randn(9, generator=g).bfloat16(),
        torch.randint(-100, 100, (13,), dtype=torch.int8, generator=g),
        torch.randint(0, 255, (6,), dtype=torch.uint8, generator=g),
        torch.tensor(3.5),  # 0-d
        torch.empty(0),
        torch.empty(0, 3, dtype=torch.float16),
        torch.randn(6, 5, generator=g).T,  # not contiguous
        torch.randn(4, 6, generator=g)[:, 1::2],
        torch.randint(0, 2, (7,), dtype=torch.bool, generator=g),
        torch.randn(3, generator=g).double(),
        torch.randint(-(2**62), 2**62, (5,), dtype=torch.int64, generator=g),
        torch.randn(2, 3, dtype=torch.complex64, generator=g),
        torch.randn(11, generator=g).half()[1:],  # a view at an odd 2-byte offset
    ]


@pytest.fixture(params=["numpy", "compiled"])
def cpu_path(request: Any, monkeypatch: Any) -> str:
    """The CPU digests by numpy, then by the compiled kernel (skipped without numba)."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setenv("TUIMON_DIGEST_NUMBA", "1" if request.param == "compiled" else "0")
    return str(request.param)


@pytest.mark.parametrize("i", range(len(cases())))
def test_every_implementation_is_the_definition(i: int, cpu_path: str) -> None:
    t = cases()[i]
    want = reference(t)
    assert D.lanes_numpy(t) == want
    assert D.lanes_numpy_many([t]) == [want]
    assert D.lanes_of([t]) == [want]  # by `cpu_path`
    assert tuple(int(x) & MASK for x in D.lanes_torch(t).tolist()) == want


def test_the_compiled_kernel_on_several_threads(monkeypatch: Any) -> None:
    """Rows cut among threads (tensors split at row boundaries) sum to the same lanes; the
    split covers every row once."""
    pytest.importorskip("numba")
    from tuimon.workload import digest_cpu, digest_kernel

    assert digest_kernel.C == digest_cpu.C == D.C
    g = torch.Generator().manual_seed(4)
    sizes = [5 * D.C + 11, 3, 0, 2 * D.C, 7 * D.C - 1, 1]
    tensors = [torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, generator=g)
               for n in sizes]  # fmt: skip
    addresses = [t.data_ptr() for t in tensors]
    h = D._rows_np(8).view(np.uint64)
    want = [reference(t) for t in tensors]
    monkeypatch.setattr(digest_cpu, "PARALLEL_MIN_WORDS", 0)
    for threads in (1, 2, 3, 7):
        assert digest_cpu.lanes(addresses, sizes, D._G_SPLIT, h, threads) == want, threads
        work = digest_cpu.pieces(sizes, threads)
        assert len(work) <= threads
        rows = sorted((i, r) for group in work for i, r0, r1 in group for r in range(r0, r1))
        assert rows == [(i, r) for i, n in enumerate(sizes) for r in range(-(-n // D.C))]
    for few in ([3, 0, 5], [0, 7], [0, 0]):  # fewer rows than threads; tensors of no rows
        small = [tensors[0][:n] for n in few]
        got = digest_cpu.lanes([t.data_ptr() for t in small], few, D._G_SPLIT, h, 2)
        assert got == [reference(t) for t in small], few


def test_the_compiled_kernel_from_several_threads_and_after_a_fork(monkeypatch: Any) -> None:
    """Calls from several threads at once give the one answer; a forked child (its pool's
    threads did not fork with it) makes a pool of its own."""
    pytest.importorskip("numba")
    from concurrent.futures import ThreadPoolExecutor

    from tuimon.workload import digest_cpu

    monkeypatch.setenv("TUIMON_DIGEST_NUMBA", "1")
    monkeypatch.setattr(digest_cpu, "PARALLEL_MIN_WORDS", 0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)  # a pool, even on one core
    g = torch.Generator().manual_seed(5)
    tensors = [torch.randn(n, generator=g) for n in (3 * D.C + 1, 5, 2 * D.C)]
    want = [D.lanes_numpy(t) for t in tensors]
    with ThreadPoolExecutor(4) as calls:
        assert list(calls.map(lambda _: D.lanes_of(tensors), range(8))) == [want] * 8
    assert digest_cpu._pool is not None
    _, workers, pool = digest_cpu._pool
    monkeypatch.setattr(digest_cpu, "_pool", (-1, workers, pool))  # as seen from a child
    assert D.lanes_of(tensors) == want
    assert digest_cpu._pool[2] is not pool


def test_the_compiled_kernel_is_loaded_in_the_background_once_it_pays(monkeypatch: Any) -> None:
    """By default numpy until the process's numpy digests have taken WARM_AFTER_S, then the
    kernel loads on a thread of its own and is used once loaded; =1 always, =0 never. The
    values are the same either way."""
    from tuimon.workload import digest_cpu

    monkeypatch.delenv("TUIMON_DIGEST_NUMBA", raising=False)
    monkeypatch.setattr(digest_cpu, "_kernel", None)
    monkeypatch.setattr(digest_cpu, "_loader", None)
    monkeypatch.setattr(digest_cpu, "_numpy_seconds", 0.0)
    tensors = [torch.randn(3000), torch.arange(10, dtype=torch.int64)]
    want = D.lanes_numpy_many(tensors)
    assert not digest_cpu.wanted()
    assert digest_cpu._loader is None  # nothing spent yet: nothing loaded
    assert D.lanes_of(tensors) == want
    digest_cpu.spent(digest_cpu.WARM_AFTER_S)
    assert not digest_cpu.wanted()  # starts the loader; numpy meanwhile
    assert digest_cpu._loader is not None
    digest_cpu._loader[1].join(timeout=120)
    assert digest_cpu.wanted()
    assert D.lanes_of(tensors) == want  # now through the kernel
    monkeypatch.setenv("TUIMON_DIGEST_NUMBA", "0")
    assert not digest_cpu.wanted()
    monkeypatch.setenv("TUIMON_DIGEST_NUMBA", "1")
    assert digest_cpu.wanted()


def test_the_column_multipliers_in_halves() -> None:
    """G = L + 2**32 * U modulo 2**64, L the low half read as signed: the identity the
    compiled kernel relies on."""
    g = D._G_NP.view(np.uint64)
    for lane in range(2):
        low = D._G_SPLIT[lane, 0].astype(np.int64)
        high = D._G_SPLIT[lane, 1].view(np.uint32).astype(np.uint64)
        assert ((low.view(np.uint64) + (high << np.uint64(32))) == g[lane]).all()


def test_the_triton_kernel_in_its_cpu_interpreter() -> None:
    """The CUDA kernel's arithmetic, run by Triton's interpreter on the CPU (where Triton is
    installed; torch's CPU wheels do not bring it)."""
    import importlib.util
    import os
    import subprocess
    import sys
    from pathlib import Path

    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed")
    code = (
        "import sys; sys.path.insert(0, 'tests/unit'); import test_digests as T;"
        "from tuimon.workload import digest as D;"
        "cases = T.cases() + [T.torch.randn(3 * D.C + 100)];"
        "got = [D.lanes_triton(t) for t in cases];"
        "assert all(g is not None for g in got);"
        "print(all(tuple(int(x) & T.MASK for x in g.tolist()) == T.reference(t)"
        " for g, t in zip(got, cases)))"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    root = Path(__file__).parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=root, check=False)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def test_many_tensors_at_once_match_one_by_one(cpu_path: str) -> None:
    tensors = [*cases(), torch.randn(70 * D.C + 3)]  # one beyond the row block: alone
    want = [reference(t) for t in tensors[:-1]] + [D.lanes_numpy(tensors[-1])]
    assert D.lanes_numpy_many(tensors) == want
    assert D.lanes_of(tensors) == want
    got = D.device_lanes(tensors).numpy().view(np.uint64).tolist()
    assert [tuple(x) for x in got] == want


def _flip(t: Any, byte: int, bit: int) -> Any:
    out = t.clone()
    out.view(-1).view(torch.uint8)[byte] ^= 1 << bit
    return out


DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]


def _random(dtype: str, n: int, seed: int) -> Any:
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    if dt.is_floating_point:
        return torch.randn(n, generator=g).to(dt)
    info = torch.iinfo(dt)
    return torch.randint(max(info.min, -(2**62)), min(info.max, 2**62), (n,), generator=g).to(dt)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_single_bit_flip_changes_the_digest(dtype: str, cpu_path: str) -> None:
    t = _random(dtype, D.C + 9, seed=1)  # two rows
    base = D.tensor_digest(t)
    size = t.element_size()
    rng = random.Random(dtype)
    elements = [0, t.numel() - 1, *rng.sample(range(t.numel()), 6)]
    for e in elements:  # every bit of these elements: sign, exponent and mantissa
        for byte in range(e * size, (e + 1) * size):
            for bit in range(8):
                assert D.tensor_digest(_flip(t, byte, bit)) != base, (e, byte, bit)


@pytest.mark.parametrize("dtype", DTYPES)
def test_swapping_two_elements_changes_the_digest(dtype: str, cpu_path: str) -> None:
    t = _random(dtype, 3 * D.C, seed=2)
    base = D.tensor_digest(t)
    rng = random.Random(dtype)
    pairs = [(0, 1), (0, D.C), (5, 2 * D.C + 5), (7, 2 * D.C + 100)]
    pairs += [tuple(rng.sample(range(t.numel()), 2)) for _ in range(40)]
    for i, j in pairs:
        if t[i] == t[j]:
            continue
        swapped = t.clone()
        swapped[i], swapped[j] = t[j], t[i]
        assert D.tensor_digest(swapped) != base, (i, j)


def test_swapping_x_and_minus_x_changes_the_digest(cpu_path: str) -> None:
    """Words that differ in the sign bit alone (a difference of 2**31, the most a swap can
    share with the multipliers' difference): still caught, in a row and across rows."""
    g = torch.Generator().manual_seed(3)
    rng = random.Random(3)
    pairs = [(0, 1), (3, D.C + 3), (9, 5 * D.C + 9)]
    pairs += [tuple(rng.sample(range(6 * D.C), 2)) for _ in range(30)]
    for i, j in pairs:
        t = torch.randn(6 * D.C, generator=g)
        t[j] = -t[i]
        swapped = t.clone()
        swapped[i], swapped[j] = t[j], t[i]
        assert D.tensor_digest(swapped) != D.tensor_digest(t), (i, j)


def test_negation_reshape_and_dtype_change_it_equal_bytes_do_not(cpu_path: str) -> None:
    t = torch.randn(4, 6)
    d = D.tensor_digest(t)
    assert D.tensor_digest(-t) != d
    assert D.tensor_digest(t.reshape(6, 4)) != d  # same bytes, another shape
    assert D.tensor_digest(t.view(torch.int32)) != d  # same bytes, another dtype
    assert D.tensor_digest(t.clone()) == d
    assert D.tensor_digest(t.T.contiguous().T) == d  # its logical contents, any layout
    z = torch.randn(3, dtype=torch.complex64)
    assert D.tensor_digest(z.conj()) == D.tensor_digest(z.conj().resolve_conj())
    neg = z.conj().imag  # a view with the negative bit set
    assert neg.is_neg() and D.tensor_digest(neg) == D.tensor_digest(neg.resolve_neg())
    leaf = torch.nn.Parameter(t.clone())
    assert D.tensor_digest(leaf) == d
    assert D.tensor_digest(torch.zeros(0)) != D.tensor_digest(torch.zeros(0, 1))
    assert D.tensor_digest(torch.tensor(0.0)) != D.tensor_digest(torch.zeros(1))
    assert D.tensor_digest(torch.zeros(5, dtype=torch.int8)) != D.tensor_digest(
        torch.zeros(8, dtype=torch.int8)
    )


def test_module_and_mapping_digests_are_tagged_and_named() -> None:
    from tuimon.adopt import model_digests, tensor_digest
    from tuimon.steplog import DIGEST_TAG

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    got = model_digests(model)
    names = [n for n, _ in model.named_parameters()]
    assert list(got["param_digests"]) == names
    assert got["param_digest"].startswith(f"{DIGEST_TAG}:") and len(got["param_digest"]) == 40
    assert all(
        v.startswith(f"{DIGEST_TAG}:") and len(v) == 24 for v in got["param_digests"].values()
    )
    assert model_digests(dict(model.named_parameters())) == got
    assert tensor_digest(model[0].weight) == D.tensor_digest(model[0].weight)
    with torch.no_grad():
        model[1].bias += 1
    after = model_digests(model)
    assert [k for k in names if after["param_digests"][k] != got["param_digests"][k]] == ["1.bias"]


def test_headers_name_the_digest_format() -> None:
    from tuimon.adopt import DIGEST_FORMAT, applied_env
    from tuimon.workload.device import fingerprint

    assert DIGEST_FORMAT == "tuimon.devsum/1"
    assert applied_env("cpu")["digest"] == DIGEST_FORMAT  # the callbacks' header
    assert fingerprint(torch.device("cpu"), torch.float64, True)["digest"] == DIGEST_FORMAT


def test_tables_keep_positions_apart() -> None:
    low = (1 << 33) - 1  # multipliers differ there: a swap moves the sum by a non-zero amount
    for kind in (0, 1):
        for lane in (0, 1):
            table = D._table(kind, lane, 1 << 16).view(np.uint64)
            assert (table & np.uint64(1)).all()  # odd: a bit flip always moves the sum
            assert len(np.unique(table & np.uint64(low))) == table.size


# --- old and new digests in one pair ---------------------------------------------------------


def _steps(digest: str, tensor: str, loss: float = 1.0) -> list[Step]:
    return [
        Step(k, {"loss": loss + k}, digest=f"{digest}{k}", digests={"W": f"{tensor}{k}"})
        for k in range(3)
    ]


def test_old_and_new_digests_are_not_judged_against_each_other() -> None:
    old = _steps("0123abcd", "4567")  # blake2b hex, no tag
    new = _steps("devsum1:89ab", "devsum1:cdef")
    aligned, aligner = compare_steps(old, new)
    summary = aligner.summary()
    assert summary.verdict == "IDENTICAL"
    assert summary.digests_not_comparable == 3 and summary.values_compared == 3
    assert all(s.digest_equal is None and not s.tensors for s in aligned)
    assert "digests not comparable at 3 steps" in summary.coverage_line()
    different = _steps("devsum1:89ab", "devsum1:cdef", loss=2.0)
    assert compare_steps(old, different)[1].summary().verdict == "DIVERGED"


def test_digests_of_one_format_are_still_judged() -> None:
    a = _steps("devsum1:89ab", "devsum1:cdef")
    b = _steps("devsum1:89ab", "devsum1:cdef")
    b[2] = Step(2, {"loss": 3.0}, digest="devsum1:other", digests={"W": "devsum1:other"})
    summary = compare_steps(a, b)[1].summary()
    assert summary.verdict == "DIVERGED" and summary.first_digest_step == 2
    assert summary.first_tensors == ["W"] and summary.digests_not_comparable == 0
