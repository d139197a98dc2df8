"""labkit.sim.trace on hand-worked kernels: sectors per request, bank conflicts, races, divergent barriers,
sampling, the recorded values and epochs, and the subprocess path gpu mode uses (run here with the simulator).

About 15 s on one core (two 256-thread transposes, one 4,096-thread launch, one subprocess)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit.errors import LabkitError  # noqa: E402
from labkit.sim import trace  # noqa: E402
from labkit.sim.trace import Trace  # noqa: E402


@cuda.jit
def strided_copy(x, out, stride):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i * stride]


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (4, 16), (32, 32)])
def test_strided_copy_sectors_per_request(stride: int, sectors: int) -> None:
    # float32: 32 lanes read 32 elements `stride` apart; a sector holds 8 of them
    x = np.arange(64 * stride, dtype=np.float32)
    out = np.zeros(64, np.float32)
    t = trace(strided_copy, 2, 32, x, out, stride)
    s = t.summary()
    assert isinstance(t, Trace)
    assert s["global_sectors_per_request"] == {"x": sectors, "out": 4}
    assert s["ideal_sectors_per_request"] == {"x": 4, "out": 4}
    assert s["races"] == 0 and s["divergent_barriers"] == 0 and s["shared_max_conflict_ways"] == {}
    assert not out.any(), "the caller's arrays are unchanged (the kernel runs on copies)"
    assert np.array_equal(t.outputs["out"], x[::stride][:64])
    assert set(t.elements("x", "read", block=1, thread=3)) == {35 * stride}


TILE, ROWS = 32, 8


@cuda.jit
def transpose(a, out):
    tile = cuda.shared.array((32, 32), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * 32 + tx, cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        tile[ty + j, tx] = a[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * 32 + tx, cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        out[y + j, x] = tile[tx, ty + j]  # a column of the tile: all 32 lanes in one bank


@cuda.jit
def transpose_padded(a, out):
    tile = cuda.shared.array((32, 33), np.float32)  # one spare column: a column spreads over all 32 banks
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * 32 + tx, cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        tile[ty + j, tx] = a[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * 32 + tx, cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        out[y + j, x] = tile[tx, ty + j]


def test_transpose_bank_conflicts_with_and_without_padding() -> None:
    a = np.random.default_rng(0).random((32, 32)).astype(np.float32)
    out = np.zeros_like(a)
    plain = trace(transpose, 1, (TILE, ROWS), a, out)
    padded = trace(transpose_padded, 1, (TILE, ROWS), a, out)
    assert plain.summary()["shared_max_conflict_ways"] == {"tile": 32}
    assert padded.summary()["shared_max_conflict_ways"] == {"tile": 1}
    # the row-wise writes of the tile are conflict-free in both; only the column reads conflict
    assert max(r.ways for r in plain.requests if r.array == "tile" and r.kind == "write") == 1
    for t in (plain, padded):
        assert np.array_equal(t.outputs["out"], a.T)
        assert t.summary()["global_sectors_per_request"] == {"a": 4, "out": 4}
        assert t.score() == {"global reads": 4, "global writes": 4, "shared reads": 4, "shared writes": 4}
    # the epoch: tile writes before the barrier, reads after it
    c, k = plain.columns, plain.names.index("tile")
    assert set(c["epoch"][(c["array"] == k) & (c["kind"] == 0)]) == {1}
    assert set(c["epoch"][(c["array"] == k) & (c["kind"] == 1)]) == {0}


@cuda.jit
def neighbour_without_barrier(x, out):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    out[t] = s[(t + 1) % 64]  # reads what thread t + 1 wrote, with no syncthreads between


def test_race_pair() -> None:
    x = np.arange(64, dtype=np.float32)
    t = trace(neighbour_without_barrier, 1, 64, x, np.zeros(64, np.float32))
    assert t.summary()["races"] == 64  # one per element of s
    race = t.races[0]
    assert race.array == "s" and race.space == "shared" and race.scope == "block"
    first, second = race.first_thread[0], race.second_thread[0]
    assert abs(first - second) in (1, 63) and {race.first, race.second} == {"read", "write"}


@cuda.jit
def barrier_in_if(x):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    x[cuda.grid(1)] = t


def test_divergent_barrier_is_recorded_per_block() -> None:
    t = trace(barrier_in_if, 3, 32, np.zeros(96))
    s = t.summary()
    assert s["divergent_barriers"] == 3 and s["errors"] == 0
    assert [d.block for d in t.divergent] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert "reached by 16 of 32 threads" in t.divergent[0].message
    assert len(t.traced_blocks) == 3  # the other blocks still ran after the first divergent one


@cuda.jit
def three_reads(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[(i + 1) % x.size] + x[(i + 2) % x.size]


def test_score_values_and_sampling() -> None:
    x = np.arange(512, dtype=np.float32)
    t = trace(three_reads, 8, 64, x, np.zeros(512, np.float32), max_threads=128)
    assert t.sampled and t.total_blocks == 8 and t.traced_blocks == [(0, 0, 0), (7, 0, 0)]
    assert t.threads_traced == 128
    assert t.score() == {"global reads": 3, "global writes": 1, "shared reads": 0, "shared writes": 0}
    c = t.columns
    written = c["value"][t.select("out", block=0, thread=0, kind="write")]
    assert list(written) == [0 + 1 + 2]  # block 0, thread 0 wrote x[0] + x[1] + x[2]
    assert np.isnan(c["value"][c["kind"] == 0]).all()


def test_4096_threads_over_three_arrays_in_under_10_s() -> None:
    n = 4096
    a, b = np.ones(n, np.float32), np.arange(n, dtype=np.float32)

    @cuda.jit
    def add(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    start = time.perf_counter()
    t = trace(add, 16, 256, a, b, np.zeros(n, np.float32))
    seconds = time.perf_counter() - start
    assert not t.sampled and t.threads_traced == 4096 and len(t.columns["flat"]) == 3 * n
    assert seconds < 10, f"tracing 4,096 threads took {seconds:.1f} s"


def test_the_gpu_mode_path_runs_the_source_in_a_simulator_subprocess() -> None:
    x = np.arange(96, dtype=np.float32)
    here = trace(strided_copy, 2, 32, x, np.zeros(48, np.float32), 2)
    away = trace(strided_copy, 2, 32, x, np.zeros(48, np.float32), 2, subprocess_=True)
    assert "separate process" in away.origin and "separate process" not in here.origin
    assert {k: v for k, v in away.summary().items() if k != "origin"} == {
        k: v for k, v in here.summary().items() if k != "origin"
    }

    def accesses(t: Trace) -> list[tuple]:  # threads interleave differently from run to run
        return sorted(zip(*(t.columns[k].tolist() for k in ("block", "thread", "seq", "array", "flat", "kind"))))

    assert accesses(away) == accesses(here)


def test_bad_calls_are_explained() -> None:
    with pytest.raises(LabkitError, match="needs a @cuda.jit kernel"):
        trace(42, 1, 32)
    with pytest.raises(LabkitError, match="grid must be"):
        trace(strided_copy, 0, 32, np.zeros(4), np.zeros(4), 1)
    with pytest.raises(LabkitError, match="at most 1024"):
        trace(strided_copy, 1, (64, 32), np.zeros(4), np.zeros(4), 1)


TABLE = {0: 1.5}  # a global dict: a GPU kernel cannot use it, and the simulator process cannot rebuild it


@cuda.jit
def uses_a_global_dict(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = TABLE[0]


def test_the_subprocess_says_what_it_could_not_rebuild() -> None:
    t = trace(uses_a_global_dict, 1, 32, np.zeros(32, np.float32), subprocess_=True)
    assert t.summary()["errors"] == 1 and t.errors[0].startswith("block (0, 0, 0): ")


@cuda.jit
def read_past_the_end(x, out):
    i = cuda.grid(1)
    if i <= x.size:
        out[i] = x[i]


@cuda.jit
def atomic_past_the_end(out):
    cuda.atomic.add(out, cuda.grid(1), 1.0)


@cuda.jit
def shared_write_past_the_end(out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t + 1] = 1.0
    cuda.syncthreads()
    out[t] = s[t]


@cuda.jit
def wrong_dimensions(x):
    x[cuda.threadIdx.x, 0] = 1.0


def test_an_index_out_of_bounds_is_recorded_with_its_array_index_and_kind() -> None:
    """The thread that raised is recorded with the element it tried to touch (the picture draws it), in this
    process and from the simulator subprocess; an error that is not an element outside the array records none."""
    t = trace(read_past_the_end, 2, 32, np.ones(40, np.float32), np.zeros(41, np.float32))
    (f,) = t.faults
    assert (f.block, f.thread, f.array, f.index, f.kind) == ((1, 0, 0), (8, 0, 0), "x", (40,), "read")
    assert f.out_of_bounds
    away = trace(read_past_the_end, 2, 32, np.ones(40, np.float32), np.zeros(41, np.float32), subprocess_=True)
    assert [(g.array, g.index, g.kind) for g in away.faults] == [("x", (40,), "read")]
    (f,) = trace(atomic_past_the_end, 1, 40, np.zeros(33, np.float32)).faults
    assert (f.thread, f.array, f.index, f.kind) == ((33, 0, 0), "out", (33,), "atomic")
    (f,) = trace(shared_write_past_the_end, 1, 32, np.zeros(32, np.float32)).faults
    assert (f.thread, f.array, f.index, f.kind) == ((31, 0, 0), "s", (32,), "write")
    (f,) = trace(wrong_dimensions, 1, 4, np.zeros(4, np.float32)).faults
    assert not f.out_of_bounds and f.array is None and "IndexError" in f.message


@cuda.jit
def _mixed_requests(x, d, out):
    """Requests of every kind: 4- and 8-byte elements, strided and broadcast global reads, shared stores with bank
    conflicts and a padded read, an atomic, a loop that repeats a site."""
    tile = cuda.shared.array((8, 33), np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t % 8, t // 8] = x[(i * 5) % x.size]
    cuda.syncthreads()
    acc = tile[t // 8, t % 8] + d[0]
    for k in range(3):
        acc += x[(i + 7 * k) % x.size]
    out[i] = acc
    cuda.atomic.add(d, 1, 1.0)


def test_every_request_counts_its_lanes_sectors_and_bank_conflicts_one_by_one() -> None:
    """The requests a trace groups and counts all at once are those of grouping its accesses one by one and counting
    each with :func:`trace._sectors` and :func:`trace._ways` (the definitions), in the order of their first access."""
    import importlib
    import math

    tm = importlib.import_module("labkit.sim.trace")  # (the module: labkit.sim.trace is also the function's name)
    x = np.arange(100, dtype=np.float32)
    t = tm.trace(_mixed_requests, 2, 64, x, np.zeros(2), np.zeros(128), names=["x", "d", "out"])
    c = t.columns
    groups: dict[tuple, list[int]] = {}
    for a, k, b, th, si, n, f in zip(
        *(c[key].tolist() for key in ("array", "kind", "block", "thread", "site", "instance", "flat"))
    ):
        groups.setdefault((a, k, b, th // 32, si, n), []).append(f)
    expected = []
    for (a, k, b, w, si, n), flats in groups.items():
        info = t.arrays[t.names[a]]
        addresses = [f * info.itemsize for f in flats]
        ways = tm._ways(addresses) if info.space == "shared" else 1
        ideal = max(1, math.ceil(len(set(flats)) * info.itemsize / tm.SECTOR))
        expected.append(
            (
                t.names[a],
                tm.KINDS[k],
                t.block_index(b),
                w,
                n,
                t.sites[si][1],
                si,
                len(flats),
                tm._sectors(addresses, info.itemsize),
                ideal,
                ways,
            )
        )
    got = [(r.array, r.kind, r.block, r.warp, r.seq, r.line, r.site, r.lanes, r.sectors, r.ideal, r.ways) for r in t.requests]
    assert got == expected
    assert max(r.ways for r in t.requests if r.array == "tile") > 1 and max(r.sectors for r in t.requests) > 1


@cuda.jit(device=True)
def _load_twice(x, i):
    return x[i] + x[(i + 1) % x.size]  # (this line: the site of both reads when a device function makes them)


@cuda.jit
def _loads_here_and_in_a_device_function(x, out):
    i = cuda.grid(1)
    a = x[i]  # (this line: the kernel's own read)
    out[i] = a + _load_twice(x, i)
    cuda.syncwarp()


def test_each_access_is_placed_at_the_line_that_made_it_in_a_kernel_or_a_device_function() -> None:
    """The engine's trace finds an access's line in the innermost frame of the learner's code (a device function's,
    not the kernel's call of it), however the memory model reached its record of it; lockstep's trace agrees."""
    import importlib
    import inspect

    from labkit.sim import lockstep

    tm = importlib.import_module("labkit.sim.trace")
    x = np.arange(64, dtype=np.float32)

    def line_of(fn: object, text: str) -> int:
        lines, first = inspect.getsourcelines(fn)
        return first + next(k for k, line in enumerate(lines) if text in line)

    device_line = line_of(_load_twice.py_func, "return x[i]")
    kernel_line = line_of(_loads_here_and_in_a_device_function.py_func, "a = x[i]")
    traces = []
    for on in (False, True):
        saved, lockstep.ENABLED = lockstep.ENABLED, on
        try:
            traces.append(tm.trace(_loads_here_and_in_a_device_function, 2, 32, x, np.zeros(64, np.float32)))
        finally:
            lockstep.ENABLED = saved
    for t in traces:
        c = t.columns
        reads = c["array"] == t.names.index("x")
        lines = [t.sites[s][1] for s in c["site"][reads].tolist()]
        assert lines.count(kernel_line) == 64 and lines.count(device_line) == 128
        assert {t.sites[s][1] for s in c["site"][c["array"] == t.names.index("out")].tolist()} == {kernel_line + 1}


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 12, 16, 24, 48])
def test_request_counts_match_the_definitions_for_every_element_size(itemsize: int) -> None:
    """Requests of random widths (a warp's lanes at most) over random elements: the lanes, sectors, ideal sectors
    and bank-conflict ways counted for all at once are :func:`trace._sectors`' and :func:`trace._ways`' one by one,
    for element sizes that divide a sector and sizes that straddle two."""
    import importlib
    import math

    tm = importlib.import_module("labkit.sim.trace")
    rng = np.random.default_rng(itemsize)
    arrays = {"g": tm.ArrayInfo("g", "global", (400,), itemsize, "V"), "s": tm.ArrayInfo("s", "shared", (400,), itemsize, "V")}
    widths = rng.integers(1, 33, size=60)
    flats = [rng.integers(0, rng.choice([3, 40, 400]), size=w) for w in widths]
    which = rng.integers(0, 2, size=widths.size)
    starts = np.concatenate(([0], np.cumsum(widths)[:-1]))
    lanes, sectors, ideal, ways = tm._per_request(arrays, ["g", "s"], which, np.concatenate(flats), starts)
    for k, f in enumerate(flats):
        addresses = [int(x) * itemsize for x in f]
        assert lanes[k] == len(f) and sectors[k] == tm._sectors(addresses, itemsize)
        assert ideal[k] == max(1, math.ceil(len(set(f.tolist())) * itemsize / tm.SECTOR))
        assert ways[k] == (tm._ways(addresses) if which[k] == 1 else 1)
