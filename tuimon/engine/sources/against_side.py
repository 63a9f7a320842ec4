"""The saved side of `pair --against`: a log file, or one side of a saved pair, read once.

It is side b of the new pair. It keeps its provenance (path, sha256, the environment it
recorded, the pair it came from) and says how its run ended: a run cut short is never taken for
a finished one.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuimon.engine.judge.verdict import RunEnd, how_it_ended
from tuimon.engine.sources.saved_pair import read_records, saved_reading
from tuimon.errors import ReplayError, StoreError, UsageError
from tuimon.readers import Reading
from tuimon.readers.formats import log_folder
from tuimon.steplog import End, Header, Record, Step
from tuimon.store import SIDES, PairDoc, is_pair_dir, open_regular, pair_file

SAVED_SIDE = "b"
"""The saved log is side b of the pair; the live run is side a."""
WORKLOAD_KEYS = ("task", "p", "seed", "steps", "frac_train", "eval_every", "gather")
"""The reference workload's settings a retrain takes from the saved run's header."""
ENV_KEYS = ("threads", "deterministic", "loss_dtype")
"""The environment settings (header `env`) a retrain takes from the saved run."""


@dataclass
class SavedSide:
    """One saved run, read as side b: its lines and records, and where they came from."""

    log: Path
    side: str | None
    """a or b, when it is a side of a saved pair."""
    pair_dir: Path | None
    doc: PairDoc
    reading: Reading
    lines: list[bytes]
    records: list[Record]
    sha256: str
    emb: Path | None
    """Its W_E (.npy): `--emb`, the pair's emb-SIDE.npy, or what its end record names."""

    @property
    def header(self) -> Header | None:
        """The log's header record, if it has one."""
        return next((r for r in self.records[:3] if isinstance(r, Header)), None)

    @property
    def end(self) -> End | None:
        """The log's end record, if it has one."""
        return next((r for r in reversed(self.records[-3:]) if isinstance(r, End)), None)

    @property
    def last_step(self) -> int | None:
        """The last step the saved run logged."""
        return next((r.step for r in reversed(self.records) if isinstance(r, Step)), None)

    @property
    def env(self) -> dict[str, Any]:
        """The environment it recorded: its header's, else its pair.json run's."""
        return self._recorded("env")

    @property
    def hyper(self) -> dict[str, Any]:
        """Its settings: its header's, else its pair.json run's."""
        return self._recorded("hyper")

    def _recorded(self, block: str) -> dict[str, Any]:
        """A block (`env`, `hyper`) of its header, else of its pair.json run."""
        if self.header is not None and (found := getattr(self.header, block)):
            return dict(found)
        return dict(getattr(self.doc.run(self.side), block) or {}) if self.side else {}

    @property
    def device(self) -> str | None:
        """The device it ran on, when it says."""
        run = self.doc.run(self.side) if self.side else None
        device = self.env.get("device") or (run.device if run else None)
        return str(device) if device else None

    def ending(self) -> tuple[int | None, str, str | None]:
        """How the saved run ended (`how_it_ended`, the one rule): exit code, status (finished /
        failed / interrupted; a run cut short is not finished) and, when it did not finish,
        why (words that follow "the saved run")."""
        run = self.doc.run(self.side) if self.side else None
        planned = self.hyper.get("steps")
        end = self.end
        ending = how_it_ended(
            [
                RunEnd(
                    SAVED_SIDE,
                    run.status if run is not None else None,
                    run.exit_code if run is not None else None,
                    None if end is None else end.status,
                    cut_short=self.header is not None and end is None,
                    where=True,
                    last_step=self.last_step,
                    planned=planned if type(planned) is int else None,
                )
            ],
            no_doc=self.pair_dir is not None and not PairDoc.written(self.pair_dir),
        )
        code, status = ending.exits[SAVED_SIDE]
        why = ending.why.get(SAVED_SIDE)
        if why is not None and status == "finished":  # cut short: a run never finished
            code, status = None, "interrupted"
        return code, status, why

    def provenance(self) -> dict[str, Any]:
        """pair.json `against`: where the saved side came from and what it recorded."""
        _, status, why = self.ending()
        return {
            "path": str(self.log),
            "pair": None if self.pair_dir is None else str(self.pair_dir),
            "side": self.side,
            "sha256": self.sha256,
            "device": self.device,
            "env": self.env or None,
            "status": status,
            "cut_short": why,
            "last_step": self.last_step,
            "emb": None if self.emb is None else str(self.emb),
        }

    def settings(self) -> dict[str, Any]:
        """The reference workload's settings it ran with (`WORKLOAD_KEYS`, `ENV_KEYS`)."""
        hyper, env = self.hyper, self.env
        out = {k: hyper[k] for k in WORKLOAD_KEYS if hyper.get(k) is not None}
        out.update({k: env[k] for k in ENV_KEYS if env.get(k) is not None})
        return out


def _where(text: str, side: str | None) -> tuple[Path, Path | None, str | None]:
    """The log file, its pair directory and side: `FILE`, `PAIR/a`, `PAIR --side a`."""
    path = Path(text)
    if not path.exists():
        if path.name in SIDES and is_pair_dir(path.parent):
            if side is not None and side != path.name:
                raise UsageError(f"--against {text} is side {path.name}: drop --side {side}")
            return path.parent, path.parent, path.name
        raise ReplayError(f"{text}: no such file or directory")
    if path.is_dir() and not is_pair_dir(path) and log_folder(path):  # a W&B run folder ...
        if side is not None:
            raise UsageError("--side chooses a side of a saved pair directory, not of a run folder")
        return path, None, None
    if path.is_dir():
        if not is_pair_dir(path):
            raise ReplayError(
                f"{text}: not a saved pair, a log file or a run folder a reader takes "
                "(W&B, TensorBoard, MLflow, numbered JSON files)"
            )
        if side is None:
            raise UsageError(f"{text} is a saved pair: give --side a or --side b (or {text}/a)")
        return path, path, side
    if side is not None:
        raise UsageError("--side chooses a side of a saved pair directory, not of a log file")
    parent = path.parent
    if is_pair_dir(parent):  # a pair's own a.jsonl: keep the pair's record of it
        doc = _doc(parent)
        for s in SIDES:
            if doc.file(s) == path.name:
                return path, parent, s
    return path, None, None


def _doc(pair_dir: Path) -> PairDoc:
    try:
        return PairDoc.read(pair_dir)
    except StoreError:
        return PairDoc()


def _sha256(path: Path) -> str:
    """The file's sha256; a run folder's: of its regular files' names and bytes, in order."""
    digest = hashlib.sha256()
    try:
        if path.is_dir():
            for file in sorted(f for f in path.rglob("*") if f.is_file() and not f.is_symlink()):
                digest.update(str(file.relative_to(path)).encode() + b"\0")
                with open_regular(file) as fh:
                    while chunk := fh.read(1 << 20):
                        digest.update(chunk)
            return digest.hexdigest()
        with open_regular(path) as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except (OSError, StoreError) as exc:
        raise ReplayError(f"{path}: cannot read: {exc}") from None
    return digest.hexdigest()


def _emb(log: Path, pair_dir: Path | None, side: str | None, end: End | None) -> Path | None:
    """The saved run's W_E, inside the saved run (a closed box: the pair's folder, or the
    folder of a log given by itself): its pair's emb-SIDE.npy, else the file of the name its
    end record gives, in that folder (an absolute or relative path there is taken by its name
    alone). A file there that is a link leading out of the folder is refused (ReplayError)."""
    box = pair_dir if pair_dir is not None else log.parent
    names = [f"emb-{side}.npy"] if pair_dir is not None and side is not None else []
    named = end.artifacts.get("emb") if end is not None else None
    if isinstance(named, str) and named.endswith(".npy"):
        names.append(Path(named).name)
    for name in names:
        path = box / name
        if not os.path.lexists(path):
            continue
        resolved = path.resolve()
        if not resolved.is_relative_to(box.resolve()):
            raise ReplayError(
                f"{path}: leads outside the saved run ({resolved}): not read (a saved run is a "
                "closed box; --emb NPY names a W_E to check against)"
            )
        if resolved.is_file():
            return path
    return None


def resolve_saved(
    text: str, side: str | None, reading: Reading, emb: str | None = None
) -> SavedSide:
    """The saved side named by `--against TEXT [--side a|b] [--emb NPY]`, read once;
    UsageError or ReplayError (one line) when it cannot be."""
    where, pair_dir, side = _where(text, side)
    doc = _doc(pair_dir) if pair_dir is not None else PairDoc()
    if pair_dir is not None and side is not None:
        try:  # a FIFO, a device or a link leading outside the pair is refused, never opened
            log = where if where.is_file() else pair_file(pair_dir, doc.file(side))
        except StoreError as exc:
            raise ReplayError(str(exc)) from None
        if not reading.asked:
            reading = saved_reading(pair_dir, doc)
    else:
        log = where
    if emb is not None and not Path(emb).is_file():
        raise UsageError(f"--emb {emb}: no such .npy file")
    lines, records = read_records(log, reading, SAVED_SIDE)
    end = next((r for r in reversed(records[-3:]) if isinstance(r, End)), None)
    return SavedSide(
        log=log,
        side=side,
        pair_dir=pair_dir,
        doc=doc,
        reading=reading,
        lines=lines,
        records=records,
        sha256=_sha256(log),
        emb=Path(emb) if emb is not None else _emb(log, pair_dir, side, end),
    )
