"""The case loop of a kernel exercise, written once.

A kernel check grades the learner's kernel on several launches ("cases"): fresh inputs, a poisoned and guarded
output, a strict launch, the comparison with the reference and a likely cause for a mismatch, all of it
:func:`labkit.check.harness.grade`. What differs from one exercise to the next is data: its cases, how one case
becomes a :class:`~labkit.check.harness.Launch` (``make``), the options every launch of it shares, which case runs
its threads in reverse order or keeps a record of every access, and what the check reads in each passed launch's
report (``then``) or in a failure (``failed``). :func:`run_cases` is the loop itself; :func:`line_label` and
:func:`grid_label` are the two usual ways a case names itself; :func:`compared` and :func:`ptx_on_gpu` the two
steps a check adds around its launches; :func:`called` calls a learner's plain function (a code exercise's case).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Sequence, TypeVar

import numpy as np

from ..mode import current_mode
from ..sim import memory
from .core import Failed, Unsolved
from .harness import Launch, compare, fmt_shape, grade, grid_2d, require_ptx

C = TypeVar("C")
Report = memory.LaunchReport | None

SHARED_AND_BARRIER = ("shared memory", "a barrier")  # what a tiled kernel's PTX shows


def run_cases(
    kernel: Any,
    cases: Iterable[C],
    make: Callable[[C], Launch],
    *,
    reverse_at: int | None = None,
    record_at: int | None = None,
    record: bool | Sequence[str] = True,
    then: Callable[[C, Launch, Report], None] | None = None,
    failed: Callable[[C, Launch, Failed], None] | None = None,
    **shared: Any,
) -> int:
    """Grade ``kernel`` on each of ``cases`` in turn, and return how many launches passed.

    ``make(case)`` draws the case's inputs and returns its :class:`~labkit.check.harness.Launch`; it runs just
    before that case's launch (the random draws keep the order of a plain loop). ``shared`` holds the launch
    options every case has (``names``, ``out_dtype``, tolerances, causes); they replace what ``make`` set. The
    first case's untouched output means "not solved yet"; case ``reverse_at`` starts each block's threads in
    reverse order (the first runs them forward, the others in a shuffled order); case ``record_at`` keeps every
    access (``record``: all of them, or those of the arrays named). ``then(case, launch, report)`` reads a passed
    launch's report (None on a GPU) and raises :class:`Failed` for what the values alone do not show;
    ``failed(case, launch, exc)`` may raise a better-explained :class:`Failed` for a wrong result (an unsolved
    kernel's :class:`~labkit.check.core.Unsolved` goes straight through), else ``exc`` stands. A check that needs a
    case's position passes ``enumerate(cases)``."""
    passed = 0
    for k, case in enumerate(cases):
        launch = dataclasses.replace(make(case), first=k == 0, reverse=k == reverse_at, **shared)
        if k == record_at:
            launch.record = record
        try:
            report = grade(kernel, launch)
        except Failed as exc:
            if failed is not None:
                failed(case, launch, exc)
            raise
        if then is not None:
            then(case, launch, report)
        passed += 1
    return passed


def line_label(n: int, grid: int, block: int, what: str = "") -> str:
    """How a 1-D case names itself: ``n=1000, 4 block(s) of 256 threads`` (``what`` follows the size)."""
    return f"n={n}{what}, {grid} block(s) of {block} threads"


def grid_label(noun: str, shape: tuple[int, int], block: tuple[int, int]) -> str:
    """How a 2-D case names itself: ``image 9×20 (rows×cols), grid (2, 2) of blocks (16, 8)``, with the grid
    that covers ``shape`` (:func:`~labkit.check.harness.grid_2d`); ``noun`` may end in ``{shape}`` to say more after it."""
    where = noun.format(shape=fmt_shape(shape)) if "{shape}" in noun else f"{noun} {fmt_shape(shape)}"
    return f"{where}, grid {grid_2d(shape, block)} of blocks {block}"


def compared(got: np.ndarray, expected: np.ndarray, because: Callable[[], str | None], **options: Any) -> None:
    """:func:`~labkit.check.harness.compare` (``options``: its ``label``, tolerances, ...), with the check's own
    likely cause for a mismatch: ``because()``, or the comparison's own cause when that gives none."""
    try:
        compare(got, expected, **options)
    except Failed as exc:
        raise Failed(str(exc), cause=because() or exc.cause) from None


def ptx_on_gpu(kernel: Any, signature: str, features: Sequence[str], *, label: str, cause: str) -> None:
    """On a GPU, :func:`~labkit.check.harness.require_ptx` (the kernel's PTX shows ``features``); in ``sim`` mode
    nothing, where the strict launch's report has already shown what the kernel did."""
    if current_mode() == "gpu":
        require_ptx(kernel, signature, list(features), label=label, cause=cause)


def called(fn: Callable[..., Any], *args: Any, what: str, nothing: str) -> Any:
    """``fn(*args)`` for a learner's function: its error becomes a :class:`Failed` naming the call (``what``), a
    result of None or ``...`` an :class:`~labkit.check.core.Unsolved` saying ``nothing``; ``NotImplementedError``
    (the unsolved template) goes straight through."""
    try:
        got = fn(*args)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
        raise Failed(f"{what} raised {type(exc).__name__}: {exc}") from None
    if got is None or got is Ellipsis:
        raise Unsolved(nothing)
    return got


BIG = 65_536  # past this many rows, columns or elements a 16-bit index wraps
EDGE_BLOCKS = 2  # blocks run at each end of a large axis in sim mode


def edge_blocks(
    grid: tuple[int, int], shape: tuple[int, int], tile: tuple[int, int], tile_of: Callable[[int, int], tuple[int, int]]
) -> tuple[list[tuple[int, int, int]] | None, np.ndarray | None]:
    """For a 2-D grid with an axis past :data:`BIG` elements of ``shape`` (rows, cols) in sim mode: the blocks to run
    (the first and the last :data:`EDGE_BLOCKS` along each long axis, every block along a short one) and the mask of the output
    they own; ``tile_of(bx, by)`` gives the (tile row, tile column) of the output that block (bx, by) writes, in
    tiles of ``tile`` (rows, cols). (None, None) for a grid the simulator runs whole, and on a GPU."""
    if current_mode() != "sim" or max(shape) <= BIG:
        return None, None

    def ends(count: int) -> list[int]:  # a short axis runs whole
        return list(range(count)) if count <= 2 * EDGE_BLOCKS + 1 else [0, *range(count - EDGE_BLOCKS, count)]

    xs, ys = ends(grid[0]), ends(grid[1])
    blocks = [(bx, by, 0) for by in ys for bx in xs]
    owned = np.zeros(shape, dtype=bool)
    for bx, by, _ in blocks:
        tr, tc = tile_of(bx, by)
        owned[tr * tile[0] : (tr + 1) * tile[0], tc * tile[1] : (tc + 1) * tile[1]] = True
    return blocks, owned


def edge_blocks_1d(grid: int, block: int, n: int, per_block: int) -> tuple[list[tuple[int, int, int]] | None, np.ndarray | None]:
    """:func:`edge_blocks` of a 1-D grid of ``grid`` blocks of ``block`` threads whose block b owns output elements
    ``b * per_block`` up to the next block's (``n`` of them in all): (None, None) unless sim mode and more than
    :data:`BIG` threads (a global index past 65,535)."""
    if current_mode() != "sim" or grid * block <= BIG or grid <= 2 * EDGE_BLOCKS + 1:
        return None, None
    blocks = [(b, 0, 0) for b in (0, *range(grid - EDGE_BLOCKS, grid))]
    owned = np.zeros(n, dtype=bool)
    for b, _, _ in blocks:
        owned[b * per_block : (b + 1) * per_block] = True
    return blocks, owned


def blocks_words(blocks: Sequence[tuple[int, int, int]] | None) -> str:
    """How a case's label says that only some blocks ran (sim): ``, blocks (0,), (255,), (256,) run (sim)``."""
    if not blocks:
        return ""
    dims = 2 if any(b[1] for b in blocks) or len({b[0] for b in blocks}) < len(blocks) else 1
    return ", blocks " + ", ".join(str(tuple(b[:dims])) for b in blocks) + " run (sim)"


def big_2d_cases(block: tuple[int, int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Two (shape, block) cases of a 2-D elementwise kernel past :data:`BIG`: more than 65,536 columns on a few rows,
    then more than 65,536 rows of a few columns (a 16-bit row or column index wraps); sim mode runs their edge blocks
    (:func:`edge_blocks`)."""
    from .draws import between, not_multiple

    return [
        ((between(1, 3), not_multiple(BIG + 64, BIG + 500, block[0])), block),
        ((not_multiple(BIG + 64, BIG + 500, block[1]), between(1, 3)), block),
    ]
