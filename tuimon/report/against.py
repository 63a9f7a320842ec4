"""The words of a pair against a saved run (`pair --against`), for the headless view and the TUI.

They read the pair document's `against` (pair.json, or a running session's): where the saved
side came from, the device it ran on, and the W_E check. Every value from a file is cleaned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuimon.engine.judge.verdict import Summary
from tuimon.report.wording import headline
from tuimon.sanitize import clean


def _against(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    against = doc.get("against") if isinstance(doc, Mapping) else None
    return against if isinstance(against, Mapping) else None


def device_note(doc: Mapping[str, Any] | None) -> str:
    """` — the saved run ran on mps, this run on cpu` when the devices differ, else nothing."""
    against = _against(doc)
    devices = doc.get("devices") if doc else None
    if against is None or not isinstance(devices, list) or not devices:
        return ""
    saved, live = against.get("device"), devices[0]
    if not isinstance(saved, str) or not isinstance(live, str) or saved == live:
        return ""
    return f" — the saved run ran on {clean(saved, 40)}, this run on {clean(live, 40)}"


def pair_headline(summary: Summary, doc: Mapping[str, Any] | None) -> str:
    """The headline (`wording.headline`), with the saved run's other device named."""
    return headline(summary) + device_note(doc)


def against_lines(doc: Mapping[str, Any] | None) -> list[str]:
    """Where the saved side came from, and the W_E check's result, one line each."""
    against = _against(doc)
    if against is None:
        return []
    where = clean(str(against.get("path")), 300)
    side, pair = against.get("side"), against.get("pair")
    if isinstance(side, str) and pair:
        where = f"side {clean(side, 4)} of {clean(str(pair), 300)}"
    sha = against.get("sha256")
    lines = [
        f"against the saved run: {where}"
        + (f" (sha256 {clean(sha, 64)[:16]}…)" if isinstance(sha, str) else "")
        + (f", recorded on {clean(d, 40)}" if isinstance(d := against.get("device"), str) else "")
    ]
    emb = against.get("emb_check")
    if isinstance(emb, Mapping):
        lines.append(_emb_line(emb))
    return lines


def _emb_line(emb: Mapping[str, Any]) -> str:
    """`W_E against the saved one (emb-check): IDENTICAL, bitwise equal`, or how far."""
    head = "W_E against the saved one (emb-check)"
    verdict = emb.get("verdict")
    if emb.get("error"):
        said = "not checked" if verdict is None else clean(str(verdict), 20)
        return f"{head}: {said}: {clean(emb['error'], 300)}"
    try:
        if emb["bitwise_equal"]:
            how = "bitwise equal"
        else:
            how = (
                f"{emb['elements_differ']} of {emb['elements']} elements differ, "
                f"max abs {emb['max_abs']:.3g}, max rel {emb['max_rel']:.3g}"
            )
        kf = emb.get("key_freqs") or {}
        if "agree" in kf:
            how += "; key frequency sets " + ("agree" if kf["agree"] else "differ")
    except (KeyError, TypeError, ValueError):
        return f"{head}: damaged in pair.json"
    return f"{head}: {clean(str(verdict), 20)}, {how}"
