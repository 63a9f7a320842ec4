"""What is known about the ops that make two runs part: per device, the ops known not to be
deterministic, whether `--deterministic` (`torch.use_deterministic_algorithms(True)`) fixes
them, what is not known, and the public source of each fact.

`tuimon explain` names the op where two runs part and quotes its entry; the `maybe:` hints
(`tuimon.engine.judge.hints`) quote the entries of the devices a pair ran on; the docs
(docs/explain-emb-check-spread-plot.md, "What is known about the op") list the table.
Only what a source says is here: a URL that was not read is never added. Nothing here
imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Fix = Literal["fixed", "error", "not fixed", "unknown"]
"""What `--deterministic` does to the op: makes it deterministic (`fixed`), makes torch raise an
error when it runs (`error`: no deterministic kernel), leaves it as it is (`not fixed`)."""
FIX_WORDS: dict[str, str] = {
    "fixed": "--deterministic fixes it",
    "error": "--deterministic makes torch raise an error there (no deterministic kernel)",
    "not fixed": "--deterministic does not fix it",
    "unknown": "whether --deterministic fixes it is not known",
}


@dataclass(frozen=True, slots=True)
class Source:
    """A public page that says it: a PyTorch issue, pull request or documentation page."""

    label: str
    url: str

    def text(self) -> str:
        return f"{self.label} {self.url}"


DOCS = Source(
    "torch.use_deterministic_algorithms docs",
    "https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html",
)
PT = "https://github.com/pytorch/pytorch"
HERE = "measured here (docs/workload-and-digests.md)"


@dataclass(frozen=True, slots=True)
class KnownOp:
    """One op on one device: what is known about it, and where that is said."""

    device: Literal["cpu", "cuda", "mps"]
    name: str
    """In words: `index_put with accumulate=True (the embedding's backward)`."""
    ops: frozenset[str]
    """The aten names a trace shows it as (`index_put` of `aten.index_put.default`)."""
    fix: Fix
    known: str
    """What is known, in a sentence."""
    sources: tuple[Source, ...]
    accumulate: bool | None = None
    """The op is on the list only with this `accumulate` flag (None: either)."""
    threads: bool = False
    """Only with more than one intra-op thread (CPU)."""
    unknown: str | None = None
    """What is not known (said, so a user does not read silence as an answer)."""
    measured: str | None = None
    """What this project measured on its own machines."""

    def where(self) -> str:
        return "cpu with more than one thread" if self.threads else self.device

    def line(self) -> str:
        """`index_put with accumulate=True (...) on cpu with more than one thread: not
        deterministic; --deterministic fixes it (source: ...)`."""
        text = f"{self.name} on {self.where()}: not deterministic; {FIX_WORDS[self.fix]}"
        if self.unknown:
            text += f"; not known: {self.unknown}"
        return text + f" (source: {'; '.join(s.text() for s in self.sources)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "where": self.where(),
            "name": self.name,
            "fix": self.fix,
            "known": self.known,
            "unknown": self.unknown,
            "measured": self.measured,
            "sources": [{"label": s.label, "url": s.url} for s in self.sources],
        }


INDEX_PUT = frozenset({"index_put", "index_put_", "_index_put_impl_"})
INDEX_ADD = frozenset({"index_add", "index_add_"})
ATOMIC_FIXED = (
    "accumulates with atomic adds; listed among the ops use_deterministic_algorithms makes "
    "deterministic on a CUDA tensor"
)

KNOWN_OPS: tuple[KnownOp, ...] = (
    KnownOp(
        "cpu",
        "index_put with accumulate=True (the backward of indexing: the embedding's W_E[:, x])",
        INDEX_PUT,
        "fixed",
        "threads add into the same rows in a racing order; with deterministic algorithms "
        "torch takes a sorted, serial path",
        (
            DOCS,
            Source("pytorch#51366", f"{PT}/issues/51366"),
            Source("pytorch#51388", f"{PT}/pull/51388"),
        ),
        accumulate=True,
        threads=True,
        measured="the reference workload (--gather contiguous), 2 threads: parts at step 2 in "
        "W_E, first op aten.index_put (accumulate) in the backward; 1 thread or --deterministic:"
        " identical (torch 2.13 CPU)",
    ),
    KnownOp(
        "cpu",
        "put_ with accumulate=True",
        frozenset({"put_", "put"}),
        "fixed",
        "listed among the ops use_deterministic_algorithms makes deterministic on a CPU tensor",
        (DOCS,),
        accumulate=True,
        threads=True,
    ),
    KnownOp(
        "cuda",
        "index_add_",
        INDEX_ADD,
        "fixed",
        ATOMIC_FIXED,
        (DOCS,),
    ),
    KnownOp(
        "cuda",
        "scatter_add_",
        frozenset({"scatter_add", "scatter_add_"}),
        "fixed",
        ATOMIC_FIXED,
        (DOCS,),
    ),
    KnownOp(
        "cuda",
        "index_put with accumulate=True (the embedding's backward)",
        INDEX_PUT,
        "fixed",
        "sorted and deterministic in torch's CUDA kernel (pytorch#55827); an atomic fast path "
        "for deterministic algorithms off was proposed (pytorch#171381)",
        (
            Source("pytorch#55827", f"{PT}/pull/55827"),
            Source("pytorch#171381", f"{PT}/pull/171381"),
        ),
        accumulate=True,
        unknown="whether your torch version has the atomic path (pytorch#171381)",
        measured="the reference workload, cuda vs cuda on one H200 (torch 2.11): bitwise "
        "identical over 1,000 steps, with and without --deterministic",
    ),
    KnownOp(
        "cuda",
        "index_put with accumulate=False",
        INDEX_PUT,
        "fixed",
        "which of two writes to one place wins is not fixed; listed among the ops "
        "use_deterministic_algorithms makes deterministic",
        (DOCS, Source("pytorch#57839", f"{PT}/pull/57839")),
        accumulate=False,
    ),
    KnownOp(
        "cuda",
        "the backward of gather",
        frozenset({"gather_backward"}),
        "fixed",
        "listed among the ops use_deterministic_algorithms makes deterministic on a CUDA "
        "tensor that requires grad",
        (DOCS,),
    ),
    KnownOp(
        "cuda",
        "convolutions (cuDNN picks its algorithm)",
        frozenset({"convolution", "convolution_backward", "cudnn_convolution"}),
        "fixed",
        "Conv1d/2d/3d and ConvTranspose on CUDA are listed among the ops "
        "use_deterministic_algorithms makes deterministic",
        (DOCS,),
    ),
    KnownOp(
        "mps",
        "index_put with accumulate=True and index_add (the embedding's backward)",
        INDEX_PUT | INDEX_ADD | frozenset({"embedding_dense_backward"}),
        "not fixed",
        "not deterministic even under torch.use_deterministic_algorithms(True): torch's own "
        "test_index_add_deterministic_mps fails with 13.8% of the elements different "
        "(pytorch#161029, open); Embedding.backward differs from call to call (pytorch#195404); "
        "index_put_ too (pytorch#97574, open; pytorch#97660 tried a serial path); "
        "pytorch#195754 makes these MPS ops raise an error under deterministic algorithms",
        (
            Source("pytorch#161029", f"{PT}/issues/161029"),
            Source("pytorch#195404", f"{PT}/issues/195404"),
            Source("pytorch#97574", f"{PT}/issues/97574"),
            Source("pytorch#195754", f"{PT}/pull/195754"),
        ),
        accumulate=True,
        unknown="whether your torch version raises the error (pytorch#195754) or has a "
        "deterministic MPS kernel (none is merged as far as these sources say); not measured "
        "here (no Mac: MPS against MPS is the lab's open question)",
    ),
)
"""The table: what each entry's sources say, and what was measured here."""

DEVICES = ("cpu", "cuda", "mps")


def device_kind(device: object) -> str:
    """`cuda:0` -> cuda; anything unknown as it is, lower case."""
    return str(device).split(":")[0].strip().lower()


def known_op(op: str, devices: object, accumulate: object = None) -> KnownOp | None:
    """The entry for a traced op (`aten.index_put.default`, the devices it ran on, its
    accumulate flag when the trace recorded one), or None when the table does not list it."""
    parts = op.split(".")
    short = parts[1] if len(parts) > 1 and parts[0] == "aten" else op
    kinds = {device_kind(d) for d in devices} if isinstance(devices, (list, tuple)) else set()
    for entry in KNOWN_OPS:
        if short not in entry.ops or entry.device not in kinds:
            continue
        if None not in (entry.accumulate, accumulate) and bool(accumulate) != entry.accumulate:
            continue
        return entry
    return None


def on_device(device: object, threads: int | None = None) -> list[KnownOp]:
    """The entries that apply to a run on `device` (a CPU run's only with more than one
    thread)."""
    kind = device_kind(device)
    return [
        e
        for e in KNOWN_OPS
        if e.device == kind and (not e.threads or (threads is not None and threads > 1))
    ]


def embedding_entry(device: object, threads: int | None = None) -> KnownOp | None:
    """The entry for the embedding's backward on `device` (index_put with accumulate), when
    it applies there."""
    return next(
        (e for e in on_device(device, threads) if e.ops & INDEX_PUT and e.accumulate is not False),
        None,
    )
