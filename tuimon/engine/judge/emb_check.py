"""`tuimon emb-check SAVED RETRAIN`: does a retrain reproduce a saved W_E, seed for seed?

Two .npy files, or two folders whose .npy files are matched by the seed in their names (`s0`,
`seed0`, `seed_0`, `seed-0`). Per seed: the shapes, bitwise equal or not, max abs and max
relative difference (`tuimon.engine.judge.ulps.diff_arrays`), and the key frequencies of both
(`tuimon.freqs`). Verdicts and exit codes as for pairs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuimon.engine.judge.ulps import diff_arrays
from tuimon.engine.judge.verdict import DIVERGED, IDENTICAL, INCOMPLETE, verdict
from tuimon.errors import EmbCheckError, StoreError
from tuimon.freqs import TOP, FreqError, agreement, as_embedding, key_frequencies
from tuimon.readers.capped import load_npy
from tuimon.sanitize import clean, json_text
from tuimon.store import open_regular

EXIT_CODES = {IDENTICAL: 0, "CLOSE": 0, DIVERGED: 1, INCOMPLETE: 3}
_SEED = re.compile(r"(?:^|[^a-z0-9])(?:s|seed[-_]?)(\d+)(?=$|[^0-9])", re.IGNORECASE)


@dataclass
class Options:
    """How to read and judge the arrays."""

    tolerance: float = 0.0
    top: int = TOP
    p: int | None = None
    layout: str = "auto"


@dataclass
class SeedResult:
    """One matched pair of files (or the reason it could not be compared)."""

    seed: str
    saved: Path | None
    retrain: Path | None
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """IDENTICAL / CLOSE / DIVERGED, or INCOMPLETE when not compared."""
        return INCOMPLETE if self.error else str(self.data["verdict"])

    def to_dict(self) -> dict[str, Any]:
        """For --json."""
        return {
            "seed": self.seed,
            "saved": None if self.saved is None else str(self.saved),
            "retrain": None if self.retrain is None else str(self.retrain),
            "verdict": self.verdict,
            "error": self.error,
            **self.data,
        }


def load(path: Path) -> np.ndarray:
    """A numeric 2-d array from a .npy file; EmbCheckError (one line) when it is not one."""
    try:
        with open_regular(path) as fh:  # a FIFO, a device or a socket is refused, never read
            arr = load_npy(fh)  # its header checked against its size before allocating
    except StoreError as exc:
        raise EmbCheckError(str(exc)) from None
    except (OSError, ValueError, EOFError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "allow_pickle" in text:
            text = "an object array, not numbers"
        raise EmbCheckError(f"{path}: cannot read as .npy: {text}") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiu":
        raise EmbCheckError(f"{path}: not a numeric array (dtype {arr.dtype})")
    if arr.ndim != 2:
        raise EmbCheckError(f"{path}: W_E must be 2-dimensional, got shape {tuple(arr.shape)}")
    return arr


def _comparable(a: np.ndarray, b: np.ndarray, o: Options) -> tuple[np.ndarray, np.ndarray, str]:
    """The two arrays as compared: as saved when the shapes match, else both as (d_model, p)."""
    if a.shape == b.shape:
        return a, b, ""
    try:
        ea = as_embedding(a, p=o.p, layout=o.layout)
        eb = as_embedding(b, p=o.p, layout=o.layout)
    except FreqError as exc:
        raise EmbCheckError(f"shapes {a.shape} and {b.shape} differ, and {exc}") from None
    if ea.matrix.shape != eb.matrix.shape:
        raise EmbCheckError(
            f"shapes {a.shape} and {b.shape} differ: (d_model, p) {ea.matrix.shape} against "
            f"{eb.matrix.shape}, not the same model"
        )
    note = f"shapes differ; compared as (d_model, p) {ea.matrix.shape}: saved {ea.describe()}, "
    note += f"retrain {eb.describe()}"
    return ea.matrix, eb.matrix, note


def _freqs(arr: np.ndarray, o: Options) -> dict[str, Any]:
    try:
        return {"ok": key_frequencies(arr, o.top, p=o.p, layout=o.layout)}
    except FreqError as exc:
        return {"error": str(exc)}


def compare_arrays(a: np.ndarray, b: np.ndarray, o: Options) -> dict[str, Any]:
    """Saved `a` against retrain `b`: shapes, bitwise, differences, key frequencies, verdict."""
    xa, xb, note = _comparable(a, b, o)
    equal, absd, rel, _ = diff_arrays(xa.ravel(), xb.ravel())
    n, n_equal = int(equal.size), int(equal.sum())
    bitwise = not note and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    max_rel = float(rel.max()) if rel.size else 0.0
    judged = verdict(n, n_equal, max_rel, o.tolerance, complete=n > 0)
    if judged == IDENTICAL and not bitwise:  # equal values, other dtype or layout
        judged = "CLOSE"
    out: dict[str, Any] = {
        "verdict": judged,
        "shape": {"saved": list(a.shape), "retrain": list(b.shape)},
        "dtype": {"saved": str(a.dtype), "retrain": str(b.dtype)},
        "note": note or None,
        "bitwise_equal": bitwise,
        "elements": n,
        "elements_differ": n - n_equal,
        "max_abs": float(absd.max()) if absd.size else 0.0,
        "max_rel": max_rel,
    }
    fa, fb = _freqs(a, o), _freqs(b, o)
    if "ok" in fa and "ok" in fb:
        out["key_freqs"] = {"saved": fa["ok"].to_dict(), "retrain": fb["ok"].to_dict(),
                            **agreement(fa["ok"], fb["ok"])}  # fmt: skip
    else:
        out["key_freqs"] = {"error": fa.get("error") or fb.get("error")}
    return out


def seed_of(name: str) -> str | None:
    """The seed a file name carries (`emb-add-s0-mps.npy` -> "0"), or None."""
    found = _SEED.findall(Path(name).stem)
    return str(int(found[-1])) if found else None


def _index(folder: Path) -> tuple[dict[str, list[Path]], list[Path]]:
    by_seed: dict[str, list[Path]] = {}
    no_seed = []
    for path in sorted(folder.glob("*.npy")):
        seed = seed_of(path.name)
        if seed is None:
            no_seed.append(path)
        else:
            by_seed.setdefault(seed, []).append(path)
    return by_seed, no_seed


def _names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths)


def match_folders(saved: Path, retrain: Path) -> tuple[list[SeedResult], list[str]]:
    """Pairs of files by seed; what could not be matched comes back as results with an error,
    files without a seed in the name as notes."""
    sa, na = _index(saved)
    sb, nb = _index(retrain)
    if not sa and not sb:
        raise EmbCheckError(f"no .npy file with a seed in its name in {saved} or {retrain}")
    results = []
    for seed in sorted(sa.keys() | sb.keys(), key=int):
        fa, fb = sa.get(seed, []), sb.get(seed, [])
        if len(fa) > 1 or len(fb) > 1:
            many = fa if len(fa) > 1 else fb
            error = f"{len(many)} files for this seed in one folder ({_names(many)}): which one?"
        elif not fb:
            error = f"missing in RETRAIN (saved {fa[0].name})"
        elif not fa:
            error = f"missing in SAVED (retrain {fb[0].name})"
        else:
            error = None
        results.append(SeedResult(seed, fa[0] if fa else None, fb[0] if fb else None, error))
    notes = [f"no seed in the name, not matched: {folder} {_names(files)}"
             for folder, files in ((saved, na), (retrain, nb)) if files]  # fmt: skip
    return results, notes


def run_check(saved: Path, retrain: Path, o: Options) -> tuple[list[SeedResult], list[str]]:
    """Every seed checked; EmbCheckError when the inputs cannot be checked at all."""
    for path in (saved, retrain):
        if not path.exists():
            raise EmbCheckError(f"{path}: no such file or folder")
    if saved.is_dir() != retrain.is_dir():
        raise EmbCheckError("give two .npy files or two folders, not one of each")
    if not saved.is_dir():
        seed = seed_of(saved.name) or seed_of(retrain.name) or "-"
        data = compare_arrays(load(saved), load(retrain), o)
        return [SeedResult(seed, saved, retrain, data=data)], []
    results, notes = match_folders(saved, retrain)
    for r in results:
        if r.error is None:
            assert r.saved is not None and r.retrain is not None
            try:
                r.data = compare_arrays(load(r.saved), load(r.retrain), o)
            except EmbCheckError as exc:
                r.error = str(exc)
    return results, notes


def overall(results: list[SeedResult]) -> tuple[str, str]:
    """The verdict over all seeds and why: DIVERGED if any diverged; INCOMPLETE if any seed was
    not compared; CLOSE if any was close; else IDENTICAL."""
    verdicts = [r.verdict for r in results]
    compared = sum(v != INCOMPLETE for v in verdicts)
    missing = len(verdicts) - compared
    why = f"{compared} of {len(verdicts)} seeds compared"
    if DIVERGED in verdicts:
        return DIVERGED, f"{why}, {verdicts.count(DIVERGED)} diverged"
    if missing or not compared:
        return INCOMPLETE, f"{why}, {missing} not compared"
    return ("CLOSE" if "CLOSE" in verdicts else IDENTICAL), why


def _num(x: float) -> str:
    return f"{x:.3g}"


def describe(r: SeedResult) -> list[str]:
    """Lines for one seed."""
    head = f"{'W_E' if r.seed == '-' else f'seed {r.seed}'}: {r.verdict}"
    if r.error:
        return [f"{head}: {clean(r.error)}"]
    d = r.data
    lines = [f"{head}  {clean(str(r.saved))} vs {clean(str(r.retrain))}"]
    shape = d["shape"]
    same = shape["saved"] == shape["retrain"]
    both = f"{tuple(shape['saved'])} vs {tuple(shape['retrain'])}"
    lines.append("  shape " + (str(tuple(shape["saved"])) if same else both))
    if d["note"]:
        lines.append(f"  {d['note']}")
    if d["bitwise_equal"]:
        lines.append("  bitwise equal")
    else:
        lines.append(f"  {d['elements_differ']} of {d['elements']} elements differ, max abs "
                     f"{_num(d['max_abs'])}, max rel {_num(d['max_rel'])}")  # fmt: skip
    kf = d["key_freqs"]
    if "error" in kf:
        lines.append(f"  key frequencies: {clean(kf['error'])}")
    else:
        for side in ("saved", "retrain"):
            s = kf[side]
            lines.append(f"  key frequencies {side:<7} {' '.join(map(str, s['freqs']))} "
                         f"({s['top_share']:.0%} of the norm)")  # fmt: skip
        if kf["agree"]:
            lines.append("  key frequency sets agree" + ("" if kf["same_order"] else
                                                         " (rank order differs)"))  # fmt: skip
        else:
            lines.append(f"  key frequency sets differ: only saved {kf['only_a']}, only retrain "
                         f"{kf['only_b']}")  # fmt: skip
    return lines


def main_check(saved: str, retrain: str, o: Options, as_json: bool) -> int:
    """The command: print the report (text or JSON), return the exit code."""
    results, notes = run_check(Path(saved), Path(retrain), o)
    judged, why = overall(results)
    if as_json:
        doc = {"verdict": judged, "reason": why, "tolerance": o.tolerance, "top": o.top,
               "seeds": [r.to_dict() for r in results], "notes": notes}  # fmt: skip
        sys.stdout.write(json_text(doc, indent=True) + "\n")
    else:
        for r in results:
            print("\n".join(describe(r)))
        for note in notes:
            print(clean(note))
        print(f"emb-check: {judged} ({why})")
    return EXIT_CODES[judged]
