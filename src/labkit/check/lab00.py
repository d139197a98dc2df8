"""Checks for lab 00 (start here): the first kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import exercise
from .harness import Launch, grade, random_array


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
    from .draws import choice, not_multiple, sizes_1d

    # fresh sizes each run: for blocks of 32 and of 64-256 threads, a partial last block, 1, one short of or past a
    # block, a multiple; then the largest block CUDA allows (1024 threads) with two blocks, the second partial
    mid = int(choice((64, 128, 256)))
    cases = [(n, 32) for n in sizes_1d(32)] + [(n, mid) for n in sizes_1d(mid)[:3]] + [(not_multiple(1025, 1600, 1024), 1024)]
    for k, (n, block) in enumerate(cases):
        a, b = random_array(n), random_array(n)
        grid = (n + block - 1) // block
        grade(kernel, Launch(grid, block, [a, b], (a + b).astype(np.float32), f"n={n}, {grid} block(s) of {block} threads",
                             out_shape=n, names=("a", "b", "out"), first=k == 0, reverse=k % 2 == 1))
    return (f"correct on {len(cases)} runs (fresh sizes from 1 up, blocks of 32 to 1024 threads), no out-of-bounds writes.")
