"""10.cluster: graded on values on labkit's CPU stand-in (clusters of 2 and 4 blocks, each case in two block orders),
then the sm_90 PTX is read for distributed shared memory, cluster barriers before and after the peer reads, and the
block rank; each mistake fails with its own cause, the skeleton is "not solved yet".
The GPU path (cuda.core cluster launch) is checked against the installed cuda.core in test_lab10_api_surface.py.
Cost: about 3 s (NVRTC compilations)."""

from __future__ import annotations

import pytest

import labkit

labkit.setup(quiet=True)
from labkit import check, ptx  # noqa: E402
from labkit.check import lab10_clusters as lc  # noqa: E402

pytestmark = pytest.mark.toolchain

REF = lc.reference_source()
FIRST_SYNC = "    cluster.sync();  // every block of the cluster has its partial[0]\n"
LAST_SYNC = "    cluster.sync();  // no block exits while rank 0 may still read its shared memory\n"


def _variant(old: str, new: str) -> str:
    assert old in REF
    return REF.replace(old, new, 1)


def test_reference_passes_on_values_in_the_stand_in() -> None:
    r = check.cluster_sum(REF)
    assert r.status == "passed"
    assert "mapa" in r.message and "CPU stand-in: clusters of 2 and 4 blocks" in r.message


@pytest.mark.parametrize("source, words", [
    (_variant(FIRST_SYNC, ""), "before that block had written its partial sum"),
    (_variant(FIRST_SYNC, "    __syncthreads();\n"), "before that block had written its partial sum"),
    (_variant(LAST_SYNC, ""), "must stay alive until every read"),
    (_variant("*cluster.map_shared_rank(&partial[0], r)", "partial[0]"), "no `mapa`"),
    (_variant("cluster.block_rank() == 0 && threadIdx.x == 0", "threadIdx.x == 0"), "%cluster_ctarank"),
    (_variant("cg::this_cluster();", "cg::this_cluster()"), "does not compile"),
    (_variant('extern "C" __global__', "__global__"), "extern \"C\""),
])
def test_rejects_with_the_cause(source: str, words: str) -> None:
    r = check.cluster_sum(source)
    assert r.status == "failed"
    assert words in r.message + " " + (r.cause or ""), (r.message, r.cause)


def test_skeleton_without_cluster_code_is_unsolved() -> None:
    start = REF.index(FIRST_SYNC)
    end = REF.index(LAST_SYNC) + len(LAST_SYNC)
    skeleton = REF[:start] + "    // your code: the cluster part\n" + REF[end:]
    assert check.cluster_sum(skeleton).status == "unsolved"
    assert check.cluster_sum(...).status == "unsolved"


def test_clusters_need_sm_90() -> None:
    from labkit.errors import CompileError

    with pytest.raises(CompileError, match="this_cluster"):
        ptx.compile_cuda(REF, "sm_80", name="cluster_sum.cu")
    mix = lc.read_cluster_ptx(lc._compile(REF))
    assert mix.peer_reads and len(mix.cluster_waits) == 2 and mix.uses_rank


_SYNCS_IN_RANK0 = (REF.replace(FIRST_SYNC, "").replace(LAST_SYNC, "")
                   .replace("if (cluster.block_rank() == 0 && threadIdx.x == 0) {",
                            "if (cluster.block_rank() == 0) { cluster.sync(); if (threadIdx.x == 0) {")
                   .replace("        out[blockIdx.x / cluster.num_blocks()] = total;\n    }",
                            "        out[blockIdx.x / cluster.num_blocks()] = total;\n    } cluster.sync(); }"))

#: Wrong kernels whose PTX has every instruction the shape check looks for: only the values show them.
VALUE_FLAWS = {
    "wrong output slot": (_variant("out[blockIdx.x / cluster.num_blocks()]", "out[blockIdx.x]"), "never written"),
    "hard-coded cluster size": (_variant("out[blockIdx.x / cluster.num_blocks()]", "out[blockIdx.x / 2]")
                                .replace("r < cluster.num_blocks()", "r < 2"), "cluster.num_blocks() for the cluster size"),
    "the same peer every time": (_variant("map_shared_rank(&partial[0], r)", "map_shared_rank(&partial[0], 1)"),
                                 "reads the same block every time"),
    "own block only": (_variant("map_shared_rank(&partial[0], r)", "map_shared_rank(&partial[0], 0)"),
                       "reads the same block every time"),
    "both barriers inside the rank-0 branch": (_SYNCS_IN_RANK0, "outside any `if`"),
    "no barrier after the reads": (_variant(LAST_SYNC, ""), "must stay alive"),
    "a __syncthreads() for the first cluster barrier": (_variant(FIRST_SYNC, "    __syncthreads();\n"), "cluster.sync()"),
}


@pytest.mark.parametrize("name", sorted(VALUE_FLAWS))
def test_value_flaws_are_rejected_every_run_with_their_cause(name: str) -> None:
    source, words = VALUE_FLAWS[name]
    for _ in range(3):  # fresh sizes each run; the cases (cluster sizes 2 and 4, both block orders) are fixed
        r = check.cluster_sum(source)
        assert r.status == "failed", (name, r.message)
        assert words in r.message + " " + (r.cause or ""), (name, r.message, r.cause)


def test_stand_in_cluster_barrier_and_distributed_shared_memory() -> None:
    import numpy as np

    from labkit.cuda_host import HostKernelError, run_on_host_batch

    x = np.arange(1, 513, dtype=np.float32)
    for cluster in (1, 2, 4):
        for order in ("forward", "reverse"):
            out = np.full(512 // (cluster * 64), -1, np.float32)
            run_on_host_batch(REF, "cluster_sum", [((8,), (64,), (x, out, np.int32(512)), 0, cluster, order)])
            assert np.array_equal(out, x.reshape(-1, cluster * 64).sum(axis=1)), (cluster, order)
    with pytest.raises(HostKernelError, match="only some threads of the cluster reach"):
        run_on_host_batch(_SYNCS_IN_RANK0, "cluster_sum", [((4,), (64,), (x, np.zeros(2, np.float32), np.int32(256)), 0, 2)])
    with pytest.raises(Exception, match="whole number of clusters"):
        run_on_host_batch(REF, "cluster_sum", [((3,), (64,), (x, np.zeros(2, np.float32), np.int32(192)), 0, 2)])
