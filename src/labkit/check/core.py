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
from .verdicts import Failed, Unsolved

Status = Literal["passed", "failed", "unsolved"]
Kind = Literal["kernel", "code", "numeric"]
KINDS: tuple[str, ...] = ("kernel", "code", "numeric")


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
        if self.details.get("show"):
            lines.append(f"  See what each thread read and wrote: {self.details['show']}")
        if self.details.get("note"):
            lines.append(f"  Note: {self.details['note']}")
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


def _distinct_reference(factory: Callable[[], Any] | None, exercise_id: str) -> Callable[[], Any] | None:
    """The reference factory, handing out a labkit-side function where the reference is the function the check
    compares with (answers_guard.reference_answer), so that function itself is never accepted as a learner's answer."""
    if factory is None:
        return None

    def reference(_factory: Callable[[], Any] = factory, _id: str = exercise_id) -> Any:
        from .answers_guard import reference_answer
        from .provenance import mark_labkit_made

        return mark_labkit_made(reference_answer(_id, _factory()))

    return reference


def _marking_factory(factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory`` made to remember what it returns as labkit's own reference (``provenance.mark_labkit_made``); a
    module-level factory is replaced by the marking one in its module too, so a direct call (labkit's tests grade
    ``lab06._reference_decode_fp16()``) is marked as well. A copy of what it made is not marked: that is the point."""
    import functools

    from .provenance import mark_labkit_made

    @functools.wraps(factory)
    def marking() -> Any:
        return mark_labkit_made(factory())

    module = sys.modules.get(getattr(factory, "__module__", "") or "")
    name = getattr(factory, "__name__", "")
    if module is not None and name.isidentifier() and getattr(module, name, None) is factory:
        setattr(module, name, marking)
    return marking


def exercise_data(exercise_id: str) -> dict[str, Any]:
    """``exercise_id``'s entry in ``labkit/data/exercises.yml`` (read once): its ``title`` and ``hints``, and for
    some exercises the data their checks read (fixed ``cases``, ``slips``)."""
    global _TEXTS
    if _TEXTS is None:
        from importlib import resources

        import yaml

        text = resources.files("labkit").joinpath("data/exercises.yml").read_text(encoding="utf-8")
        _TEXTS = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}  # libyaml's loader where built
    try:
        return _TEXTS[exercise_id]
    except KeyError:
        raise ValueError(f"exercise {exercise_id!r} has no entry in labkit/data/exercises.yml") from None


_TEXTS: dict[str, dict[str, Any]] | None = None


def exercise(
    exercise_id: str,
    *,
    reference: Callable[[], Any] | None = None,
    kind: Kind | None = None,
) -> Callable[[Callable[..., str]], Callable[..., Result]]:
    """Register a check. The decorated function raises :class:`Unsolved` or :class:`Failed`, or returns
    the success message; the wrapper turns that into a printed :class:`Result`.

    ``reference`` returns labkit's own answer, which later cells use when the learner's is not there yet.
    ``kind`` says what the learner writes: ``"kernel"`` (a GPU kernel), ``"code"`` (host code: streams,
    measurement, a model in code) or ``"numeric"`` (a figure reasoned out). The exercise's ``title`` and
    ``hints`` (nudge first, near-answer last) are its entry in ``labkit/data/exercises.yml``.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"exercise {exercise_id!r}: kind must be one of {KINDS}, not {kind!r}")
    texts = exercise_data(exercise_id)
    title, hints = texts["title"], texts["hints"]
    if reference is not None:
        reference = _marking_factory(reference)

    def decorate(fn: Callable[..., str]) -> Callable[..., Result]:
        if exercise_id in _REGISTRY:
            raise ValueError(f"exercise id {exercise_id!r} registered twice")
        _REGISTRY[exercise_id] = Exercise(
            exercise_id, title, fn, tuple(hints), _distinct_reference(reference, exercise_id), kind=kind
        )

        def run_check(*args: Any, **kwargs: Any) -> Result:
            return _run(exercise_id, *args, **kwargs)

        run_check.__name__ = fn.__name__
        run_check.__doc__ = f"Check exercise {exercise_id} ({title}).\n\n{fn.__doc__ or ''}"
        run_check.exercise_id = exercise_id  # type: ignore[attr-defined]
        return run_check

    return decorate


def is_skeleton(answer: Any) -> bool:
    """True for the skeleton placeholder the notebooks use: ``...``."""
    return answer is Ellipsis


def _wrong_call(ex: Exercise, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What is wrong with how the check was called (number or names of arguments, None passed), or None."""
    import inspect

    try:
        params = inspect.signature(ex.check)
    except (TypeError, ValueError):
        return None
    name = f"labkit.check.{ex.check.__name__}"
    wanted = ", ".join(p.name for p in params.parameters.values())
    try:
        params.bind(*args, **kwargs)
    except TypeError as exc:
        return f"{name}({wanted}) was called with {len(args)} argument(s) ({exc}): pass {wanted}."
    for value in (*args, *kwargs.values()):
        if value is None:
            return (
                f"{name}({wanted}) got None. If you passed the result of a call (launching a kernel, "
                "`kernel[blocks, threads](...)`, returns None; so does a function without `return`), pass the "
                "kernel or function itself, or return the value."
            )
    return None


def _run(exercise_id: str, *args: Any, **kwargs: Any) -> Result:
    from ..sim.errors import KernelFault
    from ..sim.limits import PythonTimeout, python_time_limit
    from . import properties
    from .answers_guard import AnswerRejected, guard_answer, take_input_change

    ex = _get(exercise_id)
    _RUNNING[:] = [ex.exercise_id]
    take_input_change()  # nothing left over from an earlier check
    properties.forget()
    _take_launched()
    problem = _wrong_call(ex, args, kwargs)
    rejected: AnswerRejected | None = None
    try:
        args = tuple(guard_answer(exercise_id, a, ex.reference) for a in args)
        kwargs = {k: guard_answer(exercise_id, v, ex.reference) for k, v in kwargs.items()}
    except AnswerRejected as exc:
        rejected = exc
    if any(is_skeleton(a) for a in args) or any(is_skeleton(v) for v in kwargs.values()):
        result = Result(exercise_id, "unsolved", "the answer is still the skeleton (`...`); fill it in and run the check again.")
    elif problem:
        result = Result(exercise_id, "failed", problem)
    elif rejected is not None:
        result = Result(exercise_id, "failed", str(rejected), cause=rejected.cause)
    else:
        try:
            with python_time_limit():
                message = ex.check(*args, **kwargs)
                if ex.kind in ("code", "numeric") and len(args) + len(kwargs) == 1:  # one function answer
                    (answer,) = (*args, *kwargs.values())
                    if getattr(answer, "__labkit_guarded__", False):
                        from .answers_guard import IN_PLACE

                        properties.check_host_answer(
                            exercise_id, answer, ex.reference, in_place=ex.exercise_id in IN_PLACE, check=ex.check
                        )
                        short = properties.shortfall()
                        if short:
                            message = f"{(message or 'correct.').rstrip()} But {short}."
            changed = take_input_change()
            if changed is not None:
                raise changed
            note = _build_for_gpu(exercise_id)
            result = Result(exercise_id, "passed", message or "correct.", details={"note": note} if note else {})
        except Unsolved as exc:
            result = Result(exercise_id, "unsolved", str(exc) or "not solved yet.")
        except NotImplementedError:
            result = Result(exercise_id, "unsolved", "the function still raises NotImplementedError; write its body.")
        except Failed as exc:
            cause = exc.cause
            if ex.kind in ("code", "numeric"):  # a wrong result that is an earlier call's: a cache, or args ignored
                answer = (*args, *kwargs.values())[0] if len(args) + len(kwargs) == 1 else None
                try:  # it calls the answer again on a few arguments: under the time limit of learner code
                    with python_time_limit(2.0):
                        again = properties.repeated_result_cause(properties.history(), ex.reference, answer)
                except (PythonTimeout, AnswerRejected):
                    again = None
                cause = f"{cause.rstrip().rstrip('.')}. And {again}" if cause and again else again or cause
            result = Result(exercise_id, "failed", str(exc), cause=cause, details={"show": exc.show} if exc.show else {})
        except AnswerRejected as exc:  # the answer called labkit's reference, or changed an input it was given
            result = Result(exercise_id, "failed", str(exc), cause=exc.cause)
        except AuditFailure:
            raise
        except (KernelFault, PythonTimeout) as exc:  # the time limit of the learner's Python code, or a kernel fault
            result = Result(exercise_id, "failed", str(exc), cause=exc.cause)
        except LabkitError as exc:
            result = Result(exercise_id, "failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - the answer broke the check in a way it does not foresee
            from .causes import plain_words

            first = plain_words((str(exc).strip().splitlines() or [""])[0][:300])
            result = Result(
                exercise_id,
                "failed",
                f"the check could not use this answer: {type(exc).__name__}: {first}",
                cause="an answer of another kind than the exercise asks for (a kernel, a function, a number: "
                "see the exercise's statement), or an error inside your code.",
            )
    from .causes import plain_words

    result.message = plain_words(result.message)  # no internal class name (FakeCUDAArray, TrackedArray) is shown
    result.cause = plain_words(result.cause) if result.cause else result.cause
    _LAST[exercise_id] = result
    _record_progress(exercise_id, result)
    print(result.report())
    _enforce_expectation(result)
    return result


_RUNNING: list[str] = []  # the exercise whose check runs now (the last one run)


def running_exercise() -> str | None:
    """The id of the exercise whose check is running (or ran last), for words that depend on it."""
    return _RUNNING[0] if _RUNNING else None


def _record_progress(exercise_id: str, result: Result) -> None:
    """Append the result to the learner's progress (labkit.progress); a progress failure never fails a check."""
    try:
        from .. import progress

        progress.record(exercise_id, str(result.status), hints=int(_HINT_LEVEL.get(exercise_id, 0)))
    except Exception:  # noqa: BLE001
        pass


def _take_launched() -> list[tuple[Any, str]]:
    if "labkit.check.harness" not in sys.modules:  # no kernel can have been launched through it
        return []
    return sys.modules["labkit.check.harness"].take_launched()


class AuditFailure(AssertionError):
    """A kernel a solution's check accepted does not compile for an architecture of ``LABKIT_PTX_AUDIT`` (tests only)."""


GPU_BUILD_ARCH = "sm_80"  # in sim mode every kernel a check accepts is also built for this GPU architecture


def _fp64_note(exercise_id: str, kernel: Any, signature: str, built: Any) -> str | None:
    """The likely cause of a slow kernel that the values cannot show: ``built`` (its PTX) has FP64 instructions where
    labkit's reference kernel, built for the same argument types, has none. Python float literals are float64 in
    Numba, so ``0.5 * x`` or ``acc = 0.0`` compute in FP64."""
    lines = built.fp64() if hasattr(built, "fp64") else []
    if not lines:  # one rule for every lab's Numba kernels, as 02.float32 teaches
        return None
    from labkit.cuda import ptx

    from ..errors import CompileError

    ex = _REGISTRY.get(exercise_id)
    try:
        refs = ex.reference() if ex is not None and ex.reference is not None else None
    except Exception:  # noqa: BLE001 - no note rather than an error
        return None
    refs = refs if isinstance(refs, tuple) else (refs,)
    wanted = getattr(getattr(kernel, "py_func", None), "__code__", None)
    for ref in refs:
        code = getattr(getattr(ref, "py_func", None), "__code__", None)
        if code is None or wanted is None or code.co_argcount != wanted.co_argcount:
            continue
        try:
            if ptx.compile(ref, signature, GPU_BUILD_ARCH).fp64():
                return None
        except (CompileError, LabkitError):
            continue
        from .. import hw

        example = lines[0].split(None, 1)[0].rstrip(";")
        slow = hw.arithmetic_rates("sm_89")
        return (
            f"the values are right, but the kernel's PTX has {len(lines)} FP64 instruction(s) (`{example}`, ...) "
            "where labkit's reference has none: a Python float literal (`0.5`, `acc = 0.0`, `... else 0.0`) is "
            "a float64, so Numba computes that expression in FP64, which on GPUs outside the HPC line runs at a "
            f"fraction of the FP32 rate (1/{round(1 / slow.fp64_fraction)} on {slow.gpus}: "
            "labkit.hw.arithmetic_rates). Write the literals as np.float32(...)."
        )
    return None


def _build_for_gpu(exercise_id: str) -> str | None:
    """In ``sim`` mode, build every kernel the check launched with Numba's real CUDA compiler, for the argument types
    it was launched with, so that a pass in the simulator means the kernel also builds for a GPU; raise
    :class:`Failed` with the compiler's reason and line if not. ``LABKIT_PTX_AUDIT=sm_70,sm_80,sm_90`` (set by the
    solution-notebook tests) builds for each of those architectures instead and raises AssertionError.
    Returns a note for the passed result (FP64 where the reference has none: :func:`_fp64_note`), or None."""
    from ..mode import current_mode

    launched = _take_launched()
    if current_mode() != "sim" or not launched:
        return None
    from labkit.cuda import ptx

    from ..errors import CompileError

    # the audit's architectures that the installed toolchain targets (NVRTC 13, and so Numba on it, dropped sm_70)
    audit = ptx.targetable([a.strip() for a in os.environ.get("LABKIT_PTX_AUDIT", "").split(",") if a.strip()])[0]
    note = None
    for kernel, signature in launched:
        for arch in audit or [GPU_BUILD_ARCH]:
            try:
                built = ptx.compile(kernel, signature, arch)
                if note is None and arch == GPU_BUILD_ARCH:
                    note = _fp64_note(exercise_id, kernel, signature, built)
            except CompileError as exc:
                if audit:
                    raise AuditFailure(
                        f"{exercise_id}: the kernel passed its check but does not compile for {arch}: {exc}"
                    ) from None
                raise Failed(
                    f"the kernel gives the right values in the simulator, but it does not build for a GPU: {exc}",
                    cause="the simulator runs kernels as Python; a GPU runs only what Numba's CUDA compiler "
                    "accepts. Fix the line it names.",
                ) from None
    return note


def _enforce_expectation(result: Result) -> None:
    expect = os.environ.get("LABKIT_EXPECT", "")
    if expect == "solved" and not result.passed:
        raise AssertionError(f"LABKIT_EXPECT=solved but {result.exercise_id} did not pass: {result.message}")
    if expect == "unsolved" and result.status != "unsolved":
        raise AssertionError(f"LABKIT_EXPECT=unsolved but {result.exercise_id} reported {result.status}: {result.message}")


def _get(exercise_id: Any) -> Exercise:
    _load_all()
    exercise_id = getattr(exercise_id, "exercise_id", exercise_id)  # a check function stands for its exercise
    if not isinstance(exercise_id, str):
        raise LabkitError(
            f"an exercise is named by its id, a string such as '02.saxpy', not by a {type(exercise_id).__name__}.",
            fix="labkit.check.exercises() lists the ids; the check cell of each exercise shows its id too.",
        )
    key = exercise_id.strip()
    if key not in _REGISTRY:  # ids are matched case-insensitively: hint("02.SAXPY") is 02.saxpy
        key = next((k for k in _REGISTRY if k.lower() == key.lower()), key)
    try:
        return _REGISTRY[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(key.lower(), _REGISTRY, n=3)
        suggestion = f" Did you mean {', '.join(close)}?" if close else ""
        raise LabkitError(
            f"there is no exercise {exercise_id!r}.{suggestion}",
            fix="labkit.check.exercises() lists them all.",
        ) from None


def run(exercise_id: str, *answer: Any, **kwargs: Any) -> Result:
    """Check ``answer`` for the exercise ``exercise_id``, print the report and return the :class:`Result`."""
    return _run(exercise_id, *answer, **kwargs)


class ExerciseList(list):
    """The exercises as ``(id, title, last status)`` rows, shown as a table (with each exercise's kind)."""

    def __repr__(self) -> str:
        if not self:
            return "(no exercises)"
        width = max(len(r[0]) for r in self)
        lines = [f"{'exercise':<{width}}  {'kind':<7}  {'status':<14}  title"]
        for ex_id, title, status in self:
            kind = _REGISTRY[ex_id].kind or "-" if ex_id in _REGISTRY else "-"
            lines.append(f"{ex_id:<{width}}  {kind:<7}  {status:<14}  {title}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _lab_prefix(lab: Any) -> str:
    """``3``, ``"3"``, ``"03"``, ``"lab03"``, ``"Lab 03"`` all mean the prefix ``"03."``."""
    import re

    if isinstance(lab, bool) or not isinstance(lab, (int, str)):
        raise LabkitError(f"exercises() takes a lab number such as 3 or '03', not a {type(lab).__name__}.")
    text = str(lab).strip().lower()
    m = re.fullmatch(r"(?:lab\s*)?(\d{1,2})\.?", text)
    if not m:
        raise LabkitError(f"there is no lab {lab!r}.", fix="Give a lab number from 0 to 9, e.g. exercises(3) or exercises('03').")
    return f"{int(m.group(1)):02d}."


def exercises(lab: int | str | None = None) -> ExerciseList:
    """Every exercise (or lab ``lab``'s: ``3``, ``'03'`` or ``'lab03'``) as ``(id, title, last status)`` rows."""
    _load_all()
    prefix = None if lab is None else _lab_prefix(lab)
    rows = ExerciseList()
    for ex_id, ex in sorted(_REGISTRY.items()):
        if prefix is None or ex_id.startswith(prefix):
            last = _LAST.get(ex_id)
            rows.append((ex_id, ex.title, last.status if last is not None else "not run"))
    if prefix is not None and not rows:
        raise LabkitError(f"lab {prefix[:2]} has no exercises.", fix="exercises() with no argument lists them all.")
    return rows


def hint(exercise_id: Any, level: int | None = None) -> None:
    """Show the next hint for an exercise (or hint number ``level``, from 1). Hints go from a nudge to the answer's shape."""
    ex = _get(exercise_id)
    n = len(ex.hints)
    if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
        raise LabkitError(f"the hint level is a number from 1 to {n}, not {level!r}.")
    shown = _HINT_LEVEL.get(ex.exercise_id, 0)
    if level is None:
        if shown >= n:
            print(f"That was the last hint for {ex.exercise_id} ({n} of {n}). Here it is again: {ex.hints[-1]}")
            return
        level = shown + 1
    if not 1 <= level <= n:
        raise LabkitError(f"{ex.exercise_id} has hints 1 to {n}, not {level}.")
    _HINT_LEVEL[ex.exercise_id] = max(shown, level)
    more = " (that is the last one)" if level == n else " (run again for the next)"
    print(f"Hint {level}/{n}{more}: {ex.hints[level - 1]}")


def solved_or_reference(exercise_id: str, answer: Any) -> Any:
    """The learner's answer if its last check passed, otherwise labkit's reference (and say so)."""
    ex = _get(exercise_id)
    last = _LAST.get(exercise_id)
    if last is not None and last.passed:
        return answer
    if ex.reference is None:
        raise LabkitError(f"{exercise_id} has no reference answer to fall back on.")
    print(f"(Using labkit's reference answer for {exercise_id} below, since yours has not passed its check yet.)")
    from .answers_guard import mark_handed_out

    return mark_handed_out(ex.reference())


def _load_all() -> None:
    """Import every lab's check module so the registry is complete."""
    import importlib

    importlib.import_module(f"{__package__}._labs")
