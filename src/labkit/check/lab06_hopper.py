"""Checks for lab 06's Hopper and Blackwell sections: what WMMA without fragment reuse needs from shared memory (bytes per
clock that WMMA and wgmma need), MXFP8 block quantization, and FP8 GEMM accumulation with promotion to FP32.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .answers import judge, number
from .core import Failed, Unsolved, exercise
from .harness import rng
from .numeric import array_answer, grade_block_quantized, judge_expected, need_function

# --------------------------------------------------------------------------------------------- 06.wmma-peak

WMMA_SHAPE = (16, 16, 16)  # one wmma.mma.sync per warp
WGMMA_SHAPE = (64, 256, 16)  # one wgmma.mma_async per warpgroup, A and B from shared memory
PEAK_GPU = "H200"
_PEAK_REL = 0.01


def _reference_wmma_peak() -> tuple[float, float]:
    from labkit.gpu.tensorcores import smem_operand_bytes_per_clock

    return (smem_operand_bytes_per_clock(PEAK_GPU, *WMMA_SHAPE), smem_operand_bytes_per_clock(PEAK_GPU, *WGMMA_SHAPE))


def _peak_slips(shape: tuple[int, int, int]) -> dict[str, float]:
    """Plausible wrong answers for one shape, each with its cause."""
    from labkit.gpu.tensorcores import smem_operand_bytes_per_clock

    from .. import hw

    g = hw.gpu(PEAK_GPU)
    m, n, k = shape
    want = smem_operand_bytes_per_clock(PEAK_GPU, m, n, k)
    flop_clock = g.tensor_cores_per_sm.value * g.tensor_core_fma_per_clock.value * 2  # type: ignore[union-attr]
    slips = {
        "half the answer: a multiply-add is 2 FLOPs, and the operands are FP16, 2 bytes each (not elements).": want / 2,
        "per Tensor Core: an SM has 4 of them (tensor_cores_per_sm), all fed by the SM's one shared memory.": want
        / g.tensor_cores_per_sm.value,  # type: ignore[union-attr]
        "the operands are FP16 (2 bytes), not FP32 (4): only the accumulator is FP32.": want * 2,
        "only the inputs A and B are read from shared memory; the accumulator C stays in registers.": flop_clock
        * ((m * k + k * n) * 2 + 2 * m * n * 4)
        / (2 * m * n * k),
        "you counted only B; in this exercise A comes from shared memory too.": flop_clock * k * n * 2 / (2 * m * n * k),
        "bytes per clock per SM, not a fraction of the peak: divide the FLOPs per clock by the FLOPs per byte.": g.shared_memory_bandwidth_per_sm.value
        / want,  # type: ignore[union-attr]
    }
    return {c: v for c, v in slips.items() if abs(v - want) > 0.05 * want}


@exercise("06.wmma-peak", kind="numeric", reference=_reference_wmma_peak)
def wmma_peak(wmma_bytes_per_clock: Any, wgmma_bytes_per_clock: Any) -> str:
    """Grade the shared-memory bytes per clock per SM that WMMA (16×16×16 per warp) and wgmma (64×256×16 per
    warpgroup) need to keep the H200's Tensor Cores at their dense FP16 peak, each instruction reading A and B from
    shared memory once."""
    from .. import hw

    if wmma_bytes_per_clock is Ellipsis or wgmma_bytes_per_clock is Ellipsis:
        raise Unsolved("fill in both numbers.")
    wmma_want, wgmma_want = _reference_wmma_peak()
    got_wmma = number(wmma_bytes_per_clock, "wmma_bytes_per_clock", positive=True)
    got_wgmma = number(wgmma_bytes_per_clock, "wgmma_bytes_per_clock", positive=True)
    judge(
        got_wmma,
        wmma_want,
        "WMMA (16×16×16 per warp)",
        "B/clock",
        rel=_PEAK_REL,
        slips=_peak_slips(WMMA_SHAPE),
        otherwise="FLOPs per clock per SM ÷ (2·m·n·k FLOPs ÷ (m·k + k·n)·2 bytes), with the H200's figures.",
    )
    wgmma_slips = _peak_slips(WGMMA_SHAPE)
    wgmma_slips["that is the WMMA shape's figure; wgmma does 64×256×16 per instruction."] = wmma_want
    judge(
        got_wgmma,
        wgmma_want,
        "wgmma (64×256×16 per warpgroup)",
        "B/clock",
        rel=_PEAK_REL,
        slips=wgmma_slips,
        otherwise="the same formula with m, n, k = 64, 256, 16.",
    )
    have = hw.gpu(PEAK_GPU).shared_memory_bandwidth_per_sm.value  # type: ignore[union-attr]
    return (
        f"WMMA needs {wmma_want:g} B/clock per SM, wgmma {wgmma_want:g}; shared memory gives {have:g} "
        f"(32 banks × 4 B). A WMMA kernel that reloads its fragments for every product reaches at most "
        f"{have / wmma_want:.0%} of the peak (a model; reusing fragments in registers lowers the need); "
        f"wgmma reads each operand byte for {wmma_want / wgmma_want:.1f}× more FLOPs and fits."
    )


# --------------------------------------------------------------------------------------------- 06.mx-quantize

MX_BLOCK = 32


def _reference_mx_quantize() -> Callable[[np.ndarray], np.ndarray]:
    from labkit.numerics import scaling

    return lambda x: scaling.quantize_blocks(x, "mxfp8_e4m3").values


def _mx_cases() -> list[np.ndarray]:
    """Fresh inputs: rows of very different magnitudes, a zero block, an exact power of two as a block's largest
    value, blocks whose largest value needs saturation (x / scale above 448), negative values, several shapes."""
    gen = rng()
    cases = []
    for rows, blocks in ((2, 1), (int(gen.integers(3, 7)), int(gen.integers(2, 4))), (int(gen.integers(8, 17)), 8)):
        x = gen.standard_normal((rows, blocks * MX_BLOCK)) * 2.0 ** gen.uniform(-20, 12, size=(rows, 1))
        cases.append(x)
    x = gen.standard_normal((4, 4 * MX_BLOCK))
    x[0, :MX_BLOCK] = 0.0  # an all-zero block
    x[1, 3] = 2.0 ** int(gen.integers(-6, 6))  # the block's largest value, an exact power of two
    x[1, :MX_BLOCK][np.abs(x[1, :MX_BLOCK]) >= abs(x[1, 3])] = 0.5 * x[1, 3]
    for r in (2, 3):  # largest value with a mantissa near 2: it lands between 464 and 512 and must saturate at 448
        e = int(gen.integers(-10, 10))
        x[r, :MX_BLOCK] = gen.uniform(-1.5, 1.5, MX_BLOCK) * 2.0**e
        x[r, 5] = -(1.9 + 0.09 * gen.random()) * 2.0**e
    cases.insert(0, x)  # first: its power-of-two maximum tells ceil(log2) from an offset of 7, and its zero block shows 0/0
    return cases


def _mx_slips(x: np.ndarray) -> dict[str, np.ndarray]:
    """Outputs of plausible wrong quantizers for x, each with its cause."""
    from labkit.numerics import precision as P
    from labkit.numerics import scaling

    blocks = x.reshape(*x.shape[:-1], -1, MX_BLOCK)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    safe = np.where(amax > 0, amax, 1.0)

    def elements(scale: np.ndarray) -> np.ndarray:
        q = P.round_to(blocks / scale, "fp8_e4m3", on_range="ignore")
        return (q * scale).reshape(x.shape)

    out: dict[str, np.ndarray] = {
        "one scale for the whole tensor: MX gives every block of 32 its own scale.": scaling.quantize_per_tensor(
            x, "fp8_e4m3"
        ).values,
        "the scale amax / 448 is not a power of two: an E8M0 scale is 2**(floor(log2(amax)) − 8).": elements(safe / 448.0),
        "that is NVIDIA's round-up rule (Transformer Engine's MXFP8 recipe, 2**ceil(log2(amax / 448)), which clamps "
        "nothing); this exercise asks for OCP MX v1.0's floor rule, 2**(floor(log2(amax)) − 8), with values above 448 "
        "saturating. The lab compares the two after the exercise.": scaling.quantize_blocks(
            x, "mxfp8_e4m3", rule="round_up"
        ).values,
        "ceil(log2(amax)) − 8 is neither rule: OCP's scale is 2**(floor(log2(amax)) − 8); NVIDIA's round-up rule "
        "would be 2**ceil(log2(amax / 448)).": elements(2.0 ** (np.ceil(np.log2(safe)) - 8)),
        "round(log2(amax)): the OCP MX scale uses floor(log2(amax)) − 8.": elements(2.0 ** (np.round(np.log2(safe)) - 8)),
        "emax of E4M3 is 8 (448 = 1.75 × 2^8): subtract 8 from floor(log2(amax)), not 7 or 9.": elements(
            2.0 ** (np.floor(np.log2(safe)) - 7)
        ),
        "blocks of 16: MX blocks are 32 elements long (NVFP4's are 16).": scaling.quantize_blocks(x, "mxfp8_e4m3").values
        if x.shape[-1] % 16
        else _blocks16(x),
    }
    rows = np.abs(x).max(axis=-1, keepdims=True)
    row_scale = 2.0 ** (np.floor(np.log2(np.where(rows > 0, rows, 1.0))) - 8)
    out["one scale per row: MX gives every block of 32 consecutive elements its own scale."] = (
        P.round_to(x / row_scale, "fp8_e4m3", on_range="ignore") * row_scale
    )
    e5 = 2.0 ** (np.floor(np.log2(safe)) - 15)
    out["the elements are E5M2: MXFP8 here is E4M3 (P.round_to(..., 'fp8_e4m3')), whose largest value is 448 = 1.75 × 2^8."] = (
        P.round_to(blocks / e5, "fp8_e5m2", on_range="ignore") * e5
    ).reshape(x.shape)
    if x.ndim == 2 and x.shape[0] % MX_BLOCK == 0:
        out["blocks run along the last axis (each row's consecutive elements), not down the columns."] = scaling.quantize_blocks(
            x, "mxfp8_e4m3", axis=0
        ).values
    return out


def _blocks16(x: np.ndarray) -> np.ndarray:
    from labkit.numerics import precision as P

    blocks = x.reshape(*x.shape[:-1], -1, 16)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    scale = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return (P.round_to(blocks / scale, "fp8_e4m3", on_range="ignore") * scale).reshape(x.shape)


def _mx_nan_cause(x: np.ndarray, arr: np.ndarray) -> str:
    """Why the result has NaN, from the block of its first NaN: an all-zero block (0/0), or an overflow to NaN."""
    at = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
    row, b = at[0], at[1] // MX_BLOCK
    block = x[row, b * MX_BLOCK : (b + 1) * MX_BLOCK]
    if not np.any(block):
        return (
            "the NaN is in an all-zero block: its amax is 0, so log2(amax) is -inf and the scale 0 or inf, and 0 / 0 "
            "is NaN. Give such a block a scale of 1 (np.where(amax > 0, amax, 1.0) before the log2): its elements "
            "stay 0."
        )
    return (
        "E4M3 has no infinity: a value above 448 must saturate to ±448 (P.round_to(..., on_range='ignore') does; "
        "ml_dtypes' float8_e4m3fn cast turns it into NaN)."
    )


@exercise("06.mx-quantize", kind="code", reference=_reference_mx_quantize)
def mx_quantize(fn: Callable[[np.ndarray], np.ndarray]) -> str:
    """Grade ``quantize_mxfp8(x)``: ``x`` (float64, last axis a multiple of 32) stored in MXFP8 E4M3 with OCP MX
    v1.0's floor scale rule and read back, against :func:`labkit.scaling.quantize_blocks` on fresh inputs. NVIDIA's
    round-up rule gets its own cause (the statement asks for OCP's)."""
    need_function(fn, "a function quantize_mxfp8(x)")
    cases = _mx_cases()
    grade_block_quantized(
        fn,
        "quantize_mxfp8",
        "mxfp8_e4m3",
        cases,
        _mx_slips,
        _mx_nan_cause,
        "each block of 32: scale 2**(floor(log2(amax)) − 8), elements rounded "
        "to E4M3 with saturation, multiplied back by the scale.",
    )
    return (
        f"right on {len(cases)} fresh arrays: rows spanning 2^-20 to 2^12, an all-zero block, a power-of-two maximum "
        "and maxima that saturate at 448."
    )


# --------------------------------------------------------------------------------------------- 06.fp8-promotion


def _reference_promotion() -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    from labkit.numerics import precision as P

    def promoted_gemm(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
        # P.gemm keeps the promoted total in FP32 and returns it as float64: exactly representable, so back to FP32
        return P.gemm(a, b, "fp8_e4m3", accumulate="limited", promote_every=interval, on_range="ignore").astype(np.float32)

    return promoted_gemm


def _promotion_slips(a: np.ndarray, b: np.ndarray, interval: int) -> dict[str, np.ndarray]:
    from labkit.numerics import precision as P

    K = a.shape[1]

    def chunks(step: int, stop: int = K, acc: str = "limited", dtype: Any = np.float32) -> np.ndarray:
        c = np.zeros((a.shape[0], b.shape[1]), dtype=dtype)
        for k0 in range(0, stop, step):
            c += P.gemm(a[:, k0 : k0 + step], b[k0 : k0 + step], "fp8_e4m3", accumulate=acc, on_range="ignore").astype(dtype)
        return c.astype(np.float64)

    out = {
        "no promotion: one limited accumulator over all of K. Add each chunk's partial sum to an FP32 total.": P.gemm(
            a, b, "fp8_e4m3", accumulate="limited", on_range="ignore"
        ),
        "the last chunk is missing: K is not a multiple of the interval, and range(0, K, interval) covers it all.": chunks(
            interval, stop=K - K % interval
        )
        if K % interval
        else None,
        "the interval counts products (elements of K), not Tensor Core instructions of 32.": chunks(interval * 32),
        "each chunk must go through the Tensor Core's limited accumulator: P.gemm(..., accumulate='limited').": chunks(
            interval, acc="fp32"
        ),
        "the promoted total lives in FP32 registers on the CUDA cores, not in FP16.": chunks(interval, dtype=np.float16),
        "that is the exact product a @ b: the exercise models FP8 inputs (P.gemm(..., 'fp8_e4m3', ...) rounds them) "
        "and the Tensor Core's limited accumulator, chunk by chunk.": a @ b,
    }
    if interval != 128:
        out["use the interval you are given, not a fixed 128."] = chunks(128)
    return {c: v for c, v in out.items() if v is not None}


def _promotion_cases() -> list[tuple[np.ndarray, np.ndarray, int]]:
    gen = rng()
    cases = []
    # every boundary residue of K on every run: one past a multiple of the interval, one short of one, and any other
    # (a last chunk of one product, of interval - 1 products, of some); never a multiple, as the pass line says
    for interval, residue in ((64, 1), (128, 127), (256, int(gen.integers(2, 255)))):
        m, n = int(gen.integers(4, 13)), int(gen.integers(4, 13))
        K = interval * int(gen.integers(3, 9)) + residue
        cases.append((gen.uniform(0, 1, (m, K)), gen.uniform(0, 1, (K, n)), interval))
    return cases


@exercise("06.fp8-promotion", kind="code", reference=_reference_promotion)
def fp8_promotion(fn: Callable[[np.ndarray, np.ndarray, int], np.ndarray]) -> str:
    """Grade ``promoted_gemm(a, b, interval)``: an FP8 GEMM whose limited (14-bit) Tensor Core accumulator is added to
    an FP32 total every ``interval`` products, against ``P.gemm(..., accumulate="limited", promote_every=interval)``."""
    import warnings

    from labkit.numerics import precision as P

    from .streams import call_learner

    need_function(fn, "a function promoted_gemm(a, b, interval)")
    cases = _promotion_cases()
    for a, b, interval in cases:
        what = f"promoted_gemm(a {a.shape[0]}×{a.shape[1]}, b {b.shape[0]}×{b.shape[1]}, interval={interval})"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", P.PrecisionWarning)  # FP8 flushes a few tiny inputs; that is expected here
            got = call_learner(fn, a.copy(), b.copy(), interval, what=what)
            arr = array_answer(got, "promoted_gemm", what, "a matrix")
            if arr.shape != (a.shape[0], b.shape[1]):
                raise Failed(f"{what} returned shape {arr.shape}, expected {(a.shape[0], b.shape[1])}.")

            want = P.gemm(a, b, "fp8_e4m3", accumulate="limited", promote_every=interval, on_range="ignore")
            tol = 1e-6 * float(np.max(np.abs(want)))  # FP32 against FP64 totals: far below any slip's difference
            if np.all(np.abs(arr - want) <= tol):
                kind = getattr(got, "dtype", None)
                if kind != np.float32:  # right values, in the wrong precision (here FP32 and FP64 totals agree)
                    raise Failed(
                        f"{what} returned {'a ' + str(kind) + ' array' if kind is not None else type(got).__name__}"
                        ": the statement asks for the FP32 total (np.float32).",
                        cause="the promoted total lives in FP32 registers on the CUDA cores: keep it in an "
                        "array made with np.zeros(..., np.float32), add each chunk's result into it, "
                        "and return it.",
                    )
                continue
            bad = tuple(int(i) for i in np.argwhere(np.abs(arr - want) > tol)[0])
            where = f"{what}: C{list(bad)} should be {want[bad]:.7g}, yours is {arr[bad]:.7g}"
            matched = [cause for cause, slip in _promotion_slips(a, b, interval).items() if np.all(np.abs(arr - slip) <= tol)]
            if matched:  # slips with the same values here are named together
                raise Failed(where + ".", cause=" Or: ".join(matched))
            raise Failed(
                where + ".",
                cause="chunks of `interval` along K, each through P.gemm(..., accumulate='limited'), added into an FP32 total.",
            )
    return (
        f"right on {len(cases)} fresh FP8 GEMMs with intervals 64, 128 and 256 and K not a multiple of the interval "
        "(a model of the accumulator, not a GPU measurement)."
    )


# --------------------------------------------------------------------------------------------- 06.te-scale


def _reference_te_scale() -> Callable[..., float]:
    from labkit.numerics import scaling

    return lambda amax_history, fmt, margin, previous: scaling.te_scale(amax_history, fmt, margin=margin, previous=previous)


def _te_cases() -> list[tuple[list[float], str, int, float]]:
    gen = rng()
    cases = []
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        for margin, (lo, hi) in ((0, (-12, -3)), (int(gen.integers(1, 4)), (-2, 8))):  # every amax below 1, then above
            hist = (2.0 ** gen.uniform(lo, hi, size=int(gen.integers(3, 9)))).tolist()
            hist.insert(int(gen.integers(0, len(hist) - 1)), max(hist) * 4)  # the largest is not the most recent
            cases.append((hist, fmt, margin, float(gen.uniform(0.5, 2.0))))
    cases.append(([float(2.0 ** gen.uniform(-4, 4))], "fp8_e5m2", 0, 1.0))  # a history of one step is a history
    cases.append(([0.0, 0.0], "fp8_e4m3", 0, float(gen.uniform(3.0, 9.0))))  # nothing seen yet: keep the old scale
    # an overflowed step (inf, or NaN from inf - inf) anywhere but first: keep the old scale. Python's max() skips a
    # NaN that is not first (every comparison with it is False), so only np.max or an isfinite test sees it
    for bad, fmt in ((float("inf"), "fp8_e5m2"), (float("nan"), "fp8_e4m3")):
        hist = (2.0 ** gen.uniform(-3, 3, size=int(gen.integers(2, 6)))).tolist()
        hist.insert(int(gen.integers(1, len(hist) + 1)), bad)
        cases.append((hist, fmt, 0, float(gen.uniform(3.0, 9.0))))
    return cases


def _te_slips(hist: list[float], fmt: str, margin: int, previous: float) -> dict[str, float]:
    from labkit.numerics import precision as P

    fmax = P.format_info(fmt).max_normal
    amax, last = max(hist), hist[-1]
    slips = {
        "the inverse: scale = fp8_max / amax, so that x · scale fills the format's range.": amax / fmax * 2.0**margin,
        "the most recent amax only: Transformer Engine's default takes the largest of the whole history.": fmax
        / last
        / 2.0**margin,
        "the margin: divide by 2**margin as well (it leaves headroom above the history's amax).": fmax / amax,
        "multiply by 2**margin? No: divide, the margin lowers the scale.": fmax / amax * 2.0**margin,
        "E5M2 reaches 57,344 and E4M3 448: take fp8_max of the format you are given.": (57344.0 if fmax == 448.0 else 448.0)
        / amax
        / 2.0**margin,
    }
    return {c: v for c, v in slips.items() if v == v and abs(v - fmax / amax / 2.0**margin) > 1e-9 * abs(v)}


@exercise("06.te-scale", kind="code", reference=_reference_te_scale)
def te_scale(fn: Callable[..., float]) -> str:
    """Grade ``fp8_scale(amax_history, fmt, margin, previous)``: Transformer Engine's delayed-scaling rule."""
    import math

    from labkit.numerics import scaling

    from .streams import call_learner

    need_function(fn, "a function fp8_scale(amax_history, fmt, margin, previous)")
    cases = _te_cases()
    for hist, fmt, margin, previous in cases:
        call = f"fp8_scale({[float(f'{h:.4g}') for h in hist]}, {fmt!r}, margin={margin}, previous={previous:.3g})"
        got = call_learner(fn, list(hist), fmt, margin, previous, what=call)
        if got is None or got is Ellipsis:
            raise Unsolved("fp8_scale returns nothing yet.")
        want = scaling.te_scale(hist, fmt, margin=margin, previous=previous)
        if not (math.isfinite(want_amax := float(np.max(hist))) and want_amax > 0):
            value = number(got, call, finite=False)
            if value != want:
                raise Failed(
                    f"{call} should keep the previous scale {want:.4g}; you returned {value!r}.",
                    cause="an amax of 0 (nothing seen yet), inf or NaN (an overflowed step) gives no scale: keep "
                    "`previous`, as Transformer Engine does. Python's max() skips a NaN that is not first in "
                    "the list (every comparison with NaN is False): test every entry with math.isfinite, or use np.max."
                    if any(h != h for h in hist)
                    else "an amax of 0 (nothing seen yet) or inf (an overflowed step) gives no scale: keep "
                    "`previous`, as Transformer Engine does.",
                )
            continue
        value = number(got, call, positive=True)
        judge_expected(
            value,
            want,
            call,
            "",
            expected=f"Expected {want:.6g}.",
            rel=1e-6,
            slips=_te_slips(hist, fmt, margin, previous),
            otherwise="scale = fp8_max / max(history) / 2**margin.",
        )
    return (
        f"right on {len(cases)} fresh histories in E4M3 and E5M2, with margins, amaxes below and above 1, and an "
        "amax of 0, inf or NaN anywhere in the history (previous scale kept)."
    )
