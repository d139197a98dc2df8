"""A note beside each explorer for the notebook reopened later, when the explorer itself is gone.

An ipywidgets explorer lives in the kernel that made it. A saved notebook keeps only a reference to it, so when
the notebook is reopened (a new kernel) JupyterLab shows "Error displaying widget: model not found" in its place,
which says nothing about what to do. :func:`explorer` makes a box display as itself plus one line of plain text
that is saved with the notebook and says what to do: run the cell again.
"""

from __future__ import annotations

import functools
import html
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The note shown under every explorer (and kept in the saved notebook).
REOPEN_NOTE = (
    "An interactive explorer, live while this notebook's kernel runs. In a reopened notebook it shows "
    '"Error displaying widget": run this cell again to bring the explorer back.'
)


def note_bundle() -> dict[str, str]:
    """The note as display data: small grey HTML, and plain text for other front ends."""
    return {
        "text/html": f"<div class='labkit-reopen-note' style='color:#666; font-size:0.85em'>"
        f"&#x21bb; {html.escape(REOPEN_NOTE)}</div>",
        "text/plain": REOPEN_NOTE,
    }


def with_note(box: Any) -> Any:
    """``box`` (an ipywidgets widget), set to display as itself followed by :data:`REOPEN_NOTE`; returned."""

    def display_with_note() -> None:
        from IPython.display import display

        display(box._repr_mimebundle_(), raw=True)  # the widget view, as ipywidgets displays it
        display(note_bundle(), raw=True)

    box._ipython_display_ = display_with_note
    return box


def explorer(make: F) -> F:
    """Decorator for a function that returns an explorer: the box it returns displays with the reopen note."""

    @functools.wraps(make)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return with_note(make(*args, **kwargs))

    return wrapper  # type: ignore[return-value]
