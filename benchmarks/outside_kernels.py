"""Kernels written the way CUDA code outside the course is written, for ``sim_speed.py`` to time beside the course's
own: they were not shaped for labkit's simulator, so they keep its speed figures honest.

``cuda`` is set by the benchmark before the kernels are jitted (Numba's simulator or labkit's). Each kernel names
the shape it stands for; the grid-stride ones are launched with fewer threads than elements, so every thread makes
many accesses (the case where per-access cost, not per-thread cost, decides).
"""

from __future__ import annotations

from typing import Any

import numpy as np

cuda: Any = None

BINS = 64  # histogram bins (a power of two: the kernels mask with BINS - 1)
THREADS = 128  # threads per block of the block-level kernels (the shared arrays' size)


def stencil7_gridstride(u, out):
    """The 7-point Laplacian of a 3-D field, one grid-stride loop over every point (no shared memory, no barrier):
    each point of ``out`` inside the border gets the sum of its six neighbours minus six times itself."""
    nz, ny, nx = u.shape
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for idx in range(start, nz * ny * nx, stride):
        z = idx // (ny * nx)
        y = (idx // nx) % ny
        x = idx % nx
        if 0 < z < nz - 1 and 0 < y < ny - 1 and 0 < x < nx - 1:
            out[z, y, x] = (u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
                            + u[z, y, x - 1] + u[z, y, x + 1] - 6.0 * u[z, y, x])


def hist_shared_gridstride(keys, counts):
    """A histogram of 32-bit keys into ``BINS`` bins: per-block bins in shared memory filled with atomics in a
    grid-stride loop, then one global atomic per bin and block."""
    bins = cuda.shared.array(BINS, dtype=np.int32)
    t = cuda.threadIdx.x
    for b in range(t, BINS, cuda.blockDim.x):
        bins[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(bins, keys[i] & (BINS - 1), 1)
    cuda.syncthreads()
    for b in range(t, BINS, cuda.blockDim.x):
        if bins[b] != 0:
            cuda.atomic.add(counts, b, bins[b])


def count_in_range(x, lo, hi, found):
    """How many values lie in [lo, hi): one global atomic counter, bumped inside a grid-stride loop."""
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        v = x[i]
        if lo <= v and v < hi:
            cuda.atomic.add(found, 0, 1)


def sum_blocks_atomic(x, total):
    """The sum of ``x``: a grid-stride partial sum per thread, a tree in shared memory per block, and the block's
    result added to ``total[0]`` with one atomic."""
    part = cuda.shared.array(THREADS, dtype=np.float64)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i]
    part[t] = acc
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, part[0])


def warp_shuffle_sum(x, total):
    """The sum of ``x`` with warp shuffles: a grid-stride partial sum, a butterfly of ``shfl_xor_sync`` within each
    warp, then lane 0 of each warp adds its warp's sum to ``total[0]`` atomically."""
    acc = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i]
    mask = 16
    while mask > 0:
        acc += cuda.shfl_xor_sync(0xFFFFFFFF, acc, mask)
        mask //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(total, 0, acc)


def warp_vote_positive(x, per_warp):
    """Per warp, how many of its loads were positive, by votes: in a grid-stride loop each warp takes a ballot of
    ``x[i] > 0`` and lane 0 adds its population count; ``any_sync`` skips all-negative rounds; the loop's bound is
    the same for every lane (a ballot needs all 32)."""
    warp = cuda.grid(1) // 32
    n = x.shape[0]
    rounds = (n + cuda.gridsize(1) - 1) // cuda.gridsize(1)
    mine = 0
    for r in range(rounds):
        i = cuda.grid(1) + r * cuda.gridsize(1)
        positive = i < n and x[i] > 0
        if cuda.any_sync(0xFFFFFFFF, positive):
            mine += cuda.popc(cuda.ballot_sync(0xFFFFFFFF, positive))
    if cuda.laneid == 0:
        per_warp[warp] = mine

