"""The one place worker failures are reported (mixed into every screen that starts workers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from tuimon.sanitize import clean

T = TypeVar("T")


def read_then_show(
    node: DOMNode, read: Callable[[], T], show: Callable[[T], Any], *, group: str, what: str
) -> None:
    """`read` in a thread (files, the store), then `show` its result on the app's loop; a new
    read of the same group replaces one still running; a failure is told (`what` failed)."""

    def work() -> None:
        result = read()
        node.app.call_from_thread(show, result)

    node.run_worker(
        work, thread=True, group=group, exclusive=True, exit_on_error=False, description=what
    )


class ReportsWorkerErrors:
    """Notifies the error of any worker of this node that fails (exit_on_error=False)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Tell the user which task failed and why; the view stays up."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        reason = f"{type(error).__name__}: {clean(error)}" if error is not None else "unknown error"
        self.notify(  # type: ignore[attr-defined]  # the pair view puts it on its last line
            reason,
            title=clean(f"{worker.description or worker.name} failed", 200),
            severity="error",
            markup=False,
            timeout=10,
        )
