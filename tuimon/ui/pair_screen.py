"""The pair view: two panes side by side, the divergence panel, curves and environment one key away.

One screen serves a live pair, a replay and a saved pair (`Shows`). Live and replay sessions run
in an async worker and post one `BatchArrived` per engine batch (~10 per second); the screen
feeds its `PairFeed` (model and rows) with the whole batch at once. A sweep's running pair is
watched: the sweep feeds its `PairFeed` from the first batch, the view draws it and each batch
after, and closing the view leaves the pair running.

It composes the views (`PairPanes`, `DivergencePanel`, `CurvesView`, `ReplayControls`): each
draws from the feed and has the actions of its keys; the keys are one table (`pair_keys`), bound
on the screen (whatever has focus) and run on the view each row names.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Header
from textual.worker import Worker, WorkerState

from tuimon.engine.analyses.explained import saved_line
from tuimon.engine.sources.follow import FollowSource
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.engine.sources.session import Batch, PairSession
from tuimon.errors import ReplayError
from tuimon.steplog import Record, Step
from tuimon.store import SIDES, SavedLogs
from tuimon.ui.chart import CurvesView
from tuimon.ui.command_palette import ScreenActions
from tuimon.ui.divergence import DivergencePanel
from tuimon.ui.keymap import KeyedScreen, KeyFooter
from tuimon.ui.modals import ConfirmScreen, EnvDiffScreen, HelpScreen
from tuimon.ui.pair_info import hints_of, replicas_of, summary_lines
from tuimon.ui.pair_keys import PAIR_KEYS
from tuimon.ui.pair_model import PairFeed, PairModel
from tuimon.ui.pair_panes import PairPanes
from tuimon.ui.replay_controls import ReplayControls
from tuimon.ui.saved_view_model import (
    Judgement,
    SavedView,
    apply_details,
    apply_judgement,
    detail_saved,
    judge_saved,
    open_saved,
    window,
)
from tuimon.ui.text import clean
from tuimon.ui.workers import ReportsWorkerErrors, read_then_show

MAX_LINES = 2000
FREEZE_AFTER = 2.0
"""Seconds after a session starts that what lives is frozen out of the collector's sight."""
DRAW_EVERY = 1.0
"""Seconds between two draws of a streaming pair (batches in between are taken, not drawn)."""
STOP_QUESTION = "Stop both runs? The partial pair is saved."
WATCH_QUESTION = "Stop watching? The runs go on; what was read so far is saved."
"""`tuimon watch` follows logs of runs it did not start: it never stops them."""


SessionFactory = Callable[[Callable[[Batch], None]], PairSession]


class Shows(Enum):
    """What a pair view shows (its subtitle's words): set once, asked where behaviour differs."""

    LIVE = "live pair"
    """Live runs: a session the view starts, or a sweep's running pair it watches."""
    REPLAY = "replay"
    """A session replaying saved logs at a pace; Back and quit just stop it."""
    SAVED = "saved pair"
    """A pair directory, read once."""


class BatchArrived(Message):
    """One batch of the session (data: never merged with or replaced by another)."""

    def __init__(self, batch: Batch, *, taken: bool = False) -> None:
        super().__init__()
        self.batch = batch
        self.taken = taken
        """The view's feed has it already (a watched pair's feed is fed by its sweep)."""


class SessionStarted(Message):
    """A pair view started a session (the app keeps it, so no run outlives the app)."""

    def __init__(self, session: PairSession) -> None:
        super().__init__()
        self.session = session


class PairScreen(KeyedScreen, ReportsWorkerErrors, Screen[None]):
    """Two runs side by side: live (a session), replay (a paced session) or saved; see `Shows`."""

    KEYS = PAIR_KEYS
    COMMANDS = {ScreenActions}  # noqa: RUF012
    app: Any
    """The `TuimonApp`: it keeps the `summary_lines` the shell shows after quitting."""

    def __init__(
        self,
        *,
        make_session: SessionFactory | None = None,
        replay: bool = False,
        saved: Path | None = None,
        watch: PairSession | None = None,
        feed: PairFeed | None = None,
        can_go_back: bool = False,
        max_lines: int = MAX_LINES,
    ) -> None:
        """One of: `make_session` (live, or a replay with `replay`), `saved` (a pair directory),
        or `watch` with the `feed` its owner fills from the session's first batch."""
        super().__init__()
        self.shows = Shows.SAVED if saved is not None else Shows.REPLAY if replay else Shows.LIVE
        self.make_session = make_session
        self.saved_path = saved
        self.watched = watch
        """A session someone else runs (a sweep's pair): never stopped by this view."""
        self.can_go_back = can_go_back
        self.max_lines = max_lines
        self.session: PairSession | None = None
        self.saved: SavedView | None = None
        self.feed = feed if feed is not None else PairFeed(max_lines)
        """The model and the rows of both panes (aligned by step)."""
        self.stopping = False
        self.replay = ReplayControls(self, self)
        self.panel = DivergencePanel(self.feed, id="divergence")
        self.curves = CurvesView(self.feed, id="curves")
        self.panes = PairPanes(
            self.feed,
            logs=self.logs_on_disk,
            doc=self.pair_doc,
            series=lambda: self.panel.series,
            id="panes",
        )
        self._last_draw = 0.0
        self._jump_when_judged = False
        self.rows_read_before: int | None = None
        """The first kept step whose earlier lines are being read (scrolled to the top)."""
        self._read_before: set[int] = set()
        """Steps whose earlier lines were read already (none are read twice)."""
        """`g` was pressed while the saved pair was being judged."""
        self._draw_timer: Timer | None = None
        self._unlisten: Callable[[], None] | None = None

    @property
    def model(self) -> PairModel:
        """What the view shows of the pair (the feed's)."""
        return self.feed.model

    @model.setter
    def model(self, model: PairModel) -> None:
        self.feed.model = model

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≈")
        with ContentSwitcher(initial="panes", id="views"):
            yield self.panes
            yield self.curves
        yield self.panel
        yield KeyFooter(compact=True, show_command_palette=False)  # every key fits 80 columns

    def on_mount(self) -> None:
        """Start the session, or load the saved pair."""
        self.update_subtitle()
        self.watch(self.panes.pane("a"), "scroll_y", self._scrolled, init=False)
        if self.saved_path is not None:
            self._start_load()
        elif self.watched is not None:
            self._watch(self.watched)
        else:
            self._start_session()

    def _start_session(self) -> None:
        assert self.make_session is not None
        try:
            self.session = self.make_session(self._post_batch)
        except Exception as exc:
            self.notify(f"cannot start the pair: {clean(exc)}", severity="error", markup=False)
            self.panel.say(f"cannot start the pair: {exc}")
            return
        # what lives once the view is up (the app, its modules, a replay's parsed logs) lives as
        # long as the view: out of the cyclic collector's sight until the view closes, so a full
        # collection (~90 ms over a 25,000-step replay) no longer stalls its keys; garbage is
        # collected first, so none is kept. Not before the first rows: 30-50 ms they would wait.
        self.set_timer(FREEZE_AFTER, _freeze)
        self.panes.show_headers(self.session.sides)
        self.model.pair_path = self.session.pair_path
        self.post_message(SessionStarted(self.session))
        self.run_worker(
            self.session.run(),
            name="session",
            group="session",
            exclusive=True,
            exit_on_error=False,
            description="replay" if self.shows is Shows.REPLAY else "pair of runs",
        )

    def _post_batch(self, batch: Batch) -> None:
        """The session's batch callback (any thread of the app's loop)."""
        self.post_message(BatchArrived(batch))

    def _watch(self, session: PairSession) -> None:
        """Show a pair someone else runs: what its feed holds, then each batch after."""
        self.session = session
        self.model.pair_path = self.model.pair_path or session.pair_path
        self.panes.show_headers(self.model.sides or session.sides)
        self.call_after_refresh(self._catch_up)  # the panes' size first: they follow the end

    def _catch_up(self) -> None:
        """Draw what the feed holds, and from now on each batch (the feed has it first)."""
        if self.session is None or not self.is_attached:  # closed before its first frame
            return
        self._unlisten = self.session.listen(self._post_taken)
        self.feed.dropped = 0  # the new panes hold each row the feed has
        self._draw()
        if self.feed.ended is not None:  # it ended before this view listened
            self._on_done(self.feed.ended)

    def _post_taken(self, batch: Batch) -> None:
        """A watched session's batch: its feed took it already; draw it."""
        self.post_message(BatchArrived(batch, taken=True))

    def _stop_watching(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None

    def on_unmount(self) -> None:
        """A watched pair stops sending batches here (it runs on); what the view froze can be
        collected again."""
        self._stop_watching()
        if self.session is not None:
            gc.unfreeze()

    def _start_load(self) -> None:
        path = self.saved_path
        assert path is not None
        self.panel.say(f"loading {path} …")
        read_then_show(
            self,
            lambda: open_saved(path, self.max_lines),
            self._show_saved,
            group="load",
            what=f"loading {path.name}",
        )

    # -- data ---------------------------------------------------------------------------------

    @on(BatchArrived)
    def _on_batch(self, message: BatchArrived) -> None:
        """Take the batch now; draw at most `DRAW_EVERY` apart (the last batch at once)."""
        batch = message.batch
        if not message.taken:
            self.feed.take(batch)
        wait = self._last_draw + DRAW_EVERY - time.monotonic()
        if batch.done or wait <= 0 or self.replay.pending_jump is not None:
            self._draw()
        elif self._draw_timer is None:
            self._draw_timer = self.set_timer(wait, self._draw)
        if batch.done:
            self._on_done(batch)

    def _draw(self) -> None:
        """Show what the batches taken since the last draw brought."""
        if self._draw_timer is not None:
            self._draw_timer.stop()
            self._draw_timer = None
        # A draw that shows no step yet (headers only) starts no wait: the first rows are
        # drawn as they come, not a DRAW_EVERY later (a replay's first row, issue 42).
        self._last_draw = time.monotonic() if self.feed.rows.rows_of else 0.0
        self.panes.show()
        self.panes.show_headers(self.model.sides)
        self.replay.land_jump()
        self._refresh_views()

    def _refresh_views(self) -> None:
        """The views drawn from the model (the panes draw rows, in `_draw`)."""
        self.panel.show()
        self.curves.show()
        self.update_subtitle()
        self._remember_summary()

    def _remember_summary(self) -> None:
        """What the shell shows after the app exits (as headless prints it, with errors)."""
        replayed = self.shows != Shows.LIVE  # a replay or a saved pair saves nothing
        lines = summary_lines(self.model, self.pair_doc(), replayed=replayed)
        if lines:
            self.app.summary_lines = lines

    def pair_doc(self) -> dict[str, Any] | None:
        """The pair's document (pair.json, or the running session's), for hints and explain."""
        if self.saved is not None:
            return self.saved.logs.doc.to_json()
        if self.session is not None and self.session.logs is not None:
            return self.session.logs.doc.to_json()
        if self.session is not None:
            try:
                return self.session.pair_doc().to_json()
            except Exception:  # a session still starting knows too little: no hints yet
                return None
        return None

    def _on_done(self, batch: Batch) -> None:
        if self.stopping:
            self.app.exit(130, return_code=130)
            return
        self.refresh_bindings()
        if self.shows is Shows.REPLAY:
            self._replay_ended(batch)
        elif self.shows is Shows.LIVE:
            self._live_ended(batch)

    def _replay_ended(self, batch: Batch) -> None:
        """The replay's last batch: what the saved pair says of its artifacts."""
        if self.session is None or self.session.logs is None:
            return
        doc = self.session.logs.doc
        if not self.model.artifacts and doc.artifacts:
            self.model.artifacts = dict(doc.artifacts)
        told = self._told(batch)
        explained = saved_line(doc.more)
        self.model.message = "; ".join(
            [
                *self._next_steps(),  # what to try first, as headless says it
                *self.model.artifact_lines(),
                *replicas_of(self.pair_doc()),
                *([explained] if explained else []),
                *(told or ["replay finished"]),
            ]
        )
        self._refresh_views()

    def _live_ended(self, batch: Batch) -> None:
        """The live pair's last batch: where it is saved and its artifacts, on the bottom line."""
        if self.session is not None:
            self.model.artifacts = dict(self.session.artifacts)
            told = self._told(batch)
            if batch.pair_path is not None:
                told = [p for p in told if not p.startswith("saved to ")]
                told.insert(0, f"pair saved in {batch.pair_path}")
            told += [x for x in replicas_of(self.pair_doc()) if x not in told]
            hints = self._next_steps()  # what to try first, as headless says it
            self.model.message = "; ".join([*hints, *told, *self.model.artifact_lines()]) or None
            self._refresh_views()

    def _next_steps(self) -> list[str]:
        """The likely causes of an ended session's divergence in brief, from its own judgement
        (`PairSession.pair_doc`), as `--headless` finds them (a replay's too)."""
        try:
            doc = self.session.pair_doc().to_json() if self.session is not None else None
        except Exception:  # a session that knows too little (a test's, a sweep's): no hints
            doc = self.pair_doc()
        return hints_of(doc, brief=True)

    def _told(self, batch: Batch) -> list[str]:
        """The last batch's news less the artifact lines, which the model says once."""
        shown = {part for line in self.model.artifact_lines() for part in line.split("; ")}
        told = (batch.message or "").split("; ")
        return [p for p in told if p and p not in shown and "at the end:" not in p]

    def _show_saved(self, saved: SavedView) -> None:
        """The saved pair's last lines at once; then it is judged (`judge_saved`)."""
        self.saved = saved
        self.model = saved.model
        self.panes.fill(saved.tails, saved.stderr, stderr_first=True)
        self.panes.show_headers(saved.model.sides, live=False)
        self._refresh_views()
        self.panel.say("judging the pair …")
        logs = saved.logs
        read_then_show(
            self,
            lambda: judge_saved(logs),
            self._show_judged,
            group="judge",
            what=f"judging {logs.pair_dir.name if logs.pair_dir else 'the pair'}",
        )

    def _show_judged(self, judged: Judgement) -> None:
        """The verdict and how each run ended, drawn as soon as the judge has them; then what
        the view shows of every aligned step is read (`detail_saved`)."""
        if self.saved is None:
            return
        apply_judgement(self.model, judged)
        self.panes.show_headers(self.model.sides, live=False)
        self.panes.show()  # the first divergent step marked
        self._refresh_views()
        logs, columns = self.saved.logs, list(self.model.columns)
        read_then_show(
            self,
            lambda: detail_saved(logs, judged.summary, columns),
            self._show_details,
            group="details",
            what="reading the aligned steps",
        )
        if self._jump_when_judged:
            self._jump_when_judged = False
            self.panes.action_first_divergence()

    def _show_details(self, detail: PairModel) -> None:
        """Sparklines, parts and curves of the whole pair."""
        apply_details(self.model, detail)
        self.panes.show()
        self._refresh_views()

    def notify(
        self, message: str, *, title: str = "", timeout: float | None = None, **how: Any
    ) -> None:
        """A note on the bottom line for a few seconds, never a toast over the panes' rows."""
        text = f"{title}: {message}" if title else message
        self.panel.note(text, severity=how.get("severity", "information"), timeout=timeout or 4)

    def update_subtitle(self) -> None:
        """The header: the state first (finished, following), the app's title cut to fit."""
        parts = [self.shows.value]
        if self.model.done and self.shows is not Shows.SAVED:
            parts.insert(0, self._ended())
        parts += self.replay.words()
        if self.shows is not Shows.SAVED and not self.model.done:  # nothing new will come
            parts.append("following" if self.panes.follow else "held (f follows)")
        self.sub_title = " · ".join(parts)
        # the header keeps 8 cells for its icon, 10 for the clock, 2 of padding, 3 for " — "
        room = max(12, (self.size.width or 120) - len(self.sub_title) - 24)
        title = clean(self.app.title, None)
        self.title = title if len(title) <= room else title[: room - 1] + "…"

    def _ended(self) -> str:
        """How the pair ended, in a word or two: finished, interrupted, run b failed."""
        statuses = {side: state.status for side, state in self.model.sides.items()}
        stopped = getattr(self.session, "stopped_at", None)  # a sweep's or a test's session
        if stopped is not None:
            return f"stopped at step {stopped} (--stop-on-divergence)"
        if "interrupted" in statuses.values():
            return "interrupted"
        failed = [side for side, status in statuses.items() if status == "failed"]
        return f"run {' and '.join(failed)} failed" if failed else "finished"

    def on_resize(self) -> None:
        """The title is cut to what the width leaves after the state."""
        self.update_subtitle()

    def _session_running(self) -> bool:
        worker = next(iter(w for w in self.workers if w.group == "session"), None)
        return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    @on(PairPanes.Followed)
    def _followed(self) -> None:
        self.update_subtitle()

    @on(PairPanes.FindDivergence)
    def _find_divergence(self) -> None:
        """The panes do not know the first divergence yet: a replay looks for it; a saved
        pair being judged jumps to it once judged."""
        if self.shows is Shows.SAVED and self.saved is not None and not self.model.done:
            self._jump_when_judged = True
            self.notify("judging the pair … (then to its first divergence)", timeout=3)
            return
        if not self.replay.find_and_jump():
            self.notify(self.model.first_line(), markup=False, timeout=3)

    # -- actions ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A view's key as the view says (replay keys only in a replay); Back only over the
        browser or a sweep."""
        if action == "back":
            return self.can_go_back
        return super().check_action(action, parameters)

    def action_env(self) -> None:
        """The environment differences of the two runs."""
        self.app.push_screen(EnvDiffScreen(self.model.env_rows()))

    def action_open_folder(self) -> None:
        """Show the saved pair's folder and copy its path to the clipboard."""
        path = self.model.pair_path
        if path is None:
            logs = self.session.logs if self.session is not None else None
            if logs is not None:
                self.notify(
                    f"not a saved pair: replaying {clean(logs.a)} and {clean(logs.b)}", markup=False
                )
            else:
                self.notify("this pair is not saved", severity="warning")
            return
        path = path.resolve()
        self.app.copy_to_clipboard(str(path))
        self.notify(
            f"{clean(path, None)} (copied to the clipboard)",  # one line: the bottom line
            title="pair folder",
            markup=False,
            timeout=4,
        )

    def _scrolled(self, old: float, new: float) -> None:
        """Scrolled up to the first row kept (not following): the lines before it are read
        from the logs (the window around it), the view held on that row."""
        if new > 0 or new >= old or self.panes.follow or self.rows_read_before is not None:
            return
        first = next((step for step, _ in self.feed.rows.entries if step is not None), None)
        logs = self.logs_on_disk()
        if first is None or logs is None or first in self._read_before:
            return
        self._read_before.add(first)
        self.rows_read_before = first
        max_lines = self.feed.rows.max_lines
        read_then_show(
            self,
            lambda: window(logs, first, max_lines),
            lambda lines: self._show_before(first, lines),
            group="window",
            what=f"reading the lines before step {first}",
        )

    def _show_before(self, step: int, lines: dict[str, list[Record]]) -> None:
        """The window read around `step`, the panes on it as they were (nothing before it in
        the logs: the rows stay)."""
        self.rows_read_before = None
        earlier = any(
            isinstance(r, Step) and r.step < step for recs in lines.values() for r in recs
        )
        if not earlier or self.panes.follow:
            return
        rows = self.feed.rows
        pager = self.panes.pager
        at, was = pager.index(), rows.index_of(step)
        on_step = at is not None and was is not None and at <= was  # Home: the cursor stays
        rows.clear()
        self.panes.fill(lines, {})
        index = rows.index_of(step)
        if index is None:
            return
        self._read_before.add(step)
        if on_step:
            pager.cursor = rows.start + index
            for side in SIDES:
                self.panes.pane(side).cursor = pager.cursor

        def hold() -> None:
            for side in SIDES:
                self.panes.pane(side).scroll_to(y=index, animate=False, immediate=True, force=True)

        hold()
        self.call_after_refresh(hold)  # once the panes know their new height
        self.notify(f"lines before step {step} read from the logs", timeout=2)

    def logs_on_disk(self) -> SavedLogs | None:
        """The two logs to read a window from: a saved pair's, a replay's, a finished pair's."""
        if self.saved is not None:
            return self.saved.logs
        if self.session is not None and self.session.logs is not None:
            return self.session.logs
        if self.model.done and self.model.pair_path is not None:
            try:
                return resolve_logs([str(self.model.pair_path)])
            except ReplayError:
                return None
        return None

    def action_help(self) -> None:
        """The keys of this view and what the panel shows (Esc, ? or q closes it)."""
        self.app.push_screen(HelpScreen(self.help_rows()))  # as the app's F1

    def action_back(self) -> None:
        """Back to the browser (a replay is stopped) or the sweep (its pair runs on)."""
        self._stop_watching()
        if self.session is not None and self.watched is None and not self.model.done:
            self.session.stop()
        self.app.summary_lines = []
        self.dismiss(None)

    def action_quit(self) -> None:
        """Quit; a live pair still running asks first, then stops both runs and saves."""
        self.request_quit()

    def request_quit(self) -> None:
        """Quit now, or (live pair running) confirm, stop both runs, wait for the save, exit."""
        if isinstance(self.app.screen, ConfirmScreen):
            return  # ctrl+c again while the question is shown
        self._remember_summary()
        if self.shows is not Shows.LIVE or self.model.done or not self._session_running():
            self.app.exit(0)
            return
        if self.stopping:  # asked twice: do not wait for the save
            self.app.exit(130, return_code=130)
            return
        watched = self.session is not None and isinstance(self.session.source, FollowSource)
        question, no = (
            (WATCH_QUESTION, "Keep watching") if watched else (STOP_QUESTION, "Keep running")
        )
        self.app.push_screen(ConfirmScreen(question, yes="Stop", no=no), self._stop_answer)

    def stop_now(self) -> bool:
        """Stop the session without asking (tuimon got a signal); True when a live pair is being
        stopped and saved (the app exits once it is), False when there is nothing to wait for."""
        if self.session is None or self.model.done or not self._session_running():
            return False
        if self.shows is not Shows.LIVE:
            self.session.stop()
            return False
        self._stop_answer(True)
        return True

    def _stop_answer(self, stop: bool | None) -> None:
        if not stop or self.session is None:
            return
        if self.model.done:  # the pair ended while the question was shown: nothing to stop
            self._remember_summary()
            self.app.exit(0)
            return
        self.stopping = True
        self.session.stop()
        self.panel.say("stopping both runs … the partial pair is saved")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A session that failed or ended without its last batch lets a pending quit go on."""
        if (
            event.worker.group == "session"
            and event.state in (WorkerState.ERROR, WorkerState.CANCELLED)
            and self.stopping
        ):
            self.app.exit(130, return_code=130)


def _freeze() -> None:
    """Collect the garbage, then keep what lives out of the cyclic collector's sight."""
    gc.collect()
    gc.freeze()
