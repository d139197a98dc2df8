"""One kernel launch in the simulator, with the course's rules installed and a time limit on learner code."""

from __future__ import annotations

import threading
import time
from typing import Any

from . import blocks
from .limits import LEARNER_CODE_LIMIT_S


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Run ``kernel[griddim, blockdim](*args)`` in the simulator and wait for it.

    A launch still running after ``time_limit_s`` (default :data:`~labkit.sim.limits.LEARNER_CODE_LIMIT_S`) is
    stopped, every thread of it, whatever code it is in (the kernel, a device function from any cell), with
    :class:`~labkit.sim.errors.KernelTimeout`; every other error of a thread is raised here as it was raised.
    """
    from . import install

    install()
    seconds = time_limit_s or LEARNER_CODE_LIMIT_S
    before = threading.gettrace()
    threading.settrace(blocks.thread_tracer)
    blocks.state.deadline, blocks.state.seconds = time.monotonic() + seconds, seconds
    try:
        kernel[griddim, blockdim](*args)
    finally:
        threading.settrace(before)  # type: ignore[arg-type]
        blocks.state.deadline = None
