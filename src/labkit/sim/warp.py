"""Warp-level primitives for Numba's CUDA simulator, as CUDA defines them.

Numba's simulator has no warp functions. This module adds them to the in-kernel ``cuda`` module so that
warp-level code runs on a CPU with the semantics of a GPU with independent thread scheduling (Volta and
later). A lane that must wait for others parks (:func:`labkit.sim.engine.park`) and the engine runs the
others; the last lane to arrive completes the meeting and goes on at once:

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
  calling it waits until no other lane of its warp can run (each has reached a warp call, a ``syncthreads`` or its end),
  and the answer is the set of lanes at this line. That is what a GPU does after a branch (the lanes of the
  other side are not active), but it is a model: on a GPU lanes that took the same branch may still run apart
  (activemask may be smaller), and lanes that reach this line at different loop iterations count together.

Values of types that a GPU compile rejects (``shfl_sync`` of a ``uint32`` or a ``bool``, a float mask or
vote predicate) raise :class:`~labkit.sim.errors.WarpError` at the call (Numba raises ``TypingError`` when it
compiles for a GPU). Lanes that can never all meet (some wait at a different warp call or at
``syncthreads``) raise as soon as no lane can run, with where each lane is; a lane that computes for ever
while the others wait is stopped by the launch's time limit.

``cuda.popc``, ``cuda.clz``, ``cuda.ffs`` and ``cuda.brev`` are replaced too: the simulator's count the bits of
``bin(-1)`` (one) or assume 32 bits; these work in the value's width as Numba types it (32 for an ``int32`` such as
a ballot, 64 for a Python ``int``).

Call :func:`install` once the simulator is selected (``labkit.setup()`` does it in ``sim`` mode).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from . import engine
from .engine import BARRIER, DONE, WAITING
from .errors import WarpError
from .integers import Int32, bit_width

FULL_MASK = 0xFFFFFFFF

_installed = False
calls = 0  # warp-level calls made so far in this process (the lab checks read it to see shuffles were used)


class WarpInt32(Int32):
    """An integer that Numba types as ``int32`` on a GPU (a ballot, a match mask): ``-1`` for all 32 lanes.

    It behaves as a Python ``int`` (arithmetic with it widens, as Numba widens ``int32`` with an ``int64``),
    and ``cuda.popc`` counts its 32 bits."""

    __slots__ = ()

    def __new__(cls, bits: int) -> "WarpInt32":
        bits &= FULL_MASK
        return super().__new__(cls, bits - (1 << 32) if bits >> 31 else bits)


class _Group:
    """One meeting of lanes of a warp at a warp function (or, for activemask, at one line)."""

    __slots__ = ("op", "members", "site", "then", "values", "threads", "done", "participants", "warp", "arrived", "key")

    def __init__(
        self, op: str, members: int, site: tuple[str, int], warp: int, then: Callable[[list[Any]], None] | None = None
    ) -> None:
        self.op, self.members, self.site, self.warp, self.then = op, members, site, warp, then
        self.values: dict[int, Any] = {}
        self.threads: dict[int, Any] = {}
        self.done = False
        self.participants = 0  # mask of the lanes that met, once done
        self.arrived = 0  # mask of the lanes that have arrived so far
        self.key: tuple = ()  # its key in _Warps.groups


class _Warps:
    """The warp state of one thread block: the lanes that exited, the meetings in progress."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.exited: set[int] = set()  # linear thread ids
        self.gone: dict[int, int] = {}  # warp -> mask of its lanes that exited
        self.parked: dict[int, _Group] = {}  # thread id -> the meeting it waits at
        self.groups: dict[tuple, _Group] = {}


def _warps(block: Any) -> _Warps:
    ws = block.warp_state
    if ws is None:
        ws = block.warp_state = _Warps(block.size)
    return ws


def _lanes_in_warp(size: int, warp: int) -> int:
    return max(0, min(32, size - 32 * warp))


def _mask_int(mask: Any, what: str) -> int:
    if type(mask) is int:
        return mask & FULL_MASK
    if isinstance(mask, (bool, np.bool_)) or not isinstance(mask, (int, np.integer)):
        raise WarpError(
            f"{what}: the mask must be an integer (such as 0xFFFFFFFF), got {type(mask).__name__} "
            f"{mask!r}; a GPU compile rejects it"
        )
    return int(mask) & FULL_MASK


def _int_arg(value: Any, what: str, name: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise WarpError(f"{what}: {name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


_SHFL_TYPES = (np.int32, np.int64, np.float32, np.float64)
_SHFL_EXACT = frozenset({float, *_SHFL_TYPES})  # (the types it moves as they are, without a look at their value)


def _shfl_value(value: Any, what: str) -> Any:
    """The value a shuffle may move: Numba's shfl_sync takes int32, int64, float32 and float64 only."""
    if type(value) in _SHFL_EXACT:
        return value
    if isinstance(value, (bool, np.bool_)):
        ok = False
    elif isinstance(value, int):
        ok = -(1 << 63) <= value < 1 << 63
    else:
        ok = isinstance(value, (float,) + _SHFL_TYPES)
    if not ok:
        kind = getattr(value, "dtype", type(value).__name__)
        raise WarpError(
            f"{what} moves 32- and 64-bit integers and floats only (int32, int64, float32, float64), "
            f"got {kind}: a GPU compile rejects it (convert it first, e.g. int32(v) or float32(v))"
        )
    return value


def _predicate(value: Any, what: str) -> bool:
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise WarpError(
        f"{what}: the predicate must be an integer or a boolean, got {type(value).__name__} {value!r}; "
        "a GPU compile rejects it (compare it: `x > 0`)"
    )


def _match_key(value: Any, what: str) -> Any:
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return np.float64(value).tobytes()  # compared bit for bit, as the hardware does
    raise WarpError(f"{what} compares integers and floats only, got {type(value).__name__}; a GPU compile rejects it")


def _caller_site(depth: int) -> tuple[str, int]:
    frame = sys._getframe(depth + 1)
    return frame.f_code.co_filename, frame.f_lineno


def _ready(ws: _Warps, g: _Group) -> bool:
    """Every lane of the meeting's mask (the lanes of the warp that exist) that has not exited has arrived."""
    members = g.members
    return (g.arrived | ws.gone.get(g.warp, 0)) & members == members


def _complete(block: Any, ws: _Warps, g: _Group) -> None:
    """Close a meeting: its hook runs before any of its lanes goes on; the lanes that wait are made runnable."""
    if g.then is not None:
        g.then(list(g.threads.values()))
    g.done = True
    g.participants = g.arrived
    if ws.groups.get(g.key) is g:
        del ws.groups[g.key]
    for t in block.ordered(g.threads.values()):
        ws.parked.pop(t.thread_id, None)
        if t.state == WAITING:  # (the lane that completed the meeting runs on)
            block.resume(t)


def _where(block: Any, ws: _Warps, tid: int) -> str:
    """Where a lane is: 'exited', 'syncthreads', 'running' or the op of the meeting it waits at."""
    t = block.threads[tid]
    if t.state == DONE:
        return "exited"
    g = ws.parked.get(tid)
    if g is not None and not g.done:
        return g.op
    return "syncthreads" if t.state == BARRIER else "running"


def _lanes(lanes: list[int]) -> str:
    runs, start = [], None
    for i, ln in enumerate(lanes):
        if start is None:
            start = ln
        if i + 1 == len(lanes) or lanes[i + 1] != ln + 1:
            runs.append(str(start) if start == ln else f"{start}-{ln}")
            start = None
    return ", ".join(runs)


class _Collectives:
    """What the engine asks of the warp layer (see :class:`labkit.sim.engine.Collectives`)."""

    def exited(self, thread: Any) -> None:
        ws = thread.block.warp_state
        if ws is None:
            return
        ws.exited.add(thread.thread_id)
        ws.gone[thread.warp] = ws.gone.get(thread.warp, 0) | 1 << thread.lane
        for g in [g for g in ws.groups.values() if g.warp == thread.warp and not g.done and g.op != "activemask"]:
            if _ready(ws, g):
                _complete(thread.block, ws, g)

    def idle(self, block: Any) -> bool:
        """No thread can run: lanes at ``activemask`` learn who is at their line."""
        ws = block.warp_state
        if ws is None:
            return False
        masks = [g for g in ws.groups.values() if g.op == "activemask" and not g.done]
        for g in masks:
            _complete(block, ws, g)
        return bool(masks)

    def deadlock(self, block: Any) -> Exception | None:
        """No thread can run and some lanes wait at a warp call that can never complete: say where each lane is."""
        ws = block.warp_state
        if ws is None or not ws.groups:
            return None
        warp = min(g.warp for g in ws.groups.values())
        base, n = 32 * warp, _lanes_in_warp(block.size, warp)
        groups: dict[str, list[int]] = {}
        for ln in range(n):
            w = _where(block, ws, base + ln)
            if w not in ("exited", "syncthreads", "running"):
                g = ws.parked[base + ln]
                w = f"{g.op} (mask {g.members:#010x}, line {g.site[1]})"
            elif w == "syncthreads":
                w = "cuda.syncthreads()"
            groups.setdefault(w, []).append(ln)
        parts = "; ".join(
            f"lanes {_lanes(v)} at {k}" if k != "exited" else f"lanes {_lanes(v)} have exited" for k, v in groups.items()
        )
        return WarpError(
            f"warp {warp} of block {tuple(block.index)} cannot go on: {parts}. Every lane named in a "
            "warp call's mask must reach the same call (on a GPU this warp would hang).",
            cause="a warp call (shuffle, vote, syncwarp) inside an `if` that only some lanes of the mask "
            "take, or a mask that names lanes doing something else: call it where all the mask's "
            "lanes arrive, or build the mask with cuda.activemask() / cuda.ballot_sync().",
        )


def _meet(
    op: str, members_arg: int | None, value: Any, site: int, then: Callable[[list[Any]], None] | None = None
) -> tuple[_Group, int]:
    """The calling lane joins the meeting for ``op``; returns (the completed meeting, own lane).

    ``members_arg`` is the mask (None for activemask, whose meeting is the lanes at the caller's line). ``site`` is
    how many frames above the caller of ``_meet`` the kernel's frame is (its line is read only where it is needed: the
    first lane of a meeting, and activemask). ``then(threads)`` runs once, after all have met and before any goes on
    (``syncwarp`` orders memory with it)."""
    global calls
    thread = engine.current
    if thread is None:
        raise WarpError(f"{op} called outside a kernel launch")
    lane, warp = thread.lane, thread.warp
    block = thread.block
    ws = block.warp_state or _warps(block)
    left = block.size - 32 * warp
    present = FULL_MASK if left >= 32 else (1 << left) - 1
    where: tuple[str, int] = ("", 0)
    if members_arg is None:
        where = _caller_site(site + 1)
        site_key = where
        key: tuple = (warp, op, site_key)
        members = present
    else:
        members = members_arg & present
        if not (members >> lane) & 1:
            raise WarpError(f"{op}: lane {lane} of warp {warp} called it with mask {members_arg:#010x}, which leaves it out")
        key = (warp, op, members)
    calls += 1
    g = ws.groups.get(key)
    if g is None:
        g = ws.groups[key] = _Group(op, members, where if members_arg is None else _caller_site(site + 1), warp, then)
        g.key = key
    g.values[lane] = value
    g.threads[lane] = thread
    arrived = g.arrived = g.arrived | 1 << lane
    if op != "activemask" and (arrived | ws.gone.get(warp, 0)) & members == members:  # (_ready, written out)
        _complete(block, ws, g)  # the last lane of the mask arrived: it goes on without waiting
    else:
        ws.parked[thread.thread_id] = g
        thread.state = WAITING  # (engine.park, written out)
        thread.scheduler.switch()
    return g, lane


_NONE = object()  # (no value: a lane that did not arrive)


def _source(g: _Group, lane: int, j: int, value: Any, what: str) -> Any:
    if j == lane:
        return value
    if j in g.values:
        return g.values[j]
    thread = g.threads[lane]
    block = thread.block
    base = 32 * thread.warp
    if base + j >= block.size:
        why = f"does not exist (the block has {block.size} threads)"
    elif block.threads[base + j].state == DONE:
        why = "has already exited (returned), so it never reached this call"
    else:
        why = f"is not in the mask {g.members:#010x}"
    raise WarpError(
        f"{what}: lane {lane} reads the value of lane {j}, which {why}: on a GPU the value is undefined",
        cause="keep every lane the shuffle reads from alive and in the mask (guard the loads, not the "
        "shuffle), or check the lane arithmetic.",
    )


def shfl_sync(self: Any, mask: Any, value: Any, src_lane: Any) -> Any:
    m, v = _mask_int(mask, "shfl_sync"), _shfl_value(value, "shfl_sync")
    b = _int_arg(src_lane, "shfl_sync", "the source lane") & 31
    g, lane = _meet("shfl_sync", m, v, 1)
    return _source(g, lane, b, v, "shfl_sync")


def shfl_up_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    m, v = _mask_int(mask, "shfl_up_sync"), _shfl_value(value, "shfl_up_sync")
    b = _int_arg(delta, "shfl_up_sync", "delta") & 31  # PTX uses the low 5 bits: delta 33 is 1, -1 is 31
    g, lane = _meet("shfl_up_sync", m, v, 1)
    j = lane - b
    return _source(g, lane, j, v, "shfl_up_sync") if j >= 0 else v


def shfl_down_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    m, v = _mask_int(mask, "shfl_down_sync"), _shfl_value(value, "shfl_down_sync")
    b = _int_arg(delta, "shfl_down_sync", "delta") & 31
    g, lane = _meet("shfl_down_sync", m, v, 1)
    j = lane + b
    if j >= 32:
        return v
    got = g.values.get(j, _NONE) if j != lane else v
    return got if got is not _NONE else _source(g, lane, j, v, "shfl_down_sync")


def shfl_xor_sync(self: Any, mask: Any, value: Any, lane_mask: Any) -> Any:
    m, v = _mask_int(mask, "shfl_xor_sync"), _shfl_value(value, "shfl_xor_sync")
    b = _int_arg(lane_mask, "shfl_xor_sync", "the lane mask") & 31
    g, lane = _meet("shfl_xor_sync", m, v, 1)
    j = lane ^ b
    got = g.values.get(j, _NONE) if j != lane else v
    return got if got is not _NONE else _source(g, lane, j, v, "shfl_xor_sync")


def _vote(op: str, mask: Any, predicate: Any) -> dict[int, bool]:
    m, p = _mask_int(mask, op), _predicate(predicate, op)
    g, _ = _meet(op, m, p, 2)
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
    g, lane = _meet("match_any_sync", m, k, 1)
    return WarpInt32(sum(1 << ln for ln, v in g.values.items() if v == k))


def match_all_sync(self: Any, mask: Any, value: Any) -> tuple[WarpInt32, bool]:
    m, k = _mask_int(mask, "match_all_sync"), _match_key(value, "match_all_sync")
    g, _ = _meet("match_all_sync", m, k, 1)
    same = len(set(g.values.values())) == 1
    return WarpInt32(g.participants if same else 0), same


#: What a ``__syncwarp`` also does while a strict launch runs: the memory model orders the warp's accesses
#: (:func:`labkit.sim.memory.strict` sets it for the launch, then clears it).
on_syncwarp: Callable[[list[Any]], None] | None = None


def _order_memory(threads: list[Any]) -> None:
    if on_syncwarp is not None:
        on_syncwarp(threads)


def syncwarp(self: Any, mask: Any = FULL_MASK) -> None:
    _meet("syncwarp", _mask_int(mask, "syncwarp"), None, 1, then=_order_memory)


def activemask(self: Any) -> int:
    """The lanes of the caller's warp executing this same line now (see the module docstring), as a uint32."""
    g, _ = _meet("activemask", None, None, 1)
    return g.participants


def lanemask_lt(self: Any) -> int:
    return (1 << engine.current.lane) - 1


def _width(value: Any) -> int:
    """Bits of an integer as Numba types it on a GPU (:func:`labkit.sim.integers.bit_width`)."""
    return bit_width(value)


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
    "shfl_sync": shfl_sync,
    "shfl_up_sync": shfl_up_sync,
    "shfl_down_sync": shfl_down_sync,
    "shfl_xor_sync": shfl_xor_sync,
    "all_sync": all_sync,
    "any_sync": any_sync,
    "eq_sync": eq_sync,
    "ballot_sync": ballot_sync,
    "match_any_sync": match_any_sync,
    "match_all_sync": match_all_sync,
    "syncwarp": syncwarp,
    "activemask": activemask,
    "lanemask_lt": lanemask_lt,
    "popc": popc,
    "clz": clz,
    "ffs": ffs,
    "brev": brev,
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
    from numba.cuda.simulator import kernelapi

    for name, fn in _FUNCTIONS.items():
        setattr(kernelapi.FakeCUDAModule, name, fn)
    engine.collectives = _Collectives()
    _installed = True
    return True


def is_simulator() -> bool:
    """True when numba's CUDA target is the simulator."""
    try:
        from numba.cuda.core import config
    except ImportError:  # pragma: no cover
        from numba.core import config
    return bool(config.ENABLE_CUDASIM)
