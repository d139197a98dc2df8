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
    with pytest.raises(cuda_cpp.OutOfBounds, match=r"thread \(99, 0, 0\) of block \(0, 0, 0\) read x\[100\], outside array argument 0 \(x, 100 elements: past the end\)"):
        cuda_cpp.run_on_host(SHIFT, "shift", (1,), (128,), (x, y, np.int32(n)))
    fixed = SHIFT.replace("if (i < n)", "if (i < n - 1)")
    cuda_cpp.run_on_host(fixed, "shift", (1,), (128,), (x, y, np.int32(n)))
    assert np.array_equal(y[: n - 1], np.ones(n - 1, np.float32))


TREE = r"""
extern "C" __global__ void block_sum(const float* x, float* out, int n)
{
    __shared__ float part[SIZE];
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


def _tree(size: int, change: tuple[str, str] = ("", "")) -> str:
    return TREE.replace("SIZE", str(size)).replace(*change)


def _sum_blocks(source: str, block: int = 64) -> np.ndarray:
    x = np.random.default_rng(1).standard_normal(3 * block - 5).astype(np.float32)
    out = np.zeros(3, np.float32)
    cuda_cpp.run_on_host(source, "block_sum", (3,), (block,), (x, out, np.int32(x.size)))
    return out


def test_a_correct_tree_reduction_passes() -> None:
    out = _sum_blocks(_tree(64))
    x = np.random.default_rng(1).standard_normal(3 * 64 - 5).astype(np.float32)
    np.testing.assert_allclose(out, [x[k * 64 : (k + 1) * 64].sum() for k in range(3)], rtol=1e-5)


def test_le_in_a_tree_reduction_is_a_shared_out_of_bounds_read() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"read part\[64\], past the end of the shared array part \(64 elements"):
        _sum_blocks(_tree(64, ("threadIdx.x < s", "threadIdx.x <= s")))


def test_le_in_a_tree_reduction_is_a_race_when_the_array_has_room() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"shared-memory race: thread \(\d+, 0, 0\) of block \(0, 0, 0\) (wrote|read) part\[\d+\]"):
        _sum_blocks(_tree(128, ("threadIdx.x < s", "threadIdx.x <= s")))


def test_a_missing_barrier_is_a_race() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match=r"with no __syncthreads\(\)"):
        _sum_blocks(_tree(64, ("        __syncthreads();\n    }", "    }")))


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
    cuda_cpp.run_on_host(HISTOGRAM, "histogram", (3,), (96,), (data, bins, np.int32(data.size)))
    assert np.array_equal(bins, np.bincount(data % 16, minlength=16))
    racy = HISTOGRAM.replace("local[b] = 0;\n    __syncthreads();", "local[b] = 0;\n")
    with pytest.raises(cuda_cpp.HostKernelError, match=r"race.*local\[\d+\]"):
        cuda_cpp.run_on_host(racy, "histogram", (3,), (96,), (data, np.zeros(16, np.uint32), np.int32(data.size)))


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
    cuda_cpp.run_on_host(WARP, "neighbours", (1,), (64,), (x, y))
    assert np.array_equal(y, x ^ 1)
    with pytest.raises(cuda_cpp.HostKernelError, match="race"):
        cuda_cpp.run_on_host(WARP.replace("__syncwarp();", ""), "neighbours", (1,), (64,), (x, y))
    with pytest.raises(cuda_cpp.HostKernelError, match="race"):  # across warps, a warp sync orders nothing
        cuda_cpp.run_on_host(WARP.replace("threadIdx.x ^ 1", "threadIdx.x ^ 32"), "neighbours", (1,), (64,), (x, y))


CLUSTER = read_source("cluster_sum.cu")


def _cluster_run(source: str, n: int = 500) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    out = np.zeros(-(-n // 128), np.float32)
    cuda_cpp.run_on_host_batch(source, "cluster_sum", [((2 * out.size,), (64,), (x, out, np.int32(n)), 0, 2)])
    return x, out


def test_cluster_sum_passes_and_its_two_slips_are_caught() -> None:
    x, out = _cluster_run(CLUSTER)
    want = [x[k * 128 : (k + 1) * 128].sum() for k in range(out.size)]
    np.testing.assert_allclose(out, want, rtol=1e-5)
    le_n = CLUSTER.replace("i < n ? x[i]", "i <= n ? x[i]")
    assert le_n != CLUSTER
    x = np.random.default_rng(3).standard_normal(500).astype(np.float32)
    out = np.zeros(4, np.float32)
    (said,) = cuda_cpp.run_on_host_batch(le_n, "cluster_sum", [((8,), (64,), (x, out, np.int32(500)), 0, 2)])
    assert said and re.search(r"read x\[500\], outside array argument 0 \(x, 500 elements: past the end\)", said)
    le_s = CLUSTER.replace("threadIdx.x < s", "threadIdx.x <= s")
    assert le_s != CLUSTER
    with pytest.raises(cuda_cpp.HostKernelError, match=r"shared-memory race.*partial\[\d+\]"):
        _cluster_run(le_s)


def test_a_peer_read_without_a_cluster_barrier_is_a_race() -> None:
    early = CLUSTER.replace("    cluster.sync();  // every block", "    // every block")
    assert early != CLUSTER
    with pytest.raises(cuda_cpp.HostKernelError, match=r"race.*partial\[0\].*cluster\.sync\(\)"):
        _cluster_run(early)


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
    for label, expr, op in (("sum", "a + b", lambda a, b: a + b), ("difference", "a - b", lambda a, b: a - b)):
        parts = cuda_cpp.ReductionParts("float32 x", "float32 y", "x * x", expr, "y = a", "0", "sq")
        out = np.zeros(1, np.float32)
        cuda_cpp.run_on_host(cuda_cpp.reduction_source(parts), "sq", (1,), (cuda_cpp.REDUCTION_THREADS,), (x, out, np.int64(x.size)))
        assert out[0] == _gpu_tree(x, op, 0.0, cuda_cpp.REDUCTION_THREADS), label
        results[label] = float(out[0])
    true = float((x.astype(np.float64) ** 2).sum())
    assert results["sum"] == pytest.approx(true, rel=1e-5)
    assert abs(results["difference"]) < 0.5 * true  # `a - b` gives the tree's order-dependent value, never the sum
