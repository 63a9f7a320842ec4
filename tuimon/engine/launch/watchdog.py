"""A watchdog per run: if tuimon dies without a word (SIGKILL, a crash), the run's whole process
group ends within the grace, on any POSIX system, and on Linux so does every process that left
the group (`tuimon.engine.launch.descendants`).

Linux's parent-death signal (see `runner`) reaches only the run's first process, and macOS has
none. The watchdog is a `/bin/sh` in a session of its own that waits on a pipe only tuimon
holds: tuimon writes `pid PID:START` for each descendant it has seen, and `over` when the run is
over (the watchdog leaves quietly); end of file without it means tuimon is gone, so the
watchdog sends SIGTERM to the run's process group, to every process whose environment carries
the run's tag (`/proc/*/environ`) and to each descendant told (same start time: not a reused
pid), then SIGKILL after the grace. It costs one small shell process per run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

SCRIPT = """
g=$1 grace=$2 tag=$3 told=
while read -r word rest; do
  case $word in over) exit 0 ;; pid) told="$told $rest" ;; esac
done
kill -s TERM -- "-$g" 2>/dev/null
found=
for e in $(grep -laF "TUIMON_RUN_ID=$tag" /proc/[0-9]*/environ 2>/dev/null); do
  p=${e#/proc/}; found="$found ${p%/environ}"
done
for t in $told; do
  p=${t%%:*} want=${t#*:}
  s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
  s=${s##*") "}
  set -- $s
  [ "${20}" = "$want" ] && found="$found $p"
done
[ -n "$found" ] && kill -s TERM $found 2>/dev/null
sleep "$grace"
kill -s KILL -- "-$g" 2>/dev/null
[ -n "$found" ] && kill -s KILL $found 2>/dev/null
exit 0
"""
"""`read` fails at end of file without `over`: tuimon died; the run's group is ended (the POSIX
`kill -s SIG -- -PGID`, which dash and bash both take), and every process tagged or told."""


class Watchdog:
    """Ends the process group `pgid` if this process dies before `release`."""

    def __init__(self, pgid: int, grace: float, tag: str = "") -> None:
        read_end, self._write_end = os.pipe()  # non-inheritable: no run holds the write end
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    SCRIPT,
                    "tuimon-watchdog",
                    str(pgid),
                    f"{max(grace, 0.1):g}",
                    tag or "-",
                ],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's SIGHUP or Ctrl-C does not reach it
            )
        except OSError:  # no /bin/sh: the parent-death signal is all there is
            self.proc = None
        finally:
            os.close(read_end)

    def tell(self, lines: list[bytes]) -> None:
        """Tell the watchdog of descendants (`Tree.watchdog_lines`), for if tuimon dies."""
        if self._write_end < 0 or not lines:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_end, b"".join(lines))

    def release(self) -> None:
        """The run is over: the watchdog leaves without a signal."""
        if self._write_end < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_end, b"over\n")
        os.close(self._write_end)
        self._write_end = -1
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
