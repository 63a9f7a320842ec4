"""The one loader of a saved pair (`sources.saved.SavedPair`) and where pair.json is named."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from demo_pairs import write_demo, write_demo_pair

import tuimon
from tuimon.engine.analyses import compare
from tuimon.engine.events import Exited
from tuimon.engine.sources import saved_pair
from tuimon.engine.sources.replay import ReplaySource
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.readers import Reading
from tuimon.steplog import Record
from tuimon.ui.saved_view_model import load_saved


def test_a_saved_pair_is_read_once_whatever_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_dir = write_demo_pair(tmp_path, "p", steps=40, diverge=5)
    read = saved_pair.read_log
    sides: list[str] = []

    def counted(path: Path, reading: Reading | None, side: str) -> tuple[list[bytes], list[Record]]:
        sides.append(side)
        return read(path, reading, side)

    monkeypatch.setattr(saved_pair, "read_log", counted)
    pair = resolve_logs([str(pair_dir)])
    assert sides == []  # opened, nothing read yet
    summary = pair.summary()
    assert (summary.verdict, summary.first_divergent_step) == ("DIVERGED", 5)
    assert [(s.step, s.occurrence) for s in pair.stream()][:2] == [(0, 0), (1, 0)]
    state = pair.side_state("b", final=True)
    assert (state.status, state.step, state.records, state.total) == ("finished", 39, 40, 40)
    assert [getattr(r, "step", None) for r in pair.window(20, 4)["a"]] == [18, 19, 20, 21]
    assert sides == ["a", "b"]


async def test_a_pair_without_pair_json_ended_one_way_for_every_reader(tmp_path: Path) -> None:
    """Replay, the saved view and `compare` take how it ended from one rule."""
    pair_dir = write_demo_pair(tmp_path, "p", steps=20, diverge=None)
    (pair_dir / "pair.json").unlink()
    pair = resolve_logs([str(pair_dir)])
    assert pair.ending.exits == {"a": (None, "interrupted"), "b": (None, "interrupted")}
    queue: asyncio.Queue = asyncio.Queue()
    await ReplaySource(pair, speed=1e6).run(queue)
    exited = [e for e in (queue.get_nowait() for _ in range(queue.qsize())) if type(e) is Exited]
    assert [(e.side, e.code, e.status) for e in exited] == [
        ("a", None, "interrupted"),
        ("b", None, "interrupted"),
    ]
    view = load_saved(pair_dir)
    assert [s.status for s in view.model.sides.values()] == ["interrupted", "interrupted"]
    judged = compare.judge(compare.resolve([str(pair_dir)], None), 0.0).summary
    shown = view.model.summary
    assert shown is not None and (shown.verdict, shown.reason) == (judged.verdict, judged.reason)
    assert judged.verdict == "INCOMPLETE" and "no pair.json" in (judged.reason or "")


def test_two_logs_judged_by_the_loader_as_by_compare(tmp_path: Path) -> None:
    a, b = write_demo(tmp_path, steps=30, diverge=7, extra={"b": [(3, "a warning")]})
    pair = resolve_logs([str(a), str(b)])
    judged = compare.judge(compare.resolve([str(a), str(b)], None), 0.0).summary
    mine = pair.summary()
    assert (mine.verdict, mine.first_divergent_step, mine.reason) == (
        judged.verdict,
        judged.first_divergent_step,
        judged.reason,
    )
    assert pair.judged[1].accounts["b"].text == 1  # the text line is in the account


def test_pair_json_is_named_only_in_the_store() -> None:
    package = Path(tuimon.__file__).parent
    named = re.compile(r"PAIR_JSON|/\s*[\"']pair\.json[\"']")
    outside = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] != "store" and named.search(path.read_text())
    ]
    assert outside == []


def test_a_window_of_a_long_pair_is_read_around_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of logs not held is read only around its step (a bisection over byte offsets
    of a log of JSON rows, or a block at a time): the records the whole read gives there, and
    no log read whole."""
    a, b = write_demo(tmp_path, steps=30_000, diverge=20_000, extra={"b": [(15_000, "hello")]})
    steps = (0, 7, 15_000, 20_000, 29_990, 29_999)
    whole = resolve_logs([str(a), str(b)])
    assert whole.records("a") and whole.held  # held: its windows are slices of its records
    expected = {step: whole.window(step, 400) for step in steps}
    assert saved_pair._seek_window(b, Reading(), "b", 20_000, 400) == expected[20_000]["b"]
    for plain in (True, False):
        pair = resolve_logs([str(a), str(b)])
        if not plain:  # a log the bisection does not take: a block at a time
            monkeypatch.setattr(saved_pair, "_seek_window", lambda *args: None)

        def no_whole_read(*args: object) -> None:
            raise AssertionError("a window read a log whole")

        with monkeypatch.context() as m:
            m.setattr(saved_pair, "read_log", no_whole_read)
            for step in steps:
                assert pair.window(step, 400) == expected[step]
            for side in ("a", "b"):  # the saved view's last lines, read from the end
                assert pair.tail(side, 400) == whole.records(side)[-400:]
        assert not pair.held
    far = expected[20_000]
    shown = [r.step for r in far["b"] if isinstance(r, saved_pair.Step)]
    assert shown[0] == 20_000 - 200 and 20_000 in shown
