"""The second half of tests/test_browser.py's notebooks in JupyterLab and Chromium: the same test on a JupyterLab and
Chromium of this module's own (the module-scoped ``lab`` fixture), so that ``pytest -n 2 --dist loadscope`` (make test)
runs the two halves on both workers."""

from __future__ import annotations

import pytest

from test_browser import PATHS, Lab, lab, pytestmark, run_notebook_in_jupyterlab  # noqa: F401 (lab: the fixture, one per module)


@pytest.mark.parametrize("path", PATHS[1::2])
def test_notebook_in_jupyterlab(lab: Lab, path: str) -> None:  # noqa: F811
    """Open, Run All, check outputs, figures and widgets, drive every widget control; then close."""
    run_notebook_in_jupyterlab(lab, path)
