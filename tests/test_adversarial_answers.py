"""Red-team answers for the grader (issue 10): wrong answers a tired learner writes, which must be rejected, and
correct-but-different answers a strong learner writes, which must be accepted.

Each wrong answer here is wrong for inputs the exercise statement allows (a larger n, another block size from the
allowed range, a longer K, ...), even when the check's drawn cases happen not to show it. A test in this file that
fails documents a hole in the grader; it is kept as it is until the mechanism is fixed. Cost: about 40-60 s in sim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="red-team answers are graded by the simulator here")

from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402

NBINS = 256
TILE = 16
RADIUS = 3
SH = 256
SH_HALO = SH + 2 * RADIUS  # a global constant: Numba folds it, unlike `SH + 2 * RADIUS` inside the kernel


# ============================================================================= 02.saxpy
@cuda.jit
def saxpy_fixed_16_rounds(a, x, y, out):
    # wrong: a fixed number of grid-stride rounds covers only 16 × gridsize elements
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    for r in range(16):
        j = i + r * s
        if j < out.size:
            out[j] = a * x[j] + y[j]


@cuda.jit
def saxpy_no_stride(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_while(a, x, y, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    while i < out.shape[0]:
        out[i] = a * x[i] + y[i]
        i += stride


@cuda.jit
def saxpy_stride_assumes_128(a, x, y, out):
    # wrong: a stride computed as if every block had 128 threads
    i = cuda.blockIdx.x * 128 + cuda.threadIdx.x
    while i < out.size:
        out[i] = a * x[i] + y[i]
        i += 128 * cuda.gridDim.x


# ============================================================================= 02.grayscale
@cuda.jit
def grey_truncates(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2])


@cuda.jit
def grey_swapped(img, out):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


@cuda.jit
def grey_integer_luma(img, out):
    # correct: integer luma, rounded to nearest
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = (299 * img[row, col, 0] + 587 * img[row, col, 1] + 114 * img[row, col, 2] + 500) // 1000


@cuda.jit
def grey_float32_round(img, out):
    # correct: float32 arithmetic and round()
    x = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    y = cuda.threadIdx.y + cuda.blockIdx.y * cuda.blockDim.y
    if y >= out.shape[0] or x >= out.shape[1]:
        return
    r = np.float32(img[y, x, 0])
    g = np.float32(img[y, x, 1])
    b = np.float32(img[y, x, 2])
    out[y, x] = round(np.float32(0.299) * r + np.float32(0.587) * g + np.float32(0.114) * b)


# ============================================================================= 03.coalesced-copy
@cuda.jit
def copy_rows_are_x(src, dst):
    row, col = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


@cuda.jit
def copy_grid_stride_2d(src, dst):
    # correct: a 2-D grid-stride loop
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for r in range(y0, dst.shape[0], sy):
        for c in range(x0, dst.shape[1], sx):
            dst[r, c] = src[r, c]


# ============================================================================= 03.matmul
@cuda.jit
def matmul_fixed_8_ktiles(A, B, C):
    # wrong: a fixed number of K steps (8 tiles of 16 = K up to 128 only)
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    K = A.shape[1]
    acc = 0.0
    for t in range(8):
        k = t * TILE + tx
        sa[ty, tx] = A[row, k] if row < A.shape[0] and k < K else 0.0
        k = t * TILE + ty
        sb[ty, tx] = B[k, col] if k < K and col < B.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_drops_last_tile(A, B, C):
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    K = A.shape[1]
    acc = 0.0
    for t in range(K // TILE):
        sa[ty, tx] = A[row, t * TILE + tx] if row < A.shape[0] else 0.0
        sb[ty, tx] = B[t * TILE + ty, col] if col < B.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_no_end_barrier(A, B, C):
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    K = A.shape[1]
    acc = 0.0
    for t in range((K + TILE - 1) // TILE):
        k = t * TILE + tx
        sa[ty, tx] = A[row, k] if row < A.shape[0] and k < K else 0.0
        k = t * TILE + ty
        sb[ty, tx] = B[k, col] if k < K and col < B.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_barrier_in_branch(A, B, C):
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    K = A.shape[1]
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    acc = 0.0
    for t in range((K + TILE - 1) // TILE):
        k = t * TILE + tx
        sa[ty, tx] = A[row, k] if k < K else 0.0
        k = t * TILE + ty
        sb[ty, tx] = B[k, col] if k < K else 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def matmul_float64_acc(A, B, C):
    # correct: float64 accumulator, K loop bounded by the tile that is left
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    K = A.shape[1]
    acc = np.float64(0.0)
    t0 = 0
    while t0 < K:
        sa[ty, tx] = A[row, t0 + tx] if row < A.shape[0] and t0 + tx < K else 0.0
        sb[ty, tx] = B[t0 + ty, col] if t0 + ty < K and col < B.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(min(TILE, K - t0)):
            acc += np.float64(sa[ty, kk]) * np.float64(sb[kk, tx])
        cuda.syncthreads()
        t0 += TILE
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


# ============================================================================= 03.stencil
@cuda.jit
def stencil_assumes_128(x, out):
    # wrong: right halo placed as if every block had 128 threads
    sh = cuda.shared.array(SH_HALO, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else 0.0
    if t < RADIUS:
        j = i - RADIUS
        sh[t] = x[j] if j >= 0 else 0.0
        j = cuda.blockIdx.x * 128 + 128 + t
        sh[t + 128 + RADIUS] = x[j] if j < n else 0.0
    cuda.syncthreads()
    if i < n:
        s = 0.0
        for k in range(2 * RADIUS + 1):
            s += sh[t + k]
        out[i] = s / (2 * RADIUS + 1)


@cuda.jit
def stencil_halo_off_by_one(x, out):
    # wrong: the left halo of the first block reads x[-1..-3] (wraps to the end) instead of zeros
    sh = cuda.shared.array(SH_HALO, np.float32)
    t = cuda.threadIdx.x
    bd = cuda.blockDim.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else 0.0
    if t < RADIUS:
        sh[t] = x[i - RADIUS]
        j = i + bd
        sh[t + bd + RADIUS] = x[j] if j < n else 0.0
    cuda.syncthreads()
    if i < n:
        s = 0.0
        for k in range(2 * RADIUS + 1):
            s += sh[t + k]
        out[i] = s / (2 * RADIUS + 1)


@cuda.jit
def stencil_every_thread_loads_window(x, out):
    # correct: a different split of the halo loading (a block-stride loop over the window)
    sh = cuda.shared.array(SH_HALO, np.float32)
    t = cuda.threadIdx.x
    bd = cuda.blockDim.x
    base = cuda.blockIdx.x * bd - RADIUS
    n = x.size
    for s in range(t, bd + 2 * RADIUS, bd):
        j = base + s
        sh[s] = x[j] if j >= 0 and j < n else 0.0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < n:
        acc = 0.0
        for k in range(2 * RADIUS + 1):
            acc += sh[t + k]
        out[i] = acc / (2 * RADIUS + 1)


# ============================================================================= 04.histogram-global / -shared
@cuda.jit
def hist_plain_increment(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        hist[data[i]] += 1


@cuda.jit
def hist_fixed_32_rounds(data, hist):
    # wrong: 32 grid-stride rounds, not "until the end of data"
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    for r in range(32):
        j = i + r * s
        if j < data.size:
            cuda.atomic.add(hist, data[j], 1)


@cuda.jit
def hist_shared_uint16(data, hist):
    local = cuda.shared.array(NBINS, np.uint16)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def hist_shared_zero_assumes_256(data, hist):
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    local[t] = 0  # wrong: only blockDim.x bins are zeroed (and it writes past them for blocks above 256)
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def hist_shared_plain_merge(data, hist):
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        hist[b] += local[b]  # wrong: blocks race on hist


@cuda.jit
def hist_shared_skip_zero_bins(data, hist):
    # correct: merge only non-zero bins, uint32 counters
    local = cuda.shared.array(NBINS, np.uint32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        v = local[b]
        if v != 0:
            cuda.atomic.add(hist, b, v)


# ============================================================================= 04.block-sum
@cuda.jit
def block_sum_assumes_256(x, partial):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def block_sum_barrier_inside_if(x, partial):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
            cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def block_sum_warp_unrolled_no_sync(x, partial):
    # wrong: the "warp-synchronous" last steps without syncwarp or volatile (undefined on Volta and later)
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 32:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t < 32:
        s = 32 if cuda.blockDim.x >= 64 else 16
        if cuda.blockDim.x < 64:
            sh[t] += 0.0
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]
            s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def block_sum_shuffles(x, partial):
    # correct: shuffles within each warp, then one warp sums the warp totals
    warp_tot = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    if t % 32 == 0:
        warp_tot[t // 32] = v
    cuda.syncthreads()
    if t < 32:
        nw = cuda.blockDim.x // 32
        v = warp_tot[t] if t < nw else 0.0
        off = 16
        while off > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
            off //= 2
        if t == 0:
            partial[cuda.blockIdx.x] = v


# ============================================================================= 04.full-sum
@cuda.jit
def full_sum_plain_add(x, out):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[0] += sh[0]


@cuda.jit
def full_sum_exch_merge(x, out):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        old = out[0]
        cuda.atomic.exch(out, 0, old + sh[0])


@cuda.jit
def full_sum_fixed_16_rounds(x, out):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    i0 = cuda.grid(1)
    st = cuda.gridsize(1)
    for r in range(16):
        j = i0 + r * st
        if j < x.size:
            acc += x[j]
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


@cuda.jit
def full_sum_atomic_per_thread(x, out):
    # wrong (issue 18): no tree; every thread adds its grid-stride partial sum atomically
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    cuda.atomic.add(out, 0, acc)


# ============================================================================= 04.warp-sum
@cuda.jit
def warp_sum_early_return(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return
    v = x[i]
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def warp_sum_xor(x, out):
    # correct: butterfly with shfl_xor_sync, every lane ends with the sum
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    m = 1
    while m < 32:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m *= 2
    if i % 32 == 0 and i // 32 < out.size:
        out[i // 32] = v


# ============================================================================= 04.race
@cuda.jit
def race_uint8_counter(x, threshold, counts):
    c = cuda.shared.array(1, np.uint8)
    if cuda.threadIdx.x == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = c[0]


@cuda.jit
def race_global_atomic(x, threshold, counts):
    # correct: atomics straight on the output (which starts unwritten: thread 0 zeroes it first)
    c = cuda.shared.array(1, np.int32)
    if cuda.threadIdx.x == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.exch(counts, cuda.blockIdx.x, c[0])


# ============================================================================= kernels that do not build for a GPU
@cuda.jit
def saxpy_fstring_print(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]
        if i == out.size + 5:
            print(f"i={i}")


@cuda.jit
def block_sum_shared_blockdim(x, partial):
    sh = cuda.shared.array(cuda.blockDim.x, np.float32)  # not a compile-time constant
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


# ============================================================================= plain-Python answers
def softmax_no_max(x):
    """Wrong: no max subtraction (overflows for rows of large values)."""
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    """Wrong: one max for the whole array instead of one per row (underflows rows of small scale)."""
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)


def softmax_log_sum_exp(x):
    """Correct: via log-sum-exp with a per-row max."""
    m = x.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return np.exp(x - lse)


WRONG: dict[str, tuple[str, object]] = {
    "02.saxpy/fixed-16-rounds": ("02.saxpy", saxpy_fixed_16_rounds),
    "02.saxpy/no-stride": ("02.saxpy", saxpy_no_stride),
    "02.saxpy/stride-assumes-128": ("02.saxpy", saxpy_stride_assumes_128),
    "02.saxpy/fstring-print": ("02.saxpy", saxpy_fstring_print),
    "02.grayscale/truncates": ("02.grayscale", grey_truncates),
    "02.grayscale/swapped": ("02.grayscale", grey_swapped),
    "03.coalesced-copy/rows-are-x": ("03.coalesced-copy", copy_rows_are_x),
    "03.matmul/fixed-8-ktiles": ("03.matmul", matmul_fixed_8_ktiles),
    "03.matmul/drops-last-tile": ("03.matmul", matmul_drops_last_tile),
    "03.matmul/no-end-barrier": ("03.matmul", matmul_no_end_barrier),
    "03.matmul/barrier-after-return": ("03.matmul", matmul_barrier_in_branch),
    "03.stencil/assumes-128": ("03.stencil", stencil_assumes_128),
    "03.stencil/left-halo-wraps": ("03.stencil", stencil_halo_off_by_one),
    "04.histogram-global/plain-increment": ("04.histogram-global", hist_plain_increment),
    "04.histogram-global/fixed-32-rounds": ("04.histogram-global", hist_fixed_32_rounds),
    "04.histogram-shared/uint16-bins": ("04.histogram-shared", hist_shared_uint16),
    "04.histogram-shared/zero-assumes-256": ("04.histogram-shared", hist_shared_zero_assumes_256),
    "04.histogram-shared/plain-merge": ("04.histogram-shared", hist_shared_plain_merge),
    "04.block-sum/assumes-256": ("04.block-sum", block_sum_assumes_256),
    "04.block-sum/barrier-inside-if": ("04.block-sum", block_sum_barrier_inside_if),
    "04.block-sum/warp-steps-no-sync": ("04.block-sum", block_sum_warp_unrolled_no_sync),
    "04.block-sum/shared-blockdim": ("04.block-sum", block_sum_shared_blockdim),
    "04.full-sum/plain-add": ("04.full-sum", full_sum_plain_add),
    "04.full-sum/exch-merge": ("04.full-sum", full_sum_exch_merge),
    "04.full-sum/fixed-16-rounds": ("04.full-sum", full_sum_fixed_16_rounds),
    "04.full-sum/atomic-per-thread": ("04.full-sum", full_sum_atomic_per_thread),
    "04.warp-sum/early-return": ("04.warp-sum", warp_sum_early_return),
    "04.race/uint8-counter": ("04.race", race_uint8_counter),
    "05.softmax/no-max": ("05.softmax", softmax_no_max),
    "05.softmax/global-max": ("05.softmax", softmax_global_max),
    "01.a100-20x/fp32-figure": ("01.a100-20x", 19.5),
    "01.a100-20x/string": ("01.a100-20x", "19.87"),
    "01.a100-20x/list": ("01.a100-20x", [19.87]),
    "01.a100-20x/v100-pcie": ("01.a100-20x", 312 / 14),
}

CORRECT: dict[str, tuple[str, object]] = {
    "02.saxpy/while": ("02.saxpy", saxpy_while),
    "02.grayscale/integer-luma": ("02.grayscale", grey_integer_luma),
    "02.grayscale/float32-round": ("02.grayscale", grey_float32_round),
    "03.coalesced-copy/grid-stride-2d": ("03.coalesced-copy", copy_grid_stride_2d),
    "03.matmul/float64-acc": ("03.matmul", matmul_float64_acc),
    "03.stencil/block-stride-load": ("03.stencil", stencil_every_thread_loads_window),
    "04.histogram-shared/skip-zero-bins": ("04.histogram-shared", hist_shared_skip_zero_bins),
    "04.block-sum/shuffles": ("04.block-sum", block_sum_shuffles),
    "04.warp-sum/xor": ("04.warp-sum", warp_sum_xor),
    "04.race/exch-store": ("04.race", race_global_atomic),
    "05.softmax/log-sum-exp": ("05.softmax", softmax_log_sum_exp),
    "01.a100-20x/numpy-scalar": ("01.a100-20x", np.float32(312 / 15.7)),
}


# ============================================================================= 03.transpose
T32 = 32
T33 = 33
TROWS = 8


@cuda.jit
def transpose_unpadded(a, out):
    tile = cuda.shared.array((T32, T32), np.float32)  # wrong: 32-way bank conflicts on the column read
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * T32 + tx
    row = cuda.blockIdx.y * T32 + ty
    for j in range(0, T32, TROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * T32 + tx
    row = cuda.blockIdx.x * T32 + ty
    for j in range(0, T32, TROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_rows_from_blockdim(a, out):
    # correct: the row step taken from blockDim.y, padded tile
    tile = cuda.shared.array((T32, T33), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    step = cuda.blockDim.y
    col = cuda.blockIdx.x * T32 + tx
    row = cuda.blockIdx.y * T32 + ty
    for j in range(0, T32, step):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * T32 + tx
    row = cuda.blockIdx.x * T32 + ty
    for j in range(0, T32, step):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


# ============================================================================= 09.erode / 09.tile-counts
@cuda.jit
def erode_skips_border(mask, out):
    col, row = cuda.grid(2)
    h, w = mask.shape
    if row < 1 or col < 1 or row >= h - 1 or col >= w - 1:
        return
    v = 1
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            if mask[row + dr, col + dc] == 0:
                v = 0
    out[row, col] = v


@cuda.jit
def erode_outside_is_zero(mask, out):
    col, row = cuda.grid(2)
    h, w = mask.shape
    if row < h and col < w:
        v = 1
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                r, c = row + dr, col + dc
                if r < 0 or c < 0 or r >= h or c >= w or mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_min_clamped(mask, out):
    # correct: minimum over the clamped window
    col, row = cuda.grid(2)
    h, w = mask.shape
    if row < h and col < w:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, h)):
            for c in range(max(col - 1, 0), min(col + 2, w)):
                v = min(v, mask[r, c])
        out[row, col] = v


@cuda.jit
def tiles_plain_increment(mask, tile, counts):
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col]:
        counts[row // tile, col // tile] += 1


@cuda.jit
def tiles_atomic_per_pixel(mask, tile, counts):
    # correct: one global atomic per foreground pixel (simple, slower than a shared counter)
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


# ============================================================================= 06.decode-fp16 / 06.tf32-round
def decode_no_subnormals(bits):
    """Wrong: every pattern decoded as normal (1 + m/1024), subnormals and inf/NaN included."""
    s, e, m = int(bits[0]), int(bits[1:6], 2), int(bits[6:], 2)
    return (-1.0) ** s * 2.0 ** (e - 15) * (1 + m / 1024)


def decode_via_numpy(bits):
    """Correct: let NumPy reinterpret the 16 bits."""
    return float(np.array([int(bits, 2)], np.uint16).view(np.float16)[0])


def tf32_truncate(x):
    """Wrong: truncation (clears the low 13 bits) instead of round to nearest even."""
    b = np.asarray(x, np.float32).view(np.uint32)
    return (b & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_round_no_nan_guard(x):
    """Wrong: the rounding bit trick without keeping NaNs NaN (a payload only in the low bits becomes inf)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def tf32_round_float64(x):
    """Correct: round to nearest even with a NaN guard, via integer arithmetic in int64."""
    x = np.asarray(x, np.float32)
    b = x.view(np.uint32).astype(np.int64)
    r = ((b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000) & 0xFFFFFFFF
    out = r.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out).astype(np.float32)


WRONG.update({
    "03.transpose/unpadded": ("03.transpose", transpose_unpadded),
    "09.erode/skips-border": ("09.erode", erode_skips_border),
    "09.erode/outside-is-zero": ("09.erode", erode_outside_is_zero),
    "09.tile-counts/plain-increment": ("09.tile-counts", tiles_plain_increment),
    "06.decode-fp16/no-subnormals": ("06.decode-fp16", decode_no_subnormals),
    "06.tf32-round/truncate": ("06.tf32-round", tf32_truncate),
    "06.tf32-round/no-nan-guard": ("06.tf32-round", tf32_round_no_nan_guard),
})
CORRECT.update({
    "03.transpose/rows-from-blockdim": ("03.transpose", transpose_rows_from_blockdim),
    "09.erode/min-clamped": ("09.erode", erode_min_clamped),
    "09.tile-counts/atomic-per-pixel": ("09.tile-counts", tiles_atomic_per_pixel),
    "06.decode-fp16/numpy-view": ("06.decode-fp16", decode_via_numpy),
    "06.tf32-round/int64-nan-guard": ("06.tf32-round", tf32_round_float64),
})


# ============================================================================= 00.vector-add
@cuda.jit
def vector_add_below_1000(a, b, out):
    i = cuda.grid(1)
    if i < 1000:  # wrong: a hard-coded size instead of out.size
        if i < out.size:
            out[i] = a[i] + b[i]


@cuda.jit
def vector_add_grid_stride(a, b, out):
    # correct: a grid-stride loop where one element per thread would do
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a[i] + b[i]


# ============================================================================= 04.scan
SCAN_MAX = 256


@cuda.jit
def scan_block_no_middle_barrier(x, sums, out):
    sh = cuda.shared.array(SCAN_MAX, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        if t >= offset:
            sh[t] += sh[t - offset]  # wrong: reads a neighbour that may already hold this round's value
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def scan_block_ping_pong(x, sums, out):
    # correct: Hillis-Steele with two buffers (one barrier per round)
    sh = cuda.shared.array((2, SCAN_MAX), np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[0, t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    src = 0
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[src, t]
        if t >= offset:
            v += sh[src, t - offset]
        sh[1 - src, t] = v
        cuda.syncthreads()
        src = 1 - src
        offset *= 2
    if i < out.size:
        out[i] = sh[src, t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[src, t]


@cuda.jit
def add_offsets_ok(partial, offsets, out):
    i = cuda.grid(1)
    if i < out.size:
        b = cuda.blockIdx.x
        out[i] = partial[i] + (offsets[b - 1] if b > 0 else 0.0)


@cuda.jit
def add_offsets_same_block(partial, offsets, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = partial[i] + offsets[cuda.blockIdx.x]  # wrong: the block's own total, not the blocks before it


# ============================================================================= 05.leaky-relu (CUDA C++ source)
LEAKY_LE_N = r"""
extern "C" __global__
void leaky_relu(const float* x, float* y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        float v = x[i];
        y[i] = v > 0.0f ? v : alpha * v;
    }
}
"""

LEAKY_NO_GUARD = r"""
extern "C" __global__
void leaky_relu(const float* x, float* y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    y[i] = v > 0.0f ? v : alpha * v;
}
"""

LEAKY_ALPHA_ALWAYS = r"""
extern "C" __global__
void leaky_relu(const float* x, float* y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f) * alpha;  // wrong: scales the positive part too, drops the negative part
}
"""

LEAKY_GRID_STRIDE = r"""
// a grid-stride loop; the comment mentions __shared__ and #include <cuda_fp16.h> on purpose
extern "C" __global__
void leaky_relu(const float* __restrict__ x, float* __restrict__ y, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const float v = x[i];
        y[i] = (v > 0.0f) ? v : v * alpha;
    }
}
"""


# ============================================================================= 08.ring-step
def ring_step_gather_adds(chunks, phase, step):
    """Wrong: the all-gather adds like the reduce-scatter instead of replacing."""
    n = len(chunks)
    shift = 0 if phase == "reduce-scatter" else 1
    sends = [(g, (g + 1) % n, (g + shift - step) % n) for g in range(n)]
    data = [chunks[g][c].copy() for g, _, c in sends]
    for (g, dst, c), d in zip(sends, data):
        chunks[dst][c] += d


def ring_step_rebinds(chunks, phase, step):
    """Wrong: replaces the list entry (a new array) instead of writing into the GPU's buffer."""
    n = len(chunks)
    shift = 0 if phase == "reduce-scatter" else 1
    sends = [(g, (g + 1) % n, (g + shift - step) % n) for g in range(n)]
    data = [chunks[g][c].copy() for g, _, c in sends]
    for (g, dst, c), d in zip(sends, data):
        chunks[dst][c] = chunks[dst][c] + d if phase == "reduce-scatter" else d


def ring_step_schedule(chunks, phase, step):
    """Correct: labkit's schedule, np.add / np.copyto into the buffers (no copy needed: no GPU receives the chunk it sends)."""
    from labkit.collectives import ring_schedule

    n = len(chunks)
    if n == 1:
        return
    for src, dst, c in ring_schedule(n, phase, step):
        if phase == "reduce-scatter":
            np.add(chunks[dst][c], chunks[src][c], out=chunks[dst][c])
        else:
            np.copyto(chunks[dst][c], chunks[src][c])


WRONG.update({
    "00.vector-add/below-1000": ("00.vector-add", vector_add_below_1000),
    "04.scan/no-middle-barrier": ("04.scan", (scan_block_no_middle_barrier, add_offsets_ok)),
    "04.scan/offsets-same-block": ("04.scan", (scan_block_ping_pong, add_offsets_same_block)),
    "05.leaky-relu/i-le-n": ("05.leaky-relu", LEAKY_LE_N),
    "05.leaky-relu/no-guard": ("05.leaky-relu", LEAKY_NO_GUARD),
    "05.leaky-relu/alpha-always": ("05.leaky-relu", LEAKY_ALPHA_ALWAYS),
    "08.ring-step/gather-adds": ("08.ring-step", ring_step_gather_adds),
    "08.ring-step/rebinds": ("08.ring-step", ring_step_rebinds),
})
CORRECT.update({
    "00.vector-add/grid-stride": ("00.vector-add", vector_add_grid_stride),
    "04.scan/ping-pong": ("04.scan", (scan_block_ping_pong, add_offsets_ok)),
    "05.leaky-relu/grid-stride-restrict": ("05.leaky-relu", LEAKY_GRID_STRIDE),
    "08.ring-step/schedule": ("08.ring-step", ring_step_schedule),
})

# ============================================================================= 07.pcie-peak / 07.event-timing
_GTS = {3: 8.0, 4: 16.0, 5: 32.0}


def pcie_no_encoding(generation, lanes):
    """Wrong: GT/s × lanes / 8, forgetting the 128b/130b line code (1.5% high)."""
    return _GTS[generation] * lanes / 8


def pcie_from_gts(generation, lanes):
    """Correct: from the transfer rate and the 128b/130b encoding, not from labkit's table."""
    return _GTS[generation] * (128 / 130) * lanes / 8


def _timed(cp, host, repeat, *, warm: bool = True, sync: bool = True, d2d_bytes: int = 2, default_stream: bool = False):
    a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    out = {}
    for name, copy, counted in (("h2d", lambda: a.set(host), host.nbytes),
                                ("d2d_read_write", lambda: b.__setitem__(Ellipsis, a), d2d_bytes * host.nbytes)):
        if warm:
            copy()
        start.record()
        for _ in range(repeat):
            copy()
        end.record()
        if sync:
            end.synchronize()
        out[name] = repeat * counted / (cp.cuda.get_elapsed_time(start, end) * 1e-3) / 1e9
    return out


def _on_stream(cp, host, repeat, **kw):  # type: ignore[no-untyped-def]
    with cp.cuda.Stream(non_blocking=True):
        return _timed(cp, host, repeat, **kw)


def events_no_warmup(cp, host, repeat):
    """Wrong: no warm-up copy (the first copy's set-up is timed)."""
    return _on_stream(cp, host, repeat, warm=False)


def events_no_sync(cp, host, repeat):
    """Wrong: reads the elapsed time without waiting for the end event."""
    return _on_stream(cp, host, repeat, sync=False)


def events_d2d_once(cp, host, repeat):
    """Wrong: counts a device-to-device copy's bytes once (this lab counts the read and the write)."""
    return _on_stream(cp, host, repeat, d2d_bytes=1)


def events_constants(cp, host, repeat):
    """Wrong: figures from the data sheet, nothing timed."""
    return {"h2d": 25.0, "d2d_read_write": 1500.0}


def events_default_stream(cp, host, repeat):
    """Correct: everything on the default stream, which is one stream too."""
    return _timed(cp, host, repeat)


WRONG.update({
    "07.pcie-peak/no-encoding": ("07.pcie-peak", pcie_no_encoding),
    "07.event-timing/no-warmup": ("07.event-timing", events_no_warmup),
    "07.event-timing/no-sync": ("07.event-timing", events_no_sync),
    "07.event-timing/d2d-bytes-once": ("07.event-timing", events_d2d_once),
    "07.event-timing/constants": ("07.event-timing", events_constants),
})
CORRECT.update({
    "07.pcie-peak/from-gts": ("07.pcie-peak", pcie_from_gts),
    "07.event-timing/default-stream": ("07.event-timing", events_default_stream),
})


# ============================================================================= 05.huber / 05.l2norm (CuPy kernels in CUDA C++)
def _cupylab():  # type: ignore[no-untyped-def]
    from labkit import cupylab

    return cupylab


def huber_strict_lt():
    """Correct: `d < delta` instead of `d <= delta` (both branches agree at d == delta), written with fmaf."""
    return _cupylab().elementwise_kernel(
        "float32 x, float32 y, float32 delta", "float32 z",
        "const float d = fabsf(x - y); z = (d < delta) ? 0.5f * d * d : fmaf(delta, d, -0.5f * delta * delta)", "huber")


def huber_swapped_branches():
    """Wrong: the quadratic branch used for large differences."""
    return _cupylab().elementwise_kernel(
        "float32 x, float32 y, float32 delta", "float32 z",
        "float d = fabsf(x - y); z = d > delta ? 0.5f * d * d : delta * (d - 0.5f * delta)", "huber")


def huber_no_abs():
    """Wrong: no absolute value (negative differences take the quadratic branch)."""
    return _cupylab().elementwise_kernel(
        "float32 x, float32 y, float32 delta", "float32 z",
        "float d = x - y; z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)", "huber")


def l2norm_no_sqrt():
    """Wrong: the sum of squares, no square root."""
    return _cupylab().reduction_kernel("T x", "T y", "x * x", "a + b", "y = a", "0", "l2norm")


def l2norm_identity_one():
    """Wrong: identity 1 for a sum."""
    return _cupylab().reduction_kernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "1", "l2norm")


def l2norm_abs_map():
    """Correct: fabs(x) * fabs(x) and sqrtf-free `sqrt`, a different but equal map."""
    return _cupylab().reduction_kernel("T x", "T y", "fabs(x) * fabs(x)", "a + b", "y = sqrt(a)", "0", "l2norm")


# ============================================================================= 09.fused-update
@cuda.jit
def fused_ge_threshold(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) >= thresh else 0  # wrong: >= instead of >
        bg[row, col] = b + alpha * d


@cuda.jit
def fused_new_bg_first(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col] + alpha * (np.float32(frame[row, col]) - bg[row, col])
        bg[row, col] = b
        mask[row, col] = 1 if abs(np.float32(frame[row, col]) - b) > thresh else 0  # wrong: against the new bg


@cuda.jit
def fused_lerp(frame, bg, mask, alpha, thresh):
    # correct: the update written as (1 - alpha) * b + alpha * f (equal within rounding)
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        f = np.float32(frame[row, col])
        b = bg[row, col]
        mask[row, col] = np.uint8(abs(f - b) > thresh)
        bg[row, col] = (np.float32(1.0) - alpha) * b + alpha * f


WRONG.update({
    "05.huber/swapped-branches": ("05.huber", huber_swapped_branches),
    "05.huber/no-abs": ("05.huber", huber_no_abs),
    "05.l2norm/no-sqrt": ("05.l2norm", l2norm_no_sqrt),
    "05.l2norm/identity-one": ("05.l2norm", l2norm_identity_one),
    "09.fused-update/ge-threshold": ("09.fused-update", fused_ge_threshold),
    "09.fused-update/new-bg-first": ("09.fused-update", fused_new_bg_first),
})
CORRECT.update({
    "05.huber/strict-lt-fmaf": ("05.huber", huber_strict_lt),
    "05.l2norm/abs-map": ("05.l2norm", l2norm_abs_map),
    "09.fused-update/lerp": ("09.fused-update", fused_lerp),
})


# ============================================================================= 06.loss-scale / 06.gemm-predict
def loss_scale_off_by_one(scale, found_inf, good_steps, growth_interval):
    """Wrong: grows one good step late (count > interval)."""
    if found_inf:
        return scale / 2, 0, False
    good_steps += 1
    if good_steps > growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True


def loss_scale_applies_overflow(scale, found_inf, good_steps, growth_interval):
    """Wrong: applies the step whose gradients overflowed."""
    if found_inf:
        return scale / 2, 0, True
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True


def loss_scale_keeps_count(scale, found_inf, good_steps, growth_interval):
    """Wrong: halves the scale but keeps counting good steps across the overflow."""
    if found_inf:
        return scale / 2, good_steps, False
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True


def loss_scale_arith(scale, found_inf, good_steps, growth_interval):
    """Correct: the same rule written with one return."""
    new_count = 0 if found_inf else (good_steps + 1) % growth_interval
    grow = (not found_inf) and good_steps + 1 == growth_interval
    return scale * (0.5 if found_inf else 2.0 if grow else 1.0), new_count, not found_inf


def gemm_sum_of_times(m, n, k, precision, gpu):
    """Wrong: adds the compute and the memory time instead of taking the slower."""
    from labkit import hw

    g = hw.gpu(gpu)
    size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
    flops = 2 * m * n * k
    seconds = flops / (g.peak(precision).value * 1e12) + size * (m * k + k * n + m * n) / (g.memory_bandwidth.value * 1e9)
    return flops / seconds / 1e12


def gemm_mnk_flops(m, n, k, precision, gpu):
    """Wrong: m·n·k FLOPs (an FMA is 2)."""
    from labkit import hw

    g = hw.gpu(gpu)
    size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
    flops = m * n * k
    seconds = max(flops / (g.peak(precision).value * 1e12), size * (m * k + k * n + m * n) / (g.memory_bandwidth.value * 1e9))
    return flops / seconds / 1e12


def gemm_roofline_min(m, n, k, precision, gpu):
    """Correct: min(peak, intensity × bandwidth), the same roofline in another form."""
    from labkit import hw

    g = hw.gpu(gpu)
    size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
    intensity = 2 * m * n * k / (size * (m * k + k * n + m * n))
    return min(g.peak(precision).value, intensity * g.memory_bandwidth.value / 1000)


WRONG.update({
    "06.loss-scale/off-by-one": ("06.loss-scale", loss_scale_off_by_one),
    "06.loss-scale/applies-overflow": ("06.loss-scale", loss_scale_applies_overflow),
    "06.loss-scale/keeps-count": ("06.loss-scale", loss_scale_keeps_count),
    "06.gemm-predict/sum-of-times": ("06.gemm-predict", gemm_sum_of_times),
    "06.gemm-predict/mnk-flops": ("06.gemm-predict", gemm_mnk_flops),
})
CORRECT.update({
    "06.loss-scale/one-return": ("06.loss-scale", loss_scale_arith),
    "06.gemm-predict/roofline-min": ("06.gemm-predict", gemm_roofline_min),
})


# ============================================================================= 02.launch-config / 02.transfers
def grid_plus_one(shape, block):
    """Wrong: one block too many on exact multiples (not the smallest grid)."""
    rows, cols = shape
    return (cols // block[0] + 1, rows // block[1] + 1)


def grid_rows_first(shape, block):
    """Wrong: (rows, cols) order, x over rows."""
    rows, cols = shape
    return (-(-rows // block[0]), -(-cols // block[1]))


def grid_ceil(shape, block):
    """Correct: math.ceil on the ratio."""
    return (math.ceil(shape[1] / block[0]), math.ceil(shape[0] / block[1]))


def transfers_numpy_each_launch(a, x, y, steps):
    """Wrong: NumPy arrays passed to every launch (Numba copies them in and out each time)."""
    y = y.copy()
    for _ in range(steps):
        saxpy_while[2, 64](a, x, y, y)
    return y


def transfers_copy_back_each_step(a, x, y, steps):
    """Wrong: copies the result back after every step."""
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    out = y
    for _ in range(steps):
        saxpy_while[2, 64](a, dx, dy, dy)
        out = dy.copy_to_host()
    return out


def transfers_ping_pong(a, x, y, steps):
    """Correct: two device buffers swapped each step, one copy back."""
    dx, d0 = cuda.to_device(x), cuda.to_device(y)
    d1 = cuda.device_array_like(d0)
    for _ in range(steps):
        saxpy_while[1, 96](a, dx, d0, d1)
        d0, d1 = d1, d0
    return d0.copy_to_host()


# ============================================================================= 08.scaling-efficiency
def scaling_unbounded_overlap(compute_s, allreduce_s, n, overlap=0.0):
    """Wrong: hides overlap × compute even when the all-reduce is shorter (step faster than compute)."""
    if n == 1:
        return 1.0, 1.0
    step = compute_s + allreduce_s - overlap * compute_s
    return n * compute_s / step, compute_s / step


def scaling_one_gpu_pays(compute_s, allreduce_s, n, overlap=0.0):
    """Wrong: one GPU pays the all-reduce too."""
    step = compute_s + max(0.0, allreduce_s - overlap * compute_s)
    return n * compute_s / step, compute_s / step


def scaling_exposed(compute_s, allreduce_s, n, overlap=0.0):
    """Correct: the exposed part of the all-reduce, max(0, ...), and 1 GPU with nothing to reduce."""
    exposed = 0.0 if n == 1 else max(0.0, allreduce_s - overlap * compute_s)
    eff = compute_s / (compute_s + exposed)
    return n * eff, eff


WRONG.update({
    "02.launch-config/plus-one": ("02.launch-config", grid_plus_one),
    "02.launch-config/rows-first": ("02.launch-config", grid_rows_first),
    "02.transfers/numpy-each-launch": ("02.transfers", transfers_numpy_each_launch),
    "02.transfers/copy-back-each-step": ("02.transfers", transfers_copy_back_each_step),
    "08.scaling-efficiency/unbounded-overlap": ("08.scaling-efficiency", scaling_unbounded_overlap),
    "08.scaling-efficiency/one-gpu-pays": ("08.scaling-efficiency", scaling_one_gpu_pays),
})
CORRECT.update({
    "02.launch-config/ceil": ("02.launch-config", grid_ceil),
    "02.transfers/ping-pong": ("02.transfers", transfers_ping_pong),
    "08.scaling-efficiency/exposed": ("08.scaling-efficiency", scaling_exposed),
})



def _run(exercise: str, answer: object):  # type: ignore[no-untyped-def]
    """check.run with one answer, or with several (a tuple) for exercises that take more than one."""
    if isinstance(answer, tuple):
        return check.run(exercise, *answer)
    if callable(answer) and getattr(answer, "__name__", "").startswith(("huber_", "l2norm_")):
        return check.run(exercise, answer())  # built when the test runs, not at import
    return check.run(exercise, answer)


@pytest.mark.parametrize("key", list(WRONG))
def test_wrong_answer_fails(key: str) -> None:
    exercise, answer = WRONG[key]
    result = _run(exercise, answer)
    assert not result.passed, f"{key} passed: {result.report()}"


@pytest.mark.parametrize("key", list(CORRECT))
def test_correct_variant_passes(key: str) -> None:
    exercise, answer = CORRECT[key]
    result = _run(exercise, answer)
    assert result.passed, f"{key} failed: {result.report()}"
