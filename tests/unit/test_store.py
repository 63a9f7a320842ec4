"""Tests for tuimon.store: pair directories, streamed raw logs, atomic save, the pair index."""

from __future__ import annotations

import errno
import multiprocessing
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuimon import store
from tuimon.store import (
    DEFAULT_STORE,
    LOCK_FILE,
    PAIR_FORMAT,
    PairDoc,
    PairInfo,
    PairWriter,
    RunDoc,
    StoreError,
    check_writable,
    delete_pair,
    is_pair_dir,
    is_running,
    list_newest,
    list_pairs,
    read_pair,
    resolve_store,
    write_json_atomic,
)

NAME_RE = re.compile(
    r"^\d{8}-\d{6}_s(-?\d+|x)_[A-Za-z0-9.-]+-[A-Za-z0-9.-]+_[0-9a-f]{4}(_[A-Za-z0-9._-]+)?$"
)
FROZEN = datetime(2026, 11, 30, 9, 15, 2, tzinfo=timezone.utc)


def one_line(exc: pytest.ExceptionInfo[StoreError]) -> str:
    """The StoreError message, checked to be a single non-empty line."""
    text = str(exc.value)
    assert text
    assert "\n" not in text
    return text


def meta(**extra: Any) -> dict[str, Any]:
    """A pair.json document shaped like the one the session writes."""
    doc: dict[str, Any] = {
        "created": "2026-11-30T09:15:02+00:00",
        "status": "finished",
        "seed": 0,
        "devices": ["cpu", "cpu"],
        "tolerance": 0.0,
        "runs": {
            "a": {"device": "cpu", "command": ["python", "t.py"], "exit_code": 0, "steps": 300},
            "b": {"device": "cpu", "command": ["python", "t.py"], "exit_code": 0, "steps": 300},
        },
        "env_diff": {"threads": [1, 2]},
        "summary": {
            "verdict": "DIVERGED",
            "first_divergent_step": 2,
            "steps_compared": 300,
            "max_divergence": 0.0012,
        },
        "files": {"a": "a.jsonl", "b": "b.jsonl", "aligned": "aligned.jsonl"},
    }
    doc.update(extra)
    return doc


def make_pair(root: Path, name: str, doc: Any = None, *, raw: bytes | None = None) -> Path:
    """A hand-made pair dir: pair.json holding ``doc`` (bytes are written as they are)."""
    path = root / name
    path.mkdir(parents=True)
    if doc is not None:
        data = doc if isinstance(doc, bytes) else orjson.dumps(doc)
        (path / "pair.json").write_bytes(data)
    if raw is not None:
        (path / "a.jsonl").write_bytes(raw)
        (path / "b.jsonl").write_bytes(raw)
    return path


def open_fds_under(path: Path) -> list[str]:
    """Paths under ``path`` that this process holds open (Linux /proc)."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        pytest.skip("needs /proc/self/fd")
    found = []
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith(str(path.resolve())):
            found.append(target)
    return found


# -- resolve_store / check_writable ---------------------------------------------------------


def test_resolve_store_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TUIMON_STORE", raising=False)
    assert resolve_store(None) == Path(DEFAULT_STORE)
    monkeypatch.setenv("TUIMON_STORE", str(tmp_path / "env"))
    assert resolve_store(None) == tmp_path / "env"
    assert resolve_store(str(tmp_path / "explicit")) == tmp_path / "explicit"
    monkeypatch.setenv("TUIMON_STORE", "")
    assert resolve_store(None) == Path(DEFAULT_STORE)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_store("~/pairs") == tmp_path / "pairs"


def test_check_writable_creates_root_and_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "store"
    check_writable(root)
    assert root.is_dir()
    assert list(root.iterdir()) == []


def test_check_writable_under_a_file_fails_even_for_root(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    root = tmp_path / "file" / "store"
    with pytest.raises(StoreError) as exc:
        check_writable(root)
    assert one_line(exc).startswith(f"store {root} is not writable: ")


def test_check_writable_store_is_a_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.write_text("oops")
    with pytest.raises(StoreError) as exc:
        check_writable(root)
    assert one_line(exc) == f"store {root} is not writable: it is not a directory"


def test_create_in_unwritable_store(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError) as exc:
        PairWriter.create(tmp_path / "file" / "store", seed=0, devices=("cpu", "cpu"))
    one_line(exc)


# -- PairWriter.create: names ---------------------------------------------------------------


def test_create_name_and_files(tmp_path: Path) -> None:
    with PairWriter.create(tmp_path, seed=0, devices=("cuda:0", "mps"), label="my run") as w:
        assert w.path.parent == tmp_path
        assert NAME_RE.match(w.name), w.name
        assert "_s0_cuda-0-mps_" in w.name
        assert w.name.endswith("_my-run")
        # the raw logs exist from the start, so an interrupted pair is still a pair
        assert (w.path / "a.jsonl").is_file()
        assert (w.path / "b.jsonl").is_file()
        assert is_pair_dir(w.path)
        assert w.error is None
    w2 = PairWriter.create(tmp_path, seed=None, devices=("cpu", "cpu"))
    assert "_sx_cpu-cpu_" in w2.name
    w2.close()


def test_many_creates_in_the_same_second_are_unique(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store.writer, "_now", lambda: FROZEN)
    writers = [PairWriter.create(tmp_path, seed=1, devices=("cpu", "cpu")) for _ in range(300)]
    names = {w.name for w in writers}
    for w in writers:
        w.close()
    assert len(names) == 300
    assert {p.name for p in tmp_path.iterdir()} == names


def test_create_retries_on_collision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.writer, "_now", lambda: FROZEN)
    hexes = iter(["0000", "0000", "0000", "0001"])
    monkeypatch.setattr(store.writer, "_random_hex", lambda: next(hexes))
    first = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    second = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    assert first.name.endswith("_0000")
    assert second.name.endswith("_0001")
    first.close()
    second.close()


def test_create_gives_up_when_every_name_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store.writer, "_now", lambda: FROZEN)
    monkeypatch.setattr(store.writer, "_random_hex", lambda: "0000")
    PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu")).close()
    with pytest.raises(StoreError) as exc:
        PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    assert "unique" in one_line(exc)


def _create_many(root: str, count: int, tiny_space: bool, barrier: Any, out: Any) -> None:
    """Child process: wait for the sibling, then create ``count`` pairs in the same second."""
    if tiny_space:  # 16 possible names in all: forces collisions between the processes
        store.writer._now = lambda: FROZEN  # type: ignore[assignment]
        store.writer._random_hex = lambda: "000" + os.urandom(1).hex()[0]  # type: ignore[assignment]
    barrier.wait(timeout=30)
    names = []
    for _ in range(count):
        w = PairWriter.create(Path(root), seed=7, devices=("cpu", "mps"))
        w.raw("a", [b'{"step": 0}'])
        w.close()
        names.append(w.name)
    out.put(names)


@pytest.mark.parametrize(("count", "tiny_space"), [(100, False), (8, True)])
def test_two_processes_never_share_a_directory(
    tmp_path: Path, count: int, tiny_space: bool
) -> None:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    barrier = ctx.Barrier(2)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_create_many, args=(str(tmp_path), count, tiny_space, barrier, out))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    names = results[0] + results[1]
    assert len(set(names)) == 2 * count
    assert {p.name for p in tmp_path.iterdir()} == set(names)
    for name in names:  # each directory was written by exactly one writer
        assert (tmp_path / name / "a.jsonl").read_bytes() == b'{"step": 0}\n'


text_any = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dev_a=text_any,
    dev_b=text_any,
    label=st.none() | text_any,
    seed=st.none() | st.integers(min_value=-(2**63), max_value=2**63),
)
def test_arbitrary_devices_and_labels_give_valid_unique_names(
    tmp_path_factory: pytest.TempPathFactory,
    dev_a: str,
    dev_b: str,
    label: str | None,
    seed: int | None,
) -> None:
    root = tmp_path_factory.mktemp("hyp")
    writers = [PairWriter.create(root, seed=seed, devices=(dev_a, dev_b), label=label)]
    writers.append(PairWriter.create(root, seed=seed, devices=(dev_a, dev_b), label=label))
    for w in writers:
        w.close()
        assert NAME_RE.match(w.name), w.name
        assert len(w.name.encode()) <= 255
        assert w.path.parent == root
        assert w.path.is_dir()
    assert writers[0].name != writers[1].name
    assert sorted(p.name for p in root.iterdir()) == sorted(w.name for w in writers)


# -- PairWriter: raw logs -------------------------------------------------------------------


def test_raw_lines_are_on_disk_at_once(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b'{"step": 0}\n', b'{"step": 1}\n'])
    # read from a separate handle, without closing the writer: the lines are flushed
    assert (w.path / "a.jsonl").read_bytes() == b'{"step": 0}\n{"step": 1}\n'
    w.raw("a", [b'{"step": 2}', b"garbage \xff\xfe", b"crlf\r\n", b""])
    w.raw("b", [b"x"])
    w.raw("b", [])
    assert (w.path / "a.jsonl").read_bytes() == (
        b'{"step": 0}\n{"step": 1}\n{"step": 2}\ngarbage \xff\xfe\ncrlf\r\n\n'
    )
    assert (w.path / "b.jsonl").read_bytes() == b"x\n"
    w.close()


def test_stderr_is_appended_and_only_made_when_written(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.stderr("b", b"")
    assert not (w.path / "b.stderr").exists()
    w.stderr("b", b"Traceback (most recent call last):\n")
    w.stderr("b", b"  partial")
    assert (w.path / "b.stderr").read_bytes() == b"Traceback (most recent call last):\n  partial"
    assert not (w.path / "a.stderr").exists()
    w.close()


def test_bad_side_is_a_programming_error(tmp_path: Path) -> None:
    with PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu")) as w:
        with pytest.raises(ValueError):
            w.raw("c", [b"x"])
        with pytest.raises(ValueError):
            w.stderr("A", b"x")


class FullDisk:
    """A file object whose writes fail as on a full disk, after ``ok`` successful writes."""

    def __init__(self, inner: Any, ok: int = 0) -> None:
        self.inner = inner
        self.ok = ok
        self.calls = 0

    def write(self, data: bytes) -> int:
        self.calls += 1
        if self.calls > self.ok:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_disk_full_sets_error_and_keeps_earlier_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b"line 1", b"line 2"])
    fake = FullDisk(w._files["a.jsonl"])
    monkeypatch.setitem(w._files, "a.jsonl", fake)
    w.raw("a", [b"line 3"])  # must not raise
    assert w.error == f"cannot write {w.path / 'a.jsonl'}: No space left on device"
    w.raw("a", [b"line 4"])  # writing to that file has stopped
    assert fake.calls == 1
    w.raw("b", [b"b still works"])
    w.close()
    assert (w.path / "a.jsonl").read_bytes() == b"line 1\nline 2\n"
    assert (w.path / "b.jsonl").read_bytes() == b"b still works\n"
    assert w.error.startswith("cannot write ")


def test_a_planted_link_is_never_written_through(tmp_path: Path) -> None:
    """A link planted where a raw file goes (here to /dev/full) is refused, not followed: a
    pair is a closed box. The file stops as a full disk stops it; the other goes on."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    os.symlink("/dev/full", w.path / "a.stderr")
    w.raw("a", [b"kept"])
    w.stderr("a", b"never written through the link\n")
    assert w.error == f"cannot write {w.path / 'a.stderr'}: Too many levels of symbolic links"
    w.stderr("a", b"more")  # no raise
    w.raw("a", [b"still kept"])
    w.close()
    assert (w.path / "a.jsonl").read_bytes() == b"kept\nstill kept\n"


# -- PairWriter.finish ----------------------------------------------------------------------


def test_finish_writes_aligned_and_pair_json(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b'{"step": 0}'])
    w.raw("b", [b'{"step": 0}'])
    w.stderr("a", b"warning\n")
    aligned = [
        {"step": 0, "div": 0.0, "equal": True},
        {"step": 1, "div": np.float64(6e-10), "equal": False, "diff": np.array([1.5, 2.5])},
        {"step": 2, "div": 0.1 + 0.2},
    ]
    doc = meta()
    del doc["files"]
    target = w.finish(doc, iter(aligned))
    assert target == w.path / "pair.json"
    assert w.finished
    back = read_pair(w.path)
    assert back["format"] == PAIR_FORMAT
    assert next(iter(back)) == "format"
    assert back["summary"] == doc["summary"]
    assert back["created"] == doc["created"]
    assert back["files"] == {
        "a": "a.jsonl",
        "b": "b.jsonl",
        "aligned": "aligned.jsonl",
        "a_stderr": "a.stderr",
    }
    assert read_pair(target) == back  # the pair.json path itself is accepted too
    lines = (w.path / "aligned.jsonl").read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines]
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[1]["div"] == 6e-10
    assert records[1]["diff"] == [1.5, 2.5]
    assert records[2]["div"] == 0.1 + 0.2  # lossless float round-trip
    assert sorted(p.name for p in w.path.iterdir()) == [
        "a.jsonl",
        "a.stderr",
        "aligned.jsonl",
        "b.jsonl",
        "pair.json",
    ]
    assert open_fds_under(w.path) == []  # raw files closed
    w.raw("a", [b"late"])  # dropped, no raise
    assert (w.path / "a.jsonl").read_bytes() == b'{"step": 0}\n'
    with pytest.raises(StoreError):
        w.finish(doc, [])
    info = list_pairs(tmp_path)
    assert [i.name for i in info] == [w.name]
    assert info[0].damaged is None


def test_finish_fills_created_and_overrides_format(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=3, devices=("cpu", "mps"))
    w.finish({"format": "something else", "status": "interrupted"}, [])
    back = read_pair(w.path)
    assert back["format"] == PAIR_FORMAT
    assert back["created"] == w.created
    assert datetime.fromisoformat(back["created"]).tzinfo is not None
    assert (w.path / "aligned.jsonl").read_bytes() == b""


def test_finish_failure_raises_one_line_and_keeps_raw_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b"a0", b"a1"])
    w.raw("b", [b"b0"])

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", no_space)
        with pytest.raises(StoreError) as exc:
            w.finish(meta(), [{"step": 0}])
    assert "No space left on device" in one_line(exc)
    # no temp files; the pair still reads as running (its writer is open, its lock held)
    assert sorted(p.name for p in w.path.iterdir()) == [LOCK_FILE, "a.jsonl", "b.jsonl"]
    assert w.save_error is not None and "No space left on device" in w.save_error
    assert is_running(w.path)
    assert (w.path / "a.jsonl").read_bytes() == b"a0\na1\n"
    assert not w.finished
    w.raw("a", [b"a2"])  # the writer still works, and finish can be tried again
    w.finish(meta(), [{"step": 0}])
    assert (w.path / "a.jsonl").read_bytes() == b"a0\na1\na2\n"
    assert read_pair(w.path)["status"] == "finished"


def test_finish_with_unserialisable_record(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b"a0"])
    with pytest.raises(StoreError) as exc:
        w.finish(meta(), [{"step": 0}, {"step": 1, "bad": object()}])
    assert one_line(exc).startswith("cannot write ")
    assert sorted(p.name for p in w.path.iterdir()) == [LOCK_FILE, "a.jsonl", "b.jsonl"]
    w.close()
    w.close()  # idempotent
    assert open_fds_under(w.path) == []


def test_write_json_atomic(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "nested": {"f": 1e-300}})
    assert orjson.loads(target.read_bytes()) == {"a": 2, "nested": {"f": 1e-300}}
    with pytest.raises(StoreError) as exc:
        write_json_atomic(target, {"bad": {1, 2}})
    one_line(exc)
    with pytest.raises(StoreError) as exc:
        write_json_atomic(tmp_path / "missing" / "x.json", {})
    one_line(exc)
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    assert orjson.loads(target.read_bytes())["a"] == 2


# -- list_pairs / read_pair / is_pair_dir / delete_pair -------------------------------------


def test_list_pairs_missing_root(tmp_path: Path) -> None:
    assert list_pairs(tmp_path / "nope") == []


def test_list_pairs_reads_fields(tmp_path: Path) -> None:
    make_pair(tmp_path, "p", meta(format=PAIR_FORMAT))
    [info] = list_pairs(tmp_path)
    assert info == PairInfo(
        path=tmp_path / "p",
        name="p",
        created="2026-11-30T09:15:02+00:00",
        seed=0,
        devices=("cpu", "cpu"),
        status="finished",
        verdict="DIVERGED",
        steps=300,
        first_divergent_step=2,
        max_divergence=0.0012,
        damaged=None,
    )


def test_list_pairs_tolerates_wrong_types(tmp_path: Path) -> None:
    doc = {
        "format": PAIR_FORMAT,
        "created": 12,
        "seed": True,
        "devices": ["cpu"],
        "runs": {"a": {"device": "cuda"}, "b": {"device": "mps"}},
        "status": ["finished"],
        "summary": {
            "verdict": 3,
            "steps_compared": "300",
            "first_divergent_step": None,
            "max_divergence": 1,
        },
    }
    make_pair(tmp_path, "p", doc)
    [info] = list_pairs(tmp_path)
    assert info.damaged is None
    assert info.seed is None
    assert info.devices == ("cuda", "mps")  # from runs when "devices" is unusable
    assert info.status is None
    assert info.verdict is None
    assert info.steps is None
    assert info.first_divergent_step is None
    assert info.max_divergence == 1.0
    assert info.created is not None  # falls back to the directory's mtime
    datetime.fromisoformat(info.created)

    make_pair(tmp_path, "q", {"format": PAIR_FORMAT, "summary": "nope", "runs": []})
    info_q = next(i for i in list_pairs(tmp_path) if i.name == "q")
    assert info_q.damaged is None
    assert info_q.verdict is None
    assert info_q.devices is None


def test_list_pairs_damaged_are_listed_not_raised(tmp_path: Path) -> None:
    make_pair(tmp_path, "corrupt", b'{"format": "tuimon.pair/1", "summ', raw=b"")
    make_pair(tmp_path, "empty_json", b"", raw=b"")
    make_pair(tmp_path, "list_json", [1, 2, 3])
    make_pair(tmp_path, "foreign", {"hello": "world"})
    make_pair(tmp_path, "future", {"format": "tuimon.pair/9", "seed": 5})
    interrupted = make_pair(tmp_path, "interrupted", raw=b'{"step": 0}\n')
    only_a = tmp_path / "only_a"
    only_a.mkdir()
    (only_a / "a.jsonl").write_bytes(b"")
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "plain_file").write_text("x")
    (tmp_path / "pair_json_is_dir").mkdir()
    (tmp_path / "pair_json_is_dir" / "pair.json").mkdir()

    infos = {i.name: i for i in list_pairs(tmp_path)}
    assert set(infos) == {
        "corrupt",
        "empty_json",
        "list_json",
        "foreign",
        "future",
        "interrupted",
        "only_a",
        "pair_json_is_dir",
    }
    assert infos["corrupt"].damaged == "pair.json is not valid JSON"
    assert infos["empty_json"].damaged == "pair.json is empty"
    assert infos["list_json"].damaged == "pair.json is not a tuimon pair"
    assert infos["foreign"].damaged == "pair.json is not a tuimon pair"
    assert infos["future"].damaged == "pair.json has unsupported format tuimon.pair/9"
    assert infos["future"].seed == 5
    assert infos["interrupted"].damaged == "no pair.json (interrupted, or still running)"
    assert infos["only_a"].damaged == "no pair.json (interrupted, or still running)"
    assert infos["pair_json_is_dir"].damaged == "pair.json is a directory, not a regular file"
    for info in infos.values():
        assert info.created is not None
        assert info.verdict is None or info.name == "future"
    mtime = datetime.fromtimestamp(interrupted.stat().st_mtime, tz=timezone.utc)
    assert infos["interrupted"].created == mtime.isoformat(timespec="seconds")


def test_list_pairs_newest_first(tmp_path: Path) -> None:
    base = datetime(2026, 11, 30, 9, 0, 0, tzinfo=timezone.utc)
    make_pair(tmp_path, "oldest", meta(format=PAIR_FORMAT, created="2026-11-29T23:00:00Z"))
    make_pair(tmp_path, "middle", meta(format=PAIR_FORMAT, created=base.isoformat()))
    # 10:00 at +02:00 is 08:00 UTC: older than "middle" although the string sorts later
    make_pair(tmp_path, "offset", meta(format=PAIR_FORMAT, created="2026-11-30T10:00:00+02:00"))
    make_pair(tmp_path, "tie_a", meta(format=PAIR_FORMAT, created="2026-11-30T09:30:00+00:00"))
    make_pair(tmp_path, "tie_b", meta(format=PAIR_FORMAT, created="2026-11-30T09:30:00+00:00"))
    newest = make_pair(tmp_path, "interrupted_newest", raw=b"")
    stamp = (base + timedelta(hours=2)).timestamp()
    os.utime(newest, (stamp, stamp))
    names = [i.name for i in list_pairs(tmp_path)]
    assert names == ["interrupted_newest", "tie_b", "tie_a", "middle", "offset", "oldest"]


def test_list_pairs_written_by_the_writer_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = []
    for minute in range(5):
        when = FROZEN + timedelta(minutes=minute)
        monkeypatch.setattr(store.writer, "_now", lambda when=when: when)
        w = PairWriter.create(tmp_path, seed=minute, devices=("cpu", "cpu"))
        w.finish({"status": "finished", "seed": minute}, [])
        expected.append(w.name)
    infos = list_pairs(tmp_path)
    assert [i.name for i in infos] == expected[::-1]
    assert [i.seed for i in infos] == [4, 3, 2, 1, 0]


def test_list_pairs_with_300_pairs(tmp_path: Path) -> None:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(300):
        created = (base + timedelta(minutes=i)).isoformat()
        summary = {"verdict": "IDENTICAL", "steps_compared": i, "first_divergent_step": None}
        make_pair(
            tmp_path,
            f"pair{i:03d}",
            meta(format=PAIR_FORMAT, created=created, summary=summary),
            raw=b'{"step": 0}\n' * 10,
        )
    infos = list_pairs(tmp_path)
    assert len(infos) == 300
    assert [i.steps for i in infos] == list(range(299, -1, -1))
    assert all(i.damaged is None and i.verdict == "IDENTICAL" for i in infos)


def test_read_pair_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as exc:
        read_pair(tmp_path / "nope")
    one_line(exc)
    make_pair(tmp_path, "interrupted", raw=b"")
    with pytest.raises(StoreError) as exc:
        read_pair(tmp_path / "interrupted")
    assert "no pair.json" in one_line(exc)
    make_pair(tmp_path, "corrupt", b"{\n\n  not json")
    with pytest.raises(StoreError) as exc:
        read_pair(tmp_path / "corrupt")
    assert "not valid JSON" in one_line(exc)
    make_pair(tmp_path, "list", [1])
    with pytest.raises(StoreError) as exc:
        read_pair(tmp_path / "list")
    assert "not a tuimon pair" in one_line(exc)


def test_is_pair_dir(tmp_path: Path) -> None:
    assert not is_pair_dir(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    assert not is_pair_dir(tmp_path / "file")
    assert not is_pair_dir(make_pair(tmp_path, "empty"))
    only_a = make_pair(tmp_path, "only_a")
    (only_a / "a.jsonl").write_bytes(b"")
    assert not is_pair_dir(only_a)
    assert is_pair_dir(make_pair(tmp_path, "raw", raw=b""))
    assert is_pair_dir(make_pair(tmp_path, "json", meta(format=PAIR_FORMAT)))


def test_delete_pair(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path / "store", seed=0, devices=("cpu", "cpu"))
    w.raw("a", [b"x"])
    w.finish(meta(), [])
    delete_pair(w.path)
    assert not w.path.exists()
    interrupted = make_pair(tmp_path, "interrupted", raw=b"")
    delete_pair(interrupted)
    assert not interrupted.exists()
    corrupt = make_pair(tmp_path, "corrupt", b"{", raw=b"")
    delete_pair(corrupt)
    assert not corrupt.exists()


@pytest.mark.parametrize("kind", ["missing", "file", "plain_dir", "foreign", "symlink"])
def test_delete_pair_refuses_non_pairs(tmp_path: Path, kind: str) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    target = {
        "missing": tmp_path / "missing",
        "file": precious / "thesis.tex",
        "plain_dir": precious,
        "foreign": precious,
        "symlink": tmp_path / "link",
    }[kind]
    if kind == "foreign":
        (precious / "pair.json").write_text('{"someone": "else"}')
    if kind == "symlink":
        pair = make_pair(tmp_path, "pair", meta(format=PAIR_FORMAT))
        target.symlink_to(pair)
    with pytest.raises(StoreError) as exc:
        delete_pair(target)
    assert "not deleting" in one_line(exc)
    assert (precious / "thesis.tex").read_text() == "years of work"
    if kind == "symlink":
        assert (tmp_path / "pair" / "pair.json").exists()


def test_saved_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        writer = PairWriter.create(tmp_path, seed=0, devices=("cpu", "cpu"))
        writer.finish({"summary": {}}, [{"step": 0}])
    finally:
        os.umask(old)
    for name in ("pair.json", "aligned.jsonl", "a.jsonl"):
        assert (writer.path / name).stat().st_mode & 0o777 == 0o644, name


# -- PairDoc ----------------------------------------------------------------------------------


def test_pair_doc_round_trip_and_files(tmp_path: Path) -> None:
    w = PairWriter.create(tmp_path, seed=4, devices=("cpu", "mps"))
    w.stderr("b", b"warning\n")
    (w.path / "emb-a.npy").write_bytes(b"x")
    w.aligned({"step": 0, "div": 0.0})
    w.aligned({"step": 1, "div": np.float64(0.5)})
    doc = PairDoc(
        status="finished",
        seed=4,
        devices=("cpu", "mps"),
        runs={"a": RunDoc(device="cpu", command="python t.py", more={"wall_s": 1.5})},
        more={"label": "x"},
    )
    w.finish(doc)
    back = PairDoc.read(w.path)
    assert back.files == {
        "a": "a.jsonl",
        "b": "b.jsonl",
        "aligned": "aligned.jsonl",
        "b_stderr": "b.stderr",
        "emb_a": "emb-a.npy",
    }
    assert back.created == w.created
    assert back.run("a") == doc.runs["a"]
    assert back.run("b") == RunDoc()
    assert back.more == {"label": "x"}
    assert (back.seed, back.devices, back.status) == (4, ("cpu", "mps"), "finished")
    rows = [orjson.loads(x) for x in (w.path / "aligned.jsonl").read_bytes().splitlines()]
    assert rows == [{"step": 0, "div": 0.0}, {"step": 1, "div": 0.5}]


def test_pair_doc_reads_wrong_types_as_missing() -> None:
    doc = PairDoc.from_json(
        {"seed": True, "tolerance": "x", "runs": {"a": {"command": ["p", "-c"], "exit_code": "1"}}}
    )
    assert doc.seed is None and doc.tolerance is None
    assert doc.run("a").command == "p -c" and doc.run("a").exit_code is None


def test_list_pairs_index_gives_what_pair_json_gives(tmp_path: Path) -> None:
    """A second listing comes from the store's index and equals the first; a changed pair.json
    is read again; a deleted pair leaves the listing; a damaged index is ignored and rewritten."""
    make_pair(tmp_path, "p", meta(format=PAIR_FORMAT))
    make_pair(tmp_path, "q", meta(format=PAIR_FORMAT, seed=3, created="2026-12-01T00:00:00Z"))
    make_pair(tmp_path, "bad", b"{not json")
    first = list_pairs(tmp_path)
    assert (tmp_path / store.index.INDEX_FILE).is_file()
    assert list_pairs(tmp_path) == first
    doc = meta(format=PAIR_FORMAT)
    doc["summary"]["verdict"] = "IDENTICAL"
    (tmp_path / "p" / "pair.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    assert {i.name: i.verdict for i in list_pairs(tmp_path)}["p"] == "IDENTICAL"
    delete_pair(tmp_path / "q")
    assert sorted(i.name for i in list_pairs(tmp_path)) == ["bad", "p"]
    (tmp_path / store.index.INDEX_FILE).write_bytes(b"\x00garbage")
    again = list_pairs(tmp_path)
    assert sorted((i.name, i.verdict, i.damaged) for i in again) == [
        ("bad", None, "pair.json is not valid JSON"),
        ("p", "IDENTICAL", None),
    ]
    assert orjson.loads((tmp_path / store.index.INDEX_FILE).read_bytes())["pairs"].keys() == {
        "p",
        "bad",
    }


def test_list_pairs_index_never_trusted_over_a_changed_or_linked_pair_json(
    tmp_path: Path,
) -> None:
    """An index entry whose key no longer matches is read again (even one forged to say
    otherwise); a pair.json that is a link is never cached; a read-only store still lists."""
    make_pair(tmp_path, "p", meta(format=PAIR_FORMAT))
    list_pairs(tmp_path)
    index = tmp_path / store.index.INDEX_FILE
    doc = orjson.loads(index.read_bytes())
    doc["pairs"]["p"][2]["verdict"] = "IDENTICAL"  # forged, with the key of the real file
    doc["pairs"]["p"][0][0] += 1  # ... but a key that no longer holds
    index.write_bytes(orjson.dumps(doc))
    [info] = list_pairs(tmp_path)
    assert info.verdict == "DIVERGED"
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_bytes(orjson.dumps(meta(format=PAIR_FORMAT)))
    linked = make_pair(tmp_path, "linked")
    (linked / "pair.json").symlink_to(outside)
    listed = {i.name: i for i in list_pairs(tmp_path)}
    assert listed["linked"].damaged and "outside" in listed["linked"].damaged
    assert "linked" not in orjson.loads(index.read_bytes())["pairs"]
    index.unlink()
    tmp_path.chmod(0o555)
    try:
        assert {i.name for i in list_pairs(tmp_path)} == {"p", "linked"}
    finally:
        tmp_path.chmod(0o755)


def test_list_newest_is_the_head_of_list_pairs_and_reads_what_the_index_lacks(
    tmp_path: Path,
) -> None:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(30):  # names in no time order: the index's times rank the candidates
        created = (base + timedelta(minutes=(i * 7) % 30)).isoformat()
        make_pair(tmp_path, f"pair{i:03d}", meta(format=PAIR_FORMAT, created=created, seed=i))
    assert list_newest(tmp_path, 30) is None  # no more than 30 entries: list them whole
    no_index = list_newest(tmp_path, 5)  # no index yet: the last names, in time order
    assert no_index is not None and [p.name for p in no_index] == [
        "pair025", "pair029", "pair028", "pair027", "pair026"
    ]  # fmt: skip
    assert not (tmp_path / ".tuimon-index").exists()  # a preview writes no index
    list_pairs(tmp_path)
    assert list_newest(tmp_path, 5) == list_pairs(tmp_path)[:5]  # from the index's times
    later = (base + timedelta(hours=1)).isoformat()  # new since the index: read, shown first
    make_pair(tmp_path, "a-new-one", meta(format=PAIR_FORMAT, created=later, seed=99))
    newest = list_newest(tmp_path, 5)
    assert newest is not None and newest == list_pairs(tmp_path)[:5]
    assert newest[0].name == "a-new-one"
    (tmp_path / "pair017" / "pair.json").write_bytes(b"{not json")  # changed: read again
    newest = list_newest(tmp_path, 5)
    assert newest is not None and newest[0].name == "pair017" and newest[0].damaged
    assert list_newest(tmp_path, 31) is None
    assert list_newest(tmp_path / "missing", 5) is None


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, sys.argv[2].encode() + b"\\n", 0)
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def _hold_elsewhere(path: Path, owner: str, seconds: float) -> Any:
    """A process that holds ``path``'s flock for ``seconds``, the file naming ``owner``."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), owner, str(seconds)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    return proc


def test_a_lock_left_by_a_dead_owners_child_is_taken_once_free(tmp_path: Path) -> None:
    """A monitor killed while a child of it was between fork and exec: the child shares the
    lock a moment longer; the file names the dead monitor, so the lock is waited for."""
    import socket
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = tmp_path / "x.lock"
    holder = _hold_elsewhere(path, f"pid {gone.pid} on {socket.gethostname()}", 0.3)
    try:
        fd = store.hold_lock(path, store.lock_owner())
        assert fd is not None
        assert path.read_text() == store.lock_owner() + "\n"
        store.release_lock(fd)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("whose", ["alive", "other host", "no owner"])
def test_a_lock_held_by_a_live_or_unknown_owner_is_refused(tmp_path: Path, whose: str) -> None:
    import socket

    owner = {
        "alive": store.lock_owner(),  # this very process: alive
        "other host": f"pid 1 on not-{socket.gethostname()}",
        "no owner": "",
    }[whose]
    path = tmp_path / "x.lock"
    holder = _hold_elsewhere(path, owner, 30)
    try:
        with pytest.raises(store.LockHeld) as held:
            store.hold_lock(path, store.lock_owner(), settle=0.5)
        assert str(held.value) == (owner or "another process")
        assert holder.poll() is None  # still holding: refused while it held
    finally:
        holder.kill()
        holder.wait()
