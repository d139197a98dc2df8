"""What the communicators handed to a learner's rank function share, inside each rank of a :mod:`labkit.ranks` job.

Imported by name (``import _rank_comm``) by ``_rank_worker.py`` and ``_rank_gpu.py``, which run as scripts next to
it, and by the lab 08 check's one-rank communicator; it imports nothing, so a rank still starts with NumPy and
mpi4py only.
"""

from __future__ import annotations

from typing import Any


class RankCounters:
    """The rank and size of ``mpi4py.MPI.Comm`` (``Get_rank``, ``Get_size``) and what the grader counts of a
    communicator's use: the calls made, the bytes sent and the ranks sent to."""

    def _start_counting(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.sent_bytes = 0
        self.partners: set[int] = set()
        self.calls = 0

    def Get_rank(self) -> int:  # noqa: N802  (mpi4py's names)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def _count(self, buf: Any, dest: int) -> None:
        """Count ``buf``'s bytes as sent to rank ``dest``."""
        self.sent_bytes += int(getattr(buf, "nbytes", 0))
        self.partners.add(int(dest))

    def Sendrecv(  # noqa: N802
        self,
        sendbuf: Any,
        dest: int,
        sendtag: int = 0,
        recvbuf: Any = None,
        source: Any = None,
        recvtag: Any = None,
        status: Any = None,
    ) -> None:
        """``mpi4py.MPI.Comm.Sendrecv`` (``source`` and ``recvtag`` None: any), counted, then carried by
        :meth:`_exchange`."""
        self.calls += 1
        self._count(sendbuf, dest)
        self._exchange(sendbuf, dest, sendtag, recvbuf, source, recvtag, status)

    def _exchange(self, sendbuf: Any, dest: int, sendtag: int, recvbuf: Any, source: Any, recvtag: Any, status: Any) -> None:
        """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` from ``source``: each communicator's own."""
        raise NotImplementedError
