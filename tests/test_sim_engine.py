"""The simulator's engine: every launch bounded and interruptible, deterministic schedules, no false warp reports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.errors import LabkitError  # noqa: E402
from labkit.sim import engine, lockstep  # noqa: E402


@cuda.jit
def endless(a):
    i = 0
    while i >= 0:  # never ends, calls nothing
        i = (i + 1) % 7


@cuda.jit
def endless_after_barrier(a):
    cuda.syncthreads()
    i = 0
    while i >= 0:
        i = (i + 1) % 7


@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def _after(seconds: float, action) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _still_works() -> None:
    a = np.zeros(100, np.float32)
    add_one[2, 64](a)
    assert (a == 1).all()
    assert not [t for t in threading.enumerate() if t.name not in ("MainThread", "labkit-sim-watchdog")
                and type(t).__name__ == "BlockThread"]


def test_a_direct_launch_has_the_time_limit_and_the_learner_can_change_it() -> None:
    assert float(sim.time_limit()) == sim.LEARNER_CODE_LIMIT_S
    with sim.time_limit(0.5):
        start = time.monotonic()
        with pytest.raises(sim.KernelTimeout, match=r"did not finish within 0.5 s of CPU time.*1 thread\(s\) still computing"):
            endless[2, 64](np.zeros(1, np.float32))
        assert time.monotonic() - start < 5
    assert float(sim.time_limit()) == sim.LEARNER_CODE_LIMIT_S  # the `with` block restored it
    _still_works()


@pytest.mark.parametrize("how", ["direct", "strict", "trace", "after a barrier"])
def test_interrupt_stops_any_launch_within_a_second(how: str) -> None:
    a = np.zeros(64, np.float32)
    run = {
        "direct": lambda: endless[2, 64](a),
        "strict": lambda: sim.launch_strict(endless, 2, 64, a),
        "trace": lambda: sim.trace(endless, 2, 64, a),
        "after a barrier": lambda: endless_after_barrier[2, 64](a),
    }[how]
    _after(0.5, _sigint)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run()
    assert time.monotonic() - start < 1.5  # 0.5 s before the interrupt, then at once
    assert engine.current is None and not engine.launch_active
    _still_works()


def test_interrupt_in_a_jupyter_kernel() -> None:
    """Kernel -> Interrupt in JupyterLab: the cell stops within a second and the next cell runs."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env=dict(os.environ, LABKIT_MODE="sim"))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        setup = textwrap.dedent("""
            import numpy as np, labkit
            labkit.setup(quiet=True)
            from numba import cuda
            @cuda.jit
            def endless(a):
                i = 0
                while i >= 0:
                    i = (i + 1) % 7
        """)
        reply = kc.execute_interactive(setup, timeout=120)
        assert reply["content"]["status"] == "ok"
        msg_id = kc.execute("endless[4, 256](np.zeros(1, np.float32))")
        time.sleep(1.0)
        start = time.monotonic()
        km.interrupt_kernel()
        while True:
            reply = kc.get_shell_msg(timeout=10)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert time.monotonic() - start < 1.5
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        next_cell = "a = np.zeros(4, np.float32)\n@cuda.jit\ndef one(a):\n    a[cuda.grid(1)] = 1\none[1, 4](a); assert a.sum() == 4"
        after = kc.execute_interactive(next_cell, timeout=60)
        if after["content"]["status"] == "aborted":
            # ipykernel 7 aborts a request that reaches it before its own "stop aborting" message after an error (a
            # request sent the instant the error reply came; a person clicking later never meets it): send it again
            after = kc.execute_interactive(next_cell, timeout=60)
        assert after["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@cuda.jit
def order(out, counter):
    t = cuda.threadIdx.x
    out[t] = cuda.atomic.add(counter, 0, 1)  # the position of this thread in the schedule


def _order(schedule: str, seed: int | None = None) -> list[int]:
    out, counter = np.zeros(64, np.int32), np.zeros(1, np.int32)
    sim.launch_strict(order, 1, 64, out, counter, schedule=schedule, seed=seed)
    return out.tolist()


def test_schedules_are_deterministic_and_seeded() -> None:
    assert _order("forward") == list(range(64))
    assert _order("reverse") == list(range(63, -1, -1))
    shuffled = _order("shuffle", 7)
    assert shuffled == _order("shuffle", 7) and sorted(shuffled) == list(range(64)) and shuffled != list(range(64))
    assert _order("shuffle", 8) != shuffled


@cuda.jit
def shift_left(x, out):
    sh = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    out[t] = sh[(t + 1) % 64]  # no barrier: a race


def test_a_failed_case_names_the_schedule_to_replay() -> None:
    from labkit.check.core import Failed
    from labkit.check.harness import Launch, grade

    x = np.arange(64, dtype=np.float32)
    case = Launch(1, 64, [x], np.roll(x, -1), "n=64", names=("x", "out"), schedule="shuffle", seed=12)
    with pytest.raises(Failed, match=r"n=64 \(threads in schedule 'shuffle', seed 12\): a race on shared array `sh`"):
        grade(shift_left, case)
    assert Launch(1, 64, [x], x, "n=64", first=True).thread_order() == ("forward", None)
    assert Launch(1, 64, [x], x, "n=64", reverse=True).thread_order() == ("reverse", None)
    schedule, seed = Launch(1, 64, [x], x, "n=64").thread_order()
    assert schedule == "shuffle" and isinstance(seed, int)
    with pytest.raises(LabkitError, match="schedule must be one of"):
        sim.launch_strict(shift_left, 1, 64, x, np.zeros(64, np.float32), schedule="sideways")


@cuda.jit
def barrier_then_shuffles(x, out):
    """The 04.race answer that used to get a false 'warp cannot go on' report: a barrier, then warp shuffles."""
    sh = cuda.shared.array(1024, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    v = sh[1023 - t]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if t % 32 == 0:
        out[t // 32] = v


def test_no_false_warp_report_after_a_barrier() -> None:
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    expected = x[::-1].reshape(32, 32).sum(axis=1)
    for schedule in ("forward", "reverse", "shuffle", "shuffle"):
        out = np.zeros(32, np.float32)
        sim.launch_strict(barrier_then_shuffles, 1, 1024, x, out, schedule=schedule, seed=len(schedule))
        assert np.allclose(out, expected, rtol=1e-5, atol=1e-5)


BURN = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


def test_the_limit_is_cpu_time_so_load_does_not_time_out_a_correct_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the load at 8, one launch that needs ~0.5 s of CPU passes a 1 s limit although it takes longer than that."""
    monkeypatch.setattr(lockstep, "ENABLED", False)  # (the engine's own behaviour: lockstep would run it)
    probe = np.zeros(2048, np.float32)
    cpu = time.thread_time()
    add_one[8, 256](probe)
    per_element = (time.thread_time() - cpu) / probe.size
    a = np.zeros(int(0.5 / per_element) // 256 * 256, np.float32)
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(8)]
    try:
        time.sleep(0.5)
        start, cpu = time.monotonic(), time.thread_time()
        with sim.time_limit(1.0):
            add_one[a.size // 256, 256](a)  # raises KernelTimeout if the limit were wall time
        wall, used = time.monotonic() - start, time.thread_time() - cpu
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait()
    assert (a == 1).all() and used < 1.0
    if (os.cpu_count() or 1) <= 4:
        assert wall > 1.0  # the load did stretch the launch past its limit in wall time
