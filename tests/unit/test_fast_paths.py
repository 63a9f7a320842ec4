"""The fast paths of the live pair (issue 9) give exactly what the general paths give:
`parse_obj` on flat values against `_add_metrics` on every value, `AlignedStep.to_dict`
against `jsonable` of the whole row, `is_clock` cached against the rule itself."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon import clocks
from tuimon.engine.judge.align import compare_steps
from tuimon.readers import LineParser
from tuimon.steplog import (
    STEP_KEYS,
    Step,
    _add_metrics,
    jsonable,
    number_of,
    parse_obj,
)
from tuimon.store.aligned import AlignedStep

NAMES = st.sampled_from(
    ["loss", "train_loss", "lr", "acc", "t", "time", "_runtime", "step_time_ms", "dt",
     "tokens_per_s", "mfu", "param_digest", "param_digests", "epoch", "type", "Loss", "x.y"]
)  # fmt: skip
SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "00", "abc", "nan", ""]),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.dictionaries(st.one_of(NAMES, st.just("_type")), inner, max_size=3),
        st.lists(inner, max_size=2),
    ),
    max_leaves=6,
)


def general_step(obj: dict[str, Any]) -> Step:
    """`parse_obj` of a step object without its fast paths: every value via `_add_metrics`."""
    step = next(obj[k] for k in STEP_KEYS if type(obj.get(k)) is int)
    metrics: dict[str, float] = {}
    shown: dict[str, float] = {}
    bad: list[str] = []
    for name, value in obj.items():
        if name not in STEP_KEYS and name not in ("type", "param_digests"):
            _add_metrics(metrics, shown, bad, name, value)
    digests, digest = obj.get("param_digests"), obj.get("param_digest")
    return Step(
        step=step,
        metrics=metrics,
        t=next((number_of(obj[k]) for k in ("t", "_runtime", "time") if k in obj), None),
        digest=digest if isinstance(digest, str) else None,
        digests={k: v for k, v in digests.items() if isinstance(v, str)}
        if isinstance(digests, dict)
        else {},
        clocks=shown,
        unreadable=tuple(bad),
    )


def one_step(a: Step, b: Step) -> AlignedStep:
    """The two records of one step judged as the live aligner judges them."""
    return compare_steps([a], [b])[0][0]


def general_row(s: AlignedStep) -> dict[str, Any]:
    """`AlignedStep.to_dict` without its fast path: `jsonable` of the whole row."""
    row: dict[str, Any] = {
        "step": s.step,
        "occurrence": s.occurrence,
        "equal": s.equal,
        "divergence": s.divergence,
        "digest_equal": s.digest_equal,
        "tensors_differ": list(s.tensors),
        "t.a": s.a.t,
        "t.b": s.b.t,
    }
    for name, d in s.diffs.items():
        row.update({f"{name}.a": d.a, f"{name}.b": d.b, f"{name}.abs": d.abs})
        row.update({f"{name}.rel": d.rel, f"{name}.ulps": d.ulps})
    return jsonable(row)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), st.dictionaries(NAMES, VALUES, max_size=8))
def test_parse_obj_fast_paths_give_the_general_record(step: int, fields: dict[str, Any]) -> None:
    obj = {"type": "step", "step": step, **fields}
    obj["step"] = step
    got = parse_obj(obj)
    want = general_step(obj)
    assert repr(got) == repr(want)  # repr: NaN equals NaN, and `clocks` is compared too


LINE_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),  # what orjson reads as integers
    st.sampled_from(["NaN", "Infinity", "-Infinity", "00", "abc", "nan", ""]),
    st.booleans(),
    st.none(),
)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.dictionaries(NAMES, LINE_SCALARS, max_size=8))
def test_line_parser_gives_the_record_of_the_general_path(
    step: int, fields: dict[str, Any]
) -> None:
    obj = {**fields, "type": "step", "step": step}
    line = json.dumps(jsonable(obj)).encode() + b"\n"
    record, complete = LineParser().parse(line)
    assert complete
    assert repr(record) == repr(general_step(orjson.loads(line)))


FLOATS = st.floats(allow_nan=True, allow_infinity=True)
METRICS = st.dictionaries(st.sampled_from(["loss", "acc", "lr", "b.c"]), FLOATS, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 10**6),
    METRICS,
    METRICS,
    st.one_of(st.none(), FLOATS),
    st.one_of(st.none(), FLOATS),
)
def test_to_dict_gives_the_general_row(
    step: int, ma: dict[str, float], mb: dict[str, float], ta: float | None, tb: float | None
) -> None:
    aligned = one_step(Step(step, ma, t=ta, digest="ab"), Step(step, mb, t=tb, digest="ab"))
    got, want = aligned.to_dict(), general_row(aligned)
    assert list(got) == list(want)
    assert orjson.dumps(got) == orjson.dumps(want)  # the same bytes in aligned.jsonl


def test_to_dict_writes_non_finite_values_as_strings() -> None:
    aligned = one_step(Step(1, {"loss": 1.0}, t=float("inf")), Step(1, {"loss": float("nan")}))
    row = aligned.to_dict()
    assert row["loss.a"] == 1.0 and row["loss.b"] == "NaN" and row["t.a"] == "Infinity"
    assert row == general_row(aligned)
    big = one_step(Step(1, {"x": 1.7e308, "y": 1.7e308}), Step(1, {"x": 1.7e308, "y": 1.7e308}))
    assert big.to_dict() == general_row(big) and big.to_dict()["x.a"] == 1.7e308  # sum overflows


@given(st.text(max_size=20))
def test_is_clock_cached_is_the_rule(name: str) -> None:
    rule = clocks.is_clock.__wrapped__(name)
    assert clocks.is_clock(name) is rule
    assert clocks.is_clock(name) is rule  # the second answer comes from the cache
