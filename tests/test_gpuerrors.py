"""GPU errors as good as sim errors: the real CuPy/cuBLAS/CUDA exceptions each become a GpuError saying which
problem it is and what to do; the GEMM runner stops calling every failure "not supported"; WMMA finds its headers
in a system CUDA toolkit too; labkit doctor survives NVML. Cost: under 1 s."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from labkit import gpuerrors as ge
from labkit.errors import LabkitError

cupy = pytest.importorskip("cupy")


def _real_errors() -> dict[str, BaseException]:
    import ml_dtypes
    import numpy as np
    from cupy.cuda import cublas, memory, runtime

    try:
        cupy._core._scalar.get_typename(np.dtype(ml_dtypes.float8_e4m3fn))
    except ValueError as exc:
        dtype_error = exc
    return {
        "oom": memory.OutOfMemoryError(1 << 34, 1 << 30),
        "oom-runtime": runtime.CUDARuntimeError(2),
        "no-cublas": ImportError("libcublas.so.12: cannot open shared object file: No such file or directory"),
        "cublas-not-supported": cublas.CUBLASError(15),
        "cublas-invalid": cublas.CUBLASError(7),
        "dtype": dtype_error,
        "peer": runtime.CUDARuntimeError(217),
    }


@pytest.mark.parametrize("key,kind,words", [
    ("oom", ge.OUT_OF_MEMORY, "free_all_blocks"),
    ("oom-runtime", ge.OUT_OF_MEMORY, "smaller size"),
    ("no-cublas", ge.MISSING_LIBRARY, "[cuda12]"),
    ("cublas-not-supported", ge.UNSUPPORTED_TYPE, "precision"),
    ("cublas-invalid", ge.UNSUPPORTED_TYPE, "precision"),
    ("dtype", ge.UNSUPPORTED_TYPE, "FP8 needs"),
    ("peer", ge.PEER_UNAVAILABLE, "peer_access=False"),
])
def test_each_real_gpu_error_says_which_and_what_to_do(key: str, kind: str, words: str) -> None:
    err = ge.explain(_real_errors()[key], "the test")
    assert isinstance(err, LabkitError) and err.kind == kind and words in err.fix
    assert str(err).startswith("the test")
    if key == "no-cublas":
        assert "cuBLAS" in str(err)


def test_gemm_rows_say_which_error_not_always_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import tensorcores as tc

    errors = _real_errors()
    order = [errors["oom"], errors["no-cublas"], errors["dtype"]]  # what creating fp16, bf16, fp8 data raises

    class Gen:
        def standard_normal(self, shape: Any, dtype: Any = None) -> Any:
            raise order.pop(0)

    fake = types.SimpleNamespace(__version__=cupy.__version__, float32="float32",
                                 random=types.SimpleNamespace(default_rng=lambda: Gen()),
                                 get_default_memory_pool=lambda: types.SimpleNamespace(free_all_blocks=lambda: None))
    monkeypatch.setitem(sys.modules, "cupy", fake)

    class _Env:
        is_gpu, device_name = True, "NVIDIA H200"

    import labkit.mode

    monkeypatch.setattr(labkit.mode, "env", lambda: _Env())
    monkeypatch.setattr(tc, "_tf32", lambda enabled: __import__("contextlib").nullcontext())
    rows = {r.precision: r for r in tc.gpu_gemm_throughput(("fp16", "bf16", "fp8"), n=64)}
    assert rows["fp16"].note.startswith(ge.OUT_OF_MEMORY) and "What to do" in rows["fp16"].note
    assert rows["bf16"].note.startswith(ge.MISSING_LIBRARY) and "cuBLAS" in rows["bf16"].note
    assert rows["fp8"].note.startswith("not supported by this stack")
    assert all(r.tflops is None for r in rows.values())


def test_wmma_headers_from_a_system_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from labkit import ptx
    from labkit import tensorcores as tc

    monkeypatch.setattr(ptx, "cuda_include_dirs", lambda cuda_major=None: [])  # no CUDA wheels
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(tc, "_toolkit_roots", lambda: [tmp_path / "cuda"])
    monkeypatch.setattr(tc, "_pathfinder_headers", lambda: [])
    with pytest.raises(LabkitError, match="mma.h and crt/mma.h") as err:
        tc.wmma_include_dirs()
    assert "CUDA_HOME" in str(err.value) and "nvidia-cuda-nvcc-cu12" in err.value.fix
    inc = tmp_path / "cuda" / "include"
    (inc / "crt").mkdir(parents=True)
    (inc / "mma.h").write_text("")
    (inc / "crt" / "mma.h").write_text("")
    assert tc.wmma_include_dirs() == [str(inc)]


def test_wmma_toolkit_roots_read_cuda_home_and_cuda_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import tensorcores as tc

    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-a")
    monkeypatch.setenv("CUDA_PATH", "/opt/cuda-b")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert [str(p) for p in tc._toolkit_roots()] == ["/opt/cuda-a", "/opt/cuda-b", "/usr/local/cuda"]


def test_wmma_headers_through_cuda_pathfinder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA 13 image's wheels are laid out differently; cuda-pathfinder (the real one) finds the folders."""
    from labkit import ptx
    from labkit import tensorcores as tc

    monkeypatch.setattr(ptx, "cuda_include_dirs", lambda cuda_major=None: [])
    monkeypatch.setattr(tc, "_toolkit_roots", lambda: [])
    dirs = [Path(d) for d in tc.wmma_include_dirs()]
    assert any((d / "crt" / "mma.h").is_file() for d in dirs) and any((d / "mma.h").is_file() for d in dirs)


def test_wmma_headers_in_the_pinned_wheels() -> None:
    from labkit import tensorcores as tc

    dirs = [Path(d) for d in tc.wmma_include_dirs()]
    assert any((d / "crt" / "mma.h").is_file() for d in dirs) and any((d / "mma.h").is_file() for d in dirs)


# ---------------------------------------------------------------------------------------------- doctor and NVML


def _doctor_gpus() -> tuple[Any, tuple]:
    from gpu_fakes import NvmlGpu
    from labkit.device import GPUInfo, normalise_bus_id

    nv = [NvmlGpu("NVIDIA H200", f"GPU-{i}0000000-0000-0000-0000-000000000000", f"00000000:{0x18 + i:02X}:00.0",
                  ["00000000:C1:00.0"] * 18) for i in range(2)]
    gpus = tuple(GPUInfo(i, g.name, (9, 0), 141 << 30, 132, 1, 0, g.uuid, normalise_bus_id(g.bus_id)) for i, g in enumerate(nv))
    return nv, gpus


def test_doctor_two_gpus_reports_p2p_instead_of_crashing() -> None:
    """nvidia-ml-py's NVML_P2P_CAPS_INDEX_READ is (0,): passed as is, ctypes raised and doctor crashed."""
    from gpu_fakes import FakeNvml
    from labkit import doctor

    nv, gpus = _doctor_gpus()
    out = doctor._nvlink_summary(gpus, FakeNvml(nv))
    assert out["available"] and out["p2p"] == [["X", "OK"], ["OK", "X"]]
    assert out["per_gpu"] == [{"index": 0, "active_links": 18}, {"index": 1, "active_links": 18}]


def test_doctor_without_nvml_says_why_the_section_is_skipped() -> None:
    from gpu_fakes import FakeNvml
    from labkit import doctor

    nv, gpus = _doctor_gpus()
    out = doctor._nvlink_summary(gpus, FakeNvml(nv, init_error=True))
    assert not out["available"] and out["reason"].startswith("NVLink and P2P: skipped, it needs NVML")
    unknown = (gpus[0].__class__(0, "NVIDIA H200", (9, 0), 1, 132, 1, 0, "GPU-ffff", "0000:99:00.0"),)
    out = doctor._nvlink_summary(unknown, FakeNvml(nv))
    assert "no device matching CUDA device 0" in out["reason"]
    data = {"labkit": "0", "python": "3", "platform": "x", "mode": "gpu", "mode_reason": "r", "driver_version": "12.8",
            "cuda_runtime": "12.9", "gpus": [], "nvlink": out, "ptx": {"nvrtc": "12.9", "nvvm": True, "ptxas": "p", "ok": True},
            "packages": {}, "next_steps": []}
    assert "NVLink/P2P: NVLink and P2P: skipped" in doctor.render(data)


def test_doctor_report_in_gpu_mode_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real pynvml here finds no NVML library: the report still has every key, and says why NVLink is skipped."""
    import labkit.mode
    from labkit import doctor

    _, gpus = _doctor_gpus()
    e = labkit.mode.Environment("gpu", gpus[0].name, (9, 0), gpus[0].memory_bytes, 132, 2, "12.8", "test", gpus)
    monkeypatch.setattr(labkit.mode, "env", lambda: e)
    monkeypatch.setattr(doctor, "_cuda_runtime", lambda: "12.9")
    data = doctor.report()
    assert tuple(data) == doctor.KEYS
    assert data["gpus"][1]["pci_bus_id"] == "0000:19:00.0" and data["gpus"][0]["uuid"] == gpus[0].uuid
    assert data["nvlink"]["reason"].startswith("NVLink and P2P: skipped, it needs NVML")
    assert "gpu mode" in " ".join(data["next_steps"])
    assert "PCI 0000:18:00.0" in doctor.render(data)
