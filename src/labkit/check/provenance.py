"""Provenance by code: an answer that reaches labkit's reference, by any route, is not the learner's answer.

Identity is not enough: ``cuda.jit(ref.py_func)`` builds a new kernel from the reference's Python function,
``types.FunctionType(ref.__code__, ...)`` copies a function, and ``functools.partial``, ``functools.lru_cache``, a
bound method or any callable object can wrap a call of it. Each of them keeps the reference's *code object*. So
:func:`reached_reference` walks what an answer reaches (a kernel's ``py_func``, a function's code and the code
nested in it, its closure, defaults and the globals it names, ``__wrapped__``, ``partial.func`` and its arguments,
a bound method's function and object, a callable object's ``__call__`` and attributes) and names the first
forbidden code object it meets: the exercise's reference (what its factory returns, kernels and functions alike),
the functions its check compares with, and ``solved_or_reference``. A CUDA C++ answer (a source string) is text: one
equal to labkit's source is not refused (a short kernel written from the statement can be the same lines); what
``solved_or_reference`` handed out is refused by identity.

The objects labkit's reference factories return are remembered (:func:`mark_labkit_made`): labkit's own reference,
as labkit made it, is graded by labkit's tests and is exempt; what ``solved_or_reference`` handed to a learner is
rejected before this by identity (``answers_guard.handed_out``).
"""

from __future__ import annotations

import functools
import inspect
import types
from pathlib import Path
from typing import Any, Callable, Iterator

_MADE: dict[int, Any] = {}  # id -> object: what labkit's reference factories returned
_FORBIDDEN: dict[str, tuple[dict[types.CodeType, str], frozenset[str]]] = {}  # per exercise: codes and sources
_FUNCTIONS: dict[str, tuple[types.FunctionType, ...]] = {}  # per exercise: the reference's plain Python functions
_WRAPPERS: set[types.CodeType] = set()  # code of labkit's thin wrappers of a compared function (answers_guard's)
_LABKIT_DIR = Path(__file__).resolve().parents[1]
_LEAVES = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType, types.BuiltinFunctionType)
_MAX_DEPTH = 8


def mark_labkit_made(reference: Any) -> Any:
    """Remember ``reference`` (and each item of a tuple of them) as an object labkit's reference factory returned."""
    for obj in (reference, *(reference if isinstance(reference, tuple) else ())):
        _MADE[id(obj)] = obj
    return reference


def labkit_made(answer: Any) -> bool:
    """True when ``answer`` is itself an object one of labkit's reference factories returned (labkit's tests grade
    labkit's references directly)."""
    return _MADE.get(id(answer)) is answer and not isinstance(answer, (int, float, complex, bool, type(None)))


def _label(fn: Any) -> str:
    fn = getattr(fn, "py_func", fn)
    module = getattr(fn, "__module__", None) or "labkit"
    name = str(getattr(fn, "__qualname__", getattr(fn, "__name__", "reference")))
    return f"{module}.{name.split('.<locals>', 1)[0]}"


def _code_tree(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_tree(const)


def _reference_codes(obj: Any, label: str, into: dict[types.CodeType, str], sources: set[str]) -> None:
    """The code objects (and CUDA C++ sources) of one reference object."""
    if isinstance(obj, str):
        if len(obj.strip()) > 40:
            sources.add(obj.strip())
        return
    if isinstance(obj, functools.partial):
        obj = obj.func
    fn = getattr(obj, "py_func", obj)
    if not isinstance(fn, types.FunctionType):
        fn = getattr(fn, "__wrapped__", fn)
    if isinstance(fn, types.FunctionType):
        if fn.__code__ in _WRAPPERS:  # labkit's thin wrapper of a compared function: what it calls
            for cell in fn.__closure__ or ():
                _reference_codes(cell.cell_contents, label, into, sources)
            return
        fn = inspect.unwrap(fn)
        for code in _code_tree(fn.__code__):
            into.setdefault(code, label or _label(fn))


def forbidden(
    exercise_id: str, reference: Callable[[], Any] | None, compared: tuple[Callable[..., Any], ...]
) -> tuple[dict[types.CodeType, str], frozenset[str]]:
    """The code objects no answer to ``exercise_id`` may reach (code -> the dotted name to show), and the CUDA C++
    sources it may not be: the reference factory's objects and ``compared`` (the functions the check compares with)."""
    if exercise_id in _FORBIDDEN:
        return _FORBIDDEN[exercise_id]
    codes: dict[types.CodeType, str] = {}
    sources: set[str] = set()
    for fn in compared:
        _reference_codes(fn, _label(fn), codes, sources)
    made: Any = None
    if reference is not None:
        try:
            made = reference()
        except Exception:  # noqa: BLE001 - a reference that cannot be built here (a GPU-only one) forbids nothing
            made = None
    plain: list[types.FunctionType] = []
    for obj in made if isinstance(made, tuple) else (made,):
        if isinstance(obj, types.FunctionType) and not obj.__code__.co_freevars and not _inside_guard(obj):
            plain.append(obj)
        if obj is not None:
            _reference_codes(
                obj, f"labkit's reference answer ({_label(obj)})" if not isinstance(obj, str) else "", codes, sources
            )
    _FORBIDDEN[exercise_id] = (codes, frozenset(sources))
    _FUNCTIONS[exercise_id] = tuple(plain)
    return _FORBIDDEN[exercise_id]


def reference_functions(exercise_id: str) -> tuple[types.FunctionType, ...]:
    """The plain Python functions among ``exercise_id``'s reference objects (after :func:`forbidden` ran for it):
    the answer guard traps them while an answer runs, so a call by any name is caught."""
    return _FUNCTIONS.get(exercise_id, ())


def register_wrapper(code: types.CodeType) -> None:
    """Make ``code`` known as the code of labkit's thin wrapper of a function the check compares with (the answer
    guard registers its own): its closure, not the wrapper, is the reference."""
    _WRAPPERS.add(code)


def _inside_guard(fn: types.FunctionType) -> bool:
    return fn.__code__ in _WRAPPERS


def _inside_labkit(fn: types.FunctionType) -> bool:
    try:
        return _LABKIT_DIR in Path(fn.__code__.co_filename).resolve().parents
    except (OSError, ValueError):
        return False


def _children(obj: Any) -> Iterator[tuple[Any, str]]:
    """What ``obj`` reaches one step on, each with the route's words."""
    if isinstance(obj, functools.partial):
        yield obj.func, "functools.partial of"
        for a in (*obj.args, *obj.keywords.values()):
            yield a, "an argument bound by functools.partial:"
        return
    if isinstance(obj, types.MethodType):
        yield obj.__func__, "a bound method of"
        yield obj.__self__, "an object holding"
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for item in list(obj)[:64]:
            yield item, "a collection holding"
        return
    if isinstance(obj, dict):
        for item in list(obj.values())[:64]:
            yield item, "a dict holding"
        return
    wrapped = inspect.getattr_static(obj, "__wrapped__", None)
    if wrapped is not None:
        yield wrapped, "a wrapper (functools.wraps, lru_cache) of"
    if isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield cell.cell_contents, "a closure over"
            except ValueError:  # an empty cell
                continue
        for d in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
            yield d, "a default argument holding"
        if not _inside_labkit(obj):  # labkit's own helpers name what they need; the learner's names are followed
            names = {n for code in _code_tree(obj.__code__) for n in code.co_names}
            for name in sorted(names):
                value = obj.__globals__.get(name)
                if value is not None and callable(value) and not isinstance(value, _LEAVES):
                    yield value, "a function that calls"
        return
    if isinstance(obj, _LEAVES) or getattr(obj, "py_func", None) is not None:
        return
    call = inspect.getattr_static(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        yield call, "a callable object calling"
    try:
        attrs = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        attrs = None
    if isinstance(attrs, dict):
        for item in list(attrs.values())[:64]:
            yield item, "an object holding"


def reached_reference(
    exercise_id: str, answer: Any, reference: Callable[[], Any] | None, compared: tuple[Callable[..., Any], ...]
) -> tuple[str, str] | None:
    """``(name, route)`` when ``answer`` reaches a forbidden code object of ``exercise_id`` (or is the reference's
    CUDA C++ source), else None. labkit's own reference, as its factory made it, is exempt."""
    codes, sources = forbidden(exercise_id, reference, compared)  # first: it runs the factory, which marks what it made
    if labkit_made(answer):
        return None
    if isinstance(answer, str):  # a source text equal to labkit's is not refused: a learner may write the same lines
        return None
    seen: set[int] = set()
    stack: list[tuple[Any, str, int]] = [(answer, "", 0)]
    while stack:
        obj, route, depth = stack.pop()
        if id(obj) in seen or depth > _MAX_DEPTH or isinstance(obj, _LEAVES):
            continue
        seen.add(id(obj))
        try:
            py = getattr(obj, "py_func", None)  # a kernel (a Numba dispatcher or the simulator's)
            fn = py if isinstance(py, types.FunctionType) else obj
            if isinstance(fn, types.FunctionType):
                for code in _code_tree(fn.__code__):
                    if code in codes:
                        how = "a kernel compiled from" if py is not None else (route or "a copy of")
                        if obj is answer and py is None:
                            how = "a copy of (the same code as)"
                        return codes[code], how
            if py is not None:
                continue  # a kernel's globals are device code; only its own code matters
            stack.extend((child, route or words, depth + 1) for child, words in _children(obj))
        except Exception:  # noqa: BLE001 - an object that breaks on inspection is not followed further
            continue
    return None


__all__ = ["forbidden", "labkit_made", "mark_labkit_made", "reached_reference", "register_wrapper"]
