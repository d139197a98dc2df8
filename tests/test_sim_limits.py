"""labkit.sim.limits: the time limit on a learner's plain Python, code built with exec() and eval() included."""

from __future__ import annotations

import sys
import time

import pytest

from labkit import occupancy
from labkit.sim.limits import PythonTimeout, is_learner_frame, python_time_limit

# "Endless" loops that end after 5 s, so that a limit which fails to stop them fails the test instead of hanging it
ENDLESS = "def endless(x):\n    t0 = _now()\n    while _now() - t0 < 5.0:\n        x += 1\n"


def _stopped_within(run, seconds: float = 0.5, budget: float = 5.0) -> float:
    t0 = time.monotonic()
    with pytest.raises(PythonTimeout, match=f"did not finish within {seconds:.0f} s"):
        with python_time_limit(seconds, interval=0.05):
            run()
    took = time.monotonic() - t0
    assert took < budget, f"stopped after {took:.1f} s"
    return took


def test_a_plain_endless_loop_is_stopped() -> None:
    def endless() -> None:
        x, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 5.0:
            x += 1

    _stopped_within(endless)


def test_a_function_made_by_exec_in_the_learners_namespace_is_stopped() -> None:
    ns: dict = {}
    exec(ENDLESS.replace("_now()", "time.monotonic()"), globals(), ns)  # noqa: S102 - the learner's way of hiding a loop from the limit
    _stopped_within(lambda: ns["endless"](0))


def test_a_function_made_by_exec_in_a_fresh_dict_is_stopped() -> None:
    ns: dict = {"_now": time.monotonic}
    exec(ENDLESS, ns)  # noqa: S102
    _stopped_within(lambda: ns["endless"](0))


def test_a_loop_run_by_exec_and_eval_themselves_is_stopped() -> None:
    loop = "t0 = _now()\nwhile _now() - t0 < 5.0:\n    pass\n"
    _stopped_within(lambda: exec(loop, {"_now": time.monotonic}))  # noqa: S102
    _stopped_within(lambda: eval("any(_now() - t0 > 5.0 for _ in iter(int, 1))",  # noqa: S307
                                 {"_now": time.monotonic, "t0": time.monotonic()}))


def test_exec_code_in_a_library_modules_namespace_is_not_the_learners() -> None:
    """The __init__ that dataclasses writes (file "<string>") for a class of labkit is library code."""
    grab = "def frame():\n    return _getframe()\n"
    library: dict = {}
    exec(grab, vars(occupancy), library)  # noqa: S102 - globals of a labkit module
    library["frame"].__globals__.setdefault("_getframe", sys._getframe)
    assert not is_learner_frame(library["frame"]())
    fresh: dict = {"_getframe": sys._getframe}
    exec(grab, fresh)  # noqa: S102
    assert is_learner_frame(fresh["frame"]())
    assert is_learner_frame(sys._getframe())  # this test file is outside labkit and the Python installation


def test_time_outside_learner_code_does_not_count() -> None:
    """A loop in a library module's namespace (built by exec there, as dataclasses builds an __init__) runs past
    the limit without being stopped: it is not the learner's time."""
    library: dict = {}
    exec("def spin(now, seconds):\n    t0 = now()\n    while now() - t0 < seconds:\n        pass\n",  # noqa: S102
         vars(occupancy), library)
    with python_time_limit(0.2, interval=0.05):
        time.sleep(0.3)  # the with block's own frame is the caller's, not code under the limit
        library["spin"](time.monotonic, 0.5)


def test_a_kernel_made_by_exec_has_the_launch_time_limit() -> None:
    """The kernel watchdog stops only at learner frames; a kernel whose source went through exec() is one."""
    import numpy as np

    from labkit import sim
    from labkit.check.harness import cuda_module

    cuda = cuda_module()
    ns: dict = {"cuda": cuda}
    exec("def long_loop(a, n):\n    i = 0\n    while i < n:\n        i += 1\n    a[0] = i\n", ns)  # noqa: S102
    kernel = cuda.jit(ns["long_loop"])
    with sim.time_limit(0.3):
        with pytest.raises(sim.KernelTimeout, match="did not finish within 0.3 s"):
            kernel[1, 1](np.zeros(1, np.int64), 200_000_000)  # minutes of simulator time if never stopped
