"""`compare`'s CSV columns path (`tuimon.readers.csv_columns`,
`engine.sources.log_blocks._judge_tables`; side b read by a worker process or not) gives
exactly what the general path gives (records
from `read_csv`, matched block by block):
the same summary (verdict, first divergent step, counts, per-metric maxima) and the same
account of every line, on generated CSVs with text cells, empty cells, repeated steps, a
second run appended, a cut last line, blank lines, wide headers and steps on one side only."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuimon.engine.analyses import compare as engine_compare
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.sources import log_blocks
from tuimon.readers import Reading, csv_columns
from tuimon.readers.csv_columns import CsvColumns, _cells, read_csv_columns, read_csv_pair
from tuimon.store import SavedLogs

ODD_CELLS = ["nan", "-0", "1e400", "", "x", " 2.5", "1.", ".5", "inf", "-nan", "1_0", "+3"]


def judged(
    a: Path,
    b: Path,
    how: str,
    select: MetricFilter | None = None,
    reading: Reading | None = None,
) -> dict[str, Any]:
    """The summary and each side's counts of `compare` of two files, by the columns path
    (where the file allows it: `how` "fast", or "apart" with side b read by a worker
    process), else ("general") by the general path only."""
    old = log_blocks.read_csv_columns, log_blocks._workers
    if how == "general":
        log_blocks.read_csv_columns = lambda *args: None  # type: ignore[assignment]
    log_blocks._workers = lambda logs, keep: how == "apart" and not keep  # type: ignore
    try:
        got = engine_compare.judge(SavedLogs(a, b, reading=reading or Reading()), 0.0, select)
    finally:
        log_blocks.read_csv_columns, log_blocks._workers = old
    return {
        "summary": got.summary.to_dict(),
        "logs": [(log.steps, log.texts, log.first_text) for log in got.logs],
    }


def same_both_ways(
    a: Path, b: Path, select: MetricFilter | None = None, reading: Reading | None = None
) -> dict[str, Any]:
    """Judge all three ways, assert they agree, return the judgement (or the error line)."""
    results = []
    for how in ("fast", "apart", "general"):
        try:
            results.append(judged(a, b, how, select, reading))
        except engine_compare.CompareError as exc:
            results.append({"error": str(exc)})
    assert results[0] == results[1] == results[2]
    return results[0]


def write_csv(path: Path, header: list[str], rows: list[list[str]], end: str = "\n") -> Path:
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(r) for r in rows) + end)
    return path


def numeric_rows(steps: list[int], width: int, seed: int, part_at: int | None) -> list[list[str]]:
    """A row per step, its values by the step (a step has the same values on both sides
    until `part_at`)."""
    table = np.random.default_rng(seed).random((max(steps) + 1, width))
    rows = []
    for step in steps:
        row = table[step].tolist()
        if part_at is not None and step >= part_at:
            row = [v * (1 + 1e-9) for v in row]
        rows.append([str(step), *map(repr, row)])
    return rows


@st.composite
def csv_pairs(draw: st.DrawFn) -> tuple[list[str], list[list[str]], list[list[str]], dict]:
    names = draw(
        st.lists(
            st.sampled_from(["loss", "acc", "lr", "time", "epoch", "global_step", "m1", "m2"]),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    n = draw(st.integers(min_value=1, max_value=40))
    steps = list(range(0, 10 * n, 10))
    if draw(st.booleans()):  # a second run appended: the steps start again
        steps = steps + steps[: draw(st.integers(min_value=1, max_value=n))]
    if draw(st.booleans()):  # a step logged twice
        at = draw(st.integers(min_value=0, max_value=len(steps) - 1))
        steps.insert(at, steps[at])
    part_at = draw(st.one_of(st.none(), st.sampled_from(steps)))
    a = numeric_rows(steps, len(names), 1, None)
    b = numeric_rows(steps, len(names), 1, part_at)
    if draw(st.booleans()):  # steps on one side only
        b = b[: draw(st.integers(min_value=1, max_value=len(b)))]
    for rows in (a, b):
        if draw(st.booleans()):  # an odd cell: text, empty, -0, an overflow, a spelling
            row = draw(st.integers(min_value=0, max_value=len(rows) - 1))
            col = draw(st.integers(min_value=0, max_value=len(names)))
            rows[row][col] = draw(st.sampled_from(ODD_CELLS))
    shape = {
        "end": draw(st.sampled_from(["\n", "", "\n\n"])),  # a cut last line, a blank line
        "blank": draw(st.booleans()),
    }
    return ["step", *names], a, b, shape


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(csv_pairs())
def test_csv_columns_judge_as_the_general_path(tmp_path: Path, pair: Any) -> None:
    header, rows_a, rows_b, shape = pair
    if shape["blank"] and len(rows_a) > 2:
        rows_a = [*rows_a[:2], [""], *rows_a[2:]]
    a = write_csv(tmp_path / "a.csv", header, rows_a, shape["end"])
    b = write_csv(tmp_path / "b.csv", header, rows_b)
    same_both_ways(a, b)
    same_both_ways(a, b, MetricFilter(ignore=("m*",)))


def test_the_columns_path_is_taken_for_a_plain_csv_and_agrees(tmp_path: Path) -> None:
    steps = list(range(0, 300, 3))
    header = ["step", "train_loss", "test_loss", "lr", "step_time_ms", "epoch"]
    a = write_csv(tmp_path / "a.csv", header, numeric_rows(steps, 5, 2, None))
    b = write_csv(tmp_path / "b.csv", header, numeric_rows(steps[5:], 5, 2, 150))
    table = read_csv_columns(a)
    assert table is not None and table.metrics == ["train_loss", "test_loss", "lr", "epoch"]
    assert table.clocks == ["step_time_ms"] and table.values.shape == (4, len(steps))
    got = same_both_ways(a, b)["summary"]
    assert got["verdict"] == "DIVERGED" and got["first_divergent_step"] == 150
    assert (got["unmatched_a"], got["unmatched_b"]) == (5, 0)
    assert "step_time_ms" in got["ignored"]


def whole(table: CsvColumns | None, shared: CsvColumns | None = None) -> Any:
    """A table as plain data, its rows shared with side a's table put back."""
    if table is None:
        return None
    values = table.values
    if table.shared:
        assert shared is not None and shared.metrics == table.metrics
        values = np.concatenate([shared.values[:, : table.shared], values], axis=1)
    return (table.steps.tolist(), table.metrics, table.clocks, values.tobytes())


def test_a_pair_read_with_a_worker_reads_their_shared_lines_once(tmp_path: Path) -> None:
    header = ["step", "loss", "t", "lr"]
    rows = numeric_rows(list(range(0, 900, 3)), 3, 4, None)
    a = write_csv(tmp_path / "a.csv", header, rows)
    b = write_csv(tmp_path / "b.csv", header, numeric_rows(list(range(0, 960, 3)), 3, 4, 600))
    tables = read_csv_pair(a, b)
    assert tables is not None
    got_a, got_b = tables()
    want_a, want_b = read_csv_columns(a), read_csv_columns(b)
    assert got_b is not None and got_b.shared == 200  # the rows before step 600, read once
    assert got_b.values.shape == (2, 320 - 200)  # side b holds only its own rows
    assert whole(got_a) == whole(want_a) and whole(got_b, got_a) == whole(want_b)
    odd = write_csv(tmp_path / "odd.csv", header, [*rows[:5], ["0", "1", "2", "x"]])
    tables = read_csv_pair(a, odd)
    assert tables is not None
    got_a, got_b = tables()
    assert whole(got_a) == whole(want_a) and got_b is None
    (tmp_path / "c.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    assert read_csv_pair(a, tmp_path / "c.jsonl") is None  # no worker for a file of another kind
    tables = read_csv_pair(tmp_path / "c.jsonl", b)
    assert tables is not None
    got_a, got_b = tables()
    assert got_a is None and whole(got_b) == whole(want_b)


@st.composite
def csv_twins(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two CSV files that hold the same bytes up to some point (a rerun that parts, a copy,
    one cut short or carried on), with odd lines or headers of their own now and then."""
    width = draw(st.integers(1, 4))
    header = "step," + ",".join(["loss", "time", "acc", "lr"][:width]) + "\n"
    n = draw(st.integers(0, 60))
    steps = list(range(n))
    if n and draw(st.booleans()):
        steps[draw(st.integers(0, n - 1))] = 0  # a step again: several runs or a repeat
    rows = numeric_rows(steps or [0], width, 5, None)[:n]
    lines = [",".join(r) + "\n" for r in rows]
    a = (header + "".join(lines)).encode()
    how = draw(st.sampled_from(["parts", "same", "cut", "longer", "other header", "odd"]))
    at = draw(st.integers(0, len(a)))
    if how == "parts":
        tail = numeric_rows(list(range(n + 5)), width, 6, None)[n // 2 :]
        b = a[:at] + "".join(",".join(r) + "\n" for r in tail).encode()
    elif how == "cut":
        b = a[:at]
    elif how == "longer":
        b = (
            a
            + "".join(",".join(r) + "\n" for r in numeric_rows([n, n + 1], width, 7, None)).encode()
        )
    elif how == "other header":
        b = a.replace(b"step,", b"step ,", 1)
    elif how == "odd":
        b = (
            a[:at]
            + draw(st.sampled_from([b"x\n", b"\n", b"1,nan\n", b'"1",2\n', b"-0,1\n"]))
            + a[at:]
        )
    else:
        b = a
    if draw(st.booleans()):
        a, b = b, a
    return a, b


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(csv_twins())
def test_a_pair_read_with_a_worker_is_each_side_read_alone(tmp_path: Path, pair: Any) -> None:
    """Whatever the two files share, and however they part, the pair's tables are the ones
    `read_csv_columns` gives for each file alone, to the bit."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(pair[0])
    b.write_bytes(pair[1])
    with pytest.MonkeyPatch.context() as mp:  # the files compared a few bytes at a time
        mp.setattr(csv_columns, "SHARED_BLOCK", 16)
        tables = read_csv_pair(a, b)
    want_a, want_b = read_csv_columns(a), read_csv_columns(b)
    if tables is None:
        assert want_b is None
        return
    got_a, got_b = tables()
    assert whole(got_a) == whole(want_a)
    assert whole(got_b, got_a) == whole(want_b)


@pytest.mark.parametrize("odd", [None, "x", ""])
def test_a_wide_csv_judges_as_the_general_path(tmp_path: Path, odd: str | None) -> None:
    width = 3000
    header = ["step", *(f"m{i}" for i in range(width))]
    rows_a = numeric_rows(list(range(6)), width, 3, None)
    rows_b = numeric_rows(list(range(6)), width, 3, 4)
    if odd is not None:
        rows_b[2][1234] = odd
    a = write_csv(tmp_path / "a.csv", header, rows_a)
    b = write_csv(tmp_path / "b.csv", header, rows_b)
    assert (read_csv_columns(b) is None) == (odd is not None)
    got = same_both_ways(a, b)["summary"]
    # a text or empty cell against a number: a value on one side only, a difference
    assert got["verdict"] == "DIVERGED"
    assert got["first_divergent_step"] == (4 if odd is None else 2)
    assert got["first_one_sided"] == ([] if odd is None else ["m1233"])
    assert got["values_compared"] == 6 * width
    assert got["values_one_sided"] == (odd is not None)


def test_rows_of_other_widths_that_make_up_for_each_other_are_read_row_by_row(
    tmp_path: Path,
) -> None:
    """A short row and a long one hold the right number of cells between them: read as one
    array they would shift every later cell (step 1's acc, a step 6 that is not there). Each
    is said not read (which value is whose cannot be known), never a step made up."""
    a = tmp_path / "a.csv"
    a.write_text("step,loss,acc\n0,0.5,0.25\n1,5\n2,6,7,8\n3,0.5,0.25\n")
    b = write_csv(tmp_path / "b.csv", ["step", "loss", "acc"], numeric_rows([0, 1, 2, 3], 2, 1, 1))
    assert read_csv_columns(a) is None
    got = same_both_ways(a, b)["summary"]
    assert (got["unmatched_a"], got["unmatched_b"]) == (0, 2)
    assert got["accounts"]["a"]["skipped"] == {"unreadable": 2}, got["accounts"]["a"]


def test_a_second_run_in_the_file_is_said_and_every_run_compared(tmp_path: Path) -> None:
    header = ["step", "loss"]
    rows = numeric_rows([0, 1, 2, 3, 0, 1, 2], 1, 4, None)
    a = write_csv(tmp_path / "a.csv", header, rows)
    assert read_csv_columns(a) is None  # runs, repeats: the general reader, run by run
    got = same_both_ways(a, a)
    summary = got["summary"]
    assert summary["steps_compared"] == 7 and "2 runs" in summary["accounts"]["a"]["notes"][0]
    other = [list(r) for r in rows]
    other[1][1] = str(float(other[1][1]) + 1)  # the first run differs, the last does not
    b = write_csv(tmp_path / "b.csv", header, other)
    summary = same_both_ways(a, b)["summary"]
    assert summary["verdict"] == "DIVERGED" and summary["first_divergent_step"] == 1


def test_a_saved_csv_comparison_keeps_the_lines(tmp_path: Path) -> None:
    header = ["step", "loss"]
    a = write_csv(tmp_path / "a.csv", header, numeric_rows(list(range(20)), 1, 5, None))
    b = write_csv(tmp_path / "b.csv", header, numeric_rows(list(range(20)), 1, 5, 7))
    got = engine_compare.judge(SavedLogs(a, b, reading=Reading()), 0.0, keep=True)
    assert [len(log.lines) for log in got.logs] == [20, 20]
    assert got.summary.first_divergent_step == 7 and len(got.aligned) == 20
    assert got.doc.summary["first_divergent_step"] == 7


CELL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from([*ODD_CELLS, "-0.0", "-0e3", "1E5", "00", "0x10", "nan(1)", "\t3", "1e-400"]),
    st.sampled_from(["true", "null", "[2]", "{}", "NaN", "Infinity", "1e5e", "--1", "1 2"]),
    st.text(alphabet="0123456789.eE+-_ naif\t", max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(CELL, min_size=1, max_size=6))
def test_cells_read_as_float_reads_them_or_not_at_all(cells: list[str]) -> None:
    line = ("0," + ",".join(cells) + "\n").encode()  # a step, then the cells
    try:
        want = [float(c) for c in cells]
    except ValueError:
        want = None
    try:
        got = _cells(line, len(cells) + 1, 0).tolist()[1:]
    except ValueError:
        return  # the general reader reads such a line (loadtxt reads a subset of float())
    if len(got) != len(cells):
        return  # a blank line: `_block` sees the count and leaves it to the general reader
    assert want is not None
    for x, y in zip(got, want, strict=True):
        assert struct.pack("<d", x) == struct.pack("<d", y) or (math.isnan(x) and math.isnan(y))


@pytest.mark.parametrize("rows", [7, 4096])
def test_csv_against_json_lines_and_in_small_blocks(tmp_path: Path, monkeypatch, rows: int) -> None:
    import json

    monkeypatch.setattr(log_blocks, "TABLE_ROWS", rows)
    monkeypatch.setattr(log_blocks, "TABLE_MIN", 1)
    steps = list(range(0, 120, 2))
    header = ["step", "loss", "acc"]
    a = write_csv(tmp_path / "a.csv", header, numeric_rows(steps, 2, 6, None))
    b = write_csv(tmp_path / "b.csv", header, numeric_rows(steps[3:], 2, 6, 60))
    lines = [
        json.dumps({"step": int(r[0]), "loss": float(r[1]), "acc": float(r[2])})
        for r in numeric_rows(steps, 2, 6, 90)
    ]
    c = tmp_path / "c.jsonl"
    c.write_text("\n".join(lines) + "\n")
    got = same_both_ways(a, b)["summary"]
    assert got["first_divergent_step"] == 60 and got["unmatched_a"] == 3
    got = same_both_ways(a, c)["summary"]
    assert got["first_divergent_step"] == 90 and got["steps_compared"] == len(steps)


@pytest.mark.parametrize("native", [False, True])
def test_two_objects_on_one_line_read_as_a_live_pair_reads_the_line(
    tmp_path: Path, native: bool
) -> None:
    """Blocks of lines are parsed line by line: `{...}, {...}` on one line is not two rows
    (as a block parsed as one JSON array would have it), it is what the line reader says."""
    import json

    from tuimon.engine.judge.align import compare_steps
    from tuimon.readers import load

    def row(step: int, loss: float) -> str:
        kind = {"type": "step"} if native else {}
        return json.dumps({**kind, "step": step, "loss": loss})

    head = ['{"type": "header", "format": "tuimon.steplog/1", "run": {}}'] if native else []
    lines = [*head, *(row(s, 0.5 + s) for s in range(10))]
    lines[5] = row(4, 4.5) + ", " + row(40, 9.0)
    a = tmp_path / "a.jsonl"
    a.write_text("\n".join(lines) + "\n")
    got = engine_compare.judge(SavedLogs(a, a, reading=Reading()), 0.0).summary
    _, aligner = compare_steps(load(a).steps, load(a).steps, 0.0)
    want = aligner.summary()
    assert (got.steps_compared, got.values_compared) == (want.steps_compared, want.values_compared)
    assert got.steps_compared == 9 and got.accounts["a"]["skipped"] == {"unreadable": 1}


@pytest.mark.parametrize("key", [None, "iter", "Iter", "acc"])
def test_a_step_column_that_is_not_first_and_step_key(tmp_path: Path, key: str | None) -> None:
    steps = list(range(1, 50))
    rows_a = [[r[1], r[0], r[2]] for r in numeric_rows(steps, 2, 7, None)]
    rows_b = [[r[1], r[0], r[2]] for r in numeric_rows(steps, 2, 7, 30)]
    header = ["loss", "Iter" if key == "Iter" else "iter", "acc"]
    a = write_csv(tmp_path / "a.csv", header, rows_a)
    b = write_csv(tmp_path / "b.csv", header, rows_b)
    got = same_both_ways(a, b, reading=Reading(step_key=key) if key else None)
    if key != "acc":  # acc holds no integers: no steps, the same error both ways
        assert got["summary"]["first_divergent_step"] == 30
    else:
        assert "no training steps" in got["error"]


def test_a_wide_csv_parting_everywhere_is_told_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every one of 3,000 columns parts at one step: the headline names a few and counts the
    rest (it listed all of them: a line of 1.2 MB at 100,000 columns); --json keeps them all."""
    import json

    from tuimon.cli import main

    header = ",".join(["step", *(f"m{i}" for i in range(3000))])
    for side, bump in (("a", 0.0), ("b", 1e-9)):
        rows = [f"{s}," + ",".join(str(1.0 + (bump if s == 2 else 0.0)) for _ in range(3000))
                for s in range(4)]  # fmt: skip
        (tmp_path / f"{side}.csv").write_text("\n".join([header, *rows]) + "\n")
    a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    assert main(["compare", a, b]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("DIVERGED: first divergent step 2 (m0, m1,")
    assert "and 2,988 more)" in first and len(first) < 300
    assert main(["compare", a, b, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["first_divergent_metrics"]) == 3000


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=st.binary(max_size=80).map(lambda x: x.replace(b"\x00", b"\n")) | st.just(b"x\n" * 9),
    b=st.binary(max_size=80).map(lambda x: x.replace(b"\x00", b"\n")) | st.just(b"x\n" * 9),
    common=st.sampled_from([b"", b"h\nx\nx\nx\nx\nx\nx\n", b"step\n0\n1\n2\n33\n"]),
    block=st.integers(1, 9),
    start=st.integers(0, 12),
)
def test_the_bytes_two_files_share_end_a_line(
    tmp_path: Path, a: bytes, b: bytes, common: bytes, block: int, start: int
) -> None:
    """`_shared`: the longest common start of the two files, cut after its last newline (0
    when that is not past `start`), however the files are cut into blocks to compare (a
    short last block never compared with what an earlier block left in the buffer)."""
    x, y = common + a, common + b
    same = 0
    while same < min(len(x), len(y)) and x[same] == y[same]:
        same += 1
    want = x.rfind(b"\n", 0, same) + 1
    pa, pb = tmp_path / "a.csv", tmp_path / "b.csv"
    pa.write_bytes(x)
    pb.write_bytes(y)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(csv_columns, "SHARED_BLOCK", block)
        assert csv_columns._shared(pa, pb, start) == (want if want > start else 0)
