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


@exercise("00.vector-add", kind="kernel", reference=_reference_vector_add)
def vector_add(kernel: Any) -> str:
    """Grade a kernel ``vector_add(a, b, out)`` that sets ``out[i] = a[i] + b[i]``."""
    from .draws import not_multiple, sizes_1d

    # fresh sizes each run, on a fixed set of blocks that defeats each shortcut: blocks of 32 (a partial last block,
    # 1, one short of or past a block, a multiple: a kernel that assumes any larger block fails here), blocks of 96
    # and 200 threads (a power-of-two shift for a division fails there), 256 threads on more than 65,536 elements (an
    # int16 or a uint16 index wraps), and the largest block (1024 threads) with two blocks, the second partial
    cases = [(n, 32) for n in sizes_1d(32)] + [
        (not_multiple(193, 380, 96), 96),
        (not_multiple(401, 590, 200), 200),
        (not_multiple(65_600, 68_000, 256), 256),
        (not_multiple(1025, 1600, 1024), 1024),
    ]
    for k, (n, block) in enumerate(cases):
        a, b = random_array(n), random_array(n)
        grid = (n + block - 1) // block
        grade(
            kernel,
            Launch(
                grid,
                block,
                [a, b],
                (a + b).astype(np.float32),
                f"n={n}, {grid} block(s) of {block} threads",
                out_shape=n,
                names=("a", "b", "out"),
                first=k == 0,
                reverse=k % 2 == 1,
            ),
        )
    return f"correct on {len(cases)} runs (fresh sizes from 1 to 68,000 elements, blocks of 32 to 1024 threads), no out-of-bounds writes."
