"""Arrays no thread writes are read from a copy in a strict launch (``labkit.sim.memory._Snapshot``): the same values
of the same types as reading the array, the same errors for bad indices, and never for an array that shares memory
with another argument or that a thread writes after all."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import memory  # noqa: E402
from labkit.sim.errors import KernelFault  # noqa: E402


@cuda.jit
def read_kinds(img, flat, words, m, out_i, out_f, out_bits):
    i = cuda.grid(1)
    if i < flat.size:
        r, c = i // 48, i % 48
        out_i[i] = img[r % img.shape[0], c, 0] * 1000 + flat[i]  # uint8 elements read as int64: no overflow
        out_f[i] = np.float32(0.299) * img[r % img.shape[0], c, 1] + m[r % m.shape[0], c]  # float32 * uint8: float32
        out_bits[i] = cuda.clz(words[i])  # int32 elements count 32 bits


def _inputs():
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (10, 48, 3)).astype(np.uint8)
    flat = rng.integers(0, 256, 600).astype(np.uint8)  # 600 elements: three parts of 256, the last one partial
    words = rng.integers(1, 2**31 - 1, 600).astype(np.int32)
    m = rng.standard_normal((7, 48)).astype(np.float32)
    return img, flat, words, m


def test_reads_give_what_numba_types_on_a_gpu() -> None:
    img, flat, words, m = _inputs()
    out_i, out_f, out_bits = np.zeros(600, np.int64), np.zeros(600, np.float64), np.zeros(600, np.int64)
    sim.launch_strict(read_kinds, 3, 256, img, flat, words, m, out_i, out_f, out_bits,
                      names=["img", "flat", "words", "m", "out_i", "out_f", "out_bits"], outputs=("out_i", "out_f", "out_bits"))
    k = np.arange(600)
    r, c = k // 48, k % 48
    assert out_i.tolist() == (img[r % 10, c, 0].astype(np.int64) * 1000 + flat).tolist()
    expected_f = np.float32(0.299) * img[r % 10, c, 1].astype(np.float32) + m[r % 7, c]
    assert expected_f.dtype == np.float32  # Numba types float32 * uint8 as float32 on a GPU
    assert out_f.tolist() == expected_f.tolist()
    assert out_bits.tolist() == [32 - int(w).bit_length() for w in words]


def test_unwritten_arrays_are_copies_unless_they_share_memory() -> None:
    a, b = np.zeros((4, 5), np.uint8), np.zeros(300, np.float32)
    model = memory.Model(record=False)
    tracked = memory._track_args(model, [a, b, a[1:]], ["a", "b", "rows"], (), watched=set())
    assert [isinstance(t, memory._Snapshot) for t in tracked] == [False, True, False]  # a and its rows share memory
    watched = memory._track_args(memory.Model(record=False), [a, b], ["a", "b"], ("b",), watched={0})
    assert not any(isinstance(t, memory._Snapshot) for t in watched)  # written or poisoned: every access is tracked
    recorded = memory._track_args(memory.Model(record=True), [a, b], ["a", "b"], (), watched=set())
    # recorded: copies too, whose every read is logged as Model.note logs it (a trace's model, which notes more, is not)
    assert [type(t).__name__ for t in recorded] == ["_RecordedSnapshot2D", "_RecordedSnapshot1D"]
    traced = memory._track_args(_NotingModel(record=True), [a, b], ["a", "b"], (), watched=set())
    assert not any(isinstance(t, memory._Snapshot) for t in traced)


class _NotingModel(memory.Model):
    def note(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().note(*args, **kwargs)


@cuda.jit
def gather3(x, y, idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[idx[i]] + y[i // 5, i % 5]


def test_recorded_fast_reads_log_what_note_logs() -> None:
    """A recorded launch's fast reads (compiled into the kernel and through the copies' own reads) log the same accesses
    as the long path of a model that notes each access itself, each array's in the same order (a thread's reads of
    read-only arrays come after its other accesses of the same stretch between barriers: what the coalescing and
    bank-conflict checks read is per array)."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(40).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
    idx = rng.integers(0, 40, 40).astype(np.int32)
    logs = []
    for model_class in (memory.Model, _NotingModel):
        out = np.zeros(40, np.float32)
        model = model_class(record=True)
        tracked = memory._track_args(model, [x, y, idx, out], ["x", "y", "idx", "out"], ("out",), watched={3})
        with memory.strict(model):
            gather3[2, 32](*tracked)
        model.end_block()
        logs.append([(a.name, t.key, flat, kind, epoch) for a, t, flat, kind, epoch, _ in model.recorded()])
        assert out.tolist() == (x[idx] + y.reshape(-1)[:40]).tolist()
    assert sorted(logs[0]) == sorted(logs[1]) and len(logs[0]) == 40 * 4
    for name in ("x", "y", "idx", "out"):  # each array's accesses in the same order
        assert [e for e in logs[0] if e[0] == name] == [e for e in logs[1] if e[0] == name]


@cuda.jit
def read_at(x, i, j, k, out):
    if x.ndim == 1:
        out[0] = x[i]
    elif x.ndim == 2:
        out[0] = x[i, j]
    else:
        out[0] = x[i, j, k]


@pytest.mark.parametrize(("shape", "index", "message"), [
    ((600,), (600, 0, 0), "index 600 is out of bounds for axis 0 with size 600"),
    ((600,), (700, 0, 0), "index 700 is out of bounds for axis 0 with size 600"),
    ((600,), (-1, 0, 0), "index -1 is out of bounds for axis 0 with size 600"),
    ((4, 5), (0, 5, 0), "index 5 is out of bounds for axis 1 with size 5"),
    ((4, 5), (4, 0, 0), "index 4 is out of bounds for axis 0 with size 4"),
    ((4, 5), (1, -2, 0), "index -2 is out of bounds for axis 1 with size 5"),
    ((4, 5, 3), (1, 2, 3), "index 3 is out of bounds for axis 2 with size 3"),
    ((4, 5, 3), (-1, 2, 1), "index -1 is out of bounds for axis 0 with size 4"),
])
def test_indices_out_of_bounds_raise_as_before(shape: tuple[int, ...], index: tuple[int, int, int], message: str) -> None:
    x = np.arange(np.prod(shape), dtype=np.uint8).reshape(shape)
    for _ in range(2):  # (the first part read, and a part already copied by the first launch's in-bounds reads)
        sim.launch_strict(read_at, 1, 1, x, 0, 0, 0, np.zeros(1, np.int64), names=["x", "i", "j", "k", "out"])
        with pytest.raises(IndexError, match=message):
            sim.launch_strict(read_at, 1, 1, x, *index, np.zeros(1, np.int64), names=["x", "i", "j", "k", "out"])


@cuda.jit
def read_float_index(x, out):
    out[0] = x[1.0]


def test_a_float_index_is_refused() -> None:
    with pytest.raises(TypeError, match="array index must be an integer"):
        sim.launch_strict(read_float_index, 1, 1, np.zeros(8, np.float32), np.zeros(1, np.float32), names=["x", "out"])


@cuda.jit
def shift_left(x):
    i = cuda.grid(1)
    if i + 1 < x.size:
        x[i] = x[i + 1]


def test_a_copy_never_hides_a_race_of_an_array_written_after_all() -> None:
    # shift_left reads x (copied while no launch of it has written x), then writes it: the launch runs again with x
    # watched, and the race between thread i reading x[i + 1] and thread i + 1 writing it is found
    with pytest.raises(KernelFault, match="race on x"):
        sim.launch_strict(shift_left, 1, 64, np.arange(64, dtype=np.float32), names=["x"])


@cuda.jit
def assign_thread_index(out):
    cuda.threadIdx.x = 3
    out[0] = 1


def test_thread_index_is_read_only() -> None:
    # one threadIdx object per position serves every block of a launch: a kernel may not change it (nor can it on a GPU)
    with pytest.raises(AttributeError, match="read-only"):
        sim.launch_strict(assign_thread_index, 2, 4, np.zeros(1, np.int64), names=["out"])


@cuda.jit
def where_am_i(out):
    i = cuda.grid(1)
    out[i, 0], out[i, 1], out[i, 2] = cuda.threadIdx.x, cuda.blockIdx.x, cuda.threadIdx.y


def test_every_block_sees_its_own_thread_indices() -> None:
    out = np.zeros((3 * 64, 3), np.int64)
    sim.launch_strict(where_am_i, 3, 64, out, names=["out"], outputs=("out",))
    k = np.arange(3 * 64)
    assert out.tolist() == np.stack([k % 64, k // 64, np.zeros_like(k)], axis=1).tolist()


@cuda.jit
def store_ints(out, big, frac):
    out[0] = 255  # fits: stored as it is
    out[1] = big  # does not fit: wraps to 8 bits, as a GPU store does
    out[2] = -1
    out[3] = frac  # a float into an integer array: truncated, and the launch says so


def test_integer_stores_keep_their_width_rules() -> None:
    out = np.zeros(4, np.uint8)
    report = sim.launch_strict(store_ints, 1, 1, out, 300, 2.5, names=["out", "big", "frac"], outputs=("out",))
    assert out.tolist() == [255, 300 % 256, 255, 2]
    assert report.float_into_int is not None and "2.5" in report.float_into_int
