"""Every process a run started ends with the run, also one that left its process group.

A run is started in a process group of its own, and ending the group ends what stays in it. A
descendant that calls ``setsid()`` (a daemon, a `nohup ... &` in a shell script, a server a test
starts) leaves the group, so three more holds keep it (Linux; they need ``/proc``):

- tuimon is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a descendant whose parent
  ends becomes tuimon's child instead of init's, so it stays in reach while tuimon lives;
- every run carries a tag in its environment (``TUIMON_RUN_ID``), which its descendants inherit:
  a scan of ``/proc/*/environ`` finds them wherever they went, also after tuimon was killed
  (the watchdog scans for the tag);
- the run's process tree is walked now and then (`Tree.walk`), so a descendant that also
  clears its environment is still known by pid and start time.

A run that ends (normally, stopped, or after a SIGKILL of tuimon through the watchdog) has all
of them ended: SIGTERM, SIGKILL after the grace. Nothing here imports textual or torch.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

RUN_ENV = "TUIMON_RUN_ID"
"""The environment variable that tags every process of one run."""
PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux; once): orphaned descendants of its runs
    become its children. False where that is not possible (macOS, no prctl)."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                prctl = ctypes.CDLL(None, use_errno=True).prctl
                _subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                pass
    return _subreaper


def new_tag() -> str:
    """A tag for one run (random: no two runs anywhere share one)."""
    return secrets.token_hex(8)


def start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22), or None when
    it is gone or a zombie. With the pid it names one process, also after pids are reused."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    return int(fields[19])


def tagged(tag: str) -> set[int]:
    """Every live process whose environment carries `tag` (this process excluded)."""
    needle = f"{RUN_ENV}={tag}".encode()
    found: set[int] = set()
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle + b"\0" in env or env.endswith(needle):
            found.add(int(entry.name))
    return found


def children(pid: int) -> set[int]:
    """The children of `pid` (every thread's), from /proc; empty where there is none."""
    out: set[int] = set()
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        raw = _read(f"{base}/{tid}/children")
        if raw:
            with contextlib.suppress(ValueError):
                out.update(map(int, raw.split()))
    return out


def _read(path: str) -> bytes | None:
    """A small /proc file's bytes, or None when it cannot be read (plain strings and one
    read: the runs' trees are walked twice a second each, so this is on a hot path)."""
    try:
        with open(path, "rb", buffering=0) as fh:
            return fh.read()
    except OSError:
        return None


_ours: set[int] = set()
"""Pids this process started on purpose (runs, watchdogs): not strays."""
_live = 0
"""Runs of this process under way."""
_spawning = 0
"""Starts under way: a child that exists but is not in `_ours` yet is not a stray."""
_generation = 0
"""Counts starts begun and ended, so a scan for strays that overlapped one is dropped."""


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around starting a process this process owns (then `spawned`): no scan for strays
    mistakes it for one meanwhile."""
    global _spawning, _generation
    _spawning += 1
    _generation += 1
    try:
        yield
    finally:
        _spawning -= 1
        _generation += 1


def spawned(*pids: int) -> None:
    """Note processes this process started itself (a run, its watchdog)."""
    _ours.update(pids)


def run_started() -> None:
    """A run of this process began (see `strays`)."""
    global _live
    _live += 1


def run_ended(*pids: int) -> bool:
    """A run of this process ended; True when it was the last one under way."""
    global _live
    _live = max(0, _live - 1)
    _ours.difference_update(pids)
    return _live == 0


_last_strays: tuple[float, int, dict[int, int]] = (-1e9, -1, {})
"""When `strays` last scanned, at which `_generation`, and what it found."""


def strays(max_age: float = 0.0) -> dict[int, int]:
    """Children of this process it did not start (`spawned`): descendants of its runs that
    came to it as their subreaper after their parent ended (pid -> start time).

    With `max_age`, a scan made less than that many seconds ago (no start since) is reused:
    the runs of one monitor walk their trees often, and one scan of this process's threads
    serves them all (a scan costs a read per thread of the monitor)."""
    global _last_strays
    before = _generation
    if _spawning:
        return {}
    at, generation, found = _last_strays
    now = time.monotonic()
    if max_age > 0 and generation == before and now - at < max_age:
        return dict(found)
    out = {}
    for pid in children(os.getpid()) - _ours:
        start = start_time(pid)
        if start is not None:
            out[pid] = start
    if _spawning or _generation != before:
        return {}
    _last_strays = (now, before, out)
    return dict(out)


class Tree:
    """What is known of one run's processes: its tag and each descendant seen (pid, start)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.seen: dict[int, int] = {}
        self.strays: dict[int, int] = {}
        """Orphans that came to this process while the run ran (whose, unknown: ended when
        the last run of this process ends)."""

    def walk(self, root: int, *, strays_age: float = 0.0) -> None:
        """Remember every process now below `root` (pid and start time); the strays of a
        scan at most `strays_age` seconds old (`strays`)."""
        todo, done = [root], set()
        while todo:
            pid = todo.pop()
            if pid in done:
                continue
            done.add(pid)
            for child in children(pid):
                start = start_time(child)
                if start is not None:
                    self.seen[child] = start
                    todo.append(child)
        self.strays.update(strays(strays_age))

    def alive(self, root: int | None = None, *, last: bool = False) -> set[int]:
        """The run's processes still there: tagged, seen (same start time), below `root`;
        with `last` (no other run of this process is under way) also the strays."""
        if root is not None:
            self.walk(root)
        pids = tagged(self.tag)
        known = {**self.seen, **(self.strays if last else {})}
        if last:
            known.update(strays())
        pids.update(p for p, start in known.items() if start_time(p) == start)
        pids.discard(os.getpid())
        return pids - _ours

    def end(self, grace: float, root: int | None = None, *, last: bool = False) -> set[int]:
        """End every process of the run still there: SIGTERM, SIGKILL after `grace` seconds
        (those that are left); `root` (the run's first process) is left to its owner. The
        pids signalled."""
        pids = self.alive(root, last=last) - ({root} if root is not None else set())
        if not pids:
            _reap(children(os.getpid()) - _ours)  # strays that ended: no zombie is left
            return pids
        _send(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (left := self._left(pids)):
            _reap(left)
            time.sleep(0.02)
        if left := self._left(pids):
            _send(left, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and self._left(pids):
                time.sleep(0.01)
        _reap(pids | (children(os.getpid()) - _ours))
        return pids

    def _left(self, pids: set[int]) -> set[int]:
        return {p for p in pids if start_time(p) is not None}

    def watchdog_lines(self) -> list[bytes]:
        """What the watchdog is told: each descendant seen, as `pid PID:START`."""
        told = {**self.seen, **self.strays}
        return [f"pid {p}:{s}\n".encode() for p, s in told.items()]


def _send(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap(pids: set[int]) -> None:
    """Collect the exit of each of `pids` that became this process's child (a subreaper's
    orphan) and has ended, so no zombie is left (never one this process started itself)."""
    for pid in pids - _ours:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
