"""`tuimon watch A B`: two growing files that tuimon did not launch, judged as a live pair."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from helpers import FAKE_TRAINER, pair_json, wait_for

from tuimon.cli import main
from tuimon.engine.sources.follow import watch_factory
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.ui.app import TuimonApp
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.panes import SideHeader


def step(i: int, loss: float | None = None) -> str:
    return json.dumps({"step": i, "train_loss": 1.0 / (i + 1) if loss is None else loss}) + "\n"


def write(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def trainer(log: Path, side: str, *more: str) -> list[str]:
    return [sys.executable, FAKE_TRAINER, "--side", side, "--stdout-file", str(log), *more]


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_two_finished_runs_identical_and_saved(tmp_path, capsys):
    for side in "ab":
        subprocess.run(trainer(tmp_path / f"{side}.jsonl", side, "--steps", "5"), check=True)
    store = tmp_path / "store"
    argv = ["watch", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--headless",
            "--json", "--store", str(store)]  # fmt: skip
    assert main(argv) == 0
    res = last_json(capsys.readouterr().out)
    assert res["verdict"] == "IDENTICAL" and res["steps_compared"] == 5
    meta = pair_json(Path(res["pair"]))
    assert meta["watched"]["a"] == str((tmp_path / "a.jsonl").resolve())
    # the raw logs are the bytes of the files: a replay of the saved pair says the same
    assert (Path(res["pair"]) / "a.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    assert main(["replay", res["pair"], "--headless", "--json"]) == 0
    assert last_json(capsys.readouterr().out)["verdict"] == "IDENTICAL"


def test_growing_runs_that_diverge_and_one_not_there_yet(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    slow = ["--steps", "12", "--sleep", "0.05", "--diverge-at", "7"]
    # run B starts late: its file is not there when the watch begins
    late = ["sh", "-c", 'sleep 1; exec "$@"', "sh", *trainer(b, "b", *slow)]
    procs = [subprocess.Popen(trainer(a, "a", *slow)), subprocess.Popen(late)]
    argv = ["watch", str(a), str(b), "--headless", "--json", "--no-save", "--stall-timeout", "30"]
    try:
        assert main(argv) == 1
    finally:
        for proc in procs:
            proc.wait(timeout=30)
    out, err = capsys.readouterr()
    err = " ".join(err.split())  # the console wraps long lines
    res = last_json(out)
    assert res["verdict"] == "DIVERGED" and res["first_divergent_step"] == 7
    assert res["steps_compared"] == 12
    assert "b.jsonl is not there yet: waiting for it" in err and "b.jsonl is there now" in err


def test_idle_files_without_end_records_end_the_watch(tmp_path, capsys):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("".join(step(i) for i in range(4)))
    b.write_text("".join(step(i) for i in range(4)))
    argv = ["watch", str(a), str(b), "--headless", "--json", "--no-save", "--stall-timeout", "0.5"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    err = " ".join(err.split())  # the console wraps long lines
    assert last_json(out)["verdict"] == "IDENTICAL"
    assert "nothing new for 0.5 s: taken as over" in err


def test_a_file_that_never_appears_is_incomplete(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the console wraps long lines, a path mid-word
    a = tmp_path / "a.log"
    a.write_text("".join(step(i) for i in range(3)))
    argv = ["watch", str(a), str(tmp_path / "nope.log"), "--headless", "--json", "--no-save",
            "--stall-timeout", "0.5"]  # fmt: skip
    assert main(argv) == 3
    out, err = capsys.readouterr()
    err = " ".join(err.split())  # the console wraps long lines
    assert last_json(out)["verdict"] == "INCOMPLETE"
    assert "nope.log never appeared in 0.5 s" in err


def test_bad_arguments_are_one_line(tmp_path, capsys):
    a = tmp_path / "a.log"
    a.write_text(step(0))
    assert main(["watch", str(a), str(a), "--headless"]) == 2
    assert main(["watch", str(a), str(tmp_path), "--headless"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "tuimon: error: A and B are the same file: nothing would be compared"
    assert "is a directory" in err[2]


async def follow(
    tmp_path: Path, writer: Callable[[Path, Path, PairSession], object], idle: float = 1.0
) -> tuple[PairSession, list[str]]:
    """Watch a.jsonl and b.jsonl while `writer(a, b, session)` writes them; the session and
    the status lines it said."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    said: list[str] = []

    def on_batch(batch: Batch) -> None:
        if batch.message:
            said.append(batch.message)

    make = watch_factory((a, b), tmp_path / "store", idle=idle, options=PairOptions())
    session = make(on_batch)
    await asyncio.gather(session.run(), writer(a, b, session))  # type: ignore[arg-type]
    return session, said


async def until(ready: Callable[[], bool], within: float = 20.0) -> None:
    for _ in range(int(within / 0.02)):
        if ready():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not there in time")


async def test_truncated_file_is_read_again_from_its_start(tmp_path):
    async def writer(a: Path, b: Path, session: PairSession) -> None:
        write(b, "".join(step(i) for i in range(6)))
        write(a, "".join(step(i) for i in range(3)))
        await until(lambda: session.sides["a"].records == 2)  # the last row waits for the next
        a.write_text("")  # copytruncate: the run goes on writing at the start
        await asyncio.sleep(0.3)
        write(a, "".join(step(i) for i in range(3, 6)))

    session, said = await follow(tmp_path, writer, idle=1.0)
    assert session.summary.verdict == "IDENTICAL" and session.summary.steps_compared == 6
    assert any("a.jsonl was truncated" in m and "from its start" in m for m in said)


async def test_rotated_file_is_read_to_its_end_then_the_new_one(tmp_path):
    async def writer(a: Path, b: Path, session: PairSession) -> None:
        write(b, "".join(step(i) for i in range(6)))
        with a.open("a") as old:
            old.write("".join(step(i) for i in range(3)))
            old.flush()
            await until(lambda: session.sides["a"].records == 2)  # the last row waits for the next
            a.rename(a.with_suffix(".jsonl.1"))
            old.write(step(3))  # the run still had the old file open
        await asyncio.sleep(0.3)
        write(a, step(4) + step(5))

    session, said = await follow(tmp_path, writer, idle=1.0)
    assert session.summary.verdict == "IDENTICAL" and session.summary.steps_compared == 6
    text = " ".join(said)
    assert "a.jsonl was removed or renamed: waiting for a new one" in text
    assert "a.jsonl is there again" in text
    saved = pair_json(session.pair_path)  # type: ignore[arg-type]
    assert saved["summary"]["verdict"] == "IDENTICAL"


async def test_restarted_run_repeats_its_steps_and_says_so(tmp_path):
    async def writer(a: Path, b: Path, session: PairSession) -> None:
        write(b, "".join(step(i) for i in range(4)))
        write(a, "".join(step(i) for i in range(2)))
        await until(lambda: session.sides["a"].records == 1)
        a.write_text("".join(step(i, 5.0) for i in range(4)))  # rewritten from step 0

    session, said = await follow(tmp_path, writer, idle=0.8)
    assert any("a.jsonl was rewritten from its start" in m for m in said)
    summary = session.summary
    assert summary.verdict != "IDENTICAL" and summary.repeats_a == 2  # nothing dropped


async def test_watch_in_the_pair_view(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(step(i) for i in range(5)))
    b.write_text("".join(step(i, 1.0 if i >= 3 else None) for i in range(5)))
    make = watch_factory((a, b), tmp_path / "store", idle=0.5, options=PairOptions())
    app = TuimonApp(store=tmp_path / "store", make_session=make)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        assert str(screen.query_one("#verdict").render()) == "verdict: DIVERGED"
        first = str(screen.query_one("#first-divergence").render())
        assert first.startswith("first divergence: step 3")


def test_a_whole_file_log_is_refused_with_a_line(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.log"
    a.write_text("step,loss\n0,1.0\n1,0.5\n")
    b.write_text(step(0) + step(1))
    argv = ["watch", str(a), str(b), "--headless", "--json", "--no-save", "--stall-timeout", "1"]
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert last_json(out)["verdict"] == "INCOMPLETE"
    assert "a.csv is not a line log" in " ".join(err.split())


async def test_quitting_a_watch_asks_to_stop_watching_not_the_runs(tmp_path):
    """`watch` did not start the runs: its question is about watching (issue 41 item 9)."""
    from tuimon.ui.modals import ConfirmScreen
    from tuimon.ui.pair_screen import WATCH_QUESTION

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(step(i) for i in range(3)))
    b.write_text("".join(step(i) for i in range(3)))
    make = watch_factory((a, b), tmp_path / "store", idle=60, options=PairOptions())
    app = TuimonApp(store=tmp_path / "store", make_session=make)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.aligned_count >= 2)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.question == WATCH_QUESTION  # type: ignore[attr-defined]
        await pilot.press("escape")


async def test_a_quiet_file_shows_its_last_step_after_a_short_idle(tmp_path):
    """A log that stops without an end record is shown whole (issue 41): the parser holds the
    last step for a row of it that may come, and lets it go once the file is quiet
    `release_after` seconds (by the source's clock, here a fake one)."""
    from tuimon.engine.events import Lines
    from tuimon.engine.sources.follow import FollowSource

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        path.write_text("".join(step(i) for i in range(30)))
    now = [100.0]
    source = FollowSource((a, b), idle=0, release_after=0.5, clock=lambda: now[0])
    queue: asyncio.Queue = asyncio.Queue()
    tails = list(source.tails.values())

    async def look() -> dict[str, list[int]]:
        await source.look(tails, queue)
        steps: dict[str, list[int]] = {"a": [], "b": []}
        while not queue.empty():
            event = queue.get_nowait()
            if isinstance(event, Lines):
                steps[event.side] += [r.step for r in event.records if hasattr(r, "step")]
        return steps

    assert await look() == {"a": list(range(29)), "b": list(range(29))}  # 29: held to merge
    now[0] += 0.4
    assert await look() == {"a": [], "b": []}  # quiet, not yet long enough
    now[0] += 0.1
    assert await look() == {"a": [29], "b": [29]}
    write(a, step(30))  # a line that comes later is read as ever, and shown once quiet
    assert await look() == {"a": [], "b": []}
    now[0] += 0.5
    assert await look() == {"a": [30], "b": []}
    assert not any(t.over for t in tails)  # shown, not ended: the file may still grow


async def test_the_view_shows_the_last_step_of_a_quiet_log(tmp_path):
    """`tuimon watch` of two 30-line logs without end records shows step 29 and 30 steps,
    while the watch goes on (release_after=0: the first quiet look lets it go)."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        path.write_text("".join(step(i) for i in range(30)))
    make = watch_factory((a, b), None, idle=0, options=PairOptions(), release_after=0)
    app = TuimonApp(store=tmp_path / "store", make_session=make)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.aligned_count >= 30)
        await pilot.pause()
        assert not screen.model.done  # still watching
        for side in "ab":
            assert screen.model.sides[side].step == 29
            status = screen.query_one(f"#header-{side}", SideHeader).status_text
            assert status.startswith("running · 30 steps"), status
            pane = screen.panes.pane(side)
            last = pane.line_text(len(pane.buffer) - 1).plain
            assert last.split()[0] == "29" and "0.0333" in last, last  # 1/30
            assert pane.follow
