# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 00 — Start here
#
# **Learning objectives**
# - Check your environment and know which mode you are in: `gpu` or `sim`.
# - Write, launch and check your first CUDA kernel from Python.
# - Use the course's checks and hints, and read the PTX your kernel compiles to.
#
# **Prerequisites:** Python and NumPy. No GPU needed.
#
# **Time:** 20 minutes (teaching 10, exercises 10)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %% [markdown]
# ## How this course works
#
# Every lab is a notebook with explanations, exercises and checks. The same notebooks run in two modes:
#
# - **`gpu`**: a CUDA driver and an NVIDIA GPU are present. Kernels run on the device, `labkit.xp` is CuPy
#   and timings come from CUDA events.
# - **`sim`**: no GPU. Kernels run in Numba's CUDA *simulator* on your CPU, `labkit.xp` is NumPy, problem sizes
#   shrink so that a lab stays fast, and every timing is labelled as a CPU time. A simulator timing says
#   nothing about GPU speed; what it does show is whether your kernel is *correct*.
#
# `labkit.setup()` picks the mode once per kernel session and printed it above. Set `LABKIT_MODE=sim` before
# starting Jupyter to force the simulator on a GPU machine. The object it returns describes the device:

# %% tags=["nbval-ignore-output"]
print("mode:", env.mode)
print("device:", env.device_name)
print("compute capability:", env.compute_capability, "| SMs:", env.sm_count, "| GPUs:", env.gpu_count)

# %% [markdown]
# `labkit doctor` (in a terminal, or below) reports the whole environment: packages, driver, GPUs, NVLink,
# the PTX toolchain that compiles kernels even without a GPU, and, on a GPU, what each lab will do on it: a T4 has no
# BF16 or FP8 Tensor Cores and no thread block clusters, so those parts say so and show a model or PTX instead.
# `labkit doctor --profile T4` (or L4, H100, RTX 5090, ...) shows the same for a GPU you do not have.

# %% tags=["nbval-ignore-output"]
print(labkit.doctor.render(labkit.doctor.report()))

# %% [markdown]
# ## Your first kernel
#
# A CUDA kernel is a function that many threads run at once. Threads come in *blocks*, blocks form a *grid*.
# Each thread finds the element it owns from its position: `cuda.grid(1)` is
# `blockIdx.x * blockDim.x + threadIdx.x`, the thread's global index.
#
# The grid comes in whole blocks, so it usually has more threads than elements. With 1,000 elements and
# blocks of 128 threads you launch `ceil(1000 / 128) = 8` blocks, that is 1,024 threads; the last 24 must not
# touch memory. This *bounds check* is the most common source of bugs in CUDA code.

# %%
import numpy as np
from numba import cuda

threads_per_block = 128
n = 1000
blocks = (n + threads_per_block - 1) // threads_per_block
print(f"{n} elements, {blocks} blocks of {threads_per_block} threads = {blocks * threads_per_block} threads; "
      f"{blocks * threads_per_block - n} of them must do nothing")

# %% [markdown]
# ### Exercise 1 — add two vectors
#
# Write the body of `vector_add` so that thread `i` sets `out[i] = a[i] + b[i]`, and threads past the end
# of the arrays do nothing. Then run the check below it. The check launches your kernel on fresh random
# inputs of sizes drawn anew each run (one element, sizes that are not multiples of the block size, several
# blocks), with blocks of 32 up to 1024 threads, poisons the output first and watches for writes past its end.

# %% tags=["exercise"]
@cuda.jit
def vector_add(a, b, out):
    # BEGIN SOLUTION
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
    # END SOLUTION
    # BEGIN SKELETON
    # 1. the global index of this thread:  i = ...
    # 2. only if i is inside the arrays:    out[i] = a[i] + b[i]
    pass
    # END SKELETON


# %%
labkit.check.vector_add(vector_add);

# %% [markdown]
# Stuck? `labkit.check.hint("00.vector-add")` prints the next hint each time you run it, from a nudge to
# the answer's shape. `labkit.check.exercises()` lists every exercise of the course and your last result.

# %%
labkit.check.hint("00.vector-add")

# %% [markdown]
# ## Launching it yourself
#
# The check launched the kernel for you. Here is the whole round trip: copy the inputs to the device, launch
# `blocks` blocks of `threads_per_block` threads, copy the result back and compare with NumPy. If your kernel
# has not passed its check yet, the cells below use labkit's reference kernel and say so.

# %%
kernel = labkit.check.solved_or_reference("00.vector-add", vector_add)

n = labkit.size(gpu=10_000_000, sim=3_000)
a = np.random.default_rng().random(n, dtype=np.float32)
b = np.random.default_rng().random(n, dtype=np.float32)
d_a, d_b = cuda.to_device(a), cuda.to_device(b)
d_out = cuda.device_array_like(d_a)
blocks = (n + threads_per_block - 1) // threads_per_block
kernel[blocks, threads_per_block](d_a, d_b, d_out)
print("matches NumPy:", np.allclose(d_out.copy_to_host(), a + b))

# %% [markdown]
# ## Timing it honestly
#
# `labkit.bench.measure` runs a function a few times untimed (warm-up), then times several repetitions and
# reports the median and the spread. On a GPU it uses CUDA events; given the bytes moved it reports GB/s and
# the percent of the device's datasheet memory bandwidth. In the simulator the same call gives a CPU time,
# and says so.

# %% tags=["nbval-ignore-output"]
moved = 3 * n * a.itemsize  # read a and b, write out
t = labkit.bench.measure(lambda: kernel[blocks, threads_per_block](d_a, d_b, d_out), name="vector_add",
                         bytes=moved, repeat=5 if env.is_gpu else 2, warmup=1)
print(t)

# %% [markdown]
# ## What your kernel compiles to
#
# Numba compiles a kernel to PTX, NVIDIA's virtual instruction set, which the driver then translates for the
# actual GPU. `labkit.ptx` does the first step on any machine, GPU or not, for the architecture you name:
# `sm_70` is Volta (V100), `sm_80` Ampere (A100), `sm_90` Hopper (H100, H200). Look for two 32-bit loads
# `ld.f32` (`a[i]`, `b[i]`), one store `st.f32` (`out[i]`) and the comparison that implements your bounds check
# (`setp`). Numba writes them with *generic* addressing: the instruction names no state space (no `ld.global`), and
# the hardware finds from the address that it lies in global memory. The many `ld.param` lines fetch the kernel's
# arguments (each array arrives as a pointer, its shape and its strides). The summary counts `ld.f32` and `st.f32`
# as global loads and stores, which is where these arrays live.

# %%
ptx = labkit.ptx.compile(kernel, "void(float32[:], float32[:], float32[:])", arch="sm_90")
ptx.show("ld.f32", "st.f32", "setp")

# %% [markdown]
# ## The course map
#
# The labs, their times and what each builds on, from the course's manifest (`labkit.course`):

# %%
from IPython.display import Markdown

Markdown(labkit.course.course_map())

# %% [markdown]
# Every lab has a solved twin in the `solutions/` folder next to the labs. Try first: the checks tell you
# when you are right, and the hints get you unstuck.
#
# ## What you learned
# - Which mode you are in and what its timings mean.
# - A kernel is a function run by a grid of blocks of threads; each thread computes its own index and must
#   check it against the array's length.
# - `labkit.check`, `labkit.check.hint`, `labkit.bench.measure` and `labkit.ptx` — you will use them in every lab.
#
# **Next:** [Lab 01 — GPU and DGX architecture](01-gpu-and-dgx-architecture.ipynb), or go straight to writing
# kernels in [Lab 02 — First kernels](02-first-kernels.ipynb).
