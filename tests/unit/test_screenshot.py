"""The view's screenshot (ctrl+p, Screenshot): an SVG in the current directory, whatever the
title holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tuimon.ui.app import TuimonApp


@pytest.mark.asyncio
async def test_the_screenshot_command_saves_an_svg_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = TuimonApp(store=tmp_path / "store", title="tuimon replay · sample_logs/x")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"screenshot")
        await pilot.pause(0.3)
        await pilot.press("enter")
        for _ in range(200):  # the file is written by a thread after a 0.1 s timer
            shots = list(tmp_path.glob("tuimon-*.svg"))
            if shots and shots[0].read_text().rstrip().endswith("</svg>"):
                break
            await asyncio.sleep(0.05)
        assert len(shots) == 1 and "<svg" in shots[0].read_text()
