"""Likely causes of a divergence, read from a pair's two fingerprints and its divergence pattern.

Each hint is one line with the evidence that triggered it, never a certainty: a pair that
differs *and* matches a known cause (DESIGN.md, "Determinism facts") gets the hint. A pair that
never differed gets none: there is nothing to explain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tuimon.engine.judge.known_ops import embedding_entry

SIDES = ("a", "b")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
VERSION_KEYS = ("torch", "cuda", "cudnn", "driver", "cuda_driver", "nvidia_driver", "python")
EMBEDDING_NAMES = ("w_e", "embed", "wte", "tok_emb", "token_emb")
ONE_THREAD = "try --threads 1 or --deterministic"


@dataclass(frozen=True, slots=True)
class Hint:
    """One likely cause and the evidence that points to it."""

    tag: str
    """A word for a table cell: threads, versions, loss dtype, mps, world size, embedding,
    hosts."""
    cause: str
    evidence: str
    remedy: str = ""
    """What to try, in the words `cause` ends with (the bottom line of the view leads with
    it, `line`)."""

    def __post_init__(self) -> None:
        # evidence quotes a run's fingerprint: data, never control sequences on a terminal
        object.__setattr__(self, "evidence", _CONTROL.sub("?", self.evidence)[:300])

    def text(self) -> str:
        """`maybe: <cause> (evidence: <...>)` on one line."""
        return f"maybe: {self.cause} (evidence: {self.evidence})"

    def line(self) -> str:
        """The hint in a screen's one line: what to try first, then the cause, no evidence
        (`i` and the summary after quitting give `text`)."""
        if not self.remedy:
            return f"maybe: {self.cause}"
        cause = self.cause.replace(f"; {self.remedy})", ")").replace(f" ({self.remedy})", "")
        return f"{self.remedy}: maybe {cause}"

    def to_dict(self) -> dict[str, str]:
        """For pair.json."""
        return {"tag": self.tag, "cause": self.cause, "evidence": self.evidence}


def _envs(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    runs = meta.get("runs")
    runs = runs if isinstance(runs, Mapping) else {}
    out = {}
    for side in SIDES:
        run = runs.get(side)
        env = run.get("env") if isinstance(run, Mapping) else None
        out[side] = dict(env) if isinstance(env, Mapping) else {}
    return out


def _device(meta: Mapping[str, Any], envs: Mapping[str, Mapping[str, Any]], side: str) -> str:
    device = envs[side].get("device")
    if isinstance(device, str):
        return device
    devices = meta.get("devices")
    if isinstance(devices, list) and len(devices) == 2:
        return str(devices[SIDES.index(side)])
    return "?"


def _threads(env: Mapping[str, Any]) -> int | None:
    value = env.get("threads")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


@dataclass(frozen=True, slots=True)
class _Pair:
    """What the hints read from a pair.json document that differed."""

    summary: Mapping[str, Any]
    envs: dict[str, dict[str, Any]]
    diff: Mapping[str, Any]
    """`env_diff`: key -> (a's value, b's value)."""
    devices: dict[str, str]


def _racy_threads(pair: _Pair) -> Hint | None:
    """A CPU side with more than one thread and deterministic algorithms off."""
    racy = []
    for side in SIDES:
        env = pair.envs[side]
        threads = _threads(env)
        if (
            pair.devices[side].startswith("cpu")
            and threads is not None
            and threads > 1
            and env.get("deterministic") is not True
        ):
            racy.append(f"run {side}: cpu, {threads} threads, deterministic algorithms off")
    if not racy:
        return None
    return Hint(
        "threads",
        f"more than one CPU thread without deterministic algorithms (racy backward "
        f"kernels; {ONE_THREAD})",
        "; ".join(racy),
        ONE_THREAD,
    )


def _versions(pair: _Pair) -> Hint | None:
    """Library or driver versions that differ between the sides."""
    diff = pair.diff
    versions = [f"{k} {diff[k][0]} vs {diff[k][1]}" for k in VERSION_KEYS if k in diff]
    if not versions:
        return None
    return Hint("versions", "different library or driver versions", "; ".join(versions))


def _loss_dtype(pair: _Pair) -> Hint | None:
    """A loss computed in different dtypes."""
    if "loss_dtype" not in pair.diff:
        return None
    a, b = pair.diff["loss_dtype"]
    return Hint("loss dtype", "different loss dtype", f"loss_dtype {a} vs {b}")


def _mps(pair: _Pair) -> Hint | None:
    """A side on Apple's MPS."""
    devices = pair.devices
    on_mps = [side for side in SIDES if devices[side].startswith("mps")]
    if not on_mps:
        return None
    where = " and ".join(f"run {side}" for side in on_mps)
    entry = embedding_entry("mps")
    known = f"; known: {entry.line()}" if entry is not None else ""
    return Hint(
        "mps",
        f"MPS: its kernels differ from other devices' and are not promised deterministic{known}",
        f"{where} on mps (devices {devices['a']} vs {devices['b']})",
    )


def _embedding(pair: _Pair) -> Hint | None:
    """An embedding among the tensors that parted first, when they parted before the others:
    fewer than the tensors both sides digested at that step (a pair.json written before that
    count was kept: one tensor alone). Tensors that all part at once (cuda against cpu) say
    nothing of which one led."""
    summary = pair.summary
    tensors = summary.get("first_tensors")
    if not isinstance(tensors, list) or not tensors:
        return None
    among = summary.get("first_tensors_among")
    if not isinstance(among, int) or isinstance(among, bool) or among <= 0:
        among = None  # not counted (an older pair.json)
    if len(tensors) >= (among or 2):
        return None
    embeds = [str(t) for t in tensors if any(n in str(t).lower() for n in EMBEDDING_NAMES)]
    if not embeds:
        return None
    entries: dict[str, None] = {}  # each side's device's entry (a CPU side's: its threads)
    for side in SIDES:
        entry = embedding_entry(pair.devices[side], _threads(pair.envs[side]))
        if entry is not None and entry.device != "mps":  # MPS's: the `mps` hint quotes it
            entries.setdefault(entry.line(), None)
    known = "; known: " + " | ".join(entries) if entries else ""
    step = summary.get("first_tensor_step")
    step = summary.get("first_divergent_step") if step is None else step
    of = f" ({len(tensors)} of {among} tensors)" if among else ""
    return Hint(
        "embedding",
        "the embedding's gradient (index_put with accumulate, not deterministic with more "
        f"than one CPU thread or on MPS) parted first{known}",
        f"first divergent tensor(s) at step {step}: " + ", ".join(map(str, tensors)) + of,
    )


def _world_size(pair: _Pair) -> Hint | None:
    """Sides of different world sizes, or NCCL algorithms (`--nproc 1,2`, `NCCL_ALGO`)."""
    found = [f"{k} {pair.diff[k][0]} vs {pair.diff[k][1]}"
             for k in ("world_size", "NCCL_ALGO") if k in pair.diff]  # fmt: skip
    if not found:
        return None
    return Hint(
        "world size",
        "a different number of ranks (or collective algorithm): each rank sums its shard, "
        "and the all-reduce adds the shards' gradients in another order",
        "; ".join(found),
    )


def _hosts(pair: _Pair) -> Hint | None:
    """Sides on different hosts."""
    if "host" not in pair.diff:
        return None
    a, b = pair.diff["host"]
    return Hint("hosts", "different hosts (hardware, libraries)", f"host {a} vs {b}")


CHECKS: tuple[Callable[[_Pair], Hint | None], ...] = (
    _racy_threads,
    _versions,
    _loss_dtype,
    _mps,
    _world_size,
    _embedding,
    _hosts,
)
"""One check per known cause, in the order their hints are listed."""


def likely_causes(meta: Mapping[str, Any]) -> list[Hint]:
    """Hints for a pair.json document (or `PairSession.meta()`); [] when nothing differed."""
    summary = meta.get("summary")
    summary = summary if isinstance(summary, Mapping) else {}
    if summary.get("first_divergent_step") is None:
        return []
    seeds = meta.get("seeds")
    if isinstance(seeds, list) and len(set(map(str, seeds))) > 1:  # `pair --seeds A,B`:
        return []  # the seeds differ, and that is why the runs do
    envs = _envs(meta)
    diff = meta.get("env_diff")
    diff = diff if isinstance(diff, Mapping) else {}
    devices = {side: _device(meta, envs, side) for side in SIDES}
    pair = _Pair(summary, envs, diff, devices)
    return [hint for check in CHECKS if (hint := check(pair)) is not None]
