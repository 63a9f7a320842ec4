"""The reference workload, `tuimon train`: tiny real runs in subprocesses, plus its pieces."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tuimon.cli import main
from tuimon.steplog import Step, parse_line

pytestmark = [pytest.mark.torch, pytest.mark.alone]  # its 2-thread runs must race

TINY = ["--p", "23", "--steps", "6", "--eval-every", "2"]
PARAMS = ["W_E", "W_pos", "W_K", "W_Q", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out", "W_U"]
ENV_KEYS = {
    "python",
    "platform",
    "env_vars",
    "device",
    "device_name",
    "torch",
    "threads",
    "deterministic",
    "loss_dtype",
    "CUBLAS_WORKSPACE_CONFIG",
    "time_only",
}
HYPER_KEYS = {
    "task",
    "p",
    "seed",
    "steps",
    "frac_train",
    "n_train",
    "n_test",
    "lr",
    "weight_decay",
    "betas",
    "warmup",
    "eval_every",
    "d_model",
    "n_heads",
    "d_head",
    "d_mlp",
}


def train(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`python -m tuimon train ARGS` in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "tuimon", "train", *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )


def launch(*args: str, cwd: Path) -> subprocess.Popen[bytes]:
    """`python -m tuimon train ARGS` in `cwd`, started."""
    cmd = [sys.executable, "-m", "tuimon", "train", *args]
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def records(out: bytes) -> list[dict[str, Any]]:
    """Every JSON line of a log."""
    return [orjson.loads(line) for line in out.splitlines() if line.strip()]


def steps_of(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Step records without their clock."""
    return [{k: v for k, v in r.items() if k != "t"} for r in recs if r["type"] == "step"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The few real runs the tests share: log records by name, and their folders."""
    base = tmp_path_factory.mktemp("runs")
    spec = {
        "a": [*TINY, "--threads", "1", "--log", "a/log.jsonl"],
        "b": [*TINY, "--threads", "1", "--save-emb", "b/w.npy"],
        "seed1": [*TINY, "--threads", "1", "--seed", "1", "--time-only"],
        "det1": [*TINY, "--threads", "2", "--deterministic", "--time-only"],
        "det2": [*TINY, "--threads", "2", "--deterministic", "--time-only"],
        "race1": [*TINY, "--threads", "2", "--gather", "contiguous", "--time-only"],
        "race2": [*TINY, "--threads", "2", "--gather", "contiguous", "--time-only"],
        "freq": [
            *TINY,
            "--threads",
            "1",
            "--gather",
            "contiguous",
            "--freq-every",
            "2",
            "--time-only",
        ],
        "sub": ["--p", "7", "--steps", "3", "--task", "sub", "--time-only"],
        "mul": ["--p", "7", "--steps", "3", "--task", "mul"],
    }
    own_folder = {"seed1", "sub", "mul"}  # run there, to see which files they leave
    for name in [*own_folder, "a", "b"]:
        (base / name).mkdir()
    # Deterministic runs share the 2 cores; each race run gets them alone, so its threads overlap.
    batches = [["a", "b", "seed1", "sub"], ["mul", "det1", "det2", "freq"], ["race1"], ["race2"]]
    out: dict[str, Any] = {}
    for batch in batches:
        procs = {n: launch(*spec[n], cwd=base / n if n in own_folder else base) for n in batch}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, stderr.decode()
            out[name] = records((base / "a" / "log.jsonl").read_bytes() if name == "a" else stdout)
    out["base"] = base
    return out


def test_records_carry_every_field(runs: dict[str, Any]) -> None:
    header, *steps, end = runs["a"]
    assert header["type"] == "header" and header["format"] == "tuimon.steplog/1"
    assert header["run"]["name"] == "grokking" and header["run"]["device"] == "cpu"
    assert {"task", "seed", "command"} <= header["run"].keys()
    assert header["hyper"].keys() >= HYPER_KEYS
    assert header["hyper"]["n_train"] + header["hyper"]["n_test"] == 23 * 23
    assert header["env"].keys() >= ENV_KEYS
    assert header["env"]["threads"] == 1 and header["env"]["loss_dtype"] == "float64"
    assert header["env"]["deterministic"] is False and header["env"]["time_only"] is False
    assert [s["step"] for s in steps] == list(range(6))
    for s in steps:
        assert {"step", "t", "lr", "train_loss", "train_acc", "param_digest"} <= s.keys()
        assert list(s["param_digests"]) == PARAMS
        evaluated = s["step"] % 2 == 0 or s["step"] == 5
        assert ("test_loss" in s) == evaluated and ("test_acc" in s) == evaluated
        assert isinstance(parse_line(orjson.dumps(s)), Step)
    assert steps[0]["lr"] == 0.0 and steps[1]["lr"] == pytest.approx(1e-4)
    assert steps[0]["param_digest"] == steps[1]["param_digest"]  # lr 0 at step 0: no change
    assert steps[1]["param_digest"] != steps[2]["param_digest"]
    assert end["type"] == "end" and end["status"] == "ok" and end["steps"] == 6
    assert end["wall_s"] > 0


def test_save_emb_default_and_explicit(runs: dict[str, Any]) -> None:
    import numpy as np

    base = runs["base"]
    default = base / "a" / "emb-add-s0-cpu.npy"
    assert Path(runs["a"][-1]["artifacts"]["emb"]).resolve() == default.resolve()
    assert Path(runs["b"][-1]["artifacts"]["emb"]).resolve() == (base / "b" / "w.npy").resolve()
    emb = np.load(default)
    assert emb.shape == (128, 24) and emb.dtype == np.float32  # W_E: (d_model, p + 1)
    assert np.array_equal(emb, np.load(base / "b" / "w.npy"))


def test_time_only_saves_nothing(runs: dict[str, Any]) -> None:
    assert runs["sub"][0]["env"]["time_only"] is True
    assert "artifacts" not in runs["sub"][-1]
    assert list((runs["base"] / "sub").iterdir()) == []
    assert [p.name for p in (runs["base"] / "mul").iterdir()] == ["emb-mul-s0-cpu.npy"]


def test_tasks_sub_and_mul_run(runs: dict[str, Any]) -> None:
    for task in ("sub", "mul"):
        assert runs[task][0]["hyper"]["task"] == task
        assert runs[task][-1]["status"] == "ok" and len(steps_of(runs[task])) == 3


def test_same_seed_one_thread_is_identical_but_for_t(runs: dict[str, Any]) -> None:
    assert steps_of(runs["a"]) == steps_of(runs["b"])
    assert [r["t"] for r in runs["a"][1:-1]] != [r["t"] for r in runs["b"][1:-1]]


def test_two_threads_deterministic_is_identical(runs: dict[str, Any]) -> None:
    assert runs["det1"][0]["env"]["deterministic"] is True
    assert runs["det1"][0]["env"]["threads"] == 2
    assert runs["det1"][0]["env"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert steps_of(runs["det1"]) == steps_of(runs["det2"])


def test_two_threads_part_in_w_e_alone(runs: dict[str, Any]) -> None:
    """The gather's backward (index_put_ with accumulate) races with 2 threads. When the race
    shows in the first update that counts (step 1; step 0 has lr 0), as it usually does, step 2
    is the first to differ; whichever step it is, only W_E differs there."""
    a, b = steps_of(runs["race1"]), steps_of(runs["race2"])
    assert a[:2] == b[:2]
    if a == b:
        pytest.skip("the race did not show in this pair (it usually does, even at p=23)")
    first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    parted = [n for n in PARAMS if a[first]["param_digests"][n] != b[first]["param_digests"][n]]
    assert first >= 2 and parted == ["W_E"]


def test_gather_layouts_start_from_the_same_weights(runs: dict[str, Any]) -> None:
    """--gather changes only the layout of the residual stream: the same initial weights
    (bitwise) and the same step-0 loss; "view", the published layout, is the default."""
    view, contiguous = steps_of(runs["a"]), steps_of(runs["freq"])
    assert runs["a"][0]["hyper"]["gather"] == "view"
    assert runs["freq"][0]["hyper"]["gather"] == "contiguous"
    assert view[0]["param_digests"] == contiguous[0]["param_digests"]
    assert view[0]["train_loss"] == contiguous[0]["train_loss"]


def test_freq_every_logs_the_key_frequency_set(runs: dict[str, Any]) -> None:
    steps = steps_of(runs["freq"])
    logged = [s["step"] for s in steps if "key_freqs" in s]
    assert logged == [0, 2, 4, 5]  # every 2 steps and the last
    for s in steps:
        if "key_freqs" in s:
            ks = list(s["key_freqs"].values())
            assert list(s["key_freqs"]) == ["1", "2", "3", "4", "5"]
            assert ks == sorted(set(ks)) and all(1 <= k <= 11 for k in ks)
            metrics = parse_line(orjson.dumps(s)).metrics  # type: ignore[union-attr]
            assert [metrics[f"key_freqs.{i}"] for i in range(1, 6)] == ks
    assert "key_freqs" not in steps_of(runs["a"])[0]


def test_different_seeds_differ(runs: dict[str, Any]) -> None:
    a, b = steps_of(runs["a"]), steps_of(runs["seed1"])
    assert a[0]["param_digest"] != b[0]["param_digest"]
    assert a[0]["train_loss"] != b[0]["train_loss"]


def test_unavailable_device_fails_fast_in_one_line(tmp_path: Path) -> None:
    done = train("--device", "mps", "--p", "5", "--steps", "1", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]
    assert "'mps' is not available" in lines[0] and "available: cpu" in lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--steps", "0"], "--steps"),
        (["--steps", "-3"], "--steps"),
        (["--p", "1"], "--p"),
        (["--frac-train", "1.5"], "--frac-train"),
        (["--frac-train", "0"], "--frac-train"),
        (["--device", "gpu"], "not a device name"),
        (["--device", "cuda:x"], "not a device name"),
        (["--time-only", "--save-emb", "x.npy"], "--time-only"),
        (["--log", "no/such/folder/log.jsonl"], "does not exist"),
        (["--freq-every", "-1"], "--freq-every"),
        (["--freq-every", "5", "--p", "2"], "--freq-every needs --p"),
    ],
)
def test_bad_values_exit_2_with_one_line(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    first, *hint = captured.err.splitlines()  # one line, then where to read more
    assert words in first and hint == ["try: tuimon train --help"]
    assert captured.err.startswith("tuimon: error: ")


def test_cuda_without_cuda_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["train", "--device", "cuda", "--steps", "1"]) == 2
    assert "'cuda' is not available here (available: cpu" in capsys.readouterr().err


def test_exception_writes_error_end_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuimon.workload import loop

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom at step 0")

    monkeypatch.setattr(loop, "train", boom)
    log = tmp_path / "log.jsonl"
    assert main(["train", "--p", "5", "--steps", "1", "--log", str(log)]) == 1
    end = records(log.read_bytes())[-1]
    assert end["type"] == "end" and end["status"] == "error"
    assert end["error"] == "RuntimeError: boom at step 0"
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_writes_interrupted_end_record(tmp_path: Path, sig: int, code: int) -> None:
    log = tmp_path / "log.jsonl"
    cmd = [sys.executable, "-m", "tuimon", "train", "--p", "11", "--steps", "100000"]
    proc = subprocess.Popen([*cmd, "--time-only", "--log", str(log)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while b'"step"' not in (log.read_bytes() if log.exists() else b""):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
    finally:
        proc.kill()
        proc.communicate()
    end = records(log.read_bytes())[-1]
    assert end["type"] == "end" and end["status"] == "interrupted" and end["steps"] >= 1


def test_split_of_p113_is_3831_and_8938() -> None:
    import torch

    from tuimon.workload.data import make_split, split_indices
    from tuimon.workload.options import Settings

    train_idx, test_idx = split_indices(113, 0.3, seed=0)
    assert (len(train_idx), len(test_idx)) == (3831, 8938)
    assert (Settings().n_train, Settings().n_test) == (3831, 8938)
    assert torch.equal(torch.cat([train_idx, test_idx]).sort().values, torch.arange(113 * 113))
    assert not torch.equal(split_indices(113, 0.3, seed=1)[0], train_idx)
    data = make_split(7, "sub", 0.3, seed=0)
    a, b, eq = data.train_x.T
    assert torch.equal(data.train_y, (a - b) % 7) and bool((eq == 7).all())


def _nanda_forward(m: Any, x: Any) -> Any:
    """The paper's own formulation: every position, einsums, an explicit causal mask."""
    import torch

    resid = torch.einsum("dbp->bpd", m.W_E[:, x]) + m.W_pos
    k, q, v = (torch.einsum("ihd,bpd->biph", w, resid) for w in (m.W_K, m.W_Q, m.W_V))
    mask = torch.tril(torch.ones(3, 3))
    scores = torch.tril(torch.einsum("biph,biqh->biqp", k, q)) - 1e10 * (1 - mask)
    z = torch.einsum("biph,biqp->biqh", v, torch.softmax(scores / math.sqrt(m.d_head), dim=-1))
    resid = resid + torch.einsum("df,bqf->bqd", m.W_O, z.permute(0, 2, 1, 3).flatten(2))
    hidden = torch.relu(torch.einsum("md,bpd->bpm", m.W_in, resid) + m.b_in)
    resid = resid + torch.einsum("dm,bpm->bpd", m.W_out, hidden) + m.b_out
    return (resid @ m.W_U)[:, -1]


def test_model_is_nanda_et_al() -> None:
    import torch

    from tuimon.workload.data import make_split
    from tuimon.workload.loop import param_digests
    from tuimon.workload.model import Transformer

    model = Transformer(23, torch.Generator().manual_seed(0))
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert shapes == {
        "W_E": (128, 24),
        "W_pos": (3, 128),
        "W_K": (4, 32, 128),
        "W_Q": (4, 32, 128),
        "W_V": (4, 32, 128),
        "W_O": (128, 128),
        "W_in": (512, 128),
        "b_in": (512,),
        "W_out": (128, 512),
        "b_out": (128,),
        "W_U": (128, 23),
    }
    assert not model.b_in.any() and not model.b_out.any()
    assert model.W_in.std().item() == pytest.approx(1 / math.sqrt(128), rel=0.05)
    assert model.W_U.std().item() == pytest.approx(1 / math.sqrt(24), rel=0.05)
    again = Transformer(23, torch.Generator().manual_seed(0))
    assert param_digests(model) == param_digests(again)
    x = make_split(23, "add", 0.3, seed=0).test_x[:50]
    with torch.no_grad():
        logits = model(x)
        assert logits.shape == (50, 23)
        torch.testing.assert_close(logits, _nanda_forward(model, x))
        torch.testing.assert_close(model.forward_tabled(x), logits)


def test_step_zero_digest_is_the_seeded_init(runs: dict[str, Any]) -> None:
    import torch

    from tuimon.workload.loop import param_digests
    from tuimon.workload.model import Transformer

    digest, digests = param_digests(Transformer(23, torch.Generator().manual_seed(0)))
    first = steps_of(runs["a"])[0]
    assert (first["param_digest"], first["param_digests"]) == (digest, digests)


def test_warmup_schedule() -> None:
    from tuimon.workload.options import lr_at

    assert [lr_at(k, 1e-3, 10) for k in (0, 5, 10, 50)] == [0.0, 5e-4, 1e-3, 1e-3]
    assert lr_at(0, 1e-3, 0) == 1e-3


def test_workload_package_does_not_import_torch() -> None:
    code = "import sys, tuimon.workload, tuimon.workload.train; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert done.stdout.strip() == "False"


def test_trace_step_records_every_op_of_the_step(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    proc = train(*TINY, "--threads", "1", "--time-only", "--trace-step", "2", "--trace-file",
                 str(trace), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = [orjson.loads(line) for line in trace.read_bytes().splitlines()]
    assert records[0]["type"] == "trace_header" and records[-1]["type"] == "trace_end"
    ops = [r for r in records if r["type"] == "op"]
    assert {op["step"] for op in ops} == {2}  # --eval-every 2: step 2 evaluates
    assert {op["phase"] for op in ops} >= {"forward", "backward", "optimiser", "eval"}
    assert not any(op["op"].split(".")[1].startswith("empty") for op in ops)
    (gather,) = [op for op in ops if op["op"] == "aten.index_put.default"
                 and op["phase"] == "backward" and op["params"] == ["W_E"]]  # fmt: skip
    assert gather["accumulate"] is True and gather["node"] == "IndexBackward0"
    assert "model.py" in gather["line"] and "W_E[:, x]" in gather["line"]
    assert all(len(op["hashes"][0]) == 32 for op in ops if op["hashes"])
