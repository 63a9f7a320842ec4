"""Hostile input, bounded (docs/survival-and-trust.md): compression bombs, length fields and
.npy headers that claim more than exists, an internal error. Each ends in one line and exit 2,
never 0 or 1, and within a memory ceiling measured on the child (`ru_maxrss`). The bombs are
made on the fly (concatenated gzip members / xz streams of one compressed block), never kept."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TESTS

from tuimon import cli
from tuimon.commands import compare as compare_command

ROOT = TESTS.parent
SAMPLE = ROOT / "sample_logs" / "cpu-cpu-threads2"
CEILING_MB = 600
"""Far under the 1 GiB the issue allows; the caps hold what is read near 256 MiB at most."""
MIB = 1 << 20

CHILD = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.write(f"{proc.returncode} {rss}\\n")
sys.stdout.write(proc.stderr.decode(errors="replace"))
sys.stdout.write(proc.stdout.decode(errors="replace"))  # a headless report (empty on errors)
"""


def tuimon(*args: str | Path) -> tuple[int, str, float]:
    """`tuimon ARGS` in a child of a child: its exit code, its stderr (then its stdout) and its
    peak memory in MB (`ru_maxrss` of the child's children: only tuimon's)."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, sys.executable, "-m", "tuimon", *map(str, args)],
        capture_output=True, timeout=400, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout.decode()  # fmt: skip
    head, _, err = out.partition("\n")
    code, rss_kb = map(int, head.split())
    return code, err, rss_kb / 1024


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def gzip_bomb(path: Path, mib: int) -> Path:
    """A few step lines, then `mib` MiB of blank lines: gzip members, each 1 MiB of newlines."""
    head = gzip.compress(b"".join(b'{"step": %d, "loss": 1.0}\n' % i for i in range(5)))
    path.write_bytes(head + gzip.compress(b"\n" * MIB, 9) * mib)
    return path


def xz_bomb(path: Path, mib: int) -> Path:
    """The same as xz streams."""
    head = lzma.compress(b"".join(b'{"step": %d, "loss": 1.0}\n' % i for i in range(5)))
    path.write_bytes(head + lzma.compress(b"\n" * MIB) * mib)
    return path


@pytest.mark.parametrize(
    ("make", "mib", "compressed_mb"),
    [(gzip_bomb, 6144, 7), (xz_bomb, 6144, 2), (gzip_bomb, 300, 1)],
)
def test_a_compression_bomb_is_one_line_exit_2_within_the_ceiling(
    tmp_path: Path, make, mib: int, compressed_mb: int
) -> None:
    bomb = make(tmp_path / "a.jsonl.gz", mib)
    assert bomb.stat().st_size < compressed_mb * MIB  # 6 GiB from a few MB
    code, err, peak = tuimon("compare", bomb, SAMPLE / "b.jsonl")
    line = one_line(err)
    assert code == 2 and "expands past" in line and "--max-bytes" in line
    assert peak < CEILING_MB, f"{peak:.0f} MB"


def test_max_bytes_lifts_the_cap(tmp_path: Path) -> None:
    """A small log of many blank lines passes the ratio only when --max-bytes is given."""
    bomb = gzip_bomb(tmp_path / "a.jsonl.gz", 20)  # 20 MiB from ~20 KiB: over 100x and 16 MiB
    other = shutil.copy(bomb, tmp_path / "b.jsonl.gz")
    code, err, _ = tuimon("compare", bomb, other)
    assert code == 2 and "expands past 16 MiB" in one_line(err)
    code, err, _ = tuimon("compare", "--max-bytes", "32M", bomb, other)
    assert code == 0, err


def test_a_bomb_named_by_a_pair_json(tmp_path: Path) -> None:
    pair = tmp_path / "pair"
    shutil.copytree(SAMPLE, pair)
    xz_bomb(pair / "a.jsonl.xz", 4096)
    doc = json.loads((pair / "pair.json").read_text())
    doc["files"]["a"] = "a.jsonl.xz"
    (pair / "pair.json").write_text(json.dumps(doc))
    for command in ("compare", "replay"):
        extra = ["--headless"] if command == "replay" else []
        code, err, peak = tuimon(command, *extra, pair)
        assert code == 2 and "expands past" in one_line(err), err
        assert peak < CEILING_MB, f"{command}: {peak:.0f} MB"


def _events(path: Path, length: int) -> Path:
    """A real event file, then a record header whose length field says `length` (valid CRC)."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(path))
    writer.close()
    (events,) = path.glob("*tfevents*")
    head = struct.pack("<Q", length)
    with open(events, "ab") as fh:
        fh.write(head + struct.pack("<I", masked_crc32c(head)) + b"x" * 64)
    return events


@pytest.mark.parametrize("length", [1 << 60, (1 << 64) - 1, 1 << 31])
def test_a_tensorboard_length_field_past_the_bytes(tmp_path: Path, length: int) -> None:
    events = _events(tmp_path / "run", length)
    code, err, peak = tuimon("compare", events, events.parent)
    assert code == 2 and "record length" in one_line(err), err
    assert peak < CEILING_MB


def _npy_claiming(path: Path, shape: tuple[int, ...]) -> Path:
    """A .npy whose header says `shape` float32, with 64 bytes of data."""
    with open(path, "wb") as fh:
        header = {"descr": "<f4", "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\x00" * 64)
    return path


def test_an_npy_header_past_its_bytes_is_never_allocated(tmp_path: Path) -> None:
    big = _npy_claiming(tmp_path / "emb-big.npy", (1 << 30, 2))  # 8 GiB said, 64 bytes held
    code, err, peak = tuimon("emb-check", big, big)
    assert code == 2 and "header says" in one_line(err), err
    assert peak < CEILING_MB
    # named by both logs' end records: the pair's emb line says so, nothing is allocated
    logs = []
    for side in "ab":
        log = tmp_path / f"{side}.jsonl"
        lines = (SAMPLE / f"{side}.jsonl").read_text().splitlines()
        end = json.loads(lines[-1])
        end["artifacts"] = {"emb": str(big)}
        log.write_text("\n".join([*lines[:-1], json.dumps(end)]) + "\n")
        logs.append(log)
    code, err, peak = tuimon("replay", "--headless", *logs)  # err: stderr, then stdout
    assert code == 0 and "emb at the end: cannot read" in err and "header says" in err
    assert peak < CEILING_MB


@pytest.mark.parametrize(
    "error", [MemoryError(), RecursionError("deep"), OverflowError("big"), ZeroDivisionError()]
)
def test_an_internal_error_is_never_a_verdicts_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception
) -> None:
    def boom(args: object) -> int:
        raise error

    monkeypatch.setattr(compare_command, "run", boom)
    monkeypatch.delenv("TUIMON_DEBUG", raising=False)
    assert cli.main(["compare", str(SAMPLE)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("tuimon: error: ") and type(error).__name__ in line


def test_a_pair_json_cut_while_written_is_incomplete(tmp_path: Path) -> None:
    """A pair killed while its pair.json was written: compare and replay say INCOMPLETE (3)."""
    pair = tmp_path / "pair"
    shutil.copytree(SAMPLE, pair)
    data = (pair / "pair.json").read_bytes()
    (pair / "pair.json").write_bytes(data[: len(data) // 2])
    assert cli.main(["compare", str(pair)]) == 3
    assert cli.main(["replay", "--headless", str(pair)]) == 3


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_watch_refuses_a_fifo_or_a_device_at_once(tmp_path: Path, special: str) -> None:
    """Never opened (a FIFO would block the open, /dev/zero would grow without end)."""
    a = tmp_path / "a.jsonl"
    if special == "fifo":
        os.mkfifo(a)
    else:
        a = Path(special)
    b = tmp_path / "b.jsonl"
    b.write_text('{"step": 0, "loss": 1.0}\n')
    code, err, _ = tuimon("watch", a, b, "--headless", "--store", tmp_path / "store")
    assert code == 2 and "not a log file" in err.splitlines()[0]  # and the --help hint
