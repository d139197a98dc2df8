"""What went wrong in a block, in words: barriers that not every thread reached, and launches past their limit.

On a GPU a ``cuda.syncthreads()`` that only some threads of the block reach (one inside an ``if``, or after
some threads returned) is undefined behaviour: it can hang or give wrong results. The engine
(:mod:`labkit.sim.engine`) finds both when no thread can run; these functions describe what each thread was
doing. They read only the state of the block's threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .errors import DivergentBarrier, KernelTimeout
from .limits import LIKELY_HANG

# thread states, as in labkit.sim.engine (kept here so that this module depends on nothing of the engine)
RUNNING, BARRIER, WAITING, DONE = 0, 1, 2, 3

DIVERGENT_CAUSE = (
    "an early `return` (or an `if` around cuda.syncthreads()) lets some threads skip the barrier: keep "
    "every thread alive until after the last barrier and guard only the loads and stores with the "
    "bounds check."
)


def ids(threads: Sequence[Any], limit: int = 6) -> str:
    """``0, 1, 5 and 3 more``: thread indices as a learner writes them (x alone for 1-D blocks)."""
    keys = sorted(tuple(t.threadIdx)[: 1 if t.threadIdx.y == t.threadIdx.z == 0 else 3] for t in threads)
    shown = ", ".join(str(i[0]) if len(i) == 1 else str(i) for i in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _site(site: tuple[str, int]) -> str:
    return f"line {site[1]}" if site[1] else "a barrier"


def divergent_report(block: Any) -> DivergentBarrier:
    """The threads of ``block`` wait at different barriers, or some finished while others wait at one."""
    threads = block.threads
    waiting = [t for t in threads if t.state == BARRIER]
    sites: dict[tuple[str, int], list[Any]] = {}
    for t in waiting:
        sites.setdefault(t.site, []).append(t)
    index = tuple(block.index)
    if len(sites) > 1:
        parts = "; ".join(f"threads {ids(ts)} at {_site(s)}" for s, ts in sorted(sites.items(), key=lambda kv: kv[0][1]))
        return DivergentBarrier(
            f"in block {index} the threads wait at different cuda.syncthreads() calls ({parts}): "
            "on a GPU every thread of a block must reach the same barrier.",
            cause=DIVERGENT_CAUSE,
        )
    if not sites:  # (not reached: the engine asks only when some thread waits)
        return DivergentBarrier(f"the threads of block {index} cannot go on.", cause=LIKELY_HANG)
    ((site, at),) = sites.items()
    skipped = [t for t in threads if t.state == DONE]
    return DivergentBarrier(
        f"cuda.syncthreads() at {_site(site)} was reached by {len(at)} of {len(threads)} threads of block {index}; "
        f"threads {ids(skipped)} had already finished. On a GPU a barrier that some threads of the block skip is "
        "undefined behaviour (it can hang or give wrong results).",
        cause=DIVERGENT_CAUSE,
    )


@dataclass(frozen=True)
class Stuck:
    """Where a launch that ran past its limit was: a thread still computing, and the line of the kernel it was at."""

    thread: tuple[int, ...]
    block: tuple[int, ...]
    filename: str
    line: int
    function: str

    def words(self) -> str:
        """``thread (0, 0, 0) of block (0, 0, 0) was at line 4 of saxpy: `while i < n:```."""
        import linecache

        text = linecache.getline(self.filename, self.line).strip()
        return f"thread {self.thread} of block {self.block} was at line {self.line} of {self.function}" + (
            f": `{text}`" if text else ""
        )


TOO_LARGE_SHARE = 0.5  # a launch past its limit with at least this share of its blocks finished is large, not stuck


def timeout_report(
    block: Any,
    seconds: float,
    *,
    stuck: Stuck | None = None,
    cpu_s: float | None = None,
    wall_s: float | None = None,
    wall_limit_s: float | None = None,
    blocks_done: int = 0,
    blocks_total: int = 1,
) -> KernelTimeout:
    """The time limit passed while ``block`` ran: say what its threads were doing, where one of them was
    (``stuck``), and the likely cause; a launch most of whose blocks had finished is called too large, not stuck.

    ``seconds`` is the limit of CPU time; when the launch was stopped by its wall-time ceiling instead
    (``wall_s`` past ``wall_limit_s`` before ``cpu_s`` reached ``seconds``: a busy machine), the message says so."""
    threads = block.threads
    waiting = [t for t in threads if t.state == BARRIER]
    computing = [t for t in threads if t.state in (RUNNING, WAITING) and t.glet is not None]
    unstarted = sum(1 for t in threads if t.state == RUNNING and t.glet is None)
    done = sum(1 for t in threads if t.state == DONE)
    words = f"{len(computing)} thread(s) still computing"
    if unstarted:
        words += f", {unstarted} not started yet"
    if waiting:
        words += f", {len(waiting)} waiting at cuda.syncthreads() ({', '.join(sorted({_site(t.site) for t in waiting}))})"
    if done:
        words += f", {done} finished"
    by_wall = wall_s is not None and wall_limit_s is not None and wall_s >= wall_limit_s and (cpu_s or 0) < seconds
    within = (
        f"{wall_limit_s:g} s (the machine is busy: the launch had {cpu_s:.1f} s of CPU time)"
        if by_wall
        else f"{seconds:g} s of CPU time"
    )
    where = f"; {stuck.words()}" if stuck is not None else ""
    # large, not stuck: most blocks finished, or blocks keep finishing and no thread was in the middle of its work
    if blocks_total > 1 and (blocks_done >= TOO_LARGE_SHARE * blocks_total or (blocks_done and not computing and not waiting)):
        used = cpu_s if cpu_s else seconds
        need = used * blocks_total / max(blocks_done, 1)
        need_words = f"{need:.0f} s" if need >= 10 else f"{need:.1f} s"
        exc = KernelTimeout(
            f"the launch is too large for the simulator: {blocks_done:,} of {blocks_total:,} blocks finished within "
            f"{within}, so it is not stuck (block {tuple(block.index)}: {words})",
            cause=(
                f"not a hang: at this pace the whole launch needs about {need_words} of CPU time here. Run a smaller "
                "problem in sim mode (labkit.size(gpu=..., sim=...)), or give each thread less work."
            ),
        )
        exc.too_large, exc.stuck = True, stuck  # type: ignore[attr-defined]
        return exc
    if waiting and computing:
        cause = (
            f"threads {ids(computing)} never reach the barrier that the others wait at: a loop that does not end "
            "for them, or a barrier inside a branch they do not take."
        )
    elif computing:
        cause = (
            "a loop whose condition never becomes false (a `while` whose index never advances, a stride of 0), or "
            "far more work than the exercise needs."
        )
    else:
        cause = LIKELY_HANG
    exc = KernelTimeout(
        f"the kernel did not finish within {within} in the simulator (block {tuple(block.index)}: {words}){where}", cause=cause
    )
    exc.too_large, exc.stuck = False, stuck  # type: ignore[attr-defined]
    return exc
