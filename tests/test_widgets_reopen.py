"""Every explorer a notebook shows displays with a note that outlives it: a reopened notebook (a new kernel) shows
"Error displaying widget" where the explorer was, and the saved note beside it says to run the cell again.

About 3 s on one core."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

import labkit
from labkit.widgets import architecture as arch, kernels, precision
from labkit.widgets._reopen import REOPEN_NOTE

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module", autouse=True)
def shell() -> InteractiveShell:
    return InteractiveShell.instance()


def _shown(box) -> list[dict]:
    with capture_output() as cap:
        display(box)
    return [o.data for o in cap.outputs]


EXPLORERS = {
    "roofline_explorer": lambda: arch.roofline_explorer("H200", "bf16", 10),
    "system_explorer": lambda: arch.system_explorer("DGX-1 (V100)", 0, 5),
    "dgx_comparison": lambda: arch.dgx_comparison(),
    "thread_map": lambda: kernels.thread_map(),
    "coalescing_explorer": lambda: kernels.coalescing_explorer(),
    "occupancy_calculator": lambda: kernels.occupancy_calculator("sm_90", threads=256, registers=32, shared=0),
    "bit_explorer": lambda: precision.bit_explorer(0.1),
}


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_an_explorer_displays_with_the_note_a_reopened_notebook_keeps(name: str) -> None:
    outputs = _shown(EXPLORERS[name]())
    assert len(outputs) == 2 and WIDGET in outputs[0], outputs
    assert WIDGET not in outputs[1] and outputs[1]["text/plain"] == REOPEN_NOTE
    assert "run this cell again" in outputs[1]["text/html"]


def test_the_picture_of_a_kernel_has_the_note_too() -> None:
    env = labkit.setup(quiet=True)
    if env.is_gpu:
        pytest.skip("the simulator's kernels")
    from numba import cuda

    @cuda.jit
    def copy(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    x = np.arange(32, dtype=np.float32)
    outputs = _shown(labkit.show(copy, x, np.zeros_like(x), grid=1, block=32))
    assert WIDGET in outputs[0] and outputs[1]["text/plain"] == REOPEN_NOTE


def test_every_public_widget_that_builds_with_its_defaults_has_the_note() -> None:
    import inspect

    import ipywidgets
    import labkit.widgets as lw

    built = []
    for name in dir(lw):
        fn = getattr(lw, name)
        if not inspect.isfunction(fn) or any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                             for p in inspect.signature(fn).parameters.values()):
            continue
        value = fn()
        if isinstance(value, ipywidgets.Widget):
            built.append(name)
            assert hasattr(value, "_ipython_display_"), f"labkit.widgets.{name}() shows no reopen note"
    assert set(EXPLORERS) <= set(built), built


def test_labkit_lab_saves_notebooks_without_widget_views(tmp_path) -> None:
    """What ``labkit lab``'s Jupyter server does on save (its configuration, read as Jupyter reads it, into the real
    contents manager): the explorer's view and the widget state go, the note and every other output stay, so a
    reopened notebook asks for no widget model ("model not found") and says to run the cell again."""
    import asyncio
    import json

    import nbformat
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from traitlets.config.loader import JSONFileConfigLoader

    from labkit.cli import LAB_CONFIG

    config = JSONFileConfigLoader("jupyter_server_config.json", path=str(LAB_CONFIG)).load_config()
    manager = AsyncLargeFileManager(config=config, root_dir=str(tmp_path))
    shown = _shown(EXPLORERS["coalescing_explorer"]())
    outputs = [nbformat.v4.new_output("display_data", data=d) for d in shown]
    outputs.append(nbformat.v4.new_output("stream", name="stdout", text="peak 4 sectors\n"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("labkit.widgets.coalescing_explorer()", outputs=outputs),
                                         nbformat.v4.new_markdown_cell("text")])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    asyncio.run(manager.save({"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))}, "lab.ipynb"))
    saved = nbformat.read(tmp_path / "lab.ipynb", as_version=4)
    kept = saved.cells[0].outputs
    assert [o.get("data", {}).get("text/plain", o.get("text")) for o in kept] == [REOPEN_NOTE, "peak 4 sectors\n"]
    assert WIDGET not in (tmp_path / "lab.ipynb").read_text() and "widgets" not in saved.metadata
    asyncio.run(manager.save({"type": "file", "format": "text", "content": WIDGET}, "notes.txt"))
    assert (tmp_path / "notes.txt").read_text() == WIDGET  # anything but a notebook is saved as it is
