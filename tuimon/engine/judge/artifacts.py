"""Comparing what two runs saved at the end (the reference workload's W_E as .npy)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tuimon.engine.judge.ulps import diff_arrays
from tuimon.freqs import FreqError, agreement, key_frequencies
from tuimon.readers.capped import read_npy
from tuimon.sanitize import clean


def compare_npy(a: Path, b: Path) -> dict[str, Any]:
    """Two saved arrays: bitwise equal or not, and how far apart (max abs / rel difference)."""
    try:
        xa, xb = read_npy(a), read_npy(b)  # checked against their sizes before allocating
    except (OSError, ValueError) as exc:
        return {"error": f"cannot read: {exc}"}
    if xa.shape != xb.shape or xa.dtype != xb.dtype:
        return {"equal": False, "shape": [list(xa.shape), list(xb.shape)],
                "dtype": [str(xa.dtype), str(xb.dtype)]}  # fmt: skip
    equal = xa.tobytes() == xb.tobytes()
    _, diff, rel, _ = diff_arrays(xa.ravel(), xb.ravel())  # the same measure as the step logs
    return {
        "equal": bool(equal),
        "shape": list(xa.shape),
        "dtype": str(xa.dtype),
        "max_abs": float(np.nanmax(diff)) if diff.size else 0.0,
        "max_rel": float(np.nanmax(rel)) if rel.size else 0.0,
        "elements_differ": int(np.count_nonzero(xa != xb)),
        **_key_freqs(xa, xb),
    }


def _key_freqs(xa: np.ndarray, xb: np.ndarray) -> dict[str, Any]:
    """Both arrays' key frequencies and whether the sets agree, when they read as a W_E."""
    try:
        fa, fb = key_frequencies(xa), key_frequencies(xb)
    except FreqError:
        return {}
    return {"key_freqs": {"a": fa.to_dict(), "b": fb.to_dict(), **agreement(fa, fb)}}


def compare_artifacts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Artifacts both end records name (e.g. "emb"), compared when both are .npy files."""
    out = {}
    for name in sorted(a.keys() & b.keys()):
        pa, pb = Path(str(a[name])), Path(str(b[name]))
        if pa.suffix == ".npy" and pb.suffix == ".npy" and pa.is_file() and pb.is_file():
            out[name] = compare_npy(pa, pb)
    return out


def describe(name: str, result: Mapping[str, Any]) -> str:
    """One line: `emb at the end: bitwise equal` or how far apart (then the key frequencies)."""
    if "error" in result:
        return f"{name} at the end: {clean(result['error'], 300)}"
    if result.get("equal"):
        line = f"{name} at the end: bitwise equal"
    elif "max_abs" not in result:
        return f"{name} at the end: differ in shape or dtype"
    else:
        line = (
            f"{name} at the end: {result['elements_differ']} elements differ, "
            f"max abs {result['max_abs']:.3g}, max rel {result['max_rel']:.3g}"
        )
    try:
        return line + describe_freqs(result.get("key_freqs"))
    except DAMAGED:
        return line + "; key frequencies: damaged in pair.json"


DAMAGED = (KeyError, TypeError, ValueError, AttributeError, IndexError)
"""What a damaged (hand-edited, planted) artifact entry of pair.json raises when read."""


def lines(artifacts: Mapping[str, Any] | None) -> list[str]:
    """One `describe` line per compared artifact (pair.json's `artifacts`), names cleaned; a
    damaged entry is said to be damaged (it never changes a verdict)."""
    if not isinstance(artifacts, Mapping):
        return ["artifacts: damaged in pair.json (not an object)"] if artifacts else []
    out = []
    for name, result in artifacts.items():
        shown = clean(name, 80)
        if not isinstance(result, Mapping):
            out.append(f"{shown} at the end: damaged in pair.json")
            continue
        try:
            out.append(describe(shown, result))
        except DAMAGED:
            out.append(f"{shown} at the end: damaged in pair.json")
    return out


def describe_freqs(kf: Mapping[str, Any] | None) -> str:
    """`; key frequencies a 14 35 41 42 52 | b 14 35 41 42 52: sets agree`, or nothing."""
    if not kf:
        return ""
    a, b = (" ".join(map(str, kf[side]["freqs"])) for side in ("a", "b"))
    if kf["agree"]:
        how = "sets agree" if kf["same_order"] else "sets agree, rank order differs"
    else:
        how = f"sets differ (only a {kf['only_a']}, only b {kf['only_b']})"
    return f"; key frequencies a {a} | b {b}: {how}"
