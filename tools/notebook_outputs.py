"""What an executed solution notebook keeps of its outputs, so that it reads (and the website shows it) without a kernel.

``tools/build_notebooks.py --execute`` runs a solution notebook in ``sim`` mode and calls :func:`keep`:

- check cells (tagged ``nbval-check-output``) keep their outputs as they are: nbval compares them;
- every other code cell keeps its text and HTML, but never an error or anything on stderr, and its plotly figures
  as :data:`SITE_FIGURE` (the figure's JSON, which the website draws with a local plotly.js) beside a line of text.
  Not as plotly's own type: JupyterLab's plotly renderer writes a PNG into every figure output it draws, which would
  mark a freshly opened solution notebook as changed (tests/test_browser.py); JupyterLab shows the line of text
  ("run the cell to draw it") until the cell runs;
- an interactive explorer (an ipywidgets view) cannot live without its kernel, so its view becomes a static picture
  of the state the notebook left it in: a note that says so and names its controls' values, then the HTML and the
  figures its visible parts showed, up to :data:`WIDGET_FIGURE_BYTES` of figure JSON per explorer (a thread trace
  draws large figures); the note names what was left out.
  labkit's own "reopened notebook" note ("run this cell again") goes, since the view it speaks of is gone.

The widget state itself (often megabytes) is not stored.
"""

from __future__ import annotations

import html
import json
from typing import Any

PLOTLY = "application/vnd.plotly.v1+json"
SITE_FIGURE = "application/vnd.labkit.plotly+json"
FIGURE_TEXT = "[a plotly figure, stored for the course website: run the cell to draw it here]"
WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
REOPEN_NOTE_CLASS = "labkit-reopen-note"
SNAPSHOT_CLASS = "labkit-snapshot-note"
WIDGET_FIGURE_BYTES = 60_000
BOXES = {"VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"}
SELECTED_ONLY = {"TabModel", "AccordionModel", "StackModel"}
TEXTUAL = {"HTMLModel", "HTMLMathModel", "LabelModel"}


def _ref(value: Any) -> str | None:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") else None


class _Snapshot:
    """Walks one widget's model tree in its saved state and collects what a reader would have seen."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.controls: list[str] = []
        self.outputs: list[dict[str, Any]] = []
        self.dropped: list[int] = []  # sizes of the figures left out
        self.figure_bytes = 0

    def walk(self, model_id: str | None) -> None:
        model = self.state.get(model_id or "")
        if model is None:
            return
        name, st = model.get("model_name", ""), model.get("state", {})
        if name in BOXES | SELECTED_ONLY:
            children = [_ref(c) for c in st.get("children", [])]
            index = st.get("selected_index")
            if name in SELECTED_ONLY and isinstance(index, int) and 0 <= index < len(children):
                children = [children[index]]
            for child in children:
                self.walk(child)
        elif name == "OutputModel":
            for out in st.get("outputs", []):
                self.output(out)
        elif name in TEXTUAL:
            value = st.get("value", "")
            if value:
                text = value if name != "LabelModel" else html.escape(value)
                self.outputs.append(_display({"text/html": text}))
        elif name == "FigureModel":  # a plotly FigureWidget
            self.figure({"data": st.get("_data", []), "layout": st.get("_layout", {})})
        elif "value" in st or "index" in st:
            self.control(name, st)

    def control(self, name: str, st: dict[str, Any]) -> None:
        label = st.get("description") or name.removesuffix("Model")
        labels, index = st.get("_options_labels"), st.get("index")
        if labels and isinstance(index, int) and 0 <= index < len(labels):
            value: Any = labels[index]
        elif labels and isinstance(index, list):  # a multiple selection
            value = ", ".join(labels[i] for i in index if isinstance(i, int) and 0 <= i < len(labels)) or "none"
        else:
            value = st.get("value")
        if isinstance(value, list):
            value = "–".join(str(v) for v in value)
        self.controls.append(f"{label} = {value}")

    def output(self, out: dict[str, Any]) -> None:
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            if out.get("name") == "stdout":
                self.outputs.append(out)
        elif WIDGET in data:
            self.walk(data[WIDGET].get("model_id"))
        elif PLOTLY in data:
            self.figure(data[PLOTLY])
        elif data and REOPEN_NOTE_CLASS not in str(data.get("text/html", "")):
            self.outputs.append(_display(data))

    def figure(self, fig: dict[str, Any]) -> None:
        size = len(json.dumps(fig))
        if self.figure_bytes + size > WIDGET_FIGURE_BYTES:
            self.dropped.append(size)
        else:
            self.figure_bytes += size
            self.outputs.append(stored_figure(fig))

    def note(self) -> dict[str, Any]:
        parts = ["A static picture of an interactive explorer, as the notebook left it"]
        if self.controls:
            parts.append(f" ({'; '.join(self.controls)})")
        parts.append(". Run it in JupyterLab to move the slider and the other controls.")
        if self.dropped:
            sizes = ", ".join(f"{s // 1000} kB" for s in self.dropped)
            parts.append(f" Left out to keep the notebook small: {len(self.dropped)} more figure(s) ({sizes} of JSON).")
        text = "".join(parts)
        return _display({"text/html": f"<div class='{SNAPSHOT_CLASS}'>{html.escape(text)}</div>", "text/plain": text})


def _display(data: dict[str, Any]) -> dict[str, Any]:
    return {"output_type": "display_data", "data": data, "metadata": {}}


def stored_figure(fig: dict[str, Any]) -> dict[str, Any]:
    """How a plotly figure is stored: its JSON for the website, a line of text for JupyterLab."""
    return _display({SITE_FIGURE: fig, "text/plain": FIGURE_TEXT})


def snapshot(model_id: str, state: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs that stand for the widget view ``model_id``: a note, then what its visible parts showed."""
    snap = _Snapshot(state)
    snap.walk(model_id)
    return [snap.note(), *snap.outputs]


def widget_state(nb: Any) -> dict[str, Any]:
    """The notebook's saved widget models, ``{model_id: {"model_name": ..., "state": ...}}`` (empty when none)."""
    return dict(nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}))


def keep(nb: Any, checked_tag: str) -> Any:
    """Trim an executed notebook's outputs in place as the module docstring says; returns the notebook."""
    import nbformat

    state = widget_state(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if checked_tag in cell.metadata.get("tags", []):
            continue
        kept: list[Any] = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if out.output_type == "error" or (out.output_type == "stream" and out.get("name") == "stderr"):
                continue
            if WIDGET in data:
                kept.extend(nbformat.from_dict(o) for o in snapshot(data[WIDGET].get("model_id", ""), state))
            elif PLOTLY in data:
                kept.append(nbformat.from_dict(stored_figure(data[PLOTLY])))
            elif REOPEN_NOTE_CLASS in str(data.get("text/html", "")):
                continue
            else:
                kept.append(out)
        cell.outputs = kept
        if not kept:
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    return nb
