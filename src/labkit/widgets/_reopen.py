"""A note beside each explorer for the notebook reopened later, when the explorer itself is gone, and notebooks saved
without widget views.

An ipywidgets explorer lives in the kernel that made it. A saved notebook keeps only a reference to it, so when
the notebook is reopened (a new kernel) JupyterLab shows "Error displaying widget: model not found" in its place and
logs the same in the browser's console, which says nothing about what to do. Two parts answer it:

- :func:`explorer` makes a box display as itself plus one line of plain text that is saved with the notebook and says
  what to do: run the cell again.
- :func:`drop_widget_views` is the Jupyter server's pre-save hook under ``labkit lab`` (its JupyterLab configuration,
  ``labkit/data/jupyter/jupyter_server_config.json``): a notebook is saved without widget views and widget state, so
  a reopened notebook holds only the note and its other outputs, and nothing asks for a model that is gone. (The
  choice against saving widget state: a saved explorer would look live but could not move, and its state can be large.)
"""

from __future__ import annotations

import functools
import html
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The note shown under every explorer (and kept in the saved notebook).
REOPEN_NOTE = (
    "An interactive explorer, live while this notebook's kernel runs. A saved notebook keeps this note, not the "
    "explorer: in a reopened notebook, run this cell again to bring the explorer back."
)
#: the MIME type of an ipywidgets view in a notebook's outputs
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


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


def drop_widget_views(model: dict[str, Any], **_: Any) -> None:
    """Jupyter server pre-save hook: a notebook being saved loses its widget views (an output whose data holds one
    goes whole: its text is a placeholder like ``VBox(...)``) and its saved widget state; every other output stays.
    Anything but a notebook is left as it is. Called as ``hook(model=..., path=..., contents_manager=...)``."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    notebook = model["content"]
    for cell in notebook.get("cells", []):
        outputs = cell.get("outputs")
        if outputs:
            cell["outputs"] = [o for o in outputs if WIDGET_VIEW not in (o.get("data") or {})]
    metadata = notebook.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("widgets", None)
