"""Reference kernels of lab 04 (reductions and atomics): histograms, block, full and warp reductions, a fixed race."""

from __future__ import annotations

from typing import Any

import numpy as np

cuda: Any = None  # numba.cuda, set by labkit.kernels before the first jit

NBINS = 256  # histogram of byte values
MAX_BLOCK = 256  # largest block of the block reduction (its shared array holds one value per thread)


def histogram_global(data, hist):
    """One atomic add in global memory per element (grid-stride loop)."""
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i], 1)


def histogram_shared(data, hist):
    """A private histogram per block in shared memory, merged into global memory once per bin."""
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        if local[b] != 0:
            cuda.atomic.add(hist, b, local[b])


def block_sum(x, partial):
    """partial[block] = sum of the block's elements: a tree in shared memory (block size a power of two)."""
    sh = cuda.shared.array(MAX_BLOCK, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


def sum_all(x, out):
    """out[0] += sum(x): grid-stride partial sums per thread, a shared-memory tree per block, one atomic per block."""
    sh = cuda.shared.array(MAX_BLOCK, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0.0)
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
        cuda.atomic.add(out, 0, sh[0])


def warp_sum(x, out):
    """out[w] = sum of the 32 elements of warp w (zeros past the end), by shuffling down within the warp."""
    i = cuda.grid(1)
    v = x[i] if i < x.size else np.float32(0.0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.size:
        out[i // 32] = v


def count_above(x, threshold, counts):
    """counts[block] = how many of the block's elements exceed threshold (the race exercise, fixed)."""
    count = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]
