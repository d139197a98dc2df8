"""Shortcut answers for labs 05–09 (issue 18): each is wrong for inputs the statement allows, in a way random
draws could miss (an input written over, a pageable copy, a start event on the null stream, a threshold cut to a
whole number, `mask == 1` for "non-zero", integer halving, a cache keyed by the step count, a TF32 size slip,
dynamic shared memory never allocated, ...). Every check must reject each of them on every run: each is graded
20 times and must fail 20 times, with the cause that names it. Correct answers that look like shortcuts pass."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.pop("LABKIT_EXPECT", None)

import labkit  # noqa: E402

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="graded by the simulator and the stand-ins here")

from numba import cuda  # noqa: E402

from labkit import check, cuda_cpp, cupylab, kernels_cuda  # noqa: E402
from labkit.check import lab05, lab06  # noqa: E402

HOST = cuda_cpp.host_compiler() is not None
RUNS = 20


# ============================================================================= host functions
def softmax_in_place(x):
    """Wrong: overwrites its input (x -= max; exp in place; divide in place) and returns it."""
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def pipeline_cached_by_chunks():
    """Wrong: remembers the first answer for each chunk count (a cache keyed by the step count)."""
    memo = {}

    def pipelined_time(t_in, t_kernel, t_out, chunks):
        if chunks not in memo:
            memo[chunks] = (t_in + t_kernel + t_out) / chunks + (chunks - 1) * max(t_in, t_kernel, t_out) / chunks
        return memo[chunks]

    return pipelined_time


def pipeline_float32(t_in, t_kernel, t_out, chunks):
    """Wrong type: the right formula, computed and returned in float32 where the reference (and its float inputs)
    give float64: one rule for every host answer (issue 44, "Types") rejects it with its own words."""
    t = np.float32
    return (t(t_in) + t(t_kernel) + t(t_out)) / t(chunks) + t(chunks - 1) * max(t(t_in), t(t_kernel), t(t_out)) / t(chunks)


def loss_scale_int_halving(scale, found_inf, good_steps, growth_interval):
    """Wrong: integer halving (scale // 2)."""
    if found_inf:
        return scale // 2, 0, False
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True


def loss_scale_cached():
    """Wrong: a cache keyed by good_steps only."""
    memo = {}

    def update(scale, found_inf, good_steps, growth_interval):
        if good_steps not in memo:  # the rule itself written out (calling labkit's reference is rejected as such)
            if found_inf:
                memo[good_steps] = (scale / 2, 0, False)
            elif good_steps + 1 >= growth_interval:
                memo[good_steps] = (scale * 2, 0, True)
            else:
                memo[good_steps] = (scale, good_steps + 1, True)
        return memo[good_steps]

    return update


def gemm_tf32_two_bytes(m, n, k, precision, gpu):
    """Wrong: TF32 counted as 2 bytes an element (it is stored in FP32's 4)."""
    from labkit import hw

    g = hw.gpu(gpu)
    size = {"fp64": 8, "fp32": 4, "tf32": 2, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
    flops = 2 * m * n * k
    seconds = max(flops / (g.peak(precision).value * 1e12), size * (m * k + k * n + m * n) / (g.memory_bandwidth.value * 1e9))
    return flops / seconds / 1e12


def tf32_in_place(x):
    """Wrong: rounds through a view of its input, so x itself is overwritten."""
    u = x.view(np.uint32)
    nan = np.isnan(x)
    r = ((u.astype(np.uint64) + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    u[~nan] = r[~nan]
    return x


def _streams_answer(*, pageable=False, start_on_null=False):
    def pipeline(cp, x, out, kernel, chunks, n_streams):
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
        start, end = cp.cuda.Event(), cp.cuda.Event()
        step = -(-x.size // chunks)
        if start_on_null:
            start.record()  # the null stream: the non-blocking streams never wait for it
        else:
            start.record(streams[0])
            for s in streams[1:]:
                s.wait_event(start)
        for c in range(chunks):
            lo, hi = c * step, min(x.size, (c + 1) * step)
            s = streams[c % n_streams]
            with s:
                d_in, d_out = cp.empty(hi - lo, x.dtype), cp.empty(hi - lo, x.dtype)
                d_in.set(x[lo:hi].copy() if pageable else x[lo:hi])
                kernel(d_in, d_out)
                d_out.get(out=out[lo:hi], blocking=False)
        for s in streams[1:]:
            streams[0].wait_event(s.record())
        end.record(streams[0])
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)

    return pipeline


def _timing_answer(*, pageable=False, start_on_null=False):
    def time_copies(cp, host, repeat):
        stream = cp.cuda.Stream(non_blocking=True)
        src = host.copy() if pageable else host
        a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        out = {}
        for key, copy, factor in (("h2d", lambda: a.set(src), 1), ("d2d_read_write", lambda: b.__setitem__(Ellipsis, a), 2)):
            with stream:
                copy()
                start.record(cp.cuda.Stream.null if start_on_null else stream)
                for _ in range(repeat):
                    copy()
                end.record()
                end.synchronize()
            out[key] = factor * repeat * host.nbytes / (cp.cuda.get_elapsed_time(start, end) * 1e-3) / 1e9
        return out

    return time_copies


# ============================================================================= CUDA C++ and CuPy kernels
LEAKY_DYNAMIC_SHARED = r'''
extern "C" __global__ void leaky_relu(const float* x, float* y, float alpha, int n) {
    extern __shared__ float t[];   // never allocated: the check launches with shared_mem = 0
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[threadIdx.x] = x[i];
    __syncthreads();
    if (i < n) { float v = t[threadIdx.x]; y[i] = v > 0.0f ? v : alpha * v; }
}
'''

LEAKY_WRITES_X = r'''
extern "C" __global__ void leaky_relu(const float* x, float* y, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float* w = (float*)x; float v = w[i]; if (v < 0.0f) w[i] = alpha * v; y[i] = w[i]; }
}
'''


def huber_generic_fabsf():
    """Wrong for T = double: fabsf and 0.5f compute in float."""
    return cupylab.elementwise_kernel("T x, T y, T delta", "T z",
                                      "T d = fabsf(x - y); z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)", "huber")


def huber_generic_right():
    """Correct: a placeholder kernel written with type-generic functions."""
    return cupylab.elementwise_kernel("T x, T y, T delta", "T z",
                                      "T d = abs(x - y); z = d <= delta ? (T)0.5 * d * d : delta * (d - (T)0.5 * delta)", "huber")


def l2norm_with_indexers():
    """Correct: CuPy's _in_ind/_out_ind in the post-map (a mean of squares times the count)."""
    return cupylab.reduction_kernel("float32 x", "float32 y", "x * x", "a + b",
                                    "y = sqrt(a / _in_ind.size() * _in_ind.size() * _out_ind.size())", "0", "l2norm")


# ============================================================================= Numba kernels (lab 09)
@cuda.jit
def fused_int_thresh(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) > int(thresh) else 0
        bg[row, col] = b + alpha * d


@cuda.jit
def fused_writes_frame(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) > thresh else 0
        bg[row, col] = b + alpha * d
        frame[row, col] = 0


@cuda.jit
def erode_eq_one(mask, out):
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] != 1:
                    v = 0
        out[row, col] = v


@cuda.jit
def tiles_eq_one(mask, tile, counts):
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] == 1:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


SHORTCUTS = {
    "05.softmax/in-place": (check.softmax, lambda: softmax_in_place, "wrote into its input `x`"),
    "05.pipeline/cache-by-chunks": (check.pipeline_time, pipeline_cached_by_chunks, "same chunks="),
    "05.pipeline/float32": (check.pipeline_time, lambda: pipeline_float32, "float32 number where the reference returns float64"),
    "05.streams/pageable": (check.streams_pipeline, lambda: _streams_answer(pageable=True), "pageable"),
    "05.streams/start-on-null": (check.streams_pipeline, lambda: _streams_answer(start_on_null=True), "null stream"),
    "06.loss-scale/int-halving": (check.loss_scale, lambda: loss_scale_int_halving, "integer halving"),
    "06.loss-scale/cache-by-steps": (check.loss_scale, loss_scale_cached, "same good_steps"),
    "06.gemm-predict/tf32-2-bytes": (check.gemm_predict, lambda: gemm_tf32_two_bytes, "TF32 values are stored in 4 bytes"),
    "06.tf32-round/in-place": (check.tf32_round, lambda: tf32_in_place, "wrote into its input x"),
    "07.event-timing/pageable": (check.event_timing, lambda: _timing_answer(pageable=True), "pageable"),
    "07.event-timing/start-on-null": (check.event_timing, lambda: _timing_answer(start_on_null=True), "not ordered after the start"),
    "09.fused-update/int-thresh": (check.fused_update, lambda: fused_int_thresh, "whole number"),
    "09.fused-update/writes-frame": (check.fused_update, lambda: fused_writes_frame, "wrote into its input `frame`"),
    "09.erode/eq-one": (check.erode, lambda: erode_eq_one, "non-zero"),
    "09.tile-counts/eq-one": (check.tile_counts, lambda: tiles_eq_one, "non-zero"),
}
HOST_SHORTCUTS = {
    "05.leaky-relu/dynamic-shared-never-allocated": (check.leaky_relu, lambda: LEAKY_DYNAMIC_SHARED, "dynamic shared memory"),
    "05.leaky-relu/writes-x": (check.leaky_relu, lambda: LEAKY_WRITES_X, "wrote into its input `x`"),
    "05.huber/generic-fabsf": (check.huber, huber_generic_fabsf, "fabsf"),
}
CORRECT = {
    "05.streams/reference": (check.streams_pipeline, lambda: _streams_answer()),
    "07.event-timing/reference": (check.event_timing, lambda: _timing_answer()),
}
HOST_CORRECT = {
    "05.huber/generic": (check.huber, huber_generic_right),
    "05.l2norm/indexers": (check.l2norm, l2norm_with_indexers),
}


def _text(result: check.Result) -> str:
    return f"{result.message} {result.cause or ''}"


@pytest.mark.parametrize("name", list(SHORTCUTS))
def test_shortcut_rejected_on_every_run(name: str) -> None:
    grade, make, words = SHORTCUTS[name]
    for run in range(RUNS):
        r = grade(make())
        assert r.status == "failed", f"{name}: run {run + 1} of {RUNS}: {r.status}: {r.message}"
        if words:
            assert words in _text(r), f"{name}: {_text(r)}"


@pytest.mark.skipif(not HOST, reason="no C++ compiler for the CPU stand-in")
@pytest.mark.parametrize("name", list(HOST_SHORTCUTS))
def test_host_shortcut_rejected_on_every_run(name: str) -> None:
    grade, make, words = HOST_SHORTCUTS[name]
    for run in range(RUNS):
        r = grade(make())
        assert r.status == "failed", f"{name}: run {run + 1} of {RUNS}: {r.status}: {r.message}"
        assert words in _text(r), f"{name}: {_text(r)}"


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_lookalike_accepted(name: str) -> None:
    grade, make = CORRECT[name]
    r = grade(make())
    assert r.status == "passed", f"{name}: {_text(r)}"


@pytest.mark.skipif(not HOST, reason="no C++ compiler for the CPU stand-in")
@pytest.mark.parametrize("name", list(HOST_CORRECT))
def test_host_correct_lookalike_accepted(name: str) -> None:
    grade, make = HOST_CORRECT[name]
    r = grade(make())
    assert r.status == "passed", f"{name}: {_text(r)}"


def test_start_event_on_the_null_stream_is_ordered_for_blocking_streams_only() -> None:
    from labkit.check.streams import RecordingCuPy

    for non_blocking, late in ((True, 1), (False, 0)):
        cp = RecordingCuPy()
        s = cp.cuda.Stream(non_blocking=non_blocking)
        start = cp.cuda.Event()
        start.record()  # on the null stream
        with s:
            d = cp.empty(4)
            d.set(np.zeros(4, np.float32))
        assert len(cp.not_after(start)) == late
        assert [o.pinned for o in cp.ops] == [False]
