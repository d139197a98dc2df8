# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 02 — First kernels
#
# **Learning objectives**
# - Index threads in one and two dimensions: `cuda.grid`, `cuda.gridsize`, rows and columns.
# - Write grid-stride loops, which work for any grid size, and bounds checks, which keep idle threads harmless.
# - Choose a launch configuration: blocks per grid and threads per block.
# - Measure what host↔device copies cost and keep data on the device between launches.
# - Read the PTX of your own kernel, and keep FP64 out of it: float literals as `np.float32(...)`.
#
# **Prerequisites:** [Lab 00](00-start-here.ipynb) (a first kernel, checks and hints).
#
# **Time:** 60 minutes (teaching 25, exercises 35)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import numpy as np
from numba import cuda

xp = labkit.xp  # CuPy on a GPU, NumPy in the simulator
rng = np.random.default_rng()

# %% [markdown]
# ## Threads, blocks and grids, again
#
# A launch `kernel[blocks, threads_per_block](...)` starts `blocks × threads_per_block` threads. Inside, each
# thread knows `cuda.threadIdx.x` (its place in the block), `cuda.blockIdx.x` (its block), `cuda.blockDim.x`
# (threads per block) and `cuda.gridDim.x` (blocks). `cuda.grid(1)` combines them into the global index
# `blockIdx.x * blockDim.x + threadIdx.x`; `cuda.gridsize(1)` is the number of threads in the grid.
#
# The map below colours each of 100 elements by the block whose thread handles it, for blocks of 32 threads.
# Hover over an element to see its block and thread. The grid has 4 blocks, 128 threads: 28 have nothing to do.

# %% tags=["nbval-ignore-output"]
labkit.widgets.thread_map_figure(100, 32)

# %% [markdown]
# ## Grid-stride loops
#
# One thread per element ties the grid to the data: a bigger array needs a bigger grid, and a launch with too
# few threads silently skips elements. A **grid-stride loop** decouples them: thread `i` handles elements
# `i`, `i + S`, `i + 2S`, ... where `S = cuda.gridsize(1)` is the number of threads in the whole grid.
# Consecutive threads still touch consecutive elements in every round, which keeps memory accesses efficient
# (lab 03), and the loop's end is the bounds check. Here is the same map when only 2 blocks of 32 threads are
# launched without a loop: elements 64 to 99 are never reached.

# %% tags=["nbval-ignore-output"]
labkit.widgets.thread_map_figure(100, 32, grid=2)

# %% [markdown]
# ### Exercise 1 — SAXPY with a grid-stride loop
#
# SAXPY ("single-precision a·x plus y") is the classic first BLAS routine: `out[i] = a * x[i] + y[i]`.
# Write it with a grid-stride loop. The check launches it on sizes drawn fresh each run, with grids larger than the
# data, exactly the right size, and much smaller (each thread loops ten times or more), blocks of 32 to 1024
# threads, and a poisoned output guarded on both sides.

# %% tags=["exercise"]
@cuda.jit
def saxpy(a, x, y, out):
    # BEGIN SOLUTION
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]
    # END SOLUTION
    # BEGIN SKELETON
    # for i in range(<your global index>, <number of elements>, <threads in the grid>):
    #     out[i] = ...
    pass
    # END SKELETON


# %%
labkit.check.saxpy(saxpy);

# %% [markdown]
# ### What each thread touched
#
# `labkit.show` runs a kernel in the simulator with every read and write recorded, and draws it: the grid of
# threads, then for the thread, warp or block you pick, the elements it read (blue) and wrote (orange) in each
# array, and how many 32-byte sectors each warp's request touched. Here SAXPY on 150 elements with only 2 blocks
# of 32 threads: with a grid-stride loop, thread 5 of block 0 handles elements 5, 69 and 133. Beside it, the
# reference kernel on the same input, with the score GPU-Puzzles gives its puzzles: the most global reads and
# writes any one thread makes. (Until your SAXPY passes, the reference stands in for it.)

# %% tags=["nbval-ignore-output"]
n_show = 150
labkit.show(labkit.check.solved_or_reference("02.saxpy", saxpy), np.float32(2.0), rng.random(n_show, dtype=np.float32),
            rng.random(n_show, dtype=np.float32), np.zeros(n_show, np.float32), grid=2, block=32,
            reference=labkit.kernels.get("saxpy"))

# %% [markdown]
# Now run SAXPY on a larger array with a deliberately small grid, and compare with the array library's own
# `a * x + y` (CuPy on a GPU, NumPy here). Both are timed with `labkit.bench.measure`; SAXPY reads `x` and `y`
# and writes `out`, 12 bytes per element, so the GB/s it reports is the memory bandwidth the kernel achieved.

# %%
k_saxpy = labkit.check.solved_or_reference("02.saxpy", saxpy)
n = labkit.size(gpu=1 << 25, sim=2_000)
a = np.float32(2.5)
x = rng.random(n, dtype=np.float32)
y = rng.random(n, dtype=np.float32)
d_x, d_y, d_out = cuda.to_device(x), cuda.to_device(y), cuda.device_array(n, np.float32)
blocks, threads = (4 * (env.sm_count or 1), 256) if env.is_gpu else (2, 128)
k_saxpy[blocks, threads](a, d_x, d_y, d_out)
print(f"{n} elements with {blocks} blocks of {threads} threads: matches NumPy:", np.allclose(d_out.copy_to_host(), a * x + y))

# %% tags=["nbval-ignore-output"]
X, Y = xp.asarray(x), xp.asarray(y)
timings = [
    labkit.bench.measure(lambda: k_saxpy[blocks, threads](a, d_x, d_y, d_out), name="saxpy (your kernel)",
                         bytes=12 * n, repeat=10 if env.is_gpu else 1, warmup=1 if env.is_gpu else 0),
    labkit.bench.measure(lambda: a * X + Y, name=f"a * x + y ({xp.__name__})", bytes=12 * n,
                         repeat=10 if env.is_gpu else 3),
]
print(labkit.bench.table(timings))

# %% [markdown]
# In `sim` mode both times are CPU times and say nothing about a GPU: the simulator runs the CUDA threads in
# Python, one after another. On a GPU, try more blocks (say 32 per SM): a memory-bound kernel needs many warps in flight to
# hide the memory latency, which is what lab 03 is about.
#
# ### Why the first launch is slower
#
# `labkit.bench.measure` makes warm-up calls before it times anything, and the first call is why. Numba compiles a
# kernel when it is first launched with a new set of argument types: Python bytecode to LLVM IR to PTX, then the
# driver turns the PTX into machine code for this GPU. That takes far longer than the launch itself; later launches
# with the same types reuse the compiled code. The cell below launches a fresh copy of SAXPY twice and times
# each launch (on a GPU; the simulator compiles nothing, so there the two launches cost the same).

# %% tags=["nbval-ignore-output"]
import time

if env.is_gpu:
    fresh = cuda.jit(k_saxpy.py_func)  # a new kernel object: nothing compiled yet
    for call in ("first launch (compiles)", "second launch"):
        t0 = time.perf_counter()
        fresh[blocks, threads](a, d_x, d_y, d_out)
        cuda.synchronize()
        print(f"{call}: {(time.perf_counter() - t0) * 1e3:.1f} ms (wall clock)")
else:
    print("sim mode: the simulator runs the Python function directly and compiles nothing, so the first launch is "
          "not slower here. On a GPU the first launch includes the compilation.")

# %% [markdown]
# ## Two dimensions: rows and columns
#
# Images and matrices are 2-D. Launch a 2-D grid of 2-D blocks, `kernel[(gx, gy), (bx, by)]`, and get both
# coordinates with `cuda.grid(2)`, which returns `(x, y)`. The convention that keeps memory accesses fast: **x is
# the column** (it changes fastest between neighbouring threads, as the column index does between neighbouring
# elements of a row-major array), **y is the row**. So write `col, row = cuda.grid(2)` and index `img[row, col]`.
# Below: a 20 × 45 array under blocks of 16 × 8 threads.

# %% tags=["nbval-ignore-output"]
labkit.widgets.thread_map_figure((20, 45), (16, 8))

# %% [markdown]
# ### Exercise 2 — greyscale
#
# `img` is an RGB image of shape `(rows, cols, 3)`, `uint8`. Write `out[row, col]`, also `uint8`, as the luma
# `0.299 R + 0.587 G + 0.114 B` **rounded** to the nearest integer. Storing a float into a `uint8` array
# truncates it (3.9 becomes 3), so round on purpose. The check uses non-square images drawn fresh each run, 1 × 1,
# and block shapes up to 32 × 32; a row/column mix-up, a missing bounds check or a truncating store fails it.

# %% tags=["exercise"]
@cuda.jit
def grayscale(img, out):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = (np.float32(0.299) * img[row, col, 0] + np.float32(0.587) * img[row, col, 1]
             + np.float32(0.114) * img[row, col, 2])
        out[row, col] = int(v + np.float32(0.5))
    # END SOLUTION
    # BEGIN SKELETON
    # col, row = ...
    # if <inside the image>:
    #     out[row, col] = <rounded luma>
    pass
    # END SKELETON


# %%
labkit.check.grayscale(grayscale);

# %% [markdown]
# Your greyscale kernel on a 6 × 10 image with blocks of 4 × 4 threads: the grid of threads is 12 × 8, wider and
# taller than the image. Pick a thread of the last column or row of blocks (block `(2, 1)`): the ones outside the
# image read and write nothing, thanks to the bounds check. Each thread reads the three channels of its pixel.

# %% tags=["nbval-ignore-output"]
img_show = rng.integers(0, 256, (6, 10, 3)).astype(np.uint8)
labkit.show(labkit.check.solved_or_reference("02.grayscale", grayscale), img_show, np.zeros((6, 10), np.uint8),
            grid=(3, 2), block=(4, 4), reference=labkit.kernels.get("grayscale"))

# %% [markdown]
# A small synthetic image (a colour gradient) through the kernel:

# %% tags=["nbval-ignore-output"]
import plotly.express as px

k_grey = labkit.check.solved_or_reference("02.grayscale", grayscale)
rows, cols = labkit.size(gpu=(1080, 1920), sim=(24, 40))
step = labkit.size(gpu=8, sim=1)  # draw every step-th pixel: a full-HD figure would bloat the notebook
r_, c_ = np.mgrid[0:rows, 0:cols]
image = np.stack([255 * c_ / cols, 255 * r_ / rows, 128 + 0 * r_], axis=-1).astype(np.uint8)
d_grey = cuda.device_array((rows, cols), np.uint8)
k_grey[((cols + 15) // 16, (rows + 7) // 8), (16, 8)](cuda.to_device(image), d_grey)
px.imshow(d_grey.copy_to_host()[::step, ::step], color_continuous_scale="gray",
          title=f"greyscale of a {rows}×{cols} gradient" + (f" (every {step}th pixel)" if step > 1 else ""))

# %% [markdown]
# ## Float literals: FP64 where you did not ask for it
#
# In Python, `0.299` is a float64, and Numba keeps it one: `0.299 * img[row, col, 0]` converts the pixel to FP64 and
# multiplies in FP64. The values come out right, so no check on values notices; the PTX does. Here is the greyscale
# kernel written with bare literals, compiled for sm_90: every `.f64` instruction is a conversion to or from FP64
# (`cvt.rn.f64.u16`, `cvt.rzi.s64.f64`) or FP64 arithmetic (`mul.f64`, `fma.rn.f64`).

# %%
@cuda.jit
def grayscale_literals(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]
        out[row, col] = int(v + 0.5)


GREY_SIG = "void(uint8[:,:,:], uint8[:,:])"
f64_lines = labkit.ptx.compile(grayscale_literals, GREY_SIG, arch="sm_90").fp64()
print(f"bare literals: {len(f64_lines)} FP64 instructions")
for line in f64_lines:
    print("   ", line)

# %% [markdown]
# Writing each constant as `np.float32(0.299)` keeps the whole computation in FP32: a `uint8` times a `float32` is a
# `float32`. Your greyscale kernel (or labkit's, until yours passes), compiled the same way:

# %%
mine = labkit.ptx.compile(labkit.check.solved_or_reference("02.grayscale", grayscale), GREY_SIG, arch="sm_90")
print(f"your greyscale kernel: {len(mine.fp64())} FP64 instructions")

# %% [markdown]
# Why it matters: the data-centre HPC parts (V100, A100, H100) run FP64 at half their FP32 rate, but the GPUs built
# for graphics and inference run it at a small fraction, and so does a kernel that slips into FP64 there. From the
# throughput table in NVIDIA's programming guide (`labkit.hw.arithmetic_rates`):

# %%
for arch in ("sm_90", "sm_80", "sm_89", "sm_86"):
    r = labkit.hw.arithmetic_rates(arch)
    print(f"{arch} ({r.gpus}): FP64 at 1/{round(1 / r.fp64_fraction)} of the FP32 rate "
          f"({r.fp64_per_clock.text()} against {r.fp32_per_clock.text()} results per clock per SM)")
print("source:", labkit.hw.ARITHMETIC_SOURCE)

# %% [markdown]
# Other ways into FP64: `float(x)`, `math.sqrt` of a float64, and `/` between two integers (true division gives a
# float64). Numba's integer literals are harmless: `2 * x` with `x` a float32 stays a float32.
#
# ### Exercise 3 — pixels to float32, no FP64
#
# Neural networks take pixels as floats. Write `to_unit(img, out)`: `img` is a `uint8` image of shape `(rows, cols)`,
# `out` a `float32` array of the same shape, and `out[row, col] = img[row, col] / 127.5 - 1`, which maps 0–255 to
# −1…1. The check grades the values on fresh images and block shapes, then compiles your kernel and fails it if its
# PTX has FP64 instructions (the reference has none).

# %% tags=["exercise"]
@cuda.jit
def to_unit(img, out):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = img[row, col] / np.float32(127.5) - np.float32(1.0)
    # END SOLUTION
    # BEGIN SKELETON
    # col, row = ...
    # if <inside the image>:
    #     out[row, col] = img[row, col] / 127.5 - 1.0   <- right values, but FP64: write the constants as np.float32(...)
    pass
    # END SKELETON


# %%
labkit.check.to_unit(to_unit);

# %% [markdown]
# ## Choosing a launch configuration
#
# Two numbers per direction: threads per block and blocks per grid.
#
# - **Threads per block**: a multiple of 32, because the GPU runs threads in *warps* of 32 and a partial warp
#   wastes the rest. 128 or 256 is a good default; the most a block can have is printed below. Lab 03 shows
#   how the block size, registers and shared memory decide how many warps an SM can keep busy (occupancy).
# - **Blocks**: enough to cover the data (one thread per element), or, with a grid-stride loop, enough to fill
#   the GPU: a few times the number of SMs.

# %%
for arch in ("sm_70", "sm_80", "sm_90"):
    print(f"{arch}: at most {labkit.occupancy.ARCHS[arch].max_threads_per_block} threads per block")
print("source:", labkit.occupancy.SOURCE)

# %% [markdown]
# ### Exercise 4 — a 2-D grid
#
# Write `grid_for(shape, block)`: for an array of `shape = (rows, cols)` and blocks of `block = (bx, by)`
# threads (x along columns), return `(gx, gy)`, the smallest grid that covers every element. The check tries
# shapes and blocks drawn fresh each run, exact multiples and arrays thinner than one block included.

# %% tags=["exercise"]
def grid_for(shape, block):
    # BEGIN SOLUTION
    rows, cols = shape
    bx, by = block
    return ((cols + bx - 1) // bx, (rows + by - 1) // by)
    # END SOLUTION
    # BEGIN SKELETON
    # rows, cols = shape; bx, by = block
    # return (gx, gy)
    ...
    # END SKELETON


# %%
labkit.check.launch_config(grid_for);

# %% [markdown]
# How many threads does that grid waste? For a full-HD frame and three block shapes:

# %%
g = labkit.check.solved_or_reference("02.launch-config", grid_for)
for blk in [(16, 16), (32, 8), (128, 1)]:
    s = labkit.widgets.thread_map_summary((1080, 1920), blk, g((1080, 1920), blk))
    print(f"block {blk}: grid {s['grid']}, {s['threads']:,} threads, {s['idle']:,} idle "
          f"({100 * s['idle'] / s['threads']:.1f}%)")

# %% [markdown]
# ## The cost of host↔device transfers
#
# A GPU's memory is separate from the host's. `cuda.to_device` copies host → device over PCIe (or NVLink-C2C on
# Grace Hopper), `copy_to_host` copies back. The link is much slower than the GPU's own memory:

# %%
pcie, hbm = labkit.hw.link("PCIe 5").per_link, labkit.hw.gpu("H100").memory_bandwidth
print(f"PCIe 5.0 x16: {pcie.text()} per direction ({pcie.source})")
print(f"H100 SXM5 HBM3: {hbm.text()} ({hbm.source}), {hbm.value / pcie.value:.0f}× more")

# %% [markdown]
# So a kernel that reads each byte once runs far faster than the copies that feed it. Measure it here: copy
# `x` to the device, run SAXPY, copy the result back.

# %% tags=["nbval-ignore-output"]
h2d = labkit.bench.measure(lambda: cuda.to_device(x), name="host→device copy of x", bytes=4 * n, repeat=5)
kern = labkit.bench.measure(lambda: k_saxpy[blocks, threads](a, d_x, d_y, d_out), name="saxpy kernel", bytes=12 * n,
                            repeat=5 if env.is_gpu else 1, warmup=1 if env.is_gpu else 0)
d2h = labkit.bench.measure(lambda: d_out.copy_to_host(), name="device→host copy of out", bytes=4 * n, repeat=5)
print(labkit.bench.table([h2d, kern, d2h]))

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    print(f"one host→device copy of x takes as long as {h2d.median_s / kern.median_s:.1f} SAXPY kernels, "
          f"which each read two arrays and write one")
else:
    print("sim mode: the 'device' is host memory and the kernel is simulated; these times say nothing about a GPU.")

# %% [markdown]
#
# One more trap: pass a NumPy array straight to a kernel and Numba copies it to the device *and back* around
# every launch. Keep data on the device across launches and copy only at the ends.
#
# ### Exercise 5 — keep it on the device
#
# Write `repeated_saxpy(a, x, y, steps)`: apply `y ← a·x + y` `steps` times on the device and return the final
# `y` as a NumPy `float32` array, with two copies to the device and one back, however many steps. Use your SAXPY
# kernel (`k_saxpy`) with `out` = `y`: each element depends only on itself, so updating in place is safe.

# %% tags=["exercise"]
def repeated_saxpy(a, x, y, steps):
    # BEGIN SOLUTION
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for _ in range(steps):
        k_saxpy[blocks, threads](a, dx, dy, dy)
    return dy.copy_to_host()
    # END SOLUTION
    # BEGIN SKELETON
    # copy in once, launch `steps` times, copy out once
    ...
    # END SKELETON


# %%
labkit.check.transfers(repeated_saxpy);

# %% [markdown]
# ## What your kernel compiles to
#
# `labkit.ptx.compile` turns your SAXPY into PTX for an architecture of your choice, without a GPU. Look for the
# loads and stores in the summary (Numba unrolls the loop, so there are several of each; they are the generic
# `ld.f32` and `st.f32`, which reach global memory), the fused
# multiply-add `fma.rn.f32` that computes `a * x[i] + y[i]` in one instruction, and the branch (`bra`) back to the
# top of the grid-stride loop.

# %%
ptx = labkit.ptx.compile(k_saxpy, "void(float32, float32[:], float32[:], float32[:])", arch=env.arch)
ptx.show("fma", "bra")

# %% [markdown]
# ## What you learned
# - `cuda.grid` and `cuda.gridsize` in one and two dimensions; x is the column.
# - Grid-stride loops make a kernel correct for any grid; bounds checks keep idle threads harmless.
# - Threads per block: a multiple of 32, typically 128–256; blocks: enough to cover the data or fill the GPU.
# - Copies between host and device cost far more than a pass over device memory: copy once, launch many times.
# - A Python float literal is a float64 in a Numba kernel: write constants as `np.float32(...)` and check the PTX for
#   `.f64` instructions.
#
# **Next:** [Lab 03 — The memory hierarchy](03-memory-hierarchy.ipynb): coalescing, shared memory, bank
# conflicts and occupancy.
