"""Issue 29's smaller items, each on labkit's own code with the suite's fakes (no GPU): W5 (the default host sweep
is shortened, not refused, when the host's memory starts small), C4 (each sweep says how it copies), C2 (doctor finds
NVVM where Numba does: cuda-pathfinder), the wheelhouse's MPICH folder (B3) and its install script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
import pytest

from gpu_fakes import install_bandwidth_fake
from labkit import bandwidth as bw
from labkit.errors import LabkitError

ROOT = Path(__file__).resolve().parents[1]
MiB, GiB = 2**20, 2**30


def test_w5_default_sweep_is_shortened_when_host_memory_is_small(monkeypatch: pytest.MonkeyPatch) -> None:
    install_bandwidth_fake(monkeypatch)
    monkeypatch.setattr(bw, "host_available_bytes", lambda: 1 * GiB)  # a VM that "starts small"
    sweep = bw.size_sweep("host_to_device", samples=1)
    sizes = [r.bytes for r in sweep]
    assert sizes[0] == 1024 and max(sizes) == 256 * MiB  # 1 GiB > half of 1 GiB: left out; 256 MiB kept
    with pytest.raises(LabkitError, match="host memory"):  # sizes asked for by name are still refused, in words
        bw.size_sweep("host_to_device", ["1GiB"], samples=1)
    monkeypatch.setattr(bw, "host_available_bytes", lambda: 64 * GiB)
    assert max(r.bytes for r in bw.size_sweep("host_to_device", samples=1)) == GiB  # room: the whole sweep


@pytest.mark.parametrize("test, words", [("host_to_device", "pinned host memory"), ("device_to_host", "pinned host"),
                                         ("device_local_copy", "device to device"), ("peer", "cudaMemcpyPeerAsync")])
def test_c4_each_sweep_says_how_it_copies(monkeypatch: pytest.MonkeyPatch, test: str, words: str) -> None:
    install_bandwidth_fake(monkeypatch)  # two GPUs with peer access
    (rec,) = bw.size_sweep(test, ["64KiB"], samples=1)
    assert words in rec.method, rec.method
    if test in ("device_local_copy", "peer"):
        assert "pinned host" not in rec.method


def test_wheelhouse_carries_mpich_for_prefix_install() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import wheelhouse

    assert wheelhouse.MPI == ("mpich",) and "mpich" in wheelhouse.pins()
    text = (ROOT / "tools" / "install_wheelhouse.sh").read_text()
    assert '--prefix "$mpi"' in text and '--target "$site"' in text and "LD_LIBRARY_PATH" in text


def test_install_wheelhouse_puts_mpich_on_the_paths(tmp_path: Path) -> None:
    """The install script with a stand-in pip: the wheels go with --target, the MPI wheel with --prefix, and the
    exports name the MPI prefix's bin and lib."""
    whl = tmp_path / "whl"
    (whl / "mpi").mkdir(parents=True)
    (whl / "a-1-py3-none-any.whl").write_text("")
    (whl / "mpi" / "mpich-5-py3-none-any.whl").write_text("")
    log = tmp_path / "pip.log"
    py = tmp_path / "python3"
    py.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\n"
                  "case \"$*\" in *--prefix*) p=$(echo \"$*\" | sed 's/.*--prefix \\([^ ]*\\).*/\\1/'); mkdir -p $p/bin; "
                  "touch $p/bin/mpiexec; chmod +x $p/bin/mpiexec;; esac\n")
    py.chmod(0o755)
    res = subprocess.run(["sh", str(ROOT / "tools" / "install_wheelhouse.sh"), str(whl), "site", "mpi"], cwd=tmp_path,
                         env={**os.environ, "PY": str(py)}, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    calls = log.read_text().splitlines()
    assert "--target" in calls[0] and "a-1-py3" in calls[0] and "mpich" not in calls[0]
    assert f"--prefix {tmp_path / 'mpi'}" in calls[1] and "mpich-5" in calls[1]
    assert f"export PATH='{tmp_path / 'mpi' / 'bin'}':$PATH" in res.stdout
    assert f"LD_LIBRARY_PATH='{tmp_path / 'mpi' / 'lib'}'" in res.stdout
    assert f"PYTHONPATH='{tmp_path / 'site'}'" in res.stdout


def test_c2_doctor_finds_nvvm_where_numba_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVVM in the wheels nor in a toolkit's nvvm/lib64, but cuda-pathfinder finds it (as numba-cuda does, e.g. in
    a toolkit's lib/): the toolchain state says NVVM is there; and where pathfinder fails too, it is missing."""
    import types

    from labkit import ptx

    monkeypatch.setattr(ptx, "_wheel_files", lambda *a, **k: [])
    monkeypatch.setattr(ptx, "toolkit_roots", lambda *a, **k: [])
    found = types.ModuleType("cuda.pathfinder")
    found.load_nvidia_dynamic_lib = lambda name: object()
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", found)
    assert ptx._pathfinder_nvvm() is True
    def missing(name: str) -> object:
        raise RuntimeError("libnvvm not found")
    found.load_nvidia_dynamic_lib = missing
    assert ptx._pathfinder_nvvm() is False


def test_docs_gpu_check_matches_the_first_run_script() -> None:
    """docs/gpu-check.md's phase table: the limits, budget, archives and kernels the script really uses."""
    import re

    script = (ROOT / "tools" / "first_gpu_run.sh").read_text()
    doc = (ROOT / "docs" / "gpu-check.md").read_text()
    limits = [int(n) for n in re.findall(r'limit (\d+)\)', script)]
    assert limits == [5, 30, 150, 270, 60, 55], limits  # issue 42: 07 first with 270 s, ncu three kernels
    for cell in ("| 5 s + 30 s;", "| 150 s |", "| 270 s |", "| 60 s (55 s shared out", f"| {sum(limits[:5])} s |"):
        assert cell in doc, cell
    budget = re.search(r"BUDGET=\$\{RUN_BUDGET_S:-(\d+)\}", script)[1]
    assert f"{budget} s budget" in doc and int(budget) <= 540 and sum(limits[:5]) <= int(budget)
    phases = re.findall(r"^phase_done (\d) (\S+) ", script, re.M)
    assert phases == [("1", "env"), ("2", "gpu-check"), ("3", "notebooks"), ("4", "ncu")]
    for n, phase in phases:
        assert f"| {n} `{phase}`" in doc, phase
    assert "`<n>-<phase>.tgz`" in doc and "`gpu-check.json` and `gpu-check.md`" in doc
    kernels = re.search(r"--kernels ([a-z_ ]+);", script)[1].split()
    assert len(kernels) == 3 and f"three reference kernels ({', '.join(kernels)})" in doc
    sys.path.insert(0, str(ROOT / "tools"))
    import gpu_check

    assert "**07 alone, then 05 alone**" in doc and gpu_check.ALONE == ("07-", "05-")
    assert "--save-notebooks" in script and "--save-notebooks" in doc


def test_w1_the_tiled_targets_baseline_is_uncoalesced_and_matmul_naive_is_not() -> None:
    """The simulator's access trace: the uncoalesced naive kernel makes several times the 32-byte sectors per warp
    request to A that matmul_naive makes (which is coalesced: A broadcast, B contiguous), and both compute A @ B."""
    import numpy as np

    import labkit
    from labkit import kernels, sim

    labkit.setup("sim", quiet=True)
    n = 32
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    sectors = {}
    for name in ("matmul_naive", "matmul_naive_uncoalesced"):
        t = sim.trace(kernels.get(name), (2, 2), (16, 16), A, B, np.zeros((n, n), np.float32), names=("A", "B", "C"))
        sectors[name] = (t.sectors_per_request("A", "read"), t.sectors_per_request("C", "write"))
        C = np.zeros((n, n), np.float32)
        kernels.get(name)[(2, 2), (16, 16)](A, B, C)
        assert np.allclose(C, A @ B, rtol=1e-4, atol=1e-4), name
    coalesced, uncoalesced = sectors["matmul_naive"], sectors["matmul_naive_uncoalesced"]
    assert uncoalesced[0] >= 4 * coalesced[0] and uncoalesced[1] >= 4 * coalesced[1], sectors
