"""Issue 44, the mutation survivors closed by class (round six): each test is a sibling of a known survivor, written
by hand, that the check must now reject with a message naming its cause.

- a global index kept in 16 bits wraps past 65,535: every kernel check has a case past 65,536 elements, rows or
  columns; a large 2-D (or many-block) grid runs in sim mode only its first and last blocks (``Launch.blocks``) and
  every element those blocks do not own must stay unwritten;
- a stream made blocking where the statement asks for ``non_blocking=True`` (05.streams, 05.graph);
- a measuring answer that caches by shape: the generic rule runs its check again with the same sizes and new values;
- equal values written by many threads to one global element in CUDA C++: a race on the stand-in too.

About 15 s (most of it the C++ stand-in's compile of the cluster kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402
from labkit.check import core, harness, lab05_graphs  # noqa: E402
from labkit.check.replay import forget_sizes, same_sizes  # noqa: E402
from labkit.errors import LabkitError  # noqa: E402


# ----------------------------------------------------------------------------------------- 16-bit indices
@cuda.jit
def add_u16(a, b, out):  # the global index in 16 bits: wraps past 65,535
    i = np.uint16(cuda.grid(1))
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def add_offsets_u16_block(partial, offsets, out):  # the block index in 16 bits (masked): wraps past 65,535 blocks
    i = cuda.grid(1)
    b = cuda.blockIdx.x & 0xFFFF
    if i < out.size:
        out[i] = partial[i] + (offsets[b - 1] if b > 0 else np.float32(0.0))


TILE = 16


@cuda.jit
def matmul_u16_col(A, B, C):  # tiled, with the column kept in 16 bits (masked: the wrap a GPU's uint16 gives)
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = (cuda.blockIdx.x * TILE + tx) & 0xFFFF
    row = cuda.blockIdx.y * TILE + ty
    acc = np.float32(0.0)
    for t in range((A.shape[1] + TILE - 1) // TILE):
        k = t * TILE
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else np.float32(0.0)
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_a_16_bit_global_index_fails_the_1d_check() -> None:
    r = check.vector_add(add_u16)
    assert r.status == "failed", r.report()
    assert "n=6" in r.message  # the case past 65,536 elements (65,600 to 68,000)


def test_a_16_bit_column_fails_matmul_on_the_edge_blocks_only() -> None:
    r = check.matmul(matmul_u16_col)
    assert r.status == "failed", r.report()
    assert "run (sim)" in r.message and "other blocks own" in r.message
    assert "16-bit" in (r.cause or "") and "wraps" in (r.cause or "")


@cuda.jit
def sum_all_u16(x, out):  # grid-stride from a start kept in 16 bits (masked): no mutant of the reference is like it
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0.0)
    for i in range(cuda.grid(1) & 0xFFFF, x.size, cuda.gridsize(1)):
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


def test_a_16_bit_start_fails_the_full_sum_on_its_edge_blocks() -> None:
    r = check.full_sum(sum_all_u16)
    assert r.status == "failed" and "run (sim)" in r.message, r.report()


def test_a_16_bit_block_index_fails_the_scan() -> None:
    scan_block, add_offsets = core._get("04.scan").reference()
    r = check.scan(scan_block, add_offsets_u16_block)
    assert r.status == "failed", r.report()
    assert "add_offsets" in r.message and "run (sim)" in r.message


def test_the_edge_block_mode_passes_the_reference() -> None:  # (every reference passes: tools/mutation.py's null run)
    r = check.matmul(core._get("03.matmul").reference())
    assert r.status == "passed" and "65,536" in r.message, r.report()
    r = check.grayscale(core._get("02.grayscale").reference())  # a uint8 output judged on its edge blocks only
    assert r.status == "passed" and "65,536" in r.message, r.report()


def test_launch_strict_refuses_blocks_outside_the_grid() -> None:
    from labkit.sim import launch_strict

    x = np.zeros(64, np.float32)
    with pytest.raises(LabkitError, match="outside the grid"):
        launch_strict(add_u16, 2, 32, x, x, np.zeros(64, np.float32), blocks=[(2, 0, 0)])
    report = launch_strict(add_u16, 2, 32, x + 1, x + 2, out := np.zeros(64, np.float32), blocks=[(1, 0, 0)])
    assert report is not None and (out[32:] == 3).all() and (out[:32] == 0).all()  # only block 1 ran


# ----------------------------------------------------------------------------------------- streams
def _blocking_pipeline(cp, x, out, kernel, chunks, n_streams):
    streams = [cp.cuda.Stream() for _ in range(n_streams)]  # blocking: the statement asks for non_blocking=True
    start, end = cp.cuda.Event(), cp.cuda.Event()
    step = -(-x.size // chunks)
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_event(start)
    for c in range(chunks):
        lo, hi = c * step, min(x.size, (c + 1) * step)
        with streams[c % n_streams]:
            d_in, d_out = cp.empty(hi - lo, x.dtype), cp.empty(hi - lo, x.dtype)
            d_in.set(x[lo:hi])
            kernel(d_in, d_out)
            d_out.get(out=out[lo:hi], blocking=False)
    for s in streams[1:]:
        streams[0].wait_event(s.record())
    end.record(streams[0])
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


def _blocking_graph(cp, frames, x, y, kernel):
    return lab05_graphs._reference(_BlockingStreams(cp), frames, x, y, kernel)


class _BlockingStreams:
    """``cp`` whose ``cuda.Stream(non_blocking=True)`` makes a blocking stream (the reference with the flag dropped)."""

    def __init__(self, cp):
        self._cp = cp
        self.cuda = type("cuda", (), {"Stream": lambda _self=None, **kw: cp.cuda.Stream()})()

    def __getattr__(self, name):
        return getattr(self._cp, name)


def test_a_blocking_stream_fails_where_the_statement_asks_for_non_blocking() -> None:
    r = check.streams_pipeline(_blocking_pipeline)
    assert r.status == "failed", r.report()
    assert "blocking stream" in r.message and "non_blocking=True" in (r.cause or "")
    r = check.graph_pipeline(_blocking_graph)
    assert r.status == "failed", r.report()
    assert "captured the graph" in r.message and "cudaErrorStreamCaptureImplicit" in (r.cause or "")


def test_the_stand_in_stream_reports_its_flag_as_cupy_does() -> None:
    import cupy

    from labkit.check.streams import RecordingCuPy

    assert hasattr(cupy.cuda.Stream, "is_non_blocking")  # the name real CuPy gives the flag
    rec = RecordingCuPy()
    assert rec.cuda.Stream(non_blocking=True).is_non_blocking
    assert not rec.cuda.Stream().is_non_blocking


# ----------------------------------------------------------------------------------------- a cache by shape
def test_same_sizes_replays_scalar_draws_and_keeps_values_fresh() -> None:
    forget_sizes()
    g = harness.rng()
    sizes = [int(g.integers(1, 10**9)) for _ in range(3)]
    values = g.standard_normal(4)
    with same_sizes():
        assert [int(g.integers(1, 10**9)) for _ in range(3)] == sizes
        assert not np.array_equal(g.standard_normal(4), values)
        assert int(g.integers(5, 6)) == 5  # past the recorded draws: fresh ones
    forget_sizes()


def test_a_measuring_answer_that_caches_by_shape_fails() -> None:
    ref = core._get("07.event-timing").reference()
    memo: dict = {}

    def cached(cp, host, repeat):
        key = (host.shape, repeat)
        if key not in memo:
            memo[key] = ref(cp, host, repeat)
        return memo[key]

    r = check.event_timing(cached)
    assert r.status == "failed", r.report()
    assert "same sizes and new values" in r.message


# ----------------------------------------------------------------------------------------- C++: equal-value races
def test_equal_values_written_by_many_threads_are_a_race_on_the_stand_in() -> None:
    from labkit.check import lab10_clusters as lc

    src = lc.reference_source()
    every_thread = src.replace("cluster.block_rank() == 0 && threadIdx.x == 0", "cluster.block_rank() == 0")
    assert every_thread != src
    r = check.cluster_sum(every_thread)
    assert r.status == "failed", r.report()
    assert "global-memory race" in r.message and "same value" in r.message
    assert "exactly one thread per cluster" in (r.cause or "")


def test_a_16_bit_tile_index_fails_wmma_on_the_stand_in_edge_blocks() -> None:
    from labkit.check import lab06
    from labkit.check.core import Failed

    src = lab06._reference_wmma()
    narrow = src.replace("const int tile_row", "const unsigned short tile_row")
    assert narrow != src
    # the wrapped tile rows land outside the tiles the chosen blocks own, or (when the draw puts C just past 65,536
    # tiles) inside the first block's, which leaves the last blocks' own tiles unwritten: either way the 16-bit cause
    with pytest.raises(Failed, match="outside the tiles those blocks own|results were never written") as info:
        lab06._wmma_past_16_bits(narrow)
    assert "16 bits" in (info.value.cause or "")


def test_the_stand_in_refuses_blocks_outside_the_grid() -> None:
    from labkit.cuda.host import run_on_host_batch

    src = 'extern "C" __global__ void k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }'
    x = np.zeros(64, np.float32)
    with pytest.raises(LabkitError, match="outside the grid"):
        run_on_host_batch(src, "k", [((2,), (32,), (x, np.int32(64)))], blocks=[[(2, 0, 0)]])
    run_on_host_batch(src, "k", [((2,), (32,), (x, np.int32(64)))], blocks=[[(1, 0, 0)]])
    assert (x[32:] == 1).all() and (x[:32] == 0).all()  # only block 1 ran
