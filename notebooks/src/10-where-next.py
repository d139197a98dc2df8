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
#   launched through `cuda.core`, a device-wide reduction with `cuda.compute`, lab 04's block reduction as a
#   `cuda.coop` call, a tile kernel in cuTile Python, a GEMM with a fused epilogue through nvmath-python.
# - Use a Hopper feature: write a kernel whose blocks form a thread-block cluster and read each other's shared
#   memory (distributed shared memory), read its sm_90 PTX, and launch it with a cluster dimension on a GPU.
# - Use a Blackwell feature: allocate Tensor Memory for a `tcgen05` accumulator in CUDA C++ and read the PTX for
#   sm_100a (what moves from registers to Tensor Memory, compared with Hopper's `wgmma`).
# - Profile your own kernels: NVTX ranges around timed work, the `nsys` and `ncu` command lines for a lab's kernel
#   built with `lineinfo=True`, and what their reports show.
# - Debug your own kernels with `compute-sanitizer`: memcheck, racecheck and synccheck on the kernels of labs 02–04,
#   and what each report means.
#
# **Prerequisites:** [Lab 02](02-first-kernels.ipynb) to [Lab 05](05-cupy.ipynb) (CUDA C++ kernels as strings, shared
# memory, block reductions); the later labs help. Every cell runs without a GPU and says what a GPU run adds; the GPU
# cells also need the package they name installed.
#
# **Time:** 45 minutes (teaching 30, exercises 15)

# %% tags=["bootstrap"]
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
# ## 3. Thread-block clusters and distributed shared memory (Hopper)
#
# Until Hopper, a block's shared memory belonged to that block alone: blocks shared results only through global
# memory. Hopper (sm_90) adds a level between the block and the grid. A **thread-block cluster** is a group of
# blocks that the hardware schedules at the same time on one GPC (a group of SMs); the CUDA C++ Programming Guide
# gives the largest portable cluster size, and H100 allows larger ones with a non-portable attribute. The blocks of
# a cluster can read and write each other's shared memory, **distributed shared memory**, and wait for each other at
# a cluster barrier. In CUDA C++ (cooperative groups):
#
# | CUDA C++ | what it does | PTX |
# |---|---|---|
# | `cg::this_cluster()` | the cluster this block belongs to | |
# | `cluster.block_rank()`, `cluster.num_blocks()` | this block's rank in the cluster, the cluster's size | `%cluster_ctarank`, `%cluster_nctarank` |
# | `cluster.map_shared_rank(ptr, r)` | the address of `ptr`'s variable in block `r`'s shared memory | `mapa` |
# | `cluster.sync()` | a barrier for every thread of every block in the cluster | `barrier.cluster.arrive`, `barrier.cluster.wait` |
#
# The cluster size is chosen at launch: `cuda.core`'s `LaunchConfig(grid=clusters, cluster=blocks_per_cluster,
# block=threads)`, where `grid` then counts clusters. The course's pinned numba-cuda 0.30 cannot launch clusters,
# which is why this kernel is CUDA C++; its successor numba-cuda-mlir (section 1) can: version 0.6.0 has a `cluster`
# entry in its launch configuration and cluster, distributed-shared-memory and TMA intrinsics (`mapa`, cluster
# barriers; `numba_cuda_mlir/cuda/intrin.pyi`). This lab is its home because `cuda.core` is introduced here (section 2) and its launch is what sets
# the cluster size; the kernel itself is lab 04's block reduction (lab 03's shared memory) with one level more.
#
# ### Exercise 1 — a cluster sum
#
# Complete `cluster_sum(const float* x, float* out, int n)`. The block reduction is written: after it, `partial[0]`
# holds the block's sum. Add the cluster part: once every block of the cluster has its sum, block rank 0's thread 0
# adds the `partial[0]` of every block of the cluster, read from their shared memory, and writes it to
# `out[blockIdx.x / cluster.num_blocks()]` (one output per cluster); and no block may exit while its shared memory
# can still be read. The check runs it with clusters of 2 and 4 blocks on fresh data and compares every cluster's sum:
# on a GPU of compute capability 9.0 or later through `cuda.core`, elsewhere on labkit's CPU stand-in for CUDA C++
# (which runs a cluster's blocks together, each with its own shared memory, and reports a `cluster.sync()` that some
# threads skip). Then it compiles your source for sm_90 and reads its PTX.

# %% tags=["exercise"]
# BEGIN SOLUTION
cluster_source = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cluster_sum(const float* x, float* out, int n)
{
    __shared__ float partial[256];  // blockDim.x: a power of two up to 256
    cg::cluster_group cluster = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    cluster.sync();  // every block of the cluster has written its partial[0]
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned int r = 0; r < cluster.num_blocks(); ++r)
            total += *cluster.map_shared_rank(&partial[0], r);  // block r's shared memory
        out[blockIdx.x / cluster.num_blocks()] = total;
    }
    cluster.sync();  // no block exits while rank 0 may still read its shared memory
}
"""
# END SOLUTION
# BEGIN SKELETON
cluster_source = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cluster_sum(const float* x, float* out, int n)
{
    __shared__ float partial[256];  // blockDim.x: a power of two up to 256
    cg::cluster_group cluster = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    // your code: the cluster part
    // 1. wait until every block of the cluster has its partial[0]
    // 2. block rank 0, thread 0: add *cluster.map_shared_rank(&partial[0], r) over the cluster's blocks and write
    //    out[blockIdx.x / cluster.num_blocks()]
    // 3. wait again, so that no block exits while its shared memory is still being read
}
"""
# END SKELETON

# %%
labkit.check.cluster_sum(cluster_source);

# %% [markdown]
# Read the PTX yourself: the kernel that passed (labkit's until yours does), compiled for sm_90 by NVRTC. Find the
# block's rank (`%cluster_ctarank`), the two cluster barriers (`barrier.cluster.arrive` then `barrier.cluster.wait`)
# and between them the loop that maps each peer's `partial` into its own address space (`mapa`) and loads from it.
# The load is a generic `ld.f32`: `mapa` on a generic address gives a generic address into the peer's shared memory,
# which is also why the summary counts that load among the "global" (generic) loads.

# %%
my_cluster = labkit.check.solved_or_reference("10.cluster", cluster_source)

# %%
cluster_ptx = labkit.ptx.compile_cuda(my_cluster, "sm_90", name="cluster_sum.cu")
cluster_ptx.show("%cluster", "barrier.cluster", "mapa", limit=14)
print("the load of the mapped address:", [ln for ln in cluster_ptx.lines("ld.f32") if "[%rd" in ln])

# %% [markdown]
# Clusters are a Hopper feature: for an Ampere target (sm_80) the same source does not compile, because the cluster
# API does not exist there.

# %%
try:
    labkit.ptx.compile_cuda(my_cluster, "sm_80", name="cluster_sum.cu")
except labkit.errors.CompileError as err:
    print(str(err).splitlines()[0])
    print(str(err).splitlines()[1])

# %% tags=["nbval-ignore-output"]
if env.is_gpu and (env.compute_capability or (0, 0)) >= (9, 0):
    from labkit.check import lab10_clusters

    x = np.rint(np.random.default_rng().uniform(-8, 8, 5 * 4 * 256 + 77)).astype(np.float32)
    sums = lab10_clusters.run_on_gpu(my_cluster, x, cluster=4, block=256)
    want = [x[k:k + 1024].sum() for k in range(0, x.size, 1024)]
    print(f"cuda.core, clusters of 4 blocks of 256 threads: {sums.size} cluster sums, match NumPy: {np.array_equal(sums, want)}")
elif env.is_gpu:
    print(f"{env.device_name} has compute capability {env.compute_capability}: no clusters (they need 9.0, Hopper, or later).")
else:
    print("sim mode: a cluster cannot run in the simulator. On a GPU of compute capability 9.0 or later this cell "
          "launches the kernel through cuda.core with clusters of 4 blocks and compares the sums with NumPy.")

# %% [markdown]
# ## 3b. Blackwell's Tensor Memory (`tcgen05`, sm_100a)
#
# On Hopper, `wgmma.mma_async` (lab 06, section 5b) keeps its accumulator in **registers**: a 64 × 256 FP32 tile
# spread over the 128 threads of a warpgroup, 128 registers each, so the tile size is bounded by the register file.
# Data-centre Blackwell (sm_100a: B200, GB200; sm_103a: B300, GB300) adds **Tensor Memory** (TMEM) to each SM:
# 128 lanes × 512 columns of 32-bit cells (256 KB), beside shared memory. `tcgen05.mma`, issued by **one thread**,
# reads A from shared memory (or TMEM) and B from shared memory, and accumulates into TMEM; the threads only touch
# the result at the end, copying it to registers with `tcgen05.ld`. Completion is tracked with
# `tcgen05.commit` to an mbarrier. A kernel owns TMEM explicitly: one warp allocates columns with `tcgen05.alloc`
# (a power of two from 32 to 512; the address lands in shared memory), gives up its permit to allocate more
# (`tcgen05.relinquish_alloc_permit`), and frees them with `tcgen05.dealloc` before it exits. A pair of CTAs can
# share one MMA (`cta_group::2`), and the block-scaled formats of lab 06 have their own kinds (`kind::mxf8f6f4`,
# `kind::mxf4nvf4`), the scales read from TMEM too (PTX ISA, "Tensor Core 5th Generation Family Instructions").
# NVRTC compiles this for sm_100a on a machine without a GPU, so the PTX can be read here:

# %%
print("NVRTC", labkit.ptx.nvrtc_version(), "targets sm_100:", "sm_100" in (labkit.ptx.supported_arches() or ()))

# %% [markdown]
# ### Exercise 2 — allocate a `tcgen05` accumulator
#
# Write `tmem_source(n)`: return the CUDA C++ source of `extern "C" __global__ void tmem_tile(unsigned* out)` for an
# FP32 accumulator of 128 rows × `n` columns (one TMEM column per accumulator column). In the kernel:
#
# 1. the first warp (`threadIdx.x < 32`) allocates the columns the tile needs, the next power of two from 32, with
#    `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [addr], COLUMNS;` into a `__shared__ unsigned`
#    variable (its shared-memory address: `(unsigned)__cvta_generic_to_shared(&var)`), then gives up the permit with
#    `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;`;
# 2. `__syncthreads()`, then every thread writes the TMEM address to `out[threadIdx.x]`;
# 3. `__syncthreads()`, then the first warp frees the same columns: `tcgen05.dealloc.cta_group::1.sync.aligned.b32
#    address, COLUMNS;`.
#
# Write the PTX as inline assembly, `asm volatile("..." :: "r"(value), "n"(COLUMNS));`: the `"n"` constraint puts
# the column count into the PTX as a number. No `#include` is needed. The check compiles your source for sm_100a for
# five fresh widths `n` (below 32, between powers of two, an exact power, up to 512) and reads the PTX: one
# allocation of the right size, the permit given up, a barrier before the address is read, and a matching dealloc.
# Nothing runs: only a B200-class GPU could launch it.

# %% tags=["exercise"]
def tmem_source(n):
    # BEGIN SOLUTION
    columns = 32
    while columns < n:
        columns *= 2
    return f"""
extern "C" __global__ void tmem_tile(unsigned* out)
{{
    __shared__ unsigned tmem_base;
    if (threadIdx.x < 32) {{
        unsigned dst = (unsigned)__cvta_generic_to_shared(&tmem_base);
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(dst), "n"({columns}));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }}
    __syncthreads();
    unsigned taddr = tmem_base;
    out[threadIdx.x] = taddr;
    __syncthreads();
    if (threadIdx.x < 32) {{
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "n"({columns}));
    }}
}}
"""
    # END SOLUTION
    # BEGIN SKELETON
    ...  # columns for n; return the source (an f-string: double the braces of the C++)
    # END SKELETON


# %%
labkit.check.tcgen05_tmem(tmem_source);

# %% [markdown]
# The PTX of your kernel for a 200-column tile: the three `tcgen05` instructions, each with `.sync.aligned` (the
# whole warp executes it together), between barriers.

# %%
my_tmem = labkit.check.solved_or_reference("10.tcgen05-tmem", tmem_source)
tmem_ptx = labkit.ptx.compile_cuda(my_tmem(200), "sm_100a", name="tmem_tile.cu")
tmem_ptx.show("tcgen05", "bar.sync", limit=10)

# %% [markdown]
# ## 4. A reduction with `cuda.compute`
#
# Lab 04 built a reduction by hand: a tree in shared memory, one atomic per block. `cuda.compute` (the `cuda-cccl`
# package: CUB's device-wide algorithms from Python) gives the tuned version in one call,
# `cuda.compute.reduce_into(d_in=d_in, d_out=d_out, num_items=n, op=OpKind.PLUS, h_init=h_init)` (keywords only),
# with `d_` arrays on the device (CuPy) and `h_init` a one-element NumPy array. It also scans (`inclusive_scan`, the
# single-pass decoupled look-back scan of lab 04's last section), sorts and transforms, and takes Python functions as
# operators. Without a CUDA driver the package imports but exposes none of its algorithms, so the course's API test
# reads their signatures from the package's source.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("cuda.compute"):
    import cupy
    import cuda.compute
    from cuda.compute import OpKind

    d_in = cupy.random.random(1 << 24, dtype=cupy.float32)
    d_out = cupy.empty(1, dtype=cupy.float32)
    cuda.compute.reduce_into(d_in=d_in, d_out=d_out, num_items=d_in.size, op=OpKind.PLUS, h_init=np.zeros(1, np.float32))
    print(f"cuda.compute sum {float(d_out[0]):.6g}; CuPy's sum {float(d_in.sum()):.6g}")
elif env.is_gpu:
    print("cuda.compute is not installed: `pip install cuda-cccl[cu12]`, then run this cell again.")
else:
    values = np.random.default_rng(10).random(1000, dtype=np.float32)
    print("sim mode: cuda.compute runs on a GPU only. What reduce_into(d_in=, d_out=, num_items=n, op=OpKind.PLUS, "
          f"h_init=) computes, here with NumPy: {values.astype(np.float64).sum():.6g} for {values.size} values")

# %% [markdown]
# ## 5. Lab 04's block reduction as a library call: `cuda.coop`
#
# `cuda.coop` (also in `cuda-cccl`) is the other half of CUB: the **block- and warp-wide** primitives, called from
# inside your own Numba kernel. `block.make_sum(numba.float32, threads_per_block)` builds CUB's block reduction for
# that block size; the kernel links its code (`@cuda.jit(link=block_sum.files)`) and calls `block_sum(v)`, and
# thread 0 gets the block's sum: lab 04's `block_sum`, tree, barriers and all, in one line. It is experimental:
# cuda-cccl 1.0 and 1.1 have it under `cuda.coop._experimental`, and cuda-cccl 1.2 removed it while a new version is
# written, so pin `cuda-cccl<1.2` to use it (the course's test environment has 1.1.1). It generates real device
# code, so it runs on a GPU only.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("cuda.coop._experimental"):
    import numba
    from cuda.coop._experimental import block as coop_block
    from numba import cuda

    THREADS = 128
    block_sum = coop_block.make_sum(numba.float32, THREADS)

    @cuda.jit(link=block_sum.files)
    def coop_block_sums(x, partial):
        i = cuda.grid(1)
        v = x[i] if i < x.size else numba.float32(0)
        total = block_sum(v)  # CUB's block reduction: the whole of lab 04's tree
        if cuda.threadIdx.x == 0:
            partial[cuda.blockIdx.x] = total

    xs = np.rint(np.random.default_rng().uniform(-8, 8, 40 * THREADS + 5)).astype(np.float32)
    blocks = (xs.size + THREADS - 1) // THREADS
    d_partial = cuda.device_array(blocks, np.float32)
    coop_block_sums[blocks, THREADS](cuda.to_device(xs), d_partial)
    want = [xs[k:k + THREADS].sum() for k in range(0, xs.size, THREADS)]
    print("cuda.coop block sums match NumPy:", np.array_equal(d_partial.copy_to_host(), want))
elif env.is_gpu:
    print("cuda.coop is not installed: `pip install 'cuda-cccl[cu12]>=1.0,<1.2'`, then run this cell again.")
else:
    print("sim mode: cuda.coop builds CUB device code and links it into the kernel, which the simulator cannot run. "
          "Lab 04's block_sum is what it replaces.")

# %% [markdown]
# ## 6. Tiles instead of threads: cuTile Python
#
# Every kernel of this course says what **one thread** does. **cuTile Python** (the `cuda-tile` package, `import
# cuda.tile as ct`) says what **one block** does to whole tiles of data: `ct.bid(0)` is the block's index,
# `ct.load(x, index=(i,), shape=(tile,))` loads the `i`-th tile of `x`, arithmetic on tiles is elementwise, and
# `ct.store(out, index=(i,), tile=...)` writes one back; the compiler decides how the threads of the block share the
# work, and uses TMA and Tensor Cores where it can. Tile sizes are compile-time constants (`ct.Constant[int]`).
# `ct.launch(stream, grid, kernel, args)` runs it. Here is lab 02's SAXPY as a tile kernel. It needs a driver of
# release 580 or later and a `tileiras` compiler that supports the GPU: CUDA 13.1 or later for Blackwell, 13.2 or
# later for Ampere and Ada, **13.3 or later for Hopper** (H100/H200, cuTile Python 1.4.0 or later; NVIDIA/cutile-python
# issue #27; the pinned cuda-tile 1.7.0's README still says 13.2 covers Blackwell, Ampere and Ada only). Install it
# with `pip install 'cuda-tile[tileiras]'` in a CUDA 13 environment; the course's CUDA 12.9 environment has the
# package but not the compiler. On a GPU the cell says what is missing if it cannot compile.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and have("cuda.tile"):
    import cupy
    import cuda.tile as ct

    TILE = 1024

    @ct.kernel
    def saxpy_tile(a, x, y, out, tile: ct.Constant[int]):
        i = ct.bid(0)
        xt = ct.load(x, index=(i,), shape=(tile,))
        yt = ct.load(y, index=(i,), shape=(tile,))
        ct.store(out, index=(i,), tile=a * xt + yt)

    n = 1 << 20
    x, y = cupy.random.random(n, dtype=cupy.float32), cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(x)
    try:
        ct.launch(cupy.cuda.get_current_stream(), ((n + TILE - 1) // TILE, 1, 1), saxpy_tile,
                  (np.float32(2.0), x, y, out, TILE))
        cupy.cuda.get_current_stream().synchronize()
        print("cuTile SAXPY matches CuPy:", bool(cupy.allclose(out, 2 * x + y)))
    except Exception as exc:  # noqa: BLE001 - a missing compiler or an old driver, reported in words
        print(f"cuTile could not compile or launch here ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). "
              f"It needs driver release 580 or later and a tileiras compiler for this GPU ({env.device_name}, compute "
              "capability " + ".".join(map(str, env.compute_capability or ())) + "): CUDA 13.1+ for Blackwell, 13.2+ for "
              "Ampere/Ada, 13.3+ for Hopper (pip install 'cuda-tile[tileiras]' in a CUDA 13 environment).")
elif env.is_gpu:
    print("cuTile Python is not installed: `pip install 'cuda-tile[tileiras]'` in a CUDA 13 environment.")
else:
    print("sim mode: cuTile compiles tile kernels for the GPU only. The difference to see: lab 02's SAXPY is written "
          "per element (out[i] = a * x[i] + y[i] for the thread's i); the tile kernel per block of 1024 elements.")

# %% [markdown]
# ## 7. A GEMM with an epilogue through nvmath-python
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
# ## 8. Profiling your own kernels: NVTX, Nsight Systems, Nsight Compute
#
# **NVTX** ranges name stretches of your program on the profiler's timeline: with the `nvtx` package,
# `with nvtx.annotate("saxpy", color="green"):` around a `labkit.bench.measure(...)` call makes that measurement a
# labelled bar in Nsight Systems, next to the kernels and copies it launched.
#
# - **Nsight Systems** (`nsys`) shows the whole timeline: CPU, copies, kernels, NVTX ranges. Run a script, not the
#   notebook: `nsys profile --trace=cuda,nvtx -o saxpy python saxpy.py`, then `nsys stats saxpy.nsys-rep` for tables
#   (or open the report in the GUI). It answers: where does the time go, do copies and kernels overlap?
# - **Nsight Compute** (`ncu`) looks inside one kernel: `ncu --set full -k regex:saxpy -o saxpy python saxpy.py`, then
#   `ncu --import saxpy.ncu-rep --csv`. Numba mangles a kernel's entry name (printed below for lab 02's SAXPY), so
#   `-k saxpy`, which must match the whole name, may match nothing; `-k regex:saxpy` selects every kernel whose name
#   contains `saxpy`. It answers: how close to the memory or compute roof, which stalls, which line.
#   Build the kernel with `@cuda.jit(lineinfo=True)` so the report maps instructions back to your Python lines. It
#   needs access to the GPU's performance counters (on a shared machine, ask the administrator).
#
# The script below is what to profile: lab 02's SAXPY with line information and an NVTX range. First, the name its
# kernel has in the PTX (and so in the profiler):

# %%
saxpy_ptx = labkit.ptx.compile(labkit.kernels.get("saxpy"), "void(float32, float32[:], float32[:], float32[:])", "sm_90")
entry_name = labkit.cuda_cpp.entries(saxpy_ptx.text)[0].name
print(f"{entry_name[:72]}... ({len(entry_name)} characters)")
print("contains 'saxpy':", "saxpy" in entry_name, "| is 'saxpy':", entry_name == "saxpy")

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
# ## 9. Debugging your own kernels: compute-sanitizer
#
# `compute-sanitizer` runs a program with its kernels instrumented; prefix the command, as for the profilers:
# `compute-sanitizer --tool memcheck python script.py`. Three tools fit the mistakes of labs 02–04:
#
# | tool | finds | the lab's mistake | what the report says (in words like these) |
# |---|---|---|---|
# | `memcheck` | reads and writes outside an allocation | lab 02's SAXPY without its bounds check, on a size that is not a multiple of the block | "Invalid \_\_global\_\_ read of size 4 bytes" (the thread reads `x[i]` before it writes `out[i]`, so the read is reported first), the kernel, the thread and block, and the address "out of bounds" of the nearest allocation |
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
#   launches CUDA C++ from Python; `cuda.compute` and nvmath-python give tuned reductions and fused GEMM epilogues;
#   `cuda.coop` puts CUB's block reductions inside your own kernel; cuTile Python writes kernels per tile, not per
#   thread.
# - Hopper's thread-block clusters let blocks read each other's shared memory (`mapa`) between cluster barriers
#   (`barrier.cluster`); the cluster size is a launch parameter, and a block must not exit while a peer reads it.
# - Data-centre Blackwell moves the MMA accumulator from registers (`wgmma`) into Tensor Memory: one warp allocates
#   columns (`tcgen05.alloc`, powers of two from 32 to 512), one thread issues `tcgen05.mma`, threads read the result
#   with `tcgen05.ld`, and the kernel frees what it took (`tcgen05.dealloc`).
# - NVTX names your own ranges on the Nsight Systems timeline; Nsight Compute explains one kernel, line by line with
#   `lineinfo=True`.
# - compute-sanitizer's memcheck, racecheck (shared memory only) and synccheck find on a GPU what labkit's strict
#   simulator finds in `sim` mode.
#
# **Next:** back to [Lab 00 — Start here](00-start-here.ipynb) for the course map, or to any lab whose GPU cells you
# have not yet run on a GPU.
