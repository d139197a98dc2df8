# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 09 — Capstone: a video-analytics pipeline
#
# **Learning objectives**
# - Build a smart-surveillance motion detector end to end from GPU kernels: a fused background-update / difference /
#   threshold pass, a 3 × 3 erosion with correct borders, per-tile motion counts with atomics.
# - Check a pipeline stage by stage against a NumPy reference, on frames whose sizes are not multiples of the block.
# - Count each stage's bytes and operations, place it on the roofline of an H100 and an H200, and predict its speed
#   before measuring it; measure per-stage time, GB/s and percent of the HBM peak where a GPU is present.
# - Reason about what limits a real video pipeline: HBM traffic inside the GPU, host-to-device transfers outside it.
#
# **Prerequisites:** [Lab 03](03-memory-hierarchy.ipynb) (2-D indexing, shared memory), [Lab 05](05-cupy.ipynb)
# (arrays on the GPU, timing), [Lab 06](06-tensor-cores-mixed-precision.ipynb) (rooflines and peaks); the atomics of
# [Lab 04](04-reductions-and-atomics.ipynb) help.
#
# **Time:** 120 minutes (teaching 15, exercises 105)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
import numpy as np
from numba import cuda

from labkit import hw, video
from labkit.roofline import roofline

SHAPE = labkit.size(gpu=(1080, 1920), sim=(24, 32))  # rows, cols of a greyscale frame
N_FRAMES = labkit.size(gpu=60, sim=6)
TILE = labkit.size(gpu=16, sim=4)  # motion is counted per TILE × TILE pixels
BLOCK = (16, 16)  # x along a row, y down the columns
print(f"{N_FRAMES} frames of {SHAPE[0]}×{SHAPE[1]} pixels, motion tiles of {TILE}×{TILE}")

# %% [markdown]
# ## Where this comes from
#
# The course's source talk presented the DGX-2 for **intelligent video surveillance**: many camera streams decoded
# and analysed on GPUs, with the V100s' decoders handling the H.264 and H.265 streams of the time (the P100 lacks
# H.265 at 8K; no NVIDIA GPU decodes AV1 before Ampere: NVIDIA Video Codec SDK support matrix). Decoding is done by
# fixed-function hardware; what follows decoding — finding what moves, in every frame of every camera — is
# bandwidth-hungry array work, and that is the part you write here. The machine of the talk, from `labkit.hw`:

# %%
dgx2 = hw.system("DGX-2")
print(f"DGX-2: {dgx2.gpu_count.text()} × {dgx2.gpu}; HBM in all: {dgx2.gpu_memory_total}, "
      f"HBM bandwidth in all: {dgx2.memory_bandwidth_total}")
for name in ("V100", "H100", "H200"):
    g = hw.gpu(name)
    print(f"{g.name}: memory {g.memory_bandwidth}, FP32 {g.peak('fp32')}")

# %% [markdown]
# ## The video and the reference pipeline
#
# `video.synthetic_video` films a fixed scene: a lit wall with doors and benches, sensor noise, lighting that drifts
# brighter frame by frame, and three "people" walking (the first frame is empty). The same seed gives the same
# video. The pipeline, per frame:
#
# 1. **fused step** — `d = frame − bg`; `mask = |d| > thresh`; `bg += alpha · d`. The background `bg` is a running
#    average: slow changes (the light) are absorbed, movement is not;
# 2. **opening** — a 3 × 3 erosion removes isolated noise pixels, a 3 × 3 dilation restores the shapes;
# 3. **tile counts** — foreground pixels per tile of a coarse grid; tiles with enough motion, grouped, give boxes.

# %%
clip = video.synthetic_video(N_FRAMES, SHAPE, seed=0)
ref = video.run_reference(clip, tile=TILE)
print(ref.summary())

# %% tags=["nbval-ignore-output"]
video.frames_figure(clip, ref, index=-1)

# %% [markdown]
# The dashed boxes are where the people really are, the solid ones what the pipeline found. Each stage's cost per
# pixel, counting bytes to and from GPU memory (every input read once, every output written once) and operations
# (add, subtract, multiply, abs, compare, min, max: 1 each):

# %%
for s in video.STAGES.values():
    print(f"{s.name:<34} {s.bytes_per_pixel:>3g} B/px  {s.ops_per_pixel:>2g} ops/px   {s.what}")

# %% [markdown]
# ### Exercise 1 — the fused step in one pass
#
# Write `fused(frame, bg, mask, alpha, thresh)`: `frame` uint8, `bg` float32 (update it in place), `mask` uint8
# (1 = foreground, 0 = background), `alpha` and `thresh` float32. One thread per pixel on a 2-D grid, x along a
# row; threads outside the frame do nothing. Compare with the *old* background, then update it. Three separate
# kernels (difference, threshold, update) would read `bg` twice and write a temporary `d` that the other two read
# back; fused, each byte moves once. The check uses frames, `alpha` and `thresh` drawn fresh each run, and blocks
# up to 32 × 32.

# %% tags=["exercise"]
@cuda.jit
def fused(frame, bg, mask, alpha, thresh):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) > thresh else 0
        bg[row, col] = b + alpha * d
    # END SOLUTION
    # BEGIN SKELETON
    # col, row = ...
    # d = frame - bg at this pixel (as float32); mask = 1 if |d| > thresh else 0; bg += alpha * d
    pass
    # END SKELETON


# %%
labkit.check.fused_update(fused);

# %% [markdown]
# ### Exercise 2 — a 3 × 3 erosion with correct borders
#
# Write `erode(mask, out)`: `out[row, col]` is 1 where every pixel of the 3 × 3 neighbourhood *inside the frame* is
# non-zero, else 0. At the frame's edge the neighbours outside are ignored — not counted as background (that would
# eat every object touching the edge) and not wrapped around. Every pixel, borders included, gets a value. A
# shared-memory tile with a halo (as in Lab 03's stencil) is a fine optional refinement. The dilation is the same
# loop with "any" instead of "every"; labkit's is used below. The check uses masks drawn fresh each run (some with
# foreground values other than 1: any non-zero value is foreground) and blocks up to 32 × 32.

# %% tags=["exercise"]
@cuda.jit
def erode(mask, out):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v
    # END SOLUTION
    # BEGIN SKELETON
    # col, row = ...; loop over the neighbours that lie inside the frame
    pass
    # END SKELETON


# %%
labkit.check.erode(erode);

# %% [markdown]
# Your erosion beside labkit's on a 10 × 12 mask in blocks of 8 × 8. Pick thread 0 of block `(0, 0)`, the corner
# pixel: it reads 4 pixels; along an edge a thread reads 6, inside 9, and threads outside the frame read none.
# The score is the most any thread reads: 9.

# %% tags=["nbval-ignore-output"]
mask_show = (np.random.default_rng(9).random((10, 12)) > 0.2).astype(np.uint8)
labkit.show(labkit.check.solved_or_reference("09.erode", erode), mask_show, np.zeros((10, 12), np.uint8),
            grid=(2, 2), block=(8, 8), reference=labkit.video.reference_kernels().erode)

# %% [markdown]
# ### Exercise 3 — motion per tile, with atomics
#
# Write `count(mask, tile, counts)`: `counts` (int32, `ceil(rows / tile) × ceil(cols / tile)`) starts at zero;
# afterwards `counts[i, j]` holds the number of foreground pixels in tile (i, j). Many threads add to one counter,
# so a plain `+= 1` loses updates (the check's strict memory model names the two threads that collide). An atomic
# add per foreground pixel is enough to pass. Optional, and faster, like Lab 04's shared histogram: count into
# `cuda.shared.array` counters for the tiles your block touches, then add each to `counts` once. The check uses
# frames drawn fresh each run, tiles of 4 to 32 pixels and blocks up to 32 × 32, one block counting more than 255
# pixels of one tile (so shared counters must be `int32`), and masks whose foreground values are not only 1 (any
# non-zero value, 1 to 255, is foreground: test `!= 0`).

# %% tags=["exercise"]
@cuda.jit
def count(mask, tile, counts):
    # BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)
    # END SOLUTION
    # BEGIN SKELETON
    # a foreground pixel at (row, col) adds 1 to counts[row // tile, col // tile] — atomically
    pass
    # END SKELETON


# %%
labkit.check.tile_counts(count);

# %% [markdown]
# ## The pipeline on the device, end to end
#
# Your kernels (or labkit's reference for any that has not passed its check yet), with labkit's dilation. All the
# frames go to the device in one copy; the background model stays there from frame to frame. The result must match
# the NumPy reference exactly: masks, counts and boxes.

# %%
kernels = video.Kernels(
    fused=labkit.check.solved_or_reference("09.fused-update", fused),
    erode=labkit.check.solved_or_reference("09.erode", erode),
    dilate=video.reference_kernels().dilate,
    count=labkit.check.solved_or_reference("09.tile-counts", count),
)
dev = video.run_kernels(clip, kernels, tile=TILE, block=BLOCK)
print(video.compare_results(dev, ref))

# %% tags=["nbval-ignore-output"]
video.activity_figure(dev)

# %% [markdown]
# ## Per-stage timings
#
# Each stage on one frame, timed with `labkit.bench` (on a GPU: CUDA events, with GB/s and the percent of the
# HBM peak; here in the simulator: CPU time, which says nothing about a GPU). NumPy on the host for comparison.

# %% tags=["nbval-ignore-output"]
stage_times = video.time_stages(kernels, SHAPE, block=BLOCK, tile=TILE)
print(labkit.bench.table(stage_times))
print()
print(labkit.bench.table(video.time_reference(SHAPE, tile=TILE)))
if env.is_gpu:
    per_frame = sum(t.median_s for t in stage_times)
    print(f"\nall four stages: {per_frame * 1e6:.0f} µs per {SHAPE[0]}×{SHAPE[1]} frame = {1 / per_frame:,.0f} frames/s on {env.device_name}")
else:
    print("\nIn sim mode these are CPU times of the CUDA simulator and of NumPy, not GPU speed. On a GPU this cell "
          "reports GB/s and % of the HBM peak for each stage at 1080p.")

# %% [markdown]
# ### Exercise 4 — the fused step on the roofline
#
# For the fused step on 1080p frames (1080 × 1920), give: the bytes per pixel it moves to and from GPU memory, its
# intensity (ops per byte, with `video.stage("fused").ops_per_pixel` operations), whether it is memory- or
# compute-bound on the H100 and on the H200 (FP32 roofline, from `labkit.hw`), and how many frames per second the
# H200's memory bandwidth allows for this stage. Use the figures below; write `"memory-bound"` or `"compute-bound"`.

# %%
for name in ("H100", "H200"):
    print(roofline(name, "fp32"))
print("fused step: ops per pixel =", video.stage("fused").ops_per_pixel)

# %% tags=["exercise"]
# BEGIN SOLUTION
bytes_per_pixel = 1 + 4 + 4 + 1  # read frame (u8) and bg (f32), write bg (f32) and mask (u8)
intensity = video.stage("fused").ops_per_pixel / bytes_per_pixel
bound_h100 = roofline("H100", "fp32").bound(intensity)
bound_h200 = roofline("H200", "fp32").bound(intensity)
fps_h200 = hw.gpu("H200").memory_bandwidth.value * 1e9 / (bytes_per_pixel * 1080 * 1920)
# END SOLUTION
# BEGIN SKELETON
bytes_per_pixel = ...
intensity = ...
bound_h100 = ...
bound_h200 = ...
fps_h200 = ...
# END SKELETON

# %%
labkit.check.fused_roofline(bytes_per_pixel, intensity, bound_h100, bound_h200, fps_h200);

# %% [markdown]
# Every stage on a roofline: the H200's here, and on a GPU that GPU's own (from `labkit.hw`). Hollow markers are the
# model's bound; on a GPU the measured rate of each stage appears as a filled dot, so you can read how close each
# kernel gets to its roof. A GPU labkit has no datasheet figures for keeps its measurements in the table above.

# %%
from labkit.gpu.profiles import ceiling

roof, not_here = ceiling(env)  # this GPU's record in gpu mode; the H200 (and why) when labkit.hw has none
print(video.stage_table(roof))

# %% tags=["nbval-ignore-output"]
if not_here:
    print(not_here)
video.roofline_figure(roof, stage_times if env.is_gpu and not not_here else None)

# %% [markdown]
# ## Outside the GPU: getting the frames in
#
# Every stage is left of the ridge point (the table above): the GPU's arithmetic is mostly idle, HBM bandwidth sets
# the pace. But the
# frames have to reach HBM first. Over PCIe each uint8 pixel crosses once; compare that with the HBM traffic of
# the whole pipeline (a model from datasheet figures):

# %%
pcie, h200 = hw.link("PCIe 5"), hw.gpu("H200")
frame_px = 1080 * 1920
hbm_bytes = sum(s.bytes_per_pixel for s in video.STAGES.values()) * frame_px
pcie_us = video.TRANSFER_BYTES_PER_PIXEL * frame_px / (pcie.per_link.value * 1e9) * 1e6
hbm_us = hbm_bytes / (h200.memory_bandwidth.value * 1e9) * 1e6
print(f"1080p frame over {pcie.name} x16 ({pcie.per_link}, per direction): {pcie_us:.1f} µs (model)")
print(f"the pipeline's HBM traffic on the H200 ({h200.memory_bandwidth}): {hbm_us:.1f} µs (model)")
print(f"transfer / kernels' HBM time: {pcie_us / hbm_us:.1f}× (model)")

# %% [markdown]
# When that ratio is above 1, the copy, not the kernels, bounds a pipeline that copies and processes one frame at
# a time. Batching many frames into one copy amortises each copy's fixed cost, and with pinned memory and streams
# the copy of
# batch k + 1 overlaps the kernels of batch k (Lab 05, Lab 07). On a GPU the next cell measures one frame per copy
# against a batch of frames in one copy.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    host = cuda.pinned_array((N_FRAMES, *SHAPE), np.uint8)
    host[...] = clip.frames
    d_batch = cuda.device_array_like(host)
    t_one = labkit.bench.measure(lambda: d_batch[0].copy_to_device(host[0]), name="1 frame per copy", bytes=host[0].nbytes)
    t_all = labkit.bench.measure(lambda: d_batch.copy_to_device(host), name=f"{N_FRAMES} frames in one copy", bytes=host.nbytes)
    print(labkit.bench.table([t_one, t_all]))
else:
    print("Needs a GPU: on one, this cell measures host-to-device GB/s for one frame per copy and for a batch of "
          f"{N_FRAMES} frames, from pinned memory.")

# %% [markdown]
# ## What you learned
# - A video-analytics pipeline is a chain of memory-bound stages: fusing the background update, difference and
#   threshold into one pass moves each byte once; the roofline says no amount of arithmetic tuning helps here.
# - 2-D kernels need x as the column, a bounds check for frames that are not multiples of the block, and an explicit
#   rule at the borders; counting into shared tiles needs atomics and a barrier before the merge.
# - Check each stage against a reference on awkward sizes, then the whole pipeline; predict with the model, then
#   measure and say which is which.
# - Outside the GPU, host-to-device transfers can cost more than all the kernels: batch, pin and overlap — the same
#   reasoning that put many GPUs and their HBM (printed at the top) in one DGX-2 for video surveillance.
#
# **Next:** [Lab 10 — Where next](10-where-next.ipynb): the tools after this course, and how to profile and debug
# your own kernels. Or take the pipeline further: a shared-memory erosion, the opening fused into one kernel, or
# batches of frames in streams.
