"""content-review-3 N1 / issue 29 item 4: the wgmma + TMA tile's shared-memory layout, verified on the CPU.

Two address maps of the 64 x 16 FP16 operand tile (rows of A, or of B^T, by K), element by element:
- what TMA writes (``cp.async.bulk.tensor.2d``, box TMA_BOX_K x TMA_BOX_ROWS, the tensor map's swizzle): the box
  row by row, each row TMA_BOX_K * 2 bytes, then the swizzle on the shared-memory byte address;
- where ``wgmma`` reads element (r, k) of a K-major operand through the 64-bit matrix descriptor the kernel builds
  (start, LBO, SBO, swizzle mode): the PTX ISA's canonical K-major layouts, ``((8,m),(T,2k)):((1T,SBO),(1,LBO))``
  without swizzle and ``Swizzle<s,4,3> o ((8,m),(T,w)):((w'T,SBO),(1,T))`` with it (T = 8 FP16 = 16 bytes).
The swizzles are CUTLASS's ``Swizzle<B,4,3>`` on byte addresses (SW32: bit 4 ^= bit 7; SW64: bits 4-5 ^= 7-8;
SW128: bits 4-6 ^= 7-9), the same function for TMA's CU_TENSOR_MAP_SWIZZLE_*B and for the descriptor's modes.
The kernel's parameters are read from ``kernels/cuda/wgmma_tile.cu`` (its #defines and its descriptor()), so a change
there is checked here; the old parameters (no swizzle, LBO 128, SBO 256) are shown to disagree."""

from __future__ import annotations

import re

import pytest

from labkit import tensorcores

SOURCE = tensorcores.WGMMA_SOURCE
ROWS, K = 64, 16  # the operand tile of m64nNk16 (A), and of B^T (N = 64)
ELEM = 2  # FP16 bytes
T = 16 // ELEM  # elements in 16 bytes: the canonical layouts' unit
SWIZZLE_MODES = {0: 0, 1: 128, 2: 64, 3: 32}  # descriptor bits 62-63 -> swizzle width in bytes (0: none)


def swizzle(addr: int, width: int) -> int:
    """The shared-memory swizzle of ``width`` bytes (32, 64, 128; 0: none) on a byte address: Swizzle<log2(width/16),4,3>."""
    if not width:
        return addr
    bits = (width // 16).bit_length() - 1
    mask = (1 << bits) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def tma_address(base: int, r: int, k: int, box_k: int, width: int) -> int:
    """Byte address at which a 2-D TMA copy of a box ``box_k`` elements wide (K contiguous) puts element (r, k)."""
    assert box_k * ELEM <= (width or 1 << 30), "a swizzled box's inner dimension may not exceed the swizzle width"
    return swizzle(base + r * box_k * ELEM + k * ELEM, width)


def descriptor(start: int, lbo: int, sbo: int, mode: int, base_offset: int = 0) -> int:
    """The 64-bit wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format"), as the kernel's descriptor() builds it."""
    return (((start & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (base_offset << 49)
            | (mode << 62))


def wgmma_address(desc: int, r: int, k: int) -> int:
    """Byte address from which wgmma reads element (r, k) of a K-major FP16 operand described by ``desc``."""
    start = (desc & 0x3FFF) << 4
    lbo, sbo = ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4
    assert (desc >> 49) & 7 == 0, "base offset: only 0 (a tile aligned to the swizzle's period) is modelled"
    width = SWIZZLE_MODES[desc >> 62]
    if not width:  # ((8,m),(T,2k)):((1T,SBO),(1,LBO)): core matrices of 8 rows x 16 bytes, 128 contiguous bytes each
        return start + (r % 8) * 16 + (r // 8) * sbo + (k % T) * ELEM + (k // T) * lbo
    # Swizzle o ((8,m),(T,w/16)):((w/16 T,SBO),(1,T)): rows `width` bytes apart, 16-byte chunks side by side
    assert K * ELEM <= width, "one wgmma's K must fit one swizzle row (else LBO would step between them)"
    return swizzle(start + (r % 8) * width + (r // 8) * sbo + (k % T) * ELEM + (k // T) * 16, width)


def _defines() -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^#define (\w+) (\d+)", SOURCE, re.M)}


def _mismatches(tma: dict[tuple[int, int], int], desc: int) -> list[tuple[int, int]]:
    return [(r, k) for (r, k), addr in tma.items() if wgmma_address(desc, r, k) != addr]


BASE = 0x1200  # a shared-memory address with the kernel's alignment (256 bytes)


def test_the_kernel_builds_its_descriptor_from_the_defines() -> None:
    assert re.search(r"leading = DESC_LBO_BYTES >> 4, stride = DESC_SBO_BYTES >> 4, swizzle = DESC_SWIZZLE;", SOURCE)
    assert "return start | (leading << 16) | (stride << 32) | (swizzle << 62);" in SOURCE
    assert "(smem_addr(tile) & 0x3FFFF) >> 4" in SOURCE
    d = _defines()
    period = 8 * d["TMA_SWIZZLE_BYTES"]  # the swizzle pattern repeats every 8 rows of `width` bytes
    aligns = [int(a) for a in re.findall(r"__shared__ alignas\((\d+)\) unsigned short tile_[ab]", SOURCE)]
    assert len(aligns) == 2 and all(a % period == 0 for a in aligns), (aligns, period)  # base offset 0 is right
    assert BASE % period == 0
    assert "2 * 64 * 16 * 2" in SOURCE and d["TMA_BOX_K"] * d["TMA_BOX_ROWS"] == 64 * 16  # expect_tx: both boxes' bytes


def test_tma_box_and_wgmma_descriptor_agree_element_by_element() -> None:
    d = _defines()
    assert (d["TMA_BOX_K"], d["TMA_BOX_ROWS"]) == (K, ROWS)
    assert SWIZZLE_MODES[d["DESC_SWIZZLE"]] == d["TMA_SWIZZLE_BYTES"]
    tma = {(r, k): tma_address(BASE, r, k, d["TMA_BOX_K"], d["TMA_SWIZZLE_BYTES"]) for r in range(ROWS) for k in range(K)}
    assert len(set(tma.values())) == ROWS * K and max(tma.values()) - BASE == ROWS * K * ELEM - ELEM  # dense, no gaps
    desc = descriptor(BASE, d["DESC_LBO_BYTES"], d["DESC_SBO_BYTES"], d["DESC_SWIZZLE"])
    assert _mismatches(tma, desc) == []
    # the swizzle is really in play: rows 4-7 of each 8-row group have their 16-byte halves swapped
    assert tma[(4, 0)] == BASE + 4 * 32 + 16 and tma[(4, 8)] == BASE + 4 * 32


def test_the_old_descriptor_reads_the_wrong_elements() -> None:
    """N1: no swizzle, LBO 128, SBO 256 against the dense 32-byte rows of one unswizzled 16 x 64 box."""
    tma = {(r, k): tma_address(BASE, r, k, K, 0) for r in range(ROWS) for k in range(K)}
    bad = _mismatches(tma, descriptor(BASE, 128, 256, 0))
    assert (0, 0) not in bad and (1, 0) in bad and len(bad) > ROWS * K // 2
    # wgmma reads A(0, 8..15) where TMA put A(1, 0..7) (the review's example), as the model says
    assert wgmma_address(descriptor(BASE, 128, 256, 0), 1, 0) == tma[(0, 8)]


@pytest.mark.parametrize("width, mode", [(32, 3), (64, 2), (128, 1)])
def test_the_model_accepts_the_layouts_the_ptx_isa_gives(width: int, mode: int) -> None:
    """Not a model that agrees with anything: each swizzle width with its own mode and SBO = 8 rows x width agrees,
    a wrong mode or SBO does not, and the unswizzled form needs two 8-element boxes (LBO 1024, SBO 128)."""
    box_k = width // ELEM  # a box as wide as the swizzle (16, 32, 64 FP16); one wgmma reads its first 16 columns
    tma = {(r, k): tma_address(BASE, r, k, box_k, width) for r in range(ROWS) for k in range(K)}
    assert _mismatches(tma, descriptor(BASE, 16, 8 * width, mode)) == []
    assert _mismatches(tma, descriptor(BASE, 16, 8 * width, 0)) != []
    assert _mismatches(tma, descriptor(BASE, 16, 4 * width, mode)) != []


def test_two_unswizzled_boxes_with_lbo_1024_also_agree() -> None:
    """The review's option (b): two 8-element-wide boxes (k0 and k0 + 8) into two 1024-byte halves."""
    tma = {(r, k): BASE + (k // T) * ROWS * 16 + tma_address(0, r, k % T, T, 0) for r in range(ROWS) for k in range(K)}
    assert _mismatches(tma, descriptor(BASE, 1024, 128, 0)) == []
    assert _mismatches(tma, descriptor(BASE, 128, 256, 0)) != []
