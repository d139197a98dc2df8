"""What a kernel run in the simulator can do wrong, as exceptions that carry a learner-facing explanation.

The simulator layer raises these; it knows nothing of checks. ``labkit.check`` turns them into reports.
"""

from __future__ import annotations


class KernelFault(Exception):
    """A kernel broke a rule of CUDA's execution model (a race, a divergent barrier, a warp call missing lanes).

    ``message`` says what happened, ``cause`` what in the code most likely made it happen.
    """

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class KernelTimeout(KernelFault, TimeoutError):
    """Learner code (a kernel, a device function or a plain Python answer) ran past its time limit."""


class DivergentBarrier(KernelFault):
    """A ``cuda.syncthreads()`` that not every thread of the block reached."""


class WarpError(KernelFault):
    """A warp-level call whose lanes did not all arrive, or a lane outside its own mask."""


class ZeroDivisor(KernelFault, ZeroDivisionError):
    """A division by zero in a kernel (not a ``debug=True`` one), which Python raises where a GPU raises nothing: an
    integer ``//`` or ``%`` by zero gives an undefined value (Numba's compiled kernel gives 0), a float division
    ``inf`` or ``nan``. The simulator stops and says so rather than compute a number a GPU may not give."""
