# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 05 — CuPy: GPU arrays, custom kernels in CUDA C++, interop, streams and graphs
#
# **Learning objectives**
# - Write array code once that runs on NumPy (CPU) and CuPy (GPU), with broadcasting and ufuncs.
# - Estimate what host↔device copies cost next to the work done on the GPU.
# - Count the kernel launches and bytes that kernel fusion (`cupy.fuse`) saves, and measure them on a GPU.
# - Write `ElementwiseKernel`, `ReductionKernel` and `RawKernel`/`RawModule` kernels in CUDA C++ and read their PTX.
# - Pass GPU arrays to Numba and other libraries without copies (`__cuda_array_interface__`, DLPack).
# - Overlap copies with compute: split a copy → kernel → copy pipeline into chunks on several streams, ordered and
#   timed with events, from pinned memory; time GPU code with `cupyx.profiler.benchmark`.
# - Know what CuPy's memory pool, the stream-ordered allocator and managed memory do.
# - Capture the pipeline in a CUDA Graph and replay it per frame; measure what it saves in launch overhead on a GPU.
#
# **Prerequisites:** [Lab 02](02-first-kernels.ipynb) (first kernels: threads, blocks, bounds checks). Some C syntax helps.
#
# **Time:** 95 minutes (teaching 35, exercises 60)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import numpy as np

from labkit import cuda_cpp, cupylab, kernels_cuda

xp = labkit.xp  # CuPy on a GPU, NumPy in sim mode
print("array module:", xp.__name__)

# %% [markdown]
# ## 1. GPU arrays that look like NumPy
#
# CuPy implements most of NumPy's API on the GPU: `cupy.arange`, slicing, ufuncs, reductions, `cupy.linalg`.
# A CuPy array lives in device memory; operations on it launch kernels and return new device arrays.
# `labkit.xp` is CuPy in `gpu` mode and NumPy in `sim` mode, so the cells below run in both.

# %%
a = xp.arange(12, dtype=xp.float32).reshape(3, 4)
print(type(a).__module__, type(a).__name__, a.shape, a.dtype)
print(a.sum(axis=1), a.mean())

# %% [markdown]
# Crossing between host and device is always explicit: `xp.asarray(host_array)` copies to the device,
# `cupy.asnumpy(device_array)` (or `.get()`) copies back. `labkit.cupylab.asnumpy` does the right thing in both modes.
# Code that should run on either kind of array asks which module the array belongs to: `cupy.get_array_module(x)`,
# which `labkit.cupylab.array_module(x)` wraps (it returns NumPy when CuPy is not there).

# %%
def row_norms(x):
    m = cupylab.array_module(x)
    return m.sqrt((x * x).sum(axis=1))


print(cupylab.asnumpy(row_norms(a)))

# %% [markdown]
# ## 2. What a copy to the GPU costs
#
# A copy to the GPU crosses PCIe. An elementwise kernel reads and writes device memory (HBM). The model below
# takes both rates from `labkit.hw` (each with its source). It is a model: real copies reach a fraction of the
# link's rate, and less from pageable memory than from pinned memory (lab 07 measures both).

# %%
from labkit.gpu.profiles import ceiling, match

gpu_name, _ = ceiling(env)  # on a GPU, its own labkit.hw record; the H200 otherwise
here = match(env.device_name) if env.is_gpu else None  # its PCIe generation, from the device profile
print(cupylab.transfer_model(1 << 30, gpu=gpu_name, link=f"PCIe {here.pcie[0]}" if here else "PCIe 5"))

# %% [markdown]
# So copying data over, doing one cheap operation and copying it back spends nearly all its time on the bus.
# Keep data on the GPU across many operations, and copy only inputs and final results.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    import cupy as cp
    from cupyx.profiler import benchmark

    host = np.random.default_rng().standard_normal(1 << 26, dtype=np.float32)  # 256 MiB
    dev = cp.asarray(host)
    copy_in = benchmark(dev.set, (host,), n_repeat=10)
    one_pass = benchmark(lambda: dev * 2.0, (), n_repeat=10)
    t_copy, t_pass = np.median(copy_in.gpu_times[0]), np.median(one_pass.gpu_times[0])
    print(f"H2D copy (pageable host memory): {t_copy * 1e3:.2f} ms, {host.nbytes / t_copy / 1e9:.1f} GB/s")
    print(f"dev * 2.0 on the GPU:            {t_pass * 1e3:.3f} ms ({t_copy / t_pass:.0f}x faster than the copy)")
    print(f"(CUDA-event times on {env.device_name})")
else:
    print("sim mode: no device, so no copy to time. On a GPU this cell measures the same copy and kernel with "
          "cupyx.profiler.benchmark and compares them with the model above.")

# %% [markdown]
# ## 3. Broadcasting and ufuncs
#
# Ufuncs (`xp.exp`, `+`, `xp.maximum`, ...) apply elementwise; each call is one GPU kernel. Broadcasting stretches
# dimensions of size 1 without copying, so a column of row maxima `(rows, 1)` combines with a `(rows, cols)` matrix.
# `keepdims=True` keeps the reduced axis as size 1 for exactly this purpose.

# %%
m = xp.asarray(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], dtype=np.float32))
print(m.max(axis=1, keepdims=True).shape, "broadcasts against", m.shape)
print(m - m.max(axis=1, keepdims=True))

# %% [markdown]
# ### Exercise 1 — softmax on either device
#
# Write `softmax(x)` over the last axis, `exp(x) / sum(exp(x))` per row, so that it runs on NumPy and CuPy arrays
# alike and never leaves the device. It must survive inputs as large as ±800 (where `exp` overflows in float32 and
# float64): subtracting each row's maximum first changes nothing mathematically. Keep the input's dtype. The check
# uses shapes drawn fresh each run, and arrays whose rows differ in scale from 0.01 to 1000, where one maximum
# for the whole array is not enough.

# %% tags=["exercise"]
def softmax(x):
    # BEGIN SOLUTION
    m = cupylab.array_module(x)
    z = x - x.max(axis=-1, keepdims=True)
    e = m.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # m = cupylab.array_module(x); subtract the row max; exp; divide by the row sums
    # END SKELETON


# %%
labkit.check.softmax(softmax);

# %% [markdown]
# ## 4. Kernel fusion: fewer launches, fewer bytes
#
# `(x - mean) * inv_std * gamma + beta` runs as four kernels in NumPy or CuPy. Each one reads its array operands from
# memory and writes a temporary back, so the data travel through HBM four times. `cupy.fuse` compiles the whole
# function into **one** kernel: it reads `x`, `gamma` and `beta` once, keeps the temporaries in registers and writes
# the result once. An elementwise kernel is memory-bound, so its time follows the bytes it moves.
# `labkit.cupylab.traffic` traces the function and counts both (a model):

# %%
print(cupylab.traffic(cupylab.affine_normalize, 1 << 24, "float32", scalars=("mean", "inv_std")).table())

# %% [markdown]
# ### Exercise 2 — count before you fuse
#
# For `scaled_squared_error` below on `n` float32 elements (`n` is set in the next cell), give the number of kernel
# launches and the bytes moved through memory, without fusion (one kernel per operator, each temporary written to
# memory and read back) and with `cupy.fuse`. Count 4 bytes for every float32 element read or written; the scalars
# `w` and `b` are kernel arguments and move no array bytes. Python evaluates `w * (x - y) * (x - y) + b` left to
# right, and nothing shares the two `x - y`. Give bytes as plain integers (not MB). Count by hand; `traffic` is for
# checking yourself afterwards. The check wants these four counts exactly, as numbers.

# %%
import inspect

from labkit.check.lab05 import scaled_squared_error

n = 1 << 20
print(inspect.getsource(scaled_squared_error))

# %% tags=["exercise"]
# BEGIN SOLUTION
fusion_answer = {
    "launches_unfused": 5,
    "bytes_unfused": (3 + 2 + 3 + 3 + 2) * 4 * n,
    "launches_fused": 1,
    "bytes_fused": 3 * 4 * n,
}
# END SOLUTION
# BEGIN SKELETON
fusion_answer = {
    "launches_unfused": ...,
    "bytes_unfused": ...,
    "launches_fused": ...,
    "bytes_fused": ...,
}
# END SKELETON

# %%
labkit.check.fusion_traffic(fusion_answer);

# %% [markdown]
# On a GPU, `labkit.cupylab.fusion_benchmark()` times `affine_normalize` unfused and under `cupy.fuse` with
# `cupyx.profiler.benchmark` and puts the measured speed-up next to the model's.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    rec = cupylab.fusion_benchmark()
    print(f"unfused {rec['unfused_s'] * 1e3:.3f} ms, fused {rec['fused_s'] * 1e3:.3f} ms: {rec['speedup']:.2f}x "
          f"(model {rec['model_speedup']:.2f}x); fused kernel moves {rec['fused_gbps']:.0f} GB/s  [{rec['label']}]")
else:
    t = cupylab.traffic(cupylab.affine_normalize, 1 << 26, "float32", scalars=("mean", "inv_std"))
    print(f"sim mode: nothing to time. The model predicts {t.ratio:.2f}x from fusion for a memory-bound GPU; "
          "on a GPU this cell measures it.")

# %% [markdown]
# ## 5. ElementwiseKernel: the loop body in CUDA C++
#
# `cupy.ElementwiseKernel(in_params, out_params, operation, name)` writes the loop for you; you give the body for
# one element in CUDA C++. Types are NumPy names or placeholders (`T`) that CuPy fills in from the arguments.
# `labkit.cupylab.elementwise_kernel` takes the same four strings: on a GPU it builds the real CuPy kernel; without
# one it compiles an equivalent kernel with NVRTC (so you see the PTX) and can run it on the CPU stand-in.

# %%
p = kernels_cuda.get("squared_diff").parts
squared_diff = cupylab.elementwise_kernel(p["in_params"], p["out_params"], p["operation"], "squared_diff")
print(squared_diff.source())

# %%
squared_diff.compile("sm_90").show("ld.global", "st.global")

# %% [markdown]
# NVRTC unrolled the grid-stride loop, so the body appears several times; each copy has two loads, one store, a
# subtraction and a multiply: memory-bound, like every elementwise kernel. The bounds check `i < n` is built in.
#
# ### Exercise 3 — the Huber loss as an ElementwiseKernel
#
# With `d = |x - y|`, the Huber loss is `0.5 * d * d` when `d <= delta` and `delta * (d - 0.5 * delta)` otherwise.
# Build it with `cupylab.elementwise_kernel`: inputs `float32 x, float32 y, float32 delta`, output `float32 z`,
# name `"huber"`. Use `fabsf` and float literals (`0.5f`).

# %% tags=["exercise"]
# BEGIN SOLUTION
huber = cupylab.elementwise_kernel(
    "float32 x, float32 y, float32 delta",
    "float32 z",
    "float d = fabsf(x - y); z = d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta)",
    "huber",
)
# END SOLUTION
# BEGIN SKELETON
huber = ...  # cupylab.elementwise_kernel(in_params, out_params, operation, "huber")
# END SKELETON

# %%
labkit.check.huber(huber);

# %% [markdown]
# ## 6. ReductionKernel: map, reduce, post-map
#
# `cupy.ReductionKernel` needs a map expression per element, a reduce expression combining two partial results `a`
# and `b`, a post-map expression that writes the output from the final `a`, and the identity of the reduction. The
# GPU reduces in a tree, so the identity is combined many times: it must leave any value unchanged.
#
# ### Exercise 4 — the Euclidean norm
#
# Build `l2norm` with `cupylab.reduction_kernel("T x", "T y", map_expr, reduce_expr, post_map_expr, identity, "l2norm")`.
# The check runs it on five sizes and on an array of zeros, whose norm is 0 however the tree combines it, unless
# the identity is not the identity.

# %% tags=["exercise"]
# BEGIN SOLUTION
l2norm = cupylab.reduction_kernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
# END SOLUTION
# BEGIN SKELETON
l2norm = ...  # cupylab.reduction_kernel("T x", "T y", map_expr, reduce_expr, post_map_expr, identity, "l2norm")
# END SKELETON

# %%
labkit.check.l2norm(l2norm);

# %% [markdown]
# ## 7. RawKernel: the whole kernel in CUDA C++
#
# `cupy.RawKernel(source, name)` compiles a complete CUDA C++ kernel with NVRTC and launches it with
# `kernel(grid, block, args)`. You write the index arithmetic and the bounds check yourself, as in lab 02.
# Two details matter:
#
# - declare the kernel `extern "C"`, or C++ mangles its name (`_Z10leaky_reluPKfPffi`) and CuPy cannot find it;
# - pass scalars as NumPy scalars of the parameter's type (`np.float32(alpha)`, `np.int32(n)`): CuPy passes a
#   Python `float` as a double and a Python `int` as a 64-bit integer, which a `float`/`int` parameter misreads.
#
# ### Exercise 5 — leaky ReLU
#
# Complete `leaky_relu`: `y[i] = x[i]` where `x[i] > 0`, else `alpha * x[i]`, for every `i < n`. Keep the signature.

# %% tags=["exercise"]
# BEGIN SOLUTION
leaky_source = r"""
extern "C" __global__
void leaky_relu(const float* x, float* y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v > 0.0f ? v : alpha * v;
    }
}
"""
# END SOLUTION
# BEGIN SKELETON
leaky_source = r"""
extern "C" __global__
void leaky_relu(const float* x, float* y, float alpha, int n)
{
    // your code here: one element per thread, and a bounds check
}
"""
# END SKELETON

# %%
labkit.check.leaky_relu(leaky_source);

# %% [markdown]
# Without a GPU the check compiles your source for sm_70, sm_80 and sm_90, reads the kernel's entry in the PTX (name,
# parameter types, a comparison with `n` that steers the stores) and, when a C++ compiler is installed, runs every
# thread on the CPU with a spare block and guard zones around the arrays. Compiling cannot see `i <= n` instead of
# `i < n`; the CPU stand-in and a GPU run can. Here is the PTX of the kernel that passed:

# %%
leaky = labkit.check.solved_or_reference("05.leaky-relu", leaky_source)
cuda_cpp.compile_for(leaky, "leaky_relu", ("sm_90",))["sm_90"].show("setp", "bra", "st.global")

# %% [markdown]
# `labkit.cuda_cpp.RawKernel` has CuPy's calling convention and checks every argument against the kernel's PTX
# parameters before it launches. A wrong argument type is a clear message instead of a wrong result:

# %%
k = cuda_cpp.RawKernel(leaky, "leaky_relu")
x = xp.asarray(np.linspace(-1, 1, 1000, dtype=np.float32))
y = xp.zeros_like(x)
try:
    k((8,), (128,), (x, y, 0.1, 1000))  # Python float and int: wrong
except labkit.LabkitError as err:
    print(err)

# %% tags=["nbval-ignore-output"]
try:
    k((8,), (128,), (x, y, np.float32(0.1), np.int32(1000)))
    print("y[:3] =", cupylab.asnumpy(y[:3]), "(ran on the", "GPU)" if env.is_gpu else "CPU stand-in)")
except cuda_cpp.HostUnavailable as err:
    print("sim mode without a C++ compiler:", str(err).splitlines()[0])

# %% [markdown]
# ## 8. RawModule: several kernels and device functions in one source
#
# `cupy.RawModule(code=source)` compiles a whole translation unit; `module.get_function(name)` returns each
# `extern "C"` kernel. Shared `__device__` functions are not kernels, so they get no entry of their own:

# %%
module_src = kernels_cuda.ACTIVATIONS_MODULE
ptx = cuda_cpp.compile_for(module_src, "activations", ("sm_80",))["sm_80"]
for e in cuda_cpp.entries(ptx.text):
    print(f"{e.name}({', '.join(e.params)})")

# %% [markdown]
# `labkit.cuda_cpp.RawModule` has CuPy's interface: on a GPU it is `cupy.RawModule`; without one the CPU stand-in
# builds the source once and runs any of its kernels from that build, checking every load and store:

# %% tags=["nbval-ignore-output"]
mod = cuda_cpp.RawModule(code=module_src)
fwd, bwd = mod.get_function("leaky_relu_fwd"), mod.get_function("leaky_relu_bwd")
xm = xp.asarray(np.linspace(-1, 1, 100_000, dtype=np.float32))
ym, dxm = xp.empty_like(xm), xp.empty_like(xm)
try:
    fwd((64,), (256,), (xm, ym, np.float32(0.1), np.int32(xm.size)))
    bwd((64,), (256,), (xm, xp.ones_like(xm), dxm, np.float32(0.1), np.int32(xm.size)))
    xh = cupylab.asnumpy(xm)
    print("forward and backward agree with NumPy:",
          np.allclose(cupylab.asnumpy(ym), np.where(xh > 0, xh, np.float32(0.1) * xh)),
          np.allclose(cupylab.asnumpy(dxm), np.where(xh > 0, 1.0, 0.1)),
          "(ran on the", "GPU)" if env.is_gpu else "CPU stand-in)")
except cuda_cpp.HostUnavailable as err:
    print("sim mode without a C++ compiler:", str(err).splitlines()[0])

# %% [markdown]
# A template kernel has no `extern "C"` name. Name the instantiations you want with `name_expressions`, as in CuPy;
# the module compiles those and `get_function` looks each up by the same expression:

# %% tags=["nbval-ignore-output"]
scale_src = r"""
template <typename T>
__global__ void scale(T* v, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = a * v[i];
}
"""
tmod = cuda_cpp.RawModule(code=scale_src, name_expressions=["scale<float>", "scale<double>"])
for expr, dtype in (("scale<float>", np.float32), ("scale<double>", np.float64)):
    v = xp.arange(1000, dtype=dtype)
    try:
        tmod.get_function(expr)((4,), (256,), (v, dtype(2), np.int32(v.size)))
        print(expr, cupylab.asnumpy(v[:4]), v.dtype)
    except cuda_cpp.HostUnavailable as err:
        print("sim mode without a C++ compiler:", str(err).splitlines()[0])

# %% [markdown]
# ## 9. Sharing GPU arrays with other libraries, without copies
#
# Two protocols let libraries hand each other device memory:
#
# - **`__cuda_array_interface__`**: a dict with the device pointer, shape, `typestr`, strides and stream. Numba
#   kernels accept any object that has it, CuPy arrays included; `cupy.asarray` accepts Numba device arrays.
# - **DLPack**: `__dlpack__()` / `__dlpack_device__()`, the standard of the Python array API; `cupy.from_dlpack`,
#   `torch.from_dlpack`, `jax.dlpack`, `numpy.from_dlpack` (host memory only) all speak it.
#
# Host arrays have the twin `__array_interface__`, and NumPy speaks DLPack, so the idea shows without a GPU:

# %% tags=["nbval-ignore-output"]
h = np.arange(6, dtype=np.float32)
print(cupylab.describe_interface(h))
view = np.from_dlpack(h)
print("shares memory with the original:", np.shares_memory(h, view))

# %% [markdown]
# Numba's CUDA simulator has no `__cuda_array_interface__`, so the device half runs on a GPU only:

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    from numba import cuda

    @cuda.jit
    def add_one(arr):
        i = cuda.grid(1)
        if i < arr.size:
            arr[i] += 1

    g = cp.zeros(1000, dtype=cp.float32)
    add_one[8, 128](g)  # a CuPy array straight into a Numba kernel: same memory, no copy
    print("Numba wrote into CuPy's memory:", float(g.sum()), "| DLPack device:", g.__dlpack_device__())
    print("round trip through DLPack shares memory:", cp.from_dlpack(g).data.ptr == g.data.ptr)
else:
    print("sim mode: on a GPU this cell passes a CuPy array to a Numba kernel (no copy) and round-trips it through DLPack.")

# %% [markdown]
# ## 10. Streams, events and pinned memory: overlapping copies with compute
#
# A GPU has copy engines separate from its SMs: one can copy host→device while another copies device→host and the
# SMs run a kernel. Work on one **stream** runs in order; work on different streams may overlap. To overlap, split
# the job into chunks and give each chunk's copy in, kernel and copy out to a stream, rotating over a few streams.
# Copies are only asynchronous from **pinned** (page-locked) host memory (`cupyx.empty_pinned`); from ordinary
# pageable memory the driver stages them and the overlap disappears. **Events** (`cupy.cuda.Event`) mark points in
# a stream: for timing, or to make one stream wait for another.
#
# The model below puts one copy in, one elementwise pass and one copy out of 1 GiB on an H200's PCIe 5 link, whole
# and in 8 chunks (figures from `labkit.hw`):

# %%
timeline = cupylab.overlap_model(1 << 30, chunks=8)
print(timeline)

# %% tags=["nbval-ignore-output"]
timeline.figure()

# %% [markdown]
# ### Exercise 6 — predict the pipeline's time
#
# Each chunk passes H2D copy → kernel → D2H copy; each engine works on one chunk at a time; a stage of a chunk starts
# when its engine is free and the chunk's previous stage is done. The arguments are the stage times of the *whole*
# job (`t_in`, `t_kernel`, `t_out`) and the number of equal chunks, so each stage of one chunk takes `t / chunks`.
# Return the time until the last chunk is back. (Draw three chunks on paper first.) The check compares it with
# labkit's event-by-event model on stage times and chunk counts drawn fresh each run.

# %% tags=["exercise"]
def pipelined_time(t_in, t_kernel, t_out, chunks):
    # BEGIN SOLUTION
    first = (t_in + t_kernel + t_out) / chunks
    return first + (chunks - 1) * max(t_in, t_kernel, t_out) / chunks
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # the first chunk's full trip, then one slowest-stage step per further chunk
    # END SKELETON


# %%
labkit.check.pipeline_time(pipelined_time);

# %% [markdown]
# With the copies dominating, more chunks approach `max(t_in, t_out)`: the best overlap hides the kernel and one of
# the two copies. The cell below prints the model's times for more and more chunks, and that limit. On a GPU,
# `labkit.cupylab.overlap_benchmark()` runs this pipeline for real (pinned buffers, `cudaMemcpyAsync` on several
# streams, the `scale_shift` RawKernel) and compares it with the serial version; it prints the chunk and stream counts.

# %%
predict = labkit.check.solved_or_reference("05.pipeline", pipelined_time)
tm = cupylab.transfer_model(1 << 30)  # H200, PCIe 5
t_in, t_k, t_out = tm.copy_s * 1e3, tm.hbm_pass_s * 1e3, tm.copy_s * 1e3
print("model: 1 GiB on an H200 over PCIe 5")
for chunks in (1, 2, 4, 8, 32):
    print(f"{chunks:>3} chunks: {predict(t_in, t_k, t_out, chunks):6.2f} ms")
limit = max(t_in, t_out)
print(f"limit max(t_in, t_out) = {limit:.2f} ms: at most {(t_in + t_k + t_out) / limit:.2f}x faster than serial")

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    rec = cupylab.overlap_benchmark()
    print(f"serial {rec['serial_s'] * 1e3:.1f} ms, overlapped ({rec['chunks']} chunks, {rec['streams']} streams) "
          f"{rec['overlapped_s'] * 1e3:.1f} ms: {rec['speedup']:.2f}x, correct: {rec['correct']}  "
          f"(model {rec['model']['speedup']:.2f}x)  [{rec['label']}]")
else:
    print("sim mode: no copy engines to overlap. On a GPU this cell measures the pipeline against the serial version.")

# %% [markdown]
# ### Events and non-blocking streams
#
# An event marks a point in one stream: `e.record(s)` puts it into stream `s` (without an argument, into the current
# stream, usually the null stream), and it completes when everything queued before it in `s` has run.
# `s.wait_event(e)` makes later work in `s` wait for it. Streams made with `non_blocking=True` are **not** ordered
# with the null stream, so an event recorded on the null stream says nothing about them. To time work spread over
# several such streams: record the start event on one stream and have **every other** stream wait for it before its first
# copy; at the end, record an event on each stream, make one stream wait for all of them, and record the end event
# there (after that wait). Then `end.synchronize()` waits for all the work, and the elapsed time covers all of it.
#
# ### Exercise 7 — the pipeline on streams, timed with events
#
# Now write the pipeline itself. `pipeline(cp, x, out, kernel, chunks, n_streams)` gets the array module `cp`, a
# pinned host array `x`, a pinned host array `out` of the same size, and `kernel(d_in, d_out)`, an element-wise
# kernel that runs on the current stream. Split `x` into `chunks` pieces (the last may be shorter: the check's sizes
# are never multiples of `chunks`); for each piece copy it in (`d.set(host_piece)`), run `kernel`, and copy the result
# back into its place in `out` (`d.get(out=out[lo:hi], blocking=False)`), rotating the pieces over `n_streams` streams
# you create (`cp.cuda.Stream(non_blocking=True)`). Time the whole pipeline with two events
# (`cp.cuda.Event()`, `record`, `synchronize`) and return the milliseconds from `cp.cuda.get_elapsed_time`.
#
# On a GPU `cp` is CuPy. In `sim` mode it is labkit's **recording stand-in**, with CuPy's names: it runs every copy
# and kernel on the CPU, records the stream each went to, and checks what a GPU guarantees and what it does not: two
# operations on the same memory with no order between them (a GPU may run them either way round), an end event that
# does not follow all the work, copies still running when the function returns, and the overlap, on a model
# timeline of an H200 on PCIe 5. On a GPU the check also measures your pipeline against one chunk on one stream.

# %% tags=["exercise"]
def pipeline(cp, x, out, kernel, chunks, n_streams):
    # BEGIN SOLUTION
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    start, end = cp.cuda.Event(), cp.cuda.Event()
    step = -(-x.size // chunks)  # ceiling division: the last piece may be shorter
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_event(start)  # no stream starts before the start event
    for c in range(chunks):
        lo, hi = c * step, min(x.size, (c + 1) * step)
        if lo >= hi:
            break
        s = streams[c % n_streams]
        with s:  # copies and the kernel below go on s, in order
            d_in, d_out = cp.empty(hi - lo, x.dtype), cp.empty(hi - lo, x.dtype)
            d_in.set(x[lo:hi])
            kernel(d_in, d_out)
            d_out.get(out=out[lo:hi], blocking=False)
    for s in streams[1:]:
        streams[0].wait_event(s.record())  # the end event follows every stream's work
    end.record(streams[0])
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # streams, two events, the chunk loop inside `with stream:`, wait, synchronize, time
    # END SKELETON


# %%
labkit.check.streams_pipeline(pipeline);

# %% [markdown]
# What the stand-in recorded for your pipeline (or labkit's, until yours passes): each copy and kernel with its
# stream and engine on the model's timeline. The host→device copies follow each other on one copy engine while the
# kernels and the copies back of earlier pieces run beside them.

# %% tags=["nbval-ignore-output"]
from labkit.check.lab05 import pipeline_timeline

print(pipeline_timeline(labkit.check.solved_or_reference("05.streams", pipeline)))

# %% [markdown]
# ## 11. Memory pools and managed memory
#
# `cudaMalloc` and `cudaFree` are slow next to a kernel launch, and `cudaFree` waits for the whole device, so CuPy does
# not call them for every array. Its **memory pool** keeps the blocks of freed arrays and hands them to the next allocation of a similar size:
# `cp.get_default_memory_pool()` reports `used_bytes()` (held by live arrays) and `total_bytes()` (held by the pool
# in all), and `free_all_blocks()` returns the unused blocks to the driver. That is why `nvidia-smi` shows a CuPy
# process holding more memory than its arrays need. Pinned host memory has a pool of its own
# (`cp.get_default_pinned_memory_pool()`). Two other allocators plug in with `cp.cuda.set_allocator(...)`:
#
# - `cp.cuda.MemoryAsyncPool()`: CUDA's **stream-ordered** allocator (`cudaMallocAsync`/`cudaFreeAsync`), whose
#   allocations and frees are stream operations like kernels: a block freed on a stream can be reused by later work
#   on that stream without the host waiting.
# - `cp.cuda.malloc_managed`: **managed** (unified) memory, one pointer valid on the host and on every GPU. The
#   driver migrates pages to the processor that touches them, on demand (a page fault per missing page) or ahead of
#   time with `cp.cuda.runtime.memPrefetchAsync(ptr, nbytes, device, stream)`. It lets a data set larger than the
#   GPU's memory run (the pages stream in), at the cost of the faults. On Grace Hopper and Grace Blackwell systems the
#   CPU and GPU share one coherent address space over NVLink-C2C, so the GPU also reads host memory directly.
#
# On a GPU the cell below shows the pool keeping a freed block, times a pooled allocation against `cudaMalloc`, and
# times the first and second pass of a kernel over fresh managed memory (the first one faults the pages in).

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    import time

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    block = cp.empty(1 << 28, dtype=cp.uint8)  # 256 MiB
    print(f"live 256 MiB array: used {pool.used_bytes() >> 20} MiB, pool holds {pool.total_bytes() >> 20} MiB")
    del block
    print(f"after del:          used {pool.used_bytes() >> 20} MiB, pool holds {pool.total_bytes() >> 20} MiB (kept for reuse)")

    def wall_us(fn, reps=20):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / reps * 1e6

    pooled = wall_us(lambda: cp.empty(1 << 28, dtype=cp.uint8))
    raw = wall_us(lambda: cp.cuda.runtime.free(cp.cuda.runtime.malloc(1 << 28)))
    print(f"allocate 256 MiB: from the pool {pooled:.1f} µs, cudaMalloc + cudaFree {raw:.1f} µs (wall clock, {env.device_name})")

    n_managed = 1 << 26
    mem = cp.cuda.malloc_managed(4 * n_managed)
    managed = cp.ndarray((n_managed,), dtype=cp.float32, memptr=mem)
    for label in ("first pass (pages fault in)", "second pass"):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        managed.fill(1.0)
        end.record()
        end.synchronize()
        print(f"managed memory, {label}: {cp.cuda.get_elapsed_time(start, end):.2f} ms for {4 * n_managed >> 20} MiB")
    del managed, mem
else:
    print("sim mode: there is no device memory to pool or migrate. On a GPU this cell shows the pool keeping a freed "
          "block, times a pooled allocation against cudaMalloc, and times the first and second pass over managed memory.")

# %% [markdown]
# ## 12. CUDA Graphs: the whole pipeline in one launch
#
# Every copy and kernel costs the host an API call, and the GPU a little time to start it (the last cell of this
# section measures both). For big kernels that is nothing; for a pipeline of many short steps run again and again (a video frame, an
# inference step, one iteration of a solver) it can be most of the time, and the GPU idles between the steps while
# Python issues the next one. A **CUDA Graph** records the steps once and replays them with one call:
#
# - **capture**: `stream.begin_capture()`, then the work issued on that stream is recorded, not run;
#   `graph = stream.end_capture()` returns it. Only asynchronous work may be captured: anything that makes the host
#   wait (a synchronize, a blocking `get()`, a copy from pageable memory) is an error during capture;
# - **replay**: `graph.launch(stream)` runs all of it, asynchronously, with one call. A replay repeats the captured
#   work exactly: the same device buffers and the same host addresses. New input goes into the buffer the graph
#   reads (a pinned host buffer refilled before each launch), not into a new array.
#
# ### Exercise 8 — capture the pipeline, replay it per frame
#
# Write `graph_pipeline(cp, frames, x, y, kernel)`. `frames` is a list of host arrays; `x` and `y` are pinned host
# buffers of the same size; `kernel(d_in, d_out)` runs on the current stream. Allocate two device buffers, then on a
# stream of your own (`cp.cuda.Stream(non_blocking=True)`) capture the pipeline once: copy `x` in (`d_in.set(x)`),
# run `kernel`, copy the result back into `y` (`d_out.get(out=y, blocking=False)`). Then for each frame: put it in
# `x`, launch the graph, wait for it, and keep a copy of `y`. Return the list of results.
#
# On a GPU `cp` is CuPy. In `sim` mode it is labkit's recording stand-in with graph capture: capture records without
# running, a replay runs only when the host waits for it (as on a GPU, a result read too early is not there yet),
# and what CUDA forbids during a capture raises CUDA's error.

# %% tags=["exercise"]
def graph_pipeline(cp, frames, x, y, kernel):
    # BEGIN SOLUTION
    stream = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)  # the graph keeps these addresses
    with stream:
        stream.begin_capture()
        d_in.set(x)
        kernel(d_in, d_out)
        d_out.get(out=y, blocking=False)
        graph = stream.end_capture()
    results = []
    for frame in frames:
        x[...] = frame  # the captured copy reads x: refill it
        graph.launch(stream)
        stream.synchronize()  # a replay is asynchronous
        results.append(y.copy())
    return results
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # buffers, a stream, capture (set, kernel, get), then per frame: refill x, launch, wait, copy y
    # END SKELETON


# %%
labkit.check.graph_pipeline(graph_pipeline);

# %% [markdown]
# What the graph saves is host calls. The stand-in counts them for eight frames, with your pipeline (or labkit's,
# until yours passes) and with the same pipeline issued step by step:

# %%
from labkit.check.lab05_graphs import host_calls

calls = host_calls(labkit.check.solved_or_reference("05.graph", graph_pipeline), n_frames=8)
print(f"8 frames: {calls['graph']} host calls with the graph, {calls['no graph']} without "
      "(copies and kernels issued one by one); counted by the stand-in, not timed")

# %% [markdown]
# With three steps per frame that is a factor of three in calls; an inference step launches many more kernels than
# three, and the saving grows with them. On a GPU the cell below measures it: 200 tiny kernels issued one by one, and the same
# 200 captured in a graph and replayed, timed with CUDA events, per kernel.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    import time

    gs = cp.cuda.Stream(non_blocking=True)
    v, w = cp.zeros(1024, dtype=cp.float32), cp.zeros(1024, dtype=cp.float32)
    add_one = cp.ElementwiseKernel("float32 a", "float32 b", "b = a + 1", "labkit_add_one")
    K, reps = 200, 20

    def issue_all():
        with gs:
            for _ in range(K // 2):
                add_one(v, w)
                add_one(w, v)

    issue_all()  # warm up: compiles the kernel
    gs.synchronize()
    with gs:
        gs.begin_capture()
        for _ in range(K // 2):
            add_one(v, w)
            add_one(w, v)
        chain = gs.end_capture()
    chain.upload(gs)

    def per_kernel_us(fn):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter()
        start.record(gs)
        for _ in range(reps):
            fn()
        end.record(gs)
        end.synchronize()
        host = (time.perf_counter() - t0) / (reps * K) * 1e6
        return host, cp.cuda.get_elapsed_time(start, end) * 1e3 / (reps * K)

    (h_e, g_e), (h_g, g_g) = per_kernel_us(issue_all), per_kernel_us(lambda: chain.launch(gs))
    print(f"one by one: {g_e:.2f} µs per kernel (CUDA events), {h_e:.2f} µs of host time per kernel")
    print(f"graph:      {g_g:.2f} µs per kernel (CUDA events), {h_g:.2f} µs of host time per kernel  [{env.device_name}]")
else:
    print("sim mode: launch overhead is a property of the GPU and its driver, so nothing here measures it. On a GPU this "
          "cell times 200 tiny kernels issued one by one against the same 200 replayed from a graph.")

# %% [markdown]
# ## 13. Timing GPU code: `cupyx.profiler.benchmark`
#
# CuPy calls return as soon as the kernel is queued, so `time.perf_counter()` around them measures the queueing, not
# the work. `cupyx.profiler.benchmark(fn, args, n_repeat=...)` runs warm-ups, brackets each run with CUDA events and
# reports CPU and GPU times separately. (`labkit.bench.measure` does the same for any callable and adds GB/s.)

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    big = cp.random.standard_normal(1 << 24, dtype=cp.float32)
    print(benchmark(cp.sort, (big,), n_repeat=20))
else:
    small = np.random.default_rng().standard_normal(labkit.size(gpu=1 << 24, sim=1 << 16)).astype(np.float32)
    print(labkit.bench.measure(np.sort, small, name="np.sort", repeat=5))

# %% [markdown]
# ## What you learned
#
# - `labkit.xp` / `cupy.get_array_module` let one function serve NumPy and CuPy; copies between host and device are
#   explicit and, over PCIe, far slower than work in HBM: keep data on the device.
# - Every unfused operator is a kernel that moves its operands through memory; `cupy.fuse` makes one kernel and cuts
#   the bytes, which is the speed-up for memory-bound work.
# - `ElementwiseKernel` takes a loop body, `ReductionKernel` map/reduce/post-map expressions and an identity,
#   `RawKernel`/`RawModule` whole CUDA C++ sources with `extern "C"` entries (templates by `name_expressions`) and
#   your own bounds checks; NVRTC compiles all of them, with or without a GPU, and the PTX shows what they do.
# - `__cuda_array_interface__` and DLPack share device memory between CuPy, Numba and other libraries without copies.
# - Pinned memory, several streams and chunking overlap copies with compute; a pipeline's time is one full trip plus
#   one slowest step per further chunk.
# - CuPy's memory pool keeps freed blocks for reuse; the stream-ordered pool and managed memory are allocators of
#   their own, the latter migrating pages on demand or by prefetch.
# - A CUDA Graph captures a pipeline once and replays it with one call: the same buffers and host addresses every
#   time, so new input goes into the buffer the graph reads; nothing that makes the host wait may be captured.
#
# Next: [Lab 06 — Tensor Cores and mixed precision](06-tensor-cores-mixed-precision.ipynb).
