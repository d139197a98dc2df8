# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 07 — Bandwidth and NVLink
#
# **Learning objectives**
# - Work out the theoretical bandwidth of a PCIe or NVLink connection and say whether a figure is per direction or bidirectional.
# - Measure host↔device bandwidth with pinned and pageable memory, and explain the difference with a model.
# - Predict and measure a copy inside one memory (HBM on a GPU, DRAM on the host), and read a size sweep: latency-bound, then bandwidth-bound.
# - Time host→device and device→device copies yourself with CUDA events, and compare with labkit's measurement.
# - Predict a DGX's GPU-to-GPU bandwidth matrix from its wiring and compare it with a measured or modelled one.
# - Derive nccl-tests' bus-bandwidth factor 2(n−1)/n for all-reduce from the ring algorithm.
#
# **Prerequisites:** [Lab 01](01-gpu-and-dgx-architecture.ipynb) (DGX wiring) and [Lab 05](05-cupy.ipynb) (streams and events).
#
# **Time:** 70 minutes (teaching 25, exercises 45)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %% [markdown]
# ## How bandwidth is counted
#
# Everything here is in **GB/s = 10⁹ bytes per second**. Two questions decide what a bandwidth figure means:
#
# - **Per direction or both directions?** PCIe and NVLink are full duplex: each direction has its own wires.
#   A "bidirectional" figure usually *adds* the two directions, so it is twice the per-direction one.
# - **Which bytes are counted?** A copy from A to B over a link moves each byte once. A copy *inside* one memory
#   reads each byte and writes it again, so the memory moves twice the buffer's size. STREAM and CUDA's
#   `bandwidthTest` count both; that figure is what compares with a memory's datasheet bandwidth.
#
# The measurements follow NVIDIA's **nvbandwidth**: pinned host memory, large buffers, warm-up copies, then a batch
# of copies per sample queued behind a *spin kernel* that holds the stream until all of them are queued, timed by
# CUDA events; the median of several samples (labkit's defaults are printed below). `labkit.bandwidth` does this in
# `gpu` mode, and every result is a record that says what it counted and how it was measured.

# %%
from labkit import bandwidth as bw
from labkit import hw, topology

print("mode:", env.mode, "| device:", env.device_name)
print("default buffer:", bw.DEFAULT_SIZE // 2**20, "MiB;", bw.DEFAULT_COPIES, "copies per sample;", bw.DEFAULT_SAMPLES, "samples")

# %% [markdown]
# ## 1. Theoretical link bandwidth
#
# `labkit.hw` holds every figure with its source. PCIe figures are for an x16 link, per direction; NVLink figures
# are per link, per direction.

# %%
for name in ("PCIe 3", "PCIe 4", "PCIe 5", "NVLink 2", "NVLink 3", "NVLink 4"):
    link = hw.link(name)
    print(f"{name:9} {link.per_link}")

# %% [markdown]
# ### Exercise 1 — a PCIe link's peak
#
# Write `pcie_gbps(generation, lanes)`: the theoretical bandwidth in GB/s **per direction** of a PCIe link of
# that generation and width (x1, x2, x4, x8, x16 or x32). Use `hw.link(...)`. GPUs sit on x16 links; NICs and
# SSDs often on x4 or x8. The check tries every generation and width, in a fresh order each run.

# %% tags=["exercise"]
def pcie_gbps(generation, lanes):
    # BEGIN SOLUTION
    return hw.link(f"PCIe {generation}").per_link.value * lanes / 16
    # END SOLUTION
    # BEGIN SKELETON
    # hw.link(f"PCIe {generation}").per_link.value is the x16 figure, per direction
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.pcie_link_bandwidth(pcie_gbps);

# %% [markdown]
# So a GPU on a Gen4 or Gen5 x16 link can receive at most the PCIe 4 or PCIe 5 figure printed above, while its
# own memory is many times faster:

# %%
for gpu in ("A100 80GB", "H100", "H200"):
    g = hw.gpu(gpu)
    print(f"{g.name:14} memory {g.memory_bandwidth.text():>10}  =  {g.memory_bandwidth.value / bw.pcie_peak(5, 16):.0f}x a PCIe Gen5 x16 link")

# %% [markdown]
# ## 2. Host ↔ device: pinned against pageable
#
# The copy engine moves data by DMA: it reads host memory by physical address, without the CPU. That needs
# **pinned** (page-locked) memory, which the operating system promises not to move or swap out. Ordinary
# **pageable** memory (a NumPy array) cannot be read that way, so the driver first copies it, with the CPU,
# into a pinned staging buffer and then sends that: two copies instead of one.
#
# In `gpu` mode the next cell measures both, nvbandwidth-style. In `sim` mode it measures what can be measured
# here: how fast this CPU copies memory, which is the staging step.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    size = "512MiB"
    h2d_pinned = bw.host_to_device(0, size, "pinned")
    h2d_pageable = bw.host_to_device(0, size, "pageable")
    d2h_pinned = bw.device_to_host(0, size, "pinned")
    for r in (h2d_pinned, h2d_pageable, d2h_pinned):
        print(r)
    try:  # NVML, else Linux's sysfs; a container may have neither
        link = bw.pcie_link(0)
        print(f"PCIe link ({link['source']}):", link["max"], "->", f"{link['peak_gbps']:.1f} GB/s per direction theoretical")
    except labkit.LabkitError as exc:
        link = None
        print(f"PCIe link: not known here ({exc}); below, a Gen5 x16 link is assumed")
else:
    link = None
    print("sim mode: no GPU, so no host<->device copy to time. Measuring the staging step instead:")
staging = bw.host_stream("copy", "64MiB")  # this computer's memory, NumPy, one thread
staging_gbps = staging.gbps / 2  # STREAM counts read + write; a copy moves each byte once
print(staging)
print(f"host memcpy: {staging_gbps:.1f} GB/s of bytes copied")

# %% [markdown]
# ### Exercise 2 — a model of the pageable copy
#
# Suppose the staging copy and the DMA take turns (no overlap). Write `pageable_gbps(link_gbps, staging_gbps)`:
# the rate of the whole pageable copy, given the link's rate and the CPU's copy rate, both in GB/s. The check uses
# rates drawn fresh each run.

# %% tags=["exercise"]
def pageable_gbps(link_gbps, staging_gbps):
    # BEGIN SOLUTION
    return 1.0 / (1.0 / link_gbps + 1.0 / staging_gbps)
    # END SOLUTION
    # BEGIN SKELETON
    # time per byte of the whole = time per byte of each step, added
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.pageable_copy_model(pageable_gbps);

# %% [markdown]
# The model's prediction for this machine's staging rate on a Gen5 x16 link, and against perfect overlap (the
# slower step alone). A real driver pipelines the two steps in chunks, so a measurement lands between the two.

# %% tags=["nbval-ignore-output"]
model = labkit.check.solved_or_reference("07.pageable-model", pageable_gbps)
link_gbps = link["peak_gbps"] if link is not None else bw.pcie_peak(5, 16)  # the link read above, else Gen5 x16
print(f"link {link_gbps:.1f} GB/s, staging {staging_gbps:.1f} GB/s")
print(f"no overlap: {model(link_gbps, staging_gbps):.1f} GB/s; perfect overlap: {min(link_gbps, staging_gbps):.1f} GB/s")
if env.is_gpu:
    print(f"measured: pinned {h2d_pinned.gbps:.1f} GB/s, pageable {h2d_pageable.gbps:.1f} GB/s")
else:
    print("(model only: a GPU run would set the measured pinned and pageable rates beside it)")

# %% [markdown]
# ## 3. A copy inside one memory
#
# ### Exercise 3 — predict the copy time
#
# Write `copy_seconds(nbytes, peak_gbps)`: the shortest possible time to copy a buffer of `nbytes` bytes to
# another buffer in the same memory, whose bandwidth is `peak_gbps` GB/s. The check uses sizes and peaks drawn
# fresh each run.

# %% tags=["exercise"]
def copy_seconds(nbytes, peak_gbps):
    # BEGIN SOLUTION
    return 2 * nbytes / (peak_gbps * 1e9)
    # END SOLUTION
    # BEGIN SKELETON
    # which bytes pass through the memory during a copy?
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.hbm_copy_time(copy_seconds);

# %% [markdown]
# Now predict, then measure. On a GPU: a 512 MiB copy at the datasheet HBM bandwidth, against labkit's copy-engine
# and SM-kernel copies. The two are different machines inside the GPU. A **copy-engine (CE)** copy is a DMA transfer
# that `cudaMemcpy*` (CuPy's `copy`, `set`, `get`) hands to the GPU's copy engines: it uses no SMs, and over NVLink it
# sends 256-byte payloads. An **SM copy** is a kernel whose threads load and store: it is what your kernels get, and
# what NCCL's collectives are (they run as kernels, so they can add while they copy), and over NVLink an SM sends at
# most 128-byte payloads. That is why NCCL models about 20 of NVLink 3's 25 GB/s per link (`nccl_model` in
# `labkit.hw`) and why a CE-only peer matrix shows more than a collective will see (S. Jeaugey, NVIDIA/nccl-tests#149). Without a GPU: the host's DRAM — the "peak" is the rate measured above for 64 MiB arrays,
# used to predict a copy of arrays twice as large.

# %% tags=["nbval-ignore-output"]
predict = labkit.check.solved_or_reference("07.copy-time", copy_seconds)
if env.is_gpu:
    gpu_rec = hw.match_device(env.device_name)
    nbytes = 512 * 2**20
    if gpu_rec is not None:
        print(f"{gpu_rec.name}: {gpu_rec.memory_bandwidth} -> predicted {predict(nbytes, gpu_rec.memory_bandwidth.value) * 1e3:.3f} ms")
    for method in ("ce", "sm"):
        r = bw.device_local_copy(0, nbytes, method)
        print(f"measured ({method}): {r.seconds * 1e3:.3f} ms, {r.gbps:,.0f} GB/s (bytes counted once), "
              f"{r.read_write_gbps:,.0f} GB/s read+write")
else:
    nbytes = 128 * 2**20
    print(f"predicted with {staging.gbps:.1f} GB/s (host DRAM, measured): {predict(nbytes, staging.gbps) * 1e3:.1f} ms")
    big = bw.host_stream("copy", nbytes, samples=3)
    print(f"measured: {big.seconds * 1e3:.1f} ms ({big.gbps:.1f} GB/s, host memory, not HBM)")

# %% [markdown]
# ### Exercise 3b — time copies with events, as nvbandwidth does
#
# `labkit.bandwidth` measured for you so far; now measure yourself, the way this lab explains. Write
# `time_copies(cp, host, repeat)`, returning `{"h2d": GB/s, "d2d_read_write": GB/s}`: one **warm-up** copy, then
# **events** around a batch of `repeat` copies on one stream — `a.set(host)` for host→device, `b[...] = a` for
# device→device — `end.synchronize()`, and `cp.cuda.get_elapsed_time(start, end)` (milliseconds). Count the bytes as
# this lab does: a host→device copy moves each byte once; a copy inside one memory reads and writes each byte.
# `host` is pinned.
#
# On a GPU `cp` is CuPy. In `sim` mode it is labkit's recording stand-in with CuPy's names, whose "device" is host
# memory and whose events read the host clock: the check sees where your events are, how many copies they bracket,
# on which stream, and whether your figures follow from them. The cell after the check compares your figures with
# labkit's measurement (on a GPU the check also requires them to come close to it).

# %% tags=["exercise"]
def time_copies(cp, host, repeat):
    # BEGIN SOLUTION
    stream = cp.cuda.Stream(non_blocking=True)
    a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    figures = {}
    with stream:  # the copies and event.record() below all go on this stream
        for name, copy, counted in (("h2d", lambda: a.set(host), host.nbytes),
                                    ("d2d_read_write", lambda: b.__setitem__(Ellipsis, a), 2 * host.nbytes)):
            copy()  # warm-up
            start.record()
            for _ in range(repeat):
                copy()
            end.record()
            end.synchronize()
            seconds = cp.cuda.get_elapsed_time(start, end) * 1e-3
            figures[name] = repeat * counted / seconds / 1e9
    return figures
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError  # a stream, two events; warm up, record, repeat copies, record, synchronize, GB/s
    # END SKELETON


# %%
labkit.check.event_timing(time_copies);

# %% tags=["nbval-ignore-output"]
import numpy as np

timer = labkit.check.solved_or_reference("07.event-timing", time_copies)
if env.is_gpu:
    import cupy
    import cupyx

    pinned = cupyx.empty_pinned((64 * 2**20,), dtype=np.float32)
    pinned[:] = 1.0
    mine = timer(cupy, pinned, 8)
    print(f"yours:  h2d {mine['h2d']:.1f} GB/s, d2d {mine['d2d_read_write']:.0f} GB/s read+write")
    print(f"labkit: h2d {bw.host_to_device(0, pinned.nbytes, 'pinned').gbps:.1f} GB/s, "
          f"d2d {bw.device_local_copy(0, pinned.nbytes, 'ce').read_write_gbps:.0f} GB/s read+write")
else:
    from labkit.check.streams import RecordingCuPy

    host_buf = np.ones(4 * 2**20, np.float32)
    stand_in = RecordingCuPy(clock="host")
    stand_in.pinned.append(host_buf)
    mine = timer(stand_in, host_buf, 8)
    print(f"yours (host memory through the stand-in): d2d {mine['d2d_read_write']:.1f} GB/s read+write")
    print(f"labkit's host copy of the same size:       {bw.host_stream('copy', host_buf.nbytes, samples=3).gbps:.1f} GB/s read+write")

# %% [markdown]
# ### Size sweep: latency-bound, then bandwidth-bound
#
# A small copy pays a fixed cost (launching it, the copy engine starting up, the PCIe round trip) that its few
# bytes cannot hide: its GB/s is low. Only large copies reach the link's rate. On a GPU the sweep goes from
# `bw.SWEEP_SIZES` (printed with the results) over PCIe. On the host the same shape appears for another reason:
# NumPy's fixed cost per call (a microsecond or so) is larger than the time to copy a few KiB, so the smallest,
# L1-sized point is usually the **slowest** on the chart, although L1 is the fastest memory. The cache steps show
# only once arrays are large enough for that cost to fade: L2-sized arrays against arrays that only fit in DRAM.
# Each host point is labelled with the level its working set fits in, and the cell splits the smallest point's time
# into what the bytes needed at the sweep's best rate and the fixed cost.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    print(f"sizes: {min(bw.SWEEP_SIZES)} to {max(bw.SWEEP_SIZES):,} bytes")
    sweep = bw.size_sweep("host_to_device")
    print(bw.latency("host_to_device"))
else:
    sweep = bw.host_sweep()
    print("host memory (measured), best GB/s per level:",
          {k: round(v, 1) for k, v in bw.best_by_class(sweep).items()})
    same = [r for r in sweep if r.test == sweep[0].test and r.gbps]
    small, best = min(same, key=lambda r: r.bytes), max(r.gbps for r in same)
    moving = small.counted_bytes / (best * 1e9)
    print(f"{small.test}, smallest array ({small.note}, {small.bytes:,} bytes): {small.seconds * 1e6:.2f} µs per call; "
          f"the bytes alone at the sweep's best {best:.1f} GB/s: {moving * 1e6:.2f} µs; the rest is fixed cost per call")
bw.sweep_figure(sweep)

# %% [markdown]
# ## 4. GPU to GPU: the DGX-1's hybrid cube-mesh
#
# A DGX-1 (V100) joins its GPUs directly, without switches. Each GPU has a few NVLinks (the count is printed below
# from `labkit.hw`), not enough to reach every other GPU: some pairs share two links, some one, and some none —
# their traffic goes over PCIe and through the CPUs. `nvidia-smi topo -m` shows this as `NV2`, `NV1` and `SYS`;
# `labkit.topology` holds the same map and prints it the same way.

# %% tags=["nbval-ignore-output"]
dgx1 = topology.load("DGX-1 (V100)")
print("NVLinks per V100:", hw.gpu("V100").nvlink_links)
print(dgx1.describe())
dgx1.draw()

# %% [markdown]
# ### Exercise 4 — predict the peer matrix
#
# Build `peer`, an 8×8 matrix (a list of lists) where `peer[i][j]` is the bandwidth in GB/s, **per direction**,
# of the direct NVLinks from GPU `i` to GPU `j`: 0 on the diagonal and where there is no NVLink.
# `dgx1.links_between(i, j)` counts the links; `hw.link("NVLink 2").per_link` is one link's bandwidth.

# %% tags=["exercise"]
# BEGIN SOLUTION
per_link = hw.link("NVLink 2").per_link.value
peer = [[dgx1.links_between(i, j) * per_link for j in range(8)] for i in range(8)]
# END SOLUTION
# BEGIN SKELETON
peer = ...
# END SKELETON

# %%
labkit.check.dgx1_peer_matrix(peer);

# %% [markdown]
# Here is the matrix as nvbandwidth would print it. On a machine with two GPUs or more, labkit measures it,
# with peer access enabled and then explicitly disabled (the driver then stages every copy through host memory),
# and sets each figure beside its link's peak. Otherwise it shows the **model** of a DGX-1 built from the wiring:
# NVLink pairs get links × the NVLink 2 per-link figure; pairs without NVLink get their PCIe link as an upper bound.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and env.gpu_count >= 2:
    found = bw.discover()
    print(found["nvml"].summary())
    measured = bw.peer_matrix()
    print(bw.format_matrix(measured))
    print(bw.format_matrix(bw.peer_matrix(method="sm")))  # SM copies: what kernels and NCCL get
    print(bw.format_matrix(bw.peer_matrix(peer_access=False)))
    print(bw.format_peak_table(bw.peak_table(measured, found["nvml"])))
    peer_records = measured
else:
    if env.is_gpu:
        print(f"peer-to-peer skipped: this machine has one GPU ({env.device_name}); nothing to copy to.")
    peer_records = bw.model_peer_matrix("DGX-1 (V100)")
    print(bw.format_matrix(peer_records, "MODEL of a DGX-1 (V100): GPU(row) -> GPU(column), from its wiring"))
bw.heatmap(peer_records)

# %% [markdown]
# Measured figures land below such a model: the model is the wires' rate, and every NVLink packet carries a header
# beside its payload, a larger share for an SM copy's 128-byte payloads than for the copy engines' 256 bytes: on a GPU
# the SM matrix above sits below the CE one.
# Where P2P is unavailable (many cloud VMs), the enabled matrix shows `N/A` and the reason NVML or CUDA gives.
#
# ## 5. Two bidirectional conventions
#
# Run both directions of a pair at once. nvbandwidth's copy-engine bidirectional tests report **each direction on its
# own** (its SM bidirectional tests time one kernel whose warps copy both ways, size / kernel time); cuda-samples'
# `p2pBandwidthLatencyTest` reports **the two added**. Same link, same run, numbers a factor 2 apart. Vendor
# claims are usually the sum: the DGX-2's any-pair figure (printed below with its source) is bidirectional.

# %% tags=["nbval-ignore-output"]
if env.is_gpu and env.gpu_count >= 2:
    both = bw.peer_matrix(bidirectional=True)
else:
    both = bw.model_peer_matrix("DGX-1 (V100)", bidirectional=True)  # a model: full-duplex links
cell = {(r.src, r.dst): r.gbps for r in both}
forward, backward = cell[("GPU0", "GPU1")], cell[("GPU1", "GPU0")]
dgx2_bidirectional = topology.load("DGX-2").peer_bandwidth(0, 15, bidirectional=True)
print(f"GPU0->GPU1 {forward:.1f} GB/s and GPU1->GPU0 {backward:.1f} GB/s, {both[0].direction} [{both[0].kind}]")
print(f"DGX-2, any two GPUs: {dgx2_bidirectional:g} GB/s bidirectional ({hw.system('DGX-2').source})")

# %% [markdown]
# ### Exercise 5 — convert between conventions
#
# Fill in the dict: `p2p_sum`, the figure `p2pBandwidthLatencyTest` would print for the GPU0↔GPU1 pair above;
# and `dgx2_per_direction`, the DGX-2's any-pair bandwidth in one direction.

# %% tags=["exercise"]
# BEGIN SOLUTION
answer = {"p2p_sum": forward + backward, "dgx2_per_direction": dgx2_bidirectional / 2}
# END SOLUTION
# BEGIN SKELETON
answer = {"p2p_sum": ..., "dgx2_per_direction": ...}
# END SKELETON

# %%
labkit.check.bidirectional_conventions(answer, forward, backward);

# %% [markdown]
# ## 6. Collectives: algbw and busbw
#
# nccl-tests times a collective on a buffer of S bytes and reports the **algorithm bandwidth** algbw = S / time,
# and the **bus bandwidth** busbw = algbw × a factor that depends on the collective and the number of GPUs n.
# For a **ring**, busbw is what each GPU's link carries, so it can be compared with the link's peak and across values
# of n. The factor assumes the ring's traffic whatever algorithm ran: on a DGX H100/H200 NCCL's default large
# all-reduce is NVLS, where the NVSwitch adds and each GPU sends the buffer about once, and the reported busbw
# exceeds the link's rate (lab 08, section 6).
#
# An all-reduce on a ring: cut the buffer into n chunks. **Reduce-scatter**: in each of n − 1 steps every GPU sends
# one chunk to its right neighbour, which adds it to its own; after them each GPU holds one fully reduced chunk.
# **All-gather**: n − 1 more steps pass the reduced chunks round the ring until every GPU has all of them.
#
# ### Exercise 6 — count the bytes
#
# Write `ring_allreduce_sent(nbytes, n)`: how many bytes one GPU sends during a ring all-reduce of `nbytes` over
# `n` GPUs. The check uses sizes and GPU counts (one GPU too) drawn fresh each run.

# %% tags=["exercise"]
def ring_allreduce_sent(nbytes, n):
    # BEGIN SOLUTION
    return 2 * (n - 1) * nbytes / n
    # END SOLUTION
    # BEGIN SKELETON
    # two phases, each of n - 1 steps, each step one chunk of nbytes / n
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.allreduce_ring_bytes(ring_allreduce_sent);

# %% [markdown]
# Each GPU's link carries `ring_allreduce_sent(S, n)` bytes while the algorithm bandwidth counts S: the ratio is
# the busbw factor, 2(n−1)/n. It approaches 2 for large n. The other collectives' factors, from nccl-tests:

# %%
sent = labkit.check.solved_or_reference("07.allreduce-bytes", ring_allreduce_sent)
for n in (2, 4, 8, 16):
    print(f"n={n:2}: ring bytes / S = {sent(1.0, n):.3f}; busbw_factor('all_reduce') = {bw.busbw_factor('all_reduce', n):.3f}")
print()
for name in bw.collectives():
    print(f"{name:15} busbw = algbw x {bw.busbw_formula(name):9} (n=8: {bw.busbw_factor(name, 8):.3f})")

# %% [markdown]
# For example, a made-up nccl-tests result (not a measurement): an all-reduce of 1 GB on 8 GPUs that takes 10 ms:

# %%
S, t, n = 1e9, 10e-3, 8
print(f"algbw {bw.algbw(S, t):.0f} GB/s, busbw {bw.busbw(S, t, 'all_reduce', n):.0f} GB/s: for a ring, what each GPU link "
      "carries per direction")

# %% [markdown]
# ## What you learned
# - Say *per direction* or *bidirectional* every time: full-duplex links give the same bandwidth each way, and a
#   bidirectional sum is twice that. nvbandwidth's CE tests report per direction, p2pBandwidthLatencyTest sums.
# - A copy inside one memory moves its bytes twice (read + write); that is the count to compare with HBM's peak.
# - Pinned memory lets the copy engine read the host directly; pageable memory is staged by the CPU first.
# - Small transfers are latency-bound; only large ones approach the link's peak. Measure like nvbandwidth: large
#   buffers, warm-up, queued copies, events, the median. Copy-engine (DMA) and SM (kernel) copies differ: kernels
#   and NCCL get the SM figure, lower over NVLink (128-byte payloads against 256).
# - A DGX-1's peer bandwidth depends on the pair (NV2, NV1 or none); NVSwitch systems give every pair the same.
# - busbw = algbw × 2(n−1)/n for all-reduce: it is what each link carries in a ring (an in-switch reduction such as
#   NVLS sends less, so its busbw can exceed the link; lab 08).
#
# **Next:** [Lab 08 — Collectives and scaling](08-collectives-and-scaling.ipynb) builds on algbw and busbw:
# all-reduce algorithms and data-parallel scaling across DGX generations. Or back to
# [the course map](00-start-here.ipynb).
