"""The UI's pure parts: text safety, first differing digit, bounded series, buffers, the model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from demo_pairs import write_demo
from helpers import heavy_modules_after
from hypothesis import given
from hypothesis import strategies as st

from tuimon.engine.sources.saved_pair import SavedPair
from tuimon.steplog import End, Header, Step, Text
from tuimon.ui.divergence import spark_data
from tuimon.ui.pair_model import (
    DIVERGENCE,
    PRELUDE,
    PairModel,
    PairRows,
    choose_columns,
    env_rows,
)
from tuimon.ui.series import EQUAL_LEVEL, BucketSeries, CurveSeries, levels
from tuimon.ui.text import cell, clean, fmt_number


def test_clean_makes_escapes_and_controls_visible() -> None:
    assert clean("\x1b[31mred\x1b[0m\x07") == "^[[31mred^[[0m^G"
    assert clean("\x9b2J\x7f") == "\\x9b2J^?"
    assert clean("a\tb") == "a   b"
    assert clean("x" * 50, limit=10) == "x" * 9 + "…"
    assert clean("[bold red]boom[/]") == "[bold red]boom[/]"


def test_cell_highlights_the_first_differing_digit() -> None:
    assert cell(4.58, 4.59, 12) == ("4.58000", 3)
    assert cell(4.59, 4.58, 12) == ("4.59000", 3)
    assert cell(1.5, 1.5, 12) == ("1.5", None)
    assert cell(1.5, None, 12) == ("1.5", None)
    assert cell(None, 1.5, 12) == ("·", None)
    # differing beyond what fits: the shared digits are cut in the middle, the differing
    # digit stays on screen, and the two sides never read the same
    assert cell(4.588051234567, 4.588051234568, 10) == ("4.5…234567", 9)
    assert cell(4.588051234568, 4.588051234567, 10) == ("4.5…234568", 9)
    one_ulp = np.nextafter(4.7490261234567891, 5.0)
    mine, theirs = cell(4.7490261234567891, one_ulp, 10), cell(one_ulp, 4.7490261234567891, 10)
    assert mine[0] != theirs[0] and mine[0].startswith("4.7…") and mine[1] == theirs[1]
    assert cell(-1234567.890123, -1234567.890124, 10) == ("-1….890123", 9)
    assert cell(2.000000001e-7, 2.000000002e-7, 10) == ("2.0…01e-07", 5)
    # 0.0 and -0.0 differ in their bits: the sign shows it
    assert cell(0.0, 0.0, 10) == ("0", None)  # cached first: -0.0 == 0.0 must not hit it
    assert cell(-0.0, 0.0, 10) == ("-0.00000", 0)
    assert cell(0.0, -0.0, 10) == ("0.00000", 0)


@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=4, max_value=20),
)
def test_cell_fits_and_never_hides_a_difference(a: float, b: float, width: int) -> None:
    text, at = cell(a, b, width)
    assert len(text) <= width
    same = a == b and np.copysign(1, a) == np.copysign(1, b)
    assert (at is None) == same
    if at is not None:
        assert 0 <= at < len(text)
        other, _ = cell(b, a, width)
        if width >= 10 and len(text) == len(other):  # the lit digit tells the two apart
            assert text != other or text[at] == "…"


def test_fmt_number_specials() -> None:
    assert fmt_number(float("nan"), 5) == "nan"
    assert fmt_number(float("-inf"), 5) == "-inf"
    assert fmt_number(None, 5) == "·"


def test_bucket_series_stays_bounded_and_keeps_maxima() -> None:
    series = BucketSeries(200)
    for start in range(0, 25_000, 997):
        series.extend(np.arange(start, min(start + 997, 25_000), dtype=float))
    assert len(series) <= 200
    assert series.points == 25_000
    data = series.data()
    assert data[-1] == 24_999.0
    assert data == sorted(data)
    assert series.width == 128


def test_bucket_series_one_by_one_matches_bulk() -> None:
    bulk, single = BucketSeries(8), BucketSeries(8)
    values = np.random.default_rng(0).normal(size=77)
    bulk.extend(values)
    for v in values:
        single.extend([v])
    assert bulk.data() == single.data()


def test_curve_series_decimates_and_keeps_the_last_point() -> None:
    curve = CurveSeries(16)
    curve.extend(np.arange(1000.0), np.arange(1000.0) * 2)
    x, y = curve.arrays()
    assert len(curve) <= 16
    assert x[0] == 0 and x[-1] == 999 and y[-1] == 1998
    assert np.all(np.diff(x) > 0)


def test_levels_put_equal_steps_below_every_real_difference() -> None:
    out = levels(np.array([0.0, 1e-17, 1e-3, np.inf]), np.array([True, False, False, False]))
    assert out[0] == EQUAL_LEVEL
    assert out[0] < out[1] < out[2] < out[3]
    values, lo, hi, floor = spark_data([EQUAL_LEVEL, -9.0, -3.0])
    assert lo == -9.0 and hi == -3.0
    assert values[0] == floor < -9.0
    values, lo, hi, floor = spark_data([-10.0, -10.0, -1.0])  # no step equal: none at the floor
    assert floor < min(values)


def test_pair_rows_are_bounded_and_indexes_steps() -> None:
    rows = PairRows(100)
    rows.add("a", [Step(i, {"x": float(i)}) for i in range(50)], ["warn"])
    rows.add("a", [Text("[bold]x[/]")])
    dropped = rows.add("a", [Step(i, {"x": float(i)}) for i in range(50, 25_000)])
    assert len(rows) == 100
    assert dropped == 52  # a huge batch keeps only its last max_lines records
    assert rows.index_of(24_999) == 99
    assert rows.index_of(10) is None
    assert len(rows.rows_of) == 100


def test_pair_rows_align_the_two_sides_by_step() -> None:
    rows = PairRows(100)
    rows.add("a", [Header({}, {}, {}), *(Step(i, {"x": 1.0}) for i in range(5))])
    rows.add("b", [Header({}, {}, {}), Step(0, {"x": 1.0})], ["warn b"])
    rows.add("b", [Step(i, {"x": 2.0}) for i in range(1, 3)])
    assert len(rows) == 1 + 5 + 1  # both headers share a row; b's stderr sits after step 4
    assert rows.index_of(2, "a") == rows.index_of(2, "b") == 3
    assert rows.index_of(4, "a") == 5 and rows.index_of(4, "b") is None
    assert rows.entries[0][1].keys() == {"a", "b"}
    assert rows.entries[6][1] == {"b": ("stderr", "warn b")}


def test_a_late_sides_first_lines_come_before_its_steps() -> None:
    """A side that logs after the other has steps (a file that appears late): its note, header
    and start-up lines stand before its steps, side by side with the other side's rows."""
    rows = PairRows(100)
    rows.add("a", [Header({}, {}, {}), *(Step(i, {"x": 1.0}) for i in range(5))])
    rows.add("b", [], ["not there yet"])
    rows.add("b", [Header({}, {}, {}), Text("compiling"), *(Step(i, {"x": 1.0}) for i in range(3))])
    texts = [(i, e[1].get("b")) for i, e in enumerate(rows.entries) if e[0] is None]
    header = ("note", "header · tuimon.steplog/1")
    assert texts == [(0, ("stderr", "not there yet")), (1, header), (2, ("text", "compiling"))]
    assert rows.entries[0][1]["a"] == header
    assert rows.index_of(0, "a") == rows.index_of(0, "b") == 3
    assert rows.index_of(4, "a") == 7 and rows.index_of(2, "b") == 5
    rows.add("b", [Text("after its steps")])  # once a side has steps: the rule as before
    assert rows.entries[-1] == (None, {"b": ("text", "after its steps")}) and len(rows) == 9
    late = PairRows(100)
    late.add("a", [Step(i, {"x": 1.0}) for i in range(3)])
    late.add("b", [Text(f"line {i}") for i in range(PRELUDE + 5)])
    before = [i for i, e in enumerate(late.entries) if e[0] is None and i < late.index_of(0)]
    assert len(before) == PRELUDE and len(late) == 3 + PRELUDE + 5  # the rest at the end


def test_a_side_behind_shows_its_restart_where_it_came() -> None:
    """`pair --resume-at`: side b stops after step 1 and starts again while a is ahead; its end
    and header notes and tuimon's line sit between its steps 1 and 2, not after a's last row."""
    rows = PairRows(100)
    rows.add("a", [Step(i, {"x": 1.0}) for i in range(6)])
    restart = "tuimon: run b stopped after step 1 and saved its checkpoint; restarted from it"
    rows.add("b", [Step(0, {"x": 1.0}), Step(1, {"x": 1.0}), End("ok", 2)], [restart])
    rows.add("b", [Header({}, {}, {}), Step(2, {"x": 1.0})], ["a warning"])
    said = [e[1].get("b") for e in list(rows.entries)[2:5]]
    assert said == [("note", "end · ok · 2 steps"), ("stderr", restart),
                    ("note", "header · tuimon.steplog/1")]  # fmt: skip
    assert rows.index_of(2, "a") == rows.index_of(2, "b") == 5
    assert rows.entries[-1] == (None, {"b": ("stderr", "a warning")})  # a run's own: at the end


def test_columns_put_losses_first() -> None:
    assert choose_columns(["lr", "test_acc", "train_loss", "test_loss", "x"]) == [
        "train_loss",
        "test_loss",
        "test_acc",
        "lr",
        "x",
    ]


def test_env_rows_put_differences_first() -> None:
    rows = env_rows(
        {"env": {"threads": 1, "device": "cpu"}}, {"env": {"threads": 2, "device": "cpu"}}
    )
    assert [(r.key, r.differs) for r in rows] == [("env.threads", True), ("env.device", False)]


def test_model_from_aligned_steps(tmp_path: Path) -> None:
    pair = SavedPair(*write_demo(tmp_path, steps=500, diverge=7))
    aligned, aligner = pair.judged
    model = PairModel()
    model.add_records("a", pair.steps("a"))
    model.summary = aligner.summary()
    for start in range(0, len(aligned), 64):
        model.add_aligned(aligned[start : start + 64])
    assert model.first is not None and model.first.step == 7 == model.first_divergent_step
    assert model.first.tensors == ("W_E",)
    row = next(s for s in aligned if s.step == 7)
    assert model.first.metrics["train_loss"] == (
        row.diffs["train_loss"].a, row.diffs["train_loss"].b,
        row.diffs["train_loss"].rel, row.diffs["train_loss"].ulps,
    )  # fmt: skip
    assert model.first_line() == (
        "first divergence: step 7 (train_loss, test_loss, train_acc) · tensors: W_E"
    )
    assert model.columns[:2] == ["train_loss", "test_loss"]
    assert len(model.spark[DIVERGENCE]) <= 200
    assert set(model.series_names()) >= {DIVERGENCE, "train_loss", "test_loss"}
    assert model.aligned_count == 500


def test_importing_the_app_does_not_import_torch() -> None:
    code = "import tuimon.ui.app, tuimon.ui.browser, tuimon.ui.pair_screen"
    assert heavy_modules_after(code, heavy=("torch",)) == "LOADED []"


def test_model_takes_which_step_from_the_summary(tmp_path: Path) -> None:
    """The summary owns the first divergent step; the model keeps the values at that step."""
    aligned, aligner = SavedPair(*write_demo(tmp_path, steps=50, diverge=7)).judged
    model = PairModel()
    model.add_aligned(aligned)  # no summary yet: no step is the first divergence
    assert model.first is None and model.first_divergent_step is None
    said = replace(aligner.summary(), first_divergent_step=9, first_divergent_metrics=["x"])
    model.summary = said
    model.add_aligned(aligned)
    assert model.first is not None and model.first.step == 9
    assert model.first_line().startswith("first divergence: step 9 (x)")


def test_rows_follow_the_side_that_is_behind_and_keep_its_steps() -> None:
    """A fast side far ahead of a slow one: the view follows the slow side's last row (both
    panes show the same steps), and the rows it has not reached are kept for it, so its late
    lines are shown beside the fast side's, not dropped."""
    rows = PairRows(100)
    rows.running = {"a", "b"}
    for start in range(0, 500, 50):  # batches as a live view gets them
        rows.add("a", [Step(s, {"loss": 1.0}) for s in range(start, start + 50)])
    assert rows.follow_end() == len(rows)  # one side has logged: follow the end
    rows.add("b", [Step(s, {"loss": 1.0}) for s in range(10)])
    assert len(rows) == 500 and rows.follow_end() == 10  # nothing b has not reached is dropped
    for start in range(10, 300, 10):
        rows.add("b", [Step(s, {"loss": 1.0}) for s in range(start, start + 10)])
    assert rows.index_of(299, "b") == rows.index_of(299, "a") == rows.follow_end() - 1
    assert rows.index_of(250, "b") is not None  # half a buffer before b's last row stays
    assert rows.start >= 200 and rows.index_of(150) is None  # what both passed is trimmed
    rows.running = {"b"}  # a finished: b is still the one to follow
    assert rows.follow_end() == rows.index_of(299) + 1
    rows.running = set()
    assert rows.follow_end() == len(rows)


def test_rows_kept_for_a_side_far_behind_are_bounded() -> None:
    rows = PairRows(10)
    rows.running = {"a", "b"}
    rows.add("b", [Step(0, {"loss": 1.0})])
    for start in range(0, 1000, 50):
        rows.add("a", [Step(s, {"loss": 1.0}) for s in range(start, start + 50)])
    assert len(rows) <= 10 * 10


def test_pane_titles_leave_out_bookkeeping_and_side_letters() -> None:
    from tuimon.report.wording import differing_words, title_words

    a = "/v/bin/python -m tuimon train --device cpu --threads 2 --seed 0 --save-emb /p/emb-a.npy"
    b = "/v/bin/python -m tuimon train --device cuda --threads 1 --seed 0 --save-emb /p/emb-b.npy"
    assert title_words(a) == ["tuimon", "train", "--threads", "2", "--seed", "0"]
    assert differing_words(title_words(a), title_words(b)) == ["--threads", "2"]
    mine, theirs = ["t.py", "--side", "a", "--lr", "1"], ["t.py", "--side", "b", "--lr", "2"]
    assert differing_words(mine, theirs) == ["--lr", "1"]
    assert title_words("python my_train.py --device cpu") == ["my_train.py", "--device", "cpu"]


def test_export_never_writes_through_a_link_in_a_saved_pair(tmp_path: Path) -> None:
    """A pair folder is data: an `aligned.csv` there that is a link (even one pointing nowhere)
    is never written through; the export takes the next free name."""
    from tuimon.ui.pager import export_rows

    elsewhere = tmp_path / "elsewhere.txt"
    (tmp_path / "aligned.csv").symlink_to(elsewhere)
    (tmp_path / "aligned-1.csv").write_text("kept")
    (tmp_path / "aligned-2.csv").mkdir()
    kept = ({1: {"a": 2.0}}, {1: {"a": 2.0}})
    written, count, _ = export_rows(None, kept, tmp_path / "aligned.csv")
    assert written == tmp_path / "aligned-3.csv" and count == 1
    header, row = written.read_text().splitlines()
    assert header.startswith("step,") and "a.a" in header.split(",")
    assert row.startswith("1,")
    assert not elsewhere.exists()
    assert (tmp_path / "aligned-1.csv").read_text() == "kept"


async def test_a_step_that_differs_is_never_drawn_as_bitwise_equal() -> None:
    """The lowest bar `▁` is the legend's "bitwise equal": steps 1e-10 apart (cuda against cpu
    from step 0) draw above it even when no step of the pair is equal."""
    from textual.app import App, ComposeResult

    from tuimon.ui.sparkbars import SparkBars

    class Bars(App[None]):
        def compose(self) -> ComposeResult:
            yield SparkBars(id="spark")

    app = Bars()
    async with app.run_test(size=(40, 3)) as pilot:
        bars = app.query_one(SparkBars)
        values, _, _, floor = spark_data([-10.0] * 8 + [-1.0] * 8)
        bars.set_data(values, floor=floor)
        await pilot.pause()
        row = "".join(seg.text for seg in bars.render_line(0))
        assert "▁" not in row.strip() and row.strip()
        values, _, _, floor = spark_data([EQUAL_LEVEL] * 4 + [-10.0] * 4)
        bars.set_data(values, floor=floor)
        await pilot.pause()
        row = "".join(seg.text for seg in bars.render_line(0)).strip()
        assert row[:4] == "▁" * 4 and "▁" not in row[4:]


def test_the_environment_views_agree_on_each_sides_own_files() -> None:
    """`e` and `i` read one rule: commands that differ only in each side's own file (the
    reference pair's `--save-emb .../emb-a.npy`) are no difference in either (issue 41)."""
    from types import SimpleNamespace

    from tuimon.steplog import parse_line
    from tuimon.ui.pair_model import PairModel

    a = "python -m tuimon train --seed 0 --save-emb /s/p/emb-a.npy"
    model = PairModel()
    header = parse_line(b'{"type": "header", "format": "tuimon.steplog/1", "env": {"t": "2"}}')
    model.headers = {"a": header, "b": header}  # type: ignore[dict-item]
    model.sides = {
        "a": SimpleNamespace(command=a),
        "b": SimpleNamespace(command=a.replace("emb-a", "emb-b")),
    }  # type: ignore[assignment]
    rows = model.env_rows()
    assert rows and rows[0].key == "command" and not rows[0].differs
    model.sides["b"] = SimpleNamespace(command=a.replace("--seed 0", "--seed 1"))  # type: ignore[assignment]
    assert model.env_rows()[0].differs
