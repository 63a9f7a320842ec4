"""A log line cut into tokens, each with the name it stands under: JSON lines by their keys'
paths, table rows by their header, printed lines by the word before a number. The byte rule
and the precision of a log read lines so (`byte_rule`, `precision`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tuimon.clocks import NUMBER

JSON_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|true|false|null|-?Infinity|NaN'
    r"|[{}\[\]:,]|\s+|.",
    re.S,
)
_WORD = re.compile(r"([A-Za-z_][\w./()\-]*)[\s:=|\[\"']*$")
_GROUPED = re.compile(r"(?<![\w.,:])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,]|\.\d)")
"""A number written with thousands separators (`105,477`): one number, not two."""


def json_tokens(line: str) -> list[tuple[str, str, str]]:
    """A JSON line's tokens with the dotted path of the value each belongs to: (path, text,
    kind) where kind is `key`, `string`, `number`, `punct` (punctuation and spaces)."""
    return [(path, tok, kind) for path, tok, kind, _ in json_tokens_at(line)]


def json_tokens_at(text: str) -> list[tuple[str, str, str, int]]:
    """`json_tokens` of a JSON text of any length (a document over many lines), each with
    the offset where it starts."""
    out: list[tuple[str, str, str, int]] = []
    stack: list[list[Any]] = []  # [kind, current key or index, expecting a key]
    for m in JSON_TOKEN.finditer(text):
        tok = m.group(0)
        at = m.start()
        c = tok[0]
        top = stack[-1] if stack else None
        path = ".".join(str(s[1]) for s in stack if s[1] is not None)
        if c in "{[":
            out.append((path, tok, "punct", at))
            stack.append(["o", None, True] if c == "{" else ["a", 0, False])
        elif c in "}]":
            out.append((path, tok, "punct", at))
            if stack:
                stack.pop()
        elif c == ",":
            out.append((path, tok, "punct", at))
            if top is not None:
                if top[0] == "a":
                    top[1] += 1
                else:
                    top[2] = True
        elif c == ":" or tok.isspace():
            out.append((path, tok, "punct", at))
        elif c == '"' and top is not None and top[0] == "o" and top[2]:
            top[1] = tok[1:-1]
            top[2] = False
            out.append((path, tok, "key", at))
        else:
            kind = "string" if c == '"' else "number"
            out.append((path, tok[1:-1] if c == '"' else tok, kind, at))
    return out


def record_type(tokens: Sequence[tuple[str, str, str]]) -> str | None:
    for i, (_path, text, kind) in enumerate(tokens):
        if kind == "key" and text == '"type"':
            for p, t, k in tokens[i + 1 : i + 4]:
                if k == "string" and p == "type":
                    return t
    return None


def leaf_key(path: str) -> str:
    parts = [p for p in path.split(".") if not p.isdigit()]
    return parts[-1] if parts else path


def ungroup(line: str) -> str:
    """A printed line with its thousands separators written as underscores (`105,477` ->
    `105_477`), so that a grouped number reads as one number (`tuimon.clocks.NUMBER`)."""
    return _GROUPED.sub(lambda m: m.group(0).replace(",", "_"), line) if "," in line else line


def text_tokens(line: str) -> list[tuple[str, bool]]:
    """A printed line cut into numbers (True) and the text between them (False)."""
    out: list[tuple[str, bool]] = []
    at = 0
    for m in NUMBER.finditer(line):
        start, end = m.span()
        if start > at:
            out.append((line[at:start], False))
        out.append((line[start:end], True))
        at = end
    if at < len(line):
        out.append((line[at:], False))
    return out


def name_before(tokens: list[tuple[str, bool]], i: int) -> str:
    """The name a printed number stands under: the word before it (`loss: 1.2` -> loss)."""
    if i == 0 or tokens[i - 1][1]:
        return ""
    m = _WORD.search(tokens[i - 1][0])
    return m.group(1) if m else ""


def table_header(text: str) -> tuple[str, list[str]] | None:
    """A table's header line: its separator and column names, when the line names columns
    (two or more cells, no word of them a number: `mAP_0.5` names, `loss 4.5` does not); a
    `#` before the names is not one."""
    text = text.lstrip("#").strip()
    for sep in (",", "\t", ";", "|"):
        if sep in text:
            names = split(text, sep)
            break
    else:
        sep, names = " ", text.split()
    if len(names) < 2 or any(NUMBER.fullmatch(w) for n in names for w in n.split()):
        return None
    if not all(n.strip() for n in names):
        return None
    return sep, [n.strip().strip('"') for n in names]


def split(line: str, sep: str) -> list[str]:
    line = line.strip()
    return line.split() if sep == " " else line.split(sep)


def row_cells(line: str, header: tuple[str, list[str]]) -> list[str] | None:
    """A table row's cells named by `header`, or None when the line is not such a row: as
    many cells as names, and (split by spaces, where a sentence splits too) mostly numbers."""
    sep, names = header
    cells = split(line, sep)
    if len(cells) != len(names):
        return None
    numbers = sum(1 for c in cells if NUMBER.fullmatch(c.strip()))
    if numbers == 0 or (sep == " " and numbers * 3 < len(cells) * 2):
        return None
    return cells
