"""Generic properties of every host-function answer, declared once for the kinds ``code`` and ``numeric`` (a
function the learner writes) rather than in each check. They run after the exercise's own check passed
(``core._run``), on the calls that check made (recorded by the answer guard, :mod:`.answers_guard`):

- **called again**: the answer is called again on the smallest arguments the check gave it (each kept call once at
  least) until it has been called :data:`REPEATS` times in all, the check's own calls (each compared by the check)
  counted: with the same shapes and new values (each array, and each list of numbers, drawn afresh from its own
  values) wherever labkit's reference can say what it must return, and with the very same arguments otherwise. A
  cache keyed by shape, size or length hands back an old result; an answer wrong on 10% of its calls (state kept
  between calls, a random choice) fails with probability 1 − 0.9^44 ≥ 99%. The calls stop early only past
  :data:`BUDGET_S` of CPU time (an answer that slow has fewer calls, and its pass line says how many; labkit's
  references all reach 44: ``tests/test_grader_round6.py``).
- **its type**: what it returns has the reference's type: an array of the reference's dtype, and no float32 (or
  narrower) where the reference gives float64. Where the reference cannot be called on the same arguments (they hold a
  module or a stream), what the reference declares it returns (``-> float``, ``-> dict[str, float]``) is the type.

An exercise whose answer works in place (``answers_guard.IN_PLACE``, told by ``core``), is given objects that are not
data (a module, a kernel), or measures time (:data:`NOT_REPEATABLE`) gets the form of the first rule that suits it:
its own check runs again until the answer has been called :data:`REPEATS` times in all, every other run with the
sizes the first run drew and new values (:func:`labkit.check.replay.same_sizes`), every call compared with what it
must give. An answer that runs elsewhere (``answers_guard.NOT_WRAPPED``: the MPI ranks, other processes) is not
followed here: its check calls it again there, :data:`REPEATS` times per rank in the same launch
(:mod:`labkit.check.lab08_ranks`).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .verdicts import Failed

#: Calls after the check: (0.9)^44 = 0.0097, so an answer wrong on 10% of calls fails with probability ≥ 99%.
REPEATS = 44
#: Exercises whose answer may rightly return different values for the same arguments (it measures time).
NOT_REPEATABLE = ("07.event-timing",)
#: The most CPU seconds the repeated calls may take together; past it they stop (an answer that slow has been
#: called often enough by its own check).
BUDGET_S = 4.0
_KEEP = 8  # recorded calls kept per check (the smallest are used)
_TYPED = 3  # calls with no values to draw anew whose return type is compared with the reference's
#: The least relative tolerance of a call on new values: a correct answer that adds in another order (float32) may
#: differ from the reference that much on inputs the check did not choose; a cache or a drifting state is far off.
LOOSE = 1e-4


@dataclass
class Call:
    """One call the check made: copies of its arguments taken before it, and what it returned."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any
    size: int


_CALLS: list[Call] = []
_SEEN: list[Any] = []  # results of calls that are not replayed (arguments that are not data), for the type rule
_HISTORY: list[Call] = []  # the last calls in the order the check made them (for a likely cause when it fails)
_HISTORY_KEEP = 32
_RECORDING = [True]
_COUNT = [0]  # calls the check made (each accepted, since the check passed)
_SHORT: list[str | None] = [None]  # set when BUDGET_S stopped the calls again before REPEATS in all


def forget() -> None:
    """Drop the calls recorded so far (``core._run`` does this before each check), and the sizes it drew."""
    from .replay import forget_sizes

    forget_sizes()
    _CALLS.clear()
    _HISTORY.clear()
    _SEEN.clear()
    _RECORDING[0] = True
    _COUNT[0] = 0
    _SHORT[0] = None


def shortfall() -> str | None:
    """After a check that passed: None when the answer was called :data:`REPEATS` times in all, else what its pass
    line must add (the calls stopped at :data:`BUDGET_S`, so the ≥ 99% claim for an answer wrong on 10% of its calls
    does not hold for it)."""
    return _SHORT[0]


def _stopped_at(calls: int) -> None:
    _SHORT[0] = (
        f"your function was called {calls} times in all, not {REPEATS}: the calls again stop after {BUDGET_S:g} s of "
        "CPU time and yours took long, so an answer wrong on a few of its calls could pass unseen; a faster one is "
        f"called {REPEATS} times"
    )


def history() -> list[Call]:
    """The calls the running check made of the answer (the last :data:`_HISTORY_KEEP`), in order, each with copies
    of its arguments taken before it and what it returned."""
    return list(_HISTORY)


def _size(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value) + 1
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values()) + 1
    return 1


def record(args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, snapshots: tuple[Any, ...] | None) -> None:
    """Remember one call of the answer (``snapshots``: copies of ``args`` taken before it; None when an argument is
    not data, and then the call is not kept)."""
    if not _RECORDING[0]:
        return
    _COUNT[0] += 1
    try:
        kept = copy.deepcopy(result)
    except Exception:  # noqa: BLE001 - a result that cannot be copied is not replayed
        return
    if snapshots is None:  # not replayed; its type is still compared with the reference's declared one
        _SEEN.append(kept)
        del _SEEN[:-_KEEP]
        return
    _CALLS.append(Call(snapshots, dict(kwargs), kept, sum(_size(a) for a in snapshots)))
    _HISTORY.append(_CALLS[-1])
    del _HISTORY[:-_HISTORY_KEEP]
    if len(_CALLS) > _KEEP:
        _CALLS.sort(key=lambda c: c.size)
        del _CALLS[_KEEP:]


# ------------------------------------------------------------------------------------------- comparing results
def _agree(got: Any, want: Any, rtol: float) -> bool:
    """``got`` equals ``want`` to ``rtol`` (relative to the largest magnitude in ``want``), NaN equal to NaN."""
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        try:
            g, w = np.asarray(got), np.asarray(want)
        except Exception:  # noqa: BLE001
            return False
        if g.shape != w.shape:
            return False
        if g.dtype.kind in "fc" or w.dtype.kind in "fc":
            finite = np.abs(w[np.isfinite(w)]) if w.size else w
            scale = float(np.max(finite)) if finite.size else 1.0
            return bool(np.allclose(g, w, rtol=rtol, atol=rtol * max(scale, 1e-30), equal_nan=True))
        return bool(np.array_equal(g, w))
    if isinstance(want, (list, tuple)):
        return (
            isinstance(got, (list, tuple, np.ndarray))
            and len(got) == len(want)
            and all(_agree(g, w, rtol) for g, w in zip(got, want))
        )
    if isinstance(want, dict):
        return isinstance(got, dict) and set(got) == set(want) and all(_agree(got[k], want[k], rtol) for k in want)
    if isinstance(want, (bool, np.bool_)) or isinstance(got, (bool, np.bool_)):
        return bool(got == want)
    if isinstance(want, (int, float, np.number)) and isinstance(got, (int, float, np.number)):
        gf, wf = float(got), float(want)
        if math.isnan(wf) or math.isnan(gf):
            return math.isnan(wf) and math.isnan(gf)
        return math.isclose(gf, wf, rel_tol=rtol, abs_tol=1e-300) or gf == wf
    try:
        return bool(got == want)
    except Exception:  # noqa: BLE001
        return False


def _narrower(got: Any, want: Any) -> str | None:
    """Words for a result whose type is narrower than the reference's (float32 for float64, another dtype), or None."""
    if isinstance(want, np.ndarray):
        g = np.asarray(got) if isinstance(got, (np.ndarray, list, tuple)) else None
        if isinstance(got, np.ndarray) and got.dtype != want.dtype:
            return f"an array of {got.dtype} where the reference returns {want.dtype}"
        if g is not None and g.dtype.kind == "f" and want.dtype.kind == "f" and g.dtype.itemsize < want.dtype.itemsize:
            return f"{g.dtype} values where the reference returns {want.dtype}"
        return None
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)) and len(got) == len(want):
        for g, w in zip(got, want):
            found = _narrower(g, w)
            if found:
                return found
        return None
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            found = _narrower(got.get(k), want[k])
            if found:
                return f"{found} (key {k!r})"
        return None
    wide = isinstance(want, float) or (isinstance(want, np.floating) and want.dtype.itemsize >= 8)
    if wide and isinstance(got, np.floating) and got.dtype.itemsize < 8:
        return f"a {got.dtype} number where the reference returns float64"
    return None


# ------------------------------------------------------------------------------------------- new values, same shapes
def _resample(value: Any, rng: np.random.Generator) -> Any:
    """``value`` with new values and the same shape: an array's (or a list of numbers') items drawn afresh from its
    own items (so they stay in its range and keep its kind: bit patterns, sizes, NaN); anything else unchanged."""
    if not _drawable(value):
        return copy.deepcopy(value)
    if isinstance(value, np.ndarray):
        return rng.choice(value.ravel(), size=value.shape).astype(value.dtype)
    picked = rng.choice(np.arange(len(value)), size=len(value))
    return [value[int(k)] for k in picked]


def _drawable(value: Any) -> bool:
    """True for what :func:`_resample` draws anew: an array of numbers or a list of numbers, with two items or more."""
    if isinstance(value, np.ndarray):
        return value.size > 1 and value.dtype.kind in "biuf"
    return (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value)
    )


def _has_values(call: Call) -> bool:
    """True when :func:`_resample` gives ``call`` new values."""
    return any(_drawable(a) for a in (*call.args, *call.kwargs.values()))


def _reference_function(reference: Callable[[], Any] | None) -> Callable[..., Any] | None:
    if reference is None:
        return None
    try:
        made = reference()
    except Exception:  # noqa: BLE001
        return None
    return made if callable(made) and not isinstance(made, type) else None


def _show(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) and value.size <= 8 else value)
    return text if len(text) <= 120 else text[:117] + "..."


def _calibrate(call: Call, ref: Callable[..., Any] | None) -> float | None:
    """The tolerance to which ``ref`` agrees with the answer's accepted result on ``call`` (None: it does not, or it
    takes other arguments: the call is then repeated as it was). Raises :class:`Failed` for a result narrower than
    the reference's."""
    if ref is None:
        return None
    try:
        want = ref(*copy.deepcopy(call.args), **copy.deepcopy(call.kwargs))
    except Exception:  # noqa: BLE001 - a reference that takes other arguments says nothing here
        return None
    narrow = _narrower(call.result, want)
    if narrow is not None:
        raise Failed(
            f"the values are right, but your function returns {narrow}.",
            cause="return what the statement asks for in the reference's type: computing in float32 "
            "(np.float32(...), .astype(np.float32)) loses the precision the caller was given.",
        )
    return next((t for t in (1e-9, 1e-6, 1e-4) if _agree(call.result, want, t)), None)


def _declared_type(reference: Callable[[], Any] | None) -> None:
    """The type rule for results that are not replayed (the answer was given a module, a stream, a kernel): each must
    have the type the reference's function declares it returns (``-> float``, ``-> dict[str, float]``): a float32
    number where it says float fails. Raises :class:`Failed`."""
    seen = list(_SEEN)
    _SEEN.clear()
    ref = _reference_function(reference)
    declared = str(getattr(ref, "__annotations__", {}).get("return", "")).replace(" ", "")
    for result in seen:
        values = list(result.values()) if declared == "dict[str,float]" and isinstance(result, dict) else [result]
        if declared not in ("float", "dict[str,float]"):
            return
        for value in values:
            if isinstance(value, np.floating) and value.dtype.itemsize < 8:
                raise Failed(
                    f"the values are right, but your function returns a {value.dtype} number where the reference "
                    "returns a float (float64).",
                    cause="return what the statement asks for in the reference's type: computing in float32 "
                    "(np.float32(...), .astype(np.float32)) loses the precision the caller was given; float(...) "
                    "of a NumPy value gives a Python float.",
                )


def _check_again(check: Callable[..., Any] | None, answer: Callable[..., Any]) -> None:
    """The form of the rule for an answer that is not called again here (it works in place, is given objects that
    are not data, or measures time): the exercise's own check runs again on fresh draws, each run comparing every
    call with what it expects, until the answer has been called :data:`REPEATS` times in all (or the runs have taken
    :data:`BUDGET_S`). Raises :class:`Failed` with the check's own words for a later run that fails."""
    if _COUNT[0] == 0 or check is None:  # the check never called it here (the answer runs in other processes)
        return
    from .replay import same_sizes
    from .verdicts import Unsolved

    started, run = time.process_time(), 1
    while _COUNT[0] < REPEATS and time.process_time() - started <= BUDGET_S:
        before, run = _COUNT[0], run + 1
        same = run % 2 == 0  # every other run draws the first run's sizes again, with new values: a cache by shape is hit
        try:
            with same_sizes() if same else contextlib.nullcontext():
                check(answer)
        except (Failed, Unsolved) as exc:
            inputs = "the same sizes and new values" if same else "fresh inputs"
            raise Failed(
                f"the check ran again on {inputs} (run {run}, to call your function {REPEATS} times in all), "
                f"and this time: {exc}",
                cause=getattr(exc, "cause", None)
                or "the same kind of input must always give a right answer: keep no state between calls (a counter, "
                "a cache, a list that grows) and draw nothing at random.",
            ) from None
        finally:
            _CALLS.clear()
        if _COUNT[0] == before:  # this run did not call it: another run will not either
            return
    if _COUNT[0] < REPEATS:
        _stopped_at(_COUNT[0])


def _probes(last: Call, earlier: Call, rng: np.random.Generator) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Argument sets to tell a cache from a coincidence: ``last``'s with new values (where they can be drawn), else
    ``last``'s and ``earlier``'s arguments mixed position by position (each one a value the check itself gave), and
    ``last``'s with a number that changed moved a little (the reference says whether such arguments are allowed)."""
    if _has_values(last):
        return [
            (tuple(_resample(a, rng) for a in last.args), {k: _resample(v, rng) for k, v in last.kwargs.items()})
            for _ in range(2)
        ]
    n = len(last.args)
    if len(earlier.args) != n or earlier.kwargs.keys() != last.kwargs.keys():
        return []
    mixed = [tuple(copy.deepcopy(last.args[k] if k != j else earlier.args[k]) for k in range(n)) for j in range(n)]
    for j, (a, b) in enumerate(zip(earlier.args, last.args)):  # a number that changed: values between and beyond
        if isinstance(b, (int, float, np.integer, np.floating)) and not isinstance(b, (bool, np.bool_)) and a != b:
            steps = (b + 1, b - 1, (a + b) // 2) if isinstance(b, (int, np.integer)) else (b * 1.25, (a + b) / 2)
            mixed += [tuple(s if k == j else copy.deepcopy(last.args[k]) for k in range(n)) for s in steps]
    new = [m for m in mixed if not _agree(list(m), list(last.args), 0.0) and not _agree(list(m), list(earlier.args), 0.0)]
    return [(m, copy.deepcopy(last.kwargs)) for m in new[:4]]


def repeated_result_cause(
    calls: list[Call], reference: Callable[[], Any] | None, answer: Callable[..., Any] | None = None
) -> str | None:
    """The cause "the function handed back an earlier call's result" when the last of ``calls`` (the check's calls of
    a host-function answer, in order: :func:`history`) returned a wrong result that is exactly what an earlier call
    with other arguments returned (and was right for those), and ``answer``, called on other arguments of the same
    kinds (:func:`_probes`) whose right result differs, hands back that same result again: a cache keyed by shape,
    size or length, or state kept between calls. A wrong formula that gives the earlier figure once by coincidence
    gives other figures there, and is not named. ``reference`` is the exercise's reference factory. None otherwise."""
    ref = _reference_function(reference)
    if len(calls) < 2 or ref is None or answer is None:
        return None

    def right(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return ref(*copy.deepcopy(args), **copy.deepcopy(kwargs))

    last = calls[-1]
    try:
        if _agree(last.result, right(last.args, last.kwargs), 1e-6):
            return None  # the last call was right: the check failed on something else
    except Exception:  # noqa: BLE001 - arguments the reference does not take say nothing here
        return None
    for earlier in reversed(calls[:-1]):
        same_args = _agree(list(earlier.args), list(last.args), 0.0) and _agree(earlier.kwargs, last.kwargs, 0.0)
        if same_args or not _agree(last.result, earlier.result, 0.0):
            continue
        try:
            if not _agree(earlier.result, right(earlier.args, earlier.kwargs), 1e-6):
                continue
        except Exception:  # noqa: BLE001
            continue
        told, again = 0, True
        _RECORDING[0] = False
        try:
            for args, kwargs in _probes(last, earlier, np.random.default_rng()):
                try:
                    if _agree(right(args, kwargs), earlier.result, 1e-6):
                        continue  # its right result is the earlier one too: it tells nothing
                    got = answer(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                except Exception:  # noqa: BLE001 - a probe that fails tells nothing (a time limit or an interrupt stops all)
                    continue
                told += 1
                again = again and _agree(got, earlier.result, 0.0)
        finally:
            _RECORDING[0] = True
        if not told or not again:
            return None

        def shown(call: Call) -> str:
            return ", ".join([*(_show(a) for a in call.args), *(f"{k}={_show(v)}" for k, v in call.kwargs.items())])

        return (
            f"your function returned {_show(last.result)} for ({shown(last)}), exactly what it returned for an earlier "
            f"call with other arguments ({shown(earlier)}), where that was right, and it returns it again for other "
            "arguments of the same kinds: it ignores the arguments that changed, or hands back an earlier result (a "
            "cache keyed by shape, size or length, or state kept between calls)."
        )
    return None


def check_host_answer(
    exercise_id: str,
    answer: Callable[..., Any],
    reference: Callable[[], Any] | None,
    *,
    in_place: bool = False,
    check: Callable[..., Any] | None = None,
) -> None:
    """The generic properties (module docstring) of a host-function answer whose check just passed (``in_place``:
    the exercise's answer changes its arguments, so it is not called again here but by ``check``, the exercise's
    check function, run again); raises :class:`Failed` naming the call that broke one."""
    gen = np.random.default_rng()

    def rng() -> np.random.Generator:
        return gen

    calls = sorted(_CALLS, key=lambda c: c.size)
    _CALLS.clear()
    # every call the check made was right (it passed): REPEATS calls in all, and each kept call once more at least
    repeats = max(REPEATS - _COUNT[0], len(calls))
    if not calls or in_place or exercise_id in NOT_REPEATABLE:
        _check_again(check, answer)
        _declared_type(reference)
        return
    ref = _reference_function(reference)
    _RECORDING[0] = False
    try:
        # per call: how closely the reference agrees, or None. A call without values to draw anew is repeated as it
        # was, so the reference runs on it only for the type rule, on the first _TYPED such calls
        plain = [k for k, call in enumerate(calls) if not _has_values(call)][_TYPED:]
        tolerances = [None if k in plain else _calibrate(call, ref) for k, call in enumerate(calls)]
        started = time.process_time()
        for k in range(repeats):
            if time.process_time() - started > BUDGET_S:
                if _COUNT[0] + k < REPEATS:
                    _stopped_at(_COUNT[0] + k)
                break
            call, rtol = calls[k % len(calls)], tolerances[k % len(calls)]
            args, kwargs, want = call.args, call.kwargs, call.result
            if rtol is not None and ref is not None and _has_values(call):
                args = tuple(_resample(a, rng()) for a in call.args)
                kwargs = {n: _resample(v, rng()) for n, v in call.kwargs.items()}
                try:
                    want = ref(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                except Exception:  # noqa: BLE001 - new values outside what the reference takes: same arguments
                    args, kwargs, want = call.args, call.kwargs, call.result
            same = want is call.result
            try:
                got = answer(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            except Failed:
                raise
            except Exception as exc:  # noqa: BLE001 - the learner's error, in words
                raise Failed(
                    f"called again ({k + 1} of {repeats} more calls) with "
                    f"{'arguments it had handled before' if same else 'the shapes of earlier arguments and new values'}"
                    f", your function raised {type(exc).__name__}: {exc}",
                    cause="compute every call from the arguments it gets and keep no state between calls.",
                ) from None
            if not _agree(got, want, 1e-12 if same else max(10 * (rtol or 0.0), LOOSE)):
                shown = ", ".join(_show(a) for a in args)
                if same:
                    raise Failed(
                        f"called again with the very same arguments ({shown}), your function returned {_show(got)} "
                        f"where its earlier call returned {_show(want)} (call {k + 1} of {repeats} more).",
                        cause="the same input must give the same answer: keep no state between calls (a counter, a "
                        "cache, a list that grows) and draw nothing at random.",
                    )
                raise Failed(
                    f"called again with the same shapes and new values ({shown}), your function returned "
                    f"{_show(got)}; expected {_show(want)} (call {k + 1} of {repeats} more).",
                    cause="an answer that remembers results by shape, size or length (a cache keyed by len(x) or "
                    "x.shape) hands back an old result, and one that keeps state between calls drifts: compute "
                    "every call from the values it gets.",
                )
    finally:
        _RECORDING[0] = True


__all__ = [
    "NOT_REPEATABLE",
    "REPEATS",
    "check_host_answer",
    "forget",
    "history",
    "record",
    "repeated_result_cause",
    "shortfall",
]
