# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 03 — The memory hierarchy
#
# **Learning objectives**
# - Explain coalescing: how a warp's 32 accesses become 32-byte sectors, and write coalesced 2-D kernels.
# - Use shared memory to reorder data (a transpose) and to reuse it (a tiled matrix multiply, a stencil with halo cells).
# - Avoid shared-memory bank conflicts with padding; place `cuda.syncthreads()` where it is needed and nowhere else.
# - Work out occupancy from threads, registers and shared memory; choose a block size and a register budget for a
#   target occupancy and confirm it with `ptxas`; read shared loads and barriers in PTX.
#
# **Prerequisites:** [Lab 02](02-first-kernels.ipynb) (2-D indexing, grid-stride loops).
#
# **Time:** 85 minutes (teaching 30, exercises 55)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import numpy as np
from numba import cuda

from labkit import occupancy

xp = labkit.xp
rng = np.random.default_rng()


def timed(fn, name, **rates):
    """labkit.bench.measure with fewer repetitions in the simulator (its times are CPU times anyway)."""
    return labkit.bench.measure(fn, name=name, repeat=10 if env.is_gpu else 1, warmup=1 if env.is_gpu else 0, **rates)


# %% [markdown]
# ## The levels
#
# Each thread has **registers** (the fastest storage, private). Each block has **shared memory**, on the SM,
# visible to all threads of the block and gone when the block ends. All threads see **global memory** (HBM),
# cached in L2. How much shared memory an SM has, per architecture:

# %%
for arch in ("sm_70", "sm_80", "sm_90"):
    lim = occupancy.limits(arch)
    print(f"{arch}: {lim.shared_per_sm // 1024} KiB shared memory per SM (at most {lim.max_shared_per_block // 1024} KiB "
          f"per block), {lim.registers_per_sm} 32-bit registers per SM, {lim.max_warps_per_sm} warps per SM")
print("source:", occupancy.SOURCE)

# %% [markdown]
# ## Coalescing
#
# The 32 threads of a warp issue a load together. The memory system serves it in **32-byte sectors**: if the
# 32 lanes read 32 consecutive `float32` values (128 bytes), that is 4 sectors and every byte moved is used. If
# they read every second value, 8 sectors and half the bytes are wasted; one value per row of a wide matrix,
# 32 sectors and 1/8 of the bytes used. `labkit.occupancy.coalescing` does this arithmetic:

# %%
for pattern, stride in [("contiguous", 1), ("strided", 2), ("strided", 32), ("broadcast", 1)]:
    c = occupancy.coalescing(occupancy.warp_addresses(pattern, stride=stride), size=4)
    print(f"{pattern:10} stride {stride:2}: {c.sectors:2} sectors, {c.bytes_used:3} B used of {c.bytes_moved:4} B moved "
          f"({100 * c.efficiency:.0f}%)")

# %% [markdown]
# Explore other patterns, element sizes and misaligned starts:

# %% tags=["nbval-ignore-output"]
labkit.widgets.coalescing_explorer()

# %% [markdown]
# In a row-major (C-order) 2-D array, `a[r, c]` and `a[r, c + 1]` are neighbours in memory, `a[r + 1, c]` is a
# whole row away. So the lanes of a warp (consecutive `threadIdx.x`) must walk along a row: **x is the column**.
# This copy gets it backwards — correct values, uncoalesced accesses:

# %%
@cuda.jit
def copy2d_strided(src, dst):
    row, col = cuda.grid(2)  # x = row: lanes of a warp are a whole row apart
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


# %% [markdown]
# ### Exercise 1 — a coalesced 2-D copy
#
# Write `copy2d` so that consecutive threads of a warp copy consecutive elements of a row. The check launches it
# with x over the columns on shapes drawn fresh each run, with blocks up to 32 × 32, compares the values, and
# (in `sim` mode) records every access to count the sectors per warp request.

# %% tags=["exercise"]
@cuda.jit
def copy2d(src, dst):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]
    # END SOLUTION
    # BEGIN SKELETON
    # col, row = ...
    pass
    # END SKELETON


# %%
labkit.check.coalesced_copy(copy2d);

# %% [markdown]
# What the two copies touch, traced in the simulator on a 32 × 32 array with blocks of 32 × 8 threads. Choose
# "warp" and look at the elements warp 0 reads: with x along the rows (`copy2d_strided`) they are one per row, a
# column, and each warp request touches 32 sectors; with x along the columns (your `copy2d`) they are one
# 128-byte piece of a row, 4 sectors. The coalescing panel sets each request against the ideal.

# %% tags=["nbval-ignore-output"]
a_show = rng.standard_normal((32, 32), dtype=np.float32)
labkit.show(copy2d_strided, a_show, np.zeros_like(a_show), grid=(1, 4), block=(32, 8),
            reference=labkit.check.solved_or_reference("03.coalesced-copy", copy2d),
            labels=("copy2d_strided (x = row)", "copy2d (x = column)"))

# %% [markdown]
# Both copies timed. The strided one is launched with its grid transposed so that it covers the array too.
# Each copies `2 × rows × cols × 4` bytes (read and write); on a GPU, compare their GB/s.

# %% tags=["nbval-ignore-output"]
k_copy = labkit.check.solved_or_reference("03.coalesced-copy", copy2d)
side = labkit.size(gpu=8192, sim=64)
src = cuda.to_device(rng.standard_normal((side, side), dtype=np.float32))
dst = cuda.device_array((side, side), np.float32)
blk = (32, 8)
grid = ((side + 31) // 32, (side + 7) // 8)
t_good = timed(lambda: k_copy[grid, blk](src, dst), "copy2d, x = column", bytes=8 * side * side)
t_bad = timed(lambda: copy2d_strided[grid[::-1], blk[::-1]](src, dst), "copy2d, x = row", bytes=8 * side * side)
print(labkit.bench.table([t_good, t_bad]))

# %% [markdown]
# ## Shared memory: a transpose
#
# A transpose reads rows and writes columns, so one of the two is strided whatever you do — in global memory.
# The fix: read a 32 × 32 **tile** with coalesced reads into shared memory, wait for the whole block with
# `cuda.syncthreads()`, then write the tile's columns as coalesced rows of the output. Shared memory does not
# care about the order.
#
# Almost. Shared memory has 32 **banks**, 4 bytes wide; word `w` lives in bank `w % 32`. The 32 lanes of a warp
# are served at once if they hit 32 different banks. A column of a 32 × 32 float tile is 32 words 32 apart: all
# in one bank, a 32-way **bank conflict**, served one lane at a time. Pad each row to 33 floats and the column's
# words are 33 apart: 32 different banks.
#
# That is the rule for 4-byte accesses. A warp's 8-byte accesses (`float64`) ask for 256 bytes and 16-byte ones
# (`float4` in CUDA C++) for 512, more than the 32 banks deliver at once (128 bytes), so the hardware serves them in
# phases, half a warp or a quarter of a warp at a time, and only lanes of the same phase can conflict: 32 lanes
# reading consecutive `float64` values are conflict-free, as Nsight Compute counts them. labkit's bank model and
# pictures count 4-byte words over the whole warp, and say so when they draw an 8-byte array.

# %%
col_of_32 = [r * 32 * 4 for r in range(32)]
col_of_33 = [r * 33 * 4 for r in range(32)]
print(f"column of a 32×32 tile: {occupancy.bank_conflict_degree(col_of_32)}-way conflict")
print(f"column of a 32×33 tile: {occupancy.bank_conflict_degree(col_of_33)}-way, i.e. conflict-free")

# %% [markdown]
# ### Exercise 2 — a tiled transpose with padding
#
# Blocks of `TILE × BLOCK_ROWS` = 32 × 8 threads; each block moves one 32 × 32 tile, each thread 4 elements
# (rows `ty`, `ty + 8`, `ty + 16`, `ty + 24` of the tile). Block `(bx, by)` reads tile `(bx, by)` of `a` and
# writes it, transposed, to tile `(by, bx)` of `out`. Shared-array shapes must be constants, hence
# `TILE_PADDED`. The check wants right values on non-square shapes drawn fresh each run (up to three tiles
# across), coalesced global reads and writes, and no
# bank conflicts; any missing `syncthreads()` shows as a race that names the two threads.

# %%
TILE = 32
TILE_PADDED = TILE + 1
BLOCK_ROWS = 8


@cuda.jit
def transpose_naive(a, out):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[col, row] = a[row, col]  # coalesced read, strided write


# %% tags=["exercise"]
@cuda.jit
def transpose(a, out):
    # BEGIN SOLUTION
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    cuda.syncthreads()
    col = cuda.blockIdx.y * TILE + tx
    row = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]
    # END SOLUTION
    # BEGIN SKELETON
    # tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    # 1. load: for j in range(0, TILE, BLOCK_ROWS): tile[ty + j, tx] = a[row + j, col]  (inside a)
    # 2. wait for the whole block
    # 3. store the tile transposed at block position (by, bx)
    pass
    # END SKELETON


# %%
labkit.check.transpose(transpose, block_rows=BLOCK_ROWS);

# %% tags=["nbval-ignore-output"]
k_tr = labkit.check.solved_or_reference("03.transpose", transpose)
at = cuda.device_array((side, side), np.float32)
tgrid = ((side + TILE - 1) // TILE, (side + TILE - 1) // TILE)
t_naive = timed(lambda: transpose_naive[grid, blk](src, at), "transpose, naive", bytes=8 * side * side)
t_tiled = timed(lambda: k_tr[tgrid, (TILE, BLOCK_ROWS)](src, at), "transpose, shared tiles", bytes=8 * side * side)
t_lib = timed(lambda: xp.ascontiguousarray(xp.asarray(src).T) if env.is_gpu else np.ascontiguousarray(src.copy_to_host().T),
              f"{xp.__name__}.ascontiguousarray(a.T)", bytes=8 * side * side)
print(labkit.bench.table([t_naive, t_tiled, t_lib, t_good]))

# %% [markdown]
# On a GPU the tiled transpose should come close to the coalesced copy above (same bytes moved); the naive one
# cannot. Here is the PTX of your transpose: shared stores (`st.shared`) when loading the tile, a barrier
# (`bar.sync`), shared loads (`ld.shared`) when writing it out.

# %%
ptx_tr = labkit.ptx.compile(k_tr, "void(float32[:,:], float32[:,:])", arch=env.arch)
ptx_tr.show("bar.sync", "ld.shared", "st.shared", limit=10)

# %% [markdown]
# The bank conflicts themselves, traced: two one-tile kernels that write a tile row by row and read it column by
# column, one with a 32 × 32 tile, one padded to 32 × 33. The bank map at the bottom shows each shared-memory
# request of the chosen warp over the 32 banks: without padding the 32 words of a column are all in one bank
# (32-way), with padding each is in its own.

# %%
@cuda.jit
def tile_columns(out):
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for j in range(0, TILE, BLOCK_ROWS):
        tile[ty + j, tx] = ty + j  # each warp writes a row of the tile
    cuda.syncthreads()
    for j in range(0, TILE, BLOCK_ROWS):
        out[ty + j, tx] = tile[tx, ty + j]  # each warp reads a column


@cuda.jit
def tile_columns_padded(out):
    tile = cuda.shared.array((TILE, TILE_PADDED), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for j in range(0, TILE, BLOCK_ROWS):
        tile[ty + j, tx] = ty + j
    cuda.syncthreads()
    for j in range(0, TILE, BLOCK_ROWS):
        out[ty + j, tx] = tile[tx, ty + j]


# %% tags=["nbval-ignore-output"]
labkit.show(tile_columns, np.zeros((TILE, TILE), np.float32), grid=1, block=(TILE, BLOCK_ROWS),
            reference=tile_columns_padded, labels=("32 × 32 tile", "32 × 33 tile (padded)"))

# %% [markdown]
# And your transpose beside the reference on a 40 × 72 matrix: 3 × 2 tiles, the last ones partly outside. Compare
# the scores, the sectors per request of `a` and `out`, and the worst bank conflict of the tile.

# %% tags=["nbval-ignore-output"]
m_show = rng.standard_normal((40, 72), dtype=np.float32)
labkit.show(k_tr, m_show, np.zeros((72, 40), np.float32), grid=(3, 2), block=(TILE, BLOCK_ROWS),
            reference=labkit.kernels.get("transpose_shared"))

# %% [markdown]
# ## Shared memory for reuse: a tiled matrix multiply
#
# The naive product `C = A @ B` gives each thread one element of C and reads a row of A and a column of B from
# global memory: every element of A is read N times, every element of B M times. Tiling cuts that traffic by
# the tile size: a block of `MM_TILE × MM_TILE` threads loads one tile of A and one of B into shared memory,
# multiplies them (each element read there `MM_TILE` times), and moves on along K.
#
# Two barriers per step: after loading (nobody may read a tile before it is complete) and after using it
# (nobody may overwrite it while others still read it). Threads outside the matrices load zeros but still
# take part in both barriers.

# %%
MM_TILE = 16
matmul_naive = labkit.kernels.get("matmul_naive")

# %% [markdown]
# ### Exercise 3 — tiled matrix multiply
#
# Write `matmul(A, B, C)` for blocks of `MM_TILE × MM_TILE` threads. The check multiplies shapes drawn fresh each
# run that are not multiples of the tile, one with K of five tiles or more, and 1 × 1, and reports a missing
# barrier as a race (the one after loading, and the one at the end of each step).

# %% tags=["exercise"]
@cuda.jit
def matmul(A, B, C):
    # BEGIN SOLUTION
    sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    sb = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * MM_TILE + tx
    row = cuda.blockIdx.y * MM_TILE + ty
    acc = np.float32(0.0)
    for t in range((A.shape[1] + MM_TILE - 1) // MM_TILE):
        k = t * MM_TILE
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else np.float32(0.0)
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(MM_TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
    # END SOLUTION
    # BEGIN SKELETON
    # sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32); sb = ...
    # for each tile t along K: load sa[ty, tx] and sb[ty, tx] (0.0 outside), barrier,
    #     accumulate sa[ty, kk] * sb[kk, tx], barrier
    # store C[row, col] if inside C
    pass
    # END SKELETON


# %%
labkit.check.matmul(matmul, tile=MM_TILE);

# %% tags=["nbval-ignore-output"]
k_mm = labkit.check.solved_or_reference("03.matmul", matmul)
m = labkit.size(gpu=2048, sim=64)
A = cuda.to_device(rng.standard_normal((m, m), dtype=np.float32))
B = cuda.to_device(rng.standard_normal((m, m), dtype=np.float32))
C = cuda.device_array((m, m), np.float32)
mgrid = ((m + MM_TILE - 1) // MM_TILE,) * 2
flops = 2 * m**3
tn = timed(lambda: matmul_naive[mgrid, (MM_TILE, MM_TILE)](A, B, C), "matmul, naive", flops=flops)
tt = timed(lambda: k_mm[mgrid, (MM_TILE, MM_TILE)](A, B, C), "matmul, shared tiles", flops=flops)
XA, XB = xp.asarray(A) if env.is_gpu else A.copy_to_host(), xp.asarray(B) if env.is_gpu else B.copy_to_host()
tl = timed(lambda: XA @ XB, f"{xp.__name__} matmul (cuBLAS on a GPU)", flops=flops)
print(labkit.bench.table([tn, tt, tl]))
if env.is_gpu:
    print(f"tiled / naive speed-up: {tn.median_s / tt.median_s:.1f}×")
else:
    print("sim mode: simulator times do not compare kernels' GPU speed (barriers are costly in the simulator).")

# %% [markdown]
# In the PTX of your kernel, the inner product reads shared memory (`ld.shared`) and the step has two `bar.sync`:

# %%
ptx_mm = labkit.ptx.compile(k_mm, "void(float32[:,:], float32[:,:], float32[:,:])", arch=env.arch)
ptx_mm.show("bar.sync", limit=4)

# %% [markdown]
# ## Halo cells: a 1-D stencil
#
# A stencil computes each output from a neighbourhood of inputs, here the mean of `x[i-3 .. i+3]` (zeros outside
# the array). Each input is needed by 7 outputs; stage the block's inputs in shared memory once. A block of
# `blockDim.x` threads needs `blockDim.x + 2 × RADIUS` inputs: its own plus a **halo** of `RADIUS` on each side,
# which belongs to the neighbouring blocks and must be loaded too.
#
# ### Exercise 4 — stencil with halo
#
# Write `stencil(x, out)` for blocks of up to `MAX_BLOCK` threads (the check uses 32 up to 256, on sizes drawn
# fresh each run, and arrays shorter than a block). Store element `i` at `sh[t + RADIUS]`; let the first `RADIUS` threads also load the
# halo on both sides.

# %%
RADIUS = 3
MAX_BLOCK = 256
STENCIL_SHARED = MAX_BLOCK + 2 * RADIUS


# %% tags=["exercise"]
@cuda.jit
def stencil(x, out):
    # BEGIN SOLUTION
    sh = cuda.shared.array(STENCIL_SHARED, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    sh[t + RADIUS] = x[i] if i < n else np.float32(0.0)
    if t < RADIUS:
        left = i - RADIUS
        sh[t] = x[left] if 0 <= left < n else np.float32(0.0)
        right = i + cuda.blockDim.x
        sh[t + cuda.blockDim.x + RADIUS] = x[right] if right < n else np.float32(0.0)
    cuda.syncthreads()
    if i < n:
        acc = np.float32(0.0)
        for k in range(2 * RADIUS + 1):
            acc += sh[t + k]
        out[i] = acc / np.float32(2 * RADIUS + 1)
    # END SOLUTION
    # BEGIN SKELETON
    # sh = cuda.shared.array(STENCIL_SHARED, np.float32)
    # load x[i] into sh[t + RADIUS]; the first RADIUS threads load the left and right halo; barrier;
    # out[i] = mean of sh[t .. t + 2 * RADIUS]
    pass
    # END SKELETON


# %%
labkit.check.stencil(stencil);

# %% [markdown]
# Your stencil beside the reference on 100 elements in blocks of 32. Pick block 1, thread 0: it loads its own
# element, `x[32]`, and the halo elements `x[29]` and `x[64]`; threads 1 and 2 load the rest of the halo. Then
# each thread reads seven elements of shared memory, not of global memory (compare the two reads columns of
# the score).

# %% tags=["nbval-ignore-output"]
x_show = rng.standard_normal(100, dtype=np.float32)
labkit.show(labkit.check.solved_or_reference("03.stencil", stencil), x_show, np.zeros(100, np.float32), grid=4, block=32,
            reference=labkit.kernels.get("stencil_1d"))

# %% [markdown]
# ## Occupancy
#
# An SM hides memory latency by switching between warps. How many warps it can hold at once (its
# **occupancy**) depends on three resources per block: warp slots (threads), registers and shared memory. The
# calculator applies the CUDA occupancy rules per architecture (register allocation in units of 256 per warp,
# shared memory in units of 128 or 256 bytes plus 1 KiB reserved per block from sm_80, at most 32 blocks per SM).

# %% tags=["nbval-ignore-output"]
labkit.widgets.occupancy_calculator("sm_90", threads=256, registers=32, shared=0)

# %% [markdown]
# The registers come from the compiler: `ptxas` reports them for your tiled matrix multiply, and its shared
# memory is two tiles of `MM_TILE × MM_TILE` floats. What occupancy does it get on each architecture?

# %%
res = ptx_mm.resources()
regs = res[0].registers if res else 32
print(f"registers per thread: {regs}" + (" (from ptxas)" if res else " (ptxas not installed: assumed)"))
for arch in ("sm_70", "sm_80", "sm_90"):
    print(occupancy.occupancy(arch, MM_TILE * MM_TILE, regs, 2 * MM_TILE * MM_TILE * 4))

# %% [markdown]
# High occupancy is not a goal in itself: a kernel with enough independent work per thread can run at full
# bandwidth with half the warps. But a kernel that runs at 12% occupancy because it asks for 255 registers
# usually has a problem.
#
# ### Exercise 5 — a launch plan for a target occupancy
#
# Write `launch_plan(arch, target, shared_per_block)`: a block size (a multiple of 32, up to 1,024) and the
# **largest** register budget per thread with which `occupancy.occupancy(arch, threads, registers,
# shared_per_block).occupancy` still reaches `target` (a fraction: 0.75 for 75%), or `None` when no block size
# reaches it. Why the largest: a kernel that needs more registers than its budget spills them to slow local memory,
# so give none away. The check draws fresh targets, architectures (sm_70, sm_80, sm_90) and shared-memory sizes:
# full occupancy, shared memory that caps the blocks per SM, and a target out of reach. `occupancy()` raises
# `labkit.LabkitError` for a block that cannot launch at all.
#
# The contract: return a pair of integers `(threads_per_block, registers_per_thread)`, registers from 1 to 255, or
# `None`. When several block sizes reach the target, any of them is accepted, with the largest budget **for that
# block size** (the solution takes the block size whose budget is largest overall). A block that cannot launch with
# some budget may still launch with fewer registers: try smaller budgets before giving up on that block size.

# %% tags=["exercise"]
def launch_plan(arch, target, shared_per_block):
    # BEGIN SOLUTION
    def reaches(threads, regs):
        try:
            return occupancy.occupancy(arch, threads, regs, shared_per_block).occupancy >= target
        except labkit.LabkitError:  # this block cannot launch with these resources
            return False

    best = None
    for threads in range(32, 1025, 32):
        budgets = [r for r in range(1, 256) if reaches(threads, r)]
        if budgets and (best is None or max(budgets) > best[1]):
            best = (threads, max(budgets))
    return best
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # for each block size, the largest budget that still reaches the target
    # END SKELETON


# %%
labkit.check.launch_plan(launch_plan);

# %% [markdown]
# Now confirm a plan for a real kernel. The plan gives a budget; the compiler decides what the kernel uses.
# `ptxas` reports it (`ptx.resources()`), and the calculator turns the kernel's real registers into its real
# occupancy. A kernel over budget would need `@cuda.jit(max_registers=budget)`, which may make it spill.

# %%
plan = labkit.check.solved_or_reference("03.occupancy", launch_plan)
target = 0.75
threads, budget = plan("sm_90", target, 0)
print(f"plan for {target:.0%} occupancy on sm_90: blocks of {threads} threads, at most {budget} registers per thread")
saxpy_res = labkit.ptx.compile(labkit.kernels.get("saxpy"), "void(float32, float32[:], float32[:], float32[:])",
                               arch="sm_90").resources()
used = saxpy_res[0].registers if saxpy_res else budget
print(f"SAXPY uses {used} registers per thread" + (" (ptxas)" if saxpy_res else " (ptxas not installed: assumed)"))
print(occupancy.occupancy("sm_90", threads, used, 0))
print("confirmed: the kernel fits the budget" if used <= budget else "over budget: limit it with max_registers")

# %% [markdown]
# ## What you learned
# - A warp's accesses are served in 32-byte sectors: neighbouring lanes should touch neighbouring addresses,
#   so x is the column.
# - Shared memory reorders data (transpose) and lets a block reuse it (tiled matmul, stencil halo); a barrier
#   separates writing shared memory from reading it, and reading it from overwriting it.
# - 32 banks of 4 bytes: a padded row (33 instead of 32) turns a 32-way conflict into none.
# - Occupancy is set by warps, registers and shared memory per block; a launch plan picks a block size and a
#   register budget for a target, and `ptxas` tells you whether the kernel fits it.
#
# **Next:** [Lab 04 — Reductions and atomics](04-reductions-and-atomics.ipynb): many threads, one result.
