"""Scaled narrow formats: FP8 with one scale per tensor, and the block-scaled MX and NVFP4 formats, on the CPU.

An FP8 or FP4 number has a tiny range (E4M3 reaches 448, E2M1 only 6), so a tensor is stored as narrow elements
times a scale. Two ways to choose the scale are modelled here, both exactly (rounding by :mod:`labkit.precision`):

- **Per tensor, delayed** (NVIDIA Transformer Engine's ``DelayedScaling`` recipe; TE 2.x also has per-tensor current
  scaling and, on Hopper too, 128-element block scaling with FP32 scales, DeepSeek-V3's recipe): one FP32 scale for the
  whole tensor, ``scale = fp8_max / amax / 2**margin``, where ``amax`` is the largest magnitude seen over a history of
  recent steps (:func:`te_scale`, :class:`DelayedScaling`). The "HYBRID" recipe stores weights and activations in
  E4M3 (max 448, more precision) and gradients in E5M2 (max 57,344, more range): :data:`HYBRID`.
- **Per block** (Blackwell's Tensor Cores read these scales as operands): OCP Microscaling (MX) v1.0 gives every block of 32
  elements its own power-of-two scale in E8M0 (MXFP8 with E4M3 or E5M2 elements, MXFP4 with E2M1); NVIDIA's NVFP4
  gives every block of 16 E2M1 elements an E4M3 scale, on top of one FP32 scale per tensor (:func:`quantize_blocks`).
  Two rules choose an MX block's power of two (:data:`SCALE_RULES`): OCP v1.0's ``floor(log2 amax) − emax``, which
  lets the block's largest values saturate, and the round-up rule of NVIDIA's MXFP8 recipe (Transformer Engine's
  ``MXFP8BlockScaling``: ``ceil(log2(amax / max))``), which clamps none (Mishra, Stosic, Layton, arXiv 2506.08027).

:func:`scaled_gemm` multiplies two matrices stored either way (blocks run along K, as the hardware requires) and
:func:`rowwise_error` measures what a per-tensor scale loses: the rows whose values are far below the tensor's
largest one. Everything here is a CPU emulation of the number formats, not a measurement of a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from labkit.errors import LabkitError
from labkit.numerics import precision as P

__all__ = [
    "BLOCK_FORMATS",
    "HYBRID",
    "BlockFormat",
    "BlockQuantized",
    "DelayedScaling",
    "ScaledTensor",
    "e8m0_scale",
    "element_emax",
    "quantize_blocks",
    "quantize_per_tensor",
    "rowwise_error",
    "SCALE_RULES",
    "scaled_gemm",
    "schemes",
    "te_scale",
]

#: Transformer Engine's ``Format.HYBRID``: E4M3 in the forward pass, E5M2 for the gradients of the backward pass.
HYBRID = {"forward": "fp8_e4m3", "backward": "fp8_e5m2"}

E8M0_MIN_EXP, E8M0_MAX_EXP = -127, 127  # E8M0 encodes 2^-127 .. 2^127 (the pattern 0xFF is NaN)

#: How an MX block's power-of-two scale is chosen from its largest magnitude ``amax``.
SCALE_RULES = {
    "ocp": "OCP MX v1.0: 2**(floor(log2(amax)) − emax); the block maximum lands in [2^emax, 2^(emax+1)) and values "
    "above the element format's largest saturate",
    "round_up": "NVIDIA's MXFP8 recipe (Transformer Engine MXFP8BlockScaling): 2**ceil(log2(amax / max)); the block "
    "maximum lands at or below the element format's largest, so nothing saturates",
}


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format: ``block`` elements in ``element`` share one scale stored in ``scale``."""

    name: str
    element: str  # a labkit.precision format
    block: int
    scale: Literal["e8m0", "fp8_e4m3"]
    tensor_scale: bool  # NVFP4 adds one FP32 scale per tensor
    description: str


BLOCK_FORMATS: dict[str, BlockFormat] = {
    f.name: f
    for f in (
        BlockFormat("mxfp8_e4m3", "fp8_e4m3", 32, "e8m0", False, "OCP MX v1.0 MXFP8: 32 E4M3 elements, one E8M0 scale"),
        BlockFormat("mxfp8_e5m2", "fp8_e5m2", 32, "e8m0", False, "OCP MX v1.0 MXFP8: 32 E5M2 elements, one E8M0 scale"),
        BlockFormat("mxfp4", "fp4_e2m1", 32, "e8m0", False, "OCP MX v1.0 MXFP4: 32 E2M1 elements, one E8M0 scale"),
        BlockFormat(
            "nvfp4",
            "fp4_e2m1",
            16,
            "fp8_e4m3",
            True,
            "NVIDIA NVFP4: 16 E2M1 elements, one E4M3 scale, and one FP32 scale per tensor",
        ),
    )
}


def schemes() -> list[str]:
    """Every storage scheme :func:`scaled_gemm` knows: ``"fp64"`` (no rounding), per-tensor ``"fp8_e4m3"``,
    ``"fp8_e5m2"``, ``"fp4_e2m1"``, and the block formats of :data:`BLOCK_FORMATS`."""
    return ["fp64", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", *BLOCK_FORMATS]


def element_emax(fmt: Any) -> int:
    """The exponent of the largest power of two in an element format (``emax_elem`` of the OCP MX spec): E4M3 8
    (448 = 1.75 × 2^8), E5M2 15, E2M1 2 (6 = 1.5 × 2^2)."""
    return P.format_info(fmt).emax


def _floats(x: Any, what: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise LabkitError(f"{what} must be numbers, not {type(x).__name__}.", fix="Pass a NumPy array of floats.") from None
    if not np.all(np.isfinite(arr)):
        raise LabkitError(
            f"{what} holds inf or NaN; a scale is chosen from finite values.",
            fix="Remove the non-finite values (a real recipe skips such a step).",
        )
    return arr


# --------------------------------------------------------------------------------------------- per tensor


def te_scale(
    amax_history: Any,
    fmt: Any = "fp8_e4m3",
    *,
    margin: int = 0,
    previous: float = 1.0,
    algo: Literal["max", "most_recent"] = "max",
) -> float:
    """The per-tensor scale of Transformer Engine's delayed scaling: ``fp8_max / amax / 2**margin``.

    ``amax`` is the largest of the history (``algo="max"``, TE's default) or its last entry (``"most_recent"``);
    when it is 0 or not finite the ``previous`` scale is kept, as TE does. Values are stored as ``x * scale``
    rounded to ``fmt`` and read back as ``q / scale``.
    """
    info = P.format_info(fmt)
    hist = np.atleast_1d(np.asarray(amax_history, dtype=np.float64))
    if hist.size == 0:
        raise LabkitError("the amax history is empty.", fix="Record at least one amax (the largest |x| of a step).")
    if algo not in ("max", "most_recent"):
        raise LabkitError(f"algo={algo!r} is not an option.", fix='Use "max" (TE\'s default) or "most_recent".')
    amax = float(np.max(hist) if algo == "max" else hist[-1])
    if not math.isfinite(amax) or amax <= 0.0:
        return float(previous)
    return float(info.max_normal / amax / 2.0**margin)


@dataclass
class DelayedScaling:
    """One tensor's FP8 scale, chosen as Transformer Engine's ``DelayedScaling`` recipe does.

    Each step :meth:`quantize` stores the tensor with the scale computed from the amax *history* (the
    previous steps), then records this step's amax; so a tensor that suddenly grows saturates for one step
    before the scale catches up. ``history_len`` is TE's ``amax_history_len`` (1024 by default in TE; shorter
    histories react faster), ``margin`` its ``margin``, ``fmt`` E4M3 for the forward pass, E5M2 for gradients.
    """

    fmt: str = "fp8_e4m3"
    history_len: int = 1024
    margin: int = 0
    algo: Literal["max", "most_recent"] = "max"
    scale: float = 1.0
    history: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fmt = P.normalize_name(self.fmt)
        if isinstance(self.history_len, bool) or not isinstance(self.history_len, int) or self.history_len < 1:
            raise LabkitError(f"history_len must be a positive integer, not {self.history_len!r}.")

    def quantize(self, x: Any) -> "ScaledTensor":
        """Store ``x`` with the current scale, then record its amax and update the scale for the next step."""
        out = quantize_per_tensor(x, self.fmt, scale=self.scale)
        self.history = (self.history + [float(np.max(np.abs(_floats(x, "the tensor")), initial=0.0))])[-self.history_len :]
        self.scale = te_scale(self.history, self.fmt, margin=self.margin, previous=self.scale, algo=self.algo)
        return out


@dataclass(frozen=True)
class ScaledTensor:
    """A tensor stored as ``fmt`` elements with one scale: ``values`` are the dequantized numbers (float64)."""

    values: np.ndarray
    scale: float
    fmt: str
    report: P.RoundingReport


def quantize_per_tensor(x: Any, fmt: Any = "fp8_e4m3", *, scale: float | None = None) -> ScaledTensor:
    """``x`` stored in ``fmt`` with one scale: ``round(x * scale) / scale``. Without ``scale`` it is the current
    scale ``fmt_max / amax(x)``, so the largest value lands on the format's largest (saturating formats clamp,
    E5M2 overflows to infinity beyond its range)."""
    name = P.normalize_name(fmt)
    arr = _floats(x, "the tensor")
    if scale is None:
        scale = te_scale([np.max(np.abs(arr), initial=0.0)], name)
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise LabkitError(f"a scale must be a positive finite number, not {scale!r}.")
    q = P.quantize(arr * scale, name)
    return ScaledTensor(q.values / scale, float(scale), name, q.report)


# --------------------------------------------------------------------------------------------- per block


def e8m0_scale(amax: Any, element: Any = "fp8_e4m3", rule: str = "ocp") -> np.ndarray:
    """The MX scale of blocks whose largest magnitude is ``amax``, limited to E8M0's range 2^-127 .. 2^127 (an
    all-zero block gets 2^-127). ``rule="ocp"`` (OCP MX v1.0): ``2**(floor(log2(amax)) - emax_elem)``; the block's
    largest element lies in [2^emax, 2^(emax+1)) and values above the element format's largest saturate.
    ``rule="round_up"`` (NVIDIA's MXFP8 recipe): ``2**ceil(log2(amax / max_elem))``, so none saturates."""
    if not isinstance(rule, str) or rule not in SCALE_RULES:
        raise LabkitError(f"unknown scale rule {rule!r}.", fix=f"Use one of {', '.join(SCALE_RULES)}.")
    a = np.abs(_floats(amax, "amax"))
    if rule == "round_up":
        top = P.format_info(P.normalize_name(element)).max_normal
        with np.errstate(divide="ignore"):
            m, e = np.frexp(np.where(a > 0, a / top, 1.0))  # a / top = m * 2**e with m in [0.5, 1): exact
        up = np.where(m == 0.5, e - 1, e)  # ceil(log2(a / top)): exact powers of two stay, anything above rounds up
        up = np.where(a > 0, up, E8M0_MIN_EXP)
        return np.ldexp(1.0, np.clip(up, E8M0_MIN_EXP, E8M0_MAX_EXP).astype(np.int64))
    with np.errstate(divide="ignore"):
        e = np.where(a > 0, np.floor(np.log2(np.where(a > 0, a, 1.0))), E8M0_MIN_EXP + element_emax(element))
    # np.log2 is exact at powers of two; guard the rounding of log2 just below one
    e = np.where((a > 0) & (np.ldexp(1.0, e.astype(np.int64)) > a), e - 1, e)
    shared = np.clip(e - element_emax(element), E8M0_MIN_EXP, E8M0_MAX_EXP).astype(np.int64)
    return np.ldexp(1.0, shared)


@dataclass(frozen=True)
class BlockQuantized:
    """A tensor in a block-scaled format: ``values`` (dequantized, float64, the input's shape), one ``scales`` entry
    per block (float64; the axis of the blocks shortened by the block size) and, for NVFP4, ``tensor_scale``."""

    values: np.ndarray
    scales: np.ndarray
    fmt: BlockFormat
    axis: int
    tensor_scale: float = 1.0


def _block_format(fmt: Any) -> BlockFormat:
    key = str(fmt).strip().lower().replace("-", "_") if isinstance(fmt, str) else None
    key = {"mxfp8": "mxfp8_e4m3", "mx_fp8": "mxfp8_e4m3", "mx_fp4": "mxfp4", "nv_fp4": "nvfp4"}.get(key or "", key)
    if key not in BLOCK_FORMATS:
        raise LabkitError(f"{fmt!r} is not a block-scaled format.", fix=f"Use one of {', '.join(BLOCK_FORMATS)}.")
    return BLOCK_FORMATS[key]


def quantize_blocks(x: Any, fmt: Any = "mxfp8_e4m3", *, axis: int = -1, rule: str = "ocp") -> BlockQuantized:
    """``x`` stored in a block-scaled format, blocks of consecutive elements along ``axis``.

    MX formats: each block's scale is :func:`e8m0_scale` of its largest magnitude (``rule``: ``"ocp"`` or
    ``"round_up"``, :data:`SCALE_RULES`; NVFP4 has one rule); elements ``x / scale``
    rounded to the element format, saturating. NVFP4: a per-tensor FP32 scale ``amax / (448 · 6)`` puts the block
    scales in E4M3's range; each block's scale is ``amax_block / 6`` divided by it and rounded to E4M3, and the
    elements ``x / (block scale · tensor scale)`` rounded to E2M1. The length along ``axis`` must be a multiple of
    the block size (pad with zeros otherwise).
    """
    f = _block_format(fmt)
    arr = _floats(x, "the tensor")
    if arr.ndim == 0:
        raise LabkitError("block scaling needs an array, not a single number.")
    ax = axis % arr.ndim
    n = arr.shape[ax]
    if n % f.block:
        raise LabkitError(
            f"{f.name} stores blocks of {f.block}, but the axis has {n} elements.",
            fix=f"Pad the array with zeros to a multiple of {f.block} along axis {axis}.",
        )
    moved = np.moveaxis(arr, ax, -1)
    blocks = moved.reshape(*moved.shape[:-1], n // f.block, f.block)
    amax = np.max(np.abs(blocks), axis=-1)
    info = P.format_info(f.element)
    tensor_scale = 1.0
    if not isinstance(rule, str) or rule not in SCALE_RULES:
        raise LabkitError(f"unknown scale rule {rule!r}.", fix=f"Use one of {', '.join(SCALE_RULES)}.")
    if f.scale == "e8m0":
        scales = e8m0_scale(amax, f.element, rule)
    else:  # NVFP4: E4M3 block scales under one FP32 tensor scale
        t_amax = float(np.max(amax, initial=0.0))
        tensor_scale = t_amax / (P.format_info("fp8_e4m3").max_normal * info.max_normal) if t_amax > 0 else 1.0
        scales = P.round_to(amax / info.max_normal / tensor_scale, "fp8_e4m3", on_range="ignore") * tensor_scale
    safe = np.where(scales > 0, scales, 1.0)[..., None]
    # the MX spec clamps an element beyond the format's range to its largest value (E5M2 too, though it has infinity)
    q = np.clip(P.round_to(blocks / safe, f.element, on_range="ignore"), -info.max_normal, info.max_normal) * safe
    q = np.where((scales > 0)[..., None], q, 0.0)
    values = np.moveaxis(q.reshape(moved.shape), -1, ax)
    return BlockQuantized(values, scales, f, ax, tensor_scale)


# --------------------------------------------------------------------------------------------- GEMM


def _store(m: np.ndarray, scheme: str, axis: int) -> np.ndarray:
    if scheme == "fp64":
        return m
    if scheme in BLOCK_FORMATS:
        return quantize_blocks(m, scheme, axis=axis).values
    return quantize_per_tensor(m, scheme).values


def scaled_gemm(a: Any, b: Any, scheme: str = "mxfp8_e4m3") -> np.ndarray:
    """``a @ b`` with both matrices stored in ``scheme`` (see :func:`schemes`), the sums exact (float64).

    Block formats put their blocks along K: along the rows of ``a`` and the columns of ``b``, as Blackwell's
    block-scaled Tensor Core instructions read them. Per-tensor schemes use the current scale ``fmt_max / amax``
    of each matrix. The sums are exact, so the error is that of storing the inputs alone.
    """
    if scheme not in schemes():
        raise LabkitError(f"unknown scheme {scheme!r}.", fix=f"Use one of {', '.join(schemes())}.")
    A, B = _floats(a, "a"), _floats(b, "b")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise LabkitError(f"scaled_gemm takes an M×K and a K×N matrix, got shapes {A.shape} and {B.shape}.")
    return _store(A, scheme, 1) @ _store(B, scheme, 0)


def rowwise_error(approx: Any, reference: Any) -> float:
    """The worst row's error: max over rows of ``max|approx_row − ref_row| / max|ref_row|``.

    :func:`labkit.precision.relative_error` divides by the largest entry of the whole matrix, which hides a row
    of small values whose every digit was lost; this measure shows it."""
    x, r = _floats(approx, "approx"), _floats(reference, "reference")
    if x.shape != r.shape or x.ndim != 2:
        raise LabkitError(f"rowwise_error takes two matrices of one shape, got {x.shape} and {r.shape}.")
    scale = np.max(np.abs(r), axis=1)
    diff = np.max(np.abs(x - r), axis=1)
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff > 0, np.inf, 0.0))
    return float(np.max(rel, initial=0.0))
