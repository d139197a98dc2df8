"""Contracts between labkit's GPU code and CuPy that only a GPU would otherwise test: every RawKernel launch against its
kernel's parameter list (count, scalar widths, pointer dtypes), and the pinned-memory calls' flags and argument order.
The fakes (tests/gpu_fakes.py) read the parameter lists from the CUDA sources themselves. Cost: about 10 s."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpu_fakes
import gpu_producers
from gpu_fakes import KERNEL_IMPLS, ArrayCuPy, check_launch, install_bandwidth_fake, kernel_params
from labkit.kernels_cuda import LEAKY_RELU, SCALE_SHIFT, WMMA_GEMM

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


# ---------------------------------------------------------------------------------------------- the checker itself
def test_parameter_lists_are_read_from_the_sources() -> None:
    from labkit import bandwidth, spin

    assert kernel_params(SCALE_SHIFT, "scale_shift") == [("float", True), ("float", True), ("float", False),
                                                         ("float", False), ("long long", False)]
    assert kernel_params(WMMA_GEMM, "wmma_gemm")[:3] == [("half", True), ("half", True), ("float", True)]
    assert kernel_params(spin.SOURCE, "labkit_spin") == [("int", True), ("unsigned long long", False)]
    assert len(kernel_params(bandwidth._KERNELS, "labkit_sm_copy")) == 3
    with pytest.raises(AssertionError, match="no __global__ void nope"):
        kernel_params(SCALE_SHIFT, "nope")


@pytest.mark.parametrize("args,match", [
    (lambda x: (x, x, np.float32(2), np.float32(1)), "takes 5 arguments, launched with 4"),
    (lambda x: (x, x, np.float32(2), np.float32(1), np.int32(8)), "given a int32, the kernel reads a int64"),
    (lambda x: (x, x, 2.0, np.float32(1), np.int64(8)), "given a float64, the kernel reads a float32"),
    (lambda x: (x, x, np.float32(2), x, np.int64(8)), "an array where a scalar belongs"),
    (lambda x: (x.astype(np.float64), x, np.float32(2), np.float32(1), np.int64(8)), "an array of float64"),
    (lambda x: (8, x, np.float32(2), np.float32(1), np.int64(8)), "int is not a device address"),
    (lambda x: [x, x, np.float32(2), np.float32(1), np.int64(8)], "as a tuple"),
])
def test_a_launch_that_does_not_fit_the_parameters_fails(args: Any, match: str) -> None:
    cp = ArrayCuPy(KERNEL_IMPLS)
    x = cp.asarray(np.ones(8, np.float32))
    k = cp.RawKernel(SCALE_SHIFT, "scale_shift")
    with pytest.raises(AssertionError, match=match):
        k((1,), (8,), args(x))
    k((1,), (8,), (x, cp.empty(8, np.float32), np.float32(2), np.float32(1), np.int64(8)))  # the right one runs
    check_launch(SCALE_SHIFT, "scale_shift", (np.uint64(1), np.uint64(2), np.float32(0), np.float32(0), 8))


# ---------------------------------------------------------------------------------------------- every launch site
def _rawkernel_sites() -> set[str]:
    """``module.function`` of every ``<something>.RawKernel(...)`` call in labkit's own code."""
    sites = set()
    src = ROOT / "src" / "labkit"
    for path in sorted(src.rglob("*.py")):
        if "sim" in path.relative_to(src).parts:
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "RawKernel":
                    mod = ".".join(path.relative_to(src).with_suffix("").parts)
                    sites.add(f"{mod}.{fn.name}")
    return sites


#: Each RawKernel construction in labkit, and the test here that launches it through the checking fake.
COVERED = {
    "gpu.bandwidth._kernel": "test_bandwidth_kernels_launch_with_their_parameters",
    "gpu.spin.spin_kernel": "test_bandwidth_kernels_launch_with_their_parameters",
    "gpu.cupylab.overlap_benchmark": "test_overlap_benchmark_launches_scale_shift_right",
    # the RawKernel of run_wmma_gemm and wmma_against_cublas, both launched with _wmma_args
    "gpu.tensorcores._wmma_kernel": "test_wmma_gemm_launches_right",
    "check.lab05._leaky_relu_gpu": "test_lab05_leaky_relu_gpu_check_launches_right",
    "check.lab05._measure_pipeline_gpu": "test_lab05_pipeline_gpu_check_launches_right",
    # labkit's own wrapper: it checks the caller's arguments against the kernel's PTX parameters before it launches
    # (labkit.cuda.entries.check_launch, tested in tests/test_cupylab.py), and passes them on unchanged.
    "cuda.cpp.__call__": "tests/test_cupylab.py",
}


def test_every_rawkernel_launch_site_is_covered() -> None:
    sites = _rawkernel_sites()
    assert sites == set(COVERED), (f"RawKernel sites not launched through the checking fake: {sorted(sites - set(COVERED))}; "
                                   f"gone: {sorted(set(COVERED) - sites)}")
    here = {n for n in globals() if n.startswith("test_")}
    assert all(t in here or t.startswith("tests/") for t in COVERED.values())


def test_bandwidth_kernels_launch_with_their_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SM copy and the spin kernel: FakeCuPy's kernels run check_launch on every launch."""
    from labkit import bandwidth as bw

    cp = install_bandwidth_fake(monkeypatch, n=2)
    seen: list[str] = []
    real = gpu_fakes.check_launch

    def spy(source: str, name: str, args: tuple) -> None:
        real(source, name, args)
        seen.append(name)

    monkeypatch.setattr(gpu_fakes, "check_launch", spy)
    assert bw.device_local_copy(0, "4MiB", "sm").gbps
    assert bw.peer_matrix("1MiB", method="sm")[0].gbps
    assert {"labkit_sm_copy", "labkit_spin"} <= set(seen)
    assert cp.lazy.holds


def test_overlap_benchmark_launches_scale_shift_right(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import cupylab

    cp = ArrayCuPy(KERNEL_IMPLS)
    monkeypatch.setattr(cupylab, "cupy_or_none", lambda: cp)
    monkeypatch.setitem(sys.modules, "cupyx", cp.cupyx())
    rec = cupylab.overlap_benchmark(total_bytes=1 * MiB, chunks=8, streams=4, repeat=1)
    assert rec["correct"] is True  # each chunk's copies went where its launch computed
    assert sum(1 for name, *_ in cp.launches if name == "scale_shift") == 2 * (1 + 8)  # serial + chunks, twice


def test_wmma_gemm_launches_right(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import mode, tensorcores

    e = gpu_producers._environment()
    monkeypatch.setattr(mode, "env", lambda: e)
    cp = ArrayCuPy(KERNEL_IMPLS)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (48, 64)), rng.uniform(-1, 1, (64, 80))
    assert tensorcores.wmma_error(tensorcores.run_wmma_gemm(a, b), a, b).ok
    assert cp.launches and cp.launches[0][0] == "wmma_gemm"


def test_lab05_leaky_relu_gpu_check_launches_right() -> None:
    from labkit.check import lab05

    cp = ArrayCuPy(KERNEL_IMPLS)
    assert "correct on the GPU" in lab05._leaky_relu_gpu(cp, LEAKY_RELU, 0.1)
    assert len(cp.launches) >= 6


def test_lab05_pipeline_gpu_check_launches_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 05.streams GPU check with its reference pipeline: the scale_shift launches of the check's own kernel()."""
    from labkit.check import lab05

    cp = ArrayCuPy(KERNEL_IMPLS)
    times = iter([10.0, 10.0, 4.0, 4.0])  # warm-up and timed, one chunk then eight: a 2.5x overlap
    cp.cuda.get_elapsed_time = staticmethod(lambda a, b: next(times))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cp.cupyx())
    out = lab05._measure_pipeline_gpu(lab05._reference_streams())
    assert "Measured on the GPU" in out and "(2.50x)" in out
    assert {name for name, *_ in cp.launches} == {"scale_shift"}


# ---------------------------------------------------------------------------------------------- pinned host memory
def test_the_host_alloc_fake_checks_flags_and_argument_order(monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = pytest.importorskip("cupy")
    rt = install_bandwidth_fake(monkeypatch, n=1).runtime
    real = cupy.cuda.runtime
    assert (rt.hostAllocPortable, rt.hostAllocMapped, rt.hostAllocWriteCombined) == (
        real.hostAllocPortable, real.hostAllocMapped, real.hostAllocWriteCombined)
    flags = rt.hostAllocPortable | rt.hostAllocMapped
    ptr = rt.hostAlloc(8, flags)
    rt.freeHost(ptr)
    with pytest.raises(AssertionError, match="arguments swapped"):
        rt.hostAlloc(flags, 8)  # (flags, size): 8 is no OR of the flags
    with pytest.raises(AssertionError, match="arguments swapped"):
        rt.hostAlloc(4096, 64 * MiB)
    with pytest.raises(AssertionError, match="must be mapped"):
        rt.hostAlloc(8, rt.hostAllocPortable)
    with pytest.raises(TypeError):
        rt.hostAlloc(8)  # bound to the real signature first


def test_labkit_pins_host_memory_with_mapped_portable_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """What labkit asks for: the spin kernel's 8-byte flag and each pinned buffer, size first, then the flags."""
    from labkit import bandwidth as bw

    cp = install_bandwidth_fake(monkeypatch, n=1)
    bw.host_to_device(0, "2MiB")
    rt = cp.runtime
    want = rt.hostAllocPortable | rt.hostAllocMapped
    assert (8, want) in rt.host_allocs and (2 * MiB, want) in rt.host_allocs
    assert not rt.host_mem  # all freed
