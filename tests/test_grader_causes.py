"""Causes that help (issue 18, item 5): wrong answers to every exercise of labs 00-04, each with the likely cause it
must get (words the cause must hold) and words it must not hold (a cause the evidence contradicts: "zero it first"
for a tile loaded in the wrong place, "write the kernel body" for a kernel that has one, internal class names).

At least three wrong answers per exercise. The table is also the red-team file whose share of right causes the
issue's closing note reports (every row here passes, so the share is every row). Cost: about 10 s in sim."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="the causes are read from the simulator's evidence")

from numba import cuda  # noqa: E402

from labkit import check, hw  # noqa: E402
from labkit.check import harness as H  # noqa: E402
from labkit.check.core import Failed  # noqa: E402

import test_grader_shortcuts as S  # noqa: E402  (shortcut answers, reused)

NBINS = 256
RADIUS = 3
SH = 256 + 2 * RADIUS
T32, T33, ROWS = 32, 33, 8
MT = 16


# ============================================================================= 00.vector-add
@cuda.jit
def add_into_b(a, b, out):  # writes its result into the input b, out stays untouched
    i = cuda.grid(1)
    if i < out.size:
        b[i] = a[i] + b[i]


@cuda.jit
def add_no_bounds(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def add_thread_only(a, b, out):
    i = cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def add_shared_garbage(a, b, out):  # adds a shared element nobody wrote: the NaN comes from the kernel, not the skeleton
    sh = cuda.shared.array(1024, np.float32)
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i] + sh[cuda.threadIdx.x]


@cuda.jit
def add_below_1000(a, b, out):
    i = cuda.grid(1)
    if i < 1000 and i < out.size:
        out[i] = a[i] + b[i]


# ============================================================================= 02.saxpy
@cuda.jit
def saxpy_stride_assumes_128(a, x, y, out):
    i = cuda.blockIdx.x * 128 + cuda.threadIdx.x
    while i < out.size:
        out[i] = a * x[i] + y[i]
        i += 128 * cuda.gridDim.x


@cuda.jit
def saxpy_into_y(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        y[i] = a * x[i] + y[i]
        out[i] = y[i]


@cuda.jit
def saxpy_no_stride(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


# ============================================================================= 02.grayscale
@cuda.jit
def grey_truncates(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]


@cuda.jit
def grey_swapped(img, out):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


@cuda.jit
def grey_into_img(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)
        img[row, col, 0] = v
        out[row, col] = v


# ============================================================================= 02.launch-config
def grid_floor(shape, block):
    return (shape[1] // block[0], shape[0] // block[1])


def grid_plus_one(shape, block):
    return (shape[1] // block[0] + 1, shape[0] // block[1] + 1)


def grid_rows_first(shape, block):
    return (-(-shape[0] // block[1]), -(-shape[1] // block[0]))


# ============================================================================= 02.transfers
def transfers_writes_x(a, x, y, steps):
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for _ in range(steps):
        S._saxpy_once[(x.size + 127) // 128, 128](a, dx, dy, dy)
    x[:] = 0  # wrong: the host input is overwritten
    return dy.copy_to_host()


def transfers_name_error(a, x, y, steps):
    dx = cuda.to_device(x)
    return dx.copy_to_host() + undefined_name  # noqa: F821 - a host-side NameError


def transfers_copy_each_step(a, x, y, steps):
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    out = y
    for _ in range(steps):
        S._saxpy_once[(x.size + 127) // 128, 128](a, dx, dy, dy)
        out = dy.copy_to_host()
    return out


def transfers_numpy_each_launch(a, x, y, steps):
    y = y.copy()
    for _ in range(steps):
        S._saxpy_once[(x.size + 127) // 128, 128](a, x, y, y)
    return y


# ============================================================================= 03.coalesced-copy
@cuda.jit
def copy_rows_are_x(src, dst):
    row, col = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


@cuda.jit
def copy_into_src(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        src[row, col] = 2 * src[row, col]
        dst[row, col] = src[row, col] / 2


# ============================================================================= 03.transpose
@cuda.jit
def transpose_unpadded(a, out):
    tile = cuda.shared.array((T32, T32), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * T32 + tx
    row = cuda.blockIdx.y * T32 + ty
    for j in range(0, T32, ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * T32 + tx
    row = cuda.blockIdx.x * T32 + ty
    for j in range(0, T32, ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_no_barrier(a, out):
    tile = cuda.shared.array((T32, T33), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * T32 + tx
    row = cuda.blockIdx.y * T32 + ty
    for j in range(0, T32, ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    col = cuda.blockIdx.y * T32 + tx
    row = cuda.blockIdx.x * T32 + ty
    for j in range(0, T32, ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_tile_wrong_place(a, out):
    tile = cuda.shared.array((T32, T33), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * T32 + tx
    row = cuda.blockIdx.y * T32 + ty
    if row < a.shape[0] and col < a.shape[1]:
        tile[ty, tx] = a[row, col]  # wrong: one row per thread, rows BLOCK_ROWS.. of the tile never loaded
    cuda.syncthreads()
    col = cuda.blockIdx.y * T32 + tx
    row = cuda.blockIdx.x * T32 + ty
    for j in range(0, T32, ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_global(a, out):  # right values, no shared memory
    col, row = cuda.grid(2)
    for j in range(0, T32, ROWS):
        r = cuda.blockIdx.y * T32 + cuda.threadIdx.y + j
        if r < a.shape[0] and col < a.shape[1]:
            out[col, r] = a[r, col]


# ============================================================================= 03.matmul
@cuda.jit
def matmul_naive(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def matmul_no_end_barrier(A, B, C):
    sa = cuda.shared.array((MT, MT), np.float32)
    sb = cuda.shared.array((MT, MT), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = 0.0
    for t in range((A.shape[1] + MT - 1) // MT):
        k = t * MT
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else 0.0
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(MT):
            acc += sa[ty, kk] * sb[kk, tx]
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_into_a(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc
    if row < A.shape[0] and col < A.shape[1]:
        A[row, col] = 0.0


# ============================================================================= 03.stencil
@cuda.jit
def stencil_no_left_halo(x, out):  # the left halo is never loaded: the reads there find garbage
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    bd = cuda.blockDim.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else 0.0
    if t < RADIUS:
        j = i + bd
        sh[t + bd + RADIUS] = x[j] if j < n else 0.0
    cuda.syncthreads()
    if i < n:
        s = 0.0
        for k in range(2 * RADIUS + 1):
            s += sh[t + k]
        out[i] = s / (2 * RADIUS + 1)


@cuda.jit
def stencil_no_barrier(x, out):
    sh = cuda.shared.array(SH, np.float32)
    t = cuda.threadIdx.x
    bd = cuda.blockDim.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else 0.0
    if t < RADIUS:
        sh[t] = x[i - RADIUS] if i >= RADIUS else 0.0
        j = i + bd
        sh[t + bd + RADIUS] = x[j] if j < n else 0.0
    if i < n:
        s = 0.0
        for k in range(2 * RADIUS + 1):
            s += sh[t + k]
        out[i] = s / (2 * RADIUS + 1)


@cuda.jit
def stencil_in_place(x, out):  # smooths x itself, then copies: writes its input
    i = cuda.grid(1)
    n = x.size
    if i < n:
        s = 0.0
        for k in range(-RADIUS, RADIUS + 1):
            if 0 <= i + k < n:
                s += x[i + k]
        x[i] = s / (2 * RADIUS + 1)
        out[i] = x[i]


@cuda.jit
def stencil_global(x, out):
    i = cuda.grid(1)
    n = x.size
    if i < n:
        s = 0.0
        for k in range(-RADIUS, RADIUS + 1):
            if 0 <= i + k < n:
                s += x[i + k]
        out[i] = s / (2 * RADIUS + 1)


# ============================================================================= 03.occupancy
def plan_always_none(arch, target, shared_per_block):
    return None


def plan_odd_threads(arch, target, shared_per_block):
    return (100, 32)


# ============================================================================= 04.histogram-global / -shared
@cuda.jit
def hist_plain(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        hist[data[i]] += 1


@cuda.jit
def hist_no_stride(data, hist):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i], 1)


@cuda.jit
def hist_shared_not_zeroed(data, hist):
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def hist_shared_merge_per_element(data, hist):
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
        cuda.atomic.add(hist, data[i], 1)


@cuda.jit
def hist_global_only(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i], 1)


# ============================================================================= 04.block-sum
@cuda.jit
def block_sum_barrier_in_if(x, partial):
    sh = cuda.shared.array(256, np.float32)
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
def block_sum_no_barrier(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


# ============================================================================= 04.full-sum
@cuda.jit
def full_sum_plain_add(x, out):
    sh = cuda.shared.array(256, np.float32)
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


# ============================================================================= 04.warp-sum
@cuda.jit
def warp_sum_early_return(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def warp_sum_no_shuffle(x, out):
    i = cuda.grid(1)
    if i % 32 == 0 and i // 32 < out.size:
        s = 0.0
        for k in range(i, min(i + 32, x.size)):
            s += x[k]
        out[i // 32] = s


@cuda.jit
def warp_sum_into_x(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.size:
        out[i // 32] = v
        x[i] = v


# ============================================================================= 04.race
@cuda.jit
def count_racy(x, threshold, counts):
    c = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        c[0] += 1
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = c[0]


@cuda.jit
def count_at_least(x, threshold, counts):
    c = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        c[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] >= threshold:
        cuda.atomic.add(c, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = c[0]


# ============================================================================= 04.scan
@cuda.jit
def scan_no_sums(x, sums, out):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else 0.0
        cuda.syncthreads()
        sh[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == 0:
        sums[cuda.blockIdx.x] = sh[t]  # wrong: thread 0 holds only the first element


@cuda.jit
def scan_from_global(x, sums, out):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s = 0.0
    start = cuda.blockIdx.x * cuda.blockDim.x
    for k in range(start, min(i + 1, x.size)):
        s += x[k]
    sh[t] = s
    cuda.syncthreads()
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


# ============================================================================= the table
def _v100() -> tuple[float, float]:
    v = hw.gpu("V100").peak("fp16").value
    p = hw.gpu("P100")
    return v / p.peak("fp32").value, v / p.peak("fp16").value


def _a100() -> float:
    return hw.gpu("A100").peak("tf32", sparse=True).value / hw.gpu("V100").peak("fp32").value


def _dgx_a100() -> float:
    s = hw.system("DGX A100")
    return s.gpu_count.value * s.gpu_model.peak("fp16", sparse=True).value / 1000


def _superpod() -> tuple[int, float]:
    from labkit.check import lab01

    return lab01._superpod()


def _backplane() -> float:
    return 6 * 8 * hw.link("NVLink 2").per_link.value * 2


def _two_dgx1() -> float:
    from labkit.check import lab01

    return lab01._two_dgx1_ms()


def _ring(factor: float = 1.0, form: str = "right"):  # type: ignore[no-untyped-def]
    def fn(nbytes, n, bw):  # type: ignore[no-untyped-def]
        if form == "2(n-1)":
            return 2 * (n - 1) * nbytes / (bw * 1e9)
        return factor * 2 * (n - 1) / n * nbytes / (bw * 1e9)

    return fn


NVL = hw.link("NVLink 2").per_link.value
X = object()  # "the thunk is called": numeric answers computed when the test runs (labkit.hw), not at import

# (exercise, answer or a thunk giving the answer(s), words the cause must hold, words it must not hold)
CASES: dict[str, tuple[str, object, tuple[str, ...], tuple[str, ...]]] = {
    "00/writes-into-b": ("00.vector-add", add_into_b, ("wrote into its input `b`",), ("kernel body",)),
    "00/no-bounds": ("00.vector-add", add_no_bounds, ("bounds check",), ()),
    "00/thread-index-only": ("00.vector-add", add_thread_only, ("index formula",), ()),
    "00/pow2-shift": ("00.vector-add", S.add_pow2_block, ("not a power of two",), ()),
    "00/block-256": ("00.vector-add", S.add_block_256, ("assumes a block size", "256"), ()),
    "00/below-1000": ("00.vector-add", add_below_1000, ("stops at 1000",), ()),
    "00/shared-garbage": ("00.vector-add", add_shared_garbage, ("no thread of the block ever writes",),
                          ("kernel body", "zero it first")),
    "01.v100/swapped": ("01.v100-vs-p100", lambda: _v100()[::-1], ("ratio_fp32 divides",), ()),
    "01.v100/upside-down": ("01.v100-vs-p100", lambda: (1 / _v100()[0], _v100()[1]), ("divide the v100",), ()),
    "01.v100/fp32-peak": ("01.v100-vs-p100", lambda: (hw.gpu("V100").peak("fp32").value / hw.gpu("P100").peak("fp32").value,
                                                      _v100()[1]), ("fp32 peak",), ()),
    "01.a100/dense": ("01.a100-20x", lambda: _a100() / 2, ("dense tf32",), ()),
    "01.a100/plain-fp32-figure": ("01.a100-20x", lambda: hw.gpu("A100").peak("fp32").value, ("not a ratio",), ()),
    "01.a100/upside-down": ("01.a100-20x", lambda: 1 / _a100(), ("upside down",), ()),
    "01.a100/times-1000": ("01.a100-20x", lambda: _a100() * 1000, ("exactly 1000 times",), ()),
    "01.dgx/tflops": ("01.dgx-a100-5pf", lambda: _dgx_a100() * 1000, ("tflop/s",), ()),
    "01.dgx/dense": ("01.dgx-a100-5pf", lambda: _dgx_a100() / 2, ("dense",), ()),
    "01.dgx/one-gpu": ("01.dgx-a100-5pf", lambda: _dgx_a100() / 8, ("one gpu",), ()),
    "01.superpod/fraction": ("01.superpod", lambda: (_superpod()[0] + 0.4, _superpod()[1]), ("whole",), ()),
    "01.superpod/systems": ("01.superpod", lambda: (140, _superpod()[1]), ("8 gpus",), ()),
    "01.superpod/tflops": ("01.superpod", lambda: (_superpod()[0], _superpod()[1] * 1000), ("tflop/s",), ()),
    "01.superpod/dense": ("01.superpod", lambda: (_superpod()[0], _superpod()[1] / 2), ("dense",), ()),
    "01.backplane/per-direction": ("01.dgx2-backplane", lambda: _backplane() / 2, ("per-direction",), ()),
    "01.backplane/tbps": ("01.dgx2-backplane", lambda: _backplane() / 1000, ("tb/s",), ()),
    "01.backplane/bits": ("01.dgx2-backplane", lambda: _backplane() * 8, ("bits",), ()),
    "01.pairs/bidirectional": ("01.dgx1-pairs", lambda: (4 * NVL, NVL, 0.0), ("bidirectional",), ()),
    "01.pairs/link-count": ("01.dgx1-pairs", lambda: (2, 1, 0), ("link count",), ()),
    "01.pairs/gpu5": ("01.dgx1-pairs", lambda: (2 * NVL, NVL, NVL), ("pcie",), ()),
    "01.ring/no-factor-2": ("01.ring-allreduce", lambda: _ring(0.5), ("factor 2 is missing",), ("slips that",)),
    "01.ring/ms": ("01.ring-allreduce", lambda: _ring(1e3), ("milliseconds",), ()),
    "01.ring/2(n-1)": ("01.ring-allreduce", lambda: _ring(form="2(n-1)"), ("not 2(n-1)",), ()),
    "01.ring/bits": ("01.ring-allreduce", lambda: _ring(8.0), ("bits",), ()),
    "01.two-dgx1/gigabits": ("01.two-dgx1", lambda: _two_dgx1() / 8, ("gigabits",), ()),
    "01.two-dgx1/times-8": ("01.two-dgx1", lambda: _two_dgx1() * 8, ("exactly 8 times",), ()),
    "01.two-dgx1/seconds": ("01.two-dgx1", lambda: _two_dgx1() / 1000, ("seconds",), ()),
    "01.two-dgx1/one-port": ("01.two-dgx1", lambda: _two_dgx1() * 4, ("one edr port",), ()),
    "02.saxpy/into-y": ("02.saxpy", saxpy_into_y, ("wrote into its input `y`",), ()),
    "02.saxpy/no-stride": ("02.saxpy", saxpy_no_stride, ("grid-stride",), ()),
    "02.saxpy/stride-assumes-128": ("02.saxpy", saxpy_stride_assumes_128, ("128 threads", "assumes a block size"), ()),
    "02.saxpy/int16": ("02.saxpy", S.saxpy_int16, ("int16",), ()),
    "02.saxpy/pow2-stride": ("02.saxpy", S.saxpy_pow2_stride, ("not a power of two",), ()),
    "02.grey/truncates": ("02.grayscale", grey_truncates, ("round",), ()),
    "02.grey/swapped": ("02.grayscale", grey_swapped, ("column",), ()),
    "02.grey/into-img": ("02.grayscale", grey_into_img, ("wrote into its input `img`",), ()),
    "02.grey/block-16x8": ("02.grayscale", S.grey_block_16x8, ("not a power of two",), ()),
    "02.launch/floor": ("02.launch-config", grid_floor, ("floor division",), ()),
    "02.launch/plus-one": ("02.launch-config", grid_plus_one, ("n // b + 1",), ()),
    "02.launch/rows-first": ("02.launch-config", grid_rows_first, ("swapped",), ()),
    "02.launch/shift": ("02.launch-config", S.grid_shift, ("shift",), ("n // b + 1",)),
    "02.transfers/writes-x": ("02.transfers", transfers_writes_x, ("input `x`",), ()),
    "02.transfers/name-error": ("02.transfers", transfers_name_error, ("host",), ()),
    "02.transfers/copy-each-step": ("02.transfers", transfers_copy_each_step, ("before and after the loop",), ()),
    "02.transfers/numpy-each-launch": ("02.transfers", transfers_numpy_each_launch, ("device arrays",), ()),
    "02.transfers/fixed-launch": ("02.transfers", S.transfers_fixed_launch, ("never updated",), ()),
    "02.transfers/do-while": ("02.transfers", S.transfers_do_while, ("steps = 0",), ()),
    "03.copy/rows-are-x": ("03.coalesced-copy", copy_rows_are_x, ("column",), ()),
    "03.copy/into-src": ("03.coalesced-copy", copy_into_src, ("input `src`",), ("barrier",)),
    "03.copy/block-32x4": ("03.coalesced-copy", S.copy_block_32x4, ("not a power of two",), ()),
    "03.transpose/unpadded": ("03.transpose", transpose_unpadded, ("pad",), ()),
    "03.transpose/no-barrier": ("03.transpose", transpose_no_barrier, ("barrier",), ()),
    "03.transpose/tile-wrong-place": ("03.transpose", transpose_tile_wrong_place, ("never",), ("zero it first",)),
    "03.transpose/global-only": ("03.transpose", transpose_global, ("shared memory",), ()),
    "03.matmul/naive": ("03.matmul", matmul_naive, ("shared",), ()),
    "03.matmul/no-end-barrier": ("03.matmul", matmul_no_end_barrier, ("barrier",), ()),
    "03.matmul/into-a": ("03.matmul", matmul_into_a, ("input `a`",), ()),
    "03.stencil/no-left-halo": ("03.stencil", stencil_no_left_halo, ("never", "zeroing it would only hide"),
                                ("zero it first",)),
    "03.stencil/no-barrier": ("03.stencil", stencil_no_barrier, ("barrier",), ()),
    "03.stencil/in-place": ("03.stencil", stencil_in_place, ("input `x`",), ("barrier",)),
    "03.stencil/global": ("03.stencil", stencil_global, ("shared",), ()),
    "03.occupancy/stops-at-254": ("03.occupancy", S.plan_stops_at_254, ("give any away",), ()),
    "03.occupancy/always-none": ("03.occupancy", plan_always_none, ("can be reached",), ()),
    "03.occupancy/odd-threads": ("03.occupancy", plan_odd_threads, ("multiple of 32",), ()),
    "04.hist/plain": ("04.histogram-global", hist_plain, ("atomic",), ()),
    "04.hist/no-stride": ("04.histogram-global", hist_no_stride, ("grid-stride",), ()),
    "04.hist/int16": ("04.histogram-global", S.hist_int16, ("int16",), ()),
    "04.hist/pow2-stride": ("04.histogram-global", S.hist_pow2_stride, ("not a power of two",), ("compare your formula",)),
    "04.hist-shared/not-zeroed": ("04.histogram-shared", hist_shared_not_zeroed, ("zero it first",), ()),
    "04.hist-shared/zero-own-bin": ("04.histogram-shared", S.hist_shared_zero_own_bin, ("zero it first",), ()),
    "04.hist-shared/merge-per-element": ("04.histogram-shared", hist_shared_merge_per_element, ("once per bin",), ()),
    "04.hist-shared/global-only": ("04.histogram-shared", hist_global_only, ("shared",), ()),
    "04.block-sum/barrier-in-if": ("04.block-sum", block_sum_barrier_in_if, ("barrier",), ()),
    "04.block-sum/no-barrier": ("04.block-sum", block_sum_no_barrier, ("barrier",), ()),
    "04.block-sum/tree-from-64": ("04.block-sum", S.block_sum_tree_128, ("block size",), ("zero it first",)),
    "04.full-sum/plain-add": ("04.full-sum", full_sum_plain_add, ("atomic",), ()),
    "04.full-sum/atomics-only": ("04.full-sum", S.full_sum_atomics_only, ("tree",), ()),
    "04.full-sum/int16": ("04.full-sum", S.full_sum_int16, ("int16",), ()),
    "04.warp-sum/early-return": ("04.warp-sum", warp_sum_early_return, ("lane",), ()),
    "04.warp-sum/no-shuffle": ("04.warp-sum", warp_sum_no_shuffle, ("shfl_down_sync",), ()),
    "04.warp-sum/into-x": ("04.warp-sum", warp_sum_into_x, ("input `x`",), ()),
    "04.race/racy": ("04.race", count_racy, ("atomic",), ()),
    "04.race/int-threshold": ("04.race", S.count_int_threshold, ("int(threshold)",), ()),
    "04.race/uint8": ("04.race", S.count_uint8, ("narrower than int32",), ()),
    "04.race/at-least": ("04.race", count_at_least, (">=",), ()),
    "04.race/block-128": ("04.race", S.count_block_128, ("128 threads per block",), ()),
    "04.scan/int32-buffer": ("04.scan", (S.scan_int_buffer, S.add_offsets_ok), ("integer array",), ()),
    "04.scan/no-sums": ("04.scan", (scan_no_sums, S.add_offsets_ok), ("last thread",), ()),
    "04.scan/from-global": ("04.scan", (scan_from_global, S.add_offsets_ok), ("read", "once"), ()),
}

INTERNAL = ("FakeCUDAArray", "TrackedArray", "FakeCUDAKernel", "_Tracked", "_Unwatched")


def _answer(spec: object) -> tuple:
    if isinstance(spec, tuple):
        return spec
    if callable(spec) and getattr(spec, "__name__", "") == "<lambda>":
        value = spec()
        return value if isinstance(value, tuple) else (value,)
    return (spec,)


@pytest.mark.parametrize("key", list(CASES))
def test_wrong_answer_gets_its_cause(key: str) -> None:
    exercise, spec, must, must_not = CASES[key]
    with contextlib.redirect_stdout(io.StringIO()):
        r = check.run(exercise, *_answer(spec))
    assert r.status == "failed", f"{key}: {r.report()}"
    text = f"{r.message} {r.cause or ''}".lower()
    for words in must:
        assert words.lower() in (r.cause or "").lower() or words.lower() in text, f"{key}: no {words!r} in {r.report()}"
    for words in must_not:
        assert words.lower() not in text, f"{key}: {words!r} in {r.report()}"
    assert not any(name in r.report() for name in INTERNAL), r.report()


def test_every_exercise_of_labs_00_to_04_has_three_wrong_answers() -> None:
    from labkit.check import core

    core._load_all()
    counts: dict[str, int] = {}
    for exercise, *_ in CASES.values():
        counts[exercise] = counts.get(exercise, 0) + 1
    mine = [e for e in core._REGISTRY if e[:2] in ("00", "01", "02", "03", "04") and e != "02.float32"]
    assert {e: counts.get(e, 0) for e in mine if counts.get(e, 0) < 3} == {}


# ============================================================================= mechanisms, shown directly
@cuda.jit
def whole_array_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = np.add(a, b)[i]


def test_whole_array_work_in_a_kernel_is_named_not_an_endless_loop() -> None:
    n = 4000
    a, b = H.random_array(n), H.random_array(n)
    with pytest.raises(Failed) as caught:
        H.grade(whole_array_add, H.Launch(-(-n // 128), 128, [a, b], a + b, f"n={n}", out_shape=n,
                                          names=("a", "b", "out"), time_limit_s=0.3))
    assert "whole arrays" in caught.value.cause and "np.add(a, b)" in caught.value.cause
    assert "never becomes false" not in caught.value.cause


def test_hint_ids_are_matched_case_insensitively(capsys: pytest.CaptureFixture) -> None:
    from labkit.check import core

    try:
        check.hint("02.SAXPY", 1)
        check.hint(" 02.Saxpy ", 2)
        assert "Hint 1/" in capsys.readouterr().out
    finally:
        core._HINT_LEVEL.pop("02.saxpy", None)  # other tests count the hints of 02.saxpy from the first


def test_an_in_place_argument_may_change() -> None:
    n = 100
    a, b = H.random_array(n), H.random_array(n)
    H.grade(add_into_b_and_out, H.Launch(1, 128, [a, b], a + b, "in place", out_shape=n, names=("a", "b", "out"),
                                         in_place=("b",)))
    with pytest.raises(Failed, match="input `b`"):
        H.grade(add_into_b_and_out, H.Launch(1, 128, [a, b], a + b, "not in place", out_shape=n, names=("a", "b", "out")))


@cuda.jit
def add_into_b_and_out(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        b[i] = a[i] + b[i]
        out[i] = b[i]


def test_host_inputs_kept() -> None:
    from labkit.check.inputs import inputs_kept

    x = np.arange(5, dtype=np.float32)
    with inputs_kept({"x": x}, who="f"):
        pass
    with pytest.raises(Failed, match=r"f wrote into its input `x`: 1 of 5 elements changed, the first at index 2"):
        with inputs_kept({"x": x}, who="f"):
            x[2] = 7


def test_slips_that_give_the_same_number_are_named_together() -> None:
    from labkit.check.answers import judge

    with pytest.raises(Failed) as caught:
        judge(20.0, 10.0, "x", "", rel=0.01, slips={"you doubled it": 20.0, "you counted both directions": 20.0})
    assert "you doubled it" in caught.value.cause and "both directions" in caught.value.cause


def test_exact_unit_factors_are_named() -> None:
    from labkit.check.answers import judge

    for got, words in ((80.0, "bits"), (1.25, "1/8"), (10_000.0, "1000 times"), (0.01, "1/1000")):
        with pytest.raises(Failed) as caught:
            judge(got, 10.0, "x", "GB/s", rel=0.01, unit_factors=True)
        assert words in caught.value.cause, (got, caught.value.cause)
    assert judge(10.0, 10.0, "x", "GB/s", rel=0.01, unit_factors=True)


def test_counter_wrap_is_named_and_only_then() -> None:
    want = np.array([300, 5, 70_000], np.int32)
    assert "256" in H.counter_wrap_cause(want % 256, want)
    assert "65,536" in H.counter_wrap_cause(want % 65536, want)
    assert H.counter_wrap_cause(want - 3, want) is None


# ============================================================================= FP64 where the reference has none
@cuda.jit
def add_fp64_literal(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0.25 * a[i] + b[i] + 0.75 * a[i]  # Python float literals: computed in FP64


def test_fp64_where_the_reference_has_none_is_named_on_a_pass() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        r = check.vector_add(add_fp64_literal)
    assert r.passed and "FP64" in r.report() and "np.float32(" in r.report(), r.report()
    with contextlib.redirect_stdout(io.StringIO()):
        plain = check.vector_add(add_into_b_and_out_ok)
    assert plain.passed and "FP64" not in plain.report(), plain.report()


@cuda.jit
def add_into_b_and_out_ok(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


def grid_block_swapped(shape, block):
    return (-(-shape[1] // block[1]), -(-shape[0] // block[0]))


def test_swapped_block_numbers_are_named_not_floor_division() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        r = check.launch_config(grid_block_swapped)
    assert r.status == "failed" and "block's two numbers are swapped" in r.cause and "floor" not in r.cause, r.report()


# ============================================================================= a fixed number of rounds, a dropped tile
@cuda.jit
def saxpy_fixed_16_rounds(a, x, y, out):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    for r in range(16):
        j = i + r * s
        if j < out.size:
            out[j] = a * x[j] + y[j]


@cuda.jit
def hist_fixed_32_rounds(data, hist):
    i = cuda.grid(1)
    for r in range(32):
        j = i + r * cuda.gridsize(1)
        if j < data.size:
            cuda.atomic.add(hist, data[j], 1)


@cuda.jit
def matmul_drops_last_tile(A, B, C):
    sa = cuda.shared.array((MT, MT), np.float32)
    sb = cuda.shared.array((MT, MT), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = np.float32(0.0)
    for t in range(A.shape[1] // MT):  # wrong: floor division
        k = t * MT
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] else np.float32(0.0)
        sb[ty, tx] = B[k + ty, col] if col < B.shape[1] else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(MT):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def add_offsets_own_block(partial, offsets, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = partial[i] + offsets[cuda.blockIdx.x]


CASES.update({
    "02.saxpy/fixed-16-rounds": ("02.saxpy", saxpy_fixed_16_rounds, ("rounds", "fixed number"), ()),
    "04.hist/fixed-32-rounds": ("04.histogram-global", hist_fixed_32_rounds, ("only the first", "fixed number"), ()),
    "03.matmul/drops-last-tile": ("03.matmul", matmul_drops_last_tile, ("floor division drops the partial last tile",), ()),
})


def test_more_causes_from_evidence() -> None:
    for key in ("02.saxpy/fixed-16-rounds", "04.hist/fixed-32-rounds", "03.matmul/drops-last-tile"):
        test_wrong_answer_gets_its_cause(key)
    from labkit import kernels

    with contextlib.redirect_stdout(io.StringIO()):
        r = check.scan(kernels.get("scan_block"), add_offsets_own_block)
    assert r.status == "failed" and "offsets[blockIdx.x - 1]" in r.cause, r.report()


# ============================================================================= outputs read before they are written
@cuda.jit
def add_accumulates_into_out(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += a[i] + b[i]


@cuda.jit
def add_reads_neighbour_output(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
        if i > 0 and cuda.threadIdx.x > 0:
            out[i] = out[i - 1] - a[i - 1] - b[i - 1] + a[i] + b[i]


def test_an_output_read_before_written_gets_the_cause_its_order_shows() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        r = check.vector_add(add_accumulates_into_out)
    assert r.status == "failed" and "accumulate" in r.cause and "same thread" in r.cause, r.report()


def test_gpu_mode_tells_a_tree_from_atomics_only_by_the_ptx() -> None:
    from labkit import kernels
    from labkit.check import lab04

    assert lab04.combines_in_block(kernels.get("sum_all"))
    assert not lab04.combines_in_block(S.full_sum_atomics_only)


class _DeviceArray:
    """A stand-in for a GPU device array (copy_to_host), as the input guard meets it in gpu mode."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a.copy()
        self.ndim = a.ndim

    def copy_to_host(self) -> np.ndarray:
        return self._a.copy()


def test_the_input_guard_reads_device_arrays_back() -> None:
    from labkit.check.inputs import InputGuard

    d = _DeviceArray(np.arange(4, dtype=np.float32))
    guard = InputGuard({"x": d}, who="your kernel")
    assert guard.problem() is None
    d._a[3] = np.nan
    assert "input `x`" in str(guard.problem()) and "index 3" in str(guard.problem())


@cuda.jit
def add_whole_arrays(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a + b)[i]


@cuda.jit
def add_array_method(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.sum() + b[i]


def test_array_errors_in_a_kernel_name_no_internal_class_and_say_why() -> None:
    for kernel, words in ((add_whole_arrays, "`a + b` works on whole arrays"), (add_array_method, "NumPy methods")):
        with contextlib.redirect_stdout(io.StringIO()):
            r = check.vector_add(kernel)
        assert r.status == "failed" and words in r.cause, r.report()
        assert not any(name in r.report() for name in INTERNAL), r.report()
