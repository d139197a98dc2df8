"""Checks for lab 05 (CuPy): device-agnostic code, the fusion traffic model, ElementwiseKernel, ReductionKernel,
RawKernel in CUDA C++, and the copy/compute pipeline model.

CUDA C++ answers are graded in two ways. On a GPU, the learner's kernel runs on fresh random inputs of several
sizes (smaller than a block, not multiples, multiples) against NumPy, into poisoned outputs with guard zones.
In ``sim`` mode the source is compiled with NVRTC for sm_70, sm_80 and sm_90, its PTX entry is inspected (name,
``extern "C"``, parameter count and types, a comparison with the size that steers a branch or store), and,
where a C++ compiler is installed, the same source runs on the CPU stand-in (:mod:`labkit.cuda_cpp`) with the
same inputs and guard zones. The success message says which of these happened.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..cupylab import cupy_or_none
from ..errors import CompileError, LabkitError
from .core import Failed, Unsolved, exercise
from .harness import compare, random_array, sizes_for

ARCHES = ("sm_70", "sm_80", "sm_90")


def _compile_all(source: str, name: str) -> dict[str, Any]:
    from ..cuda_cpp import compile_for

    try:
        return compile_for(source, name, ARCHES)
    except CompileError as exc:
        raise Failed(f"the CUDA C++ does not compile:\n{_with_source_line(str(exc), source)}",
                     cause="read NVRTC's first error and the line it names.") from None


def _with_source_line(message: str, source: str) -> str:
    """NVRTC's message without caret-only lines, plus the source line of the first error."""
    import re

    lines = [ln for ln in message.splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    m = re.search(r"\((\d+)\): error", message)
    src = source.splitlines()
    if m and 1 <= int(m.group(1)) <= len(src):
        k = int(m.group(1))
        lines.append(f"  at line {k} of your source: {src[k - 1].strip()}")
    return "\n".join(lines)


def _host_note(exc: Exception) -> str:
    text = str(exc).split("\n")[0]
    return f" The CPU stand-in did not run it ({text}); a GPU run will check its values."


# ----------------------------------------------------------------------------------------- 05.softmax
def _ref_softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _reference_softmax() -> Callable[[Any], Any]:
    from ..cupylab import array_module

    def softmax(x: Any) -> Any:
        xp = array_module(x)
        z = x - x.max(axis=-1, keepdims=True)
        e = xp.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    return softmax


@exercise(
    "05.softmax",
    kind="code",
    title="Device-agnostic softmax with broadcasting",
    hints=[
        "Get the module with `xp = labkit.cupylab.array_module(x)` and use `xp.exp`, never `np.exp`: then the same "
        "code runs on NumPy and on CuPy arrays.",
        "Softmax over the last axis: subtract each row's maximum (`x.max(axis=-1, keepdims=True)`) before `xp.exp`, "
        "or large inputs overflow to inf. `keepdims=True` keeps the shape broadcastable against x.",
        "`z = x - x.max(axis=-1, keepdims=True); e = xp.exp(z); return e / e.sum(axis=-1, keepdims=True)`.",
    ],
    reference=_reference_softmax,
)
def softmax(fn: Any) -> str:
    """Grade ``softmax(x)`` over the last axis: NumPy and CuPy inputs, 2-D and 3-D, float32 and float64, large values."""
    if not callable(fn):
        raise Failed(f"expected a function softmax(x), got {type(fn).__name__}.")
    cupy = cupy_or_none()
    cases = [((4, 7), np.float32, 1.0), ((3, 2, 33), np.float64, 1.0), ((5, 129), np.float32, 5.0), ((2, 50), np.float32, 800.0)]
    for shape, dtype, scale in cases:
        host = random_array(shape, dtype, -scale, scale)
        x = cupy.asarray(host) if cupy is not None else host
        try:
            got = fn(x)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the learner
            raise Failed(f"softmax raised {type(exc).__name__}: {exc} (input shape {shape}, {np.dtype(dtype).name}).") from None
        if got is None or got is Ellipsis:
            raise Unsolved("softmax returns nothing yet; compute and return the result.")
        if cupy is not None and not isinstance(got, cupy.ndarray):
            raise Failed(f"for a CuPy input, softmax returned a {type(got).__name__}: the data left the GPU.",
                         cause="use xp = labkit.cupylab.array_module(x) and xp.exp, not np.exp.")
        if cupy is None and not isinstance(got, np.ndarray):
            raise Failed(f"softmax returned a {type(got).__name__}, not an array.")
        got_h = cupy.asnumpy(got) if cupy is not None else got
        if got_h.shape != shape:
            raise Failed(f"softmax of an array of shape {shape} has shape {got_h.shape}.",
                         cause="reduce over the last axis with keepdims=True so the result broadcasts back.")
        if got_h.dtype != np.dtype(dtype):
            raise Failed(f"a {np.dtype(dtype).name} input gave a {got_h.dtype} result.", cause="keep the input's dtype.")
        if not np.isfinite(got_h).all():
            raise Failed(f"inputs in [-{scale:g}, {scale:g}] gave inf or nan.",
                         cause="exp overflows for large inputs: subtract each row's maximum first.")
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        compare(got_h.astype(np.float64), _ref_softmax(host), label=f"shape {shape}, {np.dtype(dtype).name}", rtol=rtol, atol=1e-7)
    where = "CuPy arrays on the GPU (results stayed on the device)" if cupy is not None else "NumPy arrays (sim mode)"
    return f"correct on {len(cases)} inputs ({where}), 2-D and 3-D, float32 and float64, values up to ±800."


# ----------------------------------------------------------------------------------------- 05.fusion-traffic
FUSION_N = 1 << 20


def scaled_squared_error(x: Any, y: Any, w: float, b: float) -> Any:
    """The expression of exercise 05.fusion-traffic."""
    return w * (x - y) * (x - y) + b


def _traffic() -> Any:
    from ..cupylab import traffic

    return traffic(scaled_squared_error, FUSION_N, "float32", scalars=("w", "b"))


_FUSION_KEYS = ("launches_unfused", "bytes_unfused", "launches_fused", "bytes_fused")


@exercise(
    "05.fusion-traffic",
    kind="numeric",
    title="Count launches and bytes, unfused and fused",
    hints=[
        "Without fusion every operator is one kernel that reads its array operands from memory and writes its result. "
        "Python evaluates `w * (x - y) * (x - y) + b` left to right: list the kernels in that order.",
        "There are five kernels: x - y, w * t1, x - y again, t2 * t3, t4 + b. A scalar costs no memory traffic. "
        "Fused, one kernel reads x and y once and writes the result once.",
        "Per element (4 bytes each): unfused 2+1, 1+1, 2+1, 2+1, 1+1 = 13 array accesses; fused 2+1 = 3. Multiply by 4 * n.",
    ],
    reference=lambda: {k: getattr(_traffic(), k) for k in _FUSION_KEYS},
)
def fusion_traffic(answer: Any) -> str:
    """Grade a dict with ``launches_unfused``, ``bytes_unfused``, ``launches_fused``, ``bytes_fused``."""
    if not isinstance(answer, dict):
        raise Failed(f"expected a dict with the keys {', '.join(_FUSION_KEYS)}, got {type(answer).__name__}.")
    missing = [k for k in _FUSION_KEYS if k not in answer]
    if missing:
        raise Failed(f"the dict lacks {', '.join(missing)}.")
    if any(answer[k] is Ellipsis or answer[k] is None for k in _FUSION_KEYS):
        raise Unsolved("some values are still `...`; fill in all four numbers.")
    t = _traffic()
    causes = {
        "launches_unfused": "count one kernel per operator between arrays or an array and a scalar; x - y is computed twice.",
        "bytes_unfused": "each kernel reads each distinct array operand (n x 4 bytes) and writes its result; a scalar is free.",
        "launches_fused": "cupy.fuse turns the whole function into one kernel.",
        "bytes_fused": "the fused kernel reads x and y once each and writes one result; temporaries stay in registers.",
    }
    for k in _FUSION_KEYS:
        want = getattr(t, k)
        got = answer[k]
        if not isinstance(got, (int, float, np.integer, np.floating)) or got != want:
            raise Failed(f"{k} = {got!r} is not right for n = {FUSION_N:,} float32 elements.", cause=causes[k])
    return (f"right: {t.launches_unfused} launches and {t.bytes_unfused / 1e6:.1f} MB unfused, 1 launch and "
            f"{t.bytes_fused / 1e6:.1f} MB fused: {t.ratio:.2f}x less traffic (a model; a GPU run measures it).")


# ----------------------------------------------------------------------------------------- 05.huber (ElementwiseKernel)
def _huber_ref(x: np.ndarray, y: np.ndarray, delta: float) -> np.ndarray:
    d = np.abs(x.astype(np.float64) - y)
    return np.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def _reference_huber() -> Any:
    from ..cupylab import elementwise_kernel
    from ..kernels_cuda import get

    p = get("huber").parts
    return elementwise_kernel(p["in_params"], p["out_params"], p["operation"], "huber")


def _as_parts(k: Any) -> Any:
    from ..cupylab import Elementwise, Reduction

    if isinstance(k, (Elementwise, Reduction)):
        return k
    return None


@exercise(
    "05.huber",
    kind="kernel",
    title="ElementwiseKernel in CUDA C++: the Huber loss",
    hints=[
        "Use labkit.cupylab.elementwise_kernel(in_params, out_params, operation, name): the same four strings as "
        "cupy.ElementwiseKernel. Inputs 'float32 x, float32 y, float32 delta', output 'float32 z'.",
        "The operation is the loop body for one element, in CUDA C++: `float d = fabsf(x - y);` then assign z with the "
        "conditional operator `cond ? a : b`. Write float constants as 0.5f.",
        "operation = 'float d = fabsf(x - y); z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)'",
    ],
    reference=_reference_huber,
)
def huber(kernel: Any) -> str:
    """Grade an elementwise kernel ``huber(x, y, delta) -> z`` (labkit.cupylab.elementwise_kernel or cupy.ElementwiseKernel)."""
    from ..cuda_cpp import HostUnavailable, parse_params

    cupy = cupy_or_none()
    parts = _as_parts(kernel)
    if parts is None and not (cupy is not None and isinstance(kernel, cupy.ElementwiseKernel)):
        raise Failed(f"expected labkit.cupylab.elementwise_kernel(...) (or a cupy.ElementwiseKernel), got {type(kernel).__name__}.")
    if parts is not None:
        try:
            ins, outs = parse_params(parts.in_params, "in_params"), parse_params(parts.out_params, "out_params")
        except LabkitError as exc:
            raise Failed(str(exc)) from None
        if len(ins) != 3 or len(outs) != 1:
            raise Failed(f"huber takes three inputs (x, y, delta) and gives one output; yours has {len(ins)} and {len(outs)}.",
                         cause="in_params = 'float32 x, float32 y, float32 delta', out_params = 'float32 z'.")
        _compile_all(parts.source(), parts.name)
    delta = float(np.float32(np.random.default_rng().uniform(0.2, 0.8)))
    sizes = [391, 1, 127, 128, 129, 1000]
    if cupy is not None:
        run = kernel.cupy() if parts is not None else kernel
        for n in sizes + [1_000_003]:
            x, y = random_array(n), random_array(n)
            z = run(cupy.asarray(x), cupy.asarray(y), np.float32(delta))
            compare(cupy.asnumpy(z).astype(np.float64), _huber_ref(x, y, delta), label=f"n={n}", rtol=1e-5, atol=1e-6)
        return f"correct on the GPU for {len(sizes) + 1} sizes up to 1,000,003 (compiled by CuPy)."
    try:
        for n in sizes:
            x, y = random_array(n), random_array(n)
            z = kernel(x, y, np.float32(delta))
            compare(np.asarray(z).astype(np.float64), _huber_ref(x, y, delta), label=f"n={n}", rtol=1e-5, atol=1e-6)
    except HostUnavailable as exc:
        return f"compiles for {', '.join(ARCHES)} with NVRTC." + _host_note(exc)
    except LabkitError as exc:
        raise Failed(str(exc)) from None
    return (f"compiles for {', '.join(ARCHES)} with NVRTC, and its values are right on {len(sizes)} sizes on the CPU "
            "stand-in (labkit's equivalent of CuPy's elementwise kernel). A GPU run checks the real cupy.ElementwiseKernel.")


# ----------------------------------------------------------------------------------------- 05.l2norm (ReductionKernel)
def _reference_l2norm() -> Any:
    from ..cupylab import reduction_kernel
    from ..kernels_cuda import get

    p = get("l2norm").parts
    return reduction_kernel(p["in_params"], p["out_params"], p["map_expr"], p["reduce_expr"], p["post_map_expr"], p["identity"], "l2norm")


@exercise(
    "05.l2norm",
    kind="kernel",
    title="ReductionKernel: the Euclidean norm",
    hints=[
        "A ReductionKernel has a map expression (per element), a reduce expression combining two partial results "
        "`a` and `b`, a post-map expression that writes the output from the final `a`, and the identity of the reduction.",
        "Square in the map, add in the reduce, take the square root in the post-map. The identity of + is 0.",
        "map_expr='x * x', reduce_expr='a + b', post_map_expr='y = sqrt(a)', identity='0'.",
    ],
    reference=_reference_l2norm,
)
def l2norm(kernel: Any) -> str:
    """Grade a reduction ``l2norm(x) -> y`` (labkit.cupylab.reduction_kernel or cupy.ReductionKernel)."""
    from ..cuda_cpp import HostUnavailable, parse_params

    cupy = cupy_or_none()
    parts = _as_parts(kernel)
    if parts is None and not (cupy is not None and isinstance(kernel, cupy.ReductionKernel)):
        raise Failed(f"expected labkit.cupylab.reduction_kernel(...) (or a cupy.ReductionKernel), got {type(kernel).__name__}.")
    if parts is not None:
        try:
            ins, outs = parse_params(parts.in_params, "in_params"), parse_params(parts.out_params, "out_params")
            source = parts.source()
        except LabkitError as exc:
            raise Failed(str(exc)) from None
        if len(ins) != 1 or len(outs) != 1:
            raise Failed(f"l2norm takes one input and gives one output; yours has {len(ins)} and {len(outs)}.")
        _compile_all(source, parts.name)
    sizes = [1, 2, 127, 1000, 1537]
    if cupy is not None:
        run = kernel.cupy() if parts is not None else kernel
        results = []
        for n in sizes + [1_000_003]:
            x = random_array(n)
            results.append((n, float(run(cupy.asarray(x))), float(np.linalg.norm(x.astype(np.float64)))))
        _grade_l2norm(results, float(run(cupy.zeros(ZERO_N, dtype=cupy.float32))))
        return f"correct on the GPU for {len(sizes) + 1} sizes up to 1,000,003 (compiled by CuPy)."
    try:
        results = []
        for n in sizes:
            x = random_array(n)
            results.append((n, float(kernel(x)), float(np.linalg.norm(x.astype(np.float64)))))
        zero = float(kernel(np.zeros(ZERO_N, np.float32)))
    except HostUnavailable as exc:
        return f"compiles for {', '.join(ARCHES)} with NVRTC." + _host_note(exc)
    except LabkitError as exc:
        raise Failed(str(exc)) from None
    _grade_l2norm(results, zero)
    return (f"compiles for {', '.join(ARCHES)} with NVRTC, and gives the norm on {len(sizes)} sizes on the CPU stand-in "
            "(4 partial results combined, as a tree reduction would). A GPU run checks the real cupy.ReductionKernel.")


#: Length of the all-zero input every l2norm check also runs: its norm is 0 whatever the tree, unless the identity is not.
ZERO_N = 1000


def _l2norm_cause(results: list[tuple[int, float, float]], zero: float) -> str:
    """The likely mistake behind wrong norms, from what the kernel returned: ``(n, got, expected)`` per size, and on zeros.

    A missing square root returns the sum of squares: got ≈ expected². A wrong identity shows on an array of zeros:
    every other expression gives 0 there, but the identity is combined with the partial results many times (how
    many depends on the launch), so a nonzero identity makes the norm of zeros nonzero.
    """
    got = np.array([g for _, g, _ in results], dtype=np.float64)
    want = np.array([w for _, _, w in results], dtype=np.float64)
    if not np.isfinite(zero):
        return ("an array of zeros gave inf or NaN: the identity must leave a value unchanged under your reduce expression "
                "(0 for a sum).")
    if zero == 0.0 and not np.isfinite(got).all():
        return ("the result is NaN or inf: the root of a negative sum? Square each element in the map (`x * x`), add in the "
                "reduce (`a + b`), take the root in the post-map.")
    if zero != 0.0:
        extra = ", and the result is the sum of squares (no sqrt in the post-map)" if np.allclose(got, want ** 2 + zero, rtol=1e-3) else ""
        return (f"a wrong identity: an array of {ZERO_N} zeros gave {zero:.4g}, not 0{extra}. The identity is combined with "
                "partial results many times, so it must leave a value unchanged under your reduce expression: 0 for a sum.")
    if np.allclose(got, want ** 2, rtol=1e-4, atol=1e-6):
        return "the result is the sum of squares, not its root: a missing sqrt. The post-map should be `y = sqrt(a)`."
    return "check the map (square each element), the reduce (add a and b) and the post-map (square root) expressions."


def _grade_l2norm(results: list[tuple[int, float, float]], zero: float) -> None:
    """Raise :class:`Failed` at the first wrong norm (the all-zero input last), with the cause read from all of them."""
    for n, got, want in [*results, (ZERO_N, zero, 0.0)]:
        if not np.isfinite(got) or abs(got - want) > 1e-4 * max(1.0, abs(want)):
            label = f"n={n}" + (" (all zeros)" if want == 0.0 and got == zero else "")
            raise Failed(f"{label}: expected {want:.6g}, got {got:.6g}.", cause=_l2norm_cause(results, zero))


# ----------------------------------------------------------------------------------------- 05.leaky-relu (RawKernel)
def _leaky_reference() -> str:
    from ..kernels_cuda import LEAKY_RELU

    return LEAKY_RELU


LEAKY_SIGNATURE = ("u64", "u64", "f32", ("u32", "s32", "b32"))


@exercise(
    "05.leaky-relu",
    kind="kernel",
    title="RawKernel in CUDA C++: leaky ReLU with a bounds check",
    hints=[
        "Each thread handles element i = blockIdx.x * blockDim.x + threadIdx.x. The grid comes in whole blocks, "
        "so some threads have i >= n: they must not touch memory.",
        "Keep the given signature and extern \"C\" (CuPy finds the kernel by its plain name). "
        "Inside `if (i < n) { ... }` write y[i] = x[i] > 0 ? x[i] : alpha * x[i].",
        "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { float v = x[i]; y[i] = v > 0.0f ? v : alpha * v; }",
    ],
    reference=lambda: _leaky_reference(),
)
def leaky_relu(source: Any) -> str:
    """Grade CUDA C++ source defining ``extern "C" __global__ void leaky_relu(const float* x, float* y, float alpha, int n)``."""
    from ..cuda_cpp import HostUnavailable, find_entry, guards_with, run_on_host_batch, stores_global

    if not isinstance(source, str):
        raise Failed(f"expected the CUDA C++ source as a string, got {type(source).__name__}.")
    ptx = _compile_all(source, "leaky_relu")
    try:
        entry = find_entry(ptx["sm_90"].text, "leaky_relu", n_params=4)
    except LabkitError as exc:
        raise Failed(str(exc).split("\n")[0], cause=exc.fix) from None
    for k, (got, want) in enumerate(zip(entry.params, LEAKY_SIGNATURE)):
        if got not in (want if isinstance(want, tuple) else (want,)):
            names = ["const float* x", "float* y", "float alpha", "int n"]
            raise Failed(f"parameter {k} compiles to a {got}, but it should be `{names[k]}`.",
                         cause="keep the signature (const float* x, float* y, float alpha, int n).")
    if not stores_global(entry):
        raise Unsolved("the kernel compiles but writes nothing yet; write its body.")
    if not guards_with(entry, 3):
        raise Failed("no comparison with n controls what the threads do: threads past the end would write out of bounds.",
                     cause="a missing bounds check: wrap the body in `if (i < n) { ... }`.")
    alpha = float(np.float32(np.random.default_rng().uniform(0.05, 0.3)))
    cupy = cupy_or_none()
    if cupy is not None:
        return _leaky_relu_gpu(cupy, source, alpha)
    runs = []
    for block in (128, 32):
        for n in (sizes_for(block) if block == 128 else [3 * block + 7]):
            x = random_array(n)
            y = np.full(n, np.nan, np.float32)
            grid = (n + block - 1) // block + 1  # one block more than needed: the bounds check must hold
            runs.append((x, y, n, block, grid))
    try:
        report = run_on_host_batch(source, "leaky_relu", [((g,), (b,), (x, y, np.float32(alpha), np.int32(n))) for x, y, n, b, g in runs])
    except HostUnavailable as exc:
        return (f"compiles for {', '.join(ARCHES)}; entry leaky_relu(u64, u64, f32, u32) found; a comparison with n "
                "guards its work (read from the PTX)." + _host_note(exc))
    except LabkitError as exc:
        raise Failed(str(exc).split("\n")[0], cause=exc.fix) from None
    for (x, y, n, block, grid), outside in zip(runs, report):
        label = f"n={n}, {grid} block(s) of {block} threads"
        if outside:
            raise Failed(f"{label}: {outside}.", cause="a wrong bounds check (`i <= n`?): only threads with i < n may write.")
        compare(y, np.where(x > 0, x, np.float32(alpha) * x).astype(np.float32), label=label, unwritten_means_unsolved=False)
    return (f"compiles for {', '.join(ARCHES)}; entry and bounds check found in the PTX; correct on {len(runs)} launches "
            "on the CPU stand-in, with a spare block and no writes out of bounds. A GPU run checks it with cupy.RawKernel.")


def _leaky_relu_gpu(cupy: Any, source: str, alpha: float) -> str:
    kernel = cupy.RawKernel(source, "leaky_relu")
    guard = 1024
    runs = 0
    for block in (32, 128, 256):
        for n in sizes_for(block):
            x = random_array(n)
            buf = cupy.full(n + 2 * guard, cupy.nan, dtype=cupy.float32)
            y = buf[guard: guard + n]
            grid = (n + block - 1) // block
            kernel((grid,), (block,), (cupy.asarray(x), y, np.float32(alpha), np.int32(n)))
            cupy.cuda.Device().synchronize()
            full = cupy.asnumpy(buf)
            if not (np.isnan(full[:guard]).all() and np.isnan(full[guard + n:]).all()):
                raise Failed(f"n={n}, block {block}: the kernel wrote outside the output array.",
                             cause="a missing or wrong bounds check: only threads with i < n may write.")
            compare(full[guard: guard + n], np.where(x > 0, x, np.float32(alpha) * x).astype(np.float32),
                    label=f"n={n}, {grid} block(s) of {block}", unwritten_means_unsolved=runs == 0)
            runs += 1
    return f"correct on the GPU in {runs} launches (sizes up to 1,000,003, blocks of 32, 128, 256), no writes out of bounds."


# ----------------------------------------------------------------------------------------- 05.pipeline
def _reference_pipeline() -> Callable[..., float]:
    def pipelined_time(t_in: float, t_kernel: float, t_out: float, chunks: int) -> float:
        return (t_in + t_kernel + t_out) / chunks + (chunks - 1) * max(t_in, t_kernel, t_out) / chunks

    return pipelined_time


@exercise(
    "05.pipeline",
    kind="numeric",
    title="Predict the time of a copy/compute pipeline",
    hints=[
        "Draw the timeline for 3 chunks: the H2D engine, the SMs and the D2H engine each work on one chunk at a time, "
        "and a chunk's kernel cannot start before its copy in has finished.",
        "The first chunk goes through all three stages (t_in + t_kernel + t_out) / chunks. After that, the slowest "
        "stage sets the pace: each further chunk adds max(t_in, t_kernel, t_out) / chunks.",
        "return (t_in + t_kernel + t_out) / chunks + (chunks - 1) * max(t_in, t_kernel, t_out) / chunks",
    ],
    reference=_reference_pipeline,
)
def pipeline_time(fn: Any) -> str:
    """Grade ``pipelined_time(t_in, t_kernel, t_out, chunks)`` against labkit's event-by-event pipeline model."""
    from ..cupylab import pipeline

    if not callable(fn):
        raise Failed(f"expected a function pipelined_time(t_in, t_kernel, t_out, chunks), got {type(fn).__name__}.")
    rng = np.random.default_rng()
    cases = [(2.0, 0.5, 2.0, 1), (2.0, 0.5, 2.0, 8), (1.0, 3.0, 0.5, 4)]
    cases += [(*(float(v) for v in rng.uniform(0.1, 5.0, 3)), int(rng.integers(2, 33))) for _ in range(5)]
    for t_in, t_k, t_out, chunks in cases:
        try:
            got = fn(t_in, t_k, t_out, chunks)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"pipelined_time raised {type(exc).__name__}: {exc}.") from None
        if got is None or got is Ellipsis:
            raise Unsolved("pipelined_time returns nothing yet.")
        want = pipeline(t_in, t_k, t_out, chunks).makespan_s
        if not isinstance(got, (int, float, np.floating)) or not np.isclose(float(got), want, rtol=1e-9):
            serial = t_in + t_k + t_out
            if isinstance(got, (int, float, np.floating)) and np.isclose(float(got), serial / chunks):
                cause = "that assumes all three engines work on every chunk at the same time; the first chunk must pass all stages in turn."
            elif isinstance(got, (int, float, np.floating)) and np.isclose(float(got), serial):
                cause = "that is the serial time: with chunks, the stages of different chunks overlap."
            else:
                cause = "first chunk through all stages, then one slowest-stage step per further chunk."
            raise Failed(f"t_in={t_in:.3g}, t_kernel={t_k:.3g}, t_out={t_out:.3g}, chunks={chunks}: expected {want:.6g}, got {got!r}.",
                         cause=cause)
    return f"matches labkit's event-by-event pipeline model on {len(cases)} cases (a model of the copy engines and SMs)."
