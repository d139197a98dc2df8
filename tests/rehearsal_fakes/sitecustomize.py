"""The fakes in place of the device for the end-to-end rehearsal of tools/first_gpu_run.sh (tests/test_rehearsal_run.py).

On ``PYTHONPATH`` only there, and active only with ``LABKIT_REHEARSAL_FAKES=1``, in ``tools/gpu_check.py``'s process:
``labkit.setup`` answers "an H200" and each benchmark suite is labkit's own, run on the fakes of tests/gpu_fakes.py
with the figures of tests/gpu_producers.py (as the judge's fixtures are made); nbclient's ``execute`` returns at once
(the notebooks themselves run in tests/test_rehearsal_notebooks.py), so gpu_check's batching, its JSON after every
notebook and its saved notebooks run for real. With ``LABKIT_REHEARSAL_VM=1`` the bandwidth suite asks labkit's own
``pcie_link`` of an NVML that refuses the PCIe link, as a VM's may. Everything else (the wheelhouse install, versions, doctor, the
archives) is the run's own code on the image's packages."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _install() -> None:
    tests = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(tests))
    import nbclient
    import pytest

    import gpu_producers as P
    import labkit
    import labkit.kernels
    from labkit import bandwidth, cupylab, tensorcores

    labkit.mode.env()  # sim: the suites' own code runs in the simulator, their timings are the fakes'
    # LABKIT_REHEARSAL_VM=1: the GPU is passed through to a VM whose NVML refuses the PCIe link (gpu_fakes.VM_REFUSES)
    fig = P.Figures(vm=os.environ.get("LABKIT_REHEARSAL_VM") == "1")
    mp = pytest.MonkeyPatch()
    real = {"numba": labkit.kernels.benchmark_suite, "tensor": tensorcores.gpu_check, "cupy": cupylab.benchmarks,
            "bandwidth": bandwidth.gpu_check_suite}
    mp.setattr(labkit, "setup", lambda *a, **k: P._environment())
    mp.setattr(labkit.kernels, "benchmark_suite", lambda: P._numba_suite(fig, mp, real["numba"]))
    mp.setattr(tensorcores, "gpu_check", lambda: P._tensor_suite(fig, mp, real["tensor"]))
    mp.setattr(cupylab, "benchmarks", lambda: P._cupy_suite(fig, mp, real["cupy"]))
    mp.setattr(bandwidth, "gpu_check_suite", lambda: P._bandwidth_suite(fig, mp, real["bandwidth"]))
    mp.setattr(nbclient.NotebookClient, "execute", lambda self, **kw: self.nb)


if os.environ.get("LABKIT_REHEARSAL_FAKES") == "1" and sys.argv and sys.argv[0].endswith("gpu_check.py"):
    _install()
