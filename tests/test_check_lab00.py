"""Lab 00's check draws fresh sizes each run and rejects kernels that only work for some block sizes or grids.

About 10 s: each vector_add check runs 8 launches in the strict simulator (one of two 1024-thread blocks)."""

from __future__ import annotations

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402
from labkit.check import draws  # noqa: E402


@cuda.jit
def right(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def right_early_return(a, b, out):  # correct, written differently
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= a.shape[0]:
        return
    out[i] = b[i] + a[i]


@cuda.jit
def block_256_assumed(a, b, out):  # strides by a fixed 256 threads per block
    i = cuda.blockIdx.x * 256 + cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def thread_index_only(a, b, out):  # forgets the block index: only the first block's worth is written
    i = cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def at_most_512(a, b, out):  # a tired shortcut: threads past 512 of a block do nothing
    if cuda.threadIdx.x < 512:
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i]


def test_fresh_sizes_cover_the_partial_block() -> None:
    seen = {tuple(draws.sizes_1d(32)) for _ in range(20)}
    assert len(seen) > 5  # drawn anew, not a fixed list
    for _ in range(50):
        first, one, edge, multiple = draws.sizes_1d(128)
        assert 256 < first < 512 and first % 128 and one == 1 and edge in (127, 129) and multiple % 128 == 0


def test_correct_variants_pass() -> None:
    assert check.vector_add(right)
    assert check.vector_add(right_early_return)


def test_shortcuts_fail() -> None:
    for k in (block_256_assumed, thread_index_only, at_most_512):
        r = check.vector_add(k)
        assert r.status == "failed", (k, r.message)
    r = check.vector_add(at_most_512)
    assert "1024 threads" in r.message
