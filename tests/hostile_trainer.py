"""A training script whose every name and line is hostile: markup, ANSI, OSC 52, DCS, bidi.

Side b logs different digits from step 2 on, prints escape sequences on stderr and exits 1.
"""

from __future__ import annotations

import json
import sys

ESC = "\x1b"
OSC52 = f"{ESC}]52;c;ZWNobyBQV05FRAo={ESC}\\"
TITLE = f"{ESC}]0;pwned-title\x07"
DCS = f"{ESC}P1$qm{ESC}\\"
CLEAR = f"{ESC}[2J{ESC}[31m"
NAMES = ("[/]", "W_[red]E[/]", f"lr{OSC52}", f"acc{TITLE}", f"x{DCS}\u202e")
TENSORS = ["[/]", f"W_[bold]E{CLEAR}"]


def main() -> int:
    side = sys.argv[1] if len(sys.argv) > 1 else "a"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    emit = lambda obj: print(json.dumps(obj), flush=True)  # noqa: E731
    env = {"device": f"cpu{CLEAR}[red]", "note": f"[link=x]{OSC52}"}
    emit({"type": "header", "format": "tuimon.steplog/1", "run": {"seed": 0}, "env": env})
    for i in range(steps):
        metrics = {n: 1.0 / (i + 1) + (1e-9 * i if side == "b" and i >= 2 else 0) for n in NAMES}
        digest = {t: f"{i}{side if i >= 2 else ''}" for t in TENSORS}
        emit({"type": "step", "step": i, "metrics": metrics, "param_digests": digest})
        print(f"plain text [bold]line[/] {CLEAR}{TITLE}", flush=True)
    if side == "b":
        print(f"Traceback [/] {OSC52}{CLEAR}{DCS}", file=sys.stderr, flush=True)
        return 1
    emit({"type": "end", "status": "ok", "steps": steps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
