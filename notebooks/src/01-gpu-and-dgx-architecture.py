# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 01 — GPU and DGX architecture
#
# **Learning objectives**
# - Name NVIDIA's three product lines and what each is for.
# - Explain what a GPU is made of: SMs, warps, the memory hierarchy, Tensor Cores, with figures for real GPUs.
# - Compare DGX-1, DGX-2, DGX A100, DGX H100/H200 and the Blackwell systems (DGX B200, DGX B300, GB200/GB300 NVL72),
#   and explain why the DGX-2's NVSwitch wiring matters.
# - Dissect vendor claims with the data sheets: peak ratios, sparsity, system totals, link counts, all-reduce time,
#   and a roofline.
#
# **Prerequisites:** [Lab 00](00-start-here.ipynb). No GPU needed: everything here is computed from data sheets.
#
# **Time:** 55 minutes (teaching 30, exercises 25)

# %% tags=["bootstrap"]
import labkit

env = labkit.setup()

# %%
from labkit import hw, topology
from labkit.roofline import roofline, roofline_figure
from labkit.widgets import architecture as arch

# %% [markdown]
# ## 1. Three product lines
#
# NVIDIA builds GPUs for three markets from shared architectures:
#
# - **Tesla** (today simply "data-centre GPUs"): compute for training, inference and HPC. The flagship parts in this
#   lab — P100, V100, A100, H100, H200, B200, B300 — have HBM memory, NVLink and a high FP64 rate (printed below). Not every
#   data-centre GPU does: the inference and graphics cards T4, L4 and L40S have GDDR memory, no NVLink, and FP64 at a
#   small fraction of their FP32 rate.
# - **GeForce / Titan**: consumer and workstation graphics cards. Same programming model (CUDA); mostly GDDR memory,
#   a low FP64 rate and no NVLink between many GPUs. The exception proves the rule: the Titan V uses the V100's chip,
#   with HBM2 and its high FP64 rate.
# - **Tegra** (now Jetson and DRIVE): systems-on-chip for robots, cars and cameras, built for low-power inference.
#
# A CUDA program written in this course runs on all three; what changes is how fast. `labkit.hw` holds the data-centre parts.
# Every figure it gives carries its source. A few are marked **unconfirmed** (not yet checked against their source);
# this lab flags them with "unconfirmed" or `*` wherever they appear. They are:

# %%
flagged: dict[str, list[str]] = {}
for record, field, fig in hw.unconfirmed():
    flagged.setdefault(record, []).append(f"{field} {fig.text()}")
for record, fields in flagged.items():
    print(f"{record}: {', '.join(fields)}")

# %%
for name in hw.gpus():
    g = hw.gpu(name)
    print(f"{g.name:16} {g.architecture:9} {int(g.year)}  cc {g.compute_capability[0]}.{g.compute_capability[1]}  "
          f"{g.memory_size.text():>7} {g.memory_type:6} {g.memory_bandwidth.text():>10}  {int(g.sm_count)} SMs")

# %% [markdown]
# ## 2. Anatomy of a GPU
#
# A GPU is an array of **streaming multiprocessors (SMs)**. Each SM runs thousands of threads in groups of 32 called
# **warps**: the SM's schedulers issue one instruction at a time for the active threads of a warp. Since Volta each
# thread has its own program counter (**independent thread scheduling**, CUDA C++ Programming Guide, SIMT
# architecture): when a branch splits a warp, the two paths take turns, and nothing guarantees that the 32 threads are
# at the same instruction at any moment. Code that relies on the warp moving in step must say where it needs the
# threads together: the `_sync` warp primitives (`__shfl_sync`, `__syncwarp`, lab 04) do. An SM holds a large register file (each
# thread's variables), a fast on-chip **shared memory / L1** (that a block of threads shares), CUDA cores for FP32/INT
# arithmetic and, from Volta on, **Tensor Cores** that do small matrix products per instruction. All SMs share the
# **L2 cache** and the **HBM** memory stacks next to the chip.
#
# The printed figures below come from the whitepapers (sources with each figure).

# %%
for name in ["P100", "V100", "A100", "H100"]:
    g = hw.gpu(name)
    cores = int(g.sm_count) * int(g.fp32_cores_per_sm)
    tcs = int(g.sm_count) * int(g.tensor_cores_per_sm)
    print(f"{g.name}: {int(g.sm_count)} SMs x {int(g.fp32_cores_per_sm)} FP32 cores = {cores} cores; "
          f"{tcs} Tensor Cores; registers {g.register_file_per_sm.text()}/SM; shared memory up to "
          f"{g.shared_memory_per_sm.text()}/SM; L2 {g.l2_cache.text()}; {g.transistors.text()} transistors on {g.die_size.text()}")
print("source:", hw.gpu("H100").sm_count.source)

# %% [markdown]
# Peaks depend on the precision. The Tensor Core rates dwarf the FP32 rate, and from the A100 on NVIDIA quotes a second
# figure "with sparsity" (2:4 structured sparsity: two of every four weights are zero and skipped, in one operand that
# was pruned to that pattern in advance and run through a sparse kernel such as cuSPARSELt or TensorRT: an inference
# technique; training and most inference run at the dense figure). Missing entries do
# not exist on that GPU (the P100 has no Tensor Cores at all). FP64 needs two columns: the A100 and H100 run FP64
# matrix products on their Tensor Cores at twice their CUDA-core FP64 rate, the P100 and V100 do FP64 on the CUDA cores
# only, and the B200's datasheet gives one FP64 figure for both (its row: the same number twice). A single "FP64"
# column would put a Tensor Core rate next to a CUDA-core rate. The trend after the H100 is down, not up: the B200's
# FP64 is below the H100's Tensor Core FP64, and the B300 (Blackwell Ultra, 2025) has almost none (printed below), a
# part built for low-precision AI. Blackwell's headline formats are new columns: **FP6** (E2M3 and E3M2, the elements
# of OCP's MXFP6) and **FP4** (E2M1, the element of MXFP4 and of NVIDIA's NVFP4; lab 06 quantizes to NVFP4), FP4 at
# twice the FP8 rate on the B200 and three times on the B300 (dense).
# The Blackwell rows come from 8-GPU totals divided by 8, so labkit marks them unconfirmed. The cell after the table
# prints where each GPU's FP64 runs.

# %%
precisions = ["fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8"]
print(f"{'dense peak':16}{'fp64 cores':>11}{'fp64 TC':>8}" + "".join(f"{p:>8}" for p in precisions))
for name in ["P100", "V100", "A100", "H100", "B200", "B300"]:
    g = hw.gpu(name)
    on_tc = "Tensor Cores" in g.runs_on("fp64")
    fp64 = [f"{g.peak('fp64', tensor_core=False).value:11g}", f"{g.peak('fp64').value:8g}" if on_tc else f"{'—':>8}"]
    cells = [f"{g.peak(p).value:8g}" if g.has(p) else f"{'—':>8}" for p in precisions]
    print(f"{g.name:16}" + "".join(fp64 + cells))
print("TFLOP/s (TOPS for int8). fp64 cores: on the CUDA cores; fp64 TC: FP64 on Tensor Cores (matrix products only).")
print("Blackwell figures are unconfirmed:", hw.gpu("B200").peak("fp4"), "|", hw.gpu("B300").peak("fp4"))
print("B300 fp4 with sparsity:", hw.gpu("B300").peak("fp4", sparse=True).text(), "(sparsity adds only a third on Blackwell Ultra)")
for name in ["V100", "A100"]:
    g = hw.gpu(name)
    print(f"{g.name}: FP64 {g.peak('fp64', tensor_core=False).value / g.peak('fp32').value:.0%} of FP32 on the CUDA cores")
for name in ["A100", "H100", "B200", "B300"]:
    g = hw.gpu(name)
    tc, cores = g.peak("fp64"), g.peak("fp64", tensor_core=False)
    print(f"{g.name}: FP64 on {g.runs_on('fp64')}: {tc.text()} with Tensor Cores, {cores.text()} on the CUDA cores "
          f"({tc.value / cores.value:.1f}×)")

# %% [markdown]
# ## 3. Claim: V100 mixed precision is "more than 10×" the P100
#
# The V100's Tensor Cores multiply FP16 and accumulate in FP32 ("mixed precision").
#
# **Exercise 1.** Compute two ratios from `hw`: the V100's Tensor Core FP16 peak divided by the P100's **FP32** peak
# (`ratio_fp32`) and by the P100's **FP16** peak (`ratio_fp16`). Use `hw.gpu(name).peak(precision).value`.

# %% tags=["exercise"]
# BEGIN SOLUTION
v100_tc = hw.gpu("V100").peak("fp16").value
ratio_fp32 = v100_tc / hw.gpu("P100").peak("fp32").value
ratio_fp16 = v100_tc / hw.gpu("P100").peak("fp16").value
# END SOLUTION
# BEGIN SKELETON
ratio_fp32 = ...
ratio_fp16 = ...
# END SKELETON

# %%
labkit.check.v100_vs_p100(ratio_fp32, ratio_fp16);

# %% [markdown]
# ## 4. Claim: the A100 is "up to 20×" Volta
#
# Launch coverage quoted "19.5" for the A100 — that is its plain FP32 rate, barely above the V100's. The 20× compares
# something else.
#
# **Exercise 2.** Find the pair of peaks whose ratio is about 20 and store it in `ratio`. (TF32 is the Tensor Core
# format that frameworks use for FP32 inputs; `peak(..., sparse=True)` gives the sparsity figure.)

# %% tags=["exercise"]
# BEGIN SOLUTION
ratio = hw.gpu("A100").peak("tf32", sparse=True).value / hw.gpu("V100").peak("fp32").value
# END SOLUTION
# BEGIN SKELETON
ratio = ...
# END SKELETON

# %%
labkit.check.a100_20x(ratio);

# %% [markdown]
# ## 5. DGX systems: from the GPUs to the headline
#
# A DGX is a server built around 8 or 16 data-centre GPUs. The table compares the generations; hover a cell for its
# source. The chart shows how the total FP16 dense peak grew (log scale).

# %% tags=["nbval-ignore-output"]
from IPython.display import HTML

HTML(arch.comparison_html())

# %% tags=["nbval-ignore-output"]
arch.evolution_figure("FP16 dense peak, all GPUs")

# %% tags=["nbval-ignore-output"]
arch.evolution_figure("NVLink per GPU (bidirectional)")

# %%
a100 = hw.system("DGX A100")
print(a100.headline, "-", a100.headline_what)
print("GPUs:", a100.gpu_count, "| list price:", a100.price)
pod = hw.system("SuperPOD")
print(pod.name, ":", pod.system_count, "x", pod.system, "->", pod.headline)

# %% [markdown]
# **Check the talk against the datasheets.** The course's source, a 2018 talk on the DGX-2, also quotes DGX-1
# figures. Set next to NVIDIA's datasheets, three of them are off: one is the older system's figure, two are
# rounded. `labkit.hw` stores the datasheet figure and keeps the talk's in a note; `hw.claims()` lists each pair.

# %%
for claim in hw.claims():
    print(claim)
    print("   datasheet source:", claim.datasheet.source)

# %% [markdown]
# None of these changes a conclusion, but the first shows the habit worth keeping: when a figure in a talk matches
# a different product's datasheet, the slide was probably reused. Read the datasheet of the exact product before
# you plan a rack's power around a talk.
#
# **Exercise 3.** Recompute the DGX A100 headline from its GPU count and one A100's peak, in PFLOP/s (`pflops`).
# Which precision and which kind of peak make it come out at 5?

# %% tags=["exercise"]
# BEGIN SOLUTION
pflops = a100.gpu_count.value * hw.gpu("A100").peak("fp16", sparse=True).value / 1000
# END SOLUTION
# BEGIN SKELETON
pflops = ...
# END SKELETON

# %%
labkit.check.dgx_a100_pflops(pflops);

# %% [markdown]
# **Exercise 4.** A DGX SuperPOD of 140 DGX A100: how many GPUs (`gpus`) and how many PFLOP/s (`pod_pflops`)?

# %% tags=["exercise"]
# BEGIN SOLUTION
gpus = int(pod.system_count.value * a100.gpu_count.value)
pod_pflops = pod.system_count.value * a100.headline.value
# END SOLUTION
# BEGIN SKELETON
gpus = ...
pod_pflops = ...
# END SKELETON

# %%
labkit.check.superpod(gpus, pod_pflops);

# %% [markdown]
# ## 6. Wiring: DGX-1 against DGX-2
#
# GPUs in a DGX talk over **NVLink**. Each NVLink generation has a per-link rate (per direction) and a number of links
# per GPU; a GPU's NVLink bandwidth is links × rate × 2 directions:

# %%
for n in ["NVLink 1", "NVLink 2", "NVLink 3", "NVLink 4", "NVLink 5"]:
    ln = hw.link(n)
    print(f"{n}: {int(ln.links_per_gpu)} links x {ln.per_link.text()} per direction x 2 = {ln.per_gpu.text()} per GPU ({ln.source})")
for n in ["PCIe 3", "PCIe 4", "PCIe 5", "InfiniBand EDR"]:
    print(f"{n}: {hw.link(n).per_link}  {hw.link(n).per_link.note}")
c2c = hw.link("NVLink-C2C")
print(f"NVLink-C2C: {c2c.per_gpu.text()} bidirectional between CPU and GPU ({c2c.source}); {c2c.per_gpu.note}")

# %% [markdown]
# **NVLink-C2C** is the chip-to-chip form of NVLink: in a Grace Hopper superchip (GH200) it joins the Grace CPU to
# the Hopper GPU, and in Grace Blackwell (GB200, GB300) one Grace CPU to two Blackwell GPUs, cache-coherently, so
# the GPU reads CPU memory at NVLink rather than PCIe speed (printed above). The GB200 NVL72 and GB300 NVL72 racks
# (GB300: Blackwell Ultra, the B300 GPU, announced at GTC 2025) join 72 GPUs and 36 Grace CPUs over NVLink 5 switch
# trays. The next generation is Vera Rubin NVL72, with Rubin GPUs, Vera CPUs and NVLink 6 at 3.6 TB/s per GPU: NVIDIA
# said at CES 2026 that Rubin was in full production (technical blog "Inside the NVIDIA Rubin Platform", January 2026),
# with the rack's production ramp in the third quarter of 2026 and the first cloud deployments in the second half.
# labkit.hw holds only figures it has a datasheet for, so Rubin stays in prose, with its source, until one exists.
#
# The Blackwell DGX systems a 2026 buyer meets are in `labkit.hw`: DGX B200 (2024) and DGX B300 (2025), eight GPUs on
# one NVLink 5 baseboard, and the GB200/GB300 NVL72 racks. Their headlines are FP8 with sparsity, like the DGX H100's
# 32 PFLOPS, so they compare with each other; FP4 is the figure NVIDIA quotes for inference. Neither sparse figure is a
# training rate: the dense FP8 (printed beside each) is.

# %%
for name in ["DGX H100", "DGX B200", "DGX B300", "GB200 NVL72", "GB300 NVL72"]:
    s_ = hw.system(name)
    g = s_.gpu_model
    fp4 = g.peak("fp4", sparse=True).value * int(s_.gpu_count) / 1000 if g.has("fp4") else None
    fp8_dense = g.peak("fp8").value * int(s_.gpu_count) / 1000
    print(f"{name:12} {int(s_.gpu_count):3d} x {g.name:13} headline {s_.headline_text():26} "
          f"FP8 dense {fp8_dense:5.0f} PFLOP/s  FP4 (sparse) {f'{fp4:6.0f} PFLOP/s' if fp4 else '      —'}   "
          f"({s_.headline.source})")

# %% [markdown]
# The **DGX-1** joins its 8 GPUs directly, in a "hybrid cube-mesh": each V100 spends its 6 links on 4 neighbours (two
# of them doubled), so some pairs have two links, some one, some none. Pairs without NVLink copy over PCIe through the
# CPUs. Hover the links in the drawing.

# %% tags=["nbval-ignore-output"]
dgx1 = topology.load("DGX-1 (V100)")
dgx1.draw()

# %%
print(dgx1.summary())
for b in range(1, 8):
    print(f"GPU0-GPU{b}: {dgx1.links_between(0, b)} NVLink(s), nvidia-smi shows {dgx1.relation(0, b)}")

# %% [markdown]
# **Exercise 5.** What NVLink bandwidth, **per direction** in GB/s, joins GPU0 to GPU3, GPU0 to GPU1, and GPU0 to GPU5?
# Count links and multiply by the per-link rate (`hw.link("NVLink 2").per_link`).

# %% tags=["exercise"]
# BEGIN SOLUTION
per_link = hw.link("NVLink 2").per_link.value
gpu0_gpu3 = dgx1.links_between(0, 3) * per_link
gpu0_gpu1 = dgx1.links_between(0, 1) * per_link
gpu0_gpu5 = dgx1.links_between(0, 5) * per_link
# END SOLUTION
# BEGIN SKELETON
gpu0_gpu3 = ...
gpu0_gpu1 = ...
gpu0_gpu5 = ...
# END SKELETON

# %%
labkit.check.dgx1_pairs(gpu0_gpu3, gpu0_gpu1, gpu0_gpu5);

# %% [markdown]
# The **DGX-2** puts 16 GPUs on two baseboards of 8, with 6 **NVSwitch** chips per baseboard. Each GPU sends one of its 6
# links to each switch on its board; each switch also has 8 links to its twin on the other board over the backplane.
# Every pair of GPUs, on one board or across, now sees the same bandwidth: a GPU's full 6 links.

# %% tags=["nbval-ignore-output"]
dgx2 = topology.load("DGX-2")
dgx2.draw(highlight=dgx2.route(0, 15)["path"])

# %%
sw = hw.link("NVSwitch 1")
d2 = hw.system("DGX-2")
print(f"{d2.name}: {d2.gpu_count.text()} GPUs, {d2.nvswitch_count.text()} NVSwitch chips ({d2.fabric})")
print(*dgx2.notes, sep="\n")
print(f"NVSwitch (gen 1): {sw.ports.text()} ports, {sw.per_port.text()} per port per direction, "
      f"{sw.transistors.text()} transistors ({sw.source})")
print("any pair, bidirectional:", dgx2.peer_bandwidth(0, 1, bidirectional=True), "GB/s (same board),",
      dgx2.peer_bandwidth(0, 15, bidirectional=True), "GB/s (across boards)")

# %% [markdown]
# **Exercise 6.** From link counts alone, what bandwidth leaves one DGX-2 baseboard for the backplane, bidirectional,
# in GB/s (`backplane`)? labkit's graph model gives the same answer by a max-flow computation (printed after the check).

# %% tags=["exercise"]
# BEGIN SOLUTION
backplane = 6 * 8 * hw.link("NVLink 2").per_link.value * 2
# END SOLUTION
# BEGIN SKELETON
backplane = ...
# END SKELETON

# %%
labkit.check.dgx2_backplane(backplane);

# %%
print("max-flow model, board 0 -> board 1:", dgx2.max_flow(range(8), range(8, 16), bidirectional=True), "GB/s bidirectional")
for name in ["DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100"]:
    t = topology.load(name)
    print(f"{name:13} per-GPU NVLink {t.max_flow([0], t.gpus()[1:], bidirectional=True, relay=False):6g} GB/s bidir.; "
          f"bisection {t.bisection_bandwidth():6g} GB/s per direction")

# %% [markdown]
# ## 7. Why the wiring matters: all-reduce
#
# Data-parallel training ends every step with an **all-reduce** of the gradients: every GPU must end with the sum over all
# GPUs. In a **ring all-reduce** each GPU cuts its buffer into n pieces and passes pieces around the ring twice (once
# summing, once distributing), so each GPU sends 2(n−1)/n times the buffer. The time is set by the slowest link of
# the ring.
#
# **Exercise 7.** Write `ring_allreduce_time(nbytes, n_gpus, bus_gbps)` returning seconds, for a ring whose every
# GPU sends at `bus_gbps` GB/s per direction (ignore latency).

# %% tags=["exercise"]
def ring_allreduce_time(nbytes, n_gpus, bus_gbps):
    # BEGIN SOLUTION
    return 2 * (n_gpus - 1) / n_gpus * nbytes / (bus_gbps * 1e9)
    # END SOLUTION
    # BEGIN SKELETON
    raise NotImplementedError
    # END SKELETON


# %%
labkit.check.ring_allreduce(ring_allreduce_time);

# %% [markdown]
# A 300 M-parameter speech model (the size in the DGX-2 talk) has 1.2 GB of FP32 gradients. labkit's topology model
# finds each system's ring bandwidth (the smallest cut between any two GPUs) and lists its assumptions:

# %%
ring = labkit.check.solved_or_reference("01.ring-allreduce", ring_allreduce_time)
grad_bytes = 300e6 * 4
for name in ["DGX-1 (V100)", "DGX-2"]:
    seconds, assumptions = topology.load(name).ring_allreduce_time(grad_bytes)
    print(f"{name}: {seconds * 1e3:.1f} ms over {len(topology.load(name).gpus())} GPUs (model)")
print(*assumptions, sep="\n  ")
print(f"your function, DGX-2 at 150 GB/s: {ring(grad_bytes, 16, 150) * 1e3:.1f} ms")
print("usable NVLink rate NCCL assumes:", hw.link("NVLink 2").nccl_model, "of", hw.link("NVLink 2").per_link.text())

# %% [markdown]
# One DGX-1 reduces 8 GPUs in about the time one DGX-2 reduces 16. To get 16 V100s without a DGX-2 you need **two
# DGX-1** joined by InfiniBand: each box has 4 EDR ports.
#
# **Exercise 8.** How many **milliseconds** does the ring all-reduce of the 1.2 GB take over 16 GPUs in two DGX-1, when
# the slowest hop is the InfiniBand between the boxes (`two_dgx1_ms`)? `hw.link("InfiniBand EDR")` gives one port.

# %%
print(hw.system("DGX-1 (V100)").network, "|", hw.link("InfiniBand EDR").signalling, "per port")

# %% tags=["exercise"]
# BEGIN SOLUTION
edr = hw.link("InfiniBand EDR").per_link.value
two_dgx1_ms = ring(grad_bytes, 16, 4 * edr) * 1e3
# END SOLUTION
# BEGIN SKELETON
two_dgx1_ms = ...
# END SKELETON

# %%
labkit.check.two_dgx1(two_dgx1_ms);

# %%
pair = topology.load("2x DGX-1 (V100)")
seconds, assumptions = pair.ring_allreduce_time(grad_bytes)
print(f"model: {seconds * 1e3:.1f} ms;", assumptions[1])
print("box-to-box bandwidth:", pair.max_flow(range(8), range(8, 16), over="all"), "GB/s per direction; inside a DGX-2 the "
      "two halves see", dgx2.max_flow(range(8), range(8, 16)), "GB/s")

# %% [markdown]
# This is why one DGX-2 beats two DGX-1 on communication-heavy work: inside one box the NVSwitches give every GPU its full
# NVLink bandwidth to every other, while two boxes share a few InfiniBand ports. (NCCL plans with about 20 of the 25 GB/s
# per link, as printed above; lab 08 measures collectives.)
#
# ## 8. The roofline: peaks are not speeds
#
# A kernel's speed is bounded by compute **and** by memory traffic. With arithmetic intensity I (FLOPs per byte moved
# to or from HBM), the attainable rate is min(peak, I × bandwidth). Below the **ridge point** a kernel is memory-bound.

# %%
for name, p in [("V100", "fp16"), ("A100", "bf16"), ("H100", "bf16"), ("H200", "bf16"), ("H100", "fp32")]:
    print(roofline(name, p))

# %% tags=["nbval-ignore-output"]
roofline_figure("H200", ["fp32", "bf16"], kernels=[("SAXPY fp32", 2 / 12, None), ("GEMM 8192³ bf16", 8192 / 3, None)])

# %% [markdown]
# SAXPY (2 FLOPs per 12 bytes) is far below every ridge point: no Tensor Core helps it, only memory bandwidth does.
# A large matrix product is far above: it can approach the Tensor Core peak. The explorer below lets you slide the
# intensity; the next cells show the other explorers.

# %% tags=["nbval-ignore-output"]
arch.roofline_explorer("H200", "bf16", 10)

# %% tags=["nbval-ignore-output"]
arch.system_explorer("DGX-1 (V100)", 0, 5)

# %% [markdown]
# Pick the DGX B200 or DGX B300 in the explorer: two NVLink 5 switch chips, each GPU with 9 of its 18 links on each,
# so every pair shows `NV18` at 900 GB/s per direction. The GB300 NVL72 draws 72 GPUs on 18 switch chips: there too any
# two GPUs see the full 900 GB/s, even in different compute trays (lab 08, section 7b). The switch counts the explorer
# draws are the comparison table's:

# %%
for name in ("DGX-2", "DGX H100", "DGX B200", "DGX B300", "GB300 NVL72"):
    t_ = topology.load(name)
    print(f"{name:12} {len(t_.nodes('nvswitch')):2d} switch chips drawn, {hw.system(name).nvswitch_count.text():>8} in labkit.hw; "
          f"GPU0-GPU{t_.gpus()[-1]}: {t_.relation(0, t_.gpus()[-1])}, {t_.peer_bandwidth(0, t_.gpus()[-1]):g} GB/s per direction [model]")

# %% tags=["nbval-ignore-output"]
arch.dgx_comparison()

# %% [markdown]
# ## 9. The machine in front of you
#
# On a GPU machine labkit reads the real topology from NVML (the library behind `nvidia-smi`) and draws it the same way.
# In `sim` mode it reads a saved `nvidia-smi topo -m` output of a DGX A100 instead.

# %% tags=["nbval-ignore-output"]
if env.is_gpu:
    here = topology.from_nvml()
    matched = hw.match_device(env.device_name)
    print(here.summary())
    print("labkit's record for this GPU:", matched.name if matched else "none (not a part labkit has data for)")
else:
    from pathlib import Path

    sample = Path(labkit.__file__).resolve().parents[2] / "tests" / "fixtures" / "nvidia-smi-topo-dgx-a100.txt"
    if sample.exists():
        here = topology.from_nvidia_smi(sample.read_text(), gpu="A100", name="DGX A100 (saved nvidia-smi output)")
    else:  # an installed labkit without the repository's test fixtures
        here = topology.load("DGX A100")
    print(here.summary())
    print("A GPU run would read this machine's own NVLink state and P2P status from NVML; lab 07 then measures the links.")
here.draw()

# %% [markdown]
# ## What you learned
# - Tesla/data-centre, GeForce/Titan and Tegra share CUDA; the flagship data-centre GPUs add HBM, NVLink and a high
#   FP64 rate (not every data-centre card has them). A peak table must say which figures are Tensor Core rates.
# - Check a vendor talk against the datasheets: the DGX-2 talk's DGX-1 power and SSD figures are off.
# - A GPU is SMs running warps of 32 threads, with registers, shared memory, L2 and HBM; Tensor Cores give the large peaks.
#   Since Volta the threads of a warp schedule independently: warp-synchronous code needs the `_sync` primitives.
# - FP64 peaks depend on where FP64 runs: Tensor Cores at twice the CUDA cores on A100/H100, one figure on B200,
#   and far less on Blackwell Ultra (B300); Blackwell adds FP6 and FP4 Tensor Core rates. NVLink-C2C joins Grace CPUs
#   to Hopper and Blackwell GPUs. DGX B200 and DGX B300 are the current 8-GPU DGX systems, GB200/GB300 NVL72 the racks.
# - Vendor ratios depend on which precisions they compare and on sparsity: "10×" is Tensor Cores against FP32, "20×" is
#   sparse TF32 against FP32, 5 PFLOPS is 8 GPUs with sparsity.
# - DGX-1 wires GPUs directly (unequal pairs); NVSwitch gives every pair the full bandwidth, which is why one DGX-2
#   beats two DGX-1 for all-reduce.
# - The roofline turns peaks into bounds for a given arithmetic intensity.
#
# **Next:** [Lab 02 — First kernels](02-first-kernels.ipynb).
