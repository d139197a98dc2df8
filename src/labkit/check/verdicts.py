"""What a check function raises: :class:`Unsolved` (the answer is still the skeleton) or :class:`Failed` (wrong,
with its likely cause). Below :mod:`labkit.check.core`, which turns them into a :class:`~labkit.check.core.Result`
(and re-exports both), so that the modules core itself uses (the answer guard, the input comparisons) can raise
them without importing core."""

from __future__ import annotations

from ..errors import LabkitError

__all__ = ["Failed", "Unsolved"]


class Unsolved(LabkitError):
    """Raised inside a check when the answer is still the skeleton.

    A :class:`LabkitError`, so that if one ever reaches a notebook outside a check it shows as a message."""


class Failed(LabkitError):
    """Raised inside a check with the learner-facing explanation of what is wrong (and its likely ``cause``)."""

    def __init__(self, message: str, *, cause: str | None = None, show: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.show = show  # the ``labkit.show(...)`` call that draws the failing case, for a kernel
