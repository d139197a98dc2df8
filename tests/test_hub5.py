"""The classroom of tests/test_hub.py on JupyterHub 5, the version the Zero to JupyterHub chart's hub image runs
(``.venv-hub5``: ``make test`` builds it from constraints-hub5.txt, next to the base .venv whose other packages it
reuses). A module of its own so that pytest-xdist can run it beside the JupyterHub 6 one. About 30 s."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_hub import CHP, run_classroom

ROOT = Path(__file__).resolve().parents[1]
HUB5 = ROOT / ".venv-hub5" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif((CHP is None or not HUB5.exists()) and not os.environ.get("CI"),
                       reason="needs configurable-http-proxy and .venv-hub5 (make test builds both)"),
]


def test_classroom_hub_on_jupyterhub_5(tmp_path: Path) -> None:
    assert HUB5.exists(), ".venv-hub5 is missing: make test builds it (constraints-hub5.txt)"
    version = run_classroom(tmp_path, str(HUB5))
    assert version.split(".")[0] == "5", version
