"""Every drawn row of both panes shows its own step's values (issue 41: after `p`, Esc, `g`
on a live pair, pane B showed step 68's values on a row labelled 69)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers import wait_for

from tuimon.engine.sources.follow import watch_factory
from tuimon.engine.sources.session import PairOptions
from tuimon.ui.app import TuimonApp
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.panes import STEP_WIDTH, StepPane

KEYS = ["p", "escape", "g", "G", "f", "up", "down", "pageup", "pagedown", "home", "end"]
KEYS += ["right_square_bracket", "left_square_bracket", "w", "left", "right"]
SEED = 0
ROUNDS = 24


def loss(side: str, step: int) -> float:
    """Run B parts from run A at step 25."""
    return 1.0 / (step + 1) + (1e-3 * step if side == "b" and step >= 25 else 0.0)


def drawn_rows_hold_their_steps(pane: StepPane, truth: dict[int, float]) -> int:
    """Each row the pane draws now: its step's label, and its values as drawn afresh from that
    step's record (what the log holds); the rows checked."""
    width = pane.scrollable_content_region.width or pane.size.width
    scroll_x, scroll_y = pane.scroll_offset
    checked = 0
    for y in range(1, pane.size.height):
        index = scroll_y + y - 1
        if index >= len(pane.rows):
            break
        step, _ = pane.rows.entries[index]
        drawn = pane.render_line(y).text
        metrics = pane.buffer.metrics_of(step) if step is not None else None
        if metrics is None:
            continue
        assert metrics["train_loss"] == truth[step], (pane.side, step)
        label = drawn[:STEP_WIDTH].strip().lstrip("▶").strip()
        assert label == str(step), (pane.side, index, step, drawn)
        fresh = pane._step_strip(step, metrics, scroll_x, width, pane.rich_style).text
        assert drawn.rstrip() == fresh.rstrip(), (pane.side, step, drawn, fresh)
        checked += 1
    return checked


async def test_random_keys_on_a_live_pair_keep_every_row_on_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PairScreen.__init__.__kwdefaults__, "max_lines", 60)  # windows, trims
    rng = random.Random(SEED)
    paths = {side: tmp_path / f"{side}.jsonl" for side in "ab"}
    written = {"a": 0, "b": 0}
    truth: dict[str, dict[int, float]] = {"a": {}, "b": {}}

    def grow(side: str, n: int, *, again: float = 0.0) -> None:
        """`n` steps more, a line of text at times; `again`: a restarted run, its steps from
        0 logged again with other values (the rows keep its last ones)."""
        lines = []
        if again:
            written[side] = 0
        for step in range(written[side], written[side] + n):
            truth[side][step] = loss(side, step) + again
            lines.append(json.dumps({"step": step, "train_loss": truth[side][step]}) + "\n")
            if rng.random() < 0.1:
                lines.append(f"a line of text after step {step}\n")
        with paths[side].open("w" if again else "a") as fh:
            fh.write("".join(lines))
        written[side] += n

    grow("a", 40)
    grow("b", 30)
    make = watch_factory(
        (paths["a"], paths["b"]), tmp_path / "store", idle=0, options=PairOptions(),
        release_after=0,
    )  # fmt: skip
    app = TuimonApp(store=tmp_path / "store", make_session=make)
    checked = 0
    async with app.run_test(size=(80, 24)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.aligned_count >= 30)
        panes = [screen.panes.pane(side) for side in "ab"]
        for _ in range(ROUNDS):
            if rng.random() < 0.3:  # the runs go on, one ahead of the other at times
                for side in "ab":
                    grow(side, rng.randrange(0, 12))
            if rng.random() < 0.1:  # run a restarts, its file rewritten from its start
                grow("a", written["a"] + 1, again=rng.random())
            await pilot.press(rng.choice(KEYS))
            await pilot.pause()
            if app.screen is not screen:
                continue
            assert panes[0].scroll_y == panes[1].scroll_y  # a row beside the same row
            for pane in panes:
                checked += drawn_rows_hold_their_steps(pane, truth[pane.side])
    assert checked > ROUNDS * 10
