"""The course's strict CUDA simulator, on top of Numba's.

Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs kernels on a CPU, one Python thread per CUDA thread. This
package runs them faster and makes them behave like a GPU wherever a learner's kernel could otherwise pass by luck:

- :mod:`.engine`: every launch runs its CUDA threads as greenlets in the launching thread, in a deterministic
  (seeded) order, with a limit on CPU time and Interrupt that stops it at once; :mod:`.launch` puts it under
  every launch of Numba's simulator;
- :mod:`.blocks`: barriers as a GPU has them (a ``syncthreads`` some threads skip is an error), in words;
- :mod:`.memory`: the strict memory model (writes visible after barriers, races within and between blocks,
  poisoned shared memory), with recorded accesses for coalescing and bank-conflict counts;
- :mod:`.warp`: warp shuffles, votes and ``syncwarp``;
- :mod:`.integers`: narrow-integer arithmetic as Numba types it;
- :mod:`.limits`: one time limit for learner code, in kernels, device functions and plain Python.
- :mod:`.trace`: :func:`trace` records every thread's reads and writes of one launch (``labkit.show`` draws it).

It knows nothing of exercises: :mod:`labkit.check` grades with it. :func:`install` runs when
``labkit.setup()`` chooses ``sim`` mode.
"""

from __future__ import annotations

from typing import Any

from .errors import DivergentBarrier, KernelFault, KernelTimeout, WarpError, ZeroDivisor
from .launch import launch as _launch
from .launch import time_limit
from .limits import LEARNER_CODE_LIMIT_S, PythonTimeout
from .memory import LaunchReport, Race, bank_conflicts, launch_strict, sectors_per_request
from .rules import install
from .trace import Trace, trace

__all__ = [
    "DivergentBarrier",
    "KernelFault",
    "KernelTimeout",
    "PythonTimeout",
    "WarpError",
    "ZeroDivisor",
    "LEARNER_CODE_LIMIT_S",
    "LaunchReport",
    "Race",
    "bank_conflicts",
    "install",
    "launch",
    "launch_strict",
    "sectors_per_request",
    "time_limit",
    "Trace",
    "trace",
]


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Run ``kernel[griddim, blockdim](*args)`` in the simulator and wait for it (see :func:`.launch.launch`).

    The kernel, the grid and block (CUDA's limits) and the time limit are checked first: a wrong one is a
    :class:`~labkit.errors.LabkitError` saying what was expected."""
    from .memory import check_dims, check_kernel, check_time_limit

    check_kernel(kernel, "labkit.sim.launch")
    check_dims(griddim, blockdim)
    check_time_limit(time_limit_s)
    install()
    _launch(kernel, griddim, blockdim, *args, time_limit_s=time_limit_s)
