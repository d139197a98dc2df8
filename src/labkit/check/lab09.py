"""Checks for lab 09 (capstone: a video-analytics pipeline): the fused background-update / difference /
threshold kernel, a 3 × 3 erosion with correct borders, per-tile motion counts with atomics, and the roofline
placement of the fused stage.

Kernels are graded on fresh random frames of several shapes (smaller than a block, not multiples of the block,
not square), with more than one launch configuration, poisoned and guarded outputs, and (in ``sim`` mode) the
strict memory model of :mod:`labkit.check.harness`, which turns a plain ``counts[i, j] += 1`` into a reported race.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from labkit import hw
from labkit.kernels import video_pipeline as video

from .answers import number
from .cases import blocks_words, compared, edge_blocks, run_cases
from .core import Failed, exercise
from .harness import (
    CASE_TIME_LIMIT_S,
    Guarded,
    Launch,
    device,
    fmt_shape,
    grade,
    grid_2d,
    launch_strict,
    random_array,
    swapped_coverage,
)
from .slips import unit_cause


def _ref(name: str) -> Callable[[], Any]:
    def get() -> Any:
        from .harness import cuda_module

        cuda_module()  # the mode (and the simulator) first, then numba
        from ..kernels import video as k

        return getattr(k, name)

    return get


SWAPPED = (
    "x = cuda.grid(2)[0] is the column (it runs along a row): `col, row = cuda.grid(2)`, and the bounds test "
    "compares row with shape[0], col with shape[1]. With x as the row, part of a non-square frame is never reached."
)


def _cases_2d() -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(shape, block (x, y)), fresh each run: a mid size that is not a multiple of the block first, a single pixel,
    a frame taller than wide, a wide one, and two blocks of the largest size (32 × 32 = 1024 threads), the second
    partly outside the frame."""
    from .draws import between, not_multiple

    return [
        ((not_multiple(9, 20, 8), not_multiple(20, 45, 16)), (16, 8)),
        ((1, 1), (8, 8)),
        ((not_multiple(17, 30, 8), not_multiple(9, 15, 8)), (8, 8)),
        ((not_multiple(17, 30, 4), not_multiple(33, 60, 32)), (32, 4)),
        ((between(9, 31), not_multiple(33, 40, 32)), (32, 32)),
    ]


def _label(shape: tuple[int, int], block: tuple[int, int]) -> str:
    return f"frame {fmt_shape(shape)}, grid {grid_2d(shape, block)} of blocks {block}"


# ----------------------------------------------------------------------------- 09.fused-update
BG_CAUSE = (
    "the new background is `bg + alpha * (frame - bg)`, with the old bg on the right; "
    "and the difference is taken before the update."
)


def _fused_inputs(shape: tuple[int, int], thresh: float) -> tuple[np.ndarray, np.ndarray]:
    frame = random_array(shape, np.uint8, 0, 256)
    bg = random_array(shape, np.float32, 0.0, 255.0)
    near = np.abs(np.abs(frame.astype(np.float32) - bg) - np.float32(thresh)) < 0.05
    bg[near] += np.float32(0.5)  # keep every |d| clear of the threshold, so rounding cannot flip a pixel
    # ... except some pixels with |d| exactly thresh (integers: exact in float32), where `>` and `>=` differ
    f, b = frame.reshape(-1).astype(np.float32), bg.reshape(-1)
    t = np.float32(thresh)
    idx = np.arange(f.size)
    below, above = (idx % 5 == 1) & (f >= t), (idx % 5 == 3) & (f + t <= 255)
    b[below], b[above] = f[below] - t, f[above] + t
    # a quarter below the threshold (exact in float32): background for `abs(d) > thresh`, foreground if the threshold
    # is cut to a whole number (int(thresh)) or the difference kept in integers
    under = (idx % 5 == 2) & (f >= t)
    b[under] = f[under] - (t - np.float32(0.25))
    return frame, bg


def _mask_cause(
    mask: np.ndarray, frame: np.ndarray, bg: np.ndarray, thresh: float, updated: np.ndarray | None = None
) -> str | None:
    """The slip the wrong ``mask`` matches, computed from the old background ``bg`` (``updated``: the background
    after the update, which a mask must not be compared with)."""
    d = frame.astype(np.float32) - bg
    t = np.float32(thresh)
    if updated is not None and np.array_equal(mask != 0, np.abs(frame.astype(np.float32) - updated) > t):
        return (
            "the mask was computed against the background after its update: compare the frame with the old "
            "background (`d = frame - b` with `b = bg[row, col]` read first), then write `bg[row, col] = b + alpha * d`."
        )
    for cause, cand in (
        (
            "the threshold was cut to a whole number (int(thresh), or an integer d): thresh is a float32 such as 20.5; "
            "compare the float32 difference with it.",
            np.abs(d) > np.float32(int(thresh)),
        ),
        (
            "the difference was rounded to an integer before the comparison: keep d in float32 "
            "(`d = np.float32(frame[row, col]) - bg[row, col]`).",
            np.abs(np.trunc(d)) > t,
        ),
        (
            "the absolute value is missing: a pixel darker than the background by more than thresh is foreground too "
            "(`abs(d) > thresh`).",
            d > t,
        ),
        ("foreground is `abs(d) > thresh`, strictly greater: a pixel exactly at the threshold is 0.", np.abs(d) >= t),
    ):
        if np.array_equal(mask, cand.astype(np.uint8)):
            return cause
    if np.array_equal(mask != 0, np.abs(d) > t):
        return f"the mask holds {int(mask.max())} for foreground: it is 1 (foreground) or 0 (background)."
    return None


@exercise("09.fused-update", kind="kernel", reference=_ref("fused_update"))
def fused_update(kernel: Any) -> str:
    """Grade ``fused(frame, bg, mask, alpha, thresh)``: frame uint8, bg float32 (updated in place), mask uint8
    (1 = foreground), alpha and thresh float32; 2-D grid with x along a row."""
    from .harness import rng
    from .inputs import InputGuard

    cases = _cases_2d()
    # fresh alpha (a float32) and thresholds exact in float32 (so |d| == thresh can be tested): fractional ones
    # (k + 0.5, k + 0.25: int(thresh) is wrong there) and whole ones, alternating
    fractions = (0.5, 0.0, 0.25, 0.0, 0.75)
    params = [
        (float(np.float32(round(rng().uniform(0.02, 0.5), 3))), float(rng().integers(5, 61)) + fractions[k % 5])
        for k in range(len(cases))
    ]
    cases[2] = (cases[2][0], (12, 6))  # a block whose sides are not powers of two
    for k, ((shape, block), (alpha, thresh)) in enumerate(zip(cases, params)):
        frame, bg = _fused_inputs(shape, thresh)
        exp_bg = bg.copy()
        exp_mask = video.fused_step(frame, exp_bg, alpha, thresh)
        label = _label(shape, block) + f", alpha={alpha}, thresh={thresh}"
        g_bg = Guarded(shape, np.float32, fill=bg.ravel())
        g_mask = Guarded(shape, np.uint8)
        names = ("frame", "bg", "mask", "alpha", "thresh")
        d_frame = device(frame)
        guard = InputGuard({"frame": d_frame}, who="your kernel")  # bg is updated in place, as the statement says
        try:
            report = launch_strict(
                kernel,
                grid_2d(shape, block),
                block,
                d_frame,
                g_bg.device,
                g_mask.device,
                np.float32(alpha),
                np.float32(thresh),
                reverse=k == 2,
                names=names,
                time_limit_s=CASE_TIME_LIMIT_S,
            )
            mask, new_bg = g_mask.fetch(), g_bg.fetch()
        except Failed as exc:
            raise Failed(f"{label}: {exc}", cause=exc.cause) from None
        wrote = guard.problem()
        if wrote is not None:
            raise Failed(f"{label}: {wrote}", cause=wrote.cause)
        written = report.written.get("mask") if report is not None else None
        on_edge = np.abs(frame.astype(np.float32) - bg) == np.float32(thresh)
        if mask.shape == exp_mask.shape and np.any(mask != exp_mask) and np.all((mask != exp_mask) <= on_edge):
            raise Failed(
                f"{label}: the mask is 1 where |d| equals thresh exactly.",
                cause="foreground is `abs(d) > thresh`, strictly greater: a pixel exactly at the threshold is 0.",
            )
        compared(
            mask,
            exp_mask,
            lambda: _mask_cause(mask, frame, bg, thresh, exp_bg),
            label=f"{label}, mask",
            unwritten_means_unsolved=k == 0,
            written=written,
            swapped_cause=SWAPPED,
            swapped=swapped_coverage(mask, grid_2d(shape, block), block),
        )
        if np.array_equal(new_bg, bg) and not np.array_equal(exp_bg, bg):
            raise Failed(
                f"{label}: the mask is right but the background was not updated.",
                cause="write the new background back: `bg[row, col] = b + alpha * d`.",
            )
        compared(new_bg, exp_bg, lambda: BG_CAUSE, label=f"{label}, bg", rtol=1e-5, atol=1e-3)
    return (
        f"correct on {len(cases)} fresh frames (non-square, smaller than a block, not multiples of the block, blocks "
        "up to 32×32) with fresh alpha and thresholds; one pass, nothing written outside the frame."
    )


# ----------------------------------------------------------------------------- 09.erode
def _mask(shape: tuple[int, int], p: float, *, binary: bool = True, top: int = 255) -> np.ndarray:
    """A uint8 mask with a share ``p`` of foreground pixels: 1, or (``binary=False``) any value from 1 to ``top``,
    with some 1s, 2s and ``top``s: foreground is any non-zero value, as the statement says. (A uint8 output is
    poisoned with 248: an erosion's masks stop at 200, so that a copied mask value never looks unwritten.)"""
    m = (random_array(shape, np.float32, 0.0, 1.0) < p).astype(np.uint8)
    if not binary:
        values = random_array(shape, np.int32, 1, top + 1).astype(np.uint8)
        flat = values.reshape(-1)
        flat[0::7], flat[1::7], flat[2::7] = top, 2, 1
        m = m * values
    return m


NON_ZERO = (
    "foreground is any non-zero value, not only 1 (this mask holds values up to 200 or 255): test `mask[r, c] == 0` "
    "for background and `!= 0` for foreground, never `== 1`."
)


def _binary_also_fails(kernel: Any, launch: Launch) -> bool:
    """True when the same launch with the mask's foreground set to 1 fails too (so the values were not the cause)."""
    m, *rest = launch.inputs
    try:
        grade(kernel, dataclasses.replace(launch, inputs=((m != 0).astype(np.uint8), *rest)))
    except Failed:
        return True
    return False


@exercise("09.erode", kind="kernel", reference=_ref("erode3x3"))
def erode(kernel: Any) -> str:
    """Grade ``erode(mask, out)``: uint8 0/1 masks; ``out`` = 1 where every neighbour inside the frame is 1."""
    border = (
        "every pixel gets a value, border pixels too: at the edge, use the neighbours that exist (clamp the loops "
        "to the frame) rather than skipping the pixel."
    )
    cases = _cases_2d()

    def launch(case: tuple[int, tuple[tuple[int, int], tuple[int, int]], float]) -> Launch:
        k, (shape, block), p = case
        binary = k in (1, 3)  # the others hold foreground values from 1 to 255
        m = _mask(shape, p, binary=binary, top=200)
        what = f", {int((m != 0).sum())} of {m.size} pixels set" + ("" if binary else " (values 1 to 200)")
        expected = video.erode((m != 0).astype(np.uint8))
        return Launch(grid_2d(shape, block), block, (m,), expected, _label(shape, block) + what, out_shape=shape)

    def failed(case: tuple[int, Any, float], launch: Launch, exc: Failed) -> None:
        import re

        k, shape, (m,) = case[0], launch.out_shape, launch.inputs
        binary = k in (1, 3)
        got = re.search(r"first at index \([^)]*\): expected \d+, got (\d+)", str(exc))
        if got and int(got.group(1)) > 1:
            raise Failed(
                str(exc),
                cause=f"out holds 1 (every neighbour is foreground) or 0, not a mask value such "
                f"as {got.group(1)}: write `out[row, col] = v` with v = 1 or 0.",
            ) from None
        if not binary and "wrote into its input" not in str(exc) and not _binary_also_fails(kernel, launch):
            raise Failed(str(exc), cause=NON_ZERO) from None
        msg, cause = str(exc), exc.cause
        b = (m != 0).astype(np.uint8)
        if (
            "elements are wrong" in msg
            and not np.array_equal(_border_as_zero(b), video.erode(b))
            and _first_on_border(msg, shape)
        ):
            msg += " (On the frame's edge: neighbours outside the frame are ignored, not counted as background.)"
            cause = (
                "the first wrong pixel is on the frame's edge: a neighbour outside the frame is skipped, not "
                "counted as background (that would erode every object touching the edge). Test only the "
                "neighbours with 0 <= r < rows and 0 <= c < cols."
            )
        raise Failed(msg, cause=cause) from None

    erode_cases = [(k, c, p) for k, (c, p) in enumerate(zip(cases, (0.85, 1.0, 0.9, 0.8, 0.9)))]
    options: dict[str, Any] = {
        "names": ("mask", "out"),
        "out_dtype": np.uint8,
        "unwritten_cause": border,
        "swapped_cause": SWAPPED,
    }
    run_cases(kernel, erode_cases, launch, reverse_at=2, failed=failed, **options)
    return (
        f"correct on {len(cases)} fresh masks, border pixels included (neighbours outside the frame ignored), with "
        "blocks of 16×8, 8×8, 32×4 and 32×32."
    )


def _first_on_border(message: str, shape: tuple[int, int]) -> bool:
    """True when the first wrong element a failure names ("first at index (r, c)") lies on the frame's edge."""
    import re

    m = re.search(r"first at index \((\d+), (\d+)\)", message)
    if not m:
        return False
    r, c = int(m.group(1)), int(m.group(2))
    n = re.search(r"(\d+) of \d+ elements are wrong", message)
    edge = 2 * (shape[0] + shape[1]) - 4 if min(shape) > 1 else shape[0] * shape[1]
    return (r in (0, shape[0] - 1) or c in (0, shape[1] - 1)) and (n is None or int(n.group(1)) <= edge)


def _border_as_zero(m: np.ndarray) -> np.ndarray:
    out = video.erode(m)
    out[0, :] = out[-1, :] = 0
    out[:, 0] = out[:, -1] = 0
    return out


# ----------------------------------------------------------------------------- 09.tile-counts
@exercise("09.tile-counts", kind="kernel", reference=_ref("tile_counts"))
def tile_counts(kernel: Any) -> str:
    """Grade ``count(mask, tile, counts)``: counts int32 ``(ceil(rows/tile), ceil(cols/tile))`` start at 0; after
    the kernel each holds its tile's foreground pixels. Tiles of 4 to 32 pixels, blocks of several shapes up to 32 × 32."""
    from .draws import between, not_multiple

    # fresh frames each run, tiles of 4 to 32 pixels, one of them 12 and its block 12 × 20 (not powers of two: a shift
    # in place of a division shows); the last is one block of 32 × 32 threads over one 32 × 32 tile holding more than
    # 255 foreground pixels (a uint8 counter in shared memory wraps)
    cases = [
        ((not_multiple(9, 20, 8), not_multiple(20, 45, 16)), (16, 8), 4),
        ((1, 1), (8, 8), 8),
        ((not_multiple(17, 30, 8), not_multiple(9, 15, 8)), (8, 8), 4),
        ((not_multiple(17, 30, 4), not_multiple(33, 60, 32)), (32, 4), 8),
        ((not_multiple(25, 40, 12), not_multiple(25, 35, 12)), (12, 20), 12),  # 3 block columns at least
        ((between(24, 32), between(24, 32)), (32, 32), 32),
        # more than 65,536 tile rows, then tile columns (a 16-bit tile index wraps): in sim mode only the first and the
        # last blocks along that axis run, the mask is foreground only under them, and every other count must stay 0
        ((not_multiple(4 * 65_600, 4 * 65_700, 8), between(5, 20)), (8, 8), 4),
        ((between(5, 20), not_multiple(4 * 65_600, 4 * 65_700, 8)), (8, 8), 4),
    ]
    binaries = (1, 3, 5, 6, 7)  # the others hold foreground values from 1 to 255

    def launch(case: tuple[int, tuple[tuple[int, int], tuple[int, int], int]]) -> Launch:
        k, (shape, block, tile) = case
        binary = k in binaries
        m = _mask(shape, 1.0 if k == 1 else 0.9 if tile == 32 else 0.5, binary=binary)
        ntiles = (-(-shape[0] // tile), -(-shape[1] // tile))
        label = _label(shape, block) + f", tiles of {tile}×{tile}" + ("" if binary else ", mask values 1 to 255")
        grid = grid_2d(shape, block)
        blocks, pixels = edge_blocks(grid, shape, (block[1], block[0]), lambda bx, by: (by, bx))
        owned = None
        if blocks is not None and pixels is not None:
            m[~pixels] = 0  # foreground only where the blocks that run look
            padded = np.zeros((ntiles[0] * tile, ntiles[1] * tile), dtype=bool)
            padded[: shape[0], : shape[1]] = pixels
            owned = padded.reshape(ntiles[0], tile, ntiles[1], tile).any(axis=(1, 3))
            label += blocks_words(blocks)
        expected = video.tile_counts((m != 0).astype(np.uint8), tile)
        return Launch(grid, block, (m, tile), expected, label, out_shape=ntiles, blocks=blocks, owned=owned)

    def failed(case: tuple[int, Any], launch: Launch, exc: Failed) -> None:
        binary = case[0] in binaries
        if not binary and "wrote into its input" not in str(exc) and not _binary_also_fails(kernel, launch):
            raise Failed(str(exc), cause=NON_ZERO) from None

    extra = "(Tile (i, j) holds rows i·tile … i·tile + tile − 1 and the same columns; x is the column.)"
    options: dict[str, Any] = {"names": ("mask", "tile", "counts"), "out_dtype": np.int32, "out_init": 0, "extra_cause": extra}
    run_cases(kernel, list(enumerate(cases)), launch, reverse_at=2, failed=failed, **options)
    return (
        f"correct on {len(cases)} fresh masks with tiles of 4 to 32 (one holding more than 255 pixels, and more than "
        "65,536 tile rows or columns: in the simulator only the first and last blocks of those) and blocks of 8×8 to "
        "32×32 threads; every update atomic, none lost."
    )


# ----------------------------------------------------------------------------- 09.fused-roofline
FRAME = (1080, 1920)


def _fused_roofline() -> tuple[float, float, str, str, float]:
    s = video.stage("fused")
    h100 = hw.gpu("H100").peak("fp32").value / hw.gpu("H100").memory_bandwidth.value * 1e3
    h200 = hw.gpu("H200").peak("fp32").value / hw.gpu("H200").memory_bandwidth.value * 1e3
    bound = lambda ridge: "memory-bound" if s.intensity < ridge else "compute-bound"  # noqa: E731
    fps = hw.gpu("H200").memory_bandwidth.value * 1e9 / (s.bytes_per_pixel * FRAME[0] * FRAME[1])
    return s.bytes_per_pixel, s.intensity, bound(h100), bound(h200), fps


def _bound(x: Any, what: str) -> str:
    if not isinstance(x, str):
        raise Failed(f"{what} should be the string 'memory-bound' or 'compute-bound', got {x!r}.")
    t = x.strip().lower().replace("_", "-").replace(" ", "-")
    if t in ("memory", "memory-bound", "bandwidth-bound"):
        return "memory-bound"
    if t in ("compute", "compute-bound"):
        return "compute-bound"
    raise Failed(f"{what} should be 'memory-bound' or 'compute-bound', got {x!r}.")


def _near(a: float, b: float, rel: float = 0.02) -> bool:
    return abs(a - b) <= rel * abs(b)


@exercise("09.fused-roofline", kind="numeric", reference=_fused_roofline)
def fused_roofline(bytes_per_pixel: Any, intensity: Any, bound_h100: Any, bound_h200: Any, fps_h200: Any) -> str:
    """Five answers for the fused step on 1080p frames: bytes per pixel, intensity (ops/byte), the bound on the
    H100 and on the H200 (``'memory-bound'`` or ``'compute-bound'``), and the frames per second the H200's
    memory bandwidth allows."""
    e_bytes, e_int, e_h100, e_h200, e_fps = _fused_roofline()
    b = number(bytes_per_pixel, "bytes_per_pixel", positive=True)
    if not _near(b, e_bytes):
        slips = {
            6: "the background is written back too: count bg twice (read and write), 4 bytes each.",
            9: "the mask is written: 1 byte per pixel.",
            5: "count writes as well as reads: the mask and the updated background go back to memory.",
            13: "the frame is uint8: 1 byte per pixel, not 4.",
            16: "the frame and the mask are uint8 (1 byte each); only bg is float32.",
            2: "bg is float32 and is read and written: 8 bytes per pixel on top of frame and mask.",
        }
        cause = (
            next((c for v, c in slips.items() if _near(b, v)), None)
            or unit_cause(b, e_bytes)
            or "add up the dtype sizes of what is read and written per pixel."
        )
        raise Failed(f"bytes_per_pixel = {b:g}: not what the fused step moves.", cause=cause)
    i = number(intensity, "intensity", positive=True)
    if _near(i, 1 / e_int):
        raise Failed(f"intensity = {i:g}: upside down.", cause="intensity is operations per byte: ops / bytes.")
    if not _near(i, e_int):
        raise Failed(
            f"intensity = {i:g} ops/byte, expected {video.stage('fused').ops_per_pixel:g} / {e_bytes:g}.",
            cause=unit_cause(i, e_int)
            or "divide the operations per pixel (video.stage('fused').ops_per_pixel) by your bytes per pixel.",
        )
    for got, exp, gpu in ((bound_h100, e_h100, "H100"), (bound_h200, e_h200, "H200")):
        if _bound(got, f"bound_{gpu.lower()}") != exp:
            raise Failed(
                f"bound_{gpu.lower()}: the fused step is not {got} on the {gpu}.",
                cause=f"compare the intensity with the {gpu}'s ridge point (roofline('{gpu}').ridge_point, "
                "FP32): below it, memory bandwidth is the limit.",
            )
    f = number(fps_h200, "fps_h200", positive=True)
    if not _near(f, e_fps):
        h100_fps = hw.gpu("H100").memory_bandwidth.value * 1e9 / (e_bytes * FRAME[0] * FRAME[1])
        slips = {
            h100_fps: "that is the H100's bandwidth; use the H200's.",
            e_fps * e_bytes: "divide by the bytes of a whole frame: bytes_per_pixel × 1080 × 1920.",
            e_fps * 1e-9: "GB/s is 1e9 bytes per second: multiply the bandwidth by 1e9.",
            e_fps * 2**30 / 1e9: "GB/s here is 10^9 bytes/s, not 2^30.",
            e_fps * 1e9 / 2**30: "GB/s here is 10^9 bytes/s, not 2^30.",
        }
        cause = (
            next((c for v, c in slips.items() if _near(f, v)), None)
            or unit_cause(f, e_fps)
            or "frames/s = bandwidth (bytes/s) / bytes per frame (bytes_per_pixel × 1080 × 1920)."
        )
        raise Failed(f"fps_h200 = {f:,.0f}: not what the H200's memory bandwidth allows.", cause=cause)
    ridge = hw.gpu("H200").peak("fp32").value / hw.gpu("H200").memory_bandwidth.value * 1e3
    return (
        f"{e_bytes:g} B and {video.stage('fused').ops_per_pixel:g} ops per pixel: {e_int:.2f} ops/B, far below the "
        f"ridge points (H200 {ridge:.1f}): memory-bound on both. At 1080p the H200's HBM allows {e_fps:,.0f} frames/s "
        "for this stage (a model, not a measurement)."
    )
