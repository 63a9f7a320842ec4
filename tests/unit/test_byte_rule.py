"""The byte rule (`tuimon.engine.judge.byte_rule`) and the precision a log was written with
(`tuimon.engine.judge.precision`), on logs the tests write in the shapes real trainers write."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.judge import byte_rule
from tuimon.engine.judge.byte_rule import CLOCK, DEVICE, IGNORED, RECORD, REDRAW, TOLERANCE, Rules
from tuimon.engine.judge.precision import of_logs


def _pair(
    tmp_path: Path, a: str | bytes, b: str | bytes, name: str = "log.txt"
) -> tuple[Path, Path]:
    pa, pb = tmp_path / f"a-{name}", tmp_path / f"b-{name}"
    pa.write_bytes(a.encode() if isinstance(a, str) else a)
    pb.write_bytes(b.encode() if isinstance(b, str) else b)
    return pa, pb


def _jsonl(rows: list[dict]) -> str:
    return "".join(orjson.dumps(r).decode() + "\n" for r in rows)


def test_the_same_bytes_are_one_comparison(tmp_path: Path) -> None:
    text = "".join(f"step {i}: loss {1 / (i + 1)!r}\n" for i in range(100))
    found = byte_rule.check(*_pair(tmp_path, text, text))
    assert found.applied and found.first is None and not found.one_sided
    assert found.shared_lines == 100 and found.shared_bytes == len(text)
    assert found.differ == 0 and found.compared == 0


def test_a_clock_in_every_json_line_is_set_aside(tmp_path: Path) -> None:
    rows = [{"step": i, "t": 0.1 * i, "loss": 1 / (i + 1)} for i in range(5000)]
    other = [{**r, "t": r["t"] + 0.5} for r in rows]
    found = byte_rule.check(*_pair(tmp_path, _jsonl(rows), _jsonl(other)))
    assert found.first is None
    assert found.differ == 5000 and found.set_aside == {CLOCK: 5000}
    assert found.compared == 5000


def test_a_value_no_reader_understood_is_named_at_its_line(tmp_path: Path) -> None:
    """The class of the false IDENTICAL: a step nested where no reader looked."""
    rows = [
        {"type": "train", "data": {"epoch": 27, "iter": i, "loss": {"T": 7.0 + i / 7}}}
        for i in range(40)
    ]
    changed = [dict(r) for r in rows]
    changed[30] = {"type": "train", "data": {"epoch": 27, "iter": 30, "loss": {"T": 1.5}}}
    found = byte_rule.check(*_pair(tmp_path, _jsonl(rows), _jsonl(changed)))
    assert found.first is not None
    assert (found.first.line_a, found.first.line_b) == (31, 31)
    assert "data.loss.T" in found.first.what


def test_printed_lines_clocks_aside_values_not(tmp_path: Path) -> None:
    a = "".join(
        f"iter {i}: loss {4.5 - i / 77:.4f}, time {10 + i}.5ms, mfu 3.{i}%\n" for i in range(9)
    )
    b = a.replace("time 13.5ms", "time 99.1ms").replace("mfu 3.4%", "mfu 7.7%")
    found = byte_rule.check(*_pair(tmp_path, a, b))
    assert found.first is None and found.set_aside == {CLOCK: 2}
    c = a.replace("loss 4.4351", "loss 4.4352")
    found = byte_rule.check(*_pair(tmp_path, a, c))
    assert found.first is not None and found.first.line_a == 6
    assert "loss 4.4351 against 4.4352" in found.first.what


def test_words_that_differ_are_a_difference(tmp_path: Path) -> None:
    a = "epoch 1 done\nsaving to runs/x/ckpt.pt\nepoch 2 done\n"
    b = a.replace("runs/x", "runs/y")
    found = byte_rule.check(*_pair(tmp_path, a, b))
    assert found.first is not None and found.first.line_a == 2


def test_step_log_headers_and_end_records_are_set_aside(tmp_path: Path) -> None:
    def log(device: str, emb: str) -> str:
        return _jsonl(
            [
                {"type": "header", "format": "tuimon.steplog/1", "env": {"device": device}},
                {"type": "step", "step": 0, "t": 1.0, "loss": 0.5},
                {"type": "end", "status": "ok", "steps": 1, "artifacts": {"emb": emb}},
            ]
        )

    found = byte_rule.check(*_pair(tmp_path, log("cpu", "emb-a.npy"), log("mps", "emb-b.npy")))
    assert found.first is None and found.set_aside == {RECORD: 2}


def test_a_log_cut_short_is_lines_on_one_side(tmp_path: Path) -> None:
    full = "".join(f"step {i} loss {i / 3!r}\n" for i in range(50))
    cut = full[: len(full) * 3 // 5 - 3]  # inside a line
    found = byte_rule.check(*_pair(tmp_path, full, cut))
    assert found.first is None and found.only_b == 0
    assert found.only_a == 50 - cut.count("\n")
    assert found.first_only is not None and found.first_only.line_a == cut.count("\n") + 1


def test_a_line_one_log_holds_is_not_a_shift_of_every_line_after(tmp_path: Path) -> None:
    lines = [f"step {i} loss {i / 7!r}\n" for i in range(30)]
    b = "".join([*lines[:10], "WARNING: slow data loader\n", *lines[10:]])
    found = byte_rule.check(*_pair(tmp_path, "".join(lines), b))
    assert found.first is None
    assert (found.only_a, found.only_b) == (0, 1)
    assert found.first_only is not None and found.first_only.line_b == 11


def test_tolerance_and_ignored_names_set_aside_what_they_name(tmp_path: Path) -> None:
    a = _jsonl([{"step": 1, "loss": 1.0, "aux": 5.0}])
    b = _jsonl([{"step": 1, "loss": 1.0 + 1e-9, "aux": 6.0}])
    pa, pb = _pair(tmp_path, a, b)
    assert byte_rule.check(pa, pb).first is not None
    found = byte_rule.check(pa, pb, Rules(tolerance=1e-6, judged=lambda n: n != "aux"))
    assert found.first is None and found.set_aside == {TOLERANCE: 1, IGNORED: 1}
    found = byte_rule.check(pa, pb, Rules(tolerance=1e-12, judged=lambda n: n != "aux"))
    assert found.first is not None and "loss" in found.first.what


def test_a_clock_the_user_judges_is_not_set_aside(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, _jsonl([{"step": 1, "t": 1.0}]), _jsonl([{"step": 1, "t": 2.0}]))
    assert byte_rule.check(pa, pb).first is None
    assert byte_rule.check(pa, pb, Rules(judge_clocks=("t",))).first is not None


def test_csv_cells_are_named_by_the_header(tmp_path: Path) -> None:
    rows = [f"{i},{1 / (i + 1)!r},{0.25 * i}\n" for i in range(20)]
    a = "step,loss,time\n" + "".join(rows)
    b = a.replace(",1.25\n", ",9.75\n")  # step 5's time
    found = byte_rule.check(*_pair(tmp_path, a, b, "m.csv"))
    assert found.first is None and found.set_aside == {CLOCK: 1}
    c = a.replace("0.1111111111111111", "0.1111111111111112")
    found = byte_rule.check(*_pair(tmp_path, a, c, "m.csv"))
    assert found.first is not None and found.first.what.startswith("loss:")


def test_progress_bars_compare_as_shown(tmp_path: Path) -> None:
    a = "10%|#  | 1/10 [00:01<00:09, 1.1it/s]\r50%|### | 5/10 [00:03<00:03, 1.4it/s]\nloss 0.5\n"
    b = "20%|#  | 2/10 [00:02<00:08, 1.0it/s]\r50%|### | 5/10 [00:04<00:04, 1.2it/s]\nloss 0.5\n"
    found = byte_rule.check(*_pair(tmp_path, a, b))
    assert found.first is None and set(found.set_aside) == {REDRAW, CLOCK}


def test_the_pairs_device_names_are_set_aside(tmp_path: Path) -> None:
    a, b = "Using device: cuda\nloss 0.5\n", "Using device: cpu\nloss 0.5\n"
    pa, pb = _pair(tmp_path, a, b)
    assert byte_rule.check(pa, pb).first is not None
    found = byte_rule.check(pa, pb, Rules(devices=("cuda", "cpu")))
    assert found.first is None and found.set_aside == {DEVICE: 1}


def test_compressed_logs_are_read_as_their_bytes(tmp_path: Path) -> None:
    text = "".join(f"step {i} loss {i / 9!r}\n" for i in range(200))
    other = text.replace(f"loss {100 / 9!r}", "loss 11.2")
    pa, pb = _pair(tmp_path, gzip.compress(text.encode()), gzip.compress(other.encode()), "l.gz")
    found = byte_rule.check(pa, pb)
    assert found.first is not None and found.first.line_a == 101


def test_binary_data_is_said_not_compared(tmp_path: Path) -> None:
    found = byte_rule.check(*_pair(tmp_path, b"\0\1\2" * 100, b"\0\1\3" * 100))
    assert not found.applied and "binary" in (found.why_not or "")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=60),
    st.integers(0, 59),
    st.sampled_from([1, 7, 64, 1 << 20]),
)
def test_the_first_differing_line_is_the_plain_definition(
    tmp_path_factory: object, values: list[int], at: int, block: int
) -> None:
    """Across block sizes (a line split between blocks), the first line that differs is the
    first index where the lines differ, and the lines before it are shared."""
    import pytest

    folder = tmp_path_factory.mktemp("p")  # type: ignore[attr-defined]
    lines_a = [f"step {i} v {v}\n" for i, v in enumerate(values)]
    lines_b = list(lines_a)
    at = at % len(lines_a)
    lines_b[at] = lines_b[at].replace(" v ", " v 1")
    mp = pytest.MonkeyPatch()
    mp.setattr(byte_rule, "BLOCK", block)
    try:
        found = byte_rule.check(*_pair(folder, "".join(lines_a), "".join(lines_b)))
    finally:
        mp.undo()
    assert found.first is not None and found.first.line_a == at + 1
    assert found.shared_lines == at


def test_precision_bitwise_for_reprs(tmp_path: Path) -> None:
    rows = [{"step": i, "loss": 1 / (i + 3), "acc": i / 4, "lr": 0.001} for i in range(20)]
    (tmp_path / "a.jsonl").write_text(_jsonl(rows))
    found = of_logs([tmp_path / "a.jsonl"])
    assert found.bitwise and found.phrase() == "bitwise"


def test_precision_a_warm_up_written_by_repr_is_bitwise(tmp_path: Path) -> None:
    """`0.0001`, `0.0002`, ... are the reprs of a warm-up's floats (the workload's `lr` at
    p=5): short, not exact in binary, and no sign of rounding."""
    lrs = [0.0001, 0.0002, 0.0004, 0.0005, 0.0006]  # 1e-3 * i / 10, as Python writes them
    rows = [{"step": i, "lr": lr, "loss": 1 / (i + 3)} for i, lr in enumerate(lrs)]
    (tmp_path / "a.jsonl").write_text(_jsonl(rows))
    assert of_logs([tmp_path / "a.jsonl"]).bitwise


def test_precision_as_printed_for_rounded_logs(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(
        "".join(f"iter {i}: loss {4.5 - i / 77:.4f}, time {i}.2ms\n" for i in range(30))
    )
    found = of_logs([tmp_path / "a.log"])
    assert not found.bitwise and found.decimals == 4 and found.names == ["loss"]
    assert found.phrase() == "as printed (4 decimals: a difference under 5e-05 would not show)"
    (tmp_path / "b.log").write_text(
        "".join(f"step {i} loss {1 / (i + 3):.3e}\n" for i in range(30))
    )
    found = of_logs([tmp_path / "b.log"])
    assert found.digits == 4 and "4 significant digits" in found.phrase()


def test_precision_a_trailing_zero_is_fixed_point(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("step,loss\n0,0.50\n1,0.25\n")
    assert of_logs([tmp_path / "a.csv"]).decimals == 2


def test_precision_float32_sources_say_so() -> None:
    assert of_logs([], float32=True).phrase().startswith("as float32")


def test_printed_clocks_in_the_shapes_trainers_print(tmp_path: Path) -> None:
    """A logging time with milliseconds after a comma, a grouped throughput under a clock's
    name, a clock in a printed Python dict: clocks; the loss beside them is not."""

    def log(ms: int, tps: str, runtime: float, loss: str = "3.24405") -> str:
        return (
            f"[titan] 2026-05-18 16:04:46,{ms} - INFO - step: 14  loss:  {loss}  tps: {tps}\n"
            f"{{'train_runtime': {runtime}, 'train_loss': 0.65, 'epoch': 1.0}}\n"
        )

    found = byte_rule.check(*_pair(tmp_path, log(338, "7,282", 12.3), log(339, "12,379", 20.9)))
    assert found.first is None and found.set_aside == {CLOCK: 2}
    a, b = log(338, "7,282", 12.3), log(338, "7,282", 12.3, loss="3.24406")
    found = byte_rule.check(*_pair(tmp_path, a, b))
    assert found.first is not None and "loss" in found.first.what


ROOT = Path(__file__).resolve().parents[2]


def _compare(capsys, *argv: str) -> tuple[int, list[str], dict]:
    from tuimon.cli import main

    code = main(["compare", *argv])
    text = capsys.readouterr().out.splitlines()
    assert main(["compare", "--json", *argv]) == code
    return code, text, orjson.loads(capsys.readouterr().out.splitlines()[-1])


def test_the_reference_workloads_pair_is_bitwise(capsys) -> None:
    """A saved pair of the reference workload (orjson writes every float's repr): bitwise, and
    every byte that differs between its logs is a clock or a run's header/end record."""
    code, text, out = _compare(capsys, str(ROOT / "sample_logs" / "cpu-cpu-threads1"))
    assert code == 0 and text[0] == "IDENTICAL: 300 steps bitwise equal"
    assert out["precision"]["kind"] == "bitwise"
    assert out["bytes"]["set_aside"] == {CLOCK: 300, RECORD: 2} and out["bytes"]["first"] is None


def test_a_log_printed_to_4_decimals_is_equal_as_printed(tmp_path: Path, capsys) -> None:
    a = "".join(f"iter {i}: loss {4.5 - i / 77:.4f}, time {10 + i}.5ms\n" for i in range(40))
    pa, pb = _pair(tmp_path, a, a.replace("time 13.5ms", "time 31.5ms"))
    code, text, out = _compare(capsys, str(pa), str(pb))
    assert code == 0 and "bitwise" not in text[0]
    assert text[0] == (
        "IDENTICAL: 40 steps equal as printed (4 decimals: a difference under 5e-05 would not show)"
    )
    assert out["precision"]["kind"] == "printed" and out["precision"]["decimals"] == 4


def test_a_difference_no_reader_reads_is_diverged_at_its_line(tmp_path: Path, capsys) -> None:
    rows = [{"step": i, "loss": 1 / (i + 3), "phase": "train"} for i in range(60)]
    changed = [dict(r) for r in rows]
    changed[40]["phase"] = "eval"
    pa, pb = _pair(tmp_path, _jsonl(rows), _jsonl(changed))
    code, text, out = _compare(capsys, str(pa), str(pb))
    assert code == 1 and out["verdict"] == "DIVERGED"
    assert text[0].startswith("DIVERGED: first divergent line 41 of a and b, at step 40: phase")
    assert out["first_divergent_lines"] == {"a": 41, "b": 41}
    assert out["bytes"]["after_step"] == "at step 40"


def test_a_json_document_over_many_lines_is_compared_by_its_paths(tmp_path: Path) -> None:
    """`json.dump(indent=2)` puts each value of a list on its own line: a clock there is known
    by its list's name, and a changed metric is named with its path and line."""
    import json

    def doc(k: float, loss3: float = 0.2) -> str:
        losses = [1 / (i + 2) for i in range(5)]
        losses[3] = loss3
        return json.dumps(
            {"training": {"loss": losses, "epoch_time": [k * i for i in range(5)]}}, indent=2
        )

    found = byte_rule.check(*_pair(tmp_path, doc(1.0), doc(1.7), "h.json"))
    assert found.first is None and found.set_aside == {CLOCK: 4} and found.differ == 4
    found = byte_rule.check(*_pair(tmp_path, doc(1.0), doc(1.0, loss3=0.5), "h.json"))
    assert found.first is not None and found.first.line_a == 7
    assert found.first.what == "training.loss.3: 0.2 against 0.5"


def test_replay_and_compare_hold_the_same_bytes_to_the_same_verdict(tmp_path: Path, capsys) -> None:
    from tuimon.cli import main

    rows = [{"step": i, "loss": 1 / (i + 3), "phase": "train"} for i in range(30)]
    changed = [dict(r) for r in rows]
    changed[20]["phase"] = "eval"
    pa, pb = _pair(tmp_path, _jsonl(rows), _jsonl(changed))
    code, _, out = _compare(capsys, str(pa), str(pb))
    assert main(["replay", "--headless", "--json", str(pa), str(pb)]) == code == 1
    replayed = orjson.loads(capsys.readouterr().out.splitlines()[-1])
    assert replayed["verdict"] == out["verdict"] == "DIVERGED"
    assert replayed["bytes"] == out["bytes"] and replayed["precision"] == out["precision"]


def test_names_msgspec_will_not_take_are_read_all_the_same(tmp_path: Path, capsys) -> None:
    """Metric names holding a tab, a backslash, a quote or ESC: compare reads them (by orjson
    where the typed rows cannot name them) and judges them as a live pair does."""
    names = ["lo\tss", "a\\b", 'q"x', "e\x1bz"]
    rows = [{"step": i, **{n: 1 / (i + 2 + j) for j, n in enumerate(names)}} for i in range(3000)]
    changed = [dict(r) for r in rows]
    changed[2500]["a\\b"] = 0.5
    pa, pb = _pair(tmp_path, _jsonl(rows), _jsonl(rows))
    code, _, out = _compare(capsys, str(pa), str(pb))
    assert code == 0 and out["steps_compared"] == 3000 and out["values_compared"] == 12000
    pa, pb = _pair(tmp_path, _jsonl(rows), _jsonl(changed))
    code, _, out = _compare(capsys, str(pa), str(pb))
    assert code == 1 and out["first_divergent_step"] == 2500


def test_precision_of_a_table_written_to_significant_digits(tmp_path: Path) -> None:
    """YOLO's results.csv: padded cells written `%.5g`, a header name holding a number
    (`metrics/mAP_0.5`): five significant digits, not bitwise."""
    rows = [f"{i:>8},{0.12278 / (i + 1):>12.5g},{0.0013889 * (i + 1):>12.5g}" for i in range(20)]
    (tmp_path / "results.csv").write_text(
        "   epoch, train/box_loss, metrics/mAP_0.5\n" + "\n".join(rows)
    )
    found = of_logs([tmp_path / "results.csv"])
    assert found.digits == 5 and found.decimals is None
    assert found.names == ["metrics/mAP_0.5", "train/box_loss"]


def test_a_printed_date_in_brackets_is_text_not_a_json_document(tmp_path: Path) -> None:
    """PaddleOCR's `[2022/12/09 16:38:40] root INFO: ...`: a line that opens with a bracket and
    a digit is printed text (its date a clock), not a JSON document."""
    a = "[2022/12/09 16:38:40] root INFO: Arch :\n[2022/12/09 16:38:41] epoch: 1 loss: 0.5\n"
    b = a.replace("16:38:40", "16:38:43")
    found = byte_rule.check(*_pair(tmp_path, a, b))
    assert found.first is None and found.set_aside == {CLOCK: 1}


def test_seconds_spent_on_a_phase_are_clocks() -> None:
    from tuimon.clocks import is_clock

    assert all(is_clock(n) for n in ("data_s", "updt_s", "eval_s", "time_this_iter_s"))
    assert not any(is_clock(n) for n in ("loss_s", "step_s"))
