"""The grader's mechanisms, each shown with wrong answers it must reject and correct ones it must accept
(issue: "a [PASSED] in the simulator means the kernel is right and builds for a GPU").

Classes: a sim pass is a GPU build; barriers as a GPU has them; races between blocks; integer arithmetic as on a
GPU; time limits for kernels, device functions in other files and plain Python; wrong calls; likely causes.
"""

from __future__ import annotations

import _thread
import importlib.util
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="these are rules of the simulator")

from numba import cuda  # noqa: E402

from labkit import check, sim  # noqa: E402
from labkit.check import harness as H  # noqa: E402
from labkit.errors import LabkitError  # noqa: E402

NB = 256
NBINS = 256
TILE = 32
ROWS = 8
TILE_PAD = TILE + 1
BLOCK = 128


# ============================================================================= a sim pass is a GPU build
@cuda.jit
def saxpy_ok(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_builds_list(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        terms = [a * x[i], y[i]]
        out[i] = terms[0] + terms[1]


@cuda.jit
def saxpy_generator_sum(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = sum(v for v in (a * x[i], y[i]))


@cuda.jit
def transpose_padded_ok(a, out):
    tile = cuda.shared.array((TILE, TILE_PAD), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * TILE + tx
    row = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_padded_unfoldable(a, out):
    tile = cuda.shared.array((TILE, TILE + 1), np.float32)  # TILE + 1 is not a compile-time constant for Numba
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * TILE + tx
    row = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


def test_a_kernel_that_does_not_build_for_a_gpu_fails_with_the_reason_and_line() -> None:
    assert check.saxpy(saxpy_ok).passed
    r = check.saxpy(saxpy_builds_list)
    assert r.status == "failed" and "does not build for a GPU" in r.message
    assert "terms = [a * x[i], y[i]]" in r.message and "allocate" in r.message
    r = check.saxpy(saxpy_generator_sum)
    assert r.status == "failed" and "generator" in r.message


def test_shared_shape_must_be_a_compile_time_constant() -> None:
    assert check.transpose(transpose_padded_ok).passed
    r = check.transpose(transpose_padded_unfoldable)
    assert r.status == "failed" and "TILE_PAD" in r.message and "(TILE, TILE + 1)" in r.message


# ============================================================================= barriers as a GPU has them
@cuda.jit
def early_return_then_barrier(x, out):
    sh = cuda.shared.array(BLOCK, np.float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i >= x.size:
        return
    sh[t] = x[i]
    cuda.syncthreads()
    out[i] = sh[t]


@cuda.jit
def barrier_inside_if(x, out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    out[cuda.grid(1)] = x[cuda.grid(1)]


@cuda.jit
def barriers_on_two_branches(x, out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    else:
        cuda.syncthreads()
    out[cuda.grid(1)] = x[cuda.grid(1)]


@cuda.jit
def return_after_last_barrier(x, out):
    sh = cuda.shared.array(BLOCK, np.float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    if i >= x.size:
        return
    out[i] = sh[t]


def _dev(n: int) -> tuple:
    return cuda.to_device(np.arange(n, dtype=np.float32)), cuda.to_device(np.zeros(n, np.float32))


def test_a_barrier_some_threads_skip_names_the_line_and_the_threads() -> None:
    with pytest.raises(sim.DivergentBarrier, match=r"reached by 4 of 32 threads.*threads 4, 5, 6") as info:
        sim.launch(early_return_then_barrier, 1, 32, *_dev(4))
    assert "line" in str(info.value) and "return" in info.value.cause
    with pytest.raises(sim.DivergentBarrier, match="reached by 16 of 32"):
        sim.launch(barrier_inside_if, 1, 32, *_dev(32))
    with pytest.raises(sim.DivergentBarrier, match="different cuda.syncthreads"):
        sim.launch(barriers_on_two_branches, 1, 32, *_dev(32))
    x, out = _dev(20)
    sim.launch(return_after_last_barrier, 1, 32, x, out)
    assert np.array_equal(out.copy_to_host(), np.arange(20, dtype=np.float32))


def test_divergent_barrier_is_a_failed_check_not_a_pass() -> None:
    r = check.run("00.vector-add", _vector_add_divergent)
    assert r.status == "failed" and "syncthreads" in r.message and "return" in r.cause


@cuda.jit
def _vector_add_divergent(a, b, out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    cuda.syncthreads()
    out[i] = a[i] + b[i]


@cuda.jit
def block_sum_syncwarp(x, partial):  # the last steps inside one warp, ordered by syncwarp: correct
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 32:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t < 32:
        while s > 0:
            v = sh[t] + sh[t + s] if t < s else np.float32(0.0)
            cuda.syncwarp()
            if t < s:
                sh[t] = v
            cuda.syncwarp()
            s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def block_sum_warp_unsynced(x, partial):  # the same steps without syncwarp: a race
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 32:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t < 32:
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]
            s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


def test_syncwarp_orders_shared_memory_within_a_warp() -> None:
    assert check.block_sum(block_sum_syncwarp).passed
    r = check.block_sum(block_sum_warp_unsynced)
    assert r.status == "failed" and "race" in r.message and "syncwarp" in r.cause


# ============================================================================= races between blocks
@cuda.jit
def sum_merge_with_exch(x, out):  # read, then atomic.exch(old + local): lost updates between blocks
    sh = cuda.shared.array(256, np.float32)
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
        old = out[0]
        cuda.atomic.exch(out, 0, old + sh[0])


@cuda.jit
def block_reads_previous_block(x, out):  # block b reads what block b - 1 wrote: nothing orders blocks
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]
        if cuda.threadIdx.x == 0 and i > 0:
            out[i] = x[i] + out[i - 1]


def test_lost_updates_between_blocks_are_races() -> None:
    r = check.full_sum(sum_merge_with_exch)  # (exch of a float32: a GPU compile stops, so does the check)
    assert r.status == "failed" and "cuda.atomic.exch on an array of float32" in r.message and "atomic.add" in r.cause
    x, out = cuda.to_device(np.ones(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    report = sim.launch_strict(block_reads_previous_block, 2, 32, x, out, allow_races=True, names=("x", "out"))
    assert report.race is not None and report.race.scope == "grid" and report.race.array == "out"
    assert "two kernel launches" in report.race.cause()
    report = sim.launch_strict(saxpy_ok, 3, 32, np.float32(2.0), *(cuda.to_device(np.ones(200, np.float32)) for _ in range(3)),
                               allow_races=True)
    assert report.race is None  # a grid-stride loop: every element has one owner, inputs are only read


# ============================================================================= integers as on a GPU
@cuda.jit
def grayscale_integer(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = (299 * img[row, col, 0] + 587 * img[row, col, 1] + 114 * img[row, col, 2] + 500) // 1000


@cuda.jit
def hist_modulo(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i] % NBINS, 1)


def test_uint8_arithmetic_is_widened_as_numba_does_on_a_gpu() -> None:
    assert check.grayscale(grayscale_integer).passed
    assert check.histogram_global(hist_modulo).passed
    wide = sim.integers.widen(np.uint8(200))  # an int64 (the simulator's subclass remembers the source width)
    assert isinstance(wide, np.int64) and wide == 200
    assert sim.integers.store_value(300, np.dtype(np.uint8)) == 44
    assert sim.integers.store_value(-1, np.dtype(np.uint8)) == 255


# ============================================================================= time limits
def _load_other_cell(tmp_path: Path):
    """A device function defined in 'another cell': a file of its own."""
    src = tmp_path / "other_cell.py"
    src.write_text(
        "from numba import cuda\n\n"
        "@cuda.jit(device=True)\n"
        "def spin(v):\n"
        "    i = 0\n"
        "    while i >= 0:\n"
        "        i = (i + 1) % 7\n"
        "    return v\n"
    )
    spec = importlib.util.spec_from_file_location("other_cell", src)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_hung_device_function_from_another_cell_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = _load_other_cell(tmp_path)
    spin = other.spin

    @cuda.jit
    def saxpy_calls_spin(a, x, y, out):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = spin(a * x[i] + y[i])

    monkeypatch.setattr(H, "CASE_TIME_LIMIT_S", 1.0)
    t0 = time.monotonic()
    r = check.saxpy(saxpy_calls_spin)
    assert r.status == "failed" and "did not finish within 1 s" in r.message and "loop" in r.cause
    assert time.monotonic() - t0 < 8
    time.sleep(0.2)
    from labkit.sim import engine

    assert engine.current is None and not engine.launch_active


def test_a_plain_python_answer_that_never_ends_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.limits, "LEARNER_CODE_LIMIT_S", 1.0)

    def ring_step_forever(chunks, phase, step):
        while True:
            pass

    t0 = time.monotonic()
    r = check.ring_step(ring_step_forever)
    assert r.status == "failed" and "did not finish within 1 s" in r.message and "loop" in r.cause
    assert time.monotonic() - t0 < 6


@cuda.jit
def _one(x, out):
    out[cuda.grid(1)] = 1


@cuda.jit
def spins_forever(x, out):
    i = 0
    while i >= 0:
        i = (i + 1) % 7


def test_interrupt_stops_the_launch_and_the_next_one_works() -> None:
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        sim.launch(spins_forever, 1, 64, *_dev(64), time_limit_s=60)
    from labkit.sim import engine

    assert engine.current is None and not engine.launch_active  # nothing of the launch is left running
    x, out = _dev(64)
    sim.launch(_one, 1, 64, x, out)  # and the next launch works
    assert (out.copy_to_host() == 1).all()


# ============================================================================= wrong calls
@cuda.jit(device=True)
def add_device(a, b):
    return a + b


@cuda.jit
def saxpy_wrong_order(x, y, a, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


def test_wrong_calls_get_messages_never_tracebacks(capsys: pytest.CaptureFixture) -> None:
    r = check.saxpy()
    assert r.status == "failed" and "saxpy(kernel)" in r.message
    r = check.saxpy(saxpy_ok, saxpy_ok)
    assert r.status == "failed" and "2 argument" in r.message
    r = check.saxpy(saxpy_ok[2, 32](np.float32(1), *(np.ones(4, np.float32) for _ in range(3))))
    assert r.status == "failed" and "None" in r.message and "kernel" in r.message
    r = check.saxpy(add_device)
    assert r.status == "failed" and "device function" in r.message
    r = check.saxpy(saxpy_wrong_order)
    assert r.status == "failed" and "order" in (r.cause or "")
    r = check.saxpy([1, 2, 3])
    assert r.status == "failed" and "@cuda.jit" in r.message


def test_hint_and_exercises_accept_what_learners_type(capsys: pytest.CaptureFixture) -> None:
    check.hint(check.saxpy)  # the check function stands for its exercise
    assert "Hint 1/" in capsys.readouterr().out
    for wrong in (saxpy_ok, 3, None):
        with pytest.raises(LabkitError, match="id"):
            check.hint(wrong)
    assert check.exercises(3) == check.exercises("03") == check.exercises("lab03") == check.exercises("Lab 3")
    assert all(row[0].startswith("03.") for row in check.exercises(3))
    for wrong in ("lab99", [3], 3.5):
        with pytest.raises(LabkitError):
            check.exercises(wrong)
    assert "exercise" in repr(check.exercises(2)).splitlines()[0]
    n = len(check.core._get("02.saxpy").hints)
    for _ in range(n + 1):
        check.hint("02.saxpy")
    out = capsys.readouterr().out
    assert out.count("That was the last hint") >= 1


def test_failed_and_unsolved_are_labkit_errors() -> None:
    assert issubclass(check.Failed, LabkitError) and issubclass(check.Unsolved, LabkitError)


# ============================================================================= likely causes from what the kernel did
@cuda.jit
def hist_plain(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        hist[data[i]] += 1


@cuda.jit
def neighbour_no_barrier(x, out):
    sh = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    out[t] = sh[(t + 1) % cuda.blockDim.x]


@cuda.jit
def hist_shared_not_zeroed(data, hist):
    local = cuda.shared.array(NB, np.int32)
    t = cuda.threadIdx.x
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NB, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def grayscale_swapped(img, out):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]
        out[row, col] = int(v + 0.5)


@cuda.jit
def grayscale_wrong_weights(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = 0.333 * img[row, col, 0] + 0.333 * img[row, col, 1] + 0.333 * img[row, col, 2]
        out[row, col] = int(v + 0.5)


@cuda.jit
def sum_of_squares(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i] * x[i])


def test_atomic_advice_only_for_a_seen_lost_update() -> None:
    r = check.histogram_global(hist_plain)
    assert r.status == "failed" and "cuda.atomic.add" in r.cause
    x = cuda.to_device(np.arange(64, dtype=np.float32))
    report = sim.launch_strict(neighbour_no_barrier, 1, 64, x, cuda.to_device(np.zeros(64, np.float32)), allow_races=True)
    assert report.race is not None and not report.race.lost_update
    assert "atomic" not in report.race.cause() and "barrier" in report.race.cause()


def test_an_unzeroed_shared_counter_is_named() -> None:
    r = check.histogram_shared(hist_shared_not_zeroed)
    assert r.status == "failed" and "zero it first" in r.cause and "local" in r.cause


def test_column_advice_only_when_the_writes_are_transposed() -> None:
    r = check.grayscale(grayscale_swapped)
    assert r.status == "failed" and "column" in r.cause
    r = check.grayscale(grayscale_wrong_weights)
    assert r.status == "failed" and "column" not in r.cause


def test_one_element_output_is_not_called_an_off_by_one() -> None:
    r = check.full_sum(sum_of_squares)
    assert r.status == "failed" and "off-by-one" not in (r.cause or "")
    assert "off-by-one" not in H._guess_cause(np.array([2.0]), np.array([1.0]))
    assert "off-by-one" in H._guess_cause(np.arange(1.0, 9.0), np.arange(0.0, 8.0))


def test_race_messages_use_the_right_article() -> None:
    race = sim.Race("hist", "shared", (3,), (0, 0, 0), (1, 0, 0), "atomic", (2, 0, 0), "read")
    assert "an atomic update" in race.message() and "a atomic" not in race.message()
