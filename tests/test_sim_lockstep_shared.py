"""labkit.sim.lockstep with shared memory and barriers, red-teamed: every launch runs twice (lockstep, engine).

The contract: when lockstep says it ran a launch (``lockstep.last == "ran"``), the outputs, the strict report and
the recorded log are the engine's; whenever a strict rule could speak it gives up, so that the verdict and its words
are the engine's. Each test here asserts both halves: the same results, and which path produced them (a comparison
of the engine with itself cannot pass for lockstep's).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda, float32  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import lockstep  # noqa: E402
from test_sim_lockstep import _per_array, _same, _strict  # noqa: E402


@pytest.fixture(autouse=True)
def _internal_errors_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of lockstep's own fails the test (in use it would run the launch on the engine, hiding it)."""
    monkeypatch.setattr(lockstep, "RAISE_INTERNAL", True)


def _gave_up(kernel: Any, grid: Any, block: Any, args: list[Any], **kw: Any) -> str:
    """The engine's verdict and words with lockstep on, and lockstep tried the launch and left it to the engine."""
    assert lockstep.accepts(kernel), lockstep.refusal(kernel)
    last = _same(kernel, grid, block, args, **kw)
    assert last.startswith("gave up: "), last
    return last


def _engine_verdict(kernel: Any, grid: Any, block: Any, args: list[Any], **kw: Any) -> Any:
    """The engine's error or report for the launch, asserting that a rule fired (the rule the test means is real):
    an error, or a report naming a race or an uninitialised read."""
    got, _, _ = _strict(kernel, grid, block, args, False, **kw)
    if not isinstance(got, Exception):
        assert got.race is not None or got.uninitialised is not None, f"the engine found nothing wrong with {kernel}"
    return got


# ============================================================================= 1. each strict rule in shared memory
@cuda.jit
def neighbour_no_barrier(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i]
    out[i] = s[(t + 1) % 32]


@cuda.jit
def two_writers_shared(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t // 2] = x[i]
    cuda.syncthreads()
    out[i] = s[t // 2]


@cuda.jit
def lost_update_shared(x, out):
    s = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        s[0] = 0
    cuda.syncthreads()
    s[0] += 1
    cuda.syncthreads()
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def barrier_in_half(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    if t < 16:
        cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t]


@cuda.jit
def barrier_after_return(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= x.size:
        return
    s[t] = x[i]
    cuda.syncthreads()
    out[i] = s[t]


@cuda.jit
def reads_unwritten(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t < 31:
        s[t] = x[i]
    cuda.syncthreads()
    out[i] = s[31 - t]  # (thread 0 reads s[31], which no thread wrote)


@cuda.jit
def writes_above(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t + 1] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = 1.0


@cuda.jit
def reads_below(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t - 1]  # (thread 0 reads s[-1]: out of bounds, never NumPy's last element)


@cuda.jit
def reads_below_2d(x, out):
    s = cuda.shared.array((4, 8), np.float32)
    t = cuda.threadIdx.x
    s[t // 8, t % 8] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t // 8, t % 8 - 1]  # (column -1 of a row: in bounds of the flat array, not of the row)


@cuda.jit
def writes_above_2d(x, out):
    s = cuda.shared.array((4, 8), np.float32)
    t = cuda.threadIdx.x
    s[t % 4, t // 4 + 1] = x[cuda.grid(1)]  # (column 8 for the last threads: the next row's first element in NumPy)
    cuda.syncthreads()
    out[cuda.grid(1)] = 1.0


@cuda.jit
def reads_row_below_2d(x, out):
    s = cuda.shared.array((4, 8), np.float32)
    t = cuda.threadIdx.x
    s[t // 8, t % 8] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t // 8 - 1, t % 8]


@cuda.jit
def atomic_and_read(x, out):
    s = cuda.shared.array(4, np.int32)
    t = cuda.threadIdx.x
    if t < 4:
        s[t] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, t % 4, 1)
    out[cuda.grid(1)] = s[(t + 1) % 4]  # (a plain read of elements other threads update in this epoch)


@cuda.jit
def atomic_and_write(x, out):
    s = cuda.shared.array(4, np.int32)
    t = cuda.threadIdx.x
    if t < 4:
        s[t] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, t % 4, 1)
    if t == 5:
        s[2] = 7
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t % 4]


@cuda.jit
def atomic_overflows(x, out):
    s = cuda.shared.array(2, np.int32)
    t = cuda.threadIdx.x
    if t < 2:
        s[t] = 2147483600
    cuda.syncthreads()
    cuda.atomic.add(s, t % 2, 5)  # (16 adds of 5 to each: past 2**31 - 1)
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t % 2]


@cuda.jit
def atomic_underflows_unsigned(x, out):
    s = cuda.shared.array(2, np.uint32)
    t = cuda.threadIdx.x
    if t < 2:
        s[t] = 3
    cuda.syncthreads()
    cuda.atomic.sub(s, t % 2, 1)  # (16 subtractions of 1 from 3: below zero, a wrap)
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t % 2]


@cuda.jit
def float_atomic_shared(x, out):
    s = cuda.shared.array(2, np.float32)
    t = cuda.threadIdx.x
    if t < 2:
        s[t] = 0.0
    cuda.syncthreads()
    cuda.atomic.add(s, t % 2, x[cuda.grid(1)])
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t % 2]


@cuda.jit
def barrier_in_uneven_loop(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    for k in range(t % 3):
        cuda.syncthreads()
    out[cuda.grid(1)] = s[t]


@cuda.jit
def barrier_in_uneven_while(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    k = 0
    while k < 2 + (t == 7):
        cuda.syncthreads()
        k += 1
    out[cuda.grid(1)] = s[t]


@cuda.jit
def barrier_in_grid_stride(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        s[t] = x[i]
        cuda.syncthreads()
        out[i] = s[31 - t]
        cuda.syncthreads()


@cuda.jit
def block_uniform_barrier(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    if cuda.blockIdx.x == 0:
        cuda.syncthreads()  # (every thread of block 0 meets it, none of block 1: no divergence in either block)
    out[cuda.grid(1)] = s[t]


def _x(n: int = 64) -> np.ndarray:
    return np.random.default_rng(n).standard_normal(n).astype(np.float32)


def _rule_cases() -> dict[str, tuple[Any, Any, Any, list[Any], dict[str, Any]]]:
    """name -> (kernel, grid, block, args, options): each breaks one rule in shared memory."""
    x = _x(64)
    f = np.zeros(64, np.float32)
    i32 = np.zeros(64, np.int32)
    return {
        "race write/neighbour read": (neighbour_no_barrier, 2, 32, [x, f], {}),
        "race write/neighbour read, allowed": (neighbour_no_barrier, 2, 32, [x, f], {"allow_races": True}),
        "two writers": (two_writers_shared, 2, 32, [x, f], {}),
        "two writers, shuffled": (two_writers_shared, 2, 32, [x, f], {"schedule": "shuffle", "seed": 5}),
        "lost update": (lost_update_shared, 2, 32, [x, np.zeros(2, np.int32)], {}),
        "lost update, allowed": (lost_update_shared, 2, 32, [x, np.zeros(2, np.int32)], {"allow_races": True}),
        "barrier in if t < 16": (barrier_in_half, 2, 32, [x, f], {}),
        "barrier after return": (barrier_after_return, 2, 32, [_x(50), f], {}),
        "uninitialised": (reads_unwritten, 2, 32, [x, f], {}),
        "uninitialised, outputs=": (reads_unwritten, 2, 32, [x, f], {"names": ["x", "out"], "outputs": ("out",)}),
        "uninitialised, reverse": (reads_unwritten, 2, 32, [x, f], {"schedule": "reverse"}),
        "write above, 1-D": (writes_above, 2, 32, [x, f], {}),
        "read below zero, 1-D": (reads_below, 2, 32, [x, f], {}),
        "read below zero, 2-D column": (reads_below_2d, 2, 32, [x, f], {}),
        "read below zero, 2-D row": (reads_row_below_2d, 2, 32, [x, f], {}),
        "write above, 2-D column": (writes_above_2d, 2, 32, [x, f], {}),
        "atomic and read, one epoch": (atomic_and_read, 2, 32, [x, i32], {}),
        "atomic and write, one epoch": (atomic_and_write, 2, 32, [x, i32], {}),
        "int32 atomic overflows": (atomic_overflows, 2, 32, [x, np.zeros(64, np.int64)], {}),
        "uint32 atomic below zero": (atomic_underflows_unsigned, 2, 32, [x, np.zeros(64, np.int64)], {}),
        "float atomic": (float_atomic_shared, 2, 32, [x, f], {}),
        "barrier in uneven for": (barrier_in_uneven_loop, 2, 32, [x, f], {}),
        "barrier in uneven while": (barrier_in_uneven_while, 2, 32, [x, f], {}),
        "barrier in grid-stride loop": (barrier_in_grid_stride, 2, 32, [_x(100), np.zeros(100, np.float32)], {}),
        "block-uniform barrier": (block_uniform_barrier, 2, 32, [x, f], {}),
    }


#: the cases that a GPU runs without error (the engine's report says so; lockstep still leaves them to it)
_NO_ERROR = {
    "race write/neighbour read, allowed",
    "lost update, allowed",
    "int32 atomic overflows",
    "uint32 atomic below zero",
    "float atomic",
    "block-uniform barrier",
}


@pytest.mark.parametrize("case", list(_rule_cases()))
def test_each_rule_in_shared_memory_gives_the_engines_verdict_and_words(case: str) -> None:
    kernel, grid, block, args, kw = _rule_cases()[case]
    if case not in _NO_ERROR:
        _engine_verdict(kernel, grid, block, args, **kw)  # (the rule really fires)
    _gave_up(kernel, grid, block, args, **kw)


# ============================================================================= 2. correct kernels run, with the engine's bits
TILE = 8
PADDED = TILE + 1
SCAN = 64
F32 = "float32"


def _compare_recorded(kernel: Any, grid: Any, block: Any, args: list[Any], record: Any, **kw: Any) -> None:
    """A recorded launch: each array's log (blocks, threads, seq, flat indices, kinds, spaces, epochs) in the
    engine's order, its length, sectors per request and bank conflicts of every array, as the engine's."""
    got = {}
    for on in (True, False):
        report, _, last = _strict(kernel, grid, block, args, on, record=record, **kw)
        assert not isinstance(report, Exception), report
        if on:
            assert last == "ran", last
        names = sorted(report.itemsizes)
        got[on] = (
            _per_array(report),
            len(report.log),
            [v for a in report.log for v in ([a[5]] if a[3] == 1 else [])],
            {n: sim.sectors_per_request(report, n) for n in names},
            {n: sim.bank_conflicts(report, n, ("read", "write", "atomic")) for n in names},
        )
    mine, engines = got[True], got[False]
    assert mine[0].keys() == engines[0].keys()
    for name in mine[0]:
        assert mine[0][name] == engines[0][name], name
    assert mine[1:] == engines[1:]
    assert mine[1] > 0


def _all_ways(kernel: Any, grid: Any, block: Any, args: list[Any], record_one: str | None = None, **kw: Any) -> None:
    """Lockstep runs the launch with the engine's bits and report under every schedule, recorded (every array, and
    ``record_one`` only) and for a subset of blocks."""
    assert lockstep.accepts(kernel), lockstep.refusal(kernel)
    for schedule, seed in (("forward", None), ("reverse", None), ("shuffle", 3), ("shuffle", 8)):
        assert _same(kernel, grid, block, args, schedule=schedule, seed=seed, **kw) == "ran", (schedule, lockstep.last)
    for schedule, seed in (("forward", None), ("shuffle", 11)):
        _compare_recorded(kernel, grid, block, args, True, schedule=schedule, seed=seed, **kw)
    if record_one is not None:
        _compare_recorded(kernel, grid, block, args, (record_one,), schedule="reverse", **kw)
    g = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1,) * (3 - len(grid))
    points = [(x, y, z) for z in range(g[2]) for y in range(g[1]) for x in range(g[0])]
    if len(points) > 1:
        subset = [points[-1], points[0]]
        assert _same(kernel, grid, block, args, blocks=subset, **kw) == "ran", lockstep.last
        _compare_recorded(kernel, grid, block, args, True, blocks=subset, schedule="shuffle", seed=2, **kw)


@cuda.jit
def transpose_tiled(a, out):
    tile = cuda.shared.array((TILE, PADDED), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    if y < a.shape[0] and x < a.shape[1]:
        tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    x2 = cuda.blockIdx.y * TILE + tx
    y2 = cuda.blockIdx.x * TILE + ty
    if y2 < out.shape[0] and x2 < out.shape[1]:
        out[y2, x2] = tile[tx, ty]


@cuda.jit
def transpose_unpadded(a, out):
    tile = cuda.shared.array(shape=(TILE, TILE), dtype=float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.grid(2)
    if y < a.shape[0] and x < a.shape[1]:
        tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    x2 = cuda.blockIdx.y * cuda.blockDim.y + tx
    y2 = cuda.blockIdx.x * cuda.blockDim.x + ty
    if y2 < out.shape[0] and x2 < out.shape[1]:
        out[y2, x2] = tile[tx, ty]


def test_tiled_transposes_with_and_without_padding() -> None:
    a = np.random.default_rng(1).standard_normal((19, 13)).astype(np.float32)
    _all_ways(transpose_tiled, (2, 3), (TILE, TILE), [a, np.zeros((13, 19), np.float32)], "shared array `tile`")
    _all_ways(transpose_unpadded, (2, 3), (TILE, TILE), [a, np.zeros((13, 19), np.float32)], "out", names=["a", "out"])


@cuda.jit
def mirror_3d(x, out):
    s = cuda.shared.array((2, 4, 4), np.int16)
    tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    b = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
    k = b * 32 + tx + 4 * ty + 16 * tz
    s[tz, ty, tx] = x[k % x.size] * 300  # (an int16 store that wraps, as a GPU's)
    cuda.syncthreads()
    if k < out.size:
        out[k] = s[1 - tz, 3 - ty, tx] + s[tz, ty, 3 - tx]


def test_three_dimensional_blocks_and_a_2d_grid() -> None:
    x = np.random.default_rng(2).integers(-200, 200, 150).astype(np.int32)
    _all_ways(mirror_3d, (3, 2), (4, 4, 2), [x, np.zeros(170, np.int64)], "shared array `s`", names=["x", "out"])


@cuda.jit
def scan_double_buffered(x, out):
    buf = cuda.shared.array((2, SCAN), np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = 0.0
    if i < x.size:
        v = x[i]
    buf[0, t] = v
    cuda.syncthreads()
    src = 0
    d = 1
    while d < cuda.blockDim.x:
        if t >= d:
            buf[1 - src, t] = buf[src, t] + buf[src, t - d]
        else:
            buf[1 - src, t] = buf[src, t]
        cuda.syncthreads()
        src = 1 - src
        d *= 2
    if i < x.size:
        out[i] = buf[src, t]


def test_a_double_buffered_scan() -> None:
    x = np.random.default_rng(3).standard_normal(150).astype(np.float32)
    _all_ways(scan_double_buffered, 3, SCAN, [x, np.zeros(150, np.float64)], "shared array `buf`")
    ref = np.zeros(150, np.float64)
    scan_double_buffered[3, SCAN](x, ref)
    assert lockstep.last == "ran"
    expect = np.concatenate([np.cumsum(x[k : k + SCAN].astype(np.float64)) for k in range(0, 150, SCAN)])
    assert np.allclose(ref, expect)


@cuda.jit
def reduce_tree(x, out):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


def test_a_tree_reduction_with_a_while_loop() -> None:
    x = np.random.default_rng(4).standard_normal(300).astype(np.float32)
    _all_ways(reduce_tree, 5, 64, [x, np.zeros(5, np.float32)], "x", names=["x", "out"], outputs=("out",))


@cuda.jit
def histogram_shared(keys, counts, hi, lo):
    h = cuda.shared.array(16, np.int32)
    mx = cuda.shared.array(4, np.int64)
    mn = cuda.shared.array(4, np.uint32)
    t = cuda.threadIdx.x
    if t < 16:
        h[t] = 0
    if t < 4:
        mx[t] = -1
        mn[t] = 1000000
    cuda.syncthreads()
    for i in range(cuda.grid(1), keys.size, cuda.gridsize(1)):
        k = keys[i]
        cuda.atomic.add(h, k & 15, 3)
        cuda.atomic.sub(h, (k >> 4) & 15, 1)
        cuda.atomic.max(mx, k & 3, k)
        cuda.atomic.min(mn, (k >> 2) & 3, k)
    cuda.syncthreads()
    if t < 16:
        cuda.atomic.add(counts, t, h[t])
    if t < 4:
        cuda.atomic.max(hi, t, mx[t])
        cuda.atomic.min(lo, t, mn[t])


def test_a_histogram_with_shared_atomics_of_each_kind() -> None:
    keys = np.random.default_rng(5).integers(0, 1 << 16, 777).astype(np.int32)
    args = [keys, np.zeros(16, np.int32), np.zeros(4, np.int64), np.full(4, 1 << 30, np.uint32)]
    _all_ways(histogram_shared, 3, 96, args, "shared array `h`")
    report = sim.launch_strict(histogram_shared, 3, 96, *[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert lockstep.last == "ran" and report.atomics["shared"] == 4 * 777


@cuda.jit
def six_element_types(x, y, out_f, out_i):
    a = cuda.shared.array(40, np.int8)
    b = cuda.shared.array(40, np.int16)
    c = cuda.shared.array(40, np.uint32)
    d = cuda.shared.array(40, float32)
    e = cuda.shared.array(40, "float64")
    f = cuda.shared.array(40, np.int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    j = i % x.size
    a[t] = y[j] * 3
    b[t] = y[j] * 1000
    c[t] = y[j] * 7
    d[t] = x[j] * np.float32(1.5)
    e[t] = x[j] * 0.1
    f[t] = y[j] * 3000000000
    cuda.syncthreads()
    r = 39 - t
    if i < out_f.size:
        out_f[i] = d[r] * e[(t + 3) % 40] + a[(t + 1) % 40]
        out_i[i] = a[r] + b[(t * 7) % 40] + c[r] + f[(t + 11) % 40]


def test_shared_arrays_of_six_element_types_and_three_ways_to_name_a_dtype() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal(77).astype(np.float32)
    y = rng.integers(-100, 100, 77).astype(np.int32)
    args = [x, y, np.zeros(111, np.float64), np.zeros(111, np.int64)]
    _all_ways(six_element_types, 3, 40, args, "shared array `c`")


@cuda.jit
def rounds_of_barriers(x, out):
    s = cuda.shared.array(48, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = np.float32(0)
    if i < x.size:
        v = x[i]
    for r in range(3):
        s[t] = v
        cuda.syncthreads()
        v = s[(t + r + 1) % 48] * np.float32(0.5) + v
        cuda.syncthreads()
    if i < x.size:
        out[i] = v


def test_several_barriers_in_a_loop() -> None:
    x = np.random.default_rng(7).standard_normal(130).astype(np.float32)
    _all_ways(rounds_of_barriers, 3, 48, [x, np.zeros(130, np.float32)], "shared array `s`")


def test_a_launch_larger_than_a_chunk_counts_epochs_per_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of two blocks: each chunk starts its epochs over; the epochs, shuffles and atomics are the engine's."""
    monkeypatch.setattr(lockstep, "CHUNK_LANES", 96)
    x = np.random.default_rng(8).standard_normal(230).astype(np.float32)
    _all_ways(rounds_of_barriers, 5, 48, [x, np.zeros(230, np.float32)], "x", names=["x", "out"])
    _all_ways(reduce_tree, 5, 64, [x, np.zeros(5, np.float32)])
    keys = np.random.default_rng(9).integers(0, 1 << 16, 500).astype(np.int32)
    args = [keys, np.zeros(16, np.int32), np.zeros(4, np.int64), np.full(4, 1 << 30, np.uint32)]
    _all_ways(histogram_shared, 4, 32, args, "shared array `mn`")


# ============================================================================= 3. random shared-memory kernels
_F_TYPES = ["np.float32", "np.float64", '"float32"', "float32", '"float64"']
_I_TYPES = ["np.int32", "np.int64", "np.int16", "np.uint32", "np.int8", "np.uint8", "np.uint16", '"int32"']


def _index(rng: random.Random, size: int, block: int) -> str:
    """An index into a shared array of ``size`` elements: mostly in bounds, some out of bounds, some data-dependent."""
    c = rng.randrange(1, 9)
    risky = [
        f"(t + {c})",  # (out of bounds for the last threads unless the array is longer than the block)
        f"(t - {c})",  # (below zero for the first threads)
    ]
    if rng.random() < 0.02:
        return rng.choice(risky)
    return rng.choice(
        [
            "t",
            f"(t + {c}) % {size}",
            f"({size} - 1 - t)",
            f"(t * {rng.choice([3, 5, 7, 11])}) % {size}",
            f"(t ^ {c}) % {size}",
            "t // 2",
            f"min(t + {c}, {size} - 1)",
            f"(y[j] & 1023) % {size}",
            f"(b0 + t) % {size}",
            f"{rng.randrange(size)}",
            f"(t + {block}) % {size}",
        ]
    )


def _shared_kernel_text(rng: random.Random, name: str, block: int) -> str:
    """A kernel staging inputs into two shared arrays, a barrier, reads at random indices, a second epoch that may
    write or update shared memory (some racy, some not), a barrier, and outputs."""
    fsize = rng.choice([block, block, block + 3, block * 2])
    isize = rng.choice([block, block, block + 1])
    lines = [
        f"def {name}(x, y, k, out, outi):",
        f"    sa = cuda.shared.array({fsize}, {rng.choice(_F_TYPES)})",
        f"    si = cuda.shared.array({isize}, {rng.choice(_I_TYPES)})",
        "    t = cuda.threadIdx.x",
        "    i = cuda.grid(1)",
        "    n = x.size",
        "    j = i % n",
    ]
    if rng.random() < 0.04:
        lines += ["    if i >= n:", "        return"]  # (a barrier after it is divergent unless every thread is in range)
    lines.append(f"    b0 = y[j] & {rng.choice([3, 7, 15])}")
    guard = rng.random()
    if guard < 0.05:
        lines += [f"    if t < {block - rng.randrange(1, 4)}:", "        sa[t] = x[j] * np.float32(1.5)"]  # (unwritten)
    else:
        lines.append(f"    sa[t] = x[j] * {rng.choice(['np.float32(1.5)', '0.25', '2', 'k'])}")
    if fsize > block and rng.random() < 0.9:
        lines += [f"    if t < {fsize - block}:", f"        sa[t + {block}] = x[(j + {block}) % n] - np.float32(1)"]
    lines.append(f"    si[t % {isize}] = y[j] * {rng.choice(['3', '1', '(k + 1)', '200'])}")
    if isize > block:
        lines += ["    if t == 0:", f"        si[{block}] = 5"]
    if rng.random() < 0.03:
        lines += [f"    if t < {rng.randrange(1, block)}:", "        cuda.syncthreads()"]  # (divergent)
    else:
        lines.append("    cuda.syncthreads()")
    lines += [
        f"    a = sa[{_index(rng, fsize, block)}] {rng.choice(['+', '-', '*'])} sa[{_index(rng, fsize, block)}]",
        f"    b = si[{_index(rng, isize, block)}] {rng.choice(['+', '-', '^', '&'])} si[{_index(rng, isize, block)}]",
        "    if b > 0:",
        f"        a = a + sa[{_index(rng, fsize, block)}]",
    ]
    second = rng.random()
    if second < 0.4 and rng.random() < 0.5:
        lines.append("    cuda.syncthreads()")  # (else the write or atomic below shares an epoch with the reads)
    if second < 0.25:
        c = rng.randrange(1, 9)
        where = rng.choice(["t", f"({fsize} - 1 - t)", f"(t + {c}) % {fsize}"]) if rng.random() < 0.7 else None
        lines.append(f"    sa[{where or _index(rng, fsize, block)}] = a")  # (racy where two threads write one element)
    elif second < 0.4:
        lines.append(f"    cuda.atomic.{rng.choice(['add', 'sub', 'max', 'min'])}(si, {_index(rng, isize, block)}, b0)")
    elif second < 0.5:
        lines += [
            f"    for r in range({rng.choice(['2', 'k % 3'])}):",
            "        cuda.syncthreads()",
            "        sa[t] = a + r",
            "        cuda.syncthreads()",
            f"        a = sa[{_index(rng, fsize, block)}]",
        ]
    elif second < 0.6:
        half = 1 << (block.bit_length() - 1)
        lines += [
            "    cuda.syncthreads()",
            "    sa[t] = a",
            "    cuda.syncthreads()",
            f"    s = {half // 2}",
            "    while s > 0:",
            "        if t < s:",
            "            sa[t] += sa[t + s]",
            "        cuda.syncthreads()",
            "        s //= 2",
            "    a = sa[0]",
        ]
    lines += [
        "    cuda.syncthreads()",
        f"    b = b + si[{_index(rng, isize, block)}]",
        "    if i < n:",
        "        out[i] = a",
        "        outi[i] = b",
    ]
    return "\n".join(lines) + "\n"


def _no_poison(y: np.ndarray) -> np.ndarray:
    """``y`` with the values replaced whose products in the kernels, stored into a narrow or unsigned shared array,
    equal the strict model's poison (lockstep then gives up, rightly but needlessly: the engine knows it written)."""
    bad = set()
    for v in range(-50, 50):
        for m in (1, 2, 3, 4, 200):
            for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64):
                if np.array(v * m, dtype=np.int64).astype(dt) == np.iinfo(dt).max - 7:
                    bad.add(v)
    return np.where(np.isin(y, sorted(bad)), 1, y).astype(y.dtype)


def test_random_shared_memory_kernels_give_the_engines_bits(tmp_path: Path) -> None:
    """Kernels drawn at random (two shared arrays of random element types, staged, read at random indices after a
    barrier, some racy, some reading unwritten or out-of-bounds elements, some with divergent barriers, atomics, a
    barrier loop or a tree reduction): every one gives the engine's outputs, report or error bit for bit, under two
    schedules and recorded; lockstep runs at least half of them."""
    rng = random.Random(2031)
    data = np.random.default_rng(17)
    count, ran, outcomes = 40, 0, []
    for q in range(count):
        block = rng.choice([32, 40, 24, 48])
        grid = rng.choice([2, 3])
        n = grid * block - rng.choice([0, 0, 5, block + 3])
        name = f"shared_random_{q}"
        path = tmp_path / f"{name}.py"
        path.write_text(_shared_kernel_text(rng, name, block))
        namespace: dict[str, Any] = {"cuda": cuda, "np": np, "math": math, "float32": float32}
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the test's own kernels
        kernel = cuda.jit(namespace[name])
        assert lockstep.accepts(kernel), (lockstep.refusal(kernel), path.read_text())
        x = data.standard_normal(n).astype(np.float32)
        y = _no_poison(data.integers(-50, 50, n).astype(np.int32))
        args = [x, y, q % 4, np.zeros(n, np.float32), np.zeros(n, np.int64)]
        text = path.read_text()
        last = _same(kernel, grid, block, args, names=["x", "y", "k", "out", "outi"])
        assert not last.startswith("not run"), (last, text)
        ran += last == "ran"
        outcomes.append(last)
        schedule = ("reverse", None) if q % 2 else ("shuffle", q)
        assert _same(kernel, grid, block, args, schedule=schedule[0], seed=schedule[1]) == last, text
        if q % 3 == 0:
            got = {}
            for on in (True, False):
                report, _, _ = _strict(kernel, grid, block, args, on, record=True, schedule="shuffle", seed=q)
                got[on] = report if isinstance(report, Exception) else (_per_array(report), len(report.log))
            if isinstance(got[True], Exception):
                assert str(got[True]) == str(got[False]), text
            else:
                assert got[True] == got[False], text
    assert ran >= count // 2, outcomes


# ============================================================================= forms the engine takes, one by one
# (the layouts these kernels test: the formatter leaves them)
# fmt: off
@cuda.jit
def allocated_over_lines(x, out):
    s = cuda.shared.array(
        32, np.float32
    )
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t]


@cuda.jit
def allocated_in_parentheses(x, out):
    s = (
        cuda.shared.array(32, np.float32)
    )
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t]


# fmt: on


@cuda.jit
def shape_of_block_dim(x, out):
    s = cuda.shared.array(cuda.blockDim.x, float)  # (Python's float: float64)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[cuda.blockDim.x - 1 - t]


@cuda.jit
def python_int_elements(x, out):
    s = cuda.shared.array(32, int)
    t = cuda.threadIdx.x
    s[t] = t * 3 - 40
    cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t] * x[cuda.grid(1)]


@cuda.jit
def atomics_on_2d(x, out):
    s = cuda.shared.array((2, 4), np.int32)
    t = cuda.threadIdx.x
    if t < 8:
        s[t // 4, t % 4] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, (t % 2, t % 4), 1)
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t % 2, (t + 1) % 4]


@cuda.jit
def short_circuits(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    v = 0.0
    if t % 2 == 0 and s[(t + 1) % 32] > 0:  # (odd threads do not read: the recorded log must not say they did)
        v = 1.0
    if t % 3 == 0 or s[(t + 5) % 32] > 0:
        v = v + 2.0
    w = s[(t + 7) % 32] if t % 4 == 0 else s[(t + 9) % 32]
    out[cuda.grid(1)] = v + w


@cuda.jit
def loop_on_a_shared_flag(x, out):
    s = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        s[0] = 0
    cuda.syncthreads()
    v = 0.0
    while s[0] < 3:
        cuda.syncthreads()
        v = v + x[cuda.grid(1)]
        if t == 0:
            s[0] += 1
        cuda.syncthreads()
    out[cuda.grid(1)] = v


@cuda.jit
def own_element_only(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    s[t] = s[t] * 2
    out[cuda.grid(1)] = s[t]


@cuda.jit
def stages_two_each(x, out):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 64
    for k in range(t, 64, 32):  # (a loop whose iterations are lanes of their own)
        s[k] = x[(base + k) % x.size]
    cuda.syncthreads()
    for k in range(t, 64, 32):
        out[(base + k) % out.size] = s[63 - k] + s[k]


@cuda.jit
def grid_stride_with_barriers(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):  # (the same trip count in every thread: no divergence)
        s[t] = x[i]
        cuda.syncthreads()
        out[i] = s[31 - t]
        cuda.syncthreads()


@cuda.jit
def barrier_in_each_branch(x, k, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)]
    if k > 0:
        cuda.syncthreads()
        v = s[31 - t]
    else:
        cuda.syncthreads()
        v = s[t]
    out[cuda.grid(1)] = v


@cuda.jit
def block_sums_into_a_float(x, total):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    step = 32
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, s[0])


@cuda.jit
def float_atomics_in_every_epoch(x, total):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    v = x[cuda.grid(1) % x.size]
    cuda.atomic.add(total, 0, v)
    s[t] = v * np.float32(3.7)
    cuda.syncthreads()
    cuda.atomic.add(total, 0, s[63 - t])  # (the order of float additions shows: the engine's, epoch by epoch)
    cuda.syncthreads()
    cuda.atomic.add(total, 1, s[t] * s[(t + 1) % 64])


def _forms() -> dict[str, tuple[Any, Any, Any, list[Any]]]:
    x = np.random.default_rng(21).standard_normal(128).astype(np.float32)
    big = (np.random.default_rng(22).standard_normal(500) * 1e4).astype(np.float32)
    return {
        "allocated over lines": (allocated_over_lines, 2, 32, [x, np.zeros(64, np.float64)]),
        "allocated in parentheses": (allocated_in_parentheses, 2, 32, [x, np.zeros(64, np.float64)]),
        "shape blockDim.x, dtype float": (shape_of_block_dim, 3, 40, [x, np.zeros(120, np.float64)]),
        "dtype int": (python_int_elements, 2, 32, [x, np.zeros(64, np.float64)]),
        "atomics on a 2-D array": (atomics_on_2d, 2, 32, [x, np.zeros(64, np.int64)]),
        "and, or, if-else": (short_circuits, 2, 32, [x, np.zeros(64, np.float64)]),
        "while on a shared flag": (loop_on_a_shared_flag, 2, 32, [x, np.zeros(64, np.float64)]),
        "own element, no barrier": (own_element_only, 2, 32, [x, np.zeros(64, np.float32)]),
        "two elements each": (stages_two_each, 2, 32, [x, np.zeros(128, np.float32)]),
        "grid-stride with barriers": (grid_stride_with_barriers, 2, 32, [x, np.zeros(128, np.float32)]),
        "barrier in each branch": (barrier_in_each_branch, 2, 32, [x, 1, np.zeros(64, np.float32)]),
        "block sums, float atomic": (block_sums_into_a_float, 8, 64, [big, np.zeros(1, np.float32)]),
        "float atomics every epoch": (float_atomics_in_every_epoch, 8, 64, [big, np.zeros(2, np.float32)]),
    }


@pytest.mark.parametrize("form", list(_forms()))
def test_forms_of_kernels_run_with_the_engines_bits_report_and_log(form: str) -> None:
    kernel, grid, block, args = _forms()[form]
    assert lockstep.accepts(kernel), lockstep.refusal(kernel)
    for schedule, seed in (("forward", None), ("reverse", None), ("shuffle", 3)):
        assert _same(kernel, grid, block, args, schedule=schedule, seed=seed) == "ran", (schedule, lockstep.last)
    _compare_recorded(kernel, grid, block, args, True, schedule="shuffle", seed=5)
    assert _same(kernel, grid, block, args, blocks=[(1, 0, 0), (0, 0, 0)], schedule="shuffle", seed=6) == "ran"


def test_two_dimensional_grids_split_into_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of two 8x8 blocks of a 2x3 grid, and listed blocks run in reverse: the engine's bits and log."""
    monkeypatch.setattr(lockstep, "CHUNK_LANES", 128)
    a = np.random.default_rng(23).standard_normal((19, 13)).astype(np.float32)
    args = [a, np.zeros((13, 19), np.float32)]
    listed = [(1, 2, 0), (0, 0, 0), (1, 0, 0)]
    for schedule, seed in (("reverse", None), ("shuffle", 9)):
        assert _same(transpose_tiled, (2, 3), (TILE, TILE), args, schedule=schedule, seed=seed) == "ran"
        _compare_recorded(transpose_tiled, (2, 3), (TILE, TILE), args, True, schedule=schedule, seed=seed)
        _compare_recorded(transpose_tiled, (2, 3), (TILE, TILE), args, True, schedule=schedule, seed=seed, blocks=listed)


@cuda.jit
def writes_one_element_twice(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    for k in range(2):  # (flattened, two iterations store into s[t]: the second's value must be the one left)
        s[t] = x[(cuda.grid(1) + k) % x.size]
    cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t]


@cuda.jit
def spins_at_a_barrier(x, out):
    s = cuda.shared.array(1, np.int32)
    if cuda.threadIdx.x == 0:
        s[0] = 1
    cuda.syncthreads()
    while s[0] >= 0:
        cuda.syncthreads()


def test_what_it_leaves_to_the_engine_in_loops() -> None:
    x = np.random.default_rng(24).standard_normal(64).astype(np.float32)
    assert "two iterations" in _gave_up(writes_one_element_twice, 2, 32, [x, np.zeros(64, np.float32)])
    assert "time limit" in _gave_up(spins_at_a_barrier, 2, 32, [x, np.zeros(1)], time_limit_s=0.3)
    dup = _gave_up(stages_two_each, 2, 32, [x, np.zeros(128, np.float32)], blocks=[(1, 0, 0), (1, 0, 0)])
    assert "race" in dup  # (a block listed twice writes its elements twice: the engine says what of it)


# ============================================================================= what lockstep gets wrong (findings)
# (two statements on one line: what the test is about)
# fmt: off
@cuda.jit
def two_arrays_on_one_line(x, out):
    a = cuda.shared.array(32, np.float32); b = cuda.shared.array(32, np.int32)  # noqa: E702
    t = cuda.threadIdx.x
    a[t] = x[cuda.grid(1)]
    b[t] = t
    cuda.syncthreads()
    out[cuda.grid(1)] = a[31 - t] + b[(t + 3) % 32]
# fmt: on


def test_two_shared_arrays_allocated_on_one_line() -> None:
    """Two allocations on one line are two arrays (the engine keys them by the call, not the line), each named after
    its own target, in lockstep as on the engine."""
    x = np.arange(64, dtype=np.float32) + np.float32(0.5)
    assert _same(two_arrays_on_one_line, 2, 32, [x, np.zeros(64, np.float64)]) == "ran"
    got = {}
    for on in (True, False):
        report, _, _ = _strict(two_arrays_on_one_line, 2, 32, [x, np.zeros(64, np.float64)], on, record=True)
        got[on] = (report.shared, _per_array(report))
    assert got[True] == got[False]
    assert [s[0] for s in got[True][0]] == ["shared array `a`", "shared array `b`"]


def test_the_engine_gives_two_arrays_on_one_line_two_arrays() -> None:
    x = np.arange(64, dtype=np.float32) + np.float32(0.5)
    out = np.zeros(64, np.float64)
    _, (_, got), _ = _strict(two_arrays_on_one_line, 2, 32, [x, out], False)
    t = np.arange(64) % 32
    assert np.array_equal(got, x[(31 - t) + 32 * (np.arange(64) // 32)] + (t + 3) % 32)


@cuda.jit
def stores_wider_values(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.grid(1)] * np.float64(0.1)  # (a float64 stored into a float32 element)
    cuda.syncthreads()
    out[cuda.grid(1)] = s[31 - t] * np.float64(0.1)


def test_a_recorded_log_holds_the_engines_values() -> None:
    """A float element's recorded write holds the value the kernel stored (a float64 into a float32 array: the
    float64), as the engine logs it."""
    x = np.random.default_rng(25).standard_normal(64).astype(np.float32)
    got = {}
    for on in (True, False):
        report, _, last = _strict(stores_wider_values, 2, 32, [x, np.zeros(64, np.float32)], on, record=True)
        assert last == "ran" or not on
        got[on] = [(a.array, a.block, a.thread, a.seq, float(a.value)) for a in report.accesses if a.kind == "write"]
    assert got[True] == got[False]


def test_a_learners_own_launch_gives_the_engines_bits() -> None:
    """A direct launch (no strict model: the engine's shared arrays are not poisoned there) runs in lockstep with the
    engine's outputs."""
    keys = np.random.default_rng(26).integers(0, 1 << 16, 300).astype(np.int32)
    cases = [
        (histogram_shared, 3, 96, [keys, np.zeros(16, np.int32), np.zeros(4, np.int64), np.full(4, 1 << 30, np.uint32)]),
        *[_forms()[name][:4] for name in ("float atomics every epoch", "two elements each", "while on a shared flag")],
    ]
    for kernel, grid, block, args in cases:
        got = []
        for on in (True, False):
            mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            lockstep.ENABLED = on
            try:
                kernel[grid, block](*mine)
            finally:
                lockstep.ENABLED = True
            if on:
                assert lockstep.last == "ran", lockstep.last
            got.append([a.tobytes() for a in mine if isinstance(a, np.ndarray)])
        assert got[0] == got[1], kernel


# ============================================================================= 3b. random 2-D tile kernels
def _index_2d(rng: random.Random, rows: int, cols: int) -> tuple[str, str]:
    """A (row, column) of a 2-D tile: mostly in bounds; a few out of bounds."""
    c = rng.randrange(1, 5)
    picks = [
        ("ty", "tx"),
        (f"(ty + {c}) % {rows}", "tx"),
        ("ty", f"({cols} - 1 - tx)"),
        (f"tx % {rows}", f"ty % {cols}"),
        (f"(ty * 3 + tx) % {rows}", f"(tx + ty) % {cols}"),
        (f"{rng.randrange(rows)}", "tx"),
    ]
    if rng.random() < 0.04:
        picks += [("ty", f"tx + {c}"), (f"ty - {c}", "tx")]
    return rng.choice(picks)


def _tile_kernel_text(rng: random.Random, name: str, bx: int, by: int, pad: int) -> str:
    """A 2-D block staging a padded tile, reading it at random (row, column)s, a barrier loop carrying a value, shared
    integer atomics (in a grid-stride loop run as lanes, or one per thread), global float atomics in two epochs,
    a return after the last barrier, and outputs."""
    rows, cols = by, bx + pad
    a, b = _index_2d(rng, rows, cols), _index_2d(rng, rows, cols)
    lines = [
        f"def {name}(x, y, out, acc, hist):",
        f"    tile = cuda.shared.array(({rows}, {cols}), {rng.choice(['np.float32', 'np.float64', F32])})",
        f"    cnt = cuda.shared.array(8, {rng.choice(['np.int32', 'np.int64', 'np.uint32'])})",
        "    tx = cuda.threadIdx.x",
        "    ty = cuda.threadIdx.y",
        "    t = ty * cuda.blockDim.x + tx",
        "    gx, gy = cuda.grid(2)",
        "    n = x.shape[0]",
        "    m = x.shape[1]",
        "    if t < 8:",
        "        cnt[t] = 0",
        "    tile[ty, tx] = x[gy % n, gx % m]",
    ]
    if pad:
        lines += [f"    if tx < {pad}:", f"        tile[ty, tx + {bx}] = x[gy % n, (gx + {bx}) % m]"]
    lines += [
        "    cuda.syncthreads()",
        f"    v = tile[{a[0]}, {a[1]}] {rng.choice(['+', '-', '*'])} tile[{b[0]}, {b[1]}]",
    ]
    if rng.random() < 0.5:
        c = _index_2d(rng, rows, cols)
        lines += [
            f"    for q in range({rng.choice(['2', '3', 'y[0] % 3 + 1'])}):",
            "        cuda.syncthreads()",
            "        tile[ty, tx] = v",
            "        cuda.syncthreads()",
            f"        v = v + tile[{c[0]}, {c[1]}] * {rng.choice(['0.5', 'np.float32(0.25)', 'q'])}",
        ]
    if rng.random() < 0.5:
        lines += [
            f"    for k in range(t, y.size, {bx * by}):",
            f"        cuda.atomic.{rng.choice(['add', 'max', 'min', 'sub'])}(cnt, y[k] & 7, "
            f"{rng.choice(['1', 'k % 5', 'y[k] & 15'])})",
        ]
    else:
        lines.append(f"    cuda.atomic.add(cnt, (tx + ty) % 8, {rng.choice(['1', 'tx', 't % 3'])})")
    if rng.random() < 0.5:
        lines.append("    cuda.atomic.add(acc, 0, v)")
    if rng.random() < 0.2:
        lines.append(f"    v = v + cnt[{rng.randrange(8)}]")  # (a read of what atomics update in this epoch: a race)
    lines.append("    cuda.syncthreads()")
    if rng.random() < 0.3:
        lines += ["    if gx >= m or gy >= n:", "        return"]  # (after the last barrier: no divergence)
    lines += [
        "    if t < 8:",
        "        cuda.atomic.add(hist, t, cnt[t])",
        "    if gy < n and gx < m:",
        f"        out[gy, gx] = v + cnt[(t + {rng.randrange(8)}) % 8]",
        "    cuda.atomic.add(acc, 1, v * np.float32(0.5))",
    ]
    return "\n".join(lines) + "\n"


def test_random_tile_kernels_give_the_engines_bits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2-D blocks (not all multiples of a warp) over a grid that overhangs the data, chunks of a few blocks or one
    chunk: every kernel gives the engine's bits, report, error and recorded log under three schedules and a listed
    subset of blocks; lockstep runs at least half of them."""
    rng = random.Random(7)
    data = np.random.default_rng(7)
    count, ran, outcomes = 30, 0, []
    for q in range(count):
        monkeypatch.setattr(lockstep, "CHUNK_LANES", rng.choice([1 << 16, 64, 100, 256]))
        bx, by = rng.choice([(8, 4), (4, 8), (16, 2), (8, 8), (6, 5)])
        pad = rng.choice([0, 0, 1, 2])
        gx, gy = rng.choice([(2, 2), (3, 1), (2, 3)])
        n, m = max(1, gy * by - rng.choice([0, 1, 3])), max(1, gx * bx - rng.choice([0, 2]))
        name = f"tile_random_{q}"
        path = tmp_path / f"{name}.py"
        path.write_text(_tile_kernel_text(rng, name, bx, by, pad))
        text = path.read_text()
        namespace: dict[str, Any] = {"cuda": cuda, "np": np, "F32": F32}
        exec(compile(text, str(path), "exec"), namespace)  # noqa: S102 - the test's own kernels
        kernel = cuda.jit(namespace[name])
        x = (data.standard_normal((n, m)) * 100).astype(np.float32)
        y = data.integers(0, 1000, 50).astype(np.int64)  # (int64: a uniform read of an int32 element gives up)
        args = [x, y, np.zeros((n, m), np.float32), np.zeros(2, np.float32), np.zeros(8, np.int64)]
        grid, block = (gx, gy), (bx, by)
        last = _same(kernel, grid, block, args)
        for schedule, seed in (("shuffle", q), ("reverse", None)):
            assert _same(kernel, grid, block, args, schedule=schedule, seed=seed) == last, text
        listed = [(gx - 1, gy - 1, 0), (0, 0, 0)]
        assert _same(kernel, grid, block, args, schedule="shuffle", seed=2, blocks=listed) == last, text
        if last == "ran":
            got = {}
            for on in (True, False):
                report, _, _ = _strict(kernel, grid, block, args, on, record=True, schedule="shuffle", seed=q + 1)
                got[on] = (
                    _per_array(report),
                    len(report.log),
                    {a: sim.bank_conflicts(report, a, ("read", "write", "atomic")) for a in sorted(report.itemsizes)},
                    report.barriers,
                    report.atomics,
                    report.shared,
                )
            assert got[True] == got[False], text
        ran += last == "ran"
        outcomes.append(last)
    assert ran >= count // 2, outcomes
