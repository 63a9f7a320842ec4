"""The command line: help, version, what a pair launches, device checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import heavy_modules_after

from tuimon import __version__
from tuimon.cli import main
from tuimon.engine.launch.runner import substitute
from tuimon.engine.runs.plan import PairPlan, default_threads, loss_dtype_for, python_module


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_need_neither_torch_nor_textual(flag):
    expected = __version__ if flag == "--version" else "pair"
    code = (
        "import contextlib, io\n"
        "from tuimon.cli import main\n"
        "out = io.StringIO()\n"
        "try:\n"
        "    with contextlib.redirect_stdout(out):\n"
        f"        main([{flag!r}])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0\n"
        f"assert {expected!r} in out.getvalue(), out.getvalue()\n"
    )
    assert heavy_modules_after(code) == "LOADED []"


def test_every_subcommand_has_help(capsys):
    for command in ("pair", "compare", "emb-check", "replay", "browse", "train"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        assert "usage: tuimon " + command in capsys.readouterr().out


def plan(**kw) -> PairPlan:
    workload = {"p": 23, "task": "mul", "frac_train": None, "eval_every": None}
    dtype = loss_dtype_for(("mps", "cpu"), None)
    base = dict(seed=3, devices=("mps", "cpu"), threads=(2, 2), deterministic=True,
                loss_dtype=dtype, steps=50, workload=workload)  # fmt: skip
    base.update(kw)
    return PairPlan(**base)  # type: ignore[arg-type]


def test_reference_pair_sides_differ_only_in_device(tmp_path):
    p = plan()
    a, b = p.spec("a", tmp_path), p.spec("b", tmp_path)
    assert a.argv[: a.argv.index("train")] == tuple(python_module("tuimon"))
    for spec, device in ((a, "mps"), (b, "cpu")):
        args = list(spec.argv)
        assert args[args.index("--device") + 1] == device
        assert args[args.index("--loss-dtype") + 1] == "float32"  # MPS has no float64
        assert args[args.index("--threads") + 1] == "2"
        assert args[args.index("--seed") + 1] == "3"
        assert args[args.index("--p") + 1] == "23"
        assert args[args.index("--task") + 1] == "mul"
        assert "--deterministic" in args
        assert "--frac-train" not in args
        assert args[args.index("--save-emb") + 1] == str(tmp_path / f"emb-{spec.side}.npy")
    strip = lambda argv: [x for x in argv if x not in ("mps", "cpu") and "emb-" not in x]  # noqa: E731
    assert strip(a.argv) == strip(b.argv)
    env_a = {k: v for k, v in a.env.items() if k not in ("TUIMON_SIDE", "TUIMON_DEVICE")}
    env_b = {k: v for k, v in b.env.items() if k not in ("TUIMON_SIDE", "TUIMON_DEVICE")}
    assert env_a == env_b
    assert env_a["OMP_NUM_THREADS"] == "2" and env_a["PYTHONUNBUFFERED"] == "1"
    assert env_a["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_user_template_is_substituted_without_a_shell(tmp_path):
    p = plan(template=("python", "train.py", "--seed={seed}", "{device}", "--tag", "{side}-x",
                       "{not_a_key}"), workload={})  # fmt: skip
    spec = p.spec("b", tmp_path)
    assert spec.argv == ("python", "train.py", "--seed=3", "cpu", "--tag", "b-x", "{not_a_key}")
    assert not spec.shell
    shell = plan(template=("echo {seed} && echo {side}",), shell=True).spec("a", None)
    assert shell.shell and shell.argv == ("echo 3 && echo a",)


def test_log_file_template(tmp_path):
    spec = plan(template=("x",), log_file="{pair_dir}/{side}-{seed}.jsonl").spec("a", tmp_path)
    assert spec.log_file == tmp_path / "a-3.jsonl"


def test_defaults_do_not_oversubscribe(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert default_threads(("cpu", "cpu")) == 4
    assert default_threads(("cuda", "cpu")) == 8
    assert loss_dtype_for(("cpu", "cpu"), None) is None
    assert loss_dtype_for(("mps", "mps"), None) == "float32"
    assert loss_dtype_for(("mps", "cpu"), "float64") == "float64"


def test_substitute_leaves_other_braces():
    assert substitute(['{"a": {seed}}'], {"seed": 1}) == ('{"a": 1}',)


@pytest.mark.torch
@pytest.mark.skipif(sys.platform == "darwin", reason="MPS may exist on a Mac")
def test_unavailable_device_fails_before_launch(tmp_path: Path, capsys):
    store = tmp_path / "store"
    assert main(["pair", "--headless", "--devices", "mps,mps", "--store", str(store)]) == 2
    checking, err = capsys.readouterr().err.strip().split("\n")  # what is checked, then why not
    assert checking.startswith("tuimon: checking that mps is available (importing torch")
    assert err.startswith("tuimon: error: device 'mps' is not available here (available: cpu")
    assert "--devices cpu,cpu" in err
    assert not store.exists() or not any(store.iterdir())


@pytest.mark.torch
def test_train_piped_into_head_exits_quietly():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuimon", "train", "--p", "5", "--steps", "2000", "--time-only"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b'{"type":"header"')
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141
    assert b"Traceback" not in err


@pytest.mark.torch
def test_reference_pair_compares_the_saved_embeddings(tmp_path: Path, capsys):
    store = tmp_path / "store"
    args = ["pair", "--headless", "--p", "11", "--steps", "4", "--threads", "1", "--store",
            str(store)]  # fmt: skip
    assert main(args) == 0
    (pair_dir,) = store.iterdir()
    meta = json.loads((pair_dir / "pair.json").read_text())
    assert meta["artifacts"]["emb"]["equal"] is True
    assert meta["artifacts"]["emb"]["shape"] == [128, 12]  # W_E: d_model x (p + 1)
    assert (pair_dir / "emb-a.npy").is_file() and (pair_dir / "emb-b.npy").is_file()
    # both runs' key frequencies, side by side, in pair.json and in the headless output
    freqs = meta["artifacts"]["emb"]["key_freqs"]
    assert freqs["a"]["p"] == 11 and len(freqs["a"]["freqs"]) == 5
    assert freqs["a"]["freqs"] == freqs["b"]["freqs"] and freqs["agree"] is True
    a = " ".join(map(str, freqs["a"]["freqs"]))
    out = " ".join(capsys.readouterr().out.split())  # the report after the verdict, once
    assert f"key frequencies a {a} | b {a}: sets agree" in out


def test_reference_key_frequencies_are_shown_not_judged() -> None:
    """An implicit --ignore for the reference workload only; --only overrides it."""
    from tuimon.cli import build_parser
    from tuimon.commands.options import select as _select

    parse = build_parser().parse_args
    assert _select(parse(["pair"]), reference=True).ignore == ("key_freqs.*",)
    assert not _select(parse(["pair"]), reference=True).judged("key_freqs.3")
    assert _select(parse(["pair"]), reference=True).judged("train_loss")
    assert _select(parse(["pair", "--", "python", "t.py"])).ignore == ()
    assert _select(parse(["pair", "--only", "key_*"]), reference=True).judged("key_freqs.3")
