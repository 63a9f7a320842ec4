"""The keys of each view as one table: ids, keys, help text, footer priority.

A screen's `Key` rows make its Textual bindings (`bindings`), its Footer (in the table's order;
when the width is short, the keys of lowest `footer` priority leave first) and what `?` lists
(`KeyedScreen.help_rows`: every key that works there, the moves included). A view inside a
screen (the pair's panes, a table of rows) gives rows whose `view` names it: the screen runs
them on that view (`KeyedScreen.action_view`), so no widget binds a key the table does not hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import actions
from textual.binding import Binding
from textual.dom import NoScreen
from textual.screen import Screen
from textual.widgets import Footer

KEY_GAP = 2
"""Cells a compact FooterKey takes besides its key and its description."""

KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "colon": ":",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "equals_sign": "=",
    "plus": "+",
    "minus": "-",
    "up": "↑",
    "down": "↓",
    "left": "←",
    "right": "→",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
    "escape": "Esc",
    "enter": "Enter",
    "space": "Space",
    "f1": "F1",
    "f5": "F5",
}


def key_name(key: str) -> str:
    """A key as printed on the keyboard (`]`, not `right_square_bracket`; `PgUp`)."""
    return KEY_NAMES.get(key, key)


@dataclass(frozen=True, slots=True)
class Key:
    """One key (or keys) of a view and what it does."""

    id: str
    keys: str
    """Textual's key names, comma-separated (`up,k`)."""
    action: str
    label: str
    """The Footer's word."""
    help: str
    """What `?` says of it."""
    footer: int = 0
    """Footer priority: 0 never in the Footer; when the width is short, the lowest leave first."""
    display: str = ""
    """The keys as shown, when not their names (`?`, `+`)."""
    view: str = ""
    """The screen's attribute that runs the action (its panes, its table); "" the screen."""
    priority: bool = False
    """Before the focused widget's own handling (Textual's priority binding)."""

    @property
    def shown(self) -> str:
        """The keys as `?` lists them."""
        if self.display:
            return self.display
        names = [key_name(k.strip()) for k in self.keys.split(",")]
        return " ".join(n for n in names if not n.startswith("ctrl+")) or " ".join(names)

    def binding(self) -> Binding:
        """The Textual binding (a view's action run through the screen's `view` action)."""
        action = f"view({self.view!r}, {self.action!r})" if self.view else self.action
        return Binding(
            self.keys,
            action,
            self.label,
            show=self.footer > 0,
            key_display=self.display or None,
            priority=self.priority,
            tooltip=self.help,
            id=self.id,
        )


def bindings(table: Iterable[Key]) -> list[Binding]:
    """A table's bindings, in its order."""
    return [key.binding() for key in table]


def of_view(view: str, table: Iterable[Key]) -> tuple[Key, ...]:
    """A view's rows, run on the screen's `view`."""
    return tuple(dataclasses.replace(key, view=view) for key in table)


def drop_order(table: Sequence[Key]) -> list[str]:
    """The ids of the Footer's keys, the first to leave a short Footer first."""
    shown = [(key.footer, i, key.id) for i, key in enumerate(table) if key.footer > 0]
    return [key_id for _, _, key_id in sorted(shown)]


class KeyedScreen(Screen[Any]):
    """A screen whose keys are one table (`KEYS`): bindings, Footer and help drawn from it."""

    KEYS: ClassVar[tuple[Key, ...]] = ()
    FOOTER_RESERVE: ClassVar[int] = 2
    """Cells kept free at the Footer's right end."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "KEYS" in cls.__dict__:  # before Textual merges the bindings of the class
            cls.BINDINGS = bindings(cls.KEYS)  # type: ignore[assignment]
        super().__init_subclass__(**kwargs)

    @property
    def active_bindings(self) -> Any:
        """The active bindings, the keys that do not fit the Footer marked `show=False`."""
        found = Screen.active_bindings.fget(self)  # type: ignore[attr-defined]
        hidden = self._footer_hidden(found)
        if not hidden:
            return found
        return {
            key: active._replace(binding=dataclasses.replace(active.binding, show=False))
            if active.binding.id in hidden
            else active
            for key, active in found.items()
        }

    def _footer_hidden(self, found: Any) -> set[str]:
        width = self.size.width or 0
        if not width:
            return set()
        cost: dict[str, int] = {}  # one key per action, as the Footer shows them
        ids: dict[str, str] = {}
        for key, active in found.items():
            binding = active.binding
            if not binding.show or binding.action in cost:
                continue
            display = binding.key_display or self.app.get_key_display(binding) or key
            cost[binding.action] = len(display) + len(binding.description) + KEY_GAP
            if binding.id:
                ids[binding.id] = binding.action
        total = sum(cost.values()) + self.FOOTER_RESERVE
        hidden: set[str] = set()
        for key_id in drop_order(self.KEYS):
            if total <= width:
                break
            action = ids.get(key_id)
            if action is not None:
                hidden.add(key_id)
                total -= cost.pop(action)
        return hidden

    def on_resize(self) -> None:
        """Choose the Footer's keys again for the new width."""
        self.refresh_bindings()

    def help_rows(self) -> list[tuple[str, str]]:
        """Every key of the table that works here now, as `?` lists it: (keys, what)."""
        rows = []
        for key in self.KEYS:
            _, name, params = actions.parse(key.binding().action)
            if self.check_action(name, params) is False:
                continue
            rows.append((key.shown, key.help))
        return rows

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A view's key as the view says."""
        if action == "view":
            view, name = parameters
            target = getattr(self, str(view))
            return bool(target.check_action(name, ())) if hasattr(target, "check_action") else True
        return True

    def action_view(self, view: str, action: str) -> None:
        """Run a view's own action (its keys are bound here, see `Key.view`)."""
        getattr(getattr(self, view), f"action_{action}")()


class KeyFooter(Footer):
    """Textual's Footer, composed again once for a burst of binding changes, and only when the
    keys it shows changed. Textual's own composes it again for each change: six times while a
    view starts (its stack, focus and size each say so), ~0.1 s in which the first rows wait
    (issue 42)."""

    _due = False
    """A compose is asked for and has not run yet."""
    _shown: tuple[object, ...] | None = None
    """The keys the last compose showed (key, words, action, enabled, tooltip)."""

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """Ask for one compose; those asked while it is due are the same one."""
        if self._due:
            return
        self._due = screen.app.app_focus and self.is_attached and screen is self.screen
        super().bindings_changed(screen)

    async def recompose(self) -> None:
        """Compose with the bindings as they are now, where they show other keys."""
        self._due = False
        try:
            active = self.screen.active_bindings
        except NoScreen:  # its screen closed before the compose came
            return
        shown = tuple(
            (b.key, b.key_display, b.description, b.action, b.group, enabled, tooltip)
            for _, b, enabled, tooltip in active.values()
            if b.show
        )
        if shown != self._shown:
            self._shown = shown
            await super().recompose()
