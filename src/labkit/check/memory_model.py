"""The strict memory model: how lab checks make races and missing barriers show in the CUDA simulator.

In the simulator every CUDA thread is a Python thread, and one usually runs to its end before the next
starts: a missing barrier or a non-atomic update rarely shows. A *strict* launch runs the kernel under a
memory model as weak as CUDA promises: a thread sees its own writes at once, but other threads' plain
writes only after a `syncthreads` of its block (or from earlier blocks). Atomics act on memory itself.
Shared memory starts each block filled with poison. A kernel correct under CUDA's rules is correct
here; a kernel that relies on luck (no barrier, `a[i] += 1` from many threads) gets stale values.

:func:`launch_strict` runs a kernel under this model (a plain launch on a GPU) and returns a
:class:`LaunchReport`; :func:`sectors_per_request` and :func:`bank_conflicts` read coalescing and shared-memory
bank conflicts from its recorded accesses.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..mode import current_mode
from .core import Failed
from .harness import SIM_TIME_LIMIT_S, _fmt, cuda_module, launch, poison_value


@dataclass
class Access:
    """One recorded element access of a strict launch (for coalescing and bank-conflict analysis)."""

    array: str
    block: tuple[int, int, int]
    thread: int  # linear thread index in the block (lane = thread % 32)
    seq: int  # the thread's n-th access to this array (lanes' n-th accesses form one warp request)
    flat: int  # row-major element index
    kind: str  # "read", "write" or "atomic"


_MANY = object()  # more than one thread read an element in this epoch


@dataclass(frozen=True)
class Race:
    """Two threads of one block touched one element, at least one writing, with no barrier between them."""

    array: str
    space: str
    index: tuple[int, ...]
    block: tuple[int, ...]
    first_thread: tuple[int, ...] | None  # None: several threads
    first: str  # "read", "write" or "atomic"
    second_thread: tuple[int, ...]
    second: str

    def message(self) -> str:
        if self.first.startswith("write from block"):
            return (f"element {_fmt(self.index)} of {self.array} was written by two blocks: a {self.first} and a write from "
                    f"thread {self.second_thread} of block {self.block}. Each element should be written by one thread.")
        who = f"thread {self.first_thread}" if self.first_thread is not None else "other threads"
        return (f"a race on {self.array} ({self.space} memory) at index {_fmt(self.index)} in block {self.block}: "
                f"{who} did a {self.first} and thread {self.second_thread} a {self.second} of that element, "
                f"with no cuda.syncthreads() between them.")

    def cause(self) -> str:
        if self.first.startswith("write from block"):
            return ("threads of different blocks handle the same elements: check the index formula; in a grid-stride loop "
                    "the stride is cuda.gridsize(1), all the threads of the grid, not cuda.blockDim.x.")
        rmw = ("several threads update one element with a plain read-modify-write (`a[k] += ...`), so updates get lost: "
               "use cuda.atomic.add, or give each thread its own element")
        if self.space == "global" or "atomic" in (self.first, self.second):
            return rmw + "."
        if self.first == "write" and self.second == "read":
            return ("a missing cuda.syncthreads() between writing shared memory and reading what other threads wrote; "
                    "or " + rmw + ".")
        return ("a missing cuda.syncthreads() before overwriting shared memory that other threads still read (in a loop "
                "over tiles: a barrier at the end of each iteration too); or " + rmw + ".")


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

    def requests(self, array: str, kind: str = "read") -> dict[tuple, list[int]]:
        """Warp requests: {(block, warp, seq): [flat index per lane]} for one array and kind of access."""
        out: dict[tuple, list[int]] = {}
        for a in self.accesses:
            if a.array == array and a.kind == kind:
                out.setdefault((a.block, a.thread // 32, a.seq), []).append(a.flat)
        return out


class _Model:
    def __init__(self, *, reverse: bool, record: bool, seconds: float) -> None:
        self.arrays: list[TrackedArray] = []
        self.shared: list[TrackedArray] = []
        self.reverse = reverse
        self.record = record
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.atomics: dict[str, int] = {"global": 0, "shared": 0}
        self.barriers = 0
        self.float_into_int: str | None = None
        self.accesses: list[Access] = []
        self.lock = threading.Lock()
        self.seq: dict[tuple[int, str], int] = {}
        self.race: Race | None = None

    def found_race(self, array: "TrackedArray", key: tuple[int, ...], first: Any, first_kind: str, second_kind: str) -> None:
        if self.race is None:
            t = threading.current_thread()
            other = tuple(getattr(first, "threadIdx", (0, 0, 0))) if first is not _MANY else None
            self.race = Race(array.name, array.space, key, tuple(getattr(t, "blockIdx", (0, 0, 0))),
                             other, first_kind, tuple(getattr(t, "threadIdx", (0, 0, 0))), second_kind)

    def sync(self) -> None:
        for a in self.arrays:
            a._sync()

    def block_start(self) -> None:
        for s in self.shared:
            s._live.fill(poison_value(s._live.dtype))
        self.seq.clear()
        self.sync()

    def note(self, array: "TrackedArray", flat: int, kind: str) -> None:
        t = threading.current_thread()
        tid = getattr(t, "thread_id", 0)
        key = (id(t), array.name)
        n = self.seq.get(key, 0)
        self.seq[key] = n + 1
        block = tuple(getattr(t, "blockIdx", (0, 0, 0)))
        self.accesses.append(Access(array.name, block, tid, n, flat, kind))  # type: ignore[arg-type]


class TrackedArray:
    """An array as a kernel sees it under the strict memory model (see the section comment)."""

    def __init__(self, live: np.ndarray, model: _Model, space: str, name: str) -> None:
        self._live = live
        self._seen = live.copy()
        self._own: dict[int, dict[tuple[int, ...], Any]] = {}
        self._reads: dict[tuple[int, ...], Any] = {}  # this epoch: element -> reading thread (or _MANY)
        self._writes: dict[tuple[int, ...], Any] = {}  # this epoch: element -> writing thread
        self._atomics: dict[tuple[int, ...], Any] = {}  # this epoch: element -> a thread that updated it atomically
        self.written = np.zeros(live.shape, dtype=bool)
        self._writer_block: dict[tuple[int, ...], tuple[int, ...]] = {}  # element -> block that wrote it (global)
        self._model = model
        self.space = space
        self.name = name
        model.arrays.append(self)

    # array attributes a kernel may use
    shape = property(lambda self: self._live.shape)
    size = property(lambda self: self._live.size)
    ndim = property(lambda self: self._live.ndim)
    dtype = property(lambda self: self._live.dtype)

    def __len__(self) -> int:
        return len(self._live)

    def _sync(self) -> None:
        self._seen[...] = self._live
        self._own.clear()
        self._reads.clear()
        self._writes.clear()
        self._atomics.clear()

    def _key(self, idx: Any) -> tuple[int, ...]:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self._live.ndim:
            raise IndexError(f"{len(idx)} indices for an array of {self._live.ndim} dimensions")
        key = []
        for axis, (i, n) in enumerate(zip(idx, self._live.shape)):
            try:
                i = int(i.__index__())
            except (AttributeError, TypeError):
                raise TypeError(f"array index must be an integer, got {type(i).__name__} {i!r}") from None
            if not 0 <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            key.append(i)
        return tuple(key)

    def _flat(self, key: tuple[int, ...]) -> int:
        return int(np.ravel_multi_index(key, self._live.shape)) if key else 0

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice) or (isinstance(idx, tuple) and any(isinstance(i, slice) for i in idx)):
            return self._live[idx]
        if self._live.ndim > 1 and (not isinstance(idx, tuple) or len(idx) < self._live.ndim):
            return _Row(self, idx if isinstance(idx, tuple) else (idx,))
        model = self._model
        if time.monotonic() > model.deadline:
            raise TimeoutError(f"the kernel did not finish within {model.seconds:.0f} s in the simulator")
        key = self._key(idx)
        if model.record:
            model.note(self, self._flat(key), "read")
        me = threading.current_thread()
        w = self._writes.get(key)
        if w is not None and w is not me:
            model.found_race(self, key, w, "write", "read")
        a = self._atomics.get(key)
        if a is not None and a is not me:
            model.found_race(self, key, a, "atomic", "read")
        r = self._reads.get(key)
        if r is None:
            self._reads[key] = me
        elif r is not me:
            self._reads[key] = _MANY
        own = self._own.get(id(me))
        if own is not None and key in own:
            return own[key]
        return self._seen[key]

    def __setitem__(self, idx: Any, value: Any) -> None:
        if self._live.ndim > 1 and not isinstance(idx, tuple):
            raise IndexError(f"{self.name}: one index for an array of {self._live.ndim} dimensions")
        key = self._key(idx)
        model = self._model
        if time.monotonic() > model.deadline:
            raise TimeoutError(f"the kernel did not finish within {model.seconds:.0f} s in the simulator")
        if self._live.dtype.kind in "iu" and isinstance(value, (float, np.floating)) and model.float_into_int is None:
            if value != int(value):
                model.float_into_int = (
                    f"the kernel stored the float {float(value)!r} into the {self._live.dtype} array "
                    f"{self.name} at index {_fmt(key)}; the store truncates it to {int(value)}"
                )
        self._live[key] = value
        self.written[key] = True
        if model.record:
            model.note(self, self._flat(key), "write")
        me = threading.current_thread()
        for table, kind in ((self._reads, "read"), (self._writes, "write"), (self._atomics, "atomic")):
            other = table.get(key)
            if other is not None and other is not me:
                model.found_race(self, key, other, kind, "write")
                break
        self._writes[key] = me
        self._own.setdefault(id(me), {})[key] = self._live[key]
        if self.space == "global":
            block = tuple(getattr(me, "blockIdx", (0, 0, 0)))
            before = self._writer_block.setdefault(key, block)
            if before != block and model.race is None:
                model.race = Race(self.name, self.space, key, block, None, f"write from block {before}",
                                  tuple(getattr(me, "threadIdx", (0, 0, 0))), "write")

    def _atomic(self, idx: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        key = self._key(idx)
        model = self._model
        model.atomics[self.space] = model.atomics.get(self.space, 0) + 1
        if model.record:
            model.note(self, self._flat(key), "atomic")
        me = threading.current_thread()
        for table, kind in ((self._reads, "read"), (self._writes, "write")):
            other = table.get(key)
            if other is not None and other is not me:
                model.found_race(self, key, other, kind, "atomic")
                break
        self._atomics[key] = me
        self.written[key] = True
        return self._live, key


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

    def __getitem__(self, idx: Any) -> Any:
        return self._parent[self._prefix + (idx if isinstance(idx, tuple) else (idx,))]

    def __setitem__(self, idx: Any, value: Any) -> None:
        self._parent[self._prefix + (idx if isinstance(idx, tuple) else (idx,))] = value

    def _atomic(self, idx: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        return self._parent._atomic(self._prefix + (idx if isinstance(idx, tuple) else (idx,)))


_MODEL: _Model | None = None
_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas")


def _stop_threads(threads: Sequence[Any]) -> None:
    """Stop simulator threads that run past the deadline: wake those at a barrier, and raise an exception
    inside those still computing (even in a loop that calls nothing), so no thread spins on after a check."""
    import ctypes

    for t in threads:
        t.abort = True
        t.syncthreads_blocked = False
        t.syncthreads_event.set()
        if t.is_alive() and t.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(TimeoutError))
    for t in threads:
        t.join(timeout=1.0)


def _strict_block_run(self: Any, grid_point: Any, *args: Any) -> None:
    """The simulator's BlockManager.run with the strict model's hooks (block start, barrier) and thread order."""
    from numba.cuda.simulator.kernel import BlockThread

    model = _MODEL
    assert model is not None
    model.block_start()
    threads: list[Any] = []
    points = list(np.ndindex(*self._block_dim))
    if model.reverse:
        points.reverse()
    for block_point in points:
        def target() -> None:
            self._f(*args)

        t = BlockThread(target, self, grid_point, block_point, self._debug)
        t.start()
        threads.append(t)
    live, blocked = set(threads), set()
    while live:
        for t in live:
            if t.syncthreads_blocked:
                blocked.add(t)
            elif t.exception:
                for other in threads:
                    other.abort = True
                    other.syncthreads_blocked = False
                    other.syncthreads_event.set()
                raise t.exception[0].with_traceback(t.exception[1])
        if live == blocked:
            model.barriers += 1
            model.sync()  # everything written before the barrier is now visible to the whole block
            for t in blocked:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blocked = set()
        live = {t for t in live if t.is_alive()}
        if live and not blocked:
            time.sleep(0)
        if live and time.monotonic() > model.deadline:
            _stop_threads(threads)
            raise TimeoutError(f"the kernel did not finish within {model.seconds:.0f} s in the simulator "
                               f"(block {tuple(grid_point)}, {len(live)} thread(s) still running)")
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def _shared_name(frame: Any) -> str:
    """``shared array `tile``` from the source line that allocates it, else the line number."""
    import linecache

    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = re.search(r"(\w+)\s*=\s*cuda\.shared\.array", line)
    return f"shared array `{m.group(1)}`" if m else f"shared array (line {frame.f_lineno})"


class _strict_patches:
    """Context manager: install the strict model into the simulator for one launch."""

    def __init__(self, model: _Model) -> None:
        self.model = model
        self.saved: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self.saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def __enter__(self) -> "_strict_patches":
        global _MODEL
        from numba.cuda.simulator import kernel as sim_kernel
        from numba.cuda.simulator import kernelapi

        _MODEL = self.model
        model = self.model
        self._patch(sim_kernel.BlockManager, "run", _strict_block_run)

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
                    target, key = array._atomic(index)
                    return _orig(fake, target, key, *rest)
                return _orig(fake, array, index, *rest)

            self._patch(kernelapi.FakeCUDAAtomic, name, atomic)
        return self

    def __exit__(self, *exc: Any) -> None:
        global _MODEL
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        _MODEL = None


def _track_args(model: _Model, args: Sequence[Any], names: Sequence[str] | None) -> list[Any]:
    out = []
    for k, a in enumerate(args):
        live = getattr(a, "_ary", None) if not isinstance(a, np.ndarray) else a
        if isinstance(live, np.ndarray) and live.ndim > 0:
            name = names[k] if names and k < len(names) else f"argument {k + 1}"
            out.append(TrackedArray(live, model, "global", name))
        else:
            out.append(a)
    return out


def launch_strict(
    kernel: Any, griddim: Any, blockdim: Any, *args: Any, reverse: bool = False, record: bool = False,
    time_limit_s: float | None = None, allow_races: bool = False, names: Sequence[str] | None = None,
) -> LaunchReport | None:
    """Launch under the strict memory model in ``sim`` mode (see the section comment); a plain :func:`launch` on a GPU.

    ``reverse`` starts the threads of each block in reverse order; ``record`` keeps every element access
    (for :func:`sectors_per_request` and :func:`bank_conflicts`). A data race (two threads of a block touching
    one element, one writing, no barrier between, not both atomic) raises :class:`Failed` naming both threads,
    unless ``allow_races``. Returns a :class:`LaunchReport` in ``sim`` mode.
    """
    if current_mode() != "sim":
        launch(kernel, griddim, blockdim, *args, time_limit_s=time_limit_s)
        return None
    cuda_module()
    from .. import simwarp

    simwarp.install()
    model = _Model(reverse=reverse, record=record, seconds=time_limit_s or SIM_TIME_LIMIT_S)
    tracked = _track_args(model, args, names)
    with _strict_patches(model):
        launch(kernel, griddim, blockdim, *tracked, time_limit_s=time_limit_s)
    shared = [(s.name, s._live.shape, s._live.dtype) for s in model.shared]
    items = {a.name: a._live.dtype.itemsize for a in model.arrays}
    written = {a.name: a.written for a in model.arrays if a.space == "global"}
    if model.race is not None and not allow_races:
        raise Failed(model.race.message(), cause=model.race.cause())
    return LaunchReport(dict(model.atomics), shared, model.barriers, model.float_into_int, model.accesses, items,
                        model.race, written)


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
