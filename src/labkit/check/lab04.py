"""Checks for lab 04 (reductions and atomics): histograms with global and shared-memory atomics, a block
reduction, a full reduction, a warp reduction with shuffles, and the fix of a planted race.

In ``sim`` mode every launch runs under the strict memory model of :mod:`labkit.check.harness`: a plain
``a[k] += 1`` from several threads, or a missing ``cuda.syncthreads()``, is reported as a race naming the two
threads, whatever order the simulator happens to run them in.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..mode import current_mode
from .cases import SHARED_AND_BARRIER, blocks_words, edge_blocks_1d, line_label, ptx_on_gpu, run_cases
from .causes import mentions, source_matches
from .core import Failed, exercise
from .harness import Launch, kernel_reference, random_array, require_ptx

NBINS = 256
MAX_BLOCK = 256


def _bytes(n: int) -> np.ndarray:
    """Skewed byte data: most values in a few bins, so that many threads update the same bin."""
    data = random_array(n, np.uint8, 0, 256)
    few = random_array(n, np.uint8, 0, 6)
    return np.where(random_array(n, np.float32, 0, 1) < 0.7, few, data).astype(np.uint8)


def _heavy_bin(n: int, count: int) -> np.ndarray:
    """``n`` bytes of which ``count`` share one value (drawn afresh) and the rest are spread over all 256 values, in
    random order: one bin then holds more than a narrow counter type can (255 for uint8, 65,535 for uint16)."""
    from .harness import rng

    data = random_array(n, np.uint8, 0, 256)
    data[:count] = random_array(1, np.uint8, 0, 256)[0]
    return data[rng().permutation(n)]


def _prefix_cause(got: np.ndarray, n: int, threads: int, result_of: Callable[[int], np.ndarray], verb: str) -> str | None:
    """A fixed number of grid-stride rounds: ``got`` equals the result over the first r × ``threads`` elements only."""
    for rounds in range(1, -(-n // threads)):
        m = rounds * threads
        if np.allclose(got, result_of(m), rtol=1e-4, atol=1e-4):
            return (
                f"only the first {m} of {n} elements were {verb} ({rounds} round(s) of the grid's {threads} "
                "threads): the grid-stride loop must run until the end of the data, not a fixed number of times."
            )
    return None


def _histogram_cases(kernel: Any, *, shared: bool) -> str:
    from .draws import between, not_multiple

    # fresh sizes each run: a grid larger than the data, one element, a reversed launch on blocks of 96 threads (not a
    # power of two: a shift for a division fails), one block that strides 10 rounds and more with one bin above 255
    # counts (a uint8 counter wraps), and more than 32,767 bytes on one block of 256 (100 to 130 rounds; an int16
    # index wraps)
    cases = [
        (not_multiple(300, 500, 128), 128, 4, None),
        (1, 64, 1, None),
        (between(200, 280), 96, 3, None),
        (not_multiple(900, 1200, 64), 64, 1, between(300, 400)),
        (not_multiple(32_800, 33_200, 256), 256, 1, None),
    ]
    if shared:  # one block counting more than 65,535 of one value into its shared bins (a uint16 counter wraps)
        cases.append((between(65_600, 65_700), 256, 1, between(65_540, 65_590)))

    strided = mentions(kernel, "gridsize", "gridDim")  # a kernel with a grid-stride loop is not told to write one

    def launch(case: tuple[int, int, int, int | None]) -> Launch:
        n, block, grid, heavy = case
        data = _bytes(n) if heavy is None else _heavy_bin(n, heavy)
        counted = lambda m: np.bincount(data[:m], minlength=NBINS)  # noqa: E731
        explain = lambda got: (
            _prefix_cause(got, data.size, grid * block, counted, "counted")
            or _bins_cause(  # noqa: E731
                got, expected, block
            )
        )
        expected = np.bincount(data, minlength=NBINS).astype(np.int32)
        label = line_label(n, grid, block, " bytes")
        return Launch(
            grid, block, (data,), expected, label, explain=explain, extra_cause=_histogram_note(n, grid * block, heavy, strided)
        )

    def then(case: tuple[int, int, int, int | None], launch: Launch, report: Any) -> None:
        n, label, grid = case[0], launch.label, launch.grid
        if report is None:
            return
        if shared:
            if not report.shared or report.atomics.get("shared", 0) < n:
                raise Failed(
                    f"{label}: the counts are right, but {report.atomics.get('shared', 0)} atomic adds went to shared "
                    f"memory for {n} elements.",
                    cause="count into a per-block histogram in cuda.shared.array with cuda.atomic.add, then add it "
                    "to the global histogram once per bin.",
                )
            if report.atomics.get("global", 0) >= n > grid * NBINS:
                raise Failed(
                    f"{label}: the counts are right, but there were {report.atomics['global']} global atomics for {n} elements.",
                    cause="merge each block's histogram once per bin, not once per element.",
                )
        elif report.atomics.get("global", 0) == 0:
            raise Failed(
                f"{label}: the counts are right but no atomic add reached global memory.",
                cause="this exercise counts with cuda.atomic.add on the global histogram.",
            )

    unwritten = "some elements were not counted: cover all of data (a grid-stride loop covers it with any grid)."
    common: dict[str, Any] = {"out_shape": NBINS, "out_dtype": np.int32, "out_init": 0, "unwritten_cause": unwritten}
    run_cases(kernel, cases, launch, reverse_at=2, then=then, names=("data", "hist"), **common)
    ptx_on_gpu(
        kernel,
        "void(uint8[:], int32[:])",
        ["shared-memory atomics"] if shared else ["global atomics"],
        label="histogram",
        cause="count with cuda.atomic.add " + ("into a cuda.shared.array first." if shared else "on hist."),
    )
    big = " and above 65,535 in one block" if shared else ""
    return (
        f"correct on {len(cases)} launches of fresh sizes (skewed data, grids larger and smaller than the data, 10+ "
        f"grid-stride rounds, a bin above 255 counts{big}), no lost updates."
    )


def _bins_cause(got: np.ndarray, expected: np.ndarray, block: int) -> str | None:
    """Every wrong bin at or past the block's size: the shared bins were zeroed and merged one per thread (``if t <
    NBINS``), so a block of fewer than 256 threads leaves the last ones out."""
    wrong = np.flatnonzero(got.reshape(-1)[: expected.size] != expected.reshape(-1))
    if block >= NBINS or wrong.size == 0 or wrong.min() < block:
        return None
    return (
        f"every wrong bin is at index {block} or above, and this launch has blocks of {block} threads: each thread "
        "zeroed and merged one bin (bin t), so bins from blockDim.x up were never zeroed or merged. Share the 256 bins "
        "over the block's threads: `for b in range(t, NBINS, cuda.blockDim.x):`, to zero them and to merge them."
    )


def _histogram_note(n: int, threads: int, heavy: int | None, strided: bool = False) -> str | None:
    """What a histogram case adds to any likely cause: a grid with fewer threads than elements (unless the kernel
    has a grid-stride loop), a bin too full for a narrow counter."""
    return (
        " ".join(
            filter(
                None,
                (
                    "(The grid here has fewer threads than elements: a grid-stride loop must cover the rest.)"
                    if threads < n and not strided
                    else None,
                    None
                    if heavy is None
                    else f"(One bin here counts more than {255 if heavy < 65_536 else 65_535:,} bytes: a counter "
                    "narrower than int32 — uint8 holds 255, uint16 65,535 — wraps around.)",
                ),
            )
        )
        or None
    )


@exercise("04.histogram-global", kind="kernel", reference=kernel_reference("histogram_global"))
def histogram_global(kernel: Any) -> str:
    """Grade ``histogram(data, hist)``: ``data`` uint8, ``hist`` int32[256] starting at zero."""
    return _histogram_cases(kernel, shared=False)


@exercise("04.histogram-shared", kind="kernel", reference=kernel_reference("histogram_shared"))
def histogram_shared(kernel: Any) -> str:
    """Grade ``histogram_shared(data, hist)``: as 04.histogram-global, counting in shared memory first."""
    return _histogram_cases(kernel, shared=True)


# ----------------------------------------------------------------------------- 04.block-sum
def _block_sums(x: np.ndarray, block: int, blocks: int) -> np.ndarray:
    padded = np.zeros(block * blocks, np.float64)
    padded[: x.size] = x
    return padded.reshape(blocks, block).sum(axis=1)


@exercise("04.block-sum", kind="kernel", reference=kernel_reference("block_sum"))
def block_sum(kernel: Any) -> str:
    """Grade ``block_sum(x, partial)``: ``partial[b]`` = sum of block b's elements; power-of-two blocks up to 256."""
    from .draws import between, not_multiple

    # fresh sizes each run, every power-of-two block from 32 to MAX_BLOCK = 256, partial last blocks
    cases = [
        (not_multiple(129, 250, 64), 64),
        (1, 32),
        (not_multiple(257, 500, 256), 256),
        (not_multiple(129, 250, 128), 128),
        (between(33, 100), 32),
        (not_multiple(65_600, 68_000, 256), 256),  # past 65,536 elements: an int16 or uint16 index wraps
    ]

    from_block_dim = source_matches(kernel, r"blockDim\.x\s*(//|>>)")  # a tree that starts at the block's half is not told to

    def launch(case: tuple[int, int]) -> Launch:
        n, block = case
        x = random_array(n)
        grid = -(-n // block)
        note = (
            None
            if from_block_dim
            else f"(This launch used blocks of {block} threads: nothing may assume one block size; start the tree at "
            "cuda.blockDim.x // 2.)"
        )
        blocks, owned = edge_blocks_1d(grid, block, grid, 1)  # sim: a large grid's first and last blocks
        label = line_label(n, grid, block) + blocks_words(blocks)
        expected = _block_sums(x, block, grid)
        return Launch(grid, block, (x,), expected, label, out_shape=grid, extra_cause=note, blocks=blocks, owned=owned)

    unwritten = "one thread per block (t == 0) must store the block's sum in partial[cuda.blockIdx.x]."
    shared: dict[str, Any] = {
        "names": ("x", "partial"),
        "out_dtype": np.float32,
        "rtol": 1e-5,
        "atol": 1e-5,
        "unwritten_cause": unwritten,
    }
    run_cases(kernel, cases, launch, reverse_at=3, **shared)
    return "correct for blocks of 32, 64, 128 and 256 threads, partial last blocks and up to 68,000 elements; no races."


# ----------------------------------------------------------------------------- 04.full-sum
@exercise("04.full-sum", kind="kernel", reference=kernel_reference("sum_all"))
def full_sum(kernel: Any) -> str:
    """Grade ``sum_all(x, out)``: adds ``sum(x)`` to ``out[0]`` (which starts at 0) for any grid."""
    from .draws import between, not_multiple

    # (n, block, grid), fresh each run: a few rounds, one element, more threads than elements, 10 to 12 grid-stride
    # rounds (grid × block × 10 < n), and one block of MAX_BLOCK = 256 threads
    # ... and last more than 32,767 elements on 2 blocks of 128 (an int16 index wraps)
    cases = [
        (not_multiple(900, 1300, 128), 128, 2),
        (1, 32, 1),
        (between(40, 90), 32, 3),
        (between(257, 400), 64, 4),
        (not_multiple(641, 768, 64), 32, 2),
        (between(300, 700), 256, 1),
        (not_multiple(100 * 32 + 1, 140 * 32 - 1, 32), 32, 1),  # 100 to 140 rounds: no fixed count of rounds passes
        (not_multiple(32_800, 33_500, 256), 128, 2),
        (big := not_multiple(66_100, 68_000, 256), 256, big // 256 - 1),  # more than 65,536 threads (a 16-bit index)
    ]

    def launch(case: tuple[int, int, int]) -> Launch:
        n, block, grid = case
        x = random_array(n)
        summed = lambda m: np.array([x[:m].astype(np.float64).sum()])  # noqa: E731
        explain = lambda got: _prefix_cause(got, x.size, grid * block, summed, "summed")  # noqa: E731
        expected = np.array([x.astype(np.float64).sum()])
        blocks, _ = edge_blocks_1d(grid, block, 1, 1)
        if blocks is not None:  # sim: only the first and last blocks run; the sum is of the elements they stride over
            ran = np.isin((np.arange(n) % (grid * block)) // block, [b[0] for b in blocks])
            expected = np.array([x[ran].astype(np.float64).sum()])
            explain = None
        label = line_label(n, grid, block) + blocks_words(blocks)
        return Launch(grid, block, (x,), expected, label, out_shape=1, explain=explain, blocks=blocks)

    def then(case: tuple[int, int, int], launch: Launch, report: Any) -> None:
        block, grid = case[1], case[2]
        adds = report.atomics.get("global", 0) if report is not None else 0
        warps = grid * -(-block // 32)
        if adds > warps:
            raise Failed(
                f"{launch.label}: the sum is right, but {adds} atomic adds reached out[0] from {grid} block(s): the "
                "threads added their own sums one by one.",
                cause=NO_TREE,
            )
        if adds > grid:  # one per warp: the warps were combined, the block was not
            raise Failed(
                f"{launch.label}: the sum is right, but {adds} atomic adds reached out[0] from {grid} block(s) of "
                f"{block // 32 if block % 32 == 0 else -(-block // 32)} warp(s): one per warp, where the exercise "
                "combines each block first and adds once per block.",
                cause=PER_WARP,
            )

    shared: dict[str, Any] = {"names": ("x", "out"), "out_dtype": np.float32, "out_init": 0.0, "rtol": 1e-4, "atol": 1e-4}
    run_cases(kernel, cases, launch, reverse_at=2, then=then, **shared)
    if current_mode() == "gpu" and not combines_in_block(kernel):
        raise Failed(
            "the sum is right, but the kernel's PTX has neither shared memory nor warp shuffles: every thread "
            "adds its own sum to out[0].",
            cause=NO_TREE,
        )
    return (
        "correct for fresh sizes with grids larger and smaller than the data (10+ grid-stride rounds, more than 65,536 "
        "threads) and blocks of 32 to 256 threads; each block combines its threads and adds its sum with one atomic."
    )


PER_WARP = (
    "after the warp shuffles, combine the block's warps too: each warp's lane 0 writes its sum to a shared array "
    "(one slot per warp), cuda.syncthreads(), then the first warp adds those slots (a loop or shuffles again) and "
    "thread 0 does the block's one atomic add."
)
NO_TREE = (
    "the exercise combines each block's threads first (the tree of 04.block-sum in shared memory, or warp "
    "shuffles), then one thread per block adds the block's sum atomically: thousands of atomics on one address "
    "serialise on a GPU."
)


def combines_in_block(kernel: Any, signature: str = "void(float32[:], float32[:])") -> bool:
    """True when the kernel's PTX (sm_80) shows a way to combine a block's threads: shared memory or warp shuffles
    (what a GPU run checks in place of the simulator's count of atomics); True too when it does not compile."""
    from labkit.cuda import ptx

    from ..errors import CompileError

    try:
        mix = ptx.compile(kernel, signature, "sm_80").summary()
    except CompileError:
        return True
    return sum(mix.shared_loads.values()) + sum(mix.shared_stores.values()) > 0 or mix.shuffles > 0


# ----------------------------------------------------------------------------- 04.warp-sum
@exercise("04.warp-sum", kind="kernel", reference=kernel_reference("warp_sum"))
def warp_sum(kernel: Any) -> str:
    """Grade ``warp_sum(x, out)``: ``out[w]`` = sum of elements ``32w .. 32w + 31`` (zeros past the end);
    blocks of 32 to 256 threads."""
    from ..sim import warp as simwarp
    from .draws import between, not_multiple

    # fresh sizes each run: several warps with a partial last one, one element, a block of 3 warps, a block larger than
    # the data, and two blocks of the largest size the exercise allows (256 threads, 8 warps), the second partial
    cases = [
        (not_multiple(150, 250, 32), 64),
        (1, 32),
        (between(65, 96), 96),
        (between(33, 64), 128),
        (not_multiple(257, 500, 32), 256),
        (not_multiple(65_600, 68_000, 32), 256),  # past 65,536 elements: an int16 or uint16 index wraps
    ]
    before = simwarp.calls

    def launch(case: tuple[int, int]) -> Launch:
        n, block = case
        x = random_array(n)
        grid = -(-n // block)
        warps = -(-n // 32)
        blocks, owned = edge_blocks_1d(grid, block, warps, block // 32)  # sim: a large grid's first and last blocks
        label = line_label(n, grid, block) + f", {warps} warp sum(s)" + blocks_words(blocks)
        return Launch(grid, block, (x,), _block_sums(x, 32, warps), label, out_shape=warps, blocks=blocks, owned=owned)

    unwritten = "lane 0 of each warp (cuda.laneid == 0) must store its warp's sum at out[i // 32]."
    run_cases(kernel, cases, launch, names=("x", "out"), out_dtype=np.float32, rtol=1e-5, atol=1e-5, unwritten_cause=unwritten)
    if current_mode() == "gpu":
        require_ptx(
            kernel,
            "void(float32[:], float32[:])",
            ["warp shuffles"],
            label="warp_sum",
            cause="this exercise reduces within the warp with cuda.shfl_down_sync (or shfl_xor_sync).",
        )
    elif simwarp.calls == before:
        raise Failed(
            "the sums are right, but the kernel made no warp shuffle.",
            cause="this exercise reduces within the warp with cuda.shfl_down_sync (or shfl_xor_sync).",
        )
    return "correct for 1 to 2,125 warps on fresh sizes (up to 68,000 elements) and blocks of 32 to 256 threads, using warp shuffles."


# ----------------------------------------------------------------------------- 04.race
def _counts_above(
    x: np.ndarray, threshold: float, block: int, grid: int, *, strict: bool = True, per_block: int | None = None
) -> np.ndarray:
    """Per-block counts of elements above ``threshold`` (``>=`` when not ``strict``); ``per_block`` elements per
    block (default ``block``: a kernel that assumes another block size counts other elements)."""
    per = per_block or block
    counts = np.zeros(grid, np.int64)
    for b in range(grid):
        part = x[b * per : min(b * per + block, x.size)] if per_block else x[b * block : (b + 1) * block]
        counts[b] = int(np.sum(part > threshold if strict else part >= threshold))
    return counts.astype(np.int32)


def _race_cause(got: np.ndarray, x: np.ndarray, threshold: np.float32, block: int, grid: int) -> str | None:
    """The slip whose counts ``got`` equals: int(threshold), >= for >, a fixed block size in the index."""
    slips: dict[str, np.ndarray] = {
        f"the counts are those for the threshold {int(threshold)}: int(threshold) drops its fraction; compare with the "
        "threshold itself.": _counts_above(x, float(int(threshold)), block, grid),
        "the counts include elements equal to the threshold: the exercise counts those greater than it (`>`), not "
        "`>=`.": _counts_above(x, threshold, block, grid, strict=False),
    }
    for assumed in (32, 64, 128, 256, 512, 1024):
        if assumed != block:
            slips[
                f"the counts are those of blocks of {assumed} elements: the index assumes {assumed} threads per "
                "block; use cuda.grid(1) (or cuda.blockDim.x)."
            ] = _counts_above(x, threshold, block, grid, per_block=assumed)
    got = np.asarray(got).astype(np.int64)
    fitting = [cause for cause, counts in slips.items() if np.array_equal(got, counts)]
    if len(fitting) > 1:
        return "slips that give these same counts (this case cannot tell them apart): " + " Or: ".join(fitting)
    return fitting[0] if fitting else None


@exercise("04.race", kind="kernel", reference=kernel_reference("count_above"))
def race(kernel: Any) -> str:
    """Grade ``count_above(x, threshold, counts)``: ``counts[b]`` = elements of block b greater than ``threshold``."""
    from .draws import between, not_multiple

    # fresh sizes each run: a partial last block, one element, a block of 1024 threads (the most a block can have,
    # where many more threads meet at the shared counter and a count passes 255), whole blocks, fewer elements than a
    # block, and blocks of 200 threads (not a power of two, nor whole warps); thresholds with a fraction
    # (int(threshold) counts other elements)
    cases = [
        (not_multiple(257, 400, 64), 64),
        (1, 32),
        (between(700, 1023), 1024),
        (128 * between(1, 2), 128),
        (between(33, 90), 32),
        (not_multiple(401, 599, 200), 200),
        (not_multiple(65_600, 68_000, 256), 256),  # past 65,536 elements: an int16 or uint16 index wraps
    ]

    def launch(case: tuple[int, int]) -> Launch:
        n, block = case
        x = random_array(n)
        low, high = (-0.8, -0.3) if block == 1024 else (-0.5, 0.5)  # the 1024-thread block counts more than 255
        threshold = np.float32(random_array(1, np.float32, low, high)[0])
        if abs(threshold) < 0.05:  # keep a fraction that int() would drop: elements between 0 and it exist
            threshold = np.float32(0.25 if threshold >= 0 else -0.25)
        if n > 1:  # some elements equal the threshold: "greater than" must not count them
            x[:: max(2, n // 8)] = threshold
        if n > 2:  # and some lie between int(threshold) (that is, 0) and the threshold
            x[1] = np.float32(threshold / 2)
        grid = -(-n // block)
        expected = _counts_above(x, threshold, block, grid)
        blocks, owned = edge_blocks_1d(grid, block, grid, 1)  # sim: a large grid's first and last blocks
        label = line_label(n, grid, block, f", threshold {threshold:.3f}") + blocks_words(blocks)
        explain = lambda got: _race_cause(got, x, threshold, block, grid)  # noqa: E731
        return Launch(grid, block, (x, threshold), expected, label, out_shape=grid, explain=explain, blocks=blocks, owned=owned)

    run_cases(kernel, cases, launch, reverse_at=1, names=("x", "threshold", "counts"), out_dtype=np.int32)
    return "correct and race-free on every launch (fresh sizes up to 68,000 elements, blocks of 32 to 1024 threads)."


# ----------------------------------------------------------------------------- 04.scan
SCAN_BLOCKS = (32, 64, 128, 256)  # the block sizes the scan exercise allows: powers of two up to the shared array


def _scan_reference() -> tuple[Any, Any]:
    from .. import kernels

    return kernels.get("scan_block"), kernels.get("add_offsets")


def _int_floats(n: int) -> np.ndarray:
    """Random quarters (-20.00 to 20.00 in steps of 0.25) as float32: every partial sum is exact, so any summation
    order gives the same bits, and the fractions catch a scan through an integer buffer."""
    return (np.rint(random_array(n, np.float32, -80.0, 80.0)) / 4).astype(np.float32)


def _block_scan(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    nb = -(-x.size // block)
    padded = np.zeros(nb * block, np.float64)
    padded[: x.size] = x
    scans = np.cumsum(padded.reshape(nb, block), axis=1)
    return scans.reshape(-1)[: x.size].astype(np.float32), scans[:, -1].astype(np.float32)


def _offsets_cause(got: np.ndarray, partial: np.ndarray, offsets: np.ndarray, block: int) -> str | None:
    """Each block added its own block's total (offsets[b]) instead of the one before it (offsets[b - 1])."""
    own = partial + np.repeat(offsets, block)[: partial.size]
    later = own.copy()
    later[:block] = partial[:block]
    if np.array_equal(got, own) or np.array_equal(got, later):
        return (
            "each block added offsets[blockIdx.x], its own total; the elements of block b need the total of the "
            "blocks before it: offsets[blockIdx.x - 1] (nothing for block 0)."
        )
    return None


def scan_any_n(scan_block: Any, add_offsets: Any, x: Any, block: int = 256) -> Any:
    """The inclusive scan of a device array ``x`` of any length with the two kernels: scan each block, scan the block
    sums (recursively, with the same kernels), add them to the blocks after the first. Returns a device array."""
    from .harness import cuda_module, launch

    cuda = cuda_module()
    n = int(x.size)
    nb = -(-n // block)
    partial = cuda.device_array(n, np.float32)
    sums = cuda.device_array(nb, np.float32)
    launch(scan_block, nb, block, x, sums, partial)
    if nb == 1:
        return partial
    offsets = scan_any_n(scan_block, add_offsets, sums, block)
    out = cuda.device_array(n, np.float32)
    launch(add_offsets, nb, block, partial, offsets, out)
    return out


@exercise("04.scan", kind="kernel", reference=_scan_reference)
def scan(scan_block: Any, add_offsets: Any = None) -> str:
    """Grade the two kernels of an inclusive scan: ``scan_block(x, sums, out)`` scans each block of ``x`` into
    ``out`` in shared memory and writes the block's total to ``sums[blockIdx.x]``; ``add_offsets(partial, offsets,
    out)`` adds ``offsets[blockIdx.x - 1]`` to every element of blocks after the first. Blocks of 32 to 256 threads
    (powers of two); sizes spanning several blocks and not multiples of the block; then the whole scan of any n
    with labkit's :func:`scan_any_n`, whose block sums need a second level of scanning."""
    from .draws import between, not_multiple
    from .harness import compare, device

    if add_offsets is None:
        raise Failed("pass both kernels: labkit.check.scan(scan_block, add_offsets).")
    # the last case passes 65,536 elements (an int16 or uint16 index wraps): in sim mode only its first and last blocks run
    cases = [(200, 64), (1, 32), (300, SCAN_BLOCKS[-1]), (between(129, 380), 128), (not_multiple(65_600, 66_000, 256), 256)]

    def scan_launch(case: tuple[int, int]) -> Launch:
        n, block = case
        x = _int_floats(n)
        want = _block_scan(x, block)[0]
        nb = -(-n // block)
        sums = device(np.full(nb, np.nan, np.float32))
        blocks, owned = edge_blocks_1d(nb, block, n, block)
        label = "scan_block: " + line_label(n, nb, block) + blocks_words(blocks)
        return Launch(nb, block, (x, sums), want, label, out_shape=n, blocks=blocks, owned=owned)

    def scan_then(case: tuple[int, int], launch: Launch, report: Any) -> None:
        (n, block), label, (x, sums) = case, launch.label, launch.inputs
        want_sums = _block_scan(x, block)[1]
        got_sums = sums.copy_to_host()
        if launch.blocks is not None:  # the blocks that did not run leave their sums as they were (NaN)
            ran = np.zeros(want_sums.size, dtype=bool)
            ran[[b[0] for b in launch.blocks]] = True
            want_sums = np.where(ran, want_sums, np.float32(np.nan))
        wrong = np.flatnonzero((got_sums != want_sums) & ~(np.isnan(got_sums) & np.isnan(want_sums)))
        if wrong.size:
            j = int(wrong[0])
            raise Failed(
                f"{label}: out is right, but sums[{j}] is {got_sums[j]!r}, expected {want_sums[j]!r} (the block's total).",
                cause="the block's last thread (t == blockDim.x - 1) holds the total after the scan: it writes "
                "sums[blockIdx.x], also in a partial last block (the padding adds 0).",
            )
        if report is not None:
            if not report.shared or report.barriers == 0:
                raise Failed(
                    f"{label}: the values are right, but the kernel does not scan in shared memory with barriers.",
                    cause="load the block into cuda.shared.array, and combine partial sums there with "
                    "cuda.syncthreads() between the steps.",
                )
            reads = report.count("x", "read")
            if reads > n:
                raise Failed(
                    f"{label}: the values are right, but x was read {reads} times for {n} elements.",
                    cause="each thread should read its element of x once, into shared memory: summing from "
                    "global memory makes every thread read all elements before it.",
                )

    unwritten = "every thread whose i < n writes out[i], including the last, partial block."
    shared: dict[str, Any] = {"names": ("x", "sums", "out"), "out_dtype": np.float32, "unwritten_cause": unwritten}
    run_cases(scan_block, cases, scan_launch, reverse_at=1, record_at=0, record=("x",), then=scan_then, **shared)

    def offsets_launch(case: tuple[int, int]) -> Launch:
        n, block = case
        partial = _int_floats(n)
        nb = -(-n // block)
        offsets = _int_floats(nb)
        want = partial.copy()
        want[block:] += np.repeat(offsets[:-1], block)[: max(n - block, 0)]
        explain = lambda got: _offsets_cause(got, partial, offsets, block)  # noqa: E731
        blocks, owned = edge_blocks_1d(nb, block, n, block)
        label = f"add_offsets: n={n}, {nb} blocks of {block} threads" + blocks_words(blocks)
        return Launch(nb, block, (partial, offsets), want, label, out_shape=n, explain=explain, blocks=blocks, owned=owned)

    unwritten = "every element gets a value, the first block's too (it adds nothing)."
    shared: dict[str, Any] = {"names": ("partial", "offsets", "out"), "out_dtype": np.float32, "unwritten_cause": unwritten}
    # the last: more than 65,536 blocks (a 16-bit block index wraps), of which sim mode runs the first and the last
    big = (not_multiple(65_540 * 32, 65_600 * 32, 32), 32)
    run_cases(add_offsets, [(777, 64), (257, SCAN_BLOCKS[-1]), big], offsets_launch, reverse_at=1, **shared)
    for n, block in ((1025 + int(random_array(1, np.float32, 0, 60)[0]), 32),):
        x = _int_floats(n)
        label = f"the whole scan: n={n} with blocks of {block} ({-(-n // block)} block sums, scanned again)"
        try:
            got = scan_any_n(scan_block, add_offsets, device(x), block).copy_to_host()
        except Failed as exc:
            raise Failed(f"{label}: {exc}", cause=exc.cause) from None
        compare(got, np.cumsum(x.astype(np.float64)).astype(np.float32), label=label, rtol=0, atol=0)
    ptx_on_gpu(
        scan_block,
        "void(float32[:], float32[:], float32[:])",
        SHARED_AND_BARRIER,
        label="scan_block",
        cause="scan in cuda.shared.array with cuda.syncthreads() between the steps.",
    )
    return (
        "both kernels right for block sizes 32 to 256, sizes that are not multiples of the block, past 65,536 elements "
        "and (add_offsets) 65,536 blocks, and the whole scan right for n whose block sums need a second level."
    )
