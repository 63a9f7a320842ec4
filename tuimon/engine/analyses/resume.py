"""What a resume lost: `tuimon explain` on a pair run with `--resume-at N`.

Side b stopped after step N and started again from its checkpoint. At step N + 1, the first
step after the resume, b begins from what it restored and a from what it kept: where the two
records of that step differ is what the checkpoint did not hold. The state digests a run logs
as each step begins (`state_digests`: `rng.*`, `optimizer`, `data`; `tuimon.adopt`) name it
directly; without them the records tell what they can:

- the parameter digests of step N + 1 differ: the model's weights were not restored;
- equal weights, but the losses of step N + 1 differ: its inputs or its randomness (the data
  order or an RNG; the log cannot tell which);
- equal weights and losses at N + 1, but the weights of step N + 2 differ: the update from them
  (the optimizer state, or an RNG it draws).

Nothing is re-run: both logs are read around the resume, line by line.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import orjson

from tuimon.engine.sources.saved_pair import saved_reading
from tuimon.errors import StoreError
from tuimon.readers import LineParser, ReaderError, open_log
from tuimon.steplog import STATE_DIGESTS, Step
from tuimon.store import SIDES, PairDoc, pair_file

PARTS = {"rng": "RNG state", "optimizer": "optimizer state", "data": "data order (its position)"}
"""How each kind of state digest is named: `rng.torch` is the RNG state (torch)."""


def resume_of(doc: dict[str, Any]) -> tuple[str, int] | None:
    """(side, N) of a pair run with `--resume-at N`, from its pair.json; None otherwise."""
    resume = doc.get("resume")
    if not isinstance(resume, dict):
        return None
    side, at = resume.get("side"), resume.get("at")
    if side not in SIDES or not isinstance(at, int) or isinstance(at, bool) or at < 0:
        return None
    return side, at


def parted_at(first: object, found: object) -> int | None:
    """The step where the sides part: the summary's first divergent step, else the step of
    the first line the byte rule found differing (`at step K` in its `after_step`)."""
    if isinstance(first, int) and not isinstance(first, bool):
        return first
    where = found.get("after_step") if isinstance(found, dict) else None
    match = re.fullmatch(r"at step (\d+)\b.*", where) if isinstance(where, str) else None
    return int(match[1]) if match else None


def part_name(key: str) -> str:
    """`rng.torch` -> `RNG state (torch)`; `optimizer` -> `optimizer state`."""
    kind, _, which = key.partition(".")
    name = PARTS.get(kind, key)
    return f"{name} ({which})" if which else name


def _steps_after(path: Path, parser: LineParser, wanted: set[int]) -> dict[int, tuple[Step, dict]]:
    """The records of the steps in `wanted` as the run went on after the resume: the last of
    each step in the log (the resumed run's), with its state digests."""
    found: dict[int, tuple[Step, dict]] = {}
    with open_log(path) as fh:
        for raw in fh:
            record, _ = parser.parse(raw)
            if not isinstance(record, Step) or record.step not in wanted:
                continue
            state: dict[str, str] = {}
            with contextlib.suppress(orjson.JSONDecodeError):
                obj = orjson.loads(raw)
                block = obj.get(STATE_DIGESTS) if isinstance(obj, dict) else None
                if isinstance(block, dict):
                    state = {str(k): v for k, v in block.items() if isinstance(v, str)}
            found[record.step] = (record, state)
    return found


def _differ(x: Step, y: Step) -> list[str]:
    """The metrics two records of one step share whose values differ (bitwise)."""
    out = []
    for name, value in x.metrics.items():
        other = y.metrics.get(name)
        if other is not None and other.hex() != value.hex():
            out.append(name)
    return out


def explain_resume(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The result of `explain` for a resumed pair (saved in pair.json under `explain`):
    `status` "resume", what was `lost`, how it is known, and a `message`."""
    side, at = resume_of(doc) or ("b", 0)
    summary = doc["summary"] if isinstance(doc.get("summary"), dict) else {}
    first = parted_at(summary.get("first_divergent_step"), summary.get("bytes"))
    result: dict[str, Any] = {"status": "resume", "resumed_side": side, "resumed_after": at,
                              "first_step_after": at + 1, "divergent_step": first}  # fmt: skip
    pair = PairDoc.from_json(doc)
    try:
        reading = saved_reading(path, pair)
        records = {
            s: _steps_after(
                pair_file(path, pair.file(s)), LineParser(reading, s), {at, at + 1, at + 2}
            )
            for s in SIDES
        }
    except (OSError, ReaderError, StoreError, ValueError) as exc:
        result.update(lost=[], how="unread", message=f"the logs could not be read: {exc}")
        return result
    lost, how = _lost(records, at)
    step, state = records["a"].get(at + 1, (None, {}))
    weights = ["weights"] if step is not None and step.digest is not None else []
    result.update(lost=lost, how=how, digested=[*state, *weights])
    result["message"] = _message(result, first, summary.get("verdict"))
    return result


def _lost(records: dict[str, dict[int, tuple[Step, dict]]], at: int) -> tuple[list[str], str]:
    """What the resume lost, and how that is known: `digests` (the state digests of step
    N + 1), `records` (inferred from its weights and losses), `none` (nothing differs at
    N + 1 or N + 2), `missing` (a side lacks step N + 1)."""
    a, b = records["a"], records["b"]
    if at + 1 not in a or at + 1 not in b:
        return [], "missing"
    (sa, state_a), (sb, state_b) = a[at + 1], b[at + 1]
    before = (a.get(at, (None, {}))[1], b.get(at, (None, {}))[1])
    lost = []
    if state_a and state_b:  # what differs after the resume and did not before it
        lost = [k for k in state_a if k in state_b and state_a[k] != state_b[k]
                and before[0].get(k) == before[1].get(k)]  # fmt: skip
    if sa.digest is not None and sb.digest is not None and sa.digest != sb.digest:
        lost.append("weights")
    if lost or (state_a and state_b):
        return lost, "digests"
    if _differ(sa, sb):
        return ["data or RNG"], "records"
    after = a.get(at + 2), b.get(at + 2)
    if after[0] is not None and after[1] is not None:
        xa, xb = after[0][0], after[1][0]
        if (xa.digest is not None and xb.digest is not None and xa.digest != xb.digest) or _differ(
            xa, xb
        ):
            return ["optimizer"], "records"
    return [], "none"


def _message(result: dict[str, Any], first: Any, verdict: Any) -> str:
    """One line: what the resume lost, and how that is known."""
    side, at, lost, how = (result[k] for k in ("resumed_side", "resumed_after", "lost", "how"))
    head = f"run {side} resumed after step {at}"
    if isinstance(first, int) and first <= at:
        where = f"the sides part at step {first}, before the resume: not the resume's doing"
        return f"{head}; {where} (tuimon explain on a pair without --resume-at names the op)"
    parted = f"; the sides part at step {first}" if isinstance(first, int) else ""
    if how == "missing":
        return f"{head}{parted}; a side has no step {at + 1}, so what the resume lost is not told"
    if how == "digests" and lost:
        names = ", ".join("the model's weights" if k == "weights" else part_name(k) for k in lost)
        return (
            f"{head}{parted}; the resume lost the {names}: at step {at + 1}, the first step "
            f"after it, the {'digest differs' if len(lost) == 1 else 'digests differ'} from run "
            f"{'a' if side == 'b' else 'b'}'s"
        )
    if how == "digests":
        rest = (
            "the sides agree after it"
            if verdict in ("IDENTICAL", "CLOSE")
            else "the cause lies outside the saved state (an op that is not deterministic?)"
        )
        return (
            f"{head}{parted}; at step {at + 1} every part of the state the runs digest agrees "
            f"({', '.join(result['digested'])}): the resume restored it; {rest}"
        )
    if how == "records" and lost == ["data or RNG"]:
        return (
            f"{head}{parted}; at step {at + 1} the weights agree but the losses differ: the "
            "resume lost the data order or an RNG state (log state_digests to tell which: "
            "docs/your-script.md)"
        )
    if how == "records":
        return (
            f"{head}{parted}; at step {at + 1} the weights and losses agree, at step {at + 2} "
            "the weights differ: the resume lost the optimizer state (or an RNG the update "
            "draws; log state_digests to tell which: docs/your-script.md)"
        )
    return f"{head}{parted}; steps {at + 1} and {at + 2} agree: the resume lost nothing they show"
