"""Each flaw class caught on every run (issue 18, item 2): every known shortcut answer to a check of labs 00-04 is
run through its check 20 times and must be rejected 20 times out of 20, whatever the fresh draws are.

The shortcuts: a block size assumed (a fixed 128 or 256, or the largest power of two below blockDim: a shift for a
division), an int16 index (sizes past 32,767), a fixed number of grid-stride rounds, a fixed launch in host code, a
result cached by step count, a loop that runs once for 0 steps, a register search that stops at 254, an integer
scan buffer (fractions), int(threshold), a counter narrower than int32, atomics without a tree. Each must fail on a
case the check always runs, early enough to keep this file at about 10 s in sim."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="the shortcuts are graded by the simulator here")

from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402

RUNS = 20
NBINS = 256
RADIUS = 3
SH = 256 + 2 * RADIUS


# ============================================================================= 00.vector-add
@cuda.jit
def add_block_256(a, b, out):
    i = cuda.blockIdx.x * 256 + cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def add_pow2_block(a, b, out):
    # the largest power of two up to blockDim.x: right for blocks of 32, 64, ... 1024 only (a shift for a multiply)
    shift = 0
    while (2 << shift) <= cuda.blockDim.x:
        shift += 1
    i = (cuda.blockIdx.x << shift) + cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def add_int16_index(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        j = np.int16(i)
        out[j] = a[j] + b[j]


# ============================================================================= 02.saxpy
@cuda.jit
def saxpy_pow2_stride(a, x, y, out):
    shift = 0
    while (2 << shift) <= cuda.blockDim.x:
        shift += 1
    i = (cuda.blockIdx.x << shift) + cuda.threadIdx.x
    while i < out.size:
        out[i] = a * x[i] + y[i]
        i += cuda.gridDim.x << shift


@cuda.jit
def saxpy_16_rounds(a, x, y, out):
    i = cuda.grid(1)
    for r in range(16):
        j = i + r * cuda.gridsize(1)
        if j < out.size:
            out[j] = a * x[j] + y[j]


@cuda.jit
def saxpy_int16(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        j = np.int16(i)
        out[j] = a * x[j] + y[j]


# ============================================================================= 02.grayscale
@cuda.jit
def grey_block_16x8(img, out):
    col = cuda.blockIdx.x * 16 + cuda.threadIdx.x
    row = cuda.blockIdx.y * 8 + cuda.threadIdx.y
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


# ============================================================================= 02.launch-config
def grid_shift(shape, block):
    """Wrong: divides by a shift, right only for power-of-two blocks."""
    rows, cols = shape
    bx, by = block
    sx, sy = int(math.log2(bx)), int(math.log2(by))
    return ((cols + bx - 1) >> sx, (rows + by - 1) >> sy)


# ============================================================================= 02.transfers
@cuda.jit
def _saxpy_once(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def transfers_fixed_launch(a, x, y, steps):
    """Wrong: 2 blocks of 128 threads, no grid-stride loop: 256 elements at most."""
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for _ in range(steps):
        _saxpy_once[2, 128](a, dx, dy, dy)
    return dy.copy_to_host()


_CACHE: dict[tuple[int, int], np.ndarray] = {}


def transfers_cached(a, x, y, steps):
    """Wrong: keeps the result of an earlier call with the same step count and size."""
    key = (steps, x.size)
    if key in _CACHE:
        return _CACHE[key].copy()
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for _ in range(steps):
        _saxpy_once[(x.size + 127) // 128, 128](a, dx, dy, dy)
    _CACHE[key] = dy.copy_to_host()
    return _CACHE[key].copy()


def transfers_do_while(a, x, y, steps):
    """Wrong: launches once before testing the step count (0 steps still run one)."""
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    k = 0
    while True:
        _saxpy_once[(x.size + 127) // 128, 128](a, dx, dy, dy)
        k += 1
        if k >= steps:
            break
    return dy.copy_to_host()


# ============================================================================= 03.coalesced-copy / 03.stencil
@cuda.jit
def copy_block_32x4(src, dst):
    col = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    row = cuda.blockIdx.y * 4 + cuda.threadIdx.y
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


@cuda.jit
def stencil_pow2_block(x, out):
    sh = cuda.shared.array(SH, np.float32)
    shift = 0
    while (2 << shift) <= cuda.blockDim.x:
        shift += 1
    bd = 1 << shift
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * bd + t
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else 0.0
    if t < RADIUS:
        sh[t] = x[i - RADIUS] if i >= RADIUS and i - RADIUS < n else 0.0
        j = i + bd
        sh[t + bd + RADIUS] = x[j] if j < n else 0.0
    cuda.syncthreads()
    if i < n and t < bd:
        s = 0.0
        for k in range(2 * RADIUS + 1):
            s += sh[t + k]
        out[i] = s / (2 * RADIUS + 1)


# ============================================================================= 03.occupancy
def plan_stops_at_254(arch, target, shared_per_block):
    """Wrong: the register search stops one short of 255."""
    from labkit import LabkitError, occupancy

    best = None
    for threads in range(32, 1025, 32):
        for r in range(254, 0, -1):
            try:
                if occupancy.occupancy(arch, threads, r, shared_per_block).occupancy >= target:
                    break
            except LabkitError:
                pass
        else:
            continue
        if best is None or r > best[1]:
            best = (threads, r)
    return best


# ============================================================================= 04.histogram-global / -shared
@cuda.jit
def hist_int16(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[np.int16(i)], 1)


@cuda.jit
def hist_pow2_stride(data, hist):
    shift = 0
    while (2 << shift) <= cuda.blockDim.x:
        shift += 1
    i = (cuda.blockIdx.x << shift) + cuda.threadIdx.x
    while i < data.size:
        cuda.atomic.add(hist, data[i], 1)
        i += cuda.gridDim.x << shift


@cuda.jit
def hist_shared_zero_own_bin(data, hist):
    # zeroes only bin threadIdx.x: right for blocks of 256 threads or more
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    if t < NBINS:
        local[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


# ============================================================================= 04.block-sum / 04.full-sum
@cuda.jit
def block_sum_tree_128(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 64
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def full_sum_atomics_only(x, out):
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    cuda.atomic.add(out, 0, acc)


@cuda.jit
def full_sum_int16(x, out):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[np.int16(i)]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, sh[0])


# ============================================================================= 04.race
@cuda.jit
def count_int_threshold(x, threshold, counts):
    c = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > int(threshold):
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = c[0]


@cuda.jit
def count_uint8(x, threshold, counts):
    c = cuda.shared.array(1, np.uint8)
    t = cuda.threadIdx.x
    if t == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = c[0]


@cuda.jit
def count_block_128(x, threshold, counts):
    c = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.blockIdx.x * 128 + t
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = c[0]


# ============================================================================= 04.scan
@cuda.jit
def scan_int_buffer(x, sums, out):
    sh = cuda.shared.array(256, np.int32)  # wrong: fractions are lost
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else 0
        cuda.syncthreads()
        sh[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def add_offsets_ok(partial, offsets, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = partial[i] + (offsets[cuda.blockIdx.x - 1] if cuda.blockIdx.x > 0 else 0.0)


SHORTCUTS = {
    "00.vector-add/block-256": ("00.vector-add", add_block_256),
    "00.vector-add/pow2-shift": ("00.vector-add", add_pow2_block),
    "02.saxpy/pow2-stride": ("02.saxpy", saxpy_pow2_stride),
    "02.saxpy/int16-index": ("02.saxpy", saxpy_int16),
    "02.saxpy/16-rounds": ("02.saxpy", saxpy_16_rounds),
    "02.grayscale/block-16x8": ("02.grayscale", grey_block_16x8),
    "02.launch-config/shift": ("02.launch-config", grid_shift),
    "02.transfers/fixed-2x128-launch": ("02.transfers", transfers_fixed_launch),
    "02.transfers/cached-by-steps": ("02.transfers", transfers_cached),
    "02.transfers/do-while": ("02.transfers", transfers_do_while),
    "03.coalesced-copy/block-32x4": ("03.coalesced-copy", copy_block_32x4),
    "03.stencil/pow2-block": ("03.stencil", stencil_pow2_block),
    "03.occupancy/stops-at-254": ("03.occupancy", plan_stops_at_254),
    "04.histogram-global/int16-index": ("04.histogram-global", hist_int16),
    "04.histogram-global/pow2-stride": ("04.histogram-global", hist_pow2_stride),
    "04.histogram-shared/zero-own-bin": ("04.histogram-shared", hist_shared_zero_own_bin),
    "04.block-sum/tree-from-64": ("04.block-sum", block_sum_tree_128),
    "04.full-sum/atomics-only": ("04.full-sum", full_sum_atomics_only),
    "04.full-sum/int16-index": ("04.full-sum", full_sum_int16),
    "04.race/int-threshold": ("04.race", count_int_threshold),
    "04.race/uint8-counter": ("04.race", count_uint8),
    "04.race/block-128": ("04.race", count_block_128),
    "04.scan/int32-buffer": ("04.scan", (scan_int_buffer, add_offsets_ok)),
}


def test_an_int16_index_fails_vector_add() -> None:
    """The case that catches it (more than 32,767 elements, one per thread) is fixed, not drawn, and costs 0.3 s: run
    twice rather than 20 times."""
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()):
            r = check.vector_add(add_int16_index)
        assert r.status == "failed" and "int16" in r.cause, r.report()


@pytest.mark.parametrize("key", list(SHORTCUTS))
def test_shortcut_rejected_on_every_run(key: str) -> None:
    exercise, answer = SHORTCUTS[key]
    args = answer if isinstance(answer, tuple) else (answer,)
    _CACHE.clear()
    verdicts = []
    for _ in range(RUNS):
        with contextlib.redirect_stdout(io.StringIO()):
            verdicts.append(check.run(exercise, *args))
    passed = [r for r in verdicts if r.passed]
    assert not passed, f"{key} passed {len(passed)} of {RUNS} runs"
    assert all(r.status == "failed" for r in verdicts), [r.message for r in verdicts if r.status != "failed"][:1]
