"""The one-line errors of tuimon: each is a message for the user; the CLI exits 2 on any of them."""

from __future__ import annotations


class TuimonError(Exception):
    """A user-facing, one-line error (bad input, an unusable path or device)."""


class UsageError(TuimonError):
    """Bad input on the command line."""


class StoreError(TuimonError):
    """The store or a pair directory cannot be read or written as asked."""


class ReplayError(TuimonError):
    """A path that cannot be replayed."""


class CompareError(TuimonError):
    """Logs that cannot be compared."""


class DeviceError(TuimonError):
    """A device that is not available here."""


class LaunchError(TuimonError):
    """A run could not be started (no such program, not executable ...)."""


class EmbCheckError(TuimonError):
    """Embeddings that cannot be checked at all (no file, not numbers, shapes that differ)."""
