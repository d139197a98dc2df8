"""The CSV gradebook an instructor downloads from the progress service's live page.

One row per learner and exercise tried: ``user, exercise, status, attempts, hints``. ``status`` is ``passed`` once
any attempt passed (a later failed re-run does not take the grade away), otherwise the last verdict (``failed`` or
``unsolved``). Rows come sorted by user, then exercise, so two downloads of the same data are byte-identical and a
spreadsheet or an LMS import sees a stable order. Learner names are written as text: a name that a spreadsheet
would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading
apostrophe, the usual guard against CSV formula injection.

The rows are what the learners' kernels reported: a learner holds their server's token and could post a record
by hand, so the gradebook shows progress, not proof of a solution. For marks, grade the submitted notebooks
(``labkit export --otter``, which runs each exercise's check afresh).

This module knows only the service's cells (any object with ``solved``, ``status``, ``attempts`` and ``hints``),
not its storage or its web app, so it is tested on its own and the service's route only calls it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .errors import LabkitError

#: The gradebook's header row, in order.
COLUMNS: tuple[str, ...] = ("user", "exercise", "status", "attempts", "hints")

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class CellLike(Protocol):
    """What the gradebook reads of one learner on one exercise (``labkit.progress_service.Cell`` has it)."""

    solved: bool
    status: str
    attempts: int
    hints: int


def _text(value: str) -> str:
    """``value`` safe to open in a spreadsheet: a leading formula character is quoted with an apostrophe."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def _valid(cells: Any, exercises: Any) -> set[str] | None:
    """``exercises`` as a set (None: keep all); a LabkitError when ``cells`` or ``exercises`` is not what the service has."""
    fix = "Pass the service's Store.cells(): user -> exercise -> Cell, and exercise ids as strings."
    if not isinstance(cells, Mapping) or not all(isinstance(u, str) and isinstance(per, Mapping) for u, per in cells.items()):
        raise LabkitError(f"the gradebook needs a mapping user -> exercise -> cell, not {type(cells).__name__}.", fix=fix)
    for per in cells.values():
        for ex, c in per.items():
            ok = isinstance(ex, str) and all(hasattr(c, a) for a in ("solved", "status", "attempts", "hints"))
            if not ok or not isinstance(c.status, str) or isinstance(c.attempts, bool) or not isinstance(c.attempts, int) \
                    or isinstance(c.hints, bool) or not isinstance(c.hints, int):
                raise LabkitError(f"the gradebook's cell for {ex!r} is not a progress cell ({type(c).__name__}).", fix=fix)
    if exercises is None:
        return None
    if isinstance(exercises, (str, bytes)) or not isinstance(exercises, Iterable):
        raise LabkitError(f"exercises must be a collection of exercise ids, not {type(exercises).__name__}.", fix=fix)
    items = list(exercises)
    if not all(isinstance(e, str) for e in items):
        raise LabkitError("exercises must be exercise ids (strings) such as '00.vector-add'.", fix=fix)
    return set(items)


def rows(cells: Mapping[str, Mapping[str, CellLike]], exercises: Iterable[str] | None = None) -> list[tuple[str, str, str, int, int]]:
    """The gradebook's rows from ``user -> exercise -> cell``, sorted by user and exercise.

    ``exercises``, when given, keeps only those ids (the course's current exercises)."""
    keep = _valid(cells, exercises)
    out = []
    for user in sorted(cells):
        for ex in sorted(cells[user]):
            if keep is not None and ex not in keep:
                continue
            c = cells[user][ex]
            out.append((user, ex, "passed" if c.solved else c.status, c.attempts, c.hints))
    return out


def to_csv(cells: Mapping[str, Mapping[str, CellLike]], exercises: Iterable[str] | None = None) -> str:
    """The gradebook as CSV text (header row first, ``\\r\\n`` line ends as RFC 4180 has them)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(COLUMNS)
    for user, ex, status, attempts, hints in rows(cells, exercises):
        writer.writerow((_text(user), ex, status, attempts, hints))
    return buf.getvalue()
