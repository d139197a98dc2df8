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


#: The slowest test modules (measured with ``--durations``), longest first: ``make test`` runs them first
#: (``--dist loadscope --no-loadscope-reorder``), so that the two workers end together instead of one waiting for a
#: long module picked up last.
SLOW_FIRST = (
    "tests/test_browser.py",
    "tests/test_numba_peer.py",
    "tests/test_redteam_hub.py",
    "tests/test_rehearsal_notebooks.py",
    "tests/test_grader_round4.py",
    "tests/test_site.py",
    "tests/test_hub.py",
    "tests/test_export.py",
    "tests/test_redteam_auth.py",
    "tests/test_hub5.py",
    "tests/test_sim_timeouts.py",
    "tests/test_grader_shortcuts.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow modules first, in :data:`SLOW_FIRST`'s order; every other item keeps its place after them."""
    rank = {module: k for k, module in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(SLOW_FIRST)))
