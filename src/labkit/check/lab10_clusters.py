"""Check for lab 10's Hopper exercise: a cluster sum through distributed shared memory, in CUDA C++.

The learner completes ``cluster_sum(const float* x, float* out, int n)``: each block reduces its elements in its
own shared memory; then block rank 0 of each thread-block cluster adds its peers' partial sums, read straight from
their shared memory (``cluster.map_shared_rank``), and writes ``out[cluster index]``.

Everywhere, the check compiles the source for sm_90 with NVRTC and reads the PTX: a read of a peer's shared memory
(``mapa``), a cluster barrier (``barrier.cluster.wait``) before the first such read, so the peers have written
their sums, and one after the last, so no block exits while its shared memory is still being read, and the
block's rank in its cluster (``%cluster_ctarank``) choosing who combines. The simulator cannot run a cluster, so in
``sim`` mode that is the whole check, and it says so. On a GPU of compute capability 9.0 or later it also launches
the kernel through ``cuda.core`` with clusters of 2 and 4 blocks on fresh data and compares every cluster's sum.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .core import Failed, Unsolved, exercise

ARCH = "sm_90"
ENTRY = "cluster_sum"


def reference_source() -> str:
    """labkit's solution (``kernels/cuda/cluster_sum.cu``)."""
    from ..kernels_cuda import read_source

    return read_source("cluster_sum.cu")


@dataclass(frozen=True)
class ClusterPTX:
    """What the sm_90 PTX of a cluster kernel shows, in instruction order."""

    lines: tuple[str, ...]

    def where(self, *prefixes: str) -> list[int]:
        """Positions of the instructions starting with any of ``prefixes``."""
        return [k for k, ln in enumerate(self.lines) if ln.startswith(prefixes)]

    @property
    def peer_reads(self) -> list[int]:
        """``mapa``: an address in another block's shared memory (distributed shared memory)."""
        return self.where("mapa")

    @property
    def cluster_waits(self) -> list[int]:
        """``barrier.cluster.wait`` (or the one-step ``barrier.cluster.sync``): a barrier for the whole cluster."""
        return self.where("barrier.cluster.wait", "barrier.cluster.sync")

    @property
    def uses_rank(self) -> bool:
        return any("%cluster_ctarank" in ln for ln in self.lines)


def read_cluster_ptx(ptx_text: str, entry: str = ENTRY) -> ClusterPTX:
    """The instruction lines of ``entry`` in ``ptx_text`` (directives, labels and comments left out)."""
    from ..cuda_cpp import find_entry

    body = find_entry(ptx_text, entry, n_params=3).body
    lines = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "{", "}")) or line.endswith(":"):
            continue
        if line.startswith("@") and " " in line:
            line = line.split(None, 1)[1]
        lines.append(line)
    return ClusterPTX(tuple(lines))


def _compile(source: str) -> str:
    from .. import ptx
    from ..errors import CompileError

    version = ptx.nvrtc_version() or (0, 0)
    options: tuple[str, ...] = ()
    if version >= (12, 4):  # NVRTC's automatic precompiled headers (<cooperative_groups.h>), kept out of the work folder
        pch_dir = Path(tempfile.gettempdir()) / "labkit-nvrtc-pch"
        pch_dir.mkdir(exist_ok=True)
        options = ("--pch", f"--pch-dir={pch_dir}")
    try:
        return ptx.compile_cuda(source, ARCH, name="cluster_sum.cu", options=options).text
    except CompileError as exc:
        raise Failed(f"the source does not compile for {ARCH}:\n{exc}",
                     cause="clusters exist from sm_90 on: include <cooperative_groups.h>, and use "
                           "cg::this_cluster(), cluster.sync(), cluster.map_shared_rank(ptr, rank).") from None


def judge_ptx(ptx_text: str) -> ClusterPTX:
    """Raise :class:`Failed` (or :class:`Unsolved` for an untouched skeleton) on what the PTX shows is missing."""
    from ..errors import LabkitError

    try:
        mix = read_cluster_ptx(ptx_text)
    except LabkitError as exc:
        raise Failed(str(exc), cause=getattr(exc, "fix", None)) from None
    reads, waits = mix.peer_reads, mix.cluster_waits
    if not reads and not waits:
        raise Unsolved("the kernel has no cluster code yet (no cluster barrier, no read of another block's shared "
                       "memory): write the part after the block's own reduction.")
    if not reads:
        raise Failed(f"the {ARCH} PTX has no `mapa`: no block reads another block's shared memory.",
                     cause="read each peer's partial sum through distributed shared memory: "
                           "*cluster.map_shared_rank(&partial[0], r) for r in 0 .. cluster.num_blocks() - 1.")
    if not any(w < reads[0] for w in waits):
        raise Failed(f"the {ARCH} PTX reads a peer's shared memory (`mapa`) before any cluster barrier "
                     "(`barrier.cluster.wait`): the peers may not have written their sums yet.",
                     cause="call cluster.sync() after the block's own reduction and before reading the peers' "
                           "partial sums; __syncthreads() waits for the threads of one block only.")
    if not any(w > reads[-1] for w in waits):
        raise Failed(f"after its last read of a peer's shared memory the {ARCH} PTX has no cluster barrier: a block "
                     "may finish and exit while rank 0 still reads its shared memory.",
                     cause="end the kernel with cluster.sync(): a block's shared memory must stay alive until every "
                           "read of it in the cluster is done.")
    if not mix.uses_rank:
        raise Failed(f"the {ARCH} PTX never reads the block's rank in its cluster (`%cluster_ctarank`): every block "
                     "combines and writes the cluster's sum.",
                     cause="let one block per cluster combine: if (cluster.block_rank() == 0 && threadIdx.x == 0).")
    return mix


def run_on_gpu(source: str, x: np.ndarray, cluster: int, block: int) -> np.ndarray:
    """Launch ``cluster_sum`` through ``cuda.core`` with clusters of ``cluster`` blocks of ``block`` threads; return
    ``out`` (one sum per cluster). Needs a GPU of compute capability 9.0 or later."""
    import cupy as cp
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    from ..ptx import cuda_include_dirs

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    options = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17", include_path=cuda_include_dirs())
    kernel = Program(source, code_type="c++", options=options).compile("cubin").get_kernel(ENTRY)
    n_clusters = -(-x.size // (cluster * block))
    d_x = cp.asarray(x)
    d_out = cp.full(n_clusters, np.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()  # CuPy filled the arrays on its own stream
    launch(stream, LaunchConfig(grid=n_clusters, cluster=cluster, block=block), kernel,
           d_x.data.ptr, d_out.data.ptr, np.int32(x.size))
    stream.sync()
    return cp.asnumpy(d_out)


def _gpu_cases(source: str) -> str:
    from ..mode import env

    cc = env().compute_capability or (0, 0)
    if tuple(cc) < (9, 0):
        return f" This GPU (compute capability {cc[0]}.{cc[1]}) has no clusters, so the kernel was not run."
    rng = np.random.default_rng()
    for cluster, block in ((2, 128), (4, 256), (2, 32)):
        n = int(rng.integers(3, 9)) * cluster * block + int(rng.integers(1, block))  # a partial last cluster
        x = np.rint(rng.uniform(-8, 8, n)).astype(np.float32)  # whole numbers: every order of adding agrees
        got = run_on_gpu(source, x, cluster, block)
        per = cluster * block
        want = np.array([x[k:k + per].sum() for k in range(0, n, per)], dtype=np.float32)
        bad = np.flatnonzero(got != want)
        if bad.size:
            k = int(bad[0])
            raise Failed(f"on the GPU, clusters of {cluster} blocks of {block} threads, n={n}: out[{k}] is {got[k]:g}, "
                         f"expected {want[k]:g}.",
                         cause="out[cluster index] = the sum of the cluster's cluster.num_blocks() * blockDim.x "
                               "elements; the cluster index is blockIdx.x / cluster.num_blocks().")
    return " On the GPU: run through cuda.core with clusters of 2 and 4 blocks, every cluster's sum right."


@exercise(
    "10.cluster",
    kind="kernel",
    title="A cluster sum through distributed shared memory (Hopper)",
    hints=[
        "After its own reduction each block has its sum in partial[0]. In a cluster, a block can read that value "
        "straight from a peer's shared memory, but only once the peer has written it, and only while the peer is "
        "still running.",
        "cluster.sync() is a barrier for every thread of every block in the cluster. One before the reads (the sums "
        "are written), one at the very end (no block exits while its shared memory is being read).",
        "cluster.sync(); if (cluster.block_rank() == 0 && threadIdx.x == 0) { float total = 0.0f; for (unsigned r = 0; "
        "r < cluster.num_blocks(); ++r) total += *cluster.map_shared_rank(&partial[0], r); "
        "out[blockIdx.x / cluster.num_blocks()] = total; } cluster.sync();",
    ],
    reference=reference_source,
)
def cluster_sum(source: str) -> str:
    """Grade the CUDA C++ source of ``cluster_sum(const float* x, float* out, int n)``: its sm_90 PTX everywhere, and
    on a GPU of compute capability 9.0 or later its results with clusters of 2 and 4 blocks."""
    from ..cupylab import cupy_or_none

    if not isinstance(source, str):
        raise Failed(f"expected the kernel's CUDA C++ source as a string, got {type(source).__name__}.")
    judge_ptx(_compile(source))
    base = (f"its {ARCH} PTX reads the peers' shared memory (mapa) between two cluster barriers "
            "(barrier.cluster.wait), and one block per cluster (%cluster_ctarank) combines.")
    if cupy_or_none() is None:
        return base + (" The simulator cannot run a cluster, so the values were not checked here; on a GPU of compute "
                       "capability 9.0 or later this check also runs it.")
    return base + _gpu_cases(source)
