"""Round six of the grader's causes (issue 44, item 2: causes that can be measured): general diagnoses that serve a
class of slips across exercises, each tested where it fires and where it must not.

- an axis the launch lacks (``threadIdx.y`` in a flat launch) or an axis the kernel never reads (2-D blocks, no
  ``threadIdx.y``): :func:`labkit.check.causes.axis_cause`, for Numba kernels and CUDA C++ sources;
- a host function that hands back an earlier call's result (a cache by shape, kept state):
  :func:`labkit.check.properties.repeated_result_cause`, read from the calls the check made;
- a per-thread array where the threads share values, a grid-stride loop stepping by one block, a halving loop that
  holds at 0: :func:`labkit.check.causes.local_array_cause`, ``block_stride_cause``, ``halving_loop_cause``.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Callable

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda, float32, int32  # noqa: E402

from labkit import check  # noqa: E402
from labkit.check import causes, properties  # noqa: E402
from labkit.check.lab10_clusters import reference_source as cluster_source  # noqa: E402


def _run(check_fn: Callable[..., Any], answer: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return check_fn(answer)


# ------------------------------------------------------------------------------------------- axes
CLUSTER_SWAPS = [
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.y * blockDim.x + threadIdx.x;", "blockIdx.y"),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x * blockDim.y + threadIdx.x;", "blockDim.y"),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x * blockDim.x + threadIdx.y;", "threadIdx.y"),
]


@pytest.mark.parametrize("old, new, name", CLUSTER_SWAPS)
def test_a_cpp_kernel_reading_an_axis_of_a_flat_launch_is_told_so(old: str, new: str, name: str) -> None:
    source = cluster_source()
    assert causes.axis_cause(source, (8,), (128,)) is None  # the reference reads x only
    cause = causes.axis_cause(source.replace(old, new), (8,), (128,))
    assert cause is not None and f"`{name}`" in cause and f"`{name[:-1]}x`" in cause, cause


def test_axis_cause_stays_silent_where_the_axis_exists_or_is_a_flattening() -> None:
    flat = "__global__ void k(float* a) { int t = threadIdx.x + threadIdx.y * blockDim.x; a[t] = 1.0f; }"
    assert causes.axis_cause(flat, (4,), (128,)) is None  # y times a width: 0 in a flat launch, rightly
    two_d = (
        "__global__ void k(float* a) { int r = blockIdx.y * blockDim.y + threadIdx.y; "
        "int c = blockIdx.x * blockDim.x + threadIdx.x; a[r * 64 + c] = 1.0f; }"
    )
    assert causes.axis_cause(two_d, (4, 4), (16, 16)) is None
    rows_only = two_d.replace("threadIdx.x", "threadIdx.y")  # both indices from y: x never read
    cause = causes.axis_cause(rows_only, (4, 4), (16, 16))
    assert cause is not None and "never reads `threadIdx.x`" in cause, cause
    commented = "__global__ void k(float* a) { int i = threadIdx.x; // not threadIdx.y\n a[i] = 1.0f; }"
    assert causes.axis_cause(commented, (4,), (128,)) is None


@cuda.jit
def _uses_x_only(a, out):
    r = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    c = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.x
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = a[r, c]


@cuda.jit
def _uses_grid2(a, out):
    r, c = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = a[r, c]


def test_a_2d_launch_whose_kernel_never_reads_threadidx_y_is_told_so() -> None:
    cause = causes.axis_cause(_uses_x_only, (2, 2), (16, 16))
    assert cause is not None and "`cuda.threadIdx.y`" in cause and "16 threads of a block along y" in cause, cause
    assert causes.axis_cause(_uses_grid2, (2, 2), (16, 16)) is None  # cuda.grid(2) reads both axes
    assert causes.axis_cause(_uses_grid2, (2, 1), (16, 1)) is None  # cuda.grid(2) is right in a flat launch too
    flat = causes.axis_cause(_uses_x_only, (2, 1), (16, 1))  # a flat grid: blockIdx.y is 0 in every block
    assert flat is not None and "`cuda.blockIdx.y`, which is 0 in every block" in flat, flat


@cuda.jit
def count_above_y(x, threshold, counts):
    count = cuda.shared.array(1, int32)
    t = cuda.threadIdx.y  # the slip: y for x
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


def test_the_race_check_names_threadidx_y_in_a_flat_launch() -> None:
    r = _run(lambda a: check.run("04.race", a), count_above_y)
    assert r.status == "failed", r.report()
    assert "`cuda.threadIdx.y`" in (r.cause or "") and "atomic" not in (r.cause or ""), r.report()


def test_a_cluster_sum_indexed_by_blockidx_y_is_told_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.check import lab10_clusters

    def wrong_sum(source: str, *args: Any, **kwargs: Any) -> str:  # the stand-in's verdict on this source, quickly
        raise check.Failed("on the CPU stand-in, clusters of 2 blocks of 128 threads: out[0] is 140, expected 73.")

    monkeypatch.setattr(lab10_clusters, "host_cases", wrong_sum)
    r = _run(check.cluster_sum, cluster_source().replace(*CLUSTER_SWAPS[0][:2]))
    assert r.status == "failed" and "`blockIdx.y`" in (r.cause or ""), r.report()


def test_a_leaky_relu_indexed_by_threadidx_y_is_told_so() -> None:
    from labkit.check.lab05 import _leaky_reference

    source = _leaky_reference()
    wrong = source.replace("+ threadIdx.x", "+ threadIdx.y")
    assert wrong != source
    r = _run(check.leaky_relu, wrong)
    assert r.status == "failed" and "`threadIdx.y`" in (r.cause or ""), r.report()


# ------------------------------------------------------------------------------------------- an earlier result
def _copy_seconds_cached() -> Callable[..., float]:
    memo: dict[Any, float] = {}

    def copy_seconds(nbytes: int, peak_gbps: float) -> float:
        key = (type(nbytes).__name__, type(peak_gbps).__name__)  # a cache keyed by the arguments' kinds
        if key not in memo:
            memo[key] = 2 * nbytes / (peak_gbps * 1e9)
        return memo[key]

    return copy_seconds


def test_a_cached_host_answer_is_told_it_returned_an_earlier_result() -> None:
    r = _run(lambda a: check.run("07.copy-time", a), _copy_seconds_cached())
    assert r.status == "failed", r.report()
    assert "earlier call" in (r.cause or "") and "cache" in (r.cause or ""), r.report()


def test_an_answer_that_is_wrong_everywhere_keeps_the_checks_own_cause() -> None:
    def copy_seconds(nbytes: int, peak_gbps: float) -> float:
        return nbytes / (peak_gbps * 1e9)  # read only: half the traffic

    r = _run(lambda a: check.run("07.copy-time", a), copy_seconds)
    assert r.status == "failed" and "earlier call" not in (r.cause or ""), r.report()


def test_repeated_result_cause_needs_an_earlier_result_handed_back_again() -> None:
    ref = lambda: lambda n, k: 2 * n + k  # noqa: E731 - a reference factory, as exercises hold them
    call = properties.Call
    cached = lambda n, k: 7  # noqa: E731 - hands back the first result whatever it is given
    same = [call((3, 1), {}, 7, 2), call((3, 1), {}, 8, 2)]  # the same arguments twice: not an earlier result
    assert properties.repeated_result_cause(same, ref, cached) is None
    wrong_before = [call((3, 2), {}, 7, 2), call((5, 1), {}, 7, 2)]  # the earlier result was wrong too
    assert properties.repeated_result_cause(wrong_before, ref, cached) is None
    right_now = [call((3, 1), {}, 7, 2), call((5, 1), {}, 11, 2)]
    assert properties.repeated_result_cause(right_now, ref, cached) is None
    handed_back = [call((3, 1), {}, 7, 2), call((5, 2), {}, 7, 2)]
    cause = properties.repeated_result_cause(handed_back, ref, cached)
    assert cause is not None and "(3, 1)" in cause and "(5, 2)" in cause, cause
    coincidence = lambda n, k: 2 * n + k - 5 if n == 5 else 2 * n + k  # noqa: E731 - wrong at n = 5 only
    assert properties.repeated_result_cause(handed_back, ref, coincidence) is None
    arrays = [call((np.arange(4.0), 0), {}, np.arange(4.0) * 2, 5), call((np.ones(4), 0), {}, np.arange(4.0) * 2, 5)]
    assert properties.repeated_result_cause(arrays, ref, lambda n, k: np.arange(4.0) * 2) is not None
    assert properties.repeated_result_cause(arrays, ref, lambda n, k: n * 2 + 1) is None


# ------------------------------------------------------------------------------------------- slips read from the code
MAX_BLOCK = 256


@cuda.jit
def block_sum_local(x, partial):
    sh = cuda.local.array(MAX_BLOCK, float32)  # the slip: a private array where the block shares values
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def block_sum_endless(x, partial):
    sh = cuda.shared.array(MAX_BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s >= 0:  # the slip: s stays 0
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_all_block_stride(x, out):
    acc = float32(0.0)
    for i in range(cuda.grid(1), x.size, cuda.blockDim.x):  # the slip: one block's width
        acc += x[i]
    cuda.atomic.add(out, 0, acc)


@cuda.jit
def sum_all_private_scratch(x, out):
    buf = cuda.local.array(4, float32)  # per-thread scratch indexed by a loop counter: right
    for k in range(4):
        buf[k] = float32(0.0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        buf[i % 4] += x[i]
    cuda.atomic.add(out, 0, buf[0] + buf[1] + buf[2] + buf[3])


@cuda.jit
def block_rows(x, out):
    for j in range(cuda.threadIdx.x, x.size, cuda.blockDim.x):  # a block's own loop: right
        out[j] = x[j]


def test_code_causes_fire_on_their_slip_only() -> None:
    local = causes.local_array_cause(block_sum_local)
    assert local is not None and "`sh` is a cuda.local.array" in local and "sh[t]" in local, local
    assert causes.local_array_cause(sum_all_private_scratch) is None
    stride = causes.block_stride_cause(sum_all_block_stride)
    assert stride is not None and "cuda.gridsize(1)" in stride and "cuda.blockDim.x" in stride, stride
    assert causes.block_stride_cause(block_rows) is None and causes.block_stride_cause(sum_all_private_scratch) is None
    endless = causes.halving_loop_cause(block_sum_endless)
    assert endless is not None and "`while s >= 0:`" in endless and "`while s > 0:`" in endless, endless
    for other in (block_sum_local, sum_all_block_stride, block_rows):
        assert causes.halving_loop_cause(other) is None


@pytest.mark.parametrize(
    "exercise, kernel, words",
    [
        ("04.block-sum", block_sum_local, "cuda.local.array"),
        ("04.full-sum", sum_all_block_stride, "steps by one block's width"),
    ],
)
def test_checks_name_the_slip_read_from_the_code(exercise: str, kernel: Any, words: str) -> None:
    r = _run(lambda a: check.run(exercise, a), kernel)
    assert r.status == "failed" and words in (r.cause or ""), r.report()


def test_a_time_out_of_a_halving_loop_that_holds_at_zero_names_the_bound() -> None:
    from labkit.check import harness

    failed = harness.explain_exception(TimeoutError("the kernel did not finish"), block_sum_endless)
    assert "`while s > 0:`" in (failed.cause or ""), failed.cause
    failed = harness.explain_exception(TimeoutError("the kernel did not finish"), block_rows)
    assert "`while s > 0:`" not in (failed.cause or ""), failed.cause


def test_predict_range_names_the_value_and_the_right_class() -> None:
    from labkit.check.lab06 import _reference_predictions

    right = _reference_predictions()
    odd = {"fp16": ["zero", *right["fp16"][1:]], "bf16": right["bf16"]}
    r = _run(lambda a: check.run("06.predict-range", a), odd)
    assert r.status == "failed" and "70000 in fp16: you said 'zero'; expected one of" in r.message, r.report()
    flip = {"normal": "subnormal", "subnormal": "normal", "underflow": "normal", "overflow": "normal"}
    wrong = {"fp16": right["fp16"], "bf16": [flip[right["bf16"][0]], *right["bf16"][1:]]}
    r = _run(lambda a: check.run("06.predict-range", a), wrong)
    assert r.status == "failed" and f"70000 in bf16: expected {right['bf16'][0]}, you said" in r.message, r.report()


MM_TILE = 16


@cuda.jit
def matmul_sa_swapped(A, B, C):
    sa = cuda.shared.array((MM_TILE, MM_TILE), float32)
    sb = cuda.shared.array((MM_TILE, MM_TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * MM_TILE + tx
    row = cuda.blockIdx.y * MM_TILE + ty
    acc = float32(0.0)
    for t in range((A.shape[1] + MM_TILE - 1) // MM_TILE):
        k = t * MM_TILE
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else float32(0.0)
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else float32(0.0)
        cuda.syncthreads()
        for kk in range(MM_TILE):
            acc += sa[kk, ty] * sb[kk, tx]  # the slip: A's tile read with its indices swapped
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_matmul_with_a_tile_read_transposed_is_told_so() -> None:
    r = _run(lambda a: check.run("03.matmul", a), matmul_sa_swapped)
    assert r.status == "failed" and "tile of A transposed" in (r.cause or ""), r.report()
    from labkit.check.lab03 import _tile_swap_cause

    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((20, 30)), rng.standard_normal((30, 18))
    assert _tile_swap_cause(A @ B, A, B, 16) is None and _tile_swap_cause(A @ B + 1.0, A, B, 16) is None


@cuda.jit
def block_sum_loose_guard(x, partial):
    sh = cuda.shared.array(MAX_BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t <= s:  # the slip: thread s adds too
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


def test_a_tree_step_guarded_with_le_is_named() -> None:
    from labkit.kernels.reductions import block_sum

    assert causes.tree_guard_cause(block_sum) is None  # `if t < s:`
    assert causes.tree_guard_cause(block_sum_endless) is None
    r = _run(lambda a: check.run("04.block-sum", a), block_sum_loose_guard)
    assert r.status == "failed" and "`if t < s:`" in (r.cause or "") and "`if t <= s:`" in (r.cause or ""), r.report()


@cuda.jit
def block_sum_no_guard(x, partial):
    sh = cuda.shared.array(MAX_BLOCK, float32)
    t = cuda.threadIdx.x
    sh[t] = x[cuda.grid(1)] if cuda.grid(1) < x.size else float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if True:  # the slip: every thread adds
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


def test_a_tree_step_without_a_guard_is_named() -> None:
    cause = causes.tree_guard_cause(block_sum_no_guard)
    assert cause is not None and "runs under no test" in cause and "`if t < s:`" in cause, cause


def test_a_wmma_kernel_indexing_tiles_by_the_wrong_block_axis_is_told_so() -> None:
    from labkit.check.lab06 import _reference_wmma

    source = _reference_wmma()
    assert causes.axis_cause(source, (3, 2), (32, 4)) is None  # a warp's lanes need not read threadIdx.x
    wrong = source.replace("const int tile_col = blockIdx.x;", "const int tile_col = blockIdx.y;")
    assert wrong != source
    r = _run(lambda a: check.run("06.wmma-gemm", a), wrong)
    assert r.status == "failed" and "never reads `blockIdx.x`" in (r.cause or ""), r.report()


def test_a_cpp_tree_step_guarded_with_le_is_named() -> None:
    source = cluster_source()
    assert causes.tree_guard_cause(source) is None
    cause = causes.tree_guard_cause(source.replace("if (threadIdx.x < s)", "if (threadIdx.x <= s)"))
    assert cause is not None and "`if (threadIdx.x < s)`" in cause, cause


def test_a_write_65536_elements_low_is_named_a_16_bit_index() -> None:
    said = (
        "leaky_relu (grid (548, 1, 1), block (128, 1, 1)) on the CPU stand-in: a global-memory race: thread (3, 0, 0) "
        "of block (512, 0, 0) wrote y[3] after thread (3, 0, 0) of block (0, 0, 0) wrote it"
    )
    cause = causes.wrapped_index_in(said)
    assert cause is not None and "65,536" in cause and "Compute the index as an int" in cause, cause
    same_block = said.replace("block (512, 0, 0) wrote y[3]", "block (0, 0, 0) wrote y[4]")
    assert causes.wrapped_index_in(same_block) is None
    assert causes.wrapped_index_in(said.replace("wrote y[3]", "wrote y[7]")) is None


def test_probing_a_cached_answer_that_hangs_on_new_arguments_stops_at_the_time_limit() -> None:
    calls: list[float] = []

    def copy_seconds(nbytes: int, peak_gbps: float) -> float:
        if len(calls) >= 2:  # the calls after the failing second one (the probes) never return
            while True:
                pass
        calls.append(calls[0] if calls else 2 * nbytes / (peak_gbps * 1e9))  # the second hands back the first
        return calls[-1]

    r = _run(lambda a: check.run("07.copy-time", a), copy_seconds)
    assert r.status == "failed" and "earlier call" not in (r.cause or ""), r.report()


@pytest.mark.parametrize("x_shift", [True, False])
def test_a_shift_for_the_division_in_one_direction_is_named(x_shift: bool) -> None:
    def grid_for(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
        rows, cols = shape
        bx, by = block
        gx = -(-cols >> (bx.bit_length() - 1)) if x_shift else -(-cols // bx)  # a shift: right for powers of two only
        gy = -(-rows // by) if x_shift else -(-rows >> (by.bit_length() - 1))
        return gx, gy

    r = _run(lambda a: check.run("02.launch-config", a), grid_for)
    assert r.status == "failed" and "a shift in place of the division" in (r.cause or ""), r.report()


RADIUS = 3
SHN = 256 + 2 * RADIUS


@cuda.jit
def stencil_halo_le(x, out):
    sh = cuda.shared.array(SHN, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else float32(0.0)
    if t <= RADIUS:  # the slip: thread RADIUS loads a halo slot too
        left = i - RADIUS
        sh[t] = x[left] if 0 <= left < n else float32(0.0)
        right = i + cuda.blockDim.x
        sh[t + cuda.blockDim.x + RADIUS] = x[right] if right < n else float32(0.0)
    cuda.syncthreads()
    if i < n:
        acc = float32(0.0)
        for k in range(2 * RADIUS + 1):
            acc += sh[t + k]
        out[i] = acc / float32(2 * RADIUS + 1)


def test_a_halo_store_under_le_is_named() -> None:
    from labkit.kernels.memory import stencil_1d

    assert causes.halo_guard_cause(stencil_1d) is None
    r = _run(lambda a: check.run("03.stencil", a), stencil_halo_le)
    assert r.status == "failed" and "`if t < RADIUS:`" in (r.cause or ""), r.report()
