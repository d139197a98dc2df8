"""``labkit export --otter LAB``: a lab's checks as an Otter-Grader autograder, for a learning-management system.

Why Otter-Grader (https://otter-grader.readthedocs.io) and not nbgrader: labkit's checks already are the grader, and
Otter grades a submitted notebook by running it and then running plain Python test files against the notebook's
variables, one point per test case, with the failure's text as the learner's feedback. So each exercise becomes
one short test file that calls the same ``labkit.check`` function the notebook calls, and nothing of the course has
to change. nbgrader would instead need its own cell metadata in every notebook (``nbgrader`` ids, ``### BEGIN
SOLUTION`` blocks of its own, a release/collect database and a course directory), a second source of truth next to
``notebooks/src``. Otter grades in a Docker image (``otter grade``) and on Gradescope from the same
``autograder.zip``; it is maintained by UC Berkeley's Data Science Education Program and released regularly.

A submission is code written by a learner: never grade it in your own account (review 4, R4-2: one added cell wrote
into the grader's home and graded itself 1/1). Grade it with :mod:`labkit.classroom.grading` (a throwaway user, no
network, the homes emptied, only the learner's exercise cells run; ``sudo``) or with ``otter grade`` (Docker).

What the export writes into ``DIR`` (default ``build/otter/NN-topic/``)::

    tests/NN.short-name.py   one per exercise: 1 point, the check's report as feedback
    otter_config.json        Otter's grading settings (points, summary)
    autograder.zip           the autograder, made by Otter's own ``otter generate``
    NN-topic.ipynb           the learner notebook to hand out (the same file learners get from ``labkit lab``)

An instructor then grades a submission in the sandbox, ``sudo python -m labkit.classroom.grading --autograder
DIR/autograder.zip --handout DIR/NN-topic.ipynb --out results/ submission.ipynb`` (it runs Otter's ``otter run``
there). The notebook runs top to bottom in a fresh kernel (a cell that raises does not stop it), then each test evaluates the arguments
of the exercise's check call (taken from the lab's notebook, e.g. ``vector_add`` for
``labkit.check.vector_add(vector_add)``) in the notebook's variables and runs the check again with them. Grading
runs the checks again instead of trusting the output the notebook printed, so an edited or deleted check cell
changes nothing. As in any Otter autograder the tests share the kernel that ran the learner's exercise cells: a
cell written to subvert the check can still change its own score (the sandbox flags such cells for you to read).

Progress: the re-run check does not write the grader's progress file (``LABKIT_PROGRESS=off`` while it runs); set
``LABKIT_PROGRESS=off`` for ``otter run`` too, so the notebook's own check cells do not either.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.errors import LabkitError

__all__ = ["POINTS_PER_EXERCISE", "CheckCall", "NotPassed", "OtterExport", "check_calls", "export_otter", "grade_answer"]

#: Points per exercise.
POINTS_PER_EXERCISE = 1

_TEST_TEMPLATE = '''"""labkit exercise {exercise_id}: {title} ({points} point). Written by `labkit export --otter {lab}`:
the check labkit.check.{name} grades the notebook's own answer ({args})."""

from otter.test_files import test_case

OK_FORMAT = False  # Otter's exception-based test format
name = {exercise_id!r}
points = {points}


@test_case(points={points}, hidden=False)
def {func}(env):
    from labkit.export import grade_answer
    grade_answer(env, {exercise_id!r}, {args!r})
'''


class NotPassed(LabkitError, AssertionError):
    """An exercise did not pass in Otter's grading: the message is the learner's feedback (the check's report).
    An AssertionError too, which is what an Otter test case raises to fail."""


@dataclass(frozen=True)
class CheckCall:
    """One exercise's check call in a notebook: ``labkit.check.<name>(<args>)``."""

    exercise_id: str
    name: str  # the check function's public name
    args: str  # the call's arguments as written, e.g. "matmul, tile=MM_TILE"


@dataclass(frozen=True)
class OtterExport:
    """What :func:`export_otter` wrote."""

    lab_id: str
    folder: Path
    tests: tuple[Path, ...]
    autograder: Path
    notebook: Path

    @property
    def points(self) -> int:
        return POINTS_PER_EXERCISE * len(self.tests)


def _check_name(call: ast.Call) -> str | None:
    """``"vector_add"`` for a call ``labkit.check.vector_add(...)``, else None."""
    f = call.func
    if (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Attribute)
        and f.value.attr == "check"
        and isinstance(f.value.value, ast.Name)
        and f.value.value.id == "labkit"
    ):
        return f.attr
    return None


def check_calls(notebook: Path) -> list[CheckCall]:
    """Every exercise check call in ``notebook``'s code cells, in notebook order (hints and helpers left out)."""
    import nbformat

    from labkit import check

    try:
        nb = nbformat.read(str(notebook), as_version=4)
    except (OSError, ValueError) as exc:
        raise LabkitError(f"cannot read the notebook {notebook}: {exc}", fix="Give the path of a lab notebook.") from None
    calls: list[CheckCall] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (name := _check_name(node)) is None:
                continue
            exercise_id = getattr(getattr(check, name, None), "exercise_id", None) if not name.startswith("_") else None
            if exercise_id is None:  # hint(), run(), exercises(), solved_or_reference(): not an exercise's check
                continue
            text = ast.get_source_segment(source, node) or ""
            args = text[text.index("(") + 1 : text.rindex(")")].strip()
            calls.append(CheckCall(exercise_id, name, args))
    return calls


def _lab_calls(lab_id: str, notebook: Path) -> list[CheckCall]:
    """The lab's check calls, one per registered exercise; a LabkitError naming any exercise the notebook never checks."""
    from labkit import check

    ids = [row[0] for row in check.exercises(lab_id)]
    calls: dict[str, CheckCall] = {}
    for c in check_calls(notebook):
        calls.setdefault(c.exercise_id, c)
    missing = [ex for ex in ids if ex not in calls]
    if missing:
        raise LabkitError(
            f"{notebook.name} has no check call for {', '.join(missing)}.",
            fix="Each exercise needs its check cell `labkit.check.<name>(answer)` in the lab's notebook.",
        )
    return [calls[ex] for ex in ids]


def _test_source(call: CheckCall, title: str, lab_id: str) -> str:
    """The Otter test file (exception-based format) for one exercise."""
    func = "test_" + re.sub(r"\W", "_", call.exercise_id)
    return _TEST_TEMPLATE.format(
        exercise_id=call.exercise_id,
        title=title,
        points=POINTS_PER_EXERCISE,
        lab=lab_id,
        name=call.name,
        args=call.args,
        func=func,
    )


def export_otter(lab_id: str, root: Path, out: Path | None = None) -> OtterExport:
    """Write lab ``lab_id``'s Otter autograder under ``out`` (default ``root/build/otter/NN-topic``), from the
    course at ``root`` (the folder holding ``notebooks/``)."""
    from labkit import check, course

    for what, value in (("root", root), ("out", out)):
        if not isinstance(value, (str, os.PathLike)) and not (what == "out" and value is None):
            raise LabkitError(
                f"{what} must be a folder path, not {type(value).__name__}.",
                fix="Give the course folder (the one holding notebooks/) and, optionally, an output folder.",
            )
    if isinstance(lab_id, bool) or not isinstance(lab_id, (str, int)):
        raise LabkitError(
            f"the lab must be an id such as '00', not {type(lab_id).__name__}.", fix="Use e.g. labkit export --otter 00."
        )
    lab = course.lab(lab_id)
    notebook = Path(root) / "notebooks" / lab.filename
    if not notebook.is_file():
        raise LabkitError(f"lab {lab.id} has no notebook {notebook}.", fix="Run this inside the course repository.")
    titles = {row[0]: row[1] for row in check.exercises(lab.id)}
    calls = _lab_calls(lab.id, notebook)
    if not calls:
        raise LabkitError(
            f"lab {lab.id} has no exercises to grade.", fix="Export a lab with exercises (labkit progress lists them)."
        )
    folder = Path(out) if out is not None else Path(root) / "build" / "otter" / lab.notebook
    tests_dir = folder / "tests"
    if tests_dir.exists():
        shutil.rmtree(tests_dir)  # an export from an older version of the lab leaves no test behind
    tests_dir.mkdir(parents=True)
    tests = []
    for c in calls:
        path = tests_dir / f"{c.exercise_id}.py"
        path.write_text(_test_source(c, titles[c.exercise_id], lab.id))
        tests.append(path)
    config = folder / "otter_config.json"
    config.write_text(
        json.dumps(
            {"lang": "python", "points_possible": POINTS_PER_EXERCISE * len(calls), "show_stdout": False, "print_summary": True},
            indent=2,
        )
        + "\n"
    )
    handout = folder / lab.filename
    shutil.copyfile(notebook, handout)
    autograder = folder / "autograder.zip"
    _otter_generate(tests_dir, config, autograder)
    return OtterExport(lab.id, folder, tuple(tests), autograder, handout)


def _otter_generate(tests_dir: Path, config: Path, output: Path) -> None:
    """Zip the autograder with Otter's own ``otter generate``."""
    try:
        from otter.generate import main as generate
    except ImportError:
        raise LabkitError(
            "Otter-Grader is not installed in this environment.",
            fix="Install the course's dev extra: pip install -c constraints.txt -e '.[dev]'.",
        ) from None
    cwd = Path.cwd()
    os.chdir(tests_dir.parent)  # otter generate looks for requirements/environment files in the current folder
    try:
        generate(tests_dir=str(tests_dir), output_path=str(output), config=str(config), no_requirements=True, no_environment=True)
    finally:
        os.chdir(cwd)


def grade_answer(env: dict[str, Any], exercise_id: str, args: str) -> None:
    """In Otter's grading kernel: run exercise ``exercise_id``'s check on the arguments ``args`` evaluated in the
    submission's variables ``env``; :class:`NotPassed` carrying the check's report when it does not pass."""
    from labkit import check

    if not isinstance(env, dict) or not isinstance(exercise_id, str) or not isinstance(args, str):
        raise LabkitError(
            "grade_answer(env, exercise_id, args) takes the notebook's globals (a dict), an exercise id "
            "and the check call's arguments as text.",
            fix="It is called by the tests `labkit export --otter` writes.",
        )
    scope = dict(env)
    scope["__labkit_args__"] = lambda *a, **k: (a, k)
    try:
        answer, kwargs = eval(f"__labkit_args__({args})", scope)  # noqa: S307 - the course's own check-call text
    except NameError as exc:
        raise NotPassed(
            f"[NOT SOLVED YET] {exercise_id}: the notebook defines no {exc.name!r}, which this "
            f"exercise's check grades. Keep the exercise cell and its names as the lab gives them."
        ) from None
    except Exception as exc:  # noqa: BLE001 - a broken answer never crashes the grader
        raise NotPassed(f"[NOT SOLVED YET] {exercise_id}: the answer could not be read ({type(exc).__name__}: {exc}).") from None
    before = os.environ.get("LABKIT_PROGRESS")
    os.environ["LABKIT_PROGRESS"] = "off"
    try:
        result = check.run(exercise_id, *answer, **kwargs)
    finally:
        if before is None:
            os.environ.pop("LABKIT_PROGRESS", None)
        else:
            os.environ["LABKIT_PROGRESS"] = before
    if not result:
        raise NotPassed(result.report())


def add_cli(sub: Any) -> None:
    """Register ``labkit export`` on an argparse subparsers object."""
    p = sub.add_parser("export", help="export a lab for an LMS: labkit export --otter LAB (an Otter-Grader autograder)")
    p.add_argument("--otter", metavar="LAB", required=True, help="lab id, e.g. 00: its checks as an Otter autograder")
    p.add_argument("--out", type=Path, default=None, help="output folder (default build/otter/NN-topic)")


def cli(args: argparse.Namespace, root: Path) -> int:
    """``labkit export --otter LAB [--out DIR]``: write the autograder and say how to grade with it."""
    done = export_otter(args.otter, root, args.out)
    print(f"lab {done.lab_id}: {len(done.tests)} exercise(s), {done.points} point(s)")
    print(f"  autograder: {done.autograder}")
    print(f"  hand out:   {done.notebook}")
    print(
        "grade submissions in a sandbox (a throwaway user, no network; never in your own account): sudo "
        f"{sys.executable} -m labkit.classroom.grading --autograder {done.autograder} --handout {done.notebook} "
        "--out results/ SUBMISSION.ipynb ..."
    )
    return 0
