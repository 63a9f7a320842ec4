"""tuimon.adopt and the framework callbacks: digests as the reference computes them, the pair's
settings applied and reported, one step record per step."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from tuimon.adopt import StepBuffer, StepLogger, model_digests
from tuimon.applied import pair_applied, reported
from tuimon.readers import load
from tuimon.steplog import Header, Step, parse_line

torch = pytest.importorskip("torch")


def test_importing_adopt_does_not_import_torch() -> None:
    code = "import sys, tuimon.adopt; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_model_digests_are_the_reference_workloads() -> None:
    from tuimon.workload.loop import build
    from tuimon.workload.options import Settings

    model, _ = build(Settings(p=7, steps=1), torch.device("cpu"))
    from tuimon.workload.loop import param_digests

    whole, per = param_digests(model)
    assert model_digests(model) == {"param_digest": whole, "param_digests": per}
    assert list(per) == [name for name, _ in model.named_parameters()]
    with torch.no_grad():
        model.W_U[0, 0] += 1e-7
    after = model_digests(model)
    changed = [k for k in per if after["param_digests"][k] != per[k]]
    assert changed == ["W_U"] and after["param_digest"] != whole


def test_apply_pair_settings_applies_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    from tuimon.adopt import apply_pair_settings

    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    monkeypatch.setenv("TUIMON_SEED", "7")
    monkeypatch.setenv("TUIMON_THREADS", "1")
    monkeypatch.setenv("TUIMON_DETERMINISTIC", "1")
    monkeypatch.setenv("TUIMON_DEVICE", "cpu")
    try:
        env = apply_pair_settings(seed=0)
        first = torch.rand(3)
        apply_pair_settings(seed=0)
        assert torch.equal(first, torch.rand(3))  # seeded from TUIMON_SEED, again
        assert env["applied"]["seed"] == 7 and env["threads"] == 1
        assert env["deterministic"] is True and env["device"] == "cpu"
        buf = io.BytesIO()
        StepLogger(buf, env=env).close()
        header = parse_line(buf.getvalue().splitlines()[0])
        assert isinstance(header, Header)
        assert reported(header) == {
            "known": True, "seed": 7, "torch": torch.__version__, "threads": 1,
            "deterministic": True,
        }  # fmt: skip
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


def test_pair_applied_says_when_it_cannot_know() -> None:
    told = Header({}, {}, {"applied": {"deterministic": True}})
    silent = Header({}, {"lr": 1}, {"device": "cpu"})
    both = pair_applied(True, {"a": told, "b": told})
    assert both["deterministic"] is True
    one = pair_applied(True, {"a": told, "b": silent})
    assert one["deterministic"] is None and one["applied"]["b"]["known"] is False
    assert pair_applied(True, {"a": told, "b": None})["applied"]["b"]["why"] == (
        "the run wrote no header"
    )
    off = Header({}, {}, {"deterministic": False, "threads": 2})
    assert pair_applied(True, {"a": told, "b": off})["deterministic"] is False


def test_step_buffer_merges_rows_of_one_step_and_keeps_repeats() -> None:
    buf = io.BytesIO()
    log = StepLogger(buf)
    rows = StepBuffer(log)
    rows.add(10, {"loss": torch.tensor(2.5), "epoch": 1.0, "name": "text is dropped"})
    rows.add(10, {"eval_loss": 3.0, "epoch": 1.0})
    rows.add(10, {"eval_loss": 3.5})  # the same key again, another value: a second record
    rows.add(20, {"loss": 1.5})
    rows.flush()
    steps = [r for r in map(parse_line, buf.getvalue().splitlines()) if isinstance(r, Step)]
    assert [(s.step, s.metrics) for s in steps] == [
        (10, {"loss": 2.5, "epoch": 1.0, "eval_loss": 3.0}),
        (10, {"eval_loss": 3.5}),
        (20, {"loss": 1.5}),
    ]


def test_lightning_callback_with_the_real_trainer(tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from tuimon.integrations.lightning import TuimonCallback

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.save_hyperparameters({"lr": 0.1})
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def run(path: Path) -> None:
        torch.manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
        loader = torch.utils.data.DataLoader(data, batch_size=4)
        trainer = pl.Trainer(
            max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, callbacks=[TuimonCallback(path)], accelerator="cpu",
        )  # fmt: skip
        trainer.fit(Tiny(), loader, loader)

    run(tmp_path / "a.jsonl")
    run(tmp_path / "b.jsonl")
    loaded = load(tmp_path / "a.jsonl")
    assert loaded.format == "tuimon step log"
    assert [s.step for s in loaded.steps] == [1, 2, 3, 4]
    assert "val_loss" in loaded.steps[1].metrics  # the first epoch's validation, merged
    assert all(s.digest and "layer.weight" in s.digests for s in loaded.steps)
    assert (tmp_path / "a.jsonl").read_bytes().splitlines()[-1].startswith(b'{"type":"end"')
    from tuimon.cli import main

    assert main(["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0


def test_huggingface_callback_with_the_real_classes(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from tuimon.integrations.huggingface import TuimonCallback

    args = transformers.TrainingArguments(output_dir=str(tmp_path), seed=3, report_to=[])
    state = transformers.TrainerState()
    control = transformers.TrainerControl()
    model = torch.nn.Linear(2, 1)
    callback = TuimonCallback(tmp_path / "log.jsonl")
    assert isinstance(callback, transformers.TrainerCallback)
    handler = transformers.trainer_callback.CallbackHandler([callback], model, None, None, None)
    handler.on_train_begin(args, state, control)
    for step in (10, 20):
        state.global_step = step
        handler.on_log(args, state, control, {"loss": 1.0 / step, "learning_rate": 1e-3})
        handler.on_log(args, state, control, {"eval_loss": 2.0 / step, "eval_runtime": 0.5})
    handler.on_train_end(args, state, control)
    loaded = load(tmp_path / "log.jsonl")
    header = loaded.records[0]
    assert isinstance(header, Header) and header.run["seed"] == 3
    assert [(s.step, sorted(s.metrics)) for s in loaded.steps] == [
        (10, ["eval_loss", "learning_rate", "loss"]),
        (20, ["eval_loss", "learning_rate", "loss"]),
    ]
    assert loaded.steps[0].digests.keys() == {"weight", "bias"}


def test_callbacks_say_what_is_missing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "try:\n import tuimon.integrations.huggingface\n"
        "except ImportError as e: print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install transformers" in out.stdout


def test_huggingface_trainer_run_writes_a_log_and_its_trainer_state_reads(
    tmp_path: Path,
) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from tuimon.integrations.huggingface import TuimonCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def forward(self, x, labels=None):
            out = self.layer(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    class Data(torch.utils.data.Dataset):
        def __init__(self) -> None:
            g = torch.Generator().manual_seed(0)
            self.x, self.y = torch.randn(16, 2, generator=g), torch.randn(16, 1, generator=g)

        def __len__(self) -> int:
            return 16

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    def run(side: str) -> Path:
        out = tmp_path / side
        args = transformers.TrainingArguments(
            output_dir=str(out), max_steps=4, logging_steps=1, eval_strategy="steps",
            eval_steps=2, per_device_train_batch_size=4, report_to=[], use_cpu=True,
            save_strategy="no", disable_tqdm=True, seed=0,
        )  # fmt: skip
        transformers.set_seed(0)
        trainer = transformers.Trainer(
            model=Tiny(), args=args, train_dataset=Data(), eval_dataset=Data(),
            callbacks=[TuimonCallback(out / "log.jsonl")],
        )  # fmt: skip
        trainer.train()
        trainer.state.save_to_json(str(out / "trainer_state.json"))
        return out

    a, b = run("a"), run("b")
    log = load(a / "log.jsonl")
    assert [s.step for s in log.steps] == [1, 2, 3, 4]
    assert "eval_loss" in log.steps[1].metrics and "loss" in log.steps[1].metrics
    assert all(s.digests.keys() == {"layer.weight", "layer.bias"} for s in log.steps)
    state = load(a / "trainer_state.json")
    assert state.format == "trainer_state.json"
    assert [s.step for s in state.steps] == [1, 2, 3, 4]
    assert "eval_loss" in state.steps[1].metrics and "eval_runtime" not in state.steps[1].metrics
    from tuimon.cli import main

    assert main(["compare", str(a / "log.jsonl"), str(b / "log.jsonl")]) == 0
    assert main(["compare", str(a / "trainer_state.json"), str(b / "trainer_state.json")]) == 0


def test_lightning_csv_logger_file_reads(tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    trainer = pl.Trainer(
        max_epochs=2, logger=CSVLogger(str(tmp_path)), log_every_n_steps=1,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        accelerator="cpu",
    )  # fmt: skip
    trainer.fit(Tiny(), loader, loader)
    (csv_file,) = tmp_path.rglob("metrics.csv")
    loaded = load(csv_file)
    assert loaded.format == "CSV"
    assert [s.step for s in loaded.steps] == [0, 1, 2, 3]
    assert {"train_loss", "val_loss", "epoch"} <= set(loaded.steps[1].metrics)


def test_apply_pair_settings_without_torch_says_so(monkeypatch) -> None:
    """A script without torch: Python's seed is set, and the block says torch was not there."""
    import sys

    from tuimon import adopt

    monkeypatch.setitem(sys.modules, "torch", None)  # as when it is not installed
    monkeypatch.setitem(sys.modules, "tuimon.workload.device", None)
    monkeypatch.setenv("TUIMON_SEED", "7")
    env = adopt.apply_pair_settings()
    assert env["torch"] is None and env["threads"] is None and env["deterministic"] is None
    assert env["applied"]["seed"] == 7
