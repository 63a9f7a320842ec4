"""Command-palette provider: the active screen's key bindings, found by their descriptions."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class ScreenActions(Provider):
    """Offers every described binding of the screen that is allowed now (same check as keys)."""

    def _actions(self) -> list[tuple[str, str, str]]:
        screen = self.screen
        seen: set[str] = set()
        out = []
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if active.node is not screen or not active.enabled or not binding.description:
                continue
            if binding.id is None or binding.system:  # Textual's own (focus next ...)
                continue
            if binding.action in seen:
                continue
            seen.add(binding.action)
            keys = binding.key_display or key
            help_text = f"{binding.tooltip} (key: {keys})" if binding.tooltip else f"key: {keys}"
            out.append((binding.description, binding.action, help_text))
        return out

    async def discover(self) -> Hits:
        """All of them, in binding order."""
        for description, action, help_text in self._actions():
            yield DiscoveryHit(description, partial(self.screen.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        """Those whose description matches the query."""
        matcher = self.matcher(query)
        for description, action, help_text in self._actions():
            score = matcher.match(description)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(description),
                    partial(self.screen.run_action, action),
                    help=help_text,
                )
