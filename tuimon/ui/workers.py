"""The one place worker failures are reported (mixed into every screen that starts workers)."""

from __future__ import annotations

from textual.worker import Worker, WorkerState


class ReportsWorkerErrors:
    """Notifies the error of any worker of this node that fails (exit_on_error=False)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Tell the user which task failed and why; the view stays up."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        reason = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
        self.app.notify(  # type: ignore[attr-defined]
            reason,
            title=f"{worker.description or worker.name} failed",
            severity="error",
            markup=False,
            timeout=10,
        )
