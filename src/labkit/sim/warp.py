"""Warp-level primitives for Numba's CUDA simulator, as CUDA defines them.

The simulator runs each CUDA thread of a block as a Python thread and has no warp functions. This module
adds them to the simulator's in-kernel ``cuda`` module so that warp-level code runs on a CPU with the
semantics of a GPU with independent thread scheduling (Volta and later):

- a call with a ``mask`` is a meeting of the lanes named in it that are still running: each contributes a
  value and receives a result; lanes that have exited (returned) are not waited for, as on a GPU;
- ``shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync`` (width 32): the source lane is
  computed from the low 5 bits of the lane, delta or lane mask as the PTX instruction does; a source outside
  the warp returns the caller's own value (as Numba documents); reading from a lane that has exited, is not
  in the mask or does not exist (a partial warp) is an error, because a GPU returns an undefined value;
- ``all_sync``, ``any_sync``, ``eq_sync`` (booleans), ``ballot_sync`` (an ``int32``, as Numba types it:
  a full warp's ballot is ``-1``), ``match_any_sync`` (``int32``), ``match_all_sync`` (``(int32, bool)``);
- ``syncwarp(mask)``, which also orders memory among the lanes that meet at it under the strict memory
  model (:mod:`labkit.sim.memory`); ``lanemask_lt()``;
- ``activemask()``: the lanes of the warp that are executing this same call (the same line) together. A lane
  calling it waits until every other lane of its warp has reached a warp call, a ``syncthreads`` or its end,
  and the answer is the set of lanes at this line. That is what a GPU does after a branch (the lanes of the
  other side are not active), but it is a model: on a GPU lanes that took the same branch may still run apart
  (activemask may be smaller), and lanes that reach this line at different loop iterations count together.

Values of types that a GPU compile rejects (``shfl_sync`` of a ``uint32`` or a ``bool``, a float mask or
vote predicate) raise :class:`~labkit.sim.errors.WarpError` at the call (Numba raises ``TypingError`` when it
compiles for a GPU). Lanes that can never all meet (some wait at a different warp call or at
``syncthreads``) raise at once with where each lane is; a lane that computes for longer than :data:`WAIT_S`
while the others wait makes them fail with a message instead of hanging.

``cuda.popc``, ``cuda.clz``, ``cuda.ffs`` and ``cuda.brev`` are replaced too: the simulator's count the bits of
``bin(-1)`` (one) or assume 32 bits; these work in the value's width as Numba types it (32 for an ``int32`` such as
a ballot, 64 for a Python ``int``).

Call :func:`install` once the simulator is selected (``labkit.setup()`` does it in ``sim`` mode).
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import Any, Callable

import numpy as np

from . import blocks
from .errors import WarpError

WAIT_S = 20.0  # generous: on a loaded 2-core machine 32 Python threads can take seconds to meet
POLL_S = 0.02  # how often waiting lanes look again at lanes that may have reached a syncthreads or exited
FULL_MASK = 0xFFFFFFFF

_lock = threading.Lock()
_installed = False
calls = 0  # warp-level calls made so far in this process (the lab checks read it to see shuffles were used)


class WarpInt32(int):
    """An integer that Numba types as ``int32`` on a GPU (a ballot, a match mask): ``-1`` for all 32 lanes.

    It behaves as a Python ``int`` (arithmetic with it widens, as Numba widens ``int32`` with an ``int64``),
    and ``cuda.popc`` counts its 32 bits."""

    def __new__(cls, bits: int) -> "WarpInt32":
        bits &= FULL_MASK
        return super().__new__(cls, bits - (1 << 32) if bits >> 31 else bits)


class _Group:
    """One meeting of lanes of a warp at a warp function (or, for activemask, at one line)."""

    def __init__(self, op: str, members: int, site: tuple[str, int],
                 then: Callable[[list[Any]], None] | None = None) -> None:
        self.op, self.members, self.site, self.then = op, members, site, then
        self.cond = threading.Condition(_lock)
        self.values: dict[int, Any] = {}
        self.threads: dict[int, Any] = {}
        self.done = False
        self.error: WarpError | None = None
        self.participants = 0  # mask of the lanes that met, once done


class _Block:
    """The warp state of one thread block: its threads, the lanes that exited, the meetings in progress."""

    def __init__(self, size: int, index: tuple[int, ...]) -> None:
        self.size, self.index = size, index
        self.threads: dict[int, Any] = {}  # linear thread id -> thread, from the moment it starts
        self.exited: set[int] = set()
        self.parked: dict[int, _Group] = {}  # thread id -> the meeting it waits at
        self.groups: dict[tuple, _Group] = {}
        self.aborted = False


_open: "weakref.WeakSet[_Block]" = weakref.WeakSet()


def _block_of(thread: Any) -> _Block:
    manager = thread._manager
    blk = manager.__dict__.get("_labkit_warp")
    if blk is None:
        with _lock:
            blk = manager.__dict__.get("_labkit_warp")
            if blk is None:
                dims = manager._block_dim
                blk = manager.__dict__["_labkit_warp"] = _Block(int(np.prod(dims)), tuple(thread.blockIdx))
                _open.add(blk)
    return blk


def _abort_all() -> None:
    """Wake every lane waiting at a warp call (the launch is being stopped): they stop at once."""
    with _lock:
        for blk in list(_open):
            blk.aborted = True
            for g in list(blk.groups.values()):
                g.cond.notify_all()


def _lanes_in_warp(size: int, warp: int) -> int:
    return max(0, min(32, size - 32 * warp))


def _mask_int(mask: Any, what: str) -> int:
    if isinstance(mask, (bool, np.bool_)) or not isinstance(mask, (int, np.integer)):
        raise WarpError(f"{what}: the mask must be an integer (such as 0xFFFFFFFF), got {type(mask).__name__} "
                        f"{mask!r}; a GPU compile rejects it")
    return int(mask) & FULL_MASK


def _int_arg(value: Any, what: str, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise WarpError(f"{what}: {name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


_SHFL_TYPES = (np.int32, np.int64, np.float32, np.float64)


def _shfl_value(value: Any, what: str) -> Any:
    """The value a shuffle may move: Numba's shfl_sync takes int32, int64, float32 and float64 only."""
    if isinstance(value, (bool, np.bool_)):
        ok = False
    elif isinstance(value, int):
        ok = -(1 << 63) <= value < 1 << 63
    else:
        ok = isinstance(value, (float,) + _SHFL_TYPES)
    if not ok:
        kind = getattr(value, "dtype", type(value).__name__)
        raise WarpError(f"{what} moves 32- and 64-bit integers and floats only (int32, int64, float32, float64), "
                        f"got {kind}: a GPU compile rejects it (convert it first, e.g. int32(v) or float32(v))")
    return value


def _predicate(value: Any, what: str) -> bool:
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise WarpError(f"{what}: the predicate must be an integer or a boolean, got {type(value).__name__} {value!r}; "
                    "a GPU compile rejects it (compare it: `x > 0`)")


def _match_key(value: Any, what: str) -> Any:
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return np.float64(value).tobytes()  # compared bit for bit, as the hardware does
    raise WarpError(f"{what} compares integers and floats only, got {type(value).__name__}; a GPU compile rejects it")


def _caller_site(depth: int) -> tuple[str, int]:
    frame = sys._getframe(depth + 1)
    return frame.f_code.co_filename, frame.f_lineno


def _exited(blk: _Block, tid: int) -> bool:
    if tid in blk.exited:
        return True
    t = blk.threads.get(tid)
    return t is not None and not t.is_alive()


def _where(blk: _Block, tid: int) -> str:
    """Where a lane is: 'exited', 'syncthreads', 'running' or the op of the meeting it waits at."""
    if _exited(blk, tid):
        return "exited"
    g = blk.parked.get(tid)
    if g is not None and not g.done:
        return g.op
    t = blk.threads.get(tid)
    if t is not None and t.syncthreads_blocked:
        return "syncthreads"
    return "running"


def _complete(blk: _Block, g: _Group) -> None:
    """Close a meeting (under _lock): its hook runs before any of its lanes can go on."""
    if g.then is not None:
        g.then(list(g.threads.values()))
    g.done = True
    g.participants = sum(1 << ln for ln in g.values)
    for key, other in list(blk.groups.items()):
        if other is g:
            del blk.groups[key]
    for t in g.threads.values():
        blk.parked.pop(t.thread_id, None)
    g.cond.notify_all()


def _notify_warp(blk: _Block, warp: int) -> None:
    for key, g in blk.groups.items():
        if key[0] == warp:
            g.cond.notify_all()


def _progress(blk: _Block, warp: int) -> None:
    """Complete the meetings of ``warp`` that can complete; report lanes that can never all meet. Under _lock."""
    base, n = 32 * warp, _lanes_in_warp(blk.size, warp)
    pending = [g for key, g in blk.groups.items() if key[0] == warp and not g.done and g.error is None]
    if not pending:
        return
    for g in pending:
        if g.op == "activemask":
            continue
        needed = [ln for ln in range(n) if (g.members >> ln) & 1 and not _exited(blk, base + ln)]
        if all(ln in g.values for ln in needed):
            _complete(blk, g)
    where = {ln: _where(blk, base + ln) for ln in range(n)}
    if "running" in where.values():
        return
    masks = [g for g in pending if g.op == "activemask" and not g.done]
    for g in masks:
        _complete(blk, g)
    if masks or any(g.done for g in pending):
        return
    # every lane is waiting somewhere, and no meeting can complete: on a GPU this warp hangs
    groups: dict[str, list[int]] = {}
    for ln, w in where.items():
        label = w
        if w not in ("exited", "syncthreads"):
            g = blk.parked[base + ln]
            label = f"{g.op} (mask {g.members:#010x}, line {g.site[1]})"
        elif w == "syncthreads":
            label = "cuda.syncthreads()"
        groups.setdefault(label, []).append(ln)
    parts = "; ".join(f"lanes {_lanes(v)} at {k}" if k != "exited" else f"lanes {_lanes(v)} have exited"
                      for k, v in groups.items())
    err = WarpError(f"warp {warp} of block {blk.index} "
                    f"cannot go on: {parts}. Every lane named in a warp call's mask must reach the same call "
                    "(on a GPU this warp would hang).",
                    cause="a warp call (shuffle, vote, syncwarp) inside an `if` that only some lanes of the mask take, "
                          "or a mask that names lanes doing something else: call it where all the mask's lanes arrive, "
                          "or build the mask with cuda.activemask() / cuda.ballot_sync().")
    for g in pending:
        g.error = err
        g.cond.notify_all()


def _lanes(lanes: list[int]) -> str:
    runs, start = [], None
    for i, ln in enumerate(lanes):
        if start is None:
            start = ln
        if i + 1 == len(lanes) or lanes[i + 1] != ln + 1:
            runs.append(str(start) if start == ln else f"{start}-{ln}")
            start = None
    return ", ".join(runs)


def _meet(op: str, members_arg: int | None, value: Any, site: tuple[str, int],
          then: Callable[[list[Any]], None] | None = None) -> tuple[_Group, int]:
    """The calling lane joins the meeting for ``op``; returns (the completed meeting, own lane).

    ``members_arg`` is the mask (None for activemask, whose meeting is the lanes at ``site``). ``then(threads)``
    runs once, after all have met and before any leaves (``syncwarp`` orders memory with it)."""
    global calls
    thread = threading.current_thread()
    tid = thread.thread_id
    lane, warp = tid % 32, tid // 32
    blk = _block_of(thread)
    present = (1 << _lanes_in_warp(blk.size, warp)) - 1
    if members_arg is None:
        key: tuple = (warp, op, site)
        members = present
    else:
        members = members_arg & present
        if not (members >> lane) & 1:
            raise WarpError(f"{op}: lane {lane} of warp {warp} called it with mask {members_arg:#010x}, which leaves it out")
        key = (warp, op, members)
    with _lock:
        calls += 1
        blk.threads.setdefault(tid, thread)
        g = blk.groups.get(key)
        if g is None:
            g = blk.groups[key] = _Group(op, members, site, then)
        g.values[lane] = value
        g.threads[lane] = thread
        blk.parked[tid] = g
        if g.op != "activemask" and len(g.values) == bin(g.members).count("1"):
            _complete(blk, g)  # the usual case: the last lane of the mask arrived
        else:
            masks = any(k[0] == warp and k[1] == "activemask" for k in blk.groups)
            base, n = 32 * warp, _lanes_in_warp(blk.size, warp)
            waiting = sum(1 for ln in range(base, base + n) if ln in blk.parked or ln in blk.exited)
            if masks or waiting == n or any(base + ln in blk.exited for ln in range(n) if (g.members >> ln) & 1):
                _progress(blk, warp)
            if masks:
                _notify_warp(blk, warp)  # lanes at activemask look again at who is still running
        started = time.monotonic()
        while not g.done and g.error is None:
            if blk.aborted or thread.abort:
                blk.parked.pop(tid, None)
                raise blocks.StoppedThread("stopped")
            g.cond.wait(POLL_S)
            if not g.done and g.error is None:
                _progress(blk, warp)
            if not g.done and g.error is None and time.monotonic() - started > WAIT_S:
                missing = [ln for ln in range(32) if (members >> ln) & 1 and ln not in g.values]
                blk.parked.pop(tid, None)
                raise WarpError(
                    f"{op} in block {tuple(thread.blockIdx)}, warp {warp}: lanes {_lanes(missing) or '?'} named in mask "
                    f"{members:#010x} never reached it within {WAIT_S:.0f} s (are they still computing?)")
        if g.error is not None:
            raise g.error
    return g, lane


def _source(g: _Group, lane: int, j: int, value: Any, what: str) -> Any:
    if j == lane:
        return value
    if j in g.values:
        return g.values[j]
    thread = g.threads[lane]
    blk = _block_of(thread)
    base = 32 * (thread.thread_id // 32)
    if base + j >= blk.size:
        why = f"does not exist (the block has {blk.size} threads)"
    elif _exited(blk, base + j):
        why = "has already exited (returned), so it never reached this call"
    else:
        why = f"is not in the mask {g.members:#010x}"
    raise WarpError(f"{what}: lane {lane} reads the value of lane {j}, which {why}: on a GPU the value is undefined",
                    cause="keep every lane the shuffle reads from alive and in the mask (guard the loads, not the "
                          "shuffle), or check the lane arithmetic.")


def shfl_sync(self: Any, mask: Any, value: Any, src_lane: Any) -> Any:
    m, v = _mask_int(mask, "shfl_sync"), _shfl_value(value, "shfl_sync")
    b = _int_arg(src_lane, "shfl_sync", "the source lane") & 31
    g, lane = _meet("shfl_sync", m, v, _caller_site(1))
    return _source(g, lane, b, v, "shfl_sync")


def shfl_up_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    m, v = _mask_int(mask, "shfl_up_sync"), _shfl_value(value, "shfl_up_sync")
    b = _int_arg(delta, "shfl_up_sync", "delta") & 31  # PTX uses the low 5 bits: delta 33 is 1, -1 is 31
    g, lane = _meet("shfl_up_sync", m, v, _caller_site(1))
    j = lane - b
    return _source(g, lane, j, v, "shfl_up_sync") if j >= 0 else v


def shfl_down_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    m, v = _mask_int(mask, "shfl_down_sync"), _shfl_value(value, "shfl_down_sync")
    b = _int_arg(delta, "shfl_down_sync", "delta") & 31
    g, lane = _meet("shfl_down_sync", m, v, _caller_site(1))
    j = lane + b
    return _source(g, lane, j, v, "shfl_down_sync") if j < 32 else v


def shfl_xor_sync(self: Any, mask: Any, value: Any, lane_mask: Any) -> Any:
    m, v = _mask_int(mask, "shfl_xor_sync"), _shfl_value(value, "shfl_xor_sync")
    b = _int_arg(lane_mask, "shfl_xor_sync", "the lane mask") & 31
    g, lane = _meet("shfl_xor_sync", m, v, _caller_site(1))
    return _source(g, lane, lane ^ b, v, "shfl_xor_sync")


def _vote(op: str, mask: Any, predicate: Any) -> dict[int, bool]:
    m, p = _mask_int(mask, op), _predicate(predicate, op)
    g, _ = _meet(op, m, p, _caller_site(2))
    return g.values


def all_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return all(_vote("all_sync", mask, predicate).values())


def any_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return any(_vote("any_sync", mask, predicate).values())


def eq_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return len(set(_vote("eq_sync", mask, predicate).values())) == 1


def ballot_sync(self: Any, mask: Any, predicate: Any) -> WarpInt32:
    values = _vote("ballot_sync", mask, predicate)
    return WarpInt32(sum(1 << ln for ln, v in values.items() if v))


def match_any_sync(self: Any, mask: Any, value: Any) -> WarpInt32:
    m, k = _mask_int(mask, "match_any_sync"), _match_key(value, "match_any_sync")
    g, lane = _meet("match_any_sync", m, k, _caller_site(1))
    return WarpInt32(sum(1 << ln for ln, v in g.values.items() if v == k))


def match_all_sync(self: Any, mask: Any, value: Any) -> tuple[WarpInt32, bool]:
    m, k = _mask_int(mask, "match_all_sync"), _match_key(value, "match_all_sync")
    g, _ = _meet("match_all_sync", m, k, _caller_site(1))
    same = len(set(g.values.values())) == 1
    return WarpInt32(g.participants if same else 0), same


def _order_memory(threads: list[Any]) -> None:
    from . import memory

    if memory.active is not None:
        memory.active.syncwarp(threads)


def syncwarp(self: Any, mask: Any = FULL_MASK) -> None:
    _meet("syncwarp", _mask_int(mask, "syncwarp"), None, _caller_site(1), then=_order_memory)


def activemask(self: Any) -> int:
    """The lanes of the caller's warp executing this same line now (see the module docstring), as a uint32."""
    g, _ = _meet("activemask", None, None, _caller_site(1))
    return g.participants


def lanemask_lt(self: Any) -> int:
    return (1 << (threading.current_thread().thread_id % 32)) - 1


def _width(value: Any) -> int:
    """Bits of an integer as Numba types it on a GPU: 32 for int32 values such as ballots, a NumPy integer's own
    width, 64 for a Python int."""
    if isinstance(value, WarpInt32):
        return 32
    if isinstance(value, np.integer):
        return value.dtype.itemsize * 8
    return 64


def popc(self: Any, value: Any) -> int:
    """Number of set bits in the value's width (32 for int32 values such as ballots)."""
    return bin(int(value) & ((1 << _width(value)) - 1)).count("1")


def clz(self: Any, value: Any) -> int:
    """Leading zero bits in the value's width."""
    width = _width(value)
    return width - (int(value) & ((1 << width) - 1)).bit_length()


def ffs(self: Any, value: Any) -> int:
    """Position (from 1) of the least significant set bit, 0 when none is set."""
    bits = int(value) & ((1 << _width(value)) - 1)
    return (bits & -bits).bit_length()


def brev(self: Any, value: Any) -> int:
    """The bits reversed, as an unsigned integer of the value's width (Numba's brev takes uint32 or uint64)."""
    width = 32 if _width(value) <= 32 else 64
    return int(format(int(value) & ((1 << width) - 1), f"0{width}b")[::-1], 2)


_FUNCTIONS = {
    "shfl_sync": shfl_sync, "shfl_up_sync": shfl_up_sync, "shfl_down_sync": shfl_down_sync,
    "shfl_xor_sync": shfl_xor_sync, "all_sync": all_sync, "any_sync": any_sync, "eq_sync": eq_sync,
    "ballot_sync": ballot_sync, "match_any_sync": match_any_sync, "match_all_sync": match_all_sync,
    "syncwarp": syncwarp, "activemask": activemask, "lanemask_lt": lanemask_lt, "popc": popc, "clz": clz,
    "ffs": ffs, "brev": brev,
}


def _tracking_run(previous: Callable[[Any], None]) -> Callable[[Any], None]:
    """BlockThread.run that tells the warp state of its block when the thread starts and ends."""

    def run(self: Any) -> None:
        try:
            blk = _block_of(self)
            with _lock:
                blk.threads[self.thread_id] = self
        except Exception:  # noqa: BLE001 - a thread outside a block manager: nothing to track
            blk = None
        try:
            previous(self)
        finally:
            if blk is not None:
                with _lock:
                    blk.exited.add(self.thread_id)
                    blk.parked.pop(self.thread_id, None)
                    _notify_warp(blk, self.thread_id // 32)

    run._labkit_warp = True  # type: ignore[attr-defined]
    return run


def install() -> bool:
    """Add the warp functions to the simulator's in-kernel ``cuda`` module. Returns True if installed now.

    Only in ``sim`` mode (numba's CUDA target must be the simulator); a no-op when called again.
    """
    global _installed
    if _installed:
        return False
    if not is_simulator():
        return False
    blocks.install()
    blocks.state.stoppers.append(_abort_all)
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    for name, fn in _FUNCTIONS.items():
        setattr(kernelapi.FakeCUDAModule, name, fn)
    if not getattr(sim_kernel.BlockThread.run, "_labkit_warp", False):
        sim_kernel.BlockThread.run = _tracking_run(sim_kernel.BlockThread.run)
    _installed = True
    return True


def is_simulator() -> bool:
    """True when numba's CUDA target is the simulator."""
    try:
        from numba.cuda.core import config
    except ImportError:  # pragma: no cover
        from numba.core import config
    return bool(config.ENABLE_CUDASIM)
