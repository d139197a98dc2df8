"""Occupancy and memory-access maths: what limits the warps an SM can hold, and what a warp's accesses cost.

Occupancy follows the rules NVIDIA's occupancy calculator applies (``cuda_occupancy.h`` in the CUDA toolkit,
function ``cudaOccMaxActiveBlocksPerMultiprocessor``), with the per-architecture limits of the CUDA C++
Programming Guide, appendix "Compute Capabilities", table "Technical Specifications per Compute Capability":

- warps: a block takes ``ceil(threads / 32)`` warp slots; an SM holds at most ``max_warps`` warps and
  ``max_blocks`` blocks;
- registers: a warp's registers are allocated in units of 256 (``regs_per_thread × 32`` rounded up); each SM
  has 4 sub-partitions with a quarter of the register file each, and a warp lives in one of them. A block
  launches only if its registers fit the per-block limit twice over: as allocated (``warps × regs per warp``) and
  as the hardware checks it, with the block's warps rounded up to a multiple of the 4 sub-partitions (800
  threads = 25 warps are checked as 28); a block that fails either cannot launch (``LabkitError``), it is not
  "0 blocks";
- shared memory: per block, the request plus the memory the runtime reserves per block (1 KiB from cc 8.0)
  rounded up to the allocation unit; the SM's shared memory (at the largest carve-out) divided by that.

Coalescing: a warp's request is served in 32-byte sectors; its efficiency is the bytes it uses divided by
the bytes the sectors move. Shared memory has 32 banks of 4-byte words; lanes hitting different words of the
same bank serialise (an n-way conflict); lanes reading the same word share it (a broadcast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from labkit.errors import LabkitError
from labkit.validate import require_choice, require_int, require_sequence

SOURCE = (
    "CUDA C++ Programming Guide, 'Compute Capabilities': Technical Specifications per Compute Capability; "
    "allocation granularities from the CUDA Occupancy Calculator (cuda_occupancy.h, CUDA toolkit)"
)

#: Static shared memory a block may declare (``__shared__`` / ``cuda.shared.array`` with a constant shape), on every
#: architecture: a build with more fails (ptxas: "uses too much shared data"); only dynamic shared memory, with the
#: opt-in attribute, goes past it (CUDA C++ Programming Guide, 'Shared Memory' and 'Technical Specifications').
STATIC_SHARED_PER_BLOCK = 48 * 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (see :data:`SOURCE`)."""

    arch: str
    max_threads_per_block: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_alloc_unit: int  # registers per warp are rounded up to this
    sub_partitions: int
    shared_per_sm: int  # bytes, largest carve-out
    max_shared_per_block: int  # bytes, with the opt-in attribute (48 KiB without it)
    shared_alloc_unit: int
    reserved_shared_per_block: int
    source: str = SOURCE


ARCHS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits("sm_70", 1024, 64, 32, 65536, 65536, 255, 256, 4, 96 * 1024, 96 * 1024, 256, 0),
    "sm_80": ArchLimits("sm_80", 1024, 64, 32, 65536, 65536, 255, 256, 4, 164 * 1024, 163 * 1024, 128, 1024),
    "sm_90": ArchLimits("sm_90", 1024, 64, 32, 65536, 65536, 255, 256, 4, 228 * 1024, 227 * 1024, 128, 1024),
}


def limits(arch: str) -> ArchLimits:
    """The :class:`ArchLimits` of ``"sm_70"``, ``"sm_80"`` or ``"sm_90"`` (``"compute_90"`` is read as ``"sm_90"``)."""
    if type(arch) is str and arch in ARCHS:
        return ARCHS[arch]
    if isinstance(arch, str) and arch.strip().lower().replace("compute_", "sm_") in ARCHS:
        return ARCHS[arch.strip().lower().replace("compute_", "sm_")]
    key = require_choice(
        arch,
        "arch",
        list(ARCHS),
        fix=f"Use one of {', '.join(ARCHS)} (Volta, Ampere, Hopper): labkit has occupancy data for these.",
    )
    return ARCHS[key]


@dataclass(frozen=True)
class Occupancy:
    """Result of :func:`occupancy`: blocks and warps per SM and what limits them."""

    arch: str
    threads_per_block: int
    registers_per_thread: int
    shared_per_block: int
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str  # "warps", "blocks", "registers" or "shared memory"
    block_limits: dict[str, int]  # blocks per SM each resource alone allows

    @property
    def occupancy(self) -> float:
        """Active warps / maximum warps per SM (0 to 1)."""
        return self.active_warps / self.max_warps

    def __str__(self) -> str:
        lim = ", ".join(f"{k} {v}" for k, v in self.block_limits.items())
        return (
            f"{self.arch}: {self.threads_per_block} threads, {self.registers_per_thread} registers/thread, "
            f"{self.shared_per_block} B shared/block -> {self.blocks_per_sm} blocks, {self.active_warps}/"
            f"{self.max_warps} warps ({100 * self.occupancy:.0f}% occupancy), limited by {self.limiter} "
            f"(blocks allowed by: {lim})"
        )


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _fixes(lim: ArchLimits) -> tuple[str, str, str]:
    """What to do about a bad block size, register count or shared-memory size on ``lim``'s architecture (written
    once per architecture: a search for a launch plan calls :func:`occupancy` thousands of times)."""
    if lim.arch not in _FIXES:
        _FIXES[lim.arch] = (
            f"A block has 1 to {lim.max_threads_per_block} threads on {lim.arch}, "
            "a whole number (a multiple of 32 fills its warps).",
            f"{lim.arch} gives a thread 1 to {lim.max_registers_per_thread} registers.",
            f"Shared memory per block is in bytes: at most {lim.max_shared_per_block} B on "
            f"{lim.arch} with the opt-in attribute, {STATIC_SHARED_PER_BLOCK} B without it.",
        )
    return _FIXES[lim.arch]


_FIXES: dict[str, tuple[str, str, str]] = {}


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int = 32, shared_per_block: int = 0) -> Occupancy:
    """Active blocks and warps per SM for a kernel's launch and resources on ``arch``.

    ``shared_per_block`` is the shared memory one block uses, in bytes (static plus dynamic).
    A configuration that cannot launch at all raises :class:`~labkit.errors.LabkitError` saying why.
    """
    lim = limits(arch)
    fix_threads, fix_registers, fix_shared = _fixes(lim)
    threads_per_block = require_int(threads_per_block, "threads_per_block", min=1, max=lim.max_threads_per_block, fix=fix_threads)
    registers_per_thread = require_int(
        registers_per_thread, "registers_per_thread", min=1, max=lim.max_registers_per_thread, fix=fix_registers
    )
    shared_per_block = require_int(shared_per_block, "shared_per_block", min=0, max=lim.max_shared_per_block, fix=fix_shared)
    warps = math.ceil(threads_per_block / 32)
    by_warps = lim.max_warps_per_sm // warps
    regs_per_warp = _round_up(registers_per_thread * 32, lim.register_alloc_unit)
    allocated = regs_per_warp * warps
    checked_warps = _round_up(warps, lim.sub_partitions)  # the hardware's check: warps rounded up to the 4 sub-partitions
    checked = regs_per_warp * checked_warps
    if allocated > lim.max_registers_per_block or checked > lim.max_registers_per_block:
        how = (
            f"{warps} warps × {regs_per_warp} registers per warp = {allocated}"
            if allocated > lim.max_registers_per_block
            else f"{warps} warps, counted as {checked_warps} (the launch check rounds a block's warps up to a multiple "
            f"of the {lim.sub_partitions} sub-partitions) × {regs_per_warp} registers per warp = {checked}"
        )
        raise LabkitError(
            f"cannot launch: {registers_per_thread} registers per thread × {threads_per_block} threads "
            f"need more than the {lim.max_registers_per_block} registers one block may use on {lim.arch} "
            f"({how}).",
            fix="Use fewer threads per block, or fewer registers per thread (__launch_bounds__, maxrregcount / max_registers).",
        )
    warps_per_partition = (lim.registers_per_sm // lim.sub_partitions) // regs_per_warp
    by_regs = (warps_per_partition * lim.sub_partitions) // warps
    if shared_per_block > 0 or lim.reserved_shared_per_block:
        smem = _round_up(shared_per_block + lim.reserved_shared_per_block, lim.shared_alloc_unit)
        by_smem = lim.shared_per_sm // smem
    else:
        by_smem = lim.max_blocks_per_sm
    block_limits = {"warps": by_warps, "blocks": lim.max_blocks_per_sm, "registers": by_regs, "shared memory": by_smem}
    blocks = min(block_limits.values())
    order = ["warps", "registers", "blocks", "shared memory"]  # the order in which ties are named
    limiter = next(k for k in order if block_limits[k] == blocks)
    return Occupancy(
        lim.arch,
        threads_per_block,
        registers_per_thread,
        shared_per_block,
        blocks,
        blocks * warps,
        lim.max_warps_per_sm,
        limiter,
        block_limits,
    )


# ----------------------------------------------------------------------------- coalescing
SECTOR = 32  # bytes
LINE = 128  # bytes


@dataclass(frozen=True)
class Coalescing:
    """Cost of one warp request: sectors, 128-byte lines, bytes used and moved."""

    sectors: int
    lines: int
    bytes_used: int
    bytes_moved: int

    @property
    def efficiency(self) -> float:
        return self.bytes_used / self.bytes_moved if self.bytes_moved else 1.0


def _addresses(addresses: Sequence[int]) -> list[int]:
    """``addresses`` checked as one warp request's byte addresses: at most 1024 whole numbers ≥ 0."""
    return require_sequence(
        addresses,
        "addresses",
        what="a list of byte addresses (whole numbers ≥ 0)",
        max_len=1024,
        item=lambda a, n: require_int(a, n, min=0),
    )


def coalescing(addresses: Sequence[int], size: int = 4) -> Coalescing:
    """Sectors and efficiency of one warp request: ``addresses`` are the byte addresses of the active lanes,
    each accessing ``size`` bytes (assumed aligned to ``size``)."""
    size = require_int(size, "size", min=1, max=256, fix="size is the bytes each lane accesses: 1, 2, 4, 8 or 16.")
    addrs = _addresses(addresses)
    used: set[int] = set()
    for a in addrs:
        used.update(range(a, a + size))
    sectors = {b // SECTOR for b in used}
    lines = {b // LINE for b in used}
    return Coalescing(len(sectors), len(lines), len(used), len(sectors) * SECTOR)


def warp_addresses(pattern: str, *, size: int = 4, stride: int = 1, offset: int = 0, lanes: int = 32, seed: int = 0) -> list[int]:
    """Byte addresses one warp touches for a named access pattern.

    ``"contiguous"``: lane i reads element ``offset + i``; ``"strided"``: element ``offset + i * stride``
    (a column of a row-major matrix with ``stride`` columns is this); ``"broadcast"``: all lanes read
    element ``offset``; ``"random"``: random elements of a 1 Mi-element array.
    """
    pattern = require_choice(pattern, "pattern", ["contiguous", "strided", "broadcast", "random"])
    size = require_int(size, "size", min=1, max=256, fix="size is the bytes of one element: 1, 2, 4, 8 or 16.")
    stride = require_int(stride, "stride", min=0, max=1 << 24)
    offset = require_int(offset, "offset", min=0, max=1 << 30)
    lanes = require_int(lanes, "lanes", min=1, max=1024, fix="A warp has 32 lanes.")
    seed = require_int(seed, "seed")
    if pattern == "contiguous":
        idx = [offset + i for i in range(lanes)]
    elif pattern == "strided":
        idx = [offset + i * stride for i in range(lanes)]
    elif pattern == "broadcast":
        idx = [offset] * lanes
    elif pattern == "random":
        import random

        r = random.Random(seed)
        idx = [r.randrange(1 << 20) for _ in range(lanes)]
    else:
        raise LabkitError(f"unknown access pattern {pattern!r}.", fix="Use contiguous, strided, broadcast or random.")
    return [i * size for i in idx]


def bank_conflict_degree(addresses: Sequence[int], banks: int = 32, word: int = 4) -> int:
    """The n of an n-way bank conflict for one warp's shared-memory request (1 = none).

    Lanes reading the same 4-byte word share one access (broadcast); distinct words in one bank serialise.
    """
    banks = require_int(banks, "banks", min=1, max=1024, fix="Shared memory has 32 banks.")
    word = require_int(word, "word", min=1, max=256, fix="A bank is 4 bytes wide.")
    addrs = _addresses(addresses)
    per_bank: dict[int, set[int]] = {}
    for a in addrs:
        w = a // word
        per_bank.setdefault(w % banks, set()).add(w)
    return max((len(ws) for ws in per_bank.values()), default=1)
