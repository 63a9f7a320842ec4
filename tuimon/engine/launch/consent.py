"""Command lines read from a saved file, shown before anything runs.

A pair directory or a sweep record is data: colleagues share them, bug reports attach them.
`explain` and `sweep --resume` re-run the command lines those files hold, so the commands (and
the settings that also reach the monitor's machine: the launcher, `shell`) are shown exactly
first, and run only after a yes (`tuimon.commands.options.confirm`, or the TUI's modal). This
module only words them; nothing here runs or asks.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


@dataclass(frozen=True)
class Planned:
    """One command line that would run, and how."""

    who: str
    """`run a`, `run b, seed 3` ..."""
    argv: tuple[str, ...]
    shell: bool = False
    """The command is one string run by `/bin/sh -c`."""
    launcher: tuple[str, ...] | None = None
    """The launcher prefix the command goes through (already part of `argv`), if any."""


def quote(arg: str) -> str:
    """`arg` as a POSIX shell word, exact and safe to print: printable text shell-quoted, and
    text with control or invisible characters as bash's `$'...'` with every one escaped."""
    if arg.isprintable():
        return shlex.quote(arg)
    out = []
    for ch in arg:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "$'" + "".join(out) + "'"


def command_line(planned: Planned) -> str:
    """The command as it would be typed: each argument quoted; `/bin/sh -c '...'` for a shell
    command (its one string is what the shell runs)."""
    if planned.shell:
        return f"/bin/sh -c {quote(planned.argv[0])}"
    return " ".join(quote(a) for a in planned.argv)


def show(planned: Sequence[Planned]) -> list[str]:
    """Lines that show each command exactly (one per command, a note per launcher)."""
    lines = []
    for p in planned:
        how = " (through the shell)" if p.shell else ""
        lines.append(f"  {p.who}{how}: {command_line(p)}")
        if p.launcher:
            lines.append(f"    launcher: {' '.join(quote(a) for a in p.launcher)}")
    return lines
