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


class TooMuchSharedMemory(KernelFault):
    """A block's static shared arrays take more than a GPU build allows (48 KiB): the kernel does not compile there."""


def too_much_shared_memory(total: int, limit: int) -> TooMuchSharedMemory:
    """The error for a block whose static shared arrays take ``total`` bytes, past ``limit``."""
    return TooMuchSharedMemory(
        f"this kernel's shared arrays take {total:,} bytes a block: a GPU build refuses more than {limit:,} bytes "
        f'({limit // 1024} KiB) of static shared memory a block (ptxas: "uses too much shared data"), so the kernel '
        "would not compile there.",
        cause="Tiles too large for one block: use smaller tiles (fewer elements, or a narrower type), or fewer shared arrays.",
    )


class ZeroDivisor(KernelFault, ZeroDivisionError):
    """A division by zero in a kernel (not a ``debug=True`` one), which Python raises where a GPU raises nothing: an
    integer ``//`` or ``%`` by zero gives an undefined value (Numba's compiled kernel gives 0), a float division
    ``inf`` or ``nan``. The simulator stops and says so rather than compute a number a GPU may not give."""


class NotSimulated(UserWarning):
    """A kernel option the simulator accepts but does not model, so its numbers can differ from a GPU's (warned once
    per place in the code, where the kernel is compiled)."""


#: What ``@cuda.jit(fastmath=True)`` changes on a GPU and the simulator does not do (the warning's words).
FASTMATH_NOT_SIMULATED = (
    "fastmath=True is not simulated: on a GPU it turns float32 math.sin, cos, tan, exp, log, log2, log10, pow and "
    "float32 division into CUDA's fast approximations (__sinf, __expf, __fdividef, ...: errors that grow with the "
    "argument, subnormals flushed to zero), while the simulator computes them as without fastmath. Check such a "
    "kernel's accuracy on a GPU, or leave fastmath out."
)
