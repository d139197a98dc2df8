"""10.cluster: the sm_90 PTX of a cluster kernel is read for distributed shared memory, cluster barriers before and
after the peer reads, and the block rank; each mistake fails with its own cause, the skeleton is "not solved yet".
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


def test_reference_passes_and_says_the_values_need_a_gpu() -> None:
    r = check.cluster_sum(REF)
    assert r.status == "passed"
    assert "mapa" in r.message and "cannot run a cluster" in r.message


@pytest.mark.parametrize("source, words", [
    (_variant(FIRST_SYNC, ""), "before any cluster barrier"),
    (_variant(FIRST_SYNC, "    __syncthreads();\n"), "__syncthreads() waits for the threads of one block"),
    (_variant(LAST_SYNC, ""), "exit while rank 0 still reads"),
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
