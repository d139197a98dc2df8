# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 06 — Tensor Cores and mixed precision
#
# **Learning objectives**
# - Read FP32, TF32, FP16, BF16, FP8 and FP4 bit patterns: sign, exponent, mantissa, bias, subnormals.
# - Predict when a value overflows or underflows in FP16 and in BF16, and round to TF32 by hand.
# - Measure how GEMM error grows with the dot-product length K for each input precision and accumulator, and what
#   promoting the partial sums of Hopper's narrow FP8 accumulator to FP32 buys.
# - Scale FP8 per tensor as Transformer Engine does, and per block (MXFP8, MXFP4, NVFP4) as Blackwell does; quantize
#   to MXFP8 with OCP's scale rule and compare NVIDIA's round-up rule, quantize to Blackwell's NVFP4, and show why
#   block scaling keeps a GEMM's error down where one scale per tensor does not.
# - Predict a GEMM's TFLOP/s from its shape and the peak, compare Tensor Core GEMM throughput per precision with
#   the datasheet peaks (measured on a GPU), and write a WMMA kernel.
# - Read the PTX of a Hopper warpgroup GEMM tile (TMA, `wgmma.mma_async`, sm_90a) against WMMA's, and work out
#   how much shared-memory bandwidth a WMMA kernel needs, with and without reusing its fragments.
# - Train a small network in FP16 with FP32 master weights and fix vanishing gradients with loss scaling.
# - Take vendor headlines (V100's FP16 Tensor Core peak, A100's "up to 20×") apart into SMs, Tensor Cores and clocks.
#
# **Prerequisites:** [Lab 03](03-memory-hierarchy.ipynb) (memory hierarchy) and [Lab 05](05-cupy.ipynb) (CuPy, RawKernel).
# No GPU needed.
#
# **Time:** 110 minutes (teaching 40, exercises 70)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import math
import warnings

import numpy as np

from labkit import hw, precision as P, scaling as S, tensorcores as T
from labkit.widgets import precision as W

xp = labkit.xp

# %% [markdown]
# ## 1. Number formats
#
# A binary floating-point number is a sign, an exponent and a mantissa: `(-1)^s × 2^(e − bias) × 1.m`.
# The exponent's width sets the **range**, the mantissa's width the **precision** (machine epsilon is
# `2^-mantissa_bits`). Tensor Cores read narrow formats and accumulate in a wider one. Here is every format
# labkit knows, computed from its layout:

# %%
for name in P.formats():
    print(P.format_info(name).summary())

# %% [markdown]
# TF32 is not a storage type: it is FP32's 8-bit exponent with FP16's 10-bit mantissa, the format an A100 or
# H100 Tensor Core can use to multiply FP32 matrices — **only when the program allows it**: cuBLAS through its math
# mode or compute type; CuPy through `CUPY_TF32=1`; PyTorch, for matrix products, through
# `torch.backends.cuda.matmul.fp32_precision = "tf32"` or `torch.set_float32_matmul_precision("high")` (off by
# default; the older `allow_tf32` flag is being deprecated). PyTorch's **convolutions** are the exception: cuDNN uses
# TF32 for them by default (`torch.backends.cudnn.conv.fp32_precision`; PyTorch "CUDA semantics", TF32 section,
# 2.9 and later). Otherwise an FP32 product runs in FP32 on the CUDA cores. BF16 keeps FP32's range
# with a 7-bit mantissa. The two FP8 formats trade the other way: E4M3 has more precision, E5M2 more range. FP4
# E2M1 (eight magnitudes from 0 to 6, no infinity, no NaN) is the element of Blackwell's block-scaled formats
# (section 3c). The chart shows each range (light: subnormals, which fill the gap towards zero with fewer
# significant bits).

# %% tags=["nbval-ignore-output"]
W.range_chart()

# %% [markdown]
# `labkit.precision.bits` rounds a number to a format and shows its fields. Type numbers into the explorer
# below (try `0.1`, `65520`, `1e-8`, `3.0e38`, `inf`) and watch the same number in every format.

# %%
for name in ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"):
    print(P.bits(0.1, name))

# %% tags=["nbval-ignore-output"]
W.bit_explorer(0.1)

# %% [markdown]
# ### Exercise 1 — decode an FP16 bit pattern
#
# Write `decode_fp16(bits)` that takes a string of 16 characters `'0'`/`'1'` (sign, 5 exponent bits,
# 10 mantissa bits; bias 15) and returns its value as a float. Handle normal numbers, zero and subnormals
# (exponent field 0: no hidden 1, exponent `1 − 15`), infinities and NaN (exponent field all ones).
# The check tries every kind of pattern against `labkit.precision.decode`, fresh random ones included, and tells
# −0.0 (`1 00000 0000000000`) from +0.0.

# %% tags=["exercise"]
def decode_fp16(bits: str) -> float:
    # BEGIN SOLUTION
    s, e, m = int(bits[0]), int(bits[1:6], 2), int(bits[6:], 2)
    sign = -1.0 if s else 1.0
    if e == 31:
        return math.nan if m else sign * math.inf
    if e == 0:
        return sign * (m / 1024) * 2.0**-14
    return sign * (1 + m / 1024) * 2.0 ** (e - 15)
    # END SOLUTION
    # BEGIN SKELETON
    ...  # split the string into sign, exponent and mantissa, then apply the formula
    # END SKELETON


# %%
labkit.check.decode_fp16(decode_fp16);

# %% [markdown]
# ### Exercise 2 — predict overflow and underflow
#
# For each value below, predict what happens when it is rounded to FP16 and to BF16: `"normal"`,
# `"subnormal"` (non-zero but below the smallest normal number), `"underflow"` (becomes 0) or `"overflow"`
# (becomes infinity). Work from the ranges that the next cell prints; don't call `P.classify`, which is what the
# check compares your answers with. A value is rounded first: one a little above the largest normal number rounds
# down to it, and only values from the largest normal plus half a step (half an ulp) up overflow. The cell prints
# that overflow threshold too.

# %%
values = labkit.check.lab06.PREDICT_VALUES
print(values)
for name in ("fp16", "bf16"):
    i = P.format_info(name)
    ulp = i.max_normal * 2.0 ** -i.mantissa_bits / (2 - 2.0 ** -i.mantissa_bits)  # the step just below max_normal
    print(f"{name}: max {i.max_normal:.6g}, overflow from {i.max_normal + ulp / 2:.6g} (max + half an ulp), "
          f"min normal {i.min_normal:.6g}, min subnormal {i.min_subnormal:.6g}")

# %% tags=["exercise"]
# BEGIN SOLUTION
predictions = {
    "fp16": ["overflow", "subnormal", "underflow", "overflow", "underflow", "normal"],
    "bf16": ["normal", "normal", "normal", "overflow", "subnormal", "normal"],
}
# END SOLUTION
# BEGIN SKELETON
predictions = {
    "fp16": [..., ..., ..., ..., ..., ...],
    "bf16": [..., ..., ..., ..., ..., ...],
}
# END SKELETON

# %%
labkit.check.predict_range(predictions);

# %% [markdown]
# labkit never hides a range problem: `round_to` warns when values overflow, saturate or vanish, and
# `quantize` returns a report with the counts. FP8 E4M3 has no infinity, so what an out-of-range value becomes is
# the **conversion's** choice, not the format's: the GPU's conversion with `.satfinite`
# (`cvt.rn.satfinite.e4m3x2.f32`, what FP8 training recipes use) clamps it to the largest value, ±448, and labkit
# rounds the same way; a conversion without saturation, such as `ml_dtypes.float8_e4m3fn` (an FP8 type for NumPy from the `ml_dtypes` package; NumPy itself has none),
# turns it into NaN. The next cell shows both.

# %%
q = P.quantize([70000.0, 2e-5, 1e-8, 1.0], "fp16")
print(q.values)
print(q.report)
print(P.quantize([500.0, -1000.0, 1.0], "fp8_e4m3").report)
import ml_dtypes

print("ml_dtypes.float8_e4m3fn (no saturation):", np.array([500.0, -1000.0, 1.0], np.float32).astype(ml_dtypes.float8_e4m3fn))

# %% [markdown]
# ## 2. Rounding to TF32
#
# An FP32 number has 23 mantissa bits; TF32 keeps the top 10, so the lowest 13 bits go. Round to nearest,
# ties to even, works directly on the bit pattern: add `0xFFF` plus the lowest bit that stays (bit 13), then
# clear the 13 low bits. For a finite number a carry ripples into the exponent when the mantissa is all ones —
# that is correct (the largest FP32 numbers round up to infinity, as they should). It is **not** correct for a NaN:
# its exponent is already all ones, so a NaN whose payload sits only in the 13 low bits would come out as infinity,
# and one with an all-ones mantissa would wrap into the sign bit. Pass NaNs through unchanged (`np.where`).
# (The PTX instruction `cvt.rna.tf32.f32` rounds ties *away from zero* instead; labkit uses ties-to-even,
# like every other format here. The two differ only on exact ties.)
#
# ### Exercise 3 — implement TF32 rounding
#
# Write `round_tf32(x)` for a float32 NumPy array, returning float32. The check compares it bit for bit with
# labkit's on random numbers, exact ties of both parities, the largest FP32 numbers, subnormals, infinities and
# NaNs whose payload sits only in the 13 low bits (they must come out NaN).

# %% tags=["exercise"]
def round_tf32(x: np.ndarray) -> np.ndarray:
    # BEGIN SOLUTION
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    return np.where(np.isnan(x), x, u.astype(np.uint32).view(np.float32))  # a NaN stays a NaN
    # END SOLUTION
    # BEGIN SKELETON
    ...  # view as uint32, round, clear the 13 low bits, view as float32; keep NaNs
    # END SKELETON


# %%
labkit.check.tf32_round(round_tf32);

# %% [markdown]
# Ties in action: `1 + 2^-11` lies exactly between `1` and `1 + 2^-10`, so it goes to the even one (`1`);
# `1 + 3·2^-11` lies between `1 + 2^-10` (odd) and `1 + 2^-9` (even), so it goes up. The third value is just
# above the first tie, so it is no longer a tie and rounds up to the nearer neighbour, `1 + 2^-10`.

# %%
tf32 = labkit.check.solved_or_reference("06.tf32-round", round_tf32)
ties = np.array([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-23], dtype=np.float32)
for x, r in zip(ties, tf32(ties)):
    print(f"{x!r:>14} -> {r!r:<14} bits {P.bits(float(r), 'tf32').string}")

# %% [markdown]
# ## 3. GEMM error against K
#
# Each entry of `C = A @ B` is a dot product of length K. Rounding the inputs costs a relative error of about
# the format's unit roundoff once; the running sum adds a rounding at every step, and those add up with K. On
# Tensor Cores the products of FP16 inputs are exact and the sum is kept in an FP32-sized accumulator — or, if you
# ask for it, in FP16. That accumulator is **not** IEEE FP32: published measurements of V100, T4 and A100 Tensor
# Cores (Fasi, Higham, Mikaitis and Pranesh, 2021) found the products of one instruction aligned to the largest and
# added with truncation (rounding toward zero) rather than round-to-nearest. labkit's emulation with an FP32
# accumulator rounds every addition to nearest, so its errors are **usually smaller** than a Tensor Core's (a model,
# not a bound). Hopper's Tensor Cores keep even fewer bits when they accumulate FP8 products, about 14 (DeepSeek-V3
# technical report, §3.3.2); section 3b models that and what the libraries do about it. (Section 4 measures speed,
# not error.)
#
# `P.gemm(a, b, fmt, accumulate)` emulates that on the CPU. With `accumulate="fp32"` labkit adds the products
# itself, one after another along K, rounding the running sum to FP32 at every step
# (`P.fp32_dot_sequential`, as one thread of a CUDA-core FP32 GEMM does). It does not use NumPy's float32 `@`:
# that calls the CPU's BLAS library, whose summation order depends on the CPU, so the same cell would print
# different FP32 errors on different machines. Below, `m×K` by `K×m` matrices with entries uniform in [0, 1) (all
# positive, so the sums grow like K — the hard case for a narrow accumulator). The error is the **normwise**
# `max|C − C_fp64| / max|C_fp64|`, against the float64 product of the unrounded inputs.

# %%
ks = [16, 64, 256, 1024, 4096]
runs = {
    "FP32": ("fp32", "fp32"), "TF32, FP32 acc": ("tf32", "fp32"), "FP16, FP32 acc": ("fp16", "fp32"),
    "BF16, FP32 acc": ("bf16", "fp32"), "FP8 E4M3, FP32 acc": ("fp8_e4m3", "fp32"),
    "FP16, FP16 acc": ("fp16", "same"), "BF16, BF16 acc": ("bf16", "same"),
}
with warnings.catch_warnings(record=True) as range_notes:  # printed below as notes, not as warning boxes
    warnings.simplefilter("always", P.PrecisionWarning)
    curves = {label: P.error_vs_k(fmt, acc, ks, m=16, seed=6) for label, (fmt, acc) in runs.items()}
print(f"{'':20s}" + "".join(f"{'K=' + str(k):>10s}" for k in ks))
for label, errs in curves.items():
    print(f"{label:20s}" + "".join(f"{e:10.2e}" for e in errs))
for note in range_notes:
    print("note:", note.message)
if all(math.isclose(a, b, rel_tol=0.05) for a, b in zip(curves["TF32, FP32 acc"], curves["FP16, FP32 acc"])):
    print("TF32 and FP16 inputs give almost the same errors (within 5%): both keep 10 mantissa bits, and these values "
          "are far inside both ranges. In the chart the FP16 line is dashed, drawn over the TF32 one.")

# %% tags=["nbval-ignore-output"]
W.error_vs_k_figure(ks, curves, title="GEMM error against K (CPU emulation of the arithmetic)")

# %% [markdown]
# Read the table against the unit roundoffs printed below. With an FP32 accumulator the error is set by rounding
# the **inputs**: it starts below the input format's unit roundoff and *falls* as K grows, because the input
# roundings are independent and partly cancel in a long sum of positive terms (roughly as 1/√K). The top row (FP32
# inputs, so the FP32 accumulator's own rounding) is not 1e-7 flat: a sequential FP32 sum makes one rounding per
# product, so its error grows with K (the next cell prints it in units of the FP32 unit roundoff), yet its largest
# value stays below every narrow format's. With
# an FP16 or BF16 accumulator the error *grows* with K
# until the sum stops growing at all (each new product is below half a unit in the last place of the running
# sum). That is why Tensor Cores accumulate in FP32 for training, and why TF32 "feels like FP32" in most networks.

# %%
for label, (fmt, acc) in runs.items():
    if acc == "fp32":
        print(f"{label:20s} unit roundoff of the inputs {P.format_info(fmt).unit_roundoff:.1e}; "
              f"error at K={ks[0]} {curves[label][0]:.1e}, at K={ks[-1]} {curves[label][-1]:.1e}")
u32 = P.format_info("fp32").unit_roundoff
print("FP32 row in units of the FP32 unit roundoff:", ", ".join(f"K={k}: {e / u32:.1f}" for k, e in zip(ks, curves["FP32"])))
print(f"FP32 row (the accumulator alone): largest error {max(curves['FP32']):.1e}, "
      f"{min(min(curves[k]) for k in runs if k != 'FP32') / max(curves['FP32']):.0f}× below the smallest narrow-format error")

# %% [markdown]
# ## 3b. FP8 accumulation on Hopper, and promotion to FP32
#
# The FP32 accumulator above is the optimistic case. The DeepSeek-V3 technical report (§3.3.2) found that when
# Hopper's Tensor Cores accumulate FP8 products along a chain of `wgmma` instructions, they keep only about 14
# significant bits, far fewer than FP32's 24; with K = 4096 this cost DeepSeek's own kernels a maximum relative
# error of nearly 2% (this model, on the uniform inputs below, gives less). Their fix: let the Tensor Cores
# accumulate a stretch of K (128 products, four FP8 `wgmma` instructions of K = 32), then add that partial sum to an
# FP32 total held in the CUDA cores' registers ("promotion") and start the Tensor Core accumulator again from zero.
#
# This is not what every FP8 GEMM on an H100 or H200 suffers: NVIDIA's libraries promote by default. cuBLASLt keeps
# `CUBLASLT_MATMUL_DESC_FAST_ACCUM` off unless it is set, CUTLASS's SM90 FP8 kernels add into FP32 every
# `mma_promotion_interval` MMAs unless a `FastAccum` schedule is chosen, and PyTorch's `torch._scaled_mm` has
# `use_fast_accum=False` by default. The 14-bit accumulator is what you get when you ask for **fast accumulation**
# (Transformer Engine does, for the forward GEMM only) or write your own kernel, as DeepSeek did.
#
# `P.gemm(a, b, "fp8_e4m3", accumulate="limited")` is labkit's **model** of that accumulator: the products of each
# block of 32 are added exactly, then the running sum is cut to `acc_bits=14` significant bits (toward zero, the
# truncation measured on earlier Tensor Cores; the exact rounding of Hopper's is not published). Printed here:
# the bits it keeps and the model's error on one product, against the same FP8 inputs with an FP32 accumulator.

# %%
rng_acc = np.random.default_rng(36)
a_acc, b_acc = rng_acc.uniform(0, 1, (16, 4096)), rng_acc.uniform(0, 1, (4096, 16))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", P.PrecisionWarning)  # FP8 flushes a few of the smallest inputs to zero
    c_fp32 = P.gemm(a_acc, b_acc, "fp8_e4m3", accumulate="fp32")
    c_limited = P.gemm(a_acc, b_acc, "fp8_e4m3", accumulate="limited")
print(f"accumulator bits kept (model): {P.LIMITED_ACC_BITS}, products per Tensor Core step: {P.LIMITED_BLOCK_K}")
print(f"K = 4096, FP8 inputs: limited accumulator against FP32 accumulation, relative error {P.relative_error(c_limited, c_fp32):.2e}")

# %% [markdown]
# ### Exercise 4 — promote the partial sums
#
# Write `promoted_gemm(a, b, interval)`: the FP8 GEMM with promotion every `interval` products. Cut K into chunks of
# `interval` (the last one may be shorter), multiply each chunk's slice of `a` and `b` with
# `P.gemm(..., "fp8_e4m3", accumulate="limited")` (one stretch of Tensor Core work), and add each chunk's result into
# an FP32 total (`np.float32`), which you return. The check compares your result with labkit's
# `P.gemm(..., accumulate="limited", promote_every=interval)` on fresh matrices, intervals of 64, 128 and 256, and
# K never a multiple of the interval.

# %% tags=["exercise"]
def promoted_gemm(a: np.ndarray, b: np.ndarray, interval: int) -> np.ndarray:
    # BEGIN SOLUTION
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k0 in range(0, a.shape[1], interval):
        part = P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited",
                      on_range="ignore")  # FP8 flushes a few tiny inputs to 0: expected here, no warning wanted
        total += part.astype(np.float32)  # the promotion: one FP32 addition on the CUDA cores
    return total
    # END SOLUTION
    # BEGIN SKELETON
    ...  # an FP32 total; for each chunk of `interval` along K: P.gemm(..., accumulate="limited"), add it to the total
    # END SKELETON


# %%
labkit.check.fp8_promotion(promoted_gemm);

# %% [markdown]
# Now measure what promotion buys: the accumulator's error (against FP32 accumulation of the same FP8 inputs) for
# growing K, without promotion and with promotion every 128 products (your function, or labkit's if it is not
# solved yet).

# %%
promote = labkit.check.solved_or_reference("06.fp8-promotion", promoted_gemm)
print(f"{'K':>6} {'no promotion':>14} {'every 128':>11}   (relative error of the accumulator, model)")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", P.PrecisionWarning)
    for k in (256, 1024, 4096):
        ref32 = P.gemm(a_acc[:, :k], b_acc[:k], "fp8_e4m3", accumulate="fp32")
        plain = P.relative_error(P.gemm(a_acc[:, :k], b_acc[:k], "fp8_e4m3", accumulate="limited"), ref32)
        promoted = P.relative_error(promote(a_acc[:, :k], b_acc[:k], 128), ref32)
        print(f"{k:6d} {plain:14.2e} {promoted:11.2e}")

# %% [markdown]
# Without promotion the error grows with K: every Tensor Core step cuts the running sum at its 14th bit, and the
# larger the sum, the coarser that cut. With promotion each partial sum covers only 128 products, so it stays small
# and is cut finely; the FP32 total adds the partial sums with 24 bits. The cost is the extra FP32 additions on the
# CUDA cores, which DeepSeek-V3 overlaps with the next `wgmma` of another warpgroup.
#
# ## 3c. Scaling FP8: per tensor and per block
#
# E4M3 reaches only 448 and E5M2 57,344, so a tensor is stored as narrow elements times a **scale**. NVIDIA's
# Transformer Engine (TE) has several recipes. The oldest, `DelayedScaling`, uses one FP32 scale per tensor:
# `scale = fp8_max / amax / 2**margin`, where `amax` is the largest magnitude over a history of recent steps. Its
# HYBRID format stores weights and activations in E4M3 and gradients in E5M2, which has the range gradients need.
# TE 2.x adds `Float8CurrentScaling` (per tensor, from this step's amax) and, on Hopper too, `Float8BlockScaling`:
# FP32 scales per 1×128 and 128×128 block, applied outside the Tensor Cores when the partial sums are promoted —
# DeepSeek-V3's recipe (§3.3.1), trained on H800s. Blackwell adds `MXFP8BlockScaling` and `NVFP4BlockScaling`, where
# the block scales are Tensor Core operands (Transformer Engine documentation, Common API, release 2.x).
#
# ### Exercise 5 — the delayed-scaling rule
#
# Write `fp8_scale(amax_history, fmt, margin, previous)`: the scale for the next step, `fp8_max / amax / 2**margin`,
# with `fp8_max` the largest value of `fmt` (`P.format_info(fmt).max_normal`) and `amax` the largest entry of the
# history (Transformer Engine's default, `amax_compute_algo="max"`). When that amax is 0 (nothing seen yet) or not
# finite (an entry that is inf or NaN: a step that overflowed), return `previous` unchanged, as Transformer Engine
# does. Mind NaN: every comparison with it is False, so Python's `max()` skips a NaN that is not first in the list
# (`np.max` returns NaN). The check draws fresh histories in E4M3 and E5M2, with margins, amaxes below and above 1,
# and the special cases: 0, and inf or NaN anywhere in the history.

# %% tags=["exercise"]
def fp8_scale(amax_history: list[float], fmt: str, margin: int, previous: float) -> float:
    # BEGIN SOLUTION
    if not all(math.isfinite(a) for a in amax_history):  # inf or NaN anywhere: the step overflowed
        return previous
    amax = max(amax_history)
    if amax <= 0:
        return previous
    return P.format_info(fmt).max_normal / amax / 2**margin
    # END SOLUTION
    # BEGIN SKELETON
    ...  # the largest amax of the history; keep `previous` if it is 0 or not finite; fp8_max / amax / 2**margin
    # END SKELETON


# %%
labkit.check.te_scale(fp8_scale);

# %% [markdown]
# `S.DelayedScaling` keeps the history and applies the rule each step (`S.te_scale` is labkit's rule). Each step
# stores the tensor with the scale from the *previous* steps, then records this step's amax:

# %%
print("Transformer Engine's HYBRID recipe:", S.HYBRID)
history = S.DelayedScaling(fmt="fp8_e4m3", history_len=4)
rng_s = np.random.default_rng(37)
for step, size in enumerate((1.0, 1.0, 1.0, 8.0, 8.0, 1.0)):
    stored = history.quantize(size * rng_s.standard_normal(4096))
    print(f"step {step}: amax {history.history[-1]:6.2f}, scale used {stored.scale:7.2f}, "
          f"saturated {stored.report.saturated:4d}, flushed to 0 {stored.report.underflow:3d}")

# %% [markdown]
# Step 0 has no history yet and uses the initial scale, 1. After that the scale comes from past steps, so when a
# tensor suddenly grows (step 3) it saturates for one step; when it shrinks again (step 5) the history still holds
# the large amax, keeps the scale low, and small values lose precision or flush to zero.
# One scale must also serve the whole tensor: rows (tokens, channels) whose values are far below the tensor's
# largest lose their digits.
#
# Block scaling fixes that with a scale per small block along K. Blackwell's Tensor Cores read such **block-scaled**
# formats as operands (they still run plain FP8 with per-tensor scales too):
# OCP Microscaling (MX) v1.0 gives each block of 32 elements a power-of-two scale stored in E8M0 (an 8-bit exponent):
# MXFP8 with E4M3 or E5M2 elements, MXFP4 with E2M1. NVIDIA's NVFP4 gives each block of 16 E2M1 elements an E4M3 scale,
# under one FP32 scale per tensor. OCP MX v1.0's scale is `2**(floor(log2(amax)) − emax)`, where emax is the exponent
# of the element format's largest power of two, so the block's largest element lands in the element format's top
# binade (for E4M3, [256, 512), and values above 448 saturate). NVIDIA's own MXFP8 recipe rounds the other way; we
# compare the two after the exercise:

# %%
for name, f in S.BLOCK_FORMATS.items():
    print(f"{name:11s} {f.block:3d} x {f.element:9s} scale {f.scale:8s} {'+ FP32 per tensor' if f.tensor_scale else ''}")
print("emax of the elements:", {e: S.element_emax(e) for e in ("fp8_e4m3", "fp8_e5m2", "fp4_e2m1")})

# %% [markdown]
# ### Exercise 6 — quantize to MXFP8 with OCP's rule
#
# Write `quantize_mxfp8(x)`: store `x` (float64, its last axis a multiple of 32) in MXFP8 with E4M3 elements, using
# OCP MX v1.0's scale rule, and return the values read back. For each block of 32 consecutive elements along the last
# axis: the scale is `2**(floor(log2(amax)) − 8)` (8 because 448 = 1.75 × 2^8); divide the block by it, round to
# E4M3 with `P.round_to(..., "fp8_e4m3", on_range="ignore")` (a saturating conversion: it clamps to ±448), and
# multiply back. An all-zero block stays zero. The check compares your values bit for bit with `S.quantize_blocks` on fresh
# arrays whose rows span 2^-20 to 2^12, with an all-zero block, a power-of-two maximum and maxima that must saturate.

# %% tags=["exercise"]
def quantize_mxfp8(x: np.ndarray) -> np.ndarray:
    # BEGIN SOLUTION
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    scale = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return (P.round_to(blocks / scale, "fp8_e4m3", on_range="ignore") * scale).reshape(x.shape)
    # END SOLUTION
    # BEGIN SKELETON
    ...  # blocks of 32 along the last axis; scale 2**(floor(log2(amax)) - 8); round to E4M3; multiply back
    # END SKELETON


# %%
labkit.check.mx_quantize(quantize_mxfp8);

# %% [markdown]
# OCP's rule puts a block's largest magnitude in [256, 512), so every block whose largest value has a mantissa above
# 1.75 loses that value to 448: it clamps exactly the outliers. NVIDIA's MXFP8 training recipe (Transformer Engine's
# `MXFP8BlockScaling`, what a DGX B200 user runs) rounds the scale's exponent **up** instead,
# `2**ceil(log2(amax / 448))`, so that the largest element lands at or below 448 and nothing clamps; the smallest
# values pay with a little precision. Mishra, Stosic and Layton (arXiv 2506.08027) report that OCP's rule diverged in
# long LLM pre-training runs and the round-up rule did not. Measured here on Gaussian blocks of very different sizes:

# %%
rng_r = np.random.default_rng(41)
blocks_x = rng_r.standard_normal((2000, 32 * 20)) * 2.0 ** rng_r.uniform(-8, 8, size=(2000, 1))
print(S.SCALE_RULES["round_up"])
for rule in ("ocp", "round_up"):
    q = S.quantize_blocks(blocks_x, "mxfp8_e4m3", rule=rule)
    b = blocks_x.reshape(2000, 20, 32)
    clamped = (np.abs(b) / q.scales[..., None] > 448).any(axis=-1).mean()
    err = np.abs(q.values.reshape(b.shape) - b).max(axis=-1) / np.abs(b).max(axis=-1)
    print(f"{rule:9s} blocks with a clamped element {clamped:6.1%}; block error (max |error| / block max): "
          f"worst {err.max():.3f}, median {np.median(err):.3f}   (CPU emulation)")

# %% [markdown]
# Why blocks? Below, activations whose rows (tokens) differ in size by up to 2^16, as after a layer norm with
# outlier channels or in attention, multiply random weights. Each scheme stores both matrices (blocks along K) and
# the sums are exact, so the error is the storage's alone. The **normwise** error divides by the product's
# largest entry and hides the small rows; the **worst row** error (`S.rowwise_error`) shows them.

# %%
mx = labkit.check.solved_or_reference("06.mx-quantize", quantize_mxfp8)
rng_b = np.random.default_rng(38)
acts = rng_b.standard_normal((64, 256)) * 2.0 ** rng_b.uniform(-12, 4, size=(64, 1))
weights = rng_b.standard_normal((256, 64))
exact = acts @ weights
print(f"{'storage':28s} {'normwise':>9s} {'worst row':>10s}   (CPU emulation of the formats)")
for label, c in (("FP8 E4M3, one scale each", S.scaled_gemm(acts, weights, "fp8_e4m3")),
                 ("MXFP8 (your quantizer)", mx(acts) @ mx(weights.T).T),
                 ("MXFP8, NVIDIA's round-up", S.quantize_blocks(acts, "mxfp8_e4m3", rule="round_up").values
                  @ S.quantize_blocks(weights, "mxfp8_e4m3", axis=0, rule="round_up").values),
                 ("FP4 E2M1, one scale each", S.scaled_gemm(acts, weights, "fp4_e2m1")),
                 ("MXFP4", S.scaled_gemm(acts, weights, "mxfp4")),
                 ("NVFP4", S.scaled_gemm(acts, weights, "nvfp4"))):
    print(f"{label:28s} {P.relative_error(c, exact):9.2e} {S.rowwise_error(c, exact):10.2e}")

# %% [markdown]
# With one scale per matrix the rows far below the largest fall into E4M3's subnormals or to zero: the worst row's
# error is several times the normwise one, which looks harmless (with FP4 the worst row is lost entirely). With a
# scale per block of 32 every row keeps E4M3's precision, with either scale rule (the two differ in which values they
# give up, not in how much on inputs like these). FP4 has only eight
# magnitudes, so even block-scaled its error is larger; NVFP4's smaller blocks and finer E4M3 scales usually beat
# MXFP4 — but its E4M3 block scales span only about 2^-9 to 448 under the one tensor scale, so rows more than about
# 2^17 below the largest would lose theirs too. This is why Blackwell's Tensor Cores take the scales as operands.
#
# ### Exercise 7 — quantize to Blackwell's NVFP4
#
# A DGX B200 runs FP4 at twice its FP8 rate (`hw.gpu("B200").peak("fp4")`), and NVIDIA's FP4 format for it is NVFP4:
# blocks of **16** E2M1 elements (largest 6), each with an **E4M3** scale (3 mantissa bits, so finer than a power of
# two), under one FP32 scale per tensor that keeps the block scales inside E4M3's range. Write `quantize_nvfp4(x)`:
# store `x` (float64, its last axis a multiple of 16) and return the values read back.
#
# 1. The tensor scale `t = amax(x) / (448 × 6)` (1 when `x` is all zeros), so the largest block scale lands on 448.
# 2. For each block of 16 consecutive elements along the last axis: `s = P.round_to(amax_block / 6 / t, "fp8_e4m3",
#    on_range="ignore") × t`.
# 3. The elements: `P.round_to(block / s, "fp4_e2m1", on_range="ignore")` (saturating at ±6: when E4M3 rounds a
#    block's scale down, its largest element lands a little above 6), times `s`. A block whose `s` is 0 gives 0.
#
# The check compares your values element by element with `S.quantize_blocks(x, "nvfp4")` on fresh arrays: a row
# 2^16 below the largest (its block scales fall into E4M3's subnormals), an all-zero block, a block whose E4M3 scale
# rounds down, and widths that are not multiples of 32.

# %% tags=["exercise"]
def quantize_nvfp4(x: np.ndarray) -> np.ndarray:
    # BEGIN SOLUTION
    blocks = x.reshape(*x.shape[:-1], -1, 16)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    t = np.abs(x).max() / (448 * 6) if np.abs(x).max() > 0 else 1.0
    scale = P.round_to(amax / 6 / t, "fp8_e4m3", on_range="ignore") * t
    safe = np.where(scale > 0, scale, 1.0)
    q = P.round_to(blocks / safe, "fp4_e2m1", on_range="ignore") * safe
    return np.where(scale > 0, q, 0.0).reshape(x.shape)
    # END SOLUTION
    # BEGIN SKELETON
    ...  # tensor scale t; per block of 16: E4M3 scale of amax / 6 / t, times t; E2M1 elements times the scale
    # END SKELETON


# %%
labkit.check.nvfp4_quantize(quantize_nvfp4);

# %% [markdown]
# NVIDIA's NVFP4 training recipe (Transformer Engine's `NVFP4BlockScaling`) adds three things this exercise leaves
# out: 16×16 two-dimensional blocks for the weights (so a weight and its transpose share scales), random Hadamard
# transforms that spread outliers before the gradients are quantized, and stochastic rounding of the gradients.

# %% [markdown]
# ## 4. Tensor Core GEMM throughput
#
# On a GPU, the cell below times CuPy matrix products of random normal `n×n` matrices (never zeros: they run
# faster and flatter the hardware) in each precision: FP32 with TF32 off, TF32 (CuPy's TF32 compute type, as
# `CUPY_TF32=1` selects), FP16, BF16 (through `ml_dtypes`) and FP8 where this CuPy can multiply it. Each is
# compared with the dense datasheet peak from `labkit.hw`. Without a GPU it times NumPy on this CPU —
# clearly CPU figures — and prints the roofline model's expectation for the GPUs instead.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    for row in T.gpu_gemm_throughput(n=labkit.size(gpu=8192, sim=256)):
        print(row)
else:
    print("No GPU: NumPy on this CPU (CPU measurements, not Tensor Cores):")
    for row in T.cpu_gemm_throughput(n=128, precisions=("fp64", "fp32", "fp16"), repeat=3):
        print(" ", row)

# %%
print("Roofline model for an 8192³ GEMM (a model from labkit.hw figures, not a measurement):")
for gpu_name in ("V100", "A100", "H100", "H200", "B200"):
    for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8"):
        if hw.gpu(gpu_name).has(p):
            print(" ", T.roofline_gemm(gpu_name, p, 8192))
print("The fp64 peaks above are not alike:", "; ".join(f"{g} on {hw.gpu(g).runs_on('fp64')}" for g in ("V100", "A100", "H100", "H200")))

# %% [markdown]
# An 8192³ GEMM does hundreds to thousands of FLOPs per byte (the intensity in brackets above), far right of
# every GPU's ridge point: the model says the peak is reachable. Real libraries get a large fraction of it; the
# gap is what the GPU run above measures.
# Note the jumps between generations come from the Tensor Core precisions, not from FP32.
#
# ### Exercise 8 — predict a GEMM's TFLOP/s from its shape
#
# Not every GEMM is square. Write `predict_gemm(m, n, k, precision, gpu)`: the roofline's TFLOP/s for `C = A @ B`
# with `A` m×k and `B` k×n, from the GPU's dense peak and memory bandwidth in `labkit.hw`. Count the FLOPs, count the
# fewest bytes that must cross HBM (each matrix read or written once), and take the slower of the two limits.
# All three matrices, **C included, are in the input precision** (a model: cuBLAS often writes an FP32 C for FP16
# inputs, which costs more bytes). Bytes per element: FP8 1, FP16 and BF16 2, FP32 and TF32 4 (TF32 is stored as
# FP32), FP64 8. Units: `hw.gpu(gpu).peak(precision).value` is in TFLOP/s and `.memory_bandwidth.value` in GB/s
# (`.unit` says so); return TFLOP/s. The
# check draws fresh shapes: near-square, thin (n of a few columns, as in decoding one token at a time) and with a
# short k, in several precisions on several GPUs from the V100 to the B200 (FP8). On a GPU it also times two FP16 GEMMs with CuPy and requires your
# prediction to bound what they reach.

# %% tags=["exercise"]
def predict_gemm(m, n, k, precision, gpu):
    # BEGIN SOLUTION
    g = hw.gpu(gpu)
    size = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[precision]  # bytes per element
    flops = 2 * m * n * k
    traffic = size * (m * k + k * n + m * n)
    seconds = max(flops / (g.peak(precision).value * 1e12), traffic / (g.memory_bandwidth.value * 1e9))
    return flops / seconds / 1e12
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # FLOPs, bytes, the slower of the two times, TFLOP/s
    # END SKELETON


# %%
labkit.check.gemm_predict(predict_gemm);

# %% [markdown]
# The same GEMM of 8192 × 8192 weights against a batch of n columns: the prediction climbs with n until the
# Tensor Cores, not memory, set the pace. On a GPU the cell measures the same shapes with CuPy beside it.

# %% tags=["nbval-ignore-output"]
predict = labkit.check.solved_or_reference("06.gemm-predict", predict_gemm)
from labkit.gpu.profiles import ceiling

gpu_name, not_here = ceiling(env)  # this GPU's labkit.hw record; the H200's model (and why) when labkit has none
if not_here:
    print(not_here)
for cols in (1, 16, 128, 1024, 8192):
    line = f"{gpu_name} fp16 8192×{cols}×8192: predicted {predict(8192, cols, 8192, 'fp16', gpu_name):8.1f} TFLOP/s (model)"
    if env.is_gpu:
        import cupy

        a = cupy.random.standard_normal((8192, 8192), dtype=cupy.float32).astype(cupy.float16)
        b = cupy.random.standard_normal((8192, cols), dtype=cupy.float32).astype(cupy.float16)
        t = labkit.bench.measure(cupy.matmul, a, b, name="fp16 gemm", flops=2.0 * 8192 * cols * 8192, warmup=3, repeat=10)
        line += f"; measured {t.tflops:8.1f} TFLOP/s" + (f" on the {env.device_name}, another GPU" if not_here else "")
    print(line)

# %% [markdown]
# ## 5. A WMMA kernel
#
# CUDA C++ reaches Tensor Cores through the warp-level WMMA API (`#include <mma.h>`): a warp loads 16×16
# *fragments* of A and B, multiplies them into an accumulator fragment with `wmma::mma_sync`, and stores it.
# In the kernel below one warp computes one 16×16 tile of `C = A @ B` (FP16 inputs, FP32 accumulator), looping
# over K in steps of 16. The launch is fixed by labkit: blocks of `(32, 4)` threads, that is four warps; warp
# `threadIdx.y` of block `(blockIdx.x, blockIdx.y)` computes the tile in tile row `blockIdx.y * 4 + threadIdx.y`
# and tile column `blockIdx.x`. The kernel's first lines already work out `tile_row` and `tile_col`.
#
# ### Exercise 9 — complete the WMMA GEMM
#
# Fill in the loop body and the store with the three WMMA calls (CUDA C++ Programming Guide, "Warp Matrix
# Functions"): `wmma::load_matrix_sync(fragment, pointer, leading_dimension)` loads a 16×16 block into a fragment,
# `wmma::mma_sync(acc, a, b, acc)` adds `a @ b` to the accumulator, and `wmma::store_matrix_sync(pointer, acc,
# leading_dimension, wmma::mem_row_major)` writes the accumulator out. `A` is M×K and `B` K×N, both row-major, so the
# leading dimension of A is K and that of B is N. The check compiles your kernel to PTX and looks for the Tensor Core instructions, then
# runs it on random matrices of five shapes (K of up to 7 tiles, some warps without a tile) and compares C with
# the float64 product within the FP16 tolerance: on a GPU with CuPy, without one on labkit's CPU stand-in, whose
# `<mma.h>` carries out each fragment call for the warp as a whole. A wrong offset, leading dimension, K step or
# store layout, or an accumulator zeroed inside the loop, gives wrong numbers either way.

# %% tags=["exercise"]
wmma_source = r"""
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K)
{
    const int tile_row = blockIdx.y * blockDim.y + threadIdx.y;
    const int tile_col = blockIdx.x;
    if (tile_row * 16 >= M || tile_col * 16 >= N) return;

    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k = 0; k < K; k += 16) {
# BEGIN SOLUTION
        wmma::load_matrix_sync(a, A + (size_t)tile_row * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)k * N + tile_col * 16, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + (size_t)tile_row * 16 * N + tile_col * 16, acc, N, wmma::mem_row_major);
# END SOLUTION
# BEGIN SKELETON
        // TODO: load the 16x16 blocks of A and B into a and b, then acc += a @ b
    }
    // TODO: store acc into C
# END SKELETON
}
"""

# %%
labkit.check.wmma_gemm(wmma_source);

# %% [markdown]
# The PTX shows what the compiler made of it: `wmma.load.a`, `wmma.load.b`, `wmma.mma.sync` (the Tensor Core
# multiply-accumulate) and `wmma.store.d`. Here it is for Volta (sm_70) and Hopper (sm_90): the same warp-level
# instructions on both. WMMA runs on Hopper, but it is not how Hopper reaches its peak (section 5b).

# %%
kernel_source = labkit.check.solved_or_reference("06.wmma-gemm", wmma_source)
arches, skipped = labkit.ptx.targetable(("sm_70", "sm_90"))  # NVRTC 13 no longer targets Volta
for arch in arches:
    ptx = T.compile_wmma(kernel_source, arch)
    print(arch, T.tensor_core_instructions(ptx.text))
if skipped:
    print(labkit.ptx.skipped_note(skipped).strip())
ptx.show("wmma.mma", limit=2)

# %%
if env.is_gpu:
    rng = np.random.default_rng()
    a, b = rng.uniform(-1, 1, (256, 512)), rng.uniform(-1, 1, (512, 128))
    grade = T.wmma_error(T.run_wmma_gemm(a, b, kernel_source), a, b)
    print(f"WMMA on {env.device_name}: relative error {grade.relative_error:.2e}, within tolerance: {grade.ok}")
else:
    print("Without a GPU the check ran this kernel on labkit's CPU stand-in (values only); a GPU run executes it on Tensor Cores.")
try:
    T.run_wmma_gemm(np.ones((20, 16)), np.ones((16, 16)), kernel_source)
except labkit.LabkitError as err:
    print("LabkitError:", err)

# %% [markdown]
# ## 5b. Hopper's peak: `wgmma` and TMA
#
# The PTX above is the same for Volta and Hopper: `wmma.mma.sync` is a **warp-level** instruction (`.sync`: all 32
# threads of the warp execute it together), which ptxas turns into the same Tensor Core instructions as Ampere's
# warp-level `mma.sync`. Its operands are registers: each warp must first bring its fragments from memory into its
# own registers, and the instruction is ordered by the register scoreboard (later independent instructions still
# issue; only a use of the result waits). Hopper added two things for its peak (PTX ISA; Hopper Tuning Guide), and
# cuBLAS and CUTLASS use them for their Hopper GEMMs:
#
# - **TMA** (Tensor Memory Accelerator): `cp.async.bulk.tensor` copies a whole tile between global and shared memory,
#   issued by one thread and described by a tensor map built on the host; an `mbarrier` in shared memory counts the
#   bytes as they arrive.
# - **`wgmma.mma_async`**: a *warpgroup* (4 warps, 128 threads) multiplies tiles up to 64×256×K, where K depends on
#   the type (16 for FP16/BF16, 8 for TF32, 32 for FP8 and INT8). B is read straight from shared memory through a
#   64-bit matrix descriptor; A from shared memory the same way or from registers (PTX ISA 9.7.15.5.1). It runs
#   asynchronously: `wgmma.fence`, `commit_group` and `wait_group` say when the accumulator registers may be touched.
#
# `wgmma` exists only for **`sm_90a`**: the `a` marks architecture-specific instructions that PTX for `sm_90`
# (portable to later GPUs) may not use. Data-centre Blackwell (sm_100a/sm_103a: B200, B300, GB200, GB300) does not run
# `wgmma` either: it has `tcgen05.mma`, whose accumulator lives in a new Tensor Memory instead of registers. The
# Blackwell RTX/RTX PRO GPUs and DGX Spark's GB10 (sm_120/sm_121) have neither: they keep warp-level `mma.sync`, with
# block-scaled FP8/FP6/FP4 variants (PTX ISA, `tcgen05` target requirements). labkit has a small warpgroup GEMM tile in inline PTX
# (no CUTLASS needed); NVRTC compiles it here without a GPU:

# %%
print(T.WGMMA_SOURCE[T.WGMMA_SOURCE.index("extern"):T.WGMMA_SOURCE.index("extern") + 420], "...")
wgmma_ptx = T.compile_wgmma(arch="sm_90a")
wmma_ptx = T.compile_wmma(kernel_source, "sm_90")
print("wgmma tile, sm_90a:", {k: v for k, v in T.hopper_instructions(wgmma_ptx.text).items() if v})
print("WMMA kernel, sm_90:", {k: v for k, v in T.hopper_instructions(wmma_ptx.text).items() if v})
wgmma_ptx.show("wgmma.", "cp.async.bulk.tensor", "mbarrier.", limit=9)

# %% [markdown]
# NVRTC copies inline PTX without reading it, so it produces PTX for `sm_90` too; ptxas, which turns PTX into
# machine code, refuses it there. (Where ptxas is installed, the next cell shows its verdict and the tile's
# registers.)

# %%
try:
    print("sm_90a:", wgmma_ptx.resources())
    T.compile_wgmma(arch="sm_90").resources()
except labkit.LabkitError as err:
    print("sm_90: ptxas says:", str(err).splitlines()[0][:160])

# %% [markdown]
# Why does this matter for speed? A model: count the bytes each instruction reads from shared memory against what
# shared memory can give. Per SM and per clock the H200's Tensor Cores do `tensor_cores_per_sm ×
# tensor_core_fma_per_clock × 2` FLOPs at their dense FP16 peak, and shared memory delivers
# `shared_memory_bandwidth_per_sm` bytes (32 banks of 4 bytes; a warp's 8- or 16-byte accesses, 256 or 512 bytes in
# all, are served in two or four phases of 128 bytes, so wider loads do not raise that figure):

# %%
h200 = hw.gpu("H200")
for fig_ in (h200.tensor_cores_per_sm, h200.tensor_core_fma_per_clock, h200.shared_memory_bandwidth_per_sm, h200.peak("fp16")):
    print(fig_)

# %% [markdown]
# ### Exercise 10 — how much shared memory a WMMA kernel needs
#
# Take a WMMA kernel in which each warp reads its 16×16 A and B fragments from shared memory for every 16×16×16
# product, and a `wgmma` kernel whose warpgroup reads 64×16 of A and 16×256 of B from shared memory for every
# 64×256×16 product. For each, how many bytes per clock per SM must shared memory deliver to keep the Tensor Cores
# at the peak? Use the figures above (FP16 operands, 2 bytes; the FP32 accumulator stays in registers).

# %% tags=["exercise"]
# BEGIN SOLUTION
flop_per_clock = h200.tensor_cores_per_sm.value * h200.tensor_core_fma_per_clock.value * 2
wmma_bytes_per_clock = flop_per_clock / (2 * 16 * 16 * 16 / ((16 * 16 + 16 * 16) * 2))
wgmma_bytes_per_clock = flop_per_clock / (2 * 64 * 256 * 16 / ((64 * 16 + 16 * 256) * 2))
# END SOLUTION
# BEGIN SKELETON
wmma_bytes_per_clock = ...
wgmma_bytes_per_clock = ...
# END SKELETON

# %%
labkit.check.wmma_peak(wmma_bytes_per_clock, wgmma_bytes_per_clock);

# %% [markdown]
# That 4× is the figure for one product per fragment load (no reuse). A WMMA kernel does better by keeping fragments
# in registers and reusing them: with the same model, a warp holding 2×2 accumulator fragments needs half as much,
# and a 64×64 warp tile (4×4 fragments, as CUTLASS's Ampere-style kernels use) needs exactly what shared memory
# gives (the next cell computes both). So bandwidth alone does not stop a well-written warp-level kernel. What does
# is the register-operand path and issue rate of warp-level `mma.sync` (plus its `ldmatrix` traffic), which
# `wgmma`'s descriptor-fed, asynchronous warpgroup instructions avoid (Luo et al., arXiv 2402.13499 and 2501.12084,
# measure `mma` against `wgmma` on Hopper). cuBLAS reaches its Hopper figures with `wgmma`. The model:

# %%
smem = h200.shared_memory_bandwidth_per_sm.value
for tiles in (1, 2, 4):  # a warp holding tiles × tiles accumulator fragments: a (16·tiles)² × 16 product per load
    need = T.smem_operand_bytes_per_clock("H200", 16 * tiles, 16 * tiles, 16)
    print(f"WMMA, {tiles}×{tiles} fragments per warp: needs {need:.0f} B/clock of {smem:.0f}, "
          f"at most {min(1.0, smem / need):.0%} of {h200.peak('fp16')} (a model, not a measurement)")

# %% [markdown]
# On a GPU the next cell measures a gap, and it is worth reading carefully: the kernel of exercise 9 (yours, or
# labkit's) is a **naive** WMMA kernel that loads every fragment straight from global memory, with no shared-memory
# tiling, no reuse and no pipelining. Most of its gap to cuBLAS comes from that, not from WMMA against `wgmma`; a
# tiled, register-blocked warp-level kernel closes much of the gap, though not all of it. Both are timed with CUDA
# events on the same FP16 GEMM. Without a GPU there is nothing to time, and the cell says so.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    for row in T.wmma_against_cublas(n=4096, source=kernel_source):
        print(row)
else:
    print("No GPU: a GPU run would time the WMMA kernel against cuBLAS (cupy.matmul) on a 4096³ FP16 GEMM here.")

# %% [markdown]
# ## 6. Mixed-precision training and loss scaling
#
# Mixed precision keeps **FP32 master weights**, runs the forward and backward passes in FP16 (matrix
# products with FP32 accumulation, as on Tensor Cores), and updates the FP32 weights with the FP16 gradients.
# The danger: gradients below half of FP16's smallest subnormal (printed in section 1) round to exactly zero.
# Below, a two-layer MLP is
# trained with `labkit.xp` (NumPy here, CuPy on a GPU) on a regression whose targets are small — as residuals
# are late in training — with a mean-squared loss over many outputs, so the gradients are tiny.

# %%
f16, f32 = xp.float16, xp.float32
B, D, H, O = 128, 16, 32, 64                      # batch, inputs, hidden units, outputs
rng_np = np.random.default_rng(6)
X = xp.asarray(rng_np.standard_normal((B, D)), dtype=f32)
W1_teacher = xp.asarray(rng_np.standard_normal((D, H)) / np.sqrt(D), dtype=f32)
W2_teacher = xp.asarray(rng_np.standard_normal((H, O)) / np.sqrt(H), dtype=f32)
Y = 1e-4 * (xp.maximum(X @ W1_teacher, 0) @ W2_teacher)     # small targets
W1_start = xp.asarray(rng_np.standard_normal((D, H)) / np.sqrt(D), dtype=f32)
W2_start = xp.asarray(1e-4 * rng_np.standard_normal((H, O)) / np.sqrt(H), dtype=f32)


def mm16(a, b):
    """FP16 inputs, FP32 accumulation, FP16 result: an emulation of a Tensor Core matrix product (with IEEE sums)."""
    return (a.astype(f32) @ b.astype(f32)).astype(f16)


def gradients(W1, W2, scale, fp16=True):
    """Loss and weight gradients of 0.5·mean((y − Y)²); with fp16=True the passes run in FP16 with the loss scaled."""
    if not fp16:
        h = xp.maximum(X @ W1, 0)
        r = h @ W2 - Y
        g = r / r.size
        return float(0.5 * xp.mean(r * r)), X.T @ ((g @ W2.T) * (h > 0)), h.T @ g
    x, w1, w2 = X.astype(f16), W1.astype(f16), W2.astype(f16)
    h = xp.maximum(mm16(x, w1), f16(0))
    r = mm16(h, w2).astype(f32) - Y
    g = (r * (scale / r.size)).astype(f16)           # gradient of the scaled loss, stored in FP16
    dW2 = mm16(h.T, g)
    dW1 = mm16(x.T, mm16(g, w2.T) * (h > 0))
    return float(0.5 * xp.mean(r * r)), dW1, dW2

# %% [markdown]
# ### Exercise 11 — dynamic loss scaling
#
# Static loss scaling multiplies the loss by a constant `S` (the gradients scale with it and leave the
# underflow zone) and divides the gradients by `S` in FP32 before the update. Dynamic loss scaling picks `S`
# itself: start large; when the FP16 gradients contain inf or NaN, skip the step, halve `S` and reset the count of
# good steps to 0; otherwise apply the step and count it, and when the count reaches `growth_interval`, double `S`
# and reset the count to 0. Write the update rule: `update_scale` is called once per step with this step's
# `found_inf` and the count so far, and returns the new scale, the new count and whether to apply the step.

# %% tags=["exercise"]
def update_scale(scale: float, found_inf: bool, good_steps: int, growth_interval: int) -> tuple[float, int, bool]:
    """Return (new_scale, new_good_steps, apply_step)."""
    # BEGIN SOLUTION
    if found_inf:
        return scale / 2, 0, False
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2, 0, True
    return scale, good_steps, True
    # END SOLUTION
    # BEGIN SKELETON
    ...  # return (new_scale, new_good_steps, apply_step) for the three cases: overflow, growth, neither
    # END SKELETON


# %%
labkit.check.loss_scale(update_scale);

# %%
scaler = labkit.check.solved_or_reference("06.loss-scale", update_scale)


def train(mode, steps=60, lr=2.0, scale=1.0, growth_interval=20):
    W1, W2 = W1_start.copy(), W2_start.copy()           # FP32 master weights
    good, history = 0, {"loss": [], "zero_dW1": [], "zero_dW2": [], "scale": [], "skipped": 0}
    for _ in range(steps):
        loss, dW1, dW2 = gradients(W1, W2, scale, fp16=(mode != "fp32"))
        history["loss"].append(loss)
        history["zero_dW1"].append(float((dW1 == 0).mean()))
        history["zero_dW2"].append(float((dW2 == 0).mean()))
        history["scale"].append(scale)
        if mode == "dynamic":
            finite = bool(xp.isfinite(dW1).all() and xp.isfinite(dW2).all())
            scale, good, apply = scaler(scale, not finite, good, growth_interval)
            if not apply:
                history["skipped"] += 1
                continue
            used = history["scale"][-1]
        else:
            used = scale
        W1 -= lr * dW1.astype(f32) / used                   # unscale in FP32, update the master weights
        W2 -= lr * dW2.astype(f32) / used
    return history


with np.errstate(over="ignore", invalid="ignore"):
    results = {
        "FP32": train("fp32"),
        "FP16, no scaling": train("fp16"),
        "FP16, static scale 2^16": train("static", scale=2.0**16),
        "FP16, dynamic scale": train("dynamic", scale=2.0**48),
    }
for label, h in results.items():
    print(f"{label:26s} loss {h['loss'][0]:.3e} -> {h['loss'][-1]:.3e}   zero gradients: dW1 {100 * h['zero_dW1'][-1]:5.1f}%, "
          f"dW2 {100 * h['zero_dW2'][-1]:5.1f}%   final scale {h['scale'][-1]:g}, skipped steps {h['skipped']}")

# %% tags=["nbval-ignore-output"]
import plotly.graph_objects as go

from labkit.figstyle import log_axis

fig = go.Figure()
for label, h in results.items():  # FP32 wide and light underneath: the static-scale curve runs on top of it
    fig.add_scatter(y=h["loss"], mode="lines", name=label,
                    line={"width": 7, "color": "rgba(99, 110, 250, 0.35)"} if label == "FP32" else {"width": 2})
fig.update_layout(title="Training loss (FP32 master weights; FP16 passes)", xaxis_title="step", height=380,
                  yaxis=log_axis([v for h in results.values() for v in h["loss"]], title="loss", exponentformat="e"))
fig

# %% [markdown]
# Without scaling, the FP16 gradients end up all zero (the percentages above) and the loss stops falling far
# above where FP32 training gets. A static scale lifts the gradients into FP16's range; the
# dynamic scaler starts too high, overflows and skips steps (counted above) while it halves the scale until the
# gradients are finite; then it trains like FP32, ending a little higher for the steps it skipped.
# BF16 has FP32's exponent range, which is why BF16 training usually needs no loss scaling.

# %% [markdown]
# ## 7. Dissecting the headlines
#
# The V100's headline figure is its FP16 Tensor Core peak (printed below). Where does it come from? labkit.hw has the
# SM count and the Tensor Cores per SM (from the V100 whitepaper), but no clock — the FP32 peak gives one:
# `FP32 peak = SMs × FP32 cores per SM × 2 FLOP × clock`.

# %%
v100 = hw.gpu("V100")
for label, fig_ in (("SMs", v100.sm_count), ("FP32 cores per SM", v100.fp32_cores_per_sm),
                    ("Tensor Cores per SM", v100.tensor_cores_per_sm), ("FP32 peak", v100.peak("fp32")),
                    ("FP16 Tensor Core peak", v100.peak("fp16"))):
    print(f"{label:22s} {fig_}")

# %% [markdown]
# ### Exercise 12 — FMAs per Tensor Core per clock
#
# Compute the implied clock from the FP32 peak, then how many fused multiply-adds (2 FLOP each) one V100
# Tensor Core must do per clock to reach the FP16 peak. Use the figures from `v100`, not typed-in numbers.

# %% tags=["exercise"]
# BEGIN SOLUTION
clock_hz = v100.peak("fp32").value * 1e12 / (v100.sm_count.value * v100.fp32_cores_per_sm.value * 2)
fma_per_tc_per_clock = v100.peak("fp16").value * 1e12 / (v100.sm_count.value * v100.tensor_cores_per_sm.value * 2 * clock_hz)
# END SOLUTION
# BEGIN SKELETON
clock_hz = ...
fma_per_tc_per_clock = ...
# END SKELETON

# %%
labkit.check.v100_fma(fma_per_tc_per_clock);

# %% [markdown]
# The same dissection for the A100 (labkit does it in `T.dissect_tensor_peak`): TF32 runs at half the FP16
# rate per Tensor Core, and the A100 has fewer, bigger Tensor Cores per SM than the V100.

# %%
for gpu_name, p in (("V100", "fp16"), ("A100", "tf32"), ("A100", "fp16")):
    print(T.dissect_tensor_peak(gpu_name, p), end="\n\n")

# %% [markdown]
# The A100 launch claimed "up to 20×" over Volta. The figures behind it, from labkit.hw:

# %%
a100 = hw.gpu("A100")
tf32_sparse, v100_fp32 = a100.peak("tf32", sparse=True), v100.peak("fp32")
print(f"A100 TF32 with sparsity {tf32_sparse}  /  V100 FP32 {v100_fp32}  =  {tf32_sparse.value / v100_fp32.value:.1f}×")
print(f"A100 TF32 dense {a100.peak('tf32')}  /  V100 FP32  =  {a100.peak('tf32').value / v100_fp32.value:.1f}×")
print(f"A100 TF32 dense  /  V100 FP16 Tensor Core {v100.peak('fp16')}  =  {a100.peak('tf32').value / v100.peak('fp16').value:.2f}×")
print(f"A100 FP32  /  V100 FP32  =  {a100.peak('fp32').value / v100_fp32.value:.2f}×")

# %% [markdown]
# So the "20×" compares a Tensor Core format, with 2:4 structured sparsity, against plain FP32 on CUDA cores. The
# sparse rate needs one operand (in practice the weights) pruned in advance to two non-zeros in every four and a
# sparse kernel (`mma.sp`, cuSPARSELt, TensorRT): an inference technique; training and most inference run at the
# dense rate.
# Dense TF32 against V100 FP32 is the honest "FP32 code, no changes" speed-up; against V100's own Tensor Cores
# the gain is much smaller; FP32 on CUDA cores barely moved. And H100's dissection? Its FP32 and Tensor Core
# peaks do not assume the same clock, so the FP32-implied clock gives a number that is not a whole count:

# %%
print(T.dissect_tensor_peak("H100", "fp16"))

# %% [markdown]
# ## What you learned
#
# - A format's exponent bits set its range and its mantissa bits its precision; FP16 runs out of range at
#   both ends, BF16 and TF32 keep FP32's range, FP8 needs scaling; E4M3 has no infinity, so an overflow saturates
#   (`.satfinite`) or becomes NaN, depending on the conversion.
# - Rounding is round-to-nearest-even on the bit pattern; TF32 rounding is three integer operations.
# - GEMM error is set by the input format when the accumulator is FP32, and grows with K when it is not; labkit sums
#   in FP32 in a fixed order so the table is the same on every CPU, and a CPU emulation with IEEE sums is usually
#   below a Tensor Core's error. TF32 is used for FP32 matrix products only when the program enables it (cuBLAS math
#   mode, PyTorch `fp32_precision = "tf32"`, `CUPY_TF32=1`); PyTorch's cuDNN convolutions use it by default.
# - Tensor Cores make the narrow formats fast: the GPU run (or the model) shows the gap to FP32.
# - A GEMM's speed is bounded by its FLOPs over the peak and its bytes over the bandwidth: thin GEMMs are memory-bound.
# - WMMA exposes Tensor Cores to CUDA C++ one 16×16×16 fragment at a time, warp by warp, on every GPU since Volta;
#   Hopper's peak needs `wgmma.mma_async` (sm_90a, a warpgroup reading B, and A too if it likes, from shared memory)
#   fed by TMA, and data-centre Blackwell (sm_100a/sm_103a) has `tcgen05` (Blackwell RTX and DGX Spark keep `mma.sync`).
#   A WMMA kernel that loads its fragments for every product needs 4× the bytes per clock shared memory gives; with
#   register reuse the demand falls to what the SM gives, yet warp-level `mma.sync` still does not reach Hopper's
#   dense peak, which needs `wgmma`.
# - Hopper's Tensor Cores keep about 14 bits when they accumulate FP8 products; cuBLAS and CUTLASS promote partial
#   sums to FP32 by default unless fast accumulation is asked for, and DeepSeek-V3's own kernels promote every 128
#   products. FP8 needs a scale: one per tensor (Transformer Engine's delayed or current scaling, E4M3 forward, E5M2
#   gradients; the delayed scale is `fp8_max / amax / 2**margin` over an amax history) loses rows far below the
#   largest; block scaling keeps them — 128-element blocks with FP32 scales on Hopper (TE 2.x, DeepSeek-V3), and on
#   Blackwell MXFP8, MXFP4 and NVFP4 with the block scales read by the Tensor Cores. MX scales follow OCP v1.0's floor
#   rule (which clamps the block maxima above 448) or NVIDIA's round-up rule (Transformer Engine's MXFP8 recipe,
#   which clamps none); NVFP4 scales blocks of 16 with E4M3 under an FP32 tensor scale.
# - FP16 training needs FP32 master weights and loss scaling; dynamic scaling finds the scale by itself.
# - Headlines mix precisions and sparsity: take them apart into SMs × units × work per clock × clock.
#
# Next: [Lab 07 — bandwidth and NVLink](07-bandwidth-and-nvlink.ipynb).
