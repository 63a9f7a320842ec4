"""The TUI: a resumed sweep's command lines are asked about in a modal before anything runs;
a pair view exits with its verdict's code, as headless does."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import helpers
import pytest
from helpers import TESTS

from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Sweep
from tuimon.ui import app as app_module
from tuimon.ui.app import TuimonApp
from tuimon.ui.confirm import CommandsScreen
from tuimon.ui.sweep_screen import SweepScreen

FAKE = str(TESTS / "fake_trainer.py")
wait_for = partial(helpers.wait_for, timeout=30.0)


def resumed(store: Path, mark: Path) -> Sweep:
    plan = PairPlan(
        seed=None, devices=("cpu", "cpu"), threads=(1, 1), deterministic=False, loss_dtype=None,
        template=("sh", "-c", f"echo x >> {mark}; {sys.executable} {FAKE} --steps 2"),
    )  # fmt: skip
    sweep = Sweep.create(store, plan, [0], 1, 1)
    sweep.save()
    return Sweep.load(store, sweep.id)


async def test_no_runs_nothing_and_exits_2(tmp_path):
    mark = tmp_path / "ran"
    sweep = resumed(tmp_path / "store", mark)
    app = TuimonApp(store=sweep.store, sweep=sweep)
    app.confirm_lines = sweep.consent_lines()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, CommandsScreen))
        shown = str(app.screen.query_one("#commands-list Static").render())
        assert f"run a, seed 0: sh -c 'echo x >> {mark};" in shown
        await pilot.press("n")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 2 and app.refused
    assert not mark.exists() and sweep.jobs[0].status == "pending"


async def test_yes_runs_the_sweep(tmp_path):
    mark = tmp_path / "ran"
    sweep = resumed(tmp_path / "store", mark)
    app = TuimonApp(store=sweep.store, sweep=sweep)
    app.confirm_lines = sweep.consent_lines()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, CommandsScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.done)
    assert mark.read_text().split() == ["x", "x"] and sweep.jobs[0].verdict == "IDENTICAL"


class Session:
    """What run_app looks at once a pair view has ended."""

    def __init__(self, verdict: str) -> None:
        self.writer = None
        self.summary = SimpleNamespace(verdict=verdict)

    def terminate(self) -> None:
        pass


@pytest.mark.parametrize(("verdict", "code"), [("IDENTICAL", 0), ("DIVERGED", 1),
                                               ("INCOMPLETE", 3)])  # fmt: skip
def test_the_tui_exits_with_the_verdicts_code(tmp_path, monkeypatch, verdict, code):
    def run(self):
        self.sessions.append(Session(verdict))
        return 0  # the user pressed q after the verdict

    monkeypatch.setattr(app_module.TuimonApp, "run", run)
    assert app_module.run_app(store=tmp_path, make_session=lambda on_batch: None) == code


def test_the_collector_is_tuned_while_the_app_runs_and_put_back_after(tmp_path, monkeypatch):
    """Fewer, larger collections while the TUI runs (a full one over a view's objects was the
    tail of its key lag), and Python's own thresholds again once it has ended, even by an
    error."""
    import gc

    from tuimon.ui import app as app_module

    before = gc.get_threshold()
    seen = []

    def run(self):
        seen.append(gc.get_threshold())
        raise RuntimeError("the app broke")

    monkeypatch.setattr(app_module.TuimonApp, "run", run)
    with pytest.raises(RuntimeError):
        app_module.run_app(store=tmp_path)
    assert seen == [app_module.GC_THRESHOLD]
    assert gc.get_threshold() == before
