"""`tuimon export`: a saved pair or two logs as CSV, JSON Lines or parquet, with the names of
aligned.jsonl; the aligner's rows (steps matched by occurrence); a CSV no spreadsheet runs."""

from __future__ import annotations

import builtins
import csv
import json
import math
from pathlib import Path

from tuimon.cli import main
from tuimon.engine.analyses import export
from tuimon.engine.judge.align import compare_steps
from tuimon.steplog import FORMAT, Step, dumps

LOSS_A = [4.5, 3.25, 2.0, 1.9, 1.0]
LOSS_B = [4.5, 3.25, 2.0, math.nextafter(1.9, 2.0), math.nan]
STEPS = [0, 1, 2, 2, 3]  # step 2 logged twice: matched first with first, second with second


def write_logs(folder: Path) -> tuple[Path, Path]:
    paths = []
    for side, losses in (("a", LOSS_A), ("b", LOSS_B)):
        lines = [dumps({"type": "header", "format": FORMAT, "run": {}, "hyper": {}, "env": {}})]
        for step, loss in zip(STEPS, losses, strict=True):
            lines.append(dumps({"type": "step", "step": step, "loss": loss, "acc": 0.5}))
        lines.append(dumps({"type": "end", "status": "ok", "steps": 4}))
        path = folder / f"{side}.jsonl"
        path.write_bytes(b"".join(lines))
        paths.append(path)
    return paths[0], paths[1]


def saved_pair(tmp_path: Path, capsys) -> tuple[Path, Path, Path]:
    """Two logs and their pair, saved by `tuimon compare --save` (the store's writer)."""
    a, b = write_logs(tmp_path)
    store = tmp_path / "store"
    assert main(["compare", str(a), str(b), "--save", "--store", str(store), "--json"]) == 1
    capsys.readouterr()
    (pair,) = store.iterdir()
    return a, b, pair


def test_a_saved_pair_and_two_logs_export_the_same_rows_in_every_format(
    tmp_path: Path, capsys
) -> None:
    a, b, pair = saved_pair(tmp_path, capsys)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["export", str(pair), "-o", str(out / "pair.csv")]) == 0
    assert "5 aligned rows written" in capsys.readouterr().err
    assert main(["export", str(pair), "-o", str(out / "pair.jsonl")]) == 0
    assert main(["export", str(a), str(b), "--format", "csv", "-o", str(out / "logs.txt")]) == 0

    rows = list(csv.DictReader((out / "pair.csv").read_text().splitlines()))
    lines = [json.loads(line) for line in (out / "pair.jsonl").read_text().splitlines()]
    names = ["step", "occurrence", "equal", "divergence", "digest_equal", "tensors_differ"]
    names += ["t.a", "t.b", *(f"{m}.{p}" for m in ("loss", "acc") for p in export.METRIC_COLUMNS)]
    assert list(rows[0]) == names and all(list(line) == names for line in lines)
    assert [(r["step"], r["occurrence"]) for r in rows] == [(str(s), o) for s, o in
        zip(STEPS, "00010", strict=True)]  # fmt: skip
    assert [r["loss.a"] for r in rows] == [repr(v) for v in LOSS_A]
    assert [r["loss.b"] for r in rows] == [repr(v) for v in LOSS_B]  # every digit, nan
    assert [r["equal"] for r in rows] == ["true", "true", "true", "false", "false"]
    assert rows[3]["loss.ulps"] == "1" and rows[4]["loss.ulps"] == "-1"
    assert [line["loss.b"] for line in lines][3:] == [LOSS_B[3], "NaN"]
    # the pair's aligned.jsonl, written when it was saved, is the JSON Lines export
    assert (pair / "aligned.jsonl").read_bytes() == (out / "pair.jsonl").read_bytes()
    assert (out / "logs.txt").read_text() == (out / "pair.csv").read_text()

    if _has_pyarrow():
        import pyarrow.parquet as pq

        assert main(["export", str(pair), "-o", str(out / "pair.parquet")]) == 0
        table = pq.read_table(out / "pair.parquet")
        assert table.column_names == names
        assert table.column("loss.a").to_pylist() == LOSS_A
        assert table.column("occurrence").to_pylist() == [0, 0, 0, 1, 0]
        assert [int(u) for u in table.column("loss.ulps").to_pylist()] == [0, 0, 0, 1, -1]


def _has_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def test_stdout_an_existing_file_and_no_pyarrow(tmp_path: Path, capsysbinary, monkeypatch):
    a, b = write_logs(tmp_path)
    target = tmp_path / "rows.csv"
    target.write_text("mine")
    assert main(["export", str(a), str(b), "-o", str(target)]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err.count("\n") == 1 and "exists" in err and "--force" in err
    assert target.read_text() == "mine"
    assert main(["export", str(a), str(b), "-o", str(target), "--force"]) == 0
    assert target.read_text().startswith("step,occurrence,")
    capsysbinary.readouterr()

    assert main(["export", str(a), str(b), "--format", "jsonl", "-o", "-"]) == 0
    printed = capsysbinary.readouterr().out
    assert len(printed.splitlines()) == 5 and json.loads(printed.splitlines()[3])["occurrence"] == 1

    real = builtins.__import__

    def no_pyarrow(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    assert main(["export", str(a), str(b), "-o", str(tmp_path / "rows.parquet")]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err == "tuimon: error: parquet needs pyarrow: pip install 'tuimon[parquet]'\n"
    assert not (tmp_path / "rows.parquet").exists()
    assert main(["export", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.csv")]) == 2
    assert b"no such file" in capsysbinary.readouterr().err


def test_csv_cells_from_a_log_never_run_as_formulas(tmp_path: Path) -> None:
    a = Step(0, {"=HYPERLINK(x)": -0.5, "@cmd": 1.0}, digests={"+W": "1"})
    b = Step(0, {"=HYPERLINK(x)": -0.5, "@cmd": 2.0}, digests={"+W": "2"})
    aligned, _ = compare_steps([a], [b])
    path = tmp_path / "rows.csv"
    with open(path, "wb") as out:
        assert export.write(aligned, out, "csv") == 1
    header, row = list(csv.reader(path.read_text().splitlines()))
    assert "'=HYPERLINK(x).a" in header and "'@cmd.ulps" in header
    cells = dict(zip(header, row, strict=True))
    assert cells["tensors_differ"] == "'+W" and cells["'=HYPERLINK(x).a"] == "-0.5"  # a number


def test_long_logs_are_exported_a_block_at_a_time_as_they_read_whole(
    tmp_path: Path, monkeypatch
) -> None:
    """Large logs of lines are streamed (memory holds a block, not the rows); the rows are the
    ones a whole reading gives, in step and occurrence order even when a run resumed (its steps
    went back), with text lines between the steps and one log gzipped."""
    import gzip
    import io

    import tuimon.readers as readers
    from tuimon.engine.sources.saved_pair import resolve_logs

    def log(side: str) -> bytes:
        out = [dumps({"type": "header", "format": FORMAT, "run": {}, "hyper": {}, "env": {}})]
        for step in [*range(300), *range(200, 400)]:  # resumed from step 200
            loss = 1 / (step + 1) + (1e-9 if side == "b" and step == 250 else 0.0)
            out.append(dumps({"type": "step", "step": step, "loss": loss, "acc": 0.5}))
            if step % 50 == 0:
                out.append(f"eval at {step}: nothing to see\n".encode())
        return b"".join(out)

    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"
    a.write_bytes(gzip.compress(log("a")))
    b.write_bytes(log("b"))
    monkeypatch.setattr(readers, "BLOCK", 4096)  # "large": a block of 4 KiB
    assert readers.read_blocks(b) is not None and readers.read_blocks(a) is not None
    written = {}
    for how in ("stream", "whole"):
        pair = resolve_logs([str(a), str(b)])
        rows = pair.stream() if how == "stream" else iter(pair.judged[0])
        out = io.BytesIO()
        assert export.write(rows, out, "jsonl") == 500
        written[how] = out.getvalue()
    assert written["stream"] == written["whole"]
    keys = [(r["step"], r["occurrence"]) for r in map(json.loads, written["stream"].splitlines())]
    assert keys == sorted(keys) and keys.count((250, 1)) == 1
    differ = [k for k, r in zip(keys, map(json.loads, written["stream"].splitlines()), strict=True)
              if not r["equal"]]  # fmt: skip
    assert differ == [(250, 0), (250, 1)]


def test_a_failed_export_leaves_its_target_as_it_was(tmp_path: Path, capsys, monkeypatch) -> None:
    """A write never destroys what it did not create: a device that cannot be written (a copy
    of /dev/full) stays a device; a file is replaced only once every row is written; a
    directory is said to be one, without advice to --force it."""
    import errno
    import os
    import stat

    a, b = write_logs(tmp_path)
    if os.geteuid() == 0:  # a /dev/full of our own, safe to lose
        full = tmp_path / "full"
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        for _ in range(2):
            assert main(["export", str(a), str(b), "--force", "-o", str(full)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "cannot write" in err and "space" in err
            assert stat.S_ISCHR(os.stat(full).st_mode)  # the node is still there
        null = tmp_path / "null"  # a device that takes the rows: written in place, kept
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        assert main(["export", str(a), str(b), "-o", str(null)]) == 0
        assert stat.S_ISCHR(os.stat(null).st_mode)
        capsys.readouterr()

    target = tmp_path / "rows.csv"
    target.write_text("mine")
    target.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)
    real = export.write

    def full_disk(aligned, out, fmt):  # type: ignore[no-untyped-def]
        out.write(b"step,occurrence\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "write", full_disk)
    for name in (target, link):
        assert main(["export", str(a), str(b), "--force", "-o", str(name)]) == 2
        err = capsys.readouterr().err
        assert err == f"tuimon: error: cannot write {name}: No space left on device\n"
        assert target.read_text() == "mine" and link.is_symlink()
    monkeypatch.setattr(export, "write", real)
    assert main(["export", str(a), str(b), "--force", "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_text().startswith("step,occurrence,")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    capsys.readouterr()

    assert main(["export", str(a), str(b), "--force", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a directory" in err and "--force" not in err


def test_names_are_data_in_every_format_and_on_the_terminal(tmp_path: Path, capsys) -> None:
    """A metric name holding CR, LF, `"` or an escape sequence is one quoted header cell that
    csv and pyarrow read back whole; `--judge t` (a metric named as the clock's columns) writes
    every column once; export's own message shows the -o name's escapes, never sends them."""
    names = ["lo\rss", "ac\nc", 'q"x', "x\x1b]0;pwn\x07"]
    for side in ("a", "b"):
        lines = [
            json.dumps({"step": step, "t": 0.5 * step, **{n: 1.0 / (step + 1) for n in names}})
            for step in range(3)
        ]
        (tmp_path / f"{side}.jsonl").write_text("\n".join(lines) + "\n")
    logs = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    out = tmp_path / "rows\x1b]0;TITLE\x07\x1b]52;c;aGk=\x07.csv"
    assert main(["export", *logs, "--judge", "t", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "^[]0;TITLE^G" in err
    expected = [*export.ROW_COLUMNS, *(f"{n}.{p}" for n in [*names, "t"]
                                       for p in export.METRIC_COLUMNS)]  # fmt: skip
    expected = list(dict.fromkeys(expected))  # t.a and t.b once
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == expected and len(rows) == 4
    assert all(len(row) == len(expected) for row in rows)
    if _has_pyarrow():
        import pyarrow.csv as pa_csv
        import pyarrow.parquet as pq

        table = pa_csv.read_csv(out)
        assert table.column_names == expected and table.num_rows == 3
        parquet = tmp_path / "rows.parquet"
        assert main(["export", *logs, "--judge", "t", "-o", str(parquet)]) == 0
        table = pq.read_table(parquet)
        assert table.column_names == expected
        assert table.column("t.a").to_pylist() == [0.0, 0.5, 1.0]
