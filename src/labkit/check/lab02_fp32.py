"""Check for lab 02's float-literal exercise: pixels to float32 in [-1, 1] with no FP64 instruction in the PTX.

In Numba a Python float literal is a float64, so ``img[r, c] / 127.5 - 1.0`` converts the pixel to FP64 and divides
in FP64. The values are right, which is why the mistake survives: only the PTX shows it (``cvt.rn.f64.u16``,
``div.rn.f64``). :func:`require_no_fp64` is the reusable part: it compiles a kernel that passed and fails it, with the
FP64 lines and the fix, when the reference for the same argument types has no FP64 instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .cases import grid_label, run_cases
from .core import Failed, exercise
from .harness import Launch, grid_2d, kernel_reference, random_array

FP64_CAUSE = (
    "a Python float literal (`127.5`, `1.0`, `0.5`) is a float64 in Numba, and so is `float(...)` and the result "
    "of `/` on two integers: the arithmetic then runs in FP64, which most GPUs run at a small fraction of the FP32 "
    "rate (labkit.hw.arithmetic_rates). Write the constants as `np.float32(127.5)` and keep every operand float32."
)


def fp64_lines(kernel: Any, signature: str, arch: str = "sm_80") -> list[str]:
    """The FP64 instruction lines of ``kernel`` compiled for ``signature`` (``labkit.ptx``, works without a GPU)."""
    from labkit.cuda import ptx

    return ptx.compile(kernel, signature, arch).fp64()


def require_no_fp64(kernel: Any, signature: str, reference: Any, *, label: str) -> None:
    """Raise :class:`Failed` when ``kernel``'s PTX has FP64 instructions and ``reference``'s (same types) has none.

    The likely cause names the FP64 instructions found and the float32 fix."""
    from ..errors import CompileError

    try:
        found = fp64_lines(kernel, signature)
    except CompileError as exc:
        raise Failed(f"{label}: the kernel does not compile to PTX: {str(exc).splitlines()[0]}") from None
    if not found or fp64_lines(reference, signature):
        return
    shown = "; ".join(line.split(None, 1)[0].rstrip(";") for line in found[:4])
    raise Failed(
        f"{label}: the values are right, but the PTX has {len(found)} FP64 instruction(s) where the reference has "
        f"none ({shown}{', ...' if len(found) > 4 else ''}).",
        cause=FP64_CAUSE,
    )


@exercise("02.float32", kind="kernel", reference=kernel_reference("to_unit"))
def to_unit(kernel: Any) -> str:
    """Grade ``to_unit(img, out)``: ``img`` uint8 (rows, cols), ``out`` float32 (rows, cols) = ``img / 127.5 - 1``,
    and no FP64 instruction in the kernel's PTX."""
    from .. import kernels
    from .draws import between, not_multiple

    cases = [
        ((not_multiple(9, 20, 8), not_multiple(20, 45, 16)), (16, 8)),
        ((1, 1), (16, 8)),
        ((not_multiple(17, 45, 8), not_multiple(9, 15, 8)), (8, 8)),
        ((between(9, 31), not_multiple(33, 40, 32)), (32, 32)),
    ]

    def launch(case: tuple[tuple[int, int], tuple[int, int]]) -> Launch:
        shape, block = case
        img = random_array(shape, np.uint8, 0, 256)
        label = grid_label("image {shape} (rows×cols)", shape, block)
        return Launch(grid_2d(shape, block), block, (img,), img.astype(np.float64) / 127.5 - 1.0, label, out_shape=shape)

    run_cases(kernel, cases, launch, names=("img", "out"), out_dtype=np.float32, rtol=0, atol=1e-6)
    require_no_fp64(kernel, "void(uint8[:, :], float32[:, :])", kernels.get("to_unit"), label="the PTX for sm_80")
    return (
        f"correct on {len(cases)} fresh images with 3 block shapes up to 32×32, and its PTX has no FP64 instruction: "
        "all the arithmetic is float32."
    )
