"""Time limits for learner code in the simulator: kernels, device functions in any cell, plain Python answers.

A watchdog counts only the time spent in frames of *learner code* (any file outside the Python installation, the
virtual environment and labkit itself, and code that ``exec()``/``eval()`` compiled in a learner's namespace), so a
loop of pure arithmetic is stopped too while library code runs untraced. One documented limit applies everywhere:
:data:`LEARNER_CODE_LIMIT_S`.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import time
from typing import Any, Iterator

# which code is the learner's: a foundation module (labkit.ranks needs it too, without the simulator)
from ..learner_frames import (  # noqa: F401
    _LIBRARY_ROOTS,
    _namespace_is_learner,
    is_learner_file,
    is_learner_frame,
)

LEARNER_CODE_LIMIT_S = 20.0  # at most this long for one kernel launch, or one check's calls of plain Python answers
launches_running = 0  # simulator launches in progress (their time counts against their own limit, not this one)

LIKELY_HANG = (
    "a loop whose condition never becomes false (a `while` whose index never advances, a stride of 0); "
    "a cuda.syncthreads() that some threads never reach; or a warp shuffle or vote after some lanes returned."
)


class PythonTimeout(BaseException):
    """Raised into the thread running a learner's plain Python answer that ran past its limit.

    A ``BaseException`` (as ``KeyboardInterrupt`` is), so that a check's ``except Exception`` around the learner's
    call cannot swallow it; :func:`labkit.check.core.run` reports it.
    """

    def __init__(self, message: str | None = None, *, cause: str | None = None) -> None:
        super().__init__(message or f"your code did not finish within {LEARNER_CODE_LIMIT_S:.0f} s")
        self.cause = cause or LIKELY_PYTHON_HANG


LIKELY_PYTHON_HANG = (
    "a loop whose condition never becomes false (`while True:` without a `break` that is reached, "
    "an index that never advances), or far more work than the exercise needs."
)


def _timeout_class(seconds: float) -> type[PythonTimeout]:
    """A :class:`PythonTimeout` whose message names ``seconds`` (an asynchronous exception is raised as a class)."""

    class TimeLimit(PythonTimeout):
        def __init__(self) -> None:
            super().__init__(f"your code did not finish within {seconds:.0f} s")

    TimeLimit.__name__ = TimeLimit.__qualname__ = "PythonTimeout"
    return TimeLimit


def _in_learner_code(frame: Any, anchor: Any) -> bool:
    """True when a frame between the innermost one and ``anchor`` (the frame that set the limit) is learner code."""
    while frame is not None and frame is not anchor:
        if is_learner_frame(frame):
            return True
        frame = frame.f_back
    return False


def raise_in_thread(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` asynchronously in thread ``ident`` (``None`` cancels a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc) if exc else None)


@contextlib.contextmanager
def python_time_limit(seconds: float | None = None, *, interval: float = 0.1) -> Iterator[None]:
    """Stop learner code in this thread once it has run ``seconds`` in all, with :class:`PythonTimeout`.

    A watchdog thread samples what this thread is doing every ``interval`` seconds and counts only the time
    spent in learner code (frames of a notebook cell or a script, and code that exec()/eval() built in a learner's
    namespace: :func:`is_learner_frame`; called from inside the ``with`` block), so labkit's own work in a check never
    counts, and nothing is traced: measurements the learner's code makes run at full speed.
    Kernel launches have their own limit (:mod:`labkit.sim.engine`), and their time does not count here.
    """
    seconds = LEARNER_CODE_LIMIT_S if seconds is None else seconds
    ident = threading.get_ident()
    anchor = sys._getframe(2)  # the caller of ``with python_time_limit():`` (past contextlib's __enter__)
    done = threading.Event()
    lock = threading.Lock()
    state = {"active": True, "fired": False}

    def watch() -> None:
        spent = 0.0
        last = time.monotonic()
        while not done.wait(interval):
            now = time.monotonic()
            frame = sys._current_frames().get(ident)
            if _in_learner_code(frame, anchor) and not launches_running:
                spent += now - last
            last = now
            innermost_learner = frame is not None and is_learner_frame(frame)
            if spent > seconds and innermost_learner:  # raise only at learner code: never inside Python's own locks
                with lock:
                    if state["active"]:
                        state["fired"] = True
                        raise_in_thread(ident, _timeout_class(seconds))
                return

    watcher = threading.Thread(target=watch, name="labkit-time-limit", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        with lock:
            state["active"] = False
        done.set()
        watcher.join()
