"""Fake cupy.cuda: one device per rank, a stream whose work is already done, events timed on the host clock."""

import time
from types import SimpleNamespace

from . import nccl, runtime  # noqa: F401


class Device:
    def __init__(self, index: int = 0) -> None:
        self.id = index

    def use(self) -> None:
        runtime.current = self.id


class _Stream:
    ptr = 0

    def synchronize(self) -> None:
        pass


def get_current_stream() -> _Stream:
    return _Stream()


class Event:
    def record(self, stream=None) -> None:  # noqa: ANN001
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass


def get_elapsed_time(start: Event, end: Event) -> float:
    return (end.t - start.t) * 1e3  # milliseconds, as CuPy


__all__ = ["Device", "Event", "SimpleNamespace", "get_current_stream", "get_elapsed_time", "nccl", "runtime"]
