"""What each run of a pair reports it applied (seed, threads, deterministic algorithms).

Monitor side: read from the runs' headers for pair.json. A run that does not report it cannot
be known to have applied `--deterministic`, and pair.json says so instead of claiming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuimon.steplog import Header


def reported(header: Header | None) -> dict[str, Any]:
    """What a run's header says it applied: `{"known": True, ...}`, or `known: False` and why.

    The reference workload and `apply_pair_settings` report it; a script that does neither
    cannot be known to have applied `--deterministic` or the seed.
    """
    if header is None:
        return {"known": False, "why": "the run wrote no header"}
    applied = header.env.get("applied")
    if isinstance(applied, Mapping):
        return {"known": True, **{k: v for k, v in applied.items() if k != "asked"}}
    if isinstance(header.env.get("deterministic"), bool):
        return {
            "known": True,
            "seed": header.run.get("seed", header.hyper.get("seed")),
            "threads": header.env.get("threads"),
            "deterministic": header.env["deterministic"],
        }
    return {
        "known": False,
        "why": "the run's header does not report it (tuimon.adopt.apply_pair_settings does)",
    }


def pair_applied(asked: bool, headers: Mapping[str, Header | None]) -> dict[str, Any]:
    """pair.json fields on what each run applied: `applied` per side (as `reported` says),
    `deterministic_asked`, and `deterministic`: True only when both runs report it on, None
    when a run does not say (it cannot be known), else False."""
    applied = {side: reported(header) for side, header in headers.items()}
    values = [a.get("deterministic") if a["known"] else None for a in applied.values()]
    if all(v is True for v in values):
        deterministic: bool | None = True
    elif any(v is False for v in values):
        deterministic = False
    else:
        deterministic = None if asked else False
    return {"deterministic_asked": asked, "deterministic": deterministic, "applied": applied}
