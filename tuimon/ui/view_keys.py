"""The pair view's keys for what it shows (`w` digits, `m` sparkline metric, `c` curves, `e`
environment, `o` folder): a mixin of `PairScreen`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widgets import ContentSwitcher

from tuimon.engine.sources.session import PairSession
from tuimon.store import SIDES
from tuimon.ui.chart import CurvesView
from tuimon.ui.divergence import DivergencePanel
from tuimon.ui.modals import EnvDiffScreen
from tuimon.ui.pair_model import DIVERGENCE, PairModel
from tuimon.ui.text import clean

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from tuimon.ui.panes import StepPane


class ViewKeys:
    """Actions on what the pair view shows; the screen provides the attributes named here."""

    model: PairModel
    series: str
    session: PairSession | None
    app: Any
    _curves_dirty: bool

    if TYPE_CHECKING:  # the screen's own

        def pane(self, side: str) -> StepPane: ...
        def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
        def notify(
            self,
            message: str,
            *,
            title: str = "",
            severity: SeverityLevel = "information",
            timeout: float | None = None,
            markup: bool = True,
        ) -> None: ...

    def _draw_curves(self) -> None:
        if self._curves_dirty:
            self.query_one(CurvesView).show(self.model)
            self._curves_dirty = False

    def action_wide(self) -> None:
        """Every digit of every number, or what fits the panes."""
        for side in SIDES:
            pane = self.pane(side)
            pane.set_wide(not pane.wide)

    def action_cycle_metric(self) -> None:
        """The sparkline follows the next shared metric (then the divergence again)."""
        names = self.model.series_names()
        self.series = (
            names[(names.index(self.series) + 1) % len(names)]
            if self.series in names
            else DIVERGENCE
        )
        self.query_one(DivergencePanel).show(self.model, self.series)
        self.notify(f"sparkline follows {clean(self.series, 80)}", markup=False, timeout=2)

    def action_curves(self) -> None:
        """Switch between the panes and the loss curves."""
        switcher = self.query_one("#views", ContentSwitcher)
        switcher.current = "panes" if switcher.current == "curves" else "curves"
        if switcher.current == "curves":
            self._draw_curves()

    def action_env(self) -> None:
        """The environment differences of the two runs."""
        rows = self.model.env_rows()
        self.app.push_screen(EnvDiffScreen(rows))

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
