"""A PyTorch Lightning callback that writes a tuimon step log, parameter digests included.

    from tuimon.integrations.lightning import TuimonCallback
    trainer = Trainer(callbacks=[TuimonCallback()])        # the step log on stdout

One record per optimizer step (`trainer.global_step`): the logged metrics
(`trainer.callback_metrics`, the step's `loss`), validation results merged into the step they
were computed at (and not repeated in later records), and the digests of the module's
parameters after the update.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from tuimon.adopt import StepBuffer, applied_env, model_digests
from tuimon.steplog import StepLogger

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    try:
        from pytorch_lightning import Callback
    except ImportError:
        raise ImportError(
            "tuimon.integrations.lightning needs PyTorch Lightning: pip install lightning"
        ) from None


def _hyper(pl_module: Any) -> dict[str, Any]:
    hparams = getattr(pl_module, "hparams", None)
    try:
        return dict(hparams) if hparams is not None else {}
    except (TypeError, ValueError):
        return {}


class TuimonCallback(Callback):
    """Writes the step log to `file` (stdout by default); `digests=False` skips the digests."""

    def __init__(self, file: str | Path | IO[bytes] | None = None, *, digests: bool = True) -> None:
        super().__init__()
        self.file = file
        self.digests = digests
        self.logger: StepLogger | None = None
        self._buffer: StepBuffer | None = None
        self._val_keys: set[str] = set()
        self._before: dict[str, Any] = {}

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "global_rank", 0) != 0:
            return
        env = applied_env(str(getattr(pl_module, "device", "?")))
        self.logger = StepLogger(
            self.file,
            run={"name": type(pl_module).__name__, "framework": "lightning"},
            hyper={**_hyper(pl_module), "max_epochs": getattr(trainer, "max_epochs", None)},
            env=env,
        )
        self._buffer = StepBuffer(self.logger)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._buffer is None:
            return
        metrics = getattr(trainer, "callback_metrics", {}) or {}
        values = {k: v for k, v in metrics.items() if k not in self._val_keys}
        if isinstance(outputs, dict) and "loss" in outputs:
            values["loss"] = outputs["loss"]
        elif outputs is not None and hasattr(outputs, "item"):
            values["loss"] = outputs
        if self.digests:
            values.update(model_digests(pl_module))
        self._buffer.add(int(trainer.global_step), values)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._before = dict(getattr(trainer, "callback_metrics", {}) or {})

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._buffer is None or getattr(trainer, "sanity_checking", False):
            return
        metrics = getattr(trainer, "callback_metrics", {}) or {}
        new = {
            k: v for k, v in metrics.items() if k not in self._before or v is not self._before[k]
        }
        self._val_keys.update(new)  # validation's keys: not repeated in the train records
        self._buffer.add(int(trainer.global_step), new)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._close("ok")

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close("error")

    def _close(self, status: str) -> None:
        if self._buffer is not None and self.logger is not None:
            self._buffer.flush()
            self.logger.close(status)
        self._buffer = None
