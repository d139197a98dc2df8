"""The strict memory model: how races and missing barriers show in the CUDA simulator.

In the simulator the threads of a block run one after another (each until its next barrier) and the blocks
of a launch in turn: a missing barrier or a non-atomic update would rarely show by itself. A *strict* launch runs the kernel under a memory model as weak as CUDA promises:

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

import contextlib
import re
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import index as _index
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import atomics, engine, fastreads
from .errors import KernelFault
from .integers import READS, WIDE, Int32, reads_for, store_value, tag_bytes_for, widen

#: CUDA's launch limits: grid x up to 2**31 - 1 blocks, y and z up to 65,535; a block of at most 1,024 threads.
MAX_GRID = (2**31 - 1, 65_535, 65_535)
MAX_BLOCK_THREADS = 1024


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
            return (
                f"a race between blocks on {where}: thread {self.first_thread} of block {self.other_block} did "
                f"{_ARTICLE[self.first]} and thread {self.second_thread} of block {self.block} {_ARTICLE[self.second]}. "
                "Blocks of one launch run in any order and at the same time, and cannot see each other's writes."
            )
        return (
            f"a race on {where} in block {self.block}: thread {self.first_thread} did {_ARTICLE[self.first]} and "
            f"thread {self.second_thread} {_ARTICLE[self.second]} of that element, with no barrier between them."
        )

    def cause(self) -> str:
        if self.lost_update:
            if self.atomics_used:
                return (
                    "two threads updated this element with a plain read-modify-write (`a[k] += ...`), so one update "
                    "is lost: make this update atomic too (cuda.atomic.add)."
                )
            return (
                "two threads updated this element with a plain read-modify-write (`a[k] += ...`), so one update is "
                "lost: use cuda.atomic.add, or give each thread its own element."
            )
        if self.scope == "grid":
            kinds = {self.first, self.second}
            if "atomic" in kinds and "read" in kinds:
                return (
                    "a block read a value that other blocks update atomically, so it may see it half-way: do the "
                    "whole update as one atomic (cuda.atomic.add returns the old value), not a read followed by an atomic."
                )
            if kinds == {"write"}:
                return (
                    "threads of different blocks handle the same elements: check the index formula; in a grid-stride "
                    "loop the stride is cuda.gridsize(1), all the threads of the grid, not cuda.blockDim.x."
                )
            return (
                "one block read what another block wrote during the same launch: nothing orders blocks, so split the "
                "work into two kernel launches (or combine the blocks' results with atomics)."
            )
        kinds = (self.first, self.second)
        if kinds == ("write", "write"):
            return "two threads wrote one element: check the index formula, each element should have one writer."
        if "read" not in kinds:  # a plain write and an atomic update of one element
            return (
                "a plain write and an atomic update of one element with no barrier between them: after initialising "
                "(zeroing) shared memory, call cuda.syncthreads() before the atomics; after the atomics, before reading."
            )
        if self.second == "read":
            return (
                "a missing barrier between writing memory and reading what other threads wrote "
                "(cuda.syncthreads(), or cuda.syncwarp() among the lanes of one warp)."
            )
        return (
            "a missing barrier before overwriting memory that other threads still read (cuda.syncthreads(); among "
            "the lanes of one warp, cuda.syncwarp()): in a loop over tiles, a barrier at the end of each iteration "
            "too; in a tree reduction, read into a register, synchronise, then write."
        )


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
            return (
                f"{self.array} was read at index {fmt_index(self.index)} before any thread of the block wrote it: "
                "shared memory starts each block with garbage, so zero it first (then cuda.syncthreads())."
            )
        return (
            f"{self.array} was read at index {fmt_index(self.index)} before the kernel wrote it: an output starts "
            "with garbage, so assign (`=`) rather than accumulate (`+=`), or zero it first."
        )


@dataclass
class LaunchReport:
    """What a strict launch saw: atomics per memory space, shared arrays, barriers, stores of floats into integers."""

    atomics: dict[str, int]
    shared: list[tuple[str, tuple[int, ...], np.dtype]]  # (name, shape, dtype) of each shared array
    barriers: int
    float_into_int: str | None
    log: Sequence[tuple] = field(default_factory=list, repr=False)  # recorded accesses, see Model.recorded
    itemsizes: dict[str, int] = field(default_factory=dict)
    race: Race | None = None
    written: dict[str, np.ndarray] = field(default_factory=dict)  # argument name -> mask of elements written
    uninitialised: UninitialisedRead | None = None
    syncwarps: int = 0
    schedule: str = "forward"
    seed: int | None = None

    @property
    def accesses(self) -> list[Access]:
        """Every recorded access in the order they happened (``record=True``)."""
        return accesses_of(self.log)

    def count(self, array: str, kind: str = "read") -> int:
        """How many recorded accesses of ``kind`` the launch made to ``array``."""
        code = KINDS.index(kind)
        return sum(1 for a, _, _, k, _, _ in self.log if k == code and a.name == array)

    def requests(self, array: str, kind: str = "read") -> dict[tuple, list[int]]:
        """Warp requests: {(block, warp, seq): [flat index per lane]} for one array and kind of access (``seq``
        counts each thread's accesses to the array, as :func:`accesses_of` does)."""
        code = KINDS.index(kind)
        seq: dict[Any, int] = {}
        out: dict[tuple, list[int]] = {}
        for a, t, flat, k, _, _ in self.log:
            if a.name != array:
                continue
            key = t.key
            n = seq.get(key, 0)
            seq[key] = n + 1
            if k == code:
                out.setdefault((tuple(t.blockIdx), t.thread_id // 32, n), []).append(flat)
        return out


KINDS = ("read", "write", "atomic")
_INTS = (int, Int32)
READ, WRITE, ATOMIC = 0, 1, 2


def accesses_of(log: Sequence[tuple]) -> list[Access]:
    """:class:`Access` records from a model's log (``seq`` counted per thread and array, in order)."""
    seq: dict[tuple, int] = {}
    out = []
    for array, t, flat, kind, epoch, value in log:
        key = (t.key, array.name)
        n = seq.get(key, 0)
        seq[key] = n + 1
        out.append(Access(array.name, tuple(t.blockIdx), t.thread_id, n, flat, KINDS[kind], array.space, epoch, value))
    return out


def _tid(t: Any) -> tuple[int, ...]:
    return tuple(t.threadIdx)


def _bid(t: Any) -> tuple[int, ...]:
    return tuple(t.blockIdx)


# Which kinds of access conflict: everything but read/read and atomic/atomic.
_BIT = (1, 2, 4)  # read, write, atomic
_CONFLICT_BITS = (2 | 4, 1 | 2 | 4, 1 | 2)  # the kinds each kind conflicts with, as bits


def _ordered(stamp: Any, me: Any) -> bool:
    """Is the access recorded as ``stamp`` (a thread, or (thread, its syncwarp count then)) ordered before ``me``'s?

    Only through ``cuda.syncwarp()``: a later meeting of both threads orders it (within an epoch nothing else does)."""
    if type(stamp) is tuple:
        u, c = stamp
    else:
        u, c = stamp, 0
    if u is me:
        return True
    meets = u.meets
    if meets is None or u.warp != me.warp:
        return False
    bit = 1 << me.lane
    for mask in meets[c:]:
        if mask & bit:
            return True
    return False


def _thread_of(stamp: Any) -> Any:
    return stamp[0] if type(stamp) is tuple else stamp


class Model:
    """The state of one strict launch (the engine's :class:`~labkit.sim.engine.Hooks`)."""

    collect_all = False  # a trace collects every race (one per element); a check stops at the first

    def __init__(self, *, record: bool | Sequence[str]) -> None:
        self.record_only: frozenset[str] | None = None if isinstance(record, bool) else frozenset(record)
        record = bool(record)
        self.globals: list[TrackedArray] = []
        self.block_shared: list[TrackedArray] = []  # the shared arrays of the block running now
        self.shared: list[tuple[str, tuple[int, ...], np.dtype]] = []  # every distinct shared array, for the report
        self.written_shared: dict[str, np.ndarray] = {}
        self.record = record
        self.all_shared: list[TrackedArray] = []  # every shared array of the launch (their atomics are counted)
        self.lockstep_shared_atomics = 0  # atomic updates of shared arrays in a launch run in lockstep (no arrays here)
        self.barriers = 0
        self.syncwarps = 0
        self.float_into_int: str | None = None
        self.log: list[tuple] = []
        self.race: Race | None = None
        self._race_parties: tuple[Any, ...] = ()  # (array, flat, other thread, this thread) of the first race
        self.uninitialised: UninitialisedRead | None = None
        self.epoch = 0  # barriers passed by the block running now
        self.block: Any = None
        # recorded arrays whose reads wait, as flat indices, for the thread that made them to hand control back (see
        # flush); the engine calls ``switched`` then (None: nothing to hand over, the engine does not call). Set for
        # every recorded launch from the start: the engine reads it when a block starts, before that block's shared
        # arrays (which may be the first buffered ones) exist
        self.buffered: list[TrackedArray] = []
        self.switched: Callable[[Any], None] | None = self.flush if record else None
        self.runs: list[tuple[int, _Snapshot, Any, int, int, int]] = []  # (place in log, array, thread, epoch, start,
        # end): the array's reads _flats[start:end] come before log[place] (see recorded)

    @property
    def atomics(self) -> dict[str, int]:
        """Atomic updates so far, by memory space."""
        return {
            "global": sum(a.natomics + len(a._alog) for a in self.globals),
            "shared": self.lockstep_shared_atomics + sum(a.natomics + len(a._alog) for a in self.all_shared),
        }

    # -- races
    def found_race(
        self, array: "TrackedArray", flat: int, other: Any, other_kind: int, kind: int, *, scope: str = "block", me: Any = None
    ) -> None:
        if self.race is None:
            me = me or engine.current
            self.race = Race(
                array.name,
                array.space,
                array.index_of(flat),
                _bid(me),
                _tid(other),
                KINDS[other_kind],
                _tid(me),
                KINDS[kind],
                scope=scope,
                other_block=_bid(other) if scope == "grid" else None,
            )
            self._race_parties = (array, flat, other, me)

    @property
    def racing(self) -> bool:
        """True while races are still looked for (a check stops at the first)."""
        return self.race is None

    def finish_race(self) -> Race | None:
        """The first race, classified once the launch has ended (lost update or not, atomics used or not)."""
        if self.race is None:
            return None
        array, flat, other, me = self._race_parties
        rmw = array.rmw.get(flat, ())
        return replace(self.race, lost_update=other in rmw and me in rmw, atomics_used=sum(self.atomics.values()) > 0)

    # -- engine hooks
    def block_start(self, block: Any) -> None:
        if self.block is not None:
            self.end_block()
        if self.buffered:  # (the last block's shared arrays have no more reads to hand over)
            self.buffered = [a for a in self.buffered if a.space == "global"]
        self.block = block
        self.epoch = 0
        self.block_shared = []

    def end_block(self) -> None:
        """The block that ran has ended (called at the next block's start and at the end of the launch)."""
        for a in self.globals:
            a.end_block()
        self.block = None

    def barrier(self, block: Any) -> None:
        self.barriers += 1
        self.epoch += 1
        for a in self.globals:
            a.sync()
        for a in self.block_shared:
            a.sync()
        for t in block.threads:
            t.meets = None

    def syncwarp(self, threads: Sequence[Any]) -> None:
        """The lanes ``threads`` met at ``cuda.syncwarp()``: their earlier accesses are ordered before their later ones."""
        self.syncwarps += 1
        mask = 0
        for t in threads:
            mask |= 1 << t.lane
        for t in threads:
            if t.meets is None:
                t.meets = []
            t.meets.append(mask)

    def note(self, array: "TrackedArray", t: Any, flat: int, kind: int, value: Any = None) -> None:
        flats = array._flats
        if flats is not None and len(flats) != array._flushed:  # (its reads that wait come first: each array's
            self.flush_one(array, t)  # accesses keep their order)
        self.log.append((array, t, flat, kind, self.epoch, value))

    def flush_one(self, a: "TrackedArray", t: Any) -> None:
        """:meth:`flush` of one array: its reads that wait are ``t``'s, before what is logged next."""
        flats = a._flats
        if flats is not None and len(flats) > a._flushed:
            self.runs.append((len(self.log), a, t, self.epoch, a._flushed, len(flats)))
            a._flushed = len(flats)

    def flush(self, t: Any) -> None:
        """Mark the reads of recorded read-only arrays that thread ``t`` made since it last handed control back as
        ``t``'s (a run of each array's flat indices: one int a read, where a tuple each cost three times as much and
        made the collector walk them all). The engine calls it each time ``t`` hands control back (at a barrier, a
        warp call, its end): the runs come after ``t``'s other accesses of that stretch, array by array. Each thread's
        accesses to each array keep their order (what the coalescing and bank-conflict checks and ``seq`` read)."""
        place = len(self.log)
        for a in self.buffered:
            end = len(a._flats)
            if end > a._flushed:
                self.runs.append((place, a, t, self.epoch, a._flushed, end))
                a._flushed = end

    def recorded(self) -> "Sequence[tuple]":
        """Every logged access as (array, thread, flat, kind, epoch, value): :attr:`log` itself, or with the runs of
        reads of read-only arrays put in at the places :meth:`flush` gave them (:class:`AccessLog`): in the order they
        happened, but that a thread's reads of read-only arrays come after its other accesses of the same stretch
        between two hand-overs."""
        return AccessLog(self.log, self.runs) if self.runs else self.log

    # -- shared memory of a block
    def shared_array(self, shape: Any, dtype: np.dtype, frame: Any) -> "TrackedArray":
        name = _shared_name(frame)
        live = np.full(shape, poison_value(dtype), dtype=dtype)
        arr = track(live, self, "shared", name, poisoned=True)
        self.block_shared.append(arr)
        self.all_shared.append(arr)
        if not any(s[0] == name for s in self.shared):
            self.shared.append((name, tuple(live.shape), live.dtype))
        return arr


def _stamp(t: Any) -> Any:
    """How an access by ``t`` is remembered: the thread, or (thread, its syncwarp count) once it has met at one."""
    meets = t.meets
    return t if meets is None else (t, len(meets))


class AccessLog(Sequence[tuple]):
    """The accesses of a recorded launch whose read-only arrays kept their reads as runs of flat indices
    (:meth:`Model.flush`): iterating it gives each access as (array, thread, flat, kind, epoch, value), in the
    order :meth:`Model.recorded` describes, one tuple at a time."""

    def __init__(self, log: list[tuple], runs: list[tuple[int, Any, Any, int, int, int]]) -> None:
        self._log, self._runs = log, runs

    def __iter__(self) -> Iterator[tuple]:
        log = self._log
        at = 0
        for place, a, t, epoch, start, end in self._runs:
            if place > at:
                yield from log[at:place]
                at = place
            flats = a._flats[start:end]
            if a._fatomic:  # (atomic updates wait among the reads as ~flat: negative)
                yield from ((a, t, f, READ, epoch, None) if f >= 0 else (a, t, ~f, ATOMIC, epoch, None) for f in flats)
            else:
                yield from zip(repeat(a), repeat(t), flats, repeat(READ), repeat(epoch), repeat(None))
        yield from log[at:]

    def __len__(self) -> int:
        return len(self._log) + sum(end - start for _, _, _, _, start, end in self._runs)

    def __getitem__(self, k: Any) -> Any:
        return list(self)[k]  # (every access is made again: iterate instead)

    def __repr__(self) -> str:
        return f"<AccessLog of {len(self):,} accesses>"


class TrackedArray:
    """An array as a kernel sees it under the strict memory model (see the module docstring).

    :func:`track` makes one; 1-D and 2-D arrays get subclasses with a short path for the usual element access.
    Accesses are remembered per *epoch* (since the block's last barrier); at a barrier each global array folds its
    epoch into what its block did, and at the end of a block compares that with what earlier blocks did (races
    between blocks), with set operations rather than work on every access.
    """

    __slots__ = (
        "live",
        "shape",
        "size",
        "ndim",
        "dtype",
        "space",
        "name",
        "poisoned",
        "_model",
        "_mult",
        "_widen",
        "_int",
        "_low",
        "_high",
        "_poison",
        "_r",
        "_w",
        "_a",
        "_alog",
        "natomics",
        "_fadd",
        "_aold",
        "_mv",
        "_old",
        "rmw",
        "wmask",
        "_record",
        "_s1",
        "_block",
        "_earlier",
        "_track",
        "position",
        "_log",
        "_flats",
        "_flushed",
        "_fatomic",
        "_m",
        "_mbase",
        "_fv",
        "__weakref__",
    )

    def __init__(
        self,
        live: np.ndarray,
        model: Model,
        space: str,
        name: str,
        *,
        poisoned: bool = False,
        watched: bool = True,
        position: int = -1,
    ) -> None:
        self.live = live
        self._track = watched or poisoned or space == "shared"  # False: reads are not remembered (see launch_strict)
        self.position = position  # the kernel argument it is (-1 for shared memory)
        self.shape, self.size, self.ndim, self.dtype = live.shape, live.size, live.ndim, live.dtype
        self.space, self.name = space, name
        self.poisoned = poisoned  # starts as poison: a read before any write is uninitialised
        self._model = model
        self._record = model.record and (model.record_only is None or name in model.record_only)
        mult, m = [], 1
        for n in reversed(live.shape):
            mult.append(m)
            m *= n
        self._mult = tuple(reversed(mult))
        self._s1 = live.shape[1] if live.ndim == 2 else 0
        self._int = live.dtype.kind in "iu"
        self._low, self._high = (int(np.iinfo(live.dtype).min), int(np.iinfo(live.dtype).max)) if self._int else (0, -1)
        self._widen = reads_for(live.dtype)  # what narrow integer reads give (labkit.sim.integers.reads_for)
        self._poison = poison_value(live.dtype) if live.dtype.kind in "fiub" else None
        # this epoch: element -> reader(s), writer, atomic updater(s), as stamps (see _stamp)
        self._log: list[tuple[int, Any]] = []  # this epoch's reads, (element, stamp), until _readers() sorts them
        self._r: dict[int, Any] = {}
        self._w: dict[int, Any] = {}
        self._a: dict[int, Any] = {}
        self._alog: list[tuple[int, Any]] = []  # this epoch's atomics by the short path, until _atomics() sorts them
        self.natomics = 0  # atomic updates of this array so far
        # the short path of cuda.atomic.add (_lk_add_): the element type's class for a float array, int for an integer
        # one; None when every atomic takes the long path (recorded, unwatched, not 1-D, another element type)
        self._fadd: Any = None
        self._aold: Any = None  # the class of an atomic's old value (a Python int made what a GPU's atomic returns)
        if (
            self._track
            and (not self._record or type(model).note is Model.note)
            and live.ndim == 1
            and live.dtype.name in atomics.TYPES["add"]
        ):
            self._fadd = int if self._int else live.dtype.type
            self._aold = WIDE.get(live.dtype, live.dtype.type) if self._int else None
        self._mv = _int_view(live) if self._fadd is int else None  # (the integer atomics' memory, read and written
        # as Python ints: a third of NumPy's cost for one element)
        self._old: dict[int, Any] = {}  # element -> its value before this epoch's first write
        # a recorded launch under labkit's own model: the flat index of every read, which waits for Model.flush to
        # say whose (None: each read is noted as it comes, as a trace's model wants)
        self._flats: list[int] | None = None
        self._flushed = 0  # how many of them a flush has handed over
        self._fatomic = False  # True once an atomic update waits among them too (as ~flat, see _lk_add_)
        if self._record and type(model).note is Model.note:
            self._flats = []
            model.buffered.append(self)
            model.switched = model.flush
        self.rmw: dict[int, set] = {}  # element -> threads that read it and then wrote it plainly
        self.wmask = bytearray(live.size)  # elements written so far
        # global memory: element -> the first thread of this block / of earlier blocks, by kind of access
        self._block: list[dict[int, Any]] = [{}, {}, {}]
        self._earlier: list[dict[int, Any]] = [{}, {}, {}]
        if space == "global":
            model.globals.append(self)
        # shared memory: the elements as a thread reads them while this epoch has no writes and no atomics (a list of
        # the scalars a read gives, _POISONED where a read must take the long path), so that the tiles' reads of a
        # loop between two barriers are a list index; None when the array's reads take the long path
        self._mbase: list[Any] | None = None
        if (
            space == "shared"
            and live.ndim in (1, 2)
            and live.dtype.kind in "biuf"
            and (self._flats is not None or not self._record)
        ):
            self._mbase = [_POISONED] * live.size if poisoned else _scalars(live.reshape(-1), self._widen)
        self._m = self._mbase  # the mirror while it holds (None once this epoch has a write or an atomic)
        # the elements by flat index (a 1-D view of a C-ordered array: NumPy indexes it with one int, faster than with
        # a tuple), else None
        self._fv: np.ndarray | None = live if live.ndim == 1 else live.reshape(-1) if live.flags.c_contiguous else None

    def __len__(self) -> int:
        return self.shape[0]

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """A NumPy ufunc in a kernel (``np.sin(x, out)``): element reads and writes like any other (see :func:`_ufunc`)."""
        return _ufunc(ufunc, method, inputs, kwargs)

    @property
    def written(self) -> np.ndarray:
        self._atomics()
        return np.frombuffer(bytes(self.wmask), dtype=np.bool_).reshape(self.shape)

    def index_of(self, flat: int) -> tuple[int, ...]:
        return tuple(int(i) for i in np.unravel_index(flat, self.shape)) if self.shape else ()

    # -- epochs and blocks
    def sync(self) -> None:
        """A block barrier (or the block's end): everything written so far is visible to all; a new epoch starts."""
        alog = self._alog
        if alog and not self._a:  # (atomics by the short path that nothing compared yet: the epoch ends, so one
            # updater per element is enough, the one a race between blocks names; see _atomics for the sorted table)
            self.natomics += len(alog)
            atomics = dict(alog)
            alog.clear()
            wmask = self.wmask
            for k in atomics:
                wmask[k] = 1
        else:
            atomics = self._atomics()
        tables = (self._readers() if self.space == "global" else self._r, self._w, atomics)
        self._log.clear()
        mirror = self._mbase
        if mirror is not None:
            if self._w or atomics:  # (what this epoch wrote becomes what every thread reads)
                flat = self.live.reshape(-1)
                wide = self._widen
                for table in (self._w, atomics):
                    for k in table:
                        mirror[k] = wide(flat[k]) if wide else flat[k]
            self._m = mirror
        if self.space == "global":
            for mine, table in zip(self._block, tables):
                if table:
                    mine.update(table)  # (a thread that made such an access: the one a race message names)
        for table in tables:
            if table:
                table.clear()
        if self._old:
            self._old.clear()

    def end_block(self) -> None:
        """The block has ended: compare what it did with what earlier blocks did (global memory only)."""
        self.sync()
        model = self._model
        mine, earlier = self._block, self._earlier
        if model.race is None or model.collect_all:
            for kind in (WRITE, ATOMIC, READ):
                for other in (WRITE, ATOMIC, READ):
                    if not _BIT[other] & _CONFLICT_BITS[kind] or not mine[kind] or not earlier[other]:
                        continue
                    common = mine[kind].keys() & earlier[other].keys()
                    for flat in sorted(common)[: 1 if not model.collect_all else len(common)]:
                        model.found_race(
                            self,
                            flat,
                            _thread_of(_first(earlier[other][flat])),
                            other,
                            kind,
                            scope="grid",
                            me=_thread_of(_first(mine[kind][flat])),
                        )
        for before, table in zip(earlier, mine):
            before.update(table)
            table.clear()

    # -- indices
    def _key(self, idx: Any) -> tuple[Any, int]:
        """(the index for NumPy, the flat element) of an element index; out of bounds raises IndexError."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise IndexError(f"{self.name}: {len(idx)} indices for an array of {self.ndim} dimensions")
        flat = 0
        norm = []
        for axis, i in enumerate(idx):
            if type(i) is not int:
                try:
                    i = int(i.__index__())
                except (AttributeError, TypeError):
                    raise TypeError(f"array index must be an integer, got {type(i).__name__} {i!r}") from None
            n = self.shape[axis]
            if not 0 <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            norm.append(i)
            flat += i * self._mult[axis]
        return (norm[0] if self.ndim == 1 else tuple(norm)), flat

    def _view(self, idx: Any) -> Any:
        """What ``a[idx]`` is when ``idx`` does not name one element: a slice (untracked) or a row (``a[i][j]``)."""
        if isinstance(idx, slice) or (isinstance(idx, tuple) and any(isinstance(i, slice) for i in idx)):
            self._m = self._mbase = None  # (the kernel may write through the view: reads take the long path)
            return self.live[idx]
        if self.ndim > 1 and (not isinstance(idx, tuple) or len(idx) < self.ndim):
            return _Row(self, idx if isinstance(idx, tuple) else (idx,))
        return None

    # -- races within the block
    def _conflicts(self, flat: int, kind: int, me: Any) -> None:
        """Report a race if another thread's unordered access of this epoch conflicts with this one."""
        model = self._model
        if model.race is not None and not model.collect_all:
            return
        for other_kind, table in ((WRITE, self._w), (ATOMIC, self._atomics()), (READ, self._readers())):
            if not _BIT[other_kind] & _CONFLICT_BITS[kind]:
                continue
            entry = table.get(flat)
            if entry is None:
                continue
            for stamp in entry if type(entry) is list else (entry,):
                if not _ordered(stamp, me):
                    model.found_race(self, flat, _thread_of(stamp), other_kind, kind)
                    return

    # -- element access
    def __getitem__(self, idx: Any) -> Any:
        view = self._view(idx)
        if view is not None:
            return view
        index, flat = self._key(idx)
        return self._read(flat, self.live[index])

    def _read(self, flat: int, value: Any) -> Any:
        """The bookkeeping of a read of element ``flat`` that holds ``value``; returns what the thread sees."""
        me = engine.current
        if self._record:
            if self._flats is not None:
                self._flats.append(flat)
            else:
                self._model.note(self, me, flat, READ)
        if not self._track:  # an array no thread writes in this launch: its reads cannot race
            return self._widen(value) if self._widen else value
        if self._w or self._a or self._alog:
            value = self._read_written(flat, value, me)
        self._log.append((flat, me) if me.meets is None else (flat, (me, len(me.meets))))
        if self.poisoned and not self.wmask[flat] and self._model.uninitialised is None and self._is_poison(value):
            self._model.uninitialised = UninitialisedRead(self.name, self.space, self.index_of(flat), _tid(me), _bid(me))
        return self._widen(value) if self._widen else value

    def _read_written(self, flat: int, value: Any, me: Any) -> Any:
        """A read in an epoch with writes or atomics: a race if another thread's of this element is not ordered
        before it; that thread's plain write is not visible yet (the value before this epoch is)."""
        w = self._w.get(flat)
        if w is not None and w is not me and not _ordered(w, me):
            model = self._model
            if model.race is None or model.collect_all:
                model.found_race(self, flat, _thread_of(w), WRITE, READ)
            value = self._old[flat]
        if flat in self._atomics():
            self._conflicts(flat, READ, me)
        return value

    def _atomics(self) -> dict[int, Any]:
        """This epoch's atomic updaters by element (the short path logs them as they come; sorted when needed)."""
        log, table = self._alog, self._a
        if log:
            self.natomics += len(log)
            wmask = self.wmask
            for flat, stamp in dict.fromkeys(log):  # (each updater of an element once: a counter's thread adds
                # many times)
                wmask[flat] = 1
                a = table.get(flat)
                if a is None:
                    table[flat] = stamp
                elif type(a) is list:
                    if a[-1] is not stamp:
                        a.append(stamp)
                elif a is not stamp:
                    table[flat] = [a, stamp]
            log.clear()
        return table

    def _readers(self) -> dict[int, Any]:
        """This epoch's readers by element (reads are logged as they come, and sorted only when a write needs them)."""
        log, readers = self._log, self._r
        if log:
            for flat, stamp in log:
                r = readers.get(flat)
                if r is None:
                    readers[flat] = stamp
                elif type(r) is list:
                    if r[-1] is not stamp:
                        r.append(stamp)
                elif r is not stamp:
                    readers[flat] = [r, stamp]
            log.clear()
        return readers

    def _is_poison(self, value: Any) -> bool:
        p = self._poison
        if isinstance(p, float):
            return value != value
        return bool(value == p)

    def __setitem__(self, idx: Any, value: Any) -> None:
        if self.ndim > 1 and not isinstance(idx, tuple):
            raise IndexError(f"{self.name}: one index for an array of {self.ndim} dimensions")
        index, flat = self._key(idx)
        self._write(index, flat, value)

    def _write(self, index: Any, flat: int, value: Any) -> None:
        """A plain store of ``value`` into element ``flat`` (``index`` for NumPy)."""
        if not self._track:
            raise Retrack(self)
        model = self._model
        if self._int and not (type(value) is int and self._low <= value <= self._high):  # (an int that fits: as it is)
            if isinstance(value, (float, np.floating)) and model.float_into_int is None:
                if np.isfinite(value) and value != int(value):
                    model.float_into_int = (
                        f"the kernel stored the float {float(value)!r} into the {self.dtype} array "
                        f"{self.name} at index {fmt_index(self.index_of(flat))}; the store truncates it to {int(value)}"
                    )
            value = store_value(value, self.dtype)
        me = engine.current
        self._m = None
        if not (self._log or self._r or self._a or self._alog or flat in self._w):
            # the first access of this element in the epoch, and nobody has read the array in it: nothing to check
            if self._record:
                model.note(self, me, flat, WRITE, value)
            fv = self._fv
            if fv is not None:
                self._old[flat] = fv[flat]
                self._w[flat] = me if me.meets is None else _stamp(me)
                fv[flat] = value
            else:
                self._old[flat] = self.live[index]
                self._w[flat] = me if me.meets is None else _stamp(me)
                self.live[index] = value
            self.wmask[flat] = 1
            return
        if self._record:
            model.note(self, me, flat, WRITE, value)
        read = bool(self._log or self._r)  # (this epoch has reads; _conflicts may empty the log into _r)
        if (model.race is None or model.collect_all) and (read or flat in self._w or flat in self._atomics()):
            self._conflicts(flat, WRITE, me)
        r = self._readers().get(flat) if read else None
        if r is not None and (
            r is me or (type(r) is list and any(_thread_of(s) is me for s in r)) or (type(r) is tuple and r[0] is me)
        ):
            self.rmw.setdefault(flat, set()).add(me)
        w = self._w
        if flat not in w:
            self._old[flat] = self.live[index]
        w[flat] = me if me.meets is None else _stamp(me)
        self.live[index] = value
        self.wmask[flat] = 1

    def atomic_target(self, idx: Any) -> tuple[np.ndarray, Any]:
        """Record an atomic update of element ``idx``; returns (memory, index) for the atomic to act on."""
        if type(idx) is int and self.ndim == 1 and 0 <= idx < self.size:
            index = flat = idx
        else:
            index, flat = self._key(idx)
        if not self._track:
            raise Retrack(self)
        model = self._model
        self.natomics += 1
        self._m = None
        me = engine.current
        if self._record:
            model.note(self, me, flat, ATOMIC)
        self._conflicts(flat, ATOMIC, me)
        a = self._atomics().get(flat)
        if a is None:
            self._a[flat] = _stamp(me)
        elif type(a) is list:
            a.append(_stamp(me))
        elif _thread_of(a) is not me:
            self._a[flat] = [a, _stamp(me)]
        self.wmask[flat] = 1
        return self.live, index

    def _lk_add_(self, i: Any, v: Any) -> Any:
        """``cuda.atomic.add(self, i, v)`` as :mod:`labkit.sim.fastreads` compiles it into a kernel; returns the
        element's old value as stored. The short path (a 1-D array, an integer index in bounds, a number of the
        element's kind) does what :meth:`atomic_target` and :func:`_strict_add` do, with the updater logged for
        :meth:`_atomics` to sort; anything else takes that long path."""
        mv = self._mv
        if mv is not None and v.__class__ is int:  # (an integer array and a Python int: histograms and counters)
            if i.__class__ is not int:
                try:
                    k = _index(i)  # (an int of any integer type, first: NumPy's comparisons cost more)
                except TypeError:  # (not an integer: the long path says so, after this block, so that its error
                    k = -1  # is not shown as raised while handling this one)
                if k < 0:
                    return _slow_add(self, i, v)
                i = k
            if i >= 0 and not (self._w or self._log or self._r):
                # (the usual case: nothing in this epoch for the atomic to conflict with)
                try:
                    old = mv[i]
                except IndexError:  # (past the end: the long path says so, after this block)
                    old = None
                if old is None:
                    return _slow_add(self, i, v)
                me = engine.current
                self._m = None
                if self._record:
                    flats = self._flats
                    if flats is None:
                        self._model.note(self, me, i, ATOMIC)
                    else:  # (as _record_atomic, written out)
                        flats.append(~i)
                        self._fatomic = True
                self._alog.append((i, me) if me.meets is None else (i, (me, len(me.meets))))
                try:
                    mv[i] = old + v
                except ValueError:  # (past the element's range: it wraps to its width, as on a GPU)
                    self.live[i] = store_value(old + v, self.dtype)
                return old
            if not 0 <= i < self.size:
                return _slow_add(self, i, v)
            me = engine.current
            self._m = None
            if self._w or self._log or self._r:
                self._conflicts(i, ATOMIC, me)
            if self._record:
                self._record_atomic(me, i)
            self._alog.append((i, me) if me.meets is None else (i, (me, len(me.meets))))
            old = mv[i]
            new = old + v
            if self._low <= new <= self._high:
                mv[i] = new
            else:
                self.live[i] = store_value(new, self.dtype)
            return old
        c = i.__class__
        kind = self._fadd
        if kind is not None and (c is int or c is Int32 or c in _NP_INDEX) and 0 <= i < self.size:
            vc = v.__class__
            if kind is int:
                if vc is not int:
                    if vc not in _NP_INDEX:
                        return _slow_add(self, i, v)
                    v = int(v)
            elif vc is not kind and vc is not int and vc is not float and vc not in _NP_FLOATS:
                return _slow_add(self, i, v)
            if c is not int:
                i = int(i)
            me = engine.current
            self._m = None
            if self._w or self._log or self._r:
                self._conflicts(i, ATOMIC, me)
            if self._record:
                self._record_atomic(me, i)
            self._alog.append((i, me) if me.meets is None else (i, (me, len(me.meets))))  # (counted, and the
            # element marked written, when _atomics() sorts the log)
            live = self.live
            if kind is int:
                old = mv[i] if mv is not None else live.item(i)
                new = old + v
                if not self._low <= new <= self._high:
                    live[i] = store_value(new, self.dtype)
                elif mv is not None:
                    mv[i] = new
                else:
                    live[i] = new
                return old
            old = live[i]
            live[i] = old + (v if vc is kind else kind(v))  # (Numba converts the value to the array's type first)
            return old
        return _slow_add(self, i, v)

    def _record_atomic(self, me: Any, flat: int) -> None:
        """Record an atomic update of ``flat`` by ``me``: among the array's waiting reads as ``~flat`` (one int, in
        the order of the thread's accesses; :class:`AccessLog` gives it back as an atomic), or noted by a model that
        notes each access."""
        flats = self._flats
        if flats is None:
            self._model.note(self, me, flat, ATOMIC)
        else:
            flats.append(~flat)
            self._fatomic = True

    def _lk_add(self, i: Any, v: Any) -> Any:
        """:meth:`_lk_add_` whose old value the kernel uses, as a GPU's atomic returns it (integers 64-bit wide,
        tagged with their width)."""
        old = self._lk_add_(i, v)
        return old if self._aold is None else self._aold(old)


_POISONED = object()  # a mirror's element that a read must take the long path for (it may still hold poison)


def _scalars(src: np.ndarray, wide: Any) -> list[Any]:
    """The elements of the 1-D array ``src`` as a kernel's read gives them (``wide``: the array's ``_widen``)."""
    if wide is None:
        return list(src)
    if wide is np.int64:  # (NumPy makes its own scalars seven times faster than a subclass of them)
        return list(src.astype(np.int64))
    values = src.tolist()
    return values if wide is int else list(map(wide, values))


def _int_view(live: np.ndarray) -> memoryview | None:
    """A writable memoryview of a 1-D integer array in the machine's byte order (its elements as Python ints), else
    None."""
    try:
        view = memoryview(live)
        if view.readonly or view.ndim != 1 or (live.size and view[0] != live.item(0)):
            return None
        return view
    except (TypeError, ValueError, NotImplementedError):
        return None


class _Tracked1D(TrackedArray):
    """A 1-D tracked array: ``a[i]`` with a plain int in bounds takes the short path."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        m = self._m
        if m is not None:  # shared memory in an epoch with no writes: the mirror (see TrackedArray.__init__)
            try:
                if i >= 0:
                    value = m[i]  # (IndexError past the end: the long path says so)
                    if value is not _POISONED:
                        me = engine.current
                        self._log.append((i, me) if me.meets is None else (i, (me, len(me.meets))))
                        if self._flats is not None:
                            self._flats.append(i)
                        return value
            except (TypeError, ValueError, IndexError):  # (an index that is not an integer in bounds: the long path
                pass  # says what is wrong)
        if (type(i) is int or type(i) is Int32) and i >= 0:  # (Int32: cuda.threadIdx.x)
            value = self.live[i]  # (NumPy raises IndexError past the end)
            if self._w or self._a or self._alog or (self.poisoned and not self.wmask[i]):
                return self._read(i, value)
            if self._record:
                if self._flats is None:
                    return self._read(i, value)
                self._flats.append(i)  # (a recorded read, as _read logs it)
            if self._track:  # the usual read, inlined from _read: remember the reader
                me = engine.current
                self._log.append((i, me) if me.meets is None else (i, (me, len(me.meets))))
            return self._widen(value) if self._widen else value
        return TrackedArray.__getitem__(self, i)

    def __setitem__(self, i: Any, value: Any) -> None:
        if (type(i) is int or type(i) is Int32) and 0 <= i < self.size:
            if (
                not (self._log or self._r or self._a or self._alog or self._record or i in self._w)
                and self._track
                and (not self._int or (type(value) is int and self._low <= value <= self._high))
            ):  # (_write's first case, written out: a store in an epoch with nothing to check)
                me = engine.current
                self._m = None
                live = self.live
                self._old[i] = live[i]
                self._w[i] = me if me.meets is None else _stamp(me)
                live[i] = value
                self.wmask[i] = 1
                return
            self._write(i, i, value)
        else:
            TrackedArray.__setitem__(self, i, value)


class _Tracked2D(TrackedArray):
    """A 2-D tracked array: ``a[i, j]`` with plain ints in bounds takes the short path."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        m = self._m
        if m is not None and type(idx) is tuple:  # shared memory in an epoch with no writes: the mirror (see
            try:  # TrackedArray.__init__)
                i, j = idx
                s1 = self._s1
                if 0 <= j < s1 and i >= 0:
                    flat = i * s1 + j
                    value = m[flat]  # (IndexError past the last row: the long path says so)
                    if value is not _POISONED:
                        me = engine.current
                        self._log.append((flat, me) if me.meets is None else (flat, (me, len(me.meets))))
                        if self._flats is not None:
                            self._flats.append(flat)
                        return value
            except (TypeError, ValueError, IndexError):  # (not two integer indices in bounds: the long path says
                pass  # what is wrong)
        if type(idx) is tuple and len(idx) == 2:
            i, j = idx
            if type(i) in _INTS and type(j) in _INTS and i >= 0 and 0 <= j < self._s1:
                value = self.live[idx]  # (NumPy raises IndexError past the last row)
                flat = i * self._s1 + j
                if self._w or self._a or self._alog or (self.poisoned and not self.wmask[flat]):
                    return self._read(flat, value)
                if self._record:
                    if self._flats is None:
                        return self._read(flat, value)
                    self._flats.append(flat)  # (a recorded read, as _read logs it)
                if self._track:  # the usual read, inlined from _read: remember the reader
                    me = engine.current
                    self._log.append((flat, me) if me.meets is None else (flat, (me, len(me.meets))))
                return self._widen(value) if self._widen else value
        return TrackedArray.__getitem__(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        if type(idx) is tuple and len(idx) == 2:
            i, j = idx
            if type(i) in _INTS and type(j) in _INTS and 0 <= i < self.shape[0] and 0 <= j < self._s1:
                flat = i * self._s1 + j
                fv = self._fv
                if (
                    fv is not None
                    and not (self._log or self._r or self._a or self._alog or self._record or flat in self._w)
                    and (not self._int or (type(value) is int and self._low <= value <= self._high))
                    and self._track
                ):  # (_write's first case, written out: a tile's store in an epoch with nothing to check)
                    me = engine.current
                    self._m = None
                    self._old[flat] = fv[flat]
                    self._w[flat] = me if me.meets is None else _stamp(me)
                    fv[flat] = value
                    self.wmask[flat] = 1
                    return
                self._write(idx, flat, value)
                return
        TrackedArray.__setitem__(self, idx, value)


class _Tracked3D(TrackedArray):
    """A 3-D tracked array: a store ``a[i, j, k]`` with plain ints in bounds takes the short path."""

    __slots__ = ()

    def __setitem__(self, idx: Any, value: Any) -> None:
        if type(idx) is tuple and len(idx) == 3:
            i, j, k = idx
            if type(i) in _INTS and type(j) in _INTS and type(k) in _INTS:
                n0, n1, n2 = self.shape
                if 0 <= i < n0 and 0 <= j < n1 and 0 <= k < n2:
                    self._write(idx, (i * n1 + j) * n2 + k, value)
                    return
        TrackedArray.__setitem__(self, idx, value)


class _Unwatched1D(_Tracked1D):
    """A 1-D array whose reads need no bookkeeping (see :func:`launch_strict`): a read is a bounds check."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        if (type(i) is int or type(i) is Int32) and i >= 0:
            return self.live[i]
        return TrackedArray.__getitem__(self, i)


class _Unwatched2D(_Tracked2D):
    """A 2-D array whose reads need no bookkeeping: ``a[i, j]`` is a bounds check (NumPy's for the upper bounds)."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j = idx
            if i >= 0 <= j:
                return self.live[idx]  # (NumPy raises IndexError past the upper bounds, and for non-integers)
        except (TypeError, ValueError):  # not two indices, or a slice among them
            pass
        return TrackedArray.__getitem__(self, idx)


class _UnwatchedND(TrackedArray):
    """An array of 3 or more dimensions whose reads need no bookkeeping."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        if type(idx) is tuple and len(idx) == self.ndim:
            for i in idx:
                if type(i) is not int or i < 0:
                    break
            else:
                return self.live[idx]
        return TrackedArray.__getitem__(self, idx)


class _UnwatchedNarrow1D(_Tracked1D):
    """:class:`_Unwatched1D` of a narrow integer type: reads widen to int64, as Numba types them."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        if (type(i) is int or type(i) is Int32) and i >= 0:
            return self._widen(self.live[i])
        return TrackedArray.__getitem__(self, i)


class _UnwatchedNarrow2D(_Tracked2D):
    """:class:`_Unwatched2D` of a narrow integer type: reads widen to int64."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j = idx
            if i >= 0 <= j:
                return self._widen(self.live[idx])
        except (TypeError, ValueError):
            pass
        return TrackedArray.__getitem__(self, idx)


class _UnwatchedNarrowND(TrackedArray):
    """:class:`_UnwatchedND` of a narrow integer type: reads widen to int64 (3-D ones, images, take a short path)."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        if self.ndim == 3:
            try:
                i, j, k = idx
                if i >= 0 <= j and k >= 0:
                    return self._widen(self.live[idx])
            except (TypeError, ValueError):
                pass
        elif type(idx) is tuple and len(idx) == self.ndim:
            for i in idx:
                if type(i) is not int or i < 0:
                    break
            else:
                return self._widen(self.live[idx])
        return TrackedArray.__getitem__(self, idx)


class _Snapshot(TrackedArray):
    """An array no thread of the launch writes (unwatched, see :func:`launch_strict`) and no other argument shares
    memory with: its contents cannot change during the launch, so a read is an element of a copy made as Python
    lists of the scalars the kernel gets (:data:`labkit.sim.integers.READS` for narrow integers), one part (a row,
    or 256 elements of a 1-D array) at its first read. Indexing nested lists costs a tenth of indexing the NumPy
    array and widening its narrow element. Bounds are those of the array: an index below zero, past the end or not
    an integer leaves the short path for :meth:`_first_read`, which raises as :meth:`TrackedArray._key` does."""

    __slots__ = ("_parts", "_part", "_flat")

    def __init__(self, live: np.ndarray, *args: Any, **kwargs: Any) -> None:
        super().__init__(live, *args, **kwargs)
        self._part = SNAPSHOT_CHUNK if live.ndim == 1 else (live.size // live.shape[0] if live.shape[0] else 1)
        n = -(-live.size // SNAPSHOT_CHUNK) if live.ndim == 1 else live.shape[0]
        self._parts: list[Any] = [None] * n
        self._flat: list[Any] | None = None

    def fast_rows(self) -> list[Any] | None:
        """The whole copy as nested lists (``rows[i][j]`` for a 2-D array), for the reads that
        :mod:`labkit.sim.fastreads` compiles into a kernel; None for an array over :data:`FAST_ROWS_LIMIT` elements."""
        if self.size > FAST_ROWS_LIMIT:
            return None
        if self.ndim == 1 and self._flat is not None:
            return self._flat
        key = (self.live.dtype.str, self.shape, self._widen)
        cached = _rows_cache.get(key) if ROWS_CACHE_MIN <= self.size <= ROWS_CACHE_MAX else None
        contents = self.live.tobytes() if cached is not None or ROWS_CACHE_MIN <= self.size <= ROWS_CACHE_MAX else b""
        if cached is not None and cached[0] == contents:  # (the same bits as a launch before: its copy, which
            rows = cached[1]  # nobody changes)
        elif self.ndim == 1:  # (in one piece: the parts that reads outside the variant use are cut from it)
            rows = self._build(-1)
        else:
            for k in range(len(self._parts)):
                self._part_of(k)
            rows = self._parts
        if contents and (cached is None or cached[1] is not rows):
            _rows_cache.pop(key, None)
            _rows_cache[key] = (contents, rows)
            while len(_rows_cache) > ROWS_CACHE_ENTRIES:
                del _rows_cache[next(iter(_rows_cache))]
        if self.ndim == 1:
            self._flat = rows
        else:
            self._parts = rows
        return rows

    def fast_log(self) -> Callable[[int], Any] | None:
        """What takes the flat index of each read when the launch records this array's reads (the model logs them
        for the thread that made them: :meth:`Model.flush`), else None."""
        return self._flats.append if self._flats is not None else None

    def _part_of(self, k: int) -> list[Any]:
        part = self._parts[k]
        if part is None:
            flat = self._flat
            part = self._parts[k] = self._build(k) if flat is None else flat[k * SNAPSHOT_CHUNK : (k + 1) * SNAPSHOT_CHUNK]
        return part

    def _first_read(self, idx: Any) -> Any:
        """A read the short path did not serve: the first of its part (which it copies), or an index that is not
        an element's (a slice, a row: :meth:`TrackedArray._view`) or not in bounds (raises)."""
        view = self._view(idx)
        if view is not None:
            return view
        index, flat = self._key(idx)
        self._part_of(flat // self._part)
        if self._flats is not None:  # (a recorded copy: its reads wait for Model.flush)
            self._flats.append(flat)
            value = self.live[index]
            return self._widen(value) if self._widen else value
        return self._read(flat, self.live[index])

    def _build(self, k: int) -> list[Any]:
        """Part ``k`` of the copy (-1: the whole of a 1-D array): nested lists of the scalars a read gives."""
        live = self.live
        src = live if k < 0 else live[k * SNAPSHOT_CHUNK : (k + 1) * SNAPSHOT_CHUNK] if live.ndim == 1 else live[k]
        wide = self._widen
        if wide is None:
            return list(src) if src.ndim == 1 else [list(p) for p in src]
        if wide is np.int64:  # (NumPy makes its own scalars seven times faster than a subclass of them)
            wide_src = src.astype(np.int64)
            return list(wide_src) if src.ndim == 1 else [list(p) for p in wide_src]
        values = src.tolist()
        if wide is int:  # (8-bit integers: Python ints, see labkit.sim.integers.READS)
            return values  # (16- and 32-bit integers: np.int64 subclasses tagged with their width)
        return list(map(wide, values)) if src.ndim == 1 else [list(map(wide, p)) for p in values]


class _Snapshot1D(_Snapshot, _Tracked1D):
    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        try:
            if i >= 0:
                return self._parts[i >> 8][i & 255]  # (SNAPSHOT_CHUNK = 256)
        except (TypeError, IndexError):
            pass
        return self._first_read(i)


class _Snapshot2D(_Snapshot, _Tracked2D):
    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j = idx
            if i >= 0 <= j:
                return self._parts[i][j]
        except (TypeError, ValueError, IndexError):
            pass
        return self._first_read(idx)


class _Snapshot3D(_Snapshot):
    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j, k = idx
            if i >= 0 <= j and k >= 0:
                return self._parts[i][j][k]
        except (TypeError, ValueError, IndexError):
            pass
        return self._first_read(idx)


class _RecordedSnapshot1D(_Snapshot1D):
    """:class:`_Snapshot1D` of a launch that records accesses: each read is logged as :meth:`Model.note` logs it."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        try:
            if i >= 0:
                value = self._parts[i >> 8][i & 255]
                self._flats.append(i)
                return value
        except (TypeError, IndexError):
            pass
        return self._first_read(i)


class _RecordedSnapshot2D(_Snapshot2D):
    """:class:`_Snapshot2D` of a launch that records accesses."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j = idx
            if i >= 0 <= j:
                value = self._parts[i][j]
                self._flats.append(i * self._s1 + j)
                return value
        except (TypeError, ValueError, IndexError):
            pass
        return self._first_read(idx)


class _RecordedSnapshot3D(_Snapshot3D):
    """:class:`_Snapshot3D` of a launch that records accesses."""

    __slots__ = ()

    def __getitem__(self, idx: Any) -> Any:
        try:
            i, j, k = idx
            if i >= 0 <= j and k >= 0:
                value = self._parts[i][j][k]
                _, n1, n2 = self.shape
                self._flats.append((i * n1 + j) * n2 + k)
                return value
        except (TypeError, ValueError, IndexError):
            pass
        return self._first_read(idx)


SNAPSHOT_CHUNK = 256  # elements per part of a 1-D snapshot (the short path shifts by 8 bits)
#: the last few whole copies (:meth:`_Snapshot.fast_rows`) of read-only inputs of this many elements, kept with the
#: bytes they were made from: a check launches a kernel several times on the same inputs (schedules, a recorded run),
#: and an input with the same dtype, shape, read type and bits is read from the same lists (built once, changed by
#: nobody) instead of making its tens of thousands of scalars again
ROWS_CACHE_MIN, ROWS_CACHE_MAX, ROWS_CACHE_ENTRIES = 1024, 1 << 16, 4
_rows_cache: dict[tuple, tuple[bytes, list[Any]]] = {}
FAST_ROWS_LIMIT = 1 << 18  # snapshots up to this many elements are read by kernel variants (labkit.sim.fastreads)
_SNAPSHOT_KINDS = "biufc"
_SNAPSHOTS = {1: _Snapshot1D, 2: _Snapshot2D, 3: _Snapshot3D}
_RECORDED_SNAPSHOTS = {1: _RecordedSnapshot1D, 2: _RecordedSnapshot2D, 3: _RecordedSnapshot3D}


def track(
    live: np.ndarray,
    model: Model,
    space: str,
    name: str,
    *,
    poisoned: bool = False,
    watched: bool = True,
    position: int = -1,
    snapshot: bool = False,
) -> TrackedArray:
    """A :class:`TrackedArray` over ``live`` (of the subclass for its number of dimensions and what it must watch);
    ``snapshot``: an unwatched array that shares memory with no other argument may be read from a copy
    (:class:`_Snapshot`)."""
    recorded = model.record and (model.record_only is None or name in model.record_only)
    lean = not (watched or poisoned or recorded or space == "shared")
    narrow = live.dtype.kind in "iu" and live.dtype.itemsize < 8
    copyable = snapshot and live.ndim in _SNAPSHOTS and live.dtype.kind in _SNAPSHOT_KINDS
    if lean and copyable:
        cls: type[TrackedArray] = _SNAPSHOTS[live.ndim]
    elif copyable and recorded and not (watched or poisoned or space == "shared") and type(model).note is Model.note:
        cls = _RECORDED_SNAPSHOTS[live.ndim]  # (a model that notes more, such as a trace's, reads the long way)
    elif live.ndim == 1:
        cls = (_UnwatchedNarrow1D if narrow else _Unwatched1D) if lean else _Tracked1D
    elif live.ndim == 2:
        cls = (_UnwatchedNarrow2D if narrow else _Unwatched2D) if lean else _Tracked2D
    else:
        cls = (_UnwatchedNarrowND if narrow else _UnwatchedND) if lean else _Tracked3D if live.ndim == 3 else TrackedArray
    return cls(live, model, space, name, poisoned=poisoned, watched=watched, position=position)


class Retrack(BaseException):
    """Raised by a write to an array whose reads were not remembered: the launch runs again, that array watched.

    A ``BaseException``, so that nothing on its way (a kernel's ``except Exception``) stops it."""

    def __init__(self, array: TrackedArray) -> None:
        super().__init__(array.name)
        self.position = array.position


_WRITTEN: dict[Any, set[int]] = {}  # kernel code -> the arguments launches of it have written


def _first(entry: Any) -> Any:
    """The first stamp of an entry (one stamp, or a list of them)."""
    return entry[0] if type(entry) is list else entry


class _Row:
    """``a[i]`` of a multi-dimensional tracked array, so that ``a[i][j]`` works as in a kernel."""

    def __init__(self, parent: TrackedArray, prefix: tuple) -> None:
        self._parent, self._prefix = parent, prefix

    shape = property(lambda self: self._parent.shape[len(self._prefix) :])
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

    def atomic_target(self, idx: Any) -> tuple[np.ndarray, Any]:
        return self._parent.atomic_target(self._full(idx))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _ufunc(ufunc, method, inputs, kwargs)


def _elements(array: Any) -> np.ndarray:
    """The elements of a tracked array (or row) as the calling thread reads them, one recorded read each."""
    shape = tuple(array.shape)
    values = [array[k if len(k) > 1 else k[0]] for k in np.ndindex(*shape)]
    return np.array(values, dtype=array.dtype).reshape(shape)


def _ufunc(ufunc: Any, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc(*inputs, **kwargs)`` in a strict launch: every element of a tracked input is a recorded read and
    every element of a tracked ``out`` a recorded write (with its race checks), as the loop it stands for would be."""
    if method != "__call__":
        return NotImplemented
    tracked = (TrackedArray, _Row)
    args = tuple(_elements(v) if isinstance(v, tracked) else v for v in inputs)
    outs = kwargs.get("out")
    targets: list[tuple[Any, np.ndarray]] = []
    if outs is not None:
        plain = []
        for o in outs:
            if isinstance(o, tracked):
                scratch = np.empty(tuple(o.shape), dtype=o.dtype)
                targets.append((o, scratch))
                plain.append(scratch)
            else:
                plain.append(o)
        kwargs = dict(kwargs, out=tuple(plain))
    result = ufunc(*args, **kwargs)
    for o, scratch in targets:
        for k in np.ndindex(*scratch.shape):
            o[k if len(k) > 1 else k[0]] = scratch[k]
    if targets and outs is not None:
        return outs[0] if len(outs) == 1 else outs
    return result


_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas")


_SHARED_NAME = re.compile(r"(\w+)\s*=\s*cuda\.shared\.array")  # (compiled with the module, not in a first launch)


def _shared_name(frame: Any) -> str:
    """``shared array `tile``` from the source line that allocates it, else the line number."""

    def column() -> int | None:  # (of the call being made: its instruction's place in the line)
        positions = list(frame.f_code.co_positions())
        k = frame.f_lasti // 2
        return positions[k][2] if 0 <= k < len(positions) else None

    return shared_name_at(frame.f_code.co_filename, frame.f_lineno, column)


def shared_name_at(filename: str, lineno: int, column: Callable[[], int | None]) -> str:
    """The name :func:`_shared_name` gives the shared array whose allocating call is at ``column()`` of line
    ``lineno`` of ``filename``: of several allocations on one line, the one whose assignment starts last before it."""
    import linecache

    found = list(_SHARED_NAME.finditer(linecache.getline(filename, lineno)))
    if not found:
        return f"shared array (line {lineno})"
    m = found[0]
    if len(found) > 1:
        col = column()
        before = [f for f in found if col is not None and f.start() <= col]
        m = before[-1] if before else m
    return f"shared array `{m.group(1)}`"


class _StrictAtomics:
    """``cuda.atomic`` of a strict launch: updates of tracked arrays are recorded, then done on memory itself."""

    def __init__(self, plain: Any) -> None:
        self._plain = plain


def _strict_atomic(name: str) -> Any:
    def atomic(self: _StrictAtomics, array: Any, index: Any, *rest: Any) -> Any:
        op = getattr(self._plain, name)
        if isinstance(array, (TrackedArray, _Row)):
            target, key = array.atomic_target(index)
            return op(target, key, *rest)
        return op(array, index, *rest)

    atomic.__name__ = name
    return atomic


for _name in _ATOMICS:
    setattr(_StrictAtomics, _name, _strict_atomic(_name))


def _strict_add(self: _StrictAtomics, array: Any, index: Any, val: Any) -> Any:
    """``cuda.atomic.add``, the atomic of histograms and counters, done directly on a tracked array's memory."""
    if (
        isinstance(array, (TrackedArray, _Row))
        and isinstance(val, (int, float, np.integer, np.floating))
        and not isinstance(val, (bool, np.bool_))
    ):
        target, key = array.atomic_target(index)
        dt = target.dtype
        old = target[key]
        if dt.kind in "iu" and isinstance(val, (int, np.integer)):
            target[key] = store_value(int(old) + int(val), dt)  # wraps to the element's width, as on a GPU
            return widen(old)
        if dt.kind == "f":
            target[key] = old + dt.type(val)  # (Numba converts the value to the array's type first)
            return old
        return self._plain.add(target, key, val)  # (another combination: the simulator's own atomic)
    return _strict_atomic("add")(self, array, index, val)


_StrictAtomics.add = _strict_add  # type: ignore[attr-defined]
_NP_INDEX = frozenset({np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32, np.uint16, np.uint8} | set(READS.values()))
_NP_FLOATS = frozenset({np.float16, np.float32, np.float64})
_plain_atomics: list[_StrictAtomics] = []


def _slow_add(array: TrackedArray, index: Any, val: Any) -> Any:
    """``cuda.atomic.add`` of a tracked array by the long path (:func:`_strict_add`), for :meth:`TrackedArray._lk_add_`:
    the old value as stored."""
    atomics.check("add", array)
    if not _plain_atomics:
        from numba.cuda.simulator.kernelapi import FakeCUDAAtomic

        _plain_atomics.append(_StrictAtomics(FakeCUDAAtomic()))
    return _strict_add(_plain_atomics[0], array, index, val)


def _track_args(
    model: Model, args: Sequence[Any], names: Sequence[str] | None, outputs: Sequence[str], watched: set[int] | None = None
) -> list[Any]:
    """The kernel's array arguments as tracked arrays; those not in ``watched`` (None: all) start unwatched."""
    out = []
    lives = [getattr(a, "_ary", None) if not isinstance(a, np.ndarray) else a for a in args]
    arrays = [(k, v) for k, v in enumerate(lives) if isinstance(v, np.ndarray)]
    for k, a in enumerate(args):
        live = lives[k]
        if isinstance(live, np.ndarray) and live.ndim > 0:
            name = names[k] if names and k < len(names) else f"argument {k + 1}"
            alone = not any(n != k and np.may_share_memory(live, other) for n, other in arrays)
            out.append(
                track(
                    live,
                    model,
                    "global",
                    name,
                    poisoned=name in outputs,
                    watched=watched is None or k in watched,
                    position=k,
                    snapshot=alone,
                )
            )
        else:
            out.append(a)
    return out


@contextlib.contextmanager
def strict(model: Model, **opts: Any) -> Iterator[None]:
    """Run the launch made inside the ``with`` block under ``model`` (its hooks, shared arrays and atomics)."""
    from . import warp
    from .launch import options
    from .rules import install

    install()

    def setup(module: Any) -> None:
        module._shared.factory = model.shared_array
        module._atomic = _StrictAtomics(module._atomic)

    warp.on_syncwarp = model.syncwarp
    try:
        with options(hooks=model, setup=setup, **opts):
            yield
    finally:
        warp.on_syncwarp = None


# ----------------------------------------------------------------------------- argument checks of the entry points
def check_kernel(kernel: Any, who: str) -> None:
    """``kernel`` is a ``@cuda.jit`` kernel (else a :class:`~labkit.errors.LabkitError` naming ``who``)."""
    from ..errors import LabkitError

    if not callable(getattr(kernel, "py_func", None)) or not hasattr(type(kernel), "__getitem__"):
        if callable(kernel) and hasattr(kernel, "__code__"):
            raise LabkitError(
                f"{who} needs a @cuda.jit kernel; {kernel.__name__} is a plain Python function.",
                fix="Decorate it with @cuda.jit (from numba import cuda), as a kernel is.",
            )
        raise LabkitError(
            f"{who} needs a @cuda.jit kernel, got {_describe(kernel)}.",
            fix="Pass the kernel itself (the function decorated with @cuda.jit), not a call of it.",
        )


def check_dims(griddim: Any, blockdim: Any) -> None:
    """Grid and block as CUDA takes them: a whole number or 1 to 3 of them, within CUDA's launch limits."""
    from ..errors import LabkitError

    fix = "For n elements and 256 threads per block: griddim = (n + 255) // 256, blockdim = 256."
    dims = {}
    for what, d, low in (("griddim", griddim, 0), ("blockdim", blockdim, 1)):
        t = (
            (d,)
            if isinstance(d, (int, np.integer)) and not isinstance(d, bool)
            else tuple(d)
            if isinstance(d, (tuple, list))
            else None
        )
        if (
            t is None
            or not 1 <= len(t) <= 3
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= low for v in t)
        ):
            raise LabkitError(
                f"{what} must be a whole number {'of at least 1 ' if low else ''}or a tuple of 1 to 3 of them, "
                f"got {_describe(d)}.",
                fix=fix,
            )
        dims[what] = [int(v) for v in t]
    for axis, (n, top) in enumerate(zip(dims["griddim"], MAX_GRID)):
        if n > top:
            raise LabkitError(f"griddim has {n:,} blocks along {'xyz'[axis]}; CUDA allows at most {top:,}.", fix=fix)
    threads = int(np.prod(dims["blockdim"]))
    if threads > MAX_BLOCK_THREADS:
        raise LabkitError(
            f"a block of {threads:,} threads is more than the {MAX_BLOCK_THREADS} a CUDA block may have.",
            fix="Use at most 1024 threads per block (128 or 256 are good choices).",
        )


def check_time_limit(time_limit_s: Any) -> None:
    """None (the default limit) or a positive number of seconds."""
    from ..validate import require_number

    if time_limit_s is not None:
        require_number(time_limit_s, "time_limit_s", min=0, min_open=True)


def _describe(value: Any) -> str:
    from ..validate import describe

    return describe(value)


def _names(value: Any, name: str) -> list[str]:
    from ..validate import require_sequence, require_str

    return require_sequence(value, name, what="a list of argument names", item=lambda s, n: require_str(s, n, empty=True))


def _check_strict_options(
    reverse: Any, record: Any, allow_races: Any, names: Any, outputs: Any, schedule: Any, seed: Any
) -> None:
    from ..validate import require_bool, require_int

    require_bool(reverse, "reverse")
    require_bool(allow_races, "allow_races")
    if not isinstance(record, bool):
        _names(record, "record")
    if names is not None:
        _names(names, "names")
    _names(outputs, "outputs")
    if schedule is not None and (not isinstance(schedule, str) or schedule not in engine.SCHEDULES):
        from ..errors import LabkitError

        raise LabkitError(
            f"schedule must be one of {', '.join(engine.SCHEDULES)}, got {_describe(schedule)}.",
            fix="'forward' (the default), 'reverse', or 'shuffle' with a seed.",
        )
    if seed is not None:
        require_int(seed, "seed", min=0)


def _blocks_within(blocks: Any, griddim: Any) -> list[tuple[int, int, int]]:
    """``blocks`` of :func:`launch_strict` as (x, y, z) tuples, each inside the grid ``griddim`` (else a
    :class:`~labkit.errors.LabkitError`)."""
    from ..errors import LabkitError

    grid = tuple(griddim) if isinstance(griddim, (tuple, list)) else (griddim,)
    grid = tuple(int(v) for v in grid) + (1,) * (3 - len(grid))
    out: list[tuple[int, int, int]] = []
    for b in blocks:
        point = tuple(b) if isinstance(b, (tuple, list)) else (b,)
        if not 1 <= len(point) <= 3 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in point):
            raise LabkitError(f"blocks holds block indices, (x, y, z) of whole numbers; got {_describe(b)}.")
        full = tuple(int(v) for v in point) + (0,) * (3 - len(point))
        if not all(0 <= v < g for v, g in zip(full, grid)):
            raise LabkitError(f"block {full} is outside the grid {grid}.")
        out.append(full)  # type: ignore[arg-type]
    return out


def _check_report(report: Any, array: Any, *, known: bool = True) -> None:
    """``report`` is a :class:`LaunchReport` and ``array`` a string (with ``known``: one of the launch's arrays)."""
    from ..errors import LabkitError

    if not isinstance(report, LaunchReport):
        raise LabkitError(
            f"report must be a LaunchReport (what launch_strict(..., record=True) returns), got {_describe(report)}."
        )
    if not isinstance(array, str) or (known and array not in report.itemsizes):
        from ..validate import did_you_mean

        known = ", ".join(repr(a) for a in report.itemsizes) or "none"
        hint = did_you_mean(array, report.itemsizes) if isinstance(array, str) else ""
        raise LabkitError(f"the launch has no array {_describe(array)}.{hint}", fix=f"Its arrays: {known}.")


def launch_strict(
    kernel: Any,
    griddim: Any,
    blockdim: Any,
    *args: Any,
    reverse: bool = False,
    record: bool | Sequence[str] = False,
    time_limit_s: float | None = None,
    allow_races: bool = False,
    names: Sequence[str] | None = None,
    outputs: Sequence[str] = (),
    schedule: str | None = None,
    seed: int | None = None,
    blocks: Sequence[tuple[int, int, int]] | None = None,
) -> LaunchReport:
    """Launch ``kernel[griddim, blockdim](*args)`` in the simulator under the strict memory model.

    ``schedule`` orders the threads of each block: ``"forward"`` (the default), ``"reverse"`` (also
    ``reverse=True``) or ``"shuffle"`` with ``seed``; ``record`` keeps every element access (for
    :func:`sectors_per_request` and :func:`bank_conflicts`), or those of the arrays it names. A data race raises
    :class:`~labkit.sim.errors.KernelFault` naming both threads, unless ``allow_races``; a divergent barrier,
    a broken warp call or the time limit (default :data:`labkit.sim.limits.LEARNER_CODE_LIMIT_S`) raise too. ``outputs`` names the
    arguments that start filled with poison (a read of one before any write is reported as uninitialised).
    ``blocks`` runs only these blocks of the grid, as (x, y, z), in that order (a check's large grid whose other blocks
    it does not need: their outputs stay as they were); the kernel sees the whole grid's dimensions.
    """
    check_kernel(kernel, "launch_strict")
    check_dims(griddim, blockdim)
    check_time_limit(time_limit_s)
    _check_strict_options(reverse, record, allow_races, names, outputs, schedule, seed)
    schedule = schedule or ("reverse" if reverse else "forward")
    code = getattr(getattr(kernel, "py_func", None), "__code__", None)
    written = _WRITTEN.get(code)
    if written is None:  # (the arrays its text writes are watched from the start: no second run to find them)
        written = _WRITTEN[code] = set(fastreads.written_positions(getattr(kernel, "py_func", None)))
    saved = [(a, a.copy()) for a in (getattr(x, "_ary", x) for x in args) if isinstance(a, np.ndarray)]
    tag_bytes_for(getattr(kernel, "py_func", None))
    while True:
        # An array argument that no launch of this kernel has written is not watched: nothing can race with its
        # reads. If a thread writes it after all, its contents are restored and the launch runs again, watching it.
        model = Model(record=record)
        tracked = _track_args(model, args, names, outputs, written | {k for k, n in enumerate(names or ()) if n in outputs})
        try:
            subset = {} if blocks is None else {"blocks_to_run": _blocks_within(blocks, griddim)}
            with strict(model, schedule=schedule, seed=seed, time_limit_s=time_limit_s, **subset):
                kernel[griddim, blockdim](*tracked)
            break
        except Retrack as again:
            written.add(again.position)
            for live, copy in saved:
                live[...] = copy
    model.end_block()
    race = model.finish_race()
    if race is not None and not allow_races:
        raise KernelFault(race.message(), cause=race.cause())
    return LaunchReport(
        dict(model.atomics),
        list(model.shared),
        model.barriers,
        model.float_into_int,
        model.recorded(),
        {a.name: a.dtype.itemsize for a in model.globals} | {s[0]: s[2].itemsize for s in model.shared},
        race,
        {a.name: a.written for a in model.globals},
        model.uninitialised,
        model.syncwarps,
        schedule,
        seed,
    )


def sectors_per_request(report: LaunchReport, array: str, kind: str = "read") -> tuple[float, float]:
    """(mean 32-byte sectors per warp request, mean efficiency = bytes used / bytes moved) for one array."""
    from labkit.hw.occupancy import coalescing

    from ..validate import require_choice

    _check_report(report, array, known=False)  # an array the launch did not record has no requests: (0, 1)
    kind = require_choice(kind, "kind", ("read", "write", "atomic"))
    reqs = report.requests(array, kind)
    if not reqs:
        return 0.0, 1.0
    size = report.itemsizes[array]
    stats = [coalescing([f * size for f in flats], size) for flats in reqs.values()]
    return float(np.mean([s.sectors for s in stats])), float(np.mean([s.efficiency for s in stats]))


def bank_conflicts(report: LaunchReport, array: str, kinds: tuple[str, ...] = ("read", "write")) -> int:
    """The worst n-way shared-memory bank conflict of any warp request to ``array`` (1 = conflict-free)."""
    from labkit.hw.occupancy import bank_conflict_degree

    from ..validate import require_choice, require_sequence

    _check_report(report, array)
    kinds = tuple(
        require_sequence(
            kinds,
            "kinds",
            what="a list of access kinds ('read', 'write', 'atomic')",
            item=lambda k, n: require_choice(k, n, ("read", "write", "atomic")),
        )
    )
    size = report.itemsizes[array]
    worst = 1
    for kind in kinds:
        for flats in report.requests(array, kind).values():
            worst = max(worst, bank_conflict_degree([f * size for f in flats]))
    return worst


def _all_subclasses(cls: type) -> set[type]:
    out = {cls}
    for sub in cls.__subclasses__():
        out |= _all_subclasses(sub)
    return out


#: the classes whose ``cuda.atomic.add`` a kernel variant calls directly (:mod:`labkit.sim.fastreads`)
FAST_ATOMIC_CLASSES: frozenset[type] = frozenset(_all_subclasses(TrackedArray))
fastreads.FAST_ATOMIC_CLASSES = FAST_ATOMIC_CLASSES
