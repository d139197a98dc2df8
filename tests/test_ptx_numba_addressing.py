"""What labs 00, 02 and 04 tell learners to look for in Numba's PTX is what Numba emits (issue 20, item 5): generic
loads, stores and atomics for arrays in global memory (`ld.f32`, `st.f32`, `atom.add.u32`, no `.global`), named
ones for shared memory (`atom.shared.add.u32`), and a mangled entry name (lab 10's `ncu -k regex:`). Also: none of
the reference kernels computes in FP64 (lab 02's float-literal rule, kept by labkit's own kernels).
Cost: about 2 s (PTX of reference kernels, cached by labkit.ptx)."""

from __future__ import annotations

import pytest

import labkit

labkit.setup(quiet=True)
from labkit import cuda_cpp, kernels, ptx  # noqa: E402

pytestmark = pytest.mark.toolchain


def _ops(name: str, signature: str) -> set[str]:
    text = ptx.compile(kernels.get(name), signature, "sm_90").text
    return {ln.split(None, 1)[0].rstrip(";") for ln in ptx.PTX(text, "sm_90", name).lines()}


def test_saxpy_loads_and_stores_are_generic() -> None:
    ops = _ops("saxpy", "void(float32, float32[:], float32[:], float32[:])")
    assert {"ld.f32", "st.f32"} <= ops
    assert not any(op.startswith(("ld.global", "st.global")) for op in ops), ops


def test_histogram_atomics_as_lab_04_names_them() -> None:
    glob = _ops("histogram_global", "void(uint8[:], int32[:])")
    shared = _ops("histogram_shared", "void(uint8[:], int32[:])")
    assert any(op in ("atom.add.u32", "red.add.u32") for op in glob), glob
    assert not any(".global" in op for op in glob if op.startswith(("atom", "red")))
    assert "atom.shared.add.u32" in shared, shared


def test_numba_entry_names_are_mangled_but_contain_the_kernel_name() -> None:
    text = ptx.compile(kernels.get("saxpy"), "void(float32, float32[:], float32[:], float32[:])", "sm_90").text
    name = cuda_cpp.entries(text)[0].name
    assert name != "saxpy" and "saxpy" in name and name.startswith("_Z")


@pytest.mark.parametrize("ref", kernels.REFERENCE, ids=lambda r: r.name)
def test_reference_kernels_have_no_fp64(ref) -> None:
    assert ptx.compile(ref.factory(), ref.signature, "sm_90").fp64() == [], ref.name
