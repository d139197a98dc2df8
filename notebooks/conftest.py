"""Notebook tests: every notebook runs in sim mode; solutions must pass every check, learner notebooks
must report every exercise "not solved yet" (see labkit.check.core, LABKIT_EXPECT)."""

import os
import re
from pathlib import Path

import pytest

BROWSER_TEST = re.compile(r"tests/test_browser(_second_half)?\.py::test_notebook_in_jupyterlab\[")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        # Set before nbval starts the notebook's kernel, which inherits this environment.
        os.environ["LABKIT_MODE"] = "sim"
        os.environ["LABKIT_PROGRESS"] = "off"
        solution = path.parent.name == "solutions"
        os.environ["LABKIT_EXPECT"] = "solved" if solution else "unsolved"
        # Every kernel a solution's check accepts must compile to PTX for the course's three architectures.
        if solution:
            os.environ["LABKIT_PTX_AUDIT"] = "sm_70,sm_80,sm_90"
        else:
            os.environ.pop("LABKIT_PTX_AUDIT", None)
        os.environ.setdefault("PLOTLY_RENDERER", "json")
        os.environ.setdefault("LABKIT_MAX_RANKS", "4")  # MPI cells and checks: 4 processes at most on 2 cores (issue 21)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A notebook that ``tests/test_browser.py`` (or its second half) runs in JupyterLab in this session (Chromium installed) is not run
    again here: the browser test executes every cell too and asks the same of it (no error; in a solution notebook
    every check passes, with the PTX audit of every accepted kernel; in a learner notebook every exercise is "not
    solved yet"), and draws it. Without Chromium every notebook runs here."""
    browser = [i for i in items if BROWSER_TEST.match(i.nodeid)]
    if not browser or any(mark.args and mark.args[0] for mark in browser[0].iter_markers("skipif")):
        return
    in_browser = {re.search(r"\[(.*)\]$", i.nodeid).group(1) for i in browser}
    skip = pytest.mark.skip(reason="run in JupyterLab by tests/test_browser.py, which checks the same and draws it")
    for item in items:
        path = Path(str(item.fspath))
        name = f"solutions/{path.name}" if path.parent.name == "solutions" else path.name  # (the browser test's ids)
        if path.suffix == ".ipynb" and name in in_browser:
            item.add_marker(skip)
