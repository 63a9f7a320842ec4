"""What the pair view's commands import before their first frame (issue 42: the first row on
screen as soon as W&B's own viewer's): the sweep's machinery, the browser, the sweep's printer
and `explain`'s reruns are imported only by what shows or runs them. Counted, never timed."""

from __future__ import annotations

from helpers import ROOT, heavy_modules_after

NOT_AT_START = (
    "tuimon.engine.runs.sweep",
    "tuimon.engine.runs.submit",
    "tuimon.engine.runs.fail_fast",
    "tuimon.engine.analyses.explain",
    "tuimon.report.sweep",
    "tuimon.ui.browser",
    "tuimon.ui.sweep_screen",
    "tuimon.ui.sweep_table",
)


def test_replay_and_watch_reach_the_view_without_the_sweep_browser_or_explain():
    pair = ROOT / "sample_logs" / "cpu-cpu-threads1"
    code = (
        "import tuimon.ui.app as app\n"
        "import tuimon.commands.replay as replay\n"
        "from tuimon.cli import main\n"
        "opened = []\n"
        "app.run_app = lambda **kw: opened.append(kw['title']) or 0\n"
        "replay.terminal = lambda command: True\n"
        "exit_code = main(['replay', sys.argv[1]])\n"
        "assert opened, 'the view was not opened'\n"
        # what `watch` and `pair` import on their way to the same view
        "import tuimon.engine.launch.follower, tuimon.engine.sources.follow\n"
        "import tuimon.engine.runs.plan, tuimon.store\n"
    )
    assert heavy_modules_after(code, str(pair), heavy=NOT_AT_START) == "LOADED []"


def test_the_sweep_and_the_browser_still_import_what_they_show():
    code = (
        "import tuimon.ui.app as app\n"
        "import tuimon.ui.browser, tuimon.ui.sweep_screen, tuimon.report.sweep\n"
        "import tuimon.engine.analyses.explain as explain\n"
        "from tuimon.engine.analyses.explained import describe\n"
        "assert explain.describe is describe\n"
    )
    loaded = heavy_modules_after(code, heavy=NOT_AT_START)
    assert "tuimon.engine.runs.sweep" in loaded and "tuimon.ui.browser" in loaded
