"""Shared test settings: hypothesis runs the same examples on CI (CI=true) every time."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items: list) -> None:
    """Tests under tests/functional/ launch processes or train: marked so `-m` can pick a tier."""
    for item in items:
        if "functional" in item.path.parts:
            item.add_marker(pytest.mark.functional)


def pytest_runtest_teardown(item: object) -> None:
    """A pair view freezes what lives while it shows (`gc.freeze`); a test that ends with one
    open leaves nothing frozen for the next."""
    import gc

    gc.unfreeze()


def _lock() -> Path | None:
    """The file the workers of one pytest-xdist run share (None when the run has one process)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return Path(tempfile.gettempdir()) / f"tuimon-tests-{run}.lock" if run else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With `-n 2` (pytest-xdist), a test marked `alone` runs with no other test beside it: its
    threads must race each other, or its clock must not starve. It holds the workers' lock
    alone; every other test shares it."""
    path = _lock()
    if path is None:
        return (yield)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if item.get_closest_marker("alone") else fcntl.LOCK_SH)
        try:
            return (yield)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
