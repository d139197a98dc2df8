"""Checks for lab 05 (CuPy): device-agnostic code, the fusion traffic model, ElementwiseKernel, ReductionKernel,
RawKernel in CUDA C++, and the copy/compute pipeline model.

CUDA C++ answers are graded in two ways. On a GPU, the learner's kernel runs on fresh random inputs of several
sizes (smaller than a block, not multiples, multiples) against NumPy, into poisoned outputs with guard zones.
In ``sim`` mode the source is compiled with NVRTC for sm_70, sm_80 and sm_90 (those of them the installed NVRTC
targets: NVRTC 13 has no sm_70, which is then skipped with a note), its PTX entry is inspected (name,
``extern "C"``, parameter count and types, a comparison with the size that steers a branch or store), and,
where a C++ compiler is installed, the same source runs on the CPU stand-in (:mod:`labkit.cuda_cpp`) with the
same inputs and guard zones. The success message says which of these happened.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from labkit.gpu.cupylab import cupy_or_none

from ..cuda.cpp import HostUnavailable
from ..errors import CompileError, LabkitError
from .answers import number
from .core import Failed, Unsolved, exercise
from .harness import compare, random_array, sizes_for
from .numeric import need_function
from .slips import INPUT_CAUSE, input_written, merge_slips, unit_cause

ARCHES = ("sm_70", "sm_80", "sm_90")


def _arches() -> str:
    """The architectures compiled for, and a note for those the installed NVRTC cannot target."""
    from labkit.cuda.cpp import arches_compiled

    return arches_compiled(ARCHES)


_COMPILED: dict[tuple[str, str], dict[str, Any]] = {}


def _compile_all(source: str, name: str) -> dict[str, Any]:
    """PTX for every course architecture NVRTC targets (kept for the session: a check run again reuses it)."""
    from labkit.cuda.cpp import compile_for

    key = (source, name)
    if key in _COMPILED:
        return _COMPILED[key]
    try:
        _COMPILED[key] = compile_for(source, name, ARCHES)
        if len(_COMPILED) > 64:
            _COMPILED.pop(next(iter(_COMPILED)))
        return _COMPILED[key]
    except CompileError as exc:
        raise Failed(
            f"the CUDA C++ does not compile:\n{_with_source_line(str(exc), source)}",
            cause="read NVRTC's first error and the line it names.",
        ) from None


def fp64_failure(compiled: dict[str, Any], what: str) -> Failed | None:
    """A :class:`Failed` when the PTX of a kernel whose data are all float32 computes in FP64 (a C++ double literal
    such as ``0.5``, ``fabs``/``sqrt`` on a double, a ``double`` variable): the statement asks for FP32 throughout."""
    ptx = compiled.get("sm_80") or next(iter(compiled.values()), None)
    lines = ptx.fp64() if ptx is not None else []
    if not lines:
        return None
    ops = sorted({ln.split(None, 1)[0].rstrip(";") for ln in lines})
    return Failed(
        f"{what} computes in double precision: its PTX has {len(lines)} FP64 instruction(s) "
        f"({', '.join(f'`{o}`' for o in ops[:4])}{', ...' if len(ops) > 4 else ''}) although every input "
        "and output is float32.",
        cause="in C++ a literal such as 0.5 or 1.0 is a double, and so is what it touches: write 0.5f, use "
        "the float functions (fabsf, sqrtf, expf) and float variables. FP64 runs at a small fraction "
        "of the FP32 rate on most GPUs (labkit.hw.arithmetic_rates).",
    )


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


def _called(fn: Callable[..., Any], *args: Any, what: str, where: str = "") -> Any:
    """``fn(*args)``, the learner's function: NotImplementedError passes (the exercise is unsolved), any other
    exception becomes a :class:`Failed` saying ``what`` raised it and ``where`` (e.g. on which input)."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported to the learner
        raise Failed(f"{what} raised {type(exc).__name__}: {exc}{where}.") from None


def _host_note(exc: Exception) -> str:
    text = str(exc).split("\n")[0]
    return f" The CPU stand-in did not run it ({text}); a GPU run will check its values."


# ----------------------------------------------------------------------------------------- 05.softmax
def _ref_softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_input(shape: tuple[int, ...], dtype: Any, scale: float | None) -> np.ndarray:
    """Random values in ±scale; for ``scale=None`` each row (last axis) gets its own scale from 0.01 to 1000, the
    smallest and the largest both present."""
    from .harness import rng

    if scale is not None:
        return random_array(shape, dtype, -scale, scale)
    scales = 10.0 ** rng().uniform(-2, 3, size=shape[:-1])
    flat = scales.reshape(-1)
    first, second = rng().choice(flat.size, size=2, replace=False)
    flat[first], flat[second] = 0.01, 1000.0
    return (random_array(shape, np.float64, -1, 1) * scales[..., None]).astype(dtype)


def _looks_like_one_max(got: np.ndarray, x: np.ndarray) -> bool:
    """True when ``got`` is the softmax computed with one maximum of the whole array (in the input's precision)."""
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max())
        variant = e / e.sum(axis=-1, keepdims=True)
    return bool(np.allclose(got, variant, rtol=1e-3, atol=1e-9, equal_nan=True))


def _reference_softmax() -> Callable[[Any], Any]:
    from labkit.gpu.cupylab import array_module

    def softmax(x: Any) -> Any:
        xp = array_module(x)
        z = x - x.max(axis=-1, keepdims=True)
        e = xp.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    return softmax


@exercise("05.softmax", kind="code", reference=_reference_softmax)
def softmax(fn: Any) -> str:
    """Grade ``softmax(x)`` over the last axis: NumPy and CuPy inputs, 2-D and 3-D, float32 and float64, large values."""
    need_function(fn, "a function softmax(x)")
    from .draws import between

    cupy = cupy_or_none()
    # fresh shapes each run; values in ±scale, or (None) rows whose scales differ by orders of magnitude (0.01 to 1000
    # within one array), where one maximum of the whole array instead of one per row underflows the small rows to 0/0
    cases = [
        ((between(3, 6), between(5, 40)), np.float32, 1.0),
        ((between(2, 4), between(2, 3), between(20, 70)), np.float64, 1.0),
        ((between(3, 8), between(100, 300)), np.float32, 5.0),
        ((between(2, 4), between(30, 90)), np.float32, 800.0),
        ((between(4, 8), between(16, 64)), np.float32, None),
        ((between(2, 3), between(3, 5), between(8, 40)), np.float64, None),
    ]
    for shape, dtype, scale in cases:
        host = _softmax_input(shape, dtype, scale)
        x = cupy.asarray(host) if cupy is not None else host.copy()  # host stays the copy made before the call
        from labkit.gpu import cupylab

        copies = cupylab.HOST_COPIES[0]
        got = _called(fn, x, what="softmax", where=f" (input shape {shape}, {np.dtype(dtype).name})")
        written = input_written("x", host, cupy.asnumpy(x) if cupy is not None else x, who="your softmax")
        if written:
            raise Failed(
                f"shape {shape}, {np.dtype(dtype).name}: {written}.",
                cause="softmax must return a new array and leave x as it is: `z = x - x.max(axis=-1, "
                "keepdims=True)` makes a new array, `x -= ...` or `xp.exp(x, out=x)` overwrite the input.",
            )
        if got is None or got is Ellipsis:
            raise Unsolved("softmax returns nothing yet; compute and return the result.")
        if cupylab.HOST_COPIES[0] > copies:
            raise Failed(
                f"shape {shape}: your softmax called labkit.cupylab.asnumpy: on a GPU that copies the array to "
                "the host, computes there and (to return a device array) copies it back.",
                cause="keep the work on the device: xp = labkit.cupylab.array_module(x), then xp.exp and the "
                "array's own max/sum; the same code then runs on NumPy and on CuPy arrays.",
            )
        if cupy is not None and not isinstance(got, cupy.ndarray):
            raise Failed(
                f"for a CuPy input, softmax returned a {type(got).__name__}: the data left the GPU.",
                cause="use xp = labkit.cupylab.array_module(x) and xp.exp, not np.exp.",
            )
        if cupy is None and not isinstance(got, np.ndarray):
            raise Failed(f"softmax returned a {type(got).__name__}, not an array.")
        got_h = cupy.asnumpy(got) if cupy is not None else got
        if got_h.shape != shape:
            raise Failed(
                f"softmax of an array of shape {shape} has shape {got_h.shape}.",
                cause="reduce over the last axis with keepdims=True so the result broadcasts back.",
            )
        if got_h.dtype != np.dtype(dtype):
            raise Failed(f"a {np.dtype(dtype).name} input gave a {got_h.dtype} result.", cause="keep the input's dtype.")
        where_vals = f"inputs in [-{scale:g}, {scale:g}]" if scale else "rows scaled from 0.01 to 1000"
        one_max = (
            "one maximum for the whole array makes exp(x - max) underflow to 0 in rows with small values: take "
            "each row's maximum, `x.max(axis=-1, keepdims=True)`."
        )
        if not np.isfinite(got_h).all():
            raise Failed(
                f"shape {shape}, {where_vals}: the result has inf or nan.",
                cause=one_max if scale is None else "exp overflows for large inputs: subtract each row's maximum first.",
            )
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        try:
            compare(
                got_h.astype(np.float64),
                _ref_softmax(host),
                label=f"shape {shape}, {np.dtype(dtype).name}, {where_vals}",
                rtol=rtol,
                atol=1e-7,
            )
        except Failed as exc:
            rows = got_h.sum(axis=-1)
            if _looks_like_one_max(got_h, host) or (scale is None and not np.allclose(rows, 1.0, rtol=1e-3)):
                raise Failed(str(exc), cause=one_max) from None
            if not np.allclose(rows, 1.0, rtol=1e-3):
                raise Failed(
                    str(exc),
                    cause="each row of a softmax sums to 1: normalise over the last axis "
                    "(`e.sum(axis=-1, keepdims=True)`), not over the whole array or another axis.",
                ) from None
            raise
    where = "CuPy arrays on the GPU (results stayed on the device)" if cupy is not None else "NumPy arrays (sim mode)"
    return (
        f"correct on {len(cases)} fresh inputs ({where}), 2-D and 3-D, float32 and float64, values up to ±800 and rows "
        "whose scales differ by orders of magnitude."
    )


# ----------------------------------------------------------------------------------------- 05.fusion-traffic
FUSION_N = 1 << 20


def scaled_squared_error(x: Any, y: Any, w: float, b: float) -> Any:
    """The expression of exercise 05.fusion-traffic."""
    return w * (x - y) * (x - y) + b


def _traffic() -> Any:
    from labkit.gpu.cupylab import traffic

    return traffic(scaled_squared_error, FUSION_N, "float32", scalars=("w", "b"))


_FUSION_KEYS = ("launches_unfused", "bytes_unfused", "launches_fused", "bytes_fused")


def _fusion_slips() -> dict[str, dict[float, str]]:
    """Plausible wrong answers of 05.fusion-traffic, per key: {value: cause}."""
    t = _traffic()
    n4 = 4 * FUSION_N
    return {
        "launches_unfused": {
            4.0: "x - y is computed twice: Python evaluates both (x - y) factors, so 5 kernels, not 4.",
            3.0: "count the multiplication by w and the addition of b too: a scalar operand still needs a kernel.",
        },
        "bytes_unfused": {
            t.bytes_unfused / 4: "that counts elements; each float32 is 4 bytes.",
            t.bytes_unfused * 8: "that is bits; give bytes.",
            float(t.bytes_unfused - 3 * n4): "x - y is computed twice: its second kernel reads x and y and writes again.",
            float(t.bytes_unfused + 2 * n4): "a scalar (w, b) costs no memory traffic: only array operands are read.",
        },
        "launches_fused": {float(t.launches_unfused): "fused, the whole expression is one kernel."},
        "bytes_fused": {
            t.bytes_fused / 4: "that counts elements; each float32 is 4 bytes.",
            float(t.bytes_fused + 2 * n4): "x and y are read once each, even though x - y appears twice.",
            float(t.bytes_unfused): "that is the unfused traffic; fused, temporaries stay in registers.",
        },
    }


@exercise("05.fusion-traffic", kind="numeric", reference=lambda: {k: getattr(_traffic(), k) for k in _FUSION_KEYS})
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
    slips = _fusion_slips()
    for k in _FUSION_KEYS:
        want = getattr(t, k)
        got = number(answer[k], k)
        if got != want:  # counts of launches and bytes: exact
            cause = next((c for v, c in slips[k].items() if got == v), None) or unit_cause(got, want) or causes[k]
            raise Failed(f"{k} = {got:,g} is not right for n = {FUSION_N:,} float32 elements.", cause=cause)
    return (
        f"right: {t.launches_unfused} launches and {t.bytes_unfused / 1e6:.1f} MB unfused, 1 launch and "
        f"{t.bytes_fused / 1e6:.1f} MB fused: {t.ratio:.2f}x less traffic (a model; a GPU run measures it)."
    )


# ----------------------------------------------------------------------------------------- 05.huber (ElementwiseKernel)
def _huber_ref(x: np.ndarray, y: np.ndarray, delta: float) -> np.ndarray:
    d = np.abs(x.astype(np.float64) - y)
    return np.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def _reference_huber() -> Any:
    from labkit.cuda.sources import get
    from labkit.gpu.cupylab import elementwise_kernel

    p = get("huber").parts
    return elementwise_kernel(p["in_params"], p["out_params"], p["operation"], "huber")


def _as_parts(k: Any) -> Any:
    from labkit.gpu.cupylab import Elementwise, Reduction

    if isinstance(k, (Elementwise, Reduction)):
        return k
    return None


def _kernel_parts(kernel: Any, kind: str) -> Any:
    """The labkit pieces of ``kernel`` (None for a real CuPy kernel of this ``kind``: ``"elementwise"`` or
    ``"reduction"``), or a :class:`Failed` naming what was expected."""
    cupy = cupy_or_none()
    parts = _as_parts(kernel)
    cls = {"elementwise": "ElementwiseKernel", "reduction": "ReductionKernel"}[kind]
    if parts is None and not (cupy is not None and isinstance(kernel, getattr(cupy, cls))):
        raise Failed(f"expected labkit.cupylab.{kind}_kernel(...) (or a cupy.{cls}), got {type(kernel).__name__}.")
    return parts


def _declared(kernel: Any, kind: str) -> tuple[Any, list[Any], list[Any]]:
    """The labkit pieces of the learner's ``kind`` kernel (see :func:`_kernel_parts`) with its parsed inputs and
    outputs; for a real CuPy kernel None and two empty lists."""
    parts = _kernel_parts(kernel, kind)
    if parts is None:
        return None, [], []
    ins, outs = _params(parts)
    return parts, ins, outs


def _params(parts: Any) -> tuple[list[Any], list[Any]]:
    """The parsed ``in_params`` and ``out_params`` of a labkit kernel; a mistake in them is a :class:`Failed`."""
    from labkit.cuda.cpp import parse_params

    try:
        return parse_params(parts.in_params, "in_params"), parse_params(parts.out_params, "out_params")
    except LabkitError as exc:
        raise Failed(str(exc)) from None


@contextmanager
def _stand_in_errors() -> Iterator[None]:
    """Around a run on the CPU stand-in: any other LabkitError (even an Unsolved) becomes a :class:`Failed` with its
    message; a Failed, and HostUnavailable (no stand-in here: the caller says what was checked), pass through."""
    try:
        yield
    except (Failed, HostUnavailable):
        raise
    except LabkitError as exc:
        raise Failed(str(exc)) from None


def _compiled_only(exc: Exception) -> str:
    """The message when NVRTC compiled the kernel but the CPU stand-in could not run it."""
    return f"compiles for {_arches()} with NVRTC." + _host_note(exc)


def _refuse_fp64(compiled: dict[str, Any], what: str) -> None:
    """Raise :func:`fp64_failure`'s :class:`Failed` when the PTX computes in FP64."""
    slow = fp64_failure(compiled, what)
    if slow is not None:
        raise slow


@exercise("05.huber", kind="kernel", reference=_reference_huber)
def huber(kernel: Any) -> str:
    """Grade an elementwise kernel ``huber(x, y, delta) -> z`` (labkit.cupylab.elementwise_kernel or cupy.ElementwiseKernel)."""
    parts, ins, outs = _declared(kernel, "elementwise")
    if parts is not None:
        if len(ins) != 3 or len(outs) != 1:
            raise Failed(
                f"huber takes three inputs (x, y, delta) and gives one output; yours has {len(ins)} and {len(outs)}.",
                cause="in_params = 'float32 x, float32 y, float32 delta', out_params = 'float32 z'.",
            )
        compiled = _compile_all(parts.source(), parts.name)
    delta = float(np.float32(np.random.default_rng().uniform(0.2, 0.8)))
    sizes = [391, 1, 127, 128, 129, 1000]
    # a kernel written for a placeholder type (T x, T y, ...) must also be right for float64, as CuPy instantiates it
    generic = any(p.generic for p in ins + outs)
    cupy = cupy_or_none()
    cases: list[tuple[int, Any]] = ([(257, np.float64)] if generic else []) + [(n, np.float32) for n in sizes]
    xp = cupy if cupy is not None else np
    run = (kernel.cupy() if parts is not None else kernel) if cupy is not None else kernel
    if cupy is not None:
        cases.append((1_000_003, np.float32))
    try:
        with _stand_in_errors():
            for n, dt in cases:
                x, y = random_array(n, dt), random_array(n, dt)
                x0, y0 = x.copy(), y.copy()
                dx, dy = (cupy.asarray(x), cupy.asarray(y)) if cupy is not None else (x, y)
                z = run(dx, dy, dt(delta))
                for name, before, arr in (("x", x0, dx), ("y", y0, dy)):
                    written = input_written(name, before, cupy.asnumpy(arr) if cupy is not None else arr, who="your kernel")
                    if written:
                        raise Failed(f"n={n}: {written}.", cause=INPUT_CAUSE)
                z = np.asarray(cupy.asnumpy(z) if cupy is not None else z)
                label = f"n={n}, {np.dtype(dt).name}"
                if dt == np.float64 and z.dtype != np.float64:
                    raise Failed(
                        f"{label}: the kernel is written for a placeholder type, but float64 inputs gave a {z.dtype} result.",
                        cause="an output of type T gets the inputs' type: declare z as T too.",
                    )
                want = _huber_ref(x0, y0, delta)
                tol = 1e-12 if dt == np.float64 else 1e-5
                try:
                    compare(z.astype(np.float64), want, label=label, rtol=tol, atol=tol / 10)
                except Failed as exc:
                    raise Failed(str(exc), cause=_huber_cause(z.astype(np.float64), x0, y0, delta, dt) or exc.cause) from None
    except HostUnavailable as exc:
        return _compiled_only(exc)
    del xp
    if parts is not None and not generic:
        _refuse_fp64(compiled, "the kernel gives the right values, but it")
    if cupy is not None:
        return f"correct on the GPU for {len(cases)} sizes up to 1,000,003 (compiled by CuPy)."
    return (
        f"compiles for {_arches()} with NVRTC, and its values are right on {len(cases)} sizes on the CPU "
        "stand-in (labkit's equivalent of CuPy's elementwise kernel)"
        + (", float64 too (its placeholder type)" if generic else ", computing in FP32 only (no FP64 in its PTX)")
        + ". A GPU run checks the real cupy.ElementwiseKernel."
    )


def _huber_cause(got: np.ndarray, x: np.ndarray, y: np.ndarray, delta: float, dtype: Any) -> str | None:
    """The slip whose values ``got`` matches: each candidate is the Huber loss with one plausible mistake."""
    diff = x.astype(np.float64) - y
    d = np.abs(diff)
    quad, lin = 0.5 * d * d, delta * (d - 0.5 * delta)
    candidates = [
        (
            "the absolute value is missing: with d = x - y, every negative difference takes the quadratic branch. Use "
            "fabsf(x - y).",
            np.where(diff <= delta, 0.5 * diff * diff, delta * (diff - 0.5 * delta)),
        ),
        (
            "the branches are swapped: the quadratic 0.5·d² is for small differences (d <= delta), the linear one for large.",
            np.where(d <= delta, lin, quad),
        ),
        ("the quadratic branch lacks its factor 0.5: it is 0.5f * d * d.", np.where(d <= delta, d * d, lin)),
        (
            "the linear branch is delta * (d - 0.5f * delta): the `- 0.5f * delta` keeps the two branches meeting at d = delta.",
            np.where(d <= delta, quad, delta * d),
        ),
        ("that is 0.5·d² everywhere: large differences take the linear branch delta * (d - 0.5f * delta).", quad),
        ("that is |x - y| everywhere: small differences take the quadratic branch 0.5f * d * d.", d),
    ]
    for cause, cand in candidates:
        if np.allclose(got, cand, rtol=1e-4, atol=1e-6):
            return cause
    if dtype == np.float64 and np.allclose(got, _huber_ref(x, y, delta), rtol=1e-5, atol=1e-6):
        return (
            "right in float32 precision only: for T = double, fabsf and 0.5f compute in float. Use fabs (or abs) and "
            "plain constants (0.5), which follow T."
        )
    return None


# ----------------------------------------------------------------------------------------- 05.l2norm (ReductionKernel)
def _reference_l2norm() -> Any:
    from labkit.cuda.sources import get
    from labkit.gpu.cupylab import reduction_kernel

    p = get("l2norm").parts
    return reduction_kernel(
        p["in_params"], p["out_params"], p["map_expr"], p["reduce_expr"], p["post_map_expr"], p["identity"], "l2norm"
    )


@exercise("05.l2norm", kind="kernel", reference=_reference_l2norm)
def l2norm(kernel: Any) -> str:
    """Grade a reduction ``l2norm(x) -> y`` (labkit.cupylab.reduction_kernel or cupy.ReductionKernel)."""
    parts, ins, outs = _declared(kernel, "reduction")
    if parts is not None:
        try:
            source = parts.source()
        except LabkitError as exc:
            raise Failed(str(exc)) from None
        if len(ins) != 1 or len(outs) != 1:
            raise Failed(f"l2norm takes one input and gives one output; yours has {len(ins)} and {len(outs)}.")
        compiled = _compile_all(source, parts.name)
    generic = any(p.generic for p in ins + outs)
    if parts is not None:
        _require_tree_safe(parts.reduce_expr)
    cupy = cupy_or_none()
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
        with _stand_in_errors():
            results = []
            for n in sizes:
                x = random_array(n)
                x0 = x.copy()
                value = float(kernel(x))
                written = input_written("x", x0, x, who="your reduction")
                if written:
                    raise Failed(f"n={n}: {written}.", cause=INPUT_CAUSE)
                results.append((n, value, float(np.linalg.norm(x0.astype(np.float64)))))
            zero = float(kernel(np.zeros(ZERO_N, np.float32)))
            if generic:  # a placeholder type must be right for float64 too, to float64's precision (sqrtf would round)
                x64 = np.random.default_rng().uniform(-1, 1, 257)  # not exactly representable in float32
                value64, want64 = _reduce_float64(parts, x64), float(np.linalg.norm(x64))
    except HostUnavailable as exc:
        return _compiled_only(exc)
    _grade_l2norm(results, zero)
    if generic and not abs(value64 - want64) <= 1e-12 * want64:
        raise Failed(
            f"n=257, float64: expected {want64!r}, got {value64!r} (relative error {abs(value64 - want64) / want64:.1e}).",
            cause="right in float32 precision only: for T = double a float function (sqrtf) or a float "
            "literal rounds to float. Use sqrt (it follows the type) and plain constants.",
        )
    if parts is not None:  # for a placeholder T, its float32 instantiation (what compiled holds) must stay FP32
        slow = fp64_failure(compiled, "the reduction gives the right norms, but " + ("for T = float32 it" if generic else "it"))
        if slow is not None and generic:
            raise Failed(
                str(slow),
                cause="for T = float a double literal (1.0, 0.5) or a double variable turns the arithmetic into FP64: "
                "write constants as T(0.5) or whole numbers (0, 2), and use sqrt, which follows the type.",
            )
        if slow is not None:
            raise slow
    return (
        f"compiles for {_arches()} with NVRTC, and gives the norm on {len(sizes)} sizes on the CPU stand-in "
        "(4 partial results combined, as a tree reduction would)"
        + (", and to float64 precision for T = double (FP32 only for T = float32)" if generic else ", in FP32 only")
        + ". A GPU run checks the real cupy.ReductionKernel."
    )


def _require_tree_safe(reduce_expr: str) -> None:
    """Fail a ``reduce_expr`` that is not commutative and associative (``a - b``, ``a / b``): CuPy combines partial
    results in a tree whose shape and order depend on the launch, so the combine must not care about either. The
    CPU stand-in's two levels can hide it (``0 - (0 - x)`` is ``x``), so the expression is tried on exact numbers
    here; an expression this cannot read as arithmetic (a ternary, a cast) is left to the runs."""
    import ast

    text = reduce_expr.strip().rstrip(";")
    names = {"max": max, "min": min, "fmax": max, "fmin": min, "fmaxf": max, "fminf": min}
    try:
        tree = ast.parse(text, mode="eval")
        if any(isinstance(n, ast.Name) and n.id not in ("a", "b", *names) for n in ast.walk(tree)):
            return
        code = compile(tree, "<reduce_expr>", "eval")
        f = lambda a, b: eval(code, {"__builtins__": {}, **names}, {"a": a, "b": b})  # noqa: E731, S307
        x, y, z = 1.5, 2.25, 4.0  # dyadic: every sum, difference and product is exact
        swapped, regrouped = (f(x, y), f(y, x)), (f(f(x, y), z), f(x, f(y, z)))
    except Exception:  # noqa: BLE001 - not plain arithmetic: the runs judge it
        return
    if swapped[0] != swapped[1] or regrouped[0] != regrouped[1]:
        raise Failed(
            f"reduce_expr `{text}` gives {swapped[0]:g} for (a, b) = ({x:g}, {y:g}) but {swapped[1]:g} for "
            f"({y:g}, {x:g}), or {regrouped[0]:g} and {regrouped[1]:g} for the same three values grouped two ways.",
            cause="the combine should be commutative and associative (a + b for a sum): CuPy combines the partial "
            "results in a tree, in an order and shape set by the launch, and the CPU stand-in's two levels can hide "
            "a combine that is neither (0 - (0 - x) is x).",
        )


def _reduce_float64(parts: Any, x: np.ndarray) -> float:
    """Run a reduction written for a placeholder type ``T`` with T = double on the CPU stand-in, as CuPy would
    instantiate it for a float64 array."""
    from labkit.cuda.cpp import REDUCTION_THREADS, parse_params, reduction_source, run_on_host

    types = {p.generic: "float64" for p in parse_params(parts.in_params, "in_params") if p.generic}
    out = np.zeros(1, dtype=np.float64)
    run_on_host(
        reduction_source(parts, types=types),
        parts.name,
        (1,),
        (REDUCTION_THREADS,),
        (np.ascontiguousarray(x, dtype=np.float64), out, np.int64(x.size)),
    )
    return float(out[0])


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
        return (
            "an array of zeros gave inf or NaN: the identity must leave a value unchanged under your reduce expression "
            "(0 for a sum)."
        )
    if zero == 0.0 and not np.isfinite(got).all():
        return (
            "the result is NaN or inf: the root of a negative sum? Square each element in the map (`x * x`), add in the "
            "reduce (`a + b`), take the root in the post-map."
        )
    if zero != 0.0:
        extra = (
            ", and the result is the sum of squares (no sqrt in the post-map)"
            if np.allclose(got, want**2 + zero, rtol=1e-3)
            else ""
        )
        return (
            f"a wrong identity: an array of {ZERO_N} zeros gave {zero:.4g}, not 0{extra}. The identity is combined with "
            "partial results many times, so it must leave a value unchanged under your reduce expression: 0 for a sum."
        )
    if np.allclose(got, want**2, rtol=1e-4, atol=1e-6):
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
    from labkit.cuda.sources import LEAKY_RELU

    return LEAKY_RELU


LEAKY_SIGNATURE = ("u64", "u64", "f32", ("u32", "s32", "b32"))


@exercise("05.leaky-relu", kind="kernel", reference=lambda: _leaky_reference())
def leaky_relu(source: Any) -> str:
    """Grade CUDA C++ source defining ``extern "C" __global__ void leaky_relu(const float* x, float* y, float alpha, int n)``."""
    from labkit.cuda.cpp import find_entry, guards_with, run_on_host_batch, stores_global

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
            raise Failed(
                f"parameter {k} compiles to a {got}, but it should be `{names[k]}`.",
                cause="keep the signature (const float* x, float* y, float alpha, int n).",
            )
    if not stores_global(entry):
        raise Unsolved("the kernel compiles but writes nothing yet; write its body.")
    if not guards_with(entry, 3):
        raise Failed(
            "no comparison with n controls what the threads do: threads past the end would write out of bounds.",
            cause="a missing bounds check: wrap the body in `if (i < n) { ... }`.",
        )
    alpha = float(np.float32(np.random.default_rng().uniform(0.05, 0.3)))
    cupy = cupy_or_none()
    if cupy is not None:
        return _leaky_relu_gpu(cupy, source, alpha)
    runs = []
    # the multiple of the block is past 65,536 (the stand-in runs it in milliseconds): a 16-bit index, signed or
    # unsigned, wraps there
    big = 547 * 128
    for block in (128, 96):  # 96: not a power of two, so a shift for the multiply or a fixed block size shows
        for n in [big if m == 5 * block else m for m in sizes_for(block)] if block == 128 else [3 * block + 7]:
            x = random_array(n)
            y = np.full(n, np.nan, np.float32)
            grid = (n + block - 1) // block + 1  # one block more than needed: the bounds check must hold
            runs.append((x, y, n, block, grid))
    originals = [x.copy() for x, *_ in runs]
    try:
        report = run_on_host_batch(
            source, "leaky_relu", [((g,), (b,), (x, y, np.float32(alpha), np.int32(n))) for x, y, n, b, g in runs]
        )
    except HostUnavailable as exc:
        return (
            f"compiles for {_arches()}; entry leaky_relu(u64, u64, f32, u32) found; a comparison with n "
            "guards its work (read from the PTX)." + _host_note(exc)
        )
    except LabkitError as exc:
        from .causes import axis_cause, wrapped_index_in  # a race of threads: threadIdx.y, or a 16-bit index

        said = str(exc).split("\n")[0]
        told = axis_cause(source, None, None) or wrapped_index_in(said) if "race" in said else None
        raise Failed(said, cause=told or exc.fix) from None
    for (x, y, n, block, grid), outside, x0 in zip(runs, report, originals):
        label = f"n={n}, {grid} block(s) of {block} threads"
        if outside:
            cause = (
                "an index that went below 0: a 16-bit index (short) wraps past 32,767 to negative values; compute i as an int."
                if "before the start" in outside and n > 32767
                else "a write before the start of the array: an index below 0."
                if "before the start" in outside
                else "a wrong bounds check (`i <= n`?): only threads with i < n may write."
            )
            raise Failed(f"{label}: {outside}.", cause=cause)
        written = input_written("x", x0, x, who="your kernel")
        if written:
            raise Failed(
                f"{label}: {written}.",
                cause="x is `const float*`: read it, write only y (a cast that drops the const, or a write "
                "to x[i], destroys the input).",
            )
        want = np.where(x0 > 0, x0, np.float32(alpha) * x0).astype(np.float32)
        try:
            compare(y, want, label=label, unwritten_means_unsolved=False)
        except Failed as exc:
            wrapped = n > 65536 and np.isnan(y[65536:]).any() and not np.isnan(y[:65536]).any()
            cause = (
                "elements from 65,536 on were never written: a 16-bit index (unsigned short) wraps to 0 there, so "
                "those threads wrote the first elements again. Compute i as an int."
                if wrapped
                else None
            )
            from .causes import axis_cause  # threadIdx.y in a one-dimensional launch (x and y swapped)

            cause = cause or axis_cause(source, (grid,), (block,)) or _leaky_cause(y, x0, alpha)
            raise Failed(str(exc), cause=cause or exc.cause) from None
    _refuse_fp64(ptx, "the kernel gives the right values, but it")
    return (
        f"compiles for {_arches()}; entry and bounds check found in the PTX; correct on {len(runs)} launches "
        f"on the CPU stand-in (up to {big:,} elements, past 65,536), with a spare block and no writes out of bounds, "
        "in FP32 only (no FP64 in its PTX). A GPU run checks it with cupy.RawKernel."
    )


def _leaky_cause(y: np.ndarray, x: np.ndarray, alpha: float) -> str | None:
    """The slip whose values ``y`` (all written) matches, or None."""
    a = np.float32(alpha)
    if not np.isfinite(y).all():
        return None
    for cause, cand in (
        ("negative inputs pass unchanged: they must be multiplied by alpha (`v > 0.0f ? v : alpha * v`).", x),
        ("every element is multiplied by alpha: only negative ones are; positive ones pass unchanged.", a * x),
        ("that is a plain ReLU (negatives become 0): a leaky ReLU gives alpha * v for negative v.", np.maximum(x, 0)),
        (
            "the branches are swapped: positive inputs pass unchanged, negative ones are multiplied by alpha.",
            np.where(x > 0, a * x, x),
        ),
    ):
        if np.allclose(y, cand, rtol=1e-5, atol=1e-7):
            return cause
    return None


def _leaky_relu_gpu(cupy: Any, source: str, alpha: float) -> str:
    kernel = cupy.RawKernel(source, "leaky_relu")
    guard = 1024
    runs = 0
    for block in (32, 128, 256):
        for n in sizes_for(block):
            x = random_array(n)
            buf = cupy.full(n + 2 * guard, cupy.nan, dtype=cupy.float32)
            y = buf[guard : guard + n]
            grid = (n + block - 1) // block
            dx = cupy.asarray(x)
            kernel((grid,), (block,), (dx, y, np.float32(alpha), np.int32(n)))
            cupy.cuda.Device().synchronize()
            written = input_written("x", x, cupy.asnumpy(dx), who="your kernel")
            if written:
                raise Failed(f"n={n}, block {block}: {written}.", cause="x is `const float*`: read it, write only y.")
            full = cupy.asnumpy(buf)
            if not (np.isnan(full[:guard]).all() and np.isnan(full[guard + n :]).all()):
                raise Failed(
                    f"n={n}, block {block}: the kernel wrote outside the output array.",
                    cause="a missing or wrong bounds check: only threads with i < n may write.",
                )
            compare(
                full[guard : guard + n],
                np.where(x > 0, x, np.float32(alpha) * x).astype(np.float32),
                label=f"n={n}, {grid} block(s) of {block}",
                unwritten_means_unsolved=runs == 0,
            )
            runs += 1
    return f"correct on the GPU in {runs} launches (sizes up to 1,000,003, blocks of 32, 128, 256), no writes out of bounds."


# ----------------------------------------------------------------------------------------- 05.pipeline
def _reference_pipeline() -> Callable[..., float]:
    def pipelined_time(t_in: float, t_kernel: float, t_out: float, chunks: int) -> float:
        return (t_in + t_kernel + t_out) / chunks + (chunks - 1) * max(t_in, t_kernel, t_out) / chunks

    return pipelined_time


@exercise("05.pipeline", kind="numeric", reference=_reference_pipeline)
def pipeline_time(fn: Any) -> str:
    """Grade ``pipelined_time(t_in, t_kernel, t_out, chunks)`` against labkit's event-by-event pipeline model."""
    from labkit.gpu.cupylab import pipeline

    need_function(fn, "a function pipelined_time(t_in, t_kernel, t_out, chunks)")
    from .harness import rng as _rng

    rng = _rng()
    # fresh cases each run: one chunk, copies slower than the kernel, the kernel slowest, and random mixes
    big, small = (float(v) for v in rng.uniform(1.5, 5.0, 2)), float(rng.uniform(0.1, 0.9))
    copy, kern = next(big), next(big)
    cases = [
        (copy, small, copy * float(rng.uniform(0.8, 1.2)), 1),
        (copy, small, copy, int(rng.integers(4, 17))),
        (small, kern, small * 0.5, int(rng.integers(2, 9))),
    ]
    cases += [(*(float(v) for v in rng.uniform(0.1, 5.0, 3)), int(rng.integers(2, 33))) for _ in range(5)]
    # the same chunk count again with other times, and the same times again: an answer that remembers results by
    # chunk count (or by call) gives itself away
    cases += [(float(rng.uniform(0.1, 5.0)), float(rng.uniform(0.1, 5.0)), float(rng.uniform(0.1, 5.0)), cases[1][3]), cases[4]]
    seen: list[tuple[tuple[float, float, float, int], float]] = []
    for t_in, t_k, t_out, chunks in cases:
        got = _called(fn, t_in, t_k, t_out, chunks, what="pipelined_time")
        if got is None or got is Ellipsis:
            raise Unsolved("pipelined_time returns nothing yet.")
        want = pipeline(t_in, t_k, t_out, chunks).makespan_s
        got = number(got, "the time pipelined_time returns")
        if not np.isclose(got, want, rtol=1e-6):  # float32 arithmetic (np.float32 inputs or result) is right too
            serial = t_in + t_k + t_out
            slow = max(t_in, t_k, t_out)
            variants = {
                "the further chunks each add the slowest stage's time for one chunk: divide it by chunks too "
                "(max(t_in, t_kernel, t_out) / chunks).": serial / chunks + (chunks - 1) * slow,
                "after the first chunk, (chunks - 1) further chunks follow, not chunks.": serial / chunks
                + chunks * slow / chunks,
                "the pace after the first chunk is set by the slowest stage, max(...), not by the sum of the stages.": serial
                / chunks
                + (chunks - 1) * serial / chunks,
                "the first chunk passes all three stages in turn: (t_in + t_kernel + t_out) / chunks, not the slowest "
                "stage alone.": slow / chunks + (chunks - 1) * slow / chunks,
                "that is the serial time: with chunks, the stages of different chunks overlap.": serial,
            }
            variants = merge_slips({c: v for c, v in variants.items() if not np.isclose(v, want, rtol=1e-6)}, 1e-6)
            match = next((c for c, v in variants.items() if np.isclose(got, v, rtol=1e-6)), None)
            again = next((a for a, g in seen if a[3] == chunks and a != (t_in, t_k, t_out, chunks) and g == got), None)
            if again:
                cause = (
                    f"it returned exactly what it returned for the earlier call with the same chunks={chunks} but "
                    f"other times ({again[0]:.3g}, {again[1]:.3g}, {again[2]:.3g}): compute from every argument on "
                    "every call (a result remembered by chunk count is wrong for other times)."
                )
            elif match:
                cause = match
            elif np.isclose(got, serial / chunks):
                cause = "that assumes all three engines work on every chunk at the same time; the first chunk must pass all stages in turn."
            elif np.isclose(got, max(t_in, t_k, t_out)):
                cause = "the slowest stage alone is the limit for many chunks; the first chunk still passes every stage."
            elif np.isclose(got, serial):
                cause = "that is the serial time: with chunks, the stages of different chunks overlap."
            else:
                cause = unit_cause(got, want) or "first chunk through all stages, then one slowest-stage step per further chunk."
            raise Failed(
                f"t_in={t_in:.3g}, t_kernel={t_k:.3g}, t_out={t_out:.3g}, chunks={chunks}: expected {want:.6g}, got {got!r}.",
                cause=cause,
            )
        seen.append(((t_in, t_k, t_out, chunks), got))
    return f"matches labkit's event-by-event pipeline model on {len(cases)} fresh cases (a model of the copy engines and SMs)."


# ----------------------------------------------------------------------------------------- 05.streams
def _reference_streams() -> Callable[..., float]:
    def pipeline(cp: Any, x: Any, out: Any, kernel: Any, chunks: int, n_streams: int) -> float:
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
            s = streams[c % n_streams]
            with s:
                d_in, d_out = cp.empty(hi - lo, x.dtype), cp.empty(hi - lo, x.dtype)
                d_in.set(x[lo:hi])
                kernel(d_in, d_out)
                d_out.get(out=out[lo:hi], blocking=False)
        for s in streams[1:]:
            streams[0].wait_event(s.record())
        end.record(streams[0])
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)

    return pipeline


def _pipeline_rates() -> dict[str, float]:
    """GB/s of the stand-in's model clock: an H200 on PCIe 5 (labkit.hw), so the copies dominate as on a real GPU."""
    from labkit.gpu.cupylab import transfer_model

    tm = transfer_model(1 << 30)
    return {"h2d": tm.link_gbps, "d2h": tm.link_gbps, "d2d": tm.hbm_gbps, "kernel": tm.hbm_gbps}


def _run_pipeline_standin(
    fn: Any, n: int, chunks: int, n_streams: int, a: float, b: float
) -> tuple[Any, Any, np.ndarray, Any, np.ndarray]:
    """One run on the recording stand-in: (record, returned value, x after the call, out, a copy of x made before)."""
    from .streams import RecordingCuPy, call_learner

    rec = RecordingCuPy(_pipeline_rates())
    x = random_array(n)
    x_before = x.copy()
    out = np.full(n, np.nan, np.float32)
    rec.pinned += [x, out]

    def scale_shift(src: np.ndarray, dst: np.ndarray) -> None:
        np.multiply(src, np.float32(a), out=dst)
        dst += np.float32(b)

    kernel = rec.kernel(scale_shift, "scale_shift")
    got = call_learner(
        fn, rec, x, out, kernel, chunks, n_streams, what=f"pipeline(cp, x, out, kernel, chunks={chunks}, n_streams={n_streams})"
    )
    return rec, got, x, out, x_before


def _grade_pipeline_record(fn: Any, n: int, chunks: int, n_streams: int) -> str:
    """One stand-in run: values, hazards, the host's view, events, and the overlap against the reference schedule."""
    from .answers import number
    from .streams import BLOCKING_STREAM_CAUSE, blocking_stream_problem, describe_hazard

    rng = np.random.default_rng()
    a, b = float(rng.uniform(0.5, 3.0)), float(rng.uniform(-2.0, 2.0))
    label = f"n={n}, chunks={chunks}, n_streams={n_streams}"
    rec, got, x, out, x_before = _run_pipeline_standin(fn, n, chunks, n_streams, a, b)
    if not rec.ops:
        if (got is not None and got is not Ellipsis) or not np.isnan(out).all():
            raise Failed(
                f"{label}: pipeline() returned or wrote results without issuing a single copy or kernel on the "
                "stand-in's streams.",
                cause="the work must go through cp: copy each chunk in (d_in.set(x[lo:hi])), run kernel(d_in, "
                "d_out) and copy it out (d_out.get(out=out[lo:hi], blocking=False)) on the streams; "
                "computing on the host measures nothing.",
            )
        raise Unsolved("pipeline() issued no copies or kernels yet; write its body.")
    kinds = [o.kind for o in rec.ops]
    if "h2d" not in kinds or "d2h" not in kinds or "kernel" not in kinds:
        raise Failed(
            f"{label}: the function must copy each chunk in (d.set(...)), run kernel(d_in, d_out) and copy it "
            f"out (d.get(out=..., blocking=False)); it issued {', '.join(sorted(set(kinds)))} only."
        )
    hazards = rec.hazards()
    if hazards:
        first = hazards[0]
        raise Failed(
            f"{label}: {describe_hazard(*first)}",
            cause="keep a chunk's copy in, kernel and copy out on one stream (they then run in order), give "
            "every chunk its own device buffers, or make one stream wait for the other with "
            "stream.wait_event(event).",
        )
    if not np.array_equal(x, x_before):
        k = int(np.argmax(x != x_before))
        raise Failed(
            f"{label}: your function wrote into its input x (x[{k}] was {x_before[k]!r}, is now {x[k]!r}).",
            cause="x is the data to copy in: leave it as it is. Copy results into `out` "
            "(d_out.get(out=out[lo:hi], blocking=False)), never into x.",
        )
    pageable = rec.pageable_copies()
    if pageable:
        raise Failed(
            f"{label}: {len(pageable)} copies use pageable host memory (the first: {pageable[0].label}), not the "
            "pinned x and out the function was given.",
            cause="copy straight from slices of x and into slices of out (x[lo:hi] is a view of pinned memory; "
            "x[lo:hi].copy() or np.array(...) is a new, pageable buffer): a copy from pageable memory is "
            "staged by the driver, blocks the host and overlaps nothing.",
        )
    want = (a * x_before.astype(np.float64) + b).astype(np.float32)
    bad = ~np.isclose(out, want, rtol=1e-5, atol=1e-5)
    if bad.any():
        i = int(np.argmax(bad))
        nan = bool(np.isnan(out[i]))
        raise Failed(
            f"{label}: out[{i}] is {out[i]!r}, expected {want[i]!r} ({int(bad.sum())} of {n} elements wrong).",
            cause=(
                "that element was never copied back: with n not a multiple of chunks the last chunk is "
                "shorter; use ceil division for the chunk size and min(n, hi) for its end."
            )
            if nan
            else "each chunk must be copied in, passed through kernel(d_in, d_out) and copied back to the same place in out.",
        )
    if not rec.elapsed_reads:
        raise Failed(
            f"{label}: the values are right, but the time was not measured with events.",
            cause="record a start event before the work and an end event after it, end.synchronize(), then "
            "return cupy.cuda.get_elapsed_time(start, end).",
        )
    start, end = rec.elapsed_reads[-1]
    if start._recorded_after > 0:
        raise Failed(
            f"{label}: the start event was recorded after {start._recorded_after} operations had been issued, "
            "so the time misses them.",
            cause="record start before the first copy.",
        )
    early = rec.not_after(start)
    if early:
        on_null = _start_on_null(rec, start)
        where = "which was recorded on the null stream" if on_null else "and their streams never waited for it"
        raise Failed(
            f"{label}: {len(early)} operations (the first: {early[0].label}) are not ordered after the start "
            f"event, {where}: the GPU may run them before it, so the time misses them.",
            cause=(
                "non-blocking streams never wait for the null stream: "
                if on_null
                else "an event marks a point in one stream only: "
            )
            + "record start on one of your streams (start.record(streams[0])) and make every other stream "
            "wait for it (s.wait_event(start)) before the first copy.",
        )
    if not rec.covers_all(end):
        missed = [o for o in rec.ops[: end._recorded_after] if o.index not in rec._ancestors(end._frontier)]
        raise Failed(
            f"{label}: the end event does not wait for all the work: {len(missed)} operations (the first: "
            f"{missed[0].label}) may still run after it, so the time is too short.",
            cause="an event marks a point in one stream only. Record an event on every other stream, make the "
            "end event's stream wait for each (stream.wait_event(ev)), then record end.",
        )
    pending = rec.pending_host_writes()
    if pending:
        raise Failed(
            f"{label}: the function returns while {len(pending)} copies back to the host may still be running "
            f"(the first: {pending[0].label}).",
            cause="synchronize before returning: end.synchronize() on an event recorded after all the work, "
            "or each stream's synchronize().",
        )
    value = number(got, "the returned time (ms)", positive=True)
    measured = (end._t - start._t) * 1e3
    if not np.isclose(value, measured, rtol=1e-6):
        raise Failed(
            f"{label}: the function returned {value:.6g}, but its events measured {measured:.6g} ms.",
            cause="return cupy.cuda.get_elapsed_time(start, end): milliseconds, as CuPy gives them.",
        )
    per_kind = {k: sum(1 for o in rec.ops if o.kind == k) for k in ("h2d", "kernel", "d2h")}
    if per_kind["kernel"] != chunks or per_kind["h2d"] != chunks or per_kind["d2h"] != chunks:
        raise Failed(
            f"{label}: the values are right, but the work went in {per_kind['h2d']} copies in, "
            f"{per_kind['kernel']} kernel launches and {per_kind['d2h']} copies back for chunks={chunks}.",
            cause="split x into exactly `chunks` chunks (the last one shorter when n is not a multiple) and give "
            "each one copy in, one kernel(d_in, d_out) and one copy back: the overlap comes from those chunks.",
        )
    used = {s for s in rec.streams_used() if not s.null}
    if len(used) < min(n_streams, chunks):
        raise Failed(
            f"{label}: the work ran on {len(used)} stream(s) besides the default one; n_streams={n_streams} were asked for.",
            cause="create n_streams streams and give chunk c the stream c % n_streams.",
        )
    blocking = blocking_stream_problem(sorted(used, key=lambda s: s.name), label, "carried chunks")
    if blocking:
        raise Failed(blocking, cause=BLOCKING_STREAM_CAUSE)
    ref_rec, *_ = _run_pipeline_standin(_reference_streams(), n, chunks, n_streams, a, b)
    if rec.makespan() > 1.1 * ref_rec.makespan():
        cause = "the chunks do not overlap."
        if rec.blocking_gets:
            cause = (
                "get() blocks the host by default until its copy is done, so the next chunk is issued only then: "
                "pass blocking=False (out is pinned memory) and synchronize once at the end."
            )
        elif len(used) < 2:
            cause = "all the work is on one stream, which runs it in order: rotate the chunks over the streams."
        elif any(s.null for s in rec.streams_used()):
            cause = (
                "some work is on the default (null) stream, which waits for every other blocking stream: create "
                "the streams with non_blocking=True and issue every chunk inside `with stream:`."
            )
        raise Failed(
            f"{label}: the values and the timing are right, but the pipeline takes {rec.makespan() * 1e6:.3g} µs "
            f"on the stand-in's timeline against {ref_rec.makespan() * 1e6:.3g} µs for chunks overlapped on "
            f"{n_streams} streams (a model of an H200 on PCIe 5).",
            cause=cause,
        )
    return label


def _start_on_null(rec: Any, start: Any) -> bool:
    """True when the event of ``start`` (an event state) was recorded on the null stream."""
    return any(e._token == start._token and getattr(e, "_stream", None) is rec.null for e in rec._events)


def _measure_pipeline_gpu(fn: Any) -> str:
    """On a GPU: the learner's pipeline with real CuPy, pinned buffers and the scale_shift RawKernel, against the same
    function in one chunk on one stream; checks the values and the measured overlap."""
    import cupy
    import cupyx

    from labkit.cuda.sources import SCALE_SHIFT

    from .answers import number
    from .streams import call_learner

    n = 1 << 25  # 128 MiB of float32
    x = cupyx.empty_pinned((n,), dtype=np.float32)
    x[:] = random_array(n)
    out = cupyx.empty_pinned((n,), dtype=np.float32)
    raw = cupy.RawKernel(SCALE_SHIFT, "scale_shift")
    a, b = np.float32(2.0), np.float32(-1.0)

    def kernel(d_in: Any, d_out: Any) -> None:
        m = int(d_in.size)
        raw((min((m + 255) // 256, 65535),), (256,), (d_in, d_out, a, b, np.int64(m)))

    times = {}
    for chunks, streams in ((1, 1), (8, 4)):
        out[:] = np.nan
        call_learner(fn, cupy, x, out, kernel, chunks, streams, what="pipeline (warm-up)")
        out[:] = np.nan
        got = call_learner(fn, cupy, x, out, kernel, chunks, streams, what=f"pipeline(chunks={chunks}, n_streams={streams})")
        times[chunks] = number(got, "the returned time (ms)", positive=True)
        if not np.allclose(out, a * x + b, rtol=1e-5, atol=1e-5):
            raise Failed(
                f"on the GPU, chunks={chunks}: out does not equal 2 * x - 1 everywhere.",
                cause="synchronize before returning, and copy every chunk back to its place in out.",
            )
    speedup = times[1] / times[8]
    if speedup < 1.25:
        raise Failed(
            f"on the GPU: one chunk on one stream {times[1]:.2f} ms, 8 chunks on 4 streams {times[8]:.2f} ms "
            f"({speedup:.2f}x): the copies and the kernel do not overlap.",
            cause="pinned host memory, non-blocking streams, get(..., blocking=False), one synchronize at the end.",
        )
    return f" Measured on the GPU: 1 chunk {times[1]:.2f} ms, 8 chunks on 4 streams {times[8]:.2f} ms ({speedup:.2f}x)."


@exercise("05.streams", kind="code", reference=_reference_streams)
def streams_pipeline(fn: Any) -> str:
    """Grade ``pipeline(cp, x, out, kernel, chunks, n_streams) -> ms``: copy each chunk of pinned ``x`` in, run
    ``kernel(d_in, d_out)``, copy it back into pinned ``out``, chunks rotating over ``n_streams`` streams; time it
    with events. In ``sim`` mode ``cp`` is a recording stand-in of CuPy's stream and event API: the check reads the
    order and dependencies of the work, the values, the events, and the overlap on a model timeline. On a GPU it
    also measures the pipeline against one chunk on one stream."""
    need_function(fn, "a function pipeline(cp, x, out, kernel, chunks, n_streams)")
    rng = np.random.default_rng()
    cases = []
    for _ in range(2):
        chunks = int(rng.integers(3, 9))
        n_streams = int(rng.integers(2, min(chunks, 4) + 1))
        n = int(rng.integers(300, 900)) * chunks + int(rng.integers(1, chunks))  # never a multiple of chunks
        cases.append((n, chunks, n_streams))
    cases.append((int(rng.integers(50, 100)) * 4 + 3, 4, 4))  # one stream per chunk
    cases.append(cases[0])  # the first sizes again, with new values: nothing may be kept from an earlier call
    labels = [_grade_pipeline_record(fn, *c) for c in cases]
    extra = ""
    if cupy_or_none() is not None:
        extra = _measure_pipeline_gpu(fn)
    return (
        f"right values, no hazards, events that cover all the work, and chunks that overlap like the model's on "
        f"{len(labels)} cases (sizes not multiples of the chunk count).{extra}"
    )


def pipeline_timeline(fn: Any, n: int = 1 << 20, chunks: int = 4, n_streams: int = 2) -> str:
    """Run ``pipeline(cp, ...)`` once on the recording stand-in and describe its model timeline: every operation with
    its stream, engine, start and end (µs, a model of an H200 on PCIe 5, not a measurement), and the same work in one
    chunk on one stream for comparison."""
    from .streams import ENGINES

    lines = [
        f"model timeline (recording stand-in, H200 on PCIe 5; not a measurement): n={n}, chunks={chunks}, n_streams={n_streams}"
    ]
    rec, *_ = _run_pipeline_standin(fn, n, chunks, n_streams, 2.0, -1.0)
    t0 = min((o.start for o in rec.ops), default=0.0)
    for o in rec.ops:
        lines.append(
            f"  {o.kind:6} {o.stream.name:12} {ENGINES[o.kind]:26} {(o.start - t0) * 1e6:8.2f} → {(o.end - t0) * 1e6:8.2f} µs"
        )
    one, *_ = _run_pipeline_standin(fn, n, 1, 1, 2.0, -1.0)
    lines.append(
        f"pipelined: {rec.makespan() * 1e6:.2f} µs; one chunk on one stream: {one.makespan() * 1e6:.2f} µs "
        f"({one.makespan() / rec.makespan():.2f}x)"
    )
    return "\n".join(lines)
