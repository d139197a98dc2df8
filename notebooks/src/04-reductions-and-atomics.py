# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 04 — Reductions and atomics
#
# **Learning objectives**
# - Recognise a race condition (a lost update, a missing barrier) and find one with a race detector.
# - Use atomics in global and in shared memory; build a histogram both ways and compare their PTX.
# - Write a tree reduction in shared memory with `cuda.syncthreads()`, and a full reduction in one launch.
# - Reduce within a warp with shuffles (`shfl_down_sync`), without shared memory or barriers.
# - Write an inclusive prefix scan in shared memory that works for any n, through block sums.
#
# **Prerequisites:** [Lab 03](03-memory-hierarchy.ipynb) (shared memory, barriers).
#
# **Time:** 85 minutes (teaching 30, exercises 55)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import numpy as np
from numba import cuda

from labkit.check.harness import find_race

xp = labkit.xp
rng = np.random.default_rng()


def timed(fn, name, **rates):
    """labkit.bench.measure with fewer repetitions in the simulator (its times are CPU times anyway)."""
    return labkit.bench.measure(fn, name=name, repeat=10 if env.is_gpu else 1, warmup=1 if env.is_gpu else 0, **rates)


# %% [markdown]
# ## Many threads, one result
#
# Counting is the simplest reduction. Let every thread whose element is positive add 1 to a counter:

# %%
@cuda.jit
def count_positive_racy(x, count):
    i = cuda.grid(1)
    if i < x.size and x[i] > 0:
        count[0] += 1  # read, add, write: three steps


# %% [markdown]
# `count[0] += 1` is three steps: load the counter, add one, store it. Two threads that load the same old value
# both store old + 1, and one increment is lost. On a GPU the count comes out far too small, and different on
# every run. In the CUDA simulator threads mostly run one after another, so the result may even look right:
# luck is not correctness. labkit's race finder runs the kernel under a memory model as weak as CUDA's
# guarantees and names the first two threads that conflict:

# %%
x = rng.standard_normal(labkit.size(gpu=1 << 20, sim=256)).astype(np.float32)
d_count = cuda.to_device(np.zeros(1, np.int32))
count_positive_racy[(x.size + 127) // 128, 128](cuda.to_device(x), d_count)
print("counted:", d_count.copy_to_host()[0], " true count:", int((x > 0).sum()))
find_race(count_positive_racy, 2, 128, x[:256], np.zeros(1, np.int32), names=("x", "count"));

# %% [markdown]
# (`find_race` runs in the simulator and sees global and shared memory. On a GPU, NVIDIA's
# `compute-sanitizer --tool racecheck` finds hazards in **shared memory only**: it would not report this race on a
# global counter. For global memory, reason about which threads write each address, or run the kernel under
# `find_race`.)
#
# ## Atomics
#
# `cuda.atomic.add(array, index, value)` performs the load-add-store as one indivisible operation and returns
# the old value. Atomics on one address serialise, so they are correct, not free.
#
# ### Exercise 1 — histogram with global atomics
#
# `data` holds bytes (`uint8`); `hist` has 256 `int32` bins, zero at the start. Count each value with a
# grid-stride loop and global atomics. The check uses skewed data (most bytes in a few bins, so many threads
# collide), sizes drawn fresh each run, and grids both larger and smaller than the data (one block strides ten
# times and more, with a bin above 255 counts).

# %% tags=["exercise"]
@cuda.jit
def histogram(data, hist):
    # BEGIN SOLUTION
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i], 1)
    # END SOLUTION
    # BEGIN SKELETON
    # for i in <grid-stride range over data>:
    #     <add 1 to bin data[i], atomically>
    pass
    # END SKELETON


# %%
labkit.check.histogram_global(histogram);

# %% [markdown]
# ## Shared-memory atomics
#
# With few bins and many threads, global atomics on the same bins queue up. Privatise: each block counts into
# its own 256 bins in **shared memory** (atomics there are handled on the SM), then adds its bins to the global
# histogram once per bin. Three phases, separated by barriers: zero the bins, count, merge.
#
# ### Exercise 2 — histogram with shared-memory atomics
#
# The check runs the cases of Exercise 1 and one more: a single block counting over 65,535 bytes of one value, so
# the shared bins must be `int32` (a `uint16` bin would wrap past 65,535, and `cuda.atomic.add` has no 8- or 16-bit
# form at all: a GPU compile refuses it, and so does the simulator).

# %%
NBINS = 256


# %% tags=["exercise"]
@cuda.jit
def histogram_shared(data, hist):
    # BEGIN SOLUTION
    local = cuda.shared.array(NBINS, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        if local[b] != 0:
            cuda.atomic.add(hist, b, local[b])
    # END SOLUTION
    # BEGIN SKELETON
    # local = cuda.shared.array(NBINS, np.int32)
    # 1. zero local (threads share the bins: b in range(threadIdx.x, NBINS, blockDim.x)); barrier
    # 2. count into local with atomics; barrier
    # 3. add each bin of local to hist, atomically
    pass
    # END SKELETON


# %%
labkit.check.histogram_shared(histogram_shared);

# %% [markdown]
# The two kernels side by side, with the library's histogram (`bincount`). Each reads the data once, so GB/s is
# data bytes over time. Then the PTX: Numba addresses the global histogram generically, so its atomic is
# `atom.add.u32` with no state space in the name (the hardware finds from the address that it is global memory; an
# atomic whose old value is not needed may appear as `red.add.u32`); the shared version's counting atomics name their
# space: `atom.shared.add.u32`. The 32-bit add is the same for signed and unsigned integers, hence `.u32` for `int32`
# bins.

# %% tags=["nbval-ignore-output"]
k_hg = labkit.check.solved_or_reference("04.histogram-global", histogram)
k_hs = labkit.check.solved_or_reference("04.histogram-shared", histogram_shared)
n = labkit.size(gpu=1 << 26, sim=1024)
data = np.minimum(rng.exponential(20, n), 255).astype(np.uint8)  # skewed towards small values
d_data, d_hist = cuda.to_device(data), cuda.device_array(NBINS, np.int32)
blocks = 8 * (env.sm_count or 1) if env.is_gpu else 2
d_zeros = cuda.to_device(np.zeros(NBINS, np.int32))  # reset the bins from device memory, not from the host


def run(kernel):
    d_hist.copy_to_device(d_zeros)
    kernel[blocks, 256](d_data, d_hist)


run(k_hs)
print("shared-memory histogram matches bincount:", np.array_equal(d_hist.copy_to_host(), np.bincount(data, minlength=NBINS)))
X = xp.asarray(data)
print(labkit.bench.table([timed(lambda: run(k_hg), "histogram, global atomics", bytes=n),
                          timed(lambda: run(k_hs), "histogram, shared atomics", bytes=n),
                          timed(lambda: xp.bincount(X, minlength=NBINS), f"{xp.__name__}.bincount", bytes=n)]))

# %%
for name, k in (("global", k_hg), ("shared", k_hs)):
    hist_ptx = labkit.ptx.compile(k, "void(uint8[:], int32[:])", arch=env.arch)
    mix = hist_ptx.summary()
    print(f"histogram, {name} atomics: {mix.atomics_global} global and {mix.atomics_shared} shared atomic instruction(s), "
          f"{mix.barriers} barrier(s)")
    for line in hist_ptx.lines("atom.", "red."):
        print("   ", line)

# %% [markdown]
# ## A tree reduction in a block
#
# To sum a block's values, pair them up: in step one, thread `t < 128` adds element `t + 128` to element `t`;
# then 64, 32, ... 1. After log₂(blockDim) steps, element 0 holds the sum. Every step reads what other threads
# wrote in the step before, so **every** thread must pass a `cuda.syncthreads()` between steps — the barrier
# goes outside the `if t < s`.
#
# ### Exercise 3 — block sum
#
# Write `block_sum(x, partial)`: `partial[b]` = the sum of block `b`'s elements (0.0 past the end of `x`). Blocks
# are powers of two up to `MAX_BLOCK` = 256 threads; the check uses 32, 64, 128 and 256 on sizes drawn fresh
# each run, so nothing may assume one block size.

# %%
MAX_BLOCK = 256


# %% tags=["exercise"]
@cuda.jit
def block_sum(x, partial):
    # BEGIN SOLUTION
    sh = cuda.shared.array(MAX_BLOCK, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]
    # END SOLUTION
    # BEGIN SKELETON
    # sh = cuda.shared.array(MAX_BLOCK, np.float32)
    # load one element per thread (0.0 past the end); barrier
    # s = blockDim.x // 2; while s > 0: add sh[t + s] into sh[t] for t < s; barrier; s //= 2
    # thread 0 stores sh[0] in partial[blockIdx.x]
    pass
    # END SKELETON


# %%
labkit.check.block_sum(block_sum);

# %% [markdown]
# The tree, traced: your `block_sum` beside the reference on 64 elements in blocks of 32. Pick thread 0: after
# loading its element it reads `sh[16]`, `sh[8]`, `sh[4]`, `sh[2]` and `sh[1]`, one step per barrier, adding
# each into `sh[0]`; thread 31 only loads. Choose "block" to see every element of the shared array read and
# written. The reference's score shows 11 shared reads for thread 0: two per step of the tree, and the last read.

# %% tags=["nbval-ignore-output"]
x_tree = rng.standard_normal(64).astype(np.float32)
labkit.show(labkit.check.solved_or_reference("04.block-sum", block_sum), x_tree, np.zeros(2, np.float32), grid=2,
            block=32, reference=labkit.kernels.get("block_sum"))

# %% [markdown]
# ## A full reduction in one launch
#
# In an ordinary launch, a block must not wait for a block that may not have started: CUDA does not promise that all
# blocks are resident at once, so a block spinning on a later block's flag can wait forever (waiting only on blocks
# that are already running is what CUB's single-pass scan does; see the scan below). (A *cooperative* launch can: it runs only as
# many blocks as fit on the GPU at once, and `cuda.cg.this_grid().sync()` is then a barrier for the whole grid. It
# limits the grid size, so reductions rarely use it.) The block sums are combined another way: a second
# launch over `partial`, or one atomic add per block into the result. Combine that with a grid-stride loop
# (each thread first sums many elements in a register) and a grid of a few blocks per SM reads the whole array
# at full bandwidth: one pass, one atomic per block.
#
# ### Exercise 4 — sum everything
#
# Write `sum_all(x, out)`, which adds `sum(x)` to `out[0]` (zero at the start) for any grid, in three levels: each
# thread sums its elements (a grid-stride loop), each block combines its threads with the shared-memory tree of
# Exercise 3, and one thread per block adds the block's sum with one atomic. One atomic per thread, or one thread
# summing the whole array, gives the right number but is not the exercise, and the check rejects both. It launches
# sizes drawn fresh each run on grids larger than the data and on grids where each thread loops ten times and more,
# with blocks of 32 up to `MAX_BLOCK` threads.

# %% tags=["exercise"]
@cuda.jit
def sum_all(x, out):
    # BEGIN SOLUTION
    sh = cuda.shared.array(MAX_BLOCK, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0.0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, sh[0])
    # END SOLUTION
    # BEGIN SKELETON
    # 1. acc = sum of x[i] over a grid-stride loop
    # 2. the tree of block_sum on acc
    # 3. thread 0: add the block's sum to out[0], atomically
    pass
    # END SKELETON


# %%
labkit.check.full_sum(sum_all);

# %% tags=["nbval-ignore-output"]
k_sum = labkit.check.solved_or_reference("04.full-sum", sum_all)
n = labkit.size(gpu=1 << 26, sim=2048)
x = rng.standard_normal(n).astype(np.float32)
d_x, d_total, zero = cuda.to_device(x), cuda.device_array(1, np.float32), cuda.to_device(np.zeros(1, np.float32))
rblocks = 4 * (env.sm_count or 1) if env.is_gpu else 2


def reduce():
    d_total.copy_to_device(zero)
    k_sum[rblocks, 256](d_x, d_total)


reduce()
print(f"sum: {d_total.copy_to_host()[0]:.4f}, NumPy (float64): {x.astype(np.float64).sum():.4f}")
X = xp.asarray(x)
print(labkit.bench.table([timed(reduce, "sum_all (your kernel)", bytes=4 * n),
                          timed(lambda: X.sum(), f"{xp.__name__} sum", bytes=4 * n)]))

# %% [markdown]
# The float32 sum differs from the float64 one in the last digits, and on a GPU it may differ between runs: the
# order in which blocks' atomics arrive changes the rounding.
#
# ## Warp-level reduction with shuffles
#
# The 32 threads of a warp can read each other's registers directly: `cuda.shfl_down_sync(mask, v, d)` returns
# the `v` of the lane `d` above the caller (its own `v` past the warp's end). Adding it for d = 16, 8, 4, 2, 1
# leaves the warp's sum in lane 0: five instructions, no shared memory, no barrier. `mask` names the lanes that
# take part; `0xFFFFFFFF` means all 32, and then all 32 must reach the call.
#
# Numba's simulator has no warp functions; `labkit.setup()` adds shuffles, votes and `syncwarp` to it (module
# `labkit.simwarp`), so this runs on a CPU too, with the same semantics: the lanes of a warp meet at each call.
#
# ### Exercise 5 — warp sum
#
# Write `warp_sum(x, out)`: `out[w]` = the sum of elements `32w` to `32w + 31` (zeros past the end of `x`).
# Blocks are multiples of 32 threads, up to 256 (the check uses 32 to 256, on sizes drawn fresh each run), so
# warp `w` is global thread `i` with `i // 32 == w`.

# %% tags=["exercise"]
@cuda.jit
def warp_sum(x, out):
    # BEGIN SOLUTION
    i = cuda.grid(1)
    v = x[i] if i < x.size else np.float32(0.0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.size:
        out[i // 32] = v
    # END SOLUTION
    # BEGIN SKELETON
    # v = x[i], or 0.0 past the end (every lane must take part in the shuffles, so no early return)
    # for offset 16, 8, 4, 2, 1: v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
    # lane 0 stores v at out[i // 32] (if that warp has an output)
    pass
    # END SKELETON


# %%
labkit.check.warp_sum(warp_sum);

# %% [markdown]
# The PTX shows the shuffles as `shfl.sync.down.b32`: no shared memory, no `bar.sync`.

# %% tags=["nbval-ignore-output"]
k_warp = labkit.check.solved_or_reference("04.warp-sum", warp_sum)
ptx_w = labkit.ptx.compile(k_warp, "void(float32[:], float32[:])", arch=env.arch)
ptx_w.show("shfl", "bar.sync", limit=6)

# %% [markdown]
# In a full reduction, warp shuffles replace the last five steps of the shared-memory tree (and their barriers):
# each warp reduces its values, lane 0 of each warp writes one value to shared memory, one barrier, and the
# first warp reduces those.
#
# ## Find and fix the race
#
# This kernel counts, per block, the elements above a threshold. It has a bug that makes its counts wrong on a
# GPU. Run the race finder on it, read the report, and fix the kernel.

# %%
@cuda.jit
def count_above_racy(x, threshold, counts):
    count = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        count[0] += 1
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


# %%
x_small = rng.standard_normal(128).astype(np.float32)
find_race(count_above_racy, 2, 64, x_small, np.float32(0.0), np.zeros(2, np.int32), names=("x", "threshold", "counts"));

# %% [markdown]
# The same races, drawn: each × in the grid of threads is a thread of a conflicting pair (hover for the report),
# and the elements panel shows the one-element shared array `count` read and written by every thread whose
# element is above the threshold, with nothing ordering them.

# %% tags=["nbval-ignore-output"]
labkit.show(count_above_racy, x_small, np.float32(0.0), np.zeros(2, np.int32), grid=2, block=64)

# %% [markdown]
# ### Exercise 6 — fix it
#
# Copy `count_above_racy` into the cell below and fix it. There is more than one problem: after fixing the
# first, run `find_race` on your version until it reports no race, then run the check. It uses sizes drawn fresh
# each run and blocks of 32 up to 1024 threads.

# %% tags=["exercise"]
@cuda.jit
def count_above(x, threshold, counts):
    # BEGIN SOLUTION
    count = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]
    # END SOLUTION
    # BEGIN SKELETON
    # copy the body of count_above_racy here and fix it
    pass
    # END SKELETON


# %%
labkit.check.race(count_above);

# %% [markdown]
# Your fixed kernel beside the reference on the same input: no race left, and `count` is updated atomically
# (green in the elements panel once you choose "block").

# %% tags=["nbval-ignore-output"]
labkit.show(labkit.check.solved_or_reference("04.race", count_above), x_small, np.float32(0.0), np.zeros(2, np.int32),
            grid=2, block=64, reference=labkit.kernels.get("count_above"))

# %% [markdown]
# ## Prefix sums: a scan
#
# An **inclusive scan** replaces each element by the sum of all elements up to it: `[3, 1, 4, 1]` becomes
# `[3, 4, 8, 9]`. It is a reduction that keeps every partial result, and it is everywhere: stream compaction (where
# does each kept element go?), radix sort, histograms turned into offsets. Sequentially it is one loop. The
# textbook parallel form, which you write here, takes three launches, so that no block ever waits for another:
#
# 1. each block scans its own elements in shared memory and writes its total to `sums[blockIdx.x]`;
# 2. the block totals are scanned — with the same kernel, again and again while there are more totals than fit in
#    one block;
# 3. every block after the first adds the scanned total of all blocks before it.
#
# That reads the data twice and writes it twice. The tuned scan in CUB (what `cuda.compute` calls from Python,
# lab 10) does it in **one pass** with *decoupled look-back* (Merrill and Garland, "Single-pass Parallel Prefix
# Scan with Decoupled Look-back", NVIDIA technical report NVR-2016-002): each block publishes its own total at once
# and, as soon as it can, its inclusive prefix; a block looks back at its predecessors' published values, adding
# totals until it meets a prefix. Blocks do wait for each other there; that is safe only because a block waits for
# tiles handed out before its own, to blocks that are already running and will publish.
#
# Inside a block, **Hillis–Steele** takes log₂(block) steps: in the step with offset `d`, thread `t` adds the value
# `d` places to its left. Every thread must read before anyone overwrites, and everyone must have written before
# the next step reads: two barriers per step (or two shared buffers used in turn and one barrier).
#
# ### Exercise 7 — an inclusive scan for any n
#
# Write `scan_block(x, sums, out)` (steps 1 and 2) and `add_offsets(partial, offsets, out)` (step 3:
# `out[i] = partial[i] + offsets[blockIdx.x - 1]` for every block but the first). Blocks are powers of two from 32
# to `SCAN_BLOCK` threads. The check draws fresh whole numbers (so every order of adding gives the same result),
# sizes that span several blocks and are not multiples of the block, the largest block, and then runs the whole scan
# with labkit's `scan_any_n`, whose block sums need a second level.

# %%
SCAN_BLOCK = 256

# %% tags=["exercise"]
@cuda.jit
def scan_block(x, sums, out):
    # BEGIN SOLUTION
    sh = cuda.shared.array(SCAN_BLOCK, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else np.float32(0.0)
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else np.float32(0.0)
        cuda.syncthreads()  # everyone has read before anyone writes
        sh[t] += v
        cuda.syncthreads()  # everyone has written before the next step reads
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:  # the last thread holds the block's total (padding adds 0)
        sums[cuda.blockIdx.x] = sh[t]
    # END SOLUTION
    # BEGIN SKELETON
    # sh = cuda.shared.array(SCAN_BLOCK, np.float32); load x[i] (0 past the end); barrier
    # for offset = 1, 2, 4, ... < blockDim.x: read sh[t - offset] (0 if t < offset), barrier, add, barrier
    # write out[i]; the block's last thread writes sums[blockIdx.x]
    pass
    # END SKELETON


@cuda.jit
def add_offsets(partial, offsets, out):
    # BEGIN SOLUTION
    i = cuda.grid(1)
    if i < out.size:
        b = cuda.blockIdx.x
        out[i] = partial[i] + (offsets[b - 1] if b > 0 else np.float32(0.0))
    # END SOLUTION
    # BEGIN SKELETON
    pass
    # END SKELETON


# %%
labkit.check.scan(scan_block, add_offsets);

# %% [markdown]
# The whole scan of an array of any length, with your kernels (or labkit's while the check has not passed):

# %% tags=["nbval-ignore-output"]
from labkit.check.lab04 import scan_any_n

my_scan, my_add = labkit.check.solved_or_reference("04.scan", (scan_block, add_offsets))
values = np.rint(rng.uniform(-9, 9, labkit.size(gpu=1 << 20, sim=700))).astype(np.float32)
scanned = scan_any_n(my_scan, my_add, cuda.to_device(values), 64).copy_to_host()
print(f"n = {values.size}: matches np.cumsum: {np.array_equal(scanned, np.cumsum(values))}; last = {scanned[-1]:g}")

# %% [markdown]
# ## What you learned
# - A read-modify-write from several threads loses updates; `cuda.atomic.add` makes it indivisible.
# - Privatising in shared memory (`atom.shared`) cuts contention on global atomics.
# - A tree reduction needs a barrier after every step, reached by every thread of the block; blocks combine
#   with a second pass or one atomic each.
# - Within a warp, shuffles exchange registers without shared memory or barriers.
# - A scan keeps every partial sum: scan each block in shared memory, scan the block totals, add them back; CUB's
#   device scan does it in a single pass with decoupled look-back.
# - Numba's PTX addresses arrays generically: `ld.f32`, `st.f32`, `atom.add.u32` (global memory, no `.global` in the
#   name); shared memory is named: `ld.shared`, `atom.shared.add.u32`.
# - A race that the simulator's thread order hides is still a race: find it with a race detector
#   (here `find_race`; on a GPU `compute-sanitizer --tool racecheck`, which checks shared memory only).
#
# **Next:** [Lab 05 — CuPy](05-cupy.ipynb): array programming on the GPU, fused kernels and CUDA C++ from Python.
