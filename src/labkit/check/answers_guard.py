"""One guard around every host-function answer: its inputs are compared after each call, and labkit's reference is
out of its reach while it runs.

:func:`guard_answer` wraps a learner's plain Python function before the check sees it (``core._run`` does this for
every check). Each call of the wrapped function then

- copies the arguments that are data (NumPy and device arrays, lists, tuples and dicts of numbers, strings and arrays)
  and compares them afterwards: an answer that sorts, empties, rounds or overwrites what it was given is rejected,
  naming the argument, unless the exercise's statement says it works in place (:data:`IN_PLACE`). The change is
  reported when the check would otherwise pass (a check that fails keeps its own, often more specific, words);
- makes the functions the check computes its expected values with (:data:`COMPARES_WITH`), the exercise's own
  reference and ``labkit.check.solved_or_reference`` unusable from the learner's code: each one's code is swapped
  for a trap for the length of the call, so a name imported earlier (``from labkit.scaling import quantize_blocks``)
  is caught too, and the answer is rejected in words naming the function. A call from inside labkit (labkit's own
  reference answer, a helper the statement offers) goes through.

An answer that *is* what ``solved_or_reference`` handed out as labkit's reference (a function, kernel or source) is
rejected before any call (:func:`handed_out`). Rejections are :class:`AnswerRejected`, a ``BaseException``, so
that neither the learner's ``try``/``except Exception`` nor a check's own error handling can swallow them; ``core._run``
turns them into a failed result.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import properties
from . import provenance as _provenance

#: Functions each check computes its expected values with: unusable while the learner's answer runs.
COMPARES_WITH: dict[str, tuple[str, ...]] = {
    "02.launch-config": ("labkit.check.harness.grid_2d",),
    "05.pipeline": ("labkit.cupylab.pipeline",),
    "06.decode-fp16": ("labkit.precision.decode",),
    "06.tf32-round": ("labkit.precision.round_tf32_bits", "labkit.precision.round_to:tf32"),
    "06.loss-scale": ("labkit.check.lab06.reference_update_scale",),
    "06.gemm-predict": ("labkit.check.lab06._reference_gemm_predict",),
    "06.mx-quantize": ("labkit.scaling.quantize_blocks",),
    "06.fp8-promotion": ("labkit.precision.gemm:promote_every",),  # P.gemm itself is the statement's tool
    "06.te-scale": ("labkit.scaling.te_scale",),
    "06.nvfp4-quantize": ("labkit.scaling.quantize_blocks",),
    "07.pcie-peak": ("labkit.bandwidth.pcie_peak",),
    "08.ring-step": ("labkit.collectives.ring_step", "labkit.collectives.ring_allreduce"),
    "08.scaling-efficiency": ("labkit.check.lab08._ref_scaling",),
    "08.ddp-buckets": ("labkit.ddp.make_buckets",),
    "08.nvl72-allreduce": (
        "labkit.check.lab08_nvl72._ref_nvl72",
        "labkit.collectives.ring_cost",
        "labkit.collectives.nvls_cost",
        "labkit.collectives.allreduce_time",
    ),
    "08.mig-b200": ("labkit.check.lab08_nvl72._ref_class", "labkit.mig.plan"),
}
#: When a trap fires only for some calls (``module.function:condition``): the statement offers the function itself.
CONDITIONS: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], bool]] = {
    "promote_every": lambda args, kwargs: kwargs.get("promote_every") is not None or len(args) > 5,
    "tf32": lambda args, kwargs: str(kwargs.get("fmt", args[1] if len(args) > 1 else "")).lower() in ("tf32", "tensorfloat32"),
}
#: Always out of reach while an answer runs.
ALWAYS = ("labkit.check.core.solved_or_reference",)
#: Positions of the arguments an exercise's statement lets the answer change (it works in place).
IN_PLACE: dict[str, tuple[int, ...]] = {
    "02.transfers": (2,),  # repeated_saxpy(a, x, y, steps): y ← a·x + y
    "05.streams": (2,),  # pipeline(cp, x, out, kernel, chunks, n_streams): out is written
    "05.graph": (2, 3),  # graph_pipeline(cp, frames, x, y, kernel): x refilled per frame, y written
    "08.ring-step": (0,),  # ring_step(chunks, phase, step): in place, as the statement says
}
#: Exercises whose answer is not wrapped: it runs in other processes (the MPI ring), where a wrapper cannot follow.
NOT_WRAPPED = ("08.mpi-ring",)
_LABKIT_DIR = Path(__file__).resolve().parents[1]


class AnswerRejected(BaseException):
    """The answer did what no check may let pass (called labkit's reference, changed an input). A BaseException, so
    no ``except Exception`` on the way swallows it; ``core._run`` reports it as a failure."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


# ------------------------------------------------------------------------------------------- the reference's traps
_HITS: list[str] = []
_REFERENCE_LABELS: set[str] = set()  # trap names that are an exercise's reference (not a compared function)


_SHADOWS: dict[str, Callable[..., Any]] = {}  # trapped name -> the original function, for calls a condition lets by


def _hit(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Called by a trap: record which labkit function the answer called and stop the answer (or, for a conditional
    trap whose condition does not hold, run the original)."""
    name = sys._getframe(1).f_code.co_name
    cond = CONDITIONS.get(name.split(":", 1)[1]) if ":" in name else None
    caller = sys._getframe(2).f_code
    # labkit calling its own helper (a reference answer) goes through; the guard's own wrapper calling the trapped
    # function directly means the answer *is* a C-level wrapper of it (functools.partial, lru_cache): not labkit's call
    from_guard = caller.co_name == "guarded" and caller.co_filename == __file__
    if (cond is not None and not cond(args, kwargs)) or (_inside_labkit(caller.co_filename) and not from_guard):
        return _SHADOWS[name](*args, **kwargs)
    if name in _REFERENCE_LABELS:  # the exercise's reference: said when the check would otherwise pass
        if not _CHANGES:
            _CHANGES.append(AnswerRejected(*_called_words(name)))
        return _SHADOWS[name](*args, **kwargs)
    _HITS.append(name)
    raise AnswerRejected(*_called_words(name))


def _inside_labkit(filename: str) -> bool:
    try:
        return _LABKIT_DIR in Path(filename).resolve().parents
    except (OSError, ValueError):
        return False


def _called_words(name: str) -> tuple[str, str]:
    what, _, cond = name.partition(":")
    if cond:
        what = f"{what}(..., {cond}...)" if cond != "tf32" else f"{what}(..., 'tf32')"
    if what in _REFERENCE_LABELS:
        return (
            f"your answer calls `{what}`, labkit's reference answer for this exercise: the check would compare labkit "
            "with itself.",
            "write the computation yourself; the exercise is to do what the reference does.",
        )
    if what.endswith("solved_or_reference"):
        return (
            f"your answer calls `{what}`, which hands back labkit's own answer: the check would compare labkit with itself.",
            "write the function yourself; solved_or_reference is for later cells that need a working answer, not for the answer.",
        )
    return (
        f"your answer calls `{what}`, the function the check compares with, so it would be compared with itself.",
        f"write the computation yourself (the exercise is to do what `{what}` does); labkit's helpers "
        "that the statement offers (formats, rounding of single values) are fine.",
    )


def _trap(*args: Any, **kwargs: Any) -> Any:
    return __import__("labkit.check.answers_guard", fromlist=["_hit"])._hit(
        args, kwargs
    )  # builtins only: the globals are labkit's


def _resolve(dotted: str) -> types.FunctionType | None:
    path = dotted.split(":", 1)[0]
    module, _, attr = path.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    fn = inspect.unwrap(fn) if callable(fn) else fn
    return fn if isinstance(fn, types.FunctionType) and not fn.__code__.co_freevars else None


@contextlib.contextmanager
def references_trapped(names: Sequence[Any]) -> Iterator[None]:
    """For the ``with`` block, every function named in ``names`` (``module.function``) raises
    :class:`AnswerRejected` when called, however the caller reached it."""
    swapped: list[tuple[types.FunctionType, types.CodeType]] = []
    for dotted in (*ALWAYS, *names):
        fn = dotted if isinstance(dotted, types.FunctionType) else _resolve(dotted)
        if fn is None or fn.__code__.co_freevars or any(f is fn for f, _ in swapped):
            continue
        label = dotted if isinstance(dotted, str) else f"{fn.__module__}.{fn.__qualname__}"
        shadow = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        shadow.__kwdefaults__ = fn.__kwdefaults__
        _SHADOWS[label] = shadow
        swapped.append((fn, fn.__code__))
        fn.__code__ = _trap.__code__.replace(co_name=label, co_qualname=label)
    try:
        yield
    finally:
        for fn, code in swapped:
            fn.__code__ = code


_HANDED: dict[int, Any] = {}  # id -> object: what solved_or_reference handed out as labkit's reference


def mark_handed_out(reference: Any) -> Any:
    """Remember ``reference`` (and each item of a tuple of them) as labkit's answer handed to the learner."""
    for obj in (reference, *(reference if isinstance(reference, tuple) else ())):
        _HANDED[id(obj)] = obj
    return reference


def handed_out(answer: Any) -> bool:
    """True when ``answer`` is an object solved_or_reference handed out as labkit's reference."""
    return _HANDED.get(id(answer)) is answer and not isinstance(answer, (int, float, bool, type(None)))


def labkit_origin(answer: Any) -> str | None:
    """The labkit module an answer's code comes from (labkit's reference, handed back by solved_or_reference, or one
    of labkit's kernels), or None for the learner's own code."""
    fn = getattr(answer, "py_func", answer)
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        path = Path(code.co_filename).resolve()
    except (OSError, ValueError):
        return None
    if _LABKIT_DIR in path.parents:
        return getattr(fn, "__module__", None) or str(path.name)
    return None


# ------------------------------------------------------------------------------------------- inputs
# The first input an answer changed in the running check (or its use of labkit's reference, found by code or by a
# call). Reported by core._run when the check would otherwise pass; a check that fails (often on the same change, in
# its own words) keeps its own verdict.
_CHANGES: list[AnswerRejected] = []


def take_input_change() -> AnswerRejected | None:
    """The first input change the running check's answer made (and forget it), or None."""
    found = _CHANGES[0] if _CHANGES else None
    _CHANGES.clear()
    return found


_PLAIN = (int, float, complex, bool, str, bytes, type(None), np.generic)


def _is_data(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (np.ndarray, *_PLAIN)):
        return True
    if depth > 4:
        return False
    if isinstance(value, (list, tuple)):
        return len(value) <= 100_000 and all(_is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_is_data(k, depth + 1) and _is_data(v, depth + 1) for k, v in value.items())
    return _device_copy(value) is not None and depth == 0


def _device_copy(value: Any) -> np.ndarray | None:
    from .inputs import host_copy

    if isinstance(value, np.ndarray):
        return None
    if not (hasattr(value, "dtype") and hasattr(value, "shape")):
        return None
    return host_copy(value)


def _snapshot(value: Any) -> Any:
    dev = _device_copy(value)
    return dev if dev is not None else copy.deepcopy(value)


def _difference(before: Any, after: Any) -> str | None:
    """How ``after`` differs from ``before`` in words, or None when it is the same."""
    from .inputs import change_detail, changed, fmt_value

    if isinstance(before, np.ndarray):
        after_arr = after if isinstance(after, np.ndarray) else _device_copy(after)
        if after_arr is None:
            return None
        mask = changed(before, np.asarray(after_arr))
        return change_detail(before, np.asarray(after_arr), mask) if mask.any() else None
    if isinstance(before, (list, tuple)):
        if len(before) != len(after):
            return f"it had {len(before)} item(s), now {len(after)}"
        for k, (b, a) in enumerate(zip(before, after)):
            d = _difference(b, a)
            if d:
                return (
                    f"item {k}: {d}"
                    if isinstance(b, (list, tuple, dict, np.ndarray))
                    else (f"item {k} was {fmt_value(b)}, now {fmt_value(a)}")
                )
        return None
    if isinstance(before, dict):
        if set(before) != set(after):
            return f"its keys went from {sorted(map(str, before))} to {sorted(map(str, after))}"
        for k in before:
            d = _difference(before[k], after[k])
            if d:
                return f"key {k!r}: {d}"
        return None
    same = before == after or (before != before and after != after)  # NaN equals NaN here
    return None if same else f"was {fmt_value(before)}, now {fmt_value(after)}"


def _names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    return [
        params[k].name
        if k < len(params) and params[k].kind in (params[k].POSITIONAL_ONLY, params[k].POSITIONAL_OR_KEYWORD)
        else f"argument {k + 1}"
        for k in range(n)
    ]


def compared_function(exercise_id: str, answer: Any) -> str | None:
    """The dotted name of the function the check compares with (:data:`COMPARES_WITH`, unconditional entries) when
    ``answer`` is that very function (or a ``functools.partial`` of it), else None."""
    fn = answer.func if isinstance(answer, functools.partial) else answer
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    for dotted in COMPARES_WITH.get(exercise_id, ()):
        if ":" in dotted:
            continue  # the statement offers this function itself; only some calls of it are the answer
        ref = _resolve(dotted)
        if ref is not None and (fn is ref or (code is not None and code is ref.__code__)):
            return dotted
    return None


def reference_answer_code() -> types.CodeType:
    """The code object of the thin wrapper :func:`reference_answer` hands out (labkit's, shared by every exercise)."""
    return next(c for c in reference_answer.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == "answer")


def _compared_functions(exercise_id: str) -> tuple[Callable[..., Any], ...]:
    found = []
    for dotted in (*ALWAYS, *COMPARES_WITH.get(exercise_id, ())):
        fn = _resolve(dotted) if ":" not in dotted else None
        if fn is not None:
            found.append(fn)
    return tuple(found)


def _host_callable(answer: Any) -> bool:
    """True for an answer the guard wraps: a Python function, a partial, a bound method, an lru_cache wrapper or a
    callable object of the learner's (not a class, a kernel or a library's kernel object)."""
    if isinstance(answer, (types.FunctionType, functools.partial, types.MethodType)):
        return True
    if isinstance(answer, type) or not callable(answer) or getattr(answer, "py_func", None) is not None:
        return False
    module = getattr(type(answer), "__module__", "") or ""
    return module.split(".", 1)[0] not in ("numba", "cupy", "cupyx", "labkit", "builtins") or isinstance(
        answer, functools._lru_cache_wrapper
    )


def _reference_rejection(exercise_id: str, answer: Any, reference: Any) -> AnswerRejected | None:
    """The rejection of an answer that reaches labkit's reference (or a function the check compares with) by any
    route (:mod:`labkit.check.provenance`), or None."""
    from .provenance import reached_reference

    found = reached_reference(exercise_id, answer, reference if callable(reference) else None, _compared_functions(exercise_id))
    if found is None:
        return None
    name, route = found
    if name.endswith("solved_or_reference"):
        return AnswerRejected(*_called_words(name))
    whose = name if name.startswith("labkit's") else f"`{name}`, the function the check compares with"
    return AnswerRejected(
        f"this answer is {route} {whose}: it runs labkit's code, so the check would compare labkit with itself.",
        "pass your own function, kernel or source, the one the exercise asks you to write (a copy, a wrapper, a "
        "functools.partial or a kernel rebuilt from labkit's Python function is still labkit's code).",
    )


def reference_answer(exercise_id: str, reference: Any) -> Any:
    """Labkit's reference answer as an exercise hands it out: where it is the very function the check compares with
    (``labkit.ddp.make_buckets`` for 08.ddp-buckets), a thin labkit-side function that calls it, so that the reference
    passes its check while a learner who passes ``labkit.ddp.make_buckets`` itself is told what it is."""
    if compared_function(exercise_id, reference) is None:
        return reference

    def answer(*args: Any, **kwargs: Any) -> Any:
        return reference(*args, **kwargs)

    answer.__name__ = answer.__qualname__ = getattr(reference, "__name__", "reference")
    answer.__doc__ = getattr(reference, "__doc__", None)
    answer.__signature__ = inspect.signature(reference)  # type: ignore[attr-defined]
    return answer


def guard_answer(exercise_id: str, answer: Any, reference: Any = None) -> Any:
    """The answer the check gets: a plain Python function wrapped so each call compares its inputs afterwards and
    keeps labkit's reference out of reach (the functions the check compares with, and ``reference``, the exercise's
    reference factory, which solved_or_reference calls: trapped as well); anything else unchanged. Raises
    :class:`AnswerRejected` for an answer that is labkit's own code."""
    if handed_out(answer):
        origin = labkit_origin(answer)
        raise AnswerRejected(
            "this answer is labkit's own reference" + (f" (from `{origin}`)" if origin else "") + ", handed back by "
            "labkit.check.solved_or_reference because your check had not passed: the check would compare labkit with "
            "itself.",
            "pass your own function, kernel or source, the one the exercise asks you to write.",
        )
    itself = compared_function(exercise_id, answer)
    if itself is not None:
        raise AnswerRejected(
            f"this answer is `{itself}` itself, the function the check compares with, so it would be compared with itself.",
            f"write the computation yourself (the exercise is to do what `{itself}` does) and pass your own function.",
        )
    by_code = _reference_rejection(exercise_id, answer, reference)
    if by_code is not None and not _CHANGES:  # said when the check would otherwise pass; a failing check keeps its words
        _CHANGES.append(by_code)
    if exercise_id in NOT_WRAPPED or not _host_callable(answer):
        return answer
    from .provenance import labkit_made, reference_functions

    traps: tuple[Any, ...] = COMPARES_WITH.get(exercise_id, ())
    if isinstance(reference, types.FunctionType):
        traps = (*traps, reference)
    if not labkit_made(answer):  # labkit's own reference runs as itself
        own = reference_functions(exercise_id)
        _REFERENCE_LABELS.update(f"{fn.__module__}.{fn.__qualname__}" for fn in own)
        traps = (*traps, *own)
    in_place = set(IN_PLACE.get(exercise_id, ()))
    who = getattr(answer, "__name__", None) or getattr(getattr(answer, "func", None), "__name__", "your function")

    @functools.wraps(answer)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        names = _names(answer, len(args))
        data = [_is_data(a) for a in args]
        watched = [(names[k], a, _snapshot(a)) for k, a in enumerate(args) if k not in in_place and data[k]]
        watched += [(k, v, _snapshot(v)) for k, v in kwargs.items() if _is_data(v)]
        replayable = not in_place and all(data) and len(watched) == len(args) + len(kwargs)
        snapshots = tuple(copy.deepcopy(before) for _, _, before in watched[: len(args)]) if replayable else None
        kw = {str(k): copy.deepcopy(before) for k, _, before in watched[len(args) :]} if replayable else {}
        hits = len(_HITS)
        with references_trapped(traps):
            result = answer(*args, **kwargs)
        properties.record(snapshots or (), kw, result, snapshots)
        if len(_HITS) > hits:  # a trap fired and the answer swallowed it (a bare `except:`)
            raise AnswerRejected(*_called_words(_HITS[hits]))
        for name, live, before in watched:
            detail = _difference(before, live)
            if detail and not _CHANGES:
                _CHANGES.append(
                    AnswerRejected(
                        f"{who} changed its input `{name}`: {detail}.",
                        f"`{name}` belongs to the caller: read it, never change it (sorting, clearing, rounding or "
                        "writing into it in place changes the caller's data too). Work on a copy (np.array(x), "
                        "sorted(xs), list(xs)) and return the result.",
                    )
                )
        return result

    guarded.__labkit_guarded__ = True  # type: ignore[attr-defined]
    return guarded


_provenance.register_wrapper(reference_answer_code())  # its closure, not the wrapper, is the reference


__all__ = [
    "ALWAYS",
    "AnswerRejected",
    "COMPARES_WITH",
    "IN_PLACE",
    "compared_function",
    "guard_answer",
    "reference_answer",
    "handed_out",
    "labkit_origin",
    "mark_handed_out",
    "references_trapped",
    "take_input_change",
]
