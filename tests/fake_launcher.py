#!/usr/bin/env python3
"""A stand-in for ssh / srun in tests: runs a command "elsewhere", forwards signals, may drop.

    fake_launcher.py [--drop-after S] -- COMMAND ARGS ...    like srun: argv as given
    ssh [-tt] HOST 'COMMAND STRING'                          like ssh (when called as `ssh`,
                                                             e.g. through a symlink): the words
                                                             are joined and run by `sh -c`

The command runs with a bare environment (PATH and HOME only), as on another machine, in a
process group of its own. SIGTERM, SIGINT and SIGHUP to the launcher go to that group (srun
forwards signals; ssh -tt hangs up the remote session). `--drop-after S` (or the env var
FAKE_LAUNCHER_DROP_AFTER) drops the "connection" after S seconds: the remote side is hung up
(SIGHUP) and the launcher exits 255, as ssh does when the connection is lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    drop_after = float(os.environ.get("FAKE_LAUNCHER_DROP_AFTER") or 0) or None
    if Path(sys.argv[0]).name == "ssh":
        while argv and argv[0].startswith("-"):  # options before the host (-tt, -o X=Y)
            argv = argv[2:] if argv[0] == "-o" else argv[1:]
        cmd = ["sh", "-c", " ".join(argv[1:])]  # argv[0] is the host
    else:
        if argv[:1] == ["--drop-after"]:
            drop_after, argv = float(argv[1]), argv[2:]
        if argv[:1] == ["--"]:
            argv = argv[1:]
        cmd = argv
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    child = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(sig: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    start = time.monotonic()
    while child.poll() is None:
        if drop_after is not None and time.monotonic() - start > drop_after:
            forward(signal.SIGHUP, None)
            child.wait()
            print("Connection to fake-host closed by remote host.", file=sys.stderr, flush=True)
            return 255
        time.sleep(0.02)
    code = child.returncode
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
