"""Reference kernels of lab 09 (the video-analytics capstone); see :mod:`labkit.video` for what each stage does.

This module imports numba at its top and defines its kernels at module level, as the CUDA simulator needs (it
swaps a kernel's module-global ``cuda`` for its fake one at launch). Import it only after ``labkit.setup()``:
:func:`labkit.video.reference_kernels` and the lab 09 checks do.

Launch every kernel with a 2-D grid whose x runs along a row (``labkit.video.grid_for``).
"""

import numpy as np
from numba import cuda

LOCAL = 16  # tile counters a block keeps in shared memory, per axis (enough for blocks up to 32 × 32 and tiles ≥ 4)


@cuda.jit
def fused_update(frame, bg, mask, alpha, thresh):
    """One pass: ``d = frame - bg``; ``mask = |d| > thresh``; ``bg += alpha * d`` (bg updated in place)."""
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) > thresh else 0
        bg[row, col] = b + alpha * d


@cuda.jit
def erode3x3(mask, out):
    """``out`` = 1 where every 3 × 3 neighbour inside the frame is non-zero (neighbours outside are ignored)."""
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def dilate3x3(mask, out):
    """``out`` = 1 where any 3 × 3 neighbour inside the frame is non-zero."""
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 0
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] != 0:
                    v = 1
        out[row, col] = v


@cuda.jit
def tile_counts(mask, tile, counts):
    """``counts[i, j]`` += foreground pixels of tile (i, j) (tiles of ``tile`` × ``tile`` pixels; counts start at 0).

    Histogram style: each block counts into shared-memory counters for the tiles it touches, then adds each
    non-zero counter to global memory with one atomic.
    """
    local = cuda.shared.array((LOCAL, LOCAL), np.int32)
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    nthreads = cuda.blockDim.x * cuda.blockDim.y
    tr0 = (cuda.blockIdx.y * cuda.blockDim.y) // tile  # first tile row and column this block touches
    tc0 = (cuda.blockIdx.x * cuda.blockDim.x) // tile
    for k in range(t, LOCAL * LOCAL, nthreads):
        local[k // LOCAL, k % LOCAL] = 0
    cuda.syncthreads()
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        lr, lc = row // tile - tr0, col // tile - tc0
        if lr < LOCAL and lc < LOCAL:
            cuda.atomic.add(local, (lr, lc), 1)
        else:  # a block spanning more tiles than the shared counters hold (tiny tiles): count in global memory
            cuda.atomic.add(counts, (row // tile, col // tile), 1)
    cuda.syncthreads()
    for k in range(t, LOCAL * LOCAL, nthreads):
        lr, lc = k // LOCAL, k % LOCAL
        v = local[lr, lc]
        if v != 0:
            cuda.atomic.add(counts, (tr0 + lr, tc0 + lc), v)
