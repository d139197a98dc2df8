# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 10 — Where next
#
# **Learning objectives**
# - Know where the tools of this course are going: the same Numba kernel under numba-cuda-mlir, a CUDA C++ kernel
#   launched through `cuda.core`, a device-wide reduction with `cuda.compute`, a GEMM with a fused epilogue through
#   nvmath-python.
# - Profile your own kernels: NVTX ranges around timed work, the `nsys` and `ncu` command lines for a lab's kernel
#   built with `lineinfo=True`, and what their reports show.
# - Debug your own kernels with `compute-sanitizer`: memcheck, racecheck and synccheck on the kernels of labs 02–04,
#   and what each report means.
#
# **Prerequisites:** [Lab 02](02-first-kernels.ipynb) to [Lab 05](05-cupy.ipynb); the later labs help. Every cell runs
# without a GPU and says what a GPU run adds; the GPU cells also need the package they name installed.
#
# **Time:** 25 minutes (teaching 25, exercises 0)

# %%
import labkit

env = labkit.setup()

# %%
import importlib.util
import inspect
import shutil

import numpy as np

xp = labkit.xp


def have(module: str) -> bool:
    """True when ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# %% [markdown]
# ## 1. The same kernel under numba-cuda-mlir
#
# The course pins numba-cuda 0.30, which is in maintenance mode: security and critical fixes only. New work goes to
# its successor, **numba-cuda-mlir**, which generates code through MLIR instead of LLVM IR and aims to run numba-cuda
# kernels unchanged: the import is the one line that changes, `from numba_cuda_mlir import cuda`. It has **no CUDA
# simulator**, which is why this course's `sim` mode stays on numba-cuda. Here is lab 02's SAXPY, the kernel both
# would compile:

# %%
print(inspect.getsource(labkit.kernels.source("saxpy")))

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("numba_cuda_mlir"):
    from numba_cuda_mlir import cuda as mlir_cuda

    @mlir_cuda.jit
    def saxpy_mlir(a, x, y, out):  # lab 02's SAXPY, word for word, under the new compiler
        for i in range(mlir_cuda.grid(1), out.size, mlir_cuda.gridsize(1)):
            out[i] = a * x[i] + y[i]

    n = 1 << 20
    x, y = np.random.default_rng().random((2, n), dtype=np.float32)
    out = np.zeros(n, np.float32)
    saxpy_mlir[(n + 255) // 256, 256](np.float32(2.0), x, y, out)
    print("numba-cuda-mlir SAXPY matches NumPy:", np.allclose(out, 2 * x + y))
elif env.is_gpu:
    print("numba-cuda-mlir is not installed: `pip install numba-cuda-mlir[cu12]` (or [cu13]) in a separate environment, "
          "then run this cell again. Keep the course's own environment on numba-cuda 0.30.")
else:
    print("sim mode: numba-cuda-mlir has no simulator, so its kernels need a GPU. The kernel above is unchanged; "
          "only the import differs.")

# %% [markdown]
# ## 2. A kernel through `cuda.core`
#
# `cuda.core` (part of NVIDIA's CUDA Python, installed with this course) is the Pythonic layer over the CUDA driver
# and NVRTC: a `Program` compiles CUDA C++ (`ProgramOptions` sets the architecture and the C++ standard),
# `compile("cubin")` gives an `ObjectCode`, `get_kernel` a `Kernel`, and `launch(stream, LaunchConfig(grid=...,
# block=...), kernel, *args)` runs it on a `Stream` from `Device().create_stream()`. It needs the CUDA driver even to
# compile, so without a GPU the cell below compiles the same source with labkit's NVRTC route and shows its PTX
# instead.

# %%
SAXPY_CU = r"""
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        out[i] = a * x[i] + y[i];
}
"""

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    import cupy
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    options = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17")
    kernel = Program(SAXPY_CU, code_type="c++", options=options).compile("cubin").get_kernel("saxpy")
    n = 1 << 20
    x, y = cupy.random.random(n, dtype=cupy.float32), cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(x)
    cupy.cuda.Device().synchronize()  # CuPy filled x and y on its own stream
    launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kernel,
           np.float32(2.0), x.data.ptr, y.data.ptr, out.data.ptr, np.uint64(n))
    stream.sync()
    print("cuda.core SAXPY matches CuPy:", bool(cupy.allclose(out, 2 * x + y)))
else:
    ptx = labkit.ptx.compile_cuda(SAXPY_CU, "sm_90")
    print("sim mode: cuda.core needs the CUDA driver, even to compile. The same source through NVRTC (labkit.ptx):")
    print(ptx.summary())

# %% [markdown]
# ## 3. A reduction with `cuda.compute`
#
# Lab 04 built a reduction by hand: a tree in shared memory, one atomic per block. `cuda.compute` (the `cuda-cccl`
# package: CUB's device-wide algorithms from Python) gives the tuned version in one call,
# `cuda.compute.reduce_into(d_in, d_out, OpKind.PLUS, n, h_init)`, with `d_` arrays on the device (CuPy) and `h_init`
# a one-element NumPy array. It also scans, sorts and transforms, and takes Python functions as operators.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("cuda.compute"):
    import cupy
    import cuda.compute
    from cuda.compute import OpKind

    d_in = cupy.random.random(1 << 24, dtype=cupy.float32)
    d_out = cupy.empty(1, dtype=cupy.float32)
    cuda.compute.reduce_into(d_in, d_out, OpKind.PLUS, d_in.size, np.zeros(1, np.float32))
    print(f"cuda.compute sum {float(d_out[0]):.6g}; CuPy's sum {float(d_in.sum()):.6g}")
elif env.is_gpu:
    print("cuda.compute is not installed: `pip install cuda-cccl[cu12]`, then run this cell again.")
else:
    values = np.random.default_rng(10).random(1000, dtype=np.float32)
    print("sim mode: cuda.compute runs on a GPU only. What reduce_into(d_in, d_out, OpKind.PLUS, n, h_init) computes, "
          f"here with NumPy: {values.astype(np.float64).sum():.6g} for {values.size} values")

# %% [markdown]
# ## 4. A GEMM with an epilogue through nvmath-python
#
# Lab 06's roofline says a thin GEMM is memory-bound; so is the bias and ReLU that usually follow it, as a second
# pass over the whole result. **nvmath-python** exposes cuBLASLt's **epilogues**: `nvmath.linalg.advanced.matmul(a,
# b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})` adds the bias and applies the ReLU while the tile
# is still on chip, so the result is written once. The cell computes the bytes the fusion saves for one shape.

# %%
m, n, k = 4096, 4096, 1024
size = 2  # bytes per FP16 element
gemm_bytes = size * (m * k + k * n + m * n)
second_pass = size * 2 * m * n  # read C, write relu(C + bias)
print(f"{m}x{n}x{k} FP16: the GEMM moves at least {gemm_bytes / 1e6:.1f} MB; a separate bias+ReLU pass "
      f"{second_pass / 1e6:.1f} MB more ({second_pass / gemm_bytes:.0%}) that the epilogue does not need")

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("nvmath"):
    import cupy
    from nvmath.linalg.advanced import MatmulEpilog, matmul

    a = cupy.random.standard_normal((m, k), dtype=cupy.float32).astype(cupy.float16)
    b = cupy.random.standard_normal((k, n), dtype=cupy.float32).astype(cupy.float16)
    bias = cupy.random.standard_normal((m, 1), dtype=cupy.float32).astype(cupy.float16)
    fused = matmul(a, b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
    plain = cupy.maximum(a @ b + bias, 0)
    print("epilogue result matches GEMM + bias + ReLU:", bool(cupy.allclose(fused, plain, rtol=1e-2, atol=1e-2)))
elif env.is_gpu:
    print("nvmath-python is not installed: `pip install nvmath-python[cu12]`, then run this cell again.")
else:
    print("sim mode: the epilogue runs inside cuBLASLt on a GPU. On one, this cell checks it against a @ b + bias "
          "followed by a ReLU.")

# %% [markdown]
# ## 5. Profiling your own kernels: NVTX, Nsight Systems, Nsight Compute
#
# **NVTX** ranges name stretches of your program on the profiler's timeline: with the `nvtx` package,
# `with nvtx.annotate("saxpy", color="green"):` around a `labkit.bench.measure(...)` call makes that measurement a
# labelled bar in Nsight Systems, next to the kernels and copies it launched.
#
# - **Nsight Systems** (`nsys`) shows the whole timeline: CPU, copies, kernels, NVTX ranges. Run a script, not the
#   notebook: `nsys profile --trace=cuda,nvtx -o saxpy python saxpy.py`, then `nsys stats saxpy.nsys-rep` for tables
#   (or open the report in the GUI). It answers: where does the time go, do copies and kernels overlap?
# - **Nsight Compute** (`ncu`) looks inside one kernel: `ncu --set full -k saxpy -o saxpy python saxpy.py`, then
#   `ncu --import saxpy.ncu-rep --csv`. It answers: how close to the memory or compute roof, which stalls, which line.
#   Build the kernel with `@cuda.jit(lineinfo=True)` so the report maps instructions back to your Python lines. It
#   needs access to the GPU's performance counters (on a shared machine, ask the administrator).
#
# The script below is what to profile: lab 02's SAXPY with line information and an NVTX range.

# %%
PROFILE_SCRIPT = '''import numpy as np, nvtx
from numba import cuda

@cuda.jit(lineinfo=True)
def saxpy(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]

n = 1 << 24
x, y = cuda.to_device(np.ones(n, np.float32)), cuda.to_device(np.ones(n, np.float32))
out = cuda.device_array(n, np.float32)
with nvtx.annotate("saxpy x10", color="green"):
    for _ in range(10):
        saxpy[1024, 256](np.float32(2.0), x, y, out)
    cuda.synchronize()
'''
print(PROFILE_SCRIPT)

# %% tags=["nbval-ignore-output"]
tools = {name: shutil.which(name) for name in ("nsys", "ncu", "compute-sanitizer")}
print("on this machine:", ", ".join(f"{k} {'at ' + v if v else 'not found'}" for k, v in tools.items()),
      "| nvtx package:", "installed" if have("nvtx") else "not installed (pip install nvtx)")
if not env.is_gpu:
    print("sim mode: the profilers need a GPU; save the script above as saxpy.py on a GPU machine and run the commands.")

# %% [markdown]
# ## 6. Debugging your own kernels: compute-sanitizer
#
# `compute-sanitizer` runs a program with its kernels instrumented; prefix the command, as for the profilers:
# `compute-sanitizer --tool memcheck python script.py`. Three tools fit the mistakes of labs 02–04:
#
# | tool | finds | the lab's mistake | what the report says (in words like these) |
# |---|---|---|---|
# | `memcheck` | reads and writes outside an allocation | lab 02's SAXPY without its bounds check, on a size that is not a multiple of the block | "Invalid \_\_global\_\_ write of size 4 bytes", the kernel, the thread and block, and the address "out of bounds" of the nearest allocation |
# | `racecheck` | hazards in **shared memory** only | lab 04's block sum without the barrier after a step | "Race reported between Write access … and Read access …", with the two source lines (with `lineinfo=True`) |
# | `synccheck` | misuse of barriers | lab 04's tree with `cuda.syncthreads()` inside `if t < s:` | "Barrier error detected. Divergent thread(s) in block", with the barrier's line |
#
# racecheck does not see global memory: lab 04's lost updates on a global counter pass it, which is why the course
# grades with its own strict simulator, where `find_race` sees both. In `sim` mode labkit's checks report the same
# three mistakes before you ever reach a GPU: a guarded output for out-of-bounds writes, the race detector, the
# divergent-barrier error. The kernels, ready to save as scripts:

# %%
SANITIZER_KERNELS = {
    "memcheck": '''@cuda.jit(lineinfo=True)
def saxpy_no_bounds(a, x, y, out):       # launch 2 blocks of 128 for out.size == 200
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]''',
    "racecheck": '''@cuda.jit(lineinfo=True)
def block_sum_no_barrier(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]           # no barrier after the step: the next step reads a value being written
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]''',
    "synccheck": '''@cuda.jit(lineinfo=True)
def block_sum_divergent(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
            cuda.syncthreads()           # only threads t < s reach this barrier
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]''',
}
for tool, source in SANITIZER_KERNELS.items():
    print(f"# compute-sanitizer --tool {tool} python {tool}_demo.py\n{source}\n")

# %% [markdown]
# ## What you learned
# - numba-cuda-mlir runs the same kernels with one changed import, but has no simulator; `cuda.core` compiles and
#   launches CUDA C++ from Python; `cuda.compute` and nvmath-python give tuned reductions and fused GEMM epilogues.
# - NVTX names your own ranges on the Nsight Systems timeline; Nsight Compute explains one kernel, line by line with
#   `lineinfo=True`.
# - compute-sanitizer's memcheck, racecheck (shared memory only) and synccheck find on a GPU what labkit's strict
#   simulator finds in `sim` mode.
#
# **Next:** back to [Lab 00 — Start here](00-start-here.ipynb) for the course map, or to any lab whose GPU cells you
# have not yet run on a GPU.
