"""Shared test settings: hypothesis runs the same examples on CI (CI=true) every time."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items: list) -> None:
    """Tests under tests/functional/ launch processes or train: marked so `-m` can pick a tier."""
    import pytest

    for item in items:
        if "functional" in item.path.parts:
            item.add_marker(pytest.mark.functional)


def pytest_runtest_teardown(item: object) -> None:
    """A pair view freezes what lives while it shows (`gc.freeze`); a test that ends with one
    open leaves nothing frozen for the next."""
    import gc

    gc.unfreeze()
