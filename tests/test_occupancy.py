"""labkit.occupancy against the CUDA occupancy rules (cuda_occupancy.h) and the Programming Guide's per-SM limits."""

from __future__ import annotations

import pytest

from labkit import occupancy as occ
from labkit.errors import LabkitError


def test_limits_from_the_programming_guide() -> None:
    for arch in ("sm_70", "sm_80", "sm_90"):
        lim = occ.limits(arch)
        assert (lim.max_warps_per_sm, lim.max_blocks_per_sm, lim.registers_per_sm, lim.max_registers_per_thread) == (64, 32, 65536, 255)
        assert "Programming Guide" in lim.source
    assert occ.limits("sm_70").shared_per_sm == 96 * 1024 and occ.limits("sm_70").reserved_shared_per_block == 0
    assert occ.limits("sm_80").shared_per_sm == 164 * 1024 and occ.limits("sm_80").max_shared_per_block == 163 * 1024
    assert occ.limits("sm_90").shared_per_sm == 228 * 1024 and occ.limits("sm_90").max_shared_per_block == 227 * 1024
    with pytest.raises(LabkitError):
        occ.limits("sm_61")


@pytest.mark.parametrize("arch,threads,regs,smem,blocks,warps,limiter", [
    ("sm_80", 256, 32, 0, 8, 64, "warps"),  # full occupancy
    ("sm_80", 256, 64, 0, 4, 32, "registers"),  # 2048 registers per warp: 8 warps per sub-partition
    ("sm_70", 128, 255, 0, 2, 8, "registers"),  # 255 × 32 = 8160 rounds up to 8192 per warp
    ("sm_90", 128, 32, 48 * 1024, 4, 16, "shared memory"),  # (48 KiB + 1 KiB reserved) fits 4 times in 228 KiB
    ("sm_70", 128, 32, 48 * 1024, 2, 8, "shared memory"),  # no reservation on Volta: 96 KiB / 48 KiB
    ("sm_80", 128, 32, 48 * 1024, 3, 12, "shared memory"),  # 164 KiB / 49 KiB = 3
    ("sm_70", 32, 16, 0, 32, 32, "blocks"),  # one-warp blocks: the 32-block limit caps occupancy at 50%
    ("sm_90", 1024, 64, 0, 1, 32, "registers"),
    ("sm_90", 96, 40, 0, 16, 48, "registers"),  # 40 × 32 = 1280 per warp: 12 per sub-partition, 48 warps, 3 warps a block
])
def test_occupancy_rules(arch, threads, regs, smem, blocks, warps, limiter) -> None:
    o = occ.occupancy(arch, threads, regs, smem)
    assert (o.blocks_per_sm, o.active_warps, o.limiter) == (blocks, warps, limiter), str(o)
    assert o.occupancy == warps / 64
    assert arch in str(o)


def test_register_allocation_granularity() -> None:
    # 33 and 40 registers both round up to 1280 per warp (unit 256): same occupancy
    assert occ.occupancy("sm_80", 256, 33).active_warps == occ.occupancy("sm_80", 256, 40).active_warps == 48
    assert occ.occupancy("sm_80", 256, 32).active_warps == 64


def test_shared_allocation_granularity() -> None:
    # sm_70 rounds shared memory to 256 B: 257 B takes 512 B
    assert occ.occupancy("sm_70", 32, 16, 257).block_limits["shared memory"] == 96 * 1024 // 512
    # sm_80 rounds (request + 1 KiB) to 128 B
    assert occ.occupancy("sm_80", 32, 16, 1).block_limits["shared memory"] == 164 * 1024 // (1024 + 128)


def test_impossible_launches_say_why() -> None:
    with pytest.raises(LabkitError, match="threads_per_block must be a whole number from 1 to 1024, got 2048"):
        occ.occupancy("sm_80", 2048)
    with pytest.raises(LabkitError, match="cannot launch: 65 registers per thread × 1024 threads"):
        occ.occupancy("sm_80", 1024, 65)  # 2304 × 32 warps > 65536
    with pytest.raises(LabkitError, match="shared_per_block must be a whole number from 0 to 98304, got 99328"):
        occ.occupancy("sm_70", 128, 32, 97 * 1024)
    with pytest.raises(LabkitError):
        occ.occupancy("sm_90", 128, 256)


def test_coalescing() -> None:
    c = occ.coalescing(occ.warp_addresses("contiguous"), 4)
    assert (c.sectors, c.lines, c.efficiency) == (4, 1, 1.0)
    c = occ.coalescing(occ.warp_addresses("strided", stride=2), 4)
    assert (c.sectors, c.efficiency) == (8, 0.5)
    c = occ.coalescing(occ.warp_addresses("strided", stride=32), 4)
    assert (c.sectors, c.lines, c.efficiency) == (32, 32, 0.125)
    c = occ.coalescing(occ.warp_addresses("contiguous", offset=1), 4)  # misaligned by one element
    assert (c.sectors, c.lines) == (5, 2)
    c = occ.coalescing(occ.warp_addresses("broadcast"), 4)
    assert (c.sectors, c.bytes_used) == (1, 4)
    c = occ.coalescing(occ.warp_addresses("contiguous", size=8), 8)
    assert (c.sectors, c.lines, c.efficiency) == (8, 2, 1.0)
    assert occ.coalescing(occ.warp_addresses("random", size=4), 4).sectors > 16
    with pytest.raises(LabkitError):
        occ.warp_addresses("diagonal")


def test_bank_conflicts() -> None:
    word = 4
    assert occ.bank_conflict_degree([i * word for i in range(32)]) == 1
    assert occ.bank_conflict_degree([i * 32 * word for i in range(32)]) == 32  # a column of a 32-wide tile
    assert occ.bank_conflict_degree([i * 33 * word for i in range(32)]) == 1  # padded to 33
    assert occ.bank_conflict_degree([i * 2 * word for i in range(32)]) == 2
    assert occ.bank_conflict_degree([0] * 32) == 1  # broadcast


def _cuda_occupancy_h_blocks(lim: occ.ArchLimits, threads: int, regs: int, smem: int) -> int:
    """cudaOccMaxActiveBlocksPerMultiprocessor transcribed from cuda_occupancy.h (CUDA 12), partitioned GC off:
    0 where the block cannot launch. Written apart from labkit.occupancy, to compare with it."""
    warps = -(-threads // 32)
    by_warps = min(lim.max_blocks_per_sm, lim.max_warps_per_sm // warps)
    regs_per_warp = -(-(regs * 32) // 256) * 256
    regs_per_cta = regs_per_warp * warps
    regs_assumed = regs_per_warp * (-(-warps // 4) * 4)  # "the warp allocation ... rounded up to the number of partitions"
    if lim.max_registers_per_block < regs_assumed or lim.max_registers_per_block < regs_per_cta:
        return 0
    by_regs = ((lim.registers_per_sm // 4) // regs_per_warp) * 4 // warps
    per_block = -(-(smem + lim.reserved_shared_per_block) // lim.shared_alloc_unit) * lim.shared_alloc_unit
    by_smem = lim.shared_per_sm // per_block if per_block else lim.max_blocks_per_sm
    return min(by_warps, by_regs, by_smem)


@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_agrees_with_cuda_occupancy_h(arch: str) -> None:
    """Every block size from 1 to 1024 threads at register counts around each allocation step: the same blocks
    per SM as the transcription of cuda_occupancy.h, and a LabkitError exactly where it gives 0."""
    lim = occ.limits(arch)
    for threads in list(range(1, 1025, 31)) + [800, 864, 992, 1024]:
        for regs in (1, 16, 32, 40, 64, 72, 80, 96, 128, 168, 200, 255):
            for smem in (0, 4000, 48 * 1024):
                want = _cuda_occupancy_h_blocks(lim, threads, regs, smem)
                if want == 0:
                    with pytest.raises(LabkitError, match="cannot launch"):
                        occ.occupancy(arch, threads, regs, smem)
                else:
                    assert occ.occupancy(arch, threads, regs, smem).blocks_per_sm == want, (threads, regs, smem)


def test_register_check_rounds_warps_up_to_the_sub_partitions() -> None:
    # 800 threads = 25 warps × 2560 registers = 64000 fit the 65536 of a block, but the hardware's check counts
    # 28 warps (25 rounded up to a multiple of 4): 71680 > 65536, so the launch fails; it is not "0 blocks"
    with pytest.raises(LabkitError, match=r"cannot launch: 80 registers per thread × 800 threads.*counted as 28"):
        occ.occupancy("sm_90", 800, 80)
    assert occ.occupancy("sm_90", 768, 80).blocks_per_sm == 1  # 24 warps: already a multiple of 4, 61440 registers
    assert occ.occupancy("sm_90", 800, 72).blocks_per_sm == 1  # 28 × 2304 = 64512 fits


@pytest.mark.parametrize("call,match", [
    (lambda: occ.occupancy("sm_90", 256.5), r"threads_per_block must be a whole number from 1 to 1024, got 256\.5"),
    (lambda: occ.occupancy("sm_90", "256"), r"threads_per_block must be a whole number.*got '256'"),
    (lambda: occ.occupancy(None, 256), r"arch must be one of 'sm_70', 'sm_80', 'sm_90'; got None"),
    (lambda: occ.occupancy("sm_91", 256), r"Did you mean sm_90"),
    (lambda: occ.occupancy("sm_90", 256, float("nan")), r"registers_per_thread must be a whole number"),
    (lambda: occ.occupancy("sm_90", 256, 32, -1), r"shared_per_block must be a whole number from 0 to 232448"),
    (lambda: occ.coalescing(["a"], 4), r"addresses\[0\] must be a non-negative whole number"),
    (lambda: occ.coalescing([0, 4], 0), r"size must be a whole number from 1"),
    (lambda: occ.bank_conflict_degree(None), r"addresses must be a list of byte addresses"),
    (lambda: occ.bank_conflict_degree([0, 4], banks=0), r"banks must be a whole number from 1"),
    (lambda: occ.warp_addresses("strided", stride=None), r"stride must be a whole number"),
])
def test_junk_arguments_say_what_was_expected(call, match) -> None:
    with pytest.raises(LabkitError, match=match):
        call()


def test_a_whole_float_is_a_whole_number() -> None:
    assert occ.occupancy("sm_90", 256.0, 32.0).blocks_per_sm == occ.occupancy("sm_90", 256, 32).blocks_per_sm
