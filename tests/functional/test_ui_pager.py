"""Pager moves of the pair view (cursor, jump, divergence, search, copy, CSV), late columns, the
whole bottom line (`i`) and what the shell keeps."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from demo_pairs import write_demo_pair
from helpers import ROOT, wait_for

from tuimon.steplog import Step
from tuimon.ui.app import TuimonApp
from tuimon.ui.divergence import DivergencePanel
from tuimon.ui.modals import LinesScreen
from tuimon.ui.pager import Pager, export_rows
from tuimon.ui.pair_model import DIVERGENCE, PairModel, PairRows
from tuimon.ui.pair_screen import PairScreen


class Host:
    """A pair view as the pager sees it."""

    def __init__(self, rows: PairRows) -> None:
        self.rows = rows
        self.model = PairModel(columns=["loss", "acc"])
        self.series = DIVERGENCE
        self.shown: list[int] = []
        self.notes: list[str] = []

    def show_cursor(self, index: int) -> None:
        self.shown.append(index)

    def jump_far(self, step: int) -> bool:
        return False

    def search_far(self, needle: str, anchor: int | None, forward: bool) -> bool:
        return False  # no logs on disk: the kept rows are searched, wrapping

    def notify(self, message: str, *, timeout: float | None = None) -> None:
        self.notes.append(message)


def rows_of(steps: int, differ: set[int]) -> PairRows:
    rows = PairRows(100)
    for side in "ab":
        records: list[Any] = []
        for s in range(steps):
            loss = 1.0 / (s + 1) + (1e-12 if side == "b" and s in differ else 0.0)
            records.append(Step(step=s, metrics={"loss": loss, "acc": 0.5}))
        rows.add(side, records)
    return rows


def test_pager_jumps_finds_divergences_searches_and_copies() -> None:
    host = Host(rows_of(30, {4, 17}))
    pager = Pager(host)
    pager.jump_to_step("10")
    assert pager.cursor_step() == 10 and host.shown == [10]
    pager.divergence(forward=True)
    assert pager.cursor_step() == 17
    pager.divergence(forward=True)
    assert pager.cursor_step() == 17 and "no differing step after" in host.notes[-1]
    pager.divergence(forward=False)
    assert pager.cursor_step() == 4
    pager.jump_to_step("abc")
    assert "not a step number" in host.notes[-1]
    pager.search("step 2")
    assert pager.cursor_step() == 20  # the next row after step 4 holding "step 2"
    pager.search("", forward=True)
    assert pager.cursor_step() == 21
    row = pager.row_text()
    assert row is not None and row.startswith("step 21 | a: loss=") and "| b: " in row
    pager.jump_to_step("17")
    value = pager.value_text()
    assert value is not None and value.startswith("step 17 loss: a=") and "diff=9.99998" in value


def test_search_finds_a_value_as_the_panes_show_it() -> None:
    """Issue 31: `0.15093` on screen, 0.1509286... stored; the rounded text finds its row."""
    rows = PairRows(100)
    for side in "ab":
        rows.add(side, [Step(step=s, metrics={"loss": 0.1509286 + s}) for s in range(3)])
    host = Host(rows)
    pager = Pager(host)
    pager.jump_to_step("0")
    pager.search("2.15093")
    assert pager.cursor_step() == 2
    pager.jump_to_step("0")
    pager.search("0.15093")  # the row under the cursor is the next, once round the end
    assert pager.cursor_step() == 0 and host.notes[-1] == "search wrapped to the top"
    pager.search("7.15093")
    assert pager.cursor_step() == 0 and host.notes[-1] == "not found: 7.15093"
    pager.jump_to_step("2")
    pager.search("0.15093", forward=False)
    assert pager.cursor_step() == 0
    pager.search("1.1509286", forward=True)  # the stored digits still find it
    assert pager.cursor_step() == 1
    pager.search("1.51e-01", forward=False)
    assert pager.cursor_step() == 0
    pager.search("509")  # a number is a step or a value as shown, not digits inside a value
    assert pager.cursor_step() == 0 and host.notes[-1] == "not found: 509"
    pager.search("2")
    assert pager.cursor_step() == 2


def test_the_kept_rows_export_through_the_aligner(tmp_path: Path) -> None:
    """A live pair without logs on disk: the rows the panes keep, aligned and written by
    `tuimon export`'s CSV writer; a name taken gets the next free one."""
    a = {0: {"loss": 1.0}, 1: {"loss": 0.5}, 2: {"loss": 0.25}}
    b = {0: {"loss": 1.0}, 1: {"loss": 0.5000000000000001}}
    (tmp_path / "aligned.csv").write_text("mine")
    path, count, source = export_rows(None, (a, b), tmp_path / "aligned.csv")
    assert path.name == "aligned-1.csv" and count == 2 and source == "the rows kept in the panes"
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert [(r["step"], r["loss.a"], r["loss.b"], r["equal"]) for r in rows] == [
        ("0", "1.0", "1.0", "true"),
        ("1", "0.5", "0.5000000000000001", "false"),
    ]  # step 2 only A logged
    assert (tmp_path / "aligned.csv").read_text() == "mine"


def test_a_metric_that_appears_late_gets_its_column() -> None:
    model = PairModel()
    model.add_records("a", [Step(step=0, metrics={"loss": 1.0})])
    model.add_records("a", [Step(step=1, metrics={"loss": 0.9, "lr": 0.1})])
    model.add_records("b", [Step(step=2, metrics={"val_loss": 2.0, "loss": 0.8})])
    assert model.columns == ["loss", "lr", "val_loss"]


async def test_pager_keys_on_a_saved_pair(tmp_path: Path) -> None:
    pair = write_demo_pair(tmp_path / "store", "p", steps=40, diverge=5)
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = PairScreen(saved=pair)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.model.done and len(screen.feed.rows) > 0)
        await pilot.press("colon", *"12", "enter")
        await wait_for(pilot, lambda: screen.panes.pager.cursor_step() == 12)
        panes = screen.panes
        assert panes.pane("a").cursor == panes.pane("b").cursor == panes.pager.cursor
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.panes.pager.cursor_step() == 11)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.clipboard.startswith("step 11 | a: "))
        assert any("copied the row" in n for n in screen.query_one(DivergencePanel).notes)
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, LinesScreen))
        assert "step 5" in app.screen.text
        await pilot.press("escape")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, LinesScreen))
        text = app.screen.text
        assert "DIVERGED" in text and "Where each metric first parts" in text
        await pilot.press("escape")
        await pilot.press("x")
        await wait_for(pilot, lambda: (pair / "aligned.csv").exists())
        rows = list(csv.DictReader((pair / "aligned.csv").read_text().splitlines()))
        assert len(rows) == 40 and list(rows[0])[:3] == ["step", "occurrence", "equal"]
        assert [r["equal"] for r in rows[:6]] == ["true"] * 5 + ["false"]
        assert rows[5]["train_loss.a"] != rows[5]["train_loss.b"]  # `tuimon export`'s names
        await app.run_action("app.quit")
    assert app.summary_lines and app.summary_lines[0].startswith("DIVERGED")


def test_sweep_key_frequencies_read_the_workloads_nested_report() -> None:
    from tuimon.engine.runs.sweep import key_frequencies

    freqs = {"freqs": [15, 49], "shares": [0.1, 0.2]}
    kf = {"a": freqs, "b": freqs, "agree": True, "same_order": True, "only_a": [], "only_b": []}
    meta = {"artifacts": {"emb": {"equal": False, "key_freqs": kf}}}
    assert key_frequencies(meta) == "a 15 49 | b 15 49: sets agree"


async def test_question_mark_lists_the_keys_of_the_browser(tmp_path: Path) -> None:
    from demo_pairs import write_demo_store

    from tuimon.ui.modals import HelpScreen

    write_demo_store(tmp_path / "store")
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.screen.query_one("#pairs").focus()
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert {"r", "/", "d", "q"} <= {shown for shown, _ in app.screen.keys}


def test_realtime_clock_follows_the_recorded_times(monkeypatch) -> None:
    import tuimon.engine.sources.replay as replay

    now = [100.0]
    monkeypatch.setattr(replay.time, "monotonic", lambda: now[0])
    times = {0: 1000.0, 1: 1010.0, 2: 1510.0}  # a 510 s recording
    clock = replay._Clock(1.0, True, times)
    assert clock.delay(0) == 0.0
    assert clock.delay(1) == 10.0
    now[0] += 500.0
    assert clock.delay(2) == 10.0  # due at 510 s, 500 s have passed
    fast = replay._Clock(10.0, True, times)  # --speed 10: ten times the recorded pace
    assert [fast.delay(s) for s in (0, 1, 2)] == [0.0, 1.0, 51.0]
    steps = replay._Clock(50.0, False, {})  # steps per second
    assert [steps.delay(s) for s in (7, 8)] == [0.02, 0.04]


def test_a_running_pair_without_pair_json_shows_the_seed_and_devices_of_its_name() -> None:
    from tuimon.store.index import _from_name

    assert _from_name("20261130-101502_s0_cpu-cpu_3f9a") == (0, ("cpu", "cpu"))
    assert _from_name("20261130-101502_s12_mps-cuda_3f9a_label") == (12, ("mps", "cuda"))
    assert _from_name("20261130-101502_sx_cpu-cpu_3f9a") == (None, ("cpu", "cpu"))
    assert _from_name("20261130-101502_s0_cuda-0-cpu_3f9a") == (None, None)  # ambiguous
    assert _from_name("my-pair") == (None, None)


def test_replaying_an_explained_pair_headless_says_what_explain_found(tmp_path, capsys) -> None:
    import json
    import shutil

    from tuimon.cli import main

    pair = tmp_path / "pair"
    shutil.copytree(ROOT / "sample_logs" / "cpu-cpu-threads1", pair)
    doc = json.loads((pair / "pair.json").read_text())
    doc["explain"] = {"status": "no-trace", "message": "the reruns did not diverge"}
    (pair / "pair.json").write_text(json.dumps(doc))
    assert main(["replay", str(pair), "--headless"]) == 0
    assert "explain: the reruns did not diverge" in capsys.readouterr().out


async def test_keys_typed_in_a_burst_after_colon_or_slash_reach_the_question(
    tmp_path: Path,
) -> None:
    """`:12⏎` and `/pixny⏎` arriving together (a fast typist, a paste): every key goes to the
    question, none is lost and none is taken as the view's own key (p, i, x, n, y are)."""
    from textual import events

    pair = write_demo_pair(tmp_path / "store", "p", steps=40, diverge=5)
    app = TuimonApp(store=tmp_path / "store")

    def burst(keys: list[tuple[str, str]]) -> None:
        for key, char in keys:
            event = events.Key(key, char)
            event.set_sender(app)
            app._driver.send_message(event)  # type: ignore[union-attr]  # as a terminal sends

    async with app.run_test(size=(100, 30)) as pilot:
        screen = PairScreen(saved=pair)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.model.done and len(screen.feed.rows) > 0)
        burst([("colon", ":"), ("1", "1"), ("2", "2"), ("enter", "\r")])
        await wait_for(pilot, lambda: screen.panes.pager.cursor_step() == 12)
        burst([("slash", "/"), *((c, c) for c in "pixny"), ("enter", "\r")])
        await wait_for(pilot, lambda: screen.panes.pager.query == "pixny")
        assert app.screen is screen and not (pair / "aligned.csv").exists()
