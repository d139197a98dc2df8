"""What a kernel touched: every thread's reads and writes, from its execution in the simulator.

:func:`trace` runs a kernel once under the strict memory model (:mod:`labkit.sim.memory`) with every element
access recorded and returns a :class:`Trace`:

- each access: array, element, kind (read, write, atomic), the value written, the thread and block, and the
  barrier epoch (how many ``cuda.syncthreads()`` its block had passed);
- each warp's memory requests: the accesses of one kind to one array that its lanes make on one line of the code
  for the n-th time (one instruction, one loop iteration; lanes that diverge within a line can be grouped
  wrongly): the 32-byte sectors a global request touches against the fewest it could, the n-way bank conflict
  of a shared request;
- the races (up to :data:`MAX_RACES`, one per element), the blocks whose threads did not all reach a
  ``syncthreads`` (each such block stops there; the other blocks still run), and errors the kernel raised;
- :meth:`Trace.summary` and :meth:`Trace.score` (the most global and shared reads and writes one thread made,
  as GPU-Puzzles scores its puzzles). :func:`labkit.widgets.trace.trace_view` draws it (``labkit.show``); this
  module knows nothing of pictures.

The kernel runs on copies of the arrays, so the caller's arrays are unchanged. Launches of more than
``max_threads`` threads (default :data:`MAX_THREADS`) are *sampled*: only some blocks, evenly spaced and
always the first and the last, run and are traced (:attr:`Trace.sampled` says so, and so does the picture).

In ``gpu`` mode this process has Numba's real CUDA target, not the simulator, so the kernel's source is traced
by a simulator in a separate process (:func:`_serve`); :attr:`Trace.origin` says which. A trace
always comes from the simulator: it shows which elements each thread touches, never how fast a GPU is.
"""

from __future__ import annotations

import inspect
import math
import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from . import engine, integers, memory
from .errors import DivergentBarrier, KernelFault

MAX_THREADS = 4096  # threads traced in one launch; more are sampled by block
MAX_THREAD_ACCESSES = 10_000  # accesses one thread may make in a trace: past it, the thread is stuck in a loop
MAX_ACCESSES = 1_000_000  # accesses one trace records in all: past it, the launch stops (the picture shows what ran)
TRACE_LIMIT_S = 3.0  # CPU seconds a trace runs when it is given no limit (a picture should come in seconds)
MAX_RACES = 256
KINDS = ("read", "write", "atomic")
_COLUMN_TYPES = {  # a trace's columns of other types than int64 (value: float64)
    "array": np.int16,
    "kind": np.int8,
    "thread": np.int32,
    "seq": np.int32,
    "epoch": np.int32,
    "site": np.int32,
    "instance": np.int32,
}
SECTOR = 32
ORIGIN_HERE = "the simulator (labkit.sim), in this process"
ORIGIN_SUBPROCESS = (
    "the simulator (labkit.sim), in a separate process: the same kernel simulated on the same input, not the GPU's own execution"
)


@dataclass(frozen=True)
class ArrayInfo:
    """An array the kernel touched: its name, memory space, shape and element size."""

    name: str
    space: str  # "global" or "shared"
    shape: tuple[int, ...]
    itemsize: int
    dtype: str


class Request(NamedTuple):
    """One warp memory request: the accesses the lanes of a warp make at one place in the code (``line``) for the
    ``seq``-th time (a loop's iterations are separate requests), to one array, of one kind. (A named tuple: a trace
    makes thousands of them.)"""

    array: str
    kind: str
    block: tuple[int, ...]
    warp: int
    seq: int
    line: int
    site: int  # index into Trace.sites
    lanes: int
    sectors: int  # 32-byte sectors touched
    ideal: int  # the fewest sectors that could hold the bytes requested
    ways: int  # shared memory: the n of the n-way bank conflict (1 = none); 1 for global


class Requests(Sequence[Request]):
    """A trace's warp requests, in the order of their first access, kept as NumPy columns (a trace can hold tens of
    thousands): a :class:`Request` is made when one is read; :meth:`of` selects by block, warp and array."""

    FIELDS = ("array", "kind", "block", "warp", "seq", "line", "site", "lanes", "sectors", "ideal", "ways")

    def __init__(self, columns: dict[str, np.ndarray], names: Sequence[str], grid: tuple[int, int, int]) -> None:
        self._columns = columns  # FIELDS, as integers: array (index into names), kind (into KINDS), block (linear)
        self._names = list(names)
        self._grid = grid

    @classmethod
    def none(cls, names: Sequence[str], grid: tuple[int, int, int]) -> Requests:
        """No requests (a launch that touched no memory)."""
        return cls({k: np.zeros(0, dtype=np.int64) for k in cls.FIELDS}, names, grid)

    def __len__(self) -> int:
        return int(self._columns["array"].size)

    def _made(self, picked: np.ndarray) -> list[Request]:
        c = {k: v[picked].tolist() for k, v in self._columns.items()}
        gx, gy, _ = self._grid
        blocks = {b: (b % gx, (b // gx) % gy, b // (gx * gy)) for b in set(c["block"])}
        c["array"] = [self._names[a] for a in c["array"]]
        c["kind"] = [KINDS[k] for k in c["kind"]]
        c["block"] = [blocks[b] for b in c["block"]]
        return list(map(Request._make, zip(*(c[k] for k in self.FIELDS))))

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return self._made(np.arange(len(self))[k])
        return self._made(np.array([range(len(self))[k]]))[0]

    def __iter__(self) -> Any:
        return iter(self._made(np.arange(len(self))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"<{len(self):,} warp requests>"

    def of(
        self, *, block: Sequence[int] | None = None, warp: int | None = None, arrays: Sequence[str] | None = None
    ) -> list[Request]:
        """The requests of one block (its blockIdx), one warp and some arrays (None: all of them)."""
        return self._made(np.flatnonzero(self._mask(block, warp, arrays)))

    def _mask(
        self, block: Sequence[int] | None = None, warp: int | None = None, arrays: Sequence[str] | None = None
    ) -> np.ndarray:
        c = self._columns
        keep = np.ones(len(self), dtype=bool)
        if block is not None:
            x, y, z = tuple(block) + (0,) * (3 - len(block))
            keep &= c["block"] == x + self._grid[0] * (y + self._grid[1] * z)
        if warp is not None:
            keep &= c["warp"] == warp
        if arrays is not None:
            keep &= np.isin(c["array"], [self._names.index(a) for a in arrays if a in self._names])
        return keep

    def mean(self, field: str, array: str, kind: str | None = None) -> float:
        """The mean of one count (``sectors``, ``ideal``, ``lanes``, ``ways``) over the requests to ``array`` (of one
        ``kind``, or all); 0.0 when there are none."""
        keep = self._mask(arrays=[array])
        if kind is not None:
            keep &= self._columns["kind"] == KINDS.index(kind)
        return float(self._columns[field][keep].mean()) if keep.any() else 0.0

    def most(self, field: str, array: str) -> int | None:
        """The largest of one count over the requests to ``array``; None when there are none."""
        keep = self._mask(arrays=[array])
        return int(self._columns[field][keep].max()) if keep.any() else None


@dataclass(frozen=True)
class Divergence:
    """A block whose threads did not all reach the same ``cuda.syncthreads()``."""

    block: tuple[int, ...]
    message: str


@dataclass(frozen=True)
class Fault:
    """A thread that raised (an index out of bounds, a broken rule): its block stopped there, so the threads of
    that block not yet run in the schedule did not run."""

    block: tuple[int, ...]
    thread: tuple[int, ...]
    message: str
    array: str | None = None  # an index out of bounds: the array, the index the thread used and how (read, write,
    index: tuple[int, ...] | None = None  # atomic); None when the thread raised for another reason
    kind: str | None = None

    @property
    def out_of_bounds(self) -> bool:
        """True when the thread raised for an element outside its array (``array``, ``index``, ``kind`` say which)."""
        return self.array is not None and self.index is not None


@dataclass(frozen=True)
class Focus:
    """What a failed check found, for the picture to open on: the element it named (``array``, ``index``) and,
    when the check knows it, the thread (``threadIdx``) and block involved; ``finding`` is the check's words.
    Built by the check layer; :meth:`Trace.locate` finds the thread to select."""

    finding: str
    array: str | None = None
    index: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    thread: tuple[int, ...] | None = None


@dataclass
class Trace:
    """The recorded execution of one launch in the simulator (see the module docstring)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arrays: dict[str, ArrayInfo]
    columns: dict[str, np.ndarray]  # per access: array (index into names), block, thread, seq, flat, kind, epoch, value,
    #                                 site (index into sites), instance (the thread's n-th access at that site)
    names: list[str]
    requests: Requests
    races: list[memory.Race]
    divergent: list[Divergence]
    errors: list[str]
    traced_blocks: list[tuple[int, ...]]
    total_blocks: int
    origin: str = ORIGIN_HERE
    seconds: float = 0.0
    uninitialised: memory.UninitialisedRead | None = None
    sites: list[tuple[str, int]] = field(default_factory=list)  # (file, line) of each place in the code that accessed memory
    outputs: dict[str, np.ndarray] = field(default_factory=dict)  # argument arrays after the launch (copies)
    faults: list[Fault] = field(default_factory=list)
    schedule: str = "forward"
    seed: int | None = None

    # -- shape of the launch -------------------------------------------------------------------------------
    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    @property
    def sampled(self) -> bool:
        """True when only some blocks ran and were traced (a launch of more than ``max_threads`` threads)."""
        return len(self.traced_blocks) < self.total_blocks

    @property
    def threads_traced(self) -> int:
        return len(self.traced_blocks) * self.threads_per_block

    def block_index(self, linear: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return (linear % gx, (linear // gx) % gy, linear // (gx * gy))

    def thread_index(self, linear: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return (linear % bx, (linear // bx) % by, linear // (bx * by))

    def _block_linear(self, block: Sequence[int]) -> int:
        b = tuple(block) + (0,) * (3 - len(block))
        gx, gy, _ = self.grid
        return int(b[0] + gx * (b[1] + gy * b[2]))

    def _thread_linear(self, thread: Sequence[int] | int) -> int:
        if isinstance(thread, (int, np.integer)):
            return int(thread)
        t = tuple(thread) + (0,) * (3 - len(thread))
        bx, by, _ = self.block
        return int(t[0] + bx * (t[1] + by * t[2]))

    # -- queries -------------------------------------------------------------------------------------------
    def select(
        self,
        array: str | None = None,
        *,
        block: Sequence[int] | int | None = None,
        warp: int | None = None,
        thread: Sequence[int] | int | None = None,
        kind: str | None = None,
    ) -> np.ndarray:
        """Boolean mask over the accesses of one array / block / warp / thread / kind (None: all)."""
        c = self.columns
        m = np.ones(len(c["flat"]), dtype=bool)
        if array is not None:
            if array not in self.names:
                from ..errors import LabkitError

                raise LabkitError(f"the trace has no array {array!r}.", fix=f"Use one of {', '.join(self.names)}.")
            m &= c["array"] == self.names.index(array)
        if block is not None:
            m &= c["block"] == (block if isinstance(block, (int, np.integer)) else self._block_linear(block))
        if warp is not None:
            m &= c["thread"] // 32 == warp
        if thread is not None:
            m &= c["thread"] == self._thread_linear(thread)
        if kind is not None:
            m &= c["kind"] == KINDS.index(kind)
        return m

    def elements(self, array: str, kind: str, **where: Any) -> np.ndarray:
        """The distinct flat (row-major) indices of ``array`` accessed with ``kind`` by the selection ``where``."""
        return np.unique(self.columns["flat"][self.select(array, kind=kind, **where)])

    def last_writer(self, array: str, index: Sequence[int] | int) -> tuple[tuple[int, ...], int] | None:
        """(block, linear thread) of the last write (or atomic) to ``array[index]`` among the traced blocks, or
        None when no traced thread wrote it."""
        info = self.arrays.get(array)
        if info is None:
            return None
        idx = (index,) if isinstance(index, (int, np.integer)) else tuple(index)
        if len(idx) != len(info.shape) or not all(0 <= i < n for i, n in zip(idx, info.shape)):
            return None
        flat = int(np.ravel_multi_index(idx, info.shape)) if info.shape else 0
        c = self.columns
        hit = self.select(array) & (c["flat"] == flat) & (c["kind"] != KINDS.index("read"))
        if not hit.any():
            return None
        last = int(np.flatnonzero(hit)[np.argmax(c["seq"][hit])])
        return self.block_index(int(c["block"][last])), int(c["thread"][last])

    def locate(self, focus: Focus) -> tuple[int, int] | None:
        """(index into :attr:`traced_blocks`, linear thread) that the picture of ``focus`` opens on: the thread
        the check named, else the last thread that wrote the element it named; None when neither was traced."""
        order = {tuple(b): k for k, b in enumerate(self.traced_blocks)}
        if focus.block is not None and focus.thread is not None and tuple(focus.block) in order:
            return order[tuple(focus.block)], self._thread_linear(focus.thread)
        if focus.array is not None and focus.index is not None:
            writer = self.last_writer(focus.array, focus.index)
            if writer is not None and tuple(writer[0]) in order:
                return order[tuple(writer[0])], writer[1]
        return None

    def counts(self) -> dict[str, np.ndarray]:
        """Per traced thread (row ``k`` = ``k``-th traced block's threads in order): global/shared reads and writes.

        An atomic update counts as a read and a write. Keys: ``"global reads"``, ``"global writes"``,
        ``"shared reads"``, ``"shared writes"``; each an array of shape (traced blocks, threads per block)."""
        c = self.columns
        order = {self._block_linear(b): k for k, b in enumerate(self.traced_blocks)}
        rows = np.array([order.get(int(b), -1) for b in c["block"]], dtype=np.int64) if len(c["block"]) else np.zeros(0, np.int64)
        shape = (max(1, len(self.traced_blocks)), self.threads_per_block)
        shared = np.array([self.arrays[n].space == "shared" for n in self.names], dtype=bool)
        is_shared = shared[c["array"]] if len(c["array"]) else np.zeros(0, bool)
        out = {}
        for space, sel in (("global", ~is_shared), ("shared", is_shared)):
            for what, kinds in (("reads", (0, 2)), ("writes", (1, 2))):
                m = sel & np.isin(c["kind"], kinds) & (rows >= 0)
                grid = np.zeros(shape, dtype=np.int64)
                np.add.at(grid, (rows[m], c["thread"][m]), 1)
                out[f"{space} {what}"] = grid
        return out

    def score(self) -> dict[str, int]:
        """The most global and shared reads and writes any one thread made (as GPU-Puzzles prints its score)."""
        return {k: int(v.max()) if v.size else 0 for k, v in self.counts().items()}

    def score_text(self) -> str:
        s = self.score()
        return "Score (max per thread): " + ", ".join(f"{k} {v}" for k, v in s.items())

    def sectors_per_request(self, array: str, kind: str | None = None) -> float:
        """Mean 32-byte sectors per warp request to a global ``array`` (reads and writes, or one ``kind``)."""
        return self.requests.mean("sectors", array, kind)

    def ideal_sectors_per_request(self, array: str, kind: str | None = None) -> float:
        return self.requests.mean("ideal", array, kind)

    def max_conflict_ways(self, array: str) -> int:
        """The worst n-way bank conflict of any warp request to a shared ``array`` (1 = conflict-free)."""
        return self.requests.most("ways", array) or 1

    def summary(self) -> dict[str, Any]:
        """``global_sectors_per_request`` and ``ideal_sectors_per_request`` (by global array),
        ``shared_max_conflict_ways`` (by shared array), ``races``, ``divergent_barriers``, ``errors`` (counts),
        ``score``, ``threads_traced``, ``sampled`` and ``origin``."""
        glob = [n for n in self.names if self.arrays[n].space == "global"]
        shar = [n for n in self.names if self.arrays[n].space == "shared"]
        return {
            "global_sectors_per_request": {n: round(self.sectors_per_request(n), 3) for n in glob},
            "ideal_sectors_per_request": {n: round(self.ideal_sectors_per_request(n), 3) for n in glob},
            "shared_max_conflict_ways": {n: self.max_conflict_ways(n) for n in shar},
            "races": len(self.races),
            "divergent_barriers": len(self.divergent),
            "errors": len(self.errors),
            "score": self.score(),
            "threads_traced": self.threads_traced,
            "sampled": self.sampled,
            "origin": self.origin,
        }

    def describe(self) -> str:
        """A few lines of text: what was traced, the score, coalescing, conflicts, races, divergent barriers."""
        s = self.summary()
        lines = [
            f"{self.kernel}[{_dims(self.grid)}, {_dims(self.block)}]: {s['threads_traced']} threads traced in "
            f"{self.origin}" + (f" (sampled: {len(self.traced_blocks)} of {self.total_blocks} blocks)" if self.sampled else "")
        ]
        lines.append(self.score_text())
        for n, v in s["global_sectors_per_request"].items():
            lines.append(f"  {n}: {v:g} sectors per warp request (ideal {s['ideal_sectors_per_request'][n]:g})")
        for n, v in s["shared_max_conflict_ways"].items():
            lines.append(f"  {n}: worst bank conflict {v}-way")
        for r in self.races[:3]:
            lines.append("  race: " + r.message())
        if len(self.races) > 3:
            lines.append(f"  ... {len(self.races) - 3} more race(s)")
        for d in self.divergent[:2]:
            lines.append("  divergent barrier: " + d.message)
        for e in self.errors[:2]:
            lines.append("  error: " + e)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Trace {self.describe().splitlines()[0]}>"


def _dims(d: Sequence[int]) -> str:
    d = list(d)
    while len(d) > 1 and d[-1] == 1:
        d.pop()
    return str(d[0]) if len(d) == 1 else str(tuple(d))


# ----------------------------------------------------------------------------- recording
class _TraceModel(memory.Model):
    """The strict model, recording everything (with the place in the kernel's code of each access) and
    collecting every race (one per element), not just the first."""

    collect_all = True

    def __init__(self) -> None:
        self.found: list[tuple[memory.Race, tuple]] = []
        self._raced: set[tuple] = set()
        self.sites: list[int] = []  # per access, aligned with self.log: its site (the place in the code)
        self.site_ids: dict[tuple[str, int], int] = {}
        self._skip = _library_dirs()
        self._library: dict[Any, bool] = {}  # code object -> whether it is this package's or Numba's simulator's
        self._private: set[Any] = set()  # the memory model's private code that notes accesses (see _kernel_frame)
        self._at: dict[Any, dict[int, int]] = {}  # the kernel's code -> an instruction's place in it -> its site
        self._per_thread: dict[Any, int] = {}
        super().__init__(record=True)

    def note(self, array: Any, t: Any, flat: int, kind: int, value: Any = None) -> None:
        caller = sys._getframe(1)
        frame = None
        if caller.f_code in self._private:  # (its caller is the memory model's too: the kernel's frame is 3 out)
            frame = sys._getframe(3)
            if self._library.get(frame.f_code) is not False:
                frame = None
        if frame is None:
            frame = self._kernel_frame(caller)
        super().note(array, t, flat, kind, value)
        if frame is None:
            self.sites.append(self.site_ids.setdefault(("?", 0), len(self.site_ids)))
        else:
            code = frame.f_code
            at = self._at.get(code)
            if at is None:
                at = self._at[code] = {}
            sid = at.get(frame.f_lasti)  # (an instruction's place: cheaper to read than its line)
            if sid is None:
                site = (code.co_filename, frame.f_lineno)
                sid = at[frame.f_lasti] = self.site_ids.setdefault(site, len(self.site_ids))
            self.sites.append(sid)
        made = self._per_thread.get(t, 0) + 1
        self._per_thread[t] = made
        if made > MAX_THREAD_ACCESSES:
            raise TraceLimit(self._finding(t, made), thread=t)
        if len(self.log) > MAX_ACCESSES:
            raise TraceLimit(
                f"the trace stopped after {MAX_ACCESSES:,} accesses (the most it records): the picture "
                "shows what the threads did until then."
            )

    def _kernel_frame(self, caller: Any) -> Any:
        """The innermost frame that is not this package's or Numba's simulator's, from ``caller`` (the frame that
        noted an access) outwards. A private function of the memory model (``_read``) that is two frames in from
        the kernel's is remembered: it is only ever called by the memory model, so :meth:`note` looks three frames
        out at once next time (a frame object made for the kernel's frame only)."""
        library = self._library
        frame, steps = caller, 1
        while frame is not None:
            inside = library.get(frame.f_code)
            if inside is None:
                inside = library[frame.f_code] = frame.f_code.co_filename.startswith(self._skip)
            if not inside:
                name = caller.f_code.co_name
                if steps == 3 and name.startswith("_") and not name.startswith("__"):
                    self._private.add(caller.f_code)
                return frame
            frame, steps = frame.f_back, steps + 1
        return None

    def _finding(self, t: Any, made: int) -> str:
        """What thread ``t`` did with its ``made`` accesses: the elements it touched most, and where in the code."""
        from collections import Counter

        counts: Counter = Counter()
        seen = 0
        for (array, who, flat, kind, _, _), sid in zip(reversed(self.log), reversed(self.sites)):
            if who is t:
                counts[(array, kind, flat, sid)] += 1
                seen += 1
                if seen >= made:
                    break
        sites = {v: k for k, v in self.site_ids.items()}
        parts, lines = [], []
        for (array, kind, flat, sid), n in counts.most_common(3):
            verb = ("read", "wrote", "updated atomically")[kind]
            parts.append(f"{verb} {_label(array.name)}[{memory.fmt_index(array.index_of(flat))}] {n:,} times")
            line = sites.get(sid, ("?", 0))[1]
            if line and line not in lines:
                lines.append(line)
        at = f" at line {', '.join(str(x) for x in lines)}" if lines else ""
        return (
            f"thread {tuple(t.threadIdx)} of block {tuple(t.blockIdx)} {', '.join(parts)}{at}, and was still going "
            f"when the trace stopped it ({MAX_THREAD_ACCESSES:,} accesses): a loop that never ends (an index that "
            "never advances), or far more work than one thread needs."
        )

    def found_race(
        self, array: Any, flat: int, other: Any, other_kind: int, kind: int, *, scope: str = "block", me: Any = None
    ) -> None:
        tag = (array.name, flat, scope)
        if tag in self._raced or len(self.found) >= MAX_RACES:
            return
        self._raced.add(tag)
        me = me or engine.current
        race = memory.Race(
            array.name,
            array.space,
            array.index_of(flat),
            memory._bid(me),
            memory._tid(other),
            memory.KINDS[other_kind],
            memory._tid(me),
            memory.KINDS[kind],
            scope=scope,
            other_block=memory._bid(other) if scope == "grid" else None,
        )
        self.found.append((race, (array, flat, other, me)))

    def all_races(self) -> list[memory.Race]:
        atomics = sum(self.atomics.values()) > 0
        out = []
        for race, (array, flat, other, me) in self.found:
            rmw = array.rmw.get(flat, set())
            out.append(replace(race, lost_update=other in rmw and me in rmw, atomics_used=atomics))
        return out


def out_of_bounds(exc: BaseException) -> tuple[str, tuple[int, ...], str] | None:
    """(array name, index, kind) of the element access that raised ``exc`` — an index out of bounds of an array
    of the strict model — read from the memory model's frames in its traceback; None for any other error.

    The kind is "read", "write" or "atomic". The model's IndexError carries only the words; the frames hold the
    array (``self``) and the index it was given, so the trace can draw the element the thread tried to touch."""
    if not isinstance(exc, IndexError):
        return None
    here = str(Path(memory.__file__))
    array, index, names = None, None, []
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename == here:
            names.append(frame.f_code.co_name)
            me = frame.f_locals.get("self")
            code = frame.f_code
            if isinstance(me, memory.TrackedArray) and code.co_argcount >= 2:
                array, index = me, frame.f_locals.get(code.co_varnames[1])  # the innermost: the whole index
        tb = tb.tb_next
    if array is None or index is None:
        return None
    try:
        idx = tuple(int(i) for i in (index if isinstance(index, tuple) else (index,)))
    except (TypeError, ValueError):
        return None
    shape = tuple(array.shape)
    if len(idx) != len(shape) or all(0 <= i < n for i, n in zip(idx, shape)):
        return None  # (not an element outside the array: a wrong number of indices, or another error)
    kind = "atomic" if {"atomic_target", "atomic"} & set(names) else "write" if {"__setitem__", "_write"} & set(names) else "read"
    return str(array.name), idx, kind


class TraceLimit(KernelFault):
    """A trace recorded as much as it may (:data:`MAX_THREAD_ACCESSES` by one thread, :data:`MAX_ACCESSES` in all):
    the launch stops, and the message says what the thread that went on was doing."""

    def __init__(self, message: str, *, thread: Any = None) -> None:
        super().__init__(message)
        self.thread = thread


def _label(name: str) -> str:
    """``tile`` for ``shared array `tile```, else the name."""
    return name[len("shared array `") : -1] if name.startswith("shared array `") and name.endswith("`") else name


def _library_dirs() -> tuple[str, ...]:
    """Directories whose frames are not the kernel's: this package (the memory model) and Numba's simulator."""
    from pathlib import Path

    from numba.cuda import simulator

    return (str(Path(memory.__file__).parent), str(Path(simulator.__file__).parent))


def _sample(
    grid: tuple[int, int, int], per_block: int, max_threads: int, include: Sequence[tuple[int, ...]] = ()
) -> list[tuple[int, ...]] | None:
    """The blocks to run when the launch has more than ``max_threads`` threads (None: all): evenly spaced, the
    first and the last, and every block of ``include`` that is in the grid."""
    points = list(np.ndindex(*grid))
    if len(points) * per_block <= max_threads:
        return None
    keep = max(1, max_threads // per_block)
    picks = {int(round(v)) for v in np.linspace(0, len(points) - 1, keep)}
    position = {p: k for k, p in enumerate(points)}
    picks |= {position[tuple(p)] for p in include if tuple(p) in position}
    return [tuple(int(x) for x in points[k]) for k in sorted(picks)]


def _as_dim3(d: Any, what: str) -> tuple[int, int, int]:
    from ..errors import LabkitError

    t = (d,) if isinstance(d, (int, np.integer)) else tuple(d)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in t):
        raise LabkitError(f"{what} must be a positive integer or a tuple of up to 3 of them, got {d!r}.")
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))  # type: ignore[return-value]


def _block_point(p: Any) -> tuple[int, int, int]:
    """A block's index (blockIdx) as an (x, y, z) tuple."""
    from ..errors import LabkitError

    t = tuple(p) if isinstance(p, (tuple, list)) else (p,)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 0 for v in t):
        raise LabkitError(f"a block index is up to 3 integers of at least 0, got {p!r}.")
    return tuple(int(v) for v in t) + (0,) * (3 - len(t))  # type: ignore[return-value]


def _host_copy(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a.copy()
    if hasattr(a, "copy_to_host"):  # a Numba device array
        return a.copy_to_host()
    if type(a).__module__.startswith("cupy"):
        return a.get()
    if hasattr(a, "__cuda_array_interface__") and hasattr(a, "get"):
        return a.get()
    return a


def _arg_names(kernel: Any, n: int) -> list[str]:
    py = getattr(kernel, "py_func", kernel)
    try:
        params = list(inspect.signature(py).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[k] if k < len(params) else f"argument {k + 1}" for k in range(n)]


def _shared_label(name: str, taken: set[str]) -> str:
    """``tile`` for the model's "shared array `tile`" (with " (shared)" added if an argument has that name)."""
    if name.startswith("shared array `") and name.endswith("`"):
        name = name[len("shared array `") : -1]
    return name + " (shared)" if name in taken else name


def _value(v: Any) -> float:
    if v is None:
        return math.nan
    try:
        return float(np.asarray(v).reshape(-1)[0].real)
    except (TypeError, ValueError, IndexError):
        return math.nan


def _sectors(addresses: Sequence[int], size: int) -> int:
    """32-byte sectors that accesses of ``size`` bytes at ``addresses`` touch (as :func:`labkit.occupancy.coalescing`
    counts them, without its argument checks): the definition :func:`_per_request` counts all requests' at once by."""
    return len({sec for a in addresses for sec in range(a // SECTOR, (a + size - 1) // SECTOR + 1)})


def _ways(addresses: Sequence[int], banks: int = 32, word: int = 4) -> int:
    """The n of an n-way bank conflict (as :func:`labkit.occupancy.bank_conflict_degree`, without its checks): the
    definition :func:`_per_request` counts all requests' at once by."""
    per_bank: dict[int, set[int]] = {}
    for a in addresses:
        w = a // word
        per_bank.setdefault(w % banks, set()).add(w)
    return max((len(ws) for ws in per_bank.values()), default=1)


def _combined(parts: list[np.ndarray]) -> np.ndarray | None:
    """One int64 key per entry that orders as ``parts`` do (non-negative integer columns, the first the most
    significant), or None when it would not fit in 62 bits."""
    radix = [int(p.max()) + 1 if p.size else 1 for p in parts]
    if math.prod(radix) >= 1 << 62:
        return None
    key = parts[0].astype(np.int64)
    for p, r in zip(parts[1:], radix[1:]):
        key *= r
        key += p
    return key


def _sorted_groups(parts: list[np.ndarray], then: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the indices that sort the entries by ``parts`` and within equal parts by ``then``, ties in their order;
    where each group of equal ``parts`` starts in that order): one stable sort of a combined key where one fits,
    else a lexsort. The sort is quick on entries that come in sorted runs."""
    count = parts[0].size
    key = _combined(parts + ([then] if then is not None else []))
    if key is not None:
        order = np.argsort(key, kind="stable")
        ordered = key[order] // (int(then.max()) + 1 if then is not None and count else 1)
        new = ordered[1:] != ordered[:-1]
    else:
        order = np.lexsort([np.arange(count)] + ([then] if then is not None else []) + list(reversed(parts)))
        new = np.logical_or.reduce([(p[order])[1:] != (p[order])[:-1] for p in parts])
    return order, np.flatnonzero(np.concatenate(([True], new)))


def _running_count(parts: list[np.ndarray], then: np.ndarray | None = None) -> np.ndarray:
    """For each entry, how many entries with the same ``parts`` come before it (by ``then``, then in order)."""
    order, starts = _sorted_groups(parts, then)
    out = np.empty(order.size, dtype=np.int32)
    out[order] = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    return out


def _distinct_keys(parts: list[np.ndarray]) -> bool:
    """True when no two entries have the same ``parts``."""
    key = _combined(parts)
    return key is not None and np.unique(key).size == key.size


def _rows(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The entries of each group (``values`` in group order; ``starts``: where each group starts) as the rows of a
    matrix, each row sorted, padded with -1 (which sorts first)."""
    count, n = starts.size, values.size
    sizes = np.diff(np.append(starts, n))
    width = int(sizes.max()) if count else 1
    if n == count * width:  # (every group as wide as the widest: a reshape)
        return np.sort(values.reshape(count, width), axis=1)
    out = np.full(count * width, -1, dtype=np.int64)
    out[np.arange(n) + np.repeat(np.arange(count) * width - starts, sizes)] = values  # (row k from k * width)
    return np.sort(out.reshape(count, width), axis=1)


def _distinct(rows: np.ndarray) -> np.ndarray:
    """Each sorted row's distinct entries other than -1: the entries that differ from the one before."""
    new = rows >= 0
    new[:, 1:] &= rows[:, 1:] != rows[:, :-1]
    return new


def _per_request(
    trace_arrays: dict[str, ArrayInfo], names: list[str], array: np.ndarray, flat: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lanes, sectors, ideal sectors, bank-conflict ways) of each request, as :func:`_sectors` and :func:`_ways`
    count them, from its elements (``flat``, the accesses grouped by request; ``starts``: where each starts;
    ``array``: each request's array, its place in ``names``): a request's elements are a row of a matrix (a warp's
    lanes at most), sorted, and each row's distinct elements, sectors and words counted at once."""
    infos = [trace_arrays[name] for name in names]
    itemsize = np.array([i.itemsize for i in infos] or [1], dtype=np.int64)[array][:, None]
    shared = np.array([i.space == "shared" for i in infos] or [False])[array]
    rows = _rows(flat, starts)  # (-1 pads a row: a right shift or floor division keeps it negative, and first)
    lanes = np.diff(np.append(starts, flat.size))
    ideal = np.maximum(1, -(-np.count_nonzero(_distinct(rows), axis=1) * itemsize[:, 0] // SECTOR))
    if (SECTOR % itemsize == 0).all():  # (each element lies in one sector, which holds a power of two of them)
        sectors = np.count_nonzero(_distinct(rows >> np.log2(SECTOR // itemsize).astype(np.int64)), axis=1)
    else:
        addr, present = rows * itemsize, rows >= 0  # (an element's first and last sector, one row)
        spans = np.concatenate([addr // SECTOR, (addr + itemsize - 1) // SECTOR], axis=1)
        spans[~np.concatenate([present, present], axis=1)] = -1
        sectors = np.count_nonzero(_distinct(np.sort(spans, axis=1)), axis=1)
    ways = np.ones(starts.size, dtype=np.int64)
    if shared.any():
        word = rows[shared] * itemsize[shared] // 4  # (rows stay sorted: a word's bank is word % 32)
        new = _distinct(word)
        which, _ = np.nonzero(new)
        per_bank = np.bincount(which * 32 + word[new] % 32, minlength=word.shape[0] * 32).reshape(-1, 32)
        ways[shared] = np.maximum(per_bank.max(axis=1), 1)
    return lanes, sectors, ideal, ways


def _requests(
    trace_arrays: dict[str, ArrayInfo],
    names: list[str],
    cols: dict[str, np.ndarray],
    grid: tuple[int, int, int],
    lines: list[int],
    place: np.ndarray | None = None,
    together: np.ndarray | None = None,
) -> Requests:
    """The warp requests: the accesses of one (array, kind, block, warp, site, instance), in the order of each one's
    first access in the trace (``place``: each access's place there; default, the order of ``cols``). ``together``:
    where, in ``cols``, runs of accesses that may each be a whole request start (a lockstep log's runs, cut where
    the warp or the instance changes); where no two of them are one request they are taken as they are, else the
    accesses are sorted by request."""
    parts = [cols["array"], cols["kind"], cols["site"], cols["instance"], cols["block"], cols["thread"] // 32]
    count = parts[0].size
    if not count:
        return Requests.none(names, grid)
    order = None
    if together is not None and _distinct_keys([p[together] for p in parts]):
        starts = together
    else:
        order, starts = _sorted_groups(parts)
    where = np.arange(count) if place is None else place
    if order is not None:
        where = where[order]
    heads = starts if order is None else order[starts]
    flat = cols["flat"] if order is None else cols["flat"][order]
    per_group = _per_request(trace_arrays, names, cols["array"][heads], flat, starts)
    by_first = np.argsort(np.minimum.reduceat(where, starts))
    heads = heads[by_first]
    columns = dict(zip(("array", "kind", "site", "seq", "block", "warp"), (p[heads].astype(np.int64) for p in parts)))
    columns["line"] = np.array(lines, dtype=np.int64)[columns["site"]] if lines else columns["site"]
    columns.update(zip(("lanes", "sectors", "ideal", "ways"), (x[by_first] for x in per_group)))
    return Requests(columns, names, grid)


@dataclass(frozen=True)
class _Request:
    """What :func:`trace` was asked to trace, checked (also sent to the simulator subprocess in ``gpu`` mode)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    names: tuple[str, ...]
    max_threads: int
    time_limit_s: float | None
    schedule: str = "forward"
    seed: int | None = None
    outputs: tuple[str, ...] = ()
    include: tuple[tuple[int, ...], ...] = ()


def _engine_columns(
    model: _TraceModel, order: list[str], labels: dict[str, str]
) -> tuple[dict[str, np.ndarray], list[tuple[str, int]]]:
    """The trace's columns and sites from the engine's recorded log (one access at a time), in its order."""
    log = list(model.log)
    count = len(log)
    arrays, threads, flats, kinds, epochs, values = zip(*log) if count else ((),) * 6

    def per_object(objects: tuple, attribute: Any) -> np.ndarray:  # (an attribute of each access's array or thread)
        ids = np.fromiter(map(id, objects), dtype=np.int64, count=count)
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        return np.array([attribute(objects[k]) for k in first.tolist()], dtype=np.int64).reshape(-1)[inverse.reshape(-1)]

    array = per_object(arrays, lambda a: order.index(labels[a.name]))
    block = per_object(threads, lambda t: t.key[0])
    thread = per_object(threads, lambda t: t.thread_id)
    kind = np.fromiter(kinds, dtype=np.int64, count=count)
    site = np.fromiter(model.sites, dtype=np.int64, count=count)
    value = np.full(count, math.nan)
    written = np.flatnonzero(kind == KINDS.index("write"))
    value[written] = [_value(values[k]) for k in written.tolist()]
    who = block * (int(thread.max(initial=0)) + 1) + thread
    seq, instance = _running_count([who, array]), _running_count([who, site, array, kind])
    cols = {
        "array": array,
        "block": block,
        "thread": thread,
        "seq": seq,
        "flat": np.fromiter(flats, dtype=np.int64, count=count),
        "kind": kind,
        "epoch": np.fromiter(epochs, dtype=np.int64, count=count),
        "value": value,
        "site": site,
        "instance": instance,
    }
    return _typed(cols), [site for site, _sid in sorted(model.site_ids.items(), key=lambda kv: kv[1])]


def _lockstep_trace(kernel: Any, copies: list[Any], request: _Request, traced: list[tuple[int, int, int]]) -> Any:
    """(the model, the lockstep log) of the launch run in lockstep (:mod:`.lockstep`) with every access recorded, or
    None when lockstep does not run it, or when it ran but a rule, a limit of the trace or a race would have spoken
    (the engine then traces it, with the copies as they were): a lockstep run stops at the first of those, and a
    trace wants every race, every divergent block and the work of a thread that never stops."""
    from . import lockstep

    fn = getattr(kernel, "py_func", None)
    if fn is None or getattr(kernel, "_labkit_argtypes", None) or getattr(kernel, "_debug", False):
        return None
    if not lockstep.accepts(fn):
        return None
    model = memory.Model(record=True)
    tracked = memory._track_args(model, copies, list(request.names), request.outputs)
    saved = [(c, c.copy()) for c in copies if isinstance(c, np.ndarray)]
    ran = lockstep.run(
        fn,
        request.grid,
        request.block,
        tracked,
        hooks=model,
        schedule=request.schedule,
        seed=request.seed,
        blocks_to_run=traced,
        time_limit_s=request.time_limit_s or TRACE_LIMIT_S,
    )
    log = model.log
    if ran and isinstance(log, lockstep.LaneLog) and len(log) <= MAX_ACCESSES:
        if np.bincount(log.raw_columns()["tid"]).max(initial=0) <= MAX_THREAD_ACCESSES:
            return model, log
    for live, copy in saved:
        live[...] = copy
    return None


def _lane_columns(
    log: Any, order: list[str], labels: dict[str, str], fn: Any
) -> tuple[dict[str, np.ndarray], list[tuple[str, int]], np.ndarray, np.ndarray]:
    """(the trace's columns, the accesses in the order of the lockstep log; its sites; each access's place in the
    engine's order; where the stretches of accesses that may each be a whole warp request start) from a lockstep log
    (:class:`labkit.sim.lockstep.LaneLog`), as :func:`_engine_columns` makes them from the engine's: arrays by their
    place in ``order``, ``seq`` each thread's count of its accesses to the array, a site per line of the kernel in
    the order first reached, ``instance`` the thread's count of its accesses of that kind to that array at that
    site. Worked out statement by statement (a statement's lanes share their array, kind and line) and run by run
    (:meth:`labkit.sim.lockstep.LaneLog.runs`)."""
    c, s = log.raw_columns(), log.statements()
    engine = log.engine_order()
    place = np.empty(engine.size, dtype=np.int64)
    place[engine] = np.arange(engine.size)
    sizes = s["size"]
    ran = np.flatnonzero(sizes)
    lines, inverse = np.unique(s["line"], return_inverse=True)
    inverse = inverse.reshape(-1)
    reached = np.full(lines.size, engine.size, dtype=np.int64)  # (each line's first access in the engine's order)
    if ran.size:
        np.minimum.at(reached, inverse[ran], np.minimum.reduceat(place, (np.cumsum(sizes) - sizes)[ran]))
    by_first = np.argsort(reached, kind="stable")
    rank = np.empty(lines.size, dtype=np.int64)
    rank[by_first] = np.arange(lines.size)
    labelled = {pos: order.index(labels[obj.name]) for pos, obj in log.named.items()}
    array = np.array([labelled[p] for p in s["position"].tolist()], dtype=np.int64)
    site = rank[inverse]
    per_access = {
        "array": np.repeat(array.astype(_COLUMN_TYPES["array"]), sizes),
        "site": np.repeat(site.astype(np.int32), sizes),
    }
    runs = log.runs()
    if runs["distinct"]:
        per_run = [array[runs["statement"]], ((site * len(order) + array) * 3 + s["kind"])[runs["statement"]]]
        seq, instance = _run_counts(c["tid"], runs["start"], np.argsort(runs["step"], kind="stable"), per_run)
    else:
        tid, step = c["tid"], c["step"]
        seq = _running_count([tid, per_access["array"]], then=step)
        instance = _running_count([tid, per_access["site"], per_access["array"], c["kind"]], then=step)
    cols = {
        "array": per_access["array"],
        "block": c["block"],
        "thread": c["thread"],
        "seq": seq,
        "flat": c["flat"],
        "kind": c["kind"],
        "epoch": c["epoch"],
        "value": c["value"],
        "site": per_access["site"],
        "instance": instance,
    }
    size = log.threads_per_block  # (a thread's tid is its block's place times size, plus its index in the block)
    warp = c["tid"] >> 5 if size % 32 == 0 else (c["tid"] // size) * -(-size // 32) + c["thread"] // 32
    cut = warp[1:] != warp[:-1]
    cut |= instance[1:] != instance[:-1]
    cut[runs["start"][1:-1] - 1] = True
    together = np.flatnonzero(np.concatenate(([True], cut)))
    filename = fn.__code__.co_filename
    return cols, [(filename, int(line)) for line in lines[by_first].tolist()], place, together


def _run_counts(tids: np.ndarray, start: np.ndarray, by_step: np.ndarray, keys: list[np.ndarray]) -> list[np.ndarray]:
    """For each key column (one key per run of a lockstep log: :meth:`labkit.sim.lockstep.LaneLog.runs`), each
    access's count of the earlier accesses of its thread in runs with the same key: run after run in the order of
    their steps (``by_step``), a counter per key and thread, for runs whose lanes are distinct."""
    threads = int(tids.max(initial=0)) + 1
    bounds = list(zip(start[:-1].tolist(), start[1:].tolist()))
    counted = [np.empty(tids.size, dtype=np.int32) for _ in keys]
    counters: list[dict[int, np.ndarray]] = [{} for _ in keys]
    for r, *ks in zip(by_step.tolist(), *(key[by_step].tolist() for key in keys)):
        a, b = bounds[r]
        lanes = tids[a:b]
        for k, out, table in zip(ks, counted, counters):
            counter = table.get(k)
            if counter is None:
                counter = table[k] = np.zeros(threads, dtype=np.int32)
            out[a:b] = counter[lanes]
            counter[lanes] += 1
    return counted


def _typed(cols: dict[str, np.ndarray], engine: np.ndarray | None = None, consume: bool = False) -> dict[str, np.ndarray]:
    """The trace's columns in their types (:data:`_COLUMN_TYPES`), taken in the order ``engine`` gives (the
    entries' indices in the trace's order) where it is given; ``consume``: each column of ``cols`` is dropped from
    it once taken."""
    out = {}
    for name in list(cols):
        values = cols.pop(name) if consume else cols[name]
        typed = values.astype(_COLUMN_TYPES.get(name, values.dtype), copy=False)
        out[name] = typed if engine is None else typed[engine]
        del values, typed
    return out


def _trace_here(kernel: Any, args: Sequence[Any], request: _Request) -> Trace:
    grid, block, names, schedule, seed = request.grid, request.block, request.names, request.schedule, request.seed
    per_block = int(np.prod(block))
    sample = _sample(grid, per_block, request.max_threads, request.include)
    copies = [_host_copy(a) for a in args]
    integers.tag_bytes_for(getattr(kernel, "py_func", None))  # (narrow reads as this kernel's launch makes them)
    divergent: list[Divergence] = []
    faults: list[Fault] = []
    errors: list[str] = []
    traced = sample if sample is not None else [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]

    def labels_now(array: str | None) -> str | None:  # (a shared array's label, as the trace names it below)
        return None if array is None else (_shared_label(array, set(names)) if array.startswith("shared array `") else array)

    def on_block_error(point: tuple[int, int, int], exc: Exception) -> bool:
        where = getattr(exc, "sim_thread", None)
        if isinstance(exc, TraceLimit):  # the trace has recorded enough: stop here, saying what the thread did
            errors.append(str(exc))
            if exc.thread is not None:
                faults.append(Fault(tuple(point), tuple(exc.thread.threadIdx), str(exc)))
            return False
        if isinstance(exc, DivergentBarrier):
            divergent.append(Divergence(tuple(point), str(exc)))
        elif len(errors) < 5:
            errors.append(f"block {tuple(point)}: {type(exc).__name__}: {exc}")
            if where is not None:
                oob = out_of_bounds(exc)
                array, index, kind = oob if oob is not None else (None, None, None)
                faults.append(
                    Fault(
                        tuple(point),
                        tuple(where[0]),
                        f"{type(exc).__name__}: {exc}",
                        array=labels_now(array),
                        index=index,
                        kind=kind,
                    )
                )
        return True  # the other blocks still run

    started = time.perf_counter()
    quick = _lockstep_trace(kernel, copies, request, traced)
    model: memory.Model
    if quick is not None:
        model, lane_log = quick
        del quick
    else:
        lane_log = None
        model = _TraceModel()
        tracked = memory._track_args(model, copies, list(names), request.outputs)
        with memory.strict(
            model,
            blocks_to_run=traced,
            on_block_error=on_block_error,
            time_limit_s=request.time_limit_s or TRACE_LIMIT_S,
            schedule=schedule,
            seed=seed,
        ):
            try:
                kernel[grid, block](*tracked)
            except TraceLimit:
                pass  # (on_block_error recorded it)
            except KernelFault as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        model.end_block()
    seconds = time.perf_counter() - started

    arrays: dict[str, ArrayInfo] = {}
    labels: dict[str, str] = {}
    for a in model.globals:
        labels[a.name] = a.name
        arrays[a.name] = ArrayInfo(a.name, "global", tuple(a.shape), a.dtype.itemsize, str(a.dtype))
    for name, shape, dtype in model.shared:
        label = labels[name] = _shared_label(name, set(names))
        arrays[label] = ArrayInfo(label, "shared", tuple(shape), dtype.itemsize, str(dtype))
    order = list(arrays)
    races = []
    if lane_log is not None:
        logged, sites, place, together = _lane_columns(lane_log, order, labels, getattr(kernel, "py_func", kernel))
        requests = _requests(arrays, order, logged, grid, [line for _, line in sites], place, together)
        engine = lane_log.engine_order()
        del lane_log, place, together
        model.log = []  # (the log's columns go as each is put in the trace's order: their memory serves the next)
        cols = _typed(logged, engine, consume=True)
    else:
        cols, sites = _engine_columns(model, order, labels)
        requests = _requests(arrays, order, cols, grid, [line for _, line in sites])
        races = [replace(r, array=labels.get(r.array, r.array)) for r in model.all_races()]
    return Trace(
        kernel=getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel"),
        grid=grid,
        block=block,
        arrays=arrays,
        columns=cols,
        names=order,
        requests=requests,
        races=races,
        divergent=divergent,
        errors=errors,
        traced_blocks=traced,
        total_blocks=int(np.prod(grid)),
        seconds=seconds,
        uninitialised=model.uninitialised,
        sites=sites,
        outputs={n: c for n, c in zip(names, copies) if isinstance(c, np.ndarray)},
        faults=faults,
        schedule=schedule,
        seed=seed,
    )


# ----------------------------------------------------------------------------- public entry point
def trace(
    kernel: Any,
    grid: Any,
    block: Any,
    *args: Any,
    names: Sequence[str] | None = None,
    max_threads: int = MAX_THREADS,
    time_limit_s: float | None = None,
    subprocess_: bool | None = None,
    schedule: str = "forward",
    seed: int | None = None,
    outputs: Sequence[str] = (),
    include_blocks: Sequence[Sequence[int]] = (),
) -> Trace:
    """Run ``kernel[grid, block](*args)`` in the simulator with every access recorded; returns a :class:`Trace`.

    ``names`` names the arguments (default: the kernel's parameter names). Arrays are copied first (the
    caller's are unchanged). More than ``max_threads`` threads: only some blocks are traced (sampled), always
    with those in ``include_blocks``. ``schedule`` and ``seed`` order each block's threads as in
    :func:`labkit.sim.launch_strict`, so a check's failing case replays exactly; the arrays named in ``outputs``
    start filled with poison, as a check's output does.
    In ``gpu`` mode (or with ``subprocess_=True``) the kernel's source is traced by a simulator subprocess.
    """
    from ..errors import LabkitError
    from .warp import is_simulator

    memory.check_kernel(kernel, "labkit.sim.trace")
    memory.check_dims(grid, block)  # types and CUDA's limits; _as_dim3 adds that a traced grid has a block
    g, b = _as_dim3(grid, "grid"), _as_dim3(block, "block")
    if max_threads < 1:
        raise LabkitError(f"max_threads must be positive, got {max_threads}.")
    arg_names = list(names) if names is not None else _arg_names(kernel, len(args))
    if len(arg_names) < len(args):
        arg_names += [f"argument {k + 1}" for k in range(len(arg_names), len(args))]
    if schedule not in engine.SCHEDULES:
        raise LabkitError(f"schedule must be one of {', '.join(engine.SCHEDULES)}, got {schedule!r}.")
    request = _Request(
        g,
        b,
        tuple(arg_names),
        max_threads,
        time_limit_s,
        schedule,
        seed,
        tuple(outputs),
        tuple(_block_point(p) for p in include_blocks),
    )
    away = (not is_simulator()) if subprocess_ is None else subprocess_
    return _trace_in_subprocess(kernel, args, request) if away else _trace_here(kernel, args, request)


# ----------------------------------------------------------------------------- gpu mode: a simulator subprocess
SUBPROCESS_TIMEOUT_S = 180.0
SUBPROCESS_MAX_BYTES = 256 << 20  # arrays sent to the simulator process: a small input, not a benchmark's


def _trace_in_subprocess(kernel: Any, args: Sequence[Any], request: _Request) -> Trace:
    from labkit.sim.standalone import _standalone_source

    from ..errors import LabkitError

    py = getattr(kernel, "py_func", kernel)
    try:
        source, _ = _standalone_source(kernel)
    except Exception as exc:  # noqa: BLE001 - a CompileError explaining why the source cannot be read
        raise LabkitError(
            f"cannot trace {py.__name__} in the simulator: {exc}", fix="Define the kernel in a notebook cell or a .py file."
        ) from None
    host = [_host_copy(a) for a in args]
    size = sum(a.nbytes for a in host if isinstance(a, np.ndarray))
    if size > SUBPROCESS_MAX_BYTES:
        raise LabkitError(
            f"the arrays to trace hold {size / 2**20:.0f} MiB; the simulator traces small inputs "
            f"(at most {SUBPROCESS_MAX_BYTES >> 20} MiB).",
            fix="Trace the kernel on a small input (a few thousand elements): it shows which elements "
            "each thread touches, which does not depend on the size.",
        )
    payload = {"source": source, "name": py.__name__, "args": host, "request": request}
    env = dict(os.environ, LABKIT_MODE="sim", NUMBA_ENABLE_CUDASIM="1")
    env.pop("LABKIT_EXPECT", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "import labkit; labkit.setup(quiet=True); from labkit.sim.trace import _serve; _serve()"],
            input=pickle.dumps(payload),
            capture_output=True,
            env=env,
            timeout=SUBPROCESS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise LabkitError(
            f"tracing {py.__name__} in the simulator took more than {SUBPROCESS_TIMEOUT_S:.0f} s.",
            fix="Trace a smaller input (a few thousand threads).",
        ) from None
    try:
        reply = pickle.loads(proc.stdout)
    except Exception:  # noqa: BLE001
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LabkitError(
            f"the simulator process tracing {py.__name__} stopped: {' '.join(tail) or 'no output'}",
            fix="Run the kernel with LABKIT_MODE=sim to see the error.",
        ) from None
    if isinstance(reply, dict):
        raise LabkitError(
            f"cannot trace {py.__name__} in the simulator: {reply['error']}",
            fix="Check that the kernel uses only names defined in the notebook (numpy, cuda, constants, device functions).",
        )
    reply.origin = ORIGIN_SUBPROCESS
    return reply


def _serve() -> None:
    """The subprocess side: read a pickled request on stdin, write a pickled Trace (or {"error": text})."""
    payload = pickle.loads(sys.stdin.buffer.read())
    out: Any
    try:
        import importlib

        from numba import cuda

        module = importlib.import_module("labkit.sim.trace")  # (labkit.sim.trace, the attribute, is the function)

        ns: dict[str, Any] = {}
        import linecache

        linecache.cache["<traced kernel>"] = (len(payload["source"]), None, payload["source"].splitlines(True), "<traced kernel>")
        exec(compile(payload["source"], "<traced kernel>", "exec"), ns)  # noqa: S102 - the learner's own kernel
        kernel = cuda.jit(ns[payload["name"]])
        out = module._trace_here(kernel, payload["args"], payload["request"])
        out.outputs = {}
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.buffer.write(pickle.dumps(out))
    sys.stdout.buffer.flush()
