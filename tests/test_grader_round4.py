"""Round four of the grader (issue 34): each known cheat and shortcut of the classes the third independent set found
is rejected on every one of 20 runs, with its cause named.

Classes: 10.cluster graded on values in sim; host-function answers that change their inputs; answers that call
labkit's reference (or are what solved_or_reference handed out); a kernel thread doing the whole array's work; pass
lines that claim what was not tested (captures counted, FP64 in CUDA C++ bodies); draws that show the flaw every run
(16-bit indices past 65,536, FP16 tiles, a plan cache that ignores shared memory, byte counts past 2^31, float64
data that float32 cannot hold, host round trips, sqrtf on a double). The MPI deadlock case waits out the run's time limit
(for the test DEADLOCK_LIMIT_S), so it runs once (its size, past what MPI buffers, is fixed: the deadlock does not
depend on the draw).
Cost: about 4 minutes on one core.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Callable

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda, float32  # noqa: E402

from labkit import check  # noqa: E402
from labkit import collectives as co  # noqa: E402
from labkit import precision as P  # noqa: E402
from labkit import scaling  # noqa: E402

RUNS = 20


def _quiet(fn: Callable[..., Any], *args: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def rejected_every_time(check_fn: Callable[..., Any], answer: Any, words: str, runs: int = RUNS) -> None:
    for k in range(runs):
        r = _quiet(check_fn, answer)
        assert r.status == "failed", (k, r.status, r.message)
        text = r.message + " " + (r.cause or "")
        assert words in text, (k, words, r.message, r.cause)


# ------------------------------------------------------------------------------------------ host answers change inputs
def te_sorts_history(h: list, fmt: str, margin: int, prev: float) -> float:
    import math

    h.sort()
    amax = h[-1] if all(x == x for x in h) else math.nan  # a NaN anywhere: the step overflowed
    return prev if not math.isfinite(amax) or amax <= 0 else P.format_info(fmt).max_normal / amax / 2**margin


def mx_rounds_in_place(x: np.ndarray) -> np.ndarray:
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    x[...] = (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)
    return x


def promotion_rounds_a(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
    a[...] = P.round_to(a, "fp8_e4m3", on_range="ignore")
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], interval):
        c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited",
                    on_range="ignore").astype(np.float32)
    return c


def buckets_empties_sizes(sizes: list, cap: int) -> list:
    """DDP's rule, right, but it consumes the caller's list as it goes (sizes.pop(0))."""
    buckets, open_, held, k = [], [], 0, 0
    while sizes:
        s = sizes.pop(0)
        open_.append(k)
        held += s
        k += 1
        if held >= cap:
            buckets.append(open_)
            open_, held = [], 0
    if open_:
        buckets.append(open_)
    return buckets


@pytest.mark.parametrize("check_name, answer, words", [
    ("te_scale", te_sorts_history, "changed its input"),
    ("mx_quantize", mx_rounds_in_place, "changed its input `x`"),
    ("fp8_promotion", promotion_rounds_a, "changed its input `a`"),
    ("ddp_buckets", buckets_empties_sizes, "changed its input `sizes`"),
])
def test_host_answers_that_change_inputs_are_rejected(check_name: str, answer: Any, words: str) -> None:
    # promotion_rounds_a rounds every element of `a` to FP8 in place; the check draws `a` from uniform(0, 1) in
    # float64 (thousands of elements), where a value FP8 holds exactly has probability 0, and compares a copy with
    # what is left, element by element: no draw hides the change, so 3 runs (each of 3 fresh shapes) show what 20 do,
    # at 0.2 s a run
    runs = {"fp8_promotion": 3}.get(check_name, RUNS)
    rejected_every_time(getattr(check, check_name), answer, words, runs=runs)


# ------------------------------------------------------------------------------------------ answers that call labkit
def mx_calls_labkit(x: np.ndarray) -> np.ndarray:
    return scaling.quantize_blocks(x, "mxfp8_e4m3").values


def te_calls_labkit(h: list, fmt: str, margin: int, prev: float) -> float:
    return scaling.te_scale(h, fmt, margin=margin, previous=prev)


def promotion_calls_labkit(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
    return P.gemm(a, b, "fp8_e4m3", accumulate="limited", promote_every=interval, on_range="ignore")


def decode_calls_labkit(bits: str) -> float:
    return P.decode(bits, "fp16")


def buckets_call_labkit(sizes: list, cap: int) -> list:
    from labkit import ddp

    return ddp.make_buckets(sizes, cap)


def swallowed(x: np.ndarray) -> np.ndarray:  # catches everything, the trap included
    try:
        return scaling.quantize_blocks(x, "mxfp8_e4m3").values
    except BaseException:  # noqa: BLE001
        return x


@pytest.mark.parametrize("check_name, answer, words", [
    ("mx_quantize", mx_calls_labkit, "labkit.scaling.quantize_blocks"),
    ("mx_quantize", swallowed, "labkit.scaling.quantize_blocks"),
    ("te_scale", te_calls_labkit, "labkit.scaling.te_scale"),
    ("fp8_promotion", promotion_calls_labkit, "labkit.precision.gemm"),
    ("decode_fp16", decode_calls_labkit, "labkit.precision.decode"),
    ("ddp_buckets", buckets_call_labkit, "labkit.ddp.make_buckets"),
])
def test_answers_calling_the_reference_are_rejected_by_name(check_name: str, answer: Any, words: str) -> None:
    rejected_every_time(getattr(check, check_name), answer, words)


@pytest.mark.parametrize("exercise, check_name", [("06.te-scale", "te_scale"), ("06.mx-quantize", "mx_quantize"),
                                                  ("08.ddp-buckets", "ddp_buckets"), ("10.cluster", "cluster_sum")])
def test_what_solved_or_reference_handed_out_is_not_an_answer(exercise: str, check_name: str) -> None:
    from labkit.check import answers_guard

    handed = _quiet(check.solved_or_reference, exercise, None)
    try:
        rejected_every_time(getattr(check, check_name), handed, "labkit's own reference", runs=3)
    finally:  # other test files grade labkit's references directly: forget what was handed out here
        answers_guard._HANDED.clear()


def test_calling_solved_or_reference_inside_the_answer_is_rejected() -> None:
    def answer(bits: str) -> float:
        return check.solved_or_reference("06.decode-fp16", None)(bits)

    rejected_every_time(check.decode_fp16, answer, "solved_or_reference")


def test_offered_helpers_and_correct_answers_still_pass() -> None:
    def promoted(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:  # P.gemm without promote_every: allowed
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k0 in range(0, a.shape[1], interval):
            c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited",
                        on_range="ignore").astype(np.float32)
        return c

    def te(h: list, fmt: str, margin: int, prev: float) -> float:
        import math

        amax = float(np.max(h))  # NaN anywhere gives NaN (Python's max() skips one that is not first)
        return prev if not math.isfinite(amax) or amax <= 0 else P.format_info(fmt).max_normal / amax / 2**margin

    for _ in range(3):
        assert _quiet(check.fp8_promotion, promoted)
        assert _quiet(check.te_scale, te)


# ------------------------------------------------------------------------------------------ whole-array work in a thread
@cuda.jit
def full_sum_builtin(x, out):
    if cuda.grid(1) == 0:
        out[0] = sum(x)


@cuda.jit
def full_sum_serial(x, out):
    if cuda.grid(1) == 0:
        s = float32(0.0)
        for j in range(x.size):
            s += x[j]
        cuda.atomic.add(out, 0, s)


@pytest.mark.parametrize("kernel", [full_sum_builtin, full_sum_serial])
def test_one_thread_doing_the_whole_array_is_rejected(kernel: Any) -> None:
    rejected_every_time(check.full_sum, kernel, "one thread did the whole array's work")


# ------------------------------------------------------------------------------------------ pass lines that are true
def graph_per_frame(cp: Any, frames: list, x: np.ndarray, y: np.ndarray, kernel: Any) -> list:
    stream = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    res = []
    for f in frames:
        x[...] = f
        with stream:
            stream.begin_capture()
            d_in.set(x)
            kernel(d_in, d_out)
            d_out.get(out=y, blocking=False)
            g = stream.end_capture()
        g.launch(stream)
        stream.synchronize()
        res.append(y.copy())
    return res


def test_a_capture_per_frame_is_rejected() -> None:
    rejected_every_time(check.graph_pipeline, graph_per_frame, "graphs were captured")


def test_fp64_in_a_float32_cuda_cpp_body_is_rejected() -> None:
    from labkit.cupylab import elementwise_kernel

    k = elementwise_kernel("float32 x, float32 y, float32 delta", "float32 z",
                           "double d = fabs((double)x - y); z = d <= delta ? 0.5 * d * d : delta * (d - 0.5 * delta)",
                           "huber")
    rejected_every_time(check.huber, k, "FP64 instruction")


#: The run's time limit in the deadlock test: what a correct ring takes on 8 ranks here is under 2 s once every rank
#: has started (3 s with the start, measured on the shared 2-core machine), so 8 s tells a deadlock from a slow run
#: while the test waits 8 s, not the course's 20 s (labkit.dist.ranks.DEFAULT_LIMIT_S), for the deadlock it expects.
DEADLOCK_LIMIT_S = 8.0


def test_blocking_send_recv_deadlocks_in_the_large_case(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import ranks

    if not ranks.available()[0]:
        pytest.skip("MPI is not available here")
    assert ranks.DEFAULT_LIMIT_S > DEADLOCK_LIMIT_S  # the learner's limit is not what this test shortens it to
    monkeypatch.setattr(ranks, "DEFAULT_LIMIT_S", DEADLOCK_LIMIT_S)

    def blocking(comm, buf):  # noqa: ANN001, ANN202 - runs in the rank processes
        import numpy as np

        r, n = comm.Get_rank(), comm.Get_size()
        chunks = np.array_split(buf, n)
        tmp = np.empty_like(chunks[0])
        for s in range(n - 1):
            send, recv = (r - s) % n, (r - s - 1) % n
            comm.Send(chunks[send], dest=(r + 1) % n)
            t = tmp[:chunks[recv].size]
            comm.Recv(t, source=(r - 1) % n)
            chunks[recv] += t
        for s in range(n - 1):
            send, recv = (r + 1 - s) % n, (r - s) % n
            comm.Send(chunks[send], dest=(r + 1) % n)
            comm.Recv(chunks[recv], source=(r - 1) % n)
        return buf

    rejected_every_time(check.mpi_ring, blocking, "blocking Send", runs=1)


# ------------------------------------------------------------------------------------------ draws that show the flaw
def test_unsigned_16_bit_index_is_rejected() -> None:
    from labkit.check import lab05

    src = lab05._leaky_reference().replace("int i = blockIdx.x * blockDim.x + threadIdx.x",
                                           "unsigned short i = blockIdx.x * blockDim.x + threadIdx.x")
    rejected_every_time(check.leaky_relu, src, "65,536")


def _mm16():
    from numba.core.types import float16

    T = 16

    @cuda.jit
    def mm16(A, B, C):
        sa = cuda.shared.array((T, T), float16)
        sb = cuda.shared.array((T, T), float16)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * T + ty, cuda.blockIdx.x * T + tx
        acc = float32(0.0)
        for t in range((A.shape[1] + T - 1) // T):
            k = t * T + tx
            sa[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0
            k = t * T + ty
            sb[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0
            cuda.syncthreads()
            for kk in range(T):
                acc += float32(sa[ty, kk]) * float32(sb[kk, tx])
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return mm16


def test_fp16_tiles_are_rejected() -> None:
    rejected_every_time(check.matmul, _mm16(), "FP16")


def test_a_plan_cache_that_ignores_shared_memory_is_rejected() -> None:
    from labkit.check import core

    ref = core._get("03.occupancy").reference()
    for k in range(RUNS):
        cache: dict = {}

        def cached(arch: str, target: float, shared: int) -> Any:
            if (arch, target) not in cache:
                cache[(arch, target)] = ref(arch, target, shared)
            return cache[(arch, target)]

        r = _quiet(check.launch_plan, cached)
        assert r.status == "failed" and "shared memory per block" in r.message + (r.cause or ""), (k, r.message)


def _wrap32(v: int) -> int:
    return int(np.array([v]).astype(np.int32)[0])


@pytest.mark.parametrize("check_name, answer", [
    ("hbm_copy_time", lambda nbytes, peak: 2 * _wrap32(nbytes) / (peak * 1e9)),
    ("allreduce_ring_bytes", lambda nbytes, n: 2 * (n - 1) * _wrap32(nbytes) / n),
    ("nccl_tests_bandwidth", lambda s, t, c, n: (_wrap32(s) / (t * 1e-6) / 1e9,
                                                 _wrap32(s) / (t * 1e-6) / 1e9 * labkit.bandwidth.busbw_factor(c, n))),
])
def test_int32_byte_counts_are_rejected(check_name: str, answer: Any) -> None:
    rejected_every_time(getattr(check, check_name), answer, "2^31")


def test_a_ring_step_through_float32_is_rejected() -> None:
    def step32(chunks: list, phase: str, step: int) -> None:
        sends = co.ring_schedule(len(chunks), phase, step)
        data = [chunks[src][c].astype(np.float32) for src, _, c in sends]
        for (src, dst, c), d in zip(sends, data):
            if phase == co.RS:
                chunks[dst][c] += d
            else:
                chunks[dst][c][...] = d

    rejected_every_time(check.ring_step, step32, "through float32")


def test_a_softmax_through_the_host_is_rejected() -> None:
    from labkit import cupylab

    def host_softmax(x: Any) -> Any:
        xp = cupylab.array_module(x)
        h = cupylab.asnumpy(x)
        e = np.exp(h - h.max(axis=-1, keepdims=True))
        return xp.asarray(e / e.sum(axis=-1, keepdims=True))

    rejected_every_time(check.softmax, host_softmax, "asnumpy")


def test_sqrtf_of_a_double_is_rejected() -> None:
    from labkit.cupylab import reduction_kernel

    k = reduction_kernel("T x", "T y", "x * x", "a + b", "y = sqrtf(a)", "0", "l2norm")
    rejected_every_time(check.l2norm, k, "float32 precision only")


# ------------------------------------------------------------------------------------------ causes from the code
def test_a_loop_that_never_runs_is_not_an_empty_kernel() -> None:
    @cuda.jit
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        for j in range(i + x.size, x.size, cuda.gridsize(1)):
            out[j] = a * x[j] + y[j]

    rejected_every_time(check.saxpy, saxpy, "never reached", runs=3)


# ------------------------------------------------------------------------------------------ 10.cluster on values
def _cluster_flaws() -> dict[str, tuple[str, str]]:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_lab10_cases", Path(__file__).with_name("test_check_lab10_clusters.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.VALUE_FLAWS


@pytest.mark.toolchain
@pytest.mark.parametrize("name", ["wrong output slot", "hard-coded cluster size", "the same peer every time",
                                  "both barriers inside the rank-0 branch"])
def test_cluster_flaws_rejected_every_run(name: str) -> None:
    source, words = _cluster_flaws()[name]
    rejected_every_time(check.cluster_sum, source, words)


def test_a_float64_total_is_rejected_where_fp32_is_asked() -> None:
    def promoted64(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
        c = np.zeros((a.shape[0], b.shape[1]))
        for k0 in range(0, a.shape[1], interval):
            c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited",
                        on_range="ignore")
        return c

    rejected_every_time(check.fp8_promotion, promoted64, "FP32 total")
