"""Warp shuffles on the C++ stand-in follow PTX's shfl.sync rule for every width, lane, offset and lane mask
(issue 45, item 5): each result is compared with a Python model of the PTX ISA's pseudocode (maxLane, minLane,
the segment mask from the width, and the own-lane fallback), including a xor mask at or past the width, which reads
an earlier segment."""

from __future__ import annotations

import numpy as np
import pytest

from labkit import cuda_cpp

pytestmark = pytest.mark.skipif(cuda_cpp.host_compiler() is None, reason="no C++ compiler for the CPU stand-in")

SHUFFLES = r"""
extern "C" __global__ void shuffles(const int* params, int* out, double* outd)
{
    int lane = threadIdx.x, w = params[0], b = params[1];
    int v = 1000 + lane;
    out[lane] = __shfl_sync(0xffffffffu, v, b, w);
    out[32 + lane] = __shfl_up_sync(0xffffffffu, v, (unsigned)b, w);
    out[64 + lane] = __shfl_down_sync(0xffffffffu, v, (unsigned)b, w);
    out[96 + lane] = __shfl_xor_sync(0xffffffffu, v, b, w);
    outd[lane] = __shfl_xor_sync(0xffffffffu, v + 0.5, b, w);  // 64 bits: the same rule
}
extern "C" __global__ void half_warp(const int* params, int* out, double* outd)
{
    int lane = threadIdx.x;
    if (lane >= 16) return;  // the other half of the warp has left
    out[lane] = __shfl_sync(0x0000ffffu, 1000 + lane, params[1], params[0]);
}
"""


def ptx_source(lane: int, b: int, width: int, mode: str) -> int:
    """The lane ``lane`` reads in PTX's shfl.sync, with c as CUDA's __shfl_*_sync build it from ``width``."""
    segmask = (32 - width) & 31
    cval = 0 if mode == "up" else 31
    bval = b & 31
    max_lane = (lane & segmask) | (cval & ~segmask & 31)
    min_lane = lane & segmask
    if mode == "idx":
        j = min_lane | (bval & ~segmask & 31)
        ok = j <= max_lane
    elif mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    else:
        j = lane ^ bval
        ok = j <= max_lane
    return j if ok else lane


def test_every_width_and_offset_follows_ptx() -> None:
    cases = [(w, b) for w in (1, 2, 4, 8, 16, 32) for b in [*range(0, 36), -1, -7, 63]]
    params = [np.array(c, np.int32) for c in cases]
    outs = [np.zeros(128, np.int32) for _ in cases]
    outds = [np.zeros(32, np.float64) for _ in cases]
    launches = [((1,), (32,), (p, o, d)) for p, o, d in zip(params, outs, outds)]
    assert cuda_cpp.run_on_host_batch(SHUFFLES, "shuffles", launches) == [None] * len(cases)
    reads_earlier = 0
    for (w, b), o, d in zip(cases, outs, outds):
        for m, mode in enumerate(("idx", "up", "down", "xor")):
            want = [1000 + ptx_source(lane, b, w, mode) for lane in range(32)]
            assert o[32 * m : 32 * m + 32].tolist() == want, (w, b, mode)
        xor = [1000.5 + ptx_source(lane, b, w, "xor") for lane in range(32)]
        assert d.tolist() == xor, (w, b)
        reads_earlier += sum(ptx_source(lane, b, w, "xor") < lane - lane % w for lane in range(32))
    assert reads_earlier > 0  # the cases include xor masks that reach an earlier segment


def test_a_shuffle_from_a_lane_outside_the_mask_is_an_error() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match="reads lane 20, which is not in the mask"):
        cuda_cpp.run_on_host(SHUFFLES, "half_warp", (1,), (32,), (np.array([32, 20], np.int32), np.zeros(128, np.int32),
                                                                np.zeros(32, np.float64)))
