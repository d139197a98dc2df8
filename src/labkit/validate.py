"""Argument checks for labkit's public entry points: a wrong argument is a :class:`~labkit.errors.LabkitError`.

Every public function and widget constructor checks what a learner passes before using it, so a ``None``, a
string where a number belongs, a NaN or an out-of-range value is reported as one sentence saying what was
expected, never as a traceback from labkit's insides::

    threads = require_int(threads, "threads_per_block", min=1, max=1024)
    arch = require_choice(arch, "arch", ["sm_70", "sm_80", "sm_90"])   # "sm_91" -> "Did you mean sm_90?"

Each ``require_*`` returns the value in its canonical form (an ``int``, a ``float``, a ``list``, an array).
This module imports nothing but the standard library at import time (NumPy only inside :func:`require_array`).
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .errors import LabkitError

__all__ = [
    "describe",
    "did_you_mean",
    "require_bool",
    "require_callable",
    "require_array",
    "require_choice",
    "require_int",
    "require_items",
    "require_number",
    "require_path",
    "require_sequence",
    "require_str",
]

T = TypeVar("T")


def describe(value: Any) -> str:
    """A short picture of ``value`` for a message: its repr (cut to 60 characters) and, unless obvious, its type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return text
    return f"{text} (a {type(value).__name__})"


def _range_text(min: float | None, max: float | None, *, min_open: bool = False) -> str:
    if min is not None and max is not None:
        return f" from {min:g} to {max:g}" if not min_open else f" above {min:g} and at most {max:g}"
    if min is not None:
        return f" {'above' if min_open else 'of at least'} {min:g}"
    if max is not None:
        return f" of at most {max:g}"
    return ""


def _expected(kind: str, min: float | None, max: float | None, *, min_open: bool = False) -> str:
    """``"a positive whole number"``, ``"a non-negative finite number"``, ``"a whole number from 1 to 1024"``."""
    if min == 0 and max is None:
        return f"a {'positive' if min_open else 'non-negative'} {kind}"
    if min == 1 and max is None and kind == "whole number":
        return "a positive whole number"
    return f"a {kind}{_range_text(min, max, min_open=min_open)}"


def _fail(name: str, expected: str, value: Any, fix: str | None) -> LabkitError:
    return LabkitError(f"{name} must be {expected}, got {describe(value)}.", fix=fix)


def require_int(value: Any, name: str, *, min: int | None = None, max: int | None = None, fix: str | None = None) -> int:
    """``value`` as an ``int``: a Python or NumPy integer, or a float with no fractional part (``256.0``).

    Refused, each with a message naming ``name`` and the range: ``None``, strings, bools, ``256.5``, NaN, and
    values below ``min`` or above ``max``."""
    if type(value) is int and (min is None or value >= min) and (max is None or value <= max):
        return value  # the common case, without the abstract-class checks (hot in occupancy searches)
    expected = _expected("whole number", min, max)
    if isinstance(value, bool) or value is None:
        raise _fail(name, expected, value, fix)
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        out = int(value)
    else:
        raise _fail(name, expected, value, fix)
    if (min is not None and out < min) or (max is not None and out > max):
        raise _fail(name, expected, value, fix)
    return out


def require_number(
    value: Any,
    name: str,
    *,
    min: float | None = None,
    max: float | None = None,
    min_open: bool = False,
    finite: bool = True,
    nan: bool = False,
    fix: str | None = None,
) -> float:
    """``value`` as a ``float``: any real number (int, float, NumPy scalar), finite unless ``finite=False``,
    never NaN unless ``nan=True`` (then NaN is returned as it is, whatever ``min`` and ``max``).

    ``min_open=True`` makes ``min`` itself refused (a positive number: ``min=0, min_open=True``)."""
    expected = _expected("finite number" if finite else "number", min, max, min_open=min_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(name, expected, value, fix)
    out = float(value)
    if nan and math.isnan(out):
        return out
    if math.isnan(out) or (finite and math.isinf(out)):
        raise _fail(name, expected, value, fix)
    if min is not None and (out < min or (min_open and out == min)):
        raise _fail(name, expected, value, fix)
    if max is not None and out > max:
        raise _fail(name, expected, value, fix)
    return out


def require_bool(value: Any, name: str, *, fix: str | None = None) -> bool:
    """``value`` as a ``bool``: ``True``/``False`` (or a NumPy bool); 0 and 1 are refused, being numbers."""
    if type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise _fail(name, "True or False", value, fix)


def require_str(value: Any, name: str, *, empty: bool = False, fix: str | None = None) -> str:
    """``value`` as a ``str`` (stripped of surrounding blanks); an empty one is refused unless ``empty=True``."""
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise _fail(name, "a non-empty string" if not empty else "a string", value, fix)
    return value.strip()


def require_path(value: Any, name: str, *, fix: str | None = None) -> Path:
    """``value`` as a :class:`~pathlib.Path`: a non-empty ``str`` or an ``os.PathLike`` naming a text path.

    Refused: ``None``, numbers, bools, bytes, containers, an empty or blank string (which :class:`Path` would take as
    the current folder), and a NUL character (which no file name holds)."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise _fail(name, "a path (a non-empty string or a pathlib.Path)", value, fix)
    return Path(text)


def did_you_mean(text: str, choices: Iterable[str], n: int = 3) -> str:
    """``" Did you mean X or Y?"`` for the choices closest to ``text`` (case-insensitive), or ``""``."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    close = difflib.get_close_matches(text.lower(), list(lowered), n=n, cutoff=0.5)
    return f" Did you mean {' or '.join(lowered[c] for c in close)}?" if close else ""


def require_choice(value: Any, name: str, choices: Iterable[T], *, fix: str | None = None) -> T:
    """The member of ``choices`` that ``value`` names: exact, else the one string equal to it ignoring case and
    surrounding blanks. Anything else is refused: a string as ``unknown <name> 'x'. Did you mean ...?`` with the
    closest names, another type as ``<name> must be one of ...``; ``fix`` (default: the list) says what to do."""
    options = list(choices)
    listed = ", ".join(repr(c) for c in options)
    if not isinstance(value, str):
        if any(value == c and type(value) is type(c) for c in options):
            return value  # type: ignore[no-any-return]
        raise LabkitError(f"{name} must be one of {listed}; got {describe(value)}.", fix=fix)
    if value in options:
        return value  # type: ignore[return-value]
    key = value.strip().lower()
    for c in options:
        if isinstance(c, str) and c.lower() == key:
            return c
    hint = did_you_mean(value.strip(), [str(c) for c in options])
    raise LabkitError(f"unknown {name} {value!r}.{hint}", fix=fix or f"Use one of: {listed}.")


def require_callable(value: Any, name: str, *, what: str = "a function", fix: str | None = None) -> Callable[..., Any]:
    """``value`` when it can be called; else a message saying ``what`` was expected."""
    if not callable(value):
        raise _fail(name, what, value, fix)
    return value  # type: ignore[no-any-return]


def require_sequence(
    value: Any,
    name: str,
    *,
    item: Callable[[Any, str], T] | None = None,
    min_len: int = 0,
    max_len: int | None = None,
    what: str = "a list",
    fix: str | None = None,
) -> list[T]:
    """``value`` as a ``list``: a list, tuple, range or 1-D array (not a string, a dict or a single number).

    ``item(element, "name[i]")`` checks and converts each element (e.g. ``require_int`` with a range by
    ``functools.partial``, or a lambda)."""
    if isinstance(value, (str, bytes, dict)) or value is None or not hasattr(value, "__iter__"):
        raise _fail(name, what, value, fix)
    if getattr(value, "ndim", 1) != 1:
        raise _fail(name, f"{what} (one-dimensional)", value, fix)
    try:
        items = list(value)
    except TypeError:
        raise _fail(name, what, value, fix) from None
    if len(items) < min_len or (max_len is not None and len(items) > max_len):
        size = f"at least {min_len}" if max_len is None else f"{min_len}" if min_len == max_len else f"{min_len} to {max_len}"
        raise LabkitError(f"{name} must have {size} element(s), got {len(items)}: {describe(value)}.", fix=fix)
    if item is None:
        return items
    return [item(x, f"{name}[{i}]") for i, x in enumerate(items)]


def require_array(
    value: Any,
    name: str,
    *,
    ndim: int | Sequence[int] | None = None,
    numeric: bool = True,
    finite: bool = False,
    min_size: int = 0,
    fix: str | None = None,
) -> Any:
    """``value`` as a NumPy array (lists, tuples, NumPy and array-likes), of ``ndim`` dimensions if given,
    of numbers if ``numeric`` (bools count), with no NaN or infinity if ``finite``, of at least ``min_size``
    elements."""
    import numpy as np

    dims = (ndim,) if isinstance(ndim, int) else tuple(ndim) if ndim is not None else None
    shape_text = (f"a {' or '.join(f'{d}-D' for d in dims)} array" if dims else "an array") + (" of numbers" if numeric else "")
    if value is None or isinstance(value, (str, bytes, dict)):
        raise _fail(name, shape_text, value, fix)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise _fail(name, shape_text, value, fix) from None
    if numeric and arr.dtype.kind not in "biuf":
        raise _fail(name, shape_text, value, fix)
    if dims is not None and arr.ndim not in dims:
        raise LabkitError(f"{name} must be {shape_text}, got a {arr.ndim}-D one of shape {arr.shape}.", fix=fix)
    if arr.size < min_size:
        raise LabkitError(f"{name} must have at least {min_size} element(s), got {arr.size}.", fix=fix)
    if finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise LabkitError(f"{name} must hold finite numbers; it has NaN or infinity.", fix=fix)
    return arr


def require_items(
    value: Any, name: str, cls: type | tuple[type, ...], *, what: str, min_len: int = 0, fix: str | None = None
) -> list[Any]:
    """``value`` as a ``list`` whose every element is an instance of ``cls`` (records a labkit function returned):
    ``what`` names the list for the message (``"the records peer_matrix() returned"``)."""
    items = require_sequence(value, name, what=what, min_len=min_len, fix=fix)
    for i, x in enumerate(items):
        if not isinstance(x, cls):
            kinds = cls if isinstance(cls, tuple) else (cls,)
            raise LabkitError(
                f"{name}[{i}] must be a {' or '.join(k.__name__ for k in kinds)} ({what}), got {describe(x)}.", fix=fix
            )
    return items
