"""labkit.sim.lockstep: barrier-free kernels run with every thread at once, with the engine's results and verdicts.

Every test runs a launch twice, in lockstep and on the engine (``lockstep.ENABLED`` off), and compares: outputs bit for
bit, the strict report's fields, and any error's type and message. ``lockstep.last`` says whether lockstep ran the
launch, gave up (the engine ran it), or did not take it; the tests check that too, so that a comparison of the engine
with itself cannot pass for one of the two paths.
"""

from __future__ import annotations

import _thread
import importlib.util
import math
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import lockstep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _internal_errors_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of lockstep's own fails the test (in use it would run the launch on the engine, hiding it)."""
    monkeypatch.setattr(lockstep, "RAISE_INTERNAL", True)


def _copies(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _strict(kernel: Any, grid: Any, block: Any, args: list[Any], lock: bool, **kw: Any) -> tuple[Any, list[Any], str]:
    """(report or exception, the arrays after the launch, lockstep.last) of one strict launch."""
    mine = _copies(args)
    saved = lockstep.ENABLED
    lockstep.ENABLED = lock
    try:
        try:
            got: Any = sim.launch_strict(kernel, grid, block, *mine, **kw)
        except Exception as exc:  # noqa: BLE001 - compared below
            got = exc
    finally:
        lockstep.ENABLED = saved
    return got, mine, lockstep.last


def _same(kernel: Any, grid: Any, block: Any, args: list[Any], **kw: Any) -> str:
    """Run in lockstep and on the engine; assert the same bits, report and error; return what lockstep did."""
    a, arrays_a, last = _strict(kernel, grid, block, args, True, **kw)
    b, arrays_b, _ = _strict(kernel, grid, block, args, False, **kw)
    for x, y in zip(arrays_a, arrays_b):
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (kernel, last)
    assert type(a) is type(b), (a, b, last)
    if isinstance(a, Exception):
        assert str(a) == str(b)
        assert getattr(a, "cause", None) == getattr(b, "cause", None)
    else:
        for field in ("atomics", "barriers", "float_into_int", "uninitialised", "race", "shared"):
            assert getattr(a, field) == getattr(b, field), field
        assert a.written.keys() == b.written.keys()
        for name in a.written:
            assert np.array_equal(a.written[name], b.written[name]), name
    return last


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("sim_speed_for_lockstep", ROOT / "benchmarks" / "sim_speed.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # (its dataclasses look their module up)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


#: kernels of the benchmark (the course's reference kernels and kernels written outside it) that lockstep must run:
#: every one but those with warp functions
MUST_RUN = {
    "saxpy", "copy", "grayscale", "to_unit", "copy2d_coalesced", "copy2d_strided", "transpose_naive", "matmul_naive",
    "histogram_global", "add_offsets", "fused_update", "erode3x3", "dilate3x3", "stencil7_gridstride (outside)",
    "count_in_range (outside)", "transpose_shared", "matmul_tiled", "stencil_1d", "histogram_shared", "block_sum",
    "sum_all", "count_above", "scan_block", "tile_counts", "vector_add (lab 00)", "tile_columns (lab 03)",
    "tile_columns_padded (lab 03)", "hist_shared_gridstride (outside)", "sum_blocks_atomic (outside)",
}


def test_every_benchmark_kernel_it_takes_gives_the_engines_bits() -> None:
    bench = _bench()
    ran = set()
    for case in bench._cases():
        kernel = bench._kernel(case.kernel, lambda fn: cuda.jit(fn), cuda)
        if not lockstep.accepts(kernel):
            assert case.name not in MUST_RUN, (case.name, lockstep.refusal(kernel))
            continue
        args, names, outputs = bench._inputs(case)
        last = _same(kernel, case.grid, case.block, args, names=names, outputs=outputs)
        if last == "ran":
            ran.add(case.name)
    assert MUST_RUN <= ran, MUST_RUN - ran
    assert all("warp" in case.name for case in bench._cases() if case.name not in MUST_RUN)


@cuda.jit
def float_sum(x, total):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        cuda.atomic.add(total, 0, x[i] * 1.5)


@cuda.jit
def int_hist(keys, counts, top):
    for i in range(cuda.grid(1), keys.size, cuda.gridsize(1)):
        cuda.atomic.add(counts, keys[i] & 15, 1)
        cuda.atomic.max(top, 0, keys[i])


@pytest.mark.parametrize("schedule,seed", [("forward", None), ("reverse", None), ("shuffle", 3), ("shuffle", 8)])
def test_float_atomics_add_in_the_engines_order_for_every_schedule(schedule: str, seed: int | None) -> None:
    """Float additions do not commute: the sum is the engine's to the last bit under each schedule."""
    x = np.random.default_rng(5).standard_normal(3001).astype(np.float32) * np.float32(1e4)
    total = np.zeros(1, np.float32)
    assert _same(float_sum, 3, 64, [x, total], schedule=schedule, seed=seed, names=["x", "total"]) == "ran"
    keys = np.random.default_rng(6).integers(0, 1 << 20, 2500).astype(np.int32)
    args = [keys, np.zeros(16, np.int32), np.zeros(1, np.int32)]
    assert _same(int_hist, 2, 96, args, schedule=schedule, seed=seed) == "ran"


@cuda.jit
def scaled_by_thread(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * cuda.threadIdx.x + cuda.blockIdx.x * np.float32(0.1)


def test_thread_and_block_indices_are_int32_as_in_the_engine() -> None:
    """threadIdx and blockIdx are labkit's Int32 in the engine, which NumPy does not treat as a weak Python int: a
    float32 times one is a float64 there, and so in lockstep (a float64 output shows every bit of it)."""
    x = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    assert _same(scaled_by_thread, 2, 128, [x, np.zeros(200, np.float64)]) == "ran"


@cuda.jit
def dims_times_a_float(out):
    if cuda.threadIdx.x == 2:
        out[0] = cuda.blockDim.x * 0.1
        out[1] = cuda.gridsize(1) * np.float32(0.1)
        out[2] = cuda.grid(1) * np.float32(0.1)


def test_numpy_integer_dimensions_run_on_the_engine() -> None:
    """blockDim.x is an np.int32 when the block was given as one, and its products are typed as NumPy's."""
    for block in (3, np.int32(3)):
        got = []
        for on in (True, False):
            lockstep.ENABLED = on
            try:
                out = np.zeros(3)
                dims_times_a_float[1, block](out)
            finally:
                lockstep.ENABLED = True
            got.append(out.tobytes())
            if on:
                assert (lockstep.last == "ran") == (type(block) is int), lockstep.last
        assert got[0] == got[1]


def test_a_subset_of_blocks_and_a_direct_launch() -> None:
    x = np.random.default_rng(2).standard_normal(4000).astype(np.float32)
    assert _same(float_sum, 8, 64, [x, np.zeros(1, np.float32)], blocks=[(5, 0, 0), (1, 0, 0)]) == "ran"
    for on in (True, False):  # a learner's own launch, no strict model
        lockstep.ENABLED = on
        try:
            total = np.zeros(1, np.float32)
            float_sum[4, 64](x, total)
        finally:
            lockstep.ENABLED = True
        if on:
            assert lockstep.last == "ran"
            first = total
    assert first.tobytes() == total.tobytes()


# ----------------------------------------------------------------------------- strict rules through lockstep
@cuda.jit
def read_past_end(x, out):
    i = cuda.grid(1)
    if i <= x.size:
        out[i % out.size] = x[i]


@cuda.jit
def write_past_end(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i + 1] = x[i]


@cuda.jit
def read_below_zero(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i - 1]


@cuda.jit
def two_writers(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i // 2] = x[i]


@cuda.jit
def blocks_share(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i % 32] = x[i]


@cuda.jit
def reads_a_neighbours_write(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]
        out[i] = out[(i + 1) % out.size] + 1


@cuda.jit
def lost_update(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[0] += x[i]


@cuda.jit
def accumulates_into_poison(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] += x[i]


@cuda.jit
def divides(x, d, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 10 // d[i]


@cuda.jit
def divides_floats(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 1.0 / (x[i] - x[i])


@cuda.jit
def float_into_int(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * 2.5


@cuda.jit
def float_atomic_into_int(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def unassigned(x, out):
    i = cuda.grid(1)
    if i < 10:
        v = x[i]
    out[i] = v


def _rule_cases() -> list[tuple[Any, list[Any], dict[str, Any]]]:
    x = np.arange(1, 61, dtype=np.float32)  # (60 elements, 64 threads)
    d = np.arange(60, dtype=np.int32) % 7
    return [
        (read_past_end, [x, np.zeros(60, np.float32)], {}),
        (write_past_end, [x, np.zeros(60, np.float32)], {}),
        (read_below_zero, [x, np.zeros(60, np.float32)], {}),
        (two_writers, [x, np.zeros(60, np.float32)], {}),
        (blocks_share, [x, np.zeros(60, np.float32)], {}),
        (reads_a_neighbours_write, [x, np.zeros(60, np.float32)], {}),
        (lost_update, [x, np.zeros(1, np.float32)], {}),
        (accumulates_into_poison, [x, np.full(60, np.nan, np.float32)], {"names": ["x", "out"], "outputs": ("out",)}),
        (divides, [x, d, np.zeros(60, np.int64)], {}),
        (divides_floats, [x, np.zeros(60, np.float32)], {}),
        (float_into_int, [x, np.zeros(60, np.int32)], {}),
        (float_atomic_into_int, [x, np.zeros(1, np.int32)], {}),
        (unassigned, [x, np.zeros(60, np.float32)], {}),
        (two_writers, [x, np.zeros(60, np.float32)], {"allow_races": True}),
    ]


@pytest.mark.parametrize("k", range(14))
def test_each_strict_rule_gives_the_engines_verdict_and_words(k: int) -> None:
    kernel, args, kw = _rule_cases()[k]
    assert lockstep.accepts(kernel), lockstep.refusal(kernel)
    last = _same(kernel, 2, 32, args, **kw)
    assert last.startswith("gave up: "), last  # lockstep tried it and left it to the engine


# ----------------------------------------------------------------------------- time limit and Interrupt
@cuda.jit
def spin(a):
    i = 0
    while i >= 0:
        i = (i + 1) % 7


def test_a_loop_that_never_ends_stops_at_the_time_limit() -> None:
    start = time.monotonic()
    with pytest.raises(sim.KernelTimeout) as info:
        sim.launch_strict(spin, 1, 32, np.zeros(1), time_limit_s=0.4)
    assert time.monotonic() - start < 0.4 * (1 + lockstep.BUDGET_SHARE) + 4.0  # (the engine's wall ceiling)
    assert lockstep.last.startswith("gave up: ") and "time limit" in lockstep.last
    assert "was at line" in str(info.value) and "spin" in str(info.value)


def test_interrupt_stops_a_lockstep_loop_with_the_engines_words() -> None:
    timer = threading.Timer(0.3, _thread.interrupt_main)
    lockstep_budget = lockstep.BUDGET_MAX_S
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info, sim.time_limit(60):
            spin[1, 32](np.zeros(1))
    finally:
        timer.cancel()
    text = str(info.value)
    assert text.startswith("stopped by Interrupt after ") and "thread (0, 0, 0) of block (0, 0, 0) was at line" in text
    assert "while i >= 0" in text and lockstep_budget > 0.3
    tb = info.value.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename == spin.py_func.__code__.co_filename
    assert tb.tb_frame.f_code.co_name == "spin" and tb.tb_lineno == spin.py_func.__code__.co_firstlineno + 3


# ----------------------------------------------------------------------------- what it does not take
@cuda.jit
def with_a_warp_shuffle(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(0xFFFFFFFF, x[t], 1)


@cuda.jit
def with_a_local_array(x, out):
    t = cuda.threadIdx.x
    keep = cuda.local.array(2, np.float32)
    keep[0] = x[t]
    out[t] = keep[0]


@cuda.jit
def uses_the_old_value(counter, out):
    i = cuda.grid(1)
    slot = cuda.atomic.add(counter, 0, 1)
    out[slot] = i


def test_kernels_outside_the_subset_run_on_the_engine() -> None:
    x = np.arange(32, dtype=np.float32)
    for kernel in (with_a_warp_shuffle, with_a_local_array):
        assert not lockstep.accepts(kernel)
        assert _same(kernel, 1, 32, [x, np.zeros(32, np.float32)]).startswith("not run")
    assert not lockstep.accepts(uses_the_old_value)  # (the order of the old values is the engine's)
    assert _same(uses_the_old_value, 1, 32, [np.zeros(1, np.int32), np.zeros(32, np.int64)]).startswith("not run")


# ----------------------------------------------------------------------------- random kernels
_F_LEAVES = ["x[i]", "x[(i * 7 + 3) % n]", "s", "np.float32(0.75)", "1.5", "0.1", "y[i]", "i", "k", "2",
             "cuda.threadIdx.x"]
_I_LEAVES = ["y[i]", "i", "k", "3", "j", "(i % 5)", "b", "u[i]", "cuda.blockIdx.x"]


def _f_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(_F_LEAVES + ["a"])
    pick = rng.random()
    if pick < 0.55:
        op = rng.choice(["+", "-", "*", "+", "-", "*", "/"])
        return f"({_f_expr(rng, depth - 1)} {op} {_f_expr(rng, depth - 1)})"
    if pick < 0.7:
        return f"abs({_f_expr(rng, depth - 1)})"
    if pick < 0.8:
        return f"{rng.choice(['min', 'max'])}({_f_expr(rng, depth - 1)}, {_f_expr(rng, depth - 1)})"
    if pick < 0.9:
        return f"np.float32({_f_expr(rng, depth - 1)})"
    return f"({_f_expr(rng, depth - 1)} if {_cond(rng, depth - 1)} else {_f_expr(rng, depth - 1)})"


def _i_expr(rng: random.Random, depth: int, leaves: list[str] = _I_LEAVES) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(leaves)
    op = rng.choice(["+", "-", "*", "//", "%", "&", "^", "+"])
    right = _i_expr(rng, depth - 1, leaves)
    if op in ("//", "%"):
        right = f"({right} % 7 + 1)"
    return f"({_i_expr(rng, depth - 1, leaves)} {op} {right})"


def _cond(rng: random.Random, depth: int) -> str:
    if rng.random() < 0.5:
        return f"{_f_expr(rng, depth)} {rng.choice(['<', '<=', '>', '>=', '!='])} {_f_expr(rng, depth)}"
    left = f"{_i_expr(rng, depth)} {rng.choice(['<', '>', '=='])} {_i_expr(rng, depth)}"
    return f"{left} {rng.choice(['and', 'or'])} {_f_expr(rng, 0)} > 0" if rng.random() < 0.4 else left


def _kernel_text(rng: random.Random, name: str) -> str:
    typed = rng.random() < 0.5  # (else a float's type may differ between threads: Python float, float32, float64)

    def f(depth: int) -> str:
        return f"np.float32({_f_expr(rng, depth)})" if typed else _f_expr(rng, depth)

    lines = [
        f"def {name}(x, y, u, s, k, out, outi, acc):",
        "    i = cuda.grid(1)",
        "    n = x.size",
        "    if i >= n:",
        "        return",
        "    a = x[i]",
        f"    b = {_i_expr(rng, 2, ['y[i]', 'i', 'k', '3', 'u[i]'])}",
        "    j = 0",
        f"    for j in range(i % 3, {rng.choice(['4', 'i % 6', 'k'])}):",
        f"        a = {f(2)}",
        f"        b = b + {_i_expr(rng, 1)}",
        f"    if {_cond(rng, 2)}:",
        f"        a = {f(2)}",
        f"    elif {_cond(rng, 1)}:",
        "        return",
        "    out[i] = a",
        "    outi[i] = b",
        # a loop whose iterations depend on nothing carried over (lockstep runs them side by side), with float
        # atomics, whose order shows
        f"    for q in range(i % 4, n, {rng.choice(['7', '37', 'k + 1'])}):",
        f"        w = {_f_expr(rng, 1).replace('[i]', '[q]')}",
        f"        if w > {rng.choice(['0', 'a', 's'])}:",
        "            cuda.atomic.add(acc, q % 8, w)",
    ]
    return "\n".join(lines) + "\n"


def test_random_kernels_give_the_engines_bits(tmp_path: Path) -> None:
    """Small kernels drawn at random (arithmetic of float32, Python floats and ints, narrow and wide integer elements,
    loops with bounds that differ between threads, branches, early returns): every one gives the engine's outputs
    or its error, bit for bit; most of them run in lockstep."""
    rng = random.Random(2026)
    data = np.random.default_rng(7)
    x = data.standard_normal(150).astype(np.float32)
    y = data.integers(-50, 50, 150).astype(np.int32)
    u = data.integers(0, 256, 150).astype(np.uint8)
    ran = 0
    count = 60
    for k in range(count):
        name = f"random_{k}"
        path = tmp_path / f"{name}.py"
        path.write_text(_kernel_text(rng, name))
        namespace: dict[str, Any] = {"cuda": cuda, "np": np, "math": math}
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the test's own kernels
        kernel = cuda.jit(namespace[name])
        assert lockstep.accepts(kernel), (lockstep.refusal(kernel), path.read_text())
        args = [x, y, u, np.float32(0.5) if k % 2 else 0.3, k % 5, np.zeros(150, np.float32), np.zeros(150, np.int64),
                np.zeros(8, np.float32)]
        last = _same(kernel, 2, 96, args)
        ran += last == "ran"
    assert ran >= count * 3 // 4, ran


def _per_array(report: Any) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for a in report.accesses:
        out.setdefault(a.array, []).append((a.block, a.thread, a.seq, a.flat, a.kind, a.space, a.epoch))
    return out


@pytest.mark.parametrize(
    "name,record,schedule",
    [("saxpy", True, "forward"), ("grayscale", True, "forward"), ("histogram_global", True, "forward"),
     ("erode3x3", ("out",), "forward"), ("stencil7_gridstride (outside)", True, "forward"),
     ("count_in_range (outside)", ("x",), "forward"), ("matmul_tiled", True, "shuffle"),
     ("tile_columns_padded (lab 03)", True, "forward"), ("transpose_shared", True, "reverse"),
     ("scan_block", True, "shuffle"), ("hist_shared_gridstride (outside)", True, "shuffle"),
     ("sum_blocks_atomic (outside)", ("shared array `part`", "x"), "forward")],
)
def test_a_recorded_launch_logs_each_array_as_the_engine_does(name: str, record: Any, schedule: str) -> None:
    """What the coalescing and bank-conflict checks read: each array's accesses, in the engine's order, thread by
    thread, with the same blocks, threads, flat indices, kinds and epochs (a shuffle draws each epoch's order
    afresh); the sectors per request and the bank conflicts that follow from them."""
    bench = _bench()
    (case,) = [c for c in bench._cases() if c.name == name]
    kernel = bench._kernel(case.kernel, lambda fn: cuda.jit(fn), cuda)
    args, names, outputs = bench._inputs(case)
    got = {}
    for on in (True, False):
        report, _, last = _strict(kernel, case.grid, case.block, args, on, names=names, outputs=outputs, record=record,
                                  schedule=schedule, seed=3 if schedule == "shuffle" else None)
        assert not isinstance(report, Exception)
        got[on] = (_per_array(report), len(report.log),
                   {n: sim.sectors_per_request(report, n) for n in report.itemsizes if n in report.written},
                   {n: sim.bank_conflicts(report, n) for n in report.itemsizes if n not in report.written})
        if on:
            assert last == "ran"
    assert got[True] == got[False]
    assert got[True][1] > 0


@cuda.jit
def one_below(x, out):
    i = cuda.grid(1)
    if i < 4:
        out[i] = x[i - 1]  # (thread 0 reads x[-1]: out of bounds on a GPU, the last element in NumPy)


def test_an_index_just_below_zero_is_out_of_bounds() -> None:
    """A small negative index (whose magnitude is within the array) is out of bounds too, never NumPy's wrap."""
    last = _same(one_below, 1, 32, [np.arange(100, dtype=np.float32), np.zeros(100, np.float32)])
    assert last.startswith("gave up: ") and "out of bounds" in last


@cuda.jit
def stencil_rows(u, out):
    for k in range(cuda.grid(1), u.size, cuda.gridsize(1)):
        if 0 < k < u.size - 1:
            out[k] = u[k - 1] - 2.0 * u[k] + u[k + 1]


def test_chunks_of_blocks_and_batches_of_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch larger than a chunk runs chunk after chunk of blocks, a flattened loop batch after batch of
    iterations: the same bits, the same float atomics' order, the same recorded log, as the engine's."""
    monkeypatch.setattr(lockstep, "CHUNK_LANES", 96)  # (3 blocks of 32 per chunk; 3 iterations per batch of 32)
    x = np.random.default_rng(9).standard_normal(1000).astype(np.float32)
    for schedule, seed in (("forward", None), ("shuffle", 4)):
        assert _same(float_sum, 7, 32, [x, np.zeros(1, np.float32)], schedule=schedule, seed=seed) == "ran"
    assert _same(stencil_rows, 7, 32, [x, np.zeros(1000, np.float32)], names=["u", "out"], outputs=("out",)) == "ran"
    assert _same(stencil_rows, 1, 32, [x, np.zeros(1000, np.float32)], names=["u", "out"], outputs=("out",)) == "ran"
    got = {}
    for on in (True, False):
        report, _, last = _strict(stencil_rows, 1, 32, [x, np.zeros(1000, np.float32)], on, names=["u", "out"],
                                  record=True)
        got[on] = _per_array(report)
    assert got[True] == got[False]


@cuda.jit
def row_sums(a, out):
    for r in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        s = 0.0
        for c in range(r % 3, a.shape[1]):
            s += a[r, c]
        out[r] = s


@cuda.jit
def running_max(x, out):
    best = -1.0
    i = cuda.grid(1)
    while i < x.size:
        if x[i] > best:
            best = x[i]
        i += cuda.gridsize(1)
    if cuda.grid(1) < out.size:
        out[cuda.grid(1)] = best


def test_loops_inside_flattened_loops_and_values_carried_across_iterations() -> None:
    """An outer grid-stride loop run side by side with an inner loop run per iteration; a while loop whose value is
    carried from one iteration to the next (a Python float in some threads, a float32 in others)."""
    a = np.random.default_rng(4).standard_normal((45, 13)).astype(np.float32)
    assert _same(row_sums, 2, 16, [a, np.zeros(45, np.float64)]) == "ran"
    x = np.random.default_rng(5).standard_normal(300).astype(np.float32) - np.float32(2)
    assert _same(running_max, 3, 64, [x, np.zeros(192, np.float64)]) == "ran"


@cuda.jit
def accumulates_in_place(x, out):
    t = cuda.grid(1)
    if t < out.size:
        out[t] = 0.0
        for k in range(3):
            out[t] += x[t]  # (each iteration reads what the one before wrote: the loop cannot be flattened)


def test_a_loop_that_updates_an_array_in_place_runs_iteration_after_iteration() -> None:
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    assert _same(accumulates_in_place, 2, 8, [x, out]) == "ran"
    assert lockstep.ENABLED
    accumulates_in_place[2, 8](x, out)
    assert lockstep.last == "ran" and np.array_equal(out, 3 * x)


@cuda.jit
def alternates(x, out):
    t = cuda.grid(1)
    if t < x.size:
        for q in range(2):
            out[t, q % 2] = x[t] + q
            out[t, (q + 1) % 2] = x[t] - q  # (iteration 1 overwrites what iteration 0 wrote, both elements)


def test_a_flattened_loop_whose_iterations_write_one_element_gives_the_last_iterations_value() -> None:
    x = np.arange(10, dtype=np.float32)
    assert _same(alternates, 1, 16, [x, np.zeros((10, 2), np.float32)]).startswith("gave up")


@cuda.jit
def huge_constant(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 9223372036854775808 // (i + 1)  # (a Python int beyond int64: the engine computes it exactly)


def test_a_constant_beyond_64_bits_leaves_the_kernel_to_the_engine() -> None:
    assert not lockstep.accepts(huge_constant) and "large" in (lockstep.refusal(huge_constant) or "")
    out = np.zeros(8, np.float64)
    huge_constant[1, 8](out)
    assert out[0] == 9223372036854775808.0


@cuda.jit
def one_thread_sums(x, out):
    t = cuda.threadIdx.x
    if t == 0:
        acc = 0.0
        for i in range(x.size):
            acc += x[i]
        out[0] = acc


@cuda.jit
def one_thread_waits(x, out):
    t = cuda.threadIdx.x
    k = 0
    while k < x.size and t == 0:
        out[0] += x[k]
        k += 1


@cuda.jit
def ragged_tail(x, out):
    t = cuda.grid(1)
    acc = 0.0
    for i in range(t, x.size, cuda.gridsize(1)):
        acc += x[i]
        out[t] = acc  # (a store in the loop: its iterations run one after another)


def test_a_long_loop_of_few_threads_is_left_to_the_engine_and_a_ragged_last_trip_is_not() -> None:
    """One thread looping over a whole array costs lockstep a few NumPy calls a trip (61 ms for 4,096 elements against
    the engine's 1.3 ms): such a loop gives up at once (a ``while``, after NARROW_TRIPS trips); a loop whose last
    trip few threads make stays in lockstep."""
    x = np.random.default_rng(3).standard_normal(4096)
    for kernel in (one_thread_sums, one_thread_waits):
        assert _same(kernel, 1, 64, [x, np.zeros(1)]) == f"gave up: {lockstep.NARROW_WHY}"
    y = np.random.default_rng(4).standard_normal(256 * 40 + 5)
    assert _same(ragged_tail, 2, 128, [y, np.zeros(256)]) == "ran"  # (5 threads make the 41st trip)


# ----------------------------------------------------------------------------- traces (labkit.show)
def _trace_both(kernel: Any, grid: Any, block: Any, args: list[Any], **kw: Any) -> tuple[Any, Any, str]:
    from labkit.sim.trace import trace

    got = []
    for on in (True, False):
        saved = lockstep.ENABLED
        lockstep.ENABLED = on
        try:
            got.append(trace(kernel, grid, block, *_copies(args), **kw))
            if on:
                last = lockstep.last
        finally:
            lockstep.ENABLED = saved
    return got[0], got[1], last


def _same_trace(a: Any, b: Any) -> None:
    assert a.columns.keys() == b.columns.keys()
    for k in b.columns:
        x, y = a.columns[k], b.columns[k]
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), k
    for field in ("arrays", "names", "sites", "races", "divergent", "errors", "traced_blocks", "uninitialised", "faults"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.requests == b.requests
    assert a.summary() == b.summary() and a.score() == b.score()
    for name in b.outputs:
        assert a.outputs[name].tobytes() == b.outputs[name].tobytes(), name


@pytest.mark.parametrize(
    "name,schedule",
    [("matmul_tiled", "forward"), ("scan_block", "shuffle"), ("tile_columns_padded (lab 03)", "forward"),
     ("hist_shared_gridstride (outside)", "reverse"), ("stencil7_gridstride (outside)", "forward"),
     ("erode3x3", "shuffle")],
)
def test_a_trace_run_in_lockstep_is_the_engines_trace(name: str, schedule: str) -> None:
    """What ``labkit.show`` draws: every access's array, block, thread, seq, flat index, kind, epoch, value, site and
    instance, the sites, the warp requests (sectors, bank conflicts) in their order, the outputs."""
    bench = _bench()
    (case,) = [c for c in bench._cases() if c.name == name]
    kernel = bench._kernel(case.kernel, lambda fn: cuda.jit(fn), cuda)
    args, names, outputs = bench._inputs(case)
    a, b, last = _trace_both(kernel, case.grid, case.block, args, names=names, outputs=outputs, schedule=schedule,
                             seed=5 if schedule == "shuffle" else None)
    assert last == "ran"
    _same_trace(a, b)
    assert len(a.columns["flat"]) > 0 and a.requests


@cuda.jit
def scaled_store(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * np.float64(0.1)  # (a float64 value stored into a float32 array: the trace shows the value given)


@cuda.jit
def barrier_in_half(x, out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    out[t] = x[t]


@cuda.jit
def every_thread_reads_all(x, out):
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(x.size):
        acc += x[i]
    out[t] = acc


def test_a_trace_with_races_or_a_limit_is_the_engines() -> None:
    """A race, a divergent barrier or a thread past the trace's limit gives up lockstep: the engine traces it (every
    race, every divergent block, the thread that would not stop)."""
    x = np.arange(1, 61, dtype=np.float32)
    a, b, _ = _trace_both(reads_a_neighbours_write, 2, 32, [x, np.zeros(60, np.float32)])
    assert b.races
    _same_trace(a, b)
    a, b, _ = _trace_both(barrier_in_half, 2, 32, [x, np.zeros(64, np.float32)])
    assert b.divergent
    _same_trace(a, b)
    y = np.ones(10_050)  # (each of 32 threads makes 10,051 accesses: past the trace's 10,000 a thread)
    a, b, _ = _trace_both(every_thread_reads_all, 1, 32, [y, np.zeros(32)])
    assert b.errors and "10,000" in b.errors[0]
    _same_trace(a, b)
    a, b, last = _trace_both(scaled_store, 2, 32, [x, np.zeros(60, np.float32)], names=["x", "out"], outputs=("out",))
    assert last == "ran"
    _same_trace(a, b)


ROWS_AT_THE_LIMIT = 32
ROWS_PAST_IT = 33


@cuda.jit
def two_tiles_at_the_limit(x, out):
    a = cuda.shared.array((64, 64), np.float64)
    b = cuda.shared.array((ROWS_AT_THE_LIMIT, 64), np.float64)
    t = cuda.threadIdx.x
    a[0, t] = x[t]
    b[0, t] = x[t]
    cuda.syncthreads()
    out[cuda.grid(1)] = a[0, t] + b[0, t]


@cuda.jit
def two_tiles_past_the_limit(x, out):
    a = cuda.shared.array((64, 64), np.float64)
    b = cuda.shared.array((ROWS_PAST_IT, 64), np.float64)
    t = cuda.threadIdx.x
    a[0, t] = x[t]
    b[0, t] = x[t]
    cuda.syncthreads()
    out[cuda.grid(1)] = a[0, t] + b[0, t]


def test_static_shared_memory_past_48_kib_a_block_stops_as_a_gpu_build_does() -> None:
    """48 KiB of static shared arrays a block builds and runs; 512 bytes more is refused (a GPU build fails with
    ptxas' "uses too much shared data"), in lockstep (which leaves it to the engine) and on the engine alike, by
    Numba's launch syntax and by labkit's strict launch."""
    from labkit.sim.errors import TooMuchSharedMemory

    x = np.ones(64)
    assert _same(two_tiles_at_the_limit, 2, 64, [x, np.zeros(128)]) == "ran"
    assert _same(two_tiles_past_the_limit, 2, 64, [x, np.zeros(128)]).startswith("gave up")
    with pytest.raises(TooMuchSharedMemory, match=r"49,664 bytes a block.*49,152 bytes \(48 KiB\)"):
        two_tiles_past_the_limit[2, 64](x, np.zeros(128))
    two_tiles_at_the_limit[2, 64](x, np.zeros(128))


@cuda.jit
def gather_two(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[(i * 7) % x.size] + x[i // 3]


@cuda.jit
def transpose_times_two(a, out):
    r, c = cuda.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[c, r] = a[r, c] * 2


@pytest.mark.parametrize(
    "kernel,grid,block,shape",
    [(gather_two, 3, 48, (130,)), (gather_two, 2, 100, (190,)), (transpose_times_two, (3, 4), (7, 5), (18, 20)),
     (transpose_times_two, (2, 2), (16, 6), (30, 12))],
)
def test_a_trace_of_blocks_that_are_not_whole_warps_is_the_engines(kernel: Any, grid: Any, block: Any, shape: Any) -> None:
    """Blocks of 48, 100, 7 x 5 and 16 x 6 threads: a warp's lanes then span a block's end, and the lockstep trace's
    requests (cut where the warp changes) are still the engine's."""
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    out = np.zeros(shape[::-1])
    a, b, last = _trace_both(kernel, grid, block, [x, out])
    assert last == "ran"
    _same_trace(a, b)
