"""Collectives and data-parallel scaling: a ring all-reduce simulated in NumPy, cost models, and NCCL on a GPU.

    >>> import numpy as np
    >>> from labkit import collectives as co
    >>> r = co.ring_allreduce([np.full(10, float(g)) for g in range(4)])
    >>> r.outputs[3][:3]                      # every GPU ends with the sum 0 + 1 + 2 + 3
    array([6., 6., 6.])
    >>> r.bytes_sent_per_gpu() == r.expected_bytes_per_gpu()
    True

What is here, and what kind of result each thing gives:

- :func:`ring_allreduce` **simulates** the ring all-reduce (reduce-scatter, then all-gather) over ``n`` simulated
  GPUs, step by step: which GPU sends which chunk to which, how many bytes, and the final arrays, so the result
  can be checked and the traffic counted. :func:`ring_step` is one step of it (the reference of exercise 08.ring-step).
- :func:`ring_cost`, :func:`tree_cost`, :func:`chain_cost` and :func:`nvls_cost` are **alpha-beta models** (latency
  per step + bytes / bandwidth) of the ring, the binary tree, NCCL's in-node tree (a chain) and NVLS (the NVSwitch
  reduces); each returns a :class:`CostModel` whose ``assumptions`` say what it ignores. :func:`nccl_choice` models
  which of them NCCL picks; :data:`NCCL_ALGORITHMS` lists NCCL's algorithms.
- :func:`allreduce_time` and :func:`scaling` are **models** of a DGX system: the ring bandwidth comes from
  :mod:`labkit.topology` (the wiring, figures from :mod:`labkit.hw`), the compute time from the GPU's peak and an
  assumed utilisation. Step time = compute + all-reduce (minus the part hidden behind compute, if any overlap).
- :func:`measure_allreduce` **measures** an all-reduce with NCCL through ``cupy.cuda.nccl`` (``gpu`` mode, two
  GPUs or more); :func:`nccl_status` says whether that can run here and why not.
- :func:`mig_summary` gives the Multi-Instance GPU figures of a DGX A100 from :mod:`labkit.hw`; :func:`sharing_model`
  is a model of GPU utilisation when processes share a GPU with and without MPS.

Bandwidth is in GB/s (10^9 bytes/s) per direction; times in seconds. busbw maths (nccl-tests' factors) live in
:mod:`labkit.bandwidth` and are used, not repeated, here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np

from labkit import hw
from labkit.errors import LabkitError, NoGPUError
from labkit.figstyle import bytes_axis, human_bytes, log_axis
from labkit.gpu import bandwidth as _bw
from labkit.validate import require_number, require_sequence, require_str

GB = 1e9
RS, AG = "reduce-scatter", "all-gather"
PHASES = (RS, AG)

#: Latency per step of an all-reduce, in microseconds, used when none is given. An ASSUMED round figure for
#: NVLink inside one system (launch, synchronisation and protocol per hop), not a datasheet value: measure
#: your own with nccl-tests at small sizes.
DEFAULT_ALPHA_US = 5.0
#: Fraction of the GPU's dense peak a training step is assumed to reach (an assumption, not a measurement).
DEFAULT_UTILISATION = 0.4
#: Items (tokens, frames, ...) each GPU processes per step in :func:`compute_time`'s default workload.
DEFAULT_ITEMS_PER_GPU = 2048
#: The model size of the DGX-2 talk's speech model (FACTS A): 300 M parameters.
SPEECH_MODEL_PARAMS = 300e6
#: The systems the scaling comparison uses by default.
SYSTEMS = ("DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100", "DGX B200", "GB200 NVL72")

#: MIG divides an A100's memory into this many equal slices; the smallest GPU instance (1g) gets one.
#: Source: NVIDIA Multi-Instance GPU user guide (A100 profiles 1g.5gb ... 7g.40gb); labkit.hw's ``mig_profiles``
#: holds every GPU's profiles (``labkit.mig``).
MIG_MEMORY_SLICES = 8
MIG_SOURCE = "NVIDIA Multi-Instance GPU user guide (A100-SXM4-40GB profiles 1g.5gb to 7g.40gb)"


# ---------------------------------------------------------------------------------------------- validation

#: The most GPUs a simulated ring or a chunking takes (the largest NVLink domain announced has 576 GPUs): a count
#: above it is refused at once rather than built element by element.
MAX_RING_GPUS = 65_536


def _count(n: Any, what: str = "the number of GPUs n", minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise LabkitError(f"{what} must be a whole number >= {minimum}, got {n!r}.")
    return int(n)


def _positive(x: Any, what: str, allow_zero: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not math.isfinite(float(x)):
        raise LabkitError(f"{what} must be a finite number, got {x!r}.")
    if float(x) < 0 or (float(x) == 0 and not allow_zero):
        raise LabkitError(f"{what} must be {'non-negative' if allow_zero else 'positive'}, got {x!r}.")
    return float(x)


def _fraction(x: Any, what: str) -> float:
    v = _positive(x, what, allow_zero=True)
    if v > 1:
        raise LabkitError(f"{what} is a fraction from 0 to 1, got {x!r}.")
    return v


# ---------------------------------------------------------------------------------------------- the ring, simulated


def chunk_bounds(size: int, n: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of the ``n`` chunks a buffer of ``size`` elements is cut into (``np.array_split``'s rule:
    the first ``size % n`` chunks are one element longer). Chunks may be empty when ``size < n``."""
    size, n = _count(size, "size", 0), _count(n)
    if n > MAX_RING_GPUS:
        raise LabkitError(
            f"n = {n} chunks is more than labkit cuts a buffer into (at most {MAX_RING_GPUS:,}, one per GPU).",
            fix="Use the number of GPUs in the ring, e.g. n=8.",
        )
    base, extra = divmod(size, n)
    out, start = [], 0
    for c in range(n):
        stop = start + base + (1 if c < extra else 0)
        out.append((start, stop))
        start = stop
    return out


@dataclass(frozen=True)
class Transfer:
    """One message of a ring step: GPU ``src`` sends its copy of chunk ``chunk`` (``nbytes`` bytes) to GPU ``dst``."""

    src: int
    dst: int
    chunk: int
    nbytes: int


@dataclass
class Step:
    """One step of the simulated ring: its phase, its number within the phase, the transfers, and afterwards
    ``contributions[g, c]``: how many GPUs' data GPU ``g``'s copy of chunk ``c`` holds (``n`` = fully reduced)."""

    phase: str
    index: int
    transfers: list[Transfer]
    contributions: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes sent in this step, all GPUs together."""
        return sum(t.nbytes for t in self.transfers)


def ring_schedule(n: int, phase: str, step: int) -> list[tuple[int, int, int]]:
    """The ``(src, dst, chunk)`` messages of one ring step: every GPU ``g`` sends to ``(g + 1) % n``.

    reduce-scatter step ``s``: GPU ``g`` sends chunk ``(g - s) % n`` and the receiver adds it to its own copy;
    all-gather step ``s``: GPU ``g`` sends chunk ``(g + 1 - s) % n`` and the receiver overwrites its copy.
    After the reduce-scatter GPU ``g`` holds the fully reduced chunk ``(g + 1) % n``.
    """
    n = _count(n)
    if phase not in PHASES:
        raise LabkitError(f"phase must be {RS!r} or {AG!r}, got {phase!r}.")
    if not isinstance(step, (int, np.integer)) or not 0 <= step < max(n - 1, 1):
        raise LabkitError(f"step must be 0 to {max(n - 2, 0)} for n = {n}, got {step!r}.")
    if n == 1:
        return []
    shift = 0 if phase == RS else 1
    return [(g, (g + 1) % n, (g + shift - step) % n) for g in range(n)]


def ring_step(chunks: list[list[np.ndarray]], phase: str, step: int) -> None:
    """Perform one step of the ring all-reduce in place. ``chunks[g][c]`` is GPU ``g``'s copy of chunk ``c``.

    This is labkit's reference for exercise 08.ring-step: in a reduce-scatter step the receiver *adds* the chunk
    it receives to its own copy; in an all-gather step it *replaces* its copy with it (see :func:`ring_schedule`).
    """
    chunks = require_sequence(
        chunks,
        "chunks",
        min_len=1,
        what="a list with one list of chunk arrays per GPU",
        fix="chunks[g][c] is GPU g's copy of chunk c: e.g. [split(a, n) for a in arrays].",
    )
    n = len(chunks)
    for g, row in enumerate(chunks):
        if not isinstance(row, (list, tuple)) or len(row) != n or not all(isinstance(c, np.ndarray) for c in row):
            raise LabkitError(
                f"chunks[{g}] must be a list of {n} NumPy arrays (GPU {g}'s copy of each chunk), got {row!r:.60}.",
                fix="chunks[g][c] is GPU g's copy of chunk c: e.g. [split(a, n) for a in arrays].",
            )
    sends = ring_schedule(n, phase, step)
    payload = [chunks[src][c].copy() for src, _, c in sends]  # all GPUs send at once: read before anyone writes
    for (src, dst, c), data in zip(sends, payload):
        if phase == RS:
            chunks[dst][c] += data
        else:
            chunks[dst][c][...] = data


@dataclass
class RingResult:
    """A simulated ring all-reduce: the arrays every GPU ends with, and every step's transfers.

    A simulation in NumPy on the CPU: it shows the algorithm and counts its bytes; it says nothing about speed.
    """

    n: int
    size: int  # elements per GPU
    itemsize: int
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    steps: list[Step]

    @property
    def nbytes(self) -> int:
        """Bytes of one GPU's buffer (nccl-tests' "size")."""
        return self.size * self.itemsize

    def _bytes_per_gpu(self, end: str) -> list[int]:
        """Bytes per GPU over the whole all-reduce, counted at each transfer's ``end`` (``"src"`` or ``"dst"``)."""
        total = [0] * self.n
        for s in self.steps:
            for t in s.transfers:
                total[getattr(t, end)] += t.nbytes
        return total

    def bytes_sent_per_gpu(self) -> list[int]:
        """Bytes each GPU sent over the whole all-reduce."""
        return self._bytes_per_gpu("src")

    def bytes_received_per_gpu(self) -> list[int]:
        """Bytes each GPU received."""
        return self._bytes_per_gpu("dst")

    def expected_bytes_per_gpu(self) -> float:
        """2(n-1)/n x the buffer: what each GPU sends on average (exactly, when n divides the size)."""
        return _bw.busbw_factor("all_reduce", self.n) * self.nbytes

    def total_bytes(self) -> int:
        """Bytes sent by all GPUs together: 2(n-1) x the buffer."""
        return sum(s.nbytes for s in self.steps)

    def correct(self, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
        """True when every GPU ends with the element-wise sum of all inputs."""
        want = np.sum(np.stack(self.inputs), axis=0) if self.inputs else None
        return all(np.allclose(o, want, rtol=rtol, atol=atol) for o in self.outputs)

    def describe(self) -> str:
        """A few lines: the steps, bytes per GPU against 2(n-1)/n, and whether the result is right."""
        sent = self.bytes_sent_per_gpu()
        mean = sum(sent) / self.n if self.n else 0.0
        lines = [
            f"SIMULATED ring all-reduce (NumPy, not a GPU): n = {self.n} GPUs, {self.size} elements = {self.nbytes} bytes each",
            f"{len(self.steps)} steps: {sum(1 for s in self.steps if s.phase == RS)} reduce-scatter + "
            f"{sum(1 for s in self.steps if s.phase == AG)} all-gather; every GPU sends one chunk per step",
            f"bytes sent per GPU: {sent} (mean {mean:g}); 2(n-1)/n x {self.nbytes} = {self.expected_bytes_per_gpu():g}",
            f"every GPU holds the sum of all inputs: {self.correct()}",
        ]
        return "\n".join(lines)


StepFn = Callable[[list[list[np.ndarray]], str, int], Any]


def split(array: np.ndarray, n: int) -> list[np.ndarray]:
    """Views of ``array``'s ``n`` chunks (see :func:`chunk_bounds`): writing a chunk writes the array."""
    if not isinstance(getattr(array, "shape", None), tuple) or not array.shape or isinstance(array, np.generic):
        raise LabkitError(
            f"split takes an array of at least one dimension (a NumPy array), got {array!r:.60}.",
            fix="e.g. split(np.arange(10.0), 4).",
        )
    return [array[a:b] for a, b in chunk_bounds(array.shape[0], n)]


def ring_allreduce(arrays: Sequence[Any], step_fn: StepFn | None = None) -> RingResult:
    """Simulate a ring all-reduce of ``arrays`` (one 1-D array per simulated GPU, all the same length and dtype).

    Each array is cut into ``n`` chunks; ``n - 1`` reduce-scatter steps and ``n - 1`` all-gather steps follow
    (:func:`ring_schedule`). ``step_fn(chunks, phase, step)`` performs a step in place (default :func:`ring_step`;
    pass your own to run it). The inputs are not modified. Returns a :class:`RingResult`.
    """
    if isinstance(arrays, np.ndarray) and arrays.ndim == 2:
        arrays = list(arrays)
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise LabkitError(
            "ring_allreduce needs a list of arrays, one per simulated GPU.",
            fix="Pass e.g. [np.random.rand(1000) for _ in range(4)].",
        )
    inputs = [np.asarray(a) for a in arrays]
    first = inputs[0]
    for g, a in enumerate(inputs):
        if a.ndim != 1:
            raise LabkitError(
                f"GPU {g}'s array has shape {a.shape}; the simulation takes 1-D arrays.", fix="Flatten it: a.ravel()."
            )
        if a.shape != first.shape or a.dtype != first.dtype:
            raise LabkitError(
                f"GPU {g}'s array is {a.dtype}{list(a.shape)}, GPU 0's is {first.dtype}{list(first.shape)}.",
                fix="Every GPU all-reduces a buffer of the same length and dtype.",
            )
    n, size = len(inputs), first.shape[0]
    step = step_fn or ring_step
    bufs = [a.copy() for a in inputs]
    chunks = [split(b, n) for b in bufs]
    sizes = [b - a for a, b in chunk_bounds(size, n)]
    # contributions[g, c]: chunk c of GPU g starts with GPU g's data only
    contrib = np.ones((n, n), dtype=int)
    steps: list[Step] = []
    for phase in PHASES:
        for s in range(n - 1):
            step(chunks, phase, s)
            transfers = [Transfer(src, dst, c, sizes[c] * first.itemsize) for src, dst, c in ring_schedule(n, phase, s)]
            new = contrib.copy()
            for t in transfers:
                new[t.dst, t.chunk] = (
                    contrib[t.dst, t.chunk] + contrib[t.src, t.chunk] if phase == RS else contrib[t.src, t.chunk]
                )
            contrib = new
            steps.append(Step(phase, s, transfers, contrib.copy()))
    return RingResult(n, size, first.itemsize, inputs, bufs, steps)


# ---------------------------------------------------------------------------------------------- alpha-beta models


@dataclass(frozen=True)
class CostModel:
    """A modelled collective time: ``seconds = latency_s + bandwidth_s``, with the assumptions behind it."""

    algorithm: str
    n: int
    nbytes: float
    link_gbps: float
    alpha_us: float
    steps: int
    latency_s: float
    bandwidth_s: float
    bytes_per_gpu: float  # bytes the busiest GPU sends
    assumptions: tuple[str, ...]

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s

    @property
    def algbw(self) -> float:
        """What nccl-tests would report as algbw for this time (GB/s); 0 for a zero time."""
        return self.nbytes / self.seconds / GB if self.seconds > 0 else 0.0

    @property
    def busbw(self) -> float:
        """algbw x 2(n-1)/n, nccl-tests' all-reduce bus bandwidth (GB/s)."""
        return self.algbw * _bw.busbw_factor("all_reduce", self.n)

    def __str__(self) -> str:
        return (
            f"{self.algorithm} all-reduce of {self.nbytes / GB:.4g} GB over {self.n} GPUs: {self.seconds * 1e3:.4g} ms "
            f"= {self.latency_s * 1e3:.4g} ms latency ({self.steps} steps x {self.alpha_us:g} us) + "
            f"{self.bandwidth_s * 1e3:.4g} ms bandwidth at {self.link_gbps:g} GB/s per direction [model]"
        )


def _ab_args(nbytes: Any, n: Any, link_gbps: Any, alpha_us: Any) -> tuple[float, int, float, float]:
    return (
        _positive(nbytes, "nbytes", allow_zero=True),
        _count(n),
        _positive(link_gbps, "link_gbps (GB/s per direction)"),
        _positive(alpha_us, "alpha_us (latency per step, microseconds)", allow_zero=True),
    )


def ring_cost(nbytes: float, n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US) -> CostModel:
    """Alpha-beta model of a ring all-reduce: ``2(n-1) x alpha + 2(n-1)/n x nbytes / B``.

    ``link_gbps`` (B) is what each GPU can send to its ring neighbour per direction; ``alpha_us`` the latency of one
    step. Every one of the 2(n-1) steps pays the latency; the bytes each GPU sends are 2(n-1)/n x the buffer.
    """
    S, n, B, a = _ab_args(nbytes, n, link_gbps, alpha_us)
    steps = 2 * (n - 1)
    factor = _bw.busbw_factor("all_reduce", n)
    assumptions = (
        "MODEL (alpha-beta), not a measurement",
        f"ring of {n} GPUs, {steps} steps; each step costs alpha = {a:g} us (assumed) plus its chunk's bytes / B",
        f"each GPU sends 2(n-1)/n = {factor:.4g} x the buffer at B = {B:g} GB/s per direction; full-duplex links",
        "no congestion, no overlap with computation, no pipelining inside a step",
    )
    return CostModel("ring", n, S, B, a, steps, steps * a * 1e-6, factor * S / (B * GB), factor * S, assumptions)


def tree_depth(n: int) -> int:
    """Levels below the root of a balanced binary tree of ``n`` GPUs: floor(log2 n)."""
    return _count(n).bit_length() - 1


def tree_cost(nbytes: float, n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US, pipelined: bool = True) -> CostModel:
    """Alpha-beta model of a binary-tree all-reduce (reduce up the tree, then broadcast down).

    ``pipelined=True`` models NCCL's double binary tree: the buffer streams through the tree in small pieces, two
    complementary trees each carry half of it, so each GPU sends about the buffer once going up and once going
    down: ``2 x depth x alpha + 2 x nbytes / B``. ``pipelined=False`` is the textbook tree that forwards whole
    buffers level by level: each of the ``2 x depth`` levels costs ``alpha + children x nbytes / B`` (a parent's
    two children share its bandwidth).
    """
    S, n, B, a = _ab_args(nbytes, n, link_gbps, alpha_us)
    d = tree_depth(n)
    if n == 1:
        return CostModel("tree", 1, S, B, a, 0, 0.0, 0.0, 0.0, ("MODEL: one GPU, nothing to reduce",))
    kids = min(2, n - 1)
    if pipelined:
        steps, bw_s, per_gpu = 2 * d, 2 * S / (B * GB), 2 * S
        how = (
            "pipelined double binary tree (NCCL's tree): two trees each carry half the buffer; each GPU sends about "
            f"1 x the buffer up and 1 x down, 2 x {S / GB:.4g} GB at B = {B:g} GB/s per direction"
        )
    else:
        steps, bw_s, per_gpu = 2 * d, 2 * d * kids * S / (B * GB), (1 + kids) * S
        how = (
            f"textbook binary tree, whole buffers per level: {d} levels up and {d} down, each {kids} x the buffer "
            f"through a parent's link at B = {B:g} GB/s per direction"
        )
    assumptions = (
        "MODEL (alpha-beta), not a measurement",
        f"binary tree of {n} GPUs, depth {d}: {steps} latency steps of alpha = {a:g} us (assumed)",
        how,
        "no congestion, no overlap with computation",
    )
    return CostModel(
        "tree" if pipelined else "tree (not pipelined)", n, S, B, a, steps, steps * a * 1e-6, bw_s, per_gpu, assumptions
    )


def chain_cost(nbytes: float, n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US) -> CostModel:
    """Alpha-beta model of NCCL's "tree" inside one node, which is a **chain** through the GPUs (the tree proper
    joins nodes): reduce along the chain, broadcast back, pipelined in small pieces. Each GPU sends about the
    buffer once up and once down, ``2 x nbytes / B``, but the latency grows with the chain: ``2(n-1) x alpha``."""
    S, n, B, a = _ab_args(nbytes, n, link_gbps, alpha_us)
    if n == 1:
        return CostModel("chain", 1, S, B, a, 0, 0.0, 0.0, 0.0, ("MODEL: one GPU, nothing to reduce",))
    steps = 2 * (n - 1)
    assumptions = (
        "MODEL (alpha-beta), not a measurement",
        f"NCCL's tree inside one node is a chain of {n} GPUs: {steps} latency steps of alpha = {a:g} us (assumed)",
        f"pipelined: each GPU sends about 1 x the buffer up the chain and 1 x down, 2 x {S / GB:.4g} GB at B = {B:g} GB/s",
        "no congestion, no overlap with computation",
    )
    return CostModel("chain", n, S, B, a, steps, steps * a * 1e-6, 2 * S / (B * GB), 2 * S, assumptions)


def nvls_cost(nbytes: float, n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US) -> CostModel:
    """Alpha-beta model of an NVLS all-reduce (NVLink SHARP, NVSwitch 3 and later): the **switch** adds the data.

    Each GPU reduces its 1/n share of the buffer with one multicast load-and-reduce through the switch (the switch
    reads that share from all n GPUs and returns the sum), then stores the summed share to every GPU with one
    multicast store. Each GPU's link therefore carries about the buffer once in each direction, ``nbytes / B``,
    instead of the ring's 2(n-1)/n x the buffer; two latency steps. nccl-tests still multiplies algbw by the
    ring's 2(n-1)/n, so the reported busbw is up to 2(n-1)/n x B: above the wire rate of the link.
    """
    S, n, B, a = _ab_args(nbytes, n, link_gbps, alpha_us)
    if n == 1:
        return CostModel("NVLS", 1, S, B, a, 0, 0.0, 0.0, 0.0, ("MODEL: one GPU, nothing to reduce",))
    assumptions = (
        "MODEL (alpha-beta), not a measurement",
        "NVLS: the NVSwitch reduces (multimem load-reduce) and multicasts (multimem store); 2 latency steps of "
        f"alpha = {a:g} us (assumed)",
        f"each GPU sends and receives about 1 x the buffer ({S / GB:.4g} GB) at B = {B:g} GB/s per direction",
        "the switch's reduction and the SMs NCCL gives NVLS are not limits here; measured NVLS stays well below "
        "this bound (see labkit.hw's allreduce_busbw_nvls)",
    )
    return CostModel("NVLS", n, S, B, a, 2, 2 * a * 1e-6, S / (B * GB), S, assumptions)


#: NCCL's all-reduce algorithms (``NCCL_ALGO``), one line each. Source: NCCL documentation, environment
#: variables (NCCL_ALGO) and NVIDIA/nccl src/include/nccl_common.h (the algorithm list).
NCCL_ALGORITHMS: dict[str, str] = {
    "Ring": "reduce-scatter then all-gather round a ring; 2(n-1)/n x the buffer per GPU; best bandwidth without switch help",
    "Tree": "pipelined double binary tree between nodes; inside one node each tree is a chain through the GPUs",
    "NVLS": "NVLink SHARP (NVSwitch 3+): the switch reduces and multicasts; about 1 x the buffer per GPU",
    "NVLSTree": "NVLS inside each node, a tree between nodes",
    "CollNetDirect": "in-network reduction by the InfiniBand switches (SHARP), every GPU talking to the network directly",
    "CollNetChain": "in-network reduction by the InfiniBand switches, GPUs of a node chained to one network port",
    "PAT": "parallel aggregated trees: all-gather and reduce-scatter at one GPU per node, latency log(n) at scale",
}


def has_nvls(system: str) -> bool:
    """True when ``system``'s switches can reduce (NVLink SHARP): NVSwitch 3 (DGX H100/H200) and later (NVSwitch 4:
    DGX B200/B300, GB200/GB300 NVL72). Read from the system's record in :mod:`labkit.hw`, so a system with data but
    no wiring model answers too. Source: NVIDIA H100 Tensor Core GPU architecture whitepaper (NVLink SHARP arrives
    with the third-generation NVSwitch); the NVSwitch 4 generation keeps it (NVIDIA NVLink product page)."""
    try:
        s = hw.system(system)
    except LabkitError:  # not a record: a cluster of systems ("2x DGX H100"), where no switch joins them all
        return False
    if not s.nvswitch:
        return False
    try:
        return int(str(s.nvswitch).split()[-1]) >= 3
    except ValueError:
        return False


@dataclass(frozen=True)
class Choice:
    """Which all-reduce algorithm a model says is fastest for one size, with every candidate's modelled time."""

    system: str
    nbytes: float
    n: int
    models: dict[str, CostModel]

    @property
    def algorithm(self) -> str:
        """The fastest candidate's name (``"Ring"``, ``"Tree"`` or ``"NVLS"``)."""
        return min(self.models, key=lambda k: self.models[k].seconds)

    def __str__(self) -> str:
        times = ", ".join(f"{k} {m.seconds * 1e6:.4g} us (busbw {m.busbw:.0f} GB/s)" for k, m in self.models.items())
        return f"{self.system}, {self.n} GPUs, {human_bytes(self.nbytes)}: {self.algorithm} fastest [model]; {times}"


def nccl_choice(
    system: str, nbytes: float, n: int | None = None, alpha_us: float = DEFAULT_ALPHA_US, efficiency: float = 1.0
) -> Choice:
    """Model which algorithm NCCL picks for an all-reduce of ``nbytes`` over ``n`` GPUs of one ``system``.

    NCCL's tuner does the same in spirit: it models each algorithm's time (latency + size / bandwidth, with its own
    figures per algorithm and protocol) and takes the fastest, unless ``NCCL_ALGO`` forces one. Candidates here:
    Ring, Tree (a chain inside one node, :func:`chain_cost`) and, on NVSwitch 3 or later, NVLS. A MODEL: NCCL's own
    latencies and efficiencies differ, so the crossovers differ too.
    """
    from labkit.hw import topology

    t = topology.load(system)
    n = len(t.gpus()) if n is None else _count(n)
    if n < 2:
        raise LabkitError("a choice of algorithm needs two GPUs or more.", fix="Use n >= 2.")
    eff = _positive(efficiency, "efficiency")
    B = ring_bandwidth(system, n) * min(eff, 1.0)
    models = {"Ring": ring_cost(nbytes, n, B, alpha_us), "Tree": chain_cost(nbytes, n, B, alpha_us)}
    if has_nvls(t.name):
        models["NVLS"] = nvls_cost(nbytes, n, B, alpha_us)
    return Choice(t.name, float(nbytes), n, models)


def crossover_bytes(n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US) -> float:
    """Buffer size (bytes) below which the pipelined tree beats the ring in these models:
    ``n x B x (n - 1 - depth) x alpha``. 0 for two GPUs, where both take 2 steps and the ring sends less."""
    _, n, B, a = _ab_args(0, n, link_gbps, alpha_us)
    return max(0.0, n * B * GB * (n - 1 - tree_depth(n)) * a * 1e-6)


# ---------------------------------------------------------------------------------------------- systems


def _system_name(system: str) -> str:
    from labkit.hw import topology

    return topology.load(system).name


@lru_cache(maxsize=256)
def _ring_gbps(system: str, n: int) -> float:
    from labkit.hw import topology

    t = topology.load(system)
    seconds, _ = t.ring_allreduce_time(GB, n)
    return round(_bw.busbw_factor("all_reduce", n) * GB / seconds / GB, 6)


def ring_bandwidth(system: str, n: int | None = None) -> float:
    """GB/s per direction each GPU of a ring over the first ``n`` GPUs of ``system`` can send: the smallest cut between
    any two of them in :mod:`labkit.topology`'s wiring model (an upper bound; a model, from labkit.hw figures)."""
    from labkit.hw import topology

    t = topology.load(system)
    total = len(t.gpus())
    n = total if n is None else _count(n)
    if n > total:
        raise LabkitError(
            f"{t.name} has {total} GPUs, not {n}.", fix=f"Use n from 2 to {total}, or a cluster such as '2x {t.name}'."
        )
    if n < 2:
        raise LabkitError("a ring needs two GPUs or more.", fix="Use n >= 2.")
    return _ring_gbps(t.name, n)


def allreduce_time(
    system: str,
    nbytes: float,
    n: int | None = None,
    algorithm: str = "ring",
    alpha_us: float = DEFAULT_ALPHA_US,
    efficiency: float = 1.0,
) -> CostModel:
    """Modelled all-reduce of ``nbytes`` over the first ``n`` GPUs of ``system`` (default: all of them).

    The bandwidth is :func:`ring_bandwidth` (from the wiring) times ``efficiency`` (e.g. NCCL's 20 of 25 GB/s per
    link: 0.8); the time is :func:`ring_cost` or :func:`tree_cost` with it.
    """
    from labkit.hw import topology

    t = topology.load(system)
    n = len(t.gpus()) if n is None else _count(n)
    eff = _positive(efficiency, "efficiency")
    if eff > 1:
        raise LabkitError(f"efficiency is a fraction of the datasheet rate, from 0 to 1; got {efficiency!r}.")
    if n == 1:
        return ring_cost(nbytes, 1, 1.0, alpha_us)
    B = ring_bandwidth(system, n) * eff
    if algorithm == "ring":
        model = ring_cost(nbytes, n, B, alpha_us)
    elif algorithm == "tree":
        model = tree_cost(nbytes, n, B, alpha_us)
    elif algorithm == "chain":
        model = chain_cost(nbytes, n, B, alpha_us)
    elif algorithm == "nvls":
        if not has_nvls(t.name):
            raise LabkitError(
                f"{t.name} has no NVLS: NVLink SHARP needs NVSwitch 3 or later (DGX H100/H200, DGX B200/B300, NVL72).",
                fix="Use algorithm='ring' here, or a system with NVSwitch 3 or later.",
            )
        model = nvls_cost(nbytes, n, B, alpha_us)
    else:
        raise LabkitError(f"algorithm must be 'ring', 'tree', 'chain' or 'nvls', got {algorithm!r}.")
    extra = (
        f"system {t.name}: B = {B:g} GB/s per direction per GPU for the first {n} GPUs, from labkit.topology's wiring "
        f"model{f' x {eff:g} efficiency' if eff < 1 else ' at datasheet link rates'}",
    )
    return CostModel(
        model.algorithm,
        model.n,
        model.nbytes,
        model.link_gbps,
        model.alpha_us,
        model.steps,
        model.latency_s,
        model.bandwidth_s,
        model.bytes_per_gpu,
        model.assumptions + extra,
    )


def compute_time(
    params: float,
    gpu: str,
    items_per_gpu: int = DEFAULT_ITEMS_PER_GPU,
    precision: str = "fp16",
    utilisation: float = DEFAULT_UTILISATION,
) -> tuple[float, list[str]]:
    """Modelled compute time of one training step on one GPU: ``6 x params x items / (peak x utilisation)``.

    6 FLOPs per parameter per item: 2 for the forward pass, 4 for the backward pass (the usual rule for dense
    layers). ``peak`` is the GPU's dense Tensor Core peak at ``precision`` from :mod:`labkit.hw`. Returns
    ``(seconds, assumptions)``.
    """
    P = _positive(params, "params")
    items = _count(items_per_gpu, "items_per_gpu")
    u = _fraction(utilisation, "utilisation")
    if u == 0:
        raise LabkitError("utilisation must be above 0.")
    g = hw.gpu(gpu)
    peak = g.peak(precision)
    flops = 6 * P * items
    seconds = flops / (peak.to("TFLOP/s").value * 1e12 * u)
    return seconds, [
        f"compute per GPU per step: 6 x {P:.3g} parameters x {items} items = {flops:.3g} FLOP (model)",
        f"{g.name} at {u:.0%} (assumed) of its {precision.upper()} peak {peak}",
    ]


@dataclass(frozen=True)
class ScalingPoint:
    """One GPU count of a data-parallel scaling model (times in seconds)."""

    n: int
    compute_s: float
    allreduce_s: float
    hidden_s: float
    step_s: float
    speedup: float
    efficiency: float


@dataclass
class Scaling:
    """A data-parallel (weak-scaling) model of one system: per-GPU batch fixed, global batch grows with n.

    speedup(n) = n x compute / step(n); efficiency = speedup / n; step = compute + all-reduce - hidden.
    """

    system: str
    params: float
    grad_bytes: float
    overlap: float
    points: list[ScalingPoint]
    assumptions: list[str] = field(default_factory=list)

    def point(self, n: int) -> ScalingPoint:
        for p in self.points:
            if p.n == n:
                return p
        raise LabkitError(f"the {self.system} model has no point for {n} GPUs.", fix=f"It has n = {[p.n for p in self.points]}.")

    def table(self) -> str:
        """The model as text, one row per GPU count."""
        rows = [
            f"{self.system}: MODEL of data-parallel training, {self.params / 1e6:g} M parameters, "
            f"{self.grad_bytes / GB:.3g} GB of gradients, overlap {self.overlap:.0%}",
            f"{'GPUs':>5} {'compute ms':>11} {'all-reduce ms':>14} {'step ms':>9} {'speedup':>8} {'efficiency':>11}",
        ]
        for p in self.points:
            rows.append(
                f"{p.n:5d} {p.compute_s * 1e3:11.2f} {p.allreduce_s * 1e3:14.2f} {p.step_s * 1e3:9.2f} "
                f"{p.speedup:8.2f} {p.efficiency:11.1%}"
            )
        return "\n".join(rows)


def step_time(compute_s: float, allreduce_s: float, overlap: float = 0.0) -> tuple[float, float]:
    """``(step seconds, hidden seconds)``: the all-reduce overlaps at most ``overlap`` x the compute time
    (gradients of later layers are reduced while earlier layers still compute their backward pass)."""
    c = _positive(compute_s, "compute_s")
    a = _positive(allreduce_s, "allreduce_s", allow_zero=True)
    f = _fraction(overlap, "overlap")
    hidden = min(a, f * c)
    return c + a - hidden, hidden


def scaling(
    system: str,
    params: float = SPEECH_MODEL_PARAMS,
    bytes_per_grad: int = 4,
    *,
    compute_s: float | None = None,
    items_per_gpu: int = DEFAULT_ITEMS_PER_GPU,
    precision: str = "fp16",
    utilisation: float = DEFAULT_UTILISATION,
    overlap: float = 0.0,
    algorithm: str = "ring",
    alpha_us: float = DEFAULT_ALPHA_US,
    efficiency: float = 1.0,
    gpu_counts: Sequence[int] | None = None,
) -> Scaling:
    """Model data-parallel scaling of a ``params``-parameter model on ``system`` (a DGX name, or ``"2x DGX-1 (V100)"``).

    Every GPU computes its own batch (``compute_s``, or :func:`compute_time` from the GPU's peak), then the gradients
    (``params x bytes_per_grad`` bytes, FP32 by default) are all-reduced (:func:`allreduce_time` over the first n
    GPUs). ``overlap`` is the fraction of the compute time that can hide communication (0: none).
    """
    from labkit.hw import topology

    t = topology.load(system)
    total = len(t.gpus())
    P = _positive(params, "params")
    bpg = _count(bytes_per_grad, "bytes_per_grad")
    grad = P * bpg
    f = _fraction(overlap, "overlap")
    if compute_s is None:
        if t.gpu_model is None:
            raise LabkitError(f"labkit does not know the GPU of {t.name}.", fix="Pass compute_s=... (seconds per step).")
        compute, notes = compute_time(P, t.gpu_model, items_per_gpu, precision, utilisation)
    else:
        compute, notes = _positive(compute_s, "compute_s"), [f"compute per GPU per step: {compute_s * 1e3:g} ms (given)"]
    counts = (
        require_sequence(gpu_counts, "gpu_counts", what="a list of GPU counts such as [1, 2, 4, 8]")
        if gpu_counts is not None
        else list(range(1, total + 1))
        if total <= 16
        else sorted({1, 2, 4, *range(8, total + 1, 8), total})  # an NVL72: every 8th count, not all 72
    )
    points = []
    for n in counts:
        n = _count(n)
        if n > total:
            raise LabkitError(f"{t.name} has {total} GPUs; gpu_counts asks for {n}.")
        ar = allreduce_time(system, grad, n, algorithm, alpha_us, efficiency).seconds if n > 1 else 0.0
        step, hidden = step_time(compute, ar, f)
        speedup = n * compute / step
        points.append(ScalingPoint(n, compute, ar, hidden, step, speedup, speedup / n))
    assumptions = [
        "MODEL, not a measurement: weak scaling (each GPU keeps its batch; the global batch grows with n)",
        *notes,
        f"gradients: {P:.3g} x {bpg} bytes = {grad / GB:.3g} GB all-reduced every step ({algorithm}, "
        f"alpha {alpha_us:g} us assumed, bandwidth from labkit.topology's wiring model"
        f"{f' x {efficiency:g}' if efficiency < 1 else ''})",
        f"step = compute + all-reduce - hidden, hidden = min(all-reduce, {f:g} x compute)",
        "the first n GPUs of the system take part (on a DGX-1 which GPUs matters: pairs differ)",
    ]
    return Scaling(t.name, P, grad, f, points, assumptions)


# ---------------------------------------------------------------------------------------------- MIG


def mig_summary(system: str = "DGX A100") -> dict[str, Any]:
    """Multi-Instance GPU figures of ``system`` from :mod:`labkit.hw`: instances per system and per GPU, and the
    memory of the smallest instance (the GPU's memory in :data:`MIG_MEMORY_SLICES` slices)."""
    s = hw.system(system)
    if s.mig_instances is None:
        raise LabkitError(f"labkit has no MIG figure for {s.name}.", fix="MIG arrived with the A100: use 'DGX A100'.")
    gpus = int(s.gpu_count.value)
    per_gpu = s.mig_instances.value / gpus
    mem = s.gpu_model.memory_size
    return {
        "system": s.name,
        "gpu": s.gpu_model.name,
        "instances_per_system": s.mig_instances,
        "gpus": gpus,
        "instances_per_gpu": per_gpu,
        "gpu_memory": mem,
        "memory_slices": MIG_MEMORY_SLICES,
        "smallest_instance_memory_gb": mem.to("GB").value / MIG_MEMORY_SLICES,
        "slices_source": MIG_SOURCE,
    }


def sharing_model(busy_fractions: Sequence[float]) -> dict[str, Any]:
    """A MODEL of several processes sharing one GPU, each able to keep ``busy_fractions[i]`` of its SMs busy alone.

    Without MPS the driver time-slices the processes' contexts: one runs at a time, so the GPU is about as busy as the
    average process. With MPS their kernels run side by side through one server, up to the whole GPU:
    ``min(1, sum)``. Ignores contention for memory bandwidth and caches, and context-switch costs.
    """
    fr = [
        _fraction(f, "each busy fraction")
        for f in require_sequence(busy_fractions, "busy_fractions", what="a list of fractions from 0 to 1, one per process")
    ]
    if not fr:
        raise LabkitError("give at least one process's busy fraction.")
    sliced = sum(fr) / len(fr)
    mps = min(1.0, sum(fr))
    return {
        "processes": len(fr),
        "time_sliced": sliced,
        "mps": mps,
        "gain": mps / sliced if sliced else float("inf"),
        "assumptions": [
            "MODEL, not a measurement",
            "time-slicing: one process's context at a time, so utilisation = the mean of the fractions",
            "MPS: kernels of all processes run together, utilisation = min(1, sum of the fractions)",
            "no contention for memory bandwidth or caches, no context-switch cost",
        ],
    }


# ---------------------------------------------------------------------------------------------- figures


def scaling_figure(models: Sequence[Scaling] | Scaling, metric: str = "efficiency", title: str | None = None) -> Any:
    """Plotly figure of modelled scaling curves: ``metric`` = ``"efficiency"`` (with 100% as the ideal) or
    ``"speedup"`` (with the ideal line y = n), one line per system."""
    import plotly.graph_objects as go

    if isinstance(models, Scaling):
        models = [models]
    if metric not in ("efficiency", "speedup"):
        raise LabkitError(f"metric must be 'efficiency' or 'speedup', got {metric!r}.")
    fig = go.Figure()
    top = max((p.n for m in models for p in m.points), default=1)
    if metric == "speedup":
        fig.add_trace(go.Scatter(x=[1, top], y=[1, top], mode="lines", name="ideal", line={"dash": "dot", "color": "grey"}))
    else:
        fig.add_trace(go.Scatter(x=[1, top], y=[100, 100], mode="lines", name="ideal", line={"dash": "dot", "color": "grey"}))
    for m in models:
        ys = [p.speedup if metric == "speedup" else 100 * p.efficiency for p in m.points]
        fig.add_trace(
            go.Scatter(
                x=[p.n for p in m.points],
                y=ys,
                mode="lines+markers",
                name=m.system,
                hovertext=[
                    f"{m.system}, {p.n} GPUs: step {p.step_s * 1e3:.1f} ms = compute {p.compute_s * 1e3:.1f} + all-reduce "
                    f"{p.allreduce_s * 1e3:.1f} - hidden {p.hidden_s * 1e3:.1f}"
                    for p in m.points
                ],
                hoverinfo="text+y",
            )
        )
    fig.update_layout(
        title=title or f"Data-parallel scaling, {metric} (MODEL from labkit.hw and labkit.topology)",
        xaxis_title="GPUs",
        yaxis_title="efficiency (%)" if metric == "efficiency" else "speedup over one GPU",
        template="plotly_white",
        height=420,
    )
    return fig


def ring_figure(result: RingResult) -> Any:
    """Plotly heatmap of a simulated ring all-reduce with a slider over its steps: cell (GPU g, chunk c) shows how
    many GPUs' data g's copy of chunk c holds, and "->" marks the chunk each GPU sends in that step."""
    import plotly.graph_objects as go

    if not isinstance(result, RingResult):
        raise LabkitError(f"result must be a RingResult (what ring_allreduce() returns), got {result!r:.60}.")
    n = result.n
    states = [("start", np.ones((n, n), dtype=int), [])] + [
        (f"{s.phase} step {s.index + 1}", s.contributions, s.transfers) for s in result.steps
    ]

    def frame_data(contrib: np.ndarray, transfers: list[Transfer]) -> Any:
        text = [[str(contrib[g, c]) for c in range(n)] for g in range(n)]
        for t in transfers:
            text[t.src][t.chunk] += f" -> GPU{t.dst}"
        return go.Heatmap(
            z=contrib,
            text=text,
            texttemplate="%{text}",
            zmin=1,
            zmax=n,
            colorscale="Greens",
            x=[f"chunk {c}" for c in range(n)],
            y=[f"GPU{g}" for g in range(n)],
            colorbar={"title": "GPUs summed"},
            hovertemplate="%{y}, %{x}: %{z} GPUs' data<extra></extra>",
        )

    fig = go.Figure(
        data=[frame_data(*states[0][1:])],
        frames=[go.Frame(data=[frame_data(c, t)], name=str(i)) for i, (_, c, t) in enumerate(states)],
    )
    fig.update_layout(
        title=f"Ring all-reduce over {n} GPUs, SIMULATED in NumPy: GPUs' data summed in each chunk",
        yaxis={"autorange": "reversed"},
        template="plotly_white",
        height=140 + 40 * n,
        sliders=[
            {
                "active": 0,
                "currentvalue": {"prefix": "after: "},
                "steps": [
                    {
                        "label": label,
                        "method": "animate",
                        "args": [[str(i)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True}}],
                    }
                    for i, (label, _, _) in enumerate(states)
                ],
            }
        ],
    )
    return fig


def cost_figure(
    n: int, link_gbps: float, alpha_us: float = DEFAULT_ALPHA_US, sizes: Sequence[float] | None = None, title: str | None = None
) -> Any:
    """Plotly log-log figure of modelled all-reduce time against buffer size for the ring and the pipelined tree."""
    import plotly.graph_objects as go

    nbytes_ok = lambda s, name: require_number(s, name, min=0, min_open=True)  # noqa: E731
    sizes = (
        require_sequence(sizes, "sizes", min_len=1, what="a list of buffer sizes in bytes", item=nbytes_ok)
        if sizes is not None
        else [2.0**k for k in range(10, 33)]
    )
    title = None if title is None else require_str(title, "title", empty=True)
    _ab_args(1, n, link_gbps, alpha_us)
    fig = go.Figure()
    times: list[float] = []
    for name, fn in (("ring", ring_cost), ("tree (pipelined)", tree_cost)):
        ts = [fn(s, n, link_gbps, alpha_us).seconds * 1e6 for s in sizes]
        times += ts
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=ts,
                mode="lines",
                name=name,
                customdata=[human_bytes(s) for s in sizes],
                hovertemplate="%{customdata}: %{y:.3g} us<extra>" + name + "</extra>",
            )
        )
    x = crossover_bytes(n, link_gbps, alpha_us)
    if x > 0:
        fig.add_vline(x=x, line_dash="dot", annotation_text=f"crossover {x / 2**20:.3g} MiB")
    fig.update_layout(
        title=title or f"All-reduce time, {n} GPUs at {link_gbps:g} GB/s, alpha {alpha_us:g} us (MODEL)",
        xaxis=bytes_axis(sizes, title="buffer size"),
        yaxis=log_axis(times, title="time (us)"),
        template="plotly_white",
        height=400,
    )
    return fig


# ---------------------------------------------------------------------------------------------- measured (gpu mode)


def nccl_status() -> tuple[bool, str]:
    """``(can_measure, reason)``: True when labkit is in gpu mode with two GPUs or more and ``cupy.cuda.nccl`` imports."""
    from labkit.mode import env

    e = env()
    if not e.is_gpu:
        return False, f"labkit is in sim mode ({e.reason}): there is no GPU to run NCCL on"
    if e.gpu_count < 2:
        return False, f"this machine has {e.gpu_count} GPU ({e.device_name}); an all-reduce needs two or more"
    try:
        from cupy.cuda import nccl  # noqa: F401
    except Exception as exc:  # ImportError, or CuPy built without NCCL
        return (
            False,
            f"cupy.cuda.nccl is not importable ({type(exc).__name__}: {exc}); install NCCL for CuPy (pip install nvidia-nccl-cu12)",
        )
    if not getattr(nccl, "available", True):
        return False, "CuPy was built without NCCL support (cupy.cuda.nccl.available is False)"
    return True, f"NCCL through cupy.cuda.nccl on {e.gpu_count} GPUs"


def measure_allreduce(
    nbytes: int = 256 * 2**20, devices: Sequence[int] | None = None, *, iters: int = 20, warmup: int = 5
) -> dict[str, Any]:
    """Measure an all-reduce (sum, float32) of ``nbytes`` across ``devices`` (default: every GPU) with NCCL.

    One process drives all GPUs (``ncclCommInitAll``; the calls of one all-reduce inside ``groupStart``/``groupEnd``),
    as nccl-tests does with ``-g``. Each iteration is timed with CUDA events on every GPU's stream; the slowest GPU
    counts, and the median over ``iters`` is reported with algbw and busbw (nccl-tests' definitions). The result is
    checked: every GPU must hold the sum. Needs gpu mode with >= 2 GPUs (see :func:`nccl_status`).
    """
    ok, reason = nccl_status()
    if not ok:
        raise NoGPUError(
            f"measure_allreduce cannot run: {reason}.",
            fix="Use the models (allreduce_time, scaling) here; measure on a machine with 2+ NVIDIA GPUs.",
        )
    import cupy as cp
    from cupy.cuda import nccl

    count = _count(int(nbytes) // 4, "nbytes // 4 (float32 elements)")
    devs = list(range(cp.cuda.runtime.getDeviceCount())) if devices is None else [int(d) for d in devices]
    if len(devs) < 2 or len(set(devs)) != len(devs):
        raise LabkitError(f"devices must name two or more different GPUs, got {devs}.")
    iters, warmup = _count(iters, "iters"), _count(warmup, "warmup", 0)
    comms = nccl.NcclCommunicator.initAll(devs)
    try:
        sends, recvs, streams = [], [], []
        for rank, d in enumerate(devs):
            with cp.cuda.Device(d):
                sends.append(cp.full(count, float(rank + 1), dtype=cp.float32))
                recvs.append(cp.zeros(count, dtype=cp.float32))
                streams.append(cp.cuda.Stream(non_blocking=True))
        # cp.full / cp.zeros ran on each GPU's default stream; the NCCL streams are non-blocking and would not wait for them.
        for d in devs:
            cp.cuda.Device(d).synchronize()

        def once() -> None:  # out of place, as nccl-tests' default: recv = sum of every rank's send
            nccl.groupStart()
            for comm, d, a, b, s in zip(comms, devs, sends, recvs, streams):
                with cp.cuda.Device(d):
                    comm.allReduce(a.data.ptr, b.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s.ptr)
            nccl.groupEnd()

        for _ in range(warmup):
            once()
        times = []
        for _ in range(iters):
            ev = []
            for d, s in zip(devs, streams):
                with cp.cuda.Device(d):
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(s)
                    ev.append((d, start, end))
            once()
            for (d, _, end), s in zip(ev, streams):
                with cp.cuda.Device(d):
                    end.record(s)
            worst = 0.0
            for d, start, end in ev:
                with cp.cuda.Device(d):
                    end.synchronize()
                    worst = max(worst, cp.cuda.get_elapsed_time(start, end) * 1e-3)
            times.append(worst)
        n = len(devs)
        want = n * (n + 1) / 2
        correct = True
        for d, b in zip(devs, recvs):
            with cp.cuda.Device(d):
                correct = correct and bool(cp.all(b == want).get())
        seconds = float(np.median(times))
        size = count * 4
        names = []
        for d in devs:
            with cp.cuda.Device(d):
                props = cp.cuda.runtime.getDeviceProperties(d)
                names.append(props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]))
    finally:  # free the communicators on errors too
        for c in comms:
            c.destroy()
    return {
        "kind": "measured",
        "collective": "all_reduce",
        "devices": devs,
        "device": names[0],
        "bytes": size,
        "seconds": seconds,
        "algbw": _bw.algbw(size, seconds),
        "busbw": _bw.busbw(size, seconds, "all_reduce", n),
        "times": times,
        "correct": correct,
        "method": f"NCCL via cupy.cuda.nccl, one process, {warmup} warm-up + {iters} timed calls, median of the slowest GPU's CUDA-event time",
    }
