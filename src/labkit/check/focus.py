"""What the picture of a failed kernel check opens on: the thread and element its message is about.

A failed kernel check offers ``labkit.show(kernel, labkit.check.harness.failed_case())``. :func:`focus_of` turns
the evidence behind the verdict into a :class:`labkit.sim.trace.Focus`: the thread that raised (an index out of
bounds names its thread and block, and the array and index it used), the two threads of a race, the thread that read memory nobody had written,
or the output element the comparison named (the picture then opens on the last thread that wrote it).
"""

from __future__ import annotations

import re
from typing import Any

from ..sim.trace import Focus, out_of_bounds

_INDEX = re.compile(r"index (-?\d+) is out of bounds")


def _array_name(name: str | None) -> str | None:
    """``tile`` for the memory model's "shared array `tile`", as the picture names it."""
    if name and name.startswith("shared array `") and name.endswith("`"):
        return name[len("shared array `") : -1]
    return name


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def focus_of(evidence: Any, finding: str, *, output: str | None = None, report: Any = None) -> Focus:
    """The :class:`~labkit.sim.trace.Focus` of one failed launch.

    ``evidence`` is what made the verdict: the exception the launch raised (with the simulator's ``sim_thread``),
    a :class:`~labkit.sim.memory.Race`, or the :class:`~labkit.check.core.Failed` of the comparison (its
    ``element`` attribute, the output element it names); ``finding`` the check's message; ``output`` the name of
    the output argument; ``report`` the strict launch's report (an uninitialised read in it is what the check's
    likely cause names, so the picture opens there)."""
    finding = _first_line(finding)
    where = getattr(evidence, "sim_thread", None)
    if where is not None:
        oob = out_of_bounds(evidence) if isinstance(evidence, BaseException) else None
        if oob is not None:  # the array and whole index the thread used (the picture draws that element, marked)
            return Focus(finding, array=_array_name(oob[0]), index=oob[1], thread=tuple(where[0]), block=tuple(where[1]))
        m = _INDEX.search(str(evidence))
        return Focus(finding, index=(int(m.group(1)),) if m else None, thread=tuple(where[0]), block=tuple(where[1]))
    if hasattr(evidence, "second_thread") and hasattr(evidence, "block"):  # a race: the thread that came second
        return _on_access(finding, evidence, evidence.second_thread)
    uninitialised = getattr(report, "uninitialised", None)
    if uninitialised is not None:
        return _on_access(finding, uninitialised, uninitialised.thread)
    element = getattr(evidence, "element", None)
    if element is not None and output is not None:
        return Focus(finding, array=output, index=tuple(int(i) for i in element))
    return Focus(finding)


def _on_access(finding: str, access: Any, thread: Any) -> Focus:
    """The focus on one recorded access (a race, a read of unwritten memory): its array, its element, ``thread``
    of its block."""
    return Focus(
        finding,
        array=_array_name(access.array),
        index=tuple(access.index),
        thread=tuple(thread),
        block=tuple(access.block),
    )
