"""What went wrong in a block, in words: barriers that not every thread reached, and launches past their limit.

On a GPU a ``cuda.syncthreads()`` that only some threads of the block reach (one inside an ``if``, or after
some threads returned) is undefined behaviour: it can hang or give wrong results. The engine
(:mod:`labkit.sim.engine`) finds both when no thread can run; these functions describe what each thread was
doing. They read only the state of the block's threads.
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import DivergentBarrier, KernelTimeout
from .limits import LIKELY_HANG

# thread states, as in labkit.sim.engine (kept here so that this module depends on nothing of the engine)
RUNNING, BARRIER, WAITING, DONE = 0, 1, 2, 3

DIVERGENT_CAUSE = ("an early `return` (or an `if` around cuda.syncthreads()) lets some threads skip the barrier: keep "
                   "every thread alive until after the last barrier and guard only the loads and stores with the "
                   "bounds check.")


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
        return DivergentBarrier(f"in block {index} the threads wait at different cuda.syncthreads() calls ({parts}): "
                                "on a GPU every thread of a block must reach the same barrier.", cause=DIVERGENT_CAUSE)
    if not sites:  # (not reached: the engine asks only when some thread waits)
        return DivergentBarrier(f"the threads of block {index} cannot go on.", cause=LIKELY_HANG)
    (site, at), = sites.items()
    skipped = [t for t in threads if t.state == DONE]
    return DivergentBarrier(
        f"cuda.syncthreads() at {_site(site)} was reached by {len(at)} of {len(threads)} threads of block {index}; "
        f"threads {ids(skipped)} had already finished. On a GPU a barrier that some threads of the block skip is "
        "undefined behaviour (it can hang or give wrong results).", cause=DIVERGENT_CAUSE)


def timeout_report(block: Any, seconds: float) -> KernelTimeout:
    """The time limit passed while ``block`` ran: say what its threads were doing, and the likely cause."""
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
    if waiting and computing:
        cause = (f"threads {ids(computing)} never reach the barrier that the others wait at: a loop that does not end "
                 "for them, or a barrier inside a branch they do not take.")
    elif computing:
        cause = ("a loop whose condition never becomes false (a `while` whose index never advances, a stride of 0), or "
                 "far more work than the exercise needs.")
    else:
        cause = LIKELY_HANG
    return KernelTimeout(f"the kernel did not finish within {seconds:g} s of CPU time in the simulator (block "
                         f"{tuple(block.index)}: {words})", cause=cause)
