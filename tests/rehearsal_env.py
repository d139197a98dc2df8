"""The rehearsal of the first GPU run (issue 29): the H200 image's recorded package versions in ``.venv-rehearsal``
(Makefile; constraints-rehearsal.txt), with labkit and its pure-Python dependencies installed from the wheelhouse by
``tools/install_wheelhouse.sh`` exactly as ``tools/first_gpu_run.sh`` installs them. The tests/test_rehearsal_*.py
files run code in that Python, in child processes, with the environment the run exports (``exports.sh``) and ``src/``
first on ``PYTHONPATH``, as the run has it. No GPU: what needs a device stops at the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-rehearsal"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed"

needs_rehearsal = pytest.mark.skipif(not STAMP.exists(), reason="no rehearsal venv: `make .venv-rehearsal/.installed` "
                                     "(make test builds it)")

#: Variables of this test process that must not leak into the image's Python.
_DROP = ("VIRTUAL_ENV", "PYTHONPATH", "NUMBA_ENABLE_CUDASIM", "LABKIT_MODE", "LABKIT_EXPECT", "PYTEST_XDIST_WORKER",
         "PYTEST_CURRENT_TEST", "LD_LIBRARY_PATH")


def env(*, mpi: bool = True, **extra: str) -> dict[str, str]:
    """The run's environment: ``exports.sh`` (wheelhouse site on PYTHONPATH; with ``mpi`` MPICH on PATH and
    LD_LIBRARY_PATH), then ``src/`` first, as first_gpu_run.sh exports it."""
    base = {k: v for k, v in os.environ.items() if k not in _DROP}
    base["PATH"] = os.pathsep.join(p for p in base.get("PATH", "").split(os.pathsep) if ".venv/" not in p + "/")
    res = subprocess.run(["sh", "-c", f". '{VENV / 'exports.sh'}' && env -0"], env=base, capture_output=True, check=True)
    out = dict(item.split("=", 1) for item in res.stdout.decode().split("\0") if "=" in item)
    if not mpi:
        out["PATH"], out["LD_LIBRARY_PATH"] = base["PATH"], ""
    out["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{out['PYTHONPATH']}"
    out.update(PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **extra)
    return out


def run(code: str, *, timeout: float = 300, mpi: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in the rehearsal's Python (cwd: the repository root), from a file, so the functions it defines have
    a source (``ranks.call`` reads it)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "rehearsal_step.py"
        script.write_text(code)
        return subprocess.run([str(PY), str(script)], cwd=ROOT, env=env(mpi=mpi, **extra), capture_output=True,
                              text=True, timeout=timeout)


def run_json(code: str, **kw: Any) -> Any:
    """Run ``code``, which prints one JSON document as its last line; fail with its output if it did not."""
    res = run(code, **kw)
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        pytest.fail(f"rehearsal python exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return json.loads(lines[-1])


__all__ = ["PY", "ROOT", "STAMP", "VENV", "env", "needs_rehearsal", "run", "run_json", "sys"]
