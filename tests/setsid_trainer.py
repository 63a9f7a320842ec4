"""A training script whose child leaves the process group (setsid), closes its output and keeps
running: `--pidfile F` gets the grandchild's pid; `--clear-env` starts it with an empty
environment; `--ignore-term` makes it ignore SIGTERM; `--steps N --sleep S` paces the log."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

GRANDCHILD = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    "if sys.argv[1] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "pid = os.fork()\n"
    "if pid: os._exit(0)\n"  # a double fork: the grandchild's parent is gone at once
    "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
    "time.sleep(120)\n"
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--pidfile", required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--clear-env", action="store_true")
    p.add_argument("--ignore-term", action="store_true")
    a = p.parse_args()
    subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD, "1" if a.ignore_term else "0", a.pidfile],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={} if a.clear_env else None,
        close_fds=True,
    ).wait()
    while not os.path.exists(a.pidfile):
        time.sleep(0.01)
    time.sleep(1.2)  # long enough for the monitor to walk the tree once
    for step in range(a.steps):
        print(json.dumps({"type": "step", "step": step, "loss": 1.0 / (step + 1)}), flush=True)
        time.sleep(a.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
