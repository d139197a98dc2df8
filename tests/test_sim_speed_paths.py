"""The simulator's short paths stay strict: shared-memory reads served from a tile's per-epoch mirror, atomics folded at
the barrier, warp meetings counted by masks. Each test is a kernel the short path serves, with the race, the
uninitialised read or the value that the long path reported or gave, and must still report or give."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import lockstep  # noqa: E402
from labkit.sim.errors import KernelFault  # noqa: E402


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the engine's short paths: kernels lockstep would run (labkit.sim.lockstep, which gives the
    same verdicts; tests/test_sim_lockstep*.py compare the two) run on the engine here."""
    monkeypatch.setattr(lockstep, "ENABLED", False)


@cuda.jit
def _reads_then_overwrites(x, out):
    s = cuda.shared.array(64, np.float64)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    v = s[t]  # (a clean epoch: the mirror serves it)
    if t == 0:
        s[63] = v  # what thread 63 read, with no barrier between: under "reverse" only the read's record shows it
    cuda.syncthreads()
    out[t] = s[t]


@cuda.jit
def _reads_then_overwrites_2d(x, out):
    s = cuda.shared.array((8, 8), np.float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    s[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    v = s[ty, tx]
    if tx == 0 and ty == 0:
        s[7, 7] = v
    cuda.syncthreads()
    out[ty, tx] = s[ty, tx]


@cuda.jit
def _writes_then_reads(x, out):
    s = cuda.shared.array(64, np.float64)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    s[t] = s[t] + 1.0
    out[t] = s[(t + 63) % 64]  # what another thread wrote in this epoch: no barrier between
    cuda.syncthreads()


@cuda.jit
def _tile_2d_reads(x, out):
    s = cuda.shared.array((8, 8), np.float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    s[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = s[tx, ty] + s[ty, (tx + 1) % 8]
    cuda.syncthreads()
    s[ty, tx] = out[ty, tx]  # (the next epoch's writes become what the mirror serves after the barrier)
    cuda.syncthreads()
    out[ty, tx] = s[7 - ty, 7 - tx]


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_a_write_after_reads_of_a_mirrored_tile_is_a_race(schedule: str) -> None:
    x = np.arange(64, dtype=np.float64)
    with pytest.raises(KernelFault, match="race on shared array `s`"):
        sim.launch_strict(_reads_then_overwrites, 1, 64, x, np.zeros(64), schedule=schedule)
    with pytest.raises(KernelFault, match="race on shared array `s`"):
        sim.launch_strict(_reads_then_overwrites_2d, 1, (8, 8), x.reshape(8, 8), np.zeros((8, 8)), schedule=schedule)


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_a_read_of_what_another_thread_wrote_in_the_epoch_is_a_race(schedule: str) -> None:
    x = np.arange(64, dtype=np.float64)
    with pytest.raises(KernelFault, match="race on shared array `s`"):
        sim.launch_strict(_writes_then_reads, 1, 64, x, np.zeros(64), schedule=schedule)


def test_mirrored_reads_give_what_the_threads_wrote_before_each_barrier() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 8))
    out = np.zeros((8, 8))
    sim.launch_strict(_tile_2d_reads, 1, (8, 8), x, out, names=["x", "out"], outputs=("out",))
    first = x.T + np.roll(x, -1, axis=1)
    assert np.array_equal(out, first[::-1, ::-1])


@cuda.jit
def _half_written(x, out):
    s = cuda.shared.array(64, np.int32)
    t = cuda.threadIdx.x
    if t < 40:
        s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[63 - t]  # threads 0-23 read elements nobody wrote


def test_a_read_of_a_shared_element_nobody_wrote_is_still_found() -> None:
    x = np.arange(64, dtype=np.int32)
    report = sim.launch_strict(_half_written, 1, 64, x, np.zeros(64, np.int32), allow_races=True)
    assert report.uninitialised is not None and report.uninitialised.space == "shared"
    assert report.uninitialised.index[0] >= 40


@cuda.jit
def _byte_tile_sum(img, out):
    s = cuda.shared.array((4, 16), np.uint8)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    s[ty, tx] = img[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = s[ty, tx] + s[ty, 15 - tx]  # two bytes add up past 255: reads are 64-bit, as Numba types them


def test_mirrored_byte_reads_widen_as_the_long_path_does() -> None:
    img = np.full((4, 16), 200, np.uint8)
    img[1] = np.arange(16, dtype=np.uint8) * 16
    out = np.zeros((4, 16), np.int32)
    sim.launch_strict(_byte_tile_sum, 1, (16, 4), img, out)
    assert np.array_equal(out, img.astype(np.int32) + img[:, ::-1].astype(np.int32))
    assert out[0, 0] == 400


@cuda.jit
def _through_a_view(x, out):
    s = cuda.shared.array(32, np.float64)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    v = s[t]
    cuda.syncthreads()
    if t == 0:
        part = s[0:4]  # (a view: what is written through it is not tracked, but reads must see it)
        part[0] = -1.0
    cuda.syncthreads()
    out[t] = s[0] + v


def test_a_write_through_a_slice_of_a_tile_is_seen_by_later_reads() -> None:
    x = np.arange(32, dtype=np.float64)
    out = np.zeros(32)
    sim.launch_strict(_through_a_view, 1, 32, x, out)
    assert np.array_equal(out, x - 1.0)


@cuda.jit
def _atomics_then_plain_read(keys, out):
    bins = cuda.shared.array(8, np.int32)
    t = cuda.threadIdx.x
    if t < 8:
        bins[t] = 0
    cuda.syncthreads()
    cuda.atomic.add(bins, keys[t] & 7, 1)
    out[t] = bins[(t + 1) % 8]  # a plain read of what other threads update atomically, no barrier between
    cuda.syncthreads()


def test_shared_atomics_and_a_plain_read_in_one_epoch_are_a_race() -> None:
    keys = np.arange(32, dtype=np.int32)
    with pytest.raises(KernelFault, match="race on shared array `bins`"):
        sim.launch_strict(_atomics_then_plain_read, 1, 32, keys, np.zeros(32, np.int32))


@cuda.jit
def _hist_then_read_other_block(keys, counts, seen):
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    if b == 0:
        cuda.atomic.add(counts, keys[t] & 3, 1)
    elif t == 0:
        seen[0] = counts[1]  # block 1 reads what block 0 updates atomically: blocks run in any order


def test_global_atomics_folded_at_the_block_end_still_race_with_another_block() -> None:
    keys = np.arange(32, dtype=np.int32)
    with pytest.raises(KernelFault, match="race between blocks on counts"):
        sim.launch_strict(_hist_then_read_other_block, 2, 32, keys, np.zeros(4, np.int32), np.zeros(1, np.int32),
                          names=["keys", "counts", "seen"])


@cuda.jit
def _hist(keys, counts):
    bins = cuda.shared.array(16, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, 16, cuda.blockDim.x):
        bins[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(bins, keys[i] & 15, 1)
    cuda.syncthreads()
    for b in range(t, 16, cuda.blockDim.x):
        if bins[b] != 0:
            cuda.atomic.add(counts, b, bins[b])


@pytest.mark.parametrize("n", [1, 777, 3001])
def test_a_histogram_of_shared_atomics_counts_every_key(n: int) -> None:
    keys = np.random.default_rng(n).integers(0, 1 << 20, n).astype(np.int32)
    counts = np.zeros(16, np.int32)
    report = sim.launch_strict(_hist, 3, 40, keys, counts, names=["keys", "counts"])
    assert np.array_equal(counts, np.bincount(keys & 15, minlength=16))
    per_block = [keys[(np.arange(n) % 120) // 40 == b] & 15 for b in range(3)]  # (the grid-stride loop's share)
    assert report.atomics["shared"] == n
    assert report.atomics["global"] == sum(len(np.unique(k)) for k in per_block)


@cuda.jit
def _partial_warp_sum(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    if t < 48:  # lanes 48-63 exit before the shuffles: the second warp's meetings go on without them
        for d in (1, 2, 4, 8):
            v += cuda.shfl_xor_sync(0x0000FFFF if t >= 32 else 0xFFFFFFFF, v, d)
        out[t] = v


def test_warp_meetings_complete_without_the_lanes_that_exited() -> None:
    x = np.arange(64, dtype=np.float64)
    out = np.zeros(64)
    sim.launch_strict(_partial_warp_sum, 1, 64, x, out)
    groups = x[:48].reshape(-1, 16).sum(axis=1)
    assert np.array_equal(out[:48], np.repeat(groups, 16))


@cuda.jit
def _hist_recorded(keys, counts, mine):
    bins = cuda.shared.array(16, np.int32)
    t = cuda.threadIdx.x
    if t < 16:
        bins[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(bins, keys[i] & 15, 1)
    cuda.syncthreads()
    if t < 16:
        cuda.atomic.add(bins, t, 0)  # an atomic, then a read of the same element by the same thread: no race
        v = bins[t]
        if v != 0:
            cuda.atomic.add(counts, t, v)
        mine[cuda.blockIdx.x * 16 + t] = v


def test_recorded_atomics_wait_among_the_reads_and_come_back_as_a_noting_model_logs_them() -> None:
    """A recorded launch keeps an atomic update as one int among the array's waiting reads; its log gives every access
    of each array in the order a model that notes each access as it comes logs it, atomics as atomics."""
    from labkit.sim import memory

    class Noting(memory.Model):
        def note(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().note(*args, **kwargs)

    keys = np.random.default_rng(9).integers(0, 1000, 301).astype(np.int32)
    logs = []
    for model_class in (memory.Model, Noting):
        counts, mine = np.zeros(16, np.int32), np.zeros(32, np.int32)
        model = model_class(record=True)
        tracked = memory._track_args(model, [keys, counts, mine], ["keys", "counts", "mine"], ())
        with memory.strict(model):
            cuda.jit(_hist_recorded.py_func)[2, 48](*tracked)
        model.end_block()
        assert np.array_equal(counts, np.bincount(keys & 15, minlength=16))
        logs.append([(a.name, t.key, flat, kind, epoch) for a, t, flat, kind, epoch, _ in model.recorded()])
    kinds = {(e[0], e[3]) for e in logs[0]}
    assert ("shared array `bins`", memory.ATOMIC) in kinds and ("counts", memory.ATOMIC) in kinds
    for name in {e[0] for e in logs[0]} | {e[0] for e in logs[1]}:
        assert [e for e in logs[0] if e[0] == name] == [e for e in logs[1] if e[0] == name], name
    report = sim.launch_strict(_hist_recorded, 2, 48, keys, np.zeros(16, np.int32), np.zeros(32, np.int32),
                               names=["keys", "counts", "mine"], record=True)
    assert report.count("shared array `bins`", "atomic") == 301 + 32
    assert report.count("counts", "atomic") == report.atomics["global"]


@cuda.jit
def _one_past_the_tile(x, out, k):
    s = cuda.shared.array(32, np.float64)
    s2 = cuda.shared.array((4, 8), np.float64)
    t = cuda.threadIdx.x
    s[t] = x[t]
    s2[t // 8, t % 8] = x[t]
    cuda.syncthreads()
    if k == 0:
        out[t] = s[t + 1]  # thread 31 reads s[32]
    elif k == 1:
        out[t] = s2[t // 8 + 1, t % 8]  # threads 24-31 read row 4 of 4
    else:
        out[t] = s[1.0 * t]  # an index that is not an integer


@pytest.mark.parametrize("k, words", [(0, "index 32 is out of bounds for axis 0 with size 32"),
                                      (1, "index 4 is out of bounds for axis 0 with size 4"),
                                      (2, "array index must be an integer")])
def test_a_mirrored_tile_read_out_of_bounds_or_not_an_integer_says_so(k: int, words: str) -> None:
    x = np.arange(32, dtype=np.float64)
    with pytest.raises((IndexError, TypeError), match=words):
        sim.launch_strict(_one_past_the_tile, 1, 32, x, np.zeros(32), k)


@cuda.jit
def _twice_after_a_barrier(x, out):
    i = cuda.grid(1)
    cuda.syncthreads()  # (a barrier: the engine runs it, reading x from its snapshot)
    if i < x.size:
        out[i] = x[i] * 2.0


def test_a_read_only_input_with_the_bits_of_an_earlier_one_reads_the_same_and_any_other_bits_do_not() -> None:
    """The copies of read-only inputs are kept for the next launch with the same bits: a launch on equal values
    that differ in a bit (-0.0 and 0.0) or in one element reads its own."""
    from labkit.sim import memory

    n = 3000
    x = np.zeros(n)
    outs = []
    for change in (None, None, "sign", "element"):
        y = x.copy()
        if change == "sign":
            y[:] = -0.0
        elif change == "element":
            y[1234] = 5.0
        out = np.full(n, np.nan)
        sim.launch_strict(_twice_after_a_barrier, (n + 127) // 128, 128, y, out, names=["x", "out"])
        outs.append(out)
        assert any(rows[0] == y.tobytes() for rows in memory._rows_cache.values())
    assert not np.signbit(outs[1]).any() and np.signbit(outs[2]).all()
    assert outs[3][1234] == 10.0 and np.count_nonzero(outs[3]) == 1


@cuda.jit
def _wrapping_counter(keys, counts):
    cuda.syncthreads()  # (a barrier: the engine runs it, with the atomics' short path)
    for i in range(cuda.grid(1), keys.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(counts, keys[i] & 1, 300)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_an_atomic_past_the_elements_range_wraps_as_on_a_gpu(dtype: type) -> None:
    """(The element types a GPU has integer atomics for: narrower ones stop, see tests/test_sim_atomics.py.)"""
    keys = np.arange(300, dtype=np.int32)
    start = int(np.iinfo(dtype).max) - 1000 if dtype != np.int64 else 0  # (int64: far from its end)
    counts = np.full(2, start, dtype)
    sim.launch_strict(_wrapping_counter, 2, 32, keys, counts, names=["keys", "counts"])
    assert counts.tolist() == (np.full(2, start + 150 * 300, object) % 2 ** (8 * np.dtype(dtype).itemsize)).astype(
        np.uint64).astype(dtype).tolist()


@cuda.jit
def _atomic_at(keys, counts, k):
    bins = cuda.shared.array(8, np.int32)
    t = cuda.threadIdx.x
    if t < 8:
        bins[t] = 0
    cuda.syncthreads()
    if k == 0:
        cuda.atomic.add(bins, keys[t] + 8, 1)  # thread 0 updates bins[8] of 8
    elif k == 1:
        cuda.atomic.add(bins, keys[t] - 1, 1)  # thread 0 updates bins[-1]
    else:
        cuda.atomic.add(bins, 0.5 * keys[t], 1)  # an index that is not an integer
    cuda.syncthreads()
    if t < 8:
        counts[t] = bins[t]


@pytest.mark.parametrize("k, error, words", [(0, IndexError, "index 8 is out of bounds"),
                                             (1, IndexError, "index -1 is out of bounds"),
                                             (2, TypeError, "must be an integer")])
def test_an_atomic_outside_the_array_or_at_a_float_index_says_so(k: int, error: type, words: str) -> None:
    keys = np.zeros(32, np.int32)
    with pytest.raises(error, match=words):
        sim.launch_strict(_atomic_at, 1, 32, keys, np.zeros(8, np.int32), k)
