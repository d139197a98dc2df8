"""Wrong answers for every exercise of labs 05, 06, 07 and 09, each with the likely cause the check must name
(issue 18, item 5): at least three per exercise. A cause is a phrase that only the right diagnosis contains; the
table's share of right causes is printed by ``test_share_of_right_causes`` (it must be all of them)."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

os.environ.pop("LABKIT_EXPECT", None)

import labkit  # noqa: E402

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="graded by the simulator and the stand-ins here")

from numba import cuda  # noqa: E402

from labkit import check, cuda_cpp, cupylab, hw, kernels_cuda, topology  # noqa: E402
def pcie_peak(generation: int, lanes: int = 16) -> float:
    """A learner's own PCIe figure, from labkit.hw (calling labkit.bandwidth.pcie_peak, the check's reference, is
    rejected as such)."""
    from labkit import hw

    return hw.link(f"PCIe {generation}").per_link.value * lanes / 16
from labkit.check import lab05, lab06, lab09  # noqa: E402
from labkit.tensorcores import WMMA_SOURCE  # noqa: E402

HOST = cuda_cpp.host_compiler() is not None


# ============================================================================= 05
def _softmax(kind: str) -> Callable[[Any], Any]:
    def softmax(x):
        if kind == "no-max":
            e = np.exp(x)
            return e / e.sum(axis=-1, keepdims=True)
        if kind == "global-max":
            e = np.exp(x - x.max())
            return e / e.sum(axis=-1, keepdims=True)
        if kind == "whole-sum":
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum()
        x -= x.max(axis=-1, keepdims=True)  # in place
        np.exp(x, out=x)
        return x / x.sum(axis=-1, keepdims=True)
    return softmax


def _fusion(**wrong: float) -> dict[str, float]:
    answer = {k: getattr(lab05._traffic(), k) for k in lab05._FUSION_KEYS}
    answer.update(wrong)
    return answer


def _huber(op: str) -> Any:
    return cupylab.elementwise_kernel("float32 x, float32 y, float32 delta", "float32 z", op, "huber")


def _l2(m: str, r: str, post: str, ident: str) -> Any:
    return cupylab.reduction_kernel("float32 x", "float32 y", m, r, post, ident, "l2norm")


LEAKY = kernels_cuda.LEAKY_RELU


def _pipe(expr: Callable[[float, float, float, int], float]) -> Callable[..., float]:
    return lambda t_in, t_k, t_out, c: expr(t_in, t_k, t_out, c)


def _streams(**kw: Any) -> Callable[..., float]:
    def pipeline(cp, x, out, kernel, chunks, n_streams):
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
        start, end = cp.cuda.Event(), cp.cuda.Event()
        step = -(-x.size // chunks)
        start.record(streams[0])
        for s in streams[1:]:
            s.wait_event(start)
        for c in range(chunks):
            lo, hi = c * step, min(x.size, (c + 1) * step)
            with streams[c % n_streams]:
                d_in, d_out = cp.empty(hi - lo, x.dtype), cp.empty(hi - lo, x.dtype)
                d_in.set(x[lo:hi].copy() if kw.get("pageable") else x[lo:hi])
                kernel(d_in, d_out)
                d_out.get(out=x[lo:hi] if kw.get("into_x") else out[lo:hi], blocking=kw.get("blocking", False))
        if not kw.get("no_end_wait"):
            for s in streams[1:]:
                streams[0].wait_event(s.record())
        end.record(streams[0])
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)
    return pipeline


# ============================================================================= 06
def _decode(kind: str) -> Callable[[str], float]:
    def decode(b):
        s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
        sign = -1.0 if s else 1.0
        if kind == "int-sign":
            sign = (-1) ** s
        if e == 31 and kind != "no-special":
            return float("nan") if m else sign * float("inf")
        if e == 0 and kind == "int-sign":
            return (-1) ** s * m * 2.0 ** -24  # (-1)**s * m is the integer 0 for a zero: no sign left
        if e == 0 and kind not in ("no-subnormal",):
            return sign * (m / 1024) * 2.0 ** -14
        return sign * (1 + m / 1024) * 2.0 ** (e - 15)
    return decode


def _ranges(fp16: list[str], bf16: list[str]) -> dict[str, list[str]]:
    return {"fp16": fp16, "bf16": bf16}


RIGHT_FP16 = ["overflow", "subnormal", "underflow", "overflow", "underflow", "normal"]
RIGHT_BF16 = ["normal", "normal", "normal", "overflow", "subnormal", "normal"]


def _tf32(kind: str) -> Callable[[np.ndarray], np.ndarray]:
    def rnd(x):
        u = x.view(np.uint32).astype(np.uint64)
        if kind == "truncate":
            return (u & 0xFFFFE000).astype(np.uint32).view(np.float32)
        if kind == "ties-up":
            r = (u + 0x1000) & 0xFFFFE000
        else:
            r = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
        out = (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        return out if kind == "no-nan" else np.where(np.isnan(x), x, out)
    return rnd


def _loss(kind: str) -> Callable[..., tuple[float, int, bool]]:
    def update(scale, found_inf, good_steps, growth_interval):
        if found_inf:
            if kind == "apply-on-inf":
                return scale / 2, 0, True
            if kind == "keep-count":
                return scale / 2, good_steps, False
            return scale / 2, 0, False
        good_steps += 1
        if kind == "strict" and good_steps > growth_interval or kind != "strict" and good_steps >= growth_interval:
            return scale * 2, 0, True
        return scale, good_steps, True
    return update


def _fma(slip: str) -> float:
    return lab06._v100_fma_slips()[slip]


def _gemm(kind: str) -> Callable[..., float]:
    def predict(m, n, k, precision, gpu):
        g = hw.gpu(gpu)
        size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
        flops = 2 * m * n * k
        traffic = size * (m * k + k * n + m * n)
        if kind == "peak":
            return g.peak(precision).value
        if kind == "elements":
            traffic = m * k + k * n + m * n
        if kind == "inputs-only":
            traffic = size * (m * k + k * n)
        seconds = max(flops / (g.peak(precision).value * 1e12), traffic / (g.memory_bandwidth.value * 1e9))
        return flops / seconds / 1e12
    return predict


# ============================================================================= 07
def _dgx1(factor: float = 1.0, *, fill_none: float | None = None) -> list[list[float]]:
    t = topology.load("DGX-1 (V100)")
    rows = [[0.0 if i == j else t.peer_bandwidth(i, j) * factor for j in t.gpus()] for i in t.gpus()]
    if fill_none is not None:
        rows = [[fill_none if (i != j and v == 0) else v for j, v in enumerate(r)] for i, r in enumerate(rows)]
    return rows


def _timing(**kw: Any) -> Callable[..., dict[str, float]]:
    def time_copies(cp, host, repeat):
        stream = cp.cuda.Stream(non_blocking=True)
        a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
        src = host.copy() if kw.get("pageable") else host
        start, end = cp.cuda.Event(), cp.cuda.Event()
        out = {}
        for key, copy, factor in (("h2d", lambda: a.set(src), 1), ("d2d_read_write", lambda: b.__setitem__(Ellipsis, a), 2)):
            with stream:
                copy()
                start.record()
                for _ in range(repeat):
                    copy()
                end.record()
                end.synchronize()
            if key == "d2d_read_write" and kw.get("once"):
                factor = 1
            gbps = factor * repeat * host.nbytes / (cp.cuda.get_elapsed_time(start, end) * 1e-3) / 1e9
            out[key] = gbps * kw.get("scale", 1.0)
        return out
    return time_copies


# ============================================================================= 09 (Numba kernels)
@cuda.jit
def fused_no_abs(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if d > thresh else 0
        bg[row, col] = b + alpha * d


@cuda.jit
def fused_int_thresh(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) > int(thresh) else 0
        bg[row, col] = b + alpha * d


@cuda.jit
def fused_255(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 255 if abs(d) > thresh else 0
        bg[row, col] = b + alpha * d


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
def erode_copy_value(mask, out):
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = mask[row, col]
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_writes_mask(mask, out):
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v
        mask[row, col] = 1


@cuda.jit
def tiles_eq_one(mask, tile, counts):
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] == 1:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


@cuda.jit
def tiles_plain(mask, tile, counts):
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        counts[row // tile, col // tile] += 1


@cuda.jit
def tiles_uint8_shared(mask, tile, counts):
    # a per-block uint8 counter for the block's first tile: wraps past 255 (blocks here cover one tile when tile = 32)
    s = cuda.shared.array(1, np.uint8)
    col, row = cuda.grid(2)
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    if t == 0:
        s[0] = 0
    cuda.syncthreads()
    r0, c0 = cuda.blockIdx.y * cuda.blockDim.y, cuda.blockIdx.x * cuda.blockDim.x
    same = row // tile == r0 // tile and col // tile == c0 // tile
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        if same:
            cuda.atomic.add(s, 0, 1)
        else:
            cuda.atomic.add(counts, (row // tile, col // tile), 1)
    cuda.syncthreads()
    if t == 0 and s[0] != 0:
        cuda.atomic.add(counts, (r0 // tile, c0 // tile), np.int32(s[0]))


# (exercise id, label, grade, answer factory, the phrase the cause must contain)
CASES: list[tuple[str, str, Callable[..., Any], Callable[[], Any], str]] = [
    ("05.softmax", "no-max", check.softmax, lambda: _softmax("no-max"), "subtract each row's maximum"),
    ("05.softmax", "global-max", check.softmax, lambda: _softmax("global-max"), "each row's maximum"),
    ("05.softmax", "whole-sum", check.softmax, lambda: _softmax("whole-sum"), "each row of a softmax sums to 1"),
    ("05.softmax", "in-place", check.softmax, lambda: _softmax("in-place"), "leave x as it is"),
    ("05.fusion-traffic", "bits", check.fusion_traffic, lambda: _fusion(bytes_unfused=lab05._traffic().bytes_unfused * 8), "bits"),
    ("05.fusion-traffic", "elements", check.fusion_traffic, lambda: _fusion(bytes_fused=lab05._traffic().bytes_fused / 4), "elements"),
    ("05.fusion-traffic", "launches-4", check.fusion_traffic, lambda: _fusion(launches_unfused=4), "computed twice"),
    ("05.fusion-traffic", "fused-as-unfused", check.fusion_traffic, lambda: _fusion(launches_fused=5), "one kernel"),
    ("05.huber", "no-abs", check.huber, lambda: _huber("float d = x - y; z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)"), "absolute value"),
    ("05.huber", "swapped", check.huber, lambda: _huber("float d = fabsf(x - y); z = d <= delta ? delta * (d - 0.5f * delta) : 0.5f * d * d"), "swapped"),
    ("05.huber", "no-half", check.huber, lambda: _huber("float d = fabsf(x - y); z = d <= delta ? d * d : delta * (d - 0.5f * delta)"), "factor 0.5"),
    ("05.huber", "linear-no-offset", check.huber, lambda: _huber("float d = fabsf(x - y); z = d <= delta ? 0.5f * d * d : delta * d"), "meeting at"),
    ("05.l2norm", "no-sqrt", check.l2norm, lambda: _l2("x * x", "a + b", "y = a", "0"), "missing sqrt"),
    ("05.l2norm", "identity-one", check.l2norm, lambda: _l2("x * x", "a + b", "y = sqrt(a)", "1"), "wrong identity"),
    ("05.l2norm", "mean", check.l2norm, lambda: _l2("x * x", "a + b", "y = sqrt(a / _in_ind.size())", "0"), "map (square each element)"),
    ("05.leaky-relu", "no-leak", check.leaky_relu, lambda: LEAKY.replace("alpha * v", "v"), "multiplied by alpha"),
    ("05.leaky-relu", "relu", check.leaky_relu, lambda: LEAKY.replace("alpha * v", "0.0f"), "plain ReLU"),
    ("05.leaky-relu", "le-n", check.leaky_relu, lambda: LEAKY.replace("i < n", "i <= n"), "i <= n"),
    ("05.leaky-relu", "swapped", check.leaky_relu, lambda: LEAKY.replace("v > 0.0f ? v : alpha * v", "v > 0.0f ? alpha * v : v"), "swapped"),
    ("05.leaky-relu", "short-index", check.leaky_relu,
     lambda: LEAKY.replace("int i = blockIdx.x * blockDim.x + threadIdx.x;", "short i = blockIdx.x * blockDim.x + threadIdx.x;"), "32,767"),
    ("05.pipeline", "no-divide", check.pipeline_time, lambda: _pipe(lambda a, b, c, n: (a + b + c) / n + (n - 1) * max(a, b, c)), "divide it by chunks too"),
    ("05.pipeline", "n-not-n-1", check.pipeline_time, lambda: _pipe(lambda a, b, c, n: (a + b + c) / n + n * max(a, b, c) / n), "(chunks - 1)"),
    # the sum of the stages in place of the slowest one gives the serial time exactly: both slips are named
    ("05.pipeline", "sum-not-max", check.pipeline_time, lambda: _pipe(lambda a, b, c, n: (a + b + c) / n + (n - 1) * (a + b + c) / n), "two slips give this same number"),
    ("05.pipeline", "serial", check.pipeline_time, lambda: _pipe(lambda a, b, c, n: a + b + c), "serial time"),
    ("05.streams", "pageable", check.streams_pipeline, lambda: _streams(pageable=True), "pageable"),
    ("05.streams", "into-x", check.streams_pipeline, lambda: _streams(into_x=True), "wrote into its input x"),
    ("05.streams", "blocking-get", check.streams_pipeline, lambda: _streams(blocking=True), "blocks the host"),
    ("05.streams", "end-no-wait", check.streams_pipeline, lambda: _streams(no_end_wait=True), "wait for each"),
    ("06.decode-fp16", "no-subnormal", check.decode_fp16, lambda: _decode("no-subnormal"), "subnormal"),
    ("06.decode-fp16", "int-sign", check.decode_fp16, lambda: _decode("int-sign"), "−0.0"),
    ("06.decode-fp16", "no-special", check.decode_fp16, lambda: _decode("no-special"), "infinity when the mantissa is 0"),
    ("06.predict-range", "65519-overflow", check.predict_range, lambda: _ranges(RIGHT_FP16[:5] + ["overflow"], RIGHT_BF16), "rounds down"),
    ("06.predict-range", "bf16-like-fp16", check.predict_range, lambda: _ranges(RIGHT_FP16, ["overflow"] + RIGHT_BF16[1:]), "FP32's 8 exponent bits"),
    ("06.predict-range", "1e-8-subnormal", check.predict_range, lambda: _ranges(RIGHT_FP16[:2] + ["subnormal"] + RIGHT_FP16[3:], RIGHT_BF16), "below half"),
    ("06.tf32-round", "truncate", check.tf32_round, lambda: _tf32("truncate"), "truncates"),
    ("06.tf32-round", "ties-up", check.tf32_round, lambda: _tf32("ties-up"), "even neighbour"),
    ("06.tf32-round", "no-nan", check.tf32_round, lambda: _tf32("no-nan"), "NaN must stay a NaN"),
    ("06.loss-scale", "apply-on-inf", check.loss_scale, lambda: _loss("apply-on-inf"), "skip the step"),
    ("06.loss-scale", "keep-count", check.loss_scale, lambda: _loss("keep-count"), "restart the count"),
    ("06.loss-scale", "strict", check.loss_scale, lambda: _loss("strict"), "good_steps + 1"),
    ("06.v100-fma", "two-flop", check.v100_fma, lambda: _fma("one FMA is two floating-point operations (a multiply and an add): divide by 2."), "two floating-point"),
    ("06.v100-fma", "per-sm", check.v100_fma, lambda: _fma("divide by the Tensor Cores per SM as well: the figure is per Tensor Core, not per SM."), "per Tensor Core"),
    ("06.v100-fma", "ghz", check.v100_fma, lambda: _fma("units: TFLOP/s is 10^12 FLOP/s and the clock in Hz (not GHz)."), "units"),
    ("06.gemm-predict", "peak", check.gemm_predict, lambda: _gemm("peak"), "roofline"),
    ("06.gemm-predict", "elements", check.gemm_predict, lambda: _gemm("elements"), "bytes per element"),
    ("06.gemm-predict", "inputs-only", check.gemm_predict, lambda: _gemm("inputs-only"), "C (m×n) is written too"),
    ("07.pcie-peak", "gbit", check.pcie_link_bandwidth, lambda: (lambda g, l: pcie_peak(g, l) * 8), "8 bits"),
    ("07.pcie-peak", "x16-always", check.pcie_link_bandwidth, lambda: (lambda g, l: pcie_peak(g, 16)), "x16 figure for every width"),
    ("07.pcie-peak", "no-encoding", check.pcie_link_bandwidth, lambda: (lambda g, l: {3: 8.0, 4: 16.0, 5: 32.0}[g] * l / 8), "128b/130b"),
    ("07.pageable-model", "min", check.pageable_copy_model, lambda: (lambda a, b: min(a, b)), "overlap perfectly"),
    ("07.pageable-model", "mean", check.pageable_copy_model, lambda: (lambda a, b: (a + b) / 2), "average"),
    ("07.pageable-model", "time", check.pageable_copy_model, lambda: (lambda a, b: 1 / a + 1 / b), "inverse"),
    ("07.copy-time", "once", check.hbm_copy_time, lambda: (lambda n, p: n / (p * 1e9)), "2 x nbytes"),
    ("07.copy-time", "ms", check.hbm_copy_time, lambda: (lambda n, p: 2 * n / (p * 1e9) * 1e3), "milliseconds"),
    ("07.copy-time", "bits", check.hbm_copy_time, lambda: (lambda n, p: 16 * n / (p * 1e9)), "bits"),
    ("07.dgx1-peer-matrix", "doubled", check.dgx1_peer_matrix, lambda: _dgx1(2.0), "both directions"),
    ("07.dgx1-peer-matrix", "nccl", check.dgx1_peer_matrix, lambda: _dgx1(0.8), "NCCL"),
    ("07.dgx1-peer-matrix", "pcie-filled", check.dgx1_peer_matrix, lambda: _dgx1(fill_none=32.0), "no NVLink"),
    ("07.allreduce-bytes", "one-phase", check.allreduce_ring_bytes, lambda: (lambda b, n: (n - 1) * b / n), "one phase"),
    ("07.allreduce-bytes", "n-steps", check.allreduce_ring_bytes, lambda: (lambda b, n: 2 * b), "n - 1 steps"),
    ("07.allreduce-bytes", "bits", check.allreduce_ring_bytes, lambda: (lambda b, n: 16 * (n - 1) * b / n), "bits"),
    ("07.bidir-conventions", "one-direction", check.bidirectional_conventions,
     lambda: ({"p2p_sum": 24.0, "dgx2_per_direction": 150.0}, 24.0, 23.0), "one direction"),
    ("07.bidir-conventions", "dgx2-whole", check.bidirectional_conventions,
     lambda: ({"p2p_sum": 47.0, "dgx2_per_direction": 300.0}, 24.0, 23.0), "already both directions"),
    ("07.bidir-conventions", "gbit", check.bidirectional_conventions,
     lambda: ({"p2p_sum": 47.0 * 8, "dgx2_per_direction": 150.0}, 24.0, 23.0), "bits"),
    ("07.event-timing", "pageable", check.event_timing, lambda: _timing(pageable=True), "pageable"),
    ("07.event-timing", "d2d-once", check.event_timing, lambda: _timing(once=True), "counted each byte once"),
    ("07.event-timing", "gbit", check.event_timing, lambda: _timing(scale=8.0), "bits"),
    ("09.fused-update", "no-abs", check.fused_update, lambda: fused_no_abs, "absolute value"),
    ("09.fused-update", "int-thresh", check.fused_update, lambda: fused_int_thresh, "whole number"),
    ("09.fused-update", "255", check.fused_update, lambda: fused_255, "it is 1 (foreground) or 0"),
    ("09.erode", "eq-one", check.erode, lambda: erode_eq_one, "non-zero"),
    ("09.erode", "copies-value", check.erode, lambda: erode_copy_value, "out holds 1"),
    ("09.erode", "writes-mask", check.erode, lambda: erode_writes_mask, "wrote into its input `mask`"),
    ("09.tile-counts", "eq-one", check.tile_counts, lambda: tiles_eq_one, "non-zero"),
    ("09.tile-counts", "plain", check.tile_counts, lambda: tiles_plain, "atomic"),
    ("09.tile-counts", "uint8-shared", check.tile_counts, lambda: tiles_uint8_shared, "narrower than int32"),
    ("09.fused-roofline", "bits", check.fused_roofline, lambda: (80, 0.5, "memory-bound", "memory-bound", 1.0), "bits"),
    ("09.fused-roofline", "upside-down", check.fused_roofline, lambda: (10, 2.0, "memory-bound", "memory-bound", 1.0), "upside down"),
    ("09.fused-roofline", "fps-ms", check.fused_roofline, lambda: (10, 0.5, "memory-bound", "memory-bound", lab09._fused_roofline()[4] * 1e3), "1,000"),
]
_WMMA = [
    ("tile offset", ("A + (size_t)tile_row * 16 * K + k", "A + (size_t)tile_row * K + k"), "offsets"),
    ("K step", ("k += 16", "k += 32"), "step by 16"),
    ("store layout", ("wmma::mem_row_major", "wmma::mem_col_major"), "transposed"),
]
HOST_ONLY = {"05.huber", "05.l2norm", "05.leaky-relu", "06.wmma-gemm"}
CASES += [("06.wmma-gemm", name, check.wmma_gemm, (lambda old=old, new=new: WMMA_SOURCE.replace(old, new)), word)
          for name, (old, new), word in _WMMA]


def _args(answer: Any) -> tuple[Any, ...]:
    return answer if isinstance(answer, tuple) else (answer,)


def _grade(grade: Callable[..., Any], make: Callable[[], Any]) -> Any:
    return grade(*_args(make()))


@pytest.mark.parametrize("exercise, label, grade, make, phrase", CASES, ids=[f"{c[0]}/{c[1]}" for c in CASES])
def test_wrong_answer_gets_its_cause(exercise: str, label: str, grade: Callable[..., Any], make: Callable[[], Any],
                                     phrase: str) -> None:
    if exercise in HOST_ONLY and not HOST:
        pytest.skip("no C++ compiler for the CPU stand-in")
    r = _grade(grade, make)
    assert r.status == "failed", f"{exercise}/{label}: {r.status}: {r.message}"
    assert phrase in f"{r.message} {r.cause or ''}", f"{exercise}/{label}: {r.message} | {r.cause}"


def test_at_least_three_per_exercise() -> None:
    mine = {"labkit.check.lab05", "labkit.check.lab06", "labkit.check.lab07", "labkit.check.lab09"}
    ids = {e for e, ex in check.core._REGISTRY.items() if getattr(ex.check, "__module__", "") in mine}
    assert len(ids) >= 25
    counts = {e: sum(1 for c in CASES if c[0] == e) for e in ids}
    assert all(n >= 3 for n in counts.values()), {e: n for e, n in counts.items() if n < 3}


def test_work_outside_the_stand_in_is_wrong_not_unsolved() -> None:
    """'Not solved yet' only for an answer that does nothing: figures without copies, results computed on the host,
    or C written without Tensor Cores are wrong answers with their cause."""
    def on_host(cp, x, out, kernel, chunks, n_streams):
        out[:] = 2 * x - 1
        return 1.0

    r = check.streams_pipeline(on_host)
    assert r.status == "failed" and "without issuing" in r.message
    r = check.event_timing(lambda cp, host, repeat: {"h2d": 25.0, "d2d_read_write": 1500.0})
    assert r.status == "failed" and "without timing" in r.message
    scalar = WMMA_SOURCE.split("    wmma::fragment")[0] + "    C[0] = 1.0f;\n}\n"
    r = check.wmma_gemm(scalar)
    assert r.status == "failed" and "no Tensor Core multiply" in r.message
