"""``cuda.atomic`` works on the element types a GPU compile takes, and stops in words on the others: Numba's simulator
on its own updates an ``int16`` or ``uint8`` array where Numba's CUDA target has no atomic (a ``TypingError``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402
from labkit.sim import atomics, lockstep  # noqa: E402

_TEMPLATES = {
    "add": "Cuda_atomic_add", "sub": "Cuda_atomic_sub", "max": "Cuda_atomic_max", "min": "Cuda_atomic_min",
    "nanmax": "Cuda_atomic_nanmax", "nanmin": "Cuda_atomic_nanmin", "and_": "Cuda_atomic_and", "or_": "Cuda_atomic_or",
    "xor": "Cuda_atomic_xor", "exch": "Cuda_atomic_exch", "inc": "Cuda_atomic_inc", "dec": "Cuda_atomic_dec",
    "cas": "Cuda_atomic_cas", "compare_and_swap": "Cuda_atomic_compare_and_swap",
}  # fmt: skip
_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bool_"]
_TYPED = """
import json, sys
from numba.core import types
import numba.cuda.cudadecl as d
out = {}
for op, cls in json.loads(sys.argv[1]).items():
    template = getattr(d, cls)(None)
    out[op] = []
    for name in json.loads(sys.argv[2]):
        ty = getattr(types, "boolean" if name == "bool_" else name)
        arr = types.Array(ty, 1, "C")
        args = {"compare_and_swap": (arr, ty, ty), "cas": (arr, types.intp, ty, ty)}.get(op, (arr, types.intp, ty))
        if template.generic(args, {}) is not None:
            out[op].append(name)
print(json.dumps(out))
"""


def test_the_element_types_are_those_numba_cudas_own_typing_takes() -> None:
    """Numba's CUDA target (not its simulator), in a process of its own: each atomic's typing template, asked for a
    1-D array of each element type, types exactly the element types labkit lets through."""
    proc = subprocess.run(
        [sys.executable, "-c", _TYPED, json.dumps(_TEMPLATES), json.dumps(_DTYPES)],
        capture_output=True, text=True, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}, timeout=120, check=True,
    )  # fmt: skip
    typed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {op: set(names) for op, names in typed.items()} == {op: set(names) for op, names in atomics.TYPES.items()}


@cuda.jit
def count_keys(keys, counts):
    i = cuda.grid(1)
    if i < keys.size:
        cuda.atomic.add(counts, keys[i] % counts.size, 1)


@cuda.jit
def count_in_shared(keys, counts):
    bins = cuda.shared.array(8, np.int16)
    t = cuda.threadIdx.x
    if t < 8:
        bins[t] = 0
    cuda.syncthreads()
    cuda.atomic.add(bins, keys[cuda.grid(1)] % 8, 1)
    cuda.syncthreads()
    if t < 8:
        counts[t] = bins[t]


@cuda.jit
def bump(counts):
    cuda.atomic.inc(counts, 0, 100)


@cuda.jit
def swap_in(out):
    cuda.atomic.exch(out, 0, np.float32(1.0))


@pytest.mark.parametrize("lock", [True, False])
def test_an_atomic_on_an_element_type_a_gpu_has_none_for_stops_in_words(lock: bool) -> None:
    keys = np.arange(64, dtype=np.int32)
    saved = lockstep.ENABLED
    lockstep.ENABLED = lock
    try:
        for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.float16):
            for launch in (lambda c: count_keys[2, 32](keys, c), lambda c: sim.launch_strict(count_keys, 2, 32, keys, c)):
                counts = np.zeros(8, dtype)
                with pytest.raises(atomics.AtomicTypeError) as info:
                    launch(counts)
                words = str(info.value)
                assert f"cuda.atomic.add on an array of {np.dtype(dtype).name}" in words and "TypingError" in words
                assert ("narrower than int32" if dtype != np.float16 else "float32 and float64") in info.value.cause
                assert not counts.any()  # (nothing was updated)
        with pytest.raises(atomics.AtomicTypeError, match="cuda.atomic.add on an array of int16"):
            sim.launch_strict(count_in_shared, 2, 32, keys, np.zeros(8, np.int32))
        with pytest.raises(atomics.AtomicTypeError, match="cuda.atomic.inc on an array of int32.*uint32, uint64") as info:
            sim.launch_strict(bump, 1, 32, np.zeros(1, np.int32))
        assert "uint32 or uint64" in info.value.cause
        with pytest.raises(atomics.AtomicTypeError, match="cuda.atomic.exch on an array of float32") as info:
            sim.launch_strict(swap_in, 1, 32, np.zeros(1, np.float32))
        assert "cuda.atomic.add" in info.value.cause
        for dtype in (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64):
            counts = np.zeros(8, dtype)
            sim.launch_strict(count_keys, 2, 32, keys, counts)
            assert (counts == 8).all(), dtype
        counts = np.zeros(1, np.uint32)
        bump[1, 32](counts)
        assert counts[0] == 32
    finally:
        lockstep.ENABLED = saved
