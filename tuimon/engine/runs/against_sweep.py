"""`sweep --against`: every seed of a saved sweep, or every log in a folder, as a saved side.

Each seed's pair is a `pair --against` of that seed's saved run (`SavedSide`). A sweep's seeds
are its jobs' (first repeat); a folder's are read from each log's header (`run.seed`,
`hyper.seed`), else from its name (`s0`, `seed0`, `seed_0`, as `emb-check` reads them). A
`.npy` in the folder with a seed in its name is that seed's W_E.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuimon.engine.judge.emb_check import seed_of
from tuimon.engine.runs.sweep import Sweep, SweepError
from tuimon.engine.sources.against_side import SavedSide, resolve_saved
from tuimon.errors import ReplayError, UsageError
from tuimon.readers import Reading
from tuimon.store import is_pair_dir

if TYPE_CHECKING:
    from tuimon.engine.runs.plan import PairPlan


@dataclass
class SavedSweep:
    """The saved run of each seed."""

    source: str
    """What `--against` named."""
    sides: dict[int, SavedSide]

    def seeds(self, asked: Sequence[int] | None) -> list[int]:
        """The seeds to retrain: those asked (each must be saved), else every saved one."""
        if not asked:
            return sorted(self.sides)
        missing = [s for s in asked if s not in self.sides]
        if missing:
            have = ", ".join(map(str, sorted(self.sides))) or "none"
            raise UsageError(f"--against {self.source} has no saved run of seed {missing[0]} "
                             f"(seeds: {have})")  # fmt: skip
        return list(dict.fromkeys(asked))

    def settings(self) -> dict[str, Any]:
        """The settings the retrains share (the first saved run's, the seed aside)."""
        first = self.sides[min(self.sides)].settings()
        first.pop("seed", None)
        return first

    def plan_for(self, plan: PairPlan) -> PairPlan:
        """A job's plan: its seed's saved run as side b."""
        assert plan.seed is not None
        saved = self.sides[plan.seed]
        return replace(plan, against=saved, devices=(plan.devices[0], saved.device or "saved"))

    def to_dict(self) -> dict[str, Any]:
        """The sweep record's `against`: where each seed's saved run is."""
        return {"source": self.source,
                "seeds": {str(k): str(v.log) for k, v in sorted(self.sides.items())}}  # fmt: skip


def _header_seed(saved: SavedSide) -> int | None:
    header = saved.header
    if header is None:
        return None
    for block in (header.run, header.hyper):
        seed = block.get("seed") if isinstance(block, dict) else None
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed
    return None


def _from_sweep(text: str, side: str, reading: Reading, store: Path) -> dict[int, SavedSide]:
    try:
        sweep = Sweep.load(store, text)
    except SweepError as exc:
        raise ReplayError(str(exc)) from None
    sides: dict[int, SavedSide] = {}
    for job in sweep.jobs:
        if job.seed in sides or not job.pair:
            continue
        pair = sweep.store / job.pair
        if is_pair_dir(pair):
            sides[job.seed] = resolve_saved(str(pair), side, reading)
    return sides


def _from_folder(
    folder: Path, reading: Reading, say: Callable[[str], None]
) -> dict[int, SavedSide]:
    sides: dict[int, SavedSide] = {}
    embs = {seed_of(p.name): p for p in sorted(folder.glob("*.npy"))}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix == ".npy" or not path.is_file():
            continue
        saved = resolve_saved(str(path), None, reading)
        seed = _header_seed(saved)
        if seed is None and (named := seed_of(path.name)) is not None:
            seed = int(named)
        if seed is None:
            say(f"skipped {path.name}: no seed in its header or its name")
            continue
        if seed in sides:
            raise UsageError(f"--against {folder}: two logs of seed {seed} "
                             f"({sides[seed].log.name}, {path.name}): which one?")  # fmt: skip
        if saved.emb is None and (emb := embs.get(str(seed))) is not None:
            saved.emb = emb
        sides[seed] = saved
    return sides


def resolve_saved_sweep(
    text: str, side: str | None, reading: Reading, store: Path, say: Callable[[str], None]
) -> SavedSweep:
    """`sweep --against SWEEP_OR_DIR`: a saved sweep (its id or record; `--side`, default a,
    of each pair) or a folder of logs; UsageError / ReplayError (one line) when it is neither
    or holds no saved run."""
    path = Path(text)
    if path.is_dir() and not is_pair_dir(path) and path.name != "sweeps":
        if side is not None:
            raise UsageError("--side chooses a side of a saved sweep's pairs, not of a folder")
        sides = _from_folder(path, reading, say)
    elif path.is_dir():
        raise UsageError(f"--against {text}: a sweep takes a saved sweep or a folder of logs")
    else:
        sides = _from_sweep(text, side or "a", reading, store)
    if not sides:
        raise UsageError(f"--against {text}: no saved run with a seed")
    return SavedSweep(text, sides)
