"""The store and the command line hold up: saves that fail say so, hostile pair directories,
running pairs, values that cannot be stored, substitution, the README and docs/ as the reference."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, ROOT

from tuimon.cli import build_parser, main
from tuimon.engine.launch.runner import substitute
from tuimon.engine.runs.plan import SUBSTITUTED, PairPlan, python_module
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.errors import ReplayError, StoreError
from tuimon.store import (
    LOCK_FILE,
    PairDoc,
    PairWriter,
    delete_pair,
    is_running,
    list_pairs,
    pair_file,
)


def pair_argv(store: Path, *extra: str, steps: int = 3) -> list[str]:
    return [
        "pair", "--headless", "--store", str(store), *extra,
        "--", sys.executable, FAKE_TRAINER, "--side", "{side}", "--steps", str(steps),
    ]  # fmt: skip


def no_space(fd: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# -- a save that fails -----------------------------------------------------------------------


def test_failed_save_is_exit_3_with_the_reason_and_saved_false(tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setattr(os, "fsync", no_space)  # the disk is full when the pair is saved
    assert main(pair_argv(store, "--json")) == 3  # IDENTICAL, but not saved
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["saved"] is False and record["verdict"] == "IDENTICAL"
    assert "No space left on device" in record["save_error"]
    (pair_dir,) = store.iterdir()
    assert not (pair_dir / "pair.json").exists() and not (pair_dir / "aligned.jsonl").exists()
    assert (pair_dir / "a.jsonl").read_bytes()  # the raw lines stay
    assert not is_running(pair_dir)  # the monitor is done with it


def test_failed_save_text_never_says_saved(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "fsync", no_space)
    assert main(pair_argv(tmp_path / "store")) == 3
    out = capsys.readouterr().out
    assert "pair saved" not in out
    assert "pair NOT saved: " in out and "No space left on device" in out


def test_saved_is_true_when_saved_and_false_without_a_store(tmp_path, capsys):
    assert main(pair_argv(tmp_path / "store", "--json")) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["saved"] is True
    assert main(pair_argv(tmp_path / "none", "--json", "--no-save")) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert record["saved"] is False and "save_error" not in record
    assert not (tmp_path / "none").exists()


def test_compare_save_that_fails_is_exit_3(tmp_path, capsys, monkeypatch):
    logs = [ROOT / "sample_logs" / "cpu-cpu-threads1" / f"{s}.jsonl" for s in "ab"]
    monkeypatch.setattr(os, "fsync", no_space)
    args = ["compare", *map(str, logs), "--save", "--json", "--store", str(tmp_path / "s")]
    assert main(args) == 3
    record = json.loads(capsys.readouterr().out)
    assert record["saved"] is False and "No space left" in record["save_error"]


def test_a_value_that_cannot_be_encoded_fails_the_save_before_anything_is_written(tmp_path):
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.aligned({"step": 0, "x": 1.0})
    w.aligned({"step": 1, "x": 2**70})  # kept out, never raised into the reading loop
    with pytest.raises(StoreError, match="step 1: a value cannot be encoded"):
        w.finish(PairDoc(status="finished"))
    with pytest.raises(StoreError, match="a value cannot be encoded"):
        w.finish(PairDoc(status="finished", more={"label": "x\udcff"}), [])
    assert w.save_error is not None and not w.finished
    assert not (w.path / "aligned.jsonl").exists() and not (w.path / "pair.json").exists()


# -- values that cannot be stored: usage errors before launch --------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        ("--seed", str(2**64)),
        ("--label", "bad\udcff"),
        ("--log-file", "\udcfe{side}"),
        ("--tolerance", "nan"),
        ("--steps", "99999999999999999999"),
    ],
)
def test_unstorable_values_launch_nothing(tmp_path, capsys, extra):
    store, marker = tmp_path / "store", tmp_path / "launched"
    args = [
        "pair", "--headless", "--store", str(store), *extra,
        "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')",
    ]  # fmt: skip
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2  # the error and the hint
    assert not marker.exists() and not store.exists()


# -- substitution ----------------------------------------------------------------------------


def plan(**kw) -> PairPlan:
    base = {"seed": 3, "devices": ("cpu", "cpu"), "threads": (1, 1), "deterministic": False}
    return PairPlan(**{**base, "loss_dtype": None, **kw})


def test_a_substituted_value_is_never_expanded_again():
    assert substitute(["{seed}-{side}"], {"seed": "{side}", "side": "a"}) == ("{side}-a",)
    spec = plan(devices=("{side}", "x{seed}"), template=("run", "{device}", "{side}")).spec(
        "a", None
    )
    assert spec.argv == ("run", "{side}", "a")
    assert plan(devices=("cpu", "x{seed}"), template=("{device}",)).spec("b", None).argv == (
        "x{seed}",
    )


def test_shell_values_are_quoted(tmp_path):
    p = plan(devices=("a b; touch x", "cpu"), template=("echo", "{device}", "{side}"), shell=True)
    assert p.spec("a", None).argv == ("echo 'a b; touch x' a",)
    assert p.spec("b", None).argv == ("echo cpu b",)


def test_shell_pair_never_runs_a_substituted_value(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    args = [
        "pair", "--headless", "--json", "--shell", "--store", str(store),
        "--devices", "cpu,$(touch pwned)", "--",
        f"{sys.executable} {FAKE_TRAINER} --side {{side}} --steps 3 --tag {{device}}",
    ]  # fmt: skip
    assert main(args) == 0
    assert not (tmp_path / "pwned").exists()
    commands = json.loads(next(store.iterdir()).joinpath("pair.json").read_text())["commands"]
    assert commands["b"][0].endswith("--tag '$(touch pwned)'")


# -- the reference workload ignores the current directory ------------------------------------


def test_reference_workload_is_not_shadowed_by_a_tuimon_folder(tmp_path):
    shadow = tmp_path / "tuimon"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise SystemExit('the wrong tuimon was imported')\n")
    argv = plan().spec("a", None).argv
    assert list(argv[: argv.index("train")]) == python_module("tuimon")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [*argv[: argv.index("train") + 1], "--help"], cwd=tmp_path, env=env, capture_output=True
    )
    assert run.returncode == 0, run.stderr
    assert b"--seed" in run.stdout


# -- hostile pair directories ----------------------------------------------------------------


def good_pair(store: Path) -> Path:
    w = PairWriter.create(store, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b'{"step": 0, "loss": 1.0}'])
    w.raw("b", [b'{"step": 0, "loss": 1.0}'])
    w.finish(PairDoc(status="finished", summary={"verdict": "IDENTICAL"}), [])
    return w.path


def in_thread(fn, timeout: float = 30.0):
    """`fn()` in a thread; fails (rather than hangs the suite) if it blocks."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked on a pair directory"
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out.get("value")


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    good_pair(store)
    secret = tmp_path / "secret.txt"
    secret.write_text('{"format": "tuimon.pair/1", "seed": 99}\n')
    fifo = store / "fifo_pair"
    fifo.mkdir()
    os.mkfifo(fifo / "pair.json")
    (fifo / "a.jsonl").write_bytes(b"")
    fifo_log = store / "fifo_log"
    fifo_log.mkdir()
    os.mkfifo(fifo_log / "a.jsonl")
    (fifo_log / "b.jsonl").write_bytes(b'{"step": 0}\n')
    link = store / "link_out"
    link.mkdir()
    (link / "pair.json").symlink_to(secret)
    (link / "a.jsonl").symlink_to(secret)
    (link / "b.jsonl").write_bytes(b"")
    dev = store / "device"
    dev.mkdir()
    (dev / "a.jsonl").symlink_to("/dev/zero")
    (dev / "b.jsonl").write_bytes(b"")
    return store


def test_browser_listing_never_blocks_and_keeps_the_good_pairs(hostile_store: Path):
    infos = {i.name: i for i in in_thread(lambda: list_pairs(hostile_store))}
    assert sum(i.damaged is None for i in infos.values()) == 1  # the good pair
    assert infos["fifo_pair"].damaged == "pair.json is a FIFO, not a regular file"
    assert "leads outside the pair directory" in (infos["link_out"].damaged or "")
    assert infos["link_out"].seed is None  # nothing was read through the link


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("fifo_log", "a.jsonl is a FIFO"),
        ("link_out", "a.jsonl is a link that leads outside"),
        ("device", "a.jsonl is a link that leads outside"),
    ],
)
def test_replay_and_compare_refuse_without_blocking(hostile_store, capsys, name, why):
    with pytest.raises(ReplayError, match=why):
        in_thread(lambda: resolve_logs([str(hostile_store / name)]))
    assert in_thread(lambda: main(["compare", str(hostile_store / name)])) == 2
    assert why in capsys.readouterr().err


def test_a_link_inside_the_pair_is_fine(tmp_path):
    pair = good_pair(tmp_path / "store")
    (pair / "a.jsonl").rename(pair / "real-a.jsonl")
    (pair / "a.jsonl").symlink_to("real-a.jsonl")
    assert pair_file(pair, "a.jsonl") == pair / "a.jsonl"
    assert resolve_logs([str(pair)]).a == pair / "a.jsonl"


def test_files_in_pair_json_only_name_files_inside(tmp_path):
    pair = good_pair(tmp_path / "store")
    doc = json.loads((pair / "pair.json").read_text())
    doc["files"] = {"a": "/etc/passwd", "b": "../../secret", "aligned": "sub/x", "a_stderr": ".."}
    (pair / "pair.json").write_text(json.dumps(doc))
    back = PairDoc.read(pair)
    assert back.files == {}
    assert back.file("a") == "a.jsonl" and back.file("b") == "b.jsonl"
    with pytest.raises(StoreError, match="not a file name inside"):
        pair_file(pair, "../x")


# -- a pair still being written --------------------------------------------------------------


def test_a_pair_being_written_is_running_and_cannot_be_deleted(tmp_path):
    store = tmp_path / "store"
    w = PairWriter.create(store, seed=1, devices=("cpu", "cpu"))
    (info,) = list_pairs(store)
    assert info.running and info.damaged  # no pair.json yet, but its monitor is alive
    with pytest.raises(StoreError, match="still being written"):
        delete_pair(w.path)
    w.finish(PairDoc(status="finished"), [])
    (info,) = list_pairs(store)
    assert not info.running and info.damaged is None
    assert not (w.path / LOCK_FILE).exists()
    delete_pair(w.path)


def test_a_killed_monitor_leaves_a_pair_that_is_not_running(tmp_path):
    code = (
        "import sys, time; from pathlib import Path; from tuimon.store import PairWriter; "
        "w = PairWriter.create(Path(sys.argv[1]), seed=0, devices=('cpu', 'cpu')); "
        "print(w.path, flush=True); time.sleep(60)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    pair = Path(proc.stdout.readline().decode().strip())
    try:
        assert is_running(pair)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (pair / LOCK_FILE).exists() and not is_running(pair)  # the flock died with it
    (info,) = list_pairs(tmp_path)
    assert not info.running and info.damaged
    delete_pair(pair)


# -- replay into a pipe ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "speed"),
    [((), float("inf")), (("--speed", "7"), 7.0), (("--realtime",), 1.0)],  # the recorded pace
)
def test_headless_replay_into_a_pipe_is_not_paced(monkeypatch, capsys, extra, speed):
    import tuimon.engine.sources.replay

    seen: list[float] = []
    real = tuimon.engine.sources.replay.replay_session

    def spy(logs, **kw):
        seen.append(kw["speed"])
        return real(logs, **{**kw, "speed": float("inf")})  # the sample took minutes to record

    monkeypatch.setattr(tuimon.engine.sources.replay, "replay_session", spy)
    sample = str(ROOT / "sample_logs" / "cpu-cpu-threads1")
    assert main(["replay", sample, "--headless", "--json", *extra]) == 0
    assert seen == [speed]


# -- --help is the source, the README and the docs hold every option ------------------------


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_every_subcommand_is_in_the_readme_or_docs():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    readme = "\n".join(page.read_text() for page in pages)
    missing = []
    for name, sub in subparsers().items():
        for action in sub._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", readme):
                    missing.append(f"{name} {option}")
    assert not missing, f"not in README.md nor docs/*.md: {missing}"


def test_help_describes_each_subcommand_and_every_substitution():
    subs = subparsers()
    for name, sub in subs.items():
        assert sub.description, f"`tuimon {name} --help` has no description"
    text = " ".join(subs["pair"].format_help().split())
    for key in SUBSTITUTED:
        assert "{" + key + "}" in text, key
    template = tuple("{" + key + "}" for key in SUBSTITUTED)
    argv = plan(template=template).spec("a", Path("p")).argv
    assert argv == ("3", "cpu", "a", "1", "p", "", "", "")  # each is substituted (side a
    # runs through: no {checkpoint_at}, {checkpoint} nor {resume_from})


def test_the_tui_says_a_failed_save_after_the_screen_and_exits_3(tmp_path, capsys, monkeypatch):
    from tuimon.ui import app as app_module

    writer = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    writer.save_error = "cannot write pair.json: No space left on device"

    class Session:  # what run_app looks at once the app has ended
        def __init__(self) -> None:
            self.writer = writer

        def terminate(self) -> None:
            pass

    def run(self):  # the user watched the pair and quit; its save had failed
        self.sessions.append(Session())

    monkeypatch.setattr(app_module.TuimonApp, "run", run)
    assert app_module.run_app(store=tmp_path) == 3
    assert "pair NOT saved: cannot write pair.json: No space left" in capsys.readouterr().err
    writer.close()


def test_a_filesystem_without_flock_still_saves_pairs(tmp_path, monkeypatch):
    from tuimon import store

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(store.files.fcntl, "flock", no_locks)
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    assert not (w.path / LOCK_FILE).exists() and not is_running(w.path)
    w.finish(PairDoc(status="finished"), [])
    assert (w.path / "pair.json").is_file()
