"""Unreadable is exit 2, said before anything runs: random bytes (or a file of another
program) given to `read`, `compare` or `pair --against` are named as unreadable in one line;
a log with a line of garbage in it is still a log."""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

import pytest

from tuimon.cli import main
from tuimon.readers.binary import why_binary


def random_bytes(size: int) -> bytes:
    return random.Random(40).randbytes(size)


def log(path: Path, garbage: bytes = b"") -> Path:
    lines = [json.dumps({"step": s, "loss": 1 / (s + 1)}).encode() + b"\n" for s in range(4)]
    path.write_bytes(b"".join(lines[:2]) + garbage + b"".join(lines[2:]))
    return path


def one_error(err: str, name: str) -> None:
    assert err.count("\n") == 1 and err.startswith("tuimon: error: "), err
    assert f"{name}: unreadable: binary data" in err, err


@pytest.mark.parametrize("size", [100, 100_000, 3_000_000])
def test_read_and_compare_say_random_bytes_are_unreadable(
    tmp_path: Path, capsys, size: int
) -> None:
    run = log(tmp_path / "run.jsonl")
    for name, data in (("random.bin", random_bytes(size)),
                       ("random.jsonl.gz", gzip.compress(random_bytes(size)))):  # fmt: skip
        bad = tmp_path / name
        bad.write_bytes(data)
        for argv in (["read", str(bad)], ["read", str(bad), "--json"],
                     ["compare", str(bad), str(run)], ["compare", str(run), str(bad)],
                     ["compare", str(bad), str(run), "--json"]):  # fmt: skip
            assert main(argv) == 2, argv
            captured = capsys.readouterr()
            one_error(captured.err, name)
            assert captured.out == ""
            assert "docs/your-script.md" not in captured.err


def test_pair_against_random_bytes_is_refused_before_any_run(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "random.bin"
    bad.write_bytes(random_bytes(50_000))
    ran = tmp_path / "ran"
    store = tmp_path / "store"
    argv = ["pair", "--headless", "--store", str(store), "--against", str(bad), "--",
            sys.executable, "-c", f"open({str(ran)!r}, 'w')"]  # fmt: skip
    assert main(argv) == 2
    one_error(capsys.readouterr().err, "random.bin")
    assert not ran.exists() and not (store.exists() and any(store.iterdir()))


def test_a_log_with_a_line_of_garbage_is_a_log(tmp_path: Path, capsys) -> None:
    """A run that printed a line of binary junk is read as a log (the junk as text), by
    `read` as by `compare`; text in Latin-1 is text."""
    a = log(tmp_path / "a.jsonl", b"\xff\xfe\x00 binary junk\n")
    b = log(tmp_path / "b.jsonl", b"\xff\xfe\x00 binary junk\n")
    assert main(["read", str(a), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["steps"], found["text_lines"], found["metrics"]) == (4, 1, ["loss"])
    assert main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out.startswith("IDENTICAL")
    latin = "époque 3: la précision a augmenté, perte 0.25\n".encode("latin-1")
    assert why_binary(latin * 50) is None
    assert why_binary(b"PAR1" + bytes(100)) == "a parquet file"
    assert why_binary(b"") is None
