"""Warp-level primitives for Numba's CUDA simulator: shuffles, votes and ``syncwarp``.

The simulator runs each CUDA thread of a block as a Python thread and has no warp functions. This module
adds them to the simulator's in-kernel ``cuda`` module so that warp-level code (a shuffle reduction, a vote)
runs on a CPU with the semantics of the hardware:

- every lane named in ``mask`` (and present in the block) must call the same function; the call is a
  rendezvous of those lanes, each contributes its value and receives another lane's value;
- ``shfl_sync(mask, v, src)``, ``shfl_up_sync(mask, v, d)``, ``shfl_down_sync(mask, v, d)``,
  ``shfl_xor_sync(mask, v, m)``: as in CUDA with width 32; a source lane outside the warp returns the
  caller's own value (as Numba documents);
- ``all_sync``, ``any_sync``, ``eq_sync``, ``ballot_sync``; ``syncwarp(mask)``; ``activemask()`` (all lanes
  present in the block: the simulator cannot see divergence), ``lanemask_lt()``.

A lane named in the mask that never arrives (it returned early, or waits at ``syncthreads``) makes the other
lanes fail after :data:`WAIT_S` seconds with a message, instead of hanging as a real GPU might.

``syncwarp`` also orders memory among the lanes that meet at it, under the strict memory model
(:mod:`labkit.sim.memory`), as it does on a GPU.

Call :func:`install` once the simulator is selected (``labkit.setup()`` does it in ``sim`` mode).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

from . import blocks
from .errors import WarpError

WAIT_S = 20.0  # generous: on a loaded 2-core machine 32 Python threads can take seconds to meet
FULL_MASK = 0xFFFFFFFF

_lock = threading.Lock()
_installed = False
calls = 0  # warp-level calls made so far in this process (the lab checks read it to see shuffles were used)


_open: "weakref.WeakSet[_Rendezvous]" = weakref.WeakSet()


class _Rendezvous:
    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=WAIT_S)
        self.slots: dict[int, Any] = {}
        self.threads: dict[int, Any] = {}
        _open.add(self)


def _abort_all() -> None:
    """Break every pending rendezvous (the launch is being stopped): waiting lanes return at once."""
    for rv in list(_open):
        rv.barrier.abort()


def _lanes_in_warp(block_dim: Any, warp: int) -> int:
    n = block_dim.x * block_dim.y * block_dim.z
    return max(0, min(32, n - 32 * warp))


def _exchange(fake: Any, mask: int, value: Any, what: str,
              then: Callable[[list[Any]], None] | None = None) -> tuple[dict[int, Any], int, int]:
    """All lanes of ``mask`` meet; returns ({lane: value}, own lane, mask of lanes that took part).

    ``then(threads)`` runs once, in the lowest lane, after all have arrived and before any leaves."""
    global calls
    calls += 1
    thread = threading.current_thread()
    tid = thread.thread_id  # linear thread index in the block (x fastest), as CUDA numbers lanes
    lane, warp = tid % 32, tid // 32
    present = (1 << _lanes_in_warp(fake.blockDim, warp)) - 1
    members = int(mask) & FULL_MASK & present
    if not (members >> lane) & 1:
        raise WarpError(f"{what}: lane {lane} of warp {warp} called it with mask {int(mask):#010x}, which leaves it out")
    key = (tuple(thread.blockIdx), warp, members)
    with _lock:
        table = fake.__dict__.setdefault("_labkit_warps", {})
        rv = table.get(key)
        if rv is None:
            rv = table[key] = _Rendezvous(bin(members).count("1"))
    rv.slots[lane] = value
    rv.threads[lane] = thread
    try:
        rv.barrier.wait()
        values = dict(rv.slots)
        if then is not None and lane == min(values):
            then(list(rv.threads.values()))
        rv.barrier.wait()
    except threading.BrokenBarrierError:
        missing = [ln for ln in range(32) if (members >> ln) & 1 and ln not in rv.slots]
        raise WarpError(
            f"{what} in block {tuple(thread.blockIdx)}, warp {warp}: lanes {missing or '?'} named in mask "
            f"{int(mask):#010x} never reached it within {WAIT_S:.0f} s (did they return early, or wait at syncthreads?)"
        ) from None
    return values, lane, members


def shfl_sync(self: Any, mask: int, value: Any, src_lane: int) -> Any:
    values, lane, _ = _exchange(self, mask, value, "shfl_sync")
    return values.get(int(src_lane) % 32, value)


def shfl_up_sync(self: Any, mask: int, value: Any, delta: int) -> Any:
    values, lane, _ = _exchange(self, mask, value, "shfl_up_sync")
    src = lane - int(delta)
    return values.get(src, value) if src >= 0 else value


def shfl_down_sync(self: Any, mask: int, value: Any, delta: int) -> Any:
    values, lane, _ = _exchange(self, mask, value, "shfl_down_sync")
    src = lane + int(delta)
    return values.get(src, value) if src < 32 else value


def shfl_xor_sync(self: Any, mask: int, value: Any, lane_mask: int) -> Any:
    values, lane, _ = _exchange(self, mask, value, "shfl_xor_sync")
    return values.get((lane ^ int(lane_mask)) & 31, value)


def all_sync(self: Any, mask: int, predicate: Any) -> int:
    values, _, _ = _exchange(self, mask, bool(predicate), "all_sync")
    return int(all(values.values()))


def any_sync(self: Any, mask: int, predicate: Any) -> int:
    values, _, _ = _exchange(self, mask, bool(predicate), "any_sync")
    return int(any(values.values()))


def eq_sync(self: Any, mask: int, predicate: Any) -> int:
    values, _, _ = _exchange(self, mask, bool(predicate), "eq_sync")
    return int(len(set(values.values())) == 1)


def ballot_sync(self: Any, mask: int, predicate: Any) -> int:
    values, _, _ = _exchange(self, mask, bool(predicate), "ballot_sync")
    return sum(1 << ln for ln, v in values.items() if v)


def _order_memory(threads: list[Any]) -> None:
    from . import memory

    if memory.active is not None:
        memory.active.syncwarp(threads)


def syncwarp(self: Any, mask: int = FULL_MASK) -> None:
    _exchange(self, mask, None, "syncwarp", then=_order_memory)


def activemask(self: Any) -> int:
    tid = threading.current_thread().thread_id
    return (1 << _lanes_in_warp(self.blockDim, tid // 32)) - 1


def lanemask_lt(self: Any) -> int:
    return (1 << (threading.current_thread().thread_id % 32)) - 1


_FUNCTIONS = {
    "shfl_sync": shfl_sync, "shfl_up_sync": shfl_up_sync, "shfl_down_sync": shfl_down_sync,
    "shfl_xor_sync": shfl_xor_sync, "all_sync": all_sync, "any_sync": any_sync, "eq_sync": eq_sync,
    "ballot_sync": ballot_sync, "syncwarp": syncwarp, "activemask": activemask, "lanemask_lt": lanemask_lt,
}


def install() -> bool:
    """Add the warp functions to the simulator's in-kernel ``cuda`` module. Returns True if installed now.

    Only in ``sim`` mode (numba's CUDA target must be the simulator); a no-op when called again.
    """
    global _installed
    if _installed:
        return False
    if not is_simulator():
        return False
    blocks.state.stoppers.append(_abort_all)
    from numba.cuda.simulator import kernelapi

    for name, fn in _FUNCTIONS.items():
        if not hasattr(kernelapi.FakeCUDAModule, name):
            setattr(kernelapi.FakeCUDAModule, name, fn)
    _installed = True
    return True


def is_simulator() -> bool:
    """True when numba's CUDA target is the simulator."""
    try:
        from numba.cuda.core import config
    except ImportError:  # pragma: no cover
        from numba.core import config
    return bool(config.ENABLE_CUDASIM)
