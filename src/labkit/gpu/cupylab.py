"""Lab 05 (CuPy): array-module helpers, the kernel-fusion traffic model, transfer and stream-overlap models,
CuPy custom kernels that also run without a GPU, and the GPU benchmarks ``make gpu-check`` records.

- :func:`array_module` is ``cupy.get_array_module`` when CuPy is there and NumPy otherwise;
- :func:`traffic` traces an array function and counts kernel launches and bytes moved, unfused (one kernel per
  operation, temporaries in memory) and fused (one kernel, as ``cupy.fuse`` makes it): a **model**;
- :func:`transfer_model` and :func:`pipeline` model host-to-device copies and a chunked copy/compute pipeline from
  ``labkit.hw`` figures: a **model**, labelled so;
- :func:`elementwise_kernel` / :func:`reduction_kernel` / :class:`labkit.cuda_cpp.RawKernel` give CuPy's custom
  kernels that compile without a GPU and run on the CPU stand-in in ``sim`` mode;
- :func:`fusion_benchmark` and :func:`overlap_benchmark` measure on a GPU and return JSON-ready records.

Importing this module imports neither CuPy nor numba.
"""

from __future__ import annotations

import inspect
import statistics
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from labkit.cuda.cpp import ReductionParts
from labkit.errors import LabkitError, NoGPUError
from labkit.gpu._records import attribute_dict
from labkit.validate import describe, require_int, require_number, require_sequence, require_str

#: The most chunks the pipeline models take (a real pipeline uses a few to a few hundred): more is refused at once.
MAX_CHUNKS = 65_536

MODEL = "model"


# ----------------------------------------------------------------------------------------- array modules
def cupy_or_none() -> Any:
    """CuPy in gpu mode when it is installed, else None (sim mode, or gpu mode without CuPy)."""
    from labkit.mode import current_mode

    if current_mode() != "gpu":
        return None
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def array_module(*arrays: Any) -> Any:
    """The array module for ``arrays``: CuPy if any of them lives on the GPU, NumPy otherwise.

    This is ``cupy.get_array_module`` where CuPy is installed and the mode is ``gpu``; NumPy in ``sim`` mode.
    """
    cupy = cupy_or_none()
    if cupy is not None:
        return cupy.get_array_module(*arrays)
    return np


#: How many times :func:`asnumpy` was called (in ``sim`` mode a no-op, on a GPU a copy to the host): checks read it to
#: tell device work from a round trip through the host, which ``sim`` cannot see otherwise.
HOST_COPIES = [0]


def asnumpy(a: Any) -> np.ndarray:
    """A NumPy copy of ``a`` (device arrays are copied to the host; NumPy arrays are returned as they are)."""
    HOST_COPIES[0] += 1
    if hasattr(a, "__cuda_array_interface__"):
        cupy = cupy_or_none()
        if cupy is None:
            raise NoGPUError("a device array cannot be read without CuPy in gpu mode.")
        return cupy.asnumpy(a)
    return np.asarray(a)


def describe_interface(a: Any) -> dict[str, Any]:
    """The array-interchange description of ``a``: ``__cuda_array_interface__`` for a device array,
    ``__array_interface__`` for a host array (the same keys apart from ``stream``), plus its DLPack device."""
    if hasattr(a, "__cuda_array_interface__"):
        d = dict(a.__cuda_array_interface__)
        kind = "__cuda_array_interface__"
    elif hasattr(a, "__array_interface__"):
        d = dict(a.__array_interface__)
        kind = "__array_interface__"
    else:
        raise LabkitError(f"{type(a).__name__} exposes neither __cuda_array_interface__ nor __array_interface__.")
    dev = a.__dlpack_device__() if hasattr(a, "__dlpack_device__") else None
    names = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 13: "kDLCUDAManaged"}
    return {"protocol": kind, **d, "dlpack_device": (names.get(int(dev[0]), str(dev[0])), int(dev[1])) if dev else None}


# ----------------------------------------------------------------------------------------- fusion traffic model
def _operator(name: str, *, reflected: bool = False) -> Callable[["_Sym", Any], "_Sym"]:
    """The binary operator of :class:`_Sym` that records ufunc ``name`` on (self, other), or on (other, self) when
    ``reflected`` (``__radd__`` and the like)."""

    def method(self: "_Sym", o: Any) -> "_Sym":
        return self._op(name, o, self) if reflected else self._op(name, self, o)

    return method


class _Sym:
    """A symbolic array: arithmetic on it records one elementwise kernel (the way NumPy/CuPy run it unfused)."""

    __array_priority__ = 1000

    def __init__(self, tracer: "_Tracer", ident: int, label: str) -> None:
        self._t, self._id, self._label = tracer, ident, label

    def _op(self, name: str, *operands: Any) -> "_Sym":
        return self._t.op(name, operands)

    # each operator records one elementwise kernel, named by its ufunc
    __add__ = _operator("add")
    __radd__ = _operator("add", reflected=True)
    __sub__ = _operator("subtract")
    __rsub__ = _operator("subtract", reflected=True)
    __mul__ = _operator("multiply")
    __rmul__ = _operator("multiply", reflected=True)
    __truediv__ = _operator("divide")
    __rtruediv__ = _operator("divide", reflected=True)
    __pow__ = _operator("power")
    __gt__ = _operator("greater")
    __lt__ = _operator("less")

    def __neg__(self) -> "_Sym":
        return self._op("negative", self)

    def __abs__(self) -> "_Sym":
        return self._op("absolute", self)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> "_Sym":
        if method != "__call__" or kwargs:
            raise LabkitError(f"the traffic model traces plain elementwise calls only, not {ufunc.__name__}.{method}.")
        return self._t.op(ufunc.__name__, inputs)

    def __bool__(self) -> bool:
        raise LabkitError("the traffic model cannot follow Python `if` on arrays; use xp.where(...) instead.")

    def __repr__(self) -> str:
        return f"<{self._label}>"


@dataclass
class _Tracer:
    ops: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)
    count: int = 0

    def new(self, label: str) -> _Sym:
        self.count += 1
        return _Sym(self, self.count, label)

    def op(self, name: str, operands: Sequence[Any]) -> _Sym:
        arrays = tuple(dict.fromkeys(o._label for o in operands if isinstance(o, _Sym)))
        out = self.new(f"t{len(self.ops) + 1}")
        self.ops.append((name, arrays, out._label))
        return out


@dataclass(frozen=True)
class Traffic:
    """Kernel launches and bytes moved by an elementwise function, unfused and fused (a model)."""

    n: int
    itemsize: int
    ops: tuple[tuple[str, tuple[str, ...], str], ...]  # (ufunc, array operands, result)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def launches_unfused(self) -> int:
        return len(self.ops)

    @property
    def bytes_unfused(self) -> int:
        """Each operation is its own kernel: it reads each distinct array operand and writes its result."""
        return sum((len(arrays) + 1) * self.n * self.itemsize for _, arrays, _ in self.ops)

    launches_fused: int = 1

    @property
    def bytes_fused(self) -> int:
        """One kernel: reads each input array once, writes each output once; temporaries stay in registers."""
        return (len(self.inputs) + len(self.outputs)) * self.n * self.itemsize

    @property
    def temporaries(self) -> int:
        return len(self.ops) - len(self.outputs)

    @property
    def ratio(self) -> float:
        """Bytes unfused / bytes fused: the speed-up a memory-bound GPU would get from fusion (model)."""
        return self.bytes_unfused / self.bytes_fused

    def table(self) -> str:
        """The per-kernel bytes of the unfused version, then the totals."""
        rows = [f"{'kernel':<6} {'operation':<10} {'reads':<22} {'writes':<6} {'bytes':>14}"]
        for k, (name, arrays, out) in enumerate(self.ops, 1):
            b = (len(arrays) + 1) * self.n * self.itemsize
            rows.append(f"{k:<6} {name:<10} {', '.join(arrays) or '-':<22} {out:<6} {b:>14,}")
        rows.append(
            f"unfused: {self.launches_unfused} launches, {self.bytes_unfused:,} bytes; fused: 1 launch, "
            f"{self.bytes_fused:,} bytes ({self.ratio:.2f}x less)  [model]"
        )
        return "\n".join(rows)

    def as_dict(self) -> dict[str, Any]:
        return {
            **attribute_dict(self, "n itemsize launches_unfused bytes_unfused"),
            "launches_fused": 1,
            **attribute_dict(self, "bytes_fused ratio"),
            "label": MODEL,
        }


def traffic(fn: Callable[..., Any], n: int, dtype: Any = "float32", *, scalars: Sequence[str] = ()) -> Traffic:
    """Trace ``fn`` on symbolic arrays of ``n`` elements and count launches and bytes (a model, not a measurement).

    Every parameter of ``fn`` is an array except those named in ``scalars`` (they get the value 1.0). Operators and
    NumPy ufuncs on arrays each count as one kernel (how NumPy and CuPy run an expression without fusion).
    """
    if not callable(fn):
        raise LabkitError(f"traffic() needs a function, got {type(fn).__name__}.")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise LabkitError(f"n must be a positive int, got {n!r}.")
    scalars = require_sequence(scalars, "scalars", what="a list of parameter names", item=lambda s, name: require_str(s, name))
    try:
        itemsize = int(np.dtype(dtype).itemsize)
    except TypeError:
        raise LabkitError(f"dtype must be a NumPy dtype such as 'float32', got {describe(dtype)}.") from None
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        raise LabkitError(f"traffic() cannot read the parameters of {describe(fn)}; pass a function defined with def.") from None
    unknown = set(scalars) - set(params)
    if unknown:
        raise LabkitError(f"{', '.join(sorted(unknown))} are not parameters of {fn.__name__} ({', '.join(params)}).")
    tracer = _Tracer()
    args = [1.0 if p in scalars else tracer.new(p) for p in params]
    result = fn(*args)
    results = result if isinstance(result, tuple) else (result,)
    if not all(isinstance(r, _Sym) for r in results):
        raise LabkitError(f"{fn.__name__} must return an array (or a tuple of arrays) computed from its inputs.")
    used = tuple(dict.fromkeys(a for _, arrays, _ in tracer.ops for a in arrays if a in params))
    return Traffic(int(n), itemsize, tuple(tracer.ops), used, tuple(r._label for r in results))


def _affine_expr(x: Any, gamma: Any, beta: Any, mean: Any, inv_std: Any) -> Any:
    """The bare expression of :func:`affine_normalize`, with no checks: what ``cupy.fuse`` traces."""
    return (x - mean) * inv_std * gamma + beta


def _scalar(value: Any, name: str) -> Any:
    """``require_number``, except for CuPy's own objects: ``cupy.fuse`` calls the function with tracing proxies
    (``_FusionVarScalar``, ``_ScalarProxy``) that are no numbers and whose ``repr()`` can raise; CuPy checks those."""
    if type(value).__module__.split(".")[0] == "cupy":
        return value
    return require_number(value, name)


def affine_normalize(x: Any, gamma: Any, beta: Any, mean: float, inv_std: float) -> Any:
    """The fusion example: ``(x - mean) * inv_std * gamma + beta`` (the last step of a layer norm).

    It can itself be passed to ``cupy.fuse`` (the checks let CuPy's tracing proxies through)."""
    mean = _scalar(mean, "mean")
    inv_std = _scalar(inv_std, "inv_std")
    try:  # arrays (NumPy, CuPy, traffic()'s symbolic ones) or numbers; anything else fails here, said plainly
        return _affine_expr(x, gamma, beta, mean, inv_std)
    except (TypeError, ValueError) as exc:
        raise LabkitError(
            f"x, gamma and beta must be arrays (NumPy or CuPy) or numbers that broadcast together; got "
            f"{describe(x)}, {describe(gamma)}, {describe(beta)} ({exc}).",
            fix="e.g. x of shape (rows, features), gamma and beta of shape (features,).",
        ) from None


# ----------------------------------------------------------------------------------------- transfer and overlap models
@dataclass(frozen=True)
class TransferModel:
    """Time to move ``nbytes`` over a link and to stream them through HBM once (a model from ``labkit.hw``)."""

    nbytes: int
    link: str
    link_gbps: float
    link_source: str
    gpu: str
    hbm_gbps: float
    hbm_source: str

    @property
    def copy_s(self) -> float:
        return self.nbytes / (self.link_gbps * 1e9)

    @property
    def hbm_pass_s(self) -> float:
        """One read and one write of the data in device memory (an elementwise kernel)."""
        return 2 * self.nbytes / (self.hbm_gbps * 1e9)

    @property
    def ratio(self) -> float:
        return self.copy_s / self.hbm_pass_s

    def __str__(self) -> str:
        return (
            f"{self.nbytes / 1e9:.3g} GB over {self.link} ({self.link_gbps:g} GB/s per direction, {self.link_source}): "
            f"{self.copy_s * 1e3:.2f} ms one way\n"
            f"one elementwise pass over it in {self.gpu} HBM ({self.hbm_gbps:g} GB/s, {self.hbm_source}): "
            f"{self.hbm_pass_s * 1e3:.3f} ms\n"
            f"the copy takes {self.ratio:.0f}x as long as the kernel  [model]"
        )


def transfer_model(nbytes: int, *, gpu: str = "H200", link: str = "PCIe 5") -> TransferModel:
    """Model the cost of copying ``nbytes`` to the GPU against one elementwise pass over them on the GPU."""
    from labkit import hw

    if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
        raise LabkitError(f"nbytes must be a positive int, got {nbytes!r}.")
    g, lk = hw.gpu(gpu), hw.link(link)
    mem = g.memory_bandwidth.to("GB/s")
    bw = lk.bandwidth.to("GB/s")
    return TransferModel(int(nbytes), lk.name, float(bw.value), bw.source, g.name, float(mem.value), mem.source)


@dataclass(frozen=True)
class Timeline:
    """A copy/compute pipeline: (engine, chunk, start s, end s) for every step, serial and pipelined times (a model)."""

    events: tuple[tuple[str, int, float, float], ...]
    chunks: int
    serial_s: float
    label: str = MODEL

    @property
    def makespan_s(self) -> float:
        return max(e[3] for e in self.events)

    @property
    def speedup(self) -> float:
        return self.serial_s / self.makespan_s

    def __str__(self) -> str:
        return (
            f"serial {self.serial_s * 1e3:.2f} ms, pipelined in {self.chunks} chunks {self.makespan_s * 1e3:.2f} ms: "
            f"{self.speedup:.2f}x  [{self.label}]"
        )

    def figure(self, title: str = "Copy/compute pipeline (model)") -> Any:
        """A plotly Gantt chart: one row per engine (H2D copy, compute, D2H copy), one bar per chunk."""
        import plotly.graph_objects as go

        colors = {"H2D copy": "#1f77b4", "kernel": "#2ca02c", "D2H copy": "#ff7f0e"}
        fig = go.Figure()
        for engine, color in colors.items():
            ev = [e for e in self.events if e[0] == engine]
            fig.add_trace(
                go.Bar(
                    y=[engine] * len(ev),
                    x=[(e[3] - e[2]) * 1e3 for e in ev],
                    base=[e[2] * 1e3 for e in ev],
                    orientation="h",
                    name=engine,
                    marker_color=color,
                    text=[f"{e[1]}" for e in ev],
                    hovertemplate="chunk %{text}: %{base:.2f}–%{x:.2f} ms<extra></extra>",
                )
            )
        fig.update_layout(
            title=title,
            xaxis_title="time (ms)",
            barmode="overlay",
            height=260,
            yaxis={"categoryorder": "array", "categoryarray": list(colors)[::-1]},
        )
        return fig


def _chunks(chunks: Any) -> int:
    """The number of chunks of a modelled pipeline: a whole number from 1 to :data:`MAX_CHUNKS`."""
    return require_int(
        chunks,
        "chunks",
        min=1,
        max=MAX_CHUNKS,
        fix=f"The model takes 1 to {MAX_CHUNKS:,} chunks (a real pipeline uses a few to a few hundred).",
    )


def pipeline(t_in: float, t_kernel: float, t_out: float, chunks: int, *, overhead_s: float = 0.0) -> Timeline:
    """Model a chunked pipeline with one H2D copy engine, the SMs, and one D2H copy engine working at once.

    ``t_in``, ``t_kernel``, ``t_out`` are the times of the whole job's three stages; each chunk takes 1/chunks of
    each, plus ``overhead_s`` per step. A step starts when its engine is free and the chunk's previous step is done.
    """
    t_in, t_kernel, t_out, overhead_s = (
        require_number(v, label, min=0)
        for label, v in (
            ("t_in (seconds)", t_in),
            ("t_kernel (seconds)", t_kernel),
            ("t_out (seconds)", t_out),
            ("overhead_s", overhead_s),
        )
    )
    chunks = _chunks(chunks)
    stages = (("H2D copy", t_in / chunks), ("kernel", t_kernel / chunks), ("D2H copy", t_out / chunks))
    free = {name: 0.0 for name, _ in stages}
    events = []
    for c in range(int(chunks)):
        ready = 0.0
        for name, dt in stages:
            start = max(free[name], ready)
            end = start + dt + overhead_s
            events.append((name, c, start, end))
            free[name] = ready = end
    return Timeline(tuple(events), int(chunks), t_in + t_kernel + t_out + 3 * overhead_s)


def overlap_model(nbytes: int, chunks: int = 8, *, gpu: str = "H200", link: str = "PCIe 5", kernel_passes: int = 1) -> Timeline:
    """The pipeline for copying ``nbytes`` in, running ``kernel_passes`` elementwise passes, and copying back (model)."""
    chunks = _chunks(chunks)
    kernel_passes = require_int(kernel_passes, "kernel_passes", min=0, max=1_000_000)
    t = transfer_model(nbytes, gpu=gpu, link=link)
    return pipeline(t.copy_s, kernel_passes * t.hbm_pass_s, t.copy_s, chunks)


# ----------------------------------------------------------------------------------------- custom kernels, both modes
#: NumPy dtype of each C type :func:`labkit.cuda_cpp.parse_params` produces (the CPU stand-in passes arrays of these).
_NP_OF_CTYPE = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "long long": "int64",
    "unsigned int": "uint32",
    "unsigned long long": "uint64",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
}


class _CupyKernel:
    """What :class:`Elementwise` and :class:`Reduction` share: compiling labkit's equivalent source with NVRTC, and
    building the real CuPy kernel (``cupy.<_CUPY>``) from the same strings."""

    _CUPY: ClassVar[str]
    name: str

    def source(self) -> str:
        raise NotImplementedError

    def _cupy_args(self) -> tuple[str, ...]:
        raise NotImplementedError

    def compile(self, arch: str = "sm_90") -> Any:
        """PTX of the equivalent kernel for ``arch`` (raises CompileError with NVRTC's lines)."""
        from labkit.cuda.cpp import compile_for

        return compile_for(self.source(), self.name, (arch,))[arch]

    def cupy(self) -> Any:
        """The real CuPy kernel (gpu mode): ``cupy.ElementwiseKernel`` or ``cupy.ReductionKernel``."""
        cupy = cupy_or_none()
        if cupy is None:
            from labkit.cuda.cpp import no_gpu

            raise no_gpu(f"cupy.{self._CUPY}")
        return getattr(cupy, self._CUPY)(*self._cupy_args())


@dataclass(frozen=True)
class Elementwise(_CupyKernel):
    """``cupy.ElementwiseKernel`` pieces; callable on a GPU (CuPy) and in ``sim`` mode (CPU stand-in, 1-D arrays)."""

    _CUPY: ClassVar[str] = "ElementwiseKernel"

    in_params: str
    out_params: str
    operation: str
    name: str = "kernel"

    def source(self, types: dict[str, str] | None = None) -> str:
        """labkit's equivalent standalone CUDA C++ (CuPy generates its own, more general, kernel); placeholder
        types (``T``) as ``types`` binds them (NumPy names), else float32."""
        from labkit.cuda.cpp import elementwise_source

        return elementwise_source(self.in_params, self.out_params, self.operation, self.name, types=types)

    def bind_types(self, *args: Any) -> dict[str, str]:
        """The NumPy type each placeholder (``T``) gets from ``args``, as CuPy binds it: from the first array (or
        NumPy scalar) passed for a parameter of that placeholder; Python numbers bind nothing (CuPy's weak scalars)."""
        from labkit.cuda.cpp import parse_params

        bound: dict[str, str] = {}
        for p, a in zip(parse_params(self.in_params, "in_params"), args):
            if p.generic and p.generic not in bound and isinstance(a, (np.ndarray, np.generic)):
                if np.dtype(a.dtype).name not in _NP_OF_CTYPE.values():
                    raise LabkitError(
                        f"{self.name}: {p.name} is a {a.dtype} array, which the stand-in does not run.",
                        fix="Pass float32, float64 or an integer type.",
                    )
                bound[p.generic] = np.dtype(a.dtype).name
        unbound = {p.generic for p in parse_params(self.out_params, "out_params") if p.generic and p.generic not in bound}
        if unbound:
            raise LabkitError(
                f"{self.name}: the output's type {', '.join(sorted(unbound))} is bound by no input array.",
                fix="Give the output a type name (float32 z) or a placeholder an input array binds.",
            )
        return bound

    def _cupy_args(self) -> tuple[str, ...]:
        return (self.in_params, self.out_params, self.operation, self.name)

    def __call__(self, *args: Any) -> Any:
        if cupy_or_none() is not None:
            return self.cupy()(*args)
        from labkit.cuda.cpp import parse_params, run_on_host

        ins = parse_params(self.in_params, "in_params")
        if len(args) != len(ins):
            raise LabkitError(f"{self.name} takes {len(ins)} input(s) ({self.in_params}), got {len(args)}.")
        types = self.bind_types(*args)
        ins = parse_params(self.in_params, "in_params", generic_types=types)
        outs = parse_params(self.out_params, "out_params", generic_types=types)
        dtypes = [np.dtype(_NP_OF_CTYPE[p.ctype]) for p in ins + outs]
        arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
        if arrays[0].ndim != 1:
            raise LabkitError("in sim mode labkit runs elementwise kernels on 1-D arrays only.", fix="Use x.ravel().")
        n = arrays[0].size
        in_arrays = [np.array(a, dtype=dt, copy=True, order="C") for a, dt in zip(arrays, dtypes)]
        out_arrays = [np.empty(n, dtype=dt) for dt in dtypes[len(ins) :]]
        block = 128
        grid = max(1, min((n + block - 1) // block, 64))
        run_on_host(self.source(types), self.name, (grid,), (block,), (*in_arrays, *out_arrays, np.int64(n)))
        return out_arrays[0] if len(out_arrays) == 1 else tuple(out_arrays)


def elementwise_kernel(in_params: str, out_params: str, operation: str, name: str = "kernel") -> Elementwise:
    """Build an elementwise kernel like ``cupy.ElementwiseKernel``; it compiles without a GPU (parameters checked now)."""
    k = Elementwise(in_params, out_params, operation, name)
    k.source()  # parses the parameter lists: mistakes are reported here
    return k


@dataclass(frozen=True)
class Reduction(ReductionParts, _CupyKernel):
    """``cupy.ReductionKernel`` pieces; callable on a GPU (CuPy) and in ``sim`` mode (CPU stand-in, whole 1-D array)."""

    _CUPY: ClassVar[str] = "ReductionKernel"

    def source(self) -> str:
        """labkit's equivalent CUDA C++ (one block; for checking the expressions, not for speed)."""
        from labkit.cuda.cpp import reduction_source

        return reduction_source(self)

    def _cupy_args(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(ReductionParts))

    def __call__(self, x: Any) -> Any:
        if cupy_or_none() is not None:
            return self.cupy()(x)
        from labkit.cuda.cpp import REDUCTION_THREADS, reduction_source, run_on_host

        arr = np.ascontiguousarray(np.asarray(x, dtype=np.float32).ravel())
        out = np.zeros(1, dtype=np.float32)
        run_on_host(reduction_source(self), self.name, (1,), (REDUCTION_THREADS,), (arr, out, np.int64(arr.size)))
        return out[0]


def reduction_kernel(
    in_params: str,
    out_params: str,
    map_expr: str,
    reduce_expr: str,
    post_map_expr: str,
    identity: str,
    name: str = "reduce_kernel",
) -> Reduction:
    """Build a reduction like ``cupy.ReductionKernel``; it compiles without a GPU (parameters checked now)."""
    k = Reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name)
    k.source()
    return k


# ----------------------------------------------------------------------------------------- GPU benchmarks
def _require_gpu(what: str) -> Any:
    cupy = cupy_or_none()
    if cupy is None:
        raise NoGPUError(
            f"{what} measures on a GPU; this process is in sim mode (or CuPy is not installed).",
            fix="Run on a machine with an NVIDIA GPU and `pip install 'labkit[cuda12]'`; "
            "in sim mode use the models (labkit.cupylab.traffic, overlap_model).",
        )
    return cupy


def _device_name() -> str:
    from labkit.mode import env

    return env().device_name


def fusion_benchmark(n: int | None = None, repeat: int = 20) -> dict[str, Any]:
    """Measure ``affine_normalize`` unfused (4 CuPy kernels) and fused (``cupy.fuse``): a JSON-ready record."""
    cupy = _require_gpu("fusion_benchmark")
    from cupyx.profiler import benchmark

    n = n or 1 << 26
    rng = cupy.random.default_rng()
    x, gamma, beta = (rng.standard_normal(n, dtype=cupy.float32) for _ in range(3))
    mean, inv_std = 0.1, 1.7
    fused = cupy.fuse(_affine_expr)  # the checked wrapper fuses too; the bare expression is what the fused kernel is
    ref = affine_normalize(x, gamma, beta, mean, inv_std)
    ok = bool(cupy.allclose(fused(x, gamma, beta, mean, inv_std), ref, rtol=1e-5, atol=1e-5))
    times = {}
    for label, f in (("unfused", affine_normalize), ("fused", fused)):
        res = benchmark(f, (x, gamma, beta, mean, inv_std), n_repeat=repeat, n_warmup=3)
        times[label] = float(np.median(res.gpu_times[0]))
    model = traffic(affine_normalize, n, "float32", scalars=("mean", "inv_std"))
    return {
        "name": "cupy-fusion",
        "device": _device_name(),
        "n": n,
        "dtype": "float32",
        "correct": ok,
        "unfused_s": times["unfused"],
        "fused_s": times["fused"],
        "speedup": times["unfused"] / times["fused"],
        "launches": [model.launches_unfused, 1],
        "model_bytes": [model.bytes_unfused, model.bytes_fused],
        "model_speedup": model.ratio,
        "unfused_gbps": model.bytes_unfused / times["unfused"] / 1e9,
        "fused_gbps": model.bytes_fused / times["fused"] / 1e9,
        "label": f"CUDA-event time (cupyx.profiler.benchmark, median of {repeat}) on {_device_name()}",
        "target": "cupy.fuse gives the unfused result (speed-up reported beside the traffic model's)",
        "value": times["unfused"] / times["fused"],
        "threshold": None,
        "unit": "x",
        "passed": ok,
    }


def overlap_benchmark(total_bytes: int = 1 << 30, chunks: int = 16, streams: int = 4, repeat: int = 5) -> dict[str, Any]:
    """Copy in, ``scale_shift``, copy out: one stream in one piece vs ``chunks`` pieces over ``streams`` streams.

    Host buffers are pinned (``cupyx.empty_pinned``) so copies are asynchronous; copies use
    ``cudaMemcpyAsync`` on each stream. Times are wall-clock around device-synchronised runs (median of
    ``repeat``). Returns a JSON-ready record with the speed-up and the model's prediction.
    """
    cupy = _require_gpu("overlap_benchmark")
    import cupyx

    from labkit.cuda.sources import SCALE_SHIFT

    rt = cupy.cuda.runtime
    if chunks < 1 or streams < 1:
        raise LabkitError("chunks and streams must be ≥ 1.")
    n = total_bytes // 4
    n -= n % chunks
    h_in = cupyx.empty_pinned((n,), dtype=np.float32)
    h_in[:] = np.random.default_rng().standard_normal(n, dtype=np.float32)
    h_out = cupyx.empty_pinned((n,), dtype=np.float32)
    d_in, d_out = cupy.empty(n, dtype=cupy.float32), cupy.empty(n, dtype=cupy.float32)
    kernel = cupy.RawKernel(SCALE_SHIFT, "scale_shift")
    a, b = np.float32(2.0), np.float32(-1.0)
    block = 256
    pool = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]

    def piece(lo: int, hi: int, s: Any) -> None:
        nbytes = (hi - lo) * 4
        rt.memcpyAsync(d_in[lo:hi].data.ptr, h_in[lo:].ctypes.data, nbytes, rt.memcpyHostToDevice, s.ptr)
        grid = min((hi - lo + block - 1) // block, 65535)
        with s:
            kernel((grid,), (block,), (d_in[lo:hi], d_out[lo:hi], a, b, np.int64(hi - lo)))
        rt.memcpyAsync(h_out[lo:].ctypes.data, d_out[lo:hi].data.ptr, nbytes, rt.memcpyDeviceToHost, s.ptr)

    def serial() -> None:
        piece(0, n, pool[0])

    def overlapped() -> None:
        step = n // chunks
        for c in range(chunks):
            piece(c * step, (c + 1) * step, pool[c % streams])

    def timed(fn: Callable[[], None]) -> float:
        samples = []
        for _ in range(repeat + 1):
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            fn()
            cupy.cuda.Device().synchronize()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples[1:])

    t_serial = timed(serial)
    h_out[:] = 0
    t_overlap = timed(overlapped)
    correct = bool(np.allclose(h_out, a * h_in + b, rtol=1e-6, atol=1e-6))
    model, model_label = _overlap_model_here(n * 4, chunks)
    speedup = t_serial / t_overlap
    return {
        "name": "cupy-stream-overlap",
        "device": _device_name(),
        "bytes": n * 4,
        "chunks": chunks,
        "streams": streams,
        "pinned": True,
        "correct": correct,
        "serial_s": t_serial,
        "overlapped_s": t_overlap,
        "speedup": speedup,
        "target_speedup": 1.5,
        "meets_target": speedup >= 1.5 and correct,
        "target": "chunked copy/compute overlap >= 1.5x the serial run (and correct)",
        "value": speedup,
        "threshold": 1.5,
        "unit": "x",
        "passed": speedup >= 1.5 and correct,
        "h2d_d2h_gbps_serial": 2 * n * 4 / t_serial / 1e9,
        "model": {
            "serial_s": model.serial_s,
            "overlapped_s": model.makespan_s,
            "speedup": model.speedup,
            "label": model_label,
        },
        "label": f"wall-clock time around synchronised runs, median of {repeat}, on {_device_name()}",
    }


def _overlap_model_here(nbytes: int, chunks: int) -> tuple[Timeline, str]:
    """The overlap model for the GPU present: its own labkit.hw record and PCIe generation (device profile), or the
    H200's and PCIe 5 with a label that says so (review 4, C5: an H100's record said "H200")."""
    from labkit.gpu.profiles import ceiling, match

    gpu, why = ceiling()
    prof = match(_device_name())
    link = f"PCIe {prof.pcie[0]}" if prof is not None else "PCIe 5"
    label = f"model ({gpu}, {link} figures from labkit.hw)" + (f"; {why}" if why else "")
    return overlap_model(nbytes, chunks, gpu=gpu, link=link), label


def benchmarks() -> list[dict[str, Any]]:
    """Both lab-05 GPU benchmark records (for ``make gpu-check``); one that fails is a record with ``passed`` None
    and the error in words (:func:`labkit.gpuerrors.explain`), so the other still counts."""
    from labkit.gpu.errors import explain

    out = []
    for name, fn, target in (
        ("cupy-fusion", fusion_benchmark, "cupy.fuse gives the unfused result"),
        ("cupy-stream-overlap", overlap_benchmark, "chunked copy/compute overlap >= 1.5x the serial run"),
    ):
        try:
            out.append(fn())
        except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the other
            out.append({"name": name, "target": target, "value": None, "passed": None, "error": str(explain(exc, name))})
    return out


__all__ = [
    "Elementwise",
    "Reduction",
    "Timeline",
    "Traffic",
    "TransferModel",
    "affine_normalize",
    "array_module",
    "asnumpy",
    "benchmarks",
    "describe_interface",
    "elementwise_kernel",
    "fusion_benchmark",
    "overlap_benchmark",
    "overlap_model",
    "pipeline",
    "reduction_kernel",
    "traffic",
    "transfer_model",
]
