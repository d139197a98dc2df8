"""Reference kernels of lab 04's inclusive prefix scan: a scan of each block in shared memory, and the pass that
adds the scanned block sums (labkit's driver scans the block sums with the same kernel, recursively, for any n)."""

from __future__ import annotations

from typing import Any

import numpy as np

cuda: Any = None  # numba.cuda, set by labkit.kernels before the first jit

SCAN_MAX_BLOCK = 256  # largest block of the scan (its shared array holds one value per thread)


def scan_block(x, sums, out):
    """out[i] = x[start] + ... + x[i] within the block (Hillis-Steele in shared memory); sums[block] = the block's total."""
    sh = cuda.shared.array(SCAN_MAX_BLOCK, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else np.float32(0.0)
        cuda.syncthreads()  # everyone has read before anyone writes
        sh[t] += v
        cuda.syncthreads()  # everyone has written before the next read
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


def add_offsets(partial, offsets, out):
    """out[i] = partial[i] plus the inclusive scan of the block sums up to the previous block."""
    i = cuda.grid(1)
    if i < out.size:
        b = cuda.blockIdx.x
        out[i] = partial[i] + (offsets[b - 1] if b > 0 else np.float32(0.0))
