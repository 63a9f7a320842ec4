"""A Hugging Face `TrainerCallback` that writes a tuimon step log, parameter digests included.

    from tuimon.integrations.huggingface import TuimonCallback
    trainer = Trainer(..., callbacks=[TuimonCallback()])   # the step log on stdout

One record per logged step (`state.global_step`): what the Trainer logs (train and eval rows of
one step merged; runtimes and throughput are clocks, never compared), and the digests of the
model's parameters at that step.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from tuimon.adopt import StepBuffer, applied_env, model_digests
from tuimon.steplog import StepLogger

try:
    from transformers import TrainerCallback
except ImportError:
    raise ImportError(
        "tuimon.integrations.huggingface needs transformers: pip install transformers"
    ) from None

SETTINGS = (
    "seed", "learning_rate", "weight_decay", "per_device_train_batch_size",
    "gradient_accumulation_steps", "num_train_epochs", "max_steps", "warmup_steps",
    "lr_scheduler_type", "optim", "fp16", "bf16", "full_determinism", "data_seed",
)  # fmt: skip


class TuimonCallback(TrainerCallback):
    """Writes the step log to `file` (stdout by default); `digests=False` skips the digests."""

    def __init__(self, file: str | Path | IO[bytes] | None = None, *, digests: bool = True) -> None:
        self.file = file
        self.digests = digests
        self.logger: StepLogger | None = None
        self._buffer: StepBuffer | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        model = kwargs.get("model")
        try:
            device = str(args.device)
        except Exception:  # args.device sets up devices; it may need packages not there
            device = "?"
        env = applied_env(device)
        self.logger = StepLogger(
            self.file,
            run={"name": type(model).__name__ if model is not None else "model",
                 "framework": "transformers", "seed": getattr(args, "seed", None)},
            hyper={k: getattr(args, k) for k in SETTINGS if hasattr(args, k)},
            env=env,
        )  # fmt: skip
        self._buffer = StepBuffer(self.logger)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if self._buffer is None or not logs:
            return
        values = dict(logs)
        model = kw.get("model")
        if self.digests and model is not None:
            values.update(model_digests(model))
        self._buffer.add(int(state.global_step), values)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._buffer is not None and self.logger is not None:
            self._buffer.flush()
            self.logger.close("ok")
        self._buffer = None
