"""Kernels written the way CUDA code outside the course is written, for ``sim_speed.py`` to time beside the course's
own: they were not shaped for labkit's simulator, so they keep its speed figures honest.

``cuda`` is set by the benchmark before the kernels are jitted (Numba's simulator or labkit's).
"""

from __future__ import annotations

from typing import Any

cuda: Any = None


def stencil7_gridstride(u, out):
    """The 7-point Laplacian of a 3-D field, one grid-stride loop over every point (no shared memory, no barrier):
    each point of ``out`` inside the border gets the sum of its six neighbours minus six times itself."""
    nz, ny, nx = u.shape
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for idx in range(start, nz * ny * nx, stride):
        z = idx // (ny * nx)
        y = (idx // nx) % ny
        x = idx % nx
        if 0 < z < nz - 1 and 0 < y < ny - 1 and 0 < x < nx - 1:
            out[z, y, x] = (u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
                            + u[z, y, x - 1] + u[z, y, x + 1] - 6.0 * u[z, y, x])
