"""Round five of the grader's causes (issue 44, items 5 and the learner-study messages): each natural mistake is
rejected with a likely cause that names it, and no remark that does not apply to the code (a grid-stride hint to a
kernel that has one, the wrap-around said twice, `if i < n:` for a negative index, "after the loads" where the
barrier belongs after the atomics). About 15 s on one core.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Callable

import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda, float32, int32, uint8  # noqa: E402

from labkit import check  # noqa: E402

NBINS = 256
RADIUS = 3
SHN = 256 + 6


def _run(check_fn: Callable[..., Any], answer: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return check_fn(answer)


@cuda.jit
def sum_per_warp(x, out):
    acc = float32(0.0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    off = 16
    while off > 0:
        acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, off)
        off //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, acc)

@cuda.jit
def hist_t_lt_nbins(data, hist):
    local = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    if t < NBINS:
        local[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local[t])

@cuda.jit
def hist_uint8(data, hist):
    local = cuda.shared.array(NBINS, uint8)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])

@cuda.jit
def stencil_edge_mean(x, out):
    i = cuda.grid(1)
    n = x.size
    if i < n:
        acc = float32(0.0)
        c = 0
        for k in range(-RADIUS, RADIUS + 1):
            if 0 <= i + k < n:
                acc += x[i + k]
                c += 1
        out[i] = acc / float32(c)

@cuda.jit
def stencil_no_left_check(x, out):
    sh = cuda.shared.array(SHN, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else float32(0.0)
    if t < RADIUS:
        sh[t] = x[i - RADIUS]
        right = i + cuda.blockDim.x
        sh[t + cuda.blockDim.x + RADIUS] = x[right] if right < n else float32(0.0)
    cuda.syncthreads()
    if i < n:
        acc = float32(0.0)
        for k in range(2 * RADIUS + 1):
            acc += sh[t + k]
        out[i] = acc / float32(2 * RADIUS + 1)

@cuda.jit
def race_no_end_barrier(x, threshold, counts):
    count = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]

@cuda.jit
def fused_new_bg(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = float32(frame[row, col]) - b
        nb = b + alpha * d
        bg[row, col] = nb
        mask[row, col] = 1 if abs(float32(frame[row, col]) - nb) > thresh else 0



@cuda.jit
def block_sum_no_loop_barrier(x, partial):
    sh = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@pytest.mark.parametrize("check_name, kernel, says, never", [
    ("full_sum", sum_per_warp, ["one per warp", "combine the block's warps"], ["blocks combine atomically"]),
    ("histogram_shared", hist_t_lt_nbins, ["range(t, NBINS, cuda.blockDim.x)"], ["compare your formula"]),
    ("histogram_shared", hist_uint8, ["narrower than int32"], ["grid-stride loop must cover"]),
    ("stencil", stencil_edge_mean, ["zeros included", "divided by 7"], ["compare your formula"]),
    ("stencil", stencil_no_left_check, ["0 <= j"], ["`if i < n:`"]),
    ("race", race_no_end_barrier, ["after the atomic updates"], ["after the loads"]),
    ("fused_update", fused_new_bg, ["old background"], ["compare your formula"]),
    ("block_sum", block_sum_no_loop_barrier, ["each step of the loop"], ["start the tree at"]),
])
def test_natural_mistakes_get_their_own_cause(check_name: str, kernel: Any, says: list, never: list) -> None:
    r = _run(getattr(check, check_name), kernel)
    text = r.message + " " + (r.cause or "")
    assert r.status == "failed", r.message
    for words in says:
        assert words in text, (words, text)
    for words in never:
        assert words not in text, (words, text)
    assert text.count("wraps around") <= 1, text


def test_a_speedup_above_n_names_the_cap_on_the_hidden_part() -> None:
    def no_cap(c: float, a: float, n: int, f: float) -> tuple[float, float]:
        step = c + (a - f * c if n > 1 else 0.0)
        return n * c / step, c / step

    r = _run(check.data_parallel_scaling, no_cap)
    assert r.status == "failed" and "min(allreduce_s, overlap * compute_s)" in (r.cause or ""), r.report()


# ------------------------------------------------------------------------------------------ host answers and figures
def _ring_tags_differ(comm, buf):  # noqa: ANN001, ANN202 - a learner's rank function, read for its tags only
    comm.Sendrecv(buf, dest=1, sendtag=1, recvbuf=buf, source=0, recvtag=2)


def _ring_send_recv_tags(comm, buf):  # noqa: ANN001, ANN202
    comm.Send(buf, dest=1, tag=5)
    comm.Recv(buf, source=0, tag=6)


def _ring_same_tags(comm, buf):  # noqa: ANN001, ANN202
    comm.Send(buf, dest=1, tag=3)
    comm.Recv(buf, source=0, tag=3)


def test_an_mpi_tag_mismatch_is_not_blamed_on_a_blocking_send() -> None:
    from labkit.check import lab08_ranks as lr

    stuck = "case 5: rank 0 is stuck in comm.Send(buf=float32[100000], dest=1); rank 1 is stuck in comm.Send(...)"
    for fn in (_ring_tags_differ, _ring_send_recv_tags):
        cause = lr._stuck_cause(stuck, fn)
        assert cause is not None and "tag" in cause and "blocking Send" not in cause, cause
    assert "blocking Send" in (lr._stuck_cause(stuck, _ring_same_tags) or "")


@pytest.mark.parametrize("error, words", [
    ("rank 1 of 4 raised Exception: MPI_ERR_TRUNCATE: message truncated", "np.empty_like"),
    ("rank 0 of 3 raised ValueError: operands could not be broadcast together with shapes (3,) (4,)", "chunks[k]"),
    ("rank 2 of 4 raised IndexError: list index out of range", "% n"),
    ("rank 0 of 2 raised TypeError: message: expecting buffer or list/tuple", "capital letters"),
])
def test_mpi_errors_get_real_causes(error: str, words: str) -> None:
    from labkit.check import lab08_ranks as lr

    cause = lr._stuck_cause(error)
    assert cause is not None and words in cause, cause


def _decode_with(mantissa_scale: float, bias: int) -> Callable[[str], float]:
    def decode(bits: str) -> float:
        s = -1.0 if bits[0] == "1" else 1.0
        e, m = int(bits[1:6], 2), int(bits[6:], 2)
        if e == 31:
            return s * float("inf") if m == 0 else float("nan")
        if e == 0:
            return s * m / 1024 * 2.0**-14
        return s * (1 + m / mantissa_scale) * 2.0 ** (e - bias)

    return decode


@pytest.mark.parametrize("scale, bias, words, never", [
    (1000, 15, "1024", "bias"),
    (1024, 16, "the bias is 15", "1000"),
    (1024, 127, "127 is float32's", "1000"),
])
def test_decode_slips_are_named(scale: float, bias: int, words: str, never: str) -> None:
    r = _run(check.decode_fp16, _decode_with(scale, bias))
    assert r.status == "failed" and words in (r.cause or "") and never not in (r.cause or ""), r.report()


def test_megabytes_for_gigabytes_is_named_as_such() -> None:
    from labkit.check import lab08

    cause = lab08._algbw_cause(1000 * 123.0, 123.0, 215.0, 2**30, "all_reduce")
    assert cause is not None and "MB/s" in cause, cause


@pytest.mark.parametrize("exercise, answer", [
    ("01.dgx-a100-5pf", 3.3),
    ("01.dgx2-backplane", 1234.0),
    ("08.mig", {"per_gpu": 10, "memory_gb": 5}),
    ("08.nvls-busbw", {"ring_busbw": 617.0, "nvls_busbw": 700.0, "faster": "NVLS"}),
])
def test_wrong_figures_get_the_computation_not_check_the_units(exercise: str, answer: Any) -> None:
    from labkit.check import core

    r = _run(lambda a: core.run(exercise, a), answer)
    assert r.status == "failed" and r.cause and "check the units" not in r.cause, r.report()


# ------------------------------------------------------------------------------------------ claims backed by a case
def _pipeline_twice_the_chunks(cp: Any, x: Any, out: Any, kernel: Any, chunks: int, n_streams: int) -> float:
    chunks *= 2  # right values and overlap, but not the chunks the statement (and the model) use
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    start, end = cp.cuda.Event(), cp.cuda.Event()
    step = -(-x.size // chunks)
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_event(start)
    for c in range(chunks):
        lo, hi = c * step, min(x.size, (c + 1) * step)
        if lo >= hi:
            break
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


def test_05_streams_counts_the_chunks_its_pass_line_claims() -> None:
    r = _run(check.streams_pipeline, _pipeline_twice_the_chunks)
    assert r.status == "failed" and "kernel launches" in r.message, r.report()


@cuda.jit
def saxpy_steps_inside(a, x, y, steps):
    i = cuda.grid(1)
    if i < y.size:
        for _ in range(steps):
            y[i] = a * x[i] + y[i]


def test_02_transfers_counts_one_launch_per_step() -> None:
    def repeated_saxpy(a: Any, x: Any, y: Any, steps: int) -> Any:
        dx, dy = cuda.to_device(x), cuda.to_device(y)
        saxpy_steps_inside[-(-y.size // 128), 128](a, dx, dy, steps)
        return dy.copy_to_host()

    r = _run(check.transfers, repeated_saxpy)
    assert r.status == "failed" and "kernel launch(es) ran for" in r.message, r.report()


def test_05_l2norm_checks_fp64_in_the_float32_instantiation_of_t() -> None:
    from labkit.gpu.cupylab import reduction_kernel

    k = reduction_kernel("T x", "T y", "x * x * 0.1", "a + b", "y = sqrt(a * 10)", "0", "l2norm")  # 0.1: FP64 for T = float
    r = _run(check.l2norm, k)
    assert r.status == "failed" and "T = float32" in r.message and "T(0.5)" in (r.cause or ""), r.report()


def test_tf32_bits_converted_as_numbers_are_named() -> None:
    import numpy as np

    def astype_not_view(x: Any) -> Any:
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
        return u.astype(np.float32)  # the value of the bit pattern, not the bits

    r = _run(check.tf32_round, astype_not_view)
    assert r.status == "failed" and ".view(np.float32)" in (r.cause or ""), r.report()


def test_gemm_predict_names_c_counted_in_fp32() -> None:
    def c_in_fp32(m: int, n: int, k: int, precision: str, gpu: str) -> float:
        from labkit import hw

        g = hw.gpu(gpu)
        size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
        flops = 2 * m * n * k
        traffic = size * (m * k + k * n) + 4 * m * n  # C as FP32 whatever the inputs
        return flops / max(flops / (g.peak(precision).value * 1e12), traffic / (g.memory_bandwidth.value * 1e9)) / 1e12

    for _ in range(3):
        r = _run(check.gemm_predict, c_in_fp32)
        assert r.status == "failed" and "C counted as FP32" in (r.cause or ""), r.report()
