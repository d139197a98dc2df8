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
