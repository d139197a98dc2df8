"""The strict memory model: how races and missing barriers show in the CUDA simulator.

In the simulator every CUDA thread is a Python thread, and one usually runs to its end before the next
starts, and the blocks of a launch run one after another: a missing barrier or a non-atomic update rarely
shows by itself. A *strict* launch runs the kernel under a memory model as weak as CUDA promises:

- a thread sees its own writes at once, other threads' plain writes only after a barrier they share:
  ``cuda.syncthreads()`` for the block, ``cuda.syncwarp()`` among the lanes that took part in it;
- atomics act on memory itself; shared memory starts each block filled with poison;
- two threads of a block touching one element, one of them writing, with no barrier between them and not
  both atomic, is a race (:class:`Race`), with the two threads named and, when both did a plain
  read-modify-write of that element, called a lost update;
- blocks of a launch run in any order on a GPU, so an element one block writes (plainly or atomically) and
  another block reads or writes plainly is a cross-block race, even though the simulator ran them in turn;
- element reads of small integer types give 64-bit integers, as Numba's typing does on a GPU, so
  ``(299 * r + 587 * g + 114 * b) // 1000`` on ``uint8`` pixels does not overflow in NumPy.

:func:`launch_strict` runs a kernel under this model and returns a :class:`LaunchReport`;
:func:`sectors_per_request` and :func:`bank_conflicts` read coalescing and bank conflicts from its recorded accesses.
"""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import blocks
from .errors import KernelFault
from .integers import store_value, widen



def poison_value(dtype: Any) -> Any:
    """NaN for floats, an unlikely sentinel for integers."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.nan
    if dt.kind in "iu":
        return np.iinfo(dt).max - 7
    if dt.kind == "b":
        return True
    raise TypeError(f"no poison for dtype {dt}")


def is_poison(a: np.ndarray) -> np.ndarray:
    """Mask of the elements of ``a`` that still hold the poison value."""
    value = poison_value(a.dtype)
    if isinstance(value, float) and np.isnan(value):
        return np.isnan(a)
    return a == value


def fmt_index(idx: tuple[int, ...]) -> str:
    """An element index as a learner writes it: ``5`` or ``(2, 3)``."""
    return str(idx[0]) if len(idx) == 1 else str(idx)


@dataclass
class Access:
    """One recorded element access of a strict launch (for coalescing and bank-conflict analysis)."""

    array: str
    block: tuple[int, int, int]
    thread: int  # linear thread index in the block (lane = thread % 32)
    seq: int  # the thread's n-th access to this array (lanes' n-th accesses form one warp request)
    flat: int  # row-major element index
    kind: str  # "read", "write" or "atomic"
    space: str = "global"  # "global" or "shared"
    epoch: int = 0  # block barriers (cuda.syncthreads) the block had passed before this access
    value: Any = None  # the value stored, for a write


_ARTICLE = {"read": "a read", "write": "a write", "atomic": "an atomic update"}


@dataclass(frozen=True)
class Race:
    """Two threads touched one element, at least one writing, with nothing ordering them.

    ``scope`` is ``"block"`` (two threads of one block, no barrier between) or ``"grid"`` (two blocks).
    ``lost_update``: both threads did a plain read followed by a write of the element (``a[k] += ...``).
    """

    array: str
    space: str
    index: tuple[int, ...]
    block: tuple[int, ...]
    first_thread: tuple[int, ...]
    first: str  # "read", "write" or "atomic"
    second_thread: tuple[int, ...]
    second: str
    scope: str = "block"
    other_block: tuple[int, ...] | None = None
    lost_update: bool = False
    atomics_used: bool = False

    def message(self) -> str:
        where = f"{self.array} ({self.space} memory) at index {fmt_index(self.index)}"
        if self.scope == "grid":
            return (f"a race between blocks on {where}: thread {self.first_thread} of block {self.other_block} did "
                    f"{_ARTICLE[self.first]} and thread {self.second_thread} of block {self.block} {_ARTICLE[self.second]}. "
                    "Blocks of one launch run in any order and at the same time, and cannot see each other's writes.")
        return (f"a race on {where} in block {self.block}: thread {self.first_thread} did {_ARTICLE[self.first]} and "
                f"thread {self.second_thread} {_ARTICLE[self.second]} of that element, with no barrier between them.")

    def cause(self) -> str:
        if self.lost_update:
            if self.atomics_used:
                return ("two threads updated this element with a plain read-modify-write (`a[k] += ...`), so one update "
                        "is lost: make this update atomic too (cuda.atomic.add).")
            return ("two threads updated this element with a plain read-modify-write (`a[k] += ...`), so one update is "
                    "lost: use cuda.atomic.add, or give each thread its own element.")
        if self.scope == "grid":
            kinds = {self.first, self.second}
            if "atomic" in kinds and "read" in kinds:
                return ("a block read a value that other blocks update atomically, so it may see it half-way: do the "
                        "whole update as one atomic (cuda.atomic.add returns the old value), not a read followed by an atomic.")
            if kinds == {"write"}:
                return ("threads of different blocks handle the same elements: check the index formula; in a grid-stride "
                        "loop the stride is cuda.gridsize(1), all the threads of the grid, not cuda.blockDim.x.")
            return ("one block read what another block wrote during the same launch: nothing orders blocks, so split the "
                    "work into two kernel launches (or combine the blocks' results with atomics).")
        kinds = (self.first, self.second)
        if kinds == ("write", "write"):
            return "two threads wrote one element: check the index formula, each element should have one writer."
        if "read" not in kinds:  # a plain write and an atomic update of one element
            return ("a plain write and an atomic update of one element with no barrier between them: after initialising "
                    "(zeroing) shared memory, call cuda.syncthreads() before the atomics; after the atomics, before reading.")
        if self.second == "read":
            return ("a missing barrier between writing memory and reading what other threads wrote "
                    "(cuda.syncthreads(), or cuda.syncwarp() among the lanes of one warp).")
        return ("a missing barrier before overwriting memory that other threads still read (cuda.syncthreads(); among "
                "the lanes of one warp, cuda.syncwarp()): in a loop over tiles, a barrier at the end of each iteration "
                "too; in a tree reduction, read into a register, synchronise, then write.")


@dataclass(frozen=True)
class UninitialisedRead:
    """A read of an element that held the poison nobody had overwritten (shared memory, or a poisoned output)."""

    array: str
    space: str
    index: tuple[int, ...]
    thread: tuple[int, ...]
    block: tuple[int, ...]

    def cause(self) -> str:
        if self.space == "shared":
            return (f"{self.array} was read at index {fmt_index(self.index)} before any thread of the block wrote it: "
                    "shared memory starts each block with garbage, so zero it first (then cuda.syncthreads()).")
        return (f"{self.array} was read at index {fmt_index(self.index)} before the kernel wrote it: an output starts "
                "with garbage, so assign (`=`) rather than accumulate (`+=`), or zero it first.")


@dataclass
class LaunchReport:
    """What a strict launch saw: atomics per memory space, shared arrays, barriers, stores of floats into integers."""

    atomics: dict[str, int]
    shared: list[tuple[str, tuple[int, ...], np.dtype]]  # (name, shape, dtype) of each shared array
    barriers: int
    float_into_int: str | None
    accesses: list[Access]
    itemsizes: dict[str, int]
    race: Race | None = None
    written: dict[str, np.ndarray] = field(default_factory=dict)  # argument name -> mask of elements written
    uninitialised: UninitialisedRead | None = None
    syncwarps: int = 0

    def requests(self, array: str, kind: str = "read") -> dict[tuple, list[int]]:
        """Warp requests: {(block, warp, seq): [flat index per lane]} for one array and kind of access."""
        out: dict[tuple, list[int]] = {}
        for a in self.accesses:
            if a.array == array and a.kind == kind:
                out.setdefault((a.block, a.thread // 32, a.seq), []).append(a.flat)
        return out


def _tid(t: Any) -> tuple[int, ...]:
    return tuple(getattr(t, "threadIdx", (0, 0, 0)))


def _bid(t: Any) -> tuple[int, ...]:
    return tuple(getattr(t, "blockIdx", (0, 0, 0)))


# Which kinds of access conflict: everything but read/read and atomic/atomic.
_CONFLICTS = {"read": ("write", "atomic"), "write": ("read", "write", "atomic"), "atomic": ("read", "write")}
_BIT = {"read": 1, "write": 2, "atomic": 4}


class Model:
    """The state of one strict launch (implements :class:`labkit.sim.blocks.BlockHooks`)."""

    def __init__(self, *, reverse: bool, record: bool) -> None:
        self.arrays: list[TrackedArray] = []
        self.shared: list[TrackedArray] = []
        self.reverse = reverse
        self.record = record
        self.atomics: dict[str, int] = {"global": 0, "shared": 0}
        self.barriers = 0
        self.syncwarps = 0
        self.float_into_int: str | None = None
        self.accesses: list[Access] = []
        self.lock = threading.Lock()
        self.seq: dict[tuple[int, str], int] = {}
        self.race: Race | None = None
        self._race_parties: tuple[Any, ...] = ()  # (array, element, other thread, this thread) of the first race
        self.uninitialised: UninitialisedRead | None = None
        self.epoch = 0  # barriers passed by the block running now

    def found_race(self, array: "TrackedArray", key: tuple[int, ...], other: Any, other_kind: str, kind: str,
                   *, scope: str = "block") -> None:
        if self.race is None:
            me = threading.current_thread()
            self.race = Race(array.name, array.space, key, _bid(me), _tid(other), other_kind, _tid(me), kind,
                             scope=scope, other_block=_bid(other) if scope == "grid" else None)
            self._race_parties = (array, key, other, me)

    def finish_race(self) -> Race | None:
        """The first race, classified once the launch has ended (lost update or not, atomics used or not)."""
        if self.race is None:
            return None
        array, key, other, me = self._race_parties
        rmw = array.rmw.get(key, set())
        lost = other in rmw and me in rmw
        from dataclasses import replace

        return replace(self.race, lost_update=lost, atomics_used=sum(self.atomics.values()) > 0)

    def barrier(self) -> None:
        self.barriers += 1
        self.epoch += 1
        for a in self.arrays:
            a.sync()

    def block_start(self) -> None:
        for s in self.shared:
            s.live.fill(poison_value(s.live.dtype))
            s.written[...] = False
        self.seq.clear()
        self.epoch = 0
        for a in self.arrays:
            a.sync()

    def syncwarp(self, lanes: Sequence[Any]) -> None:
        """The lanes in ``lanes`` met at ``cuda.syncwarp()``: their earlier accesses are ordered before their later ones."""
        self.syncwarps += 1
        group = frozenset(lanes)
        for a in self.arrays:
            a.warp_sync(group)

    def note(self, array: "TrackedArray", flat: int, kind: str, value: Any = None) -> None:
        t = threading.current_thread()
        key = (id(t), array.name)
        n = self.seq.get(key, 0)
        self.seq[key] = n + 1
        self.accesses.append(Access(array.name, _bid(t), getattr(t, "thread_id", 0), n, flat, kind,  # type: ignore[arg-type]
                                    array.space, self.epoch, value))


class TrackedArray:
    """An array as a kernel sees it under the strict memory model (see the module docstring)."""

    def __init__(self, live: np.ndarray, model: Model, space: str, name: str, *, poisoned: bool = False) -> None:
        self.live = live
        self.poisoned = poisoned or space == "shared"  # starts as poison: a read before any write is uninitialised
        self._seen = live.copy()
        self._own: dict[Any, dict[tuple[int, ...], Any]] = {}  # thread -> elements it can see ahead of the others
        # this epoch (since the last block barrier): element -> {thread: the threads it has since synchronised with}
        self._epoch: dict[str, dict[tuple[int, ...], dict[Any, frozenset]]] = {"read": {}, "write": {}, "atomic": {}}
        self.rmw: dict[tuple[int, ...], set[Any]] = {}  # element -> threads that read it and then wrote it plainly
        self.written = np.zeros(live.shape, dtype=bool)
        self._grid: dict[tuple[int, ...], list[Any]] = {}  # global: element -> [first block, its kinds, others' kinds, a thread]
        self._model = model
        self.space = space
        self.name = name
        self._widen = live.dtype.kind in "iu" and live.dtype.itemsize < 8
        model.arrays.append(self)

    # array attributes a kernel may use
    shape = property(lambda self: self.live.shape)
    size = property(lambda self: self.live.size)
    ndim = property(lambda self: self.live.ndim)
    dtype = property(lambda self: self.live.dtype)

    def __len__(self) -> int:
        return len(self.live)

    def sync(self) -> None:
        """A block barrier: everything written so far becomes visible; a new epoch starts."""
        self._seen[...] = self.live
        self._own.clear()
        for table in self._epoch.values():
            table.clear()

    def warp_sync(self, group: frozenset) -> None:
        """``cuda.syncwarp()`` among ``group``: their accesses so far are ordered before their later ones,
        and each sees what the others wrote."""
        for table in self._epoch.values():
            for entries in table.values():
                for t in entries:
                    if t in group:
                        entries[t] = entries[t] | group
        keys: set[tuple[int, ...]] = set()
        for t in group:
            keys.update(self._own.get(t, ()))
        if keys:
            for t in group:
                own = self._own.setdefault(t, {})
                for k in keys:
                    own[k] = self.live[k]

    def _key(self, idx: Any) -> tuple[int, ...]:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.live.ndim:
            raise IndexError(f"{self.name}: {len(idx)} indices for an array of {self.live.ndim} dimensions")
        key = []
        for axis, (i, n) in enumerate(zip(idx, self.live.shape)):
            try:
                i = int(i.__index__())
            except (AttributeError, TypeError):
                raise TypeError(f"array index must be an integer, got {type(i).__name__} {i!r}") from None
            if not 0 <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            key.append(i)
        return tuple(key)

    def _flat(self, key: tuple[int, ...]) -> int:
        return int(np.ravel_multi_index(key, self.live.shape)) if key else 0

    def _access(self, key: tuple[int, ...], kind: str, value: Any = None) -> Any:
        """Race bookkeeping for one access by the current thread; returns the thread."""
        model = self._model
        me = threading.current_thread()
        if model.record:
            model.note(self, self._flat(key), kind, value)
        if model.race is None:
            for other_kind in _CONFLICTS[kind]:
                for other, synced in self._epoch[other_kind].get(key, {}).items():
                    if other is not me and me not in synced:
                        model.found_race(self, key, other, other_kind, kind)
                        break
        self._epoch[kind].setdefault(key, {})[me] = frozenset()
        if self.space == "global":
            self._grid_access(key, kind, me)
        return me

    def _grid_access(self, key: tuple[int, ...], kind: str, me: Any) -> None:
        """Cross-block bookkeeping: compare each access with those of the first block that touched the element."""
        block = _bid(me)
        entry = self._grid.get(key)
        if entry is None:
            self._grid[key] = [block, _BIT[kind], me]
            return
        first_block, first_kinds, first_thread = entry
        if block == first_block:
            entry[1] |= _BIT[kind]
            return
        if self._model.race is None:
            for other_kind in _CONFLICTS[kind]:
                if first_kinds & _BIT[other_kind]:
                    self._model.found_race(self, key, first_thread, other_kind, kind, scope="grid")
                    break

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice) or (isinstance(idx, tuple) and any(isinstance(i, slice) for i in idx)):
            return self.live[idx]
        if self.live.ndim > 1 and (not isinstance(idx, tuple) or len(idx) < self.live.ndim):
            return _Row(self, idx if isinstance(idx, tuple) else (idx,))
        key = self._key(idx)
        me = self._access(key, "read")
        own = self._own.get(me)
        value = own[key] if own is not None and key in own else self._seen[key]
        if self.poisoned and not self.written[key] and self._model.uninitialised is None and is_poison(np.asarray(value)):
            self._model.uninitialised = UninitialisedRead(self.name, self.space, key, _tid(me), _bid(me))
        return widen(value) if self._widen else value

    def __setitem__(self, idx: Any, value: Any) -> None:
        if self.live.ndim > 1 and not isinstance(idx, tuple):
            raise IndexError(f"{self.name}: one index for an array of {self.live.ndim} dimensions")
        key = self._key(idx)
        model = self._model
        if self.live.dtype.kind in "iu" and isinstance(value, (float, np.floating)) and model.float_into_int is None:
            if np.isfinite(value) and value != int(value):
                model.float_into_int = (
                    f"the kernel stored the float {float(value)!r} into the {self.live.dtype} array "
                    f"{self.name} at index {fmt_index(key)}; the store truncates it to {int(value)}"
                )
        value = store_value(value, self.live.dtype)
        me = self._access(key, "write", value)
        if me in self._epoch["read"].get(key, {}):
            self.rmw.setdefault(key, set()).add(me)
        with np.errstate(over="ignore", invalid="ignore"):
            self.live[key] = value
        self.written[key] = True
        self._own.setdefault(me, {})[key] = self.live[key]

    def atomic_target(self, idx: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        """Record an atomic update of element ``idx``; returns (memory, key) for the simulator's atomic to act on."""
        key = self._key(idx)
        model = self._model
        with model.lock:
            model.atomics[self.space] = model.atomics.get(self.space, 0) + 1
        self._access(key, "atomic")
        self.written[key] = True
        return self.live, key


class _Row:
    """``a[i]`` of a multi-dimensional tracked array, so that ``a[i][j]`` works as in a kernel."""

    def __init__(self, parent: TrackedArray, prefix: tuple) -> None:
        self._parent, self._prefix = parent, prefix

    shape = property(lambda self: self._parent.shape[len(self._prefix):])
    size = property(lambda self: int(np.prod(self.shape)))
    ndim = property(lambda self: len(self.shape))
    dtype = property(lambda self: self._parent.dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def _full(self, idx: Any) -> tuple:
        return self._prefix + (idx if isinstance(idx, tuple) else (idx,))

    def __getitem__(self, idx: Any) -> Any:
        return self._parent[self._full(idx)]

    def __setitem__(self, idx: Any, value: Any) -> None:
        self._parent[self._full(idx)] = value

    def atomic_target(self, idx: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        return self._parent.atomic_target(self._full(idx))


_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas")
active: Model | None = None  # the model of the strict launch in progress (one launch at a time, as the simulator)


def _shared_name(frame: Any) -> str:
    """``shared array `tile``` from the source line that allocates it, else the line number."""
    import linecache

    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = re.search(r"(\w+)\s*=\s*cuda\.shared\.array", line)
    return f"shared array `{m.group(1)}`" if m else f"shared array (line {frame.f_lineno})"


class _StrictPatches:
    """Context manager: install the strict model into the simulator for one launch."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.saved: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self.saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def __enter__(self) -> "_StrictPatches":
        global active
        from numba.cuda.simulator import kernelapi

        active = self.model
        blocks.state.hooks = self.model
        model = self.model

        def shared_array(fake: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
            from numba.cuda import types as nbtypes
            from numba.cuda.np import numpy_support

            if isinstance(dtype, nbtypes.Type):
                dtype = numpy_support.as_dtype(dtype)
            dtype = np.dtype(dtype)
            if shape == 0:  # dynamic shared memory: as the simulator does it
                return np.frombuffer(fake._dynshared.data, dtype=dtype, count=fake._dynshared_size // dtype.itemsize)
            frame = sys._getframe(1)
            caller = (frame.f_code.co_filename, frame.f_lineno)
            with model.lock:
                res = fake._allocations.get(caller)
                if res is None:
                    live = np.full(shape, poison_value(dtype), dtype=dtype)
                    res = TrackedArray(live, model, "shared", _shared_name(frame))
                    model.shared.append(res)
                    fake._allocations[caller] = res
            return res

        self._patch(kernelapi.FakeCUDAShared, "array", shared_array)
        for name in _ATOMICS:
            original = kernelapi.FakeCUDAAtomic.__dict__[name]

            def atomic(fake: Any, array: Any, index: Any, *rest: Any, _orig: Any = original) -> Any:
                if isinstance(array, (TrackedArray, _Row)):
                    target, key = array.atomic_target(index)
                    return _orig(fake, target, key, *rest)
                return _orig(fake, array, index, *rest)

            self._patch(kernelapi.FakeCUDAAtomic, name, atomic)
        return self

    def __exit__(self, *exc: Any) -> None:
        global active
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        active = None
        blocks.state.hooks = None


def _track_args(model: Model, args: Sequence[Any], names: Sequence[str] | None, outputs: Sequence[str]) -> list[Any]:
    out = []
    for k, a in enumerate(args):
        live = getattr(a, "_ary", None) if not isinstance(a, np.ndarray) else a
        if isinstance(live, np.ndarray) and live.ndim > 0:
            name = names[k] if names and k < len(names) else f"argument {k + 1}"
            out.append(TrackedArray(live, model, "global", name, poisoned=name in outputs))
        else:
            out.append(a)
    return out


def launch_strict(
    kernel: Any, griddim: Any, blockdim: Any, *args: Any, reverse: bool = False, record: bool = False,
    time_limit_s: float | None = None, allow_races: bool = False, names: Sequence[str] | None = None,
    outputs: Sequence[str] = (),
) -> LaunchReport:
    """Launch ``kernel[griddim, blockdim](*args)`` in the simulator under the strict memory model.

    ``reverse`` starts the threads of each block in reverse order; ``record`` keeps every element access
    (for :func:`sectors_per_request` and :func:`bank_conflicts`). A data race raises
    :class:`~labkit.sim.errors.KernelFault` naming both threads, unless ``allow_races``; a divergent barrier,
    a broken warp call or the time limit (default :data:`labkit.sim.limits.LEARNER_CODE_LIMIT_S`) raise too. ``outputs`` names the
    arguments that start filled with poison (a read of one before any write is reported as uninitialised).
    """
    from .launch import launch

    model = Model(reverse=reverse, record=record)
    tracked = _track_args(model, args, names, outputs)
    with _StrictPatches(model):
        launch(kernel, griddim, blockdim, *tracked, time_limit_s=time_limit_s)
    race = model.finish_race()
    if race is not None and not allow_races:
        raise KernelFault(race.message(), cause=race.cause())
    return LaunchReport(
        dict(model.atomics), [(s.name, s.live.shape, s.live.dtype) for s in model.shared], model.barriers,
        model.float_into_int, model.accesses, {a.name: a.live.dtype.itemsize for a in model.arrays}, race,
        {a.name: a.written for a in model.arrays if a.space == "global"}, model.uninitialised, model.syncwarps,
    )


def sectors_per_request(report: LaunchReport, array: str, kind: str = "read") -> tuple[float, float]:
    """(mean 32-byte sectors per warp request, mean efficiency = bytes used / bytes moved) for one array."""
    from ..occupancy import coalescing

    reqs = report.requests(array, kind)
    if not reqs:
        return 0.0, 1.0
    size = report.itemsizes[array]
    stats = [coalescing([f * size for f in flats], size) for flats in reqs.values()]
    return float(np.mean([s.sectors for s in stats])), float(np.mean([s.efficiency for s in stats]))


def bank_conflicts(report: LaunchReport, array: str, kinds: tuple[str, ...] = ("read", "write")) -> int:
    """The worst n-way shared-memory bank conflict of any warp request to ``array`` (1 = conflict-free)."""
    from ..occupancy import bank_conflict_degree

    size = report.itemsizes[array]
    worst = 1
    for kind in kinds:
        for flats in report.requests(array, kind).values():
            worst = max(worst, bank_conflict_degree([f * size for f in flats]))
    return worst
