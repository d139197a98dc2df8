"""Check for lab 10's Blackwell exercise: Tensor Memory (TMEM) for a ``tcgen05`` accumulator, read in the PTX of
the learner's CUDA C++ compiled for ``sm_100a``.

``tmem_source(n)`` returns the source of a kernel ``tmem_tile(unsigned* out)`` that allocates the Tensor Memory an
FP32 accumulator of 128 rows × ``n`` columns needs. The check compiles it with NVRTC (no GPU needed: both toolchains
the course installs, NVRTC 12.9 and 13, target ``sm_100a``) for fresh ``n`` and reads the PTX: one
``tcgen05.alloc`` of the right number of columns (a power of two from 32 to 512), the allocation permit given up, a
barrier before other threads read the address, and a ``tcgen05.dealloc`` of the same columns. Nothing here runs a
kernel: only a data-centre Blackwell GPU (sm_100) could, and the check says so.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .core import Failed, Unsolved, exercise
from .harness import rng

ARCH = "sm_100a"
ENTRY = "tmem_tile"
TMEM_LANES, TMEM_COLUMNS, MIN_COLUMNS = 128, 512, 32  # PTX ISA, Tensor Memory: 128 lanes × 512 columns of 32 bits

_ALLOC = re.compile(r"tcgen05\.alloc\.cta_group::(\d)\.sync\.aligned\.shared::cta\.b32\s+\[[^\]]+\],\s*([^;]+);")
_DEALLOC = re.compile(r"tcgen05\.dealloc\.cta_group::(\d)\.sync\.aligned\.b32\s+[^,]+,\s*([^;]+);")
_RELINQUISH = re.compile(r"tcgen05\.relinquish_alloc_permit\.cta_group::(\d)\.sync\.aligned;")


def columns_for(n: int) -> int:
    """TMEM columns to allocate for an FP32 accumulator of 128 rows × ``n`` columns: the next power of two from 32."""
    cols = MIN_COLUMNS
    while cols < n:
        cols *= 2
    return cols


def reference_source(n: int) -> str:
    """``kernels/cuda/tmem_tile.cu`` for a 128 × ``n`` FP32 accumulator (its ``TMEM_COLUMNS`` set)."""
    from labkit.cuda import sources

    return f"#define TMEM_COLUMNS {columns_for(n)}\n" + sources.get("tmem_tile").code


def _reference() -> Callable[[int], str]:
    return reference_source


def _cases() -> list[int]:
    """Fresh accumulator widths: below 32, an exact power of two, between powers (never one), and the largest."""
    gen = rng()
    return [
        int(gen.integers(40, 64)),
        int(gen.integers(1, 32)),
        2 ** int(gen.integers(6, 9)),
        int(gen.integers(129, 256)),
        int(gen.integers(257, 513)),
    ]


def _compile(source: str) -> str:
    from labkit.cuda import ptx

    from ..errors import CompileError, LabkitError

    try:
        return ptx.compile_cuda(source, ARCH, name="tmem_tile.cu").text
    except CompileError as exc:
        raise Failed(
            f"the source does not compile for {ARCH}:\n{str(exc)[:800]}",
            cause="tcgen05 instructions exist only for sm_100a/sm_103a; write them as inline PTX "
            '(asm volatile("tcgen05.alloc..." :: "r"(dst), "n"(COLUMNS))), and use no #include.',
        ) from None
    except LabkitError as exc:  # no NVRTC that targets sm_100a
        raise Failed(str(exc), cause=getattr(exc, "fix", None)) from None


def _entry_body(text: str) -> str:
    m = re.search(rf"\.entry\s+{ENTRY}\s*\(", text)
    if not m:
        raise Failed(
            f"the PTX has no kernel called {ENTRY}.",
            cause=f'declare it extern "C" __global__ void {ENTRY}(unsigned* out), so that its name is not mangled.',
        )
    return text[m.start() :]


def _count(text: str) -> int | None:
    """A column count written in the PTX as an immediate, or None for a register."""
    text = text.strip()
    return int(text, 0) if re.fullmatch(r"\d+|0x[0-9a-fA-F]+", text) else None


def judge(n: int, ptx_text: str) -> None:
    """Raise :class:`Failed` (or :class:`Unsolved`) for what the PTX of ``tmem_source(n)`` gets wrong."""
    body = _entry_body(ptx_text)
    allocs, deallocs = _ALLOC.findall(body), _DEALLOC.findall(body)
    if not allocs and not deallocs:
        raise Unsolved("the kernel allocates no Tensor Memory yet (no tcgen05.alloc in its PTX).")
    want = columns_for(n)
    if len(allocs) != 1:
        raise Failed(
            f"tmem_source({n}): the PTX has {len(allocs)} tcgen05.alloc instructions; the kernel needs one.",
            cause="one warp allocates the whole accumulator once: an if (threadIdx.x < 32) block around one alloc.",
        )
    group, count_text = allocs[0]
    cols = _count(count_text)
    if cols is None:
        raise Failed(
            f"tmem_source({n}): the column count of tcgen05.alloc is a register ({count_text.strip()}), not a number.",
            cause='pass it as a compile-time constant with the "n" constraint, so that the PTX (and the check) can see it.',
        )
    if group != "1":
        raise Failed(f"tmem_source({n}): cta_group::{group}; this kernel is one CTA (cta_group::1).")
    if cols != want:
        if cols == n:
            cause = f"TMEM is allocated in powers of two from {MIN_COLUMNS} columns: {n} columns need {want}."
        elif cols == n * TMEM_LANES or cols == n * 4:
            cause = (
                f"a column is 128 lanes of 32 bits: one FP32 accumulator column of 128 rows takes one TMEM column, "
                f"so {n} columns need {want} (the next power of two from {MIN_COLUMNS}), not bytes or elements."
            )
        elif cols > TMEM_COLUMNS:
            cause = f"an SM's Tensor Memory has {TMEM_COLUMNS} columns: no allocation is larger."
        else:
            cause = f"the next power of two from {MIN_COLUMNS} that holds {n} columns is {want}."
        raise Failed(f"tmem_source({n}) allocates {cols} columns; expected {want}.", cause=cause)
    if not _RELINQUISH.search(body):
        raise Failed(
            f"tmem_source({n}): no tcgen05.relinquish_alloc_permit.",
            cause="give up the allocation permit after the allocation, so that other CTAs on the SM may allocate.",
        )
    if len(deallocs) != 1 or _count(deallocs[0][1]) != want:
        got = ", ".join(c.strip() for _, c in deallocs) or "none"
        raise Failed(
            f"tmem_source({n}): tcgen05.dealloc of {got} column(s); expected one dealloc of {want}.",
            cause="free exactly what was allocated, before the kernel ends: Tensor Memory is not freed for you.",
        )
    a, d = body.find("tcgen05.alloc"), body.find("tcgen05.dealloc")
    if "bar.sync" not in body[a:d] and "barrier.sync" not in body[a:d]:
        raise Failed(
            f"tmem_source({n}): no barrier between the allocation and the dealloc.",
            cause="tcgen05.alloc writes the address to shared memory: __syncthreads() before other threads read "
            "it, and again before the warp frees it.",
        )


@exercise("10.tcgen05-tmem", kind="kernel", reference=_reference)
def tcgen05_tmem(fn: Callable[[int], Any]) -> str:
    """Grade ``tmem_source(n)``: the source of a kernel that allocates, publishes and frees the Tensor Memory of a
    128 × n FP32 accumulator, read in its PTX for sm_100a for fresh n."""
    from .numeric import need_function
    from .streams import call_learner

    need_function(fn, "a function tmem_source(n) that returns CUDA C++ source")
    cases = _cases()
    for n in cases:
        src = call_learner(fn, n, what=f"tmem_source({n})")
        if src is None or src is Ellipsis:
            raise Unsolved("tmem_source returns no source yet.")
        if not isinstance(src, str):
            raise Failed(f"tmem_source({n}) returned {type(src).__name__}; return the CUDA C++ source as a string.")
        judge(n, _compile(src))
    return (
        f"right on {len(cases)} fresh widths: the PTX for {ARCH} allocates the next power of two of columns from 32, "
        "gives up the permit, waits before the address is read and frees what it took (read in the PTX; no kernel ran)."
    )
