"""CUDA C++ kernels for CuPy, checked without a GPU: entries, bounds checks, a CPU stand-in, safe launches.

What this module does with a learner's CUDA C++ source (as given to CuPy's ``RawKernel``):

- :func:`compile_for` compiles it to PTX with NVRTC for several architectures (``labkit.ptx.compile_cuda``);
- :func:`entries` / :func:`find_entry` read the PTX ``.entry`` lines: kernel names and parameter types, and
  spot a kernel whose name was C++-mangled because ``extern "C"`` is missing;
- :func:`guards_with` is a static signal for a bounds check: some comparison in the kernel involves the
  size parameter (followed through moves and conversions) and drives a branch, a predicated store or a select;
- :func:`run_on_host` compiles the same source as ordinary C++ with the machine's C++ compiler (when there is
  one) after labkit's prelude (``kernels/cuda/host/labkit_cuda_host.h``: CUDA's built-in variables, qualifiers,
  math intrinsics, ``__half``/``__nv_bfloat16``, atomics, barriers, warp shuffles and votes) and with labkit's
  stand-in headers on the include path (``<mma.h>``: the ``nvcuda::wmma`` fragment API on the CPU). It runs the
  grid in a separate process, block after block; when the kernel uses barriers, shared memory or warp-wide calls,
  every thread of a block is a fiber with its own stack, so ``__syncthreads()`` really waits for the block and
  warp calls are made by the warp together (a barrier or warp call that not every thread makes is an error, as
  it is undefined on a GPU). Arrays sit between poisoned guard zones that are read back. Keyword tests run on
  the source with comments and strings removed (:func:`strip_comments_and_strings`): a word in a comment
  never changes the decision. It checks values; it says nothing about speed.
- :class:`RawKernel` wraps all this behind CuPy's calling convention ``kernel(grid, block, args)``: arguments are
  checked against the kernel's parameters before anything is launched. On a GPU it launches ``cupy.RawKernel``;
  in ``sim`` mode it runs the CPU stand-in.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .errors import CompileError, LabkitError, NoGPUError

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
    found = []
    matches = list(_ENTRY.finditer(ptx_text))
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(ptx_text)
        params = tuple(t for t, _ in _PARAM.findall(m.group(2)))
        found.append(Entry(m.group(1), params, ptx_text[m.end() : end]))
    return found


def find_entry(ptx_text: str, name: str, *, n_params: int | None = None) -> Entry:
    """The kernel called ``name``; raise :class:`LabkitError` saying what is wrong (missing, mangled, wrong arity)."""
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
    insts = _instructions(entry.body)
    return any(op.startswith("st.") and ".shared" not in op and ".local" not in op and ".param" not in op for _, op, _ in insts) \
        or any(op.startswith(("atom.", "red.")) or (op.startswith("wmma.store") and ".shared" not in op) for _, op, _ in insts)


# ----------------------------------------------------------------------------------------- compile
def compile_for(source: str, name: str, arches: Sequence[str] = COURSE_ARCHES) -> dict[str, Any]:
    """Compile ``source`` with NVRTC for each architecture; ``{arch: labkit.ptx.PTX}``. Raises CompileError."""
    if not isinstance(source, str):
        raise LabkitError(f"the CUDA C++ source must be a string, got {type(source).__name__}.",
                          fix='Put the kernel in a Python string: source = r"""extern "C" __global__ void ..."""')
    from . import ptx

    return {arch: ptx.compile_cuda(source, arch, name=f"{name}.cu") for arch in arches}


# ----------------------------------------------------------------------------------------- CPU stand-in
class OutOfBounds(LabkitError):
    """A kernel run on the CPU stand-in wrote into the guard zone around an array."""


class HostUnavailable(LabkitError):
    """The CPU stand-in cannot run this source here (no C++ compiler, or features it does not emulate)."""


class HostKernelError(LabkitError):
    """On the CPU stand-in the kernel did what is undefined on a GPU (a barrier or a warp-wide call not every thread makes)."""


# What the stand-in is: a prelude (kernels/cuda/host/labkit_cuda_host.h) that makes CUDA C++ plain C++, with
# every thread of a block a fiber, plus stand-in headers (<mma.h>, <cuda_fp16.h>, ...) in the same folder.
def host_include_dir() -> Path:
    """The folder of the stand-in's headers (``labkit_cuda_host.h``, ``mma.h``, ``cuda_fp16.h``, ...)."""
    from .kernels_cuda import CUDA_DIR

    return CUDA_DIR / "host"


_PROLOGUE = '#include "labkit_cuda_host.h"\n#define __LK_FIBERS {fibers}\n#line 1 "kernel.cu"\n'

_LAUNCHER = r"""
#line 1 "labkit-launcher"
template <typename... A, std::size_t... I>
static void __lk_call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type*>(args[I])...);
}
static void** __lk_args;
static void __lk_body() { __lk_call(&KERNEL_NAME, __lk_args, std::make_index_sequence<NPARAMS>{}); }
extern "C" int __lk_launch(void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           char* msg, int msglen) {
    __lk_failed = 0; __lk_error_text[0] = 0;
    gridDim = dim3(gx, gy, gz); blockDim = dim3(bx, by, bz);
    __lk_args = args;
    __lk::body = __lk_body;
    if (!__lk::prepare(bx * by * bz, __LK_FIBERS)) { snprintf(msg, msglen, "the CPU stand-in ran out of memory"); return 2; }
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {
        blockIdx = uint3{x, y, z};
        __lk_poison_shared();
        if (__LK_FIBERS) {
            int t = 0;
            for (unsigned tz = 0; tz < bz; ++tz) for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx, ++t)
                __lk::fibers[t].tid = uint3{tx, ty, tz};
            if (__lk_run_block_fibers()) { snprintf(msg, msglen, "%s", __lk_error_text); return 1; }
        } else {
            for (unsigned tz = 0; tz < bz; ++tz) for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx) {
                threadIdx = uint3{tx, ty, tz};
                __lk_body();
                if (__lk_failed) { snprintf(msg, msglen, "%s", __lk_error_text); return 1; }
            }
        }
    }
    return 0;
}
"""

# ---------------------------------------------------------------------------------- reading the source as a compiler does
_LEX = re.compile(
    r"""(?P<line>//[^\n]*)"""
    r"""|(?P<block>/\*.*?(?:\*/|\Z))"""
    r"""|(?P<raw>R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")"""
    r"""|(?P<str>"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<chr>'(?:\\.|[^'\\\n])*')""",
    re.S,
)


def strip_comments_and_strings(source: str) -> str:
    """``source`` with comments blanked and string/character literals emptied, line numbers kept.

    Every keyword test of the stand-in runs on this text, so a word in a comment (``// no __syncthreads here``)
    or in a ``printf`` format never changes what is decided. ``#include <...>`` names survive (they are not
    string literals); ``#include "x.h"`` keeps its quotes and loses the name, so includes are read separately
    by :func:`source_includes`.
    """

    def blank(m: re.Match[str]) -> str:
        text = m.group(0)
        if m.group("line") or m.group("block"):
            return "".join("\n" if c == "\n" else " " for c in text)
        quote = '"' if m.group("raw") or m.group("str") else "'"
        return quote + "\n" * text.count("\n") + quote

    return _LEX.sub(blank, source)


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def source_includes(source: str) -> list[str]:
    """The header names of the ``#include`` lines that are code (not inside comments), in order."""
    code_lines = strip_comments_and_strings(source).splitlines()
    out = []
    for line_no, line in enumerate(source.splitlines()):
        m = _INCLUDE.match(line)
        if m and line_no < len(code_lines) and re.match(r"^[ \t]*#[ \t]*include", code_lines[line_no]):
            out.append(m.group(2).strip())
    return out


#: Headers the stand-in provides itself (kernels/cuda/host/).
STANDIN_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "mma.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h",
                   "device_launch_parameters.h", "vector_types.h", "math_constants.h")
#: Standard C/C++ headers a kernel may include (the host's own).
STANDARD_HEADERS = ("stdio.h", "stdint.h", "stddef.h", "math.h", "float.h", "limits.h", "assert.h", "stdlib.h",
                    "string.h", "cstdio", "cstdint", "cstddef", "cmath", "cfloat", "climits", "cassert", "cstdlib",
                    "cstring", "type_traits", "utility", "limits", "algorithm", "initializer_list")

# Real constructs (tested on the stripped text) that decide how the stand-in runs a kernel.
_NEEDS_FIBERS = re.compile(
    r"\b(?:__syncthreads(?:_count|_and|_or)?|__syncwarp|__shfl(?:_up|_down|_xor)?_sync|__ballot_sync|__any_sync"
    r"|__all_sync|__activemask|__lanemask_lt|load_matrix_sync|store_matrix_sync|mma_sync|fill_fragment|__shared__)\b")
_NOT_EMULATED = (
    (re.compile(r"\bextern\s+__shared__\b"), "dynamic shared memory (extern __shared__)"),
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\s*|__volatile__\s*)?\("), "inline PTX (asm)"),
    (re.compile(r"\b(?:tex[123]D\w*|tex1Dfetch|surf[123]D\w*|cudaTextureObject_t|cudaSurfaceObject_t)\b"), "textures and surfaces"),
    (re.compile(r"\bcooperative_groups\b|\bcg::"), "cooperative groups"),
    (re.compile(r"<<<"), "kernel launches from the GPU (dynamic parallelism)"),
    (re.compile(r"\b__match_(?:any|all)_sync\b|\b__reduce_\w+_sync\b"), "__match_*_sync and __reduce_*_sync"),
    (re.compile(r"\b__cluster_dims__\b|\bcluster_group\b"), "thread-block clusters"),
    (re.compile(r"\bwmma::(?:precision|experimental)\b|\bbmma_sync\b"), "WMMA beyond FP16/BF16 16×16×16 fragments"),
)


@dataclass(frozen=True)
class HostPlan:
    """How the CPU stand-in will run a source: with fibers (barriers, warp calls, shared memory) or thread by thread."""

    fibers: bool
    includes: tuple[str, ...]


def host_plan(source: str) -> HostPlan:
    """Decide from the source's real constructs how to run it; :class:`HostUnavailable` if the stand-in cannot.

    Comments and string literals are ignored: only code counts.
    """
    code = strip_comments_and_strings(source)
    for pattern, what in _NOT_EMULATED:
        if pattern.search(code):
            raise HostUnavailable(f"the CPU stand-in does not emulate {what}.",
                                  fix="This kernel is checked by compiling it only; run the notebook on a GPU to check its results.")
    includes = tuple(source_includes(source))
    for name in includes:
        base = name.replace("\\", "/")
        if base not in STANDIN_HEADERS and base not in STANDARD_HEADERS:
            raise HostUnavailable(f"the CPU stand-in has no <{name}>.",
                                  fix="This kernel is checked by compiling it only; run the notebook on a GPU to check its results.")
    return HostPlan(bool(_NEEDS_FIBERS.search(code)), includes)


_WORKER = r"""
import ctypes, json, sys
import numpy as np
req = json.load(sys.stdin)
lib = ctypes.CDLL(req["lib"])
lib.__lk_launch.restype = ctypes.c_int
data = np.load(req["arrays"])
out, report = {}, []
ALIGN = 256
for launch in req["launches"]:
    keep, ptrs, bufs = [], [], {}
    for k, a in enumerate(launch["args"]):
        if a["kind"] == "array":
            inner = data[a["key"]]
            pattern = 0xA1 + k  # a different poison per array, so copying one guard zone into another shows
            nbytes = inner.size * inner.itemsize
            gbytes = -(-launch["guard"] * inner.itemsize // ALIGN) * ALIGN
            raw = np.full(nbytes + 2 * gbytes + ALIGN, pattern, dtype=np.uint8)
            start = (-raw.ctypes.data) % ALIGN + gbytes  # the array starts 256-byte aligned, as cudaMalloc's do
            raw[start:start + nbytes] = np.ascontiguousarray(inner).view(np.uint8).ravel()
            bufs[a["key"]] = (raw, start, nbytes, inner.dtype, inner.shape, pattern)
            c = ctypes.c_void_p(raw.ctypes.data + start)
        else:
            c = getattr(ctypes, a["ctype"])(a["value"])
        keep.append(c)
        ptrs.append(ctypes.cast(ctypes.pointer(c), ctypes.c_void_p))
    argv = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
    msg = ctypes.create_string_buffer(2048)
    status = lib.__lk_launch(argv, *[ctypes.c_uint(v) for v in launch["grid"] + launch["block"]], msg, 2048)
    outside = {}
    for key, (raw, start, nbytes, dtype, shape, pattern) in bufs.items():
        if (raw[:start] != pattern).any():
            outside[key] = "before the start"
        elif (raw[start + nbytes:] != pattern).any():
            outside[key] = "past the end"
        out[key] = raw[start:start + nbytes].view(dtype).reshape(shape).copy()
    report.append({"outside": outside, "status": status, "error": msg.value.decode("utf-8", "replace")})
    if status:
        break
np.savez(req["out"], **out)
with open(req["report"], "w") as f:  # not stdout: that carries the kernel's own printf output
    json.dump(report, f)
"""

_CTYPES = {"f32": ("c_float", np.float32), "f64": ("c_double", np.float64), "u32": ("c_int32", np.int32),
           "s32": ("c_int32", np.int32), "b32": ("c_int32", np.int32), "u64": ("c_int64", np.int64),
           "s64": ("c_int64", np.int64), "b64": ("c_int64", np.int64), "u16": ("c_uint16", np.uint16),
           "s16": ("c_int16", np.int16), "u8": ("c_uint8", np.uint8), "s8": ("c_int8", np.int8)}

_SO_CACHE: dict[str, str] = {}


def host_compiler() -> str | None:
    """The C++ compiler the CPU stand-in uses: ``$LABKIT_HOST_CXX`` (``none`` turns the stand-in off), else g++/clang++."""
    chosen = os.environ.get("LABKIT_HOST_CXX")
    if chosen is not None:
        return None if chosen.lower() in ("", "none", "0", "off") else shutil.which(chosen) or chosen
    for cand in ("g++", "c++", "clang++"):
        path = shutil.which(cand)
        if path:
            return path
    return None


def host_source(source: str, name: str, n_params: int, *, fibers: bool | None = None) -> str:
    """The plain C++ translation unit the stand-in compiles: prelude, the learner's source unchanged, launcher."""
    use = host_plan(source).fibers if fibers is None else fibers
    launcher = _LAUNCHER.replace("KERNEL_NAME", name).replace("NPARAMS", str(n_params))
    return _PROLOGUE.format(fibers=int(use)) + source + "\n" + launcher


def _cache_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"labkit-host-{os.getuid() if hasattr(os, 'getuid') else 'u'}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _first_error(stderr: str) -> str:
    for ln in stderr.splitlines():
        if "error" in ln:
            return ln.split("error:", 1)[-1].strip() if "error:" in ln else ln.strip()
    return stderr.strip()[:300]


def _host_library(source: str, name: str, n_params: int) -> str:
    cxx = host_compiler()
    if cxx is None:
        raise HostUnavailable("no C++ compiler on this machine, so the CPU stand-in cannot run CUDA C++ here.",
                              fix="Install g++ (or set LABKIT_HOST_CXX) to run kernels on the CPU; a GPU run checks them fully.")
    text = host_source(source, name, n_params)
    inc = host_include_dir()
    headers = "".join(p.read_text() for p in sorted(inc.glob("*.h")))
    key = hashlib.sha256((cxx + "\0" + headers + "\0" + text).encode()).hexdigest()[:24]
    if key in _SO_CACHE and Path(_SO_CACHE[key]).exists():
        return _SO_CACHE[key]
    lib = _cache_dir() / f"{key}.so"
    if not lib.exists():
        tmp = Path(tempfile.mkdtemp(prefix="labkit-host-"))
        src, built = tmp / "k.cpp", tmp / "k.so"
        src.write_text(text)
        try:
            proc = subprocess.run([cxx, "-std=c++17", "-O1", "-w", "-fno-strict-aliasing", "-shared", "-fPIC", f"-I{inc}",
                                   str(src), "-o", str(built)], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise HostUnavailable("the CPU stand-in's C++ compiler took over 2 minutes on this kernel.",
                                  fix="A GPU run checks its results.") from None
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise HostUnavailable(f"the CPU stand-in could not build this kernel as plain C++ ({_first_error(proc.stderr)}).",
                                  fix="NVRTC compiled it, so it is valid CUDA C++; a GPU run checks its results.")
        os.replace(built, lib)  # atomic: another process may build the same kernel
        shutil.rmtree(tmp, ignore_errors=True)
    _SO_CACHE[key] = str(lib)
    return str(lib)


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


def run_on_host_batch(source: str, name: str, launches: Sequence[tuple[Any, Any, Sequence[Any]]], *,
                      timeout_s: float | None = None) -> list[str | None]:
    """Run several launches ``(grid, block, args)`` of one kernel on the CPU stand-in, in one helper process.

    Array arguments (NumPy) are updated in place; each lies 256-byte aligned between guard zones of a poison
    byte pattern, read back after the launch. Returns, per launch, None or a sentence saying which array
    argument was written outside its bounds. Raises :class:`HostUnavailable` (no compiler, or constructs the
    stand-in does not emulate), :class:`HostKernelError` (the kernel did what is undefined on a GPU: a barrier
    only some threads reach, a warp-wide call only part of the warp makes, ...) and :class:`LabkitError` (crash,
    time-out, bad arguments: see :func:`check_launch`). The time limit is labkit's limit for learner code.
    """
    if timeout_s is None:
        timeout_s = _learner_limit_s()
    entry = find_entry(_ptx_sm90(source, name), name)
    checked = [check_launch(entry, grid, block, args, on_gpu=False) for grid, block, args in launches]
    lib = _host_library(source, name, len(entry.params))
    tmp = Path(tempfile.mkdtemp(prefix="labkit-run-"))
    arrays: dict[str, np.ndarray] = {}
    specs = []
    for li, ((grid, block, args), (g, b)) in enumerate(zip(launches, checked)):
        spec = []
        for k, (arg, ptype) in enumerate(zip(args, entry.params)):
            if isinstance(arg, np.ndarray):
                arrays[f"l{li}a{k}"] = arg
                spec.append({"kind": "array", "key": f"l{li}a{k}"})
            else:
                spec.append({"kind": "scalar", "ctype": _CTYPES[ptype][0], "value": arg.item()})
        # room for every thread of the grid to write one element too far
        specs.append({"args": spec, "grid": g, "block": b, "guard": int(np.prod(g) * np.prod(b)) + 64})
    np.savez(tmp / "in.npz", **arrays)
    req = {"lib": lib, "arrays": str(tmp / "in.npz"), "out": str(tmp / "out.npz"), "report": str(tmp / "report.json"),
           "launches": specs}
    try:
        proc = subprocess.run([sys.executable, "-c", _WORKER], input=json.dumps(req), capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise LabkitError(f"{name} did not finish within {timeout_s:.0f} s on the CPU stand-in.",
                          fix="Look for a loop whose condition never becomes false (a grid-stride step of 0?).") from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        crash = proc.returncode < 0
        raise LabkitError(
            f"{name} crashed on the CPU stand-in" + (" (it touched memory far outside its arrays)." if crash else f": {proc.stderr.strip()[-300:]}"),
            fix="Check the index arithmetic and the bounds check: every access must stay inside its array.")
    report = json.loads((tmp / "report.json").read_text())
    _show_printf(proc.stdout, name)
    out = np.load(tmp / "out.npz")
    for key, arr in arrays.items():
        if key in out.files:
            np.copyto(arr, out[key])
    shutil.rmtree(tmp, ignore_errors=True)
    sentences: list[str | None] = []
    for li, rec in enumerate(report):
        if rec["status"]:
            g, b = checked[li]
            raise HostKernelError(f"{name} (grid {tuple(g)}, block {tuple(b)}) on the CPU stand-in: {rec['error']}",
                                  fix="A GPU would give undefined results or hang here; see the sentence above for what to change.")
        if rec["outside"]:
            key, side = next(iter(rec["outside"].items()))
            sentences.append(f"{name} wrote outside array argument {key.split('a')[-1]} ({side})")
        else:
            sentences.append(None)
    return sentences


def _show_printf(text: str, name: str, limit: int = 4000) -> None:
    """Print what the kernel printed with ``printf`` (as a GPU run would), cut at ``limit`` characters."""
    if text:
        cut = text[:limit]
        sys.stdout.write(cut + ("" if cut.endswith("\n") else "\n"))
        if len(text) > limit:
            sys.stdout.write(f"[{name}'s printf output cut after {limit} of {len(text)} characters]\n")


def _learner_limit_s() -> float:
    try:
        from .sim.limits import LEARNER_CODE_LIMIT_S
    except ImportError:  # pragma: no cover - the simulator layer is part of labkit
        return 20.0
    return float(LEARNER_CODE_LIMIT_S)


def run_on_host(source: str, name: str, grid: Any, block: Any, args: Sequence[Any], *, timeout_s: float | None = None) -> None:
    """Run a CUDA C++ kernel on the CPU stand-in, in a separate process (see :mod:`labkit.cuda_cpp`).

    Array arguments (NumPy) are updated in place, as a kernel launch would. Raises :class:`HostUnavailable`
    when there is no C++ compiler or the kernel needs what the stand-in lacks (dynamic shared memory, inline
    PTX, textures, cooperative groups), :class:`HostKernelError` for a barrier or warp-wide call not every
    thread makes, :class:`OutOfBounds` when it writes outside an array, and :class:`LabkitError` when it
    crashes (a wild memory access) or does not finish.
    """
    (outside,) = run_on_host_batch(source, name, [(grid, block, args)], timeout_s=timeout_s)
    if outside:
        raise OutOfBounds(f"{outside} on the CPU stand-in.",
                          fix="Threads whose index is past the last element must not write: add the bounds check `if (i < n)`.")


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

        self.code, self.name = code, name
        self._env = env()
        # The parameter list is the same for every architecture; sm_90 is one every NVRTC of the course knows.
        self.entry = find_entry(_ptx_sm90(code, name), name)
        self._cupy_kernel: Any = None

    @property
    def params(self) -> tuple[str, ...]:
        """PTX types of the parameters (``u64`` is a pointer or a 64-bit integer)."""
        return self.entry.params

    def __call__(self, grid: Any, block: Any, args: Sequence[Any]) -> None:
        if self._env.is_gpu:
            g, b = check_launch(self.entry, grid, block, args, on_gpu=True)
            import cupy

            if self._cupy_kernel is None:
                self._cupy_kernel = cupy.RawKernel(self.code, self.name)
            self._cupy_kernel(tuple(g), tuple(b), tuple(args))
        else:
            run_on_host(self.code, self.name, grid, block, args)

    def __repr__(self) -> str:
        return f"<labkit RawKernel {self.name}({', '.join(self.params)})>"


def no_gpu(what: str) -> NoGPUError:
    """The error for a GPU-only step in ``sim`` mode."""
    return NoGPUError(f"{what} needs a GPU; this kernel is in sim mode.",
                      fix="Run the notebook on a machine with an NVIDIA GPU; in sim mode the cell explains what it would show.")


__all__ = ["COURSE_ARCHES", "Entry", "HostKernelError", "HostPlan", "HostUnavailable", "RawKernel", "host_plan", "host_source",
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


def parse_params(text: str, what: str, *, generic_default: str = "float32") -> list[Param]:
    """Parse CuPy's parameter-list syntax (``"float32 x, T y, raw T z"``); placeholders become ``generic_default``."""
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
            out.append(Param(_C_TYPES[generic_default], n, raw, generic=t))
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


def elementwise_source(in_params: str, out_params: str, operation: str, name: str, preamble: str = "") -> str:
    """CUDA C++ equivalent to ``cupy.ElementwiseKernel(in_params, out_params, operation, name)`` on 1-D arrays.

    CuPy generates its own (more general) kernel; this stand-in has the same meaning for contiguous 1-D arrays of
    equal length: a grid-stride loop over ``i < n``, inputs as ``const`` values, outputs as references.
    Placeholder types (``T``) are instantiated as ``float``.
    """
    ins, outs = parse_params(in_params, "in_params"), parse_params(out_params, "out_params")
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
        f"{_typedefs(ins + outs)}{preamble}\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}, long long n) {{\n'
        f"  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
        f" i += (long long)blockDim.x * gridDim.x) {{\n"
        f"    {' '.join(body)}\n"
        f"    {op};\n"
        f"  }}\n}}\n"
    )


def reduction_source(in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                     identity: str, name: str, *, partials: int = 4) -> str:
    """CUDA C++ with the meaning of ``cupy.ReductionKernel(...)`` over a whole 1-D array, for checking expressions.

    Each thread folds a strided share of the input starting from ``identity`` (``partials`` shares in all, as
    a tree reduction would), then thread 0 folds the partial results, again from ``identity``, and applies
    ``post_map_expr``. ``a`` and ``b`` are the reduction's operands, as in CuPy. Launch with one block of
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
        f"{_typedefs(ins + outs)}"
        f"#define _LK_REDUCE(a, b) ({reduce_expr.strip().rstrip(';')})\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}) {{\n'
        f"  __shared__ {acc} _part[{partials}];\n"
        f"  {acc} _acc = ({acc})({identity.strip()});\n"
        f"  for (long long _j = threadIdx.x; _j < n; _j += blockDim.x) {{\n"
        f"    {loads}\n"
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
                          identity: str, name: str, *, partials: int = 4) -> str:
    """The same reduction as :func:`reduction_source` written for the CPU stand-in (one thread, no barrier)."""
    ins, outs = parse_params(in_params, "in_params"), parse_params(out_params, "out_params")
    out = outs[0]
    acc = out.ctype
    sig = [f"const {p.ctype}* _in_{p.name}" for p in ins] + [f"{out.ctype}* _out_{out.name}", "long long n"]
    loads = " ".join(f"const {p.ctype} {p.name} = _in_{p.name}[_j];" for p in ins)
    return (
        f"{_typedefs(ins + outs)}"
        f"#define _LK_REDUCE(a, b) ({reduce_expr.strip().rstrip(';')})\n"
        f'extern "C" __global__ void {name}({", ".join(sig)}) {{\n'
        f"  {acc} _part[{partials}];\n"
        f"  for (unsigned _t = 0; _t < {partials}; ++_t) {{\n"
        f"    {acc} _acc = ({acc})({identity.strip()});\n"
        f"    for (long long _j = _t; _j < n; _j += {partials}) {{\n"
        f"      {loads}\n"
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
