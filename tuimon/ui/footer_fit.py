"""A Footer that fits the terminal: keys of least use leave it first when the width is short.

Textual's Footer cuts the keys that do not fit at the right edge, silently, so at 80 columns the
last keys (`? Help`, `q Quit`) were the first to go. A screen with `FitsFooter` names the keys
(binding ids) that may leave, least useful first; they still work and `?` still lists them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from textual.screen import Screen

KEY_GAP = 2
"""Cells a compact FooterKey takes besides its key and its description."""


class FitsFooter(Screen[Any]):
    """Hides footer keys in `FOOTER_DROP_ORDER` until the rest fits the screen's width."""

    FOOTER_DROP_ORDER: ClassVar[tuple[str, ...]] = ()
    """Binding ids that may leave the Footer, the first to go first."""
    FOOTER_RESERVE: ClassVar[int] = 2
    """Cells kept free at the Footer's right end."""

    @property
    def all_bindings(self) -> Any:
        """Every active binding, those hidden from a short Footer included (for `?`)."""
        return Screen.active_bindings.fget(self)  # type: ignore[attr-defined]

    @property
    def active_bindings(self) -> Any:
        """The active bindings, with the keys that do not fit marked `show=False`."""
        bindings = self.all_bindings
        hidden = self._footer_hidden(bindings)
        if not hidden:
            return bindings
        return {
            key: active._replace(binding=dataclasses.replace(active.binding, show=False))
            if active.binding.id in hidden
            else active
            for key, active in bindings.items()
        }

    def _footer_hidden(self, bindings: Any) -> set[str]:
        width = self.size.width or 0
        if not width or not self.FOOTER_DROP_ORDER:
            return set()
        cost: dict[str, int] = {}  # one key per action, as the Footer shows them
        ids: dict[str, str] = {}
        for key, active in bindings.items():
            binding = active.binding
            if not binding.show or binding.action in cost:
                continue
            display = binding.key_display or self.app.get_key_display(binding) or key
            cost[binding.action] = len(display) + len(binding.description) + KEY_GAP
            if binding.id:
                ids[binding.id] = binding.action
        total = sum(cost.values()) + self.FOOTER_RESERVE
        hidden: set[str] = set()
        for binding_id in self.FOOTER_DROP_ORDER:
            if total <= width:
                break
            action = ids.get(binding_id)
            if action is not None:
                hidden.add(binding_id)
                total -= cost[action]
        return hidden

    def on_resize(self) -> None:
        """Choose the Footer's keys again for the new width."""
        self.refresh_bindings()
