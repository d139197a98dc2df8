"""Lab 09 checks accept correct kernels (other valid variants and launch shapes too) and reject the classic
mistakes: missing bounds checks, swapped rows and columns, wrong borders, non-atomic counting, wrong maths."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check, video  # noqa: E402
from labkit.check import lab09  # noqa: E402
from labkit.kernels import video as refk  # noqa: E402


def status(result: check.Result) -> str:
    return result.status


# ----------------------------------------------------------------------------- fused update
@cuda.jit
def fused_blend(frame, bg, mask, alpha, thresh):  # valid variant: (1 - alpha) * bg + alpha * frame
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        f = np.float32(frame[row, col])
        b = bg[row, col]
        mask[row, col] = 1 if (f - b > thresh or b - f > thresh) else 0
        bg[row, col] = (np.float32(1.0) - alpha) * b + alpha * f


@cuda.jit
def fused_no_bounds(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    d = np.float32(frame[row, col]) - bg[row, col]
    mask[row, col] = 1 if abs(d) > thresh else 0
    bg[row, col] = bg[row, col] + alpha * d


@cuda.jit
def fused_swapped(frame, bg, mask, alpha, thresh):
    row, col = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        d = np.float32(frame[row, col]) - bg[row, col]
        mask[row, col] = 1 if abs(d) > thresh else 0
        bg[row, col] = bg[row, col] + alpha * d


@cuda.jit
def fused_update_first(frame, bg, mask, alpha, thresh):  # compares against the already-updated background
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        bg[row, col] = bg[row, col] + alpha * (np.float32(frame[row, col]) - bg[row, col])
        mask[row, col] = 1 if abs(np.float32(frame[row, col]) - bg[row, col]) > thresh else 0


@cuda.jit
def fused_no_abs(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        d = np.float32(frame[row, col]) - bg[row, col]
        mask[row, col] = 1 if d > thresh else 0
        bg[row, col] = bg[row, col] + alpha * d


@cuda.jit
def fused_greater_equal(frame, bg, mask, alpha, thresh):  # `>=` instead of `>`: wrong at |d| == thresh exactly
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = np.float32(frame[row, col]) - b
        mask[row, col] = 1 if abs(d) >= thresh else 0
        bg[row, col] = b + alpha * d


@cuda.jit
def fused_no_update(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        d = np.float32(frame[row, col]) - bg[row, col]
        mask[row, col] = 1 if abs(d) > thresh else 0


@cuda.jit
def fused_empty(frame, bg, mask, alpha, thresh):
    pass


def test_fused_accepts_reference_and_variant() -> None:
    assert check.fused_update(refk.fused_update)
    assert check.fused_update(fused_blend)


@pytest.mark.parametrize("kernel, words", [
    (fused_no_bounds, "bounds check"),
    (fused_swapped, "column"),
    (fused_update_first, "wrong"),
    (fused_no_abs, "wrong"),
    (fused_no_update, "not updated"),
    (fused_greater_equal, "strictly greater"),
])
def test_fused_rejects(kernel, words: str) -> None:
    r = check.fused_update(kernel)
    assert r.status == "failed"
    assert words in (r.message + " " + (r.cause or ""))


def test_fused_skeleton_is_unsolved() -> None:
    assert check.fused_update(fused_empty).status == "unsolved"
    assert check.fused_update(...).status == "unsolved"


# ----------------------------------------------------------------------------- erosion
@cuda.jit
def erode_flat_loops(mask, out):  # valid variant: 9 explicit neighbours, each tested against the frame
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row >= rows or col >= cols:
        return
    v = 1
    for k in range(9):
        r = row + k // 3 - 1
        c = col + k % 3 - 1
        if r >= 0 and r < rows and c >= 0 and c < cols:
            v = min(v, mask[r, c])
    out[row, col] = v


@cuda.jit
def erode_shared(mask, out):  # valid variant: tile + halo in shared memory (blocks up to 32 × 32)
    tile = cuda.shared.array((34, 34), np.uint8)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockDim.x, cuda.blockDim.y
    c0, r0 = cuda.blockIdx.x * bx - 1, cuda.blockIdx.y * by - 1
    rows, cols = mask.shape
    for k in range(ty * bx + tx, (bx + 2) * (by + 2), bx * by):
        lr, lc = k // (bx + 2), k % (bx + 2)
        r, c = r0 + lr, c0 + lc
        tile[lr, lc] = mask[r, c] if 0 <= r < rows and 0 <= c < cols else 1  # outside the frame: ignored (neutral)
    cuda.syncthreads()
    col, row = cuda.grid(2)
    if row < rows and col < cols:
        v = 1
        for dr in range(3):
            for dc in range(3):
                if tile[ty + dr, tx + dc] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_no_bounds(mask, out):
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    v = 1
    for r in range(max(row - 1, 0), min(row + 2, rows)):
        for c in range(max(col - 1, 0), min(col + 2, cols)):
            if mask[r, c] == 0:
                v = 0
    out[row, col] = v


@cuda.jit
def erode_swapped(mask, out):
    row, col = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_outside_is_zero(mask, out):  # wrong border: neighbours outside the frame count as background
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(row - 1, row + 2):
            for c in range(col - 1, col + 2):
                if r < 0 or r >= rows or c < 0 or c >= cols or mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_skip_border(mask, out):  # wrong border: border pixels never written
    col, row = cuda.grid(2)
    rows, cols = mask.shape
    if 0 < row < rows - 1 and 0 < col < cols - 1:
        v = 1
        for r in range(row - 1, row + 2):
            for c in range(col - 1, col + 2):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v


@cuda.jit
def erode_clamped_index(mask, out):  # wrong border: out-of-frame neighbours replaced by the edge pixel... is fine;
    col, row = cuda.grid(2)             # this one instead reads the pixel itself only (no erosion at all)
    if row < mask.shape[0] and col < mask.shape[1]:
        out[row, col] = mask[row, col]


@cuda.jit
def erode_empty(mask, out):
    pass


def test_erode_accepts_reference_and_variants() -> None:
    assert check.erode(refk.erode3x3)
    assert check.erode(erode_flat_loops)
    assert check.erode(erode_shared)


@pytest.mark.parametrize("kernel, words", [
    (erode_no_bounds, "bounds check"),
    (erode_swapped, "column"),
    (erode_outside_is_zero, "outside the frame"),
    (erode_skip_border, "border"),
    (erode_clamped_index, "wrong"),
])
def test_erode_rejects(kernel, words: str) -> None:
    r = check.erode(kernel)
    assert r.status == "failed"
    assert words in (r.message + " " + (r.cause or ""))


def test_erode_skeleton_is_unsolved() -> None:
    assert check.erode(erode_empty).status == "unsolved"


# ----------------------------------------------------------------------------- tile counts
@cuda.jit
def count_global(mask, tile, counts):  # valid variant: one global atomic per foreground pixel
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


@cuda.jit
def count_plain(mask, tile, counts):  # non-atomic: lost updates
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        counts[row // tile, col // tile] += 1


@cuda.jit
def count_no_bounds(mask, tile, counts):
    col, row = cuda.grid(2)
    if mask[row, col] != 0:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


@cuda.jit
def count_swapped(mask, tile, counts):
    row, col = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        cuda.atomic.add(counts, (row // tile, col // tile), 1)


@cuda.jit
def count_shared_no_barrier(mask, tile, counts):  # shared counters merged before every thread has counted
    local = cuda.shared.array((16, 16), np.int32)
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    n = cuda.blockDim.x * cuda.blockDim.y
    tr0 = (cuda.blockIdx.y * cuda.blockDim.y) // tile
    tc0 = (cuda.blockIdx.x * cuda.blockDim.x) // tile
    for k in range(t, 256, n):
        local[k // 16, k % 16] = 0
    cuda.syncthreads()
    col, row = cuda.grid(2)
    if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
        cuda.atomic.add(local, (row // tile - tr0, col // tile - tc0), 1)
    for k in range(t, 256, n):
        if local[k // 16, k % 16] != 0:
            cuda.atomic.add(counts, (tr0 + k // 16, tc0 + k % 16), local[k // 16, k % 16])


@cuda.jit
def count_empty(mask, tile, counts):
    pass


def test_counts_accept_reference_and_variant() -> None:
    assert check.tile_counts(refk.tile_counts)
    assert check.tile_counts(count_global)


@pytest.mark.parametrize("kernel, words", [
    (count_plain, "atomic"),
    (count_no_bounds, "bounds check"),
    (count_swapped, "column"),
    (count_shared_no_barrier, "syncthreads"),
])
def test_counts_reject(kernel, words: str) -> None:
    r = check.tile_counts(kernel)
    assert r.status == "failed", r.message
    assert words in (r.message + " " + (r.cause or ""))


def test_counts_skeleton_is_unsolved() -> None:
    assert check.tile_counts(count_empty).status == "unsolved"


# ----------------------------------------------------------------------------- roofline
def test_fused_roofline() -> None:
    b, i, h100, h200, fps = lab09._fused_roofline()
    assert (b, i, h100, h200) == (10, 0.5, "memory-bound", "memory-bound")
    assert fps == pytest.approx(4800e9 / (10 * 1080 * 1920))
    assert check.fused_roofline(10, 0.5, "memory-bound", "Memory bound", fps)
    assert check.fused_roofline(10, 0.5, "memory-bound", "memory-bound", ...).status == "unsolved"


@pytest.mark.parametrize("args, words", [
    ((6, 5 / 6, "memory-bound", "memory-bound", 1.0), "written back"),
    ((13, 5 / 13, "memory-bound", "memory-bound", 1.0), "uint8"),
    ((10, 2.0, "memory-bound", "memory-bound", 1.0), "upside down"),
    ((10, 0.5, "compute-bound", "memory-bound", 1.0), "ridge point"),
    ((10, 0.5, "memory-bound", "memory-bound", 3350e9 / (10 * 1080 * 1920)), "H100"),
    ((10, 0.5, "memory-bound", "memory-bound", 4800e9 / (1080 * 1920)), "whole frame"),
    ((10, 0.5, "memory-bound", "fast", 1.0), "'memory-bound' or"),
])
def test_fused_roofline_rejects(args, words: str) -> None:
    r = check.fused_roofline(*args)
    assert r.status == "failed"
    assert words in (r.message + " " + (r.cause or ""))


def test_hints_and_references() -> None:
    for ex in ("09.fused-update", "09.erode", "09.tile-counts", "09.fused-roofline"):
        assert len(check.core._get(ex).hints) == 3
        assert check.core._get(ex).reference() is not None
    assert check.core._get("09.erode").reference() is refk.erode3x3
    assert video.reference_kernels().count is refk.tile_counts


# ----------------------------------------------------------------------------- shortcuts that fresh shapes, large blocks and big tiles catch
def _counts_shared(dtype):
    @cuda.jit
    def k(mask, tile, counts):  # per-block shared counters for the tiles the block touches, then one atomic each
        local = cuda.shared.array(128, dtype)
        lin = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        nthreads = cuda.blockDim.x * cuda.blockDim.y
        x0, y0 = cuda.blockIdx.x * cuda.blockDim.x, cuda.blockIdx.y * cuda.blockDim.y
        tr0, tc0 = y0 // tile, x0 // tile
        ncols = (x0 + cuda.blockDim.x - 1) // tile - tc0 + 1
        nrows = (y0 + cuda.blockDim.y - 1) // tile - tr0 + 1
        for j in range(lin, 128, nthreads):
            local[j] = 0
        cuda.syncthreads()
        col, row = cuda.grid(2)
        if row < mask.shape[0] and col < mask.shape[1] and mask[row, col] != 0:
            cuda.atomic.add(local, (row // tile - tr0) * ncols + (col // tile - tc0), 1)
        cuda.syncthreads()
        for j in range(lin, nrows * ncols, nthreads):
            r, c = tr0 + j // ncols, tc0 + j % ncols
            if local[j] != 0 and r < counts.shape[0] and c < counts.shape[1]:
                cuda.atomic.add(counts, (r, c), local[j])

    return k


def test_counts_shared_int32_passes_and_uint8_fails() -> None:
    assert check.tile_counts(_counts_shared(np.int32))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = check.tile_counts(_counts_shared(np.uint8))
    assert r.status == "failed" and "on an array of uint8" in r.message and "narrower than int32" in r.cause, r.message


@cuda.jit
def erode_block_16(mask, out):  # hard-codes 16-thread-wide blocks in its column index
    col = cuda.blockIdx.x * 16 + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    rows, cols = mask.shape
    if row < rows and col < cols:
        v = 1
        for r in range(max(row - 1, 0), min(row + 2, rows)):
            for c in range(max(col - 1, 0), min(col + 2, cols)):
                if mask[r, c] == 0:
                    v = 0
        out[row, col] = v


def test_erode_rejects_fixed_block_width() -> None:
    assert check.erode(erode_block_16).status == "failed"


def test_fused_roofline_strings_and_near_misses() -> None:
    b, i, h100, h200, fps = lab09._fused_roofline()
    r = check.fused_roofline("10", i, h100, h200, fps)
    assert r.status == "failed" and "should be a number, got str" in r.message
    r = check.fused_roofline(b, i, h100, h200, f"{fps:.0f}")
    assert r.status == "failed" and "should be a number, got str" in r.message
    assert check.fused_roofline(b, i, h100, h200, round(fps, -2))  # rounded to 100 frames/s: passes
    for wrong, word in ((fps * 2**30 / 1e9, "2^30"), (fps * 1e9 / 2**30, "2^30"), (fps * 1e-9, "1e9")):
        r = check.fused_roofline(b, i, h100, h200, wrong)
        assert r.status == "failed" and word in r.cause, (wrong, r.cause)
        assert abs(wrong - fps) / fps > 2 * 0.02  # the tolerance lies inside the distance to the slip
