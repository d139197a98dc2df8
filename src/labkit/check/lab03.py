"""Checks for lab 03 (memory hierarchy): a coalesced 2-D copy, a shared-memory transpose without bank conflicts,
a tiled matrix multiply and a 1-D stencil with halo cells.

Besides the values, these checks look at *how* the kernel uses memory (in ``sim`` mode, from a record of every
access): 32-byte sectors per warp request for global memory, bank conflicts for shared memory, and whether
shared memory is used at all.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..sim.memory import bank_conflicts, sectors_per_request
from .cases import (
    SHARED_AND_BARRIER,
    big_2d_cases,
    blocks_words,
    edge_blocks,
    edge_blocks_1d,
    grid_label,
    line_label,
    ptx_on_gpu,
    run_cases,
)
from .core import Failed, exercise, exercise_data
from .draws import drawn
from .harness import Launch, fmt_shape, grid_2d, kernel_reference, random_array
from .numeric import need_function


def _global_reads(report: Any, array: str) -> int:
    """Element reads of a global array in a recorded strict launch."""
    return report.count(array, "read")


SWAPPED = (
    "x = cuda.grid(2)[0] is the column (it runs along a row): `col, row = cuda.grid(2)`. With x as the row, "
    "part of a non-square array is never reached."
)


def _efficiency(report: Any, array: str, kind: str, what: str, label: str) -> str:
    sectors, eff = sectors_per_request(report, array, kind)
    if eff < 0.9:
        raise Failed(
            f"{label}: the values are right, but each warp's {what} of `{array}` touches {sectors:.1f} "
            f"32-byte sectors on average ({100 * eff:.0f}% of the bytes moved are used); coalesced, it touches 4.",
            cause="neighbouring threads (consecutive threadIdx.x) must access neighbouring addresses: in a "
            "row-major array that means neighbouring columns of one row.",
        )
    return f"{what}s of {array}: {sectors:.1f} sectors per warp ({100 * eff:.0f}% efficient)"


# ----------------------------------------------------------------------------- 03.coalesced-copy
@exercise("03.coalesced-copy", kind="kernel", reference=kernel_reference("copy2d_coalesced"))
def coalesced_copy(kernel: Any) -> str:
    """Grade ``copy2d(src, dst)`` (float32, rows × cols), launched with x over columns: right values and coalesced accesses."""
    # fresh shapes each run (labkit/data/exercises.yml), up to 32 × 32 threads; the last, recorded, for the sector count
    cases = [drawn(case) for case in exercise_data("03.coalesced-copy")["cases"]]
    last = len(cases) - 1
    cases += big_2d_cases((32, 8))
    notes: list[str] = []

    def launch(case: tuple[tuple[int, int], tuple[int, int]]) -> Launch:
        shape, block = case
        src = random_array(shape)
        grid = grid_2d(shape, block)
        blocks, owned = edge_blocks(grid, shape, (block[1], block[0]), lambda bx, by: (by, bx))
        label = grid_label("array", shape, block) + blocks_words(blocks)
        return Launch(grid, block, (src,), src, label, out_shape=shape, blocks=blocks, owned=owned)

    def then(case: Any, launch: Launch, report: Any) -> None:
        if launch.record and report is not None:
            notes.append(_efficiency(report, "src", "read", "read", launch.label))
            notes.append(_efficiency(report, "dst", "write", "write", launch.label))

    run_cases(kernel, cases, launch, record_at=last, then=then, names=("src", "dst"), out_dtype=np.float32, swapped_cause=SWAPPED)
    note = "".join("; " + n for n in notes)
    return f"correct on {len(cases)} fresh arrays (up to more than 65,536 rows or columns), blocks up to 32×32{note}."


# ----------------------------------------------------------------------------- 03.transpose
TILE = 32


@exercise("03.transpose", kind="kernel", reference=kernel_reference("transpose_shared"))
def transpose(kernel: Any, block_rows: int = 8) -> str:
    """Grade ``transpose(a, out)``: 32 × 32 tiles, blocks of (32, ``block_rows``) threads; right values, shared
    memory without bank conflicts, coalesced global reads and writes."""
    if block_rows not in (1, 2, 4, 8, 16, 32):
        raise Failed(f"block_rows={block_rows}: it must divide the tile size 32 (1, 2, 4, 8, 16 or 32).")
    from .draws import between, not_multiple

    block = (TILE, block_rows)
    # fresh shapes each run: 2 × 2 tiles, both partial; smaller than a tile; three tiles across in one direction and
    # one partial in the other; last one whole tile, recorded for coalescing and bank conflicts
    cases = [
        (not_multiple(33, 63, 32), not_multiple(33, 63, 32)),
        (between(1, 7), between(1, 7)),
        (between(3, 20), not_multiple(65, 95, 32)),
        (32, 32),
        (not_multiple(65_600, 66_000, 32), between(2, 40)),
        (between(2, 40), not_multiple(65_600, 66_000, 32)),
    ]
    # the last two: more than 65,536 rows, then columns (a 16-bit row or column wraps); in sim mode only the first and
    # last blocks along that axis run, and only the output tiles they own are judged (the rest must stay unwritten)
    notes: list[str] = []

    def launch(shape: tuple[int, int]) -> Launch:
        a = random_array(shape)
        grid = (-(-shape[1] // TILE), -(-shape[0] // TILE))
        label = f"a {fmt_shape(shape)}, grid {grid} of blocks {block}"
        # block (bx, by) reads tile (by, bx) of a and writes tile (bx, by) of out
        blocks, owned = edge_blocks(grid, shape[::-1], (TILE, TILE), lambda bx, by: (bx, by))
        label += blocks_words(blocks)
        return Launch(grid, block, (a,), a.T.copy(), label, out_shape=shape[::-1], blocks=blocks, owned=owned)

    def then(shape: tuple[int, int], launch: Launch, report: Any) -> None:
        if report is None:
            return
        label = launch.label
        if not report.shared:
            raise Failed(
                f"{label}: the values are right, but the kernel does not use shared memory.",
                cause="this exercise stages each tile in cuda.shared.array so that both the reads and the writes are coalesced.",
            )
        if launch.record:
            notes.append(_efficiency(report, "a", "read", "read", label))
            notes.append(_efficiency(report, "out", "write", "write", label))
            for name, shape_s, _ in report.shared:
                worst = bank_conflicts(report, name)
                if worst > 1:
                    raise Failed(
                        f"{label}: the values are right, but accesses to the {fmt_shape(shape_s)} {name} "
                        f"have up to {worst}-way bank conflicts.",
                        cause="the 32 elements of a tile column sit in one bank: pad the row to 33 elements "
                        "(`(TILE, TILE_PADDED)`) so that a column spans all 32 banks.",
                    )
            notes.append("shared memory free of bank conflicts")

    unwritten = (
        "each block must write the whole transposed tile: block (bx, by) writes the tile at "
        "(by, bx) of the output, rows of out are columns of a; check the loop over j."
    )
    last = 3  # the whole 32 × 32 tile
    run_cases(kernel, cases, launch, reverse_at=1, record_at=last, then=then, names=("a", "out"), unwritten_cause=unwritten)
    ptx_on_gpu(
        kernel,
        "void(float32[:, :], float32[:, :])",
        SHARED_AND_BARRIER,
        label="transpose",
        cause="stage each tile in cuda.shared.array and wait for the block with cuda.syncthreads().",
    )
    return (
        f"correct on {len(cases)} fresh shapes (up to more than 65,536 rows or columns)"
        + (": " + "; ".join(notes) if notes else "")
        + "."
    )


# ----------------------------------------------------------------------------- 03.matmul
def _matmul_cause(got: np.ndarray, A: np.ndarray, B: np.ndarray, tile: int) -> str | None:
    """A loop over K tiles that stops early: ``got`` equals the product over the first t tiles only."""
    K = A.shape[1]
    steps = -(-K // tile)
    for t in range(0, steps):
        part = A[:, : t * tile].astype(np.float64) @ B[: t * tile].astype(np.float64)
        if np.allclose(got, part, rtol=1e-4, atol=1e-4 * max(K, 1)):
            why = (
                "floor division drops the partial last tile: use (K + MM_TILE - 1) // MM_TILE steps, with zeros "
                "loaded past the end"
                if t == K // tile
                else "the loop runs a fixed number of tiles: run (K + MM_TILE - 1) // MM_TILE of them"
            )
            return f"C holds the sum over the first {t * tile} of the {K} terms ({t} of {steps} tiles along K): {why}."
    swapped = _tile_swap_cause(got, A, B, tile)
    if swapped:
        return swapped
    half = A.astype(np.float16).astype(np.float64) @ B.astype(np.float16).astype(np.float64)
    if np.allclose(got, half, rtol=1e-5, atol=2e-6 * max(K, 1)):
        return (
            "C equals the product of A and B rounded to FP16: the shared tiles (or a variable on the way) hold "
            "float16, which keeps 11 bits of each element. The exercise computes in float32: declare the tiles "
            "with float32."
        )
    return None


def _tiles_transposed(M: np.ndarray, tile: int) -> np.ndarray:
    """``M`` (float64) with each ``tile`` × ``tile`` tile transposed in place (zeros past the edges, as a tiled kernel
    loads them), cut back to ``M``'s shape."""
    r, c = -(-M.shape[0] // tile) * tile, -(-M.shape[1] // tile) * tile
    P = np.zeros((r, c))
    P[: M.shape[0], : M.shape[1]] = M
    P = P.reshape(r // tile, tile, c // tile, tile).transpose(0, 3, 2, 1).reshape(r, c)
    return P[: M.shape[0], : M.shape[1]]


def _tile_swap_cause(got: np.ndarray, A: np.ndarray, B: np.ndarray, tile: int) -> str | None:
    """The cause when ``got`` is the product with the tiles of A, of B or of both transposed: a shared tile stored or
    read with its row and column indices swapped (``sa[tx, ty] = ...``, ``sa[kk, ty]``)."""
    a, b = A.astype(np.float64), B.astype(np.float64)
    ta, tb = _tiles_transposed(a, tile), _tiles_transposed(b, tile)
    for of, which, cand in (
        ("A", "the tile of A (`sa`)", ta @ b),
        ("B", "the tile of B (`sb`)", a @ tb),
        ("A and B", "each shared tile", ta @ tb),
    ):
        if np.allclose(got, cand, rtol=1e-4, atol=1e-4 * max(A.shape[1], 1)) and not np.allclose(cand, a @ b):
            return (
                f"C equals A @ B with each {tile}×{tile} tile of {of} transposed: {which} is stored or read with its "
                "row and column indices swapped. The thread (ty, tx) "
                "stores element (ty, tx) of the tile, sa[ty, tx] = A[row, k + tx] and sb[ty, tx] = B[k + ty, col], "
                "and reads sa[ty, kk] * sb[kk, tx]."
            )
    return None


@exercise("03.matmul", kind="kernel", reference=kernel_reference("matmul_tiled"))
def matmul(kernel: Any, tile: int = 16) -> str:
    """Grade ``matmul(A, B, C)``: C = A @ B (float32), blocks of ``tile`` × ``tile`` threads, tiles in shared memory."""
    if tile not in (8, 16, 32):
        raise Failed(f"tile={tile}: use 8, 16 or 32.")
    from .draws import between, not_multiple

    # fresh shapes each run: 2 × 2 blocks of C over 2 partial tiles of K; 1 × 1; and K of 10 or 11 tiles, not a
    # multiple of the tile, so that a fixed number of K steps (up to 9) or a dropped partial tile gives wrong sums
    long_k = (between(2, tile), not_multiple(9 * tile + 1, 11 * tile - 1, tile), between(2, tile))
    two = not_multiple(tile + 1, 2 * tile - 1, tile)
    # then C with more than 65,536 columns, and C with more than 65,536 rows (a 16-bit row or column wraps): in sim
    # mode only the first and the last blocks along that axis run, and only their tiles of C are judged (every other
    # element must stay unwritten)
    cases = [
        (two, not_multiple(tile + 1, 2 * tile - 1, tile), not_multiple(tile + 1, 2 * tile - 1, tile)),
        (1, 1, 1),
        long_k,
        (between(1, tile), between(2, tile), not_multiple(65_600, 66_000, tile)),
        (not_multiple(65_600, 66_000, tile), between(2, tile), between(1, tile)),
    ]

    def launch(case: tuple[int, int, int]) -> Launch:
        m, kk, n = case
        A, B = random_array((m, kk)), random_array((kk, n))
        grid = grid_2d((m, n), (tile, tile))
        label = f"A {m}×{kk} @ B {kk}×{n}, grid {grid} of blocks {(tile, tile)}"
        expected = A.astype(np.float64) @ B.astype(np.float64)
        explain = lambda got: _matmul_cause(got, A, B, tile)  # noqa: E731
        blocks, owned = edge_blocks(grid, (m, n), (tile, tile), lambda bx, by: (by, bx))
        label += blocks_words(blocks)
        return Launch(
            grid,
            (tile, tile),
            (A, B),
            expected,
            label,
            out_shape=(m, n),
            atol=2e-6 * kk,
            explain=explain,
            blocks=blocks,
            owned=owned,
        )

    def then(case: Any, launch: Launch, report: Any) -> None:
        label, grid, (A, B) = launch.label, launch.grid, launch.inputs
        no_reuse = Failed(
            f"{label}: the values are right, but the kernel reads every operand from global memory.",
            cause="this exercise stages tiles of A and B in cuda.shared.array: each element loaded once per "
            "block is then reused MM_TILE times.",
        )
        if report is not None and not report.shared:
            raise no_reuse
        if launch.record and report is not None:
            # a tiled kernel reads each element of A once per block column of C (and B once per block row), plus padding
            reads_a, reads_b = _global_reads(report, "A"), _global_reads(report, "B")
            if reads_a > 2 * grid[0] * A.size or reads_b > 2 * grid[1] * B.size:
                raise Failed(
                    f"{label}: the values are right, but the kernel made {reads_a} global reads of A and {reads_b} "
                    f"of B (tiled: at most {grid[0] * A.size} and {grid[1] * B.size}); its shared memory does not "
                    "replace those reads.",
                    cause=no_reuse.cause,
                )

    unwritten = (
        "every thread whose (row, col) lies inside C must store its sum: check the final bounds test and that x is the column."
    )
    shared: dict[str, Any] = {"names": ("A", "B", "C"), "rtol": 1e-5, "unwritten_cause": unwritten}
    run_cases(kernel, cases, launch, reverse_at=2, record_at=0, record=("A", "B"), then=then, **shared)
    ptx_on_gpu(
        kernel,
        "void(float32[:, :], float32[:, :], float32[:, :])",
        SHARED_AND_BARRIER,
        label="matmul",
        cause="stage tiles of A and B in cuda.shared.array, with a barrier after loading and after using them.",
    )
    return (
        f"correct on {len(cases)} fresh products (sizes that are not multiples of the tile, K over 10 tiles, 1×1, and C "
        "with more than 65,536 rows or columns: in the simulator only the first and last blocks of those), with tiles in "
        "shared memory and no races between loading and using them."
    )


# ----------------------------------------------------------------------------- 03.stencil
RADIUS = 3


def _stencil_ref(x: np.ndarray) -> np.ndarray:
    p = np.concatenate([np.zeros(RADIUS), x.astype(np.float64), np.zeros(RADIUS)])
    return np.convolve(p, np.ones(2 * RADIUS + 1) / (2 * RADIUS + 1), mode="valid")


def _edge_cause(got: np.ndarray, x: np.ndarray) -> str | None:
    """Only the elements within RADIUS of an end are wrong, and they are the mean of the neighbours that exist:
    the zeros outside x were left out of the count."""
    want = _stencil_ref(x)
    wrong = np.flatnonzero(~np.isclose(got, want, rtol=1e-4, atol=1e-5))
    n = x.size
    if wrong.size == 0 or not np.all((wrong < RADIUS) | (wrong >= n - RADIUS)):
        return None
    xs = x.astype(np.float64)
    counted = np.array([xs[max(i - RADIUS, 0) : i + RADIUS + 1].mean() for i in wrong])
    if not np.allclose(got[wrong], counted, rtol=1e-4, atol=1e-5):
        return "only elements within 3 of an end are wrong: check the halo there (x outside the array counts as 0)."
    return (
        "only elements within 3 of an end are wrong, and they are the mean of the neighbours that exist: the "
        f"statement counts x outside the array as 0, so every output is the sum of {2 * RADIUS + 1} values (zeros "
        f"included) divided by {2 * RADIUS + 1}."
    )


@exercise("03.stencil", kind="kernel", reference=kernel_reference("stencil_1d"))
def stencil(kernel: Any) -> str:
    """Grade ``stencil(x, out)``: ``out[i]`` = mean of ``x[i-3 .. i+3]`` with zeros outside ``x``, block sizes up to 256."""
    from .draws import between, not_multiple

    # fresh sizes each run: a few blocks with a partial last one, one element, an exact multiple, a recorded launch,
    # fewer elements than a block, and two blocks of the largest size the exercise allows (MAX_BLOCK = 256)
    # blocks of 96 and 200 threads are not powers of two (a shift for a division fails there; 200 is not whole warps)
    cases = [
        (not_multiple(65, 127, 32), 32),
        (1, 32),
        (96 * between(1, 2), 96),
        (not_multiple(129, 250, 128), 128),
        (between(2, 150), 200),
        (not_multiple(257, 400, 256), 256),
        (not_multiple(65_600, 68_000, 256), 256),  # past 65,536 elements: an int16 or uint16 index wraps
    ]

    def launch(case: tuple[int, int]) -> Launch:
        n, block = case
        x = random_array(n)
        grid = -(-n // block)
        blocks, owned = edge_blocks_1d(grid, block, n, block)  # sim: a large grid's first and last blocks
        label = line_label(n, grid, block) + blocks_words(blocks)
        explain = lambda got: _edge_cause(got, x)  # noqa: E731
        return Launch(grid, block, (x,), _stencil_ref(x), label, out_shape=n, explain=explain, blocks=blocks, owned=owned)

    def then(case: tuple[int, int], launch: Launch, report: Any) -> None:
        n, label, grid = case[0], launch.label, launch.grid
        many_reads = Failed(
            f"{label}: the values are right, but every input is read {2 * RADIUS + 1} times from global memory.",
            cause="load the block's inputs and halo into cuda.shared.array once, then read neighbours from there.",
        )
        if report is not None and not report.shared:
            raise many_reads
        if launch.record and report is not None:
            reads, window = _global_reads(report, "x"), n + 2 * RADIUS * grid  # each block: its inputs and its halo
            if reads > 2 * window:
                raise Failed(
                    f"{label}: the values are right, but the kernel made {reads} global reads of x for {n} inputs "
                    f"(with shared memory: at most {window}); it reads neighbours from global memory, not from shared memory.",
                    cause=many_reads.cause,
                )

    shared: dict[str, Any] = {"names": ("x", "out"), "out_dtype": np.float32, "rtol": 1e-5, "atol": 1e-6}
    run_cases(kernel, cases, launch, reverse_at=3, record_at=3, then=then, **shared)
    ptx_on_gpu(
        kernel,
        "void(float32[:], float32[:])",
        SHARED_AND_BARRIER,
        label="stencil",
        cause="load the block's inputs and halo into cuda.shared.array, then cuda.syncthreads().",
    )
    return (
        f"correct on {len(cases)} fresh sizes (1 to 68,000 elements) and block sizes 32 to 256, edges included; halo "
        "loaded, no races."
    )


# ----------------------------------------------------------------------------- 03.occupancy
def _reference_launch_plan() -> Callable[[str, float, int], Any]:
    def launch_plan(arch: str, target: float, shared_per_block: int) -> tuple[int, int] | None:
        from labkit.hw import occupancy

        from ..errors import LabkitError

        def reaches(threads: int, regs: int) -> bool:
            try:
                return occupancy.occupancy(arch, threads, regs, shared_per_block).occupancy >= target
            except LabkitError:  # this block cannot launch with these resources
                return False

        best = None
        for threads in range(32, 1025, 32):
            budgets = [r for r in range(1, 256) if reaches(threads, r)]
            if budgets and (best is None or max(budgets) > best[1]):
                best = (threads, max(budgets))
        return best

    return launch_plan


def _occ(arch: str, threads: int, regs: int, shared: int) -> float | None:
    """Occupancy (0-1) from labkit.occupancy, or None when the block cannot launch with these resources."""
    from labkit.hw import occupancy

    from ..errors import LabkitError

    try:
        return occupancy.occupancy(arch, threads, regs, shared).occupancy
    except LabkitError:
        return None


def _best_budget(arch: str, threads: int, target: float, shared: int) -> int | None:
    """The largest registers per thread that keep ``target`` with blocks of ``threads``; None if none does. Found by
    bisection: occupancy never rises with more registers per thread, and a block that launches with some budget
    launches with any smaller one (``tests/test_grader_round6.py`` compares it with the search of all 255)."""

    def keeps(regs: int) -> bool:
        return (_occ(arch, threads, regs, shared) or 0) >= target - 1e-12

    if not keeps(1):
        return None
    lo, hi = 1, 255  # keeps(lo) holds; every budget above hi fails
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if keeps(mid) else (lo, mid - 1)
    return lo


def _plan_right(arch: str, target: float, shared: int, plan: Any) -> bool:
    """Would ``plan`` pass for ``(arch, target, shared)``: reaches the target with the largest budget for its size."""
    if plan is None:
        return not _reachable(arch, target, shared)
    threads, regs = plan
    occ = _occ(arch, threads, regs, shared)
    return occ is not None and occ >= target - 1e-12 and regs == _best_budget(arch, threads, target, shared)


def _shared_pair(rng: np.random.Generator, arches: list[str]) -> list[tuple[str, float, int]]:
    """Three cases with one arch and target: no shared memory, a shared-memory size for which the first case's plan
    is wrong, and the first again. A plan remembered by (arch, target) alone fails the second; a remembered plan
    keyed by all three arguments passes the third."""
    plan = _reference_launch_plan()
    arch, target = str(rng.choice(arches)), float(rng.choice([0.5, 0.625, 0.75]))
    first = plan(arch, target, 0)
    for shared in rng.permutation(np.arange(6_000, 46_000, 1_000)) + int(rng.integers(1, 999)):
        if not _plan_right(arch, target, int(shared), first):
            return [(arch, target, 0), (arch, target, int(shared)), (arch, target, 0)]
    return [(arch, target, 0)]


def _reachable(arch: str, target: float, shared: int) -> bool:
    return any(_best_budget(arch, t, target, shared) is not None for t in range(32, 1025, 32))


@exercise("03.occupancy", kind="code", reference=_reference_launch_plan)
def launch_plan(fn: Any) -> str:
    """Grade ``launch_plan(arch, target, shared_per_block) -> (threads_per_block, registers_per_thread) | None``:
    a block size (a multiple of 32) and the largest register budget with which ``labkit.occupancy`` gives at least
    ``target`` occupancy, for fresh random targets, architectures and shared-memory sizes (some out of reach)."""
    from .core import Unsolved
    from .streams import call_learner

    need_function(fn, "a function launch_plan(arch, target, shared_per_block)")
    rng = np.random.default_rng()
    arches = ["sm_70", "sm_80", "sm_90"]
    # first a low target whose largest budget is 255 (the most a thread can have: a search that stops at 254 fails)
    cases = [
        (str(rng.choice(arches)), 0.125, int(rng.integers(0, 2000))),
        (str(rng.choice(arches)), 1.0, 0),  # full occupancy: 64 warps, at most 32 registers
        (str(rng.choice(arches)), float(rng.choice([0.625, 0.75, 0.8125])), int(rng.integers(1, 8)) * 1000 + 7),
        ("sm_80", 0.5, 40_000 + int(rng.integers(0, 3000))),  # shared memory limits the blocks: large blocks needed
        ("sm_80", 0.5, 90_000 + int(rng.integers(0, 30_000))),  # one block per SM: only blocks of 1024 threads reach it
        ("sm_70", 0.75, 60_000 + int(rng.integers(0, 4000))),
    ]  # out of reach: one block of at most 32 warps
    cases.append((str(rng.choice(arches)), 0.1875, 0))  # a budget of 168
    cases[2:2] = _shared_pair(rng, arches)  # the same arch and target again with other shared memory, and repeated
    for _ in range(2):
        cases.append(
            (
                str(rng.choice(arches)),
                float(rng.choice([0.0625, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0])),
                int(rng.integers(0, 24_000)),
            )
        )
    seen: dict[tuple[str, float], tuple[int, Any]] = {}
    for arch, target, shared in cases:
        call = f"launch_plan({arch!r}, {target}, {shared})"
        got = call_learner(fn, arch, target, shared, what=call)
        prior = seen.get((arch, target))
        seen[(arch, target)] = (shared, got)
        if prior is not None and prior[0] != shared and prior[1] == got and not _plan_right(arch, target, shared, got):
            raise Failed(
                f"{call} returned {got!r}, the same plan as launch_plan({arch!r}, {target}, {prior[0]}), and it "
                f"is not right for {shared} B of shared memory per block.",
                cause="the shared memory per block changes the answer (it caps the blocks per SM): a plan "
                "remembered by arch and target alone, or computed without `shared`, ignores it. Key any "
                "cache by all three arguments and pass shared_per_block to occupancy().",
            )
        reachable = _reachable(arch, target, shared)
        if got is Ellipsis:
            raise Unsolved("launch_plan returns nothing yet.")
        if got is None:
            if reachable:
                raise Failed(
                    f"{call} returned None, but the target can be reached.",
                    cause="return None only when no block size reaches the target, even with few registers.",
                )
            continue
        if not reachable:
            raise Failed(
                f"{call} returned {got!r}, but no block size reaches {target:.0%} occupancy with {shared} B of "
                f"shared memory per block on {arch}.",
                cause="shared memory alone can cap the blocks per SM: check the occupancy a plan really gives "
                "with labkit.occupancy.occupancy and return None when nothing reaches the target.",
            )
        try:
            threads, regs = got
        except (TypeError, ValueError):
            raise Failed(f"{call} returned {got!r}; expected a pair (threads_per_block, registers_per_thread) or None.") from None
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (threads, regs)):
            raise Failed(f"{call} returned {got!r}: both numbers must be integers.")
        threads, regs = int(threads), int(regs)
        if not (32 <= threads <= 1024 and threads % 32 == 0):
            raise Failed(f"{call}: {threads} threads per block; use a multiple of 32 (whole warps) from 32 to 1024.")
        occ = _occ(arch, threads, regs, shared) if 1 <= regs <= 255 else None
        if occ is None:
            raise Failed(
                f"{call}: blocks of {threads} threads with {regs} registers each cannot launch on {arch} "
                "(1 to 255 registers, at most 65,536 per block)."
            )
        if occ < target - 1e-12:
            best = _best_budget(arch, threads, target, shared)
            cause = (
                "registers are allocated per warp in units of 256 (8 per thread), so the budget from dividing the "
                "register file by the warps can round up past it; confirm with labkit.occupancy.occupancy."
            )
            if best is None:
                cause = (
                    f"blocks of {threads} threads cannot reach the target with this shared memory at any budget: "
                    "take larger blocks (shared memory is per block) or a different size."
                )
            raise Failed(f"{call}: ({threads}, {regs}) gives {occ:.1%} occupancy on {arch}, below the target.", cause=cause)
        best = _best_budget(arch, threads, target, shared)
        if best is not None and regs < best:
            raise Failed(
                f"{call}: ({threads}, {regs}) reaches the target, but blocks of {threads} threads still reach it "
                f"with up to {best} registers per thread.",
                cause="the budget is the largest that keeps the target: a kernel that needs more registers "
                "than the budget spills to local memory, so do not give any away.",
            )
    return (
        f"right on {len(cases)} fresh cases on sm_70, sm_80 and sm_90: full occupancy, shared memory that limits "
        "the blocks, one arch and target asked again with other shared memory and then repeated, and a target out "
        "of reach."
    )
