"""Notebook tests: every notebook runs in sim mode; solutions must pass every check, learner notebooks
must report every exercise "not solved yet" (see labkit.check.core, LABKIT_EXPECT)."""

import os
from pathlib import Path

import pytest


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
