"""labkit.tensorcores: the WMMA kernel compiles to Tensor Core PTX for sm_70/80/90; shapes; models; dissection."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit import tensorcores as T
from labkit.errors import LabkitError, NoGPUError


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    labkit.setup(quiet=True)


@pytest.mark.toolchain
@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_wmma_compiles_to_tensor_core_ptx(arch):
    from labkit import ptx as P

    if not P.can_target(arch):
        with pytest.raises(P.ArchNotSupported, match=arch):
            T.compile_wmma(arch=arch)
        return
    ptx = T.compile_wmma(arch=arch)
    counts = T.tensor_core_instructions(ptx.text)
    assert counts["wmma.mma"] + counts["mma"] >= 1
    assert counts["wmma.load"] >= 2 and counts["wmma.store"] >= 1
    assert any("wmma.mma.sync" in ln for ln in ptx.lines("wmma.mma"))
    assert ptx.summary().tensor_core >= 1


def test_wmma_needs_volta_or_newer():
    with pytest.raises(LabkitError, match="no Tensor Cores"):
        T.compile_wmma(arch="sm_60")


def test_shapes_not_multiples_of_16_are_a_clear_error():
    with pytest.raises(LabkitError, match="multiple of 16"):
        T.run_wmma_gemm(np.ones((20, 16)), np.ones((16, 16)))
    with pytest.raises(LabkitError, match="inner dimensions"):
        T.run_wmma_gemm(np.ones((16, 16)), np.ones((32, 16)))
    with pytest.raises(NoGPUError):
        T.run_wmma_gemm(np.ones((16, 16)), np.ones((16, 16)))


def test_wmma_launch_covers_every_tile():
    grid, block = T.wmma_launch(80, 48)
    assert block == (32, T.WARPS_PER_BLOCK)
    assert grid[0] * 16 >= 48 and grid[1] * block[1] * 16 >= 80


def test_wmma_error_grades_against_the_fp16_tolerance():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (32, 64)), rng.uniform(-1, 1, (64, 48))
    emulated = (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)).astype(np.float64)
    assert T.wmma_error(emulated, a, b).ok
    wrong = emulated.copy()
    wrong[3, 5] += 0.05
    g = T.wmma_error(wrong, a, b)
    assert not g.ok and g.first_bad == (3, 5)
    unwritten = emulated.copy()
    unwritten[0, 0] = np.nan
    assert not T.wmma_error(unwritten, a, b).ok


def test_gpu_throughput_needs_a_gpu():
    with pytest.raises(NoGPUError):
        T.gpu_gemm_throughput(("fp16",))


def test_cpu_throughput_is_labelled_cpu():
    rows = T.cpu_gemm_throughput(64, ("fp64", "fp32"), repeat=2)
    assert all(r.kind == "CPU measurement" and "CPU" in r.device and r.tflops > 0 for r in rows)


@pytest.mark.parametrize("gpu", ["V100", "A100", "H100", "H200"])
def test_roofline_gemm_is_a_compute_bound_model_at_8192(gpu):
    from labkit import hw

    r = T.roofline_gemm(gpu, "fp16", 8192)
    assert r.kind == "model" and r.tflops == hw.gpu(gpu).peak("fp16").value
    small = T.roofline_gemm(gpu, "fp16", 64)
    assert small.tflops < r.tflops and "memory-bound" in small.note


def test_dissection_of_v100_and_a100():
    v = T.dissect_tensor_peak("V100", "fp16")
    assert v.fma_per_tensor_core_per_clock == pytest.approx(64, rel=0.01)
    assert v.sm_count == 80 and v.tensor_cores_per_sm == 8
    a = T.dissect_tensor_peak("A100", "tf32")
    assert a.fma_per_tensor_core_per_clock == pytest.approx(128, rel=0.01)
    assert T.dissect_tensor_peak("A100", "fp16").fma_per_tensor_core_per_clock == pytest.approx(256, rel=0.01)


def test_cublas_bf16_matmul_passes_column_major_geometry(monkeypatch) -> None:
    """Row-major C = A @ B is column-major C^T = B^T A^T: B first, dimensions (n, m, k), ldb = n, lda = k.
    The fake cuBLAS is the real module's constants with each function bound to the real signature first."""
    import types

    import numpy as np

    cupy = pytest.importorskip("cupy")
    from cupy.cuda import cublas as real

    from gpu_fakes import checked
    from labkit import tensorcores

    calls = {}
    cublas = types.SimpleNamespace(
        CUBLAS_OP_N=real.CUBLAS_OP_N, CUBLAS_POINTER_MODE_HOST=real.CUBLAS_POINTER_MODE_HOST,
        getPointerMode=checked(real.getPointerMode, lambda h: 1),
        setPointerMode=checked(real.setPointerMode, lambda h, m: calls.setdefault("modes", []).append(m)),
        gemmEx=checked(real.gemmEx, lambda *args: calls.setdefault("gemm", args)),
        getStream=checked(real.getStream, lambda h: 11),
        setStream=checked(real.setStream, lambda h, s: calls.setdefault("streams", []).append(s)),
    )
    monkeypatch.setattr(tensorcores, "_cublas", lambda: cublas)
    monkeypatch.setattr(cupy.cuda.device, "get_cublas_handle", lambda: 7)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: types.SimpleNamespace(ptr=23))

    class Dev:  # just what the function reads of a CuPy array
        def __init__(self, shape, dtype, ptr):
            self.shape, self.dtype = shape, np.dtype(dtype)
            self.flags = types.SimpleNamespace(c_contiguous=True)
            self.data = types.SimpleNamespace(ptr=ptr)

    a, b, c = Dev((3, 5), "float16", 100), Dev((5, 4), "float16", 200), Dev((3, 4), "float32", 300)
    tensorcores.cublas_bf16_matmul(a, b, c)
    g = calls["gemm"]
    assert g[0] == 7 and g[3:6] == (4, 3, 5)            # n, m, k
    assert g[7] == 200 and g[9] == 4 and g[10] == 100 and g[12] == 5  # B, ldb = n; A, lda = k
    assert g[14] == 300 and g[15] == 0 and g[16] == 4 and g[17] == 68  # C fp32, ldc = n, compute 32F
    assert calls["modes"] == [0, 1]                      # host pointer mode, then restored
    assert calls["streams"] == [23, 11]                  # the caller's current stream, then the handle's own (C6)
    with pytest.raises(labkit.LabkitError, match="do not match"):
        tensorcores.cublas_bf16_matmul(a, a, c)


# ---------------------------------------------------------------------------------------------- a MIG slice (issue 24)
def _mig_environment():
    from labkit.mode import Environment

    return Environment(mode="gpu", device_name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", compute_capability=(9, 0),
                       memory_bytes=10 * 10**9, sm_count=16, gpu_count=1, driver_version="580", reason="fake MIG slice",
                       mig="1g.10gb: 16 of 132 SMs")


def test_gemm_targets_on_a_mig_slice_use_the_slices_share_of_the_peak(monkeypatch) -> None:
    """The defect: a slice's name matched no labkit.hw record, so the GEMM targets were NOT MEASURED. The parent's
    peak, scaled to the slice's SMs (as bench does), is what the GEMM is compared with."""
    import sys

    from gpu_fakes import KERNEL_IMPLS, ArrayCuPy
    from labkit import bench, hw, mode
    from labkit import tensorcores as tc

    e = _mig_environment()
    monkeypatch.setattr(mode, "env", lambda: e)
    monkeypatch.setattr(bench, "env", lambda: e)
    monkeypatch.setitem(sys.modules, "cupy", ArrayCuPy(KERNEL_IMPLS))
    monkeypatch.setitem(sys.modules, "cupy._core", None)

    def measure(fn, *args, name=None, flops=None, **kw):
        return bench.Timing(name=name or "gemm", samples_s=(flops / 100e12,), mode="gpu", device=e.device_name, flops=flops)

    monkeypatch.setattr(bench, "measure", measure)
    out = tc.gpu_check(n=32)
    share = 16 / hw.gpu("H100 SXM").sm_count.value
    for t in out["targets"][:2]:
        peak = hw.gpu("H100 SXM").peak(t["details"]["precision"]).value * share
        assert "error" not in t and t["value"] == pytest.approx(100 * 100 / peak)
        assert "MIG slice" in t["details"]["peak_source"]
    assert out["targets"][2]["passed"] is True  # the WMMA kernel too (checked launches on the NumPy CuPy)


# ---------------------------------------------------------------- Hopper: wgmma and TMA


def test_wgmma_tile_compiles_for_sm_90a_with_tma_and_wgmma() -> None:
    from labkit import tensorcores as T

    ptx = T.compile_wgmma()
    assert ptx.arch == "sm_90a" and ".target sm_90a" in ptx.text
    counts = T.hopper_instructions(ptx.text)
    assert counts["wgmma.mma_async"] >= 1 and counts["cp.async.bulk.tensor (TMA)"] >= 2 and counts["mbarrier"] >= 2
    assert counts["wmma.*"] == 0
    wmma = T.hopper_instructions(T.compile_wmma(arch="sm_90").text)
    assert wmma["wmma.*"] > 0 and wmma["wgmma.mma_async"] == 0


def test_wgmma_is_refused_off_hopper_and_the_model_numbers() -> None:
    import pytest as _pytest

    from labkit import tensorcores as T
    from labkit.errors import LabkitError

    with _pytest.raises(LabkitError, match="Hopper"):
        T.compile_wgmma(arch="sm_100a")
    assert T.smem_operand_bytes_per_clock("H200", 16, 16, 16) == 512
    assert T.smem_operand_bytes_per_clock("H100", 64, 256, 16) == 80
    assert T.smem_operand_bytes_per_clock("H100", 64, 256, 16, operands="b") == 64
    with _pytest.raises(LabkitError, match="no Tensor Core rate"):
        T.smem_operand_bytes_per_clock("V100", 16, 16, 16)


def test_wmma_against_cublas_needs_a_gpu_and_a_tile_multiple(monkeypatch) -> None:
    import pytest as _pytest

    import labkit
    from labkit import tensorcores as T
    from labkit.errors import LabkitError, NoGPUError

    monkeypatch.setenv("LABKIT_MODE", "sim")
    labkit.setup(quiet=True)
    with _pytest.raises(NoGPUError):
        T.wmma_against_cublas(256)
    with _pytest.raises(LabkitError, match="multiple of 16"):
        T.wmma_against_cublas(100)


def test_instructions_behind_a_guard_predicate_are_counted() -> None:
    from labkit import tensorcores

    ptx_text = ("\t@%p1 wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%f1}, %rd1, %rd2;\n"
                "\t@!%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd3];\n"
                "\t@%p3 wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 {%f2}, {%r2}, {%r3}, {%f3};\n"
                "\t// wgmma.fence in a comment\n")
    hopper = tensorcores.hopper_instructions(ptx_text)
    assert hopper["wgmma.mma_async"] == 1 and hopper["cp.async.bulk.tensor (TMA)"] == 1 and hopper["wmma.*"] == 1
    assert hopper["wgmma.fence"] == 0
    assert tensorcores.tensor_core_instructions(ptx_text) == {"wmma.load": 0, "wmma.mma": 1, "wmma.store": 0, "mma": 0,
                                                             "wgmma": 1}
