"""The course image's install script (deploy/install.sh), run here in a fresh virtual environment: no container
engine runs in CI, so the image itself is not built. About 10 s on an idle machine, most of it pip building labkit's
editable wheel in its isolated build environment (the test's environment is made without pip of its own: the
development environment's pip is seen through the .pth file, as everything else is).

What this proves: the script's real steps (venv, the pinned editable install of ``.[hub,cuda12]`` against
constraints.txt, its own checks) pass; and, because the fresh environment sees the development environment's
packages through a .pth file, pip installs nothing but labkit there only if every pinned requirement of the image
is already met at exactly the pinned version (a pin that disagrees would make pip install another version, and the
test fails). What it does not prove: that the base image's Debian packages install, that pip downloads every wheel
from the index, that CUDA runs in the container (the driver comes from the host), the non-root user's rights.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "install.sh"
DEV_BIN = Path(sys.executable).parent


def run_script(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_scripts_parse() -> None:
    for script in (SCRIPT, ROOT / "deploy" / "singleuser.sh"):
        assert os.access(script, os.X_OK), f"{script.name} is not executable"
        subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_install_script_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = {p.name for p in site.iterdir()}
    (site / "_labkit_dev_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{DEV_BIN}{os.pathsep}{env.get('PATH', '')}"  # jupyter's scripts: the dev env's
    env["PYTHON"] = sys.executable
    proc = run_script("--cuda", "12", "--venv", str(venv), "--source", str(ROOT), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "install.sh: done" in out and re.search(r"install.sh: CuPy 14\.\d+\.\d+", out), out
    assert f"from {ROOT / 'src' / 'labkit'}" in out  # editable: the package stays beside the notebooks
    assert (venv / "bin" / "labkit").exists()
    assert (venv / "etc" / "ipython" / "startup" / "00-labkit-progress.py").read_text() == (
        ROOT / "deploy" / "ipython" / "00-labkit-progress.py").read_text()
    added = {p.name for p in site.iterdir()} - before - {"_labkit_dev_env.pth"}
    others = {n for n in added if not re.match(r"(__editable__.*labkit|labkit-[\d.]+\.dist-info|__pycache__)", n)}
    assert not others, f"pip installed more than labkit, so a pin disagrees with the environment: {sorted(others)}"
    lab = subprocess.run([str(venv / "bin" / "labkit"), "mig-plan", "--learners", "7", "--json"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert lab.returncode == 0 and '"slices_per_gpu": 7' in lab.stdout


@pytest.mark.parametrize("args, message", [
    (("--cuda", "11"), "--cuda must be 12, 13 or none"),
    (("--source", "/"), "is not the course repository"),
    (("--bogus",), "unknown option"),
])
def test_bad_arguments_are_refused(args, message, tmp_path: Path) -> None:
    proc = run_script(*args, "--venv", str(tmp_path / "v"), timeout=30)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (tmp_path / "v").exists()


def test_containerfile_calls_the_script_and_runs_as_a_learner() -> None:
    text = (ROOT / "deploy" / "Containerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert any(ln.startswith("ARG CUDA=12") for ln in lines)
    run = next(ln for ln in lines if "install.sh" in ln)
    assert '--cuda "${CUDA}"' in run and "--source /opt/course" in run
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert "EXPOSE 8888" in lines
    assert re.search(r'^CMD \["labkit", "lab"', text, re.M)
    # the hub configurations start the image's single-user script
    assert "/opt/course/deploy/singleuser.sh" in (ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py").read_text()
    assert "/opt/course/deploy/singleuser.sh" in (ROOT / "deploy" / "k8s" / "values.yaml").read_text()
    ignore = (ROOT / "deploy" / "Containerfile.dockerignore").read_text().split()
    assert ".venv" in ignore


def test_singleuser_script_syncs_work_copies_then_starts_the_server(tmp_path: Path) -> None:
    """deploy/singleuser.sh with a stand-in ``jupyterhub-singleuser`` that prints what it was given.

    Under the classroom hub the work folder gets every learner notebook and none of the solved ones (self-paced
    ``labkit lab`` copies both: tests/test_workcopy.py)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "jupyterhub-singleuser"
    fake.write_text('#!/usr/bin/env bash\necho "SINGLEUSER $*"\n')
    fake.chmod(0o755)
    (fake_bin / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # the course's Python, as in the image
    (fake_bin / "python").chmod(0o755)
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABKIT_", "JUPYTERHUB_"))}
    env.update(PATH=f"{fake_bin}{os.pathsep}{env.get('PATH', '')}", LABKIT_COURSE=str(ROOT), LABKIT_WORK_DIR=str(work))
    proc = subprocess.run(["bash", str(ROOT / "deploy" / "singleuser.sh"), "--debug"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SINGLEUSER --ServerApp.root_dir={work} --debug" in proc.stdout
    learner = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    assert learner and sorted(p.name for p in work.glob("[0-9][0-9]-*.ipynb")) == learner
    assert not (work / "solutions").exists(), "a classroom work folder must not receive the solved notebooks"
    assert not [p for p in work.rglob("*.ipynb") if p.parent != work], "only the learner notebooks, at the top"
    assert "solutions/" not in (work / ".labkit-work.json").read_text() + proc.stdout
    assert f"copied {len(learner)} notebook(s) from the course: all labs\n" in proc.stdout  # and says so
