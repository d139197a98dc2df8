"""The GPU side of a :mod:`labkit.ranks` job (``mode: gpu``): one process per GPU, the learner's ring over CuPy arrays.

Imported by ``_rank_worker.py`` inside each rank (never by labkit itself, so importing labkit never imports CuPy).
Each rank takes the GPU of its local rank (``MPI_LOCALRANKID``, which MPICH's mpiexec sets, modulo the GPUs it
sees); rank 0 makes an NCCL unique id and broadcasts it over MPI; every rank joins one NCCL communicator. The
learner's ``fn(comm, buf)`` then runs unchanged on CuPy buffers: ``comm.Sendrecv`` becomes an NCCL send and
receive in one group on the current CuPy stream (:class:`NcclRing`), and the result is compared with NCCL's own
``allReduce``. Both are timed with CUDA events; the slowest rank counts. Where the MPI library is CUDA-aware
(MPI 4.1's ``mpi_memory_alloc_kinds`` include ``cuda``), the same function also runs with MPI's ``Sendrecv`` on device buffers.
"""

from __future__ import annotations

import os
from typing import Any

from _rank_comm import RankCounters  # next to this script

#: CuPy dtype name -> the NCCL data type constant's name in cupy.cuda.nccl.
NCCL_TYPES = {"float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "int32": "NCCL_INT32", "float16": "NCCL_FLOAT16"}


class NcclRing(RankCounters):
    """A communicator with the ring's calls of ``mpi4py.MPI.Comm``, carried by NCCL between GPUs.

    ``Sendrecv(sendbuf, dest, recvbuf=..., source=...)`` is ``groupStart(); send(dest); recv(source); groupEnd()``
    on the current CuPy stream, so it is ordered with the learner's own array operations on that stream.
    """

    def __init__(self, nccl: Any, comm: Any, rank: int, size: int, stream: Any, status: Any = None) -> None:
        self._nccl, self._comm, self._stream, self._status = nccl, comm, stream, status
        self._start_counting(rank, size)

    def _type(self, buf: Any) -> int:
        name = NCCL_TYPES.get(str(buf.dtype))
        if name is None:
            raise TypeError(f"NCCL here carries {', '.join(NCCL_TYPES)}; got {buf.dtype}")
        return int(getattr(self._nccl, name))

    def _exchange(self, sendbuf: Any, dest: int, sendtag: int, recvbuf: Any, source: Any, recvtag: Any, status: Any) -> None:
        if recvbuf is None:
            raise TypeError("Sendrecv needs recvbuf= (a CuPy array to receive into)")
        source = 0 if source is None else source
        if self._status is not None:
            self._status.set(f"comm.Sendrecv over NCCL (dest={dest}, source={source}, {sendbuf.size} elements)")
        nccl, s = self._nccl, self._stream.ptr
        nccl.groupStart()
        self._comm.send(sendbuf.data.ptr, sendbuf.size, self._type(sendbuf), int(dest), s)
        self._comm.recv(recvbuf.data.ptr, recvbuf.size, self._type(recvbuf), int(source), s)
        nccl.groupEnd()
        if self._status is not None:
            self._status.set("running")

    def Barrier(self) -> None:  # noqa: N802
        self._stream.synchronize()


def local_device(world_rank: int, device_count: int) -> int:
    """The GPU this rank drives: its local rank on this node (``MPI_LOCALRANKID``) modulo the GPUs it sees."""
    local = int(os.environ.get("MPI_LOCALRANKID", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", world_rank)))
    return local % max(1, device_count)


def cuda_aware_mpi(comm: Any) -> bool:
    """True when the MPI library takes CUDA device buffers itself: MPI 4.1's memory allocation kinds
    (``mpi_memory_alloc_kinds`` in the communicator's info) include ``cuda``. The PyPI ``mpich`` wheel says
    ``mpi,system``: not CUDA-aware, so NCCL carries the GPU ring."""
    try:
        info = comm.Get_info()
        kinds = info.Get("mpi_memory_alloc_kinds") or ""
        info.Free()
    except Exception:  # an MPI before 4.1 has no such key
        return False
    return any(k.split(":")[0] == "cuda" for k in str(kinds).split(","))


def _events_time(cp: Any, stream: Any, fn: Any, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return out


def run(fn: Any, job: dict[str, Any], world: Any, status: Any, comm_cls: Any) -> dict[str, Any]:
    """Rank side of a GPU job: verify and time ``fn`` over NCCL (and CUDA-aware MPI where present) for each size."""
    import cupy as cp
    import numpy as np
    from cupy.cuda import nccl
    from mpi4py import MPI

    rank, n = world.Get_rank(), world.Get_size()
    dev = local_device(rank, cp.cuda.runtime.getDeviceCount())
    cp.cuda.Device(dev).use()
    uid = nccl.get_unique_id() if rank == 0 else None
    uid = world.bcast(uid, root=0)  # the unique id travels over MPI
    ncomm = nccl.NcclCommunicator(n, uid, rank)
    stream = cp.cuda.get_current_stream()
    ring = NcclRing(nccl, ncomm, rank, n, stream, status)
    cuda_aware = cuda_aware_mpi(world)
    rows = []
    try:
        for size in job["sizes"]:
            status.case = f"GPU ring, {size} float32 elements on {n} GPUs"
            buf = cp.asarray(np.random.default_rng([size, rank]).integers(-1000, 1000, size).astype(np.float32))
            want = cp.empty_like(buf)
            ncomm.allReduce(buf.data.ptr, want.data.ptr, size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
            got = fn(ring, buf.copy())
            stream.synchronize()
            correct = bool(cp.array_equal(got, want).get())
            reps = int(job.get("reps", 5))
            t_mine = _events_time(cp, stream, lambda: fn(ring, buf.copy()), reps)
            t_nccl = _events_time(
                cp,
                stream,
                lambda: ncomm.allReduce(buf.data.ptr, want.data.ptr, size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr),
                reps,
            )
            row = {
                "size": size,
                "nbytes": int(buf.nbytes),
                "correct": correct,
                "device": dev,
                "learner": world.allreduce(float(np.median(t_mine)), op=MPI.MAX),
                "nccl": world.allreduce(float(np.median(t_nccl)), op=MPI.MAX),
            }
            if cuda_aware:  # MPI moves device buffers itself
                mpi_comm = comm_cls(world, status)
                stream.synchronize()
                t_mpi = _events_time(cp, stream, lambda: fn(mpi_comm, buf.copy()), reps)
                row["cuda_aware_mpi"] = world.allreduce(float(np.median(t_mpi)), op=MPI.MAX)
            rows.append(row)
    finally:
        ncomm.destroy()
    name = cp.cuda.runtime.getDeviceProperties(dev)["name"]
    return {"rows": rows, "cuda_aware": cuda_aware, "device_name": name.decode() if isinstance(name, bytes) else str(name)}
