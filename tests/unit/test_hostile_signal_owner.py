"""tuimon's signal handlers are installed only by its entry point (issue 40): a process that
calls `main([...])` or runs a pair itself (pytest) keeps its own SIGINT, so Ctrl-C stops the
test run; `tuimon` / `python -m tuimon` (main() without arguments) own the signals and stop a
pair or a sweep with them (tests/functional/test_trust_signals.py sends them to such a
process)."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from tuimon import signal_owner
from tuimon.report.headless import _run_with_signals


class _Session:
    """Tells which SIGINT handler Python has while the pair runs."""

    def stop(self) -> None:
        raise AssertionError("never called")

    async def run(self) -> Any:
        handler = signal.getsignal(signal.SIGINT)  # the loop's own, when tuimon took SIGINT
        return getattr(handler, "__name__", None) == "_sighandler_noop"


def test_a_test_process_keeps_its_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    import tuimon.cli  # noqa: F401  (importing installs nothing)

    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(signal_owner, "_owned", False)
    assert asyncio.run(_run_with_signals(_Session())) is False  # type: ignore[arg-type]
    monkeypatch.setattr(signal_owner, "_owned", True)  # as the entry point makes it
    assert asyncio.run(_run_with_signals(_Session())) is True  # type: ignore[arg-type]
    assert signal.getsignal(signal.SIGINT) is before  # put back after the pair


def test_main_with_arguments_does_not_own_the_signals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuimon.cli import main

    monkeypatch.setattr(signal_owner, "_owned", False)
    assert main(["read", "/nonexistent/log.jsonl"]) == 2
    capsys.readouterr()
    assert not signal_owner.owned()
