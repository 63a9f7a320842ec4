"""Command lines as word lists: options taken out (a run's recorded command, shown or rerun)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def without_options(
    words: Sequence[str], options: Iterable[str], flags: Iterable[str] = ()
) -> list[str]:
    """`words` without each of `options` and its value (`--opt V` or `--opt=V`) and without
    each of `flags` (options that take no value)."""
    options, flags = tuple(options), frozenset(flags)
    spelled = tuple(f"{o}=" for o in options)
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in options:
            skip = True
        elif word not in flags and not word.startswith(spelled):
            out.append(word)
    return out
