"""Lab 05 checks accept correct answers and reject wrong ones in sim mode (CPU stand-in on and off)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["LABKIT_MODE"] = "sim"
os.environ.pop("LABKIT_EXPECT", None)

import labkit  # noqa: E402
from labkit import check, cupylab, cuda_cpp, kernels_cuda  # noqa: E402

labkit.setup(quiet=True)

HOST = cuda_cpp.host_compiler() is not None
needs_host = pytest.mark.skipif(not HOST, reason="no C++ compiler for the CPU stand-in")

LEAKY_HEAD = 'extern "C" __global__ void leaky_relu(const float* x, float* y, float alpha, int n) {\n'


@pytest.fixture(params=["host", "static"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the CPU stand-in (when a compiler exists) and without it (static PTX checks only)."""
    if request.param == "host":
        if not HOST:
            pytest.skip("no C++ compiler")
    else:
        monkeypatch.setenv("LABKIT_HOST_CXX", "none")
    return request.param


# ----------------------------------------------------------------------------------------- softmax
def test_softmax_reference_passes() -> None:
    assert check.softmax(check.core._get("05.softmax").reference())


def test_softmax_skeletons_are_unsolved() -> None:
    def sk(x):
        raise NotImplementedError

    assert check.softmax(...).status == "unsolved"
    assert check.softmax(sk).status == "unsolved"


def test_softmax_rejects_unstable_and_wrong_axis() -> None:
    def naive(x):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True)

    def wrong_axis(x):
        z = x - x.max(axis=0, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=0, keepdims=True)

    def no_keepdims(x):
        return np.exp(x) / np.exp(x).sum(axis=-1)

    def upcast(x):
        z = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
        return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)

    r = check.softmax(naive)
    assert r.status == "failed" and "maximum" in r.cause
    assert check.softmax(wrong_axis).status == "failed"
    assert check.softmax(no_keepdims).status == "failed"
    assert check.softmax(upcast).status == "failed"


def test_softmax_rejects_one_global_maximum() -> None:
    def global_max(x):  # right for rows of similar scale; rows 1000x smaller underflow to 0 / 0
        e = np.exp(x - x.max())
        return e / e.sum(axis=-1, keepdims=True)

    def whole_sum(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum()

    with np.errstate(all="ignore"):
        for _ in range(3):  # fresh inputs each run: it fails every time
            r = check.softmax(global_max)
            assert r.status == "failed" and "each row's maximum" in r.cause
    r = check.softmax(whole_sum)
    assert r.status == "failed" and "sums to 1" in r.cause


def test_softmax_correct_but_different_pass() -> None:
    def log_sum_exp(x):
        m = x.max(axis=-1, keepdims=True)
        lse = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
        return np.exp(x - lse)

    def transposed_max(x):  # the maximum along the last axis, written with swapaxes
        m = np.swapaxes(np.swapaxes(x, -1, 0).max(axis=0, keepdims=True), -1, 0)
        e = np.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)

    assert check.softmax(log_sum_exp)
    assert check.softmax(transposed_max)


def test_softmax_inputs_mix_scales_by_orders_of_magnitude() -> None:
    x = check.lab05._softmax_input((5, 20), np.float32, None)
    spread = np.abs(x).max(axis=-1)
    assert spread.max() / spread.min() > 1e4


# ----------------------------------------------------------------------------------------- fusion traffic
def test_fusion_traffic_model_numbers() -> None:
    t = cupylab.traffic(check.lab05.scaled_squared_error, 1 << 20, "float32", scalars=("w", "b"))
    assert (t.launches_unfused, t.bytes_unfused, t.bytes_fused) == (5, 13 * 4 * (1 << 20), 3 * 4 * (1 << 20))


def test_fusion_traffic_accepts_and_rejects() -> None:
    n = 1 << 20
    good = {"launches_unfused": 5, "bytes_unfused": 13 * 4 * n, "launches_fused": 1, "bytes_fused": 3 * 4 * n}
    assert check.fusion_traffic(good)
    assert check.fusion_traffic({k: ... for k in good}).status == "unsolved"
    assert check.fusion_traffic({**good, "launches_unfused": 4}).status == "failed"  # forgot x - y twice
    assert check.fusion_traffic({**good, "bytes_unfused": 15 * 4 * n}).status == "failed"  # counted scalars
    assert check.fusion_traffic({**good, "bytes_fused": 2 * 4 * n}).status == "failed"
    assert check.fusion_traffic({"launches_unfused": 5}).status == "failed"
    assert check.fusion_traffic([1, 2]).status == "failed"
    r = check.fusion_traffic({**good, "launches_fused": "1"})
    assert r.status == "failed" and "should be a number, got str" in r.message


# wrong answers a tired learner writes, with a word of the cause each gets; exact counts: any other number fails
FUSION_WRONG = [("launches_unfused", 4, "twice"), ("launches_unfused", 3, "scalar"), ("bytes_unfused", 13 * (1 << 20), "4 bytes"),
                ("bytes_unfused", 13 * 4 * 8 * (1 << 20), "bits"), ("bytes_unfused", 10 * 4 * (1 << 20), "twice"),
                ("bytes_unfused", 15 * 4 * (1 << 20), "scalar"), ("launches_fused", 5, "one kernel"),
                ("bytes_fused", 5 * 4 * (1 << 20), "once each"), ("bytes_fused", 13 * 4 * (1 << 20), "unfused"),
                ("bytes_fused", 3 * (1 << 20), "4 bytes")]


@pytest.mark.parametrize("key, value, word", FUSION_WRONG)
def test_fusion_traffic_names_each_slip(key, value, word) -> None:
    n = 1 << 20
    good = {"launches_unfused": 5, "bytes_unfused": 13 * 4 * n, "launches_fused": 1, "bytes_fused": 3 * 4 * n}
    r = check.fusion_traffic({**good, key: value})
    assert r.status == "failed" and word in r.cause, r.cause
    assert check.fusion_traffic({**good, key: np.int64(good[key])})  # NumPy integers are numbers too


# ----------------------------------------------------------------------------------------- huber (ElementwiseKernel)
HUBER_IN, HUBER_OUT = "float32 x, float32 y, float32 delta", "float32 z"


@pytest.mark.toolchain
def test_huber_reference_passes(mode: str) -> None:
    r = check.huber(check.core._get("05.huber").reference())
    assert r
    assert ("values are right" in r.message) == (mode == "host")
    if mode == "static":
        assert "GPU run" in r.message


@pytest.mark.toolchain
def test_huber_rejects_non_compiling(mode: str) -> None:
    k = cupylab.elementwise_kernel(HUBER_IN, HUBER_OUT, "z = fabsf(x - y) <= delta ? 0.5f * d * d : 0", "huber")
    r = check.huber(k)
    assert r.status == "failed" and "does not compile" in r.message


def test_huber_rejects_wrong_arity() -> None:
    k = cupylab.elementwise_kernel("float32 x, float32 y", HUBER_OUT, "z = x - y", "huber")
    assert check.huber(k).status == "failed"


@needs_host
def test_huber_rejects_wrong_values_on_host() -> None:
    k = cupylab.elementwise_kernel(HUBER_IN, HUBER_OUT, "float d = fabsf(x - y); z = d < delta ? d * d : delta * d", "huber")
    assert check.huber(k).status == "failed"


def test_huber_skeleton_unsolved() -> None:
    assert check.huber(...).status == "unsolved"
    assert check.huber("z = x").status == "failed"


# ----------------------------------------------------------------------------------------- l2norm (ReductionKernel)
@pytest.mark.toolchain
def test_l2norm_reference_passes(mode: str) -> None:
    assert check.l2norm(check.core._get("05.l2norm").reference())


@needs_host
@pytest.mark.parametrize("parts", [
    ("x * x", "a + b", "y = sqrt(a)", "1"),       # wrong identity
    ("x", "a + b", "y = sqrt(a)", "0"),           # no square
    ("x * x", "a + b", "y = a", "0"),             # no square root
    ("x * x", "a * b", "y = sqrt(a)", "0"),       # wrong reduction
])
def test_l2norm_rejects_wrong(parts: tuple[str, str, str, str]) -> None:
    k = cupylab.reduction_kernel("T x", "T y", *parts, "l2norm")
    assert check.l2norm(k).status == "failed"


@needs_host
@pytest.mark.parametrize("parts, shows, hides", [
    (("x * x", "a + b", "y = a", "0"), "missing sqrt", "wrong identity"),
    (("x * x", "a + b", "y = sqrt(a)", "1"), "wrong identity", "missing sqrt"),
    (("x * x", "a + b", "y = sqrt(a)", "0.5f"), "wrong identity", "missing sqrt"),
    (("x * x", "a + b", "y = a", "1"), "wrong identity", "not its root"),
    (("x", "a + b", "y = sqrt(a)", "0"), "map", "identity"),
    (("x * x", "max(a, b)", "y = sqrt(a)", "0"), "reduce", "identity"),
])
def test_l2norm_cause_names_the_mistake_it_shows(parts: tuple[str, str, str, str], shows: str, hides: str) -> None:
    r = check.l2norm(cupylab.reduction_kernel("T x", "T y", *parts, "l2norm"))
    assert r.status == "failed"
    assert shows in r.cause and hides not in r.cause, r.cause


def test_l2norm_cause_from_values_alone() -> None:
    """The cause logic on made-up results: got = expected² is a missing sqrt; a nonzero norm of zeros, the identity."""
    from labkit.check.lab05 import _l2norm_cause

    want = [0.5, 3.0, 12.0]
    assert "missing sqrt" in _l2norm_cause([(n, w * w, w) for n, w in zip((1, 100, 1000), want)], 0.0)
    assert "wrong identity" in _l2norm_cause([(n, (w * w + 5) ** 0.5, w) for n, w in zip((1, 100, 1000), want)], 5 ** 0.5)
    generic = _l2norm_cause([(n, 2 * w, w) for n, w in zip((1, 100, 1000), want)], 0.0)
    assert "sqrt" not in generic.split("(")[0] and "identity" not in generic


@pytest.mark.toolchain
def test_l2norm_rejects_non_compiling(mode: str) -> None:
    k = cupylab.reduction_kernel("T x", "T y", "x * x", "a +", "y = sqrt(a)", "0", "l2norm")
    assert check.l2norm(k).status == "failed"


# ----------------------------------------------------------------------------------------- leaky_relu (RawKernel)
@pytest.mark.toolchain
def test_leaky_relu_reference_and_variants_pass(mode: str) -> None:
    assert check.leaky_relu(kernels_cuda.LEAKY_RELU)
    grid_stride = LEAKY_HEAD + """
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            y[i] = fmaxf(x[i], 0.0f) + alpha * fminf(x[i], 0.0f);
    }"""
    early_return = LEAKY_HEAD + """
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        y[i] = x[i] > 0 ? x[i] : alpha * x[i];
    }"""
    assert check.leaky_relu(grid_stride)
    assert check.leaky_relu(early_return)


def test_leaky_relu_skeleton_unsolved(mode: str) -> None:
    assert check.leaky_relu(LEAKY_HEAD + "    // your code here\n}").status == "unsolved"
    assert check.leaky_relu(...).status == "unsolved"


@pytest.mark.toolchain
def test_leaky_relu_rejects_compile_error(mode: str) -> None:
    r = check.leaky_relu(LEAKY_HEAD + "  int i = blockIdx.x * blockDim.x + threadIdx.x\n  if (i < n) y[i] = x[i];\n}")
    assert r.status == "failed" and "does not compile" in r.message and "line" in r.message


@pytest.mark.toolchain
def test_leaky_relu_rejects_missing_extern_c(mode: str) -> None:
    src = kernels_cuda.LEAKY_RELU.replace('extern "C"', "")
    r = check.leaky_relu(src)
    assert r.status == "failed" and "extern" in (r.message + (r.cause or ""))


@pytest.mark.toolchain
def test_leaky_relu_rejects_missing_bounds_check(mode: str) -> None:
    src = LEAKY_HEAD + "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] = x[i] > 0 ? x[i] : alpha * x[i];\n}"
    r = check.leaky_relu(src)
    assert r.status == "failed" and "bounds" in r.cause


@pytest.mark.toolchain
def test_leaky_relu_rejects_wrong_signature(mode: str) -> None:
    src = kernels_cuda.LEAKY_RELU.replace("float alpha, int n", "double alpha, int n")
    assert check.leaky_relu(src).status == "failed"
    src = kernels_cuda.LEAKY_RELU.replace("float alpha, int n", "int n")
    assert check.leaky_relu(src).status == "failed"


@needs_host
def test_leaky_relu_host_catches_off_by_one_and_wrong_formula() -> None:
    off_by_one = kernels_cuda.LEAKY_RELU.replace("i < n", "i <= n")
    r = check.leaky_relu(off_by_one)
    assert r.status == "failed" and "outside" in r.message
    wrong = kernels_cuda.LEAKY_RELU.replace("alpha * v", "alpha")
    assert check.leaky_relu(wrong).status == "failed"
    partial = kernels_cuda.LEAKY_RELU.replace("if (i < n)", "if (i < n / 2)")
    assert check.leaky_relu(partial).status == "failed"


COMMENTED_LEAKY = """#include <cuda_fp16.h>   // unused here; an include must not switch the CPU stand-in off
// No __syncthreads(), no __shared__, no wmma::mma_sync and no __shfl_sync in this kernel; see also #include <mma.h>.
__device__ __forceinline__ float leak(float v, float alpha) { return fmaxf(v, alpha * v); }  /* alpha < 1 */
extern "C" __global__ void leaky_relu(const float* __restrict__ x, float* __restrict__ y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = leak(__ldg(&x[i]), alpha);  // "asm" and "extern __shared__" only in this comment
}
"""


@needs_host
def test_leaky_relu_words_in_comments_do_not_switch_off_the_values_check() -> None:
    r = check.leaky_relu(COMMENTED_LEAKY)
    assert r and "CPU stand-in" in r.message and "did not run" not in r.message
    r = check.leaky_relu(COMMENTED_LEAKY.replace("i < n", "i <= n"))
    assert r.status == "failed" and "outside" in r.message
    r = check.leaky_relu(COMMENTED_LEAKY.replace("fmaxf(v, alpha * v)", "fminf(v, alpha * v)"))
    assert r.status == "failed" and "outside" not in r.message


@needs_host
@pytest.mark.parametrize("body, right", [
    ("y[i] = x[i] > 0.0f ? x[i] : __fmul_rn(alpha, x[i]);", True),
    ("y[i] = fmaxf(x[i], 0.0f) + alpha * fminf(x[i], 0.0f);", True),
    ("y[i] = __half2float(__float2half(x[i] > 0.0f ? x[i] : alpha * x[i]));", False),  # FP16 rounding: wrong values
    ("y[i] = x[i] * (x[i] > 0.0f ? 1.0f : alpha) + 0.0f * rsqrtf(fabsf(x[i]) + 1.0f) * __expf(-fabsf(x[i]));", True),
    ("y[i] = max(x[i], 0.0f) + alpha * min(x[i], 0.0f);", True),
])
def test_leaky_relu_intrinsics_are_checked_by_their_numbers(body: str, right: bool) -> None:
    src = "#include <cuda_fp16.h>\n" + LEAKY_HEAD + "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {" + body + "}\n}"
    r = check.leaky_relu(src)
    assert (r.status == "passed") == right, (body, r.message)
    if right:
        assert "CPU stand-in" in r.message and "did not run" not in r.message


def test_leaky_relu_static_cannot_see_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Honest limit: without the CPU stand-in, `i <= n` passes the static checks (a GPU run catches it)."""
    monkeypatch.setenv("LABKIT_HOST_CXX", "none")
    r = check.leaky_relu(kernels_cuda.LEAKY_RELU.replace("i < n", "i <= n"))
    assert r.passed and "GPU run will check" in r.message


# ----------------------------------------------------------------------------------------- pipeline
def test_pipeline_accepts_reference_and_rejects_wrong() -> None:
    assert check.pipeline_time(check.core._get("05.pipeline").reference())

    def naive(t_in, t_kernel, t_out, chunks):
        return (t_in + t_kernel + t_out) / chunks

    def serial(t_in, t_kernel, t_out, chunks):
        return t_in + t_kernel + t_out

    def sk(*a):
        raise NotImplementedError

    r = check.pipeline_time(naive)
    assert r.status == "failed" and "first chunk" in r.cause
    assert check.pipeline_time(serial).status == "failed"
    assert check.pipeline_time(sk).status == "unsolved"

    def slowest_only(t_in, t_kernel, t_out, chunks):
        return max(t_in, t_kernel, t_out)

    def copies_only(t_in, t_kernel, t_out, chunks):  # forgets that the kernel can be the slowest stage
        return (t_in + t_kernel + t_out) / chunks + (chunks - 1) * max(t_in, t_out) / chunks

    def as_string(t_in, t_kernel, t_out, chunks):
        return str(by_stages(t_in, t_kernel, t_out, chunks))

    def by_stages(t_in, t_kernel, t_out, chunks):  # correct, written as a timeline of the last chunk
        step = max(t_in, t_kernel, t_out) / chunks
        return t_in / chunks + t_kernel / chunks + t_out / chunks + step * (chunks - 1)

    r = check.pipeline_time(slowest_only)
    assert r.status == "failed" and "slowest stage alone" in r.cause
    assert check.pipeline_time(copies_only).status == "failed"
    r = check.pipeline_time(as_string)
    assert r.status == "failed" and "should be a number, got str" in r.message
    assert check.pipeline_time(by_stages)


def test_every_lab05_exercise_registered_with_hints() -> None:
    ids = [row[0] for row in check.exercises("05.")]
    assert len(ids) >= 5
    for ex_id in ids:
        assert len(check.core._get(ex_id).hints) == 3


# ------------------------------------------------------------------------------------------- 05.streams
def _pipeline(*, blocking=False, streams_kw=None, end_waits=True, sync=True, chunk=None, shared=False, start_late=False,
              seconds=False, null_work=False, start_waits=True):
    """A family of pipeline(cp, x, out, kernel, chunks, n_streams) answers: the defaults give the correct one."""

    def pipeline(cp, x, out, kernel, chunks, n_streams):
        kw = {"non_blocking": True} if streams_kw is None else streams_kw
        streams = [cp.cuda.Stream(**kw) for _ in range(n_streams)]
        start, end = cp.cuda.Event(), cp.cuda.Event()
        step = chunk(x.size, chunks) if chunk else -(-x.size // chunks)
        if not start_late:
            start.record(streams[0])
            for s in streams[1:] if start_waits else []:
                s.wait_event(start)
        d_all = cp.empty(x.size, x.dtype) if shared else None
        d_tmp = cp.empty(step, x.dtype) if shared else None
        for c in range(chunks):
            lo, hi = c * step, min(x.size, (c + 1) * step)
            if lo >= hi:
                break
            s = cp.cuda.Stream.null if null_work else streams[c % n_streams]
            with s:
                d_in = d_all[lo:hi] if shared else cp.empty(hi - lo, x.dtype)
                d_out = d_tmp[:hi - lo] if shared else cp.empty(hi - lo, x.dtype)
                d_in.set(x[lo:hi])
                kernel(d_in, d_out)
                d_out.get(out=out[lo:hi], blocking=blocking)
            if start_late and c == 0:
                start.record(streams[0])
        if end_waits:
            for s in streams[1:]:
                streams[0].wait_event(s.record())
        end.record(streams[0])
        if sync:
            end.synchronize()
        ms = cp.cuda.get_elapsed_time(start, end)
        return ms / 1e3 if seconds else ms

    return pipeline


def test_streams_accepts_the_reference_and_variants() -> None:
    from labkit.check import core, lab05

    assert lab05.streams_pipeline(core._REGISTRY["05.streams"].reference())
    assert lab05.streams_pipeline(_pipeline())
    assert lab05.streams_pipeline(_pipeline(chunk=lambda n, c: (n + c - 1) // c))


@pytest.mark.parametrize(("answer", "needle"), [
    (_pipeline(blocking=True), "blocks the host"),
    (_pipeline(end_waits=False), "end event does not wait"),
    (_pipeline(sync=False), "has not completed"),
    (_pipeline(shared=True), "no order between them"),
    (_pipeline(chunk=lambda n, c: n // c), "never copied back"),
    (_pipeline(start_late=True), "start event was recorded after"),
    (_pipeline(seconds=True), "milliseconds"),
    (_pipeline(null_work=True), "stream"),
    (_pipeline(start_waits=False), "never waited for it"),  # start on streams[0] only: the other streams may run first
    # blocking streams overlap while the null stream is idle, but the statement asks for non_blocking=True: the
    # message says why (issue 44)
    (_pipeline(streams_kw={}), "blocking stream"),
])
def test_streams_rejects_wrong_pipelines(answer, needle, capsys) -> None:
    result = check.streams_pipeline(answer)
    assert not result and result.status == "failed"
    assert needle in result.message + (result.cause or ""), result.report()


def test_streams_wrong_calls_get_messages() -> None:
    assert check.streams_pipeline(42).status == "failed"
    assert check.streams_pipeline(lambda cp: None).status == "failed"  # wrong argument count: a message

    def skeleton(cp, x, out, kernel, chunks, n_streams):
        raise NotImplementedError

    assert check.streams_pipeline(skeleton).status == "unsolved"
    assert check.streams_pipeline(lambda cp, x, out, k, c, s: None).status == "unsolved"
