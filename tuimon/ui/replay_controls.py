"""The replay controls of the pair view: pause, speed, fast-forward to the first divergence.

`PairScreen` owns one `ReplayControls` and binds its keys (`pair_keys.PAIR_KEYS`); it asks the
session for its `PaceControls` (a replay offers them, a live pair does not) and never looks at
the type of the session's source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.dom import DOMNode

from tuimon.engine.sources.saved_pair import SavedPair
from tuimon.engine.sources.session import PaceControls, PairSession
from tuimon.report.wording import si
from tuimon.ui.pair_model import PairModel
from tuimon.ui.workers import read_then_show

if TYPE_CHECKING:
    from tuimon.ui.pair_panes import PairPanes


class ReplayHost(Protocol):
    """What the controls need of the view that holds them (the pair screen)."""

    session: PairSession | None
    model: PairModel

    @property
    def panes(self) -> PairPanes: ...
    def update_subtitle(self) -> None: ...
    def notify(self, message: str, *, timeout: float | None = None) -> None: ...


class ReplayControls:
    """Replay keys of one pair view; `pace` is None for a live or saved pair."""

    def __init__(self, screen: ReplayHost, node: DOMNode) -> None:
        self.screen = screen
        self.node = node
        """Where the search for the first divergence runs (a worker of the screen)."""
        self.pending_jump: int | None = None
        """A step fast-forwarded to, until both panes hold it."""

    @property
    def pace(self) -> PaceControls | None:
        """The session's pace controls, when it has any."""
        session = self.screen.session
        return session.controls if session is not None else None

    def words(self) -> list[str]:
        """The subtitle's words on the pace: `50 steps/s`, `paused`."""
        pace = self.pace
        if pace is None:
            return []
        if getattr(pace, "realtime", False):
            shown = "recorded pace" if pace.speed == 1 else f"{pace.speed:g}x recorded pace"
        else:
            shown = f"{si(pace.speed)} steps/s"
        return [shown, *(["paused"] if pace.paused else [])]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool:
        """Replay keys work while a replay runs."""
        return self.pace is not None and not self.screen.model.done

    def land_jump(self) -> None:
        """Once both panes hold the step fast-forwarded to: pause there and show it."""
        step, screen = self.pending_jump, self.screen
        if step is None or not screen.panes.holds(step):
            return
        self.pending_jump = None
        pace = self.pace
        if pace is not None and not pace.paused:
            pace.pause()
        screen.panes.scroll_to_step(step)
        screen.notify(f"paused at the first divergence, step {step} (space resumes)", timeout=3)

    def jump(self, step: int | None) -> None:
        """Fast-forward the replay to `step` (the first divergence found in its logs)."""
        pace, screen = self.pace, self.screen
        if step is None:
            screen.notify("no divergence in the steps both logs hold", timeout=3)
            return
        if pace is None or screen.model.done or (screen.model.last_step or -1) >= step:
            screen.notify(f"step {step} is no longer in the panes")
            return
        self.pending_jump = step
        pace.jump(step)
        screen.notify(f"fast-forwarding to the first divergence, step {step} …", timeout=2)
        screen.update_subtitle()

    def find_and_jump(self) -> bool:
        """Find the first divergence in the replayed logs (a worker), then jump there.

        False when there is no replay to search.
        """
        screen = self.screen
        session = screen.session
        if session is None or session.controls is None or session.logs is None:
            return False
        if session.judged_ahead is not None:  # judged in full already (`Judged.ahead`)
            self.jump(session.judged_ahead.first_divergent_step)
            return True
        logs, tolerance = session.logs, session.options.tolerance
        read_then_show(
            self.node,
            lambda: SavedPair.of(logs).first_divergent_step(tolerance),
            self.jump,
            group="jump",
            what="finding the first divergence",
        )
        return True

    def action_pause(self) -> None:
        """Pause or resume the replay."""
        pace = self.pace
        if pace is not None:
            self.screen.notify("replay paused" if pace.toggle() else "replay resumed", timeout=2)
            self.screen.update_subtitle()

    def action_faster(self) -> None:
        """Replay twice as fast."""
        if (pace := self.pace) is not None:
            pace.faster()
            self.screen.update_subtitle()

    def action_slower(self) -> None:
        """Replay half as fast."""
        if (pace := self.pace) is not None:
            pace.slower()
            self.screen.update_subtitle()
