"""A pytest plugin that numba-cuda's own test suite expects from its repository's conftest.py (not shipped)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--dump-failed-filechecks", action="store_true", help="(numba-cuda's option; unused here)")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request: pytest.FixtureRequest) -> None:
    """The class fixture numba.cuda.testing.CUDATestCase asks for."""
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
