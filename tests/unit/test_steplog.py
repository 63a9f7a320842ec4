"""Tests for tuimon.steplog: the v1 step-log format, the tolerant reader, and StepLogger."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from helpers import bits, from_bits, same_float
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.sources.saved_pair import read_records
from tuimon.steplog import (
    FORMAT,
    STEP_KEYS,
    TIME_KEYS,
    End,
    Header,
    Step,
    StepLogger,
    Text,
    dumps,
    parse_line,
)

RECORD_TYPES = (Header, Step, End, Text)
NONFINITE_STRINGS = {"NaN", "Infinity", "-Infinity"}
FAST = settings(max_examples=150, deadline=None)


# --- helpers ---------------------------------------------------------------------------------


# Every float64: hypothesis' own floats (which favour 0.0, -0.0, subnormals, nan, inf, max) plus
# arbitrary bit patterns, so every exponent and NaN payload is reachable.
any_float64 = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.integers(0, 2**64 - 1).map(from_bits),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def ref_metrics(obj: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, float]:
    """What the design says the metrics of a step object are (an independent reading): top-level
    numbers, and the numbers of nested objects (up to 4 deep) as dotted names."""
    out: dict[str, float] = {}
    for name, value in obj.items():
        if not prefix and (
            name in STEP_KEYS or name in TIME_KEYS or name in ("type", "param_digests")
        ):
            continue
        if isinstance(value, dict):
            if depth < 4:
                out.update(ref_metrics(value, f"{prefix}{name}.", depth + 1))
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[prefix + name] = float(value)
            if isinstance(value, int) and abs(value) >= 2**53:  # exact integers: what float drops
                out[prefix + name + ".low_bits"] = float(value - int(float(value)))
        elif isinstance(value, str) and value in NONFINITE_STRINGS:
            nonfinite = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
            out[prefix + name] = nonfinite[value]
    return out


def ref_step(obj: dict[str, Any]) -> int | None:
    if obj.get("type") in ("header", "end"):
        return None
    for key in STEP_KEYS:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**64:
            return value  # what orjson reads as an integer; larger ones only Python's json takes
    return None


def assert_metrics_equal(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert same_float(got[k], want[k]), (k, got[k], want[k])


# --- float64 round trip ---------------------------------------------------------------------


@FAST
@given(any_float64)
def test_dumps_parse_line_roundtrip_is_bitwise(x: float) -> None:
    rec = parse_line(dumps({"type": "step", "step": 0, "v": x}))
    assert isinstance(rec, Step)
    assert same_float(rec.metrics["v"], x)


@FAST
@given(st.lists(any_float64, min_size=1, max_size=20))
def test_steplogger_roundtrip_is_bitwise(values: list[float]) -> None:
    buf = io.BytesIO()
    log = StepLogger(buf)
    for i, v in enumerate(values):
        log.step(i, loss=v, t=0.0)
    log.close()
    records = [parse_line(line) for line in buf.getvalue().splitlines()]
    steps = [r for r in records if isinstance(r, Step)]
    assert [s.step for s in steps] == list(range(len(values)))
    for s, v in zip(steps, values, strict=True):
        assert same_float(s.metrics["loss"], v)


@FAST
@given(any_float64)
def test_python_json_tokens_roundtrip_is_bitwise(x: float) -> None:
    """Python's json writes NaN/Infinity tokens and repr() floats: also lossless."""
    rec = parse_line(json.dumps({"step": 5, "v": x}).encode())
    assert isinstance(rec, Step)
    assert same_float(rec.metrics["v"], x)


@pytest.mark.parametrize(
    "x", [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072009e-308, 1.7976931348623157e308, 0.1]
)
def test_roundtrip_named_values(x: float) -> None:
    rec = parse_line(dumps({"step": 1, "v": x}))
    assert isinstance(rec, Step)
    assert bits(rec.metrics["v"]) == bits(x)


def test_nonfinite_written_as_strings() -> None:
    line = dumps({"step": 1, "a": math.nan, "b": math.inf, "c": -math.inf})
    assert b"NaN" in line and b'"Infinity"' in line and b'"-Infinity"' in line
    assert json.loads(line, parse_constant=_no_constants) == {
        "step": 1,
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
    }
    rec = parse_line(line)
    assert isinstance(rec, Step)
    assert math.isnan(rec.metrics["a"])
    assert rec.metrics["b"] == math.inf and rec.metrics["c"] == -math.inf


def _no_constants(token: str) -> Any:
    raise AssertionError(f"bare {token} token in output")


def test_iter_records_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(
        dumps({"type": "header", "run": {"name": "x"}})
        + b"\n   \n"
        + dumps({"step": 0, "loss": 1.5})
        + b"warning: something\n"
        + dumps({"type": "end", "status": "ok", "steps": 1})
    )
    records = read_records(path)[1]
    assert [type(r) for r in records] == [Header, Step, Text, End]
    assert records[2] == Text("warning: something")


# --- the reader never raises ----------------------------------------------------------------


@FAST
@given(st.binary(max_size=300))
def test_parse_line_never_raises_on_bytes(line: bytes) -> None:
    rec = parse_line(line)
    assert isinstance(rec, RECORD_TYPES)
    if not line.strip().startswith(b"{"):
        assert rec == Text(line.decode("utf-8", "replace").rstrip("\r\n"))


@FAST
@given(st.text(max_size=300))
def test_parse_line_never_raises_on_text(text: str) -> None:
    rec = parse_line(text.encode("utf-8", "surrogatepass"))
    assert isinstance(rec, RECORD_TYPES)


@FAST
@given(st.binary(max_size=200))
def test_parse_line_never_raises_on_brace_prefixed_garbage(tail: bytes) -> None:
    for line in (b"{" + tail, b'{"step": 1, ' + tail, b'{"step": NaN' + tail):
        assert isinstance(parse_line(line), RECORD_TYPES)


@FAST
@given(json_values)
def test_non_objects_are_text(value: Any) -> None:
    line = orjson.dumps(value)
    rec = parse_line(line)
    if isinstance(value, dict):
        assert isinstance(rec, RECORD_TYPES)
    else:
        assert rec == Text(line.decode())


@FAST
@given(st.dictionaries(st.sampled_from([*STEP_KEYS, *TIME_KEYS, "type", "a", "b"]), json_values))
def test_objects_parse_as_the_design_says(obj: dict[str, Any]) -> None:
    line = orjson.dumps(obj)
    rec = parse_line(line)
    kind = obj.get("type")
    if kind == "header":
        assert isinstance(rec, Header)
    elif kind == "end":
        assert isinstance(rec, End)
    elif (step := ref_step(obj)) is not None:
        assert isinstance(rec, Step)
        assert rec.step == step
        assert_metrics_equal(rec.metrics, ref_metrics(obj))
    else:
        assert rec == Text(line.decode())


@FAST
@given(st.text(max_size=40).filter(lambda s: s.strip() and "{" not in s))
def test_garbage_is_text_with_the_original_text(text: str) -> None:
    line = text.encode() + b"\n"
    assert parse_line(line) == Text(text.rstrip("\r\n"))


@pytest.mark.parametrize(
    "line",
    [
        b"{",
        b"{}}",
        b'{"step": 1,}',
        b"{'step': 1}",
        b'{"step": 1 "loss": 2}',
        b'{"step": 1, "loss": nan}',
        b'{"step": 1, "loss": NaN',
        b'{"step": 1, "loss": Infinityy}',
        b'{"step": 1, "x": "\xff\xfe NaN"}',
        b"{\x00}",
        b"\xef\xbb\xbf" + b'{"step": 1}',
        b'{"step": 1' + b"0" * 400 + b"}",
    ],
)
def test_bad_json_is_text(line: bytes) -> None:
    rec = parse_line(line)
    assert isinstance(rec, Text)
    assert rec.text == line.decode("utf-8", "replace")


def test_huge_valid_line_is_a_step() -> None:
    blob = "x" * (2 * 1024 * 1024)
    line = orjson.dumps({"step": 9, "loss": 0.25, "blob": blob}) + b"\n"
    assert len(line) > 2_000_000
    rec = parse_line(line)
    assert isinstance(rec, Step)
    assert rec.step == 9 and rec.metrics == {"loss": 0.25}


def test_huge_valid_line_with_many_metrics() -> None:
    obj = {"step": 3, **{f"m{i}": i / 7 for i in range(100_000)}}
    line = orjson.dumps(obj)
    assert len(line) > 2_000_000
    rec = parse_line(line)
    assert isinstance(rec, Step) and len(rec.metrics) == 100_000
    assert rec.metrics["m99999"] == 99999 / 7


@pytest.mark.parametrize("nan", [False, True])
def test_huge_invalid_line_is_truncated_text(nan: bool) -> None:
    line = b'{"step": 1, ' + (b'"loss": NaN, ' if nan else b"") + b'"blob": "' + b"y" * 2_100_000
    rec = parse_line(line + b"\n")
    assert isinstance(rec, Text)
    assert len(rec.text) < 5000
    head = line.decode()[:4096]
    assert rec.text.startswith(head)
    assert rec.text.endswith(f"[{len(line) - 4096} more characters]")


def test_huge_garbage_is_truncated_text() -> None:
    rec = parse_line(b"z" * 3_000_000)
    assert isinstance(rec, Text)
    assert rec.text.startswith("z" * 4096) and "more characters" in rec.text


def test_python_json_nonfinite_tokens_parse_as_metrics() -> None:
    line = json.dumps({"step": 7, "a": math.nan, "b": math.inf, "c": -math.inf, "d": 1.5})
    assert "NaN" in line and "-Infinity" in line  # bare tokens, not strings
    rec = parse_line(line.encode())
    assert isinstance(rec, Step) and rec.step == 7
    assert math.isnan(rec.metrics["a"])
    assert rec.metrics["b"] == math.inf and rec.metrics["c"] == -math.inf
    assert rec.metrics["d"] == 1.5


@pytest.mark.parametrize("depth", [10, 1000, 1100, 5000, 200_000])
@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("bracket", [b"[]", b"{}"])
def test_deeply_nested_json_never_raises(depth: int, nan: bool, bracket: bytes) -> None:
    o, c = bracket[:1], bracket[1:]
    inner = o * depth + c * depth if o == b"[" else (b'{"k":' * depth + b"1" + b"}" * depth)
    line = b'{"step": 1, ' + (b'"x": NaN, ' if nan else b"") + b'"deep": ' + inner + b"}"
    rec = parse_line(line)
    assert isinstance(rec, (Step, Text))
    if depth <= 10:
        assert isinstance(rec, Step)
    if isinstance(rec, Text):
        assert rec.text.startswith('{"step": 1, ')


def test_int_beyond_python_digit_limit_is_text() -> None:
    line = b'{"step": 1' + b"0" * 5000 + b', "x": NaN}'  # json's 4300-digit ValueError path
    rec = parse_line(line)
    assert isinstance(rec, Text) and rec.text.startswith('{"step": 1000')


@pytest.mark.parametrize("depth", [10, 1000, 5000])
def test_deeply_nested_header_and_end_fields_never_raise(depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    lines = [
        b'{"type": "end", "status": ' + nested + b', "x": NaN}',
        b'{"type": "header", "format": ' + nested + b', "x": NaN}',
        b'{"type": "end", "status": ' + nested + b"}",
        b'{"type": "header", "format": ' + nested + b"}",
    ]
    for line in lines:
        assert isinstance(parse_line(line), RECORD_TYPES)


def _parse_at_depth(line: bytes, frames: int) -> Any:
    """parse_line called `frames` Python frames deep (a reader inside a UI worker, a test...)."""
    return parse_line(line) if frames == 0 else _parse_at_depth(line, frames - 1)


@pytest.mark.parametrize("field", [b'"header", "format"', b'"end", "status"'])
def test_header_or_end_with_deep_field_does_not_raise(field: bytes) -> None:
    line = b'{"type": ' + field + b": " + b"[" * 1020 + b"]" * 1020 + b"}"
    assert isinstance(_parse_at_depth(line, 50), RECORD_TYPES)


@pytest.mark.parametrize("key", STEP_KEYS)
@pytest.mark.parametrize(
    "value", [1.5, 2.0, True, False, "3", None, [1], {"a": 1}, "NaN"], ids=repr
)
def test_non_integer_step_is_text(key: str, value: Any) -> None:
    line = orjson.dumps({key: value, "loss": 0.5})
    assert parse_line(line) == Text(line.decode())


# --- what a step is ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", STEP_KEYS)
def test_each_step_key_makes_a_step(key: str) -> None:
    rec = parse_line(orjson.dumps({key: 42, "loss": 0.5}))
    assert isinstance(rec, Step)
    assert rec.step == 42 and rec.metrics == {"loss": 0.5}


def test_step_key_preference_and_other_step_keys_are_not_metrics() -> None:
    rec = parse_line(b'{"iteration": 3, "global_step": 2, "_step": 1, "step": 0, "x": 1}')
    assert isinstance(rec, Step) and rec.step == 0 and rec.metrics == {"x": 1.0}
    rec = parse_line(b'{"step": "zero", "_step": 5, "x": 1}')
    assert isinstance(rec, Step) and rec.step == 5 and rec.metrics == {"x": 1.0}
    rec = parse_line(b'{"step": true, "iteration": 8}')
    assert isinstance(rec, Step) and rec.step == 8 and rec.metrics == {}


def test_negative_and_large_steps() -> None:
    assert parse_line(b'{"step": -1}') == Step(-1, {})
    assert parse_line(b'{"step": 9223372036854775807}') == Step(2**63 - 1, {})


def test_bools_and_strings_are_not_metrics() -> None:
    rec = parse_line(
        orjson.dumps(
            {
                "step": 1,
                "flag": True,
                "off": False,
                "name": "abc",
                "num": "1.5",
                "nan_lower": "nan",
                "inf_short": "inf",
                "none": None,
                "list": [1.0],
                "obj": {"a": 1.0},
                "n": "NaN",
                "p": "Infinity",
                "m": "-Infinity",
                "i": 3,
            }
        )
    )
    assert isinstance(rec, Step)
    assert set(rec.metrics) == {"n", "p", "m", "i", "obj.a"}  # nested numbers are dotted
    assert math.isnan(rec.metrics["n"])
    assert rec.metrics["p"] == math.inf and rec.metrics["m"] == -math.inf
    assert rec.metrics["i"] == 3.0 and isinstance(rec.metrics["i"], float)


@pytest.mark.parametrize("key", sorted(TIME_KEYS))
def test_time_keys_are_not_metrics(key: str) -> None:
    rec = parse_line(orjson.dumps({"step": 1, key: 12.5, "loss": 1.0}))
    assert isinstance(rec, Step)
    assert rec.metrics == {"loss": 1.0}


def test_clock_prefers_t_then_runtime() -> None:
    rec = parse_line(b'{"step": 1, "t": 3.5, "_runtime": 9.0}')
    assert isinstance(rec, Step) and rec.t == 3.5
    rec = parse_line(b'{"step": 1, "_runtime": 9.0}')
    assert isinstance(rec, Step) and rec.t == 9.0
    rec = parse_line(b'{"step": 1}')
    assert isinstance(rec, Step) and rec.t is None


def test_wandb_style_line() -> None:
    rec = parse_line(b'{"_step": 3, "loss": 0.5, "_runtime": 1.2, "_timestamp": 1700000000.1}\n')
    assert rec == Step(step=3, metrics={"loss": 0.5}, t=1.2)


def test_param_digests_parsed() -> None:
    line = orjson.dumps(
        {
            "type": "step",
            "step": 17,
            "t": 3.21,
            "train_loss": 4.5,
            "param_digest": "ab12",
            "param_digests": {"W_E": "01", "W_U": "02", "bad": 3},
        }
    )
    rec = parse_line(line)
    assert isinstance(rec, Step)
    assert rec.digest == "ab12"
    assert rec.digests == {"W_E": "01", "W_U": "02"}
    assert rec.metrics == {"train_loss": 4.5}
    assert rec.t == 3.21


@pytest.mark.parametrize("digest", [5, None, ["x"], {"a": "b"}])
def test_non_string_digest_ignored(digest: Any) -> None:
    rec = parse_line(orjson.dumps({"step": 1, "param_digest": digest, "param_digests": "nope"}))
    assert isinstance(rec, Step)
    assert rec.digest is None and rec.digests == {}


def test_header_record() -> None:
    line = orjson.dumps(
        {
            "type": "header",
            "format": FORMAT,
            "run": {"name": "a", "seed": 0},
            "hyper": {"lr": 1e-3},
            "env": {"device": "cpu", "threads": 2},
        }
    )
    assert parse_line(line) == Header(
        run={"name": "a", "seed": 0},
        hyper={"lr": 1e-3},
        env={"device": "cpu", "threads": 2},
        format=FORMAT,
    )
    assert parse_line(b'{"type": "header", "run": [1], "step": 3}') == Header({}, {}, {})


def test_end_record() -> None:
    line = orjson.dumps(
        {"type": "end", "status": "error", "steps": 10, "wall_s": 2.5, "artifacts": {"w": "x.pt"}}
    )
    assert parse_line(line) == End("error", 10, 2.5, {"w": "x.pt"})
    assert parse_line(b'{"type": "end"}') == End("ok")
    assert parse_line(b'{"type": "end", "steps": true, "wall_s": "x"}') == End("ok")
    assert parse_line(b'{"type": "end", "wall_s": "NaN"}').wall_s != 0  # NaN


# --- StepLogger --------------------------------------------------------------------------------


def read(path: Path) -> list[Any]:
    return [parse_line(line) for line in path.read_bytes().splitlines()]


def test_steplogger_to_path_flushes_per_record(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = StepLogger(path, run={"name": "r"}, hyper={"lr": 0.1}, env={"device": "cpu"})
    records = read(path)
    assert len(records) == 1 and isinstance(records[0], Header)
    header = records[0]
    assert header.format == FORMAT
    assert header.run == {"name": "r"} and header.hyper == {"lr": 0.1}
    assert header.env["device"] == "cpu" and "python" in header.env and "env_vars" in header.env

    log.step(0, train_loss=4.7, lr=0.1)
    records = read(path)  # read while the logger is still open
    assert len(records) == 2
    step = records[1]
    assert isinstance(step, Step) and step.step == 0
    assert step.metrics == {"train_loss": 4.7, "lr": 0.1}
    assert step.t is not None and step.t >= 0

    log.step(1, train_loss=4.6, t=99.0)
    assert read(path)[2] == Step(1, {"train_loss": 4.6}, t=99.0)

    log.close()
    end = read(path)[-1]
    assert isinstance(end, End)
    assert end.status == "ok" and end.steps == 2
    assert end.wall_s is not None and end.wall_s >= 0


def test_steplogger_context_manager_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with pytest.raises(RuntimeError, match="boom"), StepLogger(str(path)) as log:
        log.step(0, loss=1.0)
        raise RuntimeError("boom")
    records = read(path)
    assert isinstance(records[-1], End)
    assert records[-1].status == "error" and records[-1].steps == 1


def test_steplogger_context_manager_ok(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with StepLogger(path) as log:
        log.step(0, loss=1.0)
    end = read(path)[-1]
    assert isinstance(end, End) and end.status == "ok"


def test_steplogger_to_bytesio_is_not_closed() -> None:
    buf = io.BytesIO()
    log = StepLogger(buf)
    log.step(0, loss=0.5)
    log.close("ok", artifacts={"weights": Path("w.pt")})
    assert not buf.closed
    records = [parse_line(line) for line in buf.getvalue().splitlines()]
    assert [type(r) for r in records] == [Header, Step, End]
    assert records[2] == End("ok", 1, records[2].wall_s, {"weights": "w.pt"})


def test_steplogger_default_stdout(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    log = StepLogger(run={"name": "out"})
    log.step(3, loss=0.25)
    log.close()
    out = capsysbinary.readouterr().out
    records = [parse_line(line) for line in out.splitlines()]
    assert [type(r) for r in records] == [Header, Step, End]
    assert records[0].run == {"name": "out"}
    assert records[1].step == 3 and records[1].metrics == {"loss": 0.25}


def test_steplogger_numpy_scalars() -> None:
    buf = io.BytesIO()
    log = StepLogger(buf, hyper={"lr": np.float32(1e-3), "p": np.int64(113)})
    log.step(
        np.int64(5),
        f32=np.float32(0.1),
        f64=np.float64(1 / 3),
        i64=np.int32(7),
        nan=np.float32("nan"),
        inf=np.float64("-inf"),
        flag=np.bool_(True),
        t=np.float64(1.5),
    )
    log.close()
    header, step, _ = (parse_line(line) for line in buf.getvalue().splitlines())
    assert isinstance(header, Header)
    assert header.hyper == {"lr": float(np.float32(1e-3)), "p": 113}
    assert isinstance(step, Step) and step.step == 5 and step.t == 1.5
    assert bits(step.metrics["f32"]) == bits(float(np.float32(0.1)))
    assert bits(step.metrics["f64"]) == bits(1 / 3)
    assert step.metrics["i64"] == 7.0
    assert math.isnan(step.metrics["nan"]) and step.metrics["inf"] == -math.inf
    assert "flag" not in step.metrics


def test_steplogger_close_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = StepLogger(path)
    log.close("ok")
    log.close("error")
    log.close()
    log.__exit__(RuntimeError, RuntimeError("late"), None)
    ends = [r for r in read(path) if isinstance(r, End)]
    assert ends == [End("ok", 0, ends[0].wall_s, {})]


def test_steplogger_owned_file_closed_and_foreign_file_left_open(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = StepLogger(path)
    fh = log._fh
    log.close()
    assert fh.closed
    with open(tmp_path / "other.jsonl", "wb") as mine:
        StepLogger(mine).close()
        assert not mine.closed


def test_dumps_rejects_unknown_objects() -> None:
    with pytest.raises(TypeError):
        dumps({"step": 1, "x": object()})


# --- bugs found and fixed: kept as regression tests ---------------------------------------


def test_dumps_numpy_array_value() -> None:
    line = dumps({"step": 1, "hist": np.array([1.0, 2.0])})
    assert orjson.loads(line)["hist"] == [1.0, 2.0]


def test_dumps_nested_nonfinite_not_null() -> None:
    line = dumps({"type": "header", "hyper": {"betas": [0.9, math.nan]}, "x": [math.inf]})
    assert b"null" not in line


def test_throughput_and_eta_names_are_clocks() -> None:
    from tuimon.clocks import is_clock

    for name in ("eta", "wps", "tflops", "img_s", "tok_s", "tokens_s", "it_s", "samples_per_sec"):
        assert is_clock(name), name
    for name in ("loss", "train_loss", "lr", "acc1", "norm", "steps", "items", "loss_s"):
        assert not is_clock(name), name


def test_sigterm_while_a_step_is_written_counts_it_in_the_end_record():
    """A SIGTERM that comes while `tuimon train` writes a step record waits for the record and
    its count: the end record's step count is the records the log holds (issue 41: a pane's
    header said 3/30 steps while its end row said 2)."""
    import io

    import pytest

    from tuimon.steplog import StepLogger
    from tuimon.workload import train

    out = io.BytesIO()
    logger = train._WholeSteps(out)
    write = StepLogger._write

    def signalled(self: StepLogger, obj: dict) -> None:
        write(self, obj)
        if obj.get("type") == "step" and obj["step"] == 2:
            train._raise_terminated(15, None)  # the handler runs here, mid-step

    logger._write = signalled.__get__(logger)  # type: ignore[method-assign]
    with pytest.raises(train.Terminated):
        for step in range(5):
            logger.step(step, loss=1.0)
    logger.close("interrupted")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 3 and records[-1]["steps"] == 3
    assert not train._Hold.depth and not train._Hold.pending
