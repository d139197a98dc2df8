"""Check for lab 10's Hopper exercise: a cluster sum through distributed shared memory, in CUDA C++.

The learner completes ``cluster_sum(const float* x, float* out, int n)``: each block reduces its elements in its
own shared memory; then block rank 0 of each thread-block cluster adds its peers' partial sums, read straight from
their shared memory (``cluster.map_shared_rank``), and writes ``out[cluster index]``.

The check grades values. Without a GPU (or on one older than Hopper) it runs the kernel on labkit's CPU stand-in
(:mod:`labkit.cuda_host`), which runs a cluster's blocks together, each with its own shared memory, ``cluster.sync()``
as a barrier over the whole cluster (one some threads skip is an error, as it hangs or orders nothing on a GPU) and
``cluster.map_shared_rank`` into a peer that must still be running: fresh sizes, clusters of 2 and 4 blocks, each case
with the blocks of a cluster given the CPU lowest rank first and then highest first, so a read before the peers wrote
and a block that exits while it is read both show. On a GPU of compute capability 9.0 or later it launches the
kernel through ``cuda.core`` with clusters of 2 and 4 blocks on fresh data instead. Both compare every cluster's sum.
Then it compiles the source for sm_90 with NVRTC and reads the PTX: a read of a peer's shared memory (``mapa``),
cluster barriers (``barrier.cluster.wait``) around the reads, and the block's rank (``%cluster_ctarank``).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .core import Failed, Unsolved, exercise

ARCH = "sm_90"
ENTRY = "cluster_sum"


def reference_source() -> str:
    """labkit's solution (``kernels/cuda/cluster_sum.cu``)."""
    from labkit.cuda.sources import read_source

    return read_source("cluster_sum.cu")


@dataclass(frozen=True)
class ClusterPTX:
    """What the sm_90 PTX of a cluster kernel shows, in instruction order."""

    lines: tuple[str, ...]

    def where(self, *prefixes: str) -> list[int]:
        """Positions of the instructions starting with any of ``prefixes``."""
        return [k for k, ln in enumerate(self.lines) if ln.startswith(prefixes)]

    def _peer_uses(self) -> list[tuple[int, str]]:
        """Each use of an address ``mapa`` made in another block's shared memory (distributed shared memory), in order:
        ``(position, "read")`` for a load, ``(position, "write")`` for a store or an atomic (a push into a peer's
        slot). The address is followed through the registers it is copied or offset into; a ``mapa`` whose address
        is never seen used counts as a read at its own position."""
        tracked: set[str] = set()
        uses: list[tuple[int, str]] = []
        pending: dict[str, int] = {}  # register made by mapa -> its position, until a use is seen
        for k, line in enumerate(self.lines):
            op, _, rest = line.partition(" ")
            operands = [o.strip() for o in rest.rstrip(";").split(",")]
            if op.startswith("mapa"):
                tracked.add(operands[0])
                pending[operands[0]] = k
                continue
            address = re.search(r"\[\s*(%\w+)", rest)
            if address and address.group(1) in tracked:
                kind = "read" if op.startswith("ld") else "write" if op.startswith(("st", "red", "atom")) else None
                if kind:
                    uses.append((k, kind))
                    pending.pop(address.group(1), None)
                    continue
            sources = set(re.findall(r"%\w+", rest)) - {operands[0]} if operands else set()
            if operands and sources & tracked and op.startswith(("add", "sub", "mov", "cvta", "mad", "or")):
                tracked.add(operands[0])
                for reg in sources & set(pending):
                    pending[operands[0]] = pending[reg]
        uses += [(k, "read") for k in pending.values() if not any(u[0] >= k for u in uses)]
        return sorted(set(uses))

    @property
    def peer_reads(self) -> list[int]:
        """Loads from another block's shared memory (through an address made by ``mapa``)."""
        return [k for k, kind in self._peer_uses() if kind == "read"]

    @property
    def peer_writes(self) -> list[int]:
        """Stores (or atomics) into another block's shared memory: a push-style sum."""
        return [k for k, kind in self._peer_uses() if kind == "write"]

    @property
    def peer_access(self) -> bool:
        """Any use of another block's shared memory at all."""
        return bool(self.where("mapa"))

    @property
    def block_barriers(self) -> list[int]:
        """``bar.sync`` / ``barrier.sync``: __syncthreads(), a barrier of one block."""
        return self.where("bar.sync", "barrier.sync")

    @property
    def cluster_waits(self) -> list[int]:
        """``barrier.cluster.wait`` (or the one-step ``barrier.cluster.sync``): a barrier for the whole cluster."""
        return self.where("barrier.cluster.wait", "barrier.cluster.sync")

    @property
    def uses_rank(self) -> bool:
        return any("%cluster_ctarank" in ln for ln in self.lines)


def read_cluster_ptx(ptx_text: str, entry: str = ENTRY) -> ClusterPTX:
    """The instruction lines of ``entry`` in ``ptx_text`` (directives, labels and comments left out)."""
    from labkit.cuda.cpp import find_entry

    body = find_entry(ptx_text, entry, n_params=3).body
    lines = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "{", "}")) or line.endswith(":"):
            continue
        if line.startswith("@") and " " in line:
            line = line.split(None, 1)[1]
        lines.append(line)
    return ClusterPTX(tuple(lines))


_COMPILED: dict[str, str] = {}


def _compile(source: str) -> str:
    """The sm_90 PTX of ``source`` (kept for the session, as NVRTC gives the same PTX for the same source: a check run
    again on it reuses it, and only its launches are drawn afresh)."""
    if source in _COMPILED:
        return _COMPILED[source]
    _COMPILED[source] = ptx_text = _compile_uncached(source)
    if len(_COMPILED) > 64:
        _COMPILED.pop(next(iter(_COMPILED)))
    return ptx_text


def _compile_uncached(source: str) -> str:
    from labkit.cuda import ptx

    from ..errors import CompileError

    version = ptx.nvrtc_version() or (0, 0)
    options: tuple[str, ...] = ()
    if version >= (12, 4):  # NVRTC's automatic precompiled headers (<cooperative_groups.h>), kept out of the work folder
        pch_dir = Path(tempfile.gettempdir()) / "labkit-nvrtc-pch"
        pch_dir.mkdir(exist_ok=True)
        options = ("--pch", f"--pch-dir={pch_dir}")
    try:
        return ptx.compile_cuda(source, ARCH, name="cluster_sum.cu", options=options).text
    except CompileError as exc:
        raise Failed(
            f"the source does not compile for {ARCH}:\n{exc}",
            cause="clusters exist from sm_90 on: include <cooperative_groups.h>, and use "
            "cg::this_cluster(), cluster.sync(), cluster.map_shared_rank(ptr, rank).",
        ) from None


def read_or_unsolved(ptx_text: str) -> ClusterPTX:
    """The PTX's cluster instructions; :class:`Unsolved` for an untouched skeleton (no cluster code at all)."""
    from ..errors import LabkitError

    try:
        mix = read_cluster_ptx(ptx_text)
    except LabkitError as exc:
        raise Failed(str(exc), cause=getattr(exc, "fix", None)) from None
    if not mix.peer_access and not mix.cluster_waits:
        raise Unsolved(
            "the kernel has no cluster code yet (no cluster barrier, no read of another block's shared "
            "memory): write the part after the block's own reduction."
        )
    return mix


def judge_ptx_shape(mix: ClusterPTX) -> ClusterPTX:
    """Raise :class:`Failed` on what the PTX shows is missing (a peer read, the two cluster barriers, the rank)."""
    reads, writes, waits = mix.peer_reads, mix.peer_writes, mix.cluster_waits
    if not mix.peer_access:
        raise Failed(
            f"the {ARCH} PTX has no `mapa`: no block reads another block's shared memory.",
            cause="read each peer's partial sum through distributed shared memory: "
            "*cluster.map_shared_rank(&partial[0], r) for r in 0 .. cluster.num_blocks() - 1.",
        )
    if writes and not any(w > writes[-1] for w in waits):
        raise Failed(
            f"the {ARCH} PTX stores into another block's shared memory (`mapa`, then a store) with no cluster barrier "
            "(`barrier.cluster.wait`) after it: block rank 0 may add its slots before the peers' stores land.",
            cause="call cluster.sync() after every block has pushed its partial sum into rank 0's shared memory and "
            "before rank 0 adds the slots.",
        )
    if reads and not any(w < reads[0] for w in waits):
        raise Failed(
            f"the {ARCH} PTX reads a peer's shared memory (`mapa`) before any cluster barrier "
            "(`barrier.cluster.wait`): the peers may not have written their sums yet.",
            cause="call cluster.sync() after the block's own reduction and before reading the peers' "
            "partial sums; __syncthreads() waits for the threads of one block only.",
        )
    if reads and not any(w > reads[-1] for w in waits):
        raise Failed(
            f"after its last read of a peer's shared memory the {ARCH} PTX has no cluster barrier: a block "
            "may finish and exit while rank 0 still reads its shared memory.",
            cause="end the kernel with cluster.sync(): a block's shared memory must stay alive until every "
            "read of it in the cluster is done.",
        )
    if not mix.uses_rank:
        raise Failed(
            f"the {ARCH} PTX never reads the block's rank in its cluster (`%cluster_ctarank`): every block "
            "combines and writes the cluster's sum.",
            cause="let one block per cluster combine: if (cluster.block_rank() == 0 && threadIdx.x == 0).",
        )
    return mix


def judge_ptx(ptx_text: str) -> ClusterPTX:
    """Raise :class:`Failed` (or :class:`Unsolved` for an untouched skeleton) on what the PTX shows is missing."""
    return judge_ptx_shape(read_or_unsolved(ptx_text))


def run_on_gpu(source: str, x: np.ndarray, cluster: int, block: int) -> np.ndarray:
    """Launch ``cluster_sum`` through ``cuda.core`` with clusters of ``cluster`` blocks of ``block`` threads; return
    ``out`` (one sum per cluster). Needs a GPU of compute capability 9.0 or later."""
    import cupy as cp
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    from labkit.cuda.ptx import cuda_include_dirs

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    options = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17", include_path=cuda_include_dirs())
    kernel = Program(source, code_type="c++", options=options).compile("cubin").get_kernel(ENTRY)
    n_clusters = -(-x.size // (cluster * block))
    d_x = cp.asarray(x)
    d_out = cp.full(n_clusters, np.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()  # CuPy filled the arrays on its own stream
    launch(
        stream,
        LaunchConfig(grid=n_clusters, cluster=cluster, block=block),
        kernel,
        d_x.data.ptr,
        d_out.data.ptr,
        np.int32(x.size),
    )
    stream.sync()
    return cp.asnumpy(d_out)


def _gpu_cases(source: str) -> str:
    from ..mode import env

    cc = env().compute_capability or (0, 0)
    if tuple(cc) < (9, 0):
        return f" This GPU (compute capability {cc[0]}.{cc[1]}) has no clusters, so the kernel was not run."
    rng = np.random.default_rng()
    for cluster, block in ((2, 128), (4, 256), (2, 32)):
        n = int(rng.integers(3, 9)) * cluster * block + int(rng.integers(1, block))  # a partial last cluster
        x = exact_fractions(rng, n)  # quarters: every order of adding agrees, an int accumulator does not
        got = run_on_gpu(source, x, cluster, block)
        per = cluster * block
        want = np.array([x[k : k + per].sum() for k in range(0, n, per)], dtype=np.float32)
        bad = np.flatnonzero(got != want)
        if bad.size:
            k = int(bad[0])
            raise Failed(
                f"on the GPU, clusters of {cluster} blocks of {block} threads, n={n}: out[{k}] is {got[k]:g}, "
                f"expected {want[k]:g}.",
                cause="out[cluster index] = the sum of the cluster's cluster.num_blocks() * blockDim.x "
                "elements; the cluster index is blockIdx.x / cluster.num_blocks().",
            )
    return " On the GPU: run through cuda.core with clusters of 2 and 4 blocks, every cluster's sum right."


#: The value ``out`` holds before the kernel runs: a slot still holding it was never written.
UNWRITTEN = np.float32(-7777.25)
#: (blocks per cluster, threads per block) of the CPU stand-in's cases: clusters of 2 and of 4, several block sizes.
HOST_CASES = ((2, 128), (4, 64), (4, 256), (2, 32))
BIG_CASE = (2, 256)  # and one case past 65,536 elements (BIG_N), where an index kept in 16 bits wraps
BIG_N = (65_600, 66_000)
BIG_LIMIT_S = 60.0  # the wall-time limit of that case


def exact_fractions(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` values in quarters from -8 to 8, most of them not whole (an ``int`` accumulator loses them): every
    partial sum of up to 2^20 of them is exact in float32, so every order of adding agrees."""
    return (np.rint(rng.uniform(-32, 32, n)) / 4 + 0.25 * (rng.random(n) < 0.5)).astype(np.float32)


def _host_inputs(rng: np.random.Generator, cluster: int, block: int) -> tuple[np.ndarray, int]:
    """Fresh data for one case: quarters, not whole numbers (:func:`exact_fractions`), a partial last cluster whose
    last block(s) may lie wholly past ``n``."""
    per = cluster * block
    n = int(rng.integers(2, 5)) * per + int(rng.integers(1, per))
    return exact_fractions(rng, n), n


def _value_cause(
    x: np.ndarray, got: float, k: int, cluster: int, block: int, other_ok: bool, out: np.ndarray | None = None
) -> str:
    """Why out[k] holds ``got`` instead of cluster k's sum, read from the values: a pattern counts only when every
    cluster of the case (``out``) shows it, so a coincidence in one cluster's small sums does not."""
    per = cluster * block
    out = np.array([got]) if out is None else out
    first = 0 if out.size > 1 else k
    sums = np.zeros((out.size, cluster))
    for c in range(out.size):
        part = x[(first + c) * per : (first + c + 1) * per]
        sums[c] = [float(part[j * block : (j + 1) * block].sum()) for j in range(cluster)]
    full = [c for c in range(out.size) if (first + c) * per + (cluster - 1) * block < x.size]  # all blocks hold data
    if np.isnan(got):
        return (
            "the sum read a peer's shared memory before that block had written its partial sum (shared memory "
            "starts uninitialised: NaN here). Call cluster.sync() after the block's own reduction and before "
            "reading the peers, from every thread of every block."
        )
    if other_ok:  # (before the unwritten slot: a fixed cluster size leaves slots unwritten, on some draws only)
        return (
            f"the sums are right with clusters of another size but not with clusters of {cluster} blocks: use "
            "cluster.num_blocks() for the cluster size (in the loop over ranks and in the output index), never a "
            "fixed number."
        )
    if got == UNWRITTEN:
        return (
            f"out[{k}] was never written. Each cluster writes exactly one slot, out[blockIdx.x / "
            "cluster.num_blocks()], from block rank 0's thread 0."
        )
    rows = full or list(range(out.size))
    if all(out[c] == float(np.trunc(sums[c]).sum()) for c in rows) or all(
        out[c] == float(np.trunc(np.trunc(sums[c]).sum())) and out[c] != np.float32(sums[c].sum()) for c in rows
    ):
        return (
            f"out[{k}] is the sum of the blocks' partial sums cut to whole numbers: the total is kept in an int "
            "(`int total = 0`), so each added partial sum loses its fraction. Add in float: `float total = 0.0f`."
        )
    for j in range(cluster):
        if cluster > 1 and all(out[c] == cluster * sums[c, j] for c in rows):
            return (
                f"out[{k}] is {cluster} × block rank {j}'s sum: the loop reads the same block every time; read "
                "*cluster.map_shared_rank(&partial[0], r) with the loop's r."
            )
        if all(out[c] == sums[c, j] for c in rows):
            return f"out[{k}] is only block rank {j}'s own sum: add every block's partial[0], r = 0 .. cluster.num_blocks() - 1."
    return (
        f"out[{k}] must be the sum of the {cluster} blocks' partial[0] of cluster {k}, read with "
        "*cluster.map_shared_rank(&partial[0], r) for r = 0 .. cluster.num_blocks() - 1."
    )


def _stand_in_cause(text: str) -> str:
    if "already left the kernel (its shared memory" in text:
        return (
            "end the kernel with cluster.sync(), reached by every thread of every block: a block's shared memory "
            "must stay alive until every read of it in the cluster is done."
        )
    if "cluster.sync() that only some threads" in text:
        return (
            "call cluster.sync() from every thread of every block, outside any `if` on the block's rank or the "
            "thread index: if (rank == 0) { cluster.sync(); ... } waits for blocks that never arrive."
        )
    if "shared-memory race" in text and "cluster.sync()" in text:
        return (
            "a block read another block's partial[0] (map_shared_rank) before that block had written its partial sum, "
            "or overwrote it while another read it: every thread of every block must pass cluster.sync() between "
            "the blocks' own reductions and the reads of their shared memory (__syncthreads() orders one block only)."
        )
    if "__syncthreads() that only some" in text:
        return "keep every thread running to each __syncthreads(): put the bounds check around the work, not around the barrier."
    if "global-memory race" in text:
        return (
            "exactly one thread per cluster writes that cluster's out[blockIdx.x / cluster.num_blocks()]: block rank 0's "
            "thread 0, `if (cluster.block_rank() == 0 && threadIdx.x == 0)`. Other threads that write the same total "
            "to the same element race with it, even with equal values."
        )
    return "see the sentence above: it names the thread and what it did."


def host_cases(source: str, rng: np.random.Generator | None = None, ptx_text: str | None = None) -> str:
    """Run ``source`` on the CPU stand-in with clusters of 2 and 4 blocks on fresh data, each case with the blocks of
    a cluster given the CPU lowest rank first and then highest first; raise :class:`Failed` on a wrong sum or on what
    the stand-in reports (a cluster barrier some threads skip, a read of a block that has exited)."""
    from labkit.cuda.host import HostKernelError, run_on_host_batch

    from ..errors import LabkitError

    rng = rng or np.random.default_rng()
    if ptx_text is not None:  # the stand-in reads the kernel's parameters from its sm_90 PTX: reuse this compile
        from labkit.cuda import cpp as cuda_cpp

        cuda_cpp._PTX_CACHE.setdefault((source, ENTRY), ptx_text)
    cases, launches = [], []
    for cluster, block in (*HOST_CASES, BIG_CASE):
        x, n = _host_inputs(rng, cluster, block)
        if (cluster, block) == BIG_CASE:  # past 65,536 elements: a 16-bit index wraps (one order: it costs the most)
            n = int(rng.integers(BIG_N[0], BIG_N[1]))
            x = exact_fractions(rng, n)
        n_clusters = -(-n // (cluster * block))
        for order in ("forward", "reverse") if (cluster, block) != BIG_CASE else ("forward",):
            out = np.full(n_clusters, UNWRITTEN, dtype=np.float32)
            cases.append((cluster, block, order, x, n, out))
            launches.append(((n_clusters * cluster,), (block,), (x.copy(), out, np.int32(n)), 0, cluster, order))

    def launched(batch: list, timeout_s: float | None = None) -> list:
        try:
            return run_on_host_batch(source, ENTRY, batch, timeout_s=timeout_s)
        except HostKernelError as exc:
            text = str(exc.args[0])
            raise Failed(text, cause=_stand_in_cause(text)) from None
        except LabkitError as exc:
            raise Failed(str(exc.args[0]), cause=getattr(exc, "fix", None)) from None

    def judge(judged: list, ran: list) -> None:
        ok_sizes = {c for c, b, o, x, n, out in ran if np.array_equal(out, _sums(x, c * b))}
        for cluster, block, order, x, n, out in judged:
            want = _sums(x, cluster * block)
            bad = np.flatnonzero(~((out == want) | (np.isnan(out) & np.isnan(want))))
            if bad.size:
                k = int(bad[0])
                first = "lowest" if order == "forward" else "highest"
                raise Failed(
                    f"on the CPU stand-in, clusters of {cluster} blocks of {block} threads, n={n} (the cluster's "
                    f"blocks run {first} rank first): out[{k}] is {_show(out[k])}, expected {want[k]:g}.",
                    cause=WRAPPED_CAUSE
                    if _only_past_16_bits(bad, cluster * block)
                    else _value_cause(x, float(out[k]), k, cluster, block, bool(ok_sizes - {cluster}), out),
                )

    said = launched(launches[:-1])
    judge(cases[:-1], cases[:-1])
    # the case past 65,536 elements last, on its own, once the others are right: a kernel that hangs or sums wrongly
    # has failed them already, and this one takes a few seconds of wall time on a loaded machine (about 0.7 s of CPU)
    said += launched(launches[-1:], BIG_LIMIT_S)
    judge(cases[-1:], cases)
    outside = next((s for s in said if s), None)  # right sums, but an access outside x or out (`i <= n`)
    if outside:
        raise Failed(
            f"on the CPU stand-in: {outside}.",
            cause="every thread whose i is past the end loads 0, not x[i]: `i < n ? x[i] : 0.0f` (`<`, not `<=`).",
        )
    return (
        " On labkit's CPU stand-in: clusters of 2 and 4 blocks (32 to 256 threads) on fresh data, each run with "
        "the cluster's blocks in two orders, every cluster's sum right."
    )


WRAPPED_CAUSE = (
    "every cluster whose elements lie past index 65,535 is wrong and every one before is right: an index kept in 16 "
    "bits (unsigned short, short) wraps back to 0 there. Keep the global index in an int: "
    "`int i = blockIdx.x * blockDim.x + threadIdx.x;`."
)


def _only_past_16_bits(bad: np.ndarray, per: int) -> bool:
    """The wrong output slots are exactly the clusters whose elements reach past index 65,535 (and there are some)."""
    first = 65_536 // per  # the first cluster with an element at index 65,536 or more
    return bool(bad.size) and int(bad.min()) >= first and bool(np.array_equal(bad, np.arange(first, first + bad.size)))


def _sums(x: np.ndarray, per: int) -> np.ndarray:
    return np.array([x[k : k + per].sum() for k in range(0, x.size, per)], dtype=np.float32)


def _show(v: float) -> str:
    return "never written" if v == UNWRITTEN else f"{v:g}"


#: The PTX facts (properties of :class:`ClusterPTX`) whose absence explains wrong values, each with the cause it names.
_MISSING_IN_PTX = (
    (
        "peer_access",
        "the {arch} PTX has no `mapa`: no block reads another block's shared memory; `partial[0]` alone is the "
        "block's own. Read each peer's partial sum with *cluster.map_shared_rank(&partial[0], r).",
    ),
    (
        "uses_rank",
        "the {arch} PTX never reads the block's rank in its cluster (`%cluster_ctarank`): every block combines "
        "and writes. Let one block per cluster combine: if (cluster.block_rank() == 0 && threadIdx.x == 0).",
    ),
)


def _ptx_cause(mix: ClusterPTX, text: str = "") -> str | None:
    """The cause the PTX shows for wrong values, where it shows one: no peer access at all, no use of the rank, the
    cluster barrier placed before the block's own reduction ends, a slot pushed into that nothing set first."""
    missing = next((cause.format(arch=ARCH) for fact, cause in _MISSING_IN_PTX if not getattr(mix, fact)), None)
    if missing:
        return missing
    first = (mix.peer_reads + mix.peer_writes + [len(mix.lines)])[0]
    waits = [w for w in mix.cluster_waits if w < first]
    if waits and any(waits[0] < b < first for b in mix.block_barriers):
        return (
            "the cluster.sync() comes before the block's own reduction is done: the tree's steps (each ending in "
            "__syncthreads()) still change partial[0] after it, while another block reads it. Move cluster.sync() "
            "after the reduction loop, just before the reads of the peers' shared memory."
        )
    if mix.peer_writes and not mix.peer_reads and "nan" in text.lower():
        return (
            "block rank 0 added up a slot of its shared memory that no store had set (shared memory starts "
            "uninitialised: NaN here). A slot that the blocks add into with atomicAdd must be zeroed first, by rank "
            "0, with a cluster.sync() between the zeroing and the first add; with one slot per block, every block "
            "stores its slot, even one whose elements all lie past n (it stores 0)."
        )
    return None


def _refuse_fp64(ptx_text: str) -> None:
    """One rule for every lab's kernels, as 02.float32 teaches: a float32 sum whose PTX computes in FP64 fails."""
    from labkit.cuda.ptx import fp64_instructions

    slow = fp64_instructions(ptx_text)
    if slow:
        ops = sorted({ln.split(None, 1)[0].rstrip(";") for ln in slow})
        raise Failed(
            f"the kernel computes in double precision: its PTX has {len(slow)} FP64 "
            f"instruction(s) ({', '.join(f'`{o}`' for o in ops[:4])}) although x and out are float32.",
            cause="in C++ a literal such as 0.5 or 1.0 is a double, and so is what it touches: write 0.0f and use "
            "float variables. FP64 runs at a small fraction of the FP32 rate on most GPUs "
            "(labkit.hw.arithmetic_rates).",
        )


@exercise("10.cluster", kind="kernel", reference=reference_source)
def cluster_sum(source: str) -> str:
    """Grade the CUDA C++ source of ``cluster_sum(const float* x, float* out, int n)``: its sums with clusters of 2 and
    4 blocks (on a GPU of compute capability 9.0 or later through cuda.core, else on labkit's CPU stand-in), and its
    sm_90 PTX."""
    from labkit.cuda.host import HostUnavailable
    from labkit.gpu.cupylab import cupy_or_none

    if not isinstance(source, str):
        raise Failed(f"expected the kernel's CUDA C++ source as a string, got {type(source).__name__}.")
    ptx_text = _compile(source)
    mix = read_or_unsolved(ptx_text)
    _refuse_fp64(ptx_text)
    gpu_note = ""
    if cupy_or_none() is not None:
        gpu_note = _gpu_cases(source)
    if not gpu_note.startswith(" On the GPU"):
        try:
            values = host_cases(source, ptx_text=ptx_text)
        except Failed as exc:
            from .causes import axis_cause, tree_guard_cause, wrapped_index_in  # from the code and the stand-in

            said = str(exc.args[0])
            loose = tree_guard_cause(source) or wrapped_index_in(said) if "race" in said else None  # `<=`, 16 bits
            cause = axis_cause(source, None, None) or loose or _ptx_cause(mix, said) or exc.cause
            raise Failed(exc.args[0], cause=cause) from None
        except HostUnavailable as exc:
            values = (
                f" The CPU stand-in could not run it ({exc}), so its values were not checked here; on a GPU of "
                "compute capability 9.0 or later this check runs it."
            )
        gpu_note = values + gpu_note
    judge_ptx_shape(mix)
    base = (
        f"its {ARCH} PTX reads the peers' shared memory (mapa) between two cluster barriers "
        "(barrier.cluster.wait), and one block per cluster (%cluster_ctarank) combines."
        if mix.peer_reads
        else f"its {ARCH} PTX stores each block's sum into another block's shared memory (mapa) before a cluster "
        "barrier (barrier.cluster.wait), and one block per cluster (%cluster_ctarank) combines."
    )
    return base + gpu_note
