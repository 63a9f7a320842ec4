"""The byte rule: a pair is IDENTICAL (or CLOSE) only when every byte that differs between its
two logs lies in a span the verdict names as set aside.

The check reads the bytes, not what a reader understood of them. The bytes both logs hold from
their start are one comparison; after them, line i of one log is compared with line i of the
other. Where two lines differ, each differing span must be explained by a rule that names it:

- `clock`: a value under a clock's name, or a date, time or duration (`tuimon.clocks`);
- `tolerance`: two numbers within `--tolerance` (relative), only when one is set;
- `ignored`: a value under a name `--ignore` (or not `--only`) names;
- `record`: a tuimon step log's header or end record (the environment, shown, not judged);
- `device`: the pair's device names (`cuda` in run a's line where run b's says `cpu`);
- `redraw`: a progress bar redrawn with carriage returns, compared as a terminal shows it;
- `media`: the fields of a W&B media object (an image's size, hash and path), named, not judged;
- `mark`: UTF-8's byte-order mark at the start of one log (a Windows tool's), not data;
- `counter`: under `--step-key NAME`, the log's other step counters (`step` when aligned by
  `iter`): they number records, the named key aligns them.

Under a tolerance, parameter digests that differ are within it (the verdict is CLOSE at most).

A span no rule explains makes the pair DIVERGED at that line; lines one log has and the other
lacks (after its last line) make it INCOMPLETE. The counts it gives are counted here, so what
the verdict prints of them is true by construction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import chain
from operator import ne
from pathlib import Path
from typing import IO, Any

import orjson

from tuimon.clocks import is_clock, mask_clocks
from tuimon.engine.judge import precision
from tuimon.engine.judge.band import Band
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.line_tokens import (
    json_tokens,
    json_tokens_at,
    leaf_key,
    name_before,
    record_type,
    row_cells,
    table_header,
    text_tokens,
    ungroup,
)
from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL, INCOMPLETE, Summary
from tuimon.readers import BOM, LineParser, ReaderError, Reading, open_log
from tuimon.readers.text import last_state, step_text
from tuimon.steplog import STEP_KEYS, Step

BLOCK = 1 << 20
"""Bytes compared at a time while the two logs are the same."""
LINES = 16384
"""Lines compared at a time after the shared part (a block equal once its clocks are masked
needs no line-by-line look)."""
LOOKAHEAD = 16
"""Lines looked ahead for a line one log holds and the other lacks."""
DOCUMENT = 256 << 20
"""Bytes of a JSON document over many lines compared token against token, at most."""
HEAD = 1 << 16
"""Bytes of the first log read for a table's header (a comment line may come first)."""
SHOWN = 200
"""Characters of a line kept for the report."""

CLOCK, TOLERANCE, IGNORED, RECORD, DEVICE, REDRAW, MEDIA, MARK, COUNTER = (
    "clock", "tolerance", "ignored", "record", "device", "redraw", "media", "mark", "counter"
)  # fmt: skip
REASONS = {
    CLOCK: "clocks",
    TOLERANCE: "values within the tolerance",
    IGNORED: "ignored names",
    RECORD: "run header/end records",
    DEVICE: "device names",
    REDRAW: "progress-bar redraws",
    MEDIA: "media files' metadata",
    MARK: "a byte-order mark",
    COUNTER: "step counters besides --step-key",
}
"""Why a differing span is set aside, as the verdict names it."""


@dataclass
class Rules:
    """What may be set aside: tolerance, the names `--ignore`/`--only` leave out, the clocks
    `--judge` judges anyway, and the pair's device names."""

    tolerance: float = 0.0
    judged: Callable[[str], bool] | None = None
    """False for a name the user set aside (`MetricFilter.judged`)."""
    judge_clocks: tuple[str, ...] = ()
    devices: tuple[str, str] | None = None
    step_key: str | None = None
    """`--step-key NAME`: the step; the log's other step counters only count records."""
    band: Band | None = None
    """`--tolerance-from`: a band per metric instead of `tolerance` (never a bitwise band)."""

    def clock(self, name: str) -> bool:
        return is_clock(name) and not any(fnmatchcase(name, g) for g in self.judge_clocks)

    def ignored(self, name: str) -> bool:
        if self.judged is None or not name:
            return False
        leaf = name.rsplit(".", 1)[-1]
        return not self.judged(name) or (leaf != name and not self.judged(leaf))

    def close(self, x: str, y: str, name: str = "") -> bool:
        """Two numbers within the tolerance, or the band of `name` (never at tolerance 0 or
        in a band of 0: that is bitwise)."""
        limit = self.band.limit(name) or self.band.limit(leaf_key(name)) if self.band else None
        if not self.tolerance and not limit:
            return False
        try:
            u, v = float(x), float(y)
        except ValueError:
            return False
        if math.isnan(u) or math.isnan(v) or math.isinf(u) or math.isinf(v):
            return False
        scale = max(abs(u), abs(v))
        rel = abs(u - v) / scale if scale else 0.0
        if limit:
            return limit != (0.0, 0.0) and abs(u - v) <= limit[0] and rel <= limit[1]
        return rel <= self.tolerance


@dataclass
class LineDifference:
    """Two lines, one of each log (1-based), and what in them no rule explains."""

    line_a: int | None
    text_a: str
    line_b: int | None
    text_b: str
    what: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "line_a": self.line_a,
            "line_b": self.line_b,
            "text_a": self.text_a,
            "text_b": self.text_b,
            "what": self.what,
        }


@dataclass
class ByteCheck:
    """The byte rule over two logs: what they share, what differs, and why it may."""

    applied: bool = True
    why_not: str | None = None
    """Why the rule could not read the bytes (a binary format, a folder): said, never hidden."""
    shared_bytes: int = 0
    """Bytes both logs hold from their start (whole lines)."""
    shared_lines: int = 0
    compared: int = 0
    """Lines after the shared part compared line against line."""
    differ: int = 0
    """Of those, lines whose bytes differ."""
    set_aside: dict[str, int] = field(default_factory=dict)
    """Lines that differ only in spans set aside, by reason (a line counts once per reason)."""
    first: LineDifference | None = None
    """The first lines whose difference no rule explains."""
    only_a: int = 0
    only_b: int = 0
    first_only: LineDifference | None = None
    """The first line one log holds and the other lacks."""

    @property
    def unexplained(self) -> bool:
        return self.first is not None

    @property
    def one_sided(self) -> bool:
        return bool(self.only_a or self.only_b)

    def to_dict(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "why_not": self.why_not,
            "shared_bytes": self.shared_bytes,
            "shared_lines": self.shared_lines,
            "compared": self.compared,
            "differ": self.differ,
            "set_aside": dict(self.set_aside),
            "first": self.first.to_dict() if self.first else None,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "first_only": self.first_only.to_dict() if self.first_only else None,
        }


def check(a: Path, b: Path, rules: Rules | None = None) -> ByteCheck:
    """The byte rule over two log files (plain, gzip or xz)."""
    rules = rules or Rules()
    try:
        with open_log(a) as fa, open_log(b) as fb:
            return _Checker(fa, fb, rules).run()
    except (OSError, ValueError, EOFError) as exc:
        return ByteCheck(applied=False, why_not=f"cannot read the bytes: {exc}")


class _Checker:
    def __init__(self, fa: IO[bytes], fb: IO[bytes], rules: Rules) -> None:
        self.files = (fa, fb)
        self.rules = rules
        self.out = ByteCheck()
        self.header: tuple[str, list[str]] | None = None
        self.clock_keys: set[str] = set()
        self._masks: list[tuple[re.Pattern[bytes], bytes]] = []
        self._first = self._first_b = b""

    def run(self) -> ByteCheck:
        head_a, head_b = self._shared()
        if b"\0" in head_a[:4096] or b"\0" in head_b[:4096] or b"\0" in self._first[:4096]:
            self.out.applied = False
            self.out.why_not = "binary data: judged by its records"
            return self.out
        self.header = _header(self._first.decode("utf-8", "replace").splitlines())
        kinds = _kind(self._first), _kind(self._first_b)
        if kinds[0] != kinds[1]:
            self.out.applied = False
            self.out.why_not = f"written in two formats ({kinds[0]}, {kinds[1]}): judged by records"
            return self.out
        if kinds[0] == "JSON" and not _is_json(_first_line(self._first)):
            self._document()  # one JSON document over many lines: its paths span lines
            return self.out
        if self.out.shared_bytes == 0 and head_a.startswith(BOM) != head_b.startswith(BOM):
            head_a, head_b = head_a.removeprefix(BOM), head_b.removeprefix(BOM)
            self.out.set_aside[MARK] = 1
        self._compare(_lines(head_a, self.files[0]), _lines(head_b, self.files[1]))
        return self.out

    def _shared(self) -> tuple[bytes, bytes]:
        """Read both logs while their blocks are equal: the rest of each from the start of
        the first line that differs (the shared bytes and lines counted)."""
        fa, fb = self.files
        shared = lines = 0
        first = True
        while True:
            x, y = fa.read(BLOCK), fb.read(BLOCK)
            if first:
                self._first, self._first_b = x[:HEAD], y[:HEAD]
                first = False
            if x == y and len(x) == BLOCK:
                shared += len(x)
                lines += x.count(b"\n")
                continue
            cut = x.rfind(b"\n", 0, _common(x, y)) + 1
            self.out.shared_bytes = shared + cut
            self.out.shared_lines = lines + x.count(b"\n", 0, cut)
            return x[cut:], y[cut:]

    # -- a JSON document ----------------------------------------------------------------------
    def _document(self) -> None:
        """Two JSON documents written over many lines (`json.dump(indent=2)`), compared token
        against token with the path of each value, so a clock in a list on its own line is
        known by its list's name; the differing lines counted by the line of log a."""
        out = self.out
        texts = []
        for fh in self.files:
            fh.seek(0)
            data = fh.read(DOCUMENT + 1)
            if len(data) > DOCUMENT:
                out.applied = False
                out.why_not = f"a JSON document over {DOCUMENT >> 20} MiB: judged by its records"
                return
            texts.append(data.removeprefix(BOM).decode("utf-8", "replace"))
        a, b = texts
        ta, tb = json_tokens_at(a), json_tokens_at(b)
        out.compared = a.count("\n") + (0 if a.endswith("\n") else 1) - out.shared_lines
        reasons: dict[int, set[str]] = {}
        for (pa, va, ka, at), (pb, vb, kb, bt) in zip(ta, tb, strict=False):
            if va == vb and ka == kb:
                continue
            why = None
            if pa == pb and ka == kb and ka in ("number", "string"):
                why = self._value(pa, va, vb, quoted=ka == "string")
            if why is None:
                what = f"{pa or 'a value'}: {_cut(va)} against {_cut(vb)}"
                out.first = LineDifference(*_line_at(a, at), *_line_at(b, bt), what)
                out.differ = len(reasons) + 1
                return
            reasons.setdefault(a.count("\n", 0, at), set()).add(why)
        if len(ta) != len(tb):
            at = ta[len(tb)][3] if len(ta) > len(tb) else len(a)
            bt = tb[len(ta)][3] if len(tb) > len(ta) else len(b)
            what = "one document goes on where the other ends"
            out.first = LineDifference(*_line_at(a, at), *_line_at(b, bt), what)
            out.differ = len(reasons) + 1
            return
        out.differ = len(reasons)
        for why_set in reasons.values():
            for reason in why_set:
                out.set_aside[reason] = out.set_aside.get(reason, 0) + 1

    # -- line against line ------------------------------------------------------------------
    def _compare(self, lines_a: Iterator[list[bytes]], lines_b: Iterator[list[bytes]]) -> None:
        out = self.out
        at_a = at_b = out.shared_lines  # lines of each log compared so far
        buf_a: list[bytes] = []
        buf_b: list[bytes] = []
        while True:
            _fill(buf_a, lines_a, LINES + LOOKAHEAD)
            _fill(buf_b, lines_b, LINES + LOOKAHEAD)
            if not buf_a or not buf_b:
                for side, buf, rest, at in (
                    ("a", buf_a, lines_a, at_a),
                    ("b", buf_b, lines_b, at_b),
                ):
                    if buf:
                        self._only(side, chain(buf, chain.from_iterable(rest)), at + 1)
                return
            n = min(len(buf_a), len(buf_b), LINES)
            xa, xb = buf_a[:n], buf_b[:n]
            if xa == xb or self._masked_equal(xa, xb):
                differ = 0 if xa == xb else sum(map(ne, xa, xb))
                out.compared += n
                out.differ += differ
                if differ:
                    out.set_aside[CLOCK] = out.set_aside.get(CLOCK, 0) + differ
                del buf_a[:n], buf_b[:n]
                at_a += n
                at_b += n
                continue
            masks = len(self._masks)
            for _ in range(n):
                x, y = buf_a[0], buf_b[0]
                if x == y or self._explain(x, y) is None:
                    out.compared += 1
                    out.differ += x != y
                    del buf_a[0], buf_b[0]
                    at_a += 1
                    at_b += 1
                    if len(self._masks) > masks:
                        break  # a clock key learned: the rest of the block at once
                    continue
                if self._cut_short(buf_a, buf_b, lines_a, lines_b, at_a, at_b):
                    return
                skip = self._insertion(buf_a, buf_b)
                if skip is None:
                    out.compared += 1
                    out.differ += 1
                    what = self._explain(x, y, count=False) or "the lines differ"
                    out.first = LineDifference(at_a + 1, _shown(x), at_b + 1, _shown(y), what)
                    return
                side, k = skip
                if side == "a":
                    self._only("a", buf_a[:k], at_a + 1)
                    del buf_a[:k]
                    at_a += k
                else:
                    self._only("b", buf_b[:k], at_b + 1)
                    del buf_b[:k]
                    at_b += k
                break

    def _only(self, side: str, lines: Iterable[bytes], number: int) -> None:
        """Lines only `side` holds, the first of them line `number` (1-based) of its log; a
        tuimon step log's header or end record one run wrote and the other did not (a log
        written with --no-header) is a record set aside, not a line missing."""
        count = 0
        for offset, line in enumerate(lines):
            if b'"type"' in line[:64] and _is_record(line):
                self.out.set_aside[RECORD] = self.out.set_aside.get(RECORD, 0) + 1
                continue
            count += 1
            if self.out.first_only is None:
                text = _shown(line)
                self.out.first_only = LineDifference(
                    number + offset if side == "a" else None,
                    text if side == "a" else "",
                    number + offset if side == "b" else None,
                    text if side == "b" else "",
                    f"lines only {side} holds",
                )
        if side == "a":
            self.out.only_a += count
        else:
            self.out.only_b += count

    def _cut_short(
        self,
        buf_a: list[bytes],
        buf_b: list[bytes],
        lines_a: Iterator[list[bytes]],
        lines_b: Iterator[list[bytes]],
        at_a: int,
        at_b: int,
    ) -> bool:
        """One log's last line cut short where the other goes on (a run stopped mid-line):
        the other's lines from there are lines the cut log lacks."""
        x, y = buf_a[0], buf_b[0]
        if len(buf_a) == 1 and not x.endswith(b"\n") and y.startswith(x):
            self._only("b", chain(buf_b, chain.from_iterable(lines_b)), at_b + 1)
            return True
        if len(buf_b) == 1 and not y.endswith(b"\n") and x.startswith(y):
            self._only("a", chain(buf_a, chain.from_iterable(lines_a)), at_a + 1)
            return True
        return False

    def _insertion(self, buf_a: list[bytes], buf_b: list[bytes]) -> tuple[str, int] | None:
        """Lines one log holds and the other lacks before both hold the same lines again:
        (the side holding them, how many); None when the two lines simply differ."""

        def same(i: int, j: int) -> bool:
            x, y = buf_a[i], buf_b[j]
            return x == y or self._explain(x, y, count=False) is None

        for k in range(1, min(LOOKAHEAD, len(buf_b))):
            if same(0, k) and (k + 1 >= len(buf_b) or len(buf_a) < 2 or same(1, k + 1)):
                return "b", k
        for k in range(1, min(LOOKAHEAD, len(buf_a))):
            if same(k, 0) and (k + 1 >= len(buf_a) or len(buf_b) < 2 or same(k + 1, 1)):
                return "a", k
        return None

    def _masked_equal(self, xa: list[bytes], xb: list[bytes]) -> bool:
        """Blocks of JSON lines equal once the values of the keys already found to be clocks
        are masked: no line-by-line look (a run's clock in every line of a long log)."""
        if not self._masks:
            return False
        return self._masked(b"".join(xa)) == self._masked(b"".join(xb))

    def _masked(self, data: bytes) -> bytes:
        """`data` with each clock key's value written `~` (one pass a key: a mask never
        crosses a line's end, and its replacement is literal, not a template)."""
        for pattern, literal in self._masks:
            data = pattern.sub(literal, data)
        return data

    def _seen_clock(self, key: str) -> None:
        if key in self.clock_keys or len(self.clock_keys) > 16:
            return
        self.clock_keys.add(key)
        name = re.escape(key.encode())
        pattern = re.compile(rb'"' + name + rb'"\s*:\s*(?:"[^"\\]*(?:\\.[^"\\]*)*"|[^,}\]\s]+)')
        literal = b'"' + key.encode().replace(b"\\", b"\\\\") + b'":~'
        self._masks.append((pattern, literal))

    # -- one pair of lines --------------------------------------------------------------------
    def _explain(self, x: bytes, y: bytes, *, count: bool = True) -> str | None:
        """None when every span in which two lines differ is set aside (counted, with
        `count`); else what differs, in a few words."""
        if self._masks and self._masked(x) == self._masked(y):
            if count:
                self.out.set_aside[CLOCK] = self.out.set_aside.get(CLOCK, 0) + 1
            return None
        reasons: set[str] = set()
        a, b = x.decode("utf-8", "replace"), y.decode("utf-8", "replace")
        if a.endswith("\n") != b.endswith("\n"):
            return "one line ends, the other is cut short"
        a, b = a.rstrip("\n"), b.rstrip("\n")
        if "\r" in a or "\r" in b or "\x1b" in a or "\x1b" in b:
            a2, b2 = last_state(a), last_state(b)
            if (a2, b2) != (a, b):
                reasons.add(REDRAW)
                a, b = a2, b2
        sa, sb = a.strip(), b.strip()
        ja, jb = sa.lstrip("#").lstrip(), sb.lstrip("#").lstrip()
        if (
            ja[:1] == "{"
            and jb[:1] == "{"
            and len(sa) - len(ja) == len(sb) - len(jb)
            and _is_json(ja)
            and _is_json(jb)
        ):
            what = self._json(ja, jb, reasons)
        elif self.header is not None and (cells := self._cells(a, b)) is not None:
            what = self._table(*cells, reasons)
        else:
            what = self._text(a, b, reasons)
        if what is not None or not count:
            return what
        for reason in reasons:
            self.out.set_aside[reason] = self.out.set_aside.get(reason, 0) + 1
        return None

    def _json(self, a: str, b: str, reasons: set[str]) -> str | None:
        ta, tb = json_tokens(a), json_tokens(b)
        if record_type(ta) in ("header", "end") and record_type(tb) in ("header", "end"):
            reasons.add(RECORD)
            return None
        if len(ta) != len(tb):
            return "the lines hold other fields"
        media = _media(a) | _media(b) if '"_type"' in a or '"_type"' in b else set()
        for (pa, va, ka), (pb, vb, kb) in zip(ta, tb, strict=True):
            if va == vb:
                continue
            if pa != pb or ka != kb or ka in ("key", "punct"):
                return f"`{_cut(va)}` against `{_cut(vb)}`"
            if media and any(pa == m or pa.startswith(m + ".") for m in media):
                reasons.add(MEDIA)
                continue
            why = self._value(pa, va, vb, quoted=ka == "string")
            if why is None:
                return f"{pa or 'a value'}: {_cut(va)} against {_cut(vb)}"
            if why == CLOCK and pa:
                self._seen_clock(leaf_key(pa))
            reasons.add(why)
        return None

    def _value(self, name: str, x: str, y: str, *, quoted: bool = False) -> str | None:
        """Why two values under one name may differ, or None."""
        if name and self.rules.clock(name):
            return CLOCK
        if self.rules.ignored(name):
            return IGNORED
        if not quoted and self.rules.close(x, y, name):
            return TOLERANCE
        if (self.rules.tolerance or self.rules.band) and _digest(name):
            return TOLERANCE  # parameters apart within it: a CLOSE pair's digests differ
        if self.rules.step_key and name in STEP_KEYS and name != self.rules.step_key:
            return COUNTER
        if mask_clocks(x) == mask_clocks(y):
            return CLOCK
        if self._devices(x, y):
            return DEVICE
        return None

    def _devices(self, x: str, y: str) -> bool:
        d = self.rules.devices
        if not d or d[0] == d[1] or not d[0] or not d[1]:
            return False
        return d[0] in x and d[1] in y and x.replace(d[0], "\0") == y.replace(d[1], "\0")

    def _cells(self, a: str, b: str) -> tuple[list[str], list[str], list[str]] | None:
        assert self.header is not None
        ca, cb = row_cells(a, self.header), row_cells(b, self.header)
        if ca is None or cb is None:
            return None
        return self.header[1], ca, cb

    def _table(
        self, names: list[str], ca: list[str], cb: list[str], reasons: set[str]
    ) -> str | None:
        for name, x, y in zip(names, ca, cb, strict=True):
            if x == y:
                continue
            why = self._value(name, x.strip(), y.strip())
            if why is None:
                return f"{name}: {_cut(x)} against {_cut(y)}"
            reasons.add(why)
        return None

    def _text(self, a: str, b: str, reasons: set[str]) -> str | None:
        a, b = ungroup(a), ungroup(b)
        ma, mb = mask_clocks(a), mask_clocks(b)
        if (ma != a or mb != b) and ma == mb:
            reasons.add(CLOCK)
            return None
        if self._devices(ma, mb):
            reasons.add(DEVICE)
            return None
        ta, tb = text_tokens(ma), text_tokens(mb)
        if len(ta) != len(tb):
            return "the lines differ"
        for i, ((xa, na), (xb, nb)) in enumerate(zip(ta, tb, strict=True)):
            if xa == xb:
                continue
            if not (na and nb):
                if self._devices(xa, xb):
                    reasons.add(DEVICE)
                    continue
                return f"`{_cut(xa)}` against `{_cut(xb)}`"
            name = name_before(ta, i)
            why = self._value(name, xa, xb)
            if why is None:
                return f"{name + ' ' if name else ''}{xa} against {xb}"
            reasons.add(why)
        return None


# -- helpers --------------------------------------------------------------------------------
def _common(x: bytes, y: bytes) -> int:
    """Length of the common prefix of two byte strings."""
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    lo, hi = 0, n
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and x[lo] == y[lo]:
        lo += 1
    return lo


def _lines(head: bytes, fh: IO[bytes]) -> Iterator[list[bytes]]:
    """The lines of `head` then of the rest of `fh`, a block at a time (each line with its
    newline, the last maybe without)."""
    rest = b""
    chunk = head
    while True:
        data = rest + chunk
        end = data.rfind(b"\n") + 1
        rest = data[end:]
        if end:
            yield data[:end].splitlines(keepends=True) if b"\r" not in data else _split(data[:end])
        chunk = fh.read(BLOCK)
        if not chunk:
            if rest:
                yield [rest]
            return


def _split(data: bytes) -> list[bytes]:
    """Lines ended by `\n` only (`splitlines` also ends one at a `\r`)."""
    parts = data.split(b"\n")
    parts.pop()
    return [p + b"\n" for p in parts]


def _fill(buf: list[bytes], it: Iterator[list[bytes]], n: int) -> None:
    while len(buf) < n:
        block = next(it, None)
        if block is None:
            return
        buf.extend(block)


def _shown(line: bytes) -> str:
    return line.decode("utf-8", "replace").rstrip("\n")[:SHOWN]


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


# -- the verdict held to the bytes ----------------------------------------------------------
def hold(
    summary: Summary,
    a: Path,
    b: Path,
    *,
    reading: Reading | None = None,
    select: MetricFilter | None = None,
    devices: tuple[str, str] | None = None,
) -> None:
    """The verdict of two logs held to their bytes, and the precision it rests on said (into
    `summary.bytes` and `summary.precision`). Every path that ends a pair (compare, a saved
    pair's judgement, a live pair at its end) calls this once, on the files it judged.

    Only a claim of equality is held to the bytes: a pair already DIVERGED at a step keeps
    that step (the difference is named), an INCOMPLETE one stays so. An IDENTICAL or CLOSE pair
    with a difference no rule explains is DIVERGED at its line; with lines on one side only,
    INCOMPLETE."""
    reading = reading or Reading()
    folder = a.is_dir() or b.is_dir()
    if summary.verdict == DIVERGED:
        found = ByteCheck(applied=False, why_not="a difference is named at its step")
    elif summary.interrupted:  # INCOMPLETE, and a quit waits on nothing it does not need
        found = ByteCheck(applied=False, why_not="the pair was stopped: judged by its records")
    elif folder:
        found = ByteCheck(applied=False, why_not="a folder of files: judged by its records")
    elif reading.rename:
        found = ByteCheck(applied=False, why_not="--map renames names: judged by the records")
    else:
        rules = Rules(
            tolerance=summary.tolerance,
            judged=select.judged if select is not None else None,
            judge_clocks=reading.judge,
            devices=devices,
            step_key=reading.step_key,
            band=band if (band := Band.from_dict(summary.band)) and not band.exact else None,
        )
        found = check(a, b, rules)
    float32 = _float32(a) or _float32(b)
    summary.precision = precision.of_logs([] if folder else [a, b], float32=float32).to_dict()
    summary.bytes = found.to_dict()
    if not found.applied:
        return
    if summary.verdict not in (IDENTICAL, CLOSE):
        return  # INCOMPLETE claims no equality: what the bytes hold is told, not turned
    if found.first is not None:
        summary.verdict = DIVERGED
        line = found.first.line_a or 0
        summary.bytes["after_step"] = after_step(a, reading, "a", line, summary.step_levels)
        summary.first_divergent_lines = {"a": found.first.line_a, "b": found.first.line_b}
    elif found.one_sided:
        first = found.first_only
        where = (
            f"line {first.line_a} of a: `{_cut(first.text_a)}`"
            if first is not None and first.line_a
            else f"line {first.line_b} of b: `{_cut(first.text_b)}`"
            if first is not None
            else "?"
        )
        why = f"lines on one side only: a {found.only_a}, b {found.only_b} (first: {where})"
        summary.verdict = INCOMPLETE
        summary.complete = False
        summary.reason = "; ".join(filter(None, (summary.reason, why)))


def _line_at(text: str, at: int) -> tuple[int, str]:
    """The line (1-based) of a text that holds offset `at`, and its first characters."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text.count("\n", 0, at) + 1, text[start : end if end >= 0 else len(text)][:SHOWN]


_DOCUMENT_START = re.compile(r'[\[{]\s*($|["{\[])')
"""The first line of a JSON document written over many lines (`{`, `[{`, `{"loss": [`)."""


def _is_record(line: bytes) -> bool:
    """A tuimon step log's header or end record."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(row, dict) and row.get("type") in ("header", "end")


def _digest(name: str) -> bool:
    """A parameter digest (`param_digest`, `param_digests.W_E`)."""
    return name.startswith("param_digest")


def _first_line(head: bytes) -> str:
    """The first line that holds anything, as text."""
    for line in head.removeprefix(BOM).decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _is_json(text: str) -> bool:
    """Whether a line is one JSON value (a printed Python dict is not: its quotes are ')."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _kind(head: bytes) -> str:
    """What a log's first line is written as: `JSON` (an object), `a table` or `text`."""
    first = _first_line(head)
    if _is_json(first) or _DOCUMENT_START.match(first):
        return "JSON"
    body = head.removeprefix(BOM).lstrip()
    text = body.decode("utf-8", "replace").splitlines()
    return "a table" if _header(text) is not None else "text"


def _header(lines: list[str]) -> tuple[str, list[str]] | None:
    """A table's header: the first of a log's first lines that names columns and is followed
    by a row of them (a comment or a JSON line may come before it)."""
    for i, line in enumerate(lines[:20]):
        found = table_header(line.strip())
        if found is not None and i + 1 < len(lines) and row_cells(lines[i + 1], found):
            return found
    return None


def _media(line: str) -> set[str]:
    """The paths of a JSON line's media objects (a mapping with a string `_type`)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return set()
    found: set[str] = set()

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > 16:
            return
        if isinstance(value, dict):
            if isinstance(value.get("_type"), str) and path:
                found.add(path)
                return
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}.{i}" if path else str(i), depth + 1)

    walk(obj, "", 0)
    return found


def _float32(path: Path) -> bool:
    """A TensorBoard event file or run folder: its scalars are float32."""
    if path.is_dir():
        return any(path.rglob("*tfevents*"))
    return "tfevents" in path.name


def after_step(path: Path, reading: Reading, side: str, line: int, levels: bool) -> str | None:
    """The step a line of a log stands at or after, as a person reads it (`27`, `1634 (epoch
    27)`): the last step record read at or before it; None before any (or for a format that is
    not read line by line)."""
    parser = LineParser(reading, side)
    last: int | None = None
    at = False
    try:
        with open_log(path) as fh:
            for number, raw in enumerate(fh, 1):
                if number > line:
                    break
                if not raw.strip():
                    continue
                record, _ = parser.parse(raw)
                if isinstance(record, Step):
                    last, at = record.step, number == line
    except (OSError, ValueError, EOFError, ReaderError):
        return None
    if last is None:
        return None
    return ("at step " if at else "after step ") + step_text(last, levels)
