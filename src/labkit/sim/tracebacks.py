"""Tracebacks of simulated launches that end at the learner's own line, without the engine's frames.

An exception that leaves a launch (Interrupt, a time-out, an error a thread raised) has passed through labkit's
engine: greenlet switches, the scheduler, the launch layer. IPython shows an exception's ``_render_traceback_()``
instead of its full traceback when it has one (as IPython hides its own frames); :func:`hide_engine` gives an
exception one that keeps only the learner's frames (the cell that launched, the kernel's line) and ends with the
exception's own line, which for these exceptions is the summary (where the launch stopped and why).
Outside IPython nothing changes.
"""

from __future__ import annotations

import traceback
import types
from typing import Any

from .limits import is_learner_frame


def learner_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` with only the learner's frames (:func:`labkit.sim.limits.is_learner_frame`), in the same order."""
    kept = []
    while tb is not None:
        if is_learner_frame(tb.tb_frame):
            kept.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    out = None
    for frame, lasti, lineno in reversed(kept):
        out = types.TracebackType(out, frame, lasti, lineno)
    return out


def render(exc: BaseException) -> list[str]:
    """The lines IPython shows for ``exc``: its learner frames, then ``Type: message``."""
    tb = learner_traceback(exc.__traceback__)
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return list(shell.InteractiveTB.structured_traceback(type(exc), exc, tb))
    except Exception:  # noqa: BLE001 - fall back to Python's own formatting
        pass
    return ["".join(traceback.format_exception(type(exc), exc, tb, chain=False))]


def hide_engine(exc: BaseException) -> BaseException:
    """Give ``exc`` a ``_render_traceback_`` that shows only the learner's frames (once; returns ``exc``)."""
    if getattr(exc, "_render_traceback_", None) is None:
        try:
            exc._render_traceback_ = lambda: render(exc)  # type: ignore[attr-defined]
        except AttributeError:  # an exception type with __slots__: shown as it is
            pass
    return exc


def has_hidden_engine(exc: Any) -> bool:
    """True when :func:`hide_engine` was applied to ``exc``."""
    return callable(getattr(exc, "_render_traceback_", None))
