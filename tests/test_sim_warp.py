"""Warp shuffles, votes and syncwarp in the CUDA simulator (labkit.simwarp)."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit.sim import warp as simwarp  # noqa: E402


def test_installed_by_setup() -> None:
    from numba.cuda.simulator import kernelapi

    simwarp.install()
    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
                 "eq_sync", "ballot_sync", "syncwarp", "activemask", "lanemask_lt"):
        assert hasattr(kernelapi.FakeCUDAModule, name)


@cuda.jit
def shuffles(x, bcast, up, down, xor):
    i = cuda.grid(1)
    v = x[i]
    bcast[i] = cuda.shfl_sync(0xFFFFFFFF, v, 3)
    up[i] = cuda.shfl_up_sync(0xFFFFFFFF, v, 1)
    down[i] = cuda.shfl_down_sync(0xFFFFFFFF, v, 2)
    xor[i] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)


def test_shuffle_semantics() -> None:
    x = np.arange(64, dtype=np.float32) * 1.5
    outs = [np.zeros(64, np.float32) for _ in range(4)]
    shuffles[1, 64](x, *outs)
    bcast, up, down, xor = outs
    lane = np.arange(64) % 32
    warp0 = np.arange(64) // 32 * 32
    assert np.array_equal(bcast, x[warp0 + 3])
    assert np.array_equal(up, np.where(lane >= 1, x[np.arange(64) - 1], x))  # lane 0 keeps its own value
    assert np.array_equal(down, np.where(lane + 2 < 32, x[np.minimum(np.arange(64) + 2, 63)], x))
    assert np.array_equal(xor, x[np.arange(64) ^ 1])


@cuda.jit
def scan(x, out):
    i = cuda.grid(1)
    v = x[i]
    d = 1
    while d < 32:
        n = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if cuda.laneid >= d:
            v += n
        d *= 2
    out[i] = v


def test_inclusive_scan_per_warp() -> None:
    x = np.random.default_rng(1).integers(0, 10, 96).astype(np.int32)
    out = np.zeros(96, np.int32)
    scan[3, 32](x, out)
    assert np.array_equal(out, np.concatenate([np.cumsum(x[k:k + 32]) for k in (0, 32, 64)]))


@cuda.jit
def votes(x, ball, all_, any_, eq):
    i = cuda.grid(1)
    p = x[i] > 0
    ball[i] = cuda.ballot_sync(0xFFFFFFFF, p)
    all_[i] = cuda.all_sync(0xFFFFFFFF, p)
    any_[i] = cuda.any_sync(0xFFFFFFFF, p)
    eq[i] = cuda.eq_sync(0xFFFFFFFF, p)
    cuda.syncwarp()


def test_votes_and_partial_warp() -> None:
    x = np.zeros(40, np.int32)
    x[[0, 5, 33]] = 1
    outs = [np.zeros(40, np.int64) for _ in range(4)]
    votes[1, 40](x, *outs)  # 40 threads: a full warp and a warp of 8 lanes
    ball, all_, any_, eq = outs
    assert ball[0] == (1 << 0) | (1 << 5) and ball[35] == 1 << 1
    assert all_.sum() == 0 and any_.all() and not eq.any()


@cuda.jit
def outside_mask(x):
    i = cuda.grid(1)
    x[i] = cuda.shfl_sync(0x0000FFFF, x[i], 0)


@cuda.jit
def missing_lanes(x):
    i = cuda.grid(1)
    if i % 32 < 16:
        x[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], 1)


def test_errors_instead_of_hangs(monkeypatch) -> None:
    monkeypatch.setattr(simwarp, "WAIT_S", 0.3)
    with pytest.raises(Exception, match="leaves it out"):
        outside_mask[1, 32](np.zeros(32, np.float32))
    with pytest.raises(Exception, match="never reached"):
        missing_lanes[1, 32](np.zeros(32, np.float32))
