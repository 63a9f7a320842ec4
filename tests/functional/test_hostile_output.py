"""Output is data, never commands: hostile names and text through every output path.

`hostile_trainer.py` names its metrics `[/]`, `W_[red]E[/]`, … with OSC 52, window-title, DCS
and CSI sequences and a bidi override in them, prints such lines and stderr, and side b fails.
Headless (text, `--json`, `compare`), the pair view (panes, titles, divergence line, toasts,
the environment and help modals) and the browser (pair.json values) must show them literally:
no ESC reaches the terminal, no markup takes effect, nothing crashes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TESTS, wait_for

from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.sources.session import Batch, LiveSource, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.sanitize import clean
from tuimon.store import PairWriter
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.divergence import DivergencePanel
from tuimon.ui.pair_screen import PairScreen

HOSTILE = str(TESTS / "hostile_trainer.py")
ESC = "\x1b"
OSC52 = f"{ESC}]52;c;ZWNobyBQV05FRAo={ESC}\\"


def tuimon(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuimon", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_clean_shows_every_escape_sequence_visibly() -> None:
    for raw in (OSC52, f"{ESC}]0;title\x07", f"{ESC}P1$qm{ESC}\\", f"{ESC}[2J", "\x9b31m"):
        shown = clean(raw)
        assert ESC not in shown and "\x07" not in shown and "\x9b" not in shown
    assert clean(f"a{ESC}[31mb") == "a^[[31mb"
    assert clean("W_[red]E[/]") == "W_[red]E[/]"  # markup is left to Text to keep literal
    assert clean("x\u202ey") == "x<U+202E>y"
    assert clean("a\nb") == "a^Jb"


def test_headless_text_json_and_compare_show_hostile_names_literally(tmp_path: Path) -> None:
    store = tmp_path / "store"
    cmd = ["--seed", "0", "--devices", "cpu,cpu", "--", sys.executable, HOSTILE, "{side}"]
    proc = tuimon("pair", "--headless", "--store", str(store), *cmd, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # DIVERGED, not a MarkupError
    assert "MarkupError" not in out and "Traceback (most recent" not in out
    assert ESC not in out and "\x07" not in out
    assert "W_[red]E[/]" in out and "metrics.[/]" in out
    assert "^[]52;c;" in out  # the clipboard write is shown, not performed
    [pair] = store.iterdir()
    assert (pair / "pair.json").is_file()

    proc = tuimon("pair", "--headless", "--json", "--store", str(store), *cmd, cwd=tmp_path)
    assert ESC not in proc.stdout + proc.stderr
    record = json.loads(proc.stdout.splitlines()[-1])
    assert record["verdict"] == "DIVERGED"

    proc = tuimon("compare", str(pair), cwd=tmp_path)
    assert ESC not in proc.stdout + proc.stderr
    assert "W_[red]E[/]" in proc.stdout


def hostile_app(tmp_path: Path) -> TuimonApp:
    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        specs = tuple(
            RunSpec(side, "cpu", argv=(sys.executable, HOSTILE, side, "8")) for side in ("a", "b")
        )
        sides = tuple(
            SideState(side, f"cpu{ESC}[2J[red]", f"python train.py {OSC52}[/] --side {side}")
            for side in ("a", "b")
        )
        writer = PairWriter.create(tmp_path / "store", seed=0, devices=("cpu", "cpu"))
        return PairSession(
            LiveSource(specs, writer=writer, grace=2.0), sides, options=PairOptions(),
            writer=writer, on_batch=on_batch,
        )  # fmt: skip

    return TuimonApp(store=tmp_path / "store", make_session=make)


def shown(app: TuimonApp) -> str:
    """What the app would draw on the terminal now (its screenshot as SVG text)."""
    return app.export_screenshot()


def assert_literal(text: str) -> None:
    assert ESC not in text and "\x07" not in text and "\x9b" not in text
    assert "\u202e" not in text


async def test_pair_view_shows_hostile_text_literally(tmp_path: Path) -> None:
    app = hostile_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        svg = shown(app)
        assert_literal(svg)
        assert "first&#160;divergence:&#160;step&#160;2&#160;(metrics.[/]" in svg
        assert "^[[2J[red]" in svg  # the device as text, markup and all
        pane = screen.panes.pane("b")
        lines = [pane.line_text(i).plain for i in range(len(pane.buffer))]
        assert any("plain text [bold]line[/] ^[[2J" in line for line in lines)
        assert any(line.startswith("! Traceback [/] ^[]52;c;") for line in lines)
        for key in ("m", "m", "g", "o"):  # toasts name the metric, the step, the folder
            await pilot.press(key)
            await pilot.pause()
            assert_literal(shown(app))
        notes = screen.query_one(DivergencePanel).notes
        assert any("W_[red]E[/]" in note for note in notes)
        await pilot.press("e", "a")  # the environment modal: env values and full commands
        await pilot.pause()
        svg = shown(app)
        assert_literal(svg)
        assert "[link=x]^[]52;c;" in svg
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert_literal(shown(app))
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("q")
    assert app.summary_lines and all(ESC not in line for line in app.summary_lines)
    assert "W_[red]E[/]" in app.summary_lines[0]


@pytest.mark.parametrize("field", ["verdict", "status", "label"])
async def test_browser_shows_hostile_pair_json_values_literally(tmp_path: Path, field: str) -> None:
    app = hostile_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.press("q")
    [pair] = (tmp_path / "store").iterdir()
    doc = json.loads((pair / "pair.json").read_text())
    bad = f"[/]{OSC52}{ESC}]0;t\x07"
    if field == "verdict":
        doc["summary"]["verdict"] = bad
    else:
        doc[field] = bad
    (pair / "pair.json").write_text(json.dumps(doc))
    browser = TuimonApp(store=tmp_path / "store")
    async with browser.run_test(size=(160, 40)) as pilot:
        await wait_for(
            pilot, lambda: isinstance(s := browser.screen, BrowserScreen) and bool(s.pairs)
        )
        await pilot.pause()
        svg = shown(browser)
        assert_literal(svg)


def test_exit_messages_show_hostile_paths_literally(tmp_path: Path) -> None:
    proc = tuimon("replay", f"no-such-{OSC52}[red]x[/].jsonl", "--headless", cwd=tmp_path)
    assert proc.returncode == 2
    assert ESC not in proc.stderr and "^[]52;c;" in proc.stderr


def test_every_json_output_escapes_c1_bidi_and_format_characters(tmp_path: Path, capsys) -> None:
    """JSON escapes only C0 by its rules: a C1 CSI (U+009B), a bidi override (U+202E), DEL, a
    line separator and a tag character in a name reach stdout as \\uXXXX escapes (the one JSON
    writer, `json_text`), and read back as they were; an unreadable name in a usage error is
    shown literally."""
    from tuimon.cli import main
    from tuimon.sanitize import json_text

    raw = ("\x9b", "\u202e", "\x7f", "\u2028", "\U000e0041", ESC)
    names = ["loss\x9b31m", "acc\u202eevil", "x\x7fy\u2028z\U000e0041"]
    for side, value in (("a", 1.0), ("b", 2.0)):
        lines = [json.dumps({"step": s, **{n: value for n in names}}) for s in range(3)]
        (tmp_path / f"{side}.jsonl").write_text("\n".join(lines) + "\n")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    assert main(["read", a, "--json"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in raw) and "\\u009b" in out and "\\u202e" in out
    assert json.loads(out)["metrics"] == names
    assert main(["compare", a, b, "--json"]) == 1
    out = capsys.readouterr().out
    assert not any(c in out for c in raw)
    assert set(names) <= set(json.dumps(json.loads(out), ensure_ascii=False).split('"'))
    tagged = {"k\U000e0041": "\u2029"}  # a tag character (past U+FFFF), a paragraph separator
    assert json.loads(json_text(tagged, indent=True)) == tagged

    assert main(["read", str(tmp_path / f"no{OSC52}\x9b.jsonl")]) == 2
    err = capsys.readouterr().err
    assert ESC not in err and "\x9b" not in err and "^[]52;c;" in err
