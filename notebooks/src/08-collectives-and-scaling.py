# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 08 — Collectives and scaling
#
# **Learning objectives**
# - Explain how an all-reduce works: the ring (a reduce-scatter followed by an all-gather), the tree (a chain inside
#   one node) and NVLS (the NVSwitch adds), and when each one wins, with a latency + bandwidth (alpha-beta) model.
# - Write one step of the ring all-reduce on NumPy arrays and count the bytes it moves.
# - Compute algbw and busbw from an nccl-tests time, for all_reduce and all_gather, and explain why NVLS's busbw on a
#   DGX H100/H200 exceeds the NVLink rate.
# - Predict the all-reduce time of a model's gradients on DGX-1, DGX-2, DGX A100 and DGX H100 from their NVLink
#   bandwidth, and the data-parallel scaling efficiency that follows, up to the DGX B200 and the GB200 NVL72.
# - Model an all-reduce across a GB200 NVL72, 72 GPUs in 18 nodes and one NVLink domain, ring against NVLS: a node
#   is no longer the NVLink boundary.
# - Explain how MIG and MPS let several jobs share one GPU, compute MIG's slices, and seat a class on a DGX B200.
# - Write a ring all-reduce over real processes with MPI (`mpi4py`, `Sendrecv` between neighbours), run it on 2, 4
#   and 8 processes, check it against `MPI.Allreduce`, measure its algbw and busbw, and know how the same code runs
#   with one process per GPU over NCCL.
# - Bucket gradients as PyTorch DDP does and measure how much of the all-reduce hides behind the backward pass.
#
# **Prerequisites:** [Lab 07](07-bandwidth-and-nvlink.ipynb) (link bandwidth, busbw = algbw × 2(n−1)/n) and
# [Lab 01](01-gpu-and-dgx-architecture.ipynb) (DGX wiring).
#
# **Time:** 85 minutes (teaching 35, exercises 50)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %% [markdown]
# ## 1. Why all-reduce
#
# In **data-parallel** training every GPU holds a full copy of the model, trains on its own slice of the batch,
# and computes its own gradients. Before the optimiser step the gradients must be **summed over all GPUs**, and
# every GPU needs the sum: that is an **all-reduce**. It runs once per step, on a buffer as large as the model.
#
# Lab 07 counted what a ring all-reduce sends (2(n−1)/n × the buffer per GPU). This lab opens the algorithm,
# compares it with a tree, and turns link bandwidth into training speed. Everything below that is not measured on
# a GPU is a **model** or a **simulation**, and says so.

# %%
import os

import numpy as np

from labkit import bandwidth as bw
from labkit import collectives as co
from labkit import hw, topology

params = co.SPEECH_MODEL_PARAMS  # the size of the speech model in the course's source talk on the DGX-2
grad_bytes = params * 4  # FP32 gradients
print(f"{params / 1e6:g} M parameters x 4 bytes = {grad_bytes / 1e9:g} GB of FP32 gradients, all-reduced every step")

# %% [markdown]
# ## 2. The ring, step by step
#
# Put the n GPUs in a ring: GPU g sends to GPU (g + 1) % n. Cut every GPU's buffer into n **chunks**.
#
# - **Reduce-scatter**, n − 1 steps. In step s, GPU g sends its chunk (g − s) % n to its neighbour, which **adds** it
#   to its own copy. Each chunk travels round the ring collecting one more GPU's contribution per step; after n − 1
#   steps GPU g holds chunk (g + 1) % n summed over all GPUs.
# - **All-gather**, n − 1 steps. In step s, GPU g sends chunk (g + 1 − s) % n — at step 0 the one it completed — and
#   the neighbour **replaces** its copy with it. After n − 1 steps every GPU holds every summed chunk.
#
# `co.ring_allreduce` simulates this in NumPy (no GPU involved) and records every transfer:

# %%
for phase in (co.RS, co.AG):
    for s in range(3):
        print(f"{phase:14} step {s}: " + ", ".join(f"GPU{a}->GPU{b} chunk {c}" for a, b, c in co.ring_schedule(4, phase, s)))

# %%
rng = np.random.default_rng(8)
inputs = [rng.standard_normal(10) for _ in range(4)]
sim = co.ring_allreduce(inputs)
print(sim.describe())

# %% [markdown]
# The picture: cell (GPU g, chunk c) counts how many GPUs' data g's copy of chunk c holds; "-> GPUk" marks what g
# sends in that step. Move the slider: the counts climb to n along a diagonal during the reduce-scatter, then the
# full chunks spread.

# %% tags=["nbval-ignore-output"]
co.ring_figure(sim)

# %% [markdown]
# ### Exercise 1 — one ring step
#
# Write `my_ring_step(chunks, phase, step)`. `chunks[g][c]` is GPU g's copy of chunk c (a NumPy array; chunks may
# have different lengths, even zero, when n does not divide the size). Perform **in place** every send of that one
# step, for all GPUs, following the schedule above (`phase` is `"reduce-scatter"` or `"all-gather"`). Return nothing.
# The check drives your step through whole all-reduces for n = 1 to 12, on buffers and sizes drawn fresh each run,
# and compares the state after each step.

# %% tags=["exercise"]
def my_ring_step(chunks, phase, step):
    n = len(chunks)
    # BEGIN SOLUTION
    shift = 0 if phase == "reduce-scatter" else 1
    sends = [(g, (g + 1) % n, (g + shift - step) % n) for g in range(n)]
    data = [chunks[g][c].copy() for g, _, c in sends]  # every GPU sends at once
    for (g, dst, c), d in zip(sends, data):
        if phase == "reduce-scatter":
            chunks[dst][c] += d
        else:
            chunks[dst][c][...] = d
    # END SOLUTION
    # BEGIN SKELETON
    # every GPU g sends one chunk to (g + 1) % n: which chunk, and add or replace?
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.ring_step(my_ring_step);

# %% [markdown]
# Your step (or labkit's, until yours passes) inside the full simulation, with 5 GPUs and a size 5 does not divide:

# %%
step_fn = labkit.check.solved_or_reference("08.ring-step", my_ring_step)
arrays = [rng.integers(0, 100, 1003).astype(np.float64) for _ in range(5)]
run5 = co.ring_allreduce(arrays, step_fn=step_fn)
print(run5.describe())
print("bytes received per GPU:", run5.bytes_received_per_gpu())

# %% [markdown]
# Every GPU sends one chunk per step, and all n links of the ring are busy at once: the ring uses every GPU's
# bandwidth all the time. That is why its time is 2(n−1)/n × S / B, almost independent of n.
#
# ## 3. All-reduce = reduce-scatter + all-gather
#
# The two phases are collectives of their own. **Reduce-scatter** leaves each GPU with one summed chunk;
# **all-gather** gives everyone every chunk. Each sends (n−1)/n of the buffer per GPU, so nccl-tests gives them the
# busbw factor (n−1)/n, and the all-reduce, which is both, 2(n−1)/n. The simulation agrees:

# %%
n = run5.n
rs_bytes = sum(t.nbytes for s in run5.steps if s.phase == co.RS for t in s.transfers) / n
ag_bytes = sum(t.nbytes for s in run5.steps if s.phase == co.AG for t in s.transfers) / n
print(f"n = {n}, buffer {run5.nbytes} bytes")
print(f"reduce-scatter: {rs_bytes:g} bytes per GPU = {rs_bytes / run5.nbytes:.3f} x buffer; "
      f"busbw_factor('reduce_scatter', {n}) = {bw.busbw_factor('reduce_scatter', n):.3f}")
print(f"all-gather:     {ag_bytes:g} bytes per GPU = {ag_bytes / run5.nbytes:.3f} x buffer; "
      f"busbw_factor('all_gather', {n}) = {bw.busbw_factor('all_gather', n):.3f}")
print(f"all-reduce:     {rs_bytes + ag_bytes:g} bytes per GPU; busbw_factor('all_reduce', {n}) = {bw.busbw_factor('all_reduce', n):.3f}")

# %% [markdown]
# The decomposition matters beyond NCCL: sharded data parallelism (ZeRO, FSDP) calls the two halves separately —
# a reduce-scatter of the gradients so each GPU updates only its shard, and an all-gather of the parameters later.
#
# ## 4. Ring or tree: latency against bandwidth
#
# Each step costs a fixed latency **α** (launch, synchronisation, a hop) plus bytes / **B**. The ring has 2(n − 1)
# steps, so at small sizes its latency grows with n. A **binary tree** reduces up to the root and broadcasts back
# down in 2 × log₂n steps. Sent whole buffer by buffer it is slow (each level moves everything); NCCL pipelines it
# in small pieces over two complementary trees ("double binary tree"), which costs about 2 × S / B.
# The models, for 8 GPUs at a DGX A100's per-GPU NVLink rate per direction (α is an assumed round figure):

# %%
B_a100 = co.ring_bandwidth("DGX A100")
print(f"DGX A100 ring bandwidth (model): {B_a100:g} GB/s per GPU per direction; alpha = {co.DEFAULT_ALPHA_US:g} us (assumed)")
for size in (64 * 2**10, 8 * 2**20, grad_bytes):
    print(co.ring_cost(size, 8, B_a100))
    print(co.tree_cost(size, 8, B_a100))
print(co.tree_cost(grad_bytes, 8, B_a100, pipelined=False))
print(*co.ring_cost(grad_bytes, 8, B_a100).assumptions, sep="\n  ")

# %%
for n_gpus in (8, 16, 64, 256):
    print(f"{n_gpus:4d} GPUs: the tree wins below {co.crossover_bytes(n_gpus, B_a100) / 2**20:8.2f} MiB (model)")

# %% tags=["nbval-ignore-output"]
co.cost_figure(8, B_a100)

# %% [markdown]
# So NCCL picks per call, from a model of each algorithm's time much like this one (plus its own latencies and
# protocols). Between nodes the tree wins for small messages and many GPUs. **Inside one node NCCL's "tree" is a
# chain** (a "node" here is an NVLink domain: in an NVL72, section 7b, the rack) through the GPUs (the tree proper joins nodes), so its latency grows with n just like the ring's and it
# rarely wins there (`co.chain_cost`). NCCL's algorithms, as `NCCL_ALGO` names them (it forces one):
#
# %%
for name, what in co.NCCL_ALGORITHMS.items():
    print(f"{name:14} {what}")
print()
print(co.chain_cost(2**20, 8, B_a100), co.ring_cost(2**20, 8, B_a100), sep="\n")

# %% [markdown]
# Gradients of a whole model are large: the bandwidth term dominates, and the ring wins, unless the switch can
# add (NVLS, section 6).
#
# ## 5. algbw and busbw, as nccl-tests computes them
#
# nccl-tests prints, for each size, the time in **microseconds**, then **algbw** = size / time and
# **busbw** = algbw × factor (lab 07). For all_gather, "size" is the whole output buffer (all n pieces).
#
# ### Exercise 2 — read an nccl-tests line
#
# Write `nccl_bw(size_bytes, time_us, collective, n)` returning `(algbw, busbw)` in GB/s, for `all_reduce`,
# `all_gather`, `reduce_scatter` and `broadcast`. `bw.busbw_factor(collective, n)` gives the factor. The check uses
# sizes, times and GPU counts drawn fresh each run.

# %% tags=["exercise"]
def nccl_bw(size_bytes, time_us, collective, n):
    # BEGIN SOLUTION
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * bw.busbw_factor(collective, n)
    # END SOLUTION
    # BEGIN SKELETON
    # the time is in microseconds; GB/s = 10^9 bytes per second
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.nccl_tests_bandwidth(nccl_bw);

# %% [markdown]
# A table like nccl-tests', for an all_reduce and an all_gather on a DGX H100 — times from the alpha-beta model
# (**ring**, 8 GPUs), not measured. For a ring, busbw climbs towards the per-GPU bandwidth per direction as the
# latency stops mattering; the two collectives' busbw meet, though all_gather's algbw is about twice all_reduce's.
# That comparison with the link holds for the ring only: section 6 shows an algorithm whose busbw exceeds the link.

# %%
to_bw = labkit.check.solved_or_reference("08.nccl-busbw", nccl_bw)
B_h100 = co.ring_bandwidth("DGX H100")
print(f"MODEL, DGX H100, 8 GPUs, ring at {B_h100:g} GB/s per direction, alpha {co.DEFAULT_ALPHA_US:g} us")
print(f"{'size':>10} {'collective':>11} {'time(us)':>10} {'algbw':>8} {'busbw':>8}")
for size in (2**20, 2**24, 2**28, 2**30):
    ar = co.ring_cost(size, 8, B_h100)
    # all_gather: half of the ring's steps and bytes
    ag_us = (ar.latency_s / 2 + ar.bandwidth_s / 2) * 1e6
    for coll, t_us in (("all_reduce", ar.seconds * 1e6), ("all_gather", ag_us)):
        a, b = to_bw(size, t_us, coll, 8)
        print(f"{size:10d} {coll:>11} {t_us:10.1f} {a:8.1f} {b:8.1f}")

# %% [markdown]
# On a machine with two GPUs or more, labkit measures an all-reduce with NCCL (through CuPy's bindings) and reports
# it the same way. Otherwise the cell says why it cannot.

# %% tags=["nbval-ignore-output"]
ok, why = co.nccl_status()
if env.is_gpu and ok:
    for size in (2**20, 2**26, 2**28):
        m = co.measure_allreduce(size)
        print(f"measured on {len(m['devices'])} x {m['device']}: {size} bytes in {m['seconds'] * 1e6:.1f} us, "
              f"algbw {m['algbw']:.1f} GB/s, busbw {m['busbw']:.1f} GB/s, correct {m['correct']}")
    print("method:", m["method"])
else:
    print(f"no measurement: {why}.")
    print("A run on 2+ GPUs would print measured algbw and busbw beside the model above.")

# %% [markdown]
# ## 6. NVLS: when the switch adds
#
# The third-generation NVSwitch (DGX H100/H200) and the fourth (DGX B200/B300, GB200/GB300 NVL72) can **reduce**
# data themselves (NVLink SHARP, "NVLS"). Each GPU reads
# its 1/n share of everyone's buffer through the switch with one multicast load-and-add, and writes the summed share
# to every GPU with one multicast store. Each GPU's link carries about the buffer **once** per direction, instead of
# the ring's 2(n−1)/n times. nccl-tests does not know which algorithm ran: its all-reduce busbw is always
# algbw × 2(n−1)/n, a ring's factor. With NVLS that busbw is no longer what a link carries, and it can exceed the
# link rate. NCCL picks NVLS by default for large all-reduces on these systems. The model, for a DGX H200:

# %%
h200 = hw.system("DGX H200")
B_h200 = co.ring_bandwidth("DGX H200")
for name in ("DGX A100", "DGX H200", "DGX B200", "GB200 NVL72"):
    print(f"{name:12} {hw.system(name).nvswitch}: NVLS available: {co.has_nvls(name)}")
print(f"per-direction NVLink per GPU (model from the wiring): {B_h200:g} GB/s")
for size in (2**20, 2**26, 2**30):
    print(co.nccl_choice("DGX H200", size))
print(*co.nvls_cost(2**30, 8, B_h200).assumptions, sep="\n  ")

# %% [markdown]
# ### Exercise 3 — NVLS busbw on a DGX H200
#
# For a large all-reduce over the 8 GPUs of a DGX H200, bandwidth term only, each GPU sending at its NVLink
# bandwidth **per direction** (`hw.system("DGX H200")`): what busbw would nccl-tests report for a ring, and for
# NVLS, and which is faster? Fill `nvls_answer` (GB/s, and `"Ring"` or `"NVLS"`).

# %% tags=["exercise"]
# BEGIN SOLUTION
per_direction = h200.gpu_model.nvlink_bandwidth.value / 2
factor = bw.busbw_factor("all_reduce", 8)
nvls_answer = {
    "ring_busbw": per_direction,  # time = factor x S / B, so algbw = B / factor and busbw = B
    "nvls_busbw": factor * per_direction,  # time = S / B, so algbw = B and busbw = factor x B
    "faster": "NVLS",
}
# END SOLUTION
# BEGIN SKELETON
nvls_answer = {"ring_busbw": ..., "nvls_busbw": ..., "faster": ...}
# END SKELETON

# %%
labkit.check.nvls_busbw(nvls_answer);

# %% [markdown]
# A published measurement on a DGX H200 (nccl-tests, 16 GiB; not measured by this course: the source is printed
# with each figure): NVLS's busbw is above the wire rate, as the model says, but below the model's bound. How far
# below depends on the NCCL version and its NVLS channels (`NCCL_NVLS_NCHANNELS`; the same source reports about
# 370 GB/s with older NCCL releases on the same hardware); the course has not measured why. The ring reaches most of
# the link.

# %%
nv, rg = h200.allreduce_busbw_nvls, h200.allreduce_busbw_ring
print(f"NVLS: {nv}")
print(f"ring: {rg}")
print(f"per-direction wire rate {B_h200:g} GB/s: NVLS measured {nv.value / B_h200:.0%} of it "
      f"({nv.value / co.nvls_cost(2**34, 8, B_h200, 0).busbw:.0%} of the NVLS model); "
      f"ring measured {rg.value / B_h200:.0%} [measured / model]")

# %% [markdown]
# ## 7. One all-reduce, four DGX generations
#
# The per-GPU NVLink figures in `labkit.hw` are **bidirectional** (both directions added):

# %%
for name in ("DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100"):
    s = hw.system(name)
    print(f"{s.name:13} {s.gpu_count.text():>3} x {s.gpu_model.name:16} NVLink {s.gpu_model.nvlink_bandwidth} per GPU, bidirectional; {s.fabric}")

# %% [markdown]
# ### Exercise 4 — predict the all-reduce time
#
# For each of the four systems, the time in **milliseconds** of a ring all-reduce of the model's FP32 gradients
# (`grad_bytes`, printed in section 1) over **all** its GPUs, each GPU sending at its NVLink bandwidth **per
# direction** (half the bidirectional figure printed above; bandwidth term only, no latency). Fill the dict
# `allreduce_ms`, keyed by the system names printed above.

# %% tags=["exercise"]
# BEGIN SOLUTION
allreduce_ms = {}
for name in ("DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100"):
    s = hw.system(name)
    n_gpus = int(s.gpu_count.value)
    per_direction = s.gpu_model.nvlink_bandwidth.value / 2
    allreduce_ms[name] = 2 * (n_gpus - 1) / n_gpus * grad_bytes / (per_direction * 1e9) * 1e3
# END SOLUTION
# BEGIN SKELETON
allreduce_ms = {"DGX-1 (V100)": ..., "DGX-2": ..., "DGX A100": ..., "DGX H100": ...}
# END SKELETON

# %%
labkit.check.allreduce_across_dgx(allreduce_ms);

# %% [markdown]
# labkit's topology model gets the same figures from the wiring (the smallest cut between two GPUs of the ring),
# and adds the latency term. NCCL's own performance model assumes less than the datasheet rate per link
# (`nccl_model` in `labkit.hw`, printed with its source below); at that rate the times grow:

# %%
for name in ("DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100"):
    link = hw.link(hw.system(name).nvlink)
    eff = link.nccl_model.value / link.per_link.value
    full = co.allreduce_time(name, grad_bytes)
    nccl = co.allreduce_time(name, grad_bytes, efficiency=eff)
    print(f"{name:13} {full.n:2d} GPUs: {full.seconds * 1e3:6.2f} ms at the datasheet rate; {nccl.seconds * 1e3:6.2f} ms at "
          f"NCCL's {link.nccl_model.text()} per link [model]")
print(f"(NCCL's per-link rates: source {link.nccl_model.source})")

# %% [markdown]
# The DGX-1 has one more lesson: its GPUs are not all equal (lab 07). A ring over the *first* n GPUs can be slow
# when those happen to share one link:

# %%
for n_gpus in range(2, 9):
    print(f"DGX-1 (V100), GPUs 0..{n_gpus - 1}: ring bandwidth {co.ring_bandwidth('DGX-1 (V100)', n_gpus):5g} GB/s per direction (model)")

# %% [markdown]
# ## 7b. Rack scale: one NVLink domain across 18 nodes
#
# Up to the DGX B200, NVLink ends at the node: 8 GPUs share the NVSwitches of one baseboard, and a job that spans
# nodes crosses InfiniBand, one 400 Gb/s port (50 GB/s per direction) per GPU. A **GB200 NVL72** moves the boundary to
# the rack: 18 compute trays, each its own operating-system node with 2 Grace CPUs and 4 GPUs, and 9 switch trays
# whose 18 NVLink switch chips join all 72 GPUs, every GPU with one of its 18 links on each chip. Any two GPUs, in one
# tray or in two, talk at the full 900 GB/s per direction. NCCL runs its ring and NVLS over this multi-node NVLink
# (NCCL 2.25.2 and later for GB200; cross-node GPU memory needs NVIDIA's IMEX service on every tray). The wiring
# model:

# %%
nvl72 = hw.system("GB200 NVL72")
t72 = topology.load("GB200 NVL72")
print(t72.summary())
print(f"{nvl72.gpu_count.text()} GPUs in {nvl72.compute_trays.text()} compute trays ({nvl72.compute_trays.source}); "
      f"{nvl72.nvswitch_count.text()} switch chips ({nvl72.nvswitch_count.source}, unconfirmed)")
print(f"GPU0 (tray 0) to GPU71 (tray 17): {t72.route(0, 71)['kind']}, {t72.peer_bandwidth(0, 71):g} GB/s per direction [model]")
ib = hw.link("InfiniBand NDR").per_link
print(f"the same 72 GPUs as 9 DGX B200: a ring must cross InfiniBand NDR, {ib.text()} per GPU per direction ({ib.source})")
for size in (2**20, 2**30):
    print(co.nccl_choice("GB200 NVL72", size))

# %% [markdown]
# ### Exercise 4b — an all-reduce across an NVL72
#
# Write `nvl72_allreduce(nbytes, n_gpus)` returning `(ring_seconds, nvls_seconds, trays)` for an all-reduce of
# `nbytes` over the first `n_gpus` GPUs of a GB200 NVL72 (numbered tray by tray, 4 per tray): the bandwidth terms
# only, each GPU sending at its NVLink bandwidth per direction (half of `nvl72.gpu_model.nvlink_bandwidth`), a ring
# sending 2(n−1)/n × the buffer per GPU and NVLS about the buffer once; and how many compute trays (nodes) those GPUs
# span. One GPU has nothing to reduce: `(0.0, 0.0, 1)`. The check draws fresh sizes and GPU counts from 1 to 72, some
# of them not whole trays.

# %% tags=["exercise"]
def nvl72_allreduce(nbytes, n_gpus):
    # BEGIN SOLUTION
    if n_gpus == 1:
        return 0.0, 0.0, 1
    per_direction = nvl72.gpu_model.nvlink_bandwidth.value / 2 * 1e9
    trays = -(-n_gpus // int(nvl72.gpu_count.value / nvl72.compute_trays.value))
    return 2 * (n_gpus - 1) / n_gpus * nbytes / per_direction, nbytes / per_direction, trays
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError("your code here")  # ring time, NVLS time, compute trays
    # END SKELETON


# %%
labkit.check.nvl72_allreduce(nvl72_allreduce);

# %% [markdown]
# Your model over the whole rack, beside the same 72 GPUs as 9 DGX B200 joined by InfiniBand (the ring's slowest hop
# sets its pace), for this lab's gradients:

# %%
nv72 = labkit.check.solved_or_reference("08.nvl72-allreduce", nvl72_allreduce)
for n_gpus in (8, 72):
    ring_s, nvls_s, trays = nv72(grad_bytes, n_gpus)
    print(f"{n_gpus:2d} GPUs in {trays:2d} tray(s): ring {ring_s * 1e3:5.2f} ms, NVLS {nvls_s * 1e3:5.2f} ms over NVLink [model]")
ring_ib = 2 * 71 / 72 * grad_bytes / (ib.value * 1e9)
print(f"72 GPUs as 9 DGX B200: ring over InfiniBand {ring_ib * 1e3:5.2f} ms [model], "
      f"{ring_ib / nv72(grad_bytes, 72)[0]:.0f} times the NVL72's ring")

# %% [markdown]
# Over NVLink the ring's time hardly grows from 8 GPUs to 72 (2(n−1)/n approaches 2), and NVLS stays at one buffer's
# worth. Across InfiniBand the same ring is slower by the ratio of the two links' rates. A job's parallel layout (tensor parallelism inside the
# NVLink domain, data or pipeline parallelism across it) follows where that boundary lies.
#
# ## 8. Data-parallel scaling
#
# Keep each GPU's batch fixed and add GPUs (weak scaling): n GPUs process n batches per step, and each step pays
# one all-reduce. The backward pass produces gradients layer by layer, so frameworks start reducing early ones
# while later ones still compute: a fraction of the compute time can hide communication.
#
# ### Exercise 5 — speedup and efficiency
#
# Write `data_parallel(compute_s, allreduce_s, n, overlap)` returning `(speedup, efficiency)`: the speedup of n GPUs
# over one (throughput ratio), and speedup / n. The all-reduce can hide behind at most `overlap` × `compute_s`.
# One GPU has no all-reduce. The check uses times, GPU counts and overlaps drawn fresh each run.

# %% tags=["exercise"]
def data_parallel(compute_s, allreduce_s, n, overlap=0.0):
    # BEGIN SOLUTION
    if n == 1:
        return 1.0, 1.0
    step = compute_s + allreduce_s - min(allreduce_s, overlap * compute_s)
    speedup = n * compute_s / step
    return speedup, speedup / n
    # END SOLUTION
    # BEGIN SKELETON
    # step time with n GPUs = compute + all-reduce - the hidden part
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.data_parallel_scaling(data_parallel);

# %% [markdown]
# Now the whole model: compute time per step from each GPU's FP16 Tensor Core peak at an assumed utilisation
# (the usual estimate of 6 FLOPs per parameter per item for a forward and backward pass), all-reduce time from the
# wiring; the model prints its assumptions first. Your function gives the efficiency at 8 GPUs:

# %%
dp = labkit.check.solved_or_reference("08.scaling-efficiency", data_parallel)
models = {name: co.scaling(name) for name in co.SYSTEMS}
print(*models["DGX H100"].assumptions, sep="\n  ")
for name, m in models.items():
    p = m.point(8)
    speedup, eff = dp(p.compute_s, p.allreduce_s, 8, 0.0)
    print(f"{name:13} compute {p.compute_s * 1e3:6.2f} ms, all-reduce {p.allreduce_s * 1e3:5.2f} ms -> 8 GPUs: "
          f"speedup {speedup:4.2f}, efficiency {eff:.0%} [model]")

# %% tags=["nbval-ignore-output"]
co.scaling_figure(list(models.values()) + [co.scaling("2x DGX-1 (V100)")])

# %% [markdown]
# Read the curves. The faster the GPU, the shorter the compute, and the larger the share of the step the all-reduce
# takes: each GPU generation needs faster links just to stay as efficient. The DGX-2 keeps its efficiency up to 16
# GPUs; two DGX-1 joined by InfiniBand fall off beyond 8, where the ring must leave the box. The GB200 NVL72 model
# keeps its ring on NVLink up to 72 GPUs. Its efficiency is still lower than the DGX B200's: its GPUs compute a
# little faster (compare the two at 8 GPUs), and a ring of 72 has 2 × 71 steps, each paying the latency α. At each system's full
# size, and with a quarter of the compute able to hide communication:

# %%
for name in co.SYSTEMS:
    full = models[name].points[-1]
    hid = co.scaling(name, overlap=0.25).points[-1]
    print(f"{name:13} {full.n:2d} GPUs: efficiency {full.efficiency:.0%} without overlap, {hid.efficiency:.0%} with overlap 0.25 "
          f"(window {0.25 * full.compute_s * 1e3:.1f} ms for a {full.allreduce_s * 1e3:.1f} ms all-reduce) [model]")

# %% [markdown]
# Where the window (overlap × compute) is longer than the all-reduce, this model scales perfectly; faster GPUs
# shrink the window. Real frameworks also lose some of it to small, latency-bound buckets of gradients.
#
# ## 9. Sharing one GPU: MIG and MPS
#
# The opposite problem: one job too small for a GPU. Two ways to share it.
#
# - **MIG (Multi-Instance GPU)**, from the A100 on: the GPU is partitioned in hardware into several **GPU
#   instances** (how many: exercise 6), each with its own SMs, its own slice of L2 and memory, and its own memory bandwidth. A job in one
#   instance cannot slow down or see the others: isolation and a guaranteed share, at the cost of a fixed size.
# - **MPS (Multi-Process Service)**: several processes submit work through one server, so their kernels run on the
#   GPU **at the same time** instead of taking turns. Utilisation rises when each process alone leaves SMs idle, but
#   nothing is partitioned: the processes compete for memory bandwidth and cache, and a fatal fault in one client can
#   bring down the others on that GPU.

# %%
mig = co.mig_summary("DGX A100")
print(f"{mig['system']}: {mig['instances_per_system']} MIG instances at most, on {mig['gpus']} x {mig['gpu']} ({mig['gpu_memory']})")
print(f"memory is divided into {mig['memory_slices']} slices ({mig['slices_source']})")

# %% [markdown]
# ### Exercise 6 — MIG slices
#
# How many MIG instances can one A100 of the DGX A100 hold (`per_gpu`), and how many GB of memory does the smallest
# instance get (`memory_gb`)? Compute both from the figures printed above (`hw.system("DGX A100")`).

# %% tags=["exercise"]
# BEGIN SOLUTION
dgx_a100 = hw.system("DGX A100")
mig_answer = {
    "per_gpu": dgx_a100.mig_instances.value / dgx_a100.gpu_count.value,
    "memory_gb": dgx_a100.gpu_model.memory_size.value / co.MIG_MEMORY_SLICES,
}
# END SOLUTION
# BEGIN SKELETON
mig_answer = {"per_gpu": ..., "memory_gb": ...}
# END SKELETON

# %%
labkit.check.mig_slices(mig_answer);

# %% [markdown]
# On today's DGX the same rule holds with larger slices. The B200's MIG profiles, from NVIDIA's MIG user guide, and
# what `labkit mig-plan --gpu B200` prints for a class (the GPU Operator's node label included):

# %%
from labkit import mig as migs

for p in migs.profiles("B200"):
    print(f"{p.name:9s} {p.per_gpu.text():>8} per GPU ({p.compute_slices} of 7 compute slices)")
print("source:", migs.profile("B200").per_gpu.source)
print(f"a DGX B200 has {hw.system('DGX B200').gpu_count.text()} B200s; node label for one-slice learners: "
      f"nvidia.com/mig.config={migs.profile('B200').node_label}")

# %% [markdown]
# ### Exercise 6b — seat a class on a DGX B200
#
# Write `b200_class(learners, instructor_gpus)` returning `(gpus, systems, spare_slices)`: every learner gets one
# slice of the B200's smallest profile (printed above), every instructor a whole B200 with MIG off; slices and whole
# GPUs may share a DGX B200 (the GPU Operator's `mig.strategy=mixed`). `gpus` counts the B200s in use, `systems` the
# DGX B200s they need, `spare_slices` the slices of the learners' GPUs that nobody uses. Take the figures from the
# cell above, not by calling `migs.plan` (the check compares with it). The check draws fresh class sizes.

# %% tags=["exercise"]
def b200_class(learners, instructor_gpus):
    # BEGIN SOLUTION
    per_gpu = int(migs.profile("B200").per_gpu.value)
    per_system = int(hw.system("DGX B200").gpu_count.value)
    learner_gpus = -(-learners // per_gpu)
    gpus = learner_gpus + instructor_gpus
    return gpus, -(-gpus // per_system), learner_gpus * per_gpu - learners
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError("your code here")  # GPUs, DGX B200 systems, spare slices
    # END SKELETON


# %%
labkit.check.mig_b200_class(b200_class);

# %% [markdown]
# MPS, as a model: four inference processes, each able to keep only part of the SMs busy on its own (the fractions below).

# %%
share = co.sharing_model([0.25, 0.3, 0.2, 0.25])
print(f"{share['processes']} processes: time-sliced {share['time_sliced']:.0%} busy, with MPS {share['mps']:.0%} "
      f"({share['gain']:.1f}x) [model]")
print(*share["assumptions"], sep="\n  ")

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,mig.mode.current", "--format=csv"],
                             capture_output=True, text=True, timeout=20)
        print(out.stdout or out.stderr)
    except (OSError, subprocess.SubprocessError) as exc:
        print("nvidia-smi not available:", exc)
    print("Enabling MIG or starting the MPS daemon needs administrator rights; this lab does neither.")
else:
    print("sim mode: no GPU to query. On a GPU this cell shows whether MIG is enabled (nvidia-smi's mig.mode.current).")

# %% [markdown]
# ## 10. Many processes: a ring all-reduce over MPI
#
# Everything so far simulated the GPUs in one Python process. Real multi-GPU work runs **one process per GPU**,
# started by a launcher (`mpiexec`, `torchrun`, Slurm), and the processes talk through a library: MPI between CPU
# processes, NCCL between GPUs. Here you write the ring all-reduce for real processes with MPI (`mpi4py`, on the
# MPICH that the `mpich` wheel installs, so a laptop runs it too).
#
# How the notebook runs processes: `labkit.ranks` writes your function's source into a file in a fresh temporary
# folder and starts `mpiexec -n N python ...` on it; each process calls your function with its communicator. Every
# run starts new processes and ends them, so nothing is left between cells and a run that hangs is stopped as a
# whole (ipyparallel's MPI engines would keep processes alive between cells: quicker to reuse, but a hang or a
# crash leaves state and processes behind). The processes see only your function's own code, `np` and `MPI`.
# Each run has the course's time limit for learner code.

# %%
from labkit import ranks

print("MPI here:", ranks.available()[1], f"(at most {ranks.max_ranks()} processes in this session)")


def hello(comm):
    return f"rank {comm.Get_rank()} of {comm.Get_size()}"


print(ranks.call(hello, 4).values)

# %% [markdown]
# Processes share nothing: each has its own buffer, and data moves only in messages. `comm.Sendrecv(sendbuf,
# dest=..., recvbuf=..., source=...)` sends one buffer and receives another in one call, so a ring of processes that
# all send right and receive from the left cannot deadlock. A plain `Recv` that no process answers with a `Send`
# waits forever; labkit stops it at the time limit and says which rank waited in which call (shown here with a
# 1-second limit):

# %%
def waits_forever(comm):
    buf = np.zeros(4)
    if comm.Get_rank() == 1:
        comm.Recv(buf, source=0)  # rank 0 never sends
    return "done"


try:
    ranks.call(waits_forever, 2, limit_s=1)
except ranks.RankError as err:
    print(err)
print("processes left behind:", ranks.leftovers())

# %% [markdown]
# ### Exercise 7 — a ring all-reduce over processes
#
# Write `my_ring_allreduce(comm, buf)`, run by every rank: `buf` is this rank's 1-D NumPy array; return the
# element-wise sum over all ranks (reducing `buf` in place and returning it is fine). Cut `buf` into n chunks with
# `np.array_split` (n need not divide the size; chunks may be empty), then n − 1 **reduce-scatter** steps and n − 1
# **all-gather** steps, each one `comm.Sendrecv` to `(r + 1) % n` and from `(r - 1) % n`, one chunk at a time, with
# the schedule of section 2 (rank r sends chunk (r − s) % n, then (r + 1 − s) % n). Keep the buffer's dtype. The
# check runs it on 2 up to 8 real processes against `MPI.Allreduce`, with fresh sizes that the process count does
# not divide, sizes smaller than it, float32 and int32, and calls it again with the same sizes and new values until
# each rank has called it 44 times: compute every call from the `buf` it gets.

# %% tags=["exercise"]
def my_ring_allreduce(comm, buf):
    r, n = comm.Get_rank(), comm.Get_size()
    # BEGIN SOLUTION
    right, left = (r + 1) % n, (r - 1) % n
    chunks = np.array_split(buf, n)  # views into buf
    scratch = np.empty_like(chunks[0])  # the first chunk is the longest
    for s in range(n - 1):
        send, recv = (r - s) % n, (r - s - 1) % n
        incoming = scratch[: chunks[recv].size]
        comm.Sendrecv(chunks[send], dest=right, recvbuf=incoming, source=left)
        chunks[recv] += incoming
    for s in range(n - 1):
        send, recv = (r + 1 - s) % n, (r - s) % n
        comm.Sendrecv(chunks[send], dest=right, recvbuf=chunks[recv], source=left)
    return buf
    # END SOLUTION
    # BEGIN SKELETON
    # chunks = np.array_split(buf, n); n - 1 reduce-scatter steps, then n - 1 all-gather steps
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.mpi_ring(my_ring_allreduce);

# %% [markdown]
# Your ring (or labkit's, until yours passes) on 2, 4 and 8 processes, each rank's result compared with
# `MPI.Allreduce` of the same buffers, and the bytes each rank sent against 2(n−1)/n × the buffer:

# %%
ring_fn = labkit.check.solved_or_reference("08.mpi-ring", my_ring_allreduce)
counts = [p for p in (2, 4, 8) if p <= ranks.max_ranks()]
size = 100_003  # not a multiple of any of them
for case in ranks.grade_cases(ring_fn, [(p, size, "float32", 8) for p in reversed(counts)]):  # one launch for all
    p = case["n"]
    same = all("bad" not in rec for rec in case["ranks"])
    sent = [rec["sent"] for rec in case["ranks"]]
    print(f"{p} processes: every rank equals MPI.Allreduce: {same}; bytes sent per rank {min(sent)}-{max(sent)}, "
          f"2(n-1)/n x {4 * size} = {bw.busbw_factor('all_reduce', p) * 4 * size:.0f}")
if len(counts) < 3:
    print(f"(8 processes skipped: this session allows {ranks.max_ranks()}; LABKIT_MAX_RANKS caps it on small machines)")

# %% [markdown]
# ### Measured: algbw and busbw of CPU processes
#
# The same definitions as nccl-tests, for these **CPU processes talking through shared memory** on this machine:
# not GPUs and not NVLink. Each time is the median over 3 runs of the slowest rank; `MPI.Allreduce` (MPICH's own
# algorithm) beside it.

# %% tags=["nbval-ignore-output"]
sizes = [2**10, 2**16, 2**22]  # float32 elements: 4 KiB, 256 KiB, 16 MiB
measured = {p: ranks.bench(ring_fn, p, sizes, reps=3) for p in counts}
print("MEASURED on this machine's CPU cores (processes over shared memory, not a GPU)")
print(f"{'procs':>5} {'bytes':>10} {'time us':>10} {'algbw':>8} {'busbw':>8} {'MPI busbw':>10}  (GB/s)")
for p, rows in measured.items():
    for t in rows:
        print(f"{p:5d} {t.nbytes:10d} {t.seconds * 1e6:10.1f} {t.algbw:8.3f} {t.busbw:8.3f} {t.mpi_busbw:10.3f}")

# %% [markdown]
# Compare with the lab's ring model (section 4), fitted to this machine: α from the smallest buffer on 2
# processes (2 steps), B from their best busbw (for n = 2, busbw is what one "link" carries). On a DGX each GPU has
# its own NVLink ports, so the model's busbw hardly changes with n. Here all processes share a few cores and one
# memory system, and MPICH's processes spin on the CPU while they wait: with more processes than cores they take
# turns, a small message then costs milliseconds, and busbw falls with n. The model's assumption of independent
# links, each with its own sender, is what fails on a laptop.

# %% tags=["nbval-ignore-output"]
pair = measured[2]
alpha_us = pair[0].seconds / 2 * 1e6
B_cpu = max(t.busbw for t in pair)
print(f"fitted to 2 processes: alpha = {alpha_us:.1f} us, B = {B_cpu:.2f} GB/s [model parameters from a measurement]")
for p, rows in measured.items():
    for t in rows[1:]:
        m = co.ring_cost(t.nbytes, p, B_cpu, alpha_us)
        print(f"{p} processes, {t.nbytes:9d} bytes: measured {t.seconds * 1e6:9.1f} us, model {m.seconds * 1e6:9.1f} us "
              f"(measured / model {t.seconds / m.seconds:.2f})")
print(f"this machine: {os.cpu_count()} CPU cores for up to {max(counts)} processes")

# %% [markdown]
# ### The same code on GPUs
#
# With one process per GPU the ring is the same function. In `gpu` mode with two GPUs or more, labkit starts one
# process per GPU (each takes the GPU of its local rank), rank 0 makes an NCCL unique id and broadcasts it over MPI,
# every rank joins one NCCL communicator, and your `my_ring_allreduce` runs on CuPy arrays: `comm.Sendrecv` becomes
# an NCCL send and receive (`cupy.cuda.nccl`), and `np.array_split` and `np.empty_like` work on CuPy arrays too.
# Its result is checked against NCCL's own `allReduce` and both are timed; where the MPI library is CUDA-aware the
# ring also runs with MPI carrying device buffers (the PyPI `mpich` wheel is not). busbw is nccl-tests' definition;
# compare the ring's with the per-direction NVLink rate from `labkit.hw`, and NCCL's (NVLS on a DGX H100/H200)
# with section 6.

# %% tags=["nbval-ignore-output"]
ok, why = ranks.gpu_status()
if ok:
    rows, info = ranks.gpu_bench(ring_fn, sizes=(2**20, 2**26))
    for t in rows:
        print(f"MEASURED on {t.n} x {info['device']}: {t.nbytes} bytes, correct {t.correct}: your ring busbw "
              f"{t.busbw():.1f} GB/s, NCCL allReduce busbw {t.busbw(t.nccl_seconds):.1f} GB/s"
              + (f", over CUDA-aware MPI {t.busbw(t.cuda_aware_mpi_seconds):.1f} GB/s" if t.cuda_aware_mpi_seconds else ""))
    print("CUDA-aware MPI here:", info["cuda_aware_mpi"], "; GPUs by rank:", info["devices"])
    gpu_hw = hw.match_device(info["device"])
    if gpu_hw is not None and gpu_hw.nvlink_bandwidth is not None:
        print(f"{gpu_hw.name}: NVLink {gpu_hw.nvlink_bandwidth} bidirectional = {gpu_hw.nvlink_bandwidth.value / 2:g} GB/s "
              "per direction, what a ring's busbw can reach (labkit.hw)")
else:
    print(f"no GPU run: {why}.")
    print("The model of the same ring on 8 GPUs of a DGX H200 (and what NCCL would pick instead):")
    for size in (2**22, 2**28):
        print(" ", co.ring_cost(size, 8, B_h200), "\n ", co.nccl_choice("DGX H200", size))

# %% [markdown]
# ## 11. Data-parallel training: buckets overlapped with the backward pass
#
# Section 8's model let a fraction of the compute hide the all-reduce. Here is where that fraction comes from.
# The backward pass produces gradients layer by layer, the last layer first. PyTorch's DistributedDataParallel
# does not wait for all of them: it groups them into **buckets** (25 MiB by default, the first one 1 MiB) and
# starts a bucket's all-reduce as soon as its last gradient is ready, while the backward pass goes on with earlier
# layers. A bucket closes once it holds the cap or more; the last one may be smaller. Few large buckets start late;
# many small ones start early but each pays the ring's latency.
#
# ### Exercise 8 — gradient buckets
#
# Write `make_buckets(sizes, cap_bytes)`: `sizes[k]` is the size in bytes of the k-th gradient the backward pass
# produces (already in that order). Return the buckets as lists of positions in `sizes`: walk them in order, add
# each to the open bucket, close it once it holds `cap_bytes` or more. `make_buckets([4, 4, 4], 8)` is
# `[[0, 1], [2]]`.

# %% tags=["exercise"]
def make_buckets(sizes, cap_bytes):
    # BEGIN SOLUTION
    buckets, current, held = [], [], 0
    for k, size in enumerate(sizes):
        current.append(k)
        held += size
        if held >= cap_bytes:
            buckets.append(current)
            current, held = [], 0
    if current:
        buckets.append(current)
    return buckets
    # END SOLUTION
    # BEGIN SKELETON
    # an open bucket and the bytes it holds; close it at cap_bytes or more; keep the last one
    raise NotImplementedError("your code here")
    # END SKELETON


# %%
labkit.check.ddp_buckets(make_buckets);

# %% [markdown]
# Now a real run. `labkit.ddp.run` trains a small NumPy model (five linear layers with `tanh`, printed below) on
# 2 processes, each on its own batch. Your ring all-reduces each bucket on a communication thread as soon as the
# bucket is ready, while the main thread continues the backward pass; then every process divides by n and takes the
# same SGD step. Three bucket plans: one bucket (nothing can overlap), **1 MiB buckets** (every bucket capped at
# DDP's *first*-bucket size, so the window opens early), and one bucket per gradient. The 1 MiB plan is not DDP's
# own plan: DDP caps only its first bucket at 1 MiB and the others at `bucket_cap_mb` (25 MiB), which on this small
# model makes fewer buckets (printed below; PyTorch `DistributedDataParallel` documentation and
# `torch/nn/parallel/distributed.py`, `_DEFAULT_FIRST_BUCKET_BYTES`). The run checks that both processes end with
# the same parameters, equal to one process training on both batches.

# %%
from labkit import ddp

buckets_fn = labkit.check.solved_or_reference("08.ddp-buckets", make_buckets)
sizes, order = ddp.grad_sizes(ddp.LAYERS)
print(f"model: layers {ddp.LAYERS}, {sum(sizes) / 1e6:.2f} MB of float32 gradients; in backward order (bytes): {sizes}")
plans = {name: buckets_fn(sizes, cap) for name, cap in (("one bucket", 1 << 40), ("1 MiB", 1 << 20), ("per gradient", 1))}
for name, plan in plans.items():
    print(f"{name:13}: {len(plan)} bucket(s) {plan}")
first = buckets_fn(sizes, 1 << 20)[0]  # DDP's own rule: the first bucket at 1 MiB, the rest at 25 MiB
ddp_plan = [first] + [[len(first) + k for k in b] for b in buckets_fn(sizes[len(first):], 25 << 20)]
print(f"DDP's own plan (1 MiB first, then 25 MiB; not run here): {len(ddp_plan)} bucket(s) {ddp_plan}")

# %% tags=["nbval-ignore-output"]
runs = dict(zip(plans, ddp.run(ring_fn, 2, list(plans.values()), steps=2)))
print("MEASURED: 2 CPU processes over shared memory on this machine (not a GPU); medians, slowest process, ms")
print(f"{'plan':13} {'compute':>8} {'all-red.':>8} {'sequential':>10} {'overlapped':>10} {'hidden':>7} {'window':>7} "
      f"{'model step':>10}  same params")
for name, r in runs.items():
    step, _ = r.model()
    print(f"{name:13} {r.compute_s * 1e3:8.1f} {r.comm_s * 1e3:8.1f} {r.sequential_s * 1e3:10.1f} {r.overlapped_s * 1e3:10.1f} "
          f"{r.hidden_s * 1e3:7.1f} {r.window:7.0%} {step * 1e3:10.1f}  {r.ranks_agree} (error {r.max_rel_error:.1e})")

# %% [markdown]
# Read the table. *window* is the part of the compute left after the first bucket was ready, the `overlap` of
# section 8's model, and *model step* is that model (`co.step_time`) with the measured compute and all-reduce times.
# One bucket gives no window: the model and the measurement both pay compute + all-reduce. With more buckets the
# window opens, and the model hides communication behind it. Whether the measurement follows depends on the
# machine: here the communication thread needs a CPU core too (MPICH spins while it waits), so on a machine with as
# many cores as processes the "hidden" time can be zero or negative. On a GPU the backward pass runs on the SMs
# and NCCL's transfers on NVLink, with a few SMs of their own, which is why DDP's overlap pays off there.

# %% [markdown]
# ## What you learned
# - A ring all-reduce is a reduce-scatter then an all-gather: 2(n−1) steps, one chunk per GPU per step, every link
#   busy, 2(n−1)/n × the buffer sent per GPU. A tree needs only 2 log₂n steps: between nodes it wins for small
#   messages, the ring for large ones; inside one node NCCL's tree is a chain.
# - NCCL's algorithms: Ring, Tree, NVLS, NVLSTree, CollNetDirect, CollNetChain, PAT; it picks per call from a model
#   like this lab's, and `NCCL_ALGO` forces one.
# - nccl-tests: algbw = size / time; busbw = algbw × 2(n−1)/n (all_reduce) or (n−1)/n (all_gather, reduce_scatter).
#   For a ring, busbw compares with the per-direction link bandwidth; with NVLS (the NVSwitch adds: NVSwitch 3 and
#   later, DGX H100/H200, DGX B200/B300, NVL72) each GPU sends the buffer about once, and busbw exceeds the link rate.
# - In a GB200/GB300 NVL72 the NVLink domain is the rack: 72 GPUs in 18 nodes talk at NVLink speed, and ring or NVLS
#   all-reduces across nodes no longer cross InfiniBand.
# - With bandwidth per direction (half the bidirectional figure) you can predict an all-reduce on any DGX; NVSwitch
#   systems give every GPU its full bandwidth, the DGX-1 depends on which GPUs you take.
# - Scaling efficiency = compute / step time; faster GPUs need faster links, and overlap hides part of the cost.
# - MIG partitions an A100 or a B200 into isolated instances (7 per GPU, memory in eighths); a class on a DGX B200
#   needs ceil(learners / 7) GPUs plus the instructors'; MPS lets processes share a GPU at once, without isolation.
# - Real multi-GPU work is one process per GPU: you wrote the ring with `Sendrecv` between neighbouring MPI
#   processes, checked it against `MPI.Allreduce`, measured CPU processes (not GPUs), and saw where the model's
#   independent links fail on shared cores; on GPUs the same function runs over NCCL.
# - Data-parallel training reduces gradients in buckets during the backward pass: the window after the first
#   bucket is the overlap of the scaling model; on CPU processes the communication competes for the cores.
#
# **Next:** [Lab 09 — Capstone](09-capstone.ipynb), a video-analytics pipeline end to end. Back to
# [Lab 07 — Bandwidth and NVLink](07-bandwidth-and-nvlink.ipynb).
