"""The one place worker failures are reported (mixed into every screen that starts workers)."""

from __future__ import annotations

from textual.worker import Worker, WorkerState

from tuimon.sanitize import clean


class ReportsWorkerErrors:
    """Notifies the error of any worker of this node that fails (exit_on_error=False)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Tell the user which task failed and why; the view stays up."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        reason = f"{type(error).__name__}: {clean(error)}" if error is not None else "unknown error"
        self.app.notify(  # type: ignore[attr-defined]
            reason,
            title=clean(f"{worker.description or worker.name} failed", 200),
            severity="error",
            markup=False,
            timeout=10,
        )
