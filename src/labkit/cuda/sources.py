"""The course's CUDA C++ kernels (for CuPy's RawKernel, RawModule, ElementwiseKernel, ReductionKernel), in one registry.

The whole-kernel sources (RawKernel, RawModule) live in ``kernels/cuda/*.cu`` beside the Numba reference
kernels, so they are highlighted, diffable and compilable by nvcc as they stand; this module reads them.
Notebooks show these sources and the checks use them as references; ``tests/test_ptx_cuda_sources.py``
compiles every one of them to PTX for sm_70, sm_80 and sm_90 with NVRTC. ElementwiseKernel and
ReductionKernel entries keep CuPy's pieces (parameter lists and expressions); :func:`source` turns them
into the equivalent standalone CUDA C++ (see :mod:`labkit.cuda_cpp`) for compiling without CuPy.

    >>> from labkit import kernels_cuda
    >>> kernels_cuda.get("leaky_relu").entries
    ('leaky_relu',)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from labkit.errors import LabkitError

Kind = Literal["raw", "module", "elementwise", "reduction"]


@dataclass(frozen=True)
class CudaKernel:
    """One CUDA C++ source of the course: a RawKernel/RawModule source, or an Elementwise/Reduction kernel's parts."""

    name: str
    kind: Kind
    lab: str
    code: str = ""  # raw / module: the whole source (read from kernels/cuda/<name>.cu)
    entries: tuple[str, ...] = ()  # raw / module: kernel names (extern "C")
    parts: dict[str, str] = field(default_factory=dict)  # elementwise / reduction: CuPy's constructor arguments
    description: str = ""
    min_arch: str = ""  # the oldest architecture it compiles for, when it needs a newer one (clusters: sm_90)

    def source(self) -> str:
        """Standalone CUDA C++ for NVRTC (for elementwise/reduction kernels: labkit's equivalent kernel)."""
        from labkit.cuda import cpp as cuda_cpp

        if self.kind in ("raw", "module"):
            return self.code
        if self.kind == "elementwise":
            return cuda_cpp.elementwise_source(
                self.parts["in_params"], self.parts["out_params"], self.parts["operation"], self.name
            )
        return cuda_cpp.reduction_source(cuda_cpp.ReductionParts(**self.parts, name=self.name))

    @property
    def entry_names(self) -> tuple[str, ...]:
        """The kernel (entry) names this source defines."""
        return self.entries or (self.name,)


#: Folder of the course's CUDA C++ sources (``*.cu``, compilable by nvcc and NVRTC as they stand) and of the
#: CPU stand-in's headers (``host/``, used only by :mod:`labkit.cuda_cpp`). Installed as package data.
from labkit.cuda import CUDA_DIR  # noqa: E402  (re-exported)


def read_source(filename: str) -> str:
    """The text of one of the course's ``.cu`` files (``kernels/cuda/<filename>``)."""
    if not isinstance(filename, str) or not filename.strip():
        raise LabkitError(
            f"filename must be the name of a .cu file such as 'leaky_relu.cu', got {filename!r:.60}.",
            fix=f"The files: {', '.join(sorted(p.name for p in CUDA_DIR.glob('*.cu')))}.",
        )
    path = CUDA_DIR / filename
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LabkitError(
            f"labkit's CUDA C++ source {filename} is missing ({exc.strerror}).",
            fix="Reinstall labkit (`pip install -e .`): the .cu files are package data.",
        ) from None


LEAKY_RELU = read_source("leaky_relu.cu")
ACTIVATIONS_MODULE = read_source("activations.cu")
SCALE_SHIFT = read_source("scale_shift.cu")
WMMA_GEMM = read_source("wmma_gemm.cu")
WGMMA_TILE = read_source("wgmma_tile.cu")
CLUSTER_SUM = read_source("cluster_sum.cu")
TMEM_TILE = read_source("tmem_tile.cu")

_REGISTRY: dict[str, CudaKernel] = {
    k.name: k
    for k in (
        CudaKernel(
            "leaky_relu",
            "raw",
            "05",
            code=LEAKY_RELU,
            entries=("leaky_relu",),
            description="RawKernel exercise solution: y = x if x > 0 else alpha * x, with a bounds check.",
        ),
        CudaKernel(
            "activations",
            "module",
            "05",
            code=ACTIVATIONS_MODULE,
            entries=("leaky_relu_fwd", "leaky_relu_bwd"),
            description="RawModule: a device function shared by two kernels (forward and backward), grid-stride loops.",
        ),
        CudaKernel(
            "scale_shift",
            "raw",
            "05",
            code=SCALE_SHIFT,
            entries=("scale_shift",),
            description="The compute stage of the stream-overlap pipeline: y = a * x + b, 64-bit indices.",
        ),
        CudaKernel(
            "wmma_gemm",
            "raw",
            "06",
            code=WMMA_GEMM,
            entries=("wmma_gemm",),
            description="WMMA exercise solution: C = A @ B with FP16 inputs and an FP32 accumulator, one warp per 16x16 tile.",
        ),
        CudaKernel(
            "wgmma_tile",
            "raw",
            "06",
            code=WGMMA_TILE,
            entries=("wgmma_tile",),
            description="Hopper (sm_90a) teaching tile: TMA copies and wgmma.mma_async in inline PTX; for reading its PTX "
            "(NVRTC passes inline PTX to any target; ptxas accepts it for sm_90a only).",
        ),
        CudaKernel(
            "cluster_sum",
            "raw",
            "10",
            code=CLUSTER_SUM,
            entries=("cluster_sum",),
            min_arch="sm_90",
            description="10.cluster solution: each cluster of blocks sums its part of x through distributed shared "
            "memory (cooperative_groups::this_cluster, map_shared_rank); sm_90 and later.",
        ),
        CudaKernel(
            "tmem_tile",
            "raw",
            "10",
            code=TMEM_TILE,
            entries=("tmem_tile",),
            description="10.tcgen05-tmem reference: one warp allocates Tensor Memory (tcgen05.alloc, TMEM_COLUMNS), "
            "relinquishes the permit and frees it after a barrier; inline PTX that ptxas accepts for sm_100a only.",
        ),
        CudaKernel(
            "huber",
            "elementwise",
            "05",
            parts={
                "in_params": "float32 x, float32 y, float32 delta",
                "out_params": "float32 z",
                "operation": "float d = fabsf(x - y); z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)",
            },
            description="ElementwiseKernel exercise solution: the Huber loss of each pair.",
        ),
        CudaKernel(
            "squared_diff",
            "elementwise",
            "05",
            parts={
                "in_params": "T x, T y",
                "out_params": "T z",
                "operation": "z = (x - y) * (x - y)",
            },
            description="ElementwiseKernel example with a type placeholder T.",
        ),
        CudaKernel(
            "l2norm",
            "reduction",
            "05",
            parts={
                "in_params": "T x",
                "out_params": "T y",
                "map_expr": "x * x",
                "reduce_expr": "a + b",
                "post_map_expr": "y = sqrt(a)",
                "identity": "0",
            },
            description="ReductionKernel exercise solution: the Euclidean norm.",
        ),
    )
}


def names(lab: str | None = None) -> list[str]:
    """Names of the registered kernels (of one lab, e.g. ``"05"``)."""
    return [n for n, k in _REGISTRY.items() if lab is None or k.lab == lab]


def get(name: str) -> CudaKernel:
    """The registered kernel called ``name``."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise LabkitError(f"no CUDA C++ kernel called {name!r} in labkit.", fix=f"Registered: {', '.join(_REGISTRY)}.") from None


def all_kernels() -> list[CudaKernel]:
    """Every registered kernel."""
    return list(_REGISTRY.values())
