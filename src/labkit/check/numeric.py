"""Numeric exercises as data, read by one function each.

Many checks of labs 01 and 06 to 08 have one shape: draw fresh inputs, compute the right figure with the reference
model, call the learner's function, compare within a tolerance and, when the answer is wrong, compare it with the
known slips (wrong numbers from typical mistakes) to name the cause. A :class:`FunctionExercise` holds what differs
from one such check to the next (how cases are drawn, the reference, the tolerance, the slips and their causes, the
words of the report) and :func:`grade_function` grades a learner's function against it; :func:`slip_cause` names the
slip a wrong figure matches. The smaller steps those checks share live here too:

- :func:`function_exercise`: registers such an exercise, its check made from the data;
- :func:`listed_slips`: the slips of a figure listed as data, factors of the right figure;
- :func:`figure`: one figure answered directly, read and judged against its reference and slips;
- :func:`need_function`, :func:`call_answer`: the learner's function, required and called, its exceptions in words;
- :func:`pair_answer`, :func:`dict_answer`, :func:`array_answer`: read two numbers, a dict of figures or an array
  that a learner returned, with "not solved yet" for what is still ``...``;
- :func:`expect`: one figure of a case against its right value, with a cause looked for only when it is wrong;
- :func:`judge_expected`: :func:`labkit.check.answers.judge` for one case, the right figure added to its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .answers import close, judge, number, ratio_cause
from .core import Failed, Result, Unsolved, exercise, exercise_data
from .slips import int32_wrap_cause, unit_cause

#: ``(args) -> {cause: wrong value}``, ``(args) -> {wrong / right: cause}``, ``(args) -> cause or None``
Values = Callable[..., Mapping[str, float]]
Ratios = Callable[..., Mapping[float, str]]
First = Callable[..., "str | None"]


def slip_cause(
    got: float,
    want: float,
    args: tuple[Any, ...] = (),
    *,
    first: First | None = None,
    values: Values | None = None,
    ratios: Ratios | None = None,
    nbytes: int | None = None,
    otherwise: str | None = None,
) -> str | None:
    """The likely cause of the wrong figure ``got`` (the right one is ``want``, computed from ``args``), tried in
    this order: ``first(*args)`` (a cause that stands whatever the number, e.g. for one GPU); the first slip of
    ``values(want, *args)`` (``{cause: wrong value}``) within 1% of ``got``; the factor of ``ratios(*args)``
    (``{wrong / right: cause}``) that ``got / want`` matches within 1%; a byte count ``args[nbytes]`` wrapped to
    32 bits; an exact unit factor (:func:`labkit.check.slips.unit_cause`); else ``otherwise``."""
    cause = first(*args) if first is not None else None
    if cause is None and values is not None:
        cause = next((c for c, v in values(want, *args).items() if close(got, v)), None)
    if cause is None and ratios is not None:
        cause = ratio_cause(got, want, dict(ratios(*args)))
    if cause is None and nbytes is not None:
        cause = int32_wrap_cause(got, want, args[nbytes])
    if cause is None:
        cause = unit_cause(got, want)
    return cause or otherwise


@dataclass(frozen=True)
class FunctionExercise:
    """A numeric exercise whose answer is a function of drawn arguments, as data.

    ``cases()`` yields the argument tuples (fresh each run, drawn lazily in the order the check always drew them);
    ``reference(*args)`` is the right figure; an answer passes within ``rel`` of it (or, where the right figure is 0,
    below ``zero_atol``). A wrong answer is reported as ``{name}({args}) returned {failed}``, ``failed`` being
    formatted with ``got`` and ``want``, with the cause :func:`slip_cause` finds from ``first``, ``values``,
    ``ratios``, ``nbytes`` and ``otherwise``. ``question`` says what the learner's function computes (the check's
    docstring); ``passed`` is the report of a right function (or makes it)."""

    name: str
    cases: Callable[[], Iterable[tuple[Any, ...]]]
    reference: Callable[..., float]
    failed: str
    rel: float = 0.01
    zero_atol: float = 0.0
    first: First | None = None
    values: Values | None = None
    ratios: Ratios | None = None
    nbytes: int | None = None
    otherwise: str | None = None
    question: str = ""
    passed: str | Callable[[], str] = "correct."


def grade_function(fn: Any, ex: FunctionExercise, call: Callable[..., Any]) -> None:
    """Grade the learner's ``fn`` on every case of ``ex``: ``call(fn, *args)`` runs it (turning its exceptions and
    a missing return into a report); the first wrong figure raises :class:`Failed` naming its likely cause."""
    for args in ex.cases():
        label = f"{ex.name}({', '.join(f'{a}' for a in args)})"
        want = ex.reference(*args)
        got = number(call(fn, *args), label)
        if close(got, want, ex.rel) or (want == 0 and abs(got) < ex.zero_atol):
            continue
        cause = slip_cause(
            got,
            want,
            args,
            first=ex.first,
            values=ex.values,
            ratios=ex.ratios,
            nbytes=ex.nbytes,
            otherwise=ex.otherwise,
        )
        raise Failed(f"{label} returned " + ex.failed.format(got=got, want=want), cause=cause)


def function_exercise(
    exercise_id: str,
    check_name: str,
    ex: FunctionExercise,
    call: Callable[..., Any],
    reference: Callable[[], Any],
    module: str,
) -> Callable[..., Result]:
    """Register ``exercise_id``, a numeric exercise whose answer is a function, graded by :func:`grade_function`
    against ``ex`` (``call`` runs the learner's function); the returned check is ``module``'s ``check_name``."""

    def check(fn: Any) -> str:
        grade_function(fn, ex, call)
        return ex.passed() if callable(ex.passed) else ex.passed

    check.__name__ = check.__qualname__ = check_name
    check.__module__ = module
    check.__doc__ = ex.question
    return exercise(exercise_id, kind="numeric", reference=reference)(check)


def listed_slips(exercise_id: str, reference: Callable[[], float]) -> Callable[[], dict[str, float]]:
    """The slips ``labkit/data/exercises.yml`` lists for ``exercise_id`` (``factor: cause``; the factor a number or a
    fraction such as ``1/6``), as :func:`figure` takes them: each cause with its wrong figure, ``reference()`` x factor."""

    def slips() -> dict[str, float]:
        right = reference()
        wrong = {}
        for factor, cause in exercise_data(exercise_id)["slips"].items():
            f = Fraction(str(factor))
            wrong[cause] = right * f.numerator / f.denominator
        return wrong

    return slips


def figure(
    value: Any,
    what: str,
    reference: Callable[[], float],
    slips: Callable[[], Mapping[str, float]],
    unit: str,
    *,
    rel: float,
) -> float:
    """Read the learner's figure ``value`` (named ``what``) and pass it when it is within ``rel`` of ``reference()``;
    otherwise raise :class:`Failed` naming the slip of ``slips()`` (or the exact unit factor) it matches, as
    :func:`labkit.check.answers.judge` does. Returns the figure read."""
    x = number(value, what)
    judge(x, reference(), what, unit, rel=rel, slips=slips(), unit_factors=True)
    return x


def array_answer(got: Any, name: str, what: str, noun: str) -> np.ndarray:
    """The array the learner's function ``name`` returned (``got``) as float64: :class:`Unsolved` when it returned
    nothing, :class:`Failed` (``{what} returned <type>, not {noun}.``) when it is not an array of numbers."""
    if got is None or got is Ellipsis:
        raise Unsolved(f"{name} returns nothing yet.")
    try:
        return np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise Failed(f"{what} returned {type(got).__name__}, not {noun}.") from None


def pair_answer(out: Any, names: tuple[str, str]) -> tuple[float, float]:
    """The two numbers ``names`` that a learner's function returned as a pair ``out``: :class:`Unsolved` when it
    returned nothing, :class:`Failed` when ``out`` is not two numbers."""
    first, second = names
    if out is None or out is Ellipsis:
        raise Unsolved(f"your function returns nothing yet; return ({first}, {second}).")
    try:
        a, b = out
    except (TypeError, ValueError):
        raise Failed(f"return two numbers, ({first}, {second}); got {out!r}.") from None
    return number(a, first), number(b, second)


def expect(got: float, want: float, call: str, what: str, unit: str, cause: Callable[[], str | None]) -> None:
    """Raise :class:`Failed` (``{call}: {what} {got}, expected {want}{unit}.``) with the cause ``cause()`` finds when
    ``got`` is not within 1% of ``want``; the cause is only looked for when the figure is wrong."""
    if not close(got, want):
        raise Failed(f"{call}: {what} {got:.4g}, expected {want:.4g}{unit}.", cause=cause())


def dict_answer(
    answer: Any,
    keys: tuple[str, ...],
    *,
    unsolved: str = "fill in both values of the dict.",
    all_unsolved: str | None = None,
) -> dict[Any, Any]:
    """The learner's dict of figures ``answer``, holding every one of ``keys``: :class:`Failed` when it is not a dict
    or lacks a key; :class:`Unsolved` (``all_unsolved`` when every value is still ``...`` and that is given, else
    ``unsolved``) when a value is still ``...``."""
    if not isinstance(answer, dict):
        names = ", ".join(repr(k) for k in keys[:-1]) + f" and {keys[-1]!r}"
        raise Failed(f"expected a dict with keys {names}, got {type(answer).__name__}.")
    missing = set(keys) - set(answer)
    if missing:
        raise Failed(f"the dict lacks {', '.join(sorted(missing))}.")
    blank = [answer[k] is Ellipsis for k in keys]
    if all_unsolved is not None and all(blank):
        raise Unsolved(all_unsolved)
    if any(blank):
        raise Unsolved(unsolved)
    return answer


def call_answer(fn: Callable[..., Any], *args: Any, what: str, tail: str = "", keep: tuple[type[BaseException], ...] = ()) -> Any:
    """``fn(*args)`` for the learner's ``fn``. ``NotImplementedError`` (the skeleton) and the exceptions in ``keep``
    pass through; any other exception becomes :class:`Failed`: ``{what} raised <type>: <message>{tail}``."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's bug, reported rather than raised
        if isinstance(exc, keep):
            raise
        raise Failed(f"{what} raised {type(exc).__name__}: {exc}{tail}") from None


def judge_expected(
    got: float,
    want: float,
    what: str,
    unit: str,
    *,
    expected: str,
    rel: float,
    slips: Mapping[str, float],
    otherwise: str,
    unit_factors: bool = False,
) -> None:
    """:func:`labkit.check.answers.judge` for one case of a function exercise, its :class:`Failed` message followed
    by ``expected`` (the right figure in words, e.g. ``"Expected 312 TFLOP/s."``)."""
    try:
        judge(got, want, what, unit, rel=rel, slips=slips, otherwise=otherwise, unit_factors=unit_factors)
    except Failed as exc:
        raise Failed(f"{exc} {expected}", cause=exc.cause) from None


def grade_block_quantized(
    fn: Callable[[np.ndarray], Any],
    name: str,
    fmt: str,
    cases: list[np.ndarray],
    slips: Callable[[np.ndarray], Mapping[str, np.ndarray]],
    nan_cause: Callable[[np.ndarray, np.ndarray], str],
    rule: str,
) -> None:
    """Grade a block-scaled quantize-and-read-back answer ``name(x)`` element by element against
    :func:`labkit.scaling.quantize_blocks` in format ``fmt`` on each of ``cases``: a wrong shape, NaN (``nan_cause``),
    the values of a listed slip (every slip that gives those values is named), or else the ``rule`` in words."""
    from labkit.numerics import scaling

    from .streams import call_learner

    for x in cases:
        got: Any = call_learner(fn, x.copy(), what=f"{name} of a {x.shape[0]}×{x.shape[1]} array")
        arr = array_answer(got, name, name, "an array of numbers")
        if arr.shape != x.shape:
            raise Failed(f"for a {x.shape} input you returned shape {arr.shape}; return the read-back values in x's shape.")
        want = scaling.quantize_blocks(x, fmt).values
        if np.array_equal(arr, want):
            continue
        bad = tuple(int(i) for i in np.argwhere(~(arr == want))[0])
        where = f"at index {bad}: expected {float(want[bad])!r}, got {float(arr[bad])!r}"
        if np.isnan(arr).any():
            raise Failed(f"NaN in your result ({where}).", cause=nan_cause(x, arr))
        matched = [cause for cause, slip in slips(x).items() if slip.shape == arr.shape and np.array_equal(arr, slip)]
        if matched:  # slips that give the same values on this input are named together: the values cannot tell them apart
            raise Failed(f"wrong values {where}.", cause=" Or: ".join(matched))
        raise Failed(f"wrong values {where}.", cause=rule)


def need_function(fn: Any, expected: str = "a function", cause: str | None = None) -> None:
    """:class:`Failed` (``expected {expected}, got <type>.``, with ``cause``) unless the learner's answer ``fn`` is
    callable: a value passed where the check wants the function that computes it."""
    if not callable(fn):
        raise Failed(f"expected {expected}, got {type(fn).__name__}.", cause=cause)
