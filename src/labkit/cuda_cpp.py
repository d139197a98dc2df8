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

import numpy as np

from .cuda_host import (DYNAMIC_SHARED_MAX, HostKernelError, HostPlan, HostUnavailable, OutOfBounds, host_compiler,
                        host_include_dir, host_plan, host_source, rewrite_dynamic_shared, run_on_host, run_on_host_batch,
                        source_includes, strip_comments_and_strings)
from .errors import CompileError, LabkitError, NoGPUError
from .validate import require_int, require_sequence, require_str

#: The architectures the course compiles for: Volta, Ampere, Hopper.
COURSE_ARCHES = ("sm_70", "sm_80", "sm_90")

# ----------------------------------------------------------------------------------------- PTX entries
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$]+)")


@dataclass(frozen=True)
class Entry:
    """One kernel entry point in PTX: its (possibly mangled) name, parameter types and body text."""

    name: str
    params: tuple[str, ...]  # PTX types: "u64" (a pointer or a 64-bit integer), "f32", "u32", ...
    body: str

    @property
    def mangled(self) -> bool:
        """True when the name is a C++-mangled one (``_Z...``): the source lacks ``extern "C"``."""
        return self.name.startswith("_Z")

    @property
    def plain_name(self) -> str:
        """The name as written in the source (demangled from ``_Z<len><name>...`` when needed)."""
        m = re.match(r"_Z(\d+)", self.name)
        if m:
            k = int(m.group(1))
            start = m.end()
            return self.name[start : start + k]
        return self.name


def entries(ptx_text: str) -> list[Entry]:
    """Every ``.entry`` (kernel) in a PTX text, in order."""
    _ptx_text(ptx_text)
    found = []
    matches = list(_ENTRY.finditer(ptx_text))
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(ptx_text)
        params = tuple(t for t, _ in _PARAM.findall(m.group(2)))
        found.append(Entry(m.group(1), params, ptx_text[m.end() : end]))
    return found


def _ptx_text(ptx_text: Any) -> str:
    if not isinstance(ptx_text, str):
        raise LabkitError(f"ptx_text must be PTX text (a string), got {ptx_text!r:.60}.",
                          fix="Pass the .text of a compiled PTX, e.g. compile_for(source, name)['sm_90'].text.")
    return ptx_text


def _entry(entry: Any) -> "Entry":
    if not isinstance(entry, Entry):
        raise LabkitError(f"entry must be a kernel Entry (find_entry(ptx_text, name) returns one), got {entry!r:.60}.")
    return entry


def _arches(arches: Any) -> list[str]:
    return require_sequence(arches, "arches", what="a list of architecture names such as ['sm_80', 'sm_90']",
                            item=lambda a, n: require_str(a, n))


def find_entry(ptx_text: str, name: str, *, n_params: int | None = None) -> Entry:
    """The kernel called ``name``; raise :class:`LabkitError` saying what is wrong (missing, mangled, wrong arity)."""
    _ptx_text(ptx_text)
    name = require_str(name, "name", fix="The kernel's name as declared: extern \"C\" __global__ void NAME(...).")
    n_params = None if n_params is None else require_int(n_params, "n_params", min=0)
    all_entries = entries(ptx_text)
    for e in all_entries:
        if e.name == name:
            if n_params is not None and len(e.params) != n_params:
                raise LabkitError(
                    f"kernel {name!r} has {len(e.params)} parameter(s); the exercise calls it with {n_params}.",
                    fix="Use exactly the parameter list the task gives, in that order.",
                )
            return e
    for e in all_entries:
        if e.mangled and e.plain_name == name:
            raise LabkitError(
                f"kernel {name!r} compiled, but under the C++ name {e.name!r}, so CuPy cannot find it by name.",
                fix='Start the declaration with extern "C": extern "C" __global__ void ' + name + "(...)",
            )
    names = ", ".join(e.plain_name for e in all_entries) or "none"
    raise LabkitError(
        f"the source has no kernel called {name!r} (kernels found: {names}).",
        fix=f'Declare it as extern "C" __global__ void {name}(...), spelled exactly so.',
    )


# ----------------------------------------------------------------------------------------- bounds-check signal
_REG = re.compile(r"%[\w.]+")


def _instructions(body: str) -> list[tuple[str | None, str, list[str]]]:
    """(guard predicate, opcode, operands) for each instruction of an entry body."""
    out = []
    for raw in body.splitlines():
        line = raw.split("//")[0].strip().rstrip(";").strip()
        if not line or line.startswith((".", "{", "}")) or line.endswith(":"):
            continue
        guard = None
        if line.startswith("@"):
            guard, _, line = line.partition(" ")
            guard = guard.lstrip("@").lstrip("!")
            line = line.strip()
        op, _, rest = line.partition(" ")
        operands = [o.strip() for o in rest.replace("[", " ").replace("]", " ").split(",")]
        out.append((guard, op, [o for o in operands if o]))
    return out


def guards_with(entry: Entry, param_index: int) -> bool:
    """Static signal: does a comparison with parameter ``param_index`` (the size) steer what the kernel does?

    True when a ``setp`` reads a value derived from that parameter (followed through ``mov``, ``cvt``, arithmetic)
    and its predicate guards a branch, a store or a ``selp``. It cannot tell ``i < n`` from ``i <= n``; the
    CPU stand-in (:func:`run_on_host`) or a GPU run catches that.
    """
    _entry(entry)
    param_index = require_int(param_index, "param_index", min=0)
    pname = f"{entry.name}_param_{param_index}"
    insts = _instructions(entry.body)
    tainted: set[str] = set()
    for _ in range(3):  # loops can carry values backwards: a few passes reach the fixed point
        for guard, op, ops in insts:
            if not ops:
                continue
            dest, srcs = ops[0], ops[1:]
            if op.startswith("ld.param") and any(pname == s for s in srcs):
                tainted.add(dest)
            elif not op.startswith(("st.", "bra", "setp", "ret")) and any(s in tainted for s in srcs):
                tainted.add(dest)
    preds: set[str] = set()
    for _ in range(3):
        for guard, op, ops in insts:
            if op.startswith("setp") and len(ops) >= 3 and any(s in tainted for s in ops[1:]):
                preds.update(p for p in ops[0].split("|") if p)
            elif op.endswith(".pred") and len(ops) >= 2 and any(s in preds for s in ops[1:]):
                preds.add(ops[0])  # and.pred / or.pred / not.pred combine conditions
    for guard, op, ops in insts:
        if guard in preds and (op.startswith(("bra", "st.", "ret", "exit")) or op == "ret"):
            return True
        if op.startswith("selp") and ops and ops[-1] in preds:
            return True
    return False


def stores_global(entry: Entry) -> bool:
    """True when the kernel writes memory (``st.global``, a generic ``st``, an atomic, a ``wmma.store``): it does something."""
    insts = _instructions(_entry(entry).body)
    return any(op.startswith("st.") and ".shared" not in op and ".local" not in op and ".param" not in op for _, op, _ in insts) \
        or any(op.startswith(("atom.", "red.")) or (op.startswith("wmma.store") and ".shared" not in op) for _, op, _ in insts)


# ----------------------------------------------------------------------------------------- compile
def compile_for(source: str, name: str, arches: Sequence[str] = COURSE_ARCHES) -> dict[str, Any]:
    """Compile ``source`` with NVRTC for each architecture the installed NVRTC targets; ``{arch: labkit.ptx.PTX}``.

    An architecture the NVRTC cannot target (NVRTC 13 has no sm_70) is left out of the result, not an error:
    :func:`skipped_arches` names those. Raises CompileError when the source does not compile, and
    :class:`labkit.ptx.ArchNotSupported` when NVRTC targets none of ``arches``."""
    if not isinstance(source, str):
        raise LabkitError(f"the CUDA C++ source must be a string, got {type(source).__name__}.",
                          fix='Put the kernel in a Python string: source = r"""extern "C" __global__ void ..."""')
    from . import ptx

    name = require_str(name, "name", fix="The kernel's name as declared in the source.")
    arches = _arches(arches)
    kept, _ = ptx.targetable(arches)
    if not kept and arches:
        ptx.compile_cuda(source, arches[0], name=f"{name}.cu")  # raises ArchNotSupported, naming what NVRTC targets
    return {arch: ptx.compile_cuda(source, arch, name=f"{name}.cu") for arch in kept}


def skipped_arches(arches: Sequence[str] = COURSE_ARCHES) -> list[str]:
    """The architectures of ``arches`` that :func:`compile_for` leaves out: the installed NVRTC cannot target them."""
    from . import ptx

    return ptx.targetable(_arches(arches))[1]


def arches_compiled(arches: Sequence[str] = COURSE_ARCHES) -> str:
    """"sm_70, sm_80, sm_90", or "sm_80, sm_90 (sm_70 skipped: NVRTC 13.0 cannot target it.)": for check messages."""
    from . import ptx

    kept, skipped = ptx.targetable(_arches(arches))
    return ", ".join(kept) + ptx.skipped_note(skipped)


# ----------------------------------------------------------------------------------------- CPU stand-in (labkit.cuda_host)
#: ctypes and NumPy types of PTX parameter types, for scalar arguments.
_CTYPES = {"f32": ("c_float", np.float32), "f64": ("c_double", np.float64), "u32": ("c_int32", np.int32),
           "s32": ("c_int32", np.int32), "b32": ("c_int32", np.int32), "u64": ("c_int64", np.int64),
           "s64": ("c_int64", np.int64), "b64": ("c_int64", np.int64), "u16": ("c_uint16", np.uint16),
           "s16": ("c_int16", np.int16), "u8": ("c_uint8", np.uint8), "s8": ("c_int8", np.int8)}


def _dims(value: Any, what: str) -> list[int]:
    dims = [value] if isinstance(value, (int, np.integer)) else list(value) if isinstance(value, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and d >= 1 for d in dims):
        raise LabkitError(f"{what} must be a positive int or a tuple of 1 to 3 positive ints, got {value!r}.",
                          fix="For n elements and 128 threads per block: grid=((n + 127) // 128,), block=(128,).")
    return [int(d) for d in dims] + [1] * (3 - len(dims))


def check_launch(entry: Entry, grid: Any, block: Any, args: Sequence[Any], *, on_gpu: bool) -> tuple[list[int], list[int]]:
    """Validate a launch before it happens: grid and block shapes, and each argument against the PTX parameter type.

    Pointer parameters (``u64``) need arrays (CuPy arrays on the current GPU, NumPy arrays in ``sim`` mode); ``f32``
    needs ``numpy.float32``, ``s32``/``u32`` need ``numpy.int32``/``numpy.uint32``: CuPy passes a Python ``float`` as a
    double and a Python ``int`` as a 64-bit integer, which a ``float``/``int`` parameter would misread.
    """
    _entry(entry)
    g, b = _dims(grid, "grid"), _dims(block, "block")
    if b[0] * b[1] * b[2] > 1024:
        raise LabkitError(f"a block of {b[0] * b[1] * b[2]} threads is more than the 1024 a CUDA block may have.",
                          fix="Use at most 1024 threads per block (128 or 256 are good choices).")
    if not isinstance(args, (tuple, list)):
        raise LabkitError("the kernel's arguments must be a tuple, e.g. (x, y, np.float32(alpha), np.int32(n)).")
    if len(args) != len(entry.params):
        raise LabkitError(f"{entry.plain_name} takes {len(entry.params)} argument(s), got {len(args)}.",
                          fix="Pass one value per kernel parameter, in order, as a tuple.")
    for k, (arg, ptype) in enumerate(zip(args, entry.params)):
        where = f"argument {k} of {entry.plain_name}"
        is_np = isinstance(arg, np.ndarray)
        is_dev = hasattr(arg, "__cuda_array_interface__")
        if is_np or is_dev:
            if ptype not in ("u64", "b64", "s64"):
                raise LabkitError(f"{where} is an array, but the kernel's parameter is a {ptype} scalar.",
                                  fix="Pass a NumPy scalar of the parameter's type here, e.g. np.float32(...) or np.int32(...).")
            if on_gpu and is_np:
                raise LabkitError(f"{where} is a NumPy array in host memory; a GPU kernel needs device memory.",
                                  fix="Copy it to the GPU first: x_gpu = cupy.asarray(x).")
            if on_gpu and is_dev:
                _check_device(arg, where)
            if (is_np and not arg.flags.c_contiguous) or (is_dev and not _cai_contiguous(arg)):
                raise LabkitError(f"{where} is not contiguous; a raw kernel indexes it as a flat array.",
                                  fix="Pass xp.ascontiguousarray(x).")
            continue
        if isinstance(arg, (bool, int, float)) and not isinstance(arg, np.generic):
            want = _CTYPES.get(ptype, (None, None))[1]
            wname = np.dtype(want).name if want is not None else ptype
            raise LabkitError(f"{where} is a Python {type(arg).__name__}; the kernel's parameter is {ptype}.",
                              fix=f"Wrap it: np.{wname}({arg!r}). CuPy would pass a Python {type(arg).__name__} as a 64-bit value.")
        if isinstance(arg, np.generic):
            want = _CTYPES.get(ptype, (None, None))[1]
            if ptype in ("u64", "b64", "s64") and arg.dtype.itemsize == 8 and arg.dtype.kind in "iu":
                continue
            if want is None or np.dtype(want).itemsize != arg.dtype.itemsize or (np.dtype(want).kind == "f") != (arg.dtype.kind == "f"):
                wname = np.dtype(want).name if want is not None else ptype
                raise LabkitError(f"{where} is a {arg.dtype.name}, but the kernel's parameter is {ptype}.",
                                  fix=f"Pass np.{wname}(...) here." if ptype not in ("u64",) else "Pass an array here.")
            continue
        raise LabkitError(f"{where} is a {type(arg).__name__}, which a kernel cannot take.",
                          fix="Pass arrays for pointer parameters and NumPy scalars (np.float32, np.int32) for the others.")
    return g, b


def _cai_contiguous(arr: Any) -> bool:
    flags = getattr(arr, "flags", None)
    return bool(getattr(flags, "c_contiguous", True)) if flags is not None else True


def _check_device(arr: Any, where: str) -> None:
    import cupy  # gpu mode only

    dev = getattr(arr, "device", None)
    current = cupy.cuda.Device().id
    if dev is not None and getattr(dev, "id", current) != current:
        raise LabkitError(f"{where} lives on GPU {dev.id}, but kernels launch on GPU {current}.",
                          fix=f"Copy it: with cupy.cuda.Device({current}): x = cupy.asarray(x); or launch inside `with cupy.cuda.Device({dev.id}):`.")


_PTX_CACHE: dict[tuple[str, str], str] = {}


def _ptx_sm90(source: str, name: str) -> str:
    key = (source, name)
    if key not in _PTX_CACHE:
        _PTX_CACHE[key] = compile_for(source, name, ("sm_90",))["sm_90"].text
    return _PTX_CACHE[key]


# ----------------------------------------------------------------------------------------- RawKernel
class RawKernel:
    """CuPy's ``RawKernel(code, name)`` with checks first; runs on the GPU, or on the CPU stand-in in ``sim`` mode.

    ``kernel(grid, block, args)`` validates ``args`` against the kernel's parameters (read from its PTX) before
    launching, so a Python ``float`` for a ``float`` parameter or a host array for a pointer is a clear error,
    not a wrong result.
    """

    def __init__(self, code: str, name: str) -> None:
        from .mode import env

        if not isinstance(code, str):
            raise LabkitError(f"the CUDA C++ source must be a string, got {code!r:.60}.",
                              fix='Put the kernel in a Python string: code = r"""extern "C" __global__ void ..."""')
        name = require_str(name, "name", fix="The kernel's name as declared: extern \"C\" __global__ void NAME(...).")
        self.code, self.name = code, name
        self._env = env()
        # The parameter list is the same for every architecture; sm_90 is one every NVRTC of the course knows.
        self.entry = find_entry(_ptx_sm90(code, name), name)
        self._cupy_kernel: Any = None

    @property
    def params(self) -> tuple[str, ...]:
        """PTX types of the parameters (``u64`` is a pointer or a 64-bit integer)."""
        return self.entry.params

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0) -> None:
        """Launch: ``shared_mem`` is the dynamic shared memory per block in bytes (``extern __shared__`` arrays), as
        in CuPy."""
        from .cuda_host import _with_shared_mem

        smem = _with_shared_mem((grid, block, args, shared_mem))[3]
        if self._env.is_gpu:
            g, b = check_launch(self.entry, grid, block, args, on_gpu=True)
            import cupy

            if self._cupy_kernel is None:
                self._cupy_kernel = cupy.RawKernel(self.code, self.name)
            self._cupy_kernel(tuple(g), tuple(b), tuple(args), shared_mem=smem)
        else:
            run_on_host(self.code, self.name, grid, block, args, shared_mem=smem)

    def __repr__(self) -> str:
        return f"<labkit RawKernel {self.name}({', '.join(self.params)})>"


def no_gpu(what: str) -> NoGPUError:
    """The error for a GPU-only step in ``sim`` mode."""
    return NoGPUError(f"{what} needs a GPU; this kernel is in sim mode.",
                      fix="Run the notebook on a machine with an NVIDIA GPU; in sim mode the cell explains what it would show.")


__all__ = ["COURSE_ARCHES", "DYNAMIC_SHARED_MAX", "Entry", "rewrite_dynamic_shared", "arches_compiled", "skipped_arches", "HostKernelError", "HostPlan", "HostUnavailable", "RawKernel", "host_plan", "host_source",
           "host_include_dir", "strip_comments_and_strings", "source_includes", "check_launch", "compile_for", "entries",
           "OutOfBounds", "run_on_host_batch", "elementwise_source", "reduction_source", "reduction_host_source", "parse_params", "find_entry", "guards_with", "host_compiler", "run_on_host", "stores_global", "CompileError"]


# ----------------------------------------------------------------------------------------- ElementwiseKernel / ReductionKernel stand-ins
_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long", "uint32": "unsigned int",
            "uint64": "unsigned long long", "int16": "short", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "float": "float", "double": "double", "int": "int"}
_IDENT = re.compile(r"[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Param:
    """One parameter of an ElementwiseKernel/ReductionKernel parameter list, e.g. ``raw float32 x``."""

    ctype: str
    name: str
    raw: bool = False
    generic: str | None = None  # a type placeholder such as "T"


def parse_params(text: str, what: str, *, generic_default: str = "float32",
                 generic_types: dict[str, str] | None = None) -> list[Param]:
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
            raise LabkitError(f"{what}: {part!r} is not 'type name' (e.g. 'float32 x').",
                              fix="Write each parameter as a NumPy type name and a name, separated by commas.")
        t, n = words
        if n in ("i", "n") or n.startswith("_"):
            raise LabkitError(f"{what}: the name {n!r} is reserved by CuPy (i, n and names starting with _).",
                              fix="Choose another parameter name.")
        if t in _C_TYPES:
            out.append(Param(_C_TYPES[t], n, raw))
        elif re.fullmatch(r"[A-Z]\w*", t):
            out.append(Param(_C_TYPES[(generic_types or {}).get(t, generic_default)], n, raw, generic=t))
        else:
            raise LabkitError(f"{what}: unknown type {t!r} in {part!r}.",
                              fix=f"Use a NumPy type name ({', '.join(list(_C_TYPES)[:6])}, ...) or a placeholder such as T.")
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
_INDEXER = ("#ifndef _LK_INDEXER\n#define _LK_INDEXER\nstruct _LkIndexer { long long _n; long long _i;\n"
            "  __device__ long long size() const { return _n; }\n  __device__ void set(long long i) { _i = i; }\n"
            "  __device__ const long long* get() const { return &_i; } };\n#endif\n")


def elementwise_source(in_params: str, out_params: str, operation: str, name: str, preamble: str = "", *,
                       types: dict[str, str] | None = None) -> str:
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
        raise LabkitError(f"parameter name(s) {', '.join(sorted(dup))} appear more than once.",
                          fix="Give every input and output its own name.")
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


def reduction_source(in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                     identity: str, name: str, *, partials: int = 4) -> str:
    """CUDA C++ with the meaning of ``cupy.ReductionKernel(...)`` over a whole 1-D array, for checking expressions.

    Each thread folds a strided share of the input starting from ``identity`` (``partials`` shares in all, as
    a tree reduction would), then thread 0 folds the partial results, again from ``identity``, and applies
    ``post_map_expr``. ``a`` and ``b`` are the reduction's operands, and ``_in_ind``/``_out_ind`` its index objects
    (``_in_ind.size()`` is n, ``_out_ind.size()`` 1 for a whole-array reduction), as in CuPy. Launch with one block of
    ``partials`` threads. Slow on purpose: it checks meaning, not speed.
    """
    ins, outs = parse_params(in_params, "in_params"), parse_params(out_params, "out_params")
    for label, expr in (("map_expr", map_expr), ("reduce_expr", reduce_expr), ("post_map_expr", post_map_expr), ("identity", identity)):
        if not isinstance(expr, str) or not expr.strip():
            raise LabkitError(f"{label} must be a non-empty string of CUDA C++.")
    if len(outs) != 1 or outs[0].raw:
        raise LabkitError("a ReductionKernel here has exactly one (non-raw) output, e.g. out_params='float32 y'.")
    if not _IDENT.match(name or ""):
        raise LabkitError(f"kernel name {name!r} is not a C identifier.")
    out = outs[0]
    acc = out.ctype  # CuPy's reduce_type defaults to the output type
    sig = [f"const {p.ctype}* _in_{p.name}" for p in ins] + [f"{out.ctype}* _out_{out.name}", "long long n"]
    loads = " ".join(f"const {p.ctype} {p.name} = _in_{p.name}[_j];" for p in ins)
    return (
        f"{_typedefs(ins + outs)}{_INDEXER}"
        f"#define _LK_REDUCE(a, b) ({reduce_expr.strip().rstrip(';')})\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}) {{\n'
        f"  __shared__ {acc} _part[{partials}];\n"
        f"  _LkIndexer _in_ind = {{n, 0}}, _out_ind = {{1, 0}};\n"
        f"  {acc} _acc = ({acc})({identity.strip()});\n"
        f"  for (long long _j = threadIdx.x; _j < n; _j += blockDim.x) {{\n"
        f"    _in_ind.set(_j); {loads}\n"
        f"    {acc} _m = ({acc})({map_expr.strip().rstrip(';')});\n"
        f"    _acc = _LK_REDUCE(_acc, _m);\n"
        f"  }}\n"
        f"  _part[threadIdx.x] = _acc;\n"
        f"  __syncthreads();\n"
        f"  if (threadIdx.x == 0) {{\n"
        f"    {acc} a = ({acc})({identity.strip()});\n"
        f"    for (unsigned _t = 0; _t < blockDim.x; ++_t) a = _LK_REDUCE(a, _part[_t]);\n"
        f"    {out.ctype}& {out.name} = _out_{out.name}[0];\n"
        f"    {post_map_expr.strip().rstrip(';')};\n"
        f"  }}\n}}\n"
    )


def reduction_host_source(in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                          identity: str, name: str, *, partials: int = 4, types: dict[str, str] | None = None) -> str:
    """The same reduction as :func:`reduction_source` written for the CPU stand-in (one thread, no barrier);
    placeholder types (``T``) as ``types`` binds them (NumPy names), else float32."""
    ins = parse_params(in_params, "in_params", generic_types=types)
    outs = parse_params(out_params, "out_params", generic_types=types)
    out = outs[0]
    acc = out.ctype
    sig = [f"const {p.ctype}* _in_{p.name}" for p in ins] + [f"{out.ctype}* _out_{out.name}", "long long n"]
    loads = " ".join(f"const {p.ctype} {p.name} = _in_{p.name}[_j];" for p in ins)
    return (
        f"{_typedefs(ins + outs)}{_INDEXER}"
        f"#define _LK_REDUCE(a, b) ({reduce_expr.strip().rstrip(';')})\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}) {{\n'
        f"  {acc} _part[{partials}];\n"
        f"  _LkIndexer _in_ind = {{n, 0}}, _out_ind = {{1, 0}};\n"
        f"  for (unsigned _t = 0; _t < {partials}; ++_t) {{\n"
        f"    {acc} _acc = ({acc})({identity.strip()});\n"
        f"    for (long long _j = _t; _j < n; _j += {partials}) {{\n"
        f"      _in_ind.set(_j); {loads}\n"
        f"      {acc} _m = ({acc})({map_expr.strip().rstrip(';')});\n"
        f"      _acc = _LK_REDUCE(_acc, _m);\n"
        f"    }}\n"
        f"    _part[_t] = _acc;\n"
        f"  }}\n"
        f"  {acc} a = ({acc})({identity.strip()});\n"
        f"  for (unsigned _t = 0; _t < {partials}; ++_t) a = _LK_REDUCE(a, _part[_t]);\n"
        f"  {out.ctype}& {out.name} = _out_{out.name}[0];\n"
        f"  {post_map_expr.strip().rstrip(';')};\n"
        f"}}\n"
    )
