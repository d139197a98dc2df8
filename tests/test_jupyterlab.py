"""`make lab` serves the course: start it the way `make lab` does (`labkit lab`), headless on a free port,
list the learner's work copies of the notebooks over JupyterLab's HTTP API, stop it."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_jupyterlab_lists_the_course(tmp_path: Path) -> None:
    port, token = _free_port(), "labkit-test-token"
    cmd = [sys.executable, "-m", "labkit.cli", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.token={token}", f"--ServerApp.runtime_dir={tmp_path}"]
    # its own process group: `labkit lab` starts `jupyter lab` as a child, and both must stop at the end
    env = dict(os.environ, LABKIT_WORK_DIR=str(tmp_path / "work"))  # the learner's copies, outside the repository
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        deadline, listing = time.monotonic() + 90, None
        while time.monotonic() < deadline and listing is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    listing = json.load(response)
            except OSError:
                assert server.poll() is None, "JupyterLab exited early"
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 90 s"
        names = {item["name"] for item in listing["content"]}
        assert "00-start-here.ipynb" in names and "solutions" in names
        assert (tmp_path / "work" / "00-start-here.ipynb").exists()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as page:
            assert page.status == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
