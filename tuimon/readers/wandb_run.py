"""W&B runs (`.wandb`) -> records, through W&B's own record definitions.

An offline run (`WANDB_MODE=offline`, or a run whose sync failed) keeps its history only in
`wandb/offline-run-*/run-*.wandb`: W&B's transaction log. Its framing is LevelDB's log format
with W&B's header (`:W&B`, magic 0xBEE1, version 0): 32 KiB blocks of records, each a CRC-32
(zlib's, of its type byte and data), a length and a type (whole, or first, middle and last
part of one record split over blocks). Each record is a `wandb.proto.wandb_internal_pb2.Record`:
the protobuf definitions are W&B's own, from the `wandb` package (the `wandb` extra), never
written here; wandb 0.31 has no Python reader of the file (its `datastore` is gone: the Go
`wandb-core` reads it), so the framing is read here.

What becomes what:
- the run record, the config records and the environment records (W&B's metadata) are the
  header: the config is `hyper`, the host, program, command, git commit, Python and W&B
  versions are `env` (the environment diff uses them), the run's id, project, name and seed
  are `run`;
- a history record is a step (its values in order of name: W&B writes a row's items in any
  order, and a saved pair's lines must not differ by it): `_step` is the step, `_runtime`
  and `_timestamp` are clocks, and so are `system/*`; nested values are dotted names
  (`nested.b.c`); a media object or a table (a value with a `_type`) is named, not judged
  (`tuimon.clocks.is_media`);
- the summary, as the run left it, is one text line after the last step, judged as text
  (its numbers; clocks and media left out and named);
- the exit record is the end record (`ok` for exit code 0, else `error`);
- system metrics (stats records) are named, not judged; other records are not read.

A record cut short (a crash, a file still being written) or with a bad checksum ends the
reading there, with a note that says where and why: the side is INCOMPLETE, never a traceback.
A run without its exit record (killed, or still running) is said so the same way.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import struct
import sys
import threading
import types
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from tuimon.clocks import is_clock
from tuimon.readers.capped import open_regular
from tuimon.readers.rows_to_steps import CLOCK_FIELDS, COUNTERS, numbers, row_step
from tuimon.readers.tensorboard import MissingExtra
from tuimon.steplog import CUT_TAIL, UNREADABLE, End, Header, Record, Step, Text, Unreadable

MISSING = (
    "reading W&B runs (.wandb) needs wandb: pip install wandb "
    '(in the tuimon checkout: pip install -e ".[wandb]")'
)
IDENT = b":W&B"
HEADER = IDENT + struct.pack("<HB", 0xBEE1, 0)
"""The 7 bytes a `.wandb` file begins with: ident, magic, version."""
BLOCK = 32768
"""LevelDB's log block: a record header never straddles one (fewer bytes left are padding)."""
FRAME = struct.Struct("<IHB")
"""A record's header: CRC-32 of type and data, data length, type."""
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
NOTE = "tuimon: "
_VOLATILE_ENV = frozenset(
    {"started_at", "heartbeat_at", "writer_id", "root", "disk", "code_path_local"}
)
"""Fields of W&B's environment record that differ between any two runs (a start time, an id,
the run's own folder, the disk's free space): left out of the header's env."""
_RECORD = None
_LOADING = threading.Lock()
"""Held while the definitions load: a second thread would see the stand-in `wandb` package
(or none, just after it is taken away) and run the real package's `__init__` (1-2 s)."""


def is_wandb(head: bytes) -> bool:
    """Whether a file that begins with these bytes is a `.wandb` transaction log."""
    return head[:4] == IDENT


def run_files(path: Path) -> list[Path]:
    """The `.wandb` files of a run folder (`offline-run-*`, `run-*`): those in it, by name;
    for a `wandb/` folder whose run folders are all of one run id (a run and its resumptions:
    W&B gives each resumption a folder of its own, `offline-run-<time>-<id>`), theirs, in
    order of the folders' names (`_started`). None of a folder of several runs."""
    try:
        own = sorted(f for f in path.glob("*.wandb") if f.is_file())
        if own:
            return own
        parts = [  # `latest-run` links to one of them
            f
            for d in path.glob("*run-*")
            if d.is_dir() and not d.is_symlink()
            for f in d.glob("*.wandb")
            if f.is_file()
        ]
        if len({f.name for f in parts}) != 1:  # run-<id>.wandb: one run id, or not a run
            return []
        return sorted(parts, key=_started)
    except OSError:
        return []


def _started(file: Path) -> tuple[str, int]:
    """The order of a run's parts: its folder's name, `offline-run-<time>-<id>`, then the
    number W&B adds (`-1`, `-2` ...) to a part begun in the same second as the one before."""
    run_id = file.stem.removeprefix("run-")
    base, _, count = file.parent.name.rpartition(f"-{run_id}")
    return base, int(count[1:]) if count[1:].isdigit() else 0


def records_type() -> Any:
    """W&B's `Record` message class (`wandb.proto.wandb_internal_pb2`); MissingExtra without
    the wandb package."""
    global _RECORD
    if _RECORD is not None:
        return _RECORD
    with _LOADING:
        if _RECORD is None:
            try:
                _RECORD = _definitions().Record
            except ImportError:
                raise MissingExtra(MISSING) from None
    return _RECORD


def _definitions() -> Any:
    """W&B's generated record definitions, from the installed wandb package. When `wandb` is
    not imported yet, they are loaded without running the package's `__init__` (its SDK,
    pydantic, numpy: 1-2 s, most of the time to open a run): `wandb` stands for the package
    only while its `proto` modules load (their own imports are of each other), then the
    package is as it was: a later `import wandb` runs it whole and finds them loaded (one
    class per message, as W&B's own code imports them; only the attribute `wandb.proto` of
    the package is not set)."""
    if "wandb" in sys.modules:
        from wandb.proto import wandb_internal_pb2

        return wandb_internal_pb2
    spec = importlib.util.find_spec("wandb")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("no wandb package")
    package = types.ModuleType("wandb")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["wandb"] = package
    try:
        from wandb.proto import wandb_internal_pb2

        return wandb_internal_pb2
    finally:
        if sys.modules.get("wandb") is package:
            del sys.modules["wandb"]


class Framer:
    """The framing of a `.wandb` file read as its bytes come (a file still being written): the
    whole records of each piece, parts joined; a frame not all there waits for more bytes.
    `stopped` says where reading stopped for good (what, reason, byte offset)."""

    def __init__(self) -> None:
        self.pending = b""
        """Bytes of a frame (or of a block's padding) not all there yet."""
        self.at = 0
        """The file offset of `pending`'s first byte."""
        self.parts: list[bytes] | None = None
        self.checked = False
        self.stopped: tuple[str, str, int] | None = None

    def feed(self, data: bytes) -> list[bytes]:
        """The records that `data` (the bytes after those fed before) completes."""
        if self.stopped is not None:
            return []
        buf = self.pending + data if self.pending else data
        base, pos, size = self.at, 0, len(buf)
        out: list[bytes] = []
        if not self.checked:
            if buf[: len(HEADER)] != HEADER[:size]:
                self.stopped = ("not a W&B log header (`:W&B`, magic, version 0)", UNREADABLE, 0)
                return []
            if size < len(HEADER):
                self.pending = buf
                return []
            self.checked, pos = True, len(HEADER)
        unpack, crc32 = FRAME.unpack_from, zlib.crc32
        while pos < size:
            left = BLOCK - (base + pos) % BLOCK
            if left < FRAME.size:  # a block's trailer: padding
                if size - pos < left:
                    break
                pos += left
                continue
            if size - pos < FRAME.size:
                break
            crc, length, kind = unpack(buf, pos)
            if kind == 0 and length == 0 and not buf[pos : pos + left].strip(b"\x00"):
                if size - pos < left:  # zeros up to what is written: wait for the rest
                    break
                pos += left  # zeros to the block's end: space not written
                continue
            end = pos + FRAME.size + length
            if end > size:
                break
            if length > left - FRAME.size:
                self.stopped = ("a record longer than its block", UNREADABLE, base + pos)
                break
            body = buf[pos + FRAME.size : end]
            if crc32(body, crc32(bytes((kind,)))) != crc:
                self.stopped = ("a record with a bad checksum", UNREADABLE, base + pos)
                break
            parts = self.parts
            if kind == FULL and parts is None:
                out.append(body)
            elif kind == FIRST and parts is None:
                self.parts = [body]
            elif kind in (MIDDLE, LAST) and parts is not None:
                parts.append(body)
                if kind == LAST:
                    out.append(b"".join(parts))
                    self.parts = None
            else:
                what = f"a record part of type {kind} out of order"
                self.stopped = (what, UNREADABLE, base + pos)
                break
            pos = end
        self.pending, self.at = buf[pos:], base + pos
        return out

    def close(self) -> tuple[str, str, int] | None:
        """The file is over: where reading stopped, when it stopped early (a frame or a
        record's parts left unfinished: cut short), else None."""
        if self.stopped is None:
            if self.pending.strip(b"\x00"):
                self.stopped = ("a record cut short", CUT_TAIL, self.at)
            elif self.parts is not None:
                where = self.at + len(self.pending)
                self.stopped = ("a record whose last part is not written", CUT_TAIL, where)
            elif not self.checked:
                self.stopped = ("not a W&B log header (`:W&B`, magic, version 0)", UNREADABLE, 0)
        return self.stopped


def frames(data: bytes) -> tuple[list[bytes], tuple[str, str, int] | None]:
    """The whole records of a `.wandb` file's bytes (data of its framing, parts joined), and
    where reading stopped when it stopped early: (what, reason, byte offset)."""
    framer = Framer()
    out = framer.feed(data)
    return out, framer.close()


def _value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # NaN, Infinity: Python's json reads the tokens W&B writes for them
            return json.loads(text)
        except ValueError:
            return text


def _item_value(item: Any) -> Any:
    """An item's value: its `value_json`, else the typed value the item holds."""
    if item.value_json:
        return _value(item.value_json)
    kind = item.WhichOneof("value")
    if kind is None or kind == "none":
        return None
    if kind == "json":
        return _value(item.json)
    return getattr(item, kind)


_METRIC, _CLOCK, _COUNTER, _OTHER = range(4)
_EXACT = 2**53
"""Integers below it in magnitude are exact in a float64 (larger ones: `row_step`)."""


def _role(name: str) -> int:
    """What a name of a history row is: a metric, a clock (`is_clock`, `system/*`), a step
    counter (`_step`, `step` ...: set aside, as `row_step` sets them aside), or a name
    `row_step` reads its own way (a digest)."""
    if name in COUNTERS or name == "_step":
        return _COUNTER
    if name in ("type", "param_digest", "param_digests"):
        return _OTHER
    return _CLOCK if is_clock(name) or name.startswith("system/") else _METRIC


def _items(items: Any, *, parse: bool = True) -> tuple[list[Any], list[Any]]:
    """The keys (a name, or a tuple of nested names) and values of W&B items (history,
    summary): values read from their JSON at once (`parse`), else their JSON text (a typed
    value, which W&B may write instead of JSON, as a `_Typed`)."""
    keys: list[Any] = []
    texts: list[Any] = []
    typed = False
    for item in items:
        key = item.key
        if not key:
            nested = item.nested_key
            key = nested[0] if len(nested) == 1 else tuple(nested)
        keys.append(key)
        text = item.value_json
        if not text:
            typed = True
            texts.append(_Typed(_item_value(item)))
        else:
            texts.append(text)
    if not parse:
        return keys, texts
    if not typed:
        try:
            return keys, orjson.loads("[" + ",".join(texts) + "]")
        except orjson.JSONDecodeError:
            pass  # NaN or Infinity among them
    return keys, [t.value if isinstance(t, _Typed) else _value(t) for t in texts]


class _Typed:
    """A value W&B wrote typed, not as JSON text."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _put(tree: dict[str, Any], path: list[str], value: Any) -> None:
    """`value` at `path` of a nested dict (W&B's nested keys)."""
    for key in path[:-1]:
        node = tree.get(key)
        if not isinstance(node, dict):
            node = tree[key] = {}
        tree = node
    tree[path[-1]] = value


def _drop(tree: dict[str, Any], path: list[str]) -> None:
    for key in path[:-1]:
        node = tree.get(key)
        if not isinstance(node, dict):
            return
        tree = node
    tree.pop(path[-1], None)


def _updates(items: Any, tree: dict[str, Any]) -> None:
    for item in items:
        path = [item.key] if item.key else list(item.nested_key)
        if path:
            _put(tree, path, _item_value(item))


class _Run:
    """What one run's records say, gathered in order. Its notes name no run (an id, a count
    of samples taken by the clock): two runs of one computation give the same lines."""

    def __init__(self) -> None:
        self.run: dict[str, Any] = {}
        self.config: dict[str, Any] = {}
        self.env: dict[str, Any] = {}
        self.summary: dict[str | tuple[str, ...], Any] = {}
        """The summary's last value per key (its JSON text, read at the end)."""
        self.steps: list[Record] = []
        self.kinds: dict[str, int] = {}
        """Each name's role in a row (`_role`), found once per run."""
        self.media: dict[str, str] = {}
        self.stats = 0
        self.exit: Any = None

    def add(self, record: Any) -> None:
        kind = record.WhichOneof("record_type")
        if kind == "history":
            self.history(record.history)
        elif kind == "summary":
            keys, texts = _items(record.summary.update, parse=False)
            self.summary.update(zip(keys, texts, strict=True))
            for item in record.summary.remove:
                gone = item.key or (tuple(item.nested_key) if len(item.nested_key) > 1
                                    else item.nested_key[0])  # fmt: skip
                self.summary_removed(gone)
        elif kind == "run":
            self.run_record(record.run)
        elif kind == "config":
            _updates(record.config.update, self.config)
            for item in record.config.remove:
                _drop(self.config, [item.key] if item.key else list(item.nested_key))
        elif kind == "environment":
            self.environment(record.environment)
        elif kind == "header":
            self.env.setdefault("wandb_producer", record.header.version_info.producer)
        elif kind == "stats":
            self.stats += 1
        elif kind == "exit":
            self.exit = record.exit

    def history(self, history: Any) -> None:
        keys, values = _items(history.item)
        number = history.step.num if history.HasField("step") else None
        self.history_row(keys, values, number)

    def history_row(self, keys: list[Any], values: list[Any], number: int | None) -> None:
        """One history row from its items' keys (a name, or a tuple of nested names) and
        values; `number` the record's own step number (taken when the row has no `_step`)."""
        if any(type(key) is tuple for key in keys):
            row: dict[str, Any] = {}
            for key, value in zip(keys, values, strict=True):
                _put(row, [key] if type(key) is str else list(key), value)
        else:
            row = dict(zip(keys, values, strict=True))
        if "_step" not in row and number is not None:
            row["_step"] = number
        step = self.fast(row)
        if step is None:
            for name, value in row.items():
                if isinstance(value, dict) and isinstance(value.get("_type"), str):
                    self.media.setdefault(name, value["_type"])
            step = row_step(dict(sorted(row.items())), key="_step")
            if step is None:
                shown = ", ".join(sorted(row))[:200]
                self.steps.append(Text(f"W&B history row without _step: {shown}", UNREADABLE))
                return
            if any(name.startswith("system/") for name in step.metrics):
                step = _system_clocks(step)
        self.steps.append(step)

    def fast(self, row: dict[str, Any]) -> Step | None:
        """The step of a row of plain numbers (a float, an integer below 2**53), as
        `row_step` gives it, without its general walk; None for any other row."""
        step = row.get("_step")
        if type(step) is not int:
            return None
        kinds = self.kinds
        metrics: dict[str, float] = {}
        clocks: dict[str, float] = {}
        for name, value in row.items():
            kind = type(value)
            if kind is int:
                if not -_EXACT < value < _EXACT:
                    return None
            elif kind is not float:
                return None
            role = kinds.get(name)
            if role is None:
                role = kinds[name] = _role(name)
            if role == _METRIC:
                metrics[name] = float(value)
            elif role == _CLOCK:
                clocks[name] = float(value)
            elif role == _OTHER:
                return None
        t = next((clocks[k] for k in CLOCK_FIELDS if k in clocks), None)
        return Step(step, dict(sorted(metrics.items())), t, None, {}, dict(sorted(clocks.items())))

    def summary_removed(self, gone: str | tuple[str, ...]) -> None:
        path = (gone,) if isinstance(gone, str) else gone
        for key in list(self.summary):
            have = (key,) if isinstance(key, str) else key
            if have[: len(path)] == path:
                del self.summary[key]

    def summary_tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for key, value in self.summary.items():
            path = [key] if isinstance(key, str) else list(key)
            _put(tree, path, value.value if isinstance(value, _Typed) else _value(value))
        return tree

    def run_record(self, run: Any) -> None:
        _updates(run.config.update, self.config)
        fields = {
            "id": run.run_id,
            "project": run.project,
            "entity": run.entity,
            "name": run.display_name,
            "group": run.run_group,
            "job_type": run.job_type,
        }
        self.run.update({k: v for k, v in fields.items() if v})
        if run.tags:
            self.run["tags"] = list(run.tags)
        if run.resumed or run.resume:
            self.run["resumed"] = True
        if run.HasField("start_time"):
            self.run["start_time"] = run.start_time.seconds + run.start_time.nanos / 1e9
        if run.host:
            self.env["host"] = run.host
        if run.HasField("git"):
            git = {"commit": run.git.commit, "remote": run.git.remote_url}
            self.env.setdefault("git", {}).update({k: v for k, v in git.items() if v})
        telemetry = run.telemetry
        for key, value in (
            ("python", telemetry.python_version),
            ("wandb", telemetry.cli_version),
            ("platform", telemetry.platform),
        ):
            if value:
                self.env.setdefault(key, value)

    def environment(self, environment: Any) -> None:
        from google.protobuf.json_format import MessageToDict

        found = MessageToDict(environment, preserving_proto_field_name=True)
        for key, value in found.items():
            if key in _VOLATILE_ENV:
                continue
            if key == "git" and isinstance(value, dict):
                git = {"commit": value.get("commit"), "remote": value.get("remote_url")}
                self.env.setdefault("git", {}).update({k: v for k, v in git.items() if v})
            elif key == "args" and isinstance(value, list):
                self.env["command"] = " ".join(str(a) for a in value)
            else:
                self.env[key] = value

    def header(self) -> Header:
        """The header: the config as `hyper`, the metadata as `env`, the run as `run`."""
        hyper = {k: v for k, v in self.config.items() if k != "_wandb"}
        seed = hyper.get("seed")
        run = {"source": "wandb", **self.run}
        if isinstance(seed, int) and not isinstance(seed, bool):
            run["seed"] = seed
        return Header(
            run=run, hyper=copy.deepcopy(hyper), env=copy.deepcopy(self.env), format="wandb"
        )

    def ending(self, name: str, stopped: tuple[str, str, int] | None, size: int) -> list[Record]:
        """What follows the steps: the notes, the summary, where reading stopped, the end."""
        out: list[Record] = []
        if self.media:
            named = ", ".join(f"{k} ({v})" for k, v in sorted(self.media.items())[:20])
            out.append(Text(f"{NOTE}W&B media and tables named, not judged: {named}"))
        if self.stats:
            out.append(Text(f"{NOTE}W&B system metrics (system/*): clocks, not judged"))
        if self.summary:
            out += _summary(self.summary_tree())
        if stopped is not None:
            what, reason, at = stopped
            whole = sum(isinstance(r, Step) for r in self.steps)
            where = f"at byte {at} of {size}" if at >= 0 else "early"
            out.append(Text(f"{NOTE}{name}: reading stopped {where} ({what}, after {whole} "
                            f"steps); the rest is not read", reason))  # fmt: skip
        elif self.exit is None:
            out.append(Text(f"{NOTE}{name}: no exit record: the run was killed, or is still "
                            f"being written", CUT_TAIL))  # fmt: skip
        if self.exit is not None:
            status = "ok" if self.exit.exit_code == 0 else "error"
            steps = sum(isinstance(r, Step) for r in self.steps)
            out.append(End(status, steps=steps, wall_s=float(self.exit.runtime) or None))
        return out


def _system_clocks(step: Step) -> Step:
    """A step with its `system/*` values as clocks: they measure the machine, not the run."""
    metrics = {k: v for k, v in step.metrics.items() if not k.startswith("system/")}
    clocks = {**step.clocks, **{k: v for k, v in step.metrics.items() if k.startswith("system/")}}
    clocks = dict(sorted(clocks.items()))
    return Step(step.step, metrics, step.t, step.digest, step.digests, clocks, step.unreadable)


def _summary(summary: Mapping[str, Any]) -> list[Record]:
    """The run's summary as one text line of its numbers (judged as text), and a note naming
    what it holds that is not judged (clocks, media)."""
    shown: list[str] = []
    aside: list[str] = []
    for key in sorted(summary):
        value = summary[key]
        if key == "_wandb" or (isinstance(value, dict) and isinstance(value.get("_type"), str)):
            aside.append(key)
            continue
        for metric, number in numbers(key, value):
            if is_clock(metric) or metric.startswith("system/"):
                aside.append(metric)
            elif isinstance(number, Unreadable):
                shown.append(f"{metric}={number}")
            else:
                shown.append(f"{metric}={number!r}")
    out: list[Record] = []
    if shown:
        out.append(Text("W&B summary: " + ", ".join(shown)))
    if aside:
        out.append(Text(f"{NOTE}W&B summary values not judged (clocks, media): "
                        f"{', '.join(aside[:20])}"))  # fmt: skip
    return out


class WandbStream:
    """A W&B run's records as the bytes of its `.wandb` file(s) come: a run still being
    written (`tuimon watch`, a paired script's run) and a file read whole alike. `feed` gives
    the records the bytes complete; the header comes before the first step (with what the
    run wrote before it: its config, its metadata), and `close` gives the rest (the summary,
    where reading stopped, the end). A record not all there waits for more bytes."""

    def __init__(self, name: str, *, live: bool = True) -> None:
        self.live = live
        """Records given as they come; else all at `close` (a header with the whole config)."""
        self.run = _Run()
        self.framer = Framer()
        self.name = name
        self.size = 0
        self.count = 0
        self.sent = 0
        self.headed = False
        self.stopped: tuple[str, str, int] | None = None

    def next_file(self, name: str) -> list[Record]:
        """The next part of a resumed run (its own `.wandb` file) begins: the records the
        part before left, when it stopped early (reading stops there)."""
        self.stopped = self.framer.close()
        self.framer, self.name, self.size = Framer(), name, 0
        self.run.exit = None  # a resumed run's last part says how it ended
        return []

    def feed(self, data: bytes) -> list[Record]:
        """The records the bytes (those after the ones fed before) complete."""
        if self.stopped is not None:
            return []
        from google.protobuf.message import DecodeError

        self.size += len(data)
        record_type, add = records_type(), self.run.add
        for blob in self.framer.feed(data):
            self.count += 1
            try:
                record = record_type.FromString(blob)
            except DecodeError:
                what = f"record {self.count}: not a record W&B's definitions read"
                self.stopped = (what, UNREADABLE, -1)
                break
            add(record)
        return self._ready() if self.live else []

    def _ready(self) -> list[Record]:
        steps = self.run.steps
        if self.sent == len(steps):
            return []
        out: list[Record] = [] if self.headed else [self.run.header()]
        self.headed = True
        out += steps[self.sent :]
        self.sent = len(steps)
        return out

    def close(self) -> list[Record]:
        """The file is over: the records not given yet (the header when no step came)."""
        if self.stopped is None:
            self.stopped = self.framer.close()
        out: list[Record] = [] if self.headed else [self.run.header()]
        self.headed = True
        out += self.run.steps[self.sent :]
        self.sent = len(self.run.steps)
        return out + self.run.ending(self.name, self.stopped, self.size)


def read_wandb(path: Path, data: bytes | None = None) -> list[Record]:
    """The records of a `.wandb` file (its bytes `data` when read already), or of the run
    folder holding it, or of a `wandb/` folder of one run and its resumptions (`run_files`:
    their `.wandb` files in order, as one run)."""
    files = run_files(path) if path.is_dir() else [path]
    stream = WandbStream(files[0].name if files else path.name, live=False)
    for index, file in enumerate(files):
        if index:
            stream.next_file(file.name)
        if data is None or path.is_dir():
            with open_regular(file) as fh:
                data = fh.read()
        stream.feed(data)
        data = None
        if stream.stopped is not None:
            break
    return stream.close()
