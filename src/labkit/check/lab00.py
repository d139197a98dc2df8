"""Checks for lab 00 (start here): the first kernel."""

from __future__ import annotations

from typing import Any

from .core import exercise
from .harness import check_kernel_1d, random_array


def _reference_vector_add() -> Any:
    from .harness import cuda_module

    cuda_module()  # the mode must be set before numba is imported
    from ._ref00 import vector_add

    return vector_add


@exercise(
    "00.vector-add",
    kind="kernel",
    title="Your first kernel: add two vectors",
    hints=[
        "Each thread handles one element. Which element? `cuda.grid(1)` gives the thread's global index.",
        "The grid usually has more threads than elements (it comes in whole blocks). Threads whose index is "
        "past the end must do nothing: guard with `if i < out.size:`.",
        "The whole body is three lines: `i = cuda.grid(1)`, `if i < out.size:`, `out[i] = a[i] + b[i]`.",
    ],
    reference=_reference_vector_add,
)
def vector_add(kernel: Any) -> str:
    """Grade a kernel ``vector_add(a, b, out)`` that sets ``out[i] = a[i] + b[i]``."""
    return check_kernel_1d(
        kernel,
        make_inputs=lambda n: (random_array(n), random_array(n)),
        reference=lambda a, b: a + b,
        blocks=(32, 128),
    )
