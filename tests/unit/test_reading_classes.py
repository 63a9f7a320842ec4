"""Classes of real logs read by rule (issue 39): each class written here in its shape, read
for its steps and metric names, and compared against itself, against a copy with one value
changed (DIVERGED at that step) and against a copy with only its clocks changed."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import twin

from tuimon.cli import main
from tuimon.clocks import is_clock, mask_clocks
from tuimon.readers import load
from tuimon.readers.rows_to_steps import LEVEL

Value = Callable[[int], float]
Writer = Callable[[Value, float], str]
ROWS = 15


def base(i: int) -> float:
    return 3.0 / (i + 1) + 0.01


def compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *args])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _lines(rows: list[str]) -> str:
    return "".join(row + "\n" for row in rows)


def nested_jsonl(value: Value, clock: float) -> str:
    """Step keys in a nested object, the iteration starting again each epoch (1-based)."""
    rows = [{"type": "train", "data": {"epoch": 1 + i // 5, "iter": i % 5 * 10,
             "loss": {"T": value(i)}, "lr": 1e-3, "time": 0.25 + clock}}
            for i in range(ROWS)]  # fmt: skip
    return _lines([json.dumps(row) for row in rows])


def epoch_lists(value: Value, clock: float) -> str:
    """One JSON document of per-epoch lists, in blocks."""
    doc = {
        "training": {"loss": [value(i) for i in range(ROWS)],
                     "acc": [i / ROWS for i in range(ROWS)],
                     "epoch_time": [12.5 + i + clock / 4 for i in range(ROWS)]},
        "validation": {"loss": [base(i) * 2 for i in range(ROWS)]},
    }  # fmt: skip
    return json.dumps(doc)  # as json.dump writes it: one line


def hashed_table(value: Value, clock: float) -> str:
    """A whitespace table under a `#` header line."""
    rows = ["# run 7, seed 0", "# step  loss  acc  time"]
    rows += [f"{i * 10:<6d}{value(i):.6f}  {0.5 + i / 100:.4f}  {i * 1.5 + clock:.2f}"
             for i in range(ROWS)]  # fmt: skip
    return _lines(rows)


def bare_table(value: Value, clock: float) -> str:
    """Columns of numbers with no header at all, single spaces between them."""
    return _lines([f"{i * 10} {value(i):.6f} {0.5 + i / 100:.4f}" for i in range(ROWS)])


def sections(value: Value, clock: float) -> str:
    """`key=value` lines where a name comes again in another section."""
    return _lines([f"epoch {i} | tr=[loss={value(i):.6f} acc=0.5 time={3.2 + clock:.2f}s] "
                   f"valid=[loss={base(i) * 2:.6f} acc=0.4]" for i in range(ROWS)])  # fmt: skip


def clock_names(value: Value, clock: float) -> str:
    """Clocks under a prefix or a unit beside metrics that only contain a clock word."""
    rows = [{"step": i, "Timing/total_sec": 60.0 * i + clock, "Timing/maintenance_sec": clock,
             "sec/tick": 85.3 + clock, "sec/kimg": 21.3 + clock, "time(s)": 1.5 + clock,
             "Duration Loss": value(i), "time_loss": base(i) / 2} for i in range(ROWS)]  # fmt: skip
    return _lines([json.dumps(row) for row in rows])


def clock_text(value: Value, clock: float) -> str:
    """The same names printed."""
    return _lines([f"step {i}: Duration Loss {value(i):.6f}  time_loss {base(i) / 2:.6f}  "
                   f"time(s)={1.5 + clock:.2f}  maintenance {0.5 + clock:.1f}"
                   for i in range(ROWS)])  # fmt: skip


def ticks(value: Value, clock: float) -> str:
    """StyleGAN's printed ticks: `tick` is the step, `kimg` a counter, the rest clocks."""
    rows = [f"tick {i:<5d} kimg {i * 4.0:<8.1f} time {i}h {int(clock) + 2:02d}m 03s  "
            f"sec/tick {85.3 + clock:<7.1f} sec/kimg {21.3 + clock:<7.2f} "
            f"maintenance {0.2 + clock:<5.1f} cpumem 4.55   gpumem 10.30  augment {value(i):.6f}"
            for i in range(ROWS)]  # fmt: skip
    return _lines(rows)


def csv_batches(value: Value, clock: float) -> str:
    """A CSV of epoch and batch columns (0-based): the batch counter is within its epoch."""
    rows = ["epoch,batch,loss,acc,time"]
    rows += [f"{i // 5},{i % 5},{value(i)!r},{0.5 + i / 100},{0.1 * i + clock}"
             for i in range(ROWS)]  # fmt: skip
    return _lines(rows)


def csv_steps(value: Value, clock: float) -> str:
    """A CSV of epoch and step columns (1-based epochs), the step starting again each epoch."""
    rows = ["epoch,step,loss,step_time_ms"]
    rows += [f"{1 + i // 5},{i % 5 * 10},{value(i)!r},{40 + clock}" for i in range(ROWS)]
    return _lines(rows)


def _levels(epoch: int, iteration: int) -> dict[str, int]:
    return {"epoch": epoch, "iteration": iteration}


CLASSES: dict[str, tuple[Writer, str, str, set[str], set[str], Any]] = {
    # name: writer, file name, the metric changed, metric names, clock names, where row 8 is
    "nested step key": (nested_jsonl, "log.jsonl", "data.loss.T",
                        {"data.loss.T", "data.lr", "data.epoch"}, {"data.time"}, _levels(2, 30)),
    "per-epoch lists": (epoch_lists, "history.json", "training/loss",
                        {"training/loss", "training/acc", "validation/loss"},
                        {"training/epoch_time"}, 8),
    "# header table": (hashed_table, "progress.txt", "loss", {"loss", "acc"}, {"time"}, 80),
    "headerless table": (bare_table, "data.txt", "col2", {"col2", "col3"}, set(), 80),
    "sections": (sections, "train.log", "tr/loss",
                 {"tr/loss", "tr/acc", "valid/loss", "valid/acc"}, {"tr/time"}, 8),
    "clock names": (clock_names, "stats.jsonl", "Duration Loss", {"Duration Loss", "time_loss"},
                    {"Timing/total_sec", "Timing/maintenance_sec", "sec/tick", "sec/kimg",
                     "time(s)"}, 8),
    "clock names printed": (clock_text, "out.log", "duration_loss",
                            {"duration_loss", "time_loss"}, {"time(s)", "maintenance"}, 8),
    "ticks": (ticks, "log.txt", "augment", {"kimg", "cpumem", "gpumem", "augment"},
              {"sec_tick", "sec_kimg", "maintenance"}, 8),
    "csv epoch, batch": (csv_batches, "metrics.csv", "loss", {"loss", "acc", "batch"}, {"time"},
                         _levels(1, 3)),
    "csv epoch, step": (csv_steps, "metrics.csv", "loss", {"loss", "epoch"}, {"step_time_ms"},
                        _levels(2, 30)),
}  # fmt: skip
CHANGED = 8
"""The row whose value the changed copy changes."""


@pytest.fixture(params=sorted(CLASSES))
def cls(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _write(folder: Path, cls: str, value: Value = base, clock: float = 0.0) -> Path:
    writer, name, *_ = CLASSES[cls]
    folder.mkdir()
    path = folder / name
    path.write_text(writer(value, clock))
    return path


def _step(at: Any) -> int:
    return at if isinstance(at, int) else at["epoch"] * LEVEL + at["iteration"]


def test_a_class_is_read_for_its_steps_and_names(tmp_path: Path, cls: str) -> None:
    _, _, _, metrics, clocks, at = CLASSES[cls]
    steps = load(_write(tmp_path / "a", cls)).steps
    assert len(steps) == ROWS
    assert set().union(*(s.metrics for s in steps)) == metrics
    assert set().union(*(s.clocks for s in steps)) == clocks
    assert _step(at) in [s.step for s in steps]
    assert all(a.step < b.step for a, b in itertools.pairwise(steps))


def test_a_class_against_itself_a_change_and_its_clocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cls: str
) -> None:
    _, _, metric, _, _, at = CLASSES[cls]
    a = _write(tmp_path / "a", cls)
    code, out = compare(capsys, str(a), str(twin(a)))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", ROWS), out["reason"]
    clocks = _write(tmp_path / "clocks", cls, clock=1.0)
    code, out = compare(capsys, str(a), str(clocks))
    assert (code, out["verdict"]) == (0, "IDENTICAL"), out["reason"]
    changed = _write(tmp_path / "b", cls, lambda i: base(i) + 0.5 * (i == CHANGED))
    code, out = compare(capsys, str(a), str(changed))
    assert (code, out["verdict"]) == (1, "DIVERGED"), out["reason"]
    assert out["first_divergent_step"] == _step(at)
    assert out["first_divergent_metrics"] == [metric]
    if isinstance(at, dict):
        assert out["first_divergent_at"] == at


@pytest.mark.parametrize(
    ("name", "clock"),
    [("Timing/total_sec", True), ("Timing/maintenance_sec", True), ("sec/tick", True),
     ("sec/kimg", True), ("time(s)", True), ("Time [ms]", True), ("maintenance", True),
     ("time", True), ("eta", True), ("elapsed", True), ("iter_time_avg", True),
     ("time_this_iter_s", True), ("Duration Loss", False), ("time_loss", False),
     ("duration_loss", False), ("loss.T", False), ("kimg", False), ("tick", False),
     ("Progress/kimg", False), ("timers/count", False)],
)  # fmt: skip
def test_a_clock_needs_a_clock_unit_or_a_clock_name_as_its_leaf(name: str, clock: bool) -> None:
    assert is_clock(name) is clock


def test_a_printed_duration_in_units_is_a_clock() -> None:
    line = "tick 40  kimg 160.0  time 1h 02m 03s  sec/tick 85.3  maintenance 0.2  gpumem 10.30"
    masked = "tick 40  kimg 160.0  time ~  sec/tick ~  maintenance ~  gpumem 10.30"
    assert mask_clocks(line) == masked


def test_a_global_counter_beside_the_epoch_stays_one_level(tmp_path: Path) -> None:
    a = tmp_path / "metrics.csv"
    a.write_text(_lines(["epoch,step,loss"] + [f"{i // 5},{i * 50 + 49},{base(i)}"
                                                for i in range(ROWS)]))  # fmt: skip
    assert [s.step for s in load(a).steps] == [i * 50 + 49 for i in range(ROWS)]


def test_a_log_and_its_beginning_take_the_same_steps(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", "csv epoch, step")
    whole = [s.step for s in load(a).steps]
    for rows in (4, 6, 11):
        cut = tmp_path / f"cut{rows}.csv"
        cut.write_text(_lines(a.read_text().splitlines()[: rows + 1]))
        assert [s.step for s in load(cut).steps] == whole[:rows]
