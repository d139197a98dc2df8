"""CUDA C++ kernels for CuPy, checked without a GPU: entries, bounds checks, a CPU stand-in, safe launches.

What this module does with a learner's CUDA C++ source (as given to CuPy's ``RawKernel``):

- :func:`compile_for` compiles it to PTX with NVRTC for several architectures (``labkit.ptx.compile_cuda``);
- :func:`entries` / :func:`find_entry` read the PTX ``.entry`` lines: kernel names and parameter types, and
  spot a kernel whose name was C++-mangled because ``extern "C"`` is missing;
- :func:`guards_with` is a static signal for a bounds check: some comparison in the kernel involves the
  size parameter (followed through moves and conversions) and drives a branch, a predicated store or a select;
- :func:`run_on_host` runs it on the CPU stand-in (:mod:`labkit.cuda_host`, re-exported here): the same source
  compiled as plain C++ after labkit's prelude, threads as fibers where barriers and warp calls need them, the
  ``nvcuda::wmma`` fragment API on the CPU, arrays between poisoned guard zones. It checks values, not speed.
- :class:`RawKernel` wraps all this behind CuPy's calling convention ``kernel(grid, block, args)``: arguments are
  checked against the kernel's parameters before anything is launched. On a GPU it launches ``cupy.RawKernel``;
  in ``sim`` mode it runs the CPU stand-in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from labkit.cuda.entries import (  # noqa: F401  (re-exported: labkit.cuda_cpp's names as before)
    _CTYPES,
    _ENTRY,
    _PARAM,
    _PTX_CACHE,
    _REG,
    COURSE_ARCHES,
    Entry,
    _arches,
    _cai_contiguous,
    _check_device,
    _dims,
    _entry,
    _instructions,
    _ptx_sm90,
    _ptx_text,
    arches_compiled,
    check_launch,
    compile_for,
    entries,
    find_entry,
    guards_with,
    skipped_arches,
    stores_global,
)
from labkit.cuda.host import (
    DYNAMIC_SHARED_MAX,
    HOST_ONLY_HEADERS,
    HostKernelError,
    HostPlan,
    HostUnavailable,
    OutOfBounds,
    host_compiler,
    host_include_dir,
    host_plan,
    host_source,
    is_name_expression,
    kernel_entry,
    refuse_host_headers,
    rewrite_dynamic_shared,
    run_on_host,
    run_on_host_batch,
    source_includes,
    strip_comments_and_strings,
)
from labkit.errors import CompileError, LabkitError, NoGPUError
from labkit.validate import describe, require_str


# ----------------------------------------------------------------------------------------- RawKernel
class RawKernel:
    """CuPy's ``RawKernel(code, name)`` with checks first; runs on the GPU, or on the CPU stand-in in ``sim`` mode.

    ``kernel(grid, block, args)`` validates ``args`` against the kernel's parameters (read from its PTX) before
    launching, so a Python ``float`` for a ``float`` parameter or a host array for a pointer is a clear error,
    not a wrong result.
    """

    def __init__(self, code: str, name: str, *, name_expressions: Sequence[str] = ()) -> None:
        from labkit.mode import env

        if not isinstance(code, str):
            raise LabkitError(
                f"the CUDA C++ source must be a string, got {code!r:.60}.",
                fix='Put the kernel in a Python string: code = r"""extern "C" __global__ void ..."""',
            )
        name = require_str(name, "name", fix='The kernel\'s name as declared: extern "C" __global__ void NAME(...).')
        self.code, self.name = code, name
        self._exprs = tuple(name_expressions)
        self._env = env()
        refuse_host_headers(code)
        # The parameter list is the same for every architecture; sm_90 is one every NVRTC of the course knows.
        self.entry = kernel_entry(code, name)
        self._cupy_kernel: Any = None

    @property
    def params(self) -> tuple[str, ...]:
        """PTX types of the parameters (``u64`` is a pointer or a 64-bit integer)."""
        return self.entry.params

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0) -> None:
        """Launch: ``shared_mem`` is the dynamic shared memory per block in bytes (``extern __shared__`` arrays), as
        in CuPy."""
        from labkit.cuda.host import _with_shared_mem

        smem = _with_shared_mem((grid, block, args, shared_mem))[3]
        if self._env.is_gpu:
            g, b = check_launch(self.entry, grid, block, args, on_gpu=True)
            import cupy

            if self._cupy_kernel is None:
                if is_name_expression(self.name):
                    exprs = list(dict.fromkeys((*self._exprs, self.name)))
                    module = cupy.RawModule(code=self.code, name_expressions=exprs)
                    self._cupy_kernel = module.get_function(self.name)
                else:
                    self._cupy_kernel = cupy.RawKernel(self.code, self.name)
            self._cupy_kernel(tuple(g), tuple(b), tuple(args), shared_mem=smem)
        else:
            run_on_host(self.code, self.name, grid, block, args, shared_mem=smem, name_expressions=self._exprs)

    def __repr__(self) -> str:
        return f"<labkit RawKernel {self.name}({', '.join(self.params)})>"


class RawModule:
    """CuPy's ``RawModule(code=..., name_expressions=[...])``: one source, several kernels, templates by name expression.

    ``get_function(name)`` gives a :class:`RawKernel` for an ``extern "C"`` kernel or for one of the name expressions
    (``"scale<float>"``), as ``cupy.RawModule.get_function`` does. On the CPU stand-in one build serves every kernel
    of the module."""

    def __init__(self, code: str, *, name_expressions: Sequence[str] = ()) -> None:
        if not isinstance(code, str):
            raise LabkitError(f"the CUDA C++ source must be a string, got {code!r:.60}.")
        exprs = [require_str(e, "name_expressions item") for e in name_expressions]
        self.code, self.name_expressions = code, tuple(exprs)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name``: an ``extern "C"`` kernel of the source, or one of the module's name expressions."""
        name = require_str(name, "name", fix="A kernel of the source, or one of name_expressions ('scale<float>').")
        if is_name_expression(name) and name not in self.name_expressions:
            raise LabkitError(
                f"{name!r} is not among this module's name_expressions {list(self.name_expressions)}.",
                fix=f"Create the module with RawModule(code=..., name_expressions=[{name!r}]), as in CuPy.",
            )
        return RawKernel(self.code, name, name_expressions=self.name_expressions)


def no_gpu(what: str) -> NoGPUError:
    """The error for a GPU-only step in ``sim`` mode."""
    return NoGPUError(
        f"{what} needs a GPU; this kernel is in sim mode.",
        fix="Run the notebook on a machine with an NVIDIA GPU; in sim mode the cell explains what it would show.",
    )


__all__ = [
    "COURSE_ARCHES",
    "DYNAMIC_SHARED_MAX",
    "Entry",
    "rewrite_dynamic_shared",
    "arches_compiled",
    "skipped_arches",
    "HostKernelError",
    "HostPlan",
    "HostUnavailable",
    "RawKernel",
    "RawModule",
    "HOST_ONLY_HEADERS",
    "is_name_expression",
    "kernel_entry",
    "refuse_host_headers",
    "host_plan",
    "host_source",
    "host_include_dir",
    "strip_comments_and_strings",
    "source_includes",
    "check_launch",
    "compile_for",
    "entries",
    "OutOfBounds",
    "run_on_host_batch",
    "elementwise_source",
    "ReductionParts",
    "reduction_source",
    "REDUCTION_THREADS",
    "parse_params",
    "find_entry",
    "guards_with",
    "host_compiler",
    "run_on_host",
    "stores_global",
    "CompileError",
]


# ----------------------------------------------------------------------------------------- ElementwiseKernel / ReductionKernel stand-ins
_C_TYPES = {
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "int64": "long long",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "int16": "short",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
    "float": "float",
    "double": "double",
    "int": "int",
}
_IDENT = re.compile(r"[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Param:
    """One parameter of an ElementwiseKernel/ReductionKernel parameter list, e.g. ``raw float32 x``."""

    ctype: str
    name: str
    raw: bool = False
    generic: str | None = None  # a type placeholder such as "T"


def parse_params(
    text: str, what: str, *, generic_default: str = "float32", generic_types: dict[str, str] | None = None
) -> list[Param]:
    """Parse CuPy's parameter-list syntax (``"float32 x, T y, raw T z"``); a placeholder becomes its type in
    ``generic_types`` (a NumPy name, as CuPy binds it from the arguments), else ``generic_default``."""
    if not isinstance(text, str):
        raise LabkitError(f"{what} must be a string such as 'float32 x, float32 y', got {type(text).__name__}.")
    out: list[Param] = []
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        words = part.split()
        raw = words[0] == "raw"
        if raw:
            words = words[1:]
        if len(words) != 2 or not _IDENT.match(words[1]):
            raise LabkitError(
                f"{what}: {part!r} is not 'type name' (e.g. 'float32 x').",
                fix="Write each parameter as a NumPy type name and a name, separated by commas.",
            )
        t, n = words
        if n in ("i", "n") or n.startswith("_"):
            raise LabkitError(
                f"{what}: the name {n!r} is reserved by CuPy (i, n and names starting with _).",
                fix="Choose another parameter name.",
            )
        if t in _C_TYPES:
            out.append(Param(_C_TYPES[t], n, raw))
        elif re.fullmatch(r"[A-Z]\w*", t):
            out.append(Param(_C_TYPES[(generic_types or {}).get(t, generic_default)], n, raw, generic=t))
        else:
            raise LabkitError(
                f"{what}: unknown type {t!r} in {part!r}.",
                fix=f"Use a NumPy type name ({', '.join(list(_C_TYPES)[:6])}, ...) or a placeholder such as T.",
            )
    if not out:
        raise LabkitError(f"{what} is empty.", fix="List at least one parameter, e.g. 'float32 x'.")
    return out


def _typedefs(params: Sequence[Param]) -> str:
    seen = {}
    for p in params:
        if p.generic and p.generic not in seen:
            seen[p.generic] = p.ctype
    return "".join(f"typedef {c} {g};\n" for g, c in seen.items())


#: CuPy's index objects as the stand-ins define them for 1-D arrays: ``size()``, ``set(i)``, ``get()`` (CuPy's
#: ``CIndexer``: ``_ind`` in an ElementwiseKernel, ``_in_ind``/``_out_ind`` in a ReductionKernel).
_INDEXER = (
    "#ifndef _LK_INDEXER\n#define _LK_INDEXER\nstruct _LkIndexer { long long _n; long long _i;\n"
    "  __device__ long long size() const { return _n; }\n  __device__ void set(long long i) { _i = i; }\n"
    "  __device__ const long long* get() const { return &_i; } };\n#endif\n"
)


def elementwise_source(
    in_params: str, out_params: str, operation: str, name: str, preamble: str = "", *, types: dict[str, str] | None = None
) -> str:
    """CUDA C++ equivalent to ``cupy.ElementwiseKernel(in_params, out_params, operation, name)`` on 1-D arrays.

    CuPy generates its own (more general) kernel; this stand-in has the same meaning for contiguous 1-D arrays of
    equal length: a grid-stride loop over ``i < n``, inputs as ``const`` values, outputs as references, and
    CuPy's ``_ind`` (``_ind.size()`` is n). Placeholder types (``T``) are instantiated as ``types`` says (NumPy
    names, as CuPy binds them from the arguments), else as ``float``.
    """
    ins = parse_params(in_params, "in_params", generic_types=types)
    outs = parse_params(out_params, "out_params", generic_types=types)
    if not isinstance(operation, str) or not operation.strip():
        raise LabkitError("operation must be a non-empty string of CUDA C++, e.g. 'z = x + y'.")
    if not _IDENT.match(name or ""):
        raise LabkitError(f"kernel name {name!r} is not a C identifier.")
    names = [p.name for p in ins + outs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise LabkitError(
            f"parameter name(s) {', '.join(sorted(dup))} appear more than once.", fix="Give every input and output its own name."
        )
    sig, body = [], []
    for p in ins:
        sig.append(f"const {p.ctype}* _in_{p.name}")
        body.append(f"const {p.ctype}* {p.name} = _in_{p.name};" if p.raw else f"const {p.ctype} {p.name} = _in_{p.name}[i];")
    for p in outs:
        sig.append(f"{p.ctype}* _out_{p.name}")
        body.append(f"{p.ctype}* {p.name} = _out_{p.name};" if p.raw else f"{p.ctype}& {p.name} = _out_{p.name}[i];")
    op = operation.strip().rstrip(";")
    return (
        f"{_typedefs(ins + outs)}{_INDEXER}{preamble}\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}, long long n) {{\n'
        f"  _LkIndexer _ind = {{n, 0}};\n"
        f"  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
        f" i += (long long)blockDim.x * gridDim.x) {{\n"
        f"    _ind.set(i); {' '.join(body)}\n"
        f"    {op};\n"
        f"  }}\n}}\n"
    )


@dataclass(frozen=True)
class ReductionParts:
    """The strings a ``cupy.ReductionKernel`` is built from, in the order its constructor takes them."""

    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str
    name: str = "reduce_kernel"


#: The threads of the one block a reduction's source runs with (on a GPU, and on the CPU stand-in).
REDUCTION_THREADS = 4


def reduction_source(parts: ReductionParts, *, partials: int = REDUCTION_THREADS, types: dict[str, str] | None = None) -> str:
    """CUDA C++ with the meaning of ``cupy.ReductionKernel(...)`` over a whole 1-D array, for checking expressions.

    Each thread folds a strided share of the input starting from ``identity`` (``partials`` shares in all, a power
    of two), then the partial results are folded pairwise in a tree through shared memory, as a GPU's block
    reduction folds them (``reduce(p[t], p[t + s])`` for s = partials/2, ..., 1), and thread 0 applies
    ``post_map_expr``. So a reduce expression that is not associative and commutative (``a - b``) gives the
    order-dependent result a GPU would, not the sum a sequential fold happens to give. ``a`` and ``b`` are the reduction's operands, and ``_in_ind``/``_out_ind`` its index objects
    (``_in_ind.size()`` is n, ``_out_ind.size()`` 1 for a whole-array reduction), as in CuPy. Launch with one block of
    ``partials`` threads, on a GPU or on the CPU stand-in. Slow on purpose: it checks meaning, not speed. Placeholder
    types (``T``) are as ``types`` binds them (NumPy names), else float32.
    """
    if not isinstance(parts, ReductionParts):
        raise LabkitError(
            f"reduction_source takes a ReductionParts, not {describe(parts)}.",
            fix="labkit.cupylab.reduction_kernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name) "
            "builds one.",
        )
    p = parts
    ins = parse_params(p.in_params, "in_params", generic_types=types)
    outs = parse_params(p.out_params, "out_params", generic_types=types)
    for label in ("map_expr", "reduce_expr", "post_map_expr", "identity"):
        expr = getattr(p, label)
        if not isinstance(expr, str) or not expr.strip():
            raise LabkitError(f"{label} must be a non-empty string of CUDA C++.")
    if len(outs) != 1 or outs[0].raw:
        raise LabkitError("a ReductionKernel here has exactly one (non-raw) output, e.g. out_params='float32 y'.")
    if not _IDENT.match(p.name or ""):
        raise LabkitError(f"kernel name {p.name!r} is not a C identifier.")
    if partials < 1 or partials & (partials - 1):
        raise LabkitError(f"partials must be a power of two (the tree folds pairs), got {partials}.")
    out = outs[0]
    acc = out.ctype  # CuPy's reduce_type defaults to the output type
    sig = [f"const {q.ctype}* _in_{q.name}" for q in ins] + [f"{out.ctype}* _out_{out.name}", "long long n"]
    loads = " ".join(f"const {q.ctype} {q.name} = _in_{q.name}[_j];" for q in ins)
    identity, reduce_expr = p.identity.strip(), p.reduce_expr.strip().rstrip(";")
    return (
        f"{_typedefs([*ins, *outs])}{_INDEXER}"
        f"#define _LK_REDUCE(a, b) ({reduce_expr})\n"
        f'extern "C" __global__ void {p.name}({", ".join(sig)}) {{\n'
        f"  __shared__ {acc} _part[{partials}];\n"
        f"  _LkIndexer _in_ind = {{n, 0}}, _out_ind = {{1, 0}};\n"
        f"  {acc} _acc = ({acc})({identity});\n"
        f"  for (long long _j = threadIdx.x; _j < n; _j += blockDim.x) {{\n"
        f"    _in_ind.set(_j); {loads}\n"
        f"    {acc} _m = ({acc})({p.map_expr.strip().rstrip(';')});\n"
        f"    _acc = _LK_REDUCE(_acc, _m);\n"
        f"  }}\n"
        f"  _part[threadIdx.x] = _acc;\n"
        f"  __syncthreads();\n"
        f"  for (unsigned _s = blockDim.x / 2; _s > 0; _s >>= 1) {{\n"
        f"    if (threadIdx.x < _s) {{ {acc} _x = _part[threadIdx.x], _y = _part[threadIdx.x + _s];"
        f" _part[threadIdx.x] = _LK_REDUCE(_x, _y); }}\n"
        f"    __syncthreads();\n"
        f"  }}\n"
        f"  if (threadIdx.x == 0) {{\n"
        f"    {acc} a = _part[0];\n"
        f"    {out.ctype}& {out.name} = _out_{out.name}[0];\n"
        f"    {p.post_map_expr.strip().rstrip(';')};\n"
        f"  }}\n}}\n"
    )
