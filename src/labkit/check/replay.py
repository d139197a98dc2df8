"""Replayable size draws for the checks: the generator :func:`labkit.check.harness.rng` hands out, whose scalar
integer draws (the sizes, counts and choices a check draws) can be handed out again while array draws (values) stay
fresh. The generic rule for host answers (:mod:`.properties`) runs a check again under :func:`same_sizes`: the
answer gets the same shapes with new values, so a cache keyed by shape is hit."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

GEN = np.random.default_rng()  # a new stream per process, never a fixed seed


class SizeDraws:
    """``gen`` itself, except that its scalar integer draws (``integers(lo, hi)`` without ``size``) are recorded, and
    replayed in order while :func:`same_sizes` is active. A replayed draw whose bounds differ from the recorded one
    (the run went another way) ends the replay: fresh draws from there on."""

    def __init__(self, gen: np.random.Generator) -> None:
        self._gen = gen
        self.recorded: list[tuple[Any, Any]] = []
        self.replay: list[tuple[Any, Any]] | None = None

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        """``Generator.integers``, recorded or replayed when it draws one number."""
        scalar = kwargs.get("size") is None and len(args) <= 2
        bounds = (args, tuple(sorted(kwargs.items())))
        if scalar and self.replay:
            was, value = self.replay.pop(0)
            if was == bounds:
                return value
            self.replay = []
        value = self._gen.integers(*args, **kwargs)
        if scalar and self.replay is None:
            self.recorded.append((bounds, value))
            del self.recorded[:-256]
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gen, name)


DRAWS = SizeDraws(GEN)


def forget_sizes() -> None:
    """Start recording the scalar integer draws afresh (before a check's first run)."""
    DRAWS.recorded.clear()
    DRAWS.replay = None


@contextlib.contextmanager
def same_sizes() -> Iterator[None]:
    """Inside the ``with`` block the scalar integer draws repeat those recorded since :func:`forget_sizes`, in order
    (then fresh ones): a check run again draws the same sizes and new values."""
    DRAWS.replay = list(DRAWS.recorded)
    try:
        yield
    finally:
        DRAWS.replay = None


__all__ = ["DRAWS", "GEN", "SizeDraws", "forget_sizes", "same_sizes"]
