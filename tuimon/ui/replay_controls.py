"""The replay controls of the pair view: pause, speed, fast-forward to the first divergence.

A mixin for `PairScreen`: it asks the session for its `PaceControls` (a replay offers them, a
live pair does not) and never looks at the type of the session's source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuimon.replay import first_divergence
from tuimon.session import PaceControls
from tuimon.wording import si

if TYPE_CHECKING:
    from tuimon.ui.pair_screen import PairScreen

    _Base = PairScreen
else:
    _Base = object


class ReplayControls(_Base):
    """Replay keys of the pair view; `controls` is None for a live or saved pair."""

    @property
    def controls(self) -> PaceControls | None:
        """The session's pace controls, when it has any."""
        return self.session.controls if self.session is not None else None

    def pace_words(self) -> list[str]:
        """The subtitle's words on the pace: `50 steps/s`, `paused`."""
        controls = self.controls
        if controls is None:
            return []
        return [f"{si(controls.speed)} steps/s", *(["paused"] if controls.paused else [])]

    def controls_enabled(self) -> bool:
        """Replay keys work while a replay runs."""
        return self.controls is not None and not self.model.done

    def land_jump(self) -> None:
        """Once both panes hold the step fast-forwarded to: pause there and show it."""
        step = self.pending_jump
        if step is None or not self.buffers_hold(step):
            return
        self.pending_jump = None
        controls = self.controls
        if controls is not None and not controls.paused:
            controls.pause()
        self._scroll_panes_to(step)
        self.notify(f"paused at the first divergence, step {step} (space resumes)")

    def replay_jump(self, step: int | None) -> None:
        """Fast-forward the replay to `step` (the first divergence found in its logs)."""
        controls = self.controls
        if step is None:
            self.notify("the two logs never diverge")
            return
        if controls is None or self.model.done or (self.model.last_step or -1) >= step:
            self.notify(f"step {step} is no longer in the panes")
            return
        self.pending_jump = step
        controls.jump(step)
        self.notify(f"fast-forwarding to the first divergence, step {step} …")
        self._update_subtitle()

    def find_and_jump(self) -> bool:
        """Look for the first divergence in the replayed logs (a worker), then jump; False
        when there is nothing to replay."""
        session = self.session
        if session is None or session.controls is None or session.logs is None:
            return False
        logs, tolerance = session.logs, session.options.tolerance

        def find() -> None:
            self.app.call_from_thread(self.replay_jump, first_divergence(logs, tolerance))

        self.run_worker(
            find,
            thread=True,
            group="jump",
            exclusive=True,
            exit_on_error=False,
            description="finding the first divergence",
        )
        return True

    def action_pause(self) -> None:
        """Pause or resume the replay."""
        controls = self.controls
        if controls is not None:
            self.notify("replay paused" if controls.toggle() else "replay resumed", timeout=2)
            self._update_subtitle()

    def action_faster(self) -> None:
        """Replay twice as fast."""
        controls = self.controls
        if controls is not None:
            controls.faster()
            self._update_subtitle()

    def action_slower(self) -> None:
        """Replay half as fast."""
        controls = self.controls
        if controls is not None:
            controls.slower()
            self._update_subtitle()
