"""Warp shuffles, votes, matches, activemask and syncwarp in the CUDA simulator (labkit.sim.warp)."""

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
                 "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync", "syncwarp", "activemask", "lanemask_lt"):
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
    assert ball[0] == (1 << 0) | (1 << 5) and ball[35] == 1 << 1  # lanes of the partial warp are not waited for
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


def test_errors_instead_of_hangs() -> None:
    with pytest.raises(Exception, match="leaves it out"):
        outside_mask[1, 32](np.zeros(32, np.float32))
    # lanes 16-31 returned: the shuffle does not wait for them, but lane 15 reads lane 16's value
    with pytest.raises(Exception, match="lane 15 reads the value of lane 16, which has already exited"):
        missing_lanes[1, 32](np.zeros(32, np.float32))


@cuda.jit
def shift(x, d, up, down):
    i = cuda.grid(1)
    up[i] = cuda.shfl_up_sync(0xFFFFFFFF, x[i], d)
    down[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], d)


def test_delta_keeps_its_low_five_bits() -> None:
    x = np.arange(32, dtype=np.int32) + 100
    up, down = np.zeros(32, np.int32), np.zeros(32, np.int32)
    shift[1, 32](x, 33, up, down)  # 33 & 31 == 1
    assert up[5] == x[4] and down[5] == x[6] and up[0] == x[0] and down[31] == x[31]
    shift[1, 32](x, -1, up, down)  # -1 & 31 == 31
    assert up[31] == x[0] and up[30] == x[30] and down[0] == x[31] and down[1] == x[1]


@cuda.jit
def vote_after_exit(x, out):
    i = cuda.grid(1)
    if i % 2 == 1:
        return  # odd lanes leave: votes and syncwarp do not wait for them
    b = cuda.ballot_sync(0xFFFFFFFF, x[i] > 0)
    cuda.syncwarp()
    out[i] = cuda.popc(b) if cuda.all_sync(0xFFFFFFFF, True) else -1


def test_votes_do_not_wait_for_exited_lanes() -> None:
    x = np.ones(32, np.int32)
    out = np.zeros(32, np.int32)
    vote_after_exit[1, 32](x, out)
    assert np.array_equal(out[::2], np.full(16, 16)) and not out[1::2].any()


@cuda.jit
def ballot_type(out, neg):
    i = cuda.grid(1)
    b = cuda.ballot_sync(0xFFFFFFFF, True)
    out[i] = cuda.popc(b)
    neg[i] = b < 0


def test_ballot_is_an_int32() -> None:
    out, neg = np.zeros(32, np.int32), np.zeros(32, np.bool_)
    ballot_type[1, 32](out, neg)
    assert (out == 32).all() and neg.all()  # a full warp's ballot is -1 as an int32, and popc counts 32 bits


@cuda.jit
def bit_ops(out):
    i = cuda.grid(1)
    b = cuda.ballot_sync(0xFFFFFFFF, i >= 4)  # lanes 4-31: 0xFFFFFFF0, an int32 below zero
    out[i, 0] = cuda.ffs(b)
    out[i, 1] = cuda.clz(b)
    out[i, 2] = cuda.brev(b)
    out[i, 3] = cuda.clz(1)  # a Python int is an int64 to Numba


def test_bit_operations_in_the_width_numba_types() -> None:
    out = np.zeros((32, 4), np.int64)
    bit_ops[1, 32](out)
    assert list(out[0]) == [5, 0, 0x0FFFFFFF, 63]


@cuda.jit
def branch_masks(out, sums):
    i = cuda.grid(1)
    if i < 10:
        m = cuda.activemask()
        sums[i] = cuda.shfl_sync(m, i, 3)
    else:
        m = cuda.activemask()
        sums[i] = cuda.shfl_sync(m, i, 31)
    out[i] = m


def test_activemask_is_the_lanes_that_took_the_branch() -> None:
    out, sums = np.zeros(32, np.uint32), np.zeros(32, np.int64)
    branch_masks[1, 32](out, sums)
    assert (out[:10] == 0x3FF).all() and (out[10:] == 0xFFFFFC00).all()
    assert (sums[:10] == 3).all() and (sums[10:] == 31).all()


@cuda.jit
def cross_wait(x):
    i = cuda.grid(1)
    if i < 16:
        x[i] = cuda.shfl_sync(0xFFFFFFFF, x[i], 0)
    else:
        cuda.syncwarp()


def test_lanes_that_wait_elsewhere_fail_at_once() -> None:
    import time

    start = time.monotonic()
    with pytest.raises(Exception, match="cannot go on: lanes 0-15 at shfl_sync.*lanes 16-31 at syncwarp"):
        cross_wait[1, 32](np.zeros(32, np.float32))
    assert time.monotonic() - start < 2


@cuda.jit
def shuffle_u32(x, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(0xFFFFFFFF, x[i], 0)


@cuda.jit
def vote_float(x, out):
    i = cuda.grid(1)
    out[i] = cuda.all_sync(0xFFFFFFFF, x[i])


@cuda.jit
def float_mask(x, out):
    i = cuda.grid(1)
    out[i] = cuda.any_sync(x[i], 1)


def test_types_a_gpu_compile_rejects() -> None:
    out = np.zeros(32, np.float64)
    with pytest.raises(Exception, match="32- and 64-bit integers and floats only.*uint64"):
        shuffle_u32[1, 32](np.ones(32, np.uint64), out)  # (narrower integers are read as int64 in the simulator)
    with pytest.raises(Exception, match="predicate must be an integer or a boolean"):
        vote_float[1, 32](np.ones(32, np.float32), out)
    with pytest.raises(Exception, match="mask must be an integer"):
        float_mask[1, 32](np.ones(32, np.float32), out)


@cuda.jit
def matches(x, any_, all_, pred):
    i = cuda.grid(1)
    any_[i] = cuda.match_any_sync(0xFFFFFFFF, x[i])
    m, p = cuda.match_all_sync(0xFFFFFFFF, x[i])
    all_[i] = m
    pred[i] = p


def test_match_any_and_all() -> None:
    x = (np.arange(32) // 8).astype(np.float32)  # four groups of 8 lanes
    any_, all_, pred = np.zeros(32, np.int64), np.zeros(32, np.int64), np.zeros(32, np.bool_)
    matches[1, 32](x, any_, all_, pred)
    assert [any_[k] & 0xFFFFFFFF for k in (0, 8, 16, 24)] == [0xFF, 0xFF00, 0xFF0000, 0xFF000000]
    assert any_[24] < 0  # an int32: bit 31 set makes it negative
    assert not all_.any() and not pred.any()
    matches[1, 32](np.zeros(32, np.float32), any_, all_, pred)
    assert (all_ == -1).all() and pred.all()


@cuda.jit
def publish(x, out):
    sh = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncwarp()
    out[t] = sh[(t + 1) % 32]


def test_syncwarp_orders_memory_under_the_strict_model() -> None:
    from labkit.sim import launch_strict

    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    report = launch_strict(publish, 1, 32, x, out, names=("x", "out"))
    assert report.syncwarps == 1 and np.array_equal(out, np.roll(x, -1))
