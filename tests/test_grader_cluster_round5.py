"""10.cluster, round five (issue 44, item 5): a push-style sum through distributed shared memory (each block stores
into block rank 0's shared memory, one cluster.sync()) is accepted, since a remote store is not a read; the data are
quarters, so an int accumulator fails; a cluster barrier placed before the block's own reduction and a pushed-into
slot that nothing zeroed get their own causes. One full check (the stand-in runs the push answer), the rest on the
PTX and on values: about 10 s on one core.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)

from labkit import check  # noqa: E402
from labkit.check import lab10_clusters as lc  # noqa: E402

REF = lc.reference_source()
PUSH = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void cluster_sum(const float* x, float* out, int n)
{
    __shared__ float partial[256];
    __shared__ float slots[16];
    cg::cluster_group cluster = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    unsigned int rank = cluster.block_rank();
    if (threadIdx.x == 0)
        *cluster.map_shared_rank(&slots[rank], 0) = partial[0];   // push into rank 0
    cluster.sync();
    if (rank == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned int r = 0; r < cluster.num_blocks(); ++r)
            total += slots[r];
        out[blockIdx.x / cluster.num_blocks()] = total;
    }
}
"""


def _needs_toolchain() -> None:
    from labkit.cuda import ptx

    if not ptx.nvrtc_version():
        pytest.skip("NVRTC is not installed here")


def test_a_push_style_sum_with_one_cluster_barrier_passes() -> None:
    _needs_toolchain()
    mix = lc.read_cluster_ptx(lc._compile(PUSH))
    assert mix.peer_writes and not mix.peer_reads  # the store through mapa is a write, not a read
    with contextlib.redirect_stdout(io.StringIO()):
        r = check.cluster_sum(PUSH)
    assert r.passed, r.report()
    assert "stores each block's sum into another block's shared memory" in r.message


def test_the_reference_reads_its_peers_between_two_barriers() -> None:
    _needs_toolchain()
    mix = lc.read_cluster_ptx(lc._compile(REF))
    assert mix.peer_reads and not mix.peer_writes and len(mix.cluster_waits) == 2


def test_a_barrier_before_the_tree_is_named() -> None:
    _needs_toolchain()
    src = REF.replace("    cluster.sync();  // every block of the cluster has its partial[0]\n", "")
    src = src.replace("    __syncthreads();\n    for (unsigned", "    __syncthreads();\n    cluster.sync();\n    for (unsigned", 1)
    assert src != REF
    cause = lc._ptx_cause(lc.read_cluster_ptx(lc._compile(src)), "a shared-memory race")
    assert cause is not None and "before the block's own reduction is done" in cause


def test_an_unzeroed_slot_pushed_into_is_named() -> None:
    _needs_toolchain()
    src = PUSH.replace("    __shared__ float slots[16];\n", "    __shared__ float total;\n")
    src = src.replace("*cluster.map_shared_rank(&slots[rank], 0) = partial[0];", "atomicAdd(cluster.map_shared_rank(&total, 0), partial[0]);")
    src = src.replace("        float total = 0.0f;\n        for (unsigned int r = 0; r < cluster.num_blocks(); ++r)\n            total += slots[r];\n", "")
    assert "atomicAdd" in src and "slots" not in src
    cause = lc._ptx_cause(lc.read_cluster_ptx(lc._compile(src)), "out[0] is nan, expected 3")
    assert cause is not None and "zeroed first" in cause


def test_the_data_are_not_whole_numbers_and_an_int_accumulator_is_named() -> None:
    rng = np.random.default_rng()
    x, n = lc._host_inputs(rng, 2, 32)
    assert np.any(x != np.rint(x)) and np.all(x * 4 == np.rint(x * 4))
    per = 64
    sums = [x[k : k + per] for k in range(0, n, per)]
    out = np.array([sum(float(np.trunc(s[j * 32 : (j + 1) * 32].sum())) for j in range(2)) for s in sums], np.float32)
    want = lc._sums(x, per)
    k = int(np.flatnonzero(out != want)[0])
    cause = lc._value_cause(x, float(out[k]), k, 2, 32, False, out)
    assert "int total" in cause, cause
