"""The engine of the simulator: every CUDA thread of a block is a greenlet in the launching thread.

Numba's simulator runs each CUDA thread as an operating-system thread. This engine runs them as greenlets
(the ``greenlet`` package) in the thread that launched the kernel, one at a time, in a deterministic order:

- a thread runs until it reaches ``cuda.syncthreads()``, a warp-level call that must wait for other lanes, or
  its end, and only then does the next one run; nothing else switches, so a launch gives the same result on
  every run and under any machine load;
- the order is the *schedule*: ``"forward"`` (thread 0 first), ``"reverse"`` or ``"shuffle"`` (a fresh
  permutation, drawn from ``seed``, at the start of the block and after every barrier); it orders the blocks of
  the grid the same way (reversed, or shuffled from ``seed``): a kernel that needs block 0 to run first fails;
- a barrier is released when every thread of the block waits at the same one; a barrier that some threads
  skip (one inside an ``if``, or after some threads returned) is reported by :mod:`.blocks`;
- a launch has a limit on the CPU time it takes (the launching thread's CPU clock, so a loaded machine does
  not make a correct kernel time out) and stops on Interrupt (``KeyboardInterrupt``) at once: no thread is
  left running because no thread is started; worker greenlets are reused from one CUDA thread to the next.

The in-kernel ``cuda`` module (:class:`Module`) answers ``threadIdx``, ``blockIdx`` and ``laneid`` from plain
attributes that the scheduler sets at each switch. Memory models (:mod:`.memory`) plug in through
:class:`Hooks`, warp-level calls (:mod:`.warp`) through :data:`collectives`. The engine knows nothing of them.
"""

from __future__ import annotations

import gc
import random
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable, Protocol, Sequence

import greenlet
import numpy as np

from ..hw.occupancy import STATIC_SHARED_PER_BLOCK
from ..learner_frames import stack_traceback
from . import blocks, limits, tracebacks
from .blocks import BARRIER, DONE, RUNNING, WAITING  # noqa: F401 (WAITING: the warp layer parks with it)
from .errors import KernelFault, KernelTimeout, ZeroDivisor, too_much_shared_memory
from .integers import Int32
from .limits import LEARNER_CODE_LIMIT_S, LIKELY_HANG, is_learner_frame, raise_in_thread

SCHEDULES = ("forward", "reverse", "shuffle")


class SimThread:
    """One CUDA thread of the block being run."""

    __slots__ = (
        "threadIdx",
        "blockIdx",
        "thread_id",
        "lane",
        "warp",
        "glet",
        "state",
        "site",
        "value",
        "result",
        "block",
        "key",
        "meets",
        "scheduler",
    )

    def __init__(self, block: "BlockRun", thread_idx: "Dim3", thread_id: int) -> None:
        self.threadIdx = thread_idx  # (one Dim3 per position, shared by the blocks of a launch: LaunchRun.thread_dims)
        self.blockIdx = block.index_dim3
        self.thread_id = thread_id
        self.lane, self.warp = thread_id % 32, thread_id // 32
        self.glet: Any = None
        self.state = RUNNING
        self.site: tuple[Any, int] = (None, 0)  # where it waits at a barrier: (code, line)
        self.value: Any = None  # what it brought to a barrier (syncthreads_count and friends)
        self.result: Any = None  # what the barrier hands back
        self.block = block
        self.key = (block.linear, thread_id)  # unique in the launch: (block, thread)
        self.meets: list[int] | None = None  # masks of the syncwarp meetings it joined since the last barrier
        self.scheduler = block.launch.scheduler  # the greenlet it hands control back to

    def __repr__(self) -> str:
        return f"<thread {tuple(self.threadIdx)} of block {tuple(self.blockIdx)}>"


class Hooks(Protocol):
    """What a memory model supplies to a launch."""

    def block_start(self, block: "BlockRun") -> None: ...

    def barrier(self, block: "BlockRun") -> None: ...

    # (optional) ``switched``: None, or a function the engine calls with each thread that hands control back


class Collectives(Protocol):
    """What the warp layer supplies: it is told of exits and asked what to do when no thread can run."""

    def exited(self, thread: SimThread) -> None: ...

    def idle(self, block: "BlockRun") -> bool: ...  # True when it made a thread runnable

    def deadlock(self, block: "BlockRun") -> Exception | None: ...


collectives: Collectives | None = None  # set by labkit.sim.warp when it is installed

current: SimThread | None = None  # the thread running now (None outside a launch)
debug_launch = False  # the launch running now is of a debug=True kernel (set by labkit.sim.launch)
launch_active = False  # True while a launch runs (the Python-answer time limit does not count it)


class BlockRun:
    """The state of one block while it runs: its threads, the runnable queue, the schedule."""

    def __init__(self, run: "LaunchRun", index: tuple[int, int, int]) -> None:
        self.launch = run
        self.index = index
        self.index_dim3 = Dim3(*index)
        gx, gy, _ = run.grid
        self.linear = index[0] + gx * (index[1] + gy * index[2])
        self.size = run.threads_per_block
        dims = run.thread_dims
        self.threads: list[SimThread] = [SimThread(self, dims[k], k) for k in range(self.size)]
        self.runnable: deque[SimThread] = deque()
        self.warp_state: Any = None  # owned by the warp layer
        self.barriers = 0

    def ordered(self, threads: Iterable[SimThread] | None = None) -> deque[SimThread]:
        """``threads`` (default: all the block's, in order) in the launch's schedule order."""
        ts = list(self.threads) if threads is None else sorted(threads, key=lambda t: t.thread_id)
        schedule = self.launch.schedule
        if schedule == "reverse":
            ts.reverse()
        elif schedule == "shuffle":
            self.launch.rng.shuffle(ts)
        return deque(ts)

    def resume(self, thread: SimThread) -> None:
        """Make a waiting thread runnable again (after the threads already queued)."""
        thread.state = RUNNING
        self.runnable.append(thread)


class Dim3:
    """``threadIdx``, ``blockIdx``: x, y and z (32-bit integers, as Numba types them on a GPU:
    :class:`~labkit.sim.integers.Int32`), iterable as (x, y, z); ``print(cuda.threadIdx)`` shows ``(1, 0, 0)``
    as Numba's simulator does."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int, y: int, z: int) -> None:
        for name, value in (("x", x), ("y", y), ("z", z)):
            object.__setattr__(self, name, Int32(value))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"cuda.threadIdx and cuda.blockIdx are read-only (the kernel assigned .{name}); "
            "copy the value into a variable of your own and change that"
        )

    def __iter__(self) -> Any:
        return iter((self.x, self.y, self.z))

    def __str__(self) -> str:
        return f"({self.x}, {self.y}, {self.z})"

    def __repr__(self) -> str:
        return f"Dim3({self.x}, {self.y}, {self.z})"


_module_class: type | None = None


def Module(grid: tuple[int, int, int], block: tuple[int, int, int], dynshared_size: int) -> Any:  # noqa: N802
    """The in-kernel ``cuda`` module of one launch (Numba's fake module, with per-thread values as plain
    attributes that the scheduler sets). Built on first use, so that importing this module imports no Numba."""
    global _module_class
    if _module_class is None:
        from numba.cuda.simulator.kernelapi import FakeCUDAModule

        _module_class = type("Module", (_ModuleMixin, FakeCUDAModule), {"threadIdx": None, "blockIdx": None, "laneid": 0})
    module = _module_class(grid, block, dynshared_size)
    module._shared = SharedArrays(dynshared_size)
    module._cg = _Cooperative()
    return module


class _ModuleMixin:
    """What the engine's in-kernel ``cuda`` does differently from Numba's: the index arithmetic and barriers."""

    blockDim: Any
    blockIdx: Any
    threadIdx: Any

    def grid(self, n: int) -> Any:
        bd, bi, ti = self.blockDim, self.blockIdx, self.threadIdx
        x = bi.x * bd.x + ti.x
        if n == 1:
            return x
        if n == 2:
            return x, bi.y * bd.y + ti.y
        if n == 3:
            return x, bi.y * bd.y + ti.y, bi.z * bd.z + ti.z
        raise RuntimeError(f"Global ID has 1-3 dimensions. {n} requested")

    def syncthreads(self) -> None:
        """``cuda.syncthreads()``: :func:`barrier` written out, as kernels call it in their inner loops."""
        t = current
        if t is None:
            raise RuntimeError("cuda.syncthreads() outside a kernel launch")
        frame = sys._getframe(1)
        t.site = (frame.f_code, frame.f_lineno)
        t.value = None
        t.state = BARRIER
        t.scheduler.switch()

    def syncthreads_count(self, value: Any) -> int:
        return int(sum(1 for v in barrier(sys._getframe(1), value) if v))

    def syncthreads_and(self, value: Any) -> int:
        return int(all(barrier(sys._getframe(1), value)))

    def syncthreads_or(self, value: Any) -> int:
        return int(any(barrier(sys._getframe(1), value)))


class _GridGroup:
    def sync(self) -> None:  # a cooperative launch of one block: a grid sync is the block's barrier
        barrier(sys._getframe(1))


class _Cooperative:
    def this_grid(self) -> _GridGroup:
        return _GridGroup()


class SharedArrays:
    """``cuda.shared.array``: one array per allocating call and block (a fresh block gets fresh arrays; a call in a
    loop gives the same array each time)."""

    def __init__(self, dynshared_size: int) -> None:
        self._dynshared_size = dynshared_size
        self._dynshared = np.zeros(dynshared_size, dtype=np.byte)
        self.allocations: dict[tuple[Any, int], Any] = {}
        self.static_bytes = 0  # this block's static shared arrays
        self.factory: Callable[[Any, Any, Any], Any] | None = None  # a memory model's: (shape, dtype, frame) -> array

    def reset(self) -> None:
        """A new block: new shared arrays (their contents are undefined, as on a GPU)."""
        self.allocations = {}
        self.static_bytes = 0
        self._dynshared = np.zeros(self._dynshared_size, dtype=np.byte)

    def array(self, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        if not isinstance(dtype, np.dtype):
            dtype = _as_dtype(dtype)
        if shape == 0:  # dynamic shared memory: one buffer for every such array
            return np.frombuffer(self._dynshared.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
        frame = sys._getframe(1)
        caller = (frame.f_code, frame.f_lasti)  # (the call itself: two allocations on one line are two arrays)
        res = self.allocations.get(caller)
        if res is None:
            res = self.factory(shape, dtype, frame) if self.factory else np.empty(shape, dtype)
            self.allocations[caller] = res
            self.static_bytes += int(np.prod(shape)) * dtype.itemsize
            if self.static_bytes > STATIC_SHARED_PER_BLOCK:
                raise too_much_shared_memory(self.static_bytes, STATIC_SHARED_PER_BLOCK)
        return res


_dtypes: dict[Any, np.dtype] = {}


def _as_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype for what a kernel passes as one (``np.float32``, or a Numba type such as ``float32``)."""
    found = _dtypes.get(dtype)
    if found is None:
        from numba.cuda import types as nbtypes
        from numba.cuda.np import numpy_support

        if isinstance(dtype, (type, str, np.dtype)):  # (np.float32, "float32": no look through Numba's abstract
            found = np.dtype(dtype)  # types, which costs a millisecond the first time in a process)
        else:
            found = numpy_support.as_dtype(dtype) if isinstance(dtype, nbtypes.Type) else np.dtype(dtype)
        _dtypes[dtype] = found
    return found


def barrier(frame: Any, value: Any = None) -> list[Any]:
    """The calling thread waits at a block barrier; returns the values every thread brought (in thread order).

    ``frame`` is the caller's: its code and line say which barrier it is."""
    t = current
    if t is None:
        raise RuntimeError("cuda.syncthreads() outside a kernel launch")
    t.site = (frame.f_code, frame.f_lineno)
    t.value = value
    park(t, BARRIER)
    return t.result


def park(thread: SimThread, state: int) -> None:
    """Suspend the calling thread (``state``: BARRIER or WAITING) until the scheduler resumes it (and sets
    :data:`current` to it again)."""
    thread.state = state
    thread.scheduler.switch()


class LaunchRun:
    """One launch: its shape, schedule and time limit."""

    def __init__(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], schedule: str, seed: int | None, limit_s: float
    ) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        self.grid, self.block = grid, block
        self.threads_per_block = int(block[0] * block[1] * block[2])
        bx, by, _ = block
        self._dims: list[Dim3] | None = None
        self._bxy = (bx, by)
        self.schedule = schedule
        self.seed = seed
        self.rng = random.Random(seed)
        self.limit_s = limit_s
        self.wall_limit_s = wall_ceiling(limit_s)
        self.scheduler: Any = None
        self.started = time.monotonic()  # the launch's wall clock and the launching thread's CPU clock at its start
        self.cpu_started = time.thread_time()
        self.blocks_total = 1
        self.blocks_done = 0
        self.finished = 0  # threads that have finished (the watchdog reads it: a launch that finishes none is stalled)

    @property
    def thread_dims(self) -> list[Dim3]:
        """``threadIdx`` of each thread of a block, by linear thread index: built once, shared by every block (a
        kernel reads its parts, never assigns them)."""
        if self._dims is None:
            bx, by = self._bxy
            self._dims = [Dim3(k % bx, (k // bx) % by, k // (bx * by)) for k in range(self.threads_per_block)]
        return self._dims


def wall_ceiling(limit_s: float) -> float:
    """The wall time after which a *stalled* launch with a CPU-time limit of ``limit_s`` stops all the same (see
    :class:`_Watchdog`): 3 s more (23 s for the default 20, so that a check's message comes within 25 s), or
    15 % more for long limits. On a busy machine CPU
    time goes slowly and a learner waits in wall time; a launch that keeps finishing threads is never stopped by it."""
    return max(limit_s + 3.0, 1.15 * limit_s)


def describe_schedule(schedule: str, seed: int | None) -> str:
    """How to replay a run: ``schedule 'shuffle', seed 12`` (the words a failure message carries)."""
    return f"schedule {schedule!r}" + (f", seed {seed}" if schedule == "shuffle" else "")


# ----------------------------------------------------------------------------- the time limit
class _Watchdog:
    """Stops a launch that runs past its limit even when it never returns to the scheduler (a loop that spins
    without a barrier): an asynchronous exception, raised only while the launching thread runs learner code, which
    the scheduler turns into a :class:`KernelTimeout`.

    Two rules: the launch's CPU time passes its limit (so machine load never stops a correct launch), or its wall time
    passes :func:`wall_ceiling` while it is *stalled*: no thread of it has finished during its last
    :data:`STALL_CPU_S` seconds of CPU time (a quarter of the limit if less; a hung thread, however busy the machine; a correct launch finishes
    threads all the time, so a busy machine only slows it down)."""

    POLL_S = 0.05
    STALL_CPU_S = 0.25

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._job: tuple[int, Any, float, float, type, Any] | None = None
        self._fired = False
        self._thread: threading.Thread | None = None

    def arm(self, limit_s: float, exc: type[BaseException], run: Any = None) -> None:
        ident = threading.get_ident()
        try:
            clock = time.pthread_getcpuclockid(ident)
        except (AttributeError, OSError):  # no per-thread CPU clock (macOS): wall time instead
            clock = None
        start = time.clock_gettime(clock) if clock is not None else time.monotonic()
        wall_end = time.monotonic() + wall_ceiling(limit_s)  # a busy machine: the learner waits in wall time
        with self._lock:
            self._job = (ident, clock, start + limit_s, wall_end, exc, run)
            self._fired = False
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="labkit-sim-watchdog", daemon=True)
                self._thread.start()
            self._wake.notify()

    def disarm(self) -> None:
        with self._lock:
            job, self._job = self._job, None
            if self._fired and job is not None:
                raise_in_thread(job[0], None)  # cancel an exception not yet delivered
            self._fired = False

    def _run(self) -> None:
        seen: tuple[Any, int, float] = (None, -1, 0.0)  # (job, threads finished, CPU time when that count changed)
        with self._lock:
            while True:
                if self._job is None or self._fired:
                    self._wake.wait()
                    continue
                job = self._job
                ident, clock, end, wall_end, exc, run = job
                used = time.clock_gettime(clock) if clock is not None else time.monotonic()
                finished = run.finished if run is not None else 0
                if seen[0] is not job or seen[1] != finished:
                    seen = (job, finished, used)
                stalled = used - seen[2] >= min(self.STALL_CPU_S, run.limit_s / 4 if run is not None else 0.0)
                if used > end or (time.monotonic() > wall_end and stalled):
                    frame = sys._current_frames().get(ident)
                    if frame is not None and is_learner_frame(frame):
                        self._fired = True
                        raise_in_thread(ident, exc)
                        continue
                self._wake.wait(self.POLL_S)


_watchdog = _Watchdog()


_timeout_classes: dict[float, type[KernelTimeout]] = {}


def _timeout_class(seconds: float) -> type[KernelTimeout]:
    """The error a launch with a limit of ``seconds`` raises past it (one class per limit: making a class costs
    a tenth of a millisecond, a small launch a few)."""
    found = _timeout_classes.get(seconds)
    if found is None:
        found = _timeout_classes[seconds] = _make_timeout_class(seconds)
    return found


def _make_timeout_class(seconds: float) -> type[KernelTimeout]:
    class LaunchTimeLimit(KernelTimeout):
        def __init__(self) -> None:
            super().__init__(f"the kernel did not finish within {seconds:g} s of CPU time in the simulator", cause=LIKELY_HANG)

    LaunchTimeLimit.__name__ = LaunchTimeLimit.__qualname__ = "KernelTimeout"
    return LaunchTimeLimit


# ----------------------------------------------------------------------------- running a launch
def run(
    fn: Callable[..., Any],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    *,
    module: Any,
    hooks: Hooks | None = None,
    schedule: str = "forward",
    seed: int | None = None,
    blocks_to_run: Iterable[tuple[int, int, int]] | None = None,
    on_block_error: Callable[[tuple[int, int, int], Exception], bool] | None = None,
    time_limit_s: float | None = None,
) -> None:
    """Run ``fn(*args)`` as every thread of every block of the launch, block after block.

    ``module`` is the in-kernel ``cuda`` (already swapped into the kernel's globals); ``hooks`` a memory model;
    ``blocks_to_run`` the blocks to run (default: all, in order); ``on_block_error(block, exc)`` may return True
    to go on with the next block after an error of one (a trace records it). Raises the first thread's error,
    :class:`~labkit.sim.errors.KernelTimeout` past the limit, ``KeyboardInterrupt`` on Interrupt.
    """
    global launch_active
    limit = float(time_limit_s or LEARNER_CODE_LIMIT_S)
    run_ = LaunchRun(grid, block, schedule, seed, limit)
    run_.scheduler = greenlet.getcurrent()
    timeout = _timeout_class(limit)
    cpu_end = run_.cpu_started + limit
    points = (
        list(blocks_to_run)
        if blocks_to_run is not None
        else [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    )
    if blocks_to_run is None and schedule == "reverse":  # the schedule orders the blocks too: no kernel may rely on
        points.reverse()  # block 0 running first (a GPU gives no order)
    elif blocks_to_run is None and schedule == "shuffle":
        random.Random(None if seed is None else seed ^ 0x5EED).shuffle(points)  # apart from the threads' own stream
    run_.blocks_total = len(points)
    outer = launch_active
    launch_active = True
    limits.launches_running += 1
    collecting = gc.isenabled()
    gc.disable()  # a launch makes many small objects and few cycles: collect after it, not during it
    _watchdog.arm(limit, timeout, run_)
    try:
        for point in points:
            blk = BlockRun(run_, point)
            try:
                _run_block(fn, args, blk, module, hooks, cpu_end, timeout)
                run_.blocks_done += 1
            except KernelTimeout:
                raise
            except Exception as exc:  # noqa: BLE001 - the caller decides
                if on_block_error is None or not on_block_error(point, exc):
                    raise
    except (Exception, KeyboardInterrupt) as exc:
        tracebacks.hide_engine(exc)  # in IPython the red box ends at the learner's line
        raise
    finally:
        _watchdog.disarm()
        if collecting:
            gc.enable()
            if not outer:  # what the launch left (blocks, threads, their frames) goes now, not inside the next one
                gc.collect(1)
        limits.launches_running -= 1
        launch_active = outer


_FINISHED = object()  # what a worker hands the scheduler when its thread has ended
_pools = threading.local()  # idle worker greenlets of this OS thread


def _work(fn: Callable[..., Any], args: Sequence[Any]) -> None:
    """A worker greenlet: runs one CUDA thread after another (starting a greenlet costs far more than a switch)."""
    while True:
        fn(*args)
        fn, args = greenlet.getcurrent().parent.switch(_FINISHED)


def _idle_workers() -> list[Any]:
    pool = getattr(_pools, "idle", None)
    if pool is None:
        pool = _pools.idle = []
    return pool


def _run_block(
    fn: Callable[..., Any],
    args: Sequence[Any],
    blk: BlockRun,
    module: Any,
    hooks: Hooks | None,
    cpu_end: float,
    timeout: type[KernelTimeout],
) -> None:
    global current
    module._shared.reset()
    module.blockIdx = blk.index_dim3
    if hooks is not None:
        hooks.block_start(blk)
    scheduler = blk.launch.scheduler
    run_ = blk.launch
    idle = _idle_workers()
    blk.runnable = blk.ordered()
    live = blk.size
    coll = collectives
    switches = 0
    switched = getattr(hooks, "switched", None)  # (a recording model: told which thread just handed control back)
    try:
        while True:
            queue = blk.runnable
            while queue:
                t = queue.popleft()
                current = t
                module.threadIdx, module.laneid = t.threadIdx, t.lane
                try:
                    g = t.glet
                    if g is None:  # the thread starts, on an idle worker or a new one
                        if idle:
                            g = idle.pop()
                            if g.parent is not scheduler:
                                g.parent = scheduler
                        else:
                            g = greenlet.greenlet(_work, parent=scheduler)
                        t.glet = g
                        done = g.switch(fn, args)
                    else:
                        done = g.switch()
                except timeout as stopped:
                    raise _timed_out(blk, t, stopped.__traceback__) from None
                except BaseException as exc:
                    if isinstance(exc, Exception):
                        positioned = thread_position(exc, t)
                        if positioned is not exc:
                            raise positioned from None
                    elif isinstance(exc, KeyboardInterrupt):
                        _interrupted(exc, blk, t)
                    raise
                if switched is not None:
                    switched(t)
                if done is _FINISHED:
                    t.state = DONE
                    t.glet = None
                    idle.append(g)
                    live -= 1
                    run_.finished += 1
                    if coll is not None:
                        coll.exited(t)
                switches += 1
                if not switches & 63 and time.thread_time() > cpu_end:
                    raise _timed_out(blk, None, None)
            if not live:
                return
            if time.thread_time() > cpu_end:
                raise _timed_out(blk, None, None)
            if coll is not None and coll.idle(blk):
                continue
            waiting = [t for t in blk.threads if t.state == BARRIER]
            if len(waiting) == live and live == blk.size and len({t.site for t in waiting}) == 1:
                _release(blk, hooks)
                continue
            problem = coll.deadlock(blk) if coll is not None else None
            raise problem or blocks.divergent_report(blk)
    except KeyboardInterrupt as exc:  # Interrupt while the scheduler ran (one during a step is named above)
        _interrupted(exc, blk, None)
        raise
    finally:
        current = None
        module.threadIdx = None
        _stop(blk)


def _innermost(tb: Any) -> tuple[Any, int]:
    """The innermost learner frame of the traceback ``tb`` and its line (``(None, 0)`` when it has none)."""
    frame, line = None, 0
    while tb is not None:
        if is_learner_frame(tb.tb_frame):
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    return frame, line


def _suspended(blk: BlockRun, states: tuple[int, ...] = (RUNNING, WAITING)) -> tuple[SimThread | None, Any]:
    """The first suspended thread of ``blk`` in one of ``states`` (by default: still computing) that is in learner
    code, with its learner frames as a traceback (:func:`labkit.learner_frames.stack_traceback`); ``(None, None)``
    when there is none."""
    for t in blk.threads:
        g = t.glet
        if g is not None and t.state in states:
            tb = stack_traceback(getattr(g, "gr_frame", None))
            if tb is not None:
                return t, tb
    return None, None


def _stuck(blk: BlockRun, thread: SimThread | None, tb: Any) -> blocks.Stuck | None:
    """Where the launch was when it was stopped: the innermost learner frame of ``thread`` in the traceback ``tb`` of
    the exception that stopped it, else that of the first suspended thread of ``blk`` that is still computing."""
    frame, line = _innermost(tb)
    if frame is None:
        thread, tb = _suspended(blk)
        frame, line = _innermost(tb)
    if frame is None or thread is None:
        return None
    return blocks.Stuck(tuple(thread.threadIdx), tuple(blk.index), frame.f_code.co_filename, line, frame.f_code.co_name)


def _where_stopped(blk: BlockRun, thread: SimThread | None, tb: Any) -> tuple[blocks.Stuck | None, Any]:
    """Where a launch that its time limit or Interrupt stopped was (:func:`_stuck`), and the traceback its red box
    shows: the stuck thread's learner frames, so that the box shows the kernel's line as written. They are ``tb``'s
    (the exception that stopped the launch) when it passed through learner code; else, stopped between two steps, a
    suspended thread's that is still computing, else one's waiting at a barrier (:func:`_suspended`), whose line the
    words name too; else ``tb``."""
    if _innermost(tb)[0] is not None:
        return _stuck(blk, thread, tb), tb
    thread, frames = _suspended(blk)
    if frames is None:  # every suspended thread waits at a barrier (the launch was between two of its steps)
        thread, frames = _suspended(blk, (BARRIER,))
    return _stuck(blk, thread, frames), tb if frames is None else frames


def _timed_out(blk: BlockRun, thread: SimThread | None, tb: Any) -> KernelTimeout:
    """The launch ran past its limit while ``blk`` ran: :func:`labkit.sim.blocks.timeout_report`, with where the stuck
    thread was and the traceback of its frames (:func:`_where_stopped`: the kernel's line as written, as an
    Interrupt's box shows it), and the launch's progress."""
    stuck, tb = _where_stopped(blk, thread, tb)
    run_ = blk.launch
    return blocks.timeout_report(
        blk,
        run_.limit_s,
        stuck=stuck,
        cpu_s=time.thread_time() - run_.cpu_started,
        wall_s=time.monotonic() - run_.started,
        wall_limit_s=run_.wall_limit_s,
        blocks_done=run_.blocks_done,
        blocks_total=run_.blocks_total,
    ).with_traceback(tb)


def _interrupted(exc: KeyboardInterrupt, blk: BlockRun, thread: SimThread | None) -> None:
    """Interrupt stopped the launch: one line says after how long and where (``stopped by Interrupt after 4.1 s:
    thread (0, 0, 0) of block (0, 0, 0) was at line 4 of saxpy: ...``), and the traceback holds that thread's frames
    (:func:`_where_stopped`), also when Interrupt came while the scheduler ran, between two steps of the kernel."""
    if exc.args:
        return
    stuck, tb = _where_stopped(blk, thread, exc.__traceback__)
    where = stuck.words() if stuck is not None else f"block {tuple(blk.index)} was running"
    exc.args = (f"stopped by Interrupt after {time.monotonic() - blk.launch.started:.1f} s: {where}",)
    exc.with_traceback(tb)


class DivisionByZero(ZeroDivisionError, FloatingPointError):
    """A division by zero in a ``debug=True`` kernel: a GPU raises ``ZeroDivisionError`` (Python's error model),
    Numba's simulator ``FloatingPointError`` (NumPy's); this is both."""


def thread_position(exc: Exception, t: SimThread) -> Exception:
    """``exc`` raised by thread ``t``, with its position first in its message as Numba's simulator and a GPU with
    ``debug=True`` write it (``tid=[8, 0, 0] ctaid=[0, 0, 0]: index 8 is out of bounds ...``) and as
    ``exc.sim_thread`` ((thread, block) for labkit's own explanation). A NumPy division by zero in a debug kernel
    becomes a :class:`DivisionByZero`. Exceptions of labkit's own model (races, barriers: they name their threads
    in words) keep their message."""
    where = (tuple(t.threadIdx), tuple(t.blockIdx))
    prefix = f"tid={list(where[0])} ctaid={list(where[1])}"
    if isinstance(exc, ZeroDivisionError) and not isinstance(exc, (DivisionByZero, KernelFault)) and not debug_launch:
        new = ZeroDivisor(f"{prefix}: {_division_words(str(exc))}", cause=DIVISION_CAUSE)
        new.__traceback__ = exc.__traceback__
        exc = new
    if isinstance(exc, FloatingPointError) and not isinstance(exc, DivisionByZero) and "divide by zero" in str(exc):
        new = DivisionByZero(f"{prefix}: division by zero")
        new.__traceback__ = exc.__traceback__
        exc = new
    elif not isinstance(exc, (KernelFault, OSError)) and not getattr(exc, "sim_thread", None):
        args = exc.args
        if not args:
            exc.args = (prefix,)
        elif len(args) == 1 and isinstance(args[0], str):
            exc.args = (f"{prefix}: {args[0]}",)
    try:
        exc.sim_thread = where  # type: ignore[attr-defined]
    except AttributeError:  # (an exception type with __slots__: it keeps its message)
        pass
    return exc


DIVISION_CAUSE = (
    "a divisor that can be zero: test it first (`if d != 0:`), or give the element a value that is right whatever "
    "the divisor; launch the kernel with @cuda.jit(debug=True) to have a GPU raise ZeroDivisionError too."
)


def _division_words(python_words: str) -> str:
    """What a division by zero gives on a GPU, for Python's message of it (``integer division or modulo by zero``,
    ``float division by zero``, ``division by zero`` for ``int / int``)."""
    if "float" in python_words or python_words == "division by zero":
        return (
            f"{python_words} (Python's ZeroDivisionError): a GPU raises nothing here, a float division by zero "
            "gives inf or nan, so the simulator stops rather than go on with a value it did not compute"
        )
    return (
        f"{python_words} (Python's ZeroDivisionError): a GPU raises nothing here and gives an undefined value (a "
        "kernel Numba compiles gives 0), so the simulator stops rather than go on with a number a GPU may not give"
    )


def _release(blk: BlockRun, hooks: Hooks | None) -> None:
    """Every thread waits at the same barrier: make what they wrote visible, hand back the values, go on."""
    blk.barriers += 1
    if hooks is not None:
        hooks.barrier(blk)
    values = [t.value for t in blk.threads]
    for t in blk.threads:
        t.result = values
        t.state = RUNNING
    blk.runnable = blk.ordered()


def _stop(blk: BlockRun) -> None:
    """Unwind the workers of threads that are still suspended (after an error, a timeout or an interrupt): their
    greenlets end, and are not used again."""
    for t in blk.threads:
        g = t.glet
        if g is not None and g and not g.dead:
            try:
                g.throw(greenlet.GreenletExit)
            except BaseException:  # noqa: BLE001 - a thread's own clean-up failed: it is gone all the same
                pass
        t.glet = None
