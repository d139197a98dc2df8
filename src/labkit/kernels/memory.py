"""Reference kernels of lab 03 (memory hierarchy): 2-D copies, transposes, matrix multiplies and a stencil."""

from __future__ import annotations

from typing import Any

import numpy as np

cuda: Any = None  # numba.cuda, set by labkit.kernels before the first jit

TILE = 32  # transpose tile: 32 × 32 elements, handled by a block of 32 × BLOCK_ROWS threads
BLOCK_ROWS = 8
TILE_PADDED = TILE + 1  # one spare column: a column of the tile then spans all 32 banks
MM_TILE = 16  # matrix-multiply tile and block: 16 × 16
RADIUS = 3  # stencil radius: out[i] = mean of in[i-3 .. i+3], zero outside the array
MAX_BLOCK = 256  # the stencil's largest block
STENCIL_SHARED = MAX_BLOCK + 2 * RADIUS  # (shared-array shapes must be constants, not expressions)


def copy2d_coalesced(src, dst):
    """x (consecutive lanes) walks along a row: a warp reads 32 neighbouring elements."""
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def copy2d_strided(src, dst):
    """x walks down a column: a warp reads 32 elements one row apart (uncoalesced)."""
    row, col = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def transpose_naive(a, out):
    """out[c, r] = a[r, c]: reads coalesced, writes strided."""
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[col, row] = a[row, col]


def transpose_shared(a, out):
    """Tiled transpose through shared memory: coalesced reads and writes; the +1 column avoids bank conflicts."""
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * TILE + tx  # the output tile sits at the mirrored block position
    row = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


def matmul_naive(A, B, C):
    """C = A @ B, one thread per element of C, every operand read from global memory."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def matmul_naive_uncoalesced(A, B, C):
    """matmul_naive with the thread index the other way round (x along C's rows): at each k the 32 threads of a warp
    read 32 different rows of A, one memory transaction each where the coalesced kernel makes one in all, and C is
    written down a column. The baseline of gpu-check's "tiled >= 4x naive" target (lab 03's first, uncoalesced step);
    the tiled kernel's speed-up over the coalesced matmul_naive is reported beside it (about 1.5x, published)."""
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def matmul_tiled(A, B, C):
    """C = A @ B with MM_TILE × MM_TILE tiles of A and B staged in shared memory (block = MM_TILE × MM_TILE)."""
    sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    sb = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * MM_TILE + tx
    row = cuda.blockIdx.y * MM_TILE + ty
    acc = np.float32(0.0)
    for t in range((A.shape[1] + MM_TILE - 1) // MM_TILE):
        k = t * MM_TILE
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else np.float32(0.0)
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(MM_TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def stencil_1d(x, out):
    """out[i] = mean of x[i-RADIUS .. i+RADIUS] (zero outside x), the block's window and halo staged in shared memory."""
    sh = cuda.shared.array(STENCIL_SHARED, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else np.float32(0.0)
    if t < RADIUS:  # the first RADIUS threads also load the halo on both sides
        left = i - RADIUS
        sh[t] = x[left] if 0 <= left < n else np.float32(0.0)
        right = i + cuda.blockDim.x
        sh[t + cuda.blockDim.x + RADIUS] = x[right] if right < n else np.float32(0.0)
    cuda.syncthreads()
    if i < n:
        acc = np.float32(0.0)
        for k in range(2 * RADIUS + 1):
            acc += sh[t + k]
        out[i] = acc / np.float32(2 * RADIUS + 1)
