"""The ``wheel`` marker: tests that build coffre's wheel and run it installed (``pytest -m wheel``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "wheel: builds coffre's wheel and runs it from a fresh virtualenv (about 30 s)"
    )
