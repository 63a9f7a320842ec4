"""Replicas checked inside a side: each rank's parameter digests against rank 0's, step by step.

Under data parallelism every rank holds the same weights after each step; a rank whose
digests differ from rank 0's has parted (a missed all-reduce, a rank-dependent seed, a
non-deterministic collective). Rank 0's records are the side's own (its step log); rank R's
come from `SIDE.rankR.jsonl` in the pair directory (`tuimon.engine.launch.ranks`), followed as it
grows. The k-th step record of rank R is compared with rank 0's k-th (repeats in order, never
dropped); the first step where one parts is named: "side a: rank 1 parted from rank 0 at
step 5 (W_E)". Only digests are compared (`param_digest`, `param_digests`): losses differ
from rank to rank when each logs its own shard's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuimon.engine.judge.verdict import replica_text
from tuimon.engine.launch.follower import Follower, FollowError
from tuimon.engine.launch.ranks import failed_rank, rank_log
from tuimon.readers import LineParser, Reading, line_parser
from tuimon.steplog import Step

MAX_HELD = 1_000_000
"""Records held for a rank that lags (rank 0's, waiting for the others) at most."""

Mark = tuple[int, str | None, tuple[tuple[str, str], ...]]
"""A step record as the check keeps it: its step, its digest, its per-tensor digests."""


def _mark(step: Step) -> Mark:
    return step.step, step.digest, tuple(sorted(step.digests.items()))


@dataclass
class Parting:
    """The first step at which a rank's replica differs from rank 0's."""

    side: str
    rank: int
    step: int
    tensors: list[str] = field(default_factory=list)
    """The tensors whose digests differ (empty when only the whole digest was logged)."""

    def text(self) -> str:
        """`side a: rank 1 parted from rank 0 at step 5 (W_E)`."""
        return replica_text(self.side, self.rank, self.step, self.tensors)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "step": self.step, "tensors": self.tensors}


def _differs(a: Mark, b: Mark) -> list[str] | None:
    """The tensors whose digests differ ([] when only the whole digest does); None: equal."""
    if a[1] == b[1] and a[2] == b[2]:
        return None
    mine, theirs = dict(a[2]), dict(b[2])
    return [k for k in dict.fromkeys([*mine, *theirs]) if mine.get(k) != theirs.get(k)]


class SideReplicas:
    """One side's ranks compared with rank 0, record by record."""

    def __init__(self, side: str, nproc: int) -> None:
        self.side = side
        self.nproc = nproc
        self.leader: deque[Mark] = deque()
        self.base = 0
        """The position of `leader[0]` among rank 0's step records."""
        self.pending: dict[int, deque[Mark]] = {r: deque() for r in range(1, nproc)}
        self.done: dict[int, int] = dict.fromkeys(range(1, nproc), 0)
        """Records of each rank compared so far."""
        self.last_step: dict[int, int | None] = dict.fromkeys(range(nproc))
        self.parted: dict[int, Parting] = {}
        self.compared = 0
        """Record pairs whose digests were compared."""
        self.without_digest = 0
        """Record pairs where rank 0 or the other rank logged no digest."""

    def rank0(self, steps: Iterable[Step]) -> list[Parting]:
        """Rank 0's new step records; the partings they reveal."""
        for step in steps:
            self.leader.append(_mark(step))
            self.last_step[0] = step.step
        return self._compare()

    def rank(self, rank: int, steps: Iterable[Step]) -> list[Parting]:
        """Rank `rank`'s new step records; the partings they reveal."""
        for step in steps:
            self.pending[rank].append(_mark(step))
            self.last_step[rank] = step.step
        return self._compare()

    def _compare(self) -> list[Parting]:
        found = []
        for rank, queue in self.pending.items():
            while queue and self.done[rank] - self.base < len(self.leader):
                mine = self.leader[self.done[rank] - self.base]
                theirs = queue.popleft()
                self.done[rank] += 1
                if (mine[1] is None and not mine[2]) or (theirs[1] is None and not theirs[2]):
                    self.without_digest += 1
                    continue
                self.compared += 1
                tensors = _differs(mine, theirs)
                if tensors is not None and rank not in self.parted:
                    self.parted[rank] = Parting(self.side, rank, mine[0], tensors)
                    found.append(self.parted[rank])
        keep = min(self.done.values(), default=self.base + len(self.leader))
        if len(self.leader) > MAX_HELD:  # a rank that never logs: stop holding for it
            keep = max(keep, self.base + len(self.leader) - MAX_HELD)
        while self.base < keep and self.leader:
            self.leader.popleft()
            self.base += 1
        return found

    @property
    def first(self) -> Parting | None:
        """The earliest parting (by step, then rank)."""
        return min(self.parted.values(), key=lambda p: (p.step, p.rank), default=None)

    def lag(self) -> str:
        """Where each rank's log stands: `rank 0 at step 5, rank 1 at step 4`."""
        return ", ".join(
            f"rank {r} at step {s}" if s is not None else f"rank {r} no step yet"
            for r, s in self.last_step.items()
        )

    def to_dict(self, note: str | None = None) -> dict[str, Any]:
        first = self.first
        out: dict[str, Any] = {
            "ranks": self.nproc,
            "compared": min(self.done.values()) if self.compared else 0,
            "steps": {str(r): self.done[r] for r in self.done},
            "parted": first.to_dict() if first else None,
            "ranks_parted": {str(r): p.to_dict() for r, p in sorted(self.parted.items())},
        }
        if self.without_digest:
            out["without_digest"] = self.without_digest
        if note:
            out["note"] = note
        return out


class RankFile:
    """One rank's growing stdout file (`Follower`: any file read as lines), as records."""

    def __init__(self, path: Path, reading: Reading | None, side: str) -> None:
        self.file = Follower(path, sniff=False)
        self.parser: LineParser = line_parser(reading, side)
        self.error: str | None = None

    def read(self, *, final: bool = False) -> list[Step]:
        """The step records of the lines written since the last read (at the end, the last
        line without its newline too)."""
        if self.error is not None:
            return []
        try:
            lines = self.file.read()
            while final and not self.file.drained:
                lines += self.file.read()
        except (FollowError, OSError) as exc:
            self.error = str(exc)
            return []
        if final:
            lines += self.file.close()
            if not (self.file.appeared or self.file.path.exists()):
                self.error = f"{self.file.name}: no such file"
        records = self.parser.feed(lines) + (self.parser.close() if final else [])
        return [r for r in records if isinstance(r, Step)]


class ReplicaWatch:
    """Every side of `--nproc` > 1: its ranks' files followed and checked against rank 0."""

    def __init__(
        self,
        pair_dir: Path | None,
        nproc: Sequence[int | None],
        reading: Reading | None = None,
        sides: Sequence[str] = ("a", "b"),
    ) -> None:
        self.pair_dir = pair_dir
        self.sides = {
            s: SideReplicas(s, n) for s, n in zip(sides, nproc, strict=False) if n and n > 1
        }
        self.files: dict[tuple[str, int], RankFile] = {}
        if pair_dir is not None:
            for side, check in self.sides.items():
                for rank in range(1, check.nproc):
                    self.files[side, rank] = RankFile(rank_log(pair_dir, side, rank), reading, side)
        self.failed: dict[str, str] = {}
        """What torchrun said of a side's failed rank (`rank 1 exited with code 3`)."""
        self.told: set[tuple[str, int]] = set()

    def __bool__(self) -> bool:
        return bool(self.sides)

    def feed(self, side: str, steps: Sequence[Step]) -> list[str]:
        """Rank 0's new step records of `side`; what is newly found, as lines."""
        check = self.sides.get(side)
        return self._tell(check.rank0(steps)) if check is not None and steps else []

    def poll(self, *, final: bool = False) -> list[str]:
        """Read what the other ranks wrote since the last poll; what is newly found."""
        found: list[Parting] = []
        for (side, rank), follower in self.files.items():
            steps = follower.read(final=final)
            if steps:
                found += self.sides[side].rank(rank, steps)
        return self._tell(found)

    def _tell(self, found: list[Parting]) -> list[str]:
        lines = []
        for parting in found:
            if (parting.side, parting.rank) not in self.told:
                self.told.add((parting.side, parting.rank))
                lines.append(parting.text())
        return lines

    def side_failed(self, side: str, stderr: str) -> str | None:
        """Note torchrun's report of the rank that failed in `side`'s stderr; its line."""
        if side not in self.sides and not stderr:
            return None
        found = failed_rank(stderr)
        if found:
            self.failed[side] = found
        return found

    def lag(self, side: str) -> str | None:
        """Where each rank of `side` stands (for a stall message), when it has ranks."""
        check = self.sides.get(side)
        return check.lag() if check is not None else None

    def note(self, side: str) -> str | None:
        """Why `side`'s check is partial: no pair directory, unreadable files, no digests."""
        check = self.sides[side]
        if self.pair_dir is None:
            return "not checked: the pair is not saved (--no-save), nor the other ranks' logs"
        errors = [f.error for (s, _), f in self.files.items() if s == side and f.error]
        if errors:
            return errors[0]
        if not check.compared and check.without_digest:
            return "not checked: the ranks log no parameter digest (param_digest)"
        if not check.compared:
            return "not checked: no step of the other ranks was read"
        return None

    def to_dict(self) -> dict[str, Any]:
        """pair.json `replicas`: per side, the ranks, records compared and the first parting."""
        out = {}
        for side, check in self.sides.items():
            out[side] = check.to_dict(self.note(side))
            if side in self.failed:
                out[side]["failed"] = self.failed[side]
        return out


def replica_lines(replicas: Any) -> list[str]:
    """The lines a summary shows of pair.json's `replicas` (values of the wrong type skipped):
    `side a: rank 1 parted from rank 0 at step 5 (W_E)`, or `side a: 2 ranks, replicas equal
    at 20 steps`."""
    if not isinstance(replicas, dict):
        return []
    lines = []
    for side, info in sorted(replicas.items()):
        if not isinstance(info, dict):
            continue
        parted = info.get("parted")
        if isinstance(parted, dict) and isinstance(parted.get("step"), int):
            tensors = parted.get("tensors")
            names = [t for t in tensors if isinstance(t, str)] if isinstance(tensors, list) else []
            rank = parted.get("rank")
            lines.append(Parting(str(side), rank if isinstance(rank, int) else -1,
                                 parted["step"], names).text())  # fmt: skip
        elif isinstance(info.get("note"), str):
            lines.append(f"side {side}: replicas {info['note']}")
        else:
            lines.append(
                f"side {side}: {info.get('ranks')} ranks, replicas equal to rank 0 "
                f"({info.get('compared')} steps compared)"
            )
        if isinstance(info.get("failed"), str):
            lines.append(f"side {side}: {info['failed']}")
    return lines


def saved_watch(pair_dir: Path | None, nproc: Any, reading: Reading | None) -> ReplicaWatch | None:
    """The check of a saved pair's ranks (a replay), from pair.json's `nproc` (a value of
    the wrong type: none); None when no side has more than one rank."""
    if pair_dir is None or not isinstance(nproc, list) or len(nproc) != 2:
        return None
    counts = [n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1024 else None
              for n in nproc]  # fmt: skip
    return ReplicaWatch(pair_dir, counts, reading) or None
