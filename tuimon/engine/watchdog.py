"""A watchdog per run: if tuimon dies without a word (SIGKILL, a crash), the run's whole process
group ends within the grace, on any POSIX system.

Linux's parent-death signal (see `runner`) reaches only the run's first process, and macOS has
none. The watchdog is a `/bin/sh` in a session of its own that waits on a pipe only tuimon
holds: tuimon writes a line when the run is over (the watchdog leaves quietly); end of file
without it means tuimon is gone, so the watchdog sends SIGTERM to the run's process group, then
SIGKILL after the grace. It costs one small shell process per run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

SCRIPT = (
    'if ! read -r word; then kill -s TERM -- "-$1" 2>/dev/null && sleep "$2" '
    '&& kill -s KILL -- "-$1" 2>/dev/null; fi; exit 0'
)
"""`read` fails at end of file without a line: tuimon died; the run's group is ended (the
POSIX `kill -s SIG -- -PGID`, which dash and bash both take)."""


class Watchdog:
    """Ends the process group `pgid` if this process dies before `release`."""

    def __init__(self, pgid: int, grace: float) -> None:
        read_end, self._write_end = os.pipe()  # non-inheritable: no run holds the write end
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["/bin/sh", "-c", SCRIPT, "tuimon-watchdog", str(pgid), f"{max(grace, 0.1):g}"],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's SIGHUP or Ctrl-C does not reach it
            )
        except OSError:  # no /bin/sh: the parent-death signal is all there is
            self.proc = None
        finally:
            os.close(read_end)

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
