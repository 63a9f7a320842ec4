"""The pair engine end to end, headless, with fake trainers (no torch)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_TRAINER, heavy_modules_after, pair_json, twin, wait_for_raw_lines

from tuimon.cli import main
from tuimon.steplog import Step, Text, parse_line

FAKE = FAKE_TRAINER


def pair(tmp_path: Path, *fake_args: str, extra: tuple[str, ...] = ()) -> list[str]:
    """argv of a headless JSON pair of two fake trainers."""
    return [
        "pair", "--headless", "--json", "--store", str(tmp_path / "store"), *extra,
        "--", sys.executable, FAKE, "--side", "{side}", *fake_args,
    ]  # fmt: skip


def only_pair(tmp_path: Path) -> Path:
    (d,) = (tmp_path / "store").iterdir()
    return d


def result(capsys: pytest.CaptureFixture[str]) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, Path, dict]:
    """What the pair that ran left: its JSON result line, its folder and its pair.json."""
    d = only_pair(tmp_path)
    return result(capsys), d, pair_json(d)


def test_identical_pair_is_saved(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "20")) == 0
    res, d, meta = outcome(tmp_path, capsys)
    assert (res["verdict"], res["steps_compared"]) == ("IDENTICAL", 20)
    assert meta["status"] == "finished"
    assert meta["seed"] == 0 and meta["devices"] == ["cpu", "cpu"]
    assert meta["runs"]["a"]["exit_code"] == 0
    assert meta["env_diff"] == {"pid_side": ["a", "b"]}
    assert len((d / "aligned.jsonl").read_text().splitlines()) == 20
    assert len((d / "a.jsonl").read_bytes().splitlines()) == 22  # header, 20 steps, end


def test_divergence_names_step_and_tensor(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "30", "--diverge-at", "7")) == 1
    res = result(capsys)
    assert res["verdict"] == "DIVERGED"
    assert res["first_divergent_step"] == 7
    assert res["first_tensors"] == ["W_E"]
    assert set(res["first_divergent_metrics"]) == {"train_loss", "test_loss"}


def test_tolerance_makes_it_close(tmp_path, capsys):
    args = pair(tmp_path, "--steps", "30", "--diverge-at", "7", extra=("--tolerance", "1e-3"))
    assert main(args) == 0
    assert result(capsys)["verdict"] == "CLOSE"


def test_crash_mid_run_is_incomplete_and_keeps_lines(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "20", "--crash-at", "5")) == 3
    res, d, meta = outcome(tmp_path, capsys)
    assert (res["verdict"], res["steps_compared"]) == ("INCOMPLETE", 5)
    assert meta["status"] == "failed"
    assert meta["runs"]["b"]["exit_code"] == 1
    assert "boom at step 5" in " ".join(meta["runs"]["b"]["stderr_tail"])
    assert b"boom" in (d / "b.stderr").read_bytes()
    assert len((d / "b.jsonl").read_bytes().splitlines()) == 6
    assert len((d / "a.jsonl").read_bytes().splitlines()) == 22  # the other run went on


def test_stop_on_fail_stops_the_other(tmp_path, capsys):
    args = pair(tmp_path, "--steps", "200", "--crash-at", "3", "--sleep", "0.02",
                extra=("--stop-on-fail",))  # fmt: skip
    assert main(args) == 3
    meta = pair_json(only_pair(tmp_path))
    assert meta["runs"]["a"]["status"] == "stopped"  # by tuimon's rule, not interrupted
    assert meta["runs"]["a"]["steps"] < 200
    reason = meta["summary"]["reason"]
    assert "run a stopped (SIGTERM from tuimon)" in reason and "run b failed (exit 1)" in reason


def test_exit_before_output(tmp_path, capsys):
    args = ["pair", "--headless", "--store", str(tmp_path / "store"), "--",
            sys.executable, "-c", "import sys; sys.exit('no data here')"]  # fmt: skip
    assert main(args) == 3
    out = capsys.readouterr()
    assert "INCOMPLETE" in out.out
    assert "no data here" in out.err


@pytest.mark.parametrize("program", ["/no/such/trainer", "no-such-trainer-on-path"])
def test_program_not_found(tmp_path, capsys, program):
    """Exit 2 before anything starts: one line and a hint, and no pair directory."""
    store = tmp_path / "store"
    assert main(["pair", "--headless", "--store", str(store), "--", program, "{seed}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"tuimon: error: program '{program}' is not")
    assert err[1:] == ["try: tuimon pair --help"]
    assert not store.exists() or not any(store.iterdir())


def test_garbage_binary_and_big_lines_kept_raw(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "5", "--garbage", "--bigline")) == 0
    assert result(capsys)["verdict"] == "IDENTICAL"
    raw = (only_pair(tmp_path) / "a.jsonl").read_bytes()
    assert b"\xff\xfe\x00 binary junk\n" in raw
    assert b"[bold red]not markup[/]" in raw
    big = [line for line in raw.splitlines() if len(line) > 2_000_000]
    assert len(big) == 1
    assert isinstance(parse_line(big[0]), Text)


def test_nan_on_one_side_diverges(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "10", "--nan-at", "4")) == 1
    res = result(capsys)
    assert res["first_divergent_step"] == 4
    assert res["max_divergence"] == "Infinity"


def test_one_side_longer_is_incomplete(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "10", "--extra-steps", "50")) == 3
    res = result(capsys)
    assert res["verdict"] == "INCOMPLETE"
    assert res["steps_compared"] == 10
    assert res["unmatched_b"] == 50


@pytest.mark.alone
def test_stall_is_flagged(tmp_path, capsys):
    args = pair(tmp_path, "--steps", "4", "--hang-at", "2", "--hang-s", "1.5",
                extra=("--stall-timeout", "0.5"))  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "run a stalled" in err and "run b stalled" in err


def test_log_file_template(tmp_path, capsys):
    args = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"),
            "--log-file", str(tmp_path / "log-{side}.jsonl"), "--",
            sys.executable, FAKE, "--side", "{side}", "--steps", "8", "--diverge-at", "3",
            "--stdout-file", str(tmp_path / "log-{side}.jsonl")]  # fmt: skip
    assert main(args) == 1
    assert result(capsys)["first_divergent_step"] == 3


def test_existing_log_file_is_refused(tmp_path, capsys):
    stale = tmp_path / "log-a.jsonl"
    stale.write_text('{"step": 0, "loss": 1}\n')
    log = str(tmp_path / "log-{side}.jsonl")
    args = ["pair", "--headless", "--store", str(tmp_path / "store"), "--log-file", log,
            "--", sys.executable, FAKE]  # fmt: skip
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err
    assert stale.read_text() == '{"step": 0, "loss": 1}\n'


def test_repeat_runs_k_pairs(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "5", extra=("--repeat", "2"))) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert len(list((tmp_path / "store").iterdir())) == 2


def test_threads_are_the_same_on_both_sides(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "3", extra=("--threads", "3"))) == 0
    meta = pair_json(only_pair(tmp_path))
    assert meta["threads"] == 3
    assert meta["runs"]["a"]["env"]["threads"] == meta["runs"]["b"]["env"]["threads"] == "3"


def test_threads_may_differ_on_purpose(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "3", extra=("--threads", "1,2"))) == 0
    meta = pair_json(only_pair(tmp_path))
    assert meta["threads"] == [1, 2]
    assert meta["env_diff"]["threads"] == ["1", "2"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pair", "--devices", "cpu"], "--devices takes two devices"),
        (["pair", "--repeat", "0"], "--repeat must be at least 1"),
        (["pair", "--json"], "--json needs --headless"),
        (["pair", "--devices", "tpu,cpu"], "not a torch device"),
        (["compare", "/no/such/a", "/no/such/b"], "no such log file"),
        (["replay", "/no/such/pair"], "no such file or directory"),
        (["pair", "--seed", str(2**63)], "does not fit in 64 bits"),
        (["pair", "--seed", "-9223372036854775809"], "does not fit in 64 bits"),
        (["pair", "--steps", "1e3"], "not an integer"),
        (["pair", "--tolerance", "inf"], "finite"),
        (["replay", "x", "--speed", "nan"], "finite"),
        (["train", "--lr", "nan"], "finite"),
        (["pair", "--bogus"], "unrecognized arguments: --bogus"),
        (["pair", "--task", "div"], "invalid choice"),
        (["pair", "--label", "x\udcff"], "--label x\\xff is not valid UTF-8"),
        (["pair", "--", "python", "t\udcfe.py"], "the command t\\xfe.py is not valid UTF-8"),
    ],
)
def test_bad_usage_is_one_line(argv, message, capsys):
    """One line that says what is wrong, then (for a usage error) a hint: never ten lines."""
    code = None
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from parse_args
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2, err
    assert message in err[0], err
    assert err[0].startswith(("tuimon: error:", f"tuimon {argv[0]}: error:"))
    assert err[1:] in ([], [f"try: tuimon {argv[0]} --help"])


def test_unwritable_store_launches_nothing(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    marker = tmp_path / "launched"
    args = ["pair", "--headless", "--store", str(blocker / "store"), "--",
            sys.executable, "-c", f"open({str(marker)!r}, 'w')"]  # fmt: skip
    assert main(args) == 2
    assert "not writable" in capsys.readouterr().err
    assert not marker.exists()


def test_disk_full_keeps_what_was_written(tmp_path, capsys, monkeypatch):
    from tuimon import store

    real = store.PairWriter.raw_bytes  # what the pipe readers save through
    calls = {"n": 0}

    def full_after_two(self, side, data):
        calls["n"] += 1
        if calls["n"] > 2:
            self.error = f"cannot write {self.path / 'a.jsonl'}: {os.strerror(errno.ENOSPC)}"
            return None
        return real(self, side, data)

    monkeypatch.setattr(store.PairWriter, "raw_bytes", full_after_two)
    code = main(pair(tmp_path, "--steps", "5", "--sleep", "0.05"))
    assert code == 0
    err = capsys.readouterr().err
    assert "No space left on device" in err


def test_compare_logs_and_pair_dir(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "12", "--diverge-at", "4")) == 1
    capsys.readouterr()
    d = only_pair(tmp_path)
    assert main(["compare", str(d / "a.jsonl"), str(d / "b.jsonl"), "--json"]) == 1
    assert result(capsys)["first_divergent_step"] == 4
    assert main(["compare", str(d)]) == 1
    assert "first divergent step 4" in capsys.readouterr().out
    assert main(["compare", str(d / "a.jsonl"), str(twin(d / "a.jsonl"))]) == 0
    capsys.readouterr()
    assert main(["compare", str(d / "a.jsonl"), str(d / "b.jsonl"), "--save",
                 "--store", str(tmp_path / "saved")]) == 1  # fmt: skip
    (saved,) = (tmp_path / "saved").iterdir()
    assert pair_json(saved)["summary"]["first_divergent_step"] == 4
    assert (saved / "a.jsonl").read_bytes() == (d / "a.jsonl").read_bytes()


def test_compare_wandb_style_logs(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows = [{"_step": i, "loss": 1 / (i + 1), "_runtime": i * 0.5} for i in range(6)]
    a.write_text("\n".join(json.dumps(r) for r in rows))
    rows[3]["loss"] += 1e-12
    b.write_text("\n".join(json.dumps(r) for r in rows))
    assert main(["compare", str(a), str(b), "--json"]) == 1
    assert result(capsys)["first_divergent_step"] == 3


def test_compare_garbage_file(tmp_path, capsys):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(4096))
    assert main(["compare", str(junk), str(twin(junk))]) == 2
    err = capsys.readouterr().err
    assert "unreadable: binary data" in err and "not a log tuimon reads" in err
    assert len(err.strip().splitlines()) == 1


def test_replay_headless_matches_the_saved_verdict(tmp_path, capsys):
    assert main(pair(tmp_path, "--steps", "15", "--diverge-at", "9")) == 1
    capsys.readouterr()
    d = only_pair(tmp_path)
    assert main(["replay", str(d), "--headless", "--json", "--speed", "100000"]) == 1
    assert result(capsys)["first_divergent_step"] == 9


def start_long_pair(store: Path, *fake_args: str, pipe: bool) -> subprocess.Popen[bytes]:
    """`tuimon pair --headless --json` in a process of its own, over two endless fake runs."""
    out = subprocess.PIPE if pipe else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "tuimon", "pair", "--headless", "--json", "--store", str(store),
         "--", sys.executable, FAKE, "--side", "{side}", "--steps", "100000", "--sleep", "0.01",
         *fake_args],
        stdout=out, stderr=out,
    )  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_tuimon_saves_partial_pair(tmp_path, sig):
    store = tmp_path / "store"
    proc = start_long_pair(store, pipe=True)
    wait_for_raw_lines(store, "a")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    res = json.loads(out.decode().strip().splitlines()[-1])
    assert res["verdict"] == "INCOMPLETE" and res["status"] == "interrupted"
    d = Path(res["pair"])
    meta = pair_json(d)
    assert meta["runs"]["a"]["status"] == meta["runs"]["b"]["status"] == "interrupted"
    for side in "ab":
        lines = (d / f"{side}.jsonl").read_bytes().splitlines()
        steps = [r for r in map(parse_line, lines) if isinstance(r, Step)]
        assert len(steps) == meta["runs"][side]["steps"] > 5
        assert [s.step for s in steps] == list(range(len(steps)))


def test_engine_imports_neither_textual_nor_torch():
    """Every module outside ui/, workload/, integrations/ and the tracer, found by walking the
    package (a new one is not missed)."""
    import pkgutil

    import tuimon

    heavy = ("tuimon.ui", "tuimon.workload", "tuimon.integrations", "tuimon.tracing.tracer")
    names = [
        m.name
        for m in pkgutil.walk_packages(tuimon.__path__, "tuimon.")
        if not m.name.startswith(heavy) and not m.name.endswith("__main__")  # runs the CLI
    ]
    assert {"tuimon.devices", "tuimon.engine.judge.artifacts", "tuimon.store.doc"} <= set(names)
    assert "tuimon.commands.pair" in names and "tuimon.readers.text" in names
    assert heavy_modules_after(f"import {', '.join(names)}") == "LOADED []"


def test_headless_pair_process_never_imports_torch_or_textual(tmp_path):
    code = "from tuimon.cli import main\nexit_code = main(sys.argv[1:])"
    argv = pair(tmp_path, "--steps", "3")
    assert heavy_modules_after(code, *argv) == "LOADED []"


def running(tag: str) -> bool:
    """Some process has `tag` in its command line."""
    return subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 0


def test_killed_monitor_leaves_raw_lines_and_children_stop(tmp_path):
    store = tmp_path / "store"
    tag = f"killed-monitor-{os.getpid()}-{time.monotonic_ns()}"
    proc = start_long_pair(store, "--tag", tag, pipe=False)
    wait_for_raw_lines(store, "b")
    proc.kill()
    proc.wait()
    (pair_dir,) = store.iterdir()
    before = {s: (pair_dir / f"{s}.jsonl").read_bytes() for s in "ab"}
    deadline = time.monotonic() + 10  # the orphaned runs die on their next write to the pipe
    while time.monotonic() < deadline and running(tag):
        time.sleep(0.1)
    assert not running(tag)
    for side in "ab":
        raw = (pair_dir / f"{side}.jsonl").read_bytes()
        assert raw == before[side]  # nothing lost, nothing half-written after the kill
        steps = [r for r in map(parse_line, raw.splitlines()) if isinstance(r, Step)]
        assert [s.step for s in steps] == list(range(len(steps))) and len(steps) > 5
    assert not (pair_dir / "pair.json").exists()
    assert main(["compare", str(pair_dir), "--json"]) in (0, 3)  # still judged from raw logs


def test_progress_bar_on_stderr_shows_its_last_state(tmp_path, capsys):
    code = (
        "import sys, json\n"
        "for i in range(3):\n"
        "    sys.stderr.write(f'\\r{i}/3 it'); sys.stderr.flush()\n"
        "    print(json.dumps({'step': i, 'loss': 1.0}), flush=True)\n"
        "sys.stderr.write('\\n'); sys.exit(1)\n"
    )
    args = ["pair", "--headless", "--store", str(tmp_path / "store"), "--",
            sys.executable, "-c", code]  # fmt: skip
    assert main(args) == 3
    meta = pair_json(only_pair(tmp_path))
    assert meta["runs"]["a"]["stderr_tail"] == ["2/3 it"]
    assert (only_pair(tmp_path) / "a.stderr").read_bytes() == b"\r0/3 it\r1/3 it\r2/3 it\n"


@pytest.mark.parametrize(("diverge", "equal"), [("-1", True), ("3", False)])
def test_saved_arrays_are_compared_at_the_end(tmp_path, capsys, diverge, equal):
    emb = str(tmp_path / "emb-{side}.npy")
    assert main(pair(tmp_path, "--steps", "5", "--diverge-at", diverge, "--emb", emb)) in (0, 1)
    meta = pair_json(only_pair(tmp_path))
    result = meta["artifacts"]["emb"]
    assert result["equal"] is equal and result["shape"] == [2, 3]
    assert result["elements_differ"] == (0 if equal else 1)
    # the text that says it (once) is checked by test_end_of_run_comparison_in_every_json_...


def test_end_of_run_comparison_in_every_json_and_text_of_the_pair(tmp_path, capsys):
    emb = str(tmp_path / "emb-{side}.npy")
    assert main(pair(tmp_path, "--steps", "5", "--diverge-at", "3", "--emb", emb)) == 1
    assert result(capsys)["artifacts"]["emb"]["elements_differ"] == 1  # pair --headless --json
    saved = only_pair(tmp_path)
    for side in "ab":  # the runs' own files gone: what pair.json says still stands
        Path(emb.format(side=side)).unlink()
    meta = pair_json(saved)
    kf = {"a": {"freqs": [1, 2]}, "b": {"freqs": [1, 3]}, "agree": False,
          "same_order": False, "only_a": [2], "only_b": [3]}  # fmt: skip
    meta["artifacts"]["emb"]["key_freqs"] = kf
    (saved / "pair.json").write_text(json.dumps(meta))
    line = "emb at the end: 1 elements differ"
    freqs = "key frequencies a 1 2 | b 1 3: sets differ (only a [2], only b [3])"

    assert main(["compare", str(saved), "--json"]) == 1
    assert result(capsys)["artifacts"]["emb"]["key_freqs"] == kf
    assert main(["compare", str(saved)]) == 1
    out = capsys.readouterr().out
    assert line in out and freqs in out
    assert main(["replay", "--headless", "--json", str(saved)]) == 1
    assert result(capsys)["artifacts"]["emb"]["key_freqs"] == kf
    assert main(["replay", "--headless", str(saved)]) == 1
    out = capsys.readouterr().out
    assert line in out and freqs in out
