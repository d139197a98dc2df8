"""The ring all-reduce over real processes: labkit's reference rank function, and the model to compare it with.

:func:`ring_allreduce` is what each rank runs (exercise 08.mpi-ring's reference): the buffer is cut into ``n``
chunks (``np.array_split``'s rule, so sizes that ``n`` does not divide and sizes below ``n`` work), then
``n - 1`` reduce-scatter steps and ``n - 1`` all-gather steps, each one ``Sendrecv`` to the right neighbour and
from the left one: the same schedule as :func:`labkit.collectives.ring_schedule`. It uses only ``np`` and the
communicator, so :mod:`labkit.ranks` can send its source to the rank processes, and NumPy or CuPy buffers alike.

:func:`model` is the alpha-beta ring model of :mod:`labkit.collectives` for the same size and ranks, given a
per-direction bandwidth: the lab compares measured CPU processes with it (a model, not a measurement).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labkit.errors import LabkitError


def ring_allreduce(comm: Any, buf: Any) -> Any:
    """Sum ``buf`` over every rank of ``comm`` with a ring (reduce-scatter, then all-gather); return the sum.

    ``buf`` is a 1-D NumPy (or CuPy) array; it is reduced in place and returned. Runs inside each rank process
    (:mod:`labkit.ranks`): called with anything but a communicator and a 1-D array it raises ``LabkitError``.
    """
    if not all(callable(getattr(comm, m, None)) for m in ("Get_rank", "Get_size", "Sendrecv")):
        raise LabkitError(
            f"ring_allreduce(comm, buf) needs an MPI communicator first, got {type(comm).__name__}.",
            fix="Run it on processes: labkit.ranks.call(ring_allreduce, 4, buf) or ranks.bench(...).",
        )
    if getattr(buf, "ndim", None) != 1:
        raise LabkitError(
            f"ring_allreduce(comm, buf) needs a 1-D array, got {type(buf).__name__}.",
            fix="Pass this rank's 1-D NumPy array, e.g. np.arange(1000, dtype=np.float32).",
        )
    r, n = comm.Get_rank(), comm.Get_size()
    right, left = (r + 1) % n, (r - 1) % n
    chunks = np.array_split(buf, n)  # views into buf; the first size % n chunks are one longer
    scratch = np.empty_like(chunks[0])
    for s in range(n - 1):  # reduce-scatter: send chunk r - s, add the received chunk r - s - 1
        send, recv = (r - s) % n, (r - s - 1) % n
        incoming = scratch[: chunks[recv].size]
        comm.Sendrecv(chunks[send], dest=right, recvbuf=incoming, source=left)
        chunks[recv] += incoming
    for s in range(n - 1):  # all-gather: pass the finished chunks on, starting with r + 1
        send, recv = (r + 1 - s) % n, (r - s) % n
        comm.Sendrecv(chunks[send], dest=right, recvbuf=chunks[recv], source=left)
    return buf


def model(nbytes: float, n: int, link_gbps: float, alpha_us: float) -> Any:
    """:func:`labkit.collectives.ring_cost` for ``n`` ranks: the MODEL a measured run is compared with."""
    from labkit.dist.collectives import ring_cost

    return ring_cost(nbytes, n, link_gbps, alpha_us)
