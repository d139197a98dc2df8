"""Unit tests run in sim mode: no GPU here, and CI has none either."""

import os

os.environ["LABKIT_MODE"] = "sim"
os.environ.pop("LABKIT_EXPECT", None)
os.environ["LABKIT_PROGRESS"] = "off"  # the suite runs thousands of checks: keep them out of the progress file

import pytest  # noqa: E402

import labkit  # noqa: E402

labkit.setup(quiet=True)


@pytest.fixture(autouse=True)
def _no_expectation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests look at results themselves; LABKIT_EXPECT and LABKIT_PTX_AUDIT are for notebook runs (whose
    conftest sets them in this process's environment, which a later unit test on the same worker would see)."""
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    monkeypatch.delenv("LABKIT_PTX_AUDIT", raising=False)
