"""The red box of a simulated launch shows the learner's kernel as written, in every path: a direct launch, a strict
launch (what a check runs, with the kernel's compiled variant: fast reads and atomics), a real check, a time-out,
Interrupt and a trace. No ``_lk_`` name (the variant's own values), the kernel's own name and arguments, and the
arrow on the learner's line, never on the ``def`` (issue 45, item 3; the browser review's finding 4)."""

from __future__ import annotations

import re
import signal

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="the simulator's tracebacks")

KERNELS = """
import numpy as np
from numba import cuda
import labkit.check
from labkit import sim

@cuda.jit
def saxpy_endless(a, x, y, out):
    i = cuda.grid(1)
    while i < out.size:
        out[i] = a * x[i] + y[i]

@cuda.jit
def hist_past_end(keys, counts):
    i = cuda.grid(1)
    if i < keys.size:
        cuda.atomic.add(counts, keys[i] + 1, 1)

@cuda.jit(device=True)
def step_forever(v, i):
    while i < v.size:
        v[i] += 1

@cuda.jit
def calls_device(v):
    i = cuda.grid(1)
    step_forever(v, i)

@cuda.jit
def spin_at_barrier(flag):
    while flag[0] == 0:
        cuda.syncthreads()

@cuda.jit
def spin_on_shuffle(flag):
    v = 0
    while flag[0] == 0:
        v = cuda.shfl_down_sync(0xffffffff, v, 1)

x = np.ones(100, np.float32)
y = np.ones(100, np.float32)
out = np.zeros(100, np.float32)
keys = np.arange(64, dtype=np.int32)
"""

LOOP_LINES = ("while i < out.size:", "out[i] = a * x[i] + y[i]")


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    sh = InteractiveShell.instance()
    sh.run_cell(KERNELS, store_history=False)
    return sh


def _shown(shell: InteractiveShell, cell: str, interrupt_after: float | None = None) -> list[str]:
    """What IPython prints for ``cell`` (without colours or blank lines); with ``interrupt_after``, Interrupt (SIGINT's
    KeyboardInterrupt) arrives that many seconds in."""

    old = signal.signal(signal.SIGALRM, signal.default_int_handler)  # (SIGINT's own: no Python frame of its own)
    if interrupt_after:
        signal.setitimer(signal.ITIMER_REAL, interrupt_after)
    try:
        with capture_output() as cap:
            shell.run_cell(cell, store_history=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout + cap.stderr)
    return [ln for ln in text.splitlines() if ln.strip()]


def _as_written(lines: list[str], kernel: str, params: str, learner_lines: tuple[str, ...]) -> None:
    """The box names the kernel with its own parameters, has no ``_lk_`` name and no engine frame, and its arrows
    point at learner lines, the last one at one of ``learner_lines`` (never at the ``def``)."""
    text = "\n".join(lines)
    assert "_lk_" not in text and "<locals>" not in text, text
    assert f"{kernel}({params})" in text, text
    for inside in ("engine.py", "launch.py", "memory.py", "fastreads.py", "greenlet"):
        assert inside not in text, text
    arrows = [ln for ln in lines if re.match(r"\s*-+>", ln)]
    assert arrows and not any(f"def {kernel}" in ln for ln in arrows), text
    assert any(line in arrows[-1] for line in learner_lines), text


def test_interrupting_a_direct_launch(shell: InteractiveShell) -> None:
    lines = _shown(shell, "saxpy_endless[2, 32](np.float32(2), x, y, out)", interrupt_after=0.5)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    _as_written(lines, "saxpy_endless", "a, x, y, out", LOOP_LINES)


def test_interrupting_a_strict_launch_of_the_compiled_variant(shell: InteractiveShell) -> None:
    """What a check runs: x and y are read-only, so the launch runs the variant that reads them from copies."""
    cell = "sim.launch_strict(saxpy_endless, 2, 32, np.float32(2), x, y, out, names=['a', 'x', 'y', 'out'], outputs=('out',))"
    lines = _shown(shell, cell, interrupt_after=0.5)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    _as_written(lines, "saxpy_endless", "a, x, y, out", LOOP_LINES)


def test_interrupting_a_check(shell: InteractiveShell) -> None:
    """The review's case: Kernel -> Interrupt while ``labkit.check.saxpy`` runs an endless SAXPY."""
    lines = _shown(shell, "labkit.check.saxpy(saxpy_endless)", interrupt_after=0.7)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    _as_written(lines, "saxpy_endless", "a, x, y, out", LOOP_LINES)


@pytest.mark.parametrize("delay", [0.2, 0.25, 0.3])
@pytest.mark.parametrize(
    ("kernel", "learner_lines"),
    [
        ("spin_at_barrier", ("cuda.syncthreads()", "while flag[0] == 0:")),
        ("spin_on_shuffle", ("v = cuda.shfl_down_sync(0xffffffff, v, 1)", "while flag[0] == 0:")),
    ],
)
def test_interrupting_between_two_steps(
    shell: InteractiveShell, kernel: str, learner_lines: tuple[str, ...], delay: float
) -> None:
    """Threads that hand control back at every barrier or shuffle: Interrupt often comes while the scheduler runs,
    outside the kernel; the box still shows where a suspended thread was, in the kernel as written."""
    lines = _shown(shell, f"{kernel}[2, 32](np.zeros(1, np.int32))", interrupt_after=delay)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    assert f"of {kernel}: `" in lines[-1], lines
    _as_written(lines, kernel, "flag", learner_lines)


@pytest.mark.parametrize("launch", ["hist_past_end[2, 32](keys, np.zeros(64, np.int32))",
                                    "sim.launch_strict(hist_past_end, 2, 32, keys, np.zeros(64, np.int32))"])
def test_an_error_in_a_kernel_with_compiled_atomics(shell: InteractiveShell, launch: str) -> None:
    """The atomic of element 64 of 64: both launches run the variant whose atomics take the memory model's short path."""
    lines = _shown(shell, launch)
    assert lines[-1].startswith("IndexError: tid=[31, 0, 0] ctaid=[1, 0, 0]"), lines
    _as_written(lines, "hist_past_end", "keys, counts", ("cuda.atomic.add(counts, keys[i] + 1, 1)",))


def test_a_trace_names_the_learners_line(shell: InteractiveShell) -> None:
    shell.run_cell("t = sim.trace(hist_past_end, 2, 32, keys, np.zeros(64, np.int32))", store_history=False)
    t = shell.user_ns["t"]
    words = "\n".join(t.errors) + repr(t.faults)
    assert t.errors and "_lk_" not in words and "<locals>" not in words



STUCK = r"was at line \d+ of saxpy_endless: `(while i < out.size:|out\[i\] = a \* x\[i\] \+ y\[i\])`"


def _timed_out_as_written(lines: list[str], kernel: str = "saxpy_endless", params: str = "a, x, y, out",
                          learner_lines: tuple[str, ...] = LOOP_LINES) -> str:
    """A time-out's box is an Interrupt's (:func:`_as_written`): a frame in the learner's kernel as written, the arrow
    on the line the stuck thread was at; returns the ``KernelTimeout:`` line."""
    _as_written(lines, kernel, params, learner_lines)
    arrows = [ln for ln in lines if re.match(r"\s*-+>", ln)]
    assert len(arrows) == 2, lines  # the learner's launch, then the kernel's line: nothing of labkit's between
    return next(ln for ln in lines if ln.startswith("KernelTimeout: "))


def test_a_time_out_of_a_direct_launch_shows_the_kernel_as_written(shell: InteractiveShell) -> None:
    lines = _shown(shell, "with sim.time_limit(0.3):\n    saxpy_endless[2, 32](np.float32(2), x, y, out)")
    assert lines[-1].startswith("The limit is 0.3 s of CPU time per launch"), lines  # and how to raise it
    stop = _timed_out_as_written(lines)
    assert re.search(STUCK, stop), stop
    assert "saxpy_endless[" in next(ln for ln in lines if re.match(r"\s*-+>", ln)), lines


def test_a_time_out_of_a_strict_launch_shows_the_kernel_as_written(shell: InteractiveShell) -> None:
    """The compiled variant (x and y read from copies): its frame is shown as the kernel the learner wrote."""
    cell = "sim.launch_strict(saxpy_endless, 2, 32, np.float32(2), x, y, out, names=['a', 'x', 'y', 'out'], time_limit_s=0.3)"
    stop = _timed_out_as_written(_shown(shell, cell))
    assert re.search(STUCK, stop), stop


@pytest.mark.parametrize(
    "cell",
    [
        "with sim.time_limit(0.3):\n    calls_device[2, 32](np.zeros(64, np.float32))",
        "sim.launch_strict(calls_device, 2, 32, np.zeros(64, np.float32), time_limit_s=0.3)",
    ],
)
def test_a_time_out_in_a_device_function_shows_both_frames(shell: InteractiveShell, cell: str) -> None:
    """The kernel's call of the device function, then the device function's stuck line: each as written."""
    lines = _shown(shell, cell)
    _as_written(lines, "step_forever", "v, i", ("while i < v.size:", "v[i] += 1"))
    arrows = [ln for ln in lines if re.match(r"\s*-+>", ln)]
    assert len(arrows) == 3 and "step_forever(v, i)" in arrows[1] and "calls_device(v)" in "\n".join(lines), lines
    assert re.search(r"was at line \d+ of step_forever: `", next(ln for ln in lines if ln.startswith("KernelTimeout: ")))


def test_a_time_out_between_two_steps_shows_the_suspended_threads_line(shell: InteractiveShell) -> None:
    """Threads that hand control back at every shuffle are stopped by the scheduler, not inside the kernel: the box
    shows where a suspended thread was (its frames, as they are), the same as an exception raised there."""
    lines = _shown(shell, "with sim.time_limit(0.3):\n    spin_on_shuffle[2, 32](np.zeros(1, np.int32))")
    stop = _timed_out_as_written(lines, "spin_on_shuffle", "flag", ("v = cuda.shfl_down_sync(0xffffffff, v, 1)", "while flag[0] == 0:"))
    assert "of spin_on_shuffle: `" in stop, stop


def test_a_time_out_with_every_thread_at_a_barrier_shows_the_barrier(shell: InteractiveShell) -> None:
    lines = _shown(shell, "with sim.time_limit(0.3):\n    spin_at_barrier[2, 32](np.zeros(1, np.int32))")
    stop = _timed_out_as_written(lines, "spin_at_barrier", "flag", ("cuda.syncthreads()", "while flag[0] == 0:"))
    assert "waiting at cuda.syncthreads()" in stop, stop


def test_a_time_out_inside_a_check_is_a_verdict_naming_the_learners_line(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check reports a hang as its verdict (no red box): the stuck line as written, nothing of the variant."""
    import labkit.check.harness

    monkeypatch.setattr(labkit.check.harness, "CASE_TIME_LIMIT_S", 0.3)
    lines = _shown(shell, "labkit.check.saxpy(saxpy_endless)")
    text = "\n".join(lines)
    assert lines[0].startswith("[NOT YET] 02.saxpy: ") and "did not finish within 0.3 s" in lines[0], text
    assert re.search(STUCK, lines[0]), text
    assert "_lk_" not in text and "<locals>" not in text and "Traceback" not in text, text
