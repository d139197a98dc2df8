"""The labkit command: doctor (text and JSON), topo, bench, and clear errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

from labkit import cli, doctor


def _labkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit.cli", *args], capture_output=True, text=True, timeout=300)


def test_doctor_json_keys_and_sim_mode() -> None:
    proc = _labkit("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert tuple(data) == doctor.KEYS
    assert data["mode"] == "sim" and data["gpus"] == [] and data["nvlink"]["available"] is False
    assert data["ptx"]["ok"] is True and data["packages"]["numba-cuda"].startswith("0.30.")
    assert data["next_steps"]


def test_doctor_text() -> None:
    proc = _labkit("doctor")
    assert proc.returncode == 0 and "mode: sim" in proc.stdout and "PTX toolchain" in proc.stdout


def test_topo(capsys) -> None:
    assert cli.main(["topo"]) == 0
    assert "DGX-2" in capsys.readouterr().out
    assert cli.main(["topo", "DGX-2"]) == 0
    assert cli.main(["topo", "DGX-3000"]) == 2
    assert "did you mean" in capsys.readouterr().err.lower()


def test_bench_usage_and_unknown_suite(capsys) -> None:
    assert cli.main(["bench"]) == 0 and "bandwidth" in capsys.readouterr().out
    assert cli.main(["bench", "flops"]) == 2


def test_lab_command_needs_the_course(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "x.py"))
    assert cli.main(["lab"]) == 2
    assert "cannot find the course" in capsys.readouterr().err


def test_lab_passes_flags_through(capsys) -> None:
    """`labkit lab --version` reaches `jupyter lab --version`, which answers and exits."""
    assert cli.main(["lab", "--version"]) == 0
    assert "jupyter" in capsys.readouterr().out


def test_lab_lands_on_the_start_notebook_without_a_browser(tmp_path, monkeypatch) -> None:
    """Browser review 3, item 11: with --no-browser (or remote) the printed URL was /lab?token=..., the Launcher.
    `labkit lab` now makes the start notebook JupyterLab's default URL, so the printed URL and "/" open it."""
    seen: list[list[str]] = []
    monkeypatch.setenv("LABKIT_WORK_DIR", str(tmp_path / "work"))
    envs: list[dict] = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, cwd=None, env=None: seen.append(cmd) or envs.append(env) or 0)
    assert cli.main(["lab", "--no-browser", "--port", "8899"]) == 0
    cmd = seen[0]
    assert f"--LabApp.default_url={cli.START_URL}" in cmd and cli.START_URL == "/lab/tree/00-start-here.ipynb"
    assert cmd.index(f"--LabApp.default_url={cli.START_URL}") < cmd.index("--no-browser")  # the learner's flags win
    assert (tmp_path / "work" / "00-start-here.ipynb").exists()
    # and no "Jupyter news?" toast over it: labkit's JupyterLab defaults come first on JUPYTER_CONFIG_PATH
    first = Path(envs[0]["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0])
    overrides = json.loads((first / "labconfig" / "default_setting_overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


def test_lab_prints_the_start_notebook_url(tmp_path) -> None:
    """The real server: `labkit lab --no-browser` prints http://127.0.0.1:PORT/lab/tree/00-start-here.ipynb?token=...,
    and that URL answers. The server is stopped by its process group."""
    import os
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, HOME=str(tmp_path), LABKIT_WORK_DIR=str(tmp_path / "work"), JUPYTER_PLATFORM_DIRS="1")
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "labkit.cli", "lab", "--no-browser", "--port", str(port),
                                 "--ip", "127.0.0.1", "--IdentityProvider.token=t0k"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        url = None
        deadline = time.time() + 120
        while time.time() < deadline and url is None:
            time.sleep(0.2)  # the log is read five times a second: the URL is seen as soon as the server prints it
            for line in log.read_text().splitlines():
                if f"http://127.0.0.1:{port}/" in line:
                    url = line[line.index("http://"):].split()[0]
            assert proc.poll() is None, log.read_text()[-2000:]
        assert url is not None, log.read_text()[-2000:]
        assert url.startswith(f"http://127.0.0.1:{port}/lab/tree/00-start-here.ipynb"), url
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab/tree/00-start-here.ipynb?token=t0k", timeout=30) as r:
            assert r.status == 200
        api = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification?token=t0k"
        with urllib.request.urlopen(api, timeout=30) as r:  # the news question is off by labkit's default
            notification = json.loads(r.read())
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false", notification["schema"]["properties"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_doctor_never_cuts_a_word() -> None:
    """Browser review 3, item 12: long lines wrapped mid-word ("fo / und") in the notebook's output area. The report is
    folded at spaces to 80 columns (no terminal), with the same words in the same order."""
    data = doctor.report()
    data["next_steps"] = ["word " * 40 + "a-very-long-hyphenated-name-that-must-stay-whole"]
    flat = doctor.render(data)
    for width in (40, 80):
        folded = "\n".join(doctor._wrap(line, width) for line in flat.replace("\n    ", " ").splitlines())
        assert folded.split() == flat.split()
        for line in folded.splitlines():
            assert len(line) <= width or " " not in line.strip(), line
    assert "a-very-long-hyphenated-name-that-must-stay-whole" in flat.split()


def test_doctor_in_sim_mode_keeps_gpu_packages_apart() -> None:
    """Item 12 too: in sim mode CuPy is listed apart, as for gpu mode, and the header wheels are not listed."""
    data = doctor.report()
    text = doctor.render(data)
    if data["mode"] == "sim" and data["packages"].get("cupy-cuda12x"):
        packages = " ".join(text.split("packages:")[1].split("for gpu mode")[0].split())
        assert "cupy" not in packages and "for gpu mode (unused here): cupy-cuda12x" in " ".join(text.split())
    if data["ptx"]["ok"]:
        assert "CUDA headers: found" in text and "wheel nvidia-cuda-runtime" not in text


def test_make_lab_installs_no_dev_extras(tmp_path) -> None:
    """Browser review 3, item 13: `make lab` installed .[dev] (pytest, Playwright, JupyterHub, otter-grader, jupytext).
    Dry-run the target on an empty venv path: it installs the package alone."""
    import shutil
    from pathlib import Path

    make = shutil.which("make")
    if make is None:
        import pytest

        pytest.skip("no make on this machine")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([make, "-n", "lab", f"VENV={tmp_path / 'venv'}"], cwd=root, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in proc.stdout.splitlines() if "pip install" in line and "-e" in line]
    assert installs and all("[" not in line for line in installs), installs
    assert any(line.rstrip().endswith("-e .") for line in installs), installs
