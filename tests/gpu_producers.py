"""gpu-check result files made by the code that makes them on a GPU, run here on fakes (tests/gpu_fakes.py).

:func:`report` runs ``tools/gpu_check.py``'s own ``main`` with ``labkit.setup`` answering "an H200" and every suite
the real one: ``labkit.kernels.benchmark_suite`` (in the simulator, its timings replaced by chosen ones),
``labkit.tensorcores.gpu_check`` and ``labkit.cupylab.benchmarks`` on :class:`gpu_fakes.ArrayCuPy` (a NumPy CuPy
whose RawKernel launches are checked against the kernels' parameters), ``labkit.bandwidth.gpu_check_suite`` on the
clocked :class:`gpu_fakes.FakeCuPy`. The JSON it writes is the fixture: a record renamed, or a field the judge
reads renamed, in any suite fails the judge's tests. Only the figures are chosen (``Figures``); names, fields and
verdict flags are the producers'. Suite sizes are shrunk (``n``, ``size``) so it runs in a few seconds.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


def gpu_check_tool() -> Any:
    """tools/gpu_check.py as a module (loaded once)."""
    if "gpu_check_tool" in sys.modules:
        return sys.modules["gpu_check_tool"]
    spec = importlib.util.spec_from_file_location("gpu_check_tool", ROOT / "tools" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["gpu_check_tool"] = mod  # dataclasses look the module up while the class is made
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Figures:
    """What the fake GPU measures: percent of the D2D copy per Numba kernel, the tiled matmul's speed-up, Tensor
    Core TFLOP/s, the overlap's speed-up, the fraction of the PCIe link the pinned copy reaches, and so on."""

    d2d_gbps: float = 2000.0
    numba_percent: dict[str, float] = field(default_factory=lambda: {
        "saxpy (Numba)": 92.0, "copy (Numba)": 93.0, "transpose, shared (Numba)": 80.0, "transpose, naive (Numba)": 30.0,
        "sum reduction (Numba)": 78.0})
    tiled_speedup: float = 6.2
    gemm_percent: dict[str, float] = field(default_factory=lambda: {"fp16": 78.0, "bf16": 76.0})
    wmma_ok: bool = True
    overlap_speedup: float = 2.1
    overlap_correct: bool = True
    d2d_vs_library_percent: float = 99.0
    h2d_percent_of_link: float = 88.0
    pcie: tuple[int, int] = (5, 16)
    nvml: bool = True
    vm: bool = False  # NVML of a GPU in a VM (gpu_fakes.VM_REFUSES): the real pcie_link asks it, and it refuses
    crashed: tuple[str, ...] = ()  # suites (gpu_check's names) that raise, as a missing library would


DEVICE = "NVIDIA H200"


def _environment() -> Any:
    from labkit.mode import Environment

    return Environment(mode="gpu", device_name=DEVICE, compute_capability=(9, 0), memory_bytes=141 * 10**9,
                       sm_count=132, gpu_count=1, driver_version="580.95.05", reason="fake GPU (tests/gpu_producers.py)")


@contextlib.contextmanager
def _gpu_env(mp: pytest.MonkeyPatch) -> Iterator[None]:
    """labkit.mode.env() answering "an H200 in gpu mode" while a suite runs (bench and bandwidth import env by name)."""
    from labkit import bandwidth, bench, mode

    e = _environment()
    with mp.context() as m:
        for mod in (mode, bench, bandwidth):
            m.setattr(mod, "env", lambda: e)
        yield


def _timing(name: str, seconds: float, nbytes: float | None, flops: float | None) -> Any:
    from labkit.bench import Timing

    return Timing(name=name, samples_s=(seconds,) * 3, mode="gpu", device=DEVICE, bytes=nbytes, flops=flops,
                  how="fake GPU timing (tests/gpu_producers.py)")


def _numba_suite(fig: Figures, mp: pytest.MonkeyPatch, real: Any) -> Any:
    """labkit.kernels.benchmark_suite in the simulator, with bench.measure giving the chosen rates (the kernels are
    not run: the simulator's time says nothing about a GPU)."""
    from labkit import bench

    def measure(fn: Any, *args: Any, name: str | None = None, bytes: float | None = None, flops: float | None = None,
                **kw: Any) -> Any:
        assert name is not None
        if name.startswith("D2D copy"):
            return _timing(name, bytes / (fig.d2d_gbps * 1e9), bytes, None)
        if name == "matmul, naive uncoalesced (Numba)":  # the tiled target's baseline
            return _timing(name, 1.0, None, flops)
        if name == "matmul, naive (Numba)":
            return _timing(name, 1.5 / fig.tiled_speedup, None, flops)
        if name == "matmul, tiled (Numba)":
            return _timing(name, 1.0 / fig.tiled_speedup, None, flops)
        pct = fig.numba_percent[name]  # KeyError: a kernel the figures do not know (renamed?)
        return _timing(name, bytes / (pct / 100 * fig.d2d_gbps * 1e9), bytes, None)

    with mp.context() as m:
        m.setattr(bench, "measure", measure)
        return real(small=True)


def _tensor_suite(fig: Figures, mp: pytest.MonkeyPatch, real: Any) -> Any:
    """labkit.tensorcores.gpu_check on a NumPy CuPy: the GEMMs timed by a fake bench.measure at the chosen share of
    the H200's dense peak, the WMMA kernel launched (arguments checked) and computed by NumPy."""
    from gpu_fakes import KERNEL_IMPLS, ArrayCuPy
    from labkit import bench, hw

    impls = dict(KERNEL_IMPLS)
    if not fig.wmma_ok:
        def wrong(grid: tuple, block: tuple, A: Any, B: Any, C: Any, M: Any, N: Any, K: Any) -> None:
            KERNEL_IMPLS["wmma_gemm"](grid, block, A, B, C, M, N, K)
            C.reshape(int(M), int(N))[:16, :16] = 0.0  # the first tile wrong: a kernel with a bug

        impls["wmma_gemm"] = wrong
    cp = ArrayCuPy(impls)
    peak = {p: hw.gpu("H200").peak(p).value for p in ("fp16", "bf16")}

    def measure(fn: Any, *args: Any, name: str | None = None, flops: float | None = None, precision: str = "fp32",
                **kw: Any) -> Any:
        tflops = fig.gemm_percent[precision] / 100 * peak[precision]
        return _timing(name or precision, flops / (tflops * 1e12), None, flops)

    with mp.context() as m, _gpu_env(m):
        m.setitem(sys.modules, "cupy", cp)
        m.setitem(sys.modules, "cupy._core", None)  # CuPy's TF32 switch: not in the fake
        m.setattr(bench, "measure", measure)
        return real(n=64)


def _cupy_suite(fig: Figures, mp: pytest.MonkeyPatch, real: Any) -> Any:
    """labkit.cupylab.benchmarks on a NumPy CuPy (small sizes); the overlap's copies are real memmoves and its
    kernel a checked launch, so ``correct`` is the producer's own. Wall-clock speed-ups on a fake mean nothing:
    the one figure set afterwards is the overlap's speed-up (``value``, ``speedup``, which must both exist)."""
    from gpu_fakes import KERNEL_IMPLS, ArrayCuPy
    from labkit import cupylab

    impls = dict(KERNEL_IMPLS)
    if not fig.overlap_correct:
        impls["scale_shift"] = lambda grid, block, x, y, a, b, n: None  # writes nothing: the output stays wrong
    cp = ArrayCuPy(impls)
    cupyx = cp.cupyx()
    with mp.context() as m, _gpu_env(m):
        m.setattr(cupylab, "cupy_or_none", lambda: cp)
        m.setitem(sys.modules, "cupyx", cupyx)
        m.setitem(sys.modules, "cupyx.profiler", cupyx.profiler)
        m.setattr(cupylab, "fusion_benchmark", functools.partial(cupylab.fusion_benchmark, n=4096, repeat=2))
        m.setattr(cupylab, "overlap_benchmark", functools.partial(cupylab.overlap_benchmark, total_bytes=1 * MiB, repeat=1))
        out = real()
    for overlap in (r for r in out if r.get("name") == "cupy-stream-overlap"):  # none if renamed: the judge says so
        assert {"value", "speedup", "correct"} <= set(overlap), sorted(overlap)
        assert overlap.get("error") is None, overlap["error"]  # the benchmark ran on the fake
        overlap["value"] = overlap["speedup"] = fig.overlap_speedup
    return out


def _bandwidth_suite(fig: Figures, mp: pytest.MonkeyPatch, real: Any) -> Any:
    """labkit.bandwidth.gpu_check_suite on the clocked fake: its copy rates set so the figures come out as chosen."""
    from gpu_fakes import install_bandwidth_fake
    from labkit import bandwidth as bw
    from labkit.nvml import NvmlUnavailable

    size = 16 * MiB
    fixed = 2e-6  # the fake's cost per copy

    def rate_for(gbps: float) -> float:
        return size / (size / (gbps * 1e9) - fixed)

    with mp.context() as m, _gpu_env(m):
        cp = install_bandwidth_fake(m, n=1)
        ours = size / (fixed + size / cp.runtime.rates["d2d"]) / 1e9
        m.setattr(bw, "_best_library_copy", lambda c, n, s: [("cupy b[...] = a", 100 * ours / fig.d2d_vs_library_percent)])
        peak = bw.pcie_peak(*fig.pcie)
        cp.runtime.rates["h2d"] = rate_for(fig.h2d_percent_of_link / 100 * peak)

        def link(device: int = 0) -> dict[str, Any]:
            if not fig.nvml:
                raise NvmlUnavailable("NVML could not start (NVMLError_LibraryNotFound: NVML Shared Library Not Found).")
            return {"current": fig.pcie, "max": fig.pcie, "peak_gbps": peak, "source": "NVML (fake)"}

        if fig.vm:  # labkit's own pcie_link, on the NVML a VM gives it (and no sysfs link either)
            import dataclasses

            from gpu_fakes import vm_nvml
            from labkit.device import GPUInfo

            nvml = vm_nvml(DEVICE)
            gpu = GPUInfo(0, DEVICE, (9, 0), 141 * 10**9, 132, 60 * MiB, 0x18, "GPU-00000000-0000-0000-0000-000000000000",
                          "0000:18:00.0")
            vm_env = dataclasses.replace(_environment(), gpus=(gpu,))
            with pytest.MonkeyPatch.context() as vm:  # undone before _gpu_env's own patch of bw.env
                vm.setattr(bw, "env", lambda: vm_env)
                vm.setattr(bw, "_nvml", lambda: nvml)
                vm.setattr(bw, "pcie_from_sysfs", lambda bus_id, root=None: None)
                return real(size=size)
        m.setattr(bw, "pcie_link", link)
        return real(size=size)


def report(tmp: Path, fig: Figures | None = None, notebooks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run gpu_check.main on the fakes with ``fig``'s figures; return the JSON it wrote (written under ``tmp``)."""
    import labkit
    import labkit.kernels
    from labkit import bandwidth, cupylab, tensorcores

    gc = gpu_check_tool()
    fig = fig or Figures()
    labkit.mode.env()  # the mode of this process chosen now, before main sets LABKIT_MODE=gpu for its kernels
    real = {"numba": labkit.kernels.benchmark_suite, "tensor": tensorcores.gpu_check, "cupy": cupylab.benchmarks, "bandwidth": bandwidth.gpu_check_suite}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABKIT_MODE", os.environ.get("LABKIT_MODE", "sim"))  # main sets it to gpu: put back after
        mp.setattr(labkit, "setup", lambda *a, **k: _environment())
        suites = {
            gc.NUMBA: (labkit.kernels, "benchmark_suite", lambda: _numba_suite(fig, mp, real["numba"])),
            gc.TENSOR: (tensorcores, "gpu_check", lambda: _tensor_suite(fig, mp, real["tensor"])),
            gc.CUPY: (cupylab, "benchmarks", lambda: _cupy_suite(fig, mp, real["cupy"])),
            gc.BANDWIDTH: (bandwidth, "gpu_check_suite", lambda: _bandwidth_suite(fig, mp, real["bandwidth"])),
        }
        for name, (module, fn, run) in suites.items():
            if name in fig.crashed:
                def run(name: str = name) -> Any:
                    raise ImportError("libcublas.so.12: cannot open shared object file")
            mp.setattr(module, fn, run)
        rows = notebooks if notebooks is not None else [
            {"notebook": "02-first-kernels.ipynb", "status": "passed", "seconds": 20.0, "error": None}]

        def run_notebooks(stems: Any, timeout: int, progress: Any = None, jobs: int = 1) -> list[dict[str, Any]]:
            progress(rows)
            return rows

        mp.setattr(gc, "run_notebooks", run_notebooks)
        mp.setattr(gc, "notebook_paths", lambda stems: [Path(r["notebook"]) for r in rows])  # what this runner runs
        out = tmp / "gpu-check"
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.json"):
            old.unlink()
        gc.main(["--out", str(out)])
    (written,) = out.glob("*.json")
    return json.loads(written.read_text())


#: The result files the judge's tests read: name -> (figures, notebooks). ``cannot-run.json`` is not here: no
#: producer writes it (gpu-check exits 2 without writing), it stays a file in tests/fixtures/gpu_check/.
VARIANTS: dict[str, tuple[Figures, list[dict[str, Any]] | None]] = {
    "all-pass.json": (Figures(), None),
    "gemm-below-target.json": (Figures(gemm_percent={"fp16": 78.0, "bf16": 52.0}), None),
    "wmma-wrong.json": (Figures(wmma_ok=False), None),
    "no-nvml.json": (Figures(nvml=False), None),
    "vm-nvml-refuses.json": (Figures(vm=True), None),
    "tensor-suite-crashed.json": (Figures(crashed=("tensor cores (lab 06)",)), None),
    "overlap-wrong-result.json": (Figures(overlap_correct=False), None),
    "h2d-above-link.json": (Figures(pcie=(3, 16), h2d_percent_of_link=300.0), None),
    "notebook-failed.json": (Figures(), [{"notebook": "07-bandwidth-and-nvlink.ipynb", "status": "failed", "seconds": 3.0,
                                          "error": "CellExecutionError"}]),
}


def write_all(tmp: Path, dest: Path) -> list[Path]:
    """Every :data:`VARIANTS` report, as a file under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, (fig, notebooks) in VARIANTS.items():
        path = dest / name
        path.write_text(json.dumps(report(tmp, fig, notebooks), indent=1, default=str) + "\n")
        out.append(path)
    return out
