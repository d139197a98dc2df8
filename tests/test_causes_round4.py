"""Causes for the exercises added since round three (issue 34): at least five wrong answers of our own per exercise,
each rejected with the cause it shows (06.te-scale, 06.mx-quantize, 06.fp8-promotion, 08.ddp-buckets, 05.graph,
10.cluster, and the barrier causes read from the kernel's code). Cost: about 1 minute.
"""

from __future__ import annotations

import contextlib
import io
import math
from typing import Any, Callable

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from labkit import check  # noqa: E402
from labkit import precision as P  # noqa: E402


def _cause(check_fn: Callable[..., Any], answer: Any) -> tuple[str, str]:
    with contextlib.redirect_stdout(io.StringIO()):
        r = check_fn(answer)
    assert r.status == "failed", (r.status, r.message)
    return r.message, r.cause or ""


def fm(fmt: str) -> float:
    return P.format_info(fmt).max_normal


def ok(h: list) -> bool:
    return math.isfinite(max(h)) and max(h) > 0


TE = {
    "inf not kept": (lambda h, f, m, p: fm(f) / max(h) / 2**m if max(h) > 0 else p, "keep `previous`"),
    "last amax only": (lambda h, f, m, p: fm(f) / h[-1] / 2**m if ok(h) else p, "most recent amax only"),
    "times the margin": (lambda h, f, m, p: fm(f) / max(h) * 2**m if ok(h) else p, "the margin lowers the scale"),
    "E4M3 for every format": (lambda h, f, m, p: 448.0 / max(h) / 2**m if ok(h) else p, "E5M2 reaches 57,344"),
    "reset to 1": (lambda h, f, m, p: fm(f) / max(h) / 2**m if ok(h) else 1.0, "keep `previous`"),
    "the inverse": (lambda h, f, m, p: max(h) / fm(f) * 2**m if ok(h) else p, "the inverse"),
    "mean of the history": (lambda h, f, m, p: fm(f) / (sum(h) / len(h)) / 2**m if ok(h) else p, "max(history)"),
}


@pytest.mark.parametrize("name", sorted(TE))
def test_te_scale_causes(name: str) -> None:
    answer, words = TE[name]
    msg, cause = _cause(check.te_scale, answer)
    assert words in cause, (name, msg, cause)


def mxq(block: int = 32, off: int = 8, sat: bool = True, floor: Any = np.floor, zero_fix: bool = True,
        fmt: str = "fp8_e4m3") -> Callable[[np.ndarray], np.ndarray]:
    def q(x: np.ndarray) -> np.ndarray:
        b = x.reshape(*x.shape[:-1], -1, block)
        amax = np.abs(b).max(axis=-1, keepdims=True)
        with np.errstate(all="ignore"):
            s = 2.0 ** (floor(np.log2(np.where(amax > 0, amax, 1.0) if zero_fix else amax)) - off)
            r = P.round_to(b / s, fmt, on_range="ignore")
            if not sat:
                r = np.where(np.abs(b / s) > 448, np.nan, r)
            return (r * s).reshape(x.shape)
    return q


def mx_row_scale(x: np.ndarray) -> np.ndarray:
    amax = np.abs(x).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return P.round_to(x / s, "fp8_e4m3", on_range="ignore") * s


def mx_linear_scale(x: np.ndarray) -> np.ndarray:
    b = x.reshape(*x.shape[:-1], -1, 32)
    s = np.where(np.abs(b).max(axis=-1, keepdims=True) > 0, np.abs(b).max(axis=-1, keepdims=True), 1.0) / 448
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


MX = {
    "blocks of 16": (mxq(block=16), "blocks of 16"),
    "ceil of log2": (mxq(floor=np.ceil), "ceil(log2(amax))"),
    "0/0 in a zero block": (mxq(zero_fix=False), "all-zero block"),
    "overflow to NaN": (mxq(sat=False), "saturate"),
    "E5M2 elements": (mxq(fmt="fp8_e5m2", off=15), "E5M2"),
    "one scale per row": (mx_row_scale, "one scale per row"),
    "a scale that is not a power of two": (mx_linear_scale, "not a power of two"),
}


@pytest.mark.parametrize("name", sorted(MX))
def test_mx_quantize_causes(name: str) -> None:
    answer, words = MX[name]
    msg, cause = _cause(check.mx_quantize, answer)
    assert words in cause, (name, msg, cause)


def prom(step_mul: int = 1, acc: str = "limited", dtype: Any = np.float32, drop_last: bool = False,
         fixed: int | None = None) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
        iv = fixed or interval * step_mul
        K = a.shape[1]
        stop = K - K % iv if drop_last else K
        c = np.zeros((a.shape[0], b.shape[1]), dtype)
        for k0 in range(0, stop, iv):
            c += P.gemm(a[:, k0:k0 + iv], b[k0:k0 + iv], "fp8_e4m3", accumulate=acc, on_range="ignore").astype(dtype)
        return c
    return f


FP8 = {
    "interval counted in instructions": (prom(step_mul=32), "Tensor Core instructions of 32"),
    "FP32 accumulator in the chunks": (prom(acc="fp32"), "accumulate='limited'"),
    "FP16 total": (prom(dtype=np.float16), "not in FP16"),
    "last chunk dropped": (prom(drop_last=True), "last chunk is missing"),
    "fixed 128": (prom(fixed=128), "not a fixed 128"),
    "exact product": (lambda a, b, i: a @ b, "exact product"),
    "no promotion": (lambda a, b, i: P.gemm(a, b, "fp8_e4m3", accumulate="limited", on_range="ignore"), "no promotion"),
}


@pytest.mark.parametrize("name", sorted(FP8))
def test_fp8_promotion_causes(name: str) -> None:
    answer, words = FP8[name]
    msg, cause = _cause(check.fp8_promotion, answer)
    assert words in cause, (name, msg, cause)


def bk(rule: str) -> Callable[[list, int], list]:
    def f(sizes: list, cap: int) -> list:
        out, cur, held = [], [], 0
        for k, s in enumerate(sizes):
            if rule == "before" and cur and held + s > cap:
                out.append(cur)
                cur, held = [], 0
            cur.append(k)
            held += s
            if (rule == "strict" and held > cap) or (rule in ("ge", "drop") and held >= cap):
                out.append(cur)
                cur, held = [], 0
            elif rule == "carry" and held >= cap:
                out.append(cur)
                cur, held = [], held - cap
        if cur and rule != "drop":
            out.append(cur)
        return out
    return f


DDP = {
    "> instead of >=": (bk("strict"), ">="),
    "last bucket dropped": (bk("drop"), "last bucket"),
    "closed before the gradient that fills it": (bk("before"), "add the gradient to the open bucket first"),
    "one bucket": (lambda sizes, cap: [list(range(len(sizes)))] if sizes else [], "into one bucket"),
    "one bucket per gradient": (lambda sizes, cap: [[k] for k in range(len(sizes))], "one bucket per gradient"),
    "reversed positions": (lambda sizes, cap: bk("ge")(sizes[::-1], cap), "reversed list"),
    "sizes, not positions": (lambda sizes, cap: [[sizes[k] for k in b] for b in bk("ge")(sizes, cap)], "not the sizes"),
    "overflow carried": (bk("carry"), "carried into the next"),
}


@pytest.mark.parametrize("name", sorted(DDP))
def test_ddp_buckets_causes(name: str) -> None:
    answer, words = DDP[name]
    msg, cause = _cause(check.ddp_buckets, answer)
    assert words in cause, (name, msg, cause)


def graph(variant: str) -> Callable[..., list]:
    def g(cp: Any, frames: list, x: np.ndarray, y: np.ndarray, kernel: Any) -> list:
        stream = cp.cuda.Stream(non_blocking=True)
        d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
        with stream:
            stream.begin_capture()
            d_in.set(x)
            kernel(d_in, d_out)
            if variant != "no-copy-out":
                d_out.get(out=y, blocking=False)
            gr = stream.end_capture()
        res = []
        for f in frames:
            if variant != "no-fill":
                x[...] = f
            gr.launch(stream)
            if variant == "eager":
                with stream:
                    kernel(d_in, d_out)
            if variant != "no-sync":
                stream.synchronize()
            res.append(y if variant == "no-copy" else y.copy())
        return res if variant != "last-only" else res[-1:]
    return g


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
            gr = stream.end_capture()
        gr.launch(stream)
        stream.synchronize()
        res.append(y.copy())
    return res


GRAPH = {
    "x never refilled": (graph("no-fill"), "never filled"),
    "no synchronize": (graph("no-sync"), "stream.synchronize()"),
    "y itself kept": (graph("no-copy"), "y.copy()"),
    "copy-out not captured": (graph("no-copy-out"), "the copy out"),
    "work outside the graph": (graph("eager"), "the graph already holds"),
    "one result only": (graph("last-only"), "one result per frame"),
    "a capture per frame": (graph_per_frame, "capture the pipeline once"),
}


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_graph_causes(name: str) -> None:
    answer, words = GRAPH[name]
    msg, cause = _cause(check.graph_pipeline, answer)
    assert words in cause, (name, msg, cause)


# ------------------------------------------------------------------------------------------ barriers, from the code
MATMUL = """
from numba import cuda, float32
T = 16


@cuda.jit
def mm(A, B, C):
    sa = cuda.shared.array((T, T), float32)
    sb = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * T + ty, cuda.blockIdx.x * T + tx
    acc = float32(0.0)
    for t in range((A.shape[1] + T - 1) // T):
        k = t * T + tx
        sa[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)
        k = t * T + ty
        sb[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)
        SYNC1
        for kk in range(T):
            acc += sa[ty, kk] * sb[kk, tx]
        SYNC2
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
"""

BLOCK_SUM = """
from numba import cuda, float32


@cuda.jit
def block_sum(x, partial):
    sh = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else float32(0.0)
    SYNC1
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        SYNC2
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]
"""


def _kernel(tmp_path: Any, source: str, name: str) -> Any:
    import importlib.util

    path = tmp_path / f"{name}_{abs(hash(source)) % 10**8}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return getattr(mod, name)


@pytest.mark.parametrize("s1, s2, words, wrong", [
    ("pass", "cuda.syncthreads()", "after the loads, before the first use", "end of each iteration"),
    ("cuda.syncthreads()", "pass", "at the end of each iteration", "after the loads"),
])
def test_matmul_barrier_cause_comes_from_the_code(tmp_path: Any, s1: str, s2: str, words: str, wrong: str) -> None:
    kernel = _kernel(tmp_path, MATMUL.replace("SYNC1", s1).replace("SYNC2", s2), "mm")
    msg, cause = _cause(check.matmul, kernel)
    assert words in cause and wrong not in cause, (msg, cause)


def test_block_sum_barrier_cause_comes_from_the_code(tmp_path: Any) -> None:
    kernel = _kernel(tmp_path, BLOCK_SUM.replace("SYNC1", "cuda.syncthreads()").replace("SYNC2", "pass"), "block_sum")
    msg, cause = _cause(check.block_sum, kernel)
    assert "after each step" in cause and "register" not in cause, (msg, cause)


def test_uninitialised_shared_read_is_named_in_the_message(tmp_path: Any) -> None:
    kernel = _kernel(tmp_path, MATMUL.replace("SYNC1", "pass").replace("SYNC2", "cuda.syncthreads()"), "mm")
    msg, _ = _cause(check.matmul, kernel)
    assert "read before any thread of the block had written it" in msg, msg


# ------------------------------------------------------------------------------------------ index causes
SAXPY = """
from numba import cuda


@cuda.jit
def saxpy(a, x, y, out):
    for i in range(START, out.size, STEP):
        out[i] = a * x[i] + y[i]
"""


@pytest.mark.parametrize("start, step, words", [
    ("cuda.threadIdx.x", "cuda.gridsize(1)", "cuda.grid(1)"),
    ("cuda.grid(1)", "cuda.blockDim.x", "not cuda.blockDim.x"),
    ("cuda.grid(1) + out.size", "cuda.gridsize(1)", "never reached"),
])
def test_saxpy_index_causes(tmp_path: Any, start: str, step: str, words: str) -> None:
    kernel = _kernel(tmp_path, SAXPY.replace("START", start).replace("STEP", step), "saxpy")
    msg, cause = _cause(check.saxpy, kernel)
    assert words in cause, (msg, cause)


HIST_NO_FLUSH_BARRIER = """
from numba import cuda, int32


@cuda.jit
def histogram_shared(data, hist):
    local = cuda.shared.array(256, int32)
    for b in range(cuda.threadIdx.x, 256, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    for b in range(cuda.threadIdx.x, 256, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])
"""

ERODE_EDGE_AS_BACKGROUND = """
from numba import cuda


@cuda.jit
def erode(mask, out):
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                r, c = row + dr, col + dc
                if r < 0 or r >= rows or c < 0 or c >= cols or mask[r, c] == 0:
                    v = 0
        out[row, col] = v
"""


def test_atomics_then_reads_need_a_barrier_named_from_the_code(tmp_path: Any) -> None:
    kernel = _kernel(tmp_path, HIST_NO_FLUSH_BARRIER, "histogram_shared")
    msg, cause = _cause(check.histogram_shared, kernel)
    assert "between the atomic updates of `local` and reading it" in cause, (msg, cause)
    assert "after the atomic updates" in cause and "after the loads" not in cause, (msg, cause)


def test_erode_edge_counted_as_background(tmp_path: Any) -> None:
    kernel = _kernel(tmp_path, ERODE_EDGE_AS_BACKGROUND, "erode")
    msg, cause = _cause(check.erode, kernel)
    assert "frame's edge" in cause, (msg, cause)
