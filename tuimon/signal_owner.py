"""Whether tuimon owns this process's signals: only when its entry point started it (`tuimon`,
`python -m tuimon`: `tuimon.cli.main` called without arguments). Then SIGINT, SIGTERM and SIGHUP
stop a pair or a sweep and save it; a process that calls `main([...])` or runs the app itself
(a test) keeps its own handlers, so Ctrl-C stops pytest."""

from __future__ import annotations

_owned = False


def own() -> None:
    """Called by the entry point: tuimon's handlers may be installed from now on."""
    global _owned
    _owned = True


def owned() -> bool:
    """Whether tuimon may install its signal handlers in this process."""
    return _owned
