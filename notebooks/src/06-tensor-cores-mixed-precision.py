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
# - Read FP32, TF32, FP16, BF16 and FP8 bit patterns: sign, exponent, mantissa, bias, subnormals.
# - Predict when a value overflows or underflows in FP16 and in BF16, and round to TF32 by hand.
# - Measure how GEMM error grows with the dot-product length K for each input precision and accumulator.
# - Predict a GEMM's TFLOP/s from its shape and the peak, compare Tensor Core GEMM throughput per precision with
#   the datasheet peaks (measured on a GPU), and write a WMMA kernel.
# - Train a small network in FP16 with FP32 master weights and fix vanishing gradients with loss scaling.
# - Take vendor headlines (V100's FP16 Tensor Core peak, A100's "up to 20×") apart into SMs, Tensor Cores and clocks.
#
# **Prerequisites:** [Lab 03](03-memory-hierarchy.ipynb) (memory hierarchy) and [Lab 05](05-cupy.ipynb) (CuPy, RawKernel).
# No GPU needed.
#
# **Time:** 80 minutes (teaching 30, exercises 50)

# %%
import labkit

env = labkit.setup()

# %%
import math
import warnings

import numpy as np

from labkit import hw, precision as P, tensorcores as T
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
# H100 Tensor Core uses when it multiplies FP32 matrices. BF16 keeps FP32's range with a 7-bit mantissa. The
# two FP8 formats trade the other way: E4M3 has more precision, E5M2 more range. The chart shows each range
# (light: subnormals, which fill the gap towards zero with fewer significant bits).

# %% tags=["nbval-ignore-output"]
W.range_chart()

# %% [markdown]
# `labkit.precision.bits` rounds a number to a format and shows its fields. Type numbers into the explorer
# below (try `0.1`, `65520`, `1e-8`, `3.0e38`, `inf`) and watch the same number in every format.

# %%
for name in ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"):
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
# check compares your answers with.

# %%
values = labkit.check.lab06.PREDICT_VALUES
print(values)
for name in ("fp16", "bf16"):
    i = P.format_info(name)
    print(f"{name}: max {i.max_normal:.6g}, min normal {i.min_normal:.6g}, min subnormal {i.min_subnormal:.6g}")

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
# rounds the same way; a conversion without saturation, such as `ml_dtypes.float8_e4m3fn` (NumPy's FP8 type),
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
# added with truncation (rounding toward zero) rather than round-to-nearest. labkit's emulation rounds every addition to nearest, so its errors are a **lower bound** on a
# Tensor Core's; the GPU run in section 4 can compare.
#
# `P.gemm(a, b, fmt, accumulate)` emulates that on the CPU. Below, `m×K` by `K×m` matrices with entries
# uniform in [0, 1) (all positive, so the sums grow like K — the hard case for a narrow accumulator). The
# error is `max|C − C_fp64| / max|C_fp64|`, against the float64 product of the unrounded inputs.

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
# roundings are independent and partly cancel in a long sum of positive terms (roughly as 1/√K); the FP32
# accumulator's own error, the top row, stays near 1e-7. With an FP16 or BF16 accumulator the error *grows* with K
# until the sum stops growing at all (each new product is below half a unit in the last place of the running
# sum). That is why Tensor Cores accumulate in FP32 for training, and why TF32 "feels like FP32" in most networks.

# %%
for label, (fmt, acc) in runs.items():
    if acc == "fp32":
        print(f"{label:20s} unit roundoff of the inputs {P.format_info(fmt).unit_roundoff:.1e}; "
              f"error at K={ks[0]} {curves[label][0]:.1e}, at K={ks[-1]} {curves[label][-1]:.1e}")

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
for gpu_name in ("V100", "A100", "H100", "H200"):
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
# ### Exercise 3b — predict a GEMM's TFLOP/s from its shape
#
# Not every GEMM is square. Write `predict_gemm(m, n, k, precision, gpu)`: the roofline's TFLOP/s for `C = A @ B`
# with `A` m×k and `B` k×n, from the GPU's dense peak and memory bandwidth in `labkit.hw`. Count the FLOPs, count the
# fewest bytes that must cross HBM (each matrix read or written once), and take the slower of the two limits. The
# check draws fresh shapes: near-square, thin (n of a few columns, as in decoding one token at a time) and with a
# short k, in several precisions on several GPUs. On a GPU it also times two FP16 GEMMs with CuPy and requires your
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
here = hw.match_device(env.device_name) if env.is_gpu else None
gpu_name = here.name if here is not None else "H200"
for cols in (1, 16, 128, 1024, 8192):
    line = f"{gpu_name} fp16 8192×{cols}×8192: predicted {predict(8192, cols, 8192, 'fp16', gpu_name):8.1f} TFLOP/s (model)"
    if env.is_gpu:
        import cupy

        a = cupy.random.standard_normal((8192, 8192), dtype=cupy.float32).astype(cupy.float16)
        b = cupy.random.standard_normal((8192, cols), dtype=cupy.float32).astype(cupy.float16)
        t = labkit.bench.measure(cupy.matmul, a, b, name="fp16 gemm", flops=2.0 * 8192 * cols * 8192, warmup=3, repeat=10)
        line += f"; measured {t.tflops:8.1f} TFLOP/s"
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
# ### Exercise 4 — complete the WMMA GEMM
#
# Fill in the loop body and the store. `A` is M×K and `B` K×N, both row-major, so the leading dimension of A
# is K and that of B is N. The check compiles your kernel to PTX and looks for the Tensor Core instructions, then
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
# multiply-accumulate) and `wmma.store.d`. Here it is for Volta (sm_70) and Hopper (sm_90):

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
# ### Exercise 5 — dynamic loss scaling
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
# ### Exercise 6 — FMAs per Tensor Core per clock
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
# So the "20×" compares a Tensor Core format, with 2:4 structured sparsity, against plain FP32 on CUDA cores.
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
# - GEMM error is set by the input format when the accumulator is FP32, and grows with K when it is not; a CPU
#   emulation with IEEE sums is a lower bound on a Tensor Core's error.
# - Tensor Cores make the narrow formats fast: the GPU run (or the model) shows the gap to FP32.
# - A GEMM's speed is bounded by its FLOPs over the peak and its bytes over the bandwidth: thin GEMMs are memory-bound.
# - WMMA exposes Tensor Cores to CUDA C++ one 16×16×16 fragment at a time.
# - FP16 training needs FP32 master weights and loss scaling; dynamic scaling finds the scale by itself.
# - Headlines mix precisions and sparsity: take them apart into SMs × units × work per clock × clock.
#
# Next: [Lab 07 — bandwidth and NVLink](07-bandwidth-and-nvlink.ipynb).
