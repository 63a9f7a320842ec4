"""Every line accounted for: skipped records counted with a reason, the >1% rule, numbers
that do not fit, steps beyond int64 (compare and live), `--step-key`, clocks and `--judge`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import twin

from tuimon.cli import main
from tuimon.clocks import is_clock
from tuimon.readers import LineParser, Reading, load
from tuimon.readers.account import Account
from tuimon.steplog import NO_STEP_KEY, STEP_RANGE, UNMATCHED_TEXT, UNREADABLE, Step, Text


def rows(n: int, *, loss: float = 0.5, key: str = "step", **extra: Any) -> list[str]:
    return [json.dumps({key: i, "loss": loss + i, **extra}) for i in range(n)]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def compare(capsys, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", "--json", *args])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_record_that_cannot_be_read_is_counted_not_dropped(tmp_path: Path, capsys) -> None:
    deep = '{"step": 50, "loss": ' + "[" * 5000 + "]" * 5000 + "}"
    long_int = '{"step": 51, "loss": 1' + "0" * 4300 + "}"
    cut = '{"step": 52, "lo'
    a = write(tmp_path / "a.jsonl", [*rows(50), deep, long_int, cut])
    code, out = compare(capsys, str(a), str(twin(a)))
    assert code == 3 and out["verdict"] == "INCOMPLETE"
    account = out["accounts"]["a"]
    assert account["steps"] == 51  # the long integer's step is read; its value is unreadable
    assert account["skipped"] == {UNREADABLE: 2}
    assert out["unreadable"] == 2  # loss=10000... on both sides
    assert "do not fit a float64" in out["reason"]


def test_steps_beyond_int64_are_skipped_and_said_never_a_crash(tmp_path: Path, capsys) -> None:
    a = write(tmp_path / "a.jsonl", [*rows(5), json.dumps({"step": 2**63, "loss": 0.5})])
    b = write(tmp_path / "b.jsonl", [*rows(5), json.dumps({"step": 2**63, "loss": 0.6})])
    code, out = compare(capsys, str(a), str(b))  # the lines it could not read differ
    assert code == 1 and out["accounts"]["a"]["skipped"] == {STEP_RANGE: 1}
    assert out["text"]["differ"] == 1
    code, out = compare(capsys, str(a), str(twin(a)))  # a minority of records: said, blocks
    assert code == 3 and "step must fit int64" in out["reason"]
    text = tmp_path / "t.log"
    text.write_text("step 1: loss 0.5\nstep 99999999999999999999: loss 0.5\nstep 2: loss 0.4\n")
    code, out = compare(capsys, str(text), str(twin(text)))
    assert code == 3 and out["steps_compared"] == 2


def test_a_live_pair_with_a_step_beyond_int64_ends_with_a_pair(tmp_path: Path, capsys) -> None:
    script = tmp_path / "t.py"
    script.write_text(
        "import json\n"
        "for s in [0, 1, 2**63 + 5, 3]:\n"
        "    print(json.dumps({'step': s, 'loss': 1.0}), flush=True)\n"
    )
    argv = ["pair", "--headless", "--json", "--store", str(tmp_path / "store"), "--",
            sys.executable, str(script)]  # fmt: skip
    code = main(argv)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 3 and out["verdict"] == "INCOMPLETE" and out["steps_compared"] == 3
    saved = json.loads((Path(out["pair"]) / "pair.json").read_text())
    assert saved["summary"]["accounts"]["b"]["skipped"] == {STEP_RANGE: 1}


def test_more_than_one_percent_skipped_is_incomplete_and_names_the_flag(
    tmp_path: Path, capsys
) -> None:
    no_key = [json.dumps({"loss": 0.1 * i}) for i in range(5)]
    a = write(tmp_path / "a.jsonl", rows(200) + no_key)  # 5 of 205: 2.4%
    code, out = compare(capsys, str(a), str(twin(a)))  # judged as text lines: equal
    assert code == 0 and out["verdict"] == "IDENTICAL" and out["text"]["compared"] == 5
    assert out["accounts"]["a"]["skipped"] == {NO_STEP_KEY: 5}  # still said
    changed = [json.dumps({"loss": 0.1 * i + (i == 3)}) for i in range(5)]
    b = write(tmp_path / "b.jsonl", rows(200) + changed)
    code, out = compare(capsys, str(a), str(b))  # a changed row without a step: a difference
    assert code == 1 and out["first_divergent_step"] == 199
    assert out["text"]["first"]["text_b"].startswith('{"loss": 1.3')


def test_printed_numbers_no_shape_reads_name_the_pattern_flag(tmp_path: Path, capsys) -> None:
    lines = []
    for i in range(20):
        lines += [f"step {i}: loss {0.5 + i}", f"evaluation -> acc={i / 10} f1={i / 20}"]
    lines.append("config: lr=0.001 warmup=100")  # printed once: metadata, not skipped
    a = write(tmp_path / "a.log", lines)
    code, out = compare(capsys, str(a), str(twin(a)))  # judged as text: equal text never blocks
    assert code == 0 and out["verdict"] == "IDENTICAL" and out["text"]["compared"] == 21
    assert out["accounts"]["a"]["skipped"] == {UNMATCHED_TEXT: 20}  # said
    b = write(tmp_path / "b.log", [line.replace("acc=0.7 ", "acc=0.71 ") for line in lines])
    code, out = compare(capsys, str(a), str(b))  # a changed line nobody read: DIVERGED there
    assert code == 1 and out["first_divergent_step"] == 7


def test_a_printed_dict_with_a_number_too_big_is_unreadable_not_inf() -> None:
    parser = LineParser()
    line = b"{'step': 3, 'loss': 1e400, 'n': 123456789012345678901234}\n"
    (step,) = parser.feed([line]) + parser.close()
    assert isinstance(step, Step) and step.metrics == {}
    assert set(step.unreadable) == {"loss=1e400", "n=123456789012345678901234"}


def test_a_row_logged_again_is_a_repeat_not_merged_away(tmp_path: Path, capsys) -> None:
    same = [json.dumps({"step": 5, "loss": 0.3}), json.dumps({"step": 5, "loss": 0.3})]
    other = [json.dumps({"step": 5, "loss": 0.3}), json.dumps({"step": 5, "loss": 0.4})]
    a = write(tmp_path / "a.jsonl", rows(5) + same)
    b = write(tmp_path / "b.jsonl", rows(5) + other)
    code, out = compare(capsys, str(a), str(b))
    assert code == 1 and out["verdict"] == "DIVERGED" and out["first_divergent_step"] == 5


def test_step_key_by_content_and_by_flag(tmp_path: Path, capsys) -> None:
    lf = [json.dumps({"current_steps": 10 * i, "loss": 1.0 / (i + 1), "epoch": 0.02 * i})
          for i in range(1, 60)]  # fmt: skip
    a = write(tmp_path / "a.jsonl", lf)
    loaded = load(a)
    assert [s.step for s in loaded.steps][:3] == [10, 20, 30]
    assert loaded.steps[0].metrics["epoch"] == 0.02  # a float epoch is a metric
    custom = write(tmp_path / "c.jsonl", [json.dumps({"upd": i, "loss": 0.5}) for i in range(9)])
    code, out = compare(capsys, str(custom), str(twin(custom)))  # the row number is the step
    assert code == 0 and "the row number" in out["accounts"]["a"]["notes"][0]
    code, out = compare(capsys, "--step-key", "upd", str(custom), str(twin(custom)))
    assert code == 0 and out["steps_compared"] == 9
    text = write(tmp_path / "t.log", [f"upd={i} loss={i / 3}" for i in range(9)])
    code, out = compare(capsys, "--step-key", "upd", str(text), str(twin(text)))
    assert code == 0 and out["steps_compared"] == 9


def test_a_step_key_no_record_has_is_said_in_every_format(tmp_path: Path, capsys) -> None:
    """`--step-key nope` is never ignored: JSON Lines, tuimon's own step log and a CSV each
    say that the name is not there (a CSV names its columns), exit 2, no traceback."""
    plain = write(tmp_path / "p.jsonl", rows(9))
    header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0}}
    steps = [json.dumps({"type": "step", **json.loads(r)}) for r in rows(9)]
    native = write(tmp_path / "n.jsonl", [json.dumps(header), *steps])
    table = write(tmp_path / "t.csv", ["step,loss", *(f"{i},{i / 3}" for i in range(9))])
    said_by = {
        plain: "no field named by --step-key 9: the records have no field",
        native: "no field named by --step-key 9",
        table: "a CSV header with no column 'nope' (its columns: step, loss)",
    }
    for path, said in said_by.items():
        assert main(["compare", "--step-key", "nope", str(path), str(twin(path))]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and err.count("\n") == 1
    no_step = write(tmp_path / "s.csv", ["a,b", "1,2.5", "1,4.5"])  # the row number: the step
    code, out = compare(capsys, str(no_step), str(twin(no_step)))
    assert code == 0 and "the row number is the step" in out["accounts"]["a"]["notes"][0]


def test_a_tuimon_log_stepped_by_another_field(tmp_path: Path, capsys) -> None:
    """`--step-key iter` on tuimon's own log aligns its records by `iter`; a log without its
    end record is still said to be cut short (however the log was read)."""
    header = {"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0}}
    a = [json.dumps({"type": "step", "step": i, "iter": 5 * i, "loss": 1 / (i + 1)})
         for i in range(6)]  # fmt: skip
    b = [line.replace(f'"step": {i},', f'"step": {i + 7},') for i, line in enumerate(a)]
    end = json.dumps({"type": "end", "status": "ok", "steps": 6})
    pa = write(tmp_path / "a.jsonl", [json.dumps(header), *a, end])
    pb = write(tmp_path / "b.jsonl", [json.dumps(header), *b, end])
    code, out = compare(capsys, "--step-key", "iter", str(pa), str(pb))
    assert (code, out["verdict"], out["steps_compared"]) == (0, "IDENTICAL", 6)
    replay = ["replay", "--headless", "--json", "--speed", "1e6", "--step-key", "iter"]
    assert main([*replay, str(pa), str(pb)]) == 0  # the flag is read by replay too
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["verdict"], out["steps_compared"]) == ("IDENTICAL", 6)
    cut = write(tmp_path / "c.jsonl", [json.dumps(header), *b])
    for flags in (("--step-key", "iter"), ("--map", "loss=loss")):
        code, out = compare(capsys, *flags, str(pa), str(cut))
        assert code == 3 and "run b's log has no end record" in out["reason"]


@pytest.mark.parametrize(
    "name",
    ["eta_seconds", "eta", "data_time", "train_runtime", "train_samples_per_second", "tok/s",
     "perf/mfu", "tflops", "elapsed", "remaining_time", "_timestamp", "gpu_util", "step_ms"],
)  # fmt: skip
def test_clocks_by_rule(name: str) -> None:
    assert is_clock(name)


@pytest.mark.parametrize("name", ["loss", "lr", "beta", "theta", "grad_norm", "val_acc"])
def test_metrics_are_not_clocks(name: str) -> None:
    assert not is_clock(name)


def test_clocks_are_shown_and_judge_forces_one_in(tmp_path: Path, capsys) -> None:
    a = write(tmp_path / "a.jsonl", rows(10, eta_seconds=5.0))
    b = write(tmp_path / "b.jsonl", rows(10, eta_seconds=7.0))
    code, out = compare(capsys, str(a), str(b))
    assert code == 0 and "eta_seconds" in out["ignored"]
    code, out = compare(capsys, "--judge", "eta_*", str(a), str(b))
    assert code == 1 and out["first_divergent_metrics"] == ["eta_seconds"]


def test_the_account_counts_each_kind() -> None:
    account = Account()
    for record in [Step(1, {"x": 1.0}), Text("hello"), Text("{oops", UNREADABLE)]:
        account.add(record)
    for _ in range(3):
        account.add(Text("acc=0.5", UNMATCHED_TEXT))
    account.add(Text("lr=1", UNMATCHED_TEXT))  # a shape printed once: text
    got = account.to_dict()
    assert got["steps"] == 1 and got["text"] == 2
    assert got["skipped"] == {UNREADABLE: 1, UNMATCHED_TEXT: 3}
    assert account.problem("a") is None  # such lines are judged as text: they never block
    for _ in range(3):
        account.add(Text("step 99999999999999999999: loss 1", STEP_RANGE))
    assert "int64" in (account.problem("a") or "")  # a step tuimon cannot use: blocks


def test_reading_round_trips_through_pair_json() -> None:
    reading = Reading(("step (?P<step>\\d+) (?P<loss>\\S+)",), {}, "upd", ("mfu",))
    assert Reading.from_dict(reading.to_dict()) == reading


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_plain_json_lines_in_blocks_judge_as_record_by_record(tmp_path: Path, chunk) -> None:
    from tuimon.engine.analyses import compare as engine_compare
    from tuimon.engine.judge.align import compare_steps
    from tuimon.engine.sources import log_blocks
    from tuimon.store import SavedLogs

    def log(side: str) -> list[str]:
        out = rows(30, loss=0.25)
        out[7] = json.dumps({"step": 7, "loss": "7.25", "note": None})  # a string number
        out.insert(12, json.dumps({"step": 11, "val_loss": 0.5}))  # merged into step 11
        out.insert(20, json.dumps({"loss": 1.0}))  # no step key
        if side == "b":
            out[25] = json.dumps({"step": 23, "loss": 99.0})
        return [*out, '{"step": 40, "loss": 0.1']  # cut short

    a = write(tmp_path / "a.jsonl", log("a"))
    b = write(tmp_path / "b.jsonl", log("b"))
    old = log_blocks.CHUNK
    log_blocks.CHUNK = chunk
    try:
        got = engine_compare.judge(SavedLogs(a, b, reading=Reading()), 0.0).summary
    finally:
        log_blocks.CHUNK = old
    _, aligner = compare_steps(load(a).steps, load(b).steps, 0.0)
    want = aligner.summary()
    assert (got.first_divergent_step, got.steps_compared, got.values_compared) == (
        want.first_divergent_step,
        want.steps_compared,
        want.values_compared,
    )
    assert got.first_divergent_step == 23
    assert got.accounts["a"]["skipped"] == {NO_STEP_KEY: 1, UNREADABLE: 1}
