"""Lab 03 checks accept correct kernels and reject wrong, racy or uncoalesced ones."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check, kernels  # noqa: E402
from labkit.kernels.memory import MM_TILE, TILE, TILE_PADDED  # noqa: E402

BLOCK_ROWS = 8


# ----------------------------------------------------------------------------- coalesced copy
@cuda.jit
def copy_empty(src, dst):
    pass


@cuda.jit
def copy_no_bounds(src, dst):
    col, row = cuda.grid(2)
    dst[row, col] = src[row, col]


@cuda.jit
def copy_strided_guarded(src, dst):  # x as the row, but covering every element: right values, uncoalesced
    row, col = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def test_coalesced_copy() -> None:
    assert check.coalesced_copy(kernels.get("copy2d_coalesced")).passed
    assert check.coalesced_copy(copy_empty).status == "unsolved"
    assert check.coalesced_copy(copy_no_bounds).status == "failed"
    r = check.coalesced_copy(copy_strided_guarded)
    assert r.status == "failed" and "column" in r.cause


# ----------------------------------------------------------------------------- transpose
@cuda.jit
def transpose_one_per_thread(a, out):  # valid variant: blocks of 32 × 32 threads, one element each
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    if row < a.shape[0] and col < a.shape[1]:
        tile[ty, tx] = a[row, col]
    cuda.syncthreads()
    col, row = cuda.blockIdx.y * TILE + tx, cuda.blockIdx.x * TILE + ty
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = tile[tx, ty]


@cuda.jit
def transpose_no_padding(a, out):
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col, row = cuda.blockIdx.y * TILE + tx, cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_no_barrier(a, out):
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    col, row = cuda.blockIdx.y * TILE + tx, cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_naive_tiled_grid(a, out):  # right values through global memory only, strided writes
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            out[col, row + j] = a[row + j, col]


@cuda.jit
def transpose_swapped_blocks(a, out):  # forgets to mirror the block position
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


def test_transpose_accepts() -> None:
    assert check.transpose(kernels.get("transpose_shared")).passed
    assert check.transpose(transpose_one_per_thread, block_rows=32).passed


@pytest.mark.parametrize("k,word", [(transpose_no_padding, "bank"), (transpose_no_barrier, "syncthreads"),
                                    (transpose_naive_tiled_grid, "shared"), (transpose_swapped_blocks, None)])
def test_transpose_rejects(k, word) -> None:
    r = check.transpose(k)
    assert r.status == "failed", r.message
    if word:
        assert word in r.message + (r.cause or "")


# ----------------------------------------------------------------------------- matmul
def _mm(first_barrier: bool, second_barrier: bool, pad_zero: bool = True, k_steps: int = 0, floor_k: bool = False):
    @cuda.jit
    def mm(A, B, C):
        sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
        sb = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * MM_TILE + tx
        row = cuda.blockIdx.y * MM_TILE + ty
        acc = np.float32(0.0)
        steps = (A.shape[1] + MM_TILE - 1) // MM_TILE
        if k_steps:  # a fixed number of K tiles: enough for the notebook's small shapes only
            steps = k_steps
        if floor_k:  # drops the partial last tile of K
            steps = A.shape[1] // MM_TILE
        for t in range(steps):
            k = t * MM_TILE
            if row < A.shape[0] and k + tx < A.shape[1]:
                sa[ty, tx] = A[row, k + tx]
            elif pad_zero:
                sa[ty, tx] = 0.0
            if k + ty < B.shape[0] and col < B.shape[1]:
                sb[ty, tx] = B[k + ty, col]
            elif pad_zero:
                sb[ty, tx] = 0.0
            if first_barrier:
                cuda.syncthreads()
            for kk in range(MM_TILE):
                acc += sa[ty, kk] * sb[kk, tx]
            if second_barrier:
                cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return mm


def test_matmul() -> None:
    assert check.matmul(kernels.get("matmul_tiled")).passed
    assert check.matmul(_mm(True, True)).passed
    r = check.matmul(_mm(False, True))
    assert r.status == "failed" and "syncthreads" in r.message + r.cause
    r = check.matmul(_mm(True, False))
    assert r.status == "failed" and "race" in r.message
    r = check.matmul(_mm(True, True, pad_zero=False))  # stale tile contents past the edge
    assert r.status == "failed"
    r = check.matmul(kernels.get("matmul_naive"))
    assert r.status == "failed" and "global memory" in r.message


@pytest.mark.parametrize("options", [{"k_steps": 3}, {"floor_k": True}])
def test_matmul_rejects_k_shortcuts(options) -> None:
    r = check.matmul(_mm(True, True, **options))
    assert r.status == "failed" and "elements are wrong" in r.message, r.message


@cuda.jit
def copy_fixed_32(src, dst):  # hard-codes 32-thread-wide blocks in its index
    col = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def test_coalesced_copy_rejects_fixed_block_width() -> None:
    assert check.coalesced_copy(copy_fixed_32).status == "failed"


# ----------------------------------------------------------------------------- stencil
R = 3


@cuda.jit
def stencil_global(x, out):  # right values, no shared memory
    i = cuda.grid(1)
    if i < x.size:
        acc = 0.0
        for k in range(-R, R + 1):
            if 0 <= i + k < x.size:
                acc += x[i + k]
        out[i] = acc / (2 * R + 1)


@cuda.jit
def stencil_no_halo(x, out):
    sh = cuda.shared.array(262, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t + R] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        acc = 0.0
        for k in range(2 * R + 1):
            acc += sh[t + k]
        out[i] = acc / (2 * R + 1)


@cuda.jit
def stencil_no_barrier(x, out):
    sh = cuda.shared.array(262, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t + R] = x[i] if i < x.size else 0.0
    if t < R:
        sh[t] = x[i - R] if i - R >= 0 else 0.0
        sh[t + cuda.blockDim.x + R] = x[i + cuda.blockDim.x] if i + cuda.blockDim.x < x.size else 0.0
    if i < x.size:
        acc = 0.0
        for k in range(2 * R + 1):
            acc += sh[t + k]
        out[i] = acc / (2 * R + 1)


@cuda.jit
def stencil_fixed_block(x, out):  # hard-codes a block of 32 for the right halo
    sh = cuda.shared.array(262, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t + R] = x[i] if i < x.size else 0.0
    if t < R:
        sh[t] = x[i - R] if i - R >= 0 else 0.0
        sh[t + 32 + R] = x[i + 32] if i + 32 < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        acc = 0.0
        for k in range(2 * R + 1):
            acc += sh[t + k]
        out[i] = acc / (2 * R + 1)


@cuda.jit
def stencil_sized_for_128(x, out):  # the shared array holds a 128-thread block and its halo: too small for 256
    sh = cuda.shared.array(134, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t + R] = x[i] if i < x.size else 0.0
    if t < R:
        sh[t] = x[i - R] if i - R >= 0 else 0.0
        sh[t + cuda.blockDim.x + R] = x[i + cuda.blockDim.x] if i + cuda.blockDim.x < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        acc = 0.0
        for k in range(2 * R + 1):
            acc += sh[t + k]
        out[i] = acc / (2 * R + 1)


def test_stencil() -> None:
    assert check.stencil(kernels.get("stencil_1d")).passed
    for k in (stencil_global, stencil_no_halo, stencil_no_barrier, stencil_fixed_block, stencil_sized_for_128):
        r = check.stencil(k)
        assert r.status == "failed", (k, r.message)


@cuda.jit
def transpose_chained_indexing(a, out):  # valid variant: tile[r][c] instead of tile[r, c]
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE + tx, cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j][tx] = a[row + j][col]
    cuda.syncthreads()
    col, row = cuda.blockIdx.y * TILE + tx, cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j][col] = tile[tx][ty + j]


def test_transpose_accepts_chained_indexing() -> None:
    assert check.transpose(transpose_chained_indexing).passed


@cuda.jit
def matmul_naive_unused_shared(A, B, C):  # allocates shared memory but reads every operand from global memory
    sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    col, row = cuda.grid(2)
    sa[cuda.threadIdx.y, cuda.threadIdx.x] = 0.0
    cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def stencil_own_element_shared(x, out):  # stages its own element in shared memory, reads neighbours from global
    sh = cuda.shared.array(262, np.float32)
    t, i, n = cuda.threadIdx.x, cuda.grid(1), x.size
    sh[t] = x[i] if i < n else np.float32(0.0)
    cuda.syncthreads()
    if i < n:
        acc = np.float32(0.0)
        for k in range(-R, R + 1):
            if 0 <= i + k < n:
                acc += x[i + k]
        out[i] = acc / np.float32(2 * R + 1)


def test_shared_memory_must_replace_global_reads() -> None:
    r = check.matmul(matmul_naive_unused_shared)
    assert r.status == "failed" and "global reads" in r.message
    r = check.stencil(stencil_own_element_shared)
    assert r.status == "failed" and "global reads" in r.message


# ----------------------------------------------------------------------------- 03.occupancy
def _plan_top_down(arch, target, shared):
    """Correct, written differently: largest blocks first, budgets counted down, the first that reaches the target."""
    from labkit import LabkitError, occupancy

    best = None
    for threads in range(1024, 31, -32):
        for regs in range(255, 0, -1):
            try:
                occ = occupancy.occupancy(arch, threads, regs, shared).occupancy
            except LabkitError:
                continue
            if occ >= target:
                if best is None or regs > best[1]:
                    best = (threads, regs)
                break
    return best


def _plan_naive(arch, target, shared):  # divides the register file, ignoring the allocation unit and shared memory
    warps = -(-int(target * 64 * 1000) // 1000)
    return 256, min(255, 65536 // (warps * 32))


_REF_PLAN: list = []  # labkit's plan, taken before the check runs (calling the reference inside an answer is rejected)


def _plan_never_none(arch, target, shared):
    return _REF_PLAN[0](arch, target, shared) or (1024, 32)


@pytest.mark.parametrize("answer", [_plan_top_down])
def test_occupancy_accepts_correct_plans(answer) -> None:
    from labkit.check import core

    assert check.launch_plan(core._REGISTRY["03.occupancy"].reference())
    assert check.launch_plan(answer)


@pytest.mark.parametrize(("answer", "needle"), [
    (_plan_naive, "occupancy"),
    (lambda arch, target, shared: (256, 32), "(256, 32)"),
    (_plan_never_none, "no block size reaches"),
    (lambda arch, target, shared: None, "can be reached"),
    (lambda arch, target, shared: (100, 16), "multiple of 32"),
    (lambda arch, target, shared: (256.0, 32.0), "integers"),
    (lambda arch, target, shared: (1024, 255), "cannot launch"),
    (lambda arch, target, shared: 256, "pair"),
    (lambda arch, target, shared: 1 / 0, "ZeroDivisionError"),
])
def test_occupancy_rejects_wrong_plans(answer, needle) -> None:
    from labkit.check import core

    _REF_PLAN[:] = [core._get("03.occupancy").reference()]
    result = check.launch_plan(answer)
    assert result.status == "failed", result.report()
    assert needle in result.message + (result.cause or ""), result.report()


def test_occupancy_wrong_calls() -> None:
    assert check.launch_plan("sm_90").status == "failed"
    assert check.launch_plan(lambda arch: None).status == "failed"
    assert check.launch_plan(lambda arch, target, shared: ...).status == "unsolved"
