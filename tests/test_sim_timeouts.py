"""A launch that never ends explains itself, fast: the wall-time ceiling beside the CPU-time rule, the stuck line, a
launch too large rather than stuck, the tip for direct launches, Interrupt's summary, tracebacks that end at the
learner's line, and a trace (``labkit.show``) of an endless kernel that stops after a capped number of accesses."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from typing import Iterator

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import engine, lockstep, tracebacks  # noqa: E402

trace_module = sys.modules["labkit.sim.trace"]


@cuda.jit
def saxpy_stuck(a, x, y, out):  # the index never advances
    i = cuda.grid(1)
    while i < x.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def spin(a):
    i = 0
    while i >= 0:
        i = (i + 1) % 7


@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0


BURN = "import os, time\n{pin}end = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


@contextlib.contextmanager
def _load_of(n: int) -> Iterator[None]:
    """``n`` busy processes beside the calling thread. Where the OS lets a thread choose its cores, the thread and
    the burners share one core (its load is n + 1 on a machine of any size, and the other cores stay free for the
    rest of the suite); elsewhere the burners run on any core, as before."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    one = min(cores) if cores else None
    pin = f"os.sched_setaffinity(0, {{{one}}})\n" if one is not None else ""
    procs = [subprocess.Popen([sys.executable, "-c", BURN.format(pin=pin)]) for _ in range(n)]
    try:
        if one is not None:
            os.sched_setaffinity(0, {one})  # pid 0: this thread only
        time.sleep(0.5)
        yield
    finally:
        if cores:
            os.sched_setaffinity(0, cores)
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def test_wall_ceiling_is_finite_and_generous() -> None:
    assert engine.wall_ceiling(20) == 23 and engine.wall_ceiling(1) == 4 and engine.wall_ceiling(120) == 138


def test_hung_launch_stops_at_the_wall_ceiling_under_load() -> None:
    """At load 9 on its core a hung launch with a 2 s CPU limit stops at its 5 s wall ceiling: the CPU rule alone
    would take 18 s or more of wall time there (a ninth of a core at most); the message says the machine is busy,
    which only the wall rule says."""
    with _load_of(8):
        start = time.monotonic()
        with pytest.raises(sim.KernelTimeout) as info, sim.time_limit(2.0):
            spin[1, 32](np.zeros(1))
        wall = time.monotonic() - start
    assert wall < engine.wall_ceiling(2.0) + 3.0
    assert "the machine is busy" in str(info.value) and "while i >= 0" in str(info.value)


def test_stuck_line_cause_and_tip_of_a_direct_launch() -> None:
    x = np.ones(100, np.float32)
    with pytest.raises(sim.KernelTimeout) as info, sim.time_limit(0.5):
        saxpy_stuck[1, 32](np.float32(2), x, x, np.zeros(100, np.float32))
    text = str(info.value)
    assert "thread (0, 0, 0) of block (0, 0, 0) was at line" in text and "saxpy_stuck" in text
    assert "Likely cause: a loop whose condition never becomes false" in text
    assert "labkit.sim.time_limit(" in text
    assert info.value.too_large is False


def test_a_check_launch_gets_no_tip() -> None:
    """A launch that names its limit (a check's) keeps the plain message: its cause is printed by the check."""
    x = np.ones(100, np.float32)
    with pytest.raises(sim.KernelTimeout) as info:
        sim.launch_strict(saxpy_stuck, 1, 32, np.float32(2), x, x, np.zeros(100, np.float32), time_limit_s=0.5)
    assert "labkit.sim.time_limit" not in str(info.value) and "Likely cause" not in str(info.value)
    assert "was at line" in str(info.value)


def test_launch_too_large_is_not_called_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockstep, "ENABLED", False)  # (the engine's own behaviour: lockstep would run it)
    a = np.zeros(8000 * 256)  # about 3.5 s of CPU: past a 1 s limit with many blocks done (with 0.3 s, the whole
    # suite's load once made the first block alone outlast the limit, before any block had finished)
    with pytest.raises(sim.KernelTimeout) as info, sim.time_limit(1.0):
        add_one[8000, 256](a)
    assert info.value.too_large
    assert "too large for the simulator" in str(info.value) and "not a hang" in str(info.value)


def test_correct_launch_under_load_is_not_stopped_by_the_wall_ceiling() -> None:
    """A correct launch keeps finishing threads: at load 8 it runs past its wall ceiling and is not stopped, as
    long as its CPU time stays within the limit (the rule for correct answers)."""
    probe = np.zeros(2048)
    cpu = time.thread_time()
    add_one[8, 256](probe)
    per_element = (time.thread_time() - cpu) / probe.size
    a = np.zeros(int(0.6 / per_element) // 256 * 256)
    with _load_of(8):
        with sim.time_limit(1.0):  # wall ceiling 4 s; 0.6 s of CPU at load 9 on one core takes longer than that
            add_one[a.size // 256, 256](a)
    assert (a == 1).all()


def test_interrupt_summary_and_learner_only_traceback() -> None:
    """KeyboardInterrupt in a launch says after how long and where; its rendered traceback has no labkit frame."""
    import _thread
    import threading

    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            spin[1, 32](np.zeros(1))
    finally:
        timer.cancel()
    exc = info.value
    assert str(exc).startswith("stopped by Interrupt after ") and "was at line" in str(exc)
    assert tracebacks.has_hidden_engine(exc)
    shown = "".join(tracebacks.render(exc))
    assert "spin" in shown and "while i >= 0" in shown
    assert "labkit" not in shown.replace("labkit.sim", "") or "src/labkit" not in shown
    assert "engine.py" not in shown and "greenlet" not in shown


def test_traceback_of_an_error_in_a_kernel_ends_at_the_kernel_line() -> None:
    @cuda.jit
    def past_end(a):
        a[cuda.threadIdx.x + 1] = 1.0

    with pytest.raises(IndexError) as info:
        past_end[1, 4](np.zeros(4))
    shown = "".join(tracebacks.render(info.value))
    lines = [ln for ln in shown.splitlines() if ln.strip()]
    assert "a[cuda.threadIdx.x + 1] = 1.0" in shown and "engine.py" not in shown and "launch.py" not in shown
    assert lines[-1].startswith("IndexError: tid=[3, 0, 0] ctaid=[0, 0, 0]")


def test_trace_of_an_endless_kernel_stops_at_the_access_cap_with_the_finding() -> None:
    x = np.ones(130, np.float32)
    start = time.monotonic()
    t = sim.trace(saxpy_stuck, 3, 64, np.float32(2), x, x, np.zeros(130, np.float32))
    assert time.monotonic() - start < 10
    assert len(t.columns["flat"]) <= trace_module.MAX_THREAD_ACCESSES + 1
    finding = t.errors[0]
    assert finding.startswith("thread (0, 0, 0) of block (0, 0, 0)")
    assert re.search(r"read x\[0\] [\d,]+ times", finding) and "at line" in finding and "never ends" in finding
    assert t.faults and t.faults[0].thread == (0, 0, 0)


def test_trace_without_memory_accesses_stops_at_its_own_short_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace given no limit stops at TRACE_LIMIT_S (a few seconds); read when the trace starts, so the test waits
    out 1 s of it rather than the full 3."""
    assert trace_module.TRACE_LIMIT_S <= 3.0
    monkeypatch.setattr(trace_module, "TRACE_LIMIT_S", 1.0)
    t = sim.trace(spin, 1, 32, np.zeros(1))
    assert t.errors and "did not finish" in t.errors[0] and "while i >= 0" in t.errors[0]
    assert t.seconds < engine.wall_ceiling(1.0) + 2
    # stopped by this limit: its CPU time, or its wall ceiling on a busy machine
    within = ("within 1 s of CPU time", f"within {engine.wall_ceiling(1.0):g} s (the machine is busy")
    assert any(w in t.errors[0] for w in within), t.errors[0]
