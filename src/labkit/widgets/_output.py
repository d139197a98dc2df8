"""What an explorer's Output widget shows: a plotly figure, or a LabkitError with what to do, never a stale figure.

Explorers set ``out.outputs`` directly (display data), so they build and update without a browser or a kernel,
and an error a control causes shows in the widget itself rather than only in JupyterLab's log console.
"""

from __future__ import annotations

import functools
import html
import json
from typing import Any, Callable

from ..errors import LabkitError

__all__ = ["figure_outputs", "guarded", "message_outputs"]


def figure_outputs(fig: Any) -> tuple[dict[str, Any], ...]:
    """A plotly figure as an Output widget's display data (renders in Jupyter; no kernel needed to build it)."""
    title = fig.layout.title.text if fig.layout.title is not None else None
    return (
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "application/vnd.plotly.v1+json": json.loads(fig.to_json()),
                "text/plain": f"<plotly figure: {title or 'untitled'}>",
            },
        },
    )


def message_outputs(exc: LabkitError, what: str = "No chart") -> tuple[dict[str, Any], ...]:
    """A LabkitError as display data: ``what``, the message and, on its own line, what to do."""
    text, _, fix = str(exc).partition("\n  What to do: ")
    body = f"<b>{html.escape(what)}:</b> {html.escape(text)}" + (f"<br><b>What to do:</b> {html.escape(fix)}" if fix else "")
    return (
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "text/html": f"<div class='labkit-widget-message' style='color:#a04000'>{body}</div>",
                "text/plain": f"{what}: {exc}",
            },
        },
    )


def guarded(box: Any, out: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate an explorer's update function: a LabkitError it raises clears ``box.figure`` and shows in ``out``."""

    def wrap(update: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(update)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                update(*args, **kwargs)
            except LabkitError as exc:
                box.figure = None
                out.outputs = message_outputs(exc)

        return run

    return wrap
