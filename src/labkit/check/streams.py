"""A recording stand-in for CuPy's stream and event API, for grading host code that uses streams in ``sim`` mode.

A learner's function receives a module ``cp``: on a GPU the real ``cupy``, in ``sim`` mode a :class:`RecordingCuPy`
with the same names (``cp.cuda.Stream``, ``Stream.null``, ``with stream:``, ``stream.synchronize()``,
``stream.record()``, ``stream.wait_event()``, ``cp.cuda.Event``, ``event.record()``, ``event.synchronize()``,
``cp.cuda.get_elapsed_time()``, ``cp.cuda.get_current_stream()``, ``cp.cuda.Device().synchronize()``,
``cp.empty``/``zeros``/``empty_like``/``asarray``/``copyto``, ``ndarray.set(arr, stream=None)``,
``ndarray.get(stream=None, out=None, blocking=True)``, ``ndarray.copy()``, ``d[...] = other``).

Every copy and kernel is executed at once on host memory (so results can be checked) and recorded as an operation
with the stream it was issued on. From the record the stand-in derives what a GPU would guarantee:

- **happens-before**: stream order, ``wait_event`` on an event recorded earlier, the legacy default stream's
  implicit synchronisation with blocking streams, and host synchronisation (a synchronize, a blocking ``get``);
- **hazards**: an operation that reads or writes device memory that another operation wrote (or read) without a
  happens-before between them, as a GPU would run them in either order;
- **a timeline** (a model, not a measurement): each operation starts when its stream, the operations it waits for,
  its engine (host→device copies, device→host copies, the SMs) and the host that issued it allow, and lasts its bytes
  at the model's rate; or, with ``clock="host"``, the measured wall time of the host copy that stood in for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import LabkitError

ENGINES = {"h2d": "copy engine (host→device)", "d2h": "copy engine (device→host)", "kernel": "SMs", "d2d": "SMs"}


class StandInError(LabkitError):
    """What CUDA would refuse (an event not recorded or not complete, a copy between the wrong kinds of memory)."""


@dataclass
class Op:
    """One recorded operation."""

    index: int
    kind: str  # h2d, d2h, d2d, kernel
    stream: "Stream"
    nbytes: int
    reads: list[tuple[int, int, int]]  # (buffer id, start, stop) in elements
    writes: list[tuple[int, int, int]]
    deps: set[int] = field(default_factory=set)
    issue_t: float = 0.0
    start: float = 0.0
    end: float = 0.0
    label: str = ""
    host_out: tuple[int, int, int] | None = None  # (id of the host array, start, stop) a d2h copy writes
    pinned: bool | None = None  # a copy's host side: pinned (True) or pageable (False) memory; None for device work
    marks: frozenset[int] = frozenset()  # the events (their tokens) this operation is ordered after on the GPU


class _Buffer:
    _next = 0

    def __init__(self, data: np.ndarray) -> None:
        _Buffer._next += 1
        self.id = _Buffer._next
        self.data = data


class DeviceArray:
    """A 1-D (or n-D, contiguous) device array of the stand-in: host memory that records how it is used."""

    def __init__(self, rec: "RecordingCuPy", buf: _Buffer, start: int, stop: int, shape: tuple[int, ...]) -> None:
        self._rec, self._buf, self._start, self._stop, self.shape = rec, buf, start, stop, shape

    # --- array-like attributes
    @property
    def dtype(self) -> np.dtype:
        return self._buf.data.dtype

    @property
    def size(self) -> int:
        return self._stop - self._start

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def _view(self) -> np.ndarray:
        return self._buf.data[self._start : self._stop].reshape(self.shape)

    def _range(self) -> tuple[int, int, int]:
        return (self._buf.id, self._start, self._stop)

    def __getitem__(self, key: Any) -> "DeviceArray":
        if self.ndim != 1 or not isinstance(key, slice):
            raise StandInError(
                "the grading stand-in supports 1-D slices of device arrays (d[lo:hi]) only.",
                fix="Slice the flat array: d[lo:hi].",
            )
        lo, hi, step = key.indices(self.size)
        if step != 1:
            raise StandInError("the grading stand-in supports contiguous slices only (no step).")
        hi = max(lo, hi)
        return DeviceArray(self._rec, self._buf, self._start + lo, self._start + hi, (hi - lo,))

    def __setitem__(self, key: Any, value: Any) -> None:
        target = self if key is Ellipsis or key == slice(None) else self[key]
        if isinstance(value, DeviceArray):
            self._rec._d2d(target, value)
        else:
            raise StandInError("assign a device array to a device array (d[...] = other); copy host data with d.set(host).")

    def __repr__(self) -> str:
        return f"<stand-in device array {self.shape} {self.dtype}>"

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise StandInError(
            "a device array cannot be used as a NumPy array: copy it to the host with .get().",
            fix="Use d.get(out=host_array, blocking=False) on a stream, then synchronize.",
        )

    # --- copies
    def set(self, arr: Any, stream: "Stream | None" = None) -> None:  # noqa: A003 (CuPy's name)
        self._rec._h2d(self, arr, stream)

    def get(self, stream: "Stream | None" = None, order: str = "C", out: Any = None, blocking: bool = True) -> np.ndarray:
        return self._rec._d2h(self, stream, out, blocking)

    def copy(self) -> "DeviceArray":
        new = self._rec.empty(self.shape, self.dtype)
        self._rec._d2d(new, self)
        return new


@dataclass(frozen=True)
class EventState:
    """An event as it was when its time was read: the operations it follows, its time, the ops issued before it."""

    _frontier: set[int]
    _t: float
    _recorded_after: int
    _token: int = 0


class Event:
    """``cupy.cuda.Event``: marks a point in a stream."""

    def __init__(
        self, rec: "RecordingCuPy", block: bool = False, disable_timing: bool = False, interprocess: bool = False
    ) -> None:
        self._rec, self.disable_timing = rec, disable_timing
        self._frontier: set[int] | None = None  # ops the event waits for; None until recorded
        self._t = 0.0
        self._recorded_after = 0
        self._token = 0  # a fresh token at each record: later work ordered after the event carries it in its marks
        self._marks: frozenset[int] = frozenset()
        rec._events.append(self)

    def record(self, stream: "Stream | None" = None) -> None:
        s = self._rec._stream(stream)
        self._frontier = set(s._position(self._rec))
        self._t = max([self._rec._host_t] + [self._rec.ops[i].end for i in self._frontier])
        self._recorded_after = len(self._rec.ops)
        self._stream = s
        self._token = self._rec._new_token()
        self._marks = s._position_marks(self._rec) | {self._token}
        s._marks = s._marks | {self._token}

    def _snapshot(self) -> "EventState":
        return EventState(set(self._frontier or ()), self._t, self._recorded_after, self._token)

    def synchronize(self) -> None:
        if self._frontier is not None:
            self._rec._host_waits(self._frontier, self._t)
            self._rec._host_marks |= self._marks

    @property
    def done(self) -> bool:
        return self._frontier is None or self._rec._host_t >= self._t

    @property
    def ptr(self) -> int:
        return id(self)


class Stream:
    """``cupy.cuda.Stream``: work on one stream runs in order."""

    def __init__(
        self,
        rec: "RecordingCuPy",
        null: bool = False,
        non_blocking: bool = False,
        ptds: bool = False,
        priority: int = 0,
        *,
        name: str | None = None,
    ) -> None:
        self._rec, self.null, self.non_blocking = rec, null, non_blocking and not null
        self._tail: set[int] = set()
        self._marks: frozenset[int] = frozenset()  # events recorded on this stream or waited for by it
        self.name = name or f"stream {len(rec._streams)}"
        rec._streams.append(self)

    def _position(self, rec: "RecordingCuPy") -> set[int]:
        if self.null:  # the legacy default stream waits for every blocking stream
            return set(self._tail).union(*(s._tail for s in rec._streams if not s.null and not s.non_blocking))
        if not self.non_blocking:
            return set(self._tail) | set(rec.null._tail)
        return set(self._tail)

    def _position_marks(self, rec: "RecordingCuPy") -> frozenset[int]:
        """The events work issued now on this stream is ordered after (the legacy default stream's rules, as
        :meth:`_position`): a non-blocking stream never waits for an event recorded on the null stream."""
        if self.null:
            return self._marks.union(*(s._marks for s in rec._streams if not s.null and not s.non_blocking))
        if not self.non_blocking:
            return self._marks | rec.null._marks
        return self._marks

    def __enter__(self) -> "Stream":
        self._rec._current.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._rec._current.pop()

    def use(self) -> "Stream":
        self._rec._current[0] = self
        return self

    def synchronize(self) -> None:
        pos = self._position(self._rec)
        self._rec._host_waits(pos, max([self._rec.ops[i].end for i in pos], default=0.0))
        self._rec._host_marks |= self._position_marks(self._rec)

    def record(self, event: Event | None = None) -> Event:
        ev = event if event is not None else Event(self._rec)
        ev.record(self)
        return ev

    def wait_event(self, event: Event) -> None:
        if not isinstance(event, Event):
            raise StandInError(f"wait_event needs a cupy.cuda.Event, got {type(event).__name__}.")
        if event._frontier is None:
            return  # CUDA: waiting on an event never recorded returns at once
        self._tail = set(self._tail) | event._frontier
        self._marks = self._marks | event._marks

    @property
    def done(self) -> bool:
        return all(i in self._rec._host_known for i in self._rec._ancestors(self._position(self._rec)))

    @property
    def ptr(self) -> int:
        return 0 if self.null else id(self)

    @property
    def is_non_blocking(self) -> bool:
        """As CuPy's ``Stream.is_non_blocking``: made with ``non_blocking=True`` (not ordered with the null stream)."""
        return self.non_blocking

    def __repr__(self) -> str:
        return f"<stand-in {'null stream' if self.null else self.name}>"


#: Why a statement that asks for ``cp.cuda.Stream(non_blocking=True)`` means it (05.streams, 05.graph).
BLOCKING_STREAM_CAUSE = (
    "make the stream with cp.cuda.Stream(non_blocking=True), as the exercise says. cp.cuda.Stream() (non_blocking="
    "False) makes a blocking stream: the legacy default (null) stream waits for all its work and it waits for all "
    "null-stream work, so any CuPy call made outside `with stream:` (a cp.zeros, a reduction, a library call) "
    "serialises with your pipeline; during a graph capture such a call fails the capture "
    "(cudaErrorStreamCaptureImplicit)."
)


def blocking_stream_problem(streams: Any, label: str, what: str) -> str | None:
    """The sentence for the first of ``streams`` (stand-in streams that carried the work: ``what``) made blocking,
    or None when all are non-blocking (the null stream itself is not counted: work on it has its own message)."""
    for s in streams:
        if not s.null and not s.is_non_blocking:
            return (
                f"{label}: the values are right, but {s.name}, which {what}, is a blocking stream "
                "(cp.cuda.Stream() or non_blocking=False) instead of the non-blocking stream the exercise asks for."
            )
    return None


class _CudaNamespace:
    """What ``cp.cuda`` offers in the stand-in."""

    def __init__(self, rec: "RecordingCuPy") -> None:
        self._rec = rec
        outer = self

        class _Stream(Stream):
            def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False, priority: int = 0) -> None:
                super().__init__(outer._rec, null, non_blocking, ptds, priority)

        class _Event(Event):
            def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
                super().__init__(outer._rec, block, disable_timing, interprocess)

        _Stream.null = rec.null  # type: ignore[attr-defined]
        self.Stream = _Stream
        self.Event = _Event

        class _Device:
            def __init__(self, device: int = 0) -> None:
                self.id = device

            def synchronize(self) -> None:
                outer._rec._host_waits(set(range(len(outer._rec.ops))), max([o.end for o in outer._rec.ops], default=0.0))
                outer._rec._host_marks |= frozenset(range(1, outer._rec._tokens + 1))

        self.Device = _Device
        self.runtime = type("runtime", (), {"deviceSynchronize": staticmethod(lambda: _Device().synchronize())})

    def get_current_stream(self) -> Stream:
        return self._rec._current[-1]

    def get_elapsed_time(self, start_event: Event, end_event: Event) -> float:
        for name, ev in (("start_event", start_event), ("end_event", end_event)):
            if not isinstance(ev, Event):
                raise StandInError(f"get_elapsed_time: {name} must be a cupy.cuda.Event, got {type(ev).__name__}.")
            if ev._frontier is None:
                raise StandInError(
                    f"cudaErrorInvalidResourceHandle: {name} was never recorded.",
                    fix="Record it on the stream first: event.record(stream).",
                )
            if ev.disable_timing:
                raise StandInError(f"cudaErrorInvalidResourceHandle: {name} was created with disable_timing=True.")
            if not ev.done:
                raise StandInError(
                    f"cudaErrorNotReady: {name} has not completed when its time is read.",
                    fix="Call end_event.synchronize() before cupy.cuda.get_elapsed_time(start, end).",
                )
        self._rec.elapsed_reads.append((start_event._snapshot(), end_event._snapshot()))
        return (end_event._t - start_event._t) * 1e3


class RecordingCuPy:
    """The stand-in module: pass it as ``cp`` to a learner's function, then read :attr:`ops` and ask
    :meth:`hazards`, :meth:`makespan`, :meth:`happens_before`.

    ``rates`` gives GB/s per operation kind for the model clock; ``clock="host"`` uses measured host copy times.
    ``pinned`` are the host arrays that count as pinned memory (copies from other host arrays block the host).
    """

    def __init__(
        self, rates: dict[str, float] | None = None, *, clock: str = "model", kernel_cost: Callable[[int], float] | None = None
    ) -> None:
        self.ops: list[Op] = []
        self._streams: list[Stream] = []
        self._events: list[Event] = []
        self.null = Stream(self, null=True, name="null stream")
        self._current: list[Stream] = [self.null]
        self._host_t = 0.0
        self._host_known: set[int] = set()
        self._engine_free: dict[str, float] = {}
        self._rates = rates or {"h2d": 50.0, "d2h": 50.0, "d2d": 4000.0, "kernel": 4000.0}
        self._clock = clock
        self._kernel_cost = kernel_cost
        self.pinned: list[np.ndarray] = []
        self.elapsed_reads: list[tuple[EventState, EventState]] = []
        self.blocking_gets = 0
        self._tokens = 0
        self._host_marks: frozenset[int] = frozenset()  # events the host has seen complete
        self.cuda = _CudaNamespace(self)
        self.float32, self.float64, self.int32 = np.float32, np.float64, np.int32
        self.ndarray = DeviceArray

    # ------------------------------------------------------------------ allocation (no stream work)
    def empty(self, shape: Any, dtype: Any = np.float32) -> DeviceArray:
        shape_t = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        size = int(np.prod(shape_t)) if shape_t else 1
        buf = _Buffer(np.full(size, np.nan, dtype=dtype) if np.dtype(dtype).kind == "f" else np.zeros(size, dtype=dtype))
        return DeviceArray(self, buf, 0, size, shape_t)

    def zeros(self, shape: Any, dtype: Any = np.float32) -> DeviceArray:
        d = self.empty(shape, dtype)
        d._buf.data[:] = 0
        return d

    def empty_like(self, a: Any, dtype: Any = None) -> DeviceArray:
        return self.empty(a.shape, dtype or a.dtype)

    def zeros_like(self, a: Any, dtype: Any = None) -> DeviceArray:
        return self.zeros(a.shape, dtype or a.dtype)

    def asarray(self, a: Any, dtype: Any = None) -> DeviceArray:
        if isinstance(a, DeviceArray):
            return a
        host = np.asarray(a, dtype=dtype)
        d = self.empty(host.shape, host.dtype)
        self._h2d(d, host, None)
        return d

    def copyto(self, dst: DeviceArray, src: DeviceArray) -> None:
        if not isinstance(dst, DeviceArray) or not isinstance(src, DeviceArray):
            raise StandInError("cp.copyto copies between device arrays here; copy host data with d.set(host).")
        self._d2d(dst, src)

    # ------------------------------------------------------------------ recording
    def _new_token(self) -> int:
        self._tokens += 1
        return self._tokens

    def _stream(self, stream: Stream | None) -> Stream:
        if stream is None:
            return self._current[-1]
        if not isinstance(stream, Stream):
            raise StandInError(f"expected a cupy.cuda.Stream, got {type(stream).__name__}.")
        return stream

    def is_pinned(self, host: np.ndarray) -> bool:
        base = host
        while isinstance(base, np.ndarray) and base.base is not None and isinstance(base.base, np.ndarray):
            base = base.base
        return any(base is p or np.shares_memory(host, p) for p in self.pinned)

    def _issue(
        self, kind: str, stream: Stream, nbytes: int, reads: list, writes: list, run: Callable[[], None], label: str
    ) -> Op:
        op = Op(len(self.ops), kind, stream, nbytes, reads, writes, label=label)
        op.deps = set(stream._position(self)) | set(self._host_known)
        op.marks = stream._position_marks(self) | self._host_marks
        op.issue_t = self._host_t
        t0 = time.perf_counter()
        run()
        measured = time.perf_counter() - t0
        if self._clock == "host":
            duration = measured
        elif kind == "kernel" and self._kernel_cost is not None:
            duration = self._kernel_cost(nbytes)
        else:
            duration = nbytes / (self._rates[kind] * 1e9)
        engine = "sm" if kind in ("kernel", "d2d") else kind
        op.start = max([op.issue_t, self._engine_free.get(engine, 0.0)] + [self.ops[d].end for d in op.deps])
        op.end = op.start + duration
        self._engine_free[engine] = op.end
        self.ops.append(op)
        stream._tail = {op.index}
        return op

    def _h2d(self, dst: DeviceArray, host: Any, stream: Stream | None) -> None:
        if isinstance(host, DeviceArray):
            self._d2d(dst, host)
            return
        src = np.asarray(host)
        if src.size != dst.size:
            raise StandInError(f"set(): the host array has {src.size} elements, the device array {dst.size}.")
        s = self._stream(stream)
        op = self._issue(
            "h2d",
            s,
            dst.nbytes,
            [],
            [dst._range()],
            lambda: np.copyto(dst._view(), src.reshape(dst.shape).astype(dst.dtype, copy=False)),
            f"copy host→device of {dst.size} elements on {s!r}",
        )
        op.pinned = self.is_pinned(src)
        if not op.pinned:  # pageable memory: the driver stages it and the call returns when done
            self._host_waits({op.index}, op.end)

    def _d2h(self, src: DeviceArray, stream: Stream | None, out: Any, blocking: bool) -> np.ndarray:
        s = self._stream(stream)
        if out is None:
            host = np.empty(src.shape, src.dtype)
        else:
            host = out
            if not isinstance(host, np.ndarray) or host.size != src.size:
                raise StandInError(f"get(out=...): out must be a host array of {src.size} elements.")
        op = self._issue(
            "d2h",
            s,
            src.nbytes,
            [src._range()],
            [],
            lambda: np.copyto(host.reshape(src.shape), src._view().astype(host.dtype, copy=False)),
            f"copy device→host of {src.size} elements on {s!r}",
        )
        op.host_out = (id(host.base if host.base is not None else host), 0, host.size)
        op.host_array = host  # type: ignore[attr-defined]
        op.pinned = self.is_pinned(host)
        if blocking or not op.pinned:
            if blocking:
                self.blocking_gets += 1
            self._host_waits({op.index}, op.end)
        return host

    def _d2d(self, dst: DeviceArray, src: DeviceArray) -> None:
        if dst.size != src.size:
            raise StandInError(f"copy between device arrays of {src.size} and {dst.size} elements.")
        s = self._current[-1]
        self._issue(
            "d2d",
            s,
            src.nbytes,
            [src._range()],
            [dst._range()],
            lambda: np.copyto(dst._view(), src._view().reshape(dst.shape)),
            f"device copy of {src.size} elements on {s!r}",
        )

    def kernel(self, fn: Callable[[np.ndarray, np.ndarray], None], name: str = "kernel") -> Callable[..., None]:
        """A kernel ``fn(in_view, out_view)`` on NumPy views, callable as ``k(d_in, d_out)`` on the current stream."""

        def launch(d_in: Any, d_out: Any) -> None:
            if not isinstance(d_in, DeviceArray) or not isinstance(d_out, DeviceArray):
                raise StandInError(
                    f"{name}(d_in, d_out) takes two device arrays (cp.empty(...)), got "
                    f"{type(d_in).__name__} and {type(d_out).__name__}.",
                    fix="Copy the chunk to the device first (d.set(host_chunk)) and pass device arrays.",
                )
            if d_in.size != d_out.size:
                raise StandInError(f"{name}: d_in has {d_in.size} elements, d_out {d_out.size}.")
            s = self._current[-1]
            self._issue(
                "kernel",
                s,
                d_in.nbytes + d_out.nbytes,
                [d_in._range()],
                [d_out._range()],
                lambda: fn(d_in._view(), d_out._view()),
                f"{name} on {d_in.size} elements on {s!r}",
            )

        launch.__name__ = name
        return launch

    # ------------------------------------------------------------------ host synchronisation
    def _host_waits(self, ops: set[int], until: float) -> None:
        known = self._ancestors(ops)
        self._host_known |= known
        self._host_t = max(self._host_t, until)
        self._host_marks = self._host_marks.union(*(self.ops[i].marks for i in ops if i < len(self.ops)))

    # ------------------------------------------------------------------ questions
    def _ancestors(self, ops: set[int]) -> set[int]:
        seen: set[int] = set()
        todo = list(ops)
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            todo.extend(self.ops[i].deps)
        return seen

    def happens_before(self, a: int, b: int) -> bool:
        """True when op ``a`` is guaranteed to finish before op ``b`` starts."""
        return a in self._ancestors(set(self.ops[b].deps))

    def hazards(self) -> list[tuple[Op, Op, str]]:
        """Pairs of operations that touch the same device memory (one of them writing) with no order between them."""
        found = []
        for b in self.ops:
            anc = self._ancestors(set(b.deps))
            for a in self.ops[: b.index]:
                if a.index in anc:
                    continue
                for what, xs, ys in (
                    ("writes what the other reads", a.writes, b.reads),
                    ("reads what the other overwrites", a.reads, b.writes),
                    ("writes what the other writes", a.writes, b.writes),
                ):
                    if any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in xs for y in ys):
                        found.append((a, b, what))
                        break
        return found

    def pageable_copies(self) -> list[Op]:
        """Copies whose host side is pageable memory (not one of :attr:`pinned`): on a GPU they are staged through a
        pinned buffer by the driver, run at the pageable rate and never overlap other work."""
        return [o for o in self.ops if o.pinned is False]

    def not_after(self, event: "Event | EventState") -> list[Op]:
        """Operations issued after ``event`` was recorded that the GPU may run before it: on a stream that never
        waited for it (a non-blocking stream and an event on the null stream, say). Its time then misses them."""
        token = event._token
        return [o for o in self.ops[event._recorded_after :] if token not in o.marks]

    def pending_host_writes(self) -> list[Op]:
        """Device→host copies the host has not waited for: their data may not be there yet."""
        return [o for o in self.ops if o.kind == "d2h" and o.index not in self._host_known]

    def makespan(self) -> float:
        """Seconds from the first operation's start to the last one's end, on the stand-in's clock."""
        if not self.ops:
            return 0.0
        return max(o.end for o in self.ops) - min(o.start for o in self.ops)

    def streams_used(self) -> set[Stream]:
        return {o.stream for o in self.ops}

    def covers_all(self, event: "Event | EventState") -> bool:
        """True when ``event`` (recorded) follows every operation issued before it was recorded."""
        if event._frontier is None:
            return False
        anc = self._ancestors(event._frontier)
        return all(o.index in anc for o in self.ops[: event._recorded_after])


# ---------------------------------------------------------------------------------------------- grading helpers


def call_learner(fn: Any, *args: Any, what: str) -> Any:
    """Call a learner's function under the course's time limit; its mistakes come back as ``Failed`` with the reason."""
    from ..sim.errors import KernelTimeout
    from ..sim.limits import python_time_limit
    from .core import Failed

    try:
        with python_time_limit():
            return fn(*args)
    except NotImplementedError:
        raise
    except StandInError as exc:
        raise Failed(f"{what}: {exc.args[0] if exc.args else exc}", cause=exc.fix) from None
    except KernelTimeout as exc:
        raise Failed(f"{what}: {exc}", cause=exc.cause) from None
    except Failed:
        raise
    except LabkitError as exc:  # raised by a labkit function the learner's code called: the learner's call, not the verdict
        where = _labkit_caller(exc)
        raise Failed(
            f"{what} stopped with an error from labkit{where}: {exc.args[0] if exc.args else exc}",
            cause="your function called labkit with arguments it rejects (the sentence above says why) and "
            "did not handle the error. Where a call may legitimately fail (occupancy() for a block "
            "that cannot launch, say), catch labkit.LabkitError around it and treat that case as "
            "not possible.",
        ) from None
    except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
        raise Failed(f"{what} raised {type(exc).__name__}: {exc}") from None


def _labkit_caller(exc: BaseException) -> str:
    """ " (in labkit.occupancy.occupancy)": the labkit function the learner's code called that raised ``exc``."""
    import traceback
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    frames = traceback.extract_tb(exc.__traceback__)
    for k, fr in enumerate(frames):
        try:
            inside = root in Path(fr.filename).resolve().parents
        except (OSError, ValueError):
            inside = False
        if inside and k > 0 and not _inside(frames[k - 1].filename, root):
            mod = Path(fr.filename).resolve().relative_to(root.parent).with_suffix("").as_posix().replace("/", ".")
            return f" (in {mod}.{fr.name}, called by your code)"
    return ""


def _inside(filename: str, root: Any) -> bool:
    from pathlib import Path

    try:
        return root in Path(filename).resolve().parents
    except (OSError, ValueError):
        return False


def describe_hazard(a: Op, b: Op, what: str) -> str:
    """One sentence on a hazard between two recorded operations."""
    return (
        f"operation {a.index + 1} ({a.label}) and operation {b.index + 1} ({b.label}) have no order between them, and "
        f"one {what}: a GPU may run them in either order."
    )
