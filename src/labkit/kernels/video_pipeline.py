"""A smart-surveillance video pipeline for the capstone (lab 09): synthetic video, a NumPy reference, costs, timing.

The pipeline finds moving things in a fixed camera's view, one greyscale frame at a time:

1. **fused step** (one pass over the frame): ``d = frame - bg``; ``mask = |d| > thresh``; ``bg += alpha * d``.
   The background model ``bg`` (float32) is a running average, so slow lighting changes fade into it while
   anything that moves stands out;
2. **opening**: a 3 × 3 erosion (removes isolated noise pixels) then a 3 × 3 dilation (restores the shapes).
   Only pixels inside the frame count: erosion ignores neighbours outside the frame (an object touching the
   edge is not eaten), dilation likewise;
3. **tile counts**: the number of foreground pixels in each ``tile × tile`` tile of a coarse grid;
4. **regions** (on the host, tiny): tiles with enough motion, grouped into 4-connected regions, give boxes.

Costs for the roofline (:data:`STAGES`) count bytes moved to and from GPU memory per pixel in the ideal case
(every input read once, every output written once) and operations per pixel with this convention: an add,
subtract, multiply, absolute value, comparison or min/max counts 1, a fused multiply-add 2. The 3 × 3 stages
and the counts do integer operations; they are placed against the FP32 roof, which is an approximation.

Everything here is NumPy unless a function says it launches kernels; importing this module imports no numba.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from labkit.errors import LabkitError
from labkit.figstyle import count_axis
from labkit.validate import require_array, require_int, require_items, require_number, require_sequence

Box = tuple[int, int, int, int]  # (row0, row1, col0, col1), ends exclusive

ALPHA = 0.05  # background learning rate per frame
THRESH = 25.0  # grey levels a pixel must differ from the background to count as foreground
TILE = 8  # side of a motion-count tile, in pixels


# ============================================================================= synthetic video
@dataclass(frozen=True)
class Video:
    """Frames ``(n, rows, cols)`` uint8 and, per frame, the true boxes of the moving objects."""

    frames: np.ndarray
    truth: list[list[Box]]
    background: np.ndarray  # the static scene (float32), without noise or drift
    seed: int

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.frames.shape[1]), int(self.frames.shape[2])

    def __len__(self) -> int:
        return int(self.frames.shape[0])


#: The largest frame side labkit makes or times (an 8K frame is 7680 × 4320).
MAX_SIDE = 16384


def _pair(value: Any, name: str, *, min: int = 1, max: int | None = None, fix: str | None = None) -> tuple[int, int]:
    """Two whole numbers (a shape or a block), each checked."""
    a, b = require_sequence(value, name, min_len=2, max_len=2, what="a pair of whole numbers", fix=fix)
    return require_int(a, f"{name}[0]", min=min, max=max, fix=fix), require_int(b, f"{name}[1]", min=min, max=max, fix=fix)


def _shape(shape: Any) -> tuple[int, int]:
    try:
        rows, cols = _pair(shape, "shape", min=-(2**63), max=MAX_SIDE)
    except LabkitError:
        raise LabkitError(
            f"a frame shape is (rows, cols) of at most {MAX_SIDE} each, got {shape!r}.",
            fix="e.g. shape=(32, 48) or (1080, 1920).",
        ) from None
    if rows < 8 or cols < 8:
        raise LabkitError(f"frames must be at least 8 × 8 pixels, got {rows} × {cols}.")
    return rows, cols


def synthetic_video(
    n_frames: int,
    shape: Sequence[int] = (32, 48),
    *,
    seed: int = 0,
    n_objects: int = 3,
    noise: float = 3.0,
    drift: float = 0.4,
    empty_frames: int = 1,
) -> Video:
    """A fixed camera's view: a static scene, sensor noise (σ = ``noise`` grey levels), a global lighting
    drift of ``drift`` grey levels per frame, and ``n_objects`` "people" (rectangles brighter or darker than
    the scene) walking at constant speed and turning at the edges. The first ``empty_frames`` frames show the
    scene without anyone in it (the pipeline learns its background from them). The same ``seed`` gives the same video.
    """
    n_frames = require_int(n_frames, "n_frames", min=1, max=100_000)
    n_objects = require_int(n_objects, "n_objects", min=0, max=1000)
    seed = require_int(seed, "seed", min=0)
    noise = require_number(noise, "noise", min=0, max=255)
    drift = require_number(drift, "drift", min=-255, max=255)
    empty_frames = require_int(empty_frames, "empty_frames", min=0)
    rows, cols = _shape(shape)
    if n_frames * rows * cols > 2**30:
        raise LabkitError(
            f"{n_frames} frames of {rows} × {cols} pixels is more than labkit makes (at most 2**30 pixels, 1 GiB).",
            fix="Use fewer or smaller frames.",
        )
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:rows, 0:cols].astype(np.float32)
    scene = 70 + 40 * xx / cols + 20 * yy / rows  # a lit wall: a gentle gradient
    for _ in range(4):  # static structures: doors, benches, windows
        h, w = rng.integers(rows // 8, rows // 3 + 1), rng.integers(cols // 8, cols // 3 + 1)
        r, c = rng.integers(0, rows - h + 1), rng.integers(0, cols - w + 1)
        scene[r : r + h, c : c + w] += rng.choice([-25.0, 25.0])
    scene = scene.astype(np.float32)
    oh, ow = max(3, rows // 5), max(2, cols // 10)  # people are taller than wide
    pos = np.column_stack([rng.uniform(0, rows - oh, n_objects), rng.uniform(0, cols - ow, n_objects)])
    speed = rng.uniform(0.03, 0.06, (n_objects, 2)) * np.array([rows, cols]) * rng.choice([-1, 1], (n_objects, 2))
    level = rng.choice([225.0, 10.0], n_objects)
    frames = np.empty((n_frames, rows, cols), np.uint8)
    truth: list[list[Box]] = []
    for t in range(n_frames):
        img = scene + np.float32(drift * t)
        boxes = []
        for k in range(n_objects if t >= empty_frames else 0):
            r, c = int(round(pos[k, 0])), int(round(pos[k, 1]))
            img[r : r + oh, c : c + ow] = level[k]
            boxes.append((r, r + oh, c, c + ow))
        img += rng.normal(0.0, noise, (rows, cols)).astype(np.float32)
        frames[t] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
        truth.append(boxes)
        if t < empty_frames:
            continue
        pos += speed
        for axis, limit in ((0, rows - oh), (1, cols - ow)):  # turn at the edges
            low, high = pos[:, axis] < 0, pos[:, axis] > limit
            speed[low | high, axis] *= -1
            pos[:, axis] = np.clip(pos[:, axis], 0, limit)
    return Video(frames, truth, scene, seed)


# ============================================================================= the NumPy reference
def fused_step(frame: np.ndarray, bg: np.ndarray, alpha: float = ALPHA, thresh: float = THRESH) -> np.ndarray:
    """The fused step on the host: returns the uint8 mask (1 = foreground) and updates ``bg`` (float32) in place.

    ``d = float32(frame) - bg``; ``mask = |d| > thresh``; ``bg = bg + alpha * d`` (all in float32).
    """
    frame = require_array(frame, "frame", ndim=2)
    if not isinstance(bg, np.ndarray) or bg.dtype != np.float32 or bg.shape != frame.shape:
        raise LabkitError(
            f"bg must be a float32 NumPy array of the frame's shape {frame.shape} (it is updated in place), "
            f"got {type(bg).__name__} {getattr(bg, 'dtype', '')} {getattr(bg, 'shape', '')}.",
            fix="e.g. bg = frames[0].astype(np.float32).",
        )
    alpha = require_number(alpha, "alpha", min=0, max=1)
    thresh = require_number(thresh, "thresh")
    d = frame.astype(np.float32) - bg
    mask = (np.abs(d) > np.float32(thresh)).astype(np.uint8)
    bg += np.float32(alpha) * d
    return mask


def _window(mask: np.ndarray, pad: int, op: Any) -> np.ndarray:
    rows, cols = mask.shape
    p = np.pad(mask, 1, constant_values=pad)
    out = p[1 : rows + 1, 1 : cols + 1].copy()
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            out = op(out, p[1 + dr : rows + 1 + dr, 1 + dc : cols + 1 + dc])
    return out


def erode(mask: np.ndarray) -> np.ndarray:
    """3 × 3 erosion of a 0/1 mask: 1 where every neighbour *inside the frame* is 1 (outside is ignored)."""
    return _window(np.asarray(require_array(mask, "mask", ndim=2), np.uint8), 1, np.minimum)


def dilate(mask: np.ndarray) -> np.ndarray:
    """3 × 3 dilation of a 0/1 mask: 1 where any neighbour inside the frame is 1."""
    return _window(np.asarray(require_array(mask, "mask", ndim=2), np.uint8), 0, np.maximum)


def tile_counts(mask: np.ndarray, tile: int = TILE) -> np.ndarray:
    """int32 ``(ceil(rows / tile), ceil(cols / tile))``: foreground pixels per tile (the last tiles may be partial)."""
    mask = require_array(mask, "mask", ndim=2)
    tile = require_int(tile, "tile", min=1, max=MAX_SIDE)
    rows, cols = mask.shape
    tr, tc = -(-rows // tile), -(-cols // tile)
    p = np.zeros((tr * tile, tc * tile), np.int32)
    p[:rows, :cols] = mask
    return p.reshape(tr, tile, tc, tile).sum(axis=(1, 3)).astype(np.int32)


def regions(counts: np.ndarray, tile: int, shape: tuple[int, int], min_count: int | None = None) -> list[Box]:
    """Boxes (in pixels) of the 4-connected groups of tiles holding at least ``min_count`` foreground pixels
    (default: a quarter of a tile). A breadth-first labelling on the coarse grid: cheap, so it runs on the host."""
    counts = require_array(counts, "counts", ndim=2)
    tile = require_int(tile, "tile", min=1, max=MAX_SIDE)
    shape = _pair(shape, "shape", min=1)
    min_count = max(1, tile * tile // 4) if min_count is None else require_int(min_count, "min_count")
    active = counts >= min_count
    seen = np.zeros_like(active)
    boxes: list[Box] = []
    for start in zip(*np.nonzero(active)):
        if seen[start]:
            continue
        seen[start] = True
        queue, r0, r1, c0, c1 = deque([start]), start[0], start[0], start[1], start[1]
        while queue:
            r, c = queue.popleft()
            r0, r1, c0, c1 = min(r0, r), max(r1, r), min(c0, c), max(c1, c)
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= nr < active.shape[0] and 0 <= nc < active.shape[1] and active[nr, nc] and not seen[nr, nc]:
                    seen[nr, nc] = True
                    queue.append((nr, nc))
        boxes.append((int(r0 * tile), int(min((r1 + 1) * tile, shape[0])), int(c0 * tile), int(min((c1 + 1) * tile, shape[1]))))
    return boxes


@dataclass
class PipelineResult:
    """What the pipeline found: raw and opened masks, tile counts and boxes per frame."""

    raw: np.ndarray  # (n, rows, cols) uint8, after the fused step
    masks: np.ndarray  # (n, rows, cols) uint8, after the opening
    counts: np.ndarray  # (n, tile rows, tile cols) int32
    boxes: list[list[Box]]
    tile: int
    how: str = "NumPy reference"
    background: np.ndarray | None = field(default=None, repr=False)  # the background model after the last frame

    @property
    def motion_pixels(self) -> np.ndarray:
        """Foreground pixels per frame (after the opening)."""
        return self.counts.sum(axis=(1, 2))

    def summary(self) -> str:
        n = len(self.boxes)
        found = sum(len(b) for b in self.boxes)
        return (
            f"{self.how}: {n} frames of {self.masks.shape[1]}×{self.masks.shape[2]}, {found} motion regions in all, "
            f"{int(self.motion_pixels.sum())} foreground pixels after the opening"
        )


def _frames(frames: Any) -> np.ndarray:
    arr = frames.frames if isinstance(frames, Video) else np.asarray(frames)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.dtype != np.uint8:
        raise LabkitError(
            f"frames must be uint8 (n, rows, cols), got {arr.dtype} with shape {arr.shape}.",
            fix="Use synthetic_video(...).frames, or convert with .astype(np.uint8).",
        )
    return arr


def run_reference(
    frames: Any, *, alpha: float = ALPHA, thresh: float = THRESH, tile: int = TILE, min_count: int | None = None
) -> PipelineResult:
    """Run the whole pipeline in NumPy on the host. The background model starts as the first frame."""
    arr = _frames(frames)
    bg = arr[0].astype(np.float32)
    raw = np.empty_like(arr)
    masks = np.empty_like(arr)
    counts = []
    boxes = []
    for t, frame in enumerate(arr):
        raw[t] = fused_step(frame, bg, alpha, thresh)
        masks[t] = dilate(erode(raw[t]))
        counts.append(tile_counts(masks[t], tile))
        boxes.append(regions(counts[-1], tile, arr.shape[1:], min_count))
    return PipelineResult(raw, masks, np.array(counts, np.int32), boxes, tile, background=bg)


# ============================================================================= the kernel pipeline
@dataclass(frozen=True)
class Kernels:
    """The four ``@cuda.jit`` kernels of the pipeline, with the signatures the lab uses:

    ``fused(frame u8[:,:], bg f32[:,:], mask u8[:,:], alpha f32, thresh f32)``, ``erode(mask, out)``,
    ``dilate(mask, out)``, ``count(mask, tile int, counts i32[:,:])`` (counts start at zero).
    """

    fused: Any
    erode: Any
    dilate: Any
    count: Any


def reference_kernels() -> Kernels:
    """labkit's reference kernels (needs :func:`labkit.setup` to have run: it imports numba)."""
    from labkit.mode import cuda_module

    cuda_module()
    from labkit.kernels import video as k

    return Kernels(k.fused_update, k.erode3x3, k.dilate3x3, k.tile_counts)


def grid_for(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Blocks of ``block = (x, y)`` threads to cover ``shape = (rows, cols)``: x runs along a row."""
    shape = _pair(shape, "shape", fix="shape is (rows, cols), e.g. (1080, 1920).")
    block = _pair(block, "block", max=1024, fix="block is (x, y) threads, e.g. (16, 16).")
    return (-(-shape[1] // block[0]), -(-shape[0] // block[1]))


class _Launcher:
    """Device buffers for one frame size and the launches of each stage (used by the runner and the timings)."""

    def __init__(self, kernels: Kernels, shape: tuple[int, int], *, block: tuple[int, int], tile: int) -> None:
        from labkit.mode import cuda_module

        self.cuda = cuda = cuda_module()
        self.k, self.shape, self.block, self.tile = kernels, shape, tuple(block), tile
        self.grid = grid_for(shape, self.block)
        self.raw = cuda.device_array(shape, np.uint8)
        self.tmp = cuda.device_array(shape, np.uint8)
        self.opened = cuda.device_array(shape, np.uint8)
        self.ntiles = (-(-shape[0] // tile), -(-shape[1] // tile))
        self.counts = cuda.to_device(np.zeros(self.ntiles, np.int32))
        self.zeros = cuda.to_device(np.zeros(self.ntiles, np.int32))

    def fused(self, frame: Any, bg: Any, alpha: float, thresh: float) -> None:
        self.k.fused[self.grid, self.block](frame, bg, self.raw, np.float32(alpha), np.float32(thresh))

    def erode(self) -> None:
        self.k.erode[self.grid, self.block](self.raw, self.tmp)

    def dilate(self) -> None:
        self.k.dilate[self.grid, self.block](self.tmp, self.opened)

    def count(self) -> None:
        self.counts.copy_to_device(self.zeros)
        self.k.count[self.grid, self.block](self.opened, self.tile, self.counts)


def run_kernels(
    frames: Any,
    kernels: Kernels | None = None,
    *,
    alpha: float = ALPHA,
    thresh: float = THRESH,
    tile: int = TILE,
    block: tuple[int, int] = (16, 16),
    min_count: int | None = None,
) -> PipelineResult:
    """Run the pipeline with CUDA kernels (on the GPU, or in the simulator): all frames go to the device in one
    copy, the background model stays there, each frame's masks and counts come back. ``kernels`` default to
    :func:`reference_kernels`."""
    arr = _frames(frames)
    ks = kernels or reference_kernels()
    shape = (int(arr.shape[1]), int(arr.shape[2]))
    run = _Launcher(ks, shape, block=block, tile=tile)
    cuda = run.cuda
    d_frames = cuda.to_device(arr)  # one batched host-to-device copy
    bg = cuda.to_device(arr[0].astype(np.float32))
    raw, masks, counts, boxes = np.empty_like(arr), np.empty_like(arr), [], []
    for t in range(arr.shape[0]):
        run.fused(d_frames[t], bg, alpha, thresh)
        run.erode()
        run.dilate()
        run.count()
        raw[t], masks[t] = run.raw.copy_to_host(), run.opened.copy_to_host()
        counts.append(run.counts.copy_to_host())
        boxes.append(regions(counts[-1], tile, shape, min_count))
    from labkit.mode import current_mode

    how = "CUDA kernels on the GPU" if current_mode() == "gpu" else "CUDA kernels in the simulator"
    return PipelineResult(raw, masks, np.array(counts, np.int32), boxes, tile, how=how, background=bg.copy_to_host())


def compare_results(got: PipelineResult, expected: PipelineResult) -> str:
    """One line: do two runs agree (masks, counts, boxes)? Raises :class:`LabkitError` where they differ."""
    for name, value in (("got", got), ("expected", expected)):
        if not isinstance(value, PipelineResult):
            raise LabkitError(
                f"{name} must be a PipelineResult (what run_kernels() or run_reference() returns), got {value!r:.60}."
            )
    for name in ("raw", "masks", "counts"):
        a, b = getattr(got, name), getattr(expected, name)
        if a.shape != b.shape or not np.array_equal(a, b):
            bad = np.argwhere(a != b)[0] if a.shape == b.shape else None
            raise LabkitError(
                f"{got.how} and {expected.how} differ in {name}" + (f" first at {tuple(bad)}" if bad is not None else "") + "."
            )
    if got.boxes != expected.boxes:
        raise LabkitError(f"{got.how} and {expected.how} found different boxes.")
    return f"{got.how} agree with the {expected.how} on every mask, count and box ({len(got.boxes)} frames)."


# ============================================================================= costs and the roofline
@dataclass(frozen=True)
class Stage:
    """A stage's ideal traffic to GPU memory and its operations, per pixel (see the module docstring)."""

    name: str
    bytes_per_pixel: float
    ops_per_pixel: float
    what: str

    @property
    def intensity(self) -> float:
        """Operations per byte."""
        return self.ops_per_pixel / self.bytes_per_pixel

    def bytes(self, pixels: int) -> float:
        return self.bytes_per_pixel * pixels

    def ops(self, pixels: int) -> float:
        return self.ops_per_pixel * pixels


#: The stages in pipeline order. Count tiles: the int32 counters are a few bytes per tile, left out.
STAGES: dict[str, Stage] = {
    "fused": Stage(
        "fused update + diff + threshold",
        1 + 4 + 4 + 1,
        5,
        "reads frame (u8) and bg (f32), writes bg (f32) and mask (u8); sub, abs, compare, mul, add",
    ),
    "erode": Stage("erode 3×3", 1 + 1, 8, "reads mask, writes mask (u8); 8 min"),
    "dilate": Stage("dilate 3×3", 1 + 1, 8, "reads mask, writes mask (u8); 8 max"),
    "count": Stage("tile counts", 1, 1, "reads mask (u8); 1 add per pixel (the counters are negligible)"),
}

#: Host-to-device bytes per pixel: the uint8 frame.
TRANSFER_BYTES_PER_PIXEL = 1


def stage(name: str) -> Stage:
    """A :class:`Stage` by key (``fused``, ``erode``, ``dilate``, ``count``), with a did-you-mean."""
    if not isinstance(name, str):
        raise LabkitError(f"a stage is named by a string, got {name!r:.60}.", fix=f"Stages: {', '.join(STAGES)}.")
    if name not in STAGES:
        import difflib

        close = difflib.get_close_matches(name, STAGES, n=1)
        raise LabkitError(
            f"there is no stage {name!r}." + (f" Did you mean {close[0]!r}?" if close else ""),
            fix=f"Stages: {', '.join(STAGES)}.",
        )
    return STAGES[name]


def stage_table(gpu_name: str = "H200", precision: str = "fp32") -> str:
    """Per stage: bytes and operations per pixel, intensity, and the roofline's verdict on ``gpu_name`` (a model)."""
    from labkit.hw.roofline import roofline

    r = roofline(gpu_name, precision)
    rows = [f"{'stage':<34} {'B/px':>5} {'ops/px':>6} {'ops/B':>6}  on {r.gpu} (model, ridge {r.ridge_point:.1f})"]
    for s in STAGES.values():
        rows.append(f"{s.name:<34} {s.bytes_per_pixel:>5g} {s.ops_per_pixel:>6g} {s.intensity:>6.2f}  {r.bound(s.intensity)}")
    return "\n".join(rows)


def time_stages(
    kernels: Kernels | None = None,
    shape: tuple[int, int] = (32, 48),
    *,
    block: tuple[int, int] = (16, 16),
    tile: int = TILE,
    repeat: int | None = None,
    seed: int = 1,
) -> list[Any]:
    """Time each stage's kernel on one frame of ``shape`` with :func:`labkit.bench.measure` (CUDA events on a GPU,
    CPU time of the simulator otherwise, labelled so). Each :class:`~labkit.bench.Timing` carries the stage's bytes
    and operations, so on a GPU it reports GB/s and percent of the HBM peak."""
    from labkit.gpu import bench
    from labkit.mode import current_mode

    gpu = current_mode() == "gpu"
    repeat = repeat or (20 if gpu else 1)
    warmup = 2 if gpu else 0
    ks = kernels or reference_kernels()
    shape = _shape(shape)
    run = _Launcher(ks, shape, block=block, tile=tile)
    frames = synthetic_video(2, shape, seed=seed).frames
    frame = run.cuda.to_device(frames[1])
    bg = run.cuda.to_device(frames[0].astype(np.float32))
    run.fused(frame, bg, ALPHA, THRESH)  # fill the masks once (and compile the kernels) before timing
    run.erode()
    run.dilate()
    px = shape[0] * shape[1]
    out = []
    for key, fn in (
        ("fused", lambda: run.fused(frame, bg, ALPHA, THRESH)),
        ("erode", run.erode),
        ("dilate", run.dilate),
        ("count", run.count),
    ):
        s = STAGES[key]
        t = bench.measure(fn, name=s.name, bytes=s.bytes(px), repeat=repeat, warmup=warmup)
        out.append(t)
    return out


def time_reference(shape: tuple[int, int] = (32, 48), *, tile: int = TILE, repeat: int = 5, seed: int = 1) -> list[Any]:
    """Time each NumPy stage on the host (wall clock; labelled CPU time in either mode)."""
    import time

    from labkit.gpu.bench import Timing

    shape = _shape(shape)
    frames = synthetic_video(2, shape, seed=seed).frames
    bg = frames[0].astype(np.float32)
    mask = fused_step(frames[1], bg.copy())
    eroded = erode(mask)
    opened = dilate(eroded)
    px = shape[0] * shape[1]
    calls = {
        "fused": lambda: fused_step(frames[1], bg.copy()),
        "erode": lambda: erode(mask),
        "dilate": lambda: dilate(eroded),
        "count": lambda: tile_counts(opened, tile),
    }
    out = []
    for key, fn in calls.items():
        fn()
        samples = []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        s = STAGES[key]
        out.append(
            Timing(name=f"{s.name} (NumPy)", samples_s=tuple(samples), mode="cpu", device="CPU (NumPy)", bytes=s.bytes(px))
        )
    return out


def roofline_points(timings: Sequence[Any] | None = None) -> list[tuple[str, float, float | None]]:
    """``(name, intensity, measured TOPS or None)`` per stage for :func:`labkit.roofline.roofline_figure`.

    Measured rates are used only for GPU timings; simulator or CPU timings give ``None`` (the model's bound)."""
    from labkit.gpu.bench import Timing

    timings = [] if timings is None else require_items(timings, "timings", Timing, what="the timings time_stages() returned")
    by_name = {t.name: t for t in timings if getattr(t, "mode", None) == "gpu"}
    pts = []
    for s in STAGES.values():
        t = by_name.get(s.name)
        measured = None
        if t is not None and t.bytes:
            pixels = t.bytes / s.bytes_per_pixel
            measured = s.ops(int(pixels)) / t.median_s / 1e12
        pts.append((s.name, s.intensity, measured))
    return pts


def roofline_figure(gpu_name: str = "H200", timings: Sequence[Any] | None = None) -> Any:
    """The stages on the FP32 roofline of ``gpu_name``: hollow markers are the model's bound, filled dots
    measured GPU rates (only from GPU timings)."""
    from labkit.hw import roofline as rl

    pts = roofline_points(timings)
    fig = rl.roofline_figure(gpu_name, "fp32", kernels=pts, intensity_range=(0.05, 1000.0))
    measured = any(m is not None for _, _, m in pts)
    fig.update_layout(
        title=f"Pipeline stages on the {rl.roofline(gpu_name).gpu} roofline "
        f"({'measured on this GPU' if measured else 'model only: no GPU measurement'})"
    )
    return fig


# ============================================================================= figures
def frames_figure(video: Video | np.ndarray, result: PipelineResult | None = None, index: int = -1) -> Any:
    """Plotly heatmaps of one frame: the image (with true boxes dashed and found boxes solid, when given), the
    foreground mask after the opening, and the tile counts."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    arr = _frames(video)
    t = range(arr.shape[0])[index]
    panels = 1 if result is None else 3
    titles = [f"frame {t}"] + (
        [] if result is None else ["foreground (after opening)", f"motion per {result.tile}×{result.tile} tile"]
    )
    fig = make_subplots(rows=1, cols=panels, subplot_titles=titles, horizontal_spacing=0.06)
    fig.add_trace(go.Heatmap(z=arr[t], colorscale="gray", zmin=0, zmax=255, showscale=False), 1, 1)
    if result is not None:
        fig.add_trace(go.Heatmap(z=result.masks[t], colorscale="gray", zmin=0, zmax=1, showscale=False), 1, 2)
        fig.add_trace(go.Heatmap(z=result.counts[t], colorscale="Viridis", showscale=False), 1, 3)
    truth = video.truth[t] if isinstance(video, Video) else []
    found = result.boxes[t] if result is not None else []
    for boxes, style in ((truth, {"color": "deepskyblue", "dash": "dash"}), (found, {"color": "red"})):
        for r0, r1, c0, c1 in boxes:
            fig.add_shape(type="rect", x0=c0 - 0.5, x1=c1 - 0.5, y0=r0 - 0.5, y1=r1 - 0.5, line=style, row=1, col=1)
    for k in range(1, panels + 1):
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{'' if k == 1 else k}", row=1, col=k)
    # the figure's title sits above the panel titles, with room between them
    fig.update_layout(
        template="plotly_white",
        height=360 if result is not None else 320,
        margin={"t": 80 if result is not None else 40, "b": 10, "l": 10, "r": 10},
        title={"text": "dashed: true objects; solid: what the pipeline found", "y": 0.97, "yanchor": "top"}
        if result is not None
        else None,
    )
    fig.update_annotations(font_size=12)
    return fig


def activity_figure(result: PipelineResult) -> Any:
    """Foreground pixels and motion regions per frame."""
    import plotly.graph_objects as go

    if not isinstance(result, PipelineResult):
        raise LabkitError(f"result must be a PipelineResult (what run_kernels() or run_reference() returns), got {result!r:.60}.")
    n = np.arange(len(result.boxes))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=n, y=result.motion_pixels, name="foreground pixels"))
    fig.add_trace(go.Scatter(x=n, y=[len(b) for b in result.boxes], name="motion regions", yaxis="y2", mode="lines+markers"))
    regions = max((len(b) for b in result.boxes), default=0)
    fig.update_layout(
        template="plotly_white",
        height=360,
        title=f"Activity per frame ({result.how})",
        xaxis=count_axis(len(n) - 1, title="frame", rangemode="normal"),
        yaxis=count_axis(max(result.motion_pixels, default=0), title="foreground pixels"),
        yaxis2=count_axis(
            max(regions, 1),
            title="motion regions",
            overlaying="y",
            side="right",
            range=[0, max(regions, 1) * 1.15],
            showgrid=False,
        ),
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},  # clear of both axis titles
        margin={"t": 80},
    )
    return fig
