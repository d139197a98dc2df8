"""Occupancy and memory-access maths: what limits the warps an SM can hold, and what a warp's accesses cost.

Occupancy follows the rules NVIDIA's occupancy calculator applies (``cuda_occupancy.h`` in the CUDA toolkit,
function ``cudaOccMaxActiveBlocksPerMultiprocessor``), with the per-architecture limits of the CUDA C++
Programming Guide, appendix "Compute Capabilities", table "Technical Specifications per Compute Capability":

- warps: a block takes ``ceil(threads / 32)`` warp slots; an SM holds at most ``max_warps`` warps and
  ``max_blocks`` blocks;
- registers: a warp's registers are allocated in units of 256 (``regs_per_thread × 32`` rounded up); each SM
  has 4 sub-partitions with a quarter of the register file each, and a warp lives in one of them;
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

from .errors import LabkitError

SOURCE = ("CUDA C++ Programming Guide, 'Compute Capabilities': Technical Specifications per Compute Capability; "
          "allocation granularities from the CUDA Occupancy Calculator (cuda_occupancy.h, CUDA toolkit)")


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
    """The :class:`ArchLimits` of ``"sm_70"``, ``"sm_80"`` or ``"sm_90"``."""
    key = arch.strip().lower().replace("compute_", "sm_")
    if key not in ARCHS:
        raise LabkitError(f"no occupancy data for {arch!r}.", fix=f"Use one of {', '.join(ARCHS)}.")
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
        return (f"{self.arch}: {self.threads_per_block} threads, {self.registers_per_thread} registers/thread, "
                f"{self.shared_per_block} B shared/block -> {self.blocks_per_sm} blocks, {self.active_warps}/"
                f"{self.max_warps} warps ({100 * self.occupancy:.0f}% occupancy), limited by {self.limiter} "
                f"(blocks allowed by: {lim})")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int = 32, shared_per_block: int = 0) -> Occupancy:
    """Active blocks and warps per SM for a kernel's launch and resources on ``arch``.

    ``shared_per_block`` is the shared memory one block uses, in bytes (static plus dynamic).
    A configuration that cannot launch at all raises :class:`~labkit.errors.LabkitError` saying why.
    """
    lim = limits(arch)
    if not 1 <= threads_per_block <= lim.max_threads_per_block:
        raise LabkitError(f"{threads_per_block} threads per block: {lim.arch} allows 1 to {lim.max_threads_per_block}.")
    if not 1 <= registers_per_thread <= lim.max_registers_per_thread:
        raise LabkitError(f"{registers_per_thread} registers per thread: {lim.arch} allows 1 to {lim.max_registers_per_thread}.")
    if not 0 <= shared_per_block <= lim.max_shared_per_block:
        raise LabkitError(f"{shared_per_block} B of shared memory per block: {lim.arch} allows at most "
                          f"{lim.max_shared_per_block} B (with the opt-in attribute; 49152 B without it).")
    warps = math.ceil(threads_per_block / 32)
    by_warps = lim.max_warps_per_sm // warps
    regs_per_warp = _round_up(registers_per_thread * 32, lim.register_alloc_unit)
    if regs_per_warp * warps > lim.max_registers_per_block:
        raise LabkitError(f"{registers_per_thread} registers × {threads_per_block} threads exceed the "
                          f"{lim.max_registers_per_block} registers one block may use on {lim.arch}.")
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
    return Occupancy(lim.arch, threads_per_block, registers_per_thread, shared_per_block, blocks,
                     blocks * warps, lim.max_warps_per_sm, limiter, block_limits)


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


def coalescing(addresses: Sequence[int], size: int = 4) -> Coalescing:
    """Sectors and efficiency of one warp request: ``addresses`` are the byte addresses of the active lanes,
    each accessing ``size`` bytes (assumed aligned to ``size``)."""
    if size <= 0:
        raise LabkitError(f"access size must be positive, got {size}.")
    used: set[int] = set()
    for a in addresses:
        used.update(range(int(a), int(a) + size))
    sectors = {b // SECTOR for b in used}
    lines = {b // LINE for b in used}
    return Coalescing(len(sectors), len(lines), len(used), len(sectors) * SECTOR)


def warp_addresses(pattern: str, *, size: int = 4, stride: int = 1, offset: int = 0, lanes: int = 32,
                   seed: int = 0) -> list[int]:
    """Byte addresses one warp touches for a named access pattern.

    ``"contiguous"``: lane i reads element ``offset + i``; ``"strided"``: element ``offset + i * stride``
    (a column of a row-major matrix with ``stride`` columns is this); ``"broadcast"``: all lanes read
    element ``offset``; ``"random"``: random elements of a 1 Mi-element array.
    """
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
    per_bank: dict[int, set[int]] = {}
    for a in addresses:
        w = int(a) // word
        per_bank.setdefault(w % banks, set()).add(w)
    return max((len(ws) for ws in per_bank.values()), default=1)
