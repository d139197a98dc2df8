"""The exercise registry, check results and levelled hints.

An exercise is registered with :func:`exercise`; its check function takes the learner's answer (a kernel,
a function or a value) and returns a :class:`Result`. A check never raises for a wrong answer: it reports
what is wrong and the result's truth value says pass or fail. An answer still at its skeleton (``...``, a
function raising ``NotImplementedError``, a kernel that writes nothing) is reported as "not solved yet".

``LABKIT_EXPECT=solved`` (solution notebooks under test) or ``LABKIT_EXPECT=unsolved`` (learner notebooks
under test) turns a result that disagrees into an ``AssertionError``, so the test suite proves each check
accepts the solution and rejects the skeleton.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from ..errors import LabkitError

Status = Literal["passed", "failed", "unsolved"]
Kind = Literal["kernel", "code", "numeric"]
KINDS: tuple[str, ...] = ("kernel", "code", "numeric")


class Unsolved(Exception):
    """Raised inside a check when the answer is still the skeleton."""


class Failed(Exception):
    """Raised inside a check with the learner-facing explanation of what is wrong."""

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class Result:
    """Outcome of one check: ``bool(result)`` is True only when it passed."""

    exercise_id: str
    status: Status
    message: str
    cause: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.status == "passed"

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def report(self) -> str:
        """The text shown to the learner."""
        mark = {"passed": "PASSED", "failed": "NOT YET", "unsolved": "NOT SOLVED YET"}[self.status]
        lines = [f"[{mark}] {self.exercise_id}: {self.message}"]
        if self.cause:
            lines.append(f"  Likely cause: {self.cause}")
        if self.status != "passed":
            lines.append(f"  Hint: labkit.check.hint({self.exercise_id!r})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<check {self.exercise_id}: {self.status}>"

    def _ipython_display_(self) -> None:
        """Show nothing in a notebook: the check already printed its report when it ran. (A trailing ``;`` does
        not hide a value everywhere: nbval, for one, runs cells without history and would show it.)"""


@dataclass
class Exercise:
    """A registered exercise: its id, title, check function, hints and reference answer."""

    exercise_id: str
    title: str
    check: Callable[..., str]
    hints: tuple[str, ...]
    reference: Callable[[], Any] | None = None
    gpu_only: bool = False
    kind: Kind | None = None  # kernel: a GPU kernel; code: host code; numeric: a figure reasoned out


_REGISTRY: dict[str, Exercise] = {}
_HINT_LEVEL: dict[str, int] = {}
_LAST: dict[str, Result] = {}


def exercise(
    exercise_id: str,
    *,
    title: str,
    hints: list[str] | tuple[str, ...],
    reference: Callable[[], Any] | None = None,
    kind: Kind | None = None,
) -> Callable[[Callable[..., str]], Callable[..., Result]]:
    """Register a check. The decorated function raises :class:`Unsolved` or :class:`Failed`, or returns
    the success message; the wrapper turns that into a printed :class:`Result`.

    ``reference`` returns labkit's own answer, which later cells use when the learner's is not there yet.
    ``kind`` says what the learner writes: ``"kernel"`` (a GPU kernel), ``"code"`` (host code: streams,
    measurement, a model in code) or ``"numeric"`` (a figure reasoned out).
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"exercise {exercise_id!r}: kind must be one of {KINDS}, not {kind!r}")

    def decorate(fn: Callable[..., str]) -> Callable[..., Result]:
        if exercise_id in _REGISTRY:
            raise ValueError(f"exercise id {exercise_id!r} registered twice")
        _REGISTRY[exercise_id] = Exercise(exercise_id, title, fn, tuple(hints), reference, kind=kind)

        def run_check(*args: Any, **kwargs: Any) -> Result:
            return _run(exercise_id, *args, **kwargs)

        run_check.__name__ = fn.__name__
        run_check.__doc__ = f"Check exercise {exercise_id} ({title}).\n\n{fn.__doc__ or ''}"
        run_check.exercise_id = exercise_id  # type: ignore[attr-defined]
        return run_check

    return decorate


def is_skeleton(answer: Any) -> bool:
    """True for the skeleton placeholders the notebooks use: ``...`` or ``None``."""
    return answer is Ellipsis or answer is None


def _run(exercise_id: str, *args: Any, **kwargs: Any) -> Result:
    ex = _get(exercise_id)
    _take_launched()
    if any(is_skeleton(a) for a in args) or any(is_skeleton(v) for v in kwargs.values()):
        result = Result(exercise_id, "unsolved", "the answer is still the skeleton (`...`); fill it in and run the check again.")
    else:
        try:
            message = ex.check(*args, **kwargs)
            result = Result(exercise_id, "passed", message or "correct.")
        except Unsolved as exc:
            result = Result(exercise_id, "unsolved", str(exc) or "not solved yet.")
        except NotImplementedError:
            result = Result(exercise_id, "unsolved", "the function still raises NotImplementedError; write its body.")
        except Failed as exc:
            result = Result(exercise_id, "failed", str(exc), cause=exc.cause)
        except LabkitError as exc:
            result = Result(exercise_id, "failed", str(exc))
    _LAST[exercise_id] = result
    _record_progress(exercise_id, result)
    print(result.report())
    _enforce_expectation(result)
    if result.passed and os.environ.get("LABKIT_PTX_AUDIT"):
        _ptx_audit(exercise_id, os.environ["LABKIT_PTX_AUDIT"].split(","))
    return result


def _record_progress(exercise_id: str, result: Result) -> None:
    """Append the result to the learner's progress (labkit.progress); a progress failure never fails a check."""
    try:
        from .. import progress

        progress.record_result(exercise_id, result)
    except Exception:  # noqa: BLE001
        pass


def _take_launched() -> list[tuple[Any, str]]:
    if "labkit.check.harness" not in sys.modules:  # no kernel can have been launched through it
        return []
    return sys.modules["labkit.check.harness"].take_launched()


def _ptx_audit(exercise_id: str, arches: list[str]) -> None:
    """``LABKIT_PTX_AUDIT=sm_70,sm_80,sm_90`` (set by the solution-notebook tests): every kernel a passing check
    launched must also compile to PTX for each architecture, with the argument types it was launched with."""
    from .. import ptx
    from ..errors import CompileError

    for kernel, signature in _take_launched():
        for arch in arches:
            try:
                ptx.compile(kernel, signature, arch.strip())
            except CompileError as exc:
                raise AssertionError(f"{exercise_id}: the kernel passed its check but does not compile for {arch}: {exc}") from None


def _enforce_expectation(result: Result) -> None:
    expect = os.environ.get("LABKIT_EXPECT", "")
    if expect == "solved" and not result.passed:
        raise AssertionError(f"LABKIT_EXPECT=solved but {result.exercise_id} did not pass: {result.message}")
    if expect == "unsolved" and result.status != "unsolved":
        raise AssertionError(f"LABKIT_EXPECT=unsolved but {result.exercise_id} reported {result.status}: {result.message}")


def _get(exercise_id: str) -> Exercise:
    _load_all()
    try:
        return _REGISTRY[exercise_id]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(exercise_id, _REGISTRY, n=3)
        suggestion = f" Did you mean {', '.join(close)}?" if close else ""
        raise LabkitError(
            f"there is no exercise {exercise_id!r}.{suggestion}",
            fix="labkit.check.exercises() lists them all.",
        ) from None


def run(exercise_id: str, *answer: Any, **kwargs: Any) -> Result:
    """Check ``answer`` for the exercise ``exercise_id``, print the report and return the :class:`Result`."""
    return _run(exercise_id, *answer, **kwargs)


def exercises(lab: str | None = None) -> list[tuple[str, str, str]]:
    """``(id, title, last status)`` for every exercise, or those whose id starts with ``lab``."""
    _load_all()
    rows = []
    for ex_id, ex in sorted(_REGISTRY.items()):
        if lab is None or ex_id.startswith(lab):
            last = _LAST.get(ex_id)
            rows.append((ex_id, ex.title, last.status if last is not None else "not run"))
    return rows


def hint(exercise_id: str, level: int | None = None) -> None:
    """Show the next hint for an exercise (or hint number ``level``, from 1). Hints go from a nudge to the answer's shape."""
    ex = _get(exercise_id)
    if level is None:
        level = min(_HINT_LEVEL.get(exercise_id, 0) + 1, len(ex.hints))
    if not 1 <= level <= len(ex.hints):
        raise LabkitError(f"{exercise_id} has hints 1 to {len(ex.hints)}, not {level}.")
    _HINT_LEVEL[exercise_id] = level
    more = " (that is the last one)" if level == len(ex.hints) else " (run again for the next)"
    print(f"Hint {level}/{len(ex.hints)}{more}: {ex.hints[level - 1]}")


def solved_or_reference(exercise_id: str, answer: Any) -> Any:
    """The learner's answer if its last check passed, otherwise labkit's reference (and say so)."""
    ex = _get(exercise_id)
    last = _LAST.get(exercise_id)
    if last is not None and last.passed:
        return answer
    if ex.reference is None:
        raise LabkitError(f"{exercise_id} has no reference answer to fall back on.")
    print(f"(Using labkit's reference answer for {exercise_id} below, since yours has not passed its check yet.)")
    return ex.reference()


def _load_all() -> None:
    """Import every lab's check module so the registry is complete."""
    import importlib

    importlib.import_module(f"{__package__}._labs")
