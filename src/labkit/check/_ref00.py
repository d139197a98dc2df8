"""Reference kernel for lab 00. Imported only after labkit.setup(): it imports numba at module level, which
the simulator needs (it swaps the module-global ``cuda`` of a kernel for its fake one at launch)."""

from numba import cuda


@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
