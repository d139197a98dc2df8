"""Checks for lab 06's Blackwell section: NVFP4 block quantization (blocks of 16 E2M1 elements, an E4M3 scale per
block under one FP32 scale per tensor), graded element by element against :func:`labkit.scaling.quantize_blocks`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .core import exercise
from .harness import rng
from .numeric import grade_block_quantized, need_function

NVFP4_BLOCK = 16
E4M3_MAX, E2M1_MAX = 448.0, 6.0


def _reference_nvfp4() -> Callable[[np.ndarray], np.ndarray]:
    from labkit.numerics import scaling

    return lambda x: scaling.quantize_blocks(x, "nvfp4").values


def _nvfp4(
    x: np.ndarray,
    block: int = NVFP4_BLOCK,
    tensor_max: float | None = E4M3_MAX * E2M1_MAX,
    scale_fmt: str | None = "fp8_e4m3",
    element: str = "fp4_e2m1",
    per_row: bool = False,
) -> np.ndarray:
    """NVFP4 and its plausible misreadings: ``tensor_max`` None drops the tensor scale, ``scale_fmt`` None keeps the
    block scale exact, ``"e8m0"`` makes it a power of two; ``per_row`` gives a whole row one block."""
    from labkit.numerics import precision as P

    width = x.shape[-1] if per_row else block
    blocks = x.reshape(*x.shape[:-1], -1, width)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    t_amax = float(np.abs(x).max(initial=0.0))
    t = t_amax / tensor_max if tensor_max and t_amax > 0 else 1.0
    raw = amax / E2M1_MAX / t
    if scale_fmt == "e8m0":
        safe = np.where(raw > 0, raw, 1.0)
        scale = 2.0 ** np.ceil(np.log2(safe)) * t
    elif scale_fmt is None:
        scale = raw * t
    else:
        scale = P.round_to(raw, scale_fmt, on_range="ignore") * t
    top = P.format_info(element).max_normal
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(P.round_to(blocks / safe, element, on_range="ignore"), -top, top) * safe
    return np.where(scale > 0, q, 0.0).reshape(x.shape)


def _slips(x: np.ndarray) -> dict[str, np.ndarray]:
    """Outputs of plausible wrong NVFP4 quantizers for ``x``, each with its cause."""
    from labkit.numerics import scaling

    out: dict[str, np.ndarray | None] = {
        "blocks of 32: that is the MX block; NVFP4's blocks are 16 elements long.": _nvfp4(x, block=32)
        if x.shape[-1] % 32 == 0
        else None,
        "a power-of-two (E8M0) block scale is MXFP4's; NVFP4 rounds amax / 6 (over the tensor scale) to E4M3, "
        "which keeps 3 mantissa bits of the scale.": _nvfp4(x, scale_fmt="e8m0"),
        "the MXFP4 format (scaling.quantize_blocks(x, 'mxfp4')): NVFP4 is blocks of 16 with E4M3 scales.": scaling.quantize_blocks(
            x, "mxfp4"
        ).values
        if x.shape[-1] % 32 == 0
        else None,
        "no tensor scale: E4M3 block scales alone span only 2^-9 to 448, so first divide by the FP32 tensor scale "
        "amax(x) / (448 × 6), and multiply it back.": _nvfp4(x, tensor_max=None),
        "the tensor scale is amax(x) / (448 × 6), so that the largest block scale lands on E4M3's 448, not amax(x) / 6.": _nvfp4(
            x, tensor_max=E2M1_MAX
        ),
        "the block scale must be stored in E4M3: round amax_block / 6 / tensor_scale with P.round_to(..., "
        "'fp8_e4m3'), then multiply by the tensor scale.": _nvfp4(x, scale_fmt=None),
        "one scale per row: NVFP4 gives every block of 16 consecutive elements its own scale.": _nvfp4(x, per_row=True),
        "the elements are E2M1 (FP4, largest 6), not E4M3: P.round_to(..., 'fp4_e2m1').": _nvfp4(x, element="fp8_e4m3"),
    }
    return {c: v for c, v in out.items() if v is not None}


def _cases() -> list[np.ndarray]:
    """Fresh inputs: rows of very different magnitudes (some far enough below the largest that their E4M3 block scales
    become subnormal), an all-zero block, a block whose E4M3 scale rounds down (its largest element lands above 6 and
    must saturate), several shapes, a width that is not a multiple of 32."""
    gen = rng()
    first = gen.standard_normal((4, 4 * NVFP4_BLOCK))
    first[0, :NVFP4_BLOCK] = 0.0  # an all-zero block
    first[1] *= 2.0**-16  # far below the largest row: subnormal E4M3 block scales
    # a block whose amax / 6 / t has a mantissa just above 1, which E4M3 rounds down: its largest element lands above 6
    # (t from the other blocks: this one's new values stay far below their largest, so t is the check's t too)
    first[2, 16:32] = 0.0
    t = np.abs(first).max() / (E4M3_MAX * E2M1_MAX)
    top = E2M1_MAX * t * (1.03 + 0.02 * gen.random()) * 2.0 ** int(gen.integers(-3, 4))
    first[2, 16:32] = gen.uniform(-0.9, 0.9, NVFP4_BLOCK) * top
    first[2, 20] = -top
    cases = [first]
    for rows, blocks in ((int(gen.integers(3, 7)), 3), (int(gen.integers(8, 17)), 8), (2, 1)):
        cases.append(gen.standard_normal((rows, blocks * NVFP4_BLOCK)) * 2.0 ** gen.uniform(-14, 10, size=(rows, 1)))
    cases.append(np.zeros((2, 2 * NVFP4_BLOCK)))  # all zero: amax(x) = 0 gives no tensor scale, and every block stays 0
    cases.append(gen.uniform(-1, 1, (2, 2 * NVFP4_BLOCK)) * 2.0**-6)  # a whole tensor below 1: its amax sets the scale
    return cases


@exercise("06.nvfp4-quantize", kind="code", reference=_reference_nvfp4)
def nvfp4_quantize(fn: Callable[[np.ndarray], np.ndarray]) -> str:
    """Grade ``quantize_nvfp4(x)``: ``x`` (float64, last axis a multiple of 16) stored in NVFP4 (Blackwell's FP4
    with E4M3 block scales under an FP32 tensor scale) and read back, element by element on fresh inputs."""
    need_function(fn, "a function quantize_nvfp4(x)")
    cases = _cases()
    grade_block_quantized(
        fn,
        "quantize_nvfp4",
        "nvfp4",
        cases,
        _slips,
        lambda x, arr: (
            "an all-zero block has amax 0, and 0 / 0 is NaN: give such a block's elements 0 (np.where(scale > 0, ...))."
        ),
        "tensor scale t = amax(x) / (448 × 6); each block of 16: scale = E4M3(amax_block / 6 / t) × t; "
        "elements rounded to E2M1 and clipped to ±6, times the scale; an all-zero block stays 0.",
    )
    return (
        f"right on {len(cases)} fresh arrays: a row 2^16 below the largest (subnormal E4M3 block scales), an all-zero block "
        "and a block whose E4M3 scale rounds down, so its largest element saturates at 6."
    )
