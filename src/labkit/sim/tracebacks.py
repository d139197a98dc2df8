"""Tracebacks of simulated launches that end at the learner's own line, without the engine's frames.

An exception that leaves a launch (Interrupt, a time-out, an error a thread raised) has passed through labkit's
engine: greenlet switches, the scheduler, the launch layer. :func:`hide_engine` gives it a ``_render_traceback_``
that IPython shows instead of the full traceback: the learner's frames (the cell that launched, the kernel's line),
then the exception's own line, the summary. The mechanism is :mod:`labkit.learner_frames`, shared with
:mod:`labkit.ranks`; outside IPython nothing changes.
"""

from __future__ import annotations

from ..learner_frames import has_hidden_frames as has_hidden_engine
from ..learner_frames import hide_library_frames as hide_engine
from ..learner_frames import learner_traceback, render

__all__ = ["has_hidden_engine", "hide_engine", "learner_traceback", "render"]
