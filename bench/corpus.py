"""Run `tuimon compare` over a folder of real training logs, four variants each, and count.

    python bench/corpus.py DIR [--only SUBSTR] [--variant V] [--jobs N] [--json]

Every log under DIR (a file; or a folder that is one log: TensorBoard events, an MLflow run
with metrics/) is compared, in a temporary folder, with:

  itself   a copy of itself                               -> IDENTICAL, exit 0
  changed  a copy with one digit of one metric value      -> DIVERGED, exit 1, at that record
           (middle third) changed; right when the reported line is the changed line, or the
           reported step (both levels) is a number of the changed line / of the nearest line
           before it that names a step (tables, JSON, TensorBoard, MLflow: that row's step)
  clocks   a copy with every clock-like value nudged      -> IDENTICAL, exit 0
           (dates, times of day, durations, rates, fields named time/eta/elapsed/*_runtime/...)
  cut      the first ~60%, cut inside a line              -> INCOMPLETE, exit 3
  same     the same path given twice                      -> exit 2

Prints each miss (expected, got, the first lines of tuimon's output), then, apart:

  false IDENTICAL   expected DIVERGED or INCOMPLETE, got IDENTICAL (the worst error), with what
                    tuimon prints to a person for it;
  byte-rule misses  the copy's bytes differ and tuimon said IDENTICAL or CLOSE without naming
                    them as set aside: told by the `byte_rule` field of --json when it is there
                    (a difference no rule explained, a line on one side only), else by the bytes
                    themselves differing outside the clocks this script nudged;
  precision probe   a log whose metric values are all printed short (at most 7 significant
                    digits) compared with itself must not be called bitwise (the `precision`
                    field of --json; not judged while --json has none);

and right/total, false IDENTICALs and byte-rule misses per variant and overall. The clock rule
here is its own, not tuimon's. Prints; never asserts. The real logs: bench/corpus/SOURCES,
gathered with bench/corpus/gather.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("itself", "changed", "clocks", "cut", "same")
OK, DIV, INC = ("IDENTICAL", 0), ("DIVERGED", 1), ("INCOMPLETE", 3)
EXPECT = {"itself": OK, "changed": DIV, "clocks": OK, "cut": INC, "same": (None, 2)}
SKIP = re.compile(r"(?i)^(index\..*|readme.*|results.*\.txt)$|^\.")
NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\d+\.?)(?:[eE][-+]?\d+)?(?![\w%/:]|\.\d)")
ANYNUM = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
KEY = re.compile(r"([A-Za-z_][\w/.\-]*(?:\([A-Za-z]*\))?)\s*(?:[:=|]\s*)?\s*$")
DATES = re.compile(
    r"\d{4}[-/]\d\d[-/]\d\d(?:[ T_]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?"
    r"|\b\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d+)?\b"
)
UNITS = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\s?(?:(?:ms|us|s|sec|secs|seconds|"
    r"mins?|h|hrs)(?:\s?/\s?(?:it|step|iter|batch|epoch|img))?|it/s|s/it|"
    r"(?:samples|tokens|tok|img|images|ex|steps)/s(?:ec)?)(?![\w/])"
)
STEPWORD = re.compile(
    r"(?i)(?<![a-z])(?:global_step|step|steps|iter|iters|iteration|epoch|it|"
    r"update|updates|num_updates|timesteps)(?![a-z])[\s:=|\[(]*\d"
)
CONFIG = re.compile(r"\b(Namespace|dict|dict_items|OrderedDict)\(|\w+=[^,\s]+,\s*\w+=")
CLOCK_LEAF = re.compile(
    r"^(?:t|time|times|eta|elapsed|wall|walltime|wall_time|data|timestamp|runtime|duration|"
    r"fps|t_start|start_time|end_time|sec|secs|seconds|wps|ups|speed|mfu|time_elapsed|time_total_s|time_this_iter_s|time_since_restore|train_wall)$"
)
CLOCK_PART = re.compile(
    r"(?i)(^|[_\s])(time|timestamp|runtime|eta|elapsed|duration)([_\s]|$)|_per_sec|"
    r"per_second|^ms_per|^sec_per|/s$|_ms$|_sec$|_secs$|_seconds$|_s$|fps"
)
COUNTER = re.compile(
    r"(?i)(^|[_\-\s])(global_step|steps?|iters?|iterations?|epochs?|timesteps|episodes|samples|"
    r"interacts|batch(es)?|it|updates?|num_updates|round|index|idx|rank|seed)$"
)


def is_clock(key: str) -> bool:
    """A clock or rate by its leaf name (never a counter)."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)
    leaf = re.split(r"[/.]", key.strip().lower())[-1].strip("_") or key.lower()
    if COUNTER.search(leaf) and not leaf.endswith(("_time", "_s", "per_second")):
        return False
    return bool(CLOCK_LEAF.match(leaf)) or bool(CLOCK_PART.search(leaf))


def is_counter(key: str) -> bool:
    """A step, epoch, iteration or other counter, by name."""
    return bool(COUNTER.search(re.split(r"[/.]", key.strip().lower())[-1])) and not is_clock(key)


def nums(text: str) -> set[float]:
    """Every number written in the text."""
    return {float(m.group()) for m in ANYNUM.finditer(text)}


def change(tok: str) -> str:
    """The number with one digit changed so that its value changes (last digits first)."""
    mant = re.split(r"[eE]", tok)[0]
    for i in range(len(mant) - 1, -1, -1):
        new = bump(tok, i + 1)
        if mant[i].isdigit() and float(new.rstrip(".")) != float(tok.rstrip(".")):
            return new
    return bump(tok, len(mant))


def bump(s: str, end: int) -> str:
    """Change the last digit at or before `end` (exclusive) by one."""
    i = max(j for j in range(end) if s[j].isdigit())
    return s[:i] + (str(int(s[i]) + 1) if s[i] != "9" else "8") + s[i + 1 :]


# -- reading a file into keyed numbers -------------------------------------------------------
def json_leaves(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Numeric leaves of a JSON value, in document order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_leaves(v, (*path, i))
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield path, obj


JSTOK = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')


def json_spans(text: str) -> list[tuple[int, int, str, set[float]]] | None:
    """(start, end, key, steps of its record) for each number of a JSON text, or None."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    toks = [m.span(1) for m in JSTOK.finditer(text) if m.group(1)]
    leaves = list(json_leaves(obj))
    if len(toks) != len(leaves) or not isinstance(obj, dict | list):
        return None
    out = []
    for (a, b), (path, _) in zip(toks, leaves, strict=True):
        keys = [p for p in path if isinstance(p, str)]
        key, steps = (keys[-1] if keys else ""), set()
        parent = obj
        for p in path[:-1]:
            parent = parent[p]
        if key == "values" and len(keys) >= 2:  # sacred: {"m": {"steps": [], "values": []}}
            grand = obj
            for p in path[:-2]:
                grand = grand[p]
            key = keys[-2]
            if isinstance(grand.get("steps"), list) and path[-1] < len(grand["steps"]):
                steps = {float(grand["steps"][path[-1]])}
        elif isinstance(parent, dict):
            steps = {
                float(v)
                for k, v in parent.items()
                if is_counter(k) and isinstance(v, int | float) and not isinstance(v, bool)
            }
            idx = [p for p in path[:-1] if isinstance(p, int)]
            if not steps and idx:
                steps = {float(idx[-1]), float(idx[-1] + 1)}
        out.append((a, b, key, steps))
    return out


def split_cells(line: str, d: str) -> list[tuple[int, int]]:
    """Spans of the cells of a table line (stripped; empty cells kept, except for spaces)."""
    if d == " ":
        return [m.span() for m in re.finditer(r"\S+", line)]
    spans, pos = [], 0
    for cell in line.split(d):
        lead = len(cell) - len(cell.lstrip())
        spans.append((pos + lead, pos + len(cell.rstrip()) if cell.strip() else pos + lead))
        pos += len(cell) + 1
    return spans


def doc_spans(text: str, lines: list[str]) -> dict[int, list] | None:
    """keyed() for a whole JSON document spread over lines."""
    if not text.lstrip().startswith(("{", "[")) or len(lines) < 2:
        return None
    spans = json_spans(text)
    if spans is None:
        return None
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    out: dict[int, list] = {}
    i = 0
    for a, b, key, steps in spans:
        while i + 1 < len(starts) and starts[i + 1] <= a:
            i += 1
        out.setdefault(i, []).append((a - starts[i], b - starts[i], key, steps))
    return out


def keyed(lines: list[str]) -> dict[int, list[tuple[int, int, str, set[float]]]]:
    """Per line: (start, end, key, steps) of each number with its key: table columns, JSON keys
    or the word before it. Steps are the row's counter values (tables, JSON records)."""
    doc = doc_spans("\n".join(lines), lines)
    if doc is not None:
        return doc
    out: dict[int, list[tuple[int, int, str, set[float]]]] = {}
    header: list[str] = []
    delim, rows = ",", 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(("{", "[")) and (spans := json_spans(line)) is not None:
            idx = {float(rows), float(rows + 1)}  # no step key: the record's index is the step
            out[i], rows = [(a, b, k, st or idx) for a, b, k, st in spans], rows + 1
            continue
        cells = split_cells(line, delim)
        if header and len(cells) == len(header) and any(NUM.fullmatch(line[a:b]) for a, b in cells):
            row = [(a, b, h) for (a, b), h in zip(cells, header, strict=True)]
            row = [(a, b, h) for a, b, h in row if NUM.fullmatch(line[a:b])]
            steps = {float(line[a:b]) for a, b, h in row if is_counter(h)}
            ints = {float(line[a:b]) for a, b, h in row if re.fullmatch(r"\d+", line[a:b])}
            steps = steps or {float(rows), float(rows + 1)} | ints  # the row index, or by content
            out[i], rows = [(a, b, h, steps) for a, b, h in row], rows + 1
            continue
        header, rows = [], 0
        for d in (",", "\t", " "):
            names = [line[a:b] for a, b in split_cells(line, d)]
            nxt = next((x for x in lines[i + 1 : i + 3] if x.strip()), "")
            vals = [nxt[a:b] for a, b in split_cells(nxt, d)]
            if (
                len(names) >= 2
                and not s.startswith("#")
                and not any(NUM.fullmatch(c) for c in names)
                and len(vals) == len(names)
                and sum(bool(NUM.fullmatch(c)) for c in vals) * 2 >= len([c for c in vals if c])
            ):
                header, delim = names, d
                break
        if header:
            continue
        masked = DATES.sub(lambda m: "#" * len(m.group()), line)
        found = []
        for m in NUM.finditer(masked):
            before = masked[: m.start()]
            if re.search(r"[\[/]\s*$", before) or re.search(r"\d\s*\(\s*$", before):
                continue
            k = KEY.search(before[-60:])
            found.append((m.start(), m.end(), k.group(1) if k else "", set()))
        out[i] = found
    return out


def choose(lines: list[str], table: dict) -> tuple[int, tuple] | None:
    """A metric value on a record line (a step named, or a row), in the middle third if any."""
    n = len(lines)
    mid = [i for i in range(n // 3, max(2 * n // 3, n // 3 + 1)) if i in table]
    mid.sort(key=lambda i: abs(i - n // 2))
    rest = sorted(set(table) - set(mid), key=lambda i: abs(i - n // 2))
    for tier in range(4):
        for where in (mid, rest):
            for i in where:
                line, spans = lines[i], table[i]
                cands = [c for c in spans if c[2] and not is_clock(c[2]) and not is_counter(c[2])]
                record = not CONFIG.search(line) and (
                    any(c[3] for c in spans)
                    or STEPWORD.search(line)
                    or (line.lstrip().startswith("|") and STEPWORD.search(step_line(lines, i)))
                )
                if cands and [record and len(cands) > 1, record, len(cands) > 1, 1][tier]:
                    pref = [c for c in cands if "loss" in c[2].lower()] or cands
                    return i, next((c for c in pref if "." in line[c[0] : c[1]]), pref[0])
    return None


def step_line(lines: list[str], i: int) -> str:
    """The nearest line naming a step: in a `| key | value |` block, that block; else before."""
    if lines[i].lstrip().startswith("|"):
        lo = max((j for j in range(i) if lines[j].startswith("---")), default=0)
        hi = min(
            (j for j in range(i, len(lines)) if lines[j].startswith("---")), default=len(lines)
        )
        block = [x for x in lines[lo:hi] if STEPWORD.search(x)]
        if block and hi - lo < 80:
            return " ".join(block)
    return next((lines[j] for j in range(i - 1, -1, -1) if STEPWORD.search(lines[j])), "")


# -- the variants on text ----------------------------------------------------------------------
def text_changed(text: str) -> tuple[str, dict] | None:
    lines = text.split("\n")
    table = keyed(lines)
    pick = choose(lines, table)
    if pick is None:
        return None
    i, (a, b, key, steps) = pick
    line = lines[i]
    lines[i] = line[:a] + change(line[a:b]) + line[b:]
    ok = steps or (nums(line) | nums(step_line(lines, i)))
    return "\n".join(lines), {
        "line": i + 1,
        "key": key,
        "value": line[a:b],
        "steps": ok,
        "text": line.strip()[:160],
    }


def text_clocks(text: str) -> tuple[str, int]:
    lines = text.split("\n")
    table = keyed(lines)
    count = 0
    for i, line in enumerate(lines):
        ends = {m.end() for rx in (DATES, UNITS) for m in rx.finditer(line)}
        ends |= {m.end() for m in re.finditer(r"\d\d:\d\d(?=<|\]|,)", line)}
        ends |= {b for a, b, k, _ in table.get(i, []) if k and is_clock(k)}
        for e in sorted(ends, reverse=True):
            line = bump(line, e)
        count += len(ends)
        lines[i] = line
    return "\n".join(lines), count


def cut_point(data: bytes) -> int:
    """About 60% in, inside a line of at least 4 bytes."""
    p = int(len(data) * 0.6)
    while p < len(data) - 2:
        a, b = data.rfind(b"\n", 0, p) + 1, data.find(b"\n", p)
        b = len(data) if b < 0 else b
        if b - a >= 4:
            return a + (b - a) // 2
        p = b + 1
    return max(1, len(data) // 2)


# -- TensorBoard events ------------------------------------------------------------------------
CRC = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    CRC.append(_c)


def masked_crc(data: bytes) -> bytes:
    c = 0xFFFFFFFF
    for x in data:
        c = CRC[(c ^ x) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return struct.pack("<I", (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def fields(buf: bytes, base: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(field, wire type, start, end) of each protobuf field's payload."""
    i = 0
    while i < len(buf):
        tag, i = varint(buf, i)
        f, w = tag >> 3, tag & 7
        if w == 0:
            _, j = varint(buf, i)
        elif w == 1:
            j = i + 8
        elif w == 5:
            j = i + 4
        elif w == 2:
            n, i = varint(buf, i)
            j = i + n
        else:
            return
        yield f, w, base + i, base + j
        i = j


def varint(buf: bytes, i: int) -> tuple[int, int]:
    v = s = 0
    while True:
        b = buf[i]
        v |= (b & 0x7F) << s
        i, s = i + 1, s + 7
        if b < 0x80:
            return v, i


def tb_records(data: bytes) -> Iterator[tuple[int, int]]:
    i = 0
    while i + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        yield i + 12, i + 12 + n
        i += 16 + n


def tb_values(data: bytes, a: int, b: int) -> tuple[int, int | None, list[tuple[str, int, int]]]:
    """step, wall_time offset and (tag, offset, size) of each float value of one event."""
    step, wall, vals = 0, None, []
    for f, w, s, e in fields(data[a:b], a):
        if f == 1 and w == 1:
            wall = s
        elif f == 2 and w == 0:
            step = varint(data, s)[0]
        elif f == 5 and w == 2:
            for _, _, vs, ve in fields(data[s:e], s):
                tag, off = "", None
                for vf, vw, xs, xe in fields(data[vs:ve], vs):
                    if vf == 1:
                        tag = data[xs:xe].decode(errors="replace")
                    elif vf == 2 and vw == 5:
                        off = (xs, 4)
                    elif vf == 8 and vw == 2:
                        for tf, _, ts, te in fields(data[xs:xe], xs):
                            if tf in (4, 5, 6) and te - ts in (4, 8):
                                off = (ts, te - ts)
                if off:
                    vals.append((tag, *off))
    return step, wall, vals


def tb_edit(path: Path, variant: str) -> dict:
    data = bytearray(path.read_bytes())
    recs = list(tb_records(bytes(data)))
    info: dict = {"clocks": 0}
    touched = []
    for k, (a, b) in enumerate(recs):
        step, wall, vals = tb_values(bytes(data), a, b)
        if variant == "clocks" and wall is not None:
            (t,) = struct.unpack_from("<d", data, wall)
            struct.pack_into("<d", data, wall, t + 0.001)
            info["clocks"] += 1
            touched.append((a, b))
        good = [v for v in vals if not is_clock(v[0]) and not is_counter(v[0])]
        if variant == "changed" and good and k >= len(recs) // 3 and "steps" not in info:
            tag, off, _ = good[0]
            data[off] ^= 1  # the lowest mantissa bit
            info.update(steps={float(step)}, key=tag, line=None, text=f"record {k}, step {step}")
            touched.append((a, b))
    for a, b in touched:
        data[b : b + 4] = masked_crc(bytes(data[a:b]))
    path.write_bytes(bytes(data))
    return info


# -- logs and variants -------------------------------------------------------------------------
def discover(root: Path) -> list[Path]:
    """Every log under root: files, and folders that are one log (events, an MLflow run)."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for p in sorted(root.iterdir()):
        if SKIP.match(p.name):
            continue
        if p.is_dir():
            one = (p / "metrics").is_dir() or any(
                x.name.startswith("events.out.tfevents") for x in p.iterdir()
            )
            found.extend([p] if one else discover(p))
        elif p.is_file():
            found.append(p)
    return found


def main_file(log: Path) -> Path:
    """The file a variant edits: the log, or the largest events/metrics file of a folder."""
    if log.is_file():
        return log
    files = [p for p in log.rglob("*") if p.is_file()]
    pref = [p for p in files if "tfevents" in p.name or p.parent.name == "metrics"]
    return max(pref or files, key=lambda p: p.stat().st_size)


def mlflow_edit(run: Path, variant: str) -> dict:
    info: dict = {"clocks": 0}
    metrics = sorted((run / "metrics").rglob("*"), key=lambda p: -p.stat().st_size)
    for m in [p for p in metrics if p.is_file()]:
        name = m.relative_to(run / "metrics").as_posix()
        rows = m.read_text().split("\n")
        if variant == "clocks":
            for i, r in enumerate(rows):
                parts = r.split(" ")
                if len(parts) >= 3:
                    parts[0] = bump(parts[0], len(parts[0]))
                    if is_clock(name):
                        parts[1] = bump(parts[1], len(parts[1]))
                    rows[i] = " ".join(parts)
                    info["clocks"] += 1
        elif variant == "changed" and "steps" not in info and not is_clock(name):
            i = len(rows) // 2 if len(rows) > 2 else 0
            parts = rows[i].split(" ")
            if len(parts) >= 3:
                info.update(steps={float(parts[2])}, key=name, line=i + 1, text=rows[i])
                parts[1] = bump(parts[1], len(parts[1].split("e")[0].split("E")[0]))
                rows[i] = " ".join(parts)
        m.write_text("\n".join(rows))
    meta = run / "meta.yaml"
    if variant == "clocks" and meta.is_file():
        text = re.sub(
            r"(?m)^(\s*(?:start|end)_time: )(\d+)",
            lambda g: g.group(1) + bump(g.group(2), len(g.group(2))),
            meta.read_text(),
        )
        meta.write_text(text)
    return info


def make(log: Path, variant: str, tmp: Path) -> tuple[Path, dict]:
    """Write the variant's copy of log under tmp; return its path and what was done."""
    dst = tmp / log.name
    if log.is_dir():
        shutil.copytree(log, dst)
    else:
        shutil.copy2(log, dst)
    target = main_file(dst)
    info: dict = {}
    if variant == "cut":
        data = target.read_bytes()
        p = cut_point(data) if b"\x00" not in data[:4096] else int(len(data) * 0.6)
        target.write_bytes(data[:p])
        info["text"] = f"{target.name} cut at byte {p} of {len(data)}"
    elif variant in ("changed", "clocks"):
        if (dst / "metrics").is_dir():
            info = mlflow_edit(dst, variant)
        elif "tfevents" in target.name:
            info = tb_edit(target, variant)
        else:
            text = target.read_bytes().decode("utf-8", "surrogateescape")
            if variant == "clocks":
                text, n = text_clocks(text)
                info["clocks"] = n
            else:
                done = text_changed(text)
                if done is None:
                    info["error"] = "no metric value found to change"
                else:
                    text, info = done
            target.write_bytes(text.encode("utf-8", "surrogateescape"))
    return dst, info


def numbers_in(obj: Any, skip: tuple[str, ...] = ()) -> list[float]:
    """Every number in a JSON value (strings included), leaving out keys containing skip."""
    if isinstance(obj, dict):
        return [
            x for k, v in obj.items() if not any(s in k for s in skip) for x in numbers_in(v, skip)
        ]
    if isinstance(obj, list):
        return [x for v in obj for x in numbers_in(v, skip)]
    if isinstance(obj, bool) or obj is None:
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    return [float(x) for x in ANYNUM.findall(str(obj))]


def located(report: dict, info: dict) -> tuple[bool, str]:
    """Whether the first divergence tuimon reports is the record that was changed."""
    firsts = {
        k: v
        for k, v in report.items()
        if k.startswith("first_diverg") and not any(s in k for s in ("metric", "tensor"))
    }
    text_first = (report.get("text") or {}).get("first")
    lines = lines_in(firsts) + lines_in(text_first)
    levels = [v for k, v in firsts.items() if isinstance(v, dict) and "line" not in k]
    steps = numbers_in(levels) if levels else numbers_in(firsts, ("line",))
    if not steps and text_first:
        steps = numbers_in(text_first, ("line", "lines", "text", "a", "b"))
    got = f"step {steps or None}, lines {lines or None}"
    if info.get("line") and info["line"] in lines:
        return True, got
    return bool(steps) and all(s in info.get("steps", set()) for s in steps), got


def lines_in(obj: Any) -> list[float]:
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in (numbers_in(v) if "line" in k else lines_in(v))]
    if isinstance(obj, list):
        return [x for v in obj for x in lines_in(v)]
    return []


def field(report: dict, name: str) -> Any:
    """A field of tuimon's --json summary (at its top level, or under `summary`)."""
    if name in report:
        return report[name]
    inner = report.get("summary")
    return inner.get(name) if isinstance(inner, dict) else None


def byte_rule_miss(report: dict, outside: bool) -> tuple[bool, str]:
    """Whether an IDENTICAL/CLOSE answer left bytes that differ unnamed, and how it was told.

    With tuimon's `bytes` field (the byte rule): a difference no rule explained, a line on one
    side only, or differing lines with nothing set aside. Without it (or where the rule was
    not applied): the two files' bytes differ outside the clocks this script itself nudged
    (`outside`)."""
    br = field(report, "bytes")
    if isinstance(br, dict) and br.get("applied", True):
        missed = bool(
            br.get("first")
            or br.get("first_only")
            or br.get("only_a")
            or br.get("only_b")
            or (br.get("differ") and not br.get("set_aside"))
        )
        return missed, "byte_rule"
    return outside, "bytes" if br is None else "bytes (byte_rule not applied)"


def short_values(log: Path) -> bool | None:
    """Whether a text log's metric values are all printed short (at most 7 significant digits,
    so none round-trips a float64): None when it holds fewer than 3 such values or is binary."""
    target = main_file(log)
    data = target.read_bytes()[: 4 << 20]
    if b"\x00" in data[:4096] or "tfevents" in target.name:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    digits = []
    for i, spans in keyed(lines).items():
        for a, b, key, _ in spans:
            tok = lines[i][a:b]
            if key and "." in tok and not is_clock(key) and not is_counter(key):
                mant = re.split(r"[eE]", tok.lstrip("+-"))[0].replace(".", "").lstrip("0")
                digits.append(len(mant))
    if len(digits) < 3:
        return None
    return max(digits) <= 7


def precision_probe(report: dict, log: Path) -> str:
    """`a log printed to 4 decimals against a copy of itself is not bitwise`: ok, MISS, or n/a."""
    rounded = short_values(log)
    prec = field(report, "precision")
    kind = prec.get("kind") if isinstance(prec, dict) else prec
    if not prec:  # absent, or an empty placeholder
        return "n/a (no precision field)" if rounded else "n/a"
    if rounded is None:
        return "n/a"
    said_bitwise = isinstance(kind, str) and kind.startswith("bitwise")
    return "MISS" if rounded and said_bitwise else "ok"


def tuimon(a: Path, b: Path, *extra: str) -> tuple[str, str, int | None]:
    cmd = [sys.executable, "-m", "tuimon", "compare", str(a), str(b), *extra]
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "", "timeout after 120 s", None
    return p.stdout, p.stdout + p.stderr, p.returncode


def run_case(log: Path, variant: str) -> dict:
    """One comparison: build the variant, run tuimon, judge the answer."""
    want, want_rc = EXPECT[variant]
    res: dict = {"log": str(log), "variant": variant, "expected": f"{want or ''} exit {want_rc}"}
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        info: dict = {}
        b = log
        if variant != "same":
            b, info = make(log, variant, Path(tmp))
        stdout, out, rc = tuimon(log, b, "--json")
        try:
            report = json.loads(stdout) if rc is not None else {}
        except ValueError:
            report = {}
        report = report if isinstance(report, dict) else {}
        verdict = report.get("verdict")
        # The copy's bytes differ from the log's outside the clocks this script nudged: every
        # variant but `clocks` (which changes clocks only) and `same`, when it changed anything.
        outside = variant in ("changed", "cut") and "error" not in info
        false_identical = verdict == "IDENTICAL" and want in ("DIVERGED", "INCOMPLETE") and outside
        said = ""
        if false_identical:  # what a person is told, not only the JSON
            said = "\n".join(tuimon(log, b)[1].strip().splitlines()[:4])[:600]
        missed, how = (False, "")
        if verdict in ("IDENTICAL", "CLOSE") and variant != "same":
            missed, how = byte_rule_miss(report, outside)
        probe = precision_probe(report, log) if variant == "itself" and verdict else ""
    ok = rc == want_rc and (want is None or verdict == want)
    res.update(
        rc=rc,
        verdict=verdict,
        got=f"{verdict or ''} exit {rc}",
        note="(no clocks)" if variant == "clocks" and not info.get("clocks") else "",
        false_identical=false_identical,
        said=said,
        byte_rule_miss=missed,
        byte_rule_by=how,
        precision=probe,
        precision_said=field(report, "precision"),
    )
    if variant == "changed":
        res["changed"] = {k: (sorted(v) if isinstance(v, set) else v) for k, v in info.items()}
        if "error" in info:
            ok, res["got"] = False, info["error"]
        elif ok:
            ok, where = located(report, info)
            res["got"] += f", {where}"
    res["ok"] = ok
    res["output"] = "\n".join(out.strip().splitlines()[:6])[:1500]
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--only", default="", help="logs whose path contains this")
    ap.add_argument("--variant", choices=VARIANTS, action="append")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="the results as JSON")
    args = ap.parse_args(argv)
    logs = [p for p in discover(args.dir.resolve()) if args.only in str(p)]
    variants = args.variant or list(VARIANTS)
    cases = [(log, v) for log in logs for v in variants]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: run_case(*c), cases))
    if args.json:
        print(json.dumps(results, indent=1, default=sorted))
        return 0
    base = args.dir.resolve()

    def show(p: str) -> str:
        return str(Path(p).relative_to(base)) if Path(p).is_relative_to(base) else p

    print(f"{len(logs)} logs in {args.dir}, {len(cases)} cases\n")
    for r in results:
        if r["ok"]:
            continue
        print(f"MISS {r['variant']:8} {show(r['log'])} {r['note']}")
        print(f"     expected {r['expected']}; got {r['got']}")
        ch = r.get("changed") or {}
        if ch.get("key") is not None:
            print(
                f"     changed {ch.get('key')!r} = {ch.get('value', '')} at line "
                f"{ch.get('line')} (steps {str(ch.get('steps'))[:80]}): {ch.get('text')}"
            )
        for line in r["output"].splitlines():
            print(f"       | {line[:300]}")
    quiet = sorted(show(r["log"]) for r in results if r["note"])
    if quiet:
        print(f"\n(no clocks) in {len(quiet)} logs: {', '.join(quiet)}")
    false_id = [r for r in results if r["false_identical"]]
    print(f"\nfalse IDENTICAL (expected DIVERGED or INCOMPLETE, got IDENTICAL): {len(false_id)}")
    for r in false_id:
        print(f"  {r['variant']:8} {show(r['log'])}  (expected {r['expected']})")
        for line in r["said"].splitlines():
            print(f"       | {line[:300]}")
    misses = [r for r in results if r["byte_rule_miss"]]
    by = sorted({r["byte_rule_by"] for r in misses}) or ["byte_rule / bytes"]
    print("\nbyte-rule misses (bytes differ, said {IDENTICAL, CLOSE}, not named as set aside;")
    print(f"  told by {', '.join(by)}): {len(misses)}")
    for r in misses:
        print(f"  {r['variant']:8} {show(r['log'])}: {r['got']}")
    probes = [r for r in results if r["precision"]]
    judged = [r for r in probes if r["precision"] in ("ok", "MISS")]
    unsaid = [r for r in probes if r["precision"] == "n/a (no precision field)"]
    print(
        f"\nprecision probe (a log printed rounded, against a copy of itself, is not called"
        f" bitwise): {sum(r['precision'] == 'ok' for r in judged)}/{len(judged)}"
        + (f"; {len(unsaid)} rounded logs not judged: no `precision` in --json" if unsaid else "")
    )
    for r in judged:
        if r["precision"] == "MISS":
            print(f"  MISS {show(r['log'])}: precision {r['precision_said']}")
    print()
    print(f"{'variant':8} {'right':>9} {'false IDENTICAL':>16} {'byte-rule misses':>17}")
    for v in variants:
        sub = [r for r in results if r["variant"] == v]
        print(
            f"{v:8} {sum(r['ok'] for r in sub):>4}/{len(sub):<4} "
            f"{sum(r['false_identical'] for r in sub):>16} "
            f"{sum(r['byte_rule_miss'] for r in sub):>17}"
        )
    print(
        f"{'total':8} {sum(r['ok'] for r in results):>4}/{len(results):<4} "
        f"{len(false_id):>16} {len(misses):>17}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
