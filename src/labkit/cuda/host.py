"""labkit's CPU stand-in for CUDA C++: a learner's kernel compiled as plain C++ and run on the CPU, checking values.

:func:`run_on_host` / :func:`run_on_host_batch` compile the source with the machine's C++ compiler (g++ or clang++;
``$LABKIT_HOST_CXX``, ``none`` turns it off) after labkit's prelude ``kernels/cuda/host/labkit_cuda_host.h`` (CUDA's
built-in variables and qualifiers, device math functions and intrinsics, ``__half``/``__nv_bfloat16``, atomics,
barriers, warp shuffles and votes), with labkit's stand-in headers (``<mma.h>``: the ``nvcuda::wmma`` fragment API
on the CPU; ``<cuda_fp16.h>``, ...) on the include path. The grid runs in a separate process, block after block.
When the kernel uses barriers, shared memory or warp-wide calls, every thread of a block is a fiber with its own
stack: ``__syncthreads()`` waits for the whole block, warp calls are made by the warp together, and a barrier or
warp call that not every thread makes is a :class:`HostKernelError`, as it is undefined on a GPU. Shared memory is
poisoned before each block; arrays lie 256-byte aligned between poisoned guard zones that are read back. Dynamic
shared memory (``extern __shared__ T s[];``) gets exactly the launch's ``shared_mem`` bytes, as on a GPU: a block
that writes past them (a launch that never allocated any, say) is a :class:`HostKernelError`.

What the stand-in runs is decided by the source's real constructs: :func:`strip_comments_and_strings` removes
comments and string literals before every keyword test (:func:`host_plan`), so a word in a comment never switches
anything off. It checks values; it says nothing about speed.
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

from labkit.errors import LabkitError


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
    from labkit.cuda import CUDA_DIR

    return CUDA_DIR / "host"


#: The most dynamic shared memory a launch may ask for without opting in (CUDA's default limit: 48 KiB per block;
#: more needs cudaFuncSetAttribute, which the stand-in does not offer).
DYNAMIC_SHARED_MAX = 48 * 1024
# Dynamic shared memory (``extern __shared__ T s[];``): one fixed buffer between guard zones. Each block's window is
# poisoned (0xFF, as static shared memory) for the launch's ``shared_mem`` bytes; everything past them, and a zone
# before, holds the guard byte 0xCD, read back after every block: a write there is outside what the launch allocated.
_DYN_GUARD = 4096
_PROLOGUE = (
    '#include "labkit_cuda_host.h"\n#define __LK_FIBERS {fibers}\n#define __LK_DYN {dynamic}\n'
    f"#define __LK_DYN_GUARD {_DYN_GUARD}\n#define __LK_DYN_MAX {DYNAMIC_SHARED_MAX}\n"
    "alignas(256) static char __lk_dyn_buf[__LK_DYN_GUARD + __LK_DYN_MAX + __LK_DYN_GUARD];\n"
    "static char* const __lk_dyn_smem = __lk_dyn_buf + __LK_DYN_GUARD;\n"
    '#line 1 "kernel.cu"\n'
)

# ``extern __shared__ [alignas(N)|__align__(N)] T name[];`` (at file or function scope): rewritten to a pointer to the
# stand-in's dynamic shared buffer, the same text length on one line so line numbers stay.
_ALIGN = r"(?:(?:alignas|__align__)\s*\(\s*\w+\s*\)\s*)*"
_TYPE = r"(?:const\s+|volatile\s+|unsigned\s+|signed\s+|long\s+|short\s+)*[A-Za-z_][\w:]*(?:\s*<[^<>;]*>)?"
# the specifiers in any order CUDA accepts: `extern __shared__ T`, `extern T __shared__`, `__shared__ extern T`
_DYN_DECL = re.compile(
    rf"\b(?:extern\s+__shared__\s+{_ALIGN}(?P<t1>{_TYPE})|extern\s+{_ALIGN}(?P<t2>{_TYPE})\s+__shared__"
    rf"|__shared__\s+extern\s+{_ALIGN}(?P<t3>{_TYPE}))\s*{_ALIGN}(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;"
)


def rewrite_dynamic_shared(source: str) -> tuple[str, int]:
    """``source`` with each ``extern __shared__ T name[];`` made a pointer into the stand-in's dynamic shared memory,
    and how many declarations were rewritten (all of them alias one buffer, as on a GPU)."""
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        typ, name = (m.group("t1") or m.group("t2") or m.group("t3")).strip(), m.group("name")
        return f"{typ}* const {name} = reinterpret_cast<{typ}*>(__lk_dyn_smem);" + "\n" * m.group(0).count("\n")

    return _DYN_DECL.sub(repl, source), count


_LAUNCHER = r"""
#line 1 "labkit-launcher"
template <typename... A, std::size_t... I>
static void __lk_call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type*>(args[I])...);
}
template <typename... A> static void __lk_call_all(void (*f)(A...), void** args) {
    __lk_call(f, args, std::index_sequence_for<A...>{});
}
static void** __lk_args;
static void (*__lk_body)() = nullptr;
KERNEL_BODIES
static void (*const __lk_bodies[])() = {KERNEL_TABLE};
static int __lk_dyn_poison(unsigned smem) {
    memset(__lk_dyn_buf, 0xCD, sizeof __lk_dyn_buf);
    memset(__lk_dyn_smem, 0xFF, smem);
    return 0;
}
static int __lk_dyn_outside(unsigned smem, long* at) {  // 1 and the first byte offset written outside [0, smem)
    for (long k = 0; k < __LK_DYN_GUARD; ++k)
        if ((unsigned char)__lk_dyn_buf[k] != 0xCD) { *at = k - __LK_DYN_GUARD; return 1; }
    for (long k = __LK_DYN_GUARD + (long)smem; k < (long)sizeof __lk_dyn_buf; ++k)
        if ((unsigned char)__lk_dyn_buf[k] != 0xCD) { *at = k - __LK_DYN_GUARD; return 1; }
    return 0;
}
static unsigned __lk_only[3 * 64];  // the blocks (x, y, z) a check chose to run (none chosen: every block)
static int __lk_only_n = 0;
extern "C" void __lk_set_only(int n, const unsigned* xyz) {
    __lk_only_n = n < 64 ? n : 64;
    for (int k = 0; k < 3 * __lk_only_n; ++k) __lk_only[k] = xyz[k];
}
static bool __lk_runs(unsigned x, unsigned y, unsigned z) {
    if (!__lk_only_n) return true;
    for (int k = 0; k < __lk_only_n; ++k)
        if (__lk_only[3 * k] == x && __lk_only[3 * k + 1] == y && __lk_only[3 * k + 2] == z) return true;
    return false;
}
extern "C" int __lk_launch(int which, void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned cx, unsigned cy, unsigned cz, int order, unsigned smem, char* msg, int msglen) {
    __lk_body = __lk_bodies[which];
    __lk_failed = 0; __lk_error_text[0] = 0; __lk_oob_write[0] = 0; __lk_oob_read[0] = 0;
    gridDim = dim3(gx, gy, gz); blockDim = dim3(bx, by, bz);
    __lk_args = args;
    __lk::body = __lk_body;
    __lk::order = order;
    __lk::cdim = uint3{cx, cy, cz};
    __lk::dyn_ptr = __lk_dyn_smem;
    __lk::dyn_size = __LK_DYN ? smem : 0;
    __lk::dyn_lo = __LK_DYN ? __lk_dyn_buf : nullptr;
    __lk::dyn_hi = __lk_dyn_buf + sizeof __lk_dyn_buf;
    if (!__LK_FIBERS) { cx = cy = cz = 1; }
    if (!__lk::prepare(bx * by * bz, cx * cy * cz, __LK_FIBERS) || (__LK_FIBERS && !__lk::prepare_shadow())) {
        snprintf(msg, msglen, "the CPU stand-in ran out of memory"); return 2;
    }
    // one cluster at a time (a block is a cluster of one); within it, block rank = x + y*cx + z*cx*cy
    for (unsigned z0 = 0; z0 < gz; z0 += cz) for (unsigned y0 = 0; y0 < gy; y0 += cy) for (unsigned x0 = 0; x0 < gx; x0 += cx) {
        if (!__lk_runs(x0, y0, z0)) continue;  // a check's large grid: only the blocks it chose
        blockIdx = uint3{x0, y0, z0};
        if (__LK_DYN) __lk_dyn_poison(smem);
        if (__LK_FIBERS) {
            __lk::poison_cluster_shared();
            for (int t = 0; t < __lk::nfib; ++t) {
                int r = t / __lk::stride, j = t % __lk::stride;
                __lk::fibers[t].bid = uint3{x0 + r % cx, y0 + (r / cx) % cy, z0 + r / (cx * cy)};
                __lk::fibers[t].tid = uint3{j % bx, (j / bx) % by, j / (bx * by)};
            }
            if (__lk_run_block_fibers()) { snprintf(msg, msglen, "%s", __lk_error_text); return 1; }
        } else {
            __lk_poison_shared();
            for (unsigned tz = 0; tz < bz; ++tz) for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx) {
                threadIdx = uint3{tx, ty, tz};
                __lk::checking = 1;
                __lk_body();
                __lk::checking = 0;
                if (__lk_failed) { snprintf(msg, msglen, "%s", __lk_error_text); return 1; }
            }
        }
        if (__LK_DYN) {
            long off = 0;
            if (__lk_dyn_outside(smem, &off)) {
                snprintf(msg, msglen, "block (%u, %u, %u) wrote dynamic shared memory (extern __shared__) at byte %ld, "
                         "outside the %u bytes the launch allocated (its shared_mem argument)", x0, y0, z0, off, smem);
                return 3;
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
STANDIN_HEADERS = (
    "cuda_fp16.h",
    "cuda_bf16.h",
    "mma.h",
    "cooperative_groups.h",
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "device_launch_parameters.h",
    "vector_types.h",
    "math_constants.h",
)
#: Host C/C++ headers: NVRTC (what CuPy compiles RawKernel sources with) cannot open them, so a GPU run refuses
#: them too; labkit refuses them first, in its own words (:func:`refuse_host_headers`).
STANDARD_HEADERS = (
    "stdio.h",
    "stdint.h",
    "stddef.h",
    "math.h",
    "float.h",
    "limits.h",
    "assert.h",
    "stdlib.h",
    "string.h",
    "cstdio",
    "cstdint",
    "cstddef",
    "cmath",
    "cfloat",
    "climits",
    "cassert",
    "cstdlib",
    "cstring",
    "type_traits",
    "utility",
    "limits",
    "algorithm",
    "initializer_list",
)

#: Headers that include host C headers (``<cuda.h>``: the driver API, with ``<stdlib.h>``): NVRTC cannot open them.
HOST_ONLY_HEADERS = ("cuda.h",)


def refuse_host_headers(source: str) -> None:
    """Raise :class:`~labkit.errors.CompileError` in labkit's words when ``source`` includes a host header that NVRTC
    (CuPy's compiler for RawKernel sources) cannot open: ``<stdio.h>``, ``<cmath>``, ``<cuda.h>``, ... The GPU run
    would fail on it too; device code needs none of them."""
    from labkit.errors import CompileError

    for name in source_includes(source):
        base = name.replace("\\", "/")
        if base in STANDARD_HEADERS or base in HOST_ONLY_HEADERS:
            raise CompileError(
                f"#include <{name}>: NVRTC, which CuPy compiles RawKernel sources with, has no <{name}> (it is a header "
                "of the host's C library"
                + (" API, and includes <stdlib.h>" if base in HOST_ONLY_HEADERS else "")
                + "), so this source would not compile on a GPU either. Device code needs no include for printf, "
                "the math functions (sqrtf, expf, fmaxf, ...), int32_t-style types or INT_MAX-style limits: remove the "
                "line (for fixed-width types, <cuda/std/cstdint> is NVRTC's own)."
            )


# Real constructs (tested on the stripped text) that decide how the stand-in runs a kernel.
_NEEDS_FIBERS = re.compile(
    r"\b(?:__syncthreads(?:_count|_and|_or)?|__syncwarp|__shfl(?:_up|_down|_xor)?_sync|__ballot_sync|__any_sync"
    r"|__all_sync|__activemask|__lanemask_lt|load_matrix_sync|store_matrix_sync|mma_sync|fill_fragment|__shared__"
    r"|cooperative_groups|this_cluster|this_thread_block|tiled_partition)\b"
)
_NOT_EMULATED = (
    (
        re.compile(r"\bextern\b[^;{}]*\b__shared__\b|\b__shared__\s+extern\b"),
        "dynamic shared memory declared other than `extern __shared__ T name[];`",
    ),
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\s*|__volatile__\s*)?\("), "inline PTX (asm)"),
    (
        re.compile(r"\b(?:tex[123]D\w*|tex1Dfetch|surf[123]D\w*|cudaTextureObject_t|cudaSurfaceObject_t)\b"),
        "textures and surfaces",
    ),
    (
        re.compile(
            r"\b(?:this_grid|grid_group|this_multi_grid|multi_grid_group|coalesced_threads|coalesced_group"
            r"|labeled_partition|binary_partition|memcpy_async|invoke_one)\b"
        ),
        "cooperative groups beyond this_thread_block(), this_cluster(), tiled_partition() and thread_group",
    ),
    (re.compile(r"<<<"), "kernel launches from the GPU (dynamic parallelism)"),
    (re.compile(r"\b__match_(?:any|all)_sync\b|\b__reduce_\w+_sync\b"), "__match_*_sync and __reduce_*_sync"),
    (re.compile(r"\b__cluster_dims__\b"), "a cluster size fixed at compile time (__cluster_dims__)"),
    (re.compile(r"\bwmma::(?:precision|experimental)\b|\bbmma_sync\b"), "WMMA beyond FP16/BF16 16×16×16 fragments"),
)


@dataclass(frozen=True)
class HostPlan:
    """How the CPU stand-in will run a source: with fibers (barriers, warp calls, shared memory) or thread by thread."""

    fibers: bool
    includes: tuple[str, ...]
    dynamic_shared: bool = False  # the kernel declares `extern __shared__` arrays (sized by the launch's shared_mem)


def host_plan(source: str) -> HostPlan:
    """Decide from the source's real constructs how to run it; :class:`HostUnavailable` if the stand-in cannot.

    Comments and string literals are ignored: only code counts.
    """
    refuse_host_headers(source)
    code, dynamic = rewrite_dynamic_shared(strip_comments_and_strings(source))
    for pattern, what in _NOT_EMULATED:
        if pattern.search(code):
            raise HostUnavailable(
                f"the CPU stand-in does not emulate {what}.",
                fix="This kernel is checked by compiling it only; run the notebook on a GPU to check its results.",
            )
    includes = tuple(source_includes(source))
    for name in includes:
        base = name.replace("\\", "/")
        if base not in STANDIN_HEADERS and base not in STANDARD_HEADERS:
            raise HostUnavailable(
                f"the CPU stand-in has no <{name}>.",
                fix="This kernel is checked by compiling it only; run the notebook on a GPU to check its results.",
            )
    return HostPlan(bool(_NEEDS_FIBERS.search(code)) or dynamic > 0, includes, dynamic > 0)


_WORKER = r"""
import ctypes, json, sys
req = json.load(sys.stdin)
lib = ctypes.CDLL(req["lib"])
lib.__lk_launch.restype = ctypes.c_int
lib.__lk_oob_write_text.restype = ctypes.c_char_p
lib.__lk_oob_read_text.restype = ctypes.c_char_p
ALIGN = 256
arrays = open(req["arrays"], "rb")  # each array read straight into its guarded buffer: no copy of the whole file
report, results = [], {}
for launch in req["launches"]:
    keep, ptrs, bufs = [], [], {}
    for a in launch["args"]:
        if a["kind"] == "array":
            key = a["key"]
            if key not in bufs:  # an array passed twice is one buffer, as on a GPU
                nbytes, pattern = a["nbytes"], a["pattern"]
                gbytes = -(-launch["guard"] * a["itemsize"] // ALIGN) * ALIGN
                total = nbytes + 2 * gbytes + ALIGN
                raw = ctypes.create_string_buffer(total)
                ctypes.memset(raw, pattern, total)
                start = (-ctypes.addressof(raw)) % ALIGN + gbytes  # 256-byte aligned, as cudaMalloc's are
                arrays.seek(a["offset"])
                arrays.readinto(memoryview(raw).cast("B")[start:start + nbytes])
                bufs[key] = (raw, start, nbytes, pattern)
            c = ctypes.c_void_p(ctypes.addressof(bufs[key][0]) + bufs[key][1])
        else:
            c = getattr(ctypes, a["ctype"])(a["value"])
        keep.append(c)
        ptrs.append(ctypes.cast(ctypes.pointer(c), ctypes.c_void_p))
    argv = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
    ranges = []
    for key, (raw, start, nbytes, pattern) in bufs.items():
        base = ctypes.addressof(raw)
        ranges += [base, base + start, base + start + nbytes, base + len(raw), launch["itemsize"][key], launch["argno"][key]]
    rng = (ctypes.c_ulonglong * max(len(ranges), 1))(*ranges)
    shv = req["shared"]
    vars_ = (ctypes.c_longlong * max(2 * len(shv), 1))(*[v for off, size, _ in shv for v in (off, size)])
    lib.__lk_setup_checks(len(bufs), rng, "\n".join(launch["names"]).encode(), len(shv), vars_,
                          "\n".join(name for _, _, name in shv).encode())
    msg = ctypes.create_string_buffer(2048)
    dims = [ctypes.c_uint(v) for v in launch["grid"] + launch["block"] + launch["cluster"]]
    only = launch.get("blocks") or []
    lib.__lk_set_only(len(only), (ctypes.c_uint * max(3 * len(only), 1))(*[v for b in only for v in b]))
    status = lib.__lk_launch(req["which"], argv, *dims, ctypes.c_int(launch["order"]), ctypes.c_uint(launch["smem"]), msg, 2048)
    outside = {}
    for key, (raw, start, nbytes, pattern) in bufs.items():
        data, p = memoryview(raw).cast("B"), bytes([pattern])  # views: the buffers are not copied
        if data[:start] != p * start:
            outside[key] = "before the start"
        elif data[start + nbytes:] != p * (len(data) - start - nbytes):
            outside[key] = "past the end"
        results[key] = data[start:start + nbytes]
    report.append({"outside": outside, "status": status, "error": msg.value.decode("utf-8", "replace"),
                   "who": (lib.__lk_oob_write_text() or b"").decode("utf-8", "replace"),
                   "read": (lib.__lk_oob_read_text() or b"").decode("utf-8", "replace")})
    if status:
        break
offsets, pos = {}, 0
with open(req["out"], "wb") as f:
    for key, data in results.items():
        f.write(data)
        offsets[key] = pos
        pos += len(data)
with open(req["report"], "w") as f:  # not stdout: that carries the kernel's own printf output
    json.dump({"launches": report, "offsets": offsets}, f)
"""


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


def host_source(source: str, kernels: Sequence[str], *, fibers: bool | None = None) -> str:
    """The plain C++ translation unit the stand-in compiles: prelude, the learner's source (dynamic shared arrays made
    pointers, red zones around each ``__shared__`` declaration, lines kept) and one launcher for every kernel in
    ``kernels`` (names of ``extern "C"`` kernels, or template name expressions such as ``scale<float>``)."""
    plan = host_plan(source)
    use = plan.fibers if fibers is None else fibers
    bodies = "".join(f"static void __lk_body_{k}() {{ __lk_call_all(&{expr}, __lk_args); }}\n" for k, expr in enumerate(kernels))
    table = ", ".join(f"__lk_body_{k}" for k in range(len(kernels))) or "nullptr"
    launcher = _LAUNCHER.replace("KERNEL_BODIES", bodies).replace("KERNEL_TABLE", table)
    body = rewrite_dynamic_shared(source)[0] if plan.dynamic_shared else source
    body = rewrite_shared_redzones(body)
    return _PROLOGUE.format(fibers=int(use), dynamic=int(plan.dynamic_shared)) + body + "\n" + launcher


#: Bytes of red zone the stand-in puts on each side of a ``__shared__`` declaration (an access there is out of bounds).
SHARED_REDZONE = 256
_SHARED_WORD = re.compile(r"\b__shared__\b")


def rewrite_shared_redzones(source: str) -> str:
    """``source`` with a red zone declared before and after each ``__shared__`` declaration, on the same line.

    The stand-in's static shared memory is one section; with a red zone on both sides of every array, an index one
    past the end (or before the start) lands in a red zone instead of a neighbouring array, where the strict checks
    see it. Comments, strings and preprocessor lines are left alone."""
    skip = [(m.start(), m.end()) for m in _LEX.finditer(source)]
    out, pos, n = [], 0, 0
    for m in _SHARED_WORD.finditer(source):
        if m.start() < pos or any(a <= m.start() < b for a, b in skip):
            continue
        line_start = source.rfind("\n", 0, m.start()) + 1
        if source[line_start : m.start()].lstrip().startswith("#"):
            continue
        start = max(pos, max(source.rfind(c, 0, m.start()) for c in ";{}") + 1)
        base = start
        for line in re.finditer(r"^[ \t]*#[^\n]*\n", source[base:line_start], re.M):  # never before a directive
            start = base + line.end()
        while start < m.start() and source[start].isspace():
            start += 1
        depth, end = 0, m.end()
        while end < len(source):
            c = source[end]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth < 0:
                    break
            elif c == ";" and depth == 0:
                break
            end += 1
        if end >= len(source) or source[end] != ";":
            continue
        zone = f"__shared__ __attribute__((used)) char __lk_rz{n}{{}}[{SHARED_REDZONE}];"
        out.append(source[pos:start] + zone.format("a") + " " + source[start : end + 1] + " " + zone.format("b"))
        pos, n = end + 1, n + 1
    return "".join(out) + source[pos:]


_PRIVATE_CACHE: list[Path] = []


def _cache_dir() -> Path:
    """Where built kernels are kept between processes: a folder only this user can write, else a private one."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    d = Path(tempfile.gettempdir()) / f"labkit-host-{uid if uid is not None else 'u'}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.lstat()
        if uid is None or (st.st_uid == uid and not st.st_mode & 0o022 and d.is_dir() and not d.is_symlink()):
            return d
    except OSError:
        pass
    if not _PRIVATE_CACHE:  # someone else's folder (or none possible): never load libraries from it
        _PRIVATE_CACHE.append(Path(tempfile.mkdtemp(prefix="labkit-host-")))
    return _PRIVATE_CACHE[0]


_MISSING = (
    re.compile(r"[‘'`]([\w:]+)[’'] was not declared in this scope"),
    re.compile(r"[‘'`]([\w:]+)[’'] is not a member of [‘'`]([\w:]+)[’']"),
    re.compile(r"no matching function for call to [‘'`]([\w:]+)\("),
    re.compile(r"[‘'`]([\w:]+)[’'] has no member named [‘'`](\w+)[’']"),
)


def _missing_name(stderr: str) -> str | None:
    """The CUDA name the stand-in lacks, read from g++'s first error (a function, type or member it does not define),
    so the learner reads labkit's sentence naming it rather than the compiler's."""
    first = next((ln for ln in stderr.splitlines() if "error:" in ln), "")
    for pattern in _MISSING:
        m = pattern.search(first)
        if m:
            if len(m.groups()) == 2 and "member of" in pattern.pattern:
                return f"{m.group(2)}::{m.group(1)}"
            if len(m.groups()) == 2:
                return f"{m.group(1)}.{m.group(2)}"
            return m.group(1)
    return None


def _first_error(stderr: str) -> str:
    for ln in stderr.splitlines():
        if "error" in ln:
            return ln.split("error:", 1)[-1].strip() if "error:" in ln else ln.strip()
    return stderr.strip()[:300]


#: The compilers' thread-sanitizer instrumentation without its runtime: every load and store of the kernel calls
#: ``__tsan_{read,write}N(address)``, which the prelude defines (labkit's strict checks). The object is compiled with
#: these flags and linked without them, so no sanitizer library is involved.
_STRICT_FLAGS = {
    "gcc": ["-fsanitize=thread", "--param", "tsan-instrument-func-entry-exit=0"],
    "clang": ["-fsanitize=thread", "-mllvm", "-tsan-instrument-func-entry-exit=0"],
}
_CXX_KIND: dict[str, str] = {}


def _compiler_kind(cxx: str) -> str:
    if cxx not in _CXX_KIND:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        _CXX_KIND[cxx] = "clang" if "clang" in out.lower() else "gcc"
    return _CXX_KIND[cxx]


@dataclass(frozen=True)
class HostLibrary:
    """A built stand-in library: its path, the kernels it launches (index = position) and its static shared arrays
    (section offset, size in bytes, name), read from its symbol table for the strict checks."""

    path: str
    kernels: tuple[str, ...]
    shared: tuple[tuple[int, int, str], ...]


_LIB_CACHE: dict[str, HostLibrary] = {}


def _shared_symbols(lib: Path) -> list[tuple[int, int, str]]:
    """The ``__shared__`` arrays of a built library (offset in the shared section, bytes, name), from ``objdump -t``."""
    tool = shutil.which("objdump")
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "-t", "-C", str(lib)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    start, found = None, []
    for line in out.splitlines():
        m = re.match(r"([0-9a-fA-F]+)\s.*\slk_shared\s+([0-9a-fA-F]+)\s+(?:\.\w+\s+)?(.+)$", line)
        if not m:
            continue
        addr, size, name = int(m.group(1), 16), int(m.group(2), 16), m.group(3).strip()
        if name == "__start_lk_shared":
            start = addr
        elif size and not name.rsplit("::", 1)[-1].startswith("__lk_rz"):
            found.append((addr, size, name.rsplit("::", 1)[-1]))
    if start is None:
        return []
    return sorted((a - start, n, name) for a, n, name in found)


def _host_library(source: str, kernels: Sequence[str]) -> HostLibrary:
    """Build (or find in the cache) the stand-in library of ``source`` launching every kernel in ``kernels``: one build
    serves them all."""
    cxx = host_compiler()
    if cxx is None:
        raise HostUnavailable(
            "no C++ compiler on this machine, so the CPU stand-in cannot run CUDA C++ here.",
            fix="Install g++ (or set LABKIT_HOST_CXX) to run kernels on the CPU; a GPU run checks them fully.",
        )
    text = host_source(source, kernels)
    inc = host_include_dir()
    headers = "".join(p.read_text() for p in sorted(inc.glob("*.h")))
    flags = ["-std=c++17", "-O1", "-w", "-fno-strict-aliasing", "-fPIC", *_STRICT_FLAGS[_compiler_kind(cxx)]]
    key = hashlib.sha256((cxx + "\0" + " ".join(flags) + "\0" + headers + "\0" + text).encode()).hexdigest()[:24]
    if key in _LIB_CACHE and Path(_LIB_CACHE[key].path).exists():
        return _LIB_CACHE[key]
    lib = _cache_dir() / f"{key}.so"
    meta = _cache_dir() / f"{key}.json"
    if not lib.exists() or not meta.exists():
        pch = _prelude_pch(cxx, flags, headers)
        tmp = Path(tempfile.mkdtemp(prefix="labkit-host-"))
        src, obj, built = tmp / "k.cpp", tmp / "k.o", tmp / "k.so"
        src.write_text(text)
        try:
            include = ([f"-I{pch}"] if pch else []) + [f"-I{inc}"]
            proc = subprocess.run(
                [cxx, *flags, *include, "-c", str(src), "-o", str(obj)], capture_output=True, text=True, timeout=120
            )
            if proc.returncode == 0:
                proc = subprocess.run([cxx, "-shared", str(obj), "-o", str(built)], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise HostUnavailable(
                "the CPU stand-in's C++ compiler took over 2 minutes on this kernel.", fix="A GPU run checks its results."
            ) from None
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            missing = _missing_name(proc.stderr)
            raise HostUnavailable(
                f"the CPU stand-in does not offer `{missing}`, which this kernel uses (NVRTC compiled it: it is CUDA "
                "C++ the stand-in lacks)."
                if missing
                else f"the CPU stand-in could not build this kernel as plain C++ ({_first_error(proc.stderr)}).",
                fix="This kernel is checked by compiling it only; a GPU run checks its results.",
            )
        shared = _shared_symbols(built)
        (tmp / "k.json").write_text(json.dumps(shared))
        os.replace(built, lib)  # atomic: another process may build the same kernel
        os.replace(tmp / "k.json", meta)
        shutil.rmtree(tmp, ignore_errors=True)
    shared_list = json.loads(meta.read_text())
    found = HostLibrary(str(lib), tuple(kernels), tuple((int(a), int(b), str(c)) for a, b, c in shared_list))
    _LIB_CACHE[key] = found
    return found


def is_name_expression(name: str) -> bool:
    """True for a template kernel's name expression such as ``scale<float>`` (CuPy's ``name_expressions``)."""
    return "<" in name


def kernel_entry(source: str, name: str) -> Any:
    """The PTX entry of kernel ``name`` of ``source`` (an ``extern "C"`` name, or a template name expression such as
    ``scale<float>``, which is instantiated for NVRTC the way CuPy's ``RawModule(name_expressions=...)`` has it)."""
    from labkit.cuda.entries import _ptx_sm90, entries, find_entry

    if not is_name_expression(name):
        return find_entry(_ptx_sm90(source, name), name)
    base = name.split("<", 1)[0].strip()
    if not re.fullmatch(r"[A-Za-z_][\w:]*", base):
        raise LabkitError(f"{name!r} is not a kernel name expression (a template name and its arguments, e.g. 'scale<float>').")
    before = {e.name for e in entries(_ptx_sm90(source, base))}
    # NVRTC instantiates what a __device__ variable takes the address of (CuPy asks NVRTC for the same)
    after = entries(_ptx_sm90(source + f"\n__device__ auto __lk_name_expression = &{name};\n", base))
    new = [e for e in after if e.name not in before]
    if len(new) == 1:
        return new[0]
    wanted = re.sub(r"\s+", "", name)
    for e in after:
        if e.mangled and re.sub(r"\s+", "", _demangle(e.name)).startswith(f"void{wanted}("):
            return e
    raise LabkitError(
        f"found no kernel for the name expression {name!r}.",
        fix="Write it as the template's name and its arguments, as in the source: get_function('scale<float>').",
    )


def _demangle(symbol: str) -> str:
    tool = shutil.which("c++filt")
    if tool is None:
        return symbol
    try:
        return subprocess.run([tool, symbol], capture_output=True, text=True, timeout=30).stdout.strip() or symbol
    except (OSError, subprocess.SubprocessError):
        return symbol


def _prelude_pch(cxx: str, flags: Sequence[str], headers: str) -> Path | None:
    """A folder holding the prelude precompiled (``labkit_cuda_host.h.gch``) for these flags, built once per cache and
    reused by every kernel's build (it saves about a third of each); None where the compiler cannot make one."""
    if _compiler_kind(cxx) != "gcc":
        return None
    key = hashlib.sha256((cxx + "\0" + " ".join(flags) + "\0" + headers).encode()).hexdigest()[:16]
    folder = _cache_dir() / f"pch-{key}"
    gch = folder / "labkit_cuda_host.h.gch"
    if gch.exists():
        return folder
    tmp = Path(tempfile.mkdtemp(prefix="labkit-pch-"))
    try:
        proc = subprocess.run(
            [cxx, *flags, "-x", "c++-header", str(host_include_dir() / "labkit_cuda_host.h"), "-o", str(tmp / gch.name)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            return None
        folder.mkdir(mode=0o700, exist_ok=True)
        os.replace(tmp / gch.name, gch)  # atomic: another process may build the same one
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _kernels_of(source: str, name: str, name_expressions: Sequence[str] = ()) -> tuple[str, ...]:
    """Every kernel one build of ``source`` launches: its ``extern "C"`` kernels (read from the PTX NVRTC made), then
    the template name expressions of its module and ``name`` itself when it is one (``scale<float>``)."""
    from labkit.cuda.entries import _ptx_sm90, entries

    base = name.split("<", 1)[0].strip()
    names = [e.name for e in entries(_ptx_sm90(source, base)) if not e.mangled]
    for expr in (*name_expressions, name):
        if expr not in names:
            names.append(expr)
    return tuple(names)


def _param_names(source: str, name: str, count: int) -> list[str]:
    """The parameter names of kernel ``name`` as written (for messages); ``argument k`` where they cannot be read."""
    code = strip_comments_and_strings(source)
    base = name.split("<", 1)[0].strip()
    m = re.search(rf"__global__[^;{{}}]*?\b{re.escape(base)}\s*\(([^)]*)\)", code)
    if m:
        parts = [p for p in m.group(1).split(",") if p.strip()]
        words = [re.findall(r"[A-Za-z_]\w*", p.split("=")[0]) for p in parts]
        names = [w[-1] if w else "" for w in words]
        if len(names) == count and all(names):
            return names
    return [f"argument {k}" for k in range(count)]


def run_on_host_batch(
    source: str,
    name: str,
    launches: Sequence[tuple[Any, ...]],
    *,
    timeout_s: float | None = None,
    guard: int | None = None,
    name_expressions: Sequence[str] = (),
    blocks: Sequence[Sequence[tuple[int, int, int]] | None] | None = None,
) -> list[str | None]:
    """Run several launches ``(grid, block, args)`` or ``(grid, block, args, shared_mem)`` of one kernel on the CPU
    stand-in, in one helper process. ``shared_mem`` (default 0) is the dynamic shared memory of the launch in bytes,
    as CuPy's ``kernel(grid, block, args, shared_mem=...)``: ``extern __shared__`` arrays get exactly that much,
    and a block that writes past it is a :class:`HostKernelError`.

    Array arguments (NumPy) are updated in place; each lies 256-byte aligned between guard zones of a poison
    byte pattern, read back after the launch; every load and store is also checked as it happens. Returns, per
    launch, None or a sentence saying which array argument was written outside its bounds (which thread, which
    element), or else which was read outside them (a read one past the end, `i <= n`, included). Raises :class:`HostUnavailable` (no compiler, or constructs the
    stand-in does not emulate), :class:`HostKernelError` (the kernel did what is undefined on a GPU: a barrier
    only some threads reach, a warp-wide call only part of the warp makes, ...) and :class:`LabkitError` (crash,
    time-out, bad arguments: see :func:`check_launch`). The time limit is labkit's limit for learner code.
    ``guard`` is the size of each guard zone in elements (default: one per thread of the grid, plus 64).
    ``blocks`` gives, per launch, the blocks (x, y, z) to run (None: all), for a check's large grid of independent
    blocks (no clusters): the others do not run, and what they would have written stays as it was.
    """
    from labkit.cuda.entries import _CTYPES, check_launch

    if timeout_s is None:
        timeout_s = _learner_limit_s()
    refuse_host_headers(source)
    entry = kernel_entry(source, name)
    clusters = [_cluster_of(la) for la in launches]
    launches = [_with_shared_mem(la[:4]) for la in launches]
    checked = [check_launch(entry, grid, block, args, on_gpu=False) for grid, block, args, _ in launches]
    for (g, b), (cdims, _) in zip(checked, clusters):
        _check_cluster(g, b, cdims)
    chosen = _chosen_blocks(blocks, checked, clusters)
    kernels = _kernels_of(source, name, name_expressions)
    lib = _host_library(source, kernels)
    names = _param_names(source, name, len(entry.params))
    tmp = Path(tempfile.mkdtemp(prefix="labkit-run-"))
    arrays: dict[str, np.ndarray] = {}
    blob: list[np.ndarray] = []  # each array's bytes (a view where it is contiguous), written to one file below
    offset = 0
    specs = []
    for li, ((grid, block, args, smem), (g, b)) in enumerate(zip(launches, checked)):
        spec: list[dict[str, Any]] = []
        seen: dict[int, str] = {}
        itemsizes: dict[str, int] = {}
        argnos: dict[str, int] = {}
        for k, (arg, ptype) in enumerate(zip(args, entry.params)):
            if isinstance(arg, np.ndarray):
                key = seen.setdefault(id(arg), f"l{li}a{k}")
                if key in arrays:  # the same array again: the helper gives it the same buffer
                    spec.append({"kind": "array", "key": key})
                    continue
                arrays[key] = arg
                itemsizes[key], argnos[key] = arg.itemsize, k
                data = np.ascontiguousarray(arg).reshape(-1).view(np.uint8)
                blob.append(data)
                # a different poison per array, so copying one guard zone into another shows
                spec.append(
                    {
                        "kind": "array",
                        "key": key,
                        "offset": offset,
                        "nbytes": data.nbytes,
                        "itemsize": arg.itemsize,
                        "pattern": 0xA1 + k,
                    }
                )
                offset += data.nbytes
            else:
                spec.append({"kind": "scalar", "ctype": _CTYPES[ptype][0], "value": arg.item()})
        # room for every thread of the grid to write one element too far
        specs.append(
            {
                "args": spec,
                "grid": g,
                "block": b,
                "guard": guard or int(np.prod(g) * np.prod(b)) + 64,
                "smem": smem,
                "cluster": clusters[li][0],
                "order": clusters[li][1],
                "itemsize": itemsizes,
                "argno": argnos,
                "names": names,
                "blocks": chosen[li],
            }
        )
    with open(tmp / "in.bin", "wb") as f:
        for data in blob:
            f.write(data.data)
    req = {
        "lib": lib.path,
        "which": lib.kernels.index(name),
        "shared": [list(v) for v in lib.shared],
        "arrays": str(tmp / "in.bin"),
        "out": str(tmp / "out.bin"),
        "report": str(tmp / "report.json"),
        "launches": specs,
    }
    try:
        # no numpy and no site packages in the helper: it starts in a tenth of the time
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _WORKER], input=json.dumps(req), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise LabkitError(
            f"{name} did not finish within {timeout_s:.0f} s on the CPU stand-in.",
            fix="Look for a loop whose condition never becomes false (a grid-stride step of 0?).",
        ) from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        crash = proc.returncode < 0
        raise LabkitError(
            f"{name} crashed on the CPU stand-in"
            + (
                " (it touched memory far outside its arrays, or its local arrays outgrew the 512 KiB a thread has)."
                if crash
                else f": {proc.stderr.strip()[-300:]}"
            ),
            fix="Check the index arithmetic and the bounds check: every access must stay inside its array.",
        )
    done = json.loads((tmp / "report.json").read_text())
    report = done["launches"]
    _show_printf(proc.stdout, name)
    with open(tmp / "out.bin", "rb") as f:
        for key, pos in done["offsets"].items():
            arr = arrays[key]
            f.seek(pos)
            if arr.flags.c_contiguous and arr.flags.writeable:  # straight into the array
                f.readinto(arr.reshape(-1).view(np.uint8).data)
            else:
                np.copyto(arr, np.frombuffer(f.read(arr.nbytes), dtype=arr.dtype).reshape(arr.shape))
    shutil.rmtree(tmp, ignore_errors=True)
    sentences: list[str | None] = []
    for li, rec in enumerate(report):
        if rec["status"] == 3:
            smem = launches[li][3]
            raise HostKernelError(
                f"{name} on the CPU stand-in: {rec['error']}.",
                fix=(
                    "The launch allocated no dynamic shared memory: pass shared_mem=<bytes> with the launch "
                    "(kernel(grid, block, args, shared_mem=...)), or declare a fixed-size `__shared__ T s[N];`."
                    if smem == 0
                    else "Size shared_mem for every element the block uses (elements × sizeof(T)), or "
                    "keep the indices of the extern __shared__ array below that."
                ),
            )
        if rec["status"]:
            g, b = checked[li]
            raise HostKernelError(
                f"{name} (grid {tuple(g)}, block {tuple(b)}) on the CPU stand-in: {rec['error']}", fix=_fix_for(rec["error"])
            )
        if rec["outside"]:
            key, side = next(iter(rec["outside"].items()))
            who = f": {rec['who']}" if rec.get("who") else ""
            sentences.append(f"{name} wrote outside array argument {key.split('a')[-1]} ({side}){who}")
        elif rec.get("read"):
            sentences.append(f"{name} read outside an array: {rec['read']}")
        else:
            sentences.append(None)
    return sentences


def _chosen_blocks(blocks: Any, checked: Sequence[Any], clusters: Sequence[Any]) -> list[list[list[int]] | None]:
    """``blocks`` of :func:`run_on_host_batch`, per launch: None, or the chosen blocks as [x, y, z] lists, each inside
    its launch's grid (at most 64, launches without clusters); else a :class:`LabkitError`."""
    if blocks is None:
        return [None] * len(checked)
    if len(blocks) != len(checked):
        raise LabkitError(f"blocks needs one entry per launch ({len(checked)}), got {len(blocks)}.")
    out: list[list[list[int]] | None] = []
    for (g, _), (cdims, _), chosen in zip(checked, clusters, blocks):
        if chosen is None:
            out.append(None)
            continue
        if list(cdims) != [1, 1, 1] or not 0 < len(chosen) <= 64:
            raise LabkitError("blocks: 1 to 64 blocks, in a launch without clusters.")
        dims = list(g) + [1] * (3 - len(g))
        points = [[int(v) for v in b] + [0] * (3 - len(b)) for b in chosen]
        if any(not 0 <= v < d for p in points for v, d in zip(p, dims)):
            raise LabkitError(f"blocks: a block outside the grid {tuple(dims)}.")
        out.append(points)
    return out


def _fix_for(error: str) -> str:
    """What to change, for a sentence of the stand-in's strict checks."""
    if "shared-memory race" in error:
        if "cluster.sync()" in error:
            return (
                "Between a block's writes to its shared memory and another block's reads of it (map_shared_rank), "
                "every thread of the cluster must pass cluster.sync()."
            )
        return (
            "Separate the write and the other thread's access by a __syncthreads() reached by every thread of the "
            "block, and in each phase let a thread write only elements no other thread reads in that phase (a tree "
            "step: `if (threadIdx.x < s)`, not `<=`)."
        )
    if "global-memory race" in error:
        return (
            "Let exactly one thread write each element of an output (guard the store with a test on the thread's "
            "index), or combine the threads' values first (shared memory and __syncthreads(), or atomicAdd)."
        )
    if "shared array" in error or "dynamic shared memory" in error:
        return "Keep every shared-memory index below the array's size (a tree step reads s[tid + s]: only tid < s may)."
    return "A GPU would give undefined results or hang here; see the sentence above for what to change."


#: The largest cluster the stand-in runs (CUDA's portable maximum).
CLUSTER_MAX = 8


def _cluster_of(launch: Sequence[Any]) -> tuple[list[int], int]:
    """The cluster shape (3 ints) and block order (0 lowest rank first, 1 highest first) of a launch tuple
    ``(grid, block, args[, shared_mem[, cluster[, order]]])``."""
    if not isinstance(launch, (tuple, list)) or len(launch) not in (3, 4, 5, 6):
        raise LabkitError(
            "a launch is (grid, block, args), (grid, block, args, shared_mem) or "
            "(grid, block, args, shared_mem, cluster[, order])."
        )
    cluster = launch[4] if len(launch) >= 5 else 1
    order = launch[5] if len(launch) == 6 else "forward"
    if order not in ("forward", "reverse"):
        raise LabkitError(f"order must be 'forward' or 'reverse', got {order!r}.")
    from labkit.cuda.entries import _dims

    return _dims(cluster, "cluster"), int(order == "reverse")


def _check_cluster(grid: Sequence[int], block: Sequence[int], cluster: Sequence[int]) -> None:
    size = int(np.prod(cluster))
    if size > CLUSTER_MAX:
        raise LabkitError(
            f"a cluster of {size} blocks is more than the {CLUSTER_MAX} the CPU stand-in runs (CUDA's portable maximum).",
            fix="Use clusters of at most 8 blocks.",
        )
    if any(g % c for g, c in zip(grid, cluster)):
        raise LabkitError(
            f"the grid {tuple(grid)} is not a whole number of clusters of {tuple(cluster)} blocks.",
            fix="With clusters, every grid dimension must be a multiple of the cluster's.",
        )


def _with_shared_mem(launch: Sequence[Any]) -> tuple[Any, Any, Any, int]:
    """``(grid, block, args, shared_mem)`` from a launch tuple of 3 or 4 items, ``shared_mem`` checked."""
    if not isinstance(launch, (tuple, list)) or len(launch) not in (3, 4):
        raise LabkitError("a launch is (grid, block, args) or (grid, block, args, shared_mem).")
    smem = launch[3] if len(launch) == 4 else 0
    if isinstance(smem, bool) or not isinstance(smem, (int, np.integer)) or smem < 0:
        raise LabkitError(
            f"shared_mem must be a whole number of bytes ≥ 0, got {smem!r}.", fix="For 256 floats: shared_mem=256 * 4."
        )
    if smem > DYNAMIC_SHARED_MAX:
        raise LabkitError(
            f"shared_mem={int(smem):,} bytes is more than the {DYNAMIC_SHARED_MAX:,} a launch may ask for by default.",
            fix="Use at most 48 KiB of dynamic shared memory per block (more needs an opt-in "
            "attribute set on the kernel), or fewer elements per block.",
        )
    return launch[0], launch[1], launch[2], int(smem)


def _show_printf(text: str, name: str, limit: int = 4000) -> None:
    """Print what the kernel printed with ``printf`` (as a GPU run would), cut at ``limit`` characters."""
    if text:
        cut = text[:limit]
        sys.stdout.write(cut + ("" if cut.endswith("\n") else "\n"))
        if len(text) > limit:
            sys.stdout.write(f"[{name}'s printf output cut after {limit} of {len(text)} characters]\n")


def _learner_limit_s() -> float:
    try:
        from labkit.sim.limits import LEARNER_CODE_LIMIT_S
    except ImportError:  # pragma: no cover - the simulator layer is part of labkit
        return 20.0
    return float(LEARNER_CODE_LIMIT_S)


def run_on_host(
    source: str,
    name: str,
    grid: Any,
    block: Any,
    args: Sequence[Any],
    *,
    timeout_s: float | None = None,
    shared_mem: int = 0,
    name_expressions: Sequence[str] = (),
) -> None:
    """Run a CUDA C++ kernel on the CPU stand-in, in a separate process (see :mod:`labkit.cuda_cpp`).

    Array arguments (NumPy) are updated in place, as a kernel launch would. Raises :class:`HostUnavailable`
    when there is no C++ compiler or the kernel needs what the stand-in lacks (inline PTX, textures, cooperative
    groups), :class:`HostKernelError` for a barrier or warp-wide call not every thread makes, or a write past the
    ``shared_mem`` bytes of dynamic shared memory (``extern __shared__``) the launch allocates, :class:`OutOfBounds`
    when it writes outside an array, and :class:`LabkitError` when it
    crashes (a wild memory access) or does not finish.
    """
    (outside,) = run_on_host_batch(
        source, name, [(grid, block, args, shared_mem)], timeout_s=timeout_s, name_expressions=name_expressions
    )
    if outside:
        raise OutOfBounds(
            f"{outside} on the CPU stand-in.",
            fix="Threads whose index is past the last element must neither read nor write: guard the work with "
            "`if (i < n)` (`<`, not `<=`), and keep every other index inside its array.",
        )


__all__ = [
    "DYNAMIC_SHARED_MAX",
    "HOST_ONLY_HEADERS",
    "is_name_expression",
    "kernel_entry",
    "refuse_host_headers",
    "HostKernelError",
    "HostPlan",
    "HostUnavailable",
    "OutOfBounds",
    "STANDARD_HEADERS",
    "STANDIN_HEADERS",
    "host_compiler",
    "host_include_dir",
    "host_plan",
    "host_source",
    "rewrite_dynamic_shared",
    "run_on_host",
    "run_on_host_batch",
    "source_includes",
    "strip_comments_and_strings",
]
