"""What the communicators handed to a learner's rank function share, inside each rank of a :mod:`labkit.ranks` job.

Imported by name (``import _rank_comm``) by ``_rank_worker.py`` and ``_rank_gpu.py``, which run as scripts next to
it (never by labkit itself); it imports nothing, so a rank still starts with NumPy and mpi4py only.
"""

from __future__ import annotations


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
