"""GPU errors as good as simulator errors: a CuPy, cuBLAS, CUDA or NVRTC exception turned into a
:class:`GpuError` that says which problem it is and what to do.

:func:`explain` classifies by exception type first (CuPy's ``OutOfMemoryError``, ``CUBLASError``,
``CUDARuntimeError``), then by the words of the message, so it works whichever layer raised. It never imports CuPy.
"""

from __future__ import annotations

import re

from labkit.errors import LabkitError

OUT_OF_MEMORY = "out of GPU memory"
MISSING_LIBRARY = "missing CUDA library"
UNSUPPORTED_TYPE = "unsupported dtype or compute type"
PEER_UNAVAILABLE = "peer access unavailable"
COMPILE = "CUDA C++ compile error"
OTHER = "GPU error"

_LIBS = {
    "cublas": "cuBLAS",
    "curand": "cuRAND",
    "cufft": "cuFFT",
    "cusolver": "cuSOLVER",
    "cusparse": "cuSPARSE",
    "nvrtc": "NVRTC",
    "nccl": "NCCL",
    "cudart": "the CUDA runtime",
}


class GpuError(LabkitError):
    """A GPU operation failed; :attr:`kind` is one of the module's kinds (``OUT_OF_MEMORY``, ...)."""

    def __init__(self, message: str, *, kind: str, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.kind = kind


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _type_names(exc: BaseException) -> set[str]:
    return {t.__name__ for t in type(exc).__mro__}


def kind_of(exc: BaseException) -> str:
    """Which kind of GPU problem ``exc`` is (one of the module constants)."""
    if isinstance(exc, GpuError):
        return exc.kind
    names = _type_names(exc)
    text = f"{type(exc).__name__}: {exc}".lower()
    if (
        "OutOfMemoryError" in names
        or "out of memory" in text
        or "memoryallocation" in text.replace(" ", "")
        or "alloc_failed" in text
        or isinstance(exc, MemoryError)
    ):
        return OUT_OF_MEMORY
    if isinstance(exc, (ImportError, OSError)) and any(lib in text for lib in _LIBS):
        return MISSING_LIBRARY
    if "cannot open shared object" in text or "library not found" in text or "could not load" in text:
        return MISSING_LIBRARY
    if "peer" in text and ("access" in text or "p2p" in text):
        return PEER_UNAVAILABLE
    if "CompileException" in names or "nvrtc_error_compilation" in text:
        return COMPILE
    if "CUBLASError" in names and re.search(r"not_supported|invalid_value|arch_mismatch", text):
        return UNSUPPORTED_TYPE
    if re.search(
        r"(unsupported|not supported|no kernel|not implemented).{0,40}(dtype|type|compute)|"
        r"(dtype|type).{0,40}(unsupported|not supported)",
        text,
    ):
        return UNSUPPORTED_TYPE
    return OTHER


def explain(exc: BaseException, what: str) -> GpuError:
    """A :class:`GpuError` for ``exc``, raised while doing ``what`` ("the FP16 GEMM", "peer_matrix()")."""
    if isinstance(exc, GpuError):
        return exc
    kind = kind_of(exc)
    detail = f"{type(exc).__name__}: {_first_line(exc)}"
    if kind == OUT_OF_MEMORY:
        return GpuError(
            f"{what} ran out of GPU memory ({detail}).",
            kind=kind,
            fix="Use a smaller size, delete arrays you no longer need, and free CuPy's cache with "
            "cupy.get_default_memory_pool().free_all_blocks(); other processes on the GPU (nvidia-smi) "
            "hold memory too.",
        )
    if kind == MISSING_LIBRARY:
        lib = next((name for key, name in _LIBS.items() if key in str(exc).lower()), "a CUDA library")
        return GpuError(
            f"{what} needs {lib}, which could not be loaded ({detail}).",
            kind=kind,
            fix="Install CuPy with its CUDA library wheels: pip install -c constraints.txt -e '.[cuda12]' "
            "(the [ctk] extra of cupy-cuda12x brings cuBLAS, cuRAND, cuFFT, cuSOLVER and cuSPARSE).",
        )
    if kind == UNSUPPORTED_TYPE:
        return GpuError(
            f"{what}: this GPU or library does not support the dtype or compute type asked for ({detail}).",
            kind=kind,
            fix="Use a precision this GPU has (labkit.hw.gpu(name).peaks lists them; FP8 needs "
            "Hopper, BF16 Ampere or newer), or a newer CuPy/cuBLAS.",
        )
    if kind == PEER_UNAVAILABLE:
        return GpuError(
            f"{what}: peer access between these GPUs is not available ({detail}).",
            kind=kind,
            fix="Check labkit.bandwidth.p2p_status() or `nvidia-smi topo -p2p r`; copies with "
            "peer_access=False still run, staged through host memory.",
        )
    if kind == COMPILE:
        return GpuError(
            f"{what}: the CUDA C++ did not compile ({detail}).",
            kind=kind,
            fix="Read the compiler's first error line; labkit.ptx.compile_cuda(source) shows it without a GPU.",
        )
    return GpuError(
        f"{what} failed on the GPU ({detail}).",
        kind=kind,
        fix="Run `labkit doctor` to check the driver, CuPy and the device; restart the kernel if an earlier "
        "error left the GPU in a bad state.",
    )
