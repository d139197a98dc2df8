"""Fake cupy.cuda.nccl over MPI: a group posts its sends and receives and waits for them all at groupEnd."""

import ctypes

import numpy as np
from mpi4py import MPI

NCCL_FLOAT32, NCCL_FLOAT64, NCCL_INT32, NCCL_FLOAT16, NCCL_SUM = 7, 8, 2, 6, 0
_TYPES = {NCCL_FLOAT32: np.float32, NCCL_FLOAT64: np.float64, NCCL_INT32: np.int32, NCCL_FLOAT16: np.float16}
_pending: list = []
_depth = 0
log: list = []


def _view(ptr: int, count: int, dtype: int) -> np.ndarray:
    t = np.dtype(_TYPES[dtype])
    if count == 0:
        return np.empty(0, t)
    buf = (ctypes.c_char * (count * t.itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype=t, count=count)


def get_unique_id() -> tuple:
    return tuple(range(128))


def groupStart() -> None:  # noqa: N802
    global _depth
    _depth += 1


def groupEnd() -> None:  # noqa: N802
    global _depth
    _depth -= 1
    if _depth == 0:
        MPI.Request.Waitall(_pending)
        _pending.clear()


class NcclCommunicator:
    def __init__(self, ndev: int, commId: tuple, rank: int) -> None:  # noqa: N803
        assert commId == get_unique_id() and MPI.COMM_WORLD.Get_size() == ndev and MPI.COMM_WORLD.Get_rank() == rank
        self.comm = MPI.COMM_WORLD.Dup()

    def send(self, sendbuf: int, count: int, datatype: int, peer: int, stream: int) -> None:
        assert _depth > 0, "send outside a group"
        log.append(("send", peer, count))
        _pending.append(self.comm.Isend(_view(sendbuf, count, datatype).copy(), dest=peer, tag=7))

    def recv(self, recvbuf: int, count: int, datatype: int, peer: int, stream: int) -> None:
        assert _depth > 0, "recv outside a group"
        log.append(("recv", peer, count))
        _pending.append(self.comm.Irecv(_view(recvbuf, count, datatype), source=peer, tag=7))

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, stream: int) -> None:  # noqa: N802
        assert op == NCCL_SUM
        self.comm.Allreduce(_view(sendbuf, count, datatype).copy(), _view(recvbuf, count, datatype), op=MPI.SUM)

    def destroy(self) -> None:
        self.comm.Free()
