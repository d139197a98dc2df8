"""Tensor Cores: a WMMA GEMM kernel, GEMM throughput runners, roofline expectations and peak dissection.

- :data:`WMMA_SOURCE`: a CUDA C++ GEMM (FP16 inputs, FP32 accumulation) written with the WMMA API, for
  CuPy's ``RawKernel``; :func:`compile_wmma` compiles it to PTX without a GPU (the Tensor Core
  instructions are visible there); :func:`run_wmma_gemm` runs it on a GPU and :func:`wmma_error` grades it.
- :func:`gpu_gemm_throughput`: CuPy matrix products in FP64, FP32, TF32, FP16, BF16 (FP8 where the stack
  has it) against the datasheet peak of the GPU from :mod:`labkit.hw` (GPU only).
- :func:`cpu_gemm_throughput`: NumPy's matrix product on this CPU, labelled as CPU figures.
- :func:`roofline_gemm`: the model's expectation for an n×n×n GEMM on a GPU from ``labkit.hw``.
- :func:`dissect_tensor_peak`: a datasheet peak taken apart into SMs × Tensor Cores × clock × work per clock.
- :func:`gpu_check`: the figures ``make gpu-check`` records (FP16/BF16 GEMM % of dense peak, WMMA correctness).
- Hopper: :data:`WGMMA_SOURCE`, a warpgroup GEMM tile with TMA and ``wgmma.mma_async`` (inline PTX, no CUTLASS);
  :func:`compile_wgmma` compiles it for ``sm_90a`` without a GPU and :func:`hopper_instructions` counts what
  it uses. WMMA on Hopper compiles to the warp-level ``mma.sync`` of Volta and Ampere; only ``wgmma`` (sm_90a,
  a warpgroup of 4 warps, operands read from shared memory) reaches Hopper's peak, as cuBLAS and CUTLASS do, and
  Blackwell (sm_100a) replaces it with ``tcgen05.mma`` and Tensor Memory. :func:`smem_operand_bytes_per_clock`
  is the model behind the lab's exercise: the shared-memory bytes per clock and SM an instruction shape needs to
  keep the Tensor Cores at their peak.

Nothing here imports CuPy at module level; the GPU functions import it when called in ``gpu`` mode.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from labkit.cuda import sources as _kernels_cuda
from labkit.errors import LabkitError, NoGPUError
from labkit.gpu._records import attribute_dict

__all__ = [
    "GemmRate",
    "PeakDissection",
    "WMMA_KERNEL",
    "WMMA_SOURCE",
    "WGMMA_SOURCE",
    "WMMA_TILE",
    "compile_wgmma",
    "compile_wmma",
    "hopper_instructions",
    "smem_operand_bytes_per_clock",
    "cpu_gemm_throughput",
    "dissect_tensor_peak",
    "gpu_check",
    "gpu_gemm_throughput",
    "roofline_gemm",
    "run_wmma_gemm",
    "tensor_core_instructions",
    "wmma_against_cublas",
    "wmma_error",
    "wmma_launch",
]

WMMA_TILE = 16
WMMA_KERNEL = "wmma_gemm"
WARPS_PER_BLOCK = 4

#: The WMMA GEMM reference kernel, read from ``kernels/cuda/wmma_gemm.cu`` (see :mod:`labkit.kernels_cuda`).
WMMA_SOURCE: str = _kernels_cuda.WMMA_GEMM
#: A Hopper warpgroup GEMM tile (TMA copies, ``wgmma.mma_async``), read from ``kernels/cuda/wgmma_tile.cu``: for
#: reading its PTX, not a tested GEMM (the file says what it leaves out).
WGMMA_SOURCE: str = _kernels_cuda.WGMMA_TILE


# ----------------------------------------------------------------------------- WMMA: compile, run, grade


def compile_wmma(source: str = WMMA_SOURCE, arch: str = "sm_90") -> Any:
    """Compile WMMA CUDA C++ to PTX for ``arch`` (sm_70 or newer) with NVRTC; works without a GPU."""
    if not isinstance(source, str):
        raise LabkitError(f"the kernel source must be a string of CUDA C++, not {type(source).__name__}.")
    if not isinstance(arch, str):
        raise LabkitError(f"arch must be an architecture name such as 'sm_90', not {type(arch).__name__}.")
    m = re.fullmatch(r"(?:sm_|compute_)?(\d)(\d)a?", arch.strip())
    if m and int(m.group(1)) < 7:
        raise LabkitError(f"{arch} has no Tensor Cores; WMMA needs sm_70 (Volta) or newer.", fix="Use arch='sm_80' or 'sm_90'.")
    from labkit.cuda import ptx

    return ptx.compile_cuda(source, arch, name="wmma_gemm.cu")


def _opcode(line: str) -> str:
    """The opcode of one PTX line (``wgmma.mma_async.sync...``), also behind a guard predicate (``@%p1``, ``@!%p2``)."""
    words = line.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def tensor_core_instructions(ptx_text: str) -> dict[str, int]:
    """Counts of the Tensor Core instruction families in PTX: ``wmma.load``, ``wmma.mma``, ``wmma.store``, ``mma``, ``wgmma``."""
    if not isinstance(ptx_text, str):
        raise LabkitError(f"tensor_core_instructions reads PTX text, not {type(ptx_text).__name__}.", fix="Pass ptx.text.")
    counts = {"wmma.load": 0, "wmma.mma": 0, "wmma.store": 0, "mma": 0, "wgmma": 0}
    for line in ptx_text.splitlines():
        op = _opcode(line)
        if op.startswith("wmma.load"):
            counts["wmma.load"] += 1
        elif op.startswith("wmma.mma"):
            counts["wmma.mma"] += 1
        elif op.startswith("wmma.store"):
            counts["wmma.store"] += 1
        elif op.startswith("wgmma"):
            counts["wgmma"] += 1
        elif op.startswith("mma."):
            counts["mma"] += 1
    return counts


def compile_wgmma(source: str = WGMMA_SOURCE, arch: str = "sm_90a") -> Any:
    """Compile a ``wgmma`` kernel to PTX for ``sm_90a`` with NVRTC (no GPU needed).

    ``wgmma`` exists only on ``sm_90a``: the ``a`` marks architecture-specific instructions, which PTX for ``sm_90``
    (portable to later GPUs) may not use. NVRTC copies inline PTX without reading it, so PTX for ``sm_90`` is
    produced anyway; ptxas (``PTX.resources()``) then rejects it. Blackwell (sm_100a) has ``tcgen05`` instead.
    """
    if not isinstance(source, str):
        raise LabkitError(f"the kernel source must be a string of CUDA C++, not {type(source).__name__}.")
    a = str(arch).strip().lower().replace("compute_", "sm_")
    if a not in ("sm_90a", "sm_90"):
        raise LabkitError(
            f"wgmma is a Hopper instruction: {arch} cannot run it.",
            fix="Use arch='sm_90a' (Blackwell, sm_100a, uses tcgen05.mma instead of wgmma).",
        )
    from labkit.cuda import ptx

    return ptx.compile_cuda(source, a, name="wgmma_tile.cu")


_HOPPER_OPS = (
    ("wgmma.mma_async", "wgmma.mma_async"),
    ("wgmma.fence", "wgmma.fence"),
    ("wgmma.commit_group", "wgmma.commit_group"),
    ("wgmma.wait_group", "wgmma.wait_group"),
    ("cp.async.bulk.tensor", "cp.async.bulk.tensor (TMA)"),
    ("mbarrier", "mbarrier"),
    ("wmma.", "wmma.*"),
    ("mma.sync", "mma.sync"),
    ("ldmatrix", "ldmatrix"),
    ("tcgen05", "tcgen05"),
)


def hopper_instructions(ptx_text: str) -> dict[str, int]:
    """Counts of the instructions that tell a Hopper GEMM from a Volta/Ampere-style one: ``wgmma.*`` and TMA
    (``cp.async.bulk.tensor``) with its ``mbarrier`` against ``wmma.*``, ``mma.sync`` and ``ldmatrix``."""
    if not isinstance(ptx_text, str):
        raise LabkitError(f"hopper_instructions reads PTX text, not {type(ptx_text).__name__}.", fix="Pass ptx.text.")
    counts = {label: 0 for _, label in _HOPPER_OPS}
    for line in ptx_text.splitlines():
        op = _opcode(line)
        if not op or op.startswith(("//", ".")):
            continue
        for prefix, label in _HOPPER_OPS:
            if op.startswith(prefix) or (
                prefix == "mma.sync" and op.startswith("mma.") and ".sync" in op and not op.startswith("wmma")
            ):
                counts[label] += 1
                break
    return counts


def smem_operand_bytes_per_clock(gpu_name: str, m: int, n: int, k: int, *, operands: str = "ab", element_bytes: int = 2) -> float:
    """A model: the shared-memory bytes per clock per SM that Tensor Core instructions of shape m×n×k need to run
    at the GPU's dense FP16 peak, when each instruction reads its operands (``"ab"``: A and B; ``"b"``: B only, as
    ``wgmma`` with A in registers) from shared memory once.

    FLOPs per clock per SM = Tensor Cores per SM × FMA per Tensor Core per clock × 2; each instruction does
    2·m·n·k FLOPs and reads (m·k + k·n)·element_bytes bytes. Compare the result with the SM's
    ``shared_memory_bandwidth_per_sm`` (labkit.hw): above it, shared memory, not the Tensor Cores, sets the pace.
    """
    from labkit import hw

    g = hw.gpu(gpu_name)
    if g.tensor_core_fma_per_clock is None or g.tensor_cores_per_sm is None:
        have = [n_ for n_ in hw.gpus() if hw.gpu(n_).tensor_core_fma_per_clock is not None]
        raise LabkitError(f"labkit.hw has no Tensor Core rate per clock for the {g.name}.", fix=f"Use one of {', '.join(have)}.")
    for name_, v in (("m", m), ("n", n), ("k", k), ("element_bytes", element_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise LabkitError(f"{name_} must be a positive integer, not {v!r}.")
    if operands not in ("ab", "b"):
        raise LabkitError(f"operands={operands!r} is not an option.", fix='Use "ab" (A and B from shared memory) or "b".')
    flop_per_clock = g.tensor_cores_per_sm.value * g.tensor_core_fma_per_clock.value * 2
    bytes_per_instruction = ((m * k if operands == "ab" else 0) + k * n) * element_bytes
    return float(flop_per_clock * bytes_per_instruction / (2 * m * n * k))


def _check_wmma_shapes(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    if a.ndim != 2 or b.ndim != 2:
        raise LabkitError(f"the WMMA GEMM takes two matrices, got {a.ndim}-D and {b.ndim}-D arrays.")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise LabkitError(f"inner dimensions differ: A is {M}×{K}, B is {K2}×{N}.", fix="A must be M×K and B K×N.")
    bad = [f"{n}={v}" for n, v in (("M", M), ("N", N), ("K", K)) if v % WMMA_TILE or v == 0]
    if bad:
        raise LabkitError(
            f"this WMMA kernel works on whole 16×16×16 tiles, but {', '.join(bad)} is not a positive multiple of 16.",
            fix="Pad the matrices with zeros to multiples of 16 (and crop the result), or use cupy.matmul.",
        )
    return M, N, K


def wmma_launch(M: int, N: int, warps: int = WARPS_PER_BLOCK) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) for :data:`WMMA_SOURCE`: one warp per 16×16 tile of C, ``warps`` warps per block."""
    from labkit.validate import require_int

    M, N = require_int(M, "M", min=1), require_int(N, "N", min=1)
    warps = require_int(warps, "warps", min=1, max=32)
    tiles_m, tiles_n = -(-M // WMMA_TILE), -(-N // WMMA_TILE)
    return (tiles_n, -(-tiles_m // warps)), (32, warps)


def run_wmma_gemm(a: Any, b: Any, source: str = WMMA_SOURCE, *, kernel: str = WMMA_KERNEL) -> np.ndarray:
    """Run a WMMA kernel on the GPU: A and B rounded to FP16, C in FP32; returns C as a float64 host array.

    M, N and K must be multiples of 16 (anything else is a :class:`~labkit.errors.LabkitError`). Needs ``gpu`` mode.
    """
    from labkit.mode import env
    from labkit.validate import require_array

    A = require_array(a, "a", ndim=2).astype(np.float64)
    B = require_array(b, "b", ndim=2).astype(np.float64)
    if not isinstance(source, str) or not isinstance(kernel, str):
        raise LabkitError("source and kernel must be strings: the CUDA C++ text and the kernel's name.")
    M, N, K = _check_wmma_shapes(A, B)
    if not env().is_gpu:
        raise NoGPUError(
            "running the WMMA kernel needs a GPU (this is sim mode).", fix="Compile it to PTX with compile_wmma() instead."
        )
    if env().compute_capability and env().compute_capability < (7, 0):
        raise NoGPUError(f"{env().device_name} has no Tensor Cores (compute capability below 7.0).")
    import cupy as cp

    from labkit.gpu.errors import explain

    try:
        fn = _wmma_kernel(cp, source, kernel)
        dA = cp.asarray(A.astype(np.float16))
        dB = cp.asarray(B.astype(np.float16))
        dC = cp.full((M, N), np.nan, dtype=cp.float32)
        grid, block = wmma_launch(M, N)
        fn(grid, block, _wmma_args(dA, dB, dC))
        cp.cuda.runtime.deviceSynchronize()
        return cp.asnumpy(dC).astype(np.float64)
    except Exception as exc:  # noqa: BLE001 - out of memory, compile error, ...: say which
        raise explain(exc, f"the WMMA kernel ({M}x{K} @ {K}x{N})") from None


def _wmma_kernel(cp: Any, source: str, name: str = WMMA_KERNEL) -> Any:
    """CuPy's RawKernel of a WMMA source, compiled with the headers of CuPy's own NVRTC (see :func:`wmma_include_dirs`)."""
    include = wmma_include_dirs(cupy_nvrtc_major())
    return cp.RawKernel(source, name, options=("--std=c++17",) + tuple(f"-I{d}" for d in include))


def _wmma_args(a: Any, b: Any, c: Any) -> tuple[Any, ...]:
    """The WMMA kernel's arguments, in its parameter order: A (M×K, half), B (K×N, half), C (M×N, float), M, N, K."""
    return (a, b, c, np.int32(a.shape[0]), np.int32(b.shape[1]), np.int32(a.shape[1]))


def cupy_nvrtc_major() -> int | None:
    """The CUDA major version of the NVRTC CuPy compiles with (13 for cupy-cuda13x), None when it cannot say."""
    try:
        from cupy.cuda import nvrtc

        return int(nvrtc.getVersion()[0])
    except Exception:  # noqa: BLE001 - no CuPy, or no NVRTC library for it: labkit's own NVRTC decides
        return None


def _toolkit_roots() -> list[Path]:
    """CUDA toolkits to look in: ``CUDA_HOME``, ``CUDA_PATH``, the one ``nvcc`` on PATH belongs to, /usr/local/cuda."""
    from labkit.cuda import ptx

    return [root for _, root in ptx.toolkit_roots()]


def _pathfinder_headers() -> list[str]:
    """Header folders cuda-pathfinder finds (it knows the CUDA 12 and CUDA 13 wheel layouts and conda)."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return []
    out = []
    for lib in ("cudart", "nvcc"):
        try:
            found = find_nvidia_header_directory(lib)
        except Exception:  # noqa: BLE001 - unknown name in an older pathfinder: not found
            found = None
        if found:
            out.append(str(found))
    return out


def wmma_include_dirs(cuda_major: int | None = None) -> list[str]:
    """Header folders that give WMMA's ``mma.h`` and the ``crt/mma.h`` it includes: the pinned CUDA wheels
    (``crt/mma.h`` comes only with the nvcc wheel), else what cuda-pathfinder finds (CUDA 13 wheel layouts), else a
    CUDA toolkit at ``CUDA_HOME``, ``CUDA_PATH``, the one of the ``nvcc`` on PATH, or ``/usr/local/cuda``. Raises :class:`~labkit.errors.LabkitError` naming both ways when neither has them.
    ``cuda_major`` picks the headers of that CUDA version (the NVRTC that compiles: CuPy's own on a GPU, which
    can be CUDA 13 beside cuda-bindings 12); default: the version of labkit's NVRTC."""
    from labkit.cuda import ptx

    dirs = list(ptx.cuda_include_dirs(cuda_major))

    def has(rel: str) -> bool:
        return any((Path(d) / rel).is_file() for d in dirs)

    if not (has("mma.h") and has("crt/mma.h")):
        dirs += [d for d in _pathfinder_headers() if d not in dirs]

    if not (has("mma.h") and has("crt/mma.h")):
        for root in _toolkit_roots():
            inc = root / "include"
            if (inc / "crt" / "mma.h").is_file() and (inc / "mma.h").is_file() and str(inc) not in dirs:
                dirs.append(str(inc))
                break
    if not (has("mma.h") and has("crt/mma.h")):
        raise LabkitError(
            "the WMMA kernel needs the CUDA headers mma.h and crt/mma.h, and neither the CUDA wheels nor a CUDA "
            "toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda) has both.",
            fix="pip install nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 (labkit's requirements), "
            "or set CUDA_HOME to a CUDA toolkit.",
        )
    return dirs


def _include_dirs() -> list[str]:
    return wmma_include_dirs()


@dataclass(frozen=True)
class WmmaGrade:
    """How far a WMMA result is from the float64 product: worst ratio of error to the FP16/FP32 error bound."""

    max_abs_error: float
    relative_error: float
    worst_ratio: float  # max |error| / bound; below 1 means within tolerance
    first_bad: tuple[int, int] | None
    unwritten: int

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.worst_ratio <= 1.0


def wmma_error(c: Any, a: Any, b: Any) -> WmmaGrade:
    """Grade ``c ≈ a @ b`` computed with FP16 inputs and FP32 accumulation, against the float64 product.

    The tolerance is set by the precision: :func:`labkit.precision.gemm_tolerance` for FP16 inputs and an FP32
    accumulator, with a margin of 2.
    """
    from labkit.numerics import precision
    from labkit.validate import require_array

    C, A, B = (require_array(x, name, ndim=2).astype(np.float64) for x, name in ((c, "c"), (a, "a"), (b, "b")))
    if A.shape[1] != B.shape[0]:
        raise LabkitError(f"inner dimensions differ: a is {A.shape}, b is {B.shape}.", fix="a must be M×K and b K×N.")
    ref = A @ B
    if C.shape != ref.shape:
        raise LabkitError(f"the result is {C.shape}, the product is {ref.shape}.")
    bound = 2 * precision.gemm_tolerance(A, B, "fp16", "fp32")
    unwritten = int(np.isnan(C).sum())
    with np.errstate(invalid="ignore"):
        err = np.abs(C - ref)
        ratio = np.where(np.isnan(err), np.inf, err / bound)
    bad = np.argwhere(ratio > 1.0)
    return WmmaGrade(
        max_abs_error=float(np.nanmax(err)) if np.isfinite(err).any() else float("inf"),
        relative_error=precision.relative_error(np.nan_to_num(C, nan=0.0), ref),
        worst_ratio=float(ratio.max()),
        first_bad=tuple(int(i) for i in bad[0]) if len(bad) else None,  # type: ignore[arg-type]
        unwritten=unwritten,
    )


# ----------------------------------------------------------------------------- GEMM throughput


@dataclass
class GemmRate:
    """One GEMM throughput figure: measured (GPU or CPU) or a model; ``kind`` says which."""

    precision: str
    n: int
    kind: str  # "GPU measurement", "CPU measurement", "model"
    device: str
    tflops: float | None
    peak_tflops: float | None = None
    peak_source: str | None = None
    median_s: float | None = None
    note: str = ""

    @property
    def percent_of_peak(self) -> float | None:
        if self.tflops is None or not self.peak_tflops:
            return None
        return 100.0 * self.tflops / self.peak_tflops

    def as_dict(self) -> dict[str, Any]:
        return attribute_dict(self, "precision n kind device tflops peak_tflops peak_source median_s percent_of_peak note")

    def __str__(self) -> str:
        rate = f"{self.tflops:,.3g} TFLOP/s" if self.tflops is not None else "—"
        pct = (
            f" = {self.percent_of_peak:.0f}% of {self.peak_tflops:,.4g} ({self.peak_source})"
            if self.percent_of_peak is not None
            else ""
        )
        note = f"  [{self.note}]" if self.note else ""
        return f"{self.precision:5s} n={self.n:<5d} {rate:>16s}{pct}  ({self.kind}, {self.device}){note}"


GPU_PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
#: The Tensor Core feature (labkit.gpu.profiles) each precision's GEMM needs; FP32 and FP64 run on any GPU.
_TENSOR_FEATURE = {"tf32": "tf32_tensor", "fp16": "fp16_tensor", "bf16": "bf16_tensor", "fp8": "fp8_tensor"}


@contextlib.contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    """Switch CuPy's float32 matrix products to TF32 Tensor Cores (``CUPY_TF32``) and back."""
    try:
        from cupy._core import _routines_linalg as rl  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - very old CuPy
        rl = None
    if rl is not None and hasattr(rl, "set_compute_type"):
        import numpy

        before = rl.get_compute_type(numpy.float32)
        # TF32 off is CuPy's DEFAULT (cuBLAS CUBLAS_COMPUTE_32F: plain FP32), not PEDANTIC, which also disables
        # cuBLAS's algorithmic optimisations and would make the FP32 baseline slower than FP32 really is.
        rl.set_compute_type(numpy.float32, rl.COMPUTE_TYPE_TF32 if enabled else rl.COMPUTE_TYPE_DEFAULT)
        try:
            yield
        finally:
            rl.set_compute_type(numpy.float32, before)
    else:  # CuPy reads CUPY_TF32 the first time it multiplies float32 matrices
        old = os.environ.get("CUPY_TF32")
        os.environ["CUPY_TF32"] = "1" if enabled else "0"
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("CUPY_TF32", None)
            else:
                os.environ["CUPY_TF32"] = old


def _cupy_dtype(precision: str) -> Any:
    import ml_dtypes

    return {
        "fp64": np.float64,
        "fp32": np.float32,
        "tf32": np.float32,
        "fp16": np.float16,
        "bf16": ml_dtypes.bfloat16,
        "fp8": ml_dtypes.float8_e4m3fn,
    }[precision]


def _device_gpu() -> Any:
    """The current GPU's labkit.hw record (a MIG slice's parent GPU), or None."""
    from labkit.gpu import bench

    return bench.device_hw()[0]


# cuBLAS enum values (cublas_api.h, library_types.h)
_CUDA_R_32F, _CUDA_R_16BF = 0, 14
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1


def _cublas() -> Any:
    """CuPy's cuBLAS bindings, loaded the way CuPy loads them (``cupy.cuda.cublas`` finds the cuBLAS wheel first;
    importing ``cupy_backends.cuda.libs.cublas`` directly fails with "libcublas.so.12: cannot open shared object")."""
    from cupy.cuda import cublas

    return cublas


def cublas_bf16_matmul(a: Any, b: Any, out: Any) -> Any:
    """``out = a @ b`` for row-major BF16 CuPy matrices with cuBLAS ``GemmEx`` (BF16 in, FP32 accumulate).

    CuPy's own ``matmul`` may not send BF16 to cuBLAS; this calls cuBLAS directly through CuPy's bindings, so
    the Tensor Cores do the work. ``out`` is float32 or BF16. Row-major ``C = A B`` is column-major
    ``C^T = B^T A^T``, hence B first and the dimensions (n, m, k).
    """
    import cupy as cp

    cublas = _cublas()
    m, k = a.shape
    k2, n = b.shape
    if k != k2 or out.shape != (m, n):
        raise LabkitError(f"shapes {a.shape} @ {b.shape} -> {out.shape} do not match.")
    if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
        raise LabkitError("cublas_bf16_matmul needs C-contiguous matrices.", fix="Pass cupy.ascontiguousarray(x).")
    out_type = _CUDA_R_16BF if out.dtype == a.dtype else _CUDA_R_32F
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)  # host scalars (FP32, as the compute type wants)
    handle = cp.cuda.device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    stream = cublas.getStream(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    # on the caller's current stream, as cp.matmul does (CuPy sets it per call): else a caller inside `with stream:` is
    # timed by events on one stream while the GEMM runs on another (review 4, C6)
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    try:
        cublas.gemmEx(
            handle,
            cublas.CUBLAS_OP_N,
            cublas.CUBLAS_OP_N,
            n,
            m,
            k,
            one.ctypes.data,
            b.data.ptr,
            _CUDA_R_16BF,
            n,
            a.data.ptr,
            _CUDA_R_16BF,
            k,
            zero.ctypes.data,
            out.data.ptr,
            out_type,
            n,
            _CUBLAS_COMPUTE_32F,
            _CUBLAS_GEMM_DEFAULT,
        )
    finally:
        cublas.setPointerMode(handle, mode)
        cublas.setStream(handle, stream)
    return out


def gpu_gemm_throughput(
    precisions: Sequence[str] = GPU_PRECISIONS, n: int = 8192, *, repeat: int = 10, warmup: int = 3
) -> list[GemmRate]:
    """CuPy ``a @ b`` for n×n matrices of random normal data in each precision, timed with CUDA events.

    FP32 runs with TF32 off, TF32 is FP32 data with CuPy's TF32 compute type (``CUPY_TF32``), BF16 and FP8
    use the ``ml_dtypes`` types; BF16 goes to cuBLAS ``GemmEx`` directly (:func:`cublas_bf16_matmul`). A precision the stack cannot run gets a row with ``tflops=None`` and the
    reason. Peaks are the dense datasheet figures of the matching GPU in :mod:`labkit.hw`. GPU only.
    """
    from labkit.gpu import bench
    from labkit.gpu.errors import UNSUPPORTED_TYPE, explain
    from labkit.mode import env

    if not env().is_gpu:
        raise NoGPUError(
            "GPU GEMM throughput needs a GPU (this is sim mode).", fix="Use cpu_gemm_throughput() and roofline_gemm() instead."
        )
    import cupy as cp

    from labkit.gpu.profiles import needs

    gpu, compute, _, scaled = bench.device_hw()  # a MIG slice: its parent's record, the peak scaled to its SMs
    rows = []
    for p in precisions:
        if p not in GPU_PRECISIONS:
            raise LabkitError(f"unknown precision {p!r} for the GPU GEMM.", fix=f"Use some of {', '.join(GPU_PRECISIONS)}.")
        peak, source = None, None
        if gpu is not None:
            try:
                fig = gpu.peak(p)
                peak, source = fig.value * compute, f"{fig.source}{scaled}"
            except LabkitError:
                pass
        missing = needs(_TENSOR_FEATURE[p], env()) if p in _TENSOR_FEATURE else None
        if missing is not None:  # this GPU has no such Tensor Cores: said, not tried (cuBLAS would fail or fall back)
            rows.append(
                GemmRate(
                    p,
                    n,
                    "GPU measurement",
                    env().device_name,
                    None,
                    peak,
                    source,
                    note=f"{missing} roofline_gemm() models it for a GPU that has them.",
                )
            )
            continue
        try:
            with _tf32(p == "tf32"):
                gen = cp.random.default_rng()
                a = gen.standard_normal((n, n), dtype=cp.float32).astype(_cupy_dtype(p))
                b = gen.standard_normal((n, n), dtype=cp.float32).astype(_cupy_dtype(p))
                if p == "bf16":  # straight to cuBLAS: CuPy's matmul may not route BF16 there
                    c = cp.empty((n, n), dtype=a.dtype)
                    t = bench.measure(
                        cublas_bf16_matmul,
                        a,
                        b,
                        c,
                        name="cuBLAS bf16 gemm",
                        flops=2.0 * n**3,
                        warmup=warmup,
                        repeat=repeat,
                        precision=p,
                    )
                    note = "cuBLAS GemmEx through CuPy's bindings (BF16 in, FP32 accumulate)"
                else:
                    t = bench.measure(
                        cp.matmul, a, b, name=f"cupy {p} gemm", flops=2.0 * n**3, warmup=warmup, repeat=repeat, precision=p
                    )
                    note = "TF32 compute type" if p == "tf32" else ""
                del a, b
            rows.append(GemmRate(p, n, "GPU measurement", env().device_name, t.tflops, peak, source, t.median_s, note=note))
        except Exception as exc:  # noqa: BLE001 - each failure is a row that says which and what to do
            err = explain(exc, f"the {p.upper()} GEMM (n={n})")
            label = f"not supported by this stack (CuPy {cp.__version__})" if err.kind == UNSUPPORTED_TYPE else err.kind
            rows.append(
                GemmRate(
                    p,
                    n,
                    "GPU measurement",
                    env().device_name,
                    None,
                    peak,
                    source,
                    note=f"{label}: {err.args[0]} What to do: {err.fix}",
                )
            )
        finally:
            cp.get_default_memory_pool().free_all_blocks()
    return rows


def wmma_against_cublas(n: int = 4096, source: str = WMMA_SOURCE, *, repeat: int = 5) -> list[GemmRate]:
    """GPU only: the same FP16 n×n GEMM (FP32 accumulation) timed twice with CUDA events, by a WMMA kernel (``source``,
    launched as :func:`wmma_launch` says: one warp per 16×16 tile) and by cuBLAS through ``cupy.matmul`` (on Hopper
    its kernels use ``wgmma``), each against the dense FP16 peak of the GPU in :mod:`labkit.hw`. Measurements."""
    from labkit.gpu import bench
    from labkit.gpu.errors import explain
    from labkit.mode import env
    from labkit.validate import require_int

    n = require_int(n, "n", min=16, max=16384)
    repeat = require_int(repeat, "repeat", min=1, max=100)
    if n % WMMA_TILE:
        raise LabkitError(f"n={n} is not a multiple of 16, the WMMA tile.", fix="Use n = 4096 or another multiple of 16.")
    if not isinstance(source, str):
        raise LabkitError(f"the kernel source must be a string of CUDA C++, not {type(source).__name__}.")
    if not env().is_gpu:
        raise NoGPUError(
            "timing the WMMA kernel against cuBLAS needs a GPU (this is sim mode).",
            fix="Read the PTX (compile_wmma, compile_wgmma) and the model (smem_operand_bytes_per_clock) instead.",
        )
    import cupy as cp

    gpu, compute, _, scaled = bench.device_hw()
    peak, peak_source = None, None
    if gpu is not None and gpu.has("fp16"):
        peak, peak_source = gpu.peak("fp16").value * compute, f"{gpu.peak('fp16').source}{scaled}"
    try:
        kernel = _wmma_kernel(cp, source)
        gen = cp.random.default_rng()
        a = gen.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
        b = gen.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
        c = cp.empty((n, n), dtype=cp.float32)
        grid, block = wmma_launch(n, n)
        args = _wmma_args(a, b, c)
        t_wmma = bench.measure(
            kernel, grid, block, args, name="WMMA kernel", flops=2.0 * n**3, warmup=2, repeat=repeat, precision="fp16"
        )
        t_cublas = bench.measure(
            cp.matmul, a, b, name="cuBLAS fp16 gemm", flops=2.0 * n**3, warmup=2, repeat=repeat, precision="fp16"
        )
    except Exception as exc:  # noqa: BLE001 - compile errors, out of memory: said in words
        raise explain(exc, f"timing the WMMA kernel against cuBLAS (n={n})") from None
    finally:
        cp.get_default_memory_pool().free_all_blocks()
    device = env().device_name
    return [
        GemmRate(
            "fp16",
            n,
            "GPU measurement",
            device,
            t_wmma.tflops,
            peak,
            peak_source,
            t_wmma.median_s,
            note="a naive WMMA kernel (warp-level wmma.mma.sync, every fragment loaded from global memory, no "
            "shared-memory tiling or reuse) against cuBLAS: most of the gap is the kernel's, not WMMA's",
        ),
        GemmRate(
            "fp16",
            n,
            "GPU measurement",
            device,
            t_cublas.tflops,
            peak,
            peak_source,
            t_cublas.median_s,
            note="cuBLAS through cupy.matmul",
        ),
    ]


def cpu_gemm_throughput(n: int = 256, precisions: Sequence[str] = ("fp64", "fp32", "fp16"), *, repeat: int = 5) -> list[GemmRate]:
    """NumPy's ``a @ b`` on this CPU (random normal data). These are CPU figures, whatever the mode.

    FP64 and FP32 go to the CPU's BLAS; FP16 (and BF16 through ml_dtypes) have no BLAS and run an
    unvectorised loop: the gap is itself a lesson, not a Tensor Core figure.
    """
    import platform
    import time

    from labkit.validate import require_int, require_sequence

    n = require_int(n, "n", min=1, max=4096)
    repeat = require_int(repeat, "repeat", min=1, max=100)
    precisions = require_sequence(precisions, "precisions", min_len=1)
    rng = np.random.default_rng()
    rows = []
    cpu = f"CPU ({platform.machine()}, NumPy)"
    for p in precisions:
        dt = (
            {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "bf16": None}.get(p, "bad")
            if isinstance(p, str)
            else "bad"
        )
        if dt == "bad":
            raise LabkitError(f"no CPU GEMM for {p!r}.", fix="Use fp64, fp32, fp16 or bf16.")
        if dt is None:
            import ml_dtypes

            dt = ml_dtypes.bfloat16
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        a @ b  # warm-up
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            a @ b
            samples.append(time.perf_counter() - t0)
        med = float(np.median(samples))
        rows.append(
            GemmRate(
                p,
                n,
                "CPU measurement",
                cpu,
                2.0 * n**3 / med / 1e12,
                median_s=med,
                note="BLAS" if p in ("fp64", "fp32") else "no BLAS for this type",
            )
        )
    return rows


def roofline_gemm(gpu_name: str, precision: str, n: int = 8192) -> GemmRate:
    """The roofline model's rate for an n×n×n GEMM on a GPU: min(peak, intensity × memory bandwidth).

    Traffic is the minimum: A and B read once, C written once (``3 n²`` elements); FLOPs are ``2 n³``.
    A model, from the datasheet figures in :mod:`labkit.hw` — not a measurement.
    """
    from labkit import hw
    from labkit.validate import require_int

    n = require_int(n, "n", min=1)
    gpu = hw.gpu(gpu_name)
    peak = gpu.peak(precision)
    precision = hw._normalise_precision(precision)
    size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}[precision.lower()]
    intensity = 2.0 * n**3 / (3.0 * n * n * size)
    bw = gpu.memory_bandwidth.to("GB/s").value if hasattr(gpu.memory_bandwidth, "to") else gpu.memory_bandwidth.value
    memory_bound = intensity * bw * 1e9 / 1e12
    rate = min(peak.value, memory_bound)
    bound = "compute-bound" if peak.value <= memory_bound else "memory-bound"
    sources = "; ".join(dict.fromkeys((peak.source, gpu.memory_bandwidth.source)))
    return GemmRate(
        precision,
        n,
        "model",
        gpu.name,
        rate,
        peak.value,
        sources,
        note=f"{bound}: {intensity:.0f} FLOP/B × {bw:,.0f} GB/s = {memory_bound:,.0f} TFLOP/s",
    )


# ----------------------------------------------------------------------------- peak dissection


@dataclass
class PeakDissection:
    """A datasheet peak taken apart: SMs × units per SM × 2 FLOP per FMA × FMAs per unit per clock × clock."""

    gpu: str
    precision: str
    peak_tflops: float
    peak_source: str
    sm_count: int
    sm_source: str
    tensor_cores_per_sm: int
    tc_source: str
    clock_ghz: float
    clock_how: str
    fma_per_tensor_core_per_clock: float
    lines: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.lines)


def implied_clock_ghz(gpu_name: str) -> tuple[float, str]:
    """The boost clock implied by the FP32 CUDA-core peak: peak / (SMs × FP32 cores per SM × 2 FLOP)."""
    from labkit import hw

    g = hw.gpu(gpu_name)
    clock = getattr(g, "boost_clock", None)
    if clock is not None:
        return clock.to("GHz").value if hasattr(clock, "to") else clock.value, f"boost clock ({clock.source})"
    fp32 = g.peak("fp32") if g.has("fp32") else None  # FP32 runs on the CUDA cores on every GPU here
    if fp32 is None or g.fp32_cores_per_sm is None:
        raise LabkitError(f"labkit.hw has neither a clock nor FP32 core counts for the {g.name}.")
    ghz = fp32.value * 1e12 / (g.sm_count.value * g.fp32_cores_per_sm.value * 2) / 1e9
    how = (
        f"implied by the FP32 peak: {fp32.value:g} TFLOP/s / ({g.sm_count.value:.0f} SMs × "
        f"{g.fp32_cores_per_sm.value:.0f} FP32 cores × 2 FLOP) = {ghz:.3f} GHz ({fp32.source}; {g.fp32_cores_per_sm.source})"
    )
    return ghz, how


def dissect_tensor_peak(gpu_name: str, precision: str = "fp16", sparse: bool = False) -> PeakDissection:
    """How many FMAs each Tensor Core does per clock for a datasheet peak, from the figures in :mod:`labkit.hw`."""
    from labkit import hw

    g = hw.gpu(gpu_name)
    peak = g.peak(precision, sparse=sparse)
    if g.tensor_cores_per_sm is None or not g.tensor_cores_per_sm.value:
        raise LabkitError(f"the {g.name} has no Tensor Cores.")
    ghz, how = implied_clock_ghz(gpu_name)
    sms, tcs = g.sm_count.value, g.tensor_cores_per_sm.value
    fma = peak.value * 1e12 / (sms * tcs * 2 * ghz * 1e9)
    label = f"{precision.upper()}{' sparse' if sparse else ''}"
    lines = [
        f"{g.name} {label} peak: {peak.value:g} TFLOP/s ({peak.source})",
        f"  SMs: {sms:.0f} ({g.sm_count.source}); Tensor Cores per SM: {tcs:.0f} ({g.tensor_cores_per_sm.source})",
        f"  clock: {how}",
        f"  FMA per Tensor Core per clock = {peak.value:g}e12 / ({sms:.0f} × {tcs:.0f} × 2 × {ghz:.3f}e9) = {fma:.1f}",
        f"  per SM per clock: {fma * tcs:.0f} FMA = {2 * fma * tcs:.0f} FLOP",
    ]
    return PeakDissection(
        g.name,
        label,
        peak.value,
        peak.source,
        int(sms),
        g.sm_count.source,
        int(tcs),
        g.tensor_cores_per_sm.source,
        ghz,
        how,
        fma,
        lines,
    )


# ----------------------------------------------------------------------------- make gpu-check


def gpu_check(n: int = 8192) -> dict[str, Any]:
    """What ``make gpu-check`` records for Lab 06: CuPy FP16/BF16 GEMM % of dense peak (target ≥ 70%) and
    whether :data:`WMMA_SOURCE` is correct on random inputs. GPU only."""
    rows = gpu_gemm_throughput(("fp16", "bf16"), n=n)
    rng = np.random.default_rng()
    wmma: list[dict[str, Any]] = []
    for M, N, K in ((16, 16, 16), (48, 80, 64), (256, 128, 512)):
        a, b = rng.uniform(-1, 1, (M, K)), rng.uniform(-1, 1, (K, N))
        try:
            grade = wmma_error(run_wmma_gemm(a, b), a, b)
        except LabkitError as exc:  # missing headers, compile error, out of memory: recorded, not a crash
            wmma.append({"shape": [M, N, K], "ok": False, "error": str(exc)})
            continue
        wmma.append(
            {"shape": [M, N, K], "ok": grade.ok, "relative_error": grade.relative_error, "worst_ratio": grade.worst_ratio}
        )
    targets = [
        {
            "name": f"tensorcores.{r.precision}-gemm-vs-dense-peak",
            "target": f"CuPy {r.precision.upper()} GEMM >= 70% of the datasheet dense Tensor Core peak",
            "value": r.percent_of_peak,
            "threshold": 70.0,
            "unit": "%",
            "passed": None if r.percent_of_peak is None else r.percent_of_peak >= 70.0,
            "details": r.as_dict(),
            **(
                {}
                if r.tflops is not None and r.peak_tflops
                else {"error": r.note or "no datasheet peak for this GPU in labkit.hw"}
            ),
        }
        for r in rows
    ]
    targets.append(
        {
            "name": "tensorcores.wmma-correct",
            "target": "the WMMA solution is correct on random inputs",
            "value": sum(bool(w["ok"]) for w in wmma),
            "threshold": len(wmma),
            "unit": "shapes correct",
            "passed": all(w["ok"] for w in wmma),
            "details": {"wmma": wmma},
            **({"error": next(w["error"] for w in wmma if "error" in w)} if any("error" in w for w in wmma) else {}),
        }
    )
    return {
        "gemm": [r.as_dict() for r in rows],
        "gemm_target_percent": 70,
        "gemm_meets_target": all((r.percent_of_peak or 0) >= 70 for r in rows),
        "wmma": wmma,
        "wmma_ok": all(w["ok"] for w in wmma),
        "targets": targets,
    }
