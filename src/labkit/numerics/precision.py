"""Number formats of GPU arithmetic, emulated exactly on the CPU.

Formats: ``fp64``, ``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp8_e4m3``, ``fp8_e5m2``, ``fp4_e2m1`` and ``int8``.
The block-scaled formats built on them (MXFP8, MXFP4, NVFP4) and FP8 per-tensor scaling are in :mod:`labkit.scaling`.

- :func:`formats` and :func:`format_info` describe each one (bit layout, bias, range, machine epsilon).
- :func:`bits` shows the sign, exponent and mantissa fields of a number once rounded to a format;
  :func:`decode` turns a bit pattern back into its value.
- :func:`round_to` rounds to a format with round-to-nearest-even; :func:`quantize` does the same and
  returns a :class:`RoundingReport` that counts overflows, saturations, underflows and subnormals.
  Overflow is never hidden: :func:`round_to` warns (:class:`PrecisionWarning`) when a value overflows,
  saturates or underflows to zero, unless told otherwise.
- :func:`gemm` multiplies matrices with inputs rounded to a format and the accumulator in FP32 or in the
  format itself, for error studies; :func:`gemm_error` and :func:`relative_error` measure the result.
  ``accumulate="limited"`` models how Hopper's Tensor Cores accumulate FP8 products along a chain of ``wgmma``
  instructions (about 14 bits: what "fast accumulation" gives; cuBLAS and CUTLASS promote to FP32 by default) and
  ``promote_every=N`` the promotion of its partial sums to FP32 every N products (DeepSeek-V3).
- ``accumulate="fp32"`` sums in FP32 in a fixed order (:func:`fp32_dot_sequential`), never through the CPU's BLAS,
  so an error table is the same on every CPU.

Rounding is exact: a value is rounded once, from its float64 value, to the nearest number of the format,
ties to the even mantissa. (``ml_dtypes`` casts float64 through float32, which rounds twice; labkit uses
ml_dtypes for the storage types and rounds itself.) TF32 is the exception by design: like the hardware,
labkit rounds TF32 from the FP32 value of a number (TF32 operands are FP32 numbers in memory) by bit
manipulation: add ``0xFFF`` plus the lowest kept bit, clear the 13 low mantissa bits.

Everything here runs on NumPy; nothing imports numba or CuPy.
"""

from __future__ import annotations

import difflib
import html
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

import numpy as np

from labkit.errors import LabkitError
from labkit.validate import describe

__all__ = [
    "FORMATS",
    "BitFields",
    "FormatInfo",
    "PrecisionWarning",
    "Quantized",
    "RoundingReport",
    "bits",
    "classify",
    "decode",
    "format_info",
    "formats",
    "fp32_dot_sequential",
    "gemm",
    "gemm_error",
    "normalize_name",
    "quantize",
    "relative_error",
    "round_significant",
    "round_tf32_bits",
    "round_to",
    "storage_dtype",
]


class PrecisionWarning(UserWarning):
    """Rounding to a format overflowed, saturated or flushed non-zero values to zero."""


@dataclass(frozen=True)
class FormatInfo:
    """The layout and range of one number format.

    ``epsilon`` is the machine epsilon: the distance from 1 to the next larger number of the format
    (2**-mantissa_bits); rounding to nearest has a relative error of at most ``epsilon / 2`` in the
    normal range. For ``int8`` the range fields are the integer limits and ``epsilon`` is the spacing, 1.
    """

    name: str
    description: str
    kind: Literal["float", "int"]
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_normal: float
    min_normal: float
    min_subnormal: float
    epsilon: float
    has_inf: bool
    has_nan: bool
    saturates: bool  # overflow goes to the largest finite value instead of infinity

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number (``1 - bias``)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        return int(math.floor(math.log2(self.max_normal))) if self.kind == "float" else 0

    @property
    def unit_roundoff(self) -> float:
        """Largest relative rounding error in the normal range, ``epsilon / 2``."""
        return self.epsilon / 2

    @property
    def layout(self) -> str:
        """``1 + E + M`` as a short string, e.g. ``"1+5+10"``."""
        if self.kind == "int":
            return f"{self.bits}-bit two's complement"
        return f"1+{self.exponent_bits}+{self.mantissa_bits}"

    def summary(self) -> str:
        """One line: name, layout, range and epsilon."""
        if self.kind == "int":
            return f"{self.name:9s} {self.layout}: {int(-self.max_normal - 1)} .. {int(self.max_normal)}"
        return (
            f"{self.name:9s} {self.layout:7s} bias {self.bias:5d}  max {self.max_normal:.6g}  "
            f"min normal {self.min_normal:.6g}  min subnormal {self.min_subnormal:.6g}  eps {self.epsilon:.3g}"
        )


def _float_format(
    name: str,
    description: str,
    e: int,
    m: int,
    *,
    ieee: bool = True,
    saturates: bool = False,
    max_normal: float | None = None,
    has_nan: bool = True,
) -> FormatInfo:
    bias = 2 ** (e - 1) - 1
    emax = bias if ieee else bias + 1
    largest = max_normal if max_normal is not None else (2 - 2.0**-m) * 2.0**emax
    return FormatInfo(
        name=name,
        description=description,
        kind="float",
        bits=1 + e + m,
        exponent_bits=e,
        mantissa_bits=m,
        bias=bias,
        max_normal=float(largest),
        min_normal=2.0 ** (1 - bias),
        min_subnormal=2.0 ** (1 - bias - m),
        epsilon=2.0**-m,
        has_inf=ieee,
        has_nan=has_nan,
        saturates=saturates,
    )


FORMATS: dict[str, FormatInfo] = {
    "fp64": _float_format("fp64", "IEEE 754 binary64 (double)", 11, 52),
    "fp32": _float_format("fp32", "IEEE 754 binary32 (single)", 8, 23),
    "tf32": _float_format("tf32", "TensorFloat-32: FP32's exponent with FP16's mantissa; a Tensor Core input format", 8, 10),
    "fp16": _float_format("fp16", "IEEE 754 binary16 (half)", 5, 10),
    "bf16": _float_format("bf16", "bfloat16: FP32's exponent with a 7-bit mantissa", 8, 7),
    # OCP FP8 E4M3 ("fn": finite, no infinities; only S.1111.111 is NaN), so the top exponent holds numbers up to 448.
    "fp8_e4m3": _float_format(
        "fp8_e4m3",
        "FP8 E4M3 (OCP/NVIDIA): no infinity, largest 448; a saturating conversion (cvt .satfinite) clamps to it, others give NaN",
        4,
        3,
        ieee=False,
        saturates=True,
        max_normal=448.0,
    ),
    "fp8_e5m2": _float_format("fp8_e5m2", "FP8 E5M2 (OCP/NVIDIA): IEEE-like, with infinities", 5, 2),
    # OCP MX v1.0 FP4 E2M1: no infinity and no NaN; the element format of MXFP4 and NVFP4 (labkit.scaling), max 6.
    "fp4_e2m1": _float_format(
        "fp4_e2m1",
        "FP4 E2M1 (OCP MX): no infinity and no NaN, largest 6, so conversions clamp to it; the element of MXFP4 and NVFP4",
        2,
        1,
        ieee=False,
        saturates=True,
        max_normal=6.0,
        has_nan=False,
    ),
    "int8": FormatInfo(
        name="int8",
        description="8-bit two's complement integer; conversion rounds to nearest even and saturates",
        kind="int",
        bits=8,
        exponent_bits=0,
        mantissa_bits=7,
        bias=0,
        max_normal=127.0,
        min_normal=1.0,
        min_subnormal=1.0,
        epsilon=1.0,
        has_inf=False,
        has_nan=False,
        saturates=True,
    ),
}

_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "f64": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "single": "fp32",
    "f32": "fp32",
    "tensorfloat32": "tf32",
    "tensorfloat_32": "tf32",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "bfloat16": "bf16",
    "e4m3": "fp8_e4m3",
    "fp8e4m3": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "fp8e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
    "e2m1": "fp4_e2m1",
    "fp4": "fp4_e2m1",
    "fp4e2m1": "fp4_e2m1",
    "float4_e2m1fn": "fp4_e2m1",
    "float4_e2m1": "fp4_e2m1",
    "i8": "int8",
    "s8": "int8",
}


def normalize_name(fmt: Any) -> str:
    """The canonical name of a format given by name (``"FP16"``, ``"half"``, ``"e4m3"``) or NumPy dtype.

    Unknown names raise :class:`~labkit.errors.LabkitError` with the closest names.
    """
    if isinstance(fmt, FormatInfo):
        return fmt.name
    if fmt is None or isinstance(fmt, bool):  # np.dtype(None) would be float64: a missing format is no format
        raise LabkitError(f"a number format is named by a string, not {fmt!r}.", fix=f"Use one of {', '.join(FORMATS)}.")
    if not isinstance(fmt, str):
        try:
            fmt = np.dtype(fmt).name
        except TypeError:
            raise LabkitError(
                f"a number format is named by a string, not {type(fmt).__name__}.",
                fix=f"Use one of {', '.join(FORMATS)}.",
            ) from None
    key = fmt.strip().lower().replace("-", "_").replace(" ", "_")
    if key in FORMATS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if key in ("mxfp8", "mxfp6", "mxfp4", "nvfp4", "mxint8", "mxfp8_e4m3", "mxfp8_e5m2"):
        raise LabkitError(
            f"{fmt!r} is a block-scaled format (elements plus one scale per block), not a number format.",
            fix="Use labkit.scaling.quantize_blocks(x, 'mxfp8_e4m3' | 'mxfp4' | 'nvfp4'); its elements are fp8_e4m3, "
            "fp8_e5m2 or fp4_e2m1 here.",
        )
    if key in ("fp8", "float8", "f8"):
        raise LabkitError(
            f"{fmt!r} is ambiguous: there are two FP8 formats. Did you mean fp8_e4m3 or fp8_e5m2?",
            fix="E4M3 has more precision (used for weights and activations), E5M2 more range (used for gradients).",
        )
    close = difflib.get_close_matches(key, list(FORMATS) + list(_ALIASES), n=3, cutoff=0.5)
    close = list(dict.fromkeys(_ALIASES.get(c, c) for c in close))
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise LabkitError(f"unknown number format {fmt!r}.{hint}", fix=f"Formats: {', '.join(FORMATS)}.")


def formats() -> list[str]:
    """The names of the formats labkit knows, widest first."""
    return list(FORMATS)


def format_info(name: Any) -> FormatInfo:
    """The :class:`FormatInfo` of a format (by name, alias or NumPy dtype)."""
    return FORMATS[normalize_name(name)]


def storage_dtype(fmt: Any) -> np.dtype:
    """The NumPy dtype that stores a format: ml_dtypes for bf16 and FP8, float32 for TF32 (low 13 bits zero)."""
    name = normalize_name(fmt)
    if name in ("bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"):
        import ml_dtypes

        return np.dtype(
            {
                "bf16": ml_dtypes.bfloat16,
                "fp8_e4m3": ml_dtypes.float8_e4m3fn,
                "fp8_e5m2": ml_dtypes.float8_e5m2,
                "fp4_e2m1": ml_dtypes.float4_e2m1fn,
            }[name]
        )
    return np.dtype({"fp64": np.float64, "fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "int8": np.int8}[name])


# --------------------------------------------------------------------------------------------- rounding


def _as_float64(x: Any) -> np.ndarray:
    try:
        return np.asarray(x).astype(np.float64)
    except (TypeError, ValueError):
        raise LabkitError(
            f"cannot round {type(x).__name__} values to a number format.", fix="Pass numbers or a NumPy array."
        ) from None


def round_tf32_bits(x: Any) -> np.ndarray:
    """Round FP32 values to TF32 by bit manipulation (round to nearest, ties to even); returns float32.

    Take the 32 bits of each FP32 value, add ``0xFFF`` plus the lowest bit that TF32 keeps (bit 13), and
    clear the 13 low bits. A carry out of the mantissa moves into the exponent, which is right; past the
    largest exponent it gives infinity, which is also right. NaNs are kept as they are.
    """
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        x32 = x  # as it is: a cast would quieten a signalling NaN (and change its bits)
    else:
        with np.errstate(invalid="ignore"):
            x32 = _as_float64(x).astype(np.float32)
    u = x32.view(np.uint32).astype(np.uint64)
    keep_lsb = (u >> np.uint64(13)) & np.uint64(1)
    rounded = ((u + np.uint64(0xFFF) + keep_lsb) & np.uint64(0xFFFFE000)).astype(np.uint32)
    out = rounded.view(np.float32)
    return np.where(np.isnan(x32), x32, out)


def _round_float_exact(x: np.ndarray, info: FormatInfo) -> np.ndarray:
    """Round float64 values to a binary float format, ties to even, with an unbounded exponent above.

    For |x| in [2**E, 2**(E+1)) the spacing of the format is 2**(E - p); below the smallest normal the
    spacing stays 2**(emin - p) (subnormals). Scaling by a power of two is exact, and ``np.rint`` rounds
    half to even, so the result is the correctly rounded value. Overflow is handled by the caller.
    """
    return _round_bits(x, info.mantissa_bits, info.emin)


def _round_bits(x: np.ndarray, p: int, emin: int, toward_zero: bool = False) -> np.ndarray:
    """``x`` kept to ``p`` bits after the leading one, the exponent no lower than ``emin`` (spacing 2**(E - p) for
    |x| in [2**E, 2**(E+1))), rounded to nearest (ties to even) or toward zero; exact, by scaling with powers of two."""
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)
        q = np.maximum(e.astype(np.int64) - 1, emin) - p
        scaled = np.ldexp(x, -q)
        return np.ldexp(np.trunc(scaled) if toward_zero else np.rint(scaled), q)


@dataclass
class RoundingReport:
    """What happened when values were rounded to a format: counts, and the largest errors.

    ``overflow``: finite values that became infinity. ``saturated``: values clamped to the largest
    finite number (FP8 E4M3, int8). ``underflow``: non-zero values that became zero. ``subnormal``:
    results in the subnormal range (reduced precision). ``nan_in``/``inf_in``: NaNs and infinities in
    the input. ``inexact``: values that changed at all.
    """

    fmt: str
    count: int
    inexact: int = 0
    overflow: int = 0
    saturated: int = 0
    underflow: int = 0
    subnormal: int = 0
    nan_in: int = 0
    inf_in: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0  # over finite, non-zero inputs whose result is finite
    examples: dict[str, float] = field(default_factory=dict)  # one input value per kind of event

    @property
    def lossless(self) -> bool:
        """True when every value was represented exactly."""
        return self.inexact == 0 and self.overflow == 0 and self.saturated == 0 and self.underflow == 0

    @property
    def range_problems(self) -> int:
        """Values that left the format's range: overflowed, saturated or underflowed to zero."""
        return self.overflow + self.saturated + self.underflow

    def __str__(self) -> str:
        parts = [f"{self.count} value(s) to {self.fmt}: {self.inexact} rounded"]
        for name in ("overflow", "saturated", "underflow", "subnormal"):
            n = getattr(self, name)
            if n:
                example = self.examples.get(name)
                what = {
                    "overflow": "overflowed to inf",
                    "saturated": "saturated at the largest value",
                    "underflow": "underflowed to 0",
                    "subnormal": "subnormal",
                }[name]
                parts.append(f"{n} {what}" + (f" (e.g. {example:.6g})" if example is not None else ""))
        if self.nan_in or self.inf_in:
            parts.append(f"{self.nan_in} NaN and {self.inf_in} inf in the input")
        parts.append(f"max relative error {self.max_rel_error:.3g}")
        return "; ".join(parts)


@dataclass
class Quantized:
    """Values rounded to a format (as float64, or int64 for int8) together with their :class:`RoundingReport`."""

    values: np.ndarray
    report: RoundingReport
    fmt: str

    def native(self) -> np.ndarray:
        """The values in the format's storage dtype (e.g. ``ml_dtypes.bfloat16``); exact, since they are already rounded."""
        return self.values.astype(storage_dtype(self.fmt))


def _quantize_array(x64: np.ndarray, name: str) -> tuple[np.ndarray, RoundingReport]:
    info = FORMATS[name]
    finite_in = np.isfinite(x64)
    nan_in = np.isnan(x64)
    if name == "fp64":
        out = x64.copy()
    elif name == "int8":
        with np.errstate(invalid="ignore"):
            r = np.rint(np.where(nan_in, 0.0, x64))
            out = np.clip(r, -128.0, 127.0)
    elif name == "tf32":
        with np.errstate(over="ignore", invalid="ignore"):
            out = round_tf32_bits(x64.astype(np.float32)).astype(np.float64)
    else:
        out = _round_float_exact(x64, info)
        too_big = np.abs(out) > info.max_normal
        if info.saturates:
            out = np.where(too_big & ~nan_in, np.copysign(info.max_normal, x64), out)
        else:
            out = np.where(too_big & ~nan_in, np.copysign(np.inf, x64), out)
    report = _report(x64, out, name, finite_in, nan_in)
    return out, report


def _report(x64: np.ndarray, out: np.ndarray, name: str, finite_in: np.ndarray, nan_in: np.ndarray) -> RoundingReport:
    info = FORMATS[name]
    inf_in = np.isinf(x64)
    with np.errstate(invalid="ignore"):
        changed = ~((out == x64) | (nan_in & np.isnan(out)))
        overflow = finite_in & np.isinf(out)
        if info.saturates:
            limit_lo = -128.0 if name == "int8" else -info.max_normal
            saturated = ((x64 > info.max_normal) | (x64 < limit_lo)) & ~nan_in
            if name == "int8":  # 127.4 rounds to 127 inside the range; only values beyond 127.5 / below -128.5 saturate
                saturated = ((x64 >= 127.5) | (x64 < -128.5)) & ~nan_in
            else:  # E4M3: only values that would round above 448 saturate
                saturated = (
                    (np.abs(_round_float_exact(np.where(finite_in, x64, 0.0), info)) > info.max_normal) | inf_in
                ) & ~nan_in
        else:
            saturated = np.zeros_like(finite_in)
        underflow = finite_in & (x64 != 0) & (out == 0)
        if info.kind == "int":  # |x| < 0.5 becoming 0 is ordinary integer rounding, not a range problem
            underflow = np.zeros_like(finite_in)
        if info.kind == "float":
            subnormal = np.isfinite(out) & (out != 0) & (np.abs(out) < info.min_normal)
        else:
            subnormal = np.zeros_like(finite_in)
        err = np.abs(out - x64)
        good = finite_in & np.isfinite(out) & (x64 != 0)
        rel = np.where(good, err / np.where(x64 == 0, 1.0, np.abs(x64)), 0.0)
    examples: dict[str, float] = {}
    for key, mask in (("overflow", overflow), ("saturated", saturated), ("underflow", underflow), ("subnormal", subnormal)):
        if mask.any():
            examples[key] = float(x64[mask].flat[0])
    return RoundingReport(
        fmt=name,
        count=int(x64.size),
        inexact=int(changed.sum()),
        overflow=int(overflow.sum()),
        saturated=int(saturated.sum()),
        underflow=int(underflow.sum()),
        subnormal=int(subnormal.sum()),
        nan_in=int(nan_in.sum()),
        inf_in=int(inf_in.sum()),
        max_abs_error=float(np.max(np.where(good, err, 0.0), initial=0.0)),
        max_rel_error=float(np.max(rel, initial=0.0)),
        examples=examples,
    )


def quantize(x: Any, fmt: Any) -> Quantized:
    """Round ``x`` to ``fmt`` and report what happened (see :class:`RoundingReport`). Never warns."""
    name = normalize_name(fmt)
    x64 = _as_float64(x)
    out, report = _quantize_array(x64, name)
    if name == "int8":
        out = out.astype(np.int64)
    return Quantized(out, report, name)


def round_to(x: Any, fmt: Any, *, on_range: Literal["warn", "raise", "ignore"] = "warn", native: bool = False) -> Any:
    """Round ``x`` (a number or array) to the nearest value of ``fmt``, ties to even.

    Returns float64 values (or a Python float for a scalar input); ``native=True`` returns the format's
    storage dtype instead (``np.float16``, ``ml_dtypes.bfloat16``, ...; TF32 as float32). Values beyond the
    range overflow to infinity (FP64, FP32, TF32, FP16, BF16, E5M2) or saturate at the largest value (E4M3,
    int8). When anything overflows, saturates or underflows to zero, ``on_range="warn"`` (the default) issues
    a :class:`PrecisionWarning` with the counts, ``"raise"`` raises :class:`~labkit.errors.LabkitError`, and
    ``"ignore"`` stays silent. :func:`quantize` gives the full :class:`RoundingReport`.
    """
    if on_range not in ("warn", "raise", "ignore"):
        raise LabkitError(f"on_range={on_range!r} is not an option.", fix='Use "warn", "raise" or "ignore".')
    q = quantize(x, fmt)
    rep = q.report
    if rep.range_problems and on_range != "ignore":
        message = f"rounding {rep}"
        if on_range == "raise":
            raise LabkitError(
                message, fix="Scale the values into the format's range (see format_info(...).max_normal / min_normal)."
            )
        warnings.warn(message, PrecisionWarning, stacklevel=2)
    values = q.native() if native else q.values
    if np.ndim(x) == 0 and not isinstance(x, np.ndarray):
        return values.item() if hasattr(values, "item") else values
    return values


def classify(x: Any, fmt: Any) -> Any:
    """What happens to each value when rounded to ``fmt``: one of ``"zero"``, ``"normal"``, ``"subnormal"``,
    ``"underflow"`` (non-zero, becomes 0), ``"overflow"`` (becomes inf), ``"saturated"``, ``"inf"``, ``"nan"``.

    A scalar gives a string, an array an array of strings.
    """
    name = normalize_name(fmt)
    info = FORMATS[name]
    x64 = _as_float64(x)
    out, _ = _quantize_array(x64, name)
    with np.errstate(invalid="ignore"):
        labels = np.full(x64.shape, "normal", dtype=object)
        if info.kind == "float":
            labels[(np.abs(out) < info.min_normal) & (out != 0)] = "subnormal"
        labels[out == 0] = "zero"
        labels[(out == 0) & (x64 != 0) & np.isfinite(x64)] = "underflow"
        if info.saturates:
            if name == "int8":
                sat = (x64 >= 127.5) | (x64 < -128.5)
            else:
                sat = np.abs(_round_float_exact(np.where(np.isfinite(x64), x64, 0.0), info)) > info.max_normal
            labels[sat & np.isfinite(x64)] = "saturated"
        labels[np.isinf(out) & np.isfinite(x64)] = "overflow"
        labels[np.isinf(x64)] = "saturated" if info.saturates else "inf"
        labels[np.isnan(x64)] = "zero" if name == "int8" else "nan"
    if labels.ndim == 0:
        return str(labels.item())
    return labels.astype(str)


# --------------------------------------------------------------------------------------------- bit fields


@dataclass(frozen=True)
class BitFields:
    """A number's bit pattern in a format: the fields as integers and as a bit string.

    ``value`` is the number the pattern encodes (the input rounded to the format); ``error`` is
    ``value - input``. ``kind`` is ``"zero"``, ``"subnormal"``, ``"normal"``, ``"inf"`` or ``"nan"``
    (``"int"`` for int8). ``exponent`` is the unbiased exponent (None for zero, inf and NaN).
    """

    fmt: str
    input: float
    value: float
    sign: int
    exponent_field: int
    mantissa_field: int
    kind: str
    exponent: int | None

    @property
    def info(self) -> FormatInfo:
        return FORMATS[self.fmt]

    @property
    def raw(self) -> int:
        """The pattern as an unsigned integer."""
        info = self.info
        if info.kind == "int":
            return self.mantissa_field
        return (self.sign << (info.bits - 1)) | (self.exponent_field << info.mantissa_bits) | self.mantissa_field

    @property
    def sign_bits(self) -> str:
        return str(self.sign)

    @property
    def exponent_bits(self) -> str:
        info = self.info
        return format(self.exponent_field, f"0{info.exponent_bits}b") if info.exponent_bits else ""

    @property
    def mantissa_bits(self) -> str:
        info = self.info
        if info.kind == "int":
            return format(self.raw, "08b")[1:]
        return format(self.mantissa_field, f"0{info.mantissa_bits}b")

    @property
    def string(self) -> str:
        """Sign, exponent and mantissa separated by spaces, e.g. ``"0 01111 0000000000"``."""
        if self.info.kind == "int":
            return f"{format(self.raw, '08b')[0]} {self.mantissa_bits}"
        return f"{self.sign_bits} {self.exponent_bits} {self.mantissa_bits}"

    @property
    def error(self) -> float:
        if not (math.isfinite(self.value) and math.isfinite(self.input)):
            return (
                math.nan if math.isnan(self.value) or math.isnan(self.input) else (0.0 if self.value == self.input else math.inf)
            )
        return self.value - self.input

    @property
    def relative_error(self) -> float:
        if self.input == 0 or not math.isfinite(self.error):
            return 0.0 if self.error == 0 else math.nan
        return abs(self.error) / abs(self.input)

    def formula(self) -> str:
        """How the fields give the value, e.g. ``(-1)^0 × 2^(15-15) × 1.5``."""
        info = self.info
        if info.kind == "int":
            return f"two's complement {format(self.raw, '08b')} = {int(self.value)}"
        if self.kind in ("inf", "nan"):
            return f"exponent field all ones: {self.kind}" if info.has_inf else "S.1111.111: nan"
        frac = self.mantissa_field / 2**info.mantissa_bits
        if self.kind in ("zero", "subnormal"):
            return f"(-1)^{self.sign} × 2^({1 - info.bias}) × {frac:.10g}  (subnormal: no hidden 1)"
        return f"(-1)^{self.sign} × 2^({self.exponent_field}-{info.bias}) × {1 + frac:.10g}"

    def __str__(self) -> str:
        return f"{self.fmt:9s} {self.string:<22s} = {self.value!r:<24}  [{self.kind}]  error {self.error:.3g}"

    def _repr_html_(self) -> str:

        return bit_fields_html(self)


def bits(x: float, fmt: Any) -> BitFields:
    """Round the number ``x`` to ``fmt`` and return its bit fields (sign, exponent, mantissa) and value."""
    name = normalize_name(fmt)
    info = FORMATS[name]
    if np.ndim(x) != 0:
        raise LabkitError("bits() shows one number at a time.", fix="Pass a single number, e.g. bits(0.1, 'fp16').")
    x = float(_as_float64(x))
    value = float(quantize(x, name).values)
    if info.kind == "int":
        v = int(value)
        return BitFields(name, x, float(v), int(v < 0), 0, v & 0xFF, "int", None)
    sign = int(math.copysign(1.0, value) < 0) if not math.isnan(value) else 0
    top = 2**info.exponent_bits - 1
    m = info.mantissa_bits
    if math.isnan(value) and not info.has_nan:
        raise LabkitError(
            f"{name} has no NaN: no bit pattern of it encodes {x!r}.",
            fix=f"Every one of {name}'s {2**info.bits} patterns is a number; pass a number.",
        )
    if math.isnan(value):
        if info.has_inf:
            return BitFields(name, x, value, sign, top, 1 << (m - 1), "nan", None)
        return BitFields(name, x, value, sign, top, 2**m - 1, "nan", None)
    if math.isinf(value):
        return BitFields(name, x, value, sign, top, 0, "inf", None)
    a = abs(value)
    if a == 0:
        return BitFields(name, x, value, sign, 0, 0, "zero", None)
    e = math.frexp(a)[1] - 1
    if e < info.emin:
        mant = int(a / 2.0 ** (info.emin - m))
        return BitFields(name, x, value, sign, 0, mant, "subnormal", info.emin)
    mant = int((a / 2.0**e - 1.0) * 2**m)
    return BitFields(name, x, value, sign, e + info.bias, mant, "normal", e)


def _parse_pattern(pattern: Any, info: FormatInfo) -> int:
    if isinstance(pattern, (bool, np.bool_)):
        raise LabkitError("a bit pattern is a string of 0s and 1s or an integer, not a bool.")
    if isinstance(pattern, (int, np.integer)):
        raw = int(pattern)
        if not 0 <= raw < 2**info.bits:
            raise LabkitError(
                f"{raw} does not fit in the {info.bits} bits of {info.name}.",
                fix=f"Pass an integer from 0 to {2**info.bits - 1}, or a string of {info.bits} bits.",
            )
        return raw
    if not isinstance(pattern, str):
        raise LabkitError(f"decode() takes a bit string or an integer, not {type(pattern).__name__}.")
    text = pattern.strip().lower()
    if text.startswith("0x"):
        try:
            return _parse_pattern(int(text, 16), info)
        except ValueError:
            raise LabkitError(f"{pattern!r} is not a hexadecimal number.") from None
    text = text.removeprefix("0b")
    digits = "".join(ch for ch in text if ch not in " _.|")
    if not digits or set(digits) - {"0", "1"}:
        raise LabkitError(
            f"{pattern!r} is not a bit string.",
            fix="Use 0s and 1s, optionally grouped with spaces or _, e.g. '0 01111 0000000000'.",
        )
    if len(digits) != info.bits:
        raise LabkitError(
            f"{info.name} has {info.bits} bits, the pattern {pattern!r} has {len(digits)}.",
            fix=f"Layout of {info.name}: {info.layout} (sign, exponent, mantissa).",
        )
    return int(digits, 2)


def decode(pattern: Any, fmt: Any) -> float:
    """The value of a bit pattern (a string such as ``"0 01111 1000000000"`` or an integer) in ``fmt``.

    Spaces, ``_``, ``.`` and ``|`` in the string are ignored; ``"0x3C00"`` is read as hexadecimal. For
    ``int8`` the result is the two's complement integer (as a float).
    """
    info = format_info(fmt)
    raw = _parse_pattern(pattern, info)
    if info.kind == "int":
        return float(raw - 256 if raw >= 128 else raw)
    m, e = info.mantissa_bits, info.exponent_bits
    sign = -1.0 if raw >> (info.bits - 1) else 1.0
    ef = (raw >> m) & (2**e - 1)
    mf = raw & (2**m - 1)
    top = 2**e - 1
    if info.has_inf and ef == top:
        return sign * math.inf if mf == 0 else math.nan
    if not info.has_inf and info.has_nan and ef == top and mf == 2**m - 1:
        return math.nan
    if ef == 0:
        return sign * math.ldexp(mf, info.emin - m)
    return sign * math.ldexp(2**m + mf, ef - info.bias - m)


# --------------------------------------------------------------------------------------------- GEMM


#: Significant bits the limited accumulator keeps: "around 14 bits" when Hopper's Tensor Cores accumulate FP8 products
#: across wgmma instructions (DeepSeek-V3, §3.3.2); libraries promote to FP32 unless fast accumulation is on.
LIMITED_ACC_BITS = 14
#: Products a limited accumulator adds before it rounds: K = 32 of one FP8 ``wgmma.mma_async`` (m64nNk32).
LIMITED_BLOCK_K = 32


_MAX_SAME_WORK = 256**3 * 4  # multiply-adds an emulated same-format GEMM may do (a few seconds on one core)


def _check_matrices(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    A, B = _as_float64(a), _as_float64(b)
    if A.ndim != 2 or B.ndim != 2:
        raise LabkitError(f"gemm takes two 2-D matrices, got {A.ndim}-D and {B.ndim}-D.")
    if A.shape[1] != B.shape[0]:
        raise LabkitError(
            f"inner dimensions differ: a is {A.shape[0]}×{A.shape[1]}, b is {B.shape[0]}×{B.shape[1]}.",
            fix="a must be M×K and b K×N.",
        )
    return A, B


def gemm(
    a: Any,
    b: Any,
    fmt: Any,
    accumulate: Literal["fp32", "same", "fp64", "int32", "limited"] | None = None,
    *,
    block_k: int | None = None,
    on_range: Literal["warn", "raise", "ignore"] = "warn",
    acc_bits: int = LIMITED_ACC_BITS,
    promote_every: int | None = None,
    acc_rounding: Literal["toward_zero", "nearest"] = "toward_zero",
) -> np.ndarray:
    """``a @ b`` as a GPU would compute it with inputs in ``fmt``; returns float64 values.

    The inputs are rounded to ``fmt`` (:func:`round_to`). Products of two inputs of 16 bits or fewer are exact
    in FP32, as on Tensor Cores. ``accumulate``:

    - ``"fp32"`` (default for the formats narrower than FP64): the sum is kept in FP32, like Tensor Cores
      with FP32 accumulation. labkit adds the products itself, in order along K, rounding to FP32 after every
      step (:func:`fp32_dot_sequential`), not with NumPy's float32 product: that one calls the CPU's BLAS, whose
      summation order and FMA use depend on the CPU, so its errors differ from machine to machine;
    - ``"same"``: the running sum is rounded to ``fmt`` after every ``block_k`` products (the default 1 is
      a fused multiply-add per step; the products within a block are added exactly, as a Tensor Core adds
      a short dot product before it rounds). FP32 ``"same"`` is the float32 product, FP64 the float64 one;
    - ``"int32"``: the only choice for ``int8``, exact integer sums as in INT8 Tensor Core instructions.

    - ``"limited"``: a model of Hopper's Tensor Cores accumulating FP8 products across ``wgmma`` instructions,
      which keep only about 14 significant bits (DeepSeek-V3 technical report, §3.3.2; cuBLASLt and CUTLASS avoid it by
      promoting to FP32 unless fast accumulation is chosen). The products of each block of ``block_k`` (default 32, the K of one
      FP8 ``wgmma`` instruction) are added exactly, then the running sum is cut to ``acc_bits`` significant bits
      (``acc_rounding="toward_zero"`` by default, like the truncating alignment measured on earlier Tensor Cores by
      Fasi et al. 2021; ``"nearest"`` for a gentler bound). ``promote_every=N`` (a multiple of ``block_k``) models
      DeepSeek-V3's fix: every N products the partial sum is added to an FP32 accumulator on the CUDA cores (rounded
      to nearest FP32) and the Tensor Core accumulator starts again from zero. Without it one limited accumulator
      takes the whole of K.

    ``"same"`` and ``"limited"`` are emulations with one NumPy step per block of K: keep M×N×K below about 67 million
    multiply-adds (256×256×1024).
    """
    name = normalize_name(fmt)
    A, B = _check_matrices(a, b)
    M, K = A.shape
    N = B.shape[1]
    default = {"fp64": "same", "int8": "int32"}.get(name, "fp32")
    acc = default if accumulate is None else str(accumulate).lower()
    if block_k is None:
        block_k = LIMITED_BLOCK_K if acc == "limited" else 1
    if isinstance(block_k, (bool, np.bool_)) or not isinstance(block_k, (int, np.integer)) or block_k < 1:
        raise LabkitError(f"block_k must be a positive integer, not {block_k!r}.")
    allowed = {"int8": ("int32",), "fp64": ("same", "fp64")}.get(name, ("fp32", "same", "fp64", "limited"))
    if acc not in allowed:
        raise LabkitError(
            f"accumulate={accumulate!r} is not possible with {name} inputs.",
            fix=f"Use accumulate={' or '.join(repr(x) for x in allowed)} for {name}.",
        )
    Ar = round_to(A, name, on_range=on_range)
    Br = round_to(B, name, on_range=on_range)
    if name == "int8":
        return (np.asarray(Ar, np.int64) @ np.asarray(Br, np.int64)).astype(np.float64)
    if acc == "fp64" or name == "fp64":
        return np.asarray(Ar) @ np.asarray(Br)
    if acc == "fp32" or name == "fp32":
        return fp32_dot_sequential(Ar, Br)
    if acc == "limited":
        return _limited_gemm(np.asarray(Ar), np.asarray(Br), int(block_k), acc_bits, promote_every, acc_rounding)
    # accumulate in the format itself
    if M * N * K > _MAX_SAME_WORK:
        raise LabkitError(
            f"an emulated {name} GEMM with {name} accumulation of {M}×{K} by {K}×{N} is too big for the CPU "
            f"({M * N * K:.3g} multiply-adds).",
            fix="Use matrices with M×N×K below 67 million (e.g. 64×64 with K up to 16384), or accumulate='fp32'.",
        )
    info = FORMATS[name]
    acc_values = np.zeros((M, N))
    for k0 in range(0, K, block_k):
        part = Ar[:, k0 : k0 + block_k] @ Br[k0 : k0 + block_k, :]
        acc_values = _round_accumulator(acc_values + part, name, info)
    n_bad = int((~np.isfinite(acc_values)).sum())
    if n_bad and on_range != "ignore":
        message = f"{name} accumulation overflowed: {n_bad} of {acc_values.size} results are inf or NaN."
        if on_range == "raise":
            raise LabkitError(message, fix="Accumulate in FP32 (accumulate='fp32') or scale the inputs down.")
        warnings.warn(message, PrecisionWarning, stacklevel=2)
    return acc_values


#: Multiply-adds :func:`fp32_dot_sequential` may do in one call (about a second on one core).
_MAX_FP32_WORK = 256**3 * 4


def fp32_dot_sequential(a: Any, b: Any) -> np.ndarray:
    """``a @ b`` summed in FP32 in a fixed order: ``acc = fp32(acc + a[:, k] * b[k, :])`` for k = 0, 1, ..., K − 1.

    Each step forms the product and the sum in float64 and rounds the sum to FP32 once, as an FP32 fused
    multiply-add does (the product of two numbers of 24 significant bits or fewer is exact in float64; the sum
    can round twice only in rare ties). This is how one thread of a CUDA-core FP32 GEMM adds along K, and it is
    the same on every CPU, which NumPy's float32 ``@`` (the CPU's BLAS, its order and FMA use chosen per CPU) is
    not. Returns float64 values of the FP32 results. Keep M×N×K below about 67 million multiply-adds.
    """
    A, B = _check_matrices(a, b)
    M, K = A.shape
    N = B.shape[1]
    if M * N * K > _MAX_FP32_WORK:
        raise LabkitError(
            f"a sequential FP32 GEMM of {M}×{K} by {K}×{N} is too big for the CPU ({M * N * K:.3g} multiply-adds).",
            fix="Use matrices with M×N×K below 67 million (e.g. 64×64 with K up to 16384).",
        )
    A32 = A.astype(np.float32).astype(np.float64)  # the FP32 values of the (already rounded) inputs
    B32 = B.astype(np.float32).astype(np.float64)
    acc = np.zeros((M, N), dtype=np.float32)
    step = np.empty((M, N), dtype=np.float64)
    for k in range(K):
        np.multiply.outer(A32[:, k], B32[k, :], out=step)
        step += acc
        acc = step.astype(np.float32)  # one rounding to FP32 per multiply-add
    return acc.astype(np.float64)


def _round_accumulator(v: np.ndarray, name: str, info: FormatInfo) -> np.ndarray:
    if name == "tf32":
        return round_tf32_bits(v.astype(np.float32)).astype(np.float64)
    out = _round_float_exact(v, info)
    too_big = np.abs(out) > info.max_normal
    if too_big.any():
        fill = info.max_normal if info.saturates else np.inf
        out = np.where(too_big & ~np.isnan(v), np.copysign(fill, v), out)
    return out


def round_significant(v: Any, bits: int, rounding: Literal["toward_zero", "nearest"] = "nearest") -> np.ndarray:
    """``v`` kept to ``bits`` significant bits (FP32's exponent range; zero stays zero), toward zero or to nearest
    (ties to even): the register of an accumulator narrower than FP32."""
    if isinstance(bits, (bool, np.bool_)) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 24:
        raise LabkitError(
            f"an accumulator keeps 2 to 24 significant bits, not {bits!r}.",
            fix="Hopper's Tensor Cores keep about 14 when they accumulate FP8 products (LIMITED_ACC_BITS); FP32 keeps 24.",
        )
    if rounding not in ("toward_zero", "nearest"):
        raise LabkitError(f"rounding={rounding!r} is not an option.", fix='Use "toward_zero" or "nearest".')
    return _round_bits(_as_float64(v), int(bits) - 1, -126, toward_zero=(rounding == "toward_zero"))  # FP32's emin


def _limited_gemm(A: np.ndarray, B: np.ndarray, block_k: int, bits: int, promote_every: int | None, rounding: str) -> np.ndarray:
    M, K = A.shape
    N = B.shape[1]
    if promote_every is not None:
        if isinstance(promote_every, (bool, np.bool_)) or not isinstance(promote_every, (int, np.integer)) or promote_every < 1:
            raise LabkitError(
                f"promote_every must be a positive number of products, not {promote_every!r}.",
                fix="DeepSeek-V3 promotes every 128 products; pass None for no promotion.",
            )
        if promote_every % block_k:
            raise LabkitError(
                f"promote_every={promote_every} is not a multiple of block_k={block_k}: a partial sum can "
                "only be promoted between Tensor Core instructions.",
                fix=f"Use a multiple of {block_k}, e.g. 128.",
            )
    if M * N * K > _MAX_SAME_WORK:
        raise LabkitError(
            f"an emulated GEMM with a limited accumulator of {M}×{K} by {K}×{N} is too big for the CPU "
            f"({M * N * K:.3g} multiply-adds).",
            fix="Use matrices with M×N×K below 67 million, e.g. 64×64 with K up to 16384.",
        )
    chunk = promote_every or K
    total = np.zeros((M, N), dtype=np.float32)  # the FP32 accumulator on the CUDA cores
    for c0 in range(0, K, chunk):
        part = np.zeros((M, N))  # the Tensor Core accumulator, restarted from zero
        for k0 in range(c0, min(c0 + chunk, K), block_k):
            k1 = min(k0 + block_k, c0 + chunk, K)
            part = round_significant(part + A[:, k0:k1] @ B[k0:k1, :], bits, rounding)  # type: ignore[arg-type]
        if promote_every is None:
            return part
        total += part.astype(np.float32)  # promoted: one FP32 addition (exact conversion, one rounding)
    return total.astype(np.float64)


def relative_error(approx: Any, reference: Any) -> float:
    """Largest absolute difference divided by the largest reference magnitude (a normwise relative error).

    Dividing by the largest entry rather than by each entry keeps the measure meaningful when some exact
    results are close to zero.
    """
    x, r = _as_float64(approx), _as_float64(reference)
    if x.shape != r.shape:
        raise LabkitError(f"shapes differ: {x.shape} and {r.shape}.")
    scale = float(np.max(np.abs(r), initial=0.0))
    diff = float(np.max(np.abs(x - r), initial=0.0))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def gemm_error(a: Any, b: Any, fmt: Any, accumulate: str | None = None, *, block_k: int | None = None, **limited: Any) -> float:
    """:func:`relative_error` of :func:`gemm` in ``fmt`` against the float64 product of the *unrounded* inputs.

    ``limited`` passes ``acc_bits``, ``promote_every`` and ``acc_rounding`` on to :func:`gemm` (``accumulate="limited"``)."""
    A, B = _check_matrices(a, b)
    return relative_error(gemm(A, B, fmt, accumulate, block_k=block_k, **limited), A @ B)


def error_vs_k(
    fmt: Any,
    accumulate: str | None,
    ks: Iterable[int],
    *,
    m: int = 32,
    seed: int = 0,
    low: float = 0.0,
    high: float = 1.0,
    **limited: Any,
) -> list[float]:
    """:func:`gemm_error` for m×K by K×m uniform random matrices in ``[low, high)`` for each K in ``ks``.

    The same seed gives the same matrices, so the curves of different formats are comparable. ``limited``
    (``acc_bits``, ``promote_every``, ``acc_rounding``) goes to :func:`gemm` with ``accumulate="limited"``.
    """
    rng = np.random.default_rng(seed)
    errors, flagged = [], []
    first = None
    for k in ks:
        a = rng.uniform(low, high, size=(m, int(k)))
        b = rng.uniform(low, high, size=(int(k), m))
        with warnings.catch_warnings(record=True) as caught:  # one summary below, not a warning per matrix
            warnings.simplefilter("always", PrecisionWarning)
            errors.append(gemm_error(a, b, fmt, accumulate, **limited))
        if caught:
            flagged.append(int(k))
            first = first or caught[0].message
    if flagged:
        warnings.warn(
            f"{normalize_name(fmt)}: range problems in {len(flagged)} of the {len(errors)} GEMMs "
            f"(K = {', '.join(map(str, flagged))}); the first: {first}",
            PrecisionWarning,
            stacklevel=2,
        )
    return errors


def gemm_tolerance(a: Any, b: Any, fmt: Any, accumulate: str = "fp32") -> np.ndarray:
    """An elementwise error bound for :func:`gemm` against the float64 product of the unrounded inputs.

    Rounding each input costs at most the unit roundoff u of ``fmt`` (so a product at most 2u + u²), and a
    running sum of K terms in an accumulator with unit roundoff v at most K·v/(1 − K·v) (Higham's γ_K), both
    relative to ``|a| @ |b|``. Checks use this bound with a margin; real errors are usually far smaller.
    """
    A, B = _check_matrices(a, b)
    u = FORMATS[normalize_name(fmt)].unit_roundoff
    acc = {"fp32": "fp32", "same": normalize_name(fmt), "fp64": "fp64"}.get(accumulate, "fp32")
    v = FORMATS[acc].unit_roundoff
    K = A.shape[1]
    gamma = K * v / max(1e-300, 1 - K * v)
    return (2 * u + u * u + gamma * (1 + 2 * u + u * u)) * (np.abs(A) @ np.abs(B)) + 1e-300


# ------------------------------------------------ bit fields as HTML (the explorers and _repr_html_)
_COLOURS = {"sign": "#c0392b", "exponent": "#2471a3", "mantissa": "#1e8449"}


def _span(text: str, part: str) -> str:
    return f'<span style="color:{_COLOURS[part]};font-family:monospace">{html.escape(text)}</span>'


def bit_fields_html(b: BitFields) -> str:
    """One format's bit fields as coloured HTML (sign red, exponent blue, mantissa green)."""
    if not isinstance(b, BitFields):
        raise LabkitError(
            f"bit_fields_html() takes the result of labkit.precision.bits(x, fmt), got {describe(b)}.",
            fix="e.g. bit_fields_html(labkit.precision.bits(0.1, 'fp16')).",
        )
    if b.info.kind == "int":
        raw = format(b.raw, "08b")
        return _span(raw[0], "sign") + _span(raw[1:], "mantissa")
    return " ".join([_span(b.sign_bits, "sign"), _span(b.exponent_bits, "exponent"), _span(b.mantissa_bits, "mantissa")])
