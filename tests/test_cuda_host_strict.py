"""The C++ stand-in is strict like the Python engine (issue 45, item 5): every global and shared access is
bounds-checked (reads too), shared-memory races and missing barriers are reported (block, warp and cluster), and
correct kernels that use barriers, atomics and warp calls pass without a word. Kernels written for these tests."""

from __future__ import annotations

import re

import numpy as np
import pytest

from labkit import cuda_cpp
from labkit.cuda.sources import read_source

pytestmark = pytest.mark.skipif(cuda_cpp.host_compiler() is None, reason="no C++ compiler for the CPU stand-in")


def _variants(source: str, name: str, changes: dict[str, list[tuple[str, str]]]) -> str:
    """``source`` followed by a copy of it per variant, the kernel renamed ``name_variant`` and the changes made: one
    source, so one build of the stand-in serves them all."""
    out = [source]
    for suffix, edits in changes.items():
        text = source.replace(f"void {name}(", f"void {name}_{suffix}(")
        for old, new in edits:
            assert old in text, (suffix, old)
            text = text.replace(old, new)
        out.append(text)
    return "\n".join(out)

SHIFT = r"""
extern "C" __global__ void shift(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1] - x[i];  // reads one past the end in the last thread
}
"""


def test_a_read_one_past_the_end_of_a_global_array_is_reported() -> None:
    n = 100
    x, y = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    both = _variants(SHIFT, "shift", {"fixed": [("if (i < n)", "if (i < n - 1)")]})
    with pytest.raises(cuda_cpp.OutOfBounds, match=r"thread \(99, 0, 0\) of block \(0, 0, 0\) read x\[100\], outside array argument 0 \(x, 100 elements: past the end\)"):
        cuda_cpp.run_on_host(both, "shift", (1,), (128,), (x, y, np.int32(n)))
    cuda_cpp.run_on_host(both, "shift_fixed", (1,), (128,), (x, y, np.int32(n)))
    assert np.array_equal(y[: n - 1], np.ones(n - 1, np.float32))


TREE = r"""
extern "C" __global__ void block_sum(const float* x, float* out, int n)
{
    __shared__ float part[SIZE];  // part[64]
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
"""


LE = ("threadIdx.x < s", "threadIdx.x <= s")
TREES = _variants(
    TREE.replace("SIZE", "64"),
    "block_sum",
    {
        "le": [LE],  # reads part[64] of 64
        "le_room": [LE, ("part[64]", "part[128]")],  # in bounds, but thread s writes what thread 0 reads
        "no_barrier": [("        __syncthreads();\n    }", "    }")],
    },
)


def _sum_blocks(kernel: str, block: int = 64) -> np.ndarray:
    x = np.random.default_rng(1).standard_normal(3 * block - 5).astype(np.float32)
    out = np.zeros(3, np.float32)
    cuda_cpp.run_on_host(TREES, kernel, (3,), (block,), (x, out, np.int32(x.size)))
    return out


def test_a_correct_tree_reduction_passes() -> None:
    out = _sum_blocks("block_sum")
    x = np.random.default_rng(1).standard_normal(3 * 64 - 5).astype(np.float32)
    np.testing.assert_allclose(out, [x[k * 64 : (k + 1) * 64].sum() for k in range(3)], rtol=1e-5)


def test_le_in_a_tree_reduction_is_a_shared_out_of_bounds_read() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"read part\[64\], past the end of the shared array part \(64 elements"):
        _sum_blocks("block_sum_le")


def test_le_in_a_tree_reduction_is_a_race_when_the_array_has_room() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"shared-memory race: thread \(\d+, 0, 0\) of block \(0, 0, 0\) (wrote|read) part\[\d+\]"):
        _sum_blocks("block_sum_le_room")


def test_a_missing_barrier_is_a_race() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"with no __syncthreads\(\)"):
        _sum_blocks("block_sum_no_barrier")


HISTOGRAM = r"""
extern "C" __global__ void histogram(const unsigned char* data, unsigned* bins, int n)
{
    __shared__ unsigned local[16];
    for (int b = threadIdx.x; b < 16; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % 16], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 16; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}
"""


def test_shared_atomics_are_not_races_but_an_unordered_plain_write_is() -> None:
    data = np.random.default_rng(2).integers(0, 256, 1000).astype(np.uint8)
    bins = np.zeros(16, np.uint32)
    both = _variants(HISTOGRAM, "histogram", {"racy": [("local[b] = 0;\n    __syncthreads();", "local[b] = 0;\n")]})
    cuda_cpp.run_on_host(both, "histogram", (3,), (96,), (data, bins, np.int32(data.size)))
    assert np.array_equal(bins, np.bincount(data % 16, minlength=16))
    with pytest.raises(cuda_cpp.HostKernelError, match=r"race.*local\[\d+\]"):
        cuda_cpp.run_on_host(both, "histogram_racy", (3,), (96,), (data, np.zeros(16, np.uint32), np.int32(data.size)))


WARP = r"""
extern "C" __global__ void neighbours(const int* x, int* y)
{
    __shared__ int s[64];
    s[threadIdx.x] = x[threadIdx.x];
    __syncwarp();
    y[threadIdx.x] = s[threadIdx.x ^ 1];  // a lane of the same warp wrote it
}
"""


def test_a_warp_sync_orders_lanes_of_one_warp() -> None:
    x, y = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    three = _variants(
        WARP, "neighbours", {"unsynced": [("__syncwarp();", "")], "other_warp": [("threadIdx.x ^ 1", "threadIdx.x ^ 32")]}
    )
    cuda_cpp.run_on_host(three, "neighbours", (1,), (64,), (x, y))
    assert np.array_equal(y, x ^ 1)
    with pytest.raises(cuda_cpp.HostKernelError, match="race"):
        cuda_cpp.run_on_host(three, "neighbours_unsynced", (1,), (64,), (x, y))
    with pytest.raises(cuda_cpp.HostKernelError, match="race"):  # across warps, a warp sync orders nothing
        cuda_cpp.run_on_host(three, "neighbours_other_warp", (1,), (64,), (x, y))


CLUSTER = read_source("cluster_sum.cu")
CLUSTERS = _variants(
    CLUSTER,
    "cluster_sum",
    {
        "le_n": [("i < n ? x[i]", "i <= n ? x[i]")],
        "le_s": [("threadIdx.x < s", "threadIdx.x <= s")],
        "early": [("    cluster.sync();  // every block", "    // every block")],
    },
)


def _cluster_run(kernel: str, n: int = 500) -> tuple[np.ndarray, np.ndarray, str | None]:
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    out = np.zeros(-(-n // 128), np.float32)
    (said,) = cuda_cpp.run_on_host_batch(CLUSTERS, kernel, [((2 * out.size,), (64,), (x, out, np.int32(n)), 0, 2)])
    return x, out, said


def test_cluster_sum_passes_and_its_two_slips_are_caught() -> None:
    x, out, said = _cluster_run("cluster_sum")
    want = [x[k * 128 : (k + 1) * 128].sum() for k in range(out.size)]
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert said is None
    _, _, said = _cluster_run("cluster_sum_le_n")
    assert said and re.search(r"read x\[500\], outside array argument 0 \(x, 500 elements: past the end\)", said)
    with pytest.raises(cuda_cpp.HostKernelError, match=r"shared-memory race.*partial\[\d+\]"):
        _cluster_run("cluster_sum_le_s")


def test_a_peer_read_without_a_cluster_barrier_is_a_race() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"race.*partial\[0\].*cluster\.sync\(\)"):
        _cluster_run("cluster_sum_early")


def _gpu_tree(x: np.ndarray, op, identity: float, threads: int) -> np.float32:  # type: ignore[no-untyped-def]
    """A model of a GPU block reduction: strided per-thread folds from the identity, then a pairwise tree."""
    part = []
    for t in range(threads):
        acc = np.float32(identity)
        for v in x[t::threads]:
            acc = np.float32(op(acc, np.float32(v * v)))
        part.append(acc)
    s = threads // 2
    while s:
        part = [np.float32(op(part[k], part[k + s])) for k in range(s)] + part[s:]
        s //= 2
    return part[0]


def test_reduction_kernel_folds_in_a_tree_so_a_non_associative_reduce_shows() -> None:
    x = np.random.default_rng(4).uniform(0.5, 1.5, 101).astype(np.float32)
    results = {}
    kinds = (("sum", "a + b", lambda a, b: a + b), ("difference", "a - b", lambda a, b: a - b))
    parts = [cuda_cpp.ReductionParts("float32 x", "float32 y", "x * x", expr, "y = a", "0", f"sq_{label}") for label, expr, _ in kinds]
    both = "\n".join(cuda_cpp.reduction_source(p) for p in parts)  # one build for both
    for label, expr, op in kinds:
        out = np.zeros(1, np.float32)
        cuda_cpp.run_on_host(both, f"sq_{label}", (1,), (cuda_cpp.REDUCTION_THREADS,), (x, out, np.int64(x.size)))
        assert out[0] == _gpu_tree(x, op, 0.0, cuda_cpp.REDUCTION_THREADS), label
        results[label] = float(out[0])
    true = float((x.astype(np.float64) ** 2).sum())
    assert results["sum"] == pytest.approx(true, rel=1e-5)
    assert abs(results["difference"]) < 0.5 * true  # `a - b` gives the tree's order-dependent value, never the sum
