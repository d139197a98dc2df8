"""Checks for lab 06 (Tensor Cores and mixed precision).

Exercises: decode an FP16 bit pattern, predict overflow and underflow in FP16 and BF16, round to TF32 by
bit manipulation, write a WMMA GEMM kernel, update a dynamic loss scale, and take the V100's 125 TFLOPS apart.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .answers import judge, number
from .core import Failed, Unsolved, exercise, exercise_data
from .harness import rng
from .numeric import call_answer, judge_expected, need_function
from .slips import merge_slips

# --------------------------------------------------------------------------------------------- 06.decode-fp16


def _reference_decode_fp16() -> Callable[[str], float]:
    from labkit.numerics import precision

    return lambda pattern: precision.decode(pattern, "fp16")


def _fp16_cases() -> list[str]:
    fixed = [
        0x3C00,
        0xC000,
        0x7BFF,
        0x0001,
        0x03FF,
        0x0400,
        0x8000,
        0x0000,
        0x7C00,
        0xFC00,
        0x7E00,
        0x3555,
        0x2E66,
        0x5640,
    ]
    randoms = rng().integers(0, 2**16, size=60).tolist()
    return [format(int(r), "016b") for r in fixed + randoms]


def _same(got: float, want: float) -> bool:
    """Equal values, NaN for NaN, and zeros of the same sign (−0.0 is not +0.0: 1 / x tells them apart)."""
    if math.isnan(want):
        return math.isnan(got)
    if want == 0:
        return got == 0 and math.copysign(1.0, got) == math.copysign(1.0, want)
    return got == want


def _decode_slip(pattern: str, got: float) -> str | None:
    """The formula slip a wrong decoded value ``got`` matches (``pattern``: 16 bits), or None."""
    sign = -1.0 if pattern[0] == "1" else 1.0
    e, m = int(pattern[1:6], 2), int(pattern[6:], 2)
    if e == 31 or not math.isfinite(got):
        return None
    exp = e - 15 if e else -14
    lead = 1.0 if e else 0.0
    slips = (
        (lead + m / 1000, exp, "the mantissa field is a fraction of 2^10 = 1024 (m / 1024: ten bits), not of 1000."),
        (lead + m / 2**23, exp, "FP16 has 10 mantissa bits: m / 2^10, not m / 2^23 (that is float32's width)."),
        (m / 1024, exp, "the hidden 1 is missing: a normal number is (1 + m / 1024) × 2^(e − 15)."),
        (
            1 + m / 1024,
            e - 15 if e else -15,
            "exponent field 0: subnormal numbers have no hidden 1 and use exponent 1 − 15 = −14.",
        ),
        (lead + m / 1024, e - 16, "the bias is 15 (2^(5−1) − 1): 2^(e − 15), not 2^(e − 16)."),
        (lead + m / 1024, e - 14, "the bias is 15: 2^(e − 15), not 2^(e − 14)."),
        (lead + m / 1024, e - 127, "the bias is 15 for FP16 (5 exponent bits); 127 is float32's."),
        (lead + m / 1024, e, "the bias is missing: the exponent is e − 15, not e."),
    )
    for frac, power, cause in slips:
        value = sign * frac * 2.0**power
        if value and math.isclose(got, value, rel_tol=1e-9) and not (lead and e and power == exp and frac == lead + m / 1024):
            return cause
    return None


SIGNED_ZERO = (
    "the sign bit of a zero: 1 00000 0000000000 is −0.0. `(-1)**s * m` with m = 0 is the integer 0, which has "
    "no sign; use a float sign, `sign = -1.0 if s else 1.0`, and multiply by it."
)


@exercise("06.decode-fp16", kind="code", reference=_reference_decode_fp16)
def decode_fp16(fn: Callable[[str], float]) -> str:
    """Grade ``fn(bits)`` that returns the value of a 16-character FP16 bit string."""
    from labkit.numerics import precision

    need_function(fn, "a function that takes a bit string")
    cases = _fp16_cases()
    for pattern in cases:
        want = precision.decode(pattern, "fp16")
        got = call_answer(fn, pattern, what=f"decoding {pattern}")
        if got is None:
            raise Unsolved("your function returns None; return the decoded value.")
        got_f = number(got, f"the value your function returns for {pattern}", finite=False)
        if not _same(got_f, want):
            e = int(pattern[1:6], 2)
            cause = _decode_slip(pattern, got_f) or (
                "check the formula for normal numbers: value = (-1)^s × (1 + m / 1024) × 2^(e − 15), with the hidden 1 "
                "and the bias 15."
            )
            if want == 0 and got_f == 0:
                cause = SIGNED_ZERO
            elif e == 0:
                cause = "exponent field 0: subnormal numbers have no hidden 1 and use exponent 1 − 15 = −14."
            elif e == 31:
                cause = "exponent field all ones: infinity when the mantissa is 0, NaN otherwise."
            elif pattern[0] == "1" and abs(got_f) == abs(want):
                cause = "the sign bit: 1 means negative."
            raise Failed(
                f"{pattern[0]} {pattern[1:6]} {pattern[6:]} decodes to {want!r}, your function gave {got!r}.", cause=cause
            )
    return f"all {len(cases)} patterns decode correctly, including subnormals, both zeros (+0.0 and −0.0), infinities and NaN."


# --------------------------------------------------------------------------------------------- 06.predict-range

PREDICT_VALUES: tuple[float, ...] = (70000.0, 2e-5, 1e-8, 1e39, 1e-40, 65519.0)
PREDICT_CHOICES = ("normal", "subnormal", "underflow", "overflow")


def _reference_predictions() -> dict[str, list[str]]:
    from labkit.numerics import precision

    return {f: [str(precision.classify(v, f)) for v in PREDICT_VALUES] for f in ("fp16", "bf16")}


@exercise("06.predict-range", kind="numeric", reference=_reference_predictions)
def predict_range(answer: dict[str, list[str]]) -> str:
    """Grade ``{"fp16": [...], "bf16": [...]}``: one of normal/subnormal/underflow/overflow per value in PREDICT_VALUES."""
    if not isinstance(answer, dict):
        raise Failed('expected a dict {"fp16": [...], "bf16": [...]}.')
    expected = _reference_predictions()
    wrong: list[tuple[str, str]] = []
    for fmt in ("fp16", "bf16"):
        got = answer.get(fmt)
        if got is None or got is Ellipsis:
            raise Unsolved(f"the {fmt} list is not filled in yet.")
        got = list(got)
        if any(g is Ellipsis or g is None for g in got):
            raise Unsolved(f"some {fmt} predictions are still `...`.")
        if len(got) != len(PREDICT_VALUES):
            raise Failed(f"the {fmt} list has {len(got)} entries; it needs one per value ({len(PREDICT_VALUES)}).")
        for value, g, e in zip(PREDICT_VALUES, got, expected[fmt]):
            g = str(g).strip().lower()
            if g not in PREDICT_CHOICES:
                raise Failed(f"{value:g} in {fmt}: you said {g!r}; expected one of {', '.join(PREDICT_CHOICES)}.")
            if g != e:
                wrong.append((f"{value:g} in {fmt}: expected {e}, you said {g}", _range_cause(value, fmt, g, e)))
    if wrong:
        raise Failed(
            f"{len(wrong)} of {2 * len(PREDICT_VALUES)} predictions are off: " + "; ".join(w for w, _ in wrong[:3]) + ".",
            cause=wrong[0][1],
        )
    return "every prediction is right: FP16 runs out of range at both ends long before BF16 does."


def _range_cause(value: float, fmt: str, said: str, right: str) -> str:
    """Where ``value`` lies against ``fmt``'s marks, and so why it is ``right`` and not ``said``."""
    from labkit.numerics import precision

    info = precision.format_info(fmt)
    marks = (
        f"{fmt}: largest normal {info.max_normal:.4g}, smallest normal {info.min_normal:.4g}, smallest subnormal "
        f"{info.min_subnormal:.4g}"
    )
    if right == "normal" and said == "overflow" and value > info.max_normal:
        return (
            f"{value:g} is above {fmt}'s largest normal {info.max_normal:g}, but it rounds down to it: only values from "
            f"halfway to the next step up (the largest normal + half an ulp) overflow to inf ({marks})."
        )
    if right == "overflow" and said == "normal" and value < info.max_normal * 1.01:
        return f"{value:g} is past the rounding point above {fmt}'s largest normal {info.max_normal:g}: it becomes inf ({marks})."
    if right == "subnormal":
        return (
            f"{value:g} lies between {fmt}'s smallest subnormal and smallest normal: it is stored as a subnormal, "
            f"with fewer significant bits ({marks})."
        )
    if right == "underflow":
        return f"{value:g} is below half of {fmt}'s smallest subnormal: it rounds to 0 ({marks})."
    if right == "overflow":
        return f"{value:g} is above {fmt}'s largest normal: it becomes inf ({marks})."
    if fmt == "bf16":
        return (
            f"BF16 has FP32's 8 exponent bits, so its range is FP32's: {value:g} is a normal BF16 number ({marks}); "
            "only its precision is FP16's or less."
        )
    return f"{value:g} lies between {fmt}'s smallest normal and largest normal ({marks})."


# --------------------------------------------------------------------------------------------- 06.tf32-round


def _reference_round_tf32() -> Callable[[np.ndarray], np.ndarray]:
    from labkit.numerics import precision

    return precision.round_tf32_bits


def _tf32_cases() -> np.ndarray:
    r = rng()
    wide = r.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    # exact ties: the 13 dropped bits are 1 followed by zeros, with the kept lowest bit 0 or 1
    base = r.integers(0, 2**32, size=400, dtype=np.uint64).astype(np.uint32) & np.uint32(0xFFFFE000)
    ties = base | np.uint32(0x1000)
    near = np.concatenate([ties + np.uint32(1), ties - np.uint32(1)])
    special = np.array(
        [
            0x3F800000,
            0x3F801000,
            0x3F803000,
            0x7F7FFFFF,
            0xFF7FFFFF,
            0x00000001,
            0x00001000,
            0x00003000,
            0x7F800000,
            0xFF800000,
            0x80000000,
            0x00000000,
            0x3FFFF000,
        ],
        dtype=np.uint32,
    )
    # NaNs whose payload lies only in the 13 bits TF32 drops (clearing them would give infinity), NaNs with an
    # all-ones mantissa (adding 0xFFF carries into the sign bit), quiet NaNs; both signs
    low = r.integers(1, 0x2000, size=40, dtype=np.uint64).astype(np.uint32)
    sign = np.where(r.integers(0, 2, size=40) == 1, np.uint32(0x80000000), np.uint32(0)).astype(np.uint32)
    nans = np.concatenate(
        [
            np.uint32(0x7F800000) | low | sign,
            np.array([0x7F800001, 0xFF800FFF, 0x7F801000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FC00000, 0xFFC00001], dtype=np.uint32),
        ]
    )
    bits = np.concatenate([special, ties, near, nans, wide])
    return bits[r.permutation(bits.size)].view(np.float32)


NAN_KEPT = (
    "a NaN must stay a NaN. Its exponent is already all ones: a payload only in the 13 low bits is cleared "
    "(giving infinity), and an all-ones mantissa plus 0xFFF carries into the sign bit. Pass NaNs through "
    "unchanged: `np.where(np.isnan(x), x, rounded)`."
)


@exercise("06.tf32-round", kind="code", reference=_reference_round_tf32)
def tf32_round(fn: Callable[[np.ndarray], np.ndarray]) -> str:
    """Grade ``fn(x)`` that rounds a float32 array to TF32 (round to nearest even) and returns float32."""
    from labkit.numerics import precision

    need_function(fn)
    x = _tf32_cases()
    want = precision.round_tf32_bits(x)
    given = x.copy()
    got = call_answer(fn, given, what="your function")
    if not np.array_equal(given.view(np.uint32), x.view(np.uint32)):
        k = int(np.argmax(given.view(np.uint32) != x.view(np.uint32)))
        raise Failed(
            f"your function wrote into its input x (x[{k}] was 0x{int(x.view(np.uint32)[k]):08X}, is now "
            f"0x{int(given.view(np.uint32)[k]):08X}).",
            cause="round into a new array: `u = x.view(np.uint32).astype(np.uint64)` copies; `u = x.view(np.uint32)` "
            "then `u += ...` or `&=` writes through the view into x.",
        )
    if got is None:
        raise Unsolved("your function returns None; return the rounded array.")
    got = np.asarray(got)
    if got.shape != x.shape:
        raise Failed(f"the result has shape {got.shape}, the input {x.shape}.")
    if got.dtype != np.float32:
        raise Failed(f"the result is {got.dtype}; return float32 (TF32 values are stored as float32).")
    nan_in = np.isnan(want)
    bad = np.where(nan_in, ~np.isnan(got), np.isnan(got) | (got.view(np.uint32) != want.view(np.uint32)))  # bit for bit
    if not bad.any():
        return "random values, exact ties, overflow cases and NaNs (kept NaN) all round exactly like labkit's TF32."
    finite = ~nan_in
    bad_finite = bad & finite
    i = int(np.argwhere(bad_finite if bad_finite.any() else bad)[0][0])  # a wrong number first: it says more than a NaN
    low = int(x.view(np.uint32)[i]) & 0x1FFF
    cause = "compare with the rule: add 0xFFF + the kept lowest bit, then clear 13 bits."
    as_numbers = want[finite].view(np.uint32).astype(np.float32)  # the right bits converted as a number, not viewed
    if np.allclose(got[finite], as_numbers, rtol=1e-6) and not np.allclose(got[finite], want[finite], rtol=1e-3):
        cause = (
            "the result holds the rounded bit patterns converted to numbers (0x3F800000 became 1065353216.0): "
            "`.astype(np.float32)` converts the value; reinterpret the bits instead with "
            "`u.astype(np.uint32).view(np.float32)`."
        )
    elif np.array_equal(got.view(np.uint32)[finite], x.view(np.uint32)[finite] & np.uint32(0xFFFFE000)):
        cause = "this truncates (clears the bits) instead of rounding to nearest."
    elif nan_in[i]:
        cause = NAN_KEPT
    elif low == 0x1000:
        cause = "an exact tie: ties go to the even neighbour (kept lowest bit 0), not always up or always down."
    elif not np.isfinite(want[i]):
        cause = "rounding up past the largest TF32 number must give infinity: a carry into the exponent is right."
    if not nan_in[i] and (bad & nan_in).any():
        cause += " Also, " + NAN_KEPT[0].lower() + NAN_KEPT[1:]
    raise Failed(
        f"{int(bad.sum())} of {x.size} values differ; first: x = {x[i]!r} (bits 0x{int(x.view(np.uint32)[i]):08X}), "
        f"expected {want[i]!r}, got {got[i]!r}.",
        cause=cause,
    )


# --------------------------------------------------------------------------------------------- 06.wmma-gemm


def _reference_wmma() -> str:
    from labkit.gpu.tensorcores import WMMA_SOURCE

    return WMMA_SOURCE


@exercise("06.wmma-gemm", kind="kernel", reference=_reference_wmma)
def wmma_gemm(source: str) -> str:
    """Grade CUDA C++ source defining ``wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K)``.

    The source must compile to PTX with Tensor Core loads, ``wmma.mma`` and a store. Then it runs on random
    matrices of several shapes (K of up to 7 tiles, M not a multiple of the 64 rows a block covers) into a
    NaN-poisoned C between guard zones, compared with the float64 product within the FP16-input, FP32-accumulate
    tolerance: on the GPU with CuPy, in ``sim`` mode on the CPU stand-in, whose ``<mma.h>`` carries out each
    fragment call for the warp as a whole (:mod:`labkit.cuda_cpp`).
    """
    from labkit.cuda.cpp import HostUnavailable, find_entry
    from labkit.gpu import tensorcores as tc

    from ..errors import CompileError, LabkitError
    from ..mode import env

    if not isinstance(source, str):
        raise Failed(f"expected the kernel's CUDA C++ source as a string, got {type(source).__name__}.")
    try:
        ptx = tc.compile_wmma(source, env().arch)
    except CompileError as exc:
        raise Failed(f"the kernel does not compile:\n{exc}", cause="read the first error line; NVRTC names the line.") from None
    try:
        find_entry(ptx.text, "wmma_gemm", n_params=6)
    except LabkitError as exc:
        raise Failed(str(exc).split("\n")[0], cause=exc.fix or 'keep `extern "C" __global__ void wmma_gemm(...)`.') from None
    counts = tc.tensor_core_instructions(ptx.text)
    if counts["wmma.mma"] == 0 and counts["mma"] == 0:
        from labkit.cuda.cpp import find_entry as _entry
        from labkit.cuda.cpp import stores_global

        try:
            writes = stores_global(_entry(ptx.text, "wmma_gemm"))
        except LabkitError:
            writes = False
        if writes:
            raise Failed(
                "the kernel writes C but does no Tensor Core multiply (no wmma.mma in its PTX): the exercise is "
                "a GEMM on Tensor Cores.",
                cause="multiply 16×16 fragments with wmma::mma_sync(acc, a, b, acc) inside the loop over k, "
                "not with scalar multiply-adds.",
            )
        raise Unsolved("the kernel compiles but does no Tensor Core multiply yet (no wmma.mma in its PTX).")
    if counts["wmma.load"] < 2:
        raise Failed(
            "the PTX has a Tensor Core multiply but fewer than two fragment loads.",
            cause="load both a 16×16 block of A and of B each step.",
        )
    if counts["wmma.store"] == 0:
        raise Failed(
            "the kernel never stores its accumulator (no wmma.store in its PTX).",
            cause="call wmma::store_matrix_sync after the loop.",
        )
    slow = ptx.fp64()
    if slow:  # one rule for every lab's kernels, as 02.float32 teaches: FP64 where the exercise has none
        ops = sorted({ln.split(None, 1)[0].rstrip(";") for ln in slow})
        raise Failed(
            f"the kernel computes in double precision: its PTX has {len(slow)} FP64 instruction(s) "
            f"({', '.join(f'`{o}`' for o in ops[:4])}) where A and B are FP16 and the accumulator FP32.",
            cause="in C++ a literal such as 0.5 or 1.0 is a double, and so is what it touches: write 0.5f and use "
            "float variables. FP64 runs at a small fraction of the FP32 rate on most GPUs "
            "(labkit.hw.arithmetic_rates).",
        )
    where = f"compiles for {ptx.arch}: {counts['wmma.load']} fragment loads, {counts['wmma.mma']} wmma.mma, {counts['wmma.store']} store"
    cases = [(a, b) for a, b in _wmma_cases()]
    if env().is_gpu:
        for a, b in cases:
            M, K, N = a.shape[0], a.shape[1], b.shape[1]
            try:
                c = tc.run_wmma_gemm(a, b, source)
            except CompileError as exc:
                raise Failed(f"CuPy could not compile the kernel: {exc}") from None
            except Exception as exc:  # noqa: BLE001
                raise Failed(f"running the kernel on {M}×{K} @ {K}×{N} raised {type(exc).__name__}: {exc}") from None
            _grade_wmma(c, a, b, None)
        return where + f"; correct on the GPU for {len(cases)} shapes within the FP16-input, FP32-accumulate tolerance."
    try:
        results = _wmma_on_host(source, cases)
    except HostUnavailable as exc:
        return where + f". The CPU stand-in did not run it ({str(exc).splitlines()[0]}); a GPU run will check its values."
    except Failed:
        raise
    except LabkitError as exc:
        from .causes import axis_cause_in  # a race of warps that never read an axis of the launch

        said = str(exc).split("\n")[0]
        raise Failed(said, cause=(axis_cause_in(source, said) if "race" in said else None) or exc.fix) from None
    for (a, b), (c, outside) in zip(cases, results):
        try:
            _grade_wmma(c, a, b, outside)
        except Failed as exc:  # an axis the launch has that the source never reads (row and column mixed up)
            from labkit.gpu import tensorcores as tc

            from .causes import axis_cause

            axis = axis_cause(source, *tc.wmma_launch(a.shape[0], b.shape[1]))
            raise Failed(str(exc), cause=axis or exc.cause) from None
    _wmma_past_16_bits(source)
    return (
        where + f"; its values are right on the CPU stand-in for {len(cases)} shapes (K of up to 7 tiles, some warps "
        "with no tile) within the FP16-input, FP32-accumulate tolerance, no writes outside C, and for C of more than "
        "65,536 tiles of rows and of columns (the first and last blocks only). A GPU run checks it on Tensor Cores."
    )


def _wmma_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Random A (M×K) and B (K×N) for fixed shapes and one drawn shape: K of 1 to 7 tiles, M and N not square."""
    r = rng()
    shapes = [(16, 16, 16), (32, 48, 80), (80, 16, 48), (48, 112, 96)]
    shapes.append((16 * int(r.integers(1, 9)), 16 * int(r.integers(1, 8)), 16 * int(r.integers(5, 8))))
    return [(r.uniform(-1, 1, (M, K)), r.uniform(-1, 1, (K, N))) for M, N, K in shapes]


WMMA_WRAPPED_CAUSE = (
    "a tile index kept in 16 bits (unsigned short, short) wraps back to 0 past 65,535 tiles, so the last blocks "
    "compute and store the first tiles again: keep tile_row and tile_col in an int."
)


def _wmma_past_16_bits(source: str) -> None:
    """Sim mode: C with more than 65,536 tiles of 16 rows, then of 16 columns (a 16-bit tile index wraps there). The
    stand-in runs only the first block and the last two along that axis (``run_on_host_batch(blocks=...)``): their
    tiles of C must be right and every other element of C stay unwritten (NaN). A and B are zero outside what those
    blocks read; C alone is 64 MB per case, so the two cost about 1.7 s of CPU time (most of it moving the arrays)."""
    from labkit.cuda.cpp import run_on_host_batch
    from labkit.gpu import tensorcores as tc

    r, K = rng(), 16
    launches, chosen, kept = [], [], []
    for axis in (0, 1):  # 0: more than 65,536 strips of 16 rows; 1: of 16 columns
        tiles = 65_536 + int(r.integers(1, 64))
        M, N = (16 * tiles, 16) if axis == 0 else (16, 16 * tiles)
        grid, block = tc.wmma_launch(M, N)
        last = grid[1] if axis == 0 else grid[0]
        picks = [(0, 0, 0)] + [(0, k, 0) if axis == 0 else (k, 0, 0) for k in (last - 2, last - 1)]
        per = 16 * block[1] if axis == 0 else 16  # rows (or columns) of C per block
        owned = np.zeros(M if axis == 0 else N, dtype=bool)
        for p in picks:
            k = p[1] if axis == 0 else p[0]
            owned[k * per : (k + 1) * per] = True
        a, b = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
        if axis == 0:
            a[owned] = r.uniform(-1, 1, (int(owned.sum()), K))
            b[...] = r.uniform(-1, 1, (K, N))
        else:
            a[...] = r.uniform(-1, 1, (M, K))
            b[:, owned] = r.uniform(-1, 1, (K, int(owned.sum())))
        C = np.full((M, N), np.nan, np.float32)
        launches.append((grid, block, (a, b, C, np.int32(M), np.int32(N), np.int32(K))))
        chosen.append(picks)
        kept.append((axis, a, b, C, owned))
    # (a wall-time limit of its own: these cases run after the others passed, and moving their arrays takes a few
    # seconds of wall time on a loaded machine; a kernel that hangs has already failed the smaller cases)
    report = run_on_host_batch(source, "wmma_gemm", launches, guard=64 * 16 * 16 + 256, blocks=chosen, timeout_s=120)
    for (axis, a, b, C, owned), outside in zip(kept, report):
        M, N = C.shape
        label = f"{M}×{K} @ {K}×{N}, only blocks {', '.join(str(p[:2]) for p in chosen[axis])} run"
        rest = C[~owned] if axis == 0 else C[:, ~owned]
        if not np.isnan(rest).all():
            at = np.argwhere(~np.isnan(C) & (~owned[:, None] if axis == 0 else ~owned[None, :]))[0]
            raise Failed(
                f"{label}: C[{at[0]}, {at[1]}] was written, outside the tiles those blocks own.", cause=WMMA_WRAPPED_CAUSE
            )
        c_own = C[owned] if axis == 0 else C[:, owned]
        a_own = a[owned] if axis == 0 else a
        b_own = b if axis == 0 else b[:, owned]
        try:
            _grade_wmma(c_own.astype(np.float64), a_own.astype(np.float64), b_own.astype(np.float64), outside)
        except Failed as exc:
            raise Failed(f"{label}: {exc}", cause=WMMA_WRAPPED_CAUSE if np.isnan(c_own).any() else exc.cause) from None


def _wmma_on_host(source: str, cases: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, str | None]]:
    """Run the kernel on the CPU stand-in, one launch per case (labkit's launch: blocks of 32×4, one warp per tile)."""
    from labkit.cuda.cpp import run_on_host_batch
    from labkit.gpu import tensorcores as tc

    from .slips import input_written

    launches, outs, given = [], [], []
    for a, b in cases:
        M, K, N = a.shape[0], a.shape[1], b.shape[1]
        C = np.full((M, N), np.nan, np.float32)
        grid, block = tc.wmma_launch(M, N)
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        launches.append((grid, block, (a16, b16, C, np.int32(M), np.int32(N), np.int32(K))))
        outs.append(C)
        given.append((a16, b16))
    # guard zones wide enough for every warp of the last block row to load and store one tile past the end
    guard = 64 * max(max(a.shape[0], a.shape[1], b.shape[1]) for a, b in cases) + 256
    report = run_on_host_batch(source, "wmma_gemm", launches, guard=guard)
    for (a, b), (a16, b16) in zip(cases, given):
        for name, before, after in (("A", a.astype(np.float16), a16), ("B", b.astype(np.float16), b16)):
            written = input_written(name, before, after, who="your kernel")
            if written:
                raise Failed(
                    f"{a.shape[0]}×{a.shape[1]} @ {b.shape[0]}×{b.shape[1]}: {written}.",
                    cause=f"{name} is `const half*`: load fragments from it, store only into C.",
                )
    return [(C.astype(np.float64), outside) for C, outside in zip(outs, report)]


def _grade_wmma(c: np.ndarray, a: np.ndarray, b: np.ndarray, outside: str | None) -> None:
    """Raise :class:`Failed` unless ``c`` is ``a @ b`` within the FP16 tolerance; the cause is read from the values."""
    from labkit.gpu import tensorcores as tc

    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    label = f"{M}×{K} @ {K}×{N}"
    if outside:
        where = outside.replace("wmma_gemm wrote outside array argument 2", "the kernel wrote outside C")
        raise Failed(
            f"{label}: {where} (C is M×N = {M}×{N}).",
            cause="a warp whose tile lies past the end of C must leave before any load or store "
            "(`if (tile_row * 16 >= M || tile_col * 16 >= N) return;`), and the store goes to "
            "C + tile_row*16*N + tile_col*16 with leading dimension N.",
        )
    grade = tc.wmma_error(c, a, b)
    if grade.unwritten:
        raise Failed(
            f"{label}: {grade.unwritten} of {M * N} results were never written.",
            cause="the grid covers every 16×16 tile; check the pointer offsets of the store.",
        )
    if grade.ok:
        return
    i, j = grade.first_bad or (0, 0)
    ref = (a @ b)[i, j]
    raise Failed(
        f"{label}: C[{i},{j}] = {float(c[i, j]):.6g}, expected {float(ref):.6g} (beyond the FP16 tolerance).",
        cause=_wmma_cause(c, a, b),
    )


def _wmma_cause(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> str:
    """Which plausible mistake the wrong C matches: a re-zeroed accumulator, a column-major store, a K step of 32."""
    from labkit.numerics import precision

    a16, b16 = a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64)
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    bound = 2 * precision.gemm_tolerance(a, b, "fp16", "fp32")
    ref = a16 @ b16

    def matches(candidate: np.ndarray) -> bool:
        return bool(np.all(np.abs(c - candidate) <= bound))

    if K > 16 and matches(a16[:, K - 16 :] @ b16[K - 16 :, :]):
        return (
            "C holds only the last 16-wide slice of K: the accumulator is zeroed inside the loop over k. Call "
            "wmma::fill_fragment(acc, 0.0f) once, before the loop."
        )
    tiles_t = ref.copy()
    for r0 in range(0, M, 16):
        for c0 in range(0, N, 16):
            tiles_t[r0 : r0 + 16, c0 : c0 + 16] = ref[r0 : r0 + 16, c0 : c0 + 16].T
    if matches(tiles_t):
        return "each 16×16 tile of C is transposed: C is row-major, so store with wmma::mem_row_major (leading dimension N)."
    if K > 16 and matches(sum(a16[:, k : k + 16] @ b16[k : k + 16, :] for k in range(0, K, 32))):
        return "only every other 16-wide slice of K is multiplied: the loop over k must step by 16, the fragments' K."
    return (
        "check the offsets: A's block at tile_row*16*K + k (leading dimension K), B's at k*N + tile_col*16 (leading "
        "dimension N), the loop over k in steps of 16 from 0 to K, and one fill_fragment before it."
    )


# --------------------------------------------------------------------------------------------- 06.loss-scale


def reference_update_scale(scale: float, found_inf: bool, good_steps: int, growth_interval: int = 50) -> tuple[float, int, bool]:
    """Dynamic loss scaling: ``(new_scale, new_good_steps, apply_step)``.

    Infinite or NaN gradients: halve the scale, restart the count, skip the step. Otherwise apply the step and
    count it; after ``growth_interval`` good steps in a row, double the scale and restart the count.
    """
    if found_inf:
        return scale / 2, 0, False
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True


def _loss_scale_cases() -> list[tuple[float, bool, int, int]]:
    """The fixed cases that defeat the shortcuts (in ``labkit/data/exercises.yml``: scales 1, 3 and 0.5, where integer
    halving differs; good_steps 0 and 1; intervals 1 and 2; the same good_steps with other scales and answers; the same
    call twice), then fresh ones."""
    r = rng()
    fixed = [tuple(case) for case in exercise_data("06.loss-scale")["cases"]]
    cases = []
    for _ in range(3):  # fresh scales and intervals: an overflow, a good step, the step that reaches the interval, ...
        interval = int(r.integers(2, 2001))
        scale = float(2.0 ** int(r.integers(-4, 25)))
        cases += [
            (scale, True, int(r.integers(0, interval)), interval),
            (scale, False, int(r.integers(0, interval - 1)), interval),
            (scale, False, interval - 1, interval),
            (scale, False, 0, interval),
            (scale, True, interval - 1, interval),
        ]
    order = r.permutation(len(cases))
    return fixed + [cases[int(k)] for k in order]


def _loss_scale_cause(
    scale: float, inf: bool, good: int, interval: int, got: tuple[float, int, bool], want: tuple[float, int, bool]
) -> str:
    """Name what differs: the scale, the count or the decision, for this kind of step."""
    s, g, apply = got
    ws, wg, wapply = want
    if inf:
        if apply:
            return "after an overflow the gradients hold inf or NaN: skip the step (apply_step False)."
        if s == scale:
            return "after an overflow the scale was too big: halve it (scale / 2)."
        if s == scale * 2:
            return "an overflow means the scale was too big: halve it, don't double it."
        if g != 0:
            return "after an overflow restart the count of good steps at 0."
        return "after an overflow: halve the scale, restart the count at 0 and skip the step."
    if not apply:
        return "finite gradients: apply the step (apply_step True)."
    if good + 1 >= interval:
        if s == scale and g == good + 1:
            return (
                f"this good step is the {interval}th in a row (good_steps + 1 = growth_interval): double the scale "
                "now and restart the count (compare good_steps + 1 with growth_interval, `>=`, not good_steps)."
            )
        if s == ws and g != 0:
            return "after doubling the scale, restart the count of good steps at 0."
        return "when the count reaches growth_interval: double the scale, restart the count at 0, apply the step."
    if s != scale:
        return (
            f"only {good + 1} good steps in a row, fewer than growth_interval = {interval}: keep the scale."
            if s == scale * 2
            else "a good step before the interval is reached leaves the scale as it is."
        )
    if g == good:
        return "count this good step: new_good_steps = good_steps + 1."
    return "a good step adds one to the count of good steps and keeps the scale."


@exercise("06.loss-scale", kind="code", reference=lambda: reference_update_scale)
def loss_scale(fn: Callable[..., tuple[float, int, bool]]) -> str:
    """Grade ``fn(scale, found_inf, good_steps, growth_interval) -> (new_scale, new_good_steps, apply_step)``."""
    need_function(fn)
    cases = _loss_scale_cases()
    seen: list[tuple[tuple[float, bool, int, int], tuple[float, int, bool]]] = []
    for scale, inf, good, interval in cases:
        want = reference_update_scale(scale, inf, good, interval)
        call = f"update({scale:g}, found_inf={inf}, good_steps={good}, growth_interval={interval})"
        got = call_answer(fn, scale, inf, good, interval, what=call)
        if got is None:
            raise Unsolved("your function returns None; return (new_scale, new_good_steps, apply_step).")
        try:
            s, g, apply = got
        except (TypeError, ValueError):
            raise Failed(f"expected a tuple (new_scale, new_good_steps, apply_step), got {got!r}.") from None
        s = number(s, "new_scale")
        if inf and s in (scale // 2, float(int(scale / 2))) and s != scale / 2:
            raise Failed(
                f"{call} gave new_scale {s:g}, expected {scale / 2:g}.",
                cause="integer halving: `scale // 2` or `int(scale / 2)` drops the fraction (1 → 0, 3 → 1, "
                "0.5 → 0). Halve with `scale / 2`.",
            )
        s, g = number(s, "new_scale", positive=True), number(g, "new_good_steps")
        if g != int(g):
            raise Failed(f"new_good_steps is {g:g}: it counts steps, a whole number.")
        if not isinstance(apply, (bool, np.bool_)):
            raise Failed(f"apply_step is {apply!r}; it should be True or False.")
        mine = (s, int(g), bool(apply))
        if mine != (float(want[0]), want[1], want[2]):
            again = next((a for a, r in seen if a[2] == good and a != (scale, inf, good, interval) and r == mine), None)
            cause = (
                f"it returned exactly what it returned for the earlier call {again} with the same good_steps: "
                "compute from every argument on every call (a result remembered by step count is wrong for other "
                "scales and flags)."
                if again
                else _loss_scale_cause(scale, inf, good, interval, mine, want)
            )
            raise Failed(f"{call} gave {got!r}, expected {want!r}.", cause=cause)
        seen.append(((scale, inf, good, interval), mine))
    return (
        "every case behaves like dynamic loss scaling (halve and skip on overflow, double after a run of good steps), "
        "for fresh scales and growth intervals."
    )


# --------------------------------------------------------------------------------------------- 06.v100-fma


def _reference_v100_fma() -> float:
    from labkit.gpu.tensorcores import dissect_tensor_peak

    return dissect_tensor_peak("V100", "fp16").fma_per_tensor_core_per_clock


@exercise("06.v100-fma", kind="numeric", reference=_reference_v100_fma)
def v100_fma(value: float) -> str:
    """Grade the number of FMAs one V100 Tensor Core does per clock, as implied by the datasheet figures."""
    from labkit.gpu.tensorcores import dissect_tensor_peak

    v = number(value, "the FMAs per Tensor Core per clock")
    d = dissect_tensor_peak("V100", "fp16")
    want = d.fma_per_tensor_core_per_clock
    judge(
        v,
        want,
        "FMAs per Tensor Core per clock",
        "",
        rel=V100_FMA_REL,
        slips=merge_slips(_v100_fma_slips(), V100_FMA_REL),
        unit_factors=True,
        otherwise="recheck the formula: peak = SMs × Tensor Cores per SM × FMA per clock × 2 × clock.",
    )
    side = round(round(want) ** (1 / 3))
    return (
        f"{v:.1f} FMAs per Tensor Core per clock: with {d.sm_count} SMs × {d.tensor_cores_per_sm} Tensor Cores that gives "
        f"the {d.peak_tflops:g} TFLOP/s — about {round(want)} = {side}×{side}×{side}, a small matrix multiply-add each clock."
    )


V100_FMA_REL = 0.03  # 64 (4×4×4) passes for 63.7; the nearest slip is a factor of 2 away


def _v100_fma_slips() -> dict[str, float]:
    """Plausible wrong answers for 06.v100-fma, each with its cause."""
    from .. import hw

    want = _reference_v100_fma()
    v = hw.gpu("V100")
    return {
        "one FMA is two floating-point operations (a multiply and an add): divide by 2.": 2 * want,
        "you divided by 2 FLOP per FMA twice, or used 2 FLOP per core in the clock but not here.": want / 2,
        "divide by the Tensor Cores per SM as well: the figure is per Tensor Core, not per SM.": want
        * v.tensor_cores_per_sm.value,
        "you divided by the FP32 cores per SM (64), not the Tensor Cores per SM (8).": want
        * v.tensor_cores_per_sm.value
        / v.fp32_cores_per_sm.value,
        "units: TFLOP/s is 10^12 FLOP/s and the clock in Hz (not GHz).": want * 1e9,
        "units: the clock in Hz, not GHz, and TFLOP/s is 10^12 FLOP/s.": want * 1e-9,
        "units: TFLOP/s is 10^12 FLOP/s: multiply the peak by 1e12 as well as the FP32 peak.": want * 1e-12,
    }


# --------------------------------------------------------------------------------------------- 06.gemm-predict
GEMM_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _reference_gemm_predict() -> Callable[[int, int, int, str, str], float]:
    def predict_gemm(m: int, n: int, k: int, precision: str, gpu: str) -> float:
        from labkit import hw

        g = hw.gpu(gpu)
        size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]
        flops = 2 * m * n * k
        traffic = size * (m * k + k * n + m * n)  # A and B read once, C written once
        seconds = max(flops / (g.peak(precision).value * 1e12), traffic / (g.memory_bandwidth.value * 1e9))
        return flops / seconds / 1e12

    return predict_gemm


def _gemm_slips(m: int, n: int, k: int, precision: str, gpu: str, want: float) -> dict[str, float]:
    from .. import hw

    g = hw.gpu(gpu)
    peak, bw, size = g.peak(precision).value, g.memory_bandwidth.value, GEMM_BYTES[precision]
    flops = 2 * m * n * k

    def rate(f: float, traffic: float, p: float = peak, b: float = bw) -> float:
        return f / max(f / (p * 1e12), traffic / (b * 1e9)) / 1e12

    slips = {
        (
            "the peak alone: a GEMM this small does too few FLOPs per byte it moves (2 s³ over 3 s² elements) to keep "
            "the Tensor Cores busy; take the slower of compute and memory (the roofline)"
            if min(m, n, k) > max(m, n, k) // 2
            else "the peak alone: a GEMM this thin moves more bytes than the Tensor Cores can use; take the slower of "
            "compute and memory (the roofline)"
        ): peak,
        "a multiply-add is 2 FLOPs: FLOPs = 2 m n k": rate(flops / 2, size * (m * k + k * n + m * n)),
        "the square formula 3 n² for the traffic: here A is m×k, B k×n, C m×n": rate(flops, size * 3 * max(m, n, k) ** 2),
        "bytes per element: the traffic counts bytes, not elements": rate(flops, m * k + k * n + m * n),
        "only the inputs: C (m×n) is written too": rate(flops, size * (m * k + k * n)),
    }
    wrong_sizes = {
        "tf32": (
            2,
            "TF32 values are stored in 4 bytes (FP32's layout); the Tensor Cores read only 19 of "
            "their bits, but memory moves all 32",
        ),
        "fp8": (2, "an FP8 element is 1 byte"),
        "fp16": (4, "an FP16/BF16 element is 2 bytes"),
        "bf16": (4, "an FP16/BF16 element is 2 bytes"),
        "fp64": (4, "an FP64 element is 8 bytes"),
    }
    if precision in wrong_sizes:
        other, why = wrong_sizes[precision]
        slips[why] = rate(flops, other * (m * k + k * n + m * n))
    if size < 4:  # C kept in FP32 while A and B are 16- or 8-bit: the model counts C in the input precision
        slips[
            f"C counted as FP32 (4 bytes): this model writes C in the input precision ({size} byte(s) per element), "
            "as the statement's traffic formula does"
        ] = rate(flops, size * (m * k + k * n) + 4 * m * n)
    if g.has(precision):
        try:
            slips["the sparse peak: a dense GEMM gets the dense rate"] = rate(
                flops, size * (m * k + k * n + m * n), p=g.peak(precision, sparse=True).value
            )
        except Exception:  # noqa: BLE001 - no sparse rate for this precision
            pass
    return merge_slips({c: v for c, v in slips.items() if abs(v - want) > 0.02 * want}, 0.005)


@exercise("06.gemm-predict", kind="code", reference=_reference_gemm_predict)
def gemm_predict(fn: Callable[..., float]) -> str:
    """Grade ``predict_gemm(m, n, k, precision, gpu) -> TFLOP/s``: the roofline bound for C = A @ B (A m×k, B k×n) from
    labkit.hw's dense peak and memory bandwidth, on fresh shapes from square to matrix-vector, several precisions and
    GPUs. On a GPU it also measures CuPy GEMMs of two shapes and requires the prediction to bound them."""
    from labkit.gpu.cupylab import cupy_or_none

    from .streams import call_learner

    need_function(fn, "a function predict_gemm(m, n, k, precision, gpu)")
    gen = rng()
    combos = [
        ("V100", "fp16"),
        ("A100", "bf16"),
        ("A100", "tf32"),
        ("A100", "fp64"),
        ("H100", "fp8"),
        ("H200", "bf16"),
        ("H200", "fp32"),
        ("B200", "fp8"),  # Blackwell: the DGX B200's GPU, where FP8's ridge point sits furthest right
    ]
    cases = []
    # every pair on every run (each precision's element size, not a random few), in shapes where each of A, B and C
    # dominates the traffic: thin n (A's bytes), thin m (B's), short k (C's)
    from .. import hw

    for gpu, p in combos:
        big = int(gen.integers(2, 9)) * 1024 + int(gen.integers(1, 512))
        cases.append((big, big + int(gen.integers(1, 300)), big - int(gen.integers(1, 300)), p, gpu))  # near square
        cases.append((int(gen.integers(4096, 16384)), int(gen.integers(1, 9)), int(gen.integers(4096, 16384)), p, gpu))  # thin
        cases.append((int(gen.integers(1, 9)), int(gen.integers(4096, 16384)), int(gen.integers(4096, 16384)), p, gpu))  # thin m
        cases.append((int(gen.integers(4096, 16384)), int(gen.integers(4096, 16384)), int(gen.integers(1, 9)), p, gpu))  # short k
        # near square and memory-bound: 2 s³ FLOPs over 3 s² elements stay below the ridge point while
        # s < 1.5 × (bytes per element) × (peak / bandwidth); drawn at 30-80% of that size
        g = hw.gpu(gpu)
        edge = 1.5 * GEMM_BYTES[p] * g.peak(p).value * 1e3 / g.memory_bandwidth.value
        small = max(8, int(edge * gen.uniform(0.3, 0.8)))
        cases.append((small, small + int(gen.integers(1, 4)), small - int(gen.integers(1, 4)), p, gpu))
    ref = _reference_gemm_predict()
    for m, n, k, p, gpu in cases:
        call = f"predict_gemm({m}, {n}, {k}, {p!r}, {gpu!r})"
        got = call_learner(fn, m, n, k, p, gpu, what=call)
        if got is None or got is Ellipsis:
            raise Unsolved("predict_gemm returns nothing yet.")
        value = number(got, f"{call} (TFLOP/s)", positive=True)
        want = ref(m, n, k, p, gpu)
        judge_expected(
            value,
            want,
            call,
            "TFLOP/s",
            expected=f"Expected {want:,.4g} TFLOP/s.",
            rel=0.005,
            slips=_gemm_slips(m, n, k, p, gpu, want),
            unit_factors=True,
            otherwise="the roofline: FLOPs / max(FLOPs / peak, bytes / bandwidth), in TFLOP/s.",
        )
    extra = ""
    cp = cupy_or_none()
    if cp is not None:
        extra = _measure_gemm_gpu(cp, fn)
    return (
        f"right on {len(cases)} fresh shapes, near-square ones both sides of the ridge point (large: compute-bound; "
        "small: memory-bound), thin ones and ones with a short k (memory-bound), for each of "
        f"{len(combos)} pairs of precision and GPU on every run (a model from labkit.hw).{extra}"
    )


def _measure_gemm_gpu(cp: object, fn: Callable[..., float]) -> str:
    """On a GPU: time CuPy FP16 GEMMs of a square and a thin shape and require the learner's prediction to bound them."""
    from labkit.gpu import bench

    from .streams import call_learner

    gpu, compute, memory, scaled = bench.device_hw()  # a MIG slice: its parent GPU, bounds scaled to its share
    if gpu is None:
        return " (No labkit.hw record for this GPU, so no measurement was compared.)"
    # The learner predicts for the whole GPU; a slice with fractions c (compute) and m (memory) takes at least
    # max(F / (P c), B / (W m)) >= max(F / P, B / W) / max(c, m), so max(c, m) x the prediction bounds it.
    share = max(compute, memory)
    lines = []
    for m, n, k in ((8192, 8192, 8192), (8192, 16, 8192)):
        a = cp.random.standard_normal((m, k), dtype=cp.float32).astype(cp.float16)  # type: ignore[attr-defined]
        b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)  # type: ignore[attr-defined]
        t = bench.measure(cp.matmul, a, b, name=f"fp16 gemm {m}x{n}x{k}", flops=2.0 * m * n * k, warmup=3, repeat=10)  # type: ignore[attr-defined]
        predicted = share * number(call_learner(fn, m, n, k, "fp16", gpu.name, what="predict_gemm on this GPU"), "prediction")
        if t.tflops > 1.1 * predicted:
            raise Failed(
                f"on the GPU, {m}×{n}×{k} fp16: measured {t.tflops:,.1f} TFLOP/s, above your bound of "
                f"{predicted:,.1f}: a roofline is an upper bound.",
                cause="check the FLOPs and bytes you count.",
            )
        lines.append(f"{m}×{n}×{k}: measured {t.tflops:,.1f} of predicted {predicted:,.1f} TFLOP/s")
    return " Measured on the GPU (fp16): " + "; ".join(lines) + (f" (predictions{scaled})" if scaled else "") + "."
