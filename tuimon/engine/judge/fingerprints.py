"""Two runs' fingerprints (env, hyper) compared key by key: the one computation of what differs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def env_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Keys whose values differ between two (nested) fingerprints: {key: [a, b]}."""
    fa, fb = flatten(a), flatten(b)
    return {
        k: [fa.get(k), fb.get(k)] for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)
    }


def env_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """Every key of two fingerprints as (key, a, b, differs): differing keys first, each group
    sorted; `differs` is exactly `key in env_diff(a, b)`."""
    fa, fb, diff = flatten(a), flatten(b), env_diff(a, b)
    rows = [(k, fa.get(k), fb.get(k), k in diff) for k in sorted(fa.keys() | fb.keys())]
    return [r for r in rows if r[3]] + [r for r in rows if not r[3]]
