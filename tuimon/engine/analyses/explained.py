"""The one line that says what `tuimon explain` found (pair.json's "explain"): the pair view, the
browser and the headless summary show it without importing the reruns' machinery
(`engine.analyses.explain`)."""

from __future__ import annotations

from typing import Any

from tuimon.sanitize import clean


def op_label(op: dict[str, Any]) -> str:
    """An op's name, phase, step and parameters: how the reruns' first ops are counted."""
    params = ",".join(op.get("params") or []) or "-"
    return f"{op.get('op')} · {op.get('phase')} · step {op.get('step')} · {params}"


def first_value(values: Any) -> str:
    """The first of a list of values as text, `?` without one."""
    return str(values[0]) if isinstance(values, list) and values else "?"


def _where(first: dict[str, Any]) -> str:
    where = f"the {first.get('phase')} of step {first.get('step')}"
    params = ", ".join(first.get("params") or [])
    what = str(first.get("op"))
    if first.get("accumulate") is not None:
        what += f" (accumulate={first['accumulate']})"
    bits = [f"at {what}"]
    if params:
        bits.append(f"for {params}")
    if first.get("node"):
        bits.append(f"[{first['node']}]")
    if first.get("module"):
        bits.append(f"in module {first['module']}")
    return f"in {where} " + " ".join(bits)


def describe(result: dict[str, Any]) -> str:
    """One line for the headless summary and the pair view."""
    status = result.get("status")
    if status != "explained":
        return f"explain: {result.get('message')}"
    first = result["first"]
    if first.get("state"):
        text = (
            f"explain: the runs differ already when step {first.get('step')} begins, in "
            f"{first.get('op')} of {', '.join(first.get('params') or ['?'])} (they parted in "
            "an earlier step that the step log did not show)"
        )
    elif first.get("kind") == "sequence":
        text = (
            f"explain: the op sequences part {_where(first)}: a runs {first.get('a_op')}, "
            f"b runs {first.get('b_op')}"
        )
    else:
        text = f"explain: they part {_where(first)}"
        shapes, dtypes = first.get("shapes") or {}, first.get("dtypes") or {}
        shape = "x".join(map(str, (shapes.get("a") or [[]])[0]))
        dt_a, dt_b = first_value(dtypes.get("a")), first_value(dtypes.get("b"))
        text += f", {dt_a if dt_a == dt_b else f'{dt_a} vs {dt_b}'} ({shape})"
        diff = first.get("difference")
        if diff:
            text += (
                f", max |a-b| {diff['max_abs']:.3g} (rel {diff['max_rel']:.3g}, "
                f"{diff['elements_differ']} of {diff['elements']} elements)"
            )
    if first.get("line"):
        text += f", called at {first['line']}"
    count = result.get("first_counts", {}).get(op_label(first), 0)
    text += f"; first to differ in {count} of {result.get('repeats')} reruns"
    if result.get("reproduced") != result.get("repeats"):
        text += f" ({result['repeats'] - result['reproduced']} reruns did not diverge)"
    if result.get("hint"):
        text += f"; likely cause: {result['hint']}"
    if first.get("nondeterministic"):  # the known-ops table's entry, with its source
        text += f"; known: {clean(str(first['nondeterministic']), 2000)}"
    return text


def saved_line(meta: dict[str, Any]) -> str | None:
    """The explain line of a saved pair's pair.json, when it has been explained."""
    result = meta.get("explain")
    if not isinstance(result, dict) or not isinstance(result.get("status"), str):
        return None
    try:
        return describe(result)
    except (KeyError, TypeError, ValueError, AttributeError):
        return "explain: (result in pair.json is damaged)"
