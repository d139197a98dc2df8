"""Which code is the learner's, and tracebacks that end at the learner's own line.

A foundation module (it imports nothing of labkit), used by the simulator (:mod:`labkit.sim.limits` counts only
the time spent in learner code; :mod:`labkit.sim.engine` hides its frames from a launch's error) and by
:mod:`labkit.ranks` (an Interrupt or a time-out of a run on MPI processes).

An exception that leaves labkit (Interrupt, a time-out, an error a thread raised) has passed through labkit's
insides: greenlet switches, the scheduler, a process monitor. IPython shows an exception's
``_render_traceback_()`` instead of its full traceback when it has one (as IPython hides its own frames);
:func:`hide_library_frames` gives an exception one that keeps only the learner's frames (the cell, the kernel's
line) and ends with the exception's own line, which for these exceptions is the summary (what stopped and why).
Outside IPython nothing changes.
"""

from __future__ import annotations

import os
import sys
import traceback
import types
from functools import lru_cache
from pathlib import Path
from typing import Any

_LIBRARY_ROOTS = tuple(
    str(Path(p).resolve()) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parent)}
)


@lru_cache(maxsize=4096)
def is_learner_file(filename: str) -> bool:
    """True for code a learner wrote: a notebook cell or a script, not Python, its packages or labkit."""
    if filename.startswith("<frozen") or filename in ("<string>",):
        return False
    if filename.startswith("<"):  # "<ipython-input-...>", "<stdin>": typed by someone
        return True
    try:
        resolved = str(Path(filename).resolve())
    except OSError:
        return True
    return not resolved.startswith(_LIBRARY_ROOTS)


def is_learner_frame(frame: Any) -> bool:
    """True for a frame of learner code: a learner file (:func:`is_learner_file`), or code that ``exec()`` or
    ``eval()`` compiled (file ``"<string>"``) running in a learner's namespace.

    A string of code has no file to judge it by, so its globals decide: the namespace of a library module
    (the ``__init__`` that ``dataclasses`` writes for a class of labkit or of a package runs in that module's
    globals) is library code; any other namespace (a notebook's ``__main__``, a script's module, a fresh dict
    that a learner passed to ``exec``) is the learner's.
    """
    code = frame.f_code
    if code.co_filename != "<string>":
        return is_learner_file(code.co_filename)
    return _namespace_is_learner(frame.f_globals)


def _namespace_is_learner(namespace: dict) -> bool:
    name = namespace.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or getattr(module, "__dict__", None) is not namespace:
        return True  # exec(src, {}), or a namespace that only carries a module's name
    filename = getattr(module, "__file__", None)
    return filename is None or is_learner_file(filename)


def learner_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` with only the learner's frames (:func:`is_learner_frame`), in the same order."""
    kept = []
    while tb is not None:
        if is_learner_frame(tb.tb_frame):
            kept.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    out = None
    for frame, lasti, lineno in reversed(kept):
        out = types.TracebackType(out, frame, lasti, lineno)
    return out


def stack_traceback(frame: types.FrameType | None) -> types.TracebackType | None:
    """A traceback of the learner's frames (:func:`is_learner_frame`) on the stack that ends at ``frame``, outermost
    first, each at the line it is at: what an exception raised at ``frame`` would carry. For code that was stopped
    without an exception passing through it (a suspended greenlet's frame: a simulated thread between two steps), so
    that :func:`render` shows where it was as it shows an Interrupt."""
    out = None
    while frame is not None:
        if is_learner_frame(frame):
            out = types.TracebackType(out, frame, frame.f_lasti, frame.f_lineno)
        frame = frame.f_back
    return out


def render(exc: BaseException) -> list[str]:
    """The lines IPython shows for ``exc``: its learner frames, then ``Type: message``."""
    tb = learner_traceback(exc.__traceback__)
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return list(shell.InteractiveTB.structured_traceback(type(exc), exc, tb))
    except Exception:  # noqa: BLE001, S110 - fall back to Python's own formatting
        pass
    return ["".join(traceback.format_exception(type(exc), exc, tb, chain=False))]


def hide_library_frames(exc: BaseException) -> BaseException:
    """Give ``exc`` a ``_render_traceback_`` that shows only the learner's frames (once; returns ``exc``)."""
    if getattr(exc, "_render_traceback_", None) is None:
        try:
            exc._render_traceback_ = lambda: render(exc)  # type: ignore[attr-defined]
        except AttributeError:  # an exception type with __slots__: shown as it is
            pass
    return exc


def has_hidden_frames(exc: Any) -> bool:
    """True when :func:`hide_library_frames` was applied to ``exc``."""
    return callable(getattr(exc, "_render_traceback_", None))
