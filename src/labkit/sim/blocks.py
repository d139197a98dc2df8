"""Running one thread block in the simulator with barriers as a GPU has them.

Numba's simulator runs each CUDA thread as a Python thread and releases a ``cuda.syncthreads()`` as soon as
the threads still alive have all arrived. On a GPU a barrier that only some threads of the block reach (one
inside an ``if``, or after some threads returned) is undefined behaviour. :func:`run_block` replaces the
simulator's ``BlockManager.run``; it

- raises :class:`~labkit.sim.errors.DivergentBarrier` naming the line and the threads that skipped it;
- stops every thread of the block when the launch's deadline passes or the learner interrupts the kernel
  (Kernel → Interrupt), within about a second;
- calls the hooks of an active memory model (:mod:`labkit.sim.memory`) at block start and at each barrier,
  and starts the threads in the model's order.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from .errors import DivergentBarrier, KernelTimeout
from .limits import LIKELY_HANG, is_learner_file


class BlockHooks(Protocol):
    """What a memory model supplies to :func:`run_block`."""

    reverse: bool

    def block_start(self) -> None: ...

    def barrier(self) -> None: ...


class _State:
    hooks: BlockHooks | None = None
    deadline: float | None = None  # time.monotonic() value after which the launch is stopped
    seconds: float = 0.0
    stoppers: list[Callable[[], None]] = []  # called when threads are stopped (e.g. to break warp rendezvous)


state = _State()


class StoppedThread(Exception):
    """Raised inside a simulator thread to stop it (time limit, interrupt, another thread's error)."""


def _caller_site() -> tuple[str, int]:
    """(file, line) of the innermost learner frame calling the barrier."""
    frame = sys._getframe(2)
    while frame is not None:
        if is_learner_file(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return "?", 0


def _syncthreads(self: Any) -> None:
    """BlockThread.syncthreads, remembering where the thread waits."""
    if self.abort:
        raise StoppedThread("stopped")
    self.barrier_site = _caller_site()
    self.syncthreads_blocked = True
    self.syncthreads_event.wait()
    self.syncthreads_event.clear()
    if self.abort:
        raise StoppedThread("stopped")


def _thread_run(self: Any) -> None:
    """BlockThread.run keeping the thread's exception as raised (with its explanation), not re-created from text."""
    try:
        threading.Thread.run(self)
    except StoppedThread:
        self.exception = None
    except Exception as exc:  # noqa: BLE001 - handed to the launching thread
        exc.sim_thread = (tuple(self.threadIdx), tuple(self.blockIdx))  # type: ignore[attr-defined]
        self.exception = (exc, exc.__traceback__)


def _line_check(frame: Any, event: str, arg: Any) -> Any:
    """Trace function of learner frames in simulator threads: stop the thread when its launch is stopped or
    past its deadline. It runs in the thread itself, at a line of learner code: a safe place to raise, which needs
    no help from the launching thread (that, with dozens of busy threads, may wait long for the GIL)."""
    if event == "line":
        thread = threading.current_thread()
        if getattr(thread, "abort", False):
            raise StoppedThread("stopped")
        if state.deadline is not None and time.monotonic() > state.deadline:
            raise KernelTimeout(f"the kernel did not finish within {state.seconds:.0f} s in the simulator", cause=LIKELY_HANG)
    return _line_check


def thread_tracer(frame: Any, event: str, arg: Any) -> Any:
    """``threading.settrace`` hook for a launch: trace lines of learner code only (the simulator runs untraced)."""
    if event == "call" and is_learner_file(frame.f_code.co_filename):
        return _line_check
    return None


def stop_threads(threads: Sequence[Any], *, within: float = 2.0) -> None:
    """Stop simulator threads: wake those at a barrier or warp call and flag all of them, so that each stops at its
    next line of learner code (see :func:`thread_tracer`); wait up to ``within`` seconds for them to end."""
    for stopper in list(state.stoppers):
        stopper()
    for t in threads:
        t.abort = True
        t.syncthreads_blocked = False
        t.syncthreads_event.set()
    end = time.monotonic() + within
    for t in threads:
        t.join(timeout=max(0.0, end - time.monotonic()))


def _ids(threads: Sequence[Any], limit: int = 6) -> str:
    ids = sorted(tuple(t.threadIdx)[: 1 if t.threadIdx.y == t.threadIdx.z == 0 else 3] for t in threads)
    shown = ", ".join(str(i[0]) if len(i) == 1 else str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _site(site: tuple[str, int]) -> str:
    return f"line {site[1]}" if site[1] else "a barrier"


def _divergent(grid_point: Any, threads: Sequence[Any], blocked: set[Any]) -> DivergentBarrier:
    sites: dict[tuple[str, int], list[Any]] = {}
    for t in blocked:
        sites.setdefault(t.barrier_site, []).append(t)
    cause = ("an early `return` (or an `if` around cuda.syncthreads()) lets some threads skip the barrier: keep every "
             "thread alive until after the last barrier and guard only the loads and stores with the bounds check.")
    block = tuple(grid_point)
    if len(sites) > 1:
        parts = "; ".join(f"threads {_ids(ts)} at {_site(s)}" for s, ts in sorted(sites.items(), key=lambda kv: kv[0][1]))
        return DivergentBarrier(f"in block {block} the threads wait at different cuda.syncthreads() calls ({parts}): "
                                "on a GPU every thread of a block must reach the same barrier.", cause=cause)
    (site, waiting), = sites.items()
    skipped = [t for t in threads if t not in blocked]
    return DivergentBarrier(
        f"cuda.syncthreads() at {_site(site)} was reached by {len(waiting)} of {len(threads)} threads of block {block}; "
        f"threads {_ids(skipped)} had already finished. On a GPU a barrier that some threads of the block skip is "
        "undefined behaviour (it can hang or give wrong results).", cause=cause)


def _timeout(grid_point: Any, threads: Sequence[Any], live: set[Any]) -> KernelTimeout:
    """The time limit passed: say what the block's threads were doing, and the likely cause that follows from it."""
    waiting = [t for t in live if t.syncthreads_blocked]
    computing = [t for t in live if not t.syncthreads_blocked]
    done = len(threads) - len(live)
    state_words = f"{len(computing)} thread(s) still computing"
    if waiting:
        sites = sorted({_site(t.barrier_site) for t in waiting})
        state_words += f", {len(waiting)} waiting at cuda.syncthreads() ({', '.join(sites)})"
    if done:
        state_words += f", {done} finished"
    if waiting and computing:
        cause = (f"threads {_ids(computing)} never reach the barrier that the others wait at: a loop that does not end "
                 "for them, or a barrier inside a branch they do not take.")
    elif computing:
        cause = ("a loop whose condition never becomes false (a `while` whose index never advances, a stride of 0), or "
                 "a warp shuffle or vote that waits for lanes that returned early.")
    else:
        cause = LIKELY_HANG
    return KernelTimeout(f"the kernel did not finish within {state.seconds:.0f} s in the simulator (block "
                         f"{tuple(grid_point)}: {state_words})", cause=cause)


def run_block(self: Any, grid_point: Any, *args: Any) -> None:
    """The simulator's ``BlockManager.run`` with GPU barrier rules, time limits, interrupts and memory-model hooks."""
    from numba.cuda.simulator.kernel import BlockThread

    hooks = state.hooks
    if hooks is not None:
        hooks.block_start()
    points = list(np.ndindex(*self._block_dim))
    if hooks is not None and hooks.reverse:
        points.reverse()
    threads: list[Any] = []
    gate = threading.Event()  # threads wait here until all are started: starting one is slow while others compute

    def target() -> None:
        gate.wait()
        if not threading.current_thread().abort:
            self._f(*args)

    try:
        for block_point in points:
            t = BlockThread(target, self, grid_point, block_point, self._debug)
            t.barrier_site = ("?", 0)
            t.start()
            threads.append(t)
        gate.set()
        live, blocked = set(threads), set()
        while live:
            for t in live:
                if t.syncthreads_blocked:
                    blocked.add(t)
                elif t.exception:
                    if isinstance(t.exception[0], KernelTimeout):  # a thread saw the deadline first: describe the block
                        raise _timeout(grid_point, threads, live)
                    _raise_first(threads, t)
            if blocked and live == blocked:
                if len(blocked) < len(threads) or len({t.barrier_site for t in blocked}) > 1:
                    raise _divergent(grid_point, threads, blocked)
                if hooks is not None:
                    hooks.barrier()  # everything written before the barrier is now visible to the whole block
                for t in blocked:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blocked = set()
            live = {t for t in live if t.is_alive()}
            if live and not blocked:
                time.sleep(0)
            elif live:
                time.sleep(0.0005)
            if live and state.deadline is not None and time.monotonic() > state.deadline:
                raise _timeout(grid_point, threads, live)
    except BaseException:
        gate.set()
        stop_threads(threads)
        raise
    for t in threads:
        if t.exception:
            _raise_first(threads, t)


def _raise_first(threads: Sequence[Any], failed: Any) -> None:
    """Stop the other threads and raise the exception of ``failed`` (a thread's own error, not a stop signal)."""
    stop_threads([t for t in threads if t is not failed])
    exc, tb = failed.exception
    raise exc.with_traceback(tb)


_installed = False


def install() -> None:
    """Replace the simulator's block runner and barrier (sim mode only; idempotent)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel as sim_kernel

    sim_kernel.BlockManager.run = run_block
    sim_kernel.BlockThread.syncthreads = _syncthreads
    sim_kernel.BlockThread.run = _thread_run
    _installed = True
