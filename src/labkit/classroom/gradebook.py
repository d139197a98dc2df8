"""The CSV gradebook an instructor downloads from the progress service's live page.

One row per learner and exercise: ``user, exercise, self-reported progress, attempts, hints, grade, out of``.

``self-reported progress`` is what the learner's kernel posted: ``passed`` once any attempt passed (a later failed
re-run does not take it away), otherwise the last verdict (``failed`` or ``unsolved``). It is never a grade: a
learner holds their server's token and can post ``passed`` for every exercise with one notebook cell.

``grade`` and ``out of`` come only from Otter-Grader's results for the learner's submitted notebook, graded by the
instructor outside the learner's control (``labkit export --otter``, then ``otter run`` / ``otter grade``, which run
each exercise's check afresh): :func:`read_otter_results` reads them. Without results the grade is empty. Import
``grade`` into an LMS, never the progress column (course/classroom.md, "Grades for an LMS"). Rows come sorted by user, then exercise, so two downloads of the same data are byte-identical and a
spreadsheet or an LMS import sees a stable order. Learner names are written as text: a name that a spreadsheet
would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading
apostrophe, the usual guard against CSV formula injection.


This module knows only the service's cells (any object with ``solved``, ``status``, ``attempts`` and ``hints``),
not its storage or its web app, so it is tested on its own and the service's route only calls it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from labkit.errors import LabkitError

#: The gradebook's header row, in order.
COLUMNS: tuple[str, ...] = ("user", "exercise", "self-reported progress", "attempts", "hints", "grade", "out of")
#: Grades as :func:`read_otter_results` gives them: user -> exercise -> (score, max score).
Grades = Mapping[str, Mapping[str, tuple[float, float]]]

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
            if (
                not ok
                or not isinstance(c.status, str)
                or isinstance(c.attempts, bool)
                or not isinstance(c.attempts, int)
                or isinstance(c.hints, bool)
                or not isinstance(c.hints, int)
            ):
                raise LabkitError(f"the gradebook's cell for {ex!r} is not a progress cell ({type(c).__name__}).", fix=fix)
    if exercises is None:
        return None
    if isinstance(exercises, (str, bytes)) or not isinstance(exercises, Iterable):
        raise LabkitError(f"exercises must be a collection of exercise ids, not {type(exercises).__name__}.", fix=fix)
    items = list(exercises)
    if not all(isinstance(e, str) for e in items):
        raise LabkitError("exercises must be exercise ids (strings) such as '00.vector-add'.", fix=fix)
    return set(items)


Row = tuple[str, str, str, Any, Any, Any, Any]


def rows(
    cells: Mapping[str, Mapping[str, CellLike]], exercises: Iterable[str] | None = None, grades: Grades | None = None
) -> list[Row]:
    """The gradebook's rows from ``user -> exercise -> cell`` and Otter's ``grades``, sorted by user and exercise.

    ``exercises``, when given, keeps only those ids (the course's current exercises). A pair with a grade but no
    progress record still has its row (progress and attempts empty); a pair without a grade has an empty grade."""
    keep = _valid(cells, exercises)
    grades = grades or {}
    out: list[Row] = []
    for user in sorted(set(cells) | set(grades)):
        mine, graded = cells.get(user, {}), grades.get(user, {})
        for ex in sorted(set(mine) | set(graded)):
            if keep is not None and ex not in keep:
                continue
            c = mine.get(ex)
            score, possible = graded.get(ex, ("", ""))
            if c is None:
                out.append((user, ex, "", "", "", score, possible))
            else:
                out.append((user, ex, "passed" if c.solved else c.status, c.attempts, c.hints, score, possible))
    return out


def to_csv(
    cells: Mapping[str, Mapping[str, CellLike]], exercises: Iterable[str] | None = None, grades: Grades | None = None
) -> str:
    """The gradebook as CSV text (header row first, CRLF line ends as RFC 4180 has them)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(COLUMNS)
    for user, *rest in rows(cells, exercises, grades):
        writer.writerow((_text(user), *rest))
    return buf.getvalue()


def read_otter_results(folder: str | Path) -> dict[str, dict[str, tuple[float, float]]]:
    """Grades from Otter's ``results.json`` files in ``folder``: ``<user>.json`` or ``<user>/results.json``, one per
    learner's submission, as the instructor's ``otter run`` wrote them. Returns user -> exercise -> (score, max)."""
    if not isinstance(folder, (str, Path)) or not str(folder):
        raise LabkitError(
            f"folder must be the path of a folder of Otter results, got {folder!r}.",
            fix="Pass the folder `otter run -o` wrote, e.g. read_otter_results('graded/').",
        )
    folder = Path(folder)
    if not folder.is_dir():
        raise LabkitError(
            f"{folder} is not a folder of Otter results.",
            fix="Grade each submission in the sandbox: sudo python -m labkit.classroom.grading ... --out <folder>.",
        )
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for path in sorted([*folder.glob("*.json"), *folder.glob("*/results.json")]):
        user = path.parent.name if path.name == "results.json" else path.stem
        try:
            tests = json.loads(path.read_text())["tests"]
            out[user] = {str(t["name"]): (float(t["score"]), float(t["max_score"])) for t in tests}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LabkitError(
                f"{path} is not an Otter results.json ({exc}).", fix="Use the results.json that `otter run` writes, unchanged."
            ) from None
    return out


def _progress_from_csv(text: str) -> dict[str, dict[str, Any]]:
    """The cells of a gradebook CSV the service served (its progress columns), as :func:`rows` reads them."""
    from types import SimpleNamespace

    out: dict[str, dict[str, Any]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        user = r["user"][1:] if r["user"].startswith("'") and r["user"][1:].startswith(_FORMULA_START) else r["user"]
        status = r.get("self-reported progress", "")
        if not status:
            continue
        out.setdefault(user, {})[r["exercise"]] = SimpleNamespace(
            solved=status == "passed", status=status, attempts=int(r["attempts"]), hints=int(r["hints"])
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.gradebook --otter RESULTS [--progress labkit-gradebook.csv]``: the gradebook with Otter's
    grades (``RESULTS/<user>/results.json`` or ``RESULTS/<user>.json``), and the self-reported progress beside them
    when the service's CSV is given, on standard output. Import its ``grade`` column into the LMS."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m labkit.gradebook", description=main.__doc__)
    p.add_argument("--otter", required=True, help="folder of Otter results.json files, one per learner")
    p.add_argument("--progress", help="the live page's CSV (self-reported progress), to show beside the grades")
    args = p.parse_args(argv)
    try:
        grades = read_otter_results(args.otter)
        cells = _progress_from_csv(Path(args.progress).read_text()) if args.progress else {}
    except (LabkitError, OSError, KeyError, ValueError) as exc:
        print(f"labkit gradebook: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(to_csv(cells, None, grades))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
