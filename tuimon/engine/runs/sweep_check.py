"""A sweep record read back is data: every value it holds is checked before it is used.

`check_record` says in one line which value of ``sweeps/<id>.json`` has the wrong type (a
planted or damaged record), so `tuimon sweep --resume` exits 2 instead of failing later with an
exception name, and a record can neither name files outside the store nor smuggle values into
a command line that the settings' types do not allow. Nothing here imports textual or torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from tuimon.sanitize import clean

Check = Callable[[Any], bool]
JOB_STATUSES = ("pending", "running", "finished", "failed", "interrupted", "submitted")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,200}$")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(v: Any) -> bool:
    return _int(v) and v >= 1


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _words(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(w, str) and "\0" not in w for w in v)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _name(v: Any) -> bool:
    """One plain file name (a pair directory or a sweep id): no path, no `..`."""
    return isinstance(v, str) and _NAME.match(v) is not None and ".." not in v


def _launch(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(x is None or _words(x) for x in v)


def _workload(v: Any) -> bool:
    scalar = (str, int, float, bool, type(None))
    return isinstance(v, dict) and all(isinstance(x, scalar) for x in v.values())


PLAN: tuple[tuple[str, Check, str], ...] = (
    ("devices", lambda v: _words(v) and len(v) == 2 and all(v), "a list of two device names"),
    ("threads", lambda v: isinstance(v, list) and len(v) == 2 and all(map(_count, v)),
     "a list of two thread counts"),
    ("deterministic", lambda v: isinstance(v, bool), "true or false"),
    ("loss_dtype", _opt(lambda v: isinstance(v, str)), "a dtype name or null"),
    ("template", _opt(lambda v: _words(v) and len(v) > 0), "a list of words or null"),
    ("shell", lambda v: isinstance(v, bool), "true or false"),
    ("log_file", _opt(lambda v: isinstance(v, str) and "\0" not in v), "a path or null"),
    ("steps", _opt(_count), "a step count or null"),
    ("workload", _workload, "an object of plain values"),
    ("tolerance", lambda v: _number(v) and v >= 0, "a number >= 0"),
    ("stall_timeout", _opt(lambda v: _number(v) and v >= 0), "a number >= 0 or null"),
    ("stop_on_fail", lambda v: isinstance(v, bool), "true or false"),
    ("label", _opt(lambda v: isinstance(v, str)), "a word or null"),
    ("launch", _launch, "a list of two launchers (lists of words) or nulls"),
    ("sweep", _opt(lambda v: isinstance(v, str)), "a sweep id or null"),
    ("reading", _opt(lambda v: isinstance(v, dict)), "an object"),
    ("select", _opt(lambda v: isinstance(v, dict)), "an object"),
    ("nproc", lambda v: isinstance(v, list) and len(v) == 2
     and all(x is None or (_count(x) and x <= 1024) for x in v),
     "a list of two rank counts or nulls"),
)  # fmt: skip
"""Each plan value the record must hold (a missing one takes its default), and what it must be."""

JOB: tuple[tuple[str, Check, str], ...] = (
    ("seed", _int, "an integer"),
    ("repeat", _count, "a count from 1"),
    ("status", lambda v: v in JOB_STATUSES, f"one of {', '.join(JOB_STATUSES)}"),
    ("pair", _opt(_name), "a pair directory name or null"),
    ("verdict", _opt(lambda v: isinstance(v, str)), "a verdict or null"),
    ("first_step", _opt(_int), "a step or null"),
    ("first_tensors", lambda v: _words(v), "a list of names"),
    ("max_divergence", _opt(_number), "a number or null"),
    ("steps_compared", _opt(_int), "a count or null"),
    ("key_frequencies", _opt(lambda v: isinstance(v, str)), "text or null"),
    ("hints", lambda v: isinstance(v, list) and all(isinstance(h, dict) for h in v),
     "a list of objects"),
    ("note", _opt(lambda v: isinstance(v, str)), "text or null"),
    ("submitted", lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
     "an object of texts"),
    ("same_log_as", lambda v: isinstance(v, list) and all(map(_int, v)), "a list of seeds"),
)  # fmt: skip


class RecordError(ValueError):
    """One line: which value of the record is wrong, and what it must be."""


def _shown(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return clean(text if len(text) <= 60 else text[:59] + "…", None)


def _check(where: str, doc: Mapping[str, Any], table: tuple[tuple[str, Check, str], ...]) -> None:
    for key, valid, what in table:
        if key in doc and not valid(doc[key]):
            raise RecordError(f"{where}{key!r} must be {what} (got {_shown(doc[key])})")


def check_record(doc: Mapping[str, Any]) -> None:
    """RecordError (one line) unless every value of a sweep record has the right type."""
    if "id" in doc and not _name(doc["id"]):
        raise RecordError(f"'id' must be a plain name (got {_shown(doc['id'])})")
    if "at_once" in doc and not _opt(_count)(doc["at_once"]):
        raise RecordError(f"'at_once' must be a count from 1 (got {_shown(doc['at_once'])})")
    if not _opt(_words)(doc.get("submit")):
        raise RecordError(f"'submit' must be a list of words or null (got {_shown(doc['submit'])})")
    if not isinstance(doc.get("check_seeds", False), bool):
        raise RecordError(f"'check_seeds' must be true or false (got {_shown(doc['check_seeds'])})")
    for key in ("monitor", "created", "stopped"):
        if not _opt(lambda v: isinstance(v, str))(doc.get(key)):
            raise RecordError(f"{key!r} must be text or null (got {_shown(doc.get(key))})")
    plan, jobs = doc.get("plan"), doc.get("jobs")
    if not isinstance(plan, dict):
        raise RecordError(f"'plan' must be an object (got {_shown(plan)})")
    if not isinstance(jobs, list) or not jobs:
        raise RecordError(f"'jobs' must be a list of jobs (got {_shown(jobs)})")
    for name in ("devices", "threads"):
        if name not in plan:
            raise RecordError(f"'plan' has no {name!r}")
    _check("plan ", plan, PLAN)
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) or "seed" not in job:
            raise RecordError(f"job {i + 1} must be an object with a seed (got {_shown(job)})")
        _check(f"job {i + 1} ", job, JOB)
