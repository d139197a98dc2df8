"""Every CUDA C++ kernel of the course (labkit.kernels_cuda) compiles to PTX for sm_70, sm_80 and sm_90 without a GPU."""

import pytest

from labkit import cuda_cpp, kernels_cuda

ARCHES = ("sm_70", "sm_80", "sm_90")


@pytest.mark.parametrize("name", kernels_cuda.names())
@pytest.mark.parametrize("arch", ARCHES)
def test_compiles(name: str, arch: str) -> None:
    k = kernels_cuda.get(name)
    ptx = cuda_cpp.compile_for(k.source(), name, (arch,))[arch]
    assert f".target {arch}" in ptx.text
    for entry in k.entry_names:
        e = cuda_cpp.find_entry(ptx.text, entry)
        assert not e.mangled
        assert cuda_cpp.stores_global(e)


@pytest.mark.parametrize("name", [n for n in kernels_cuda.names() if kernels_cuda.get(n).kind != "reduction"])
def test_every_elementwise_entry_guards_its_size(name: str) -> None:
    k = kernels_cuda.get(name)
    text = cuda_cpp.compile_for(k.source(), name, ("sm_90",))["sm_90"].text
    for entry in k.entry_names:
        e = cuda_cpp.find_entry(text, entry)
        assert cuda_cpp.guards_with(e, len(e.params) - 1), entry  # the size is the last parameter


def test_unknown_name_is_a_labkit_error() -> None:
    from labkit.errors import LabkitError

    with pytest.raises(LabkitError, match="Registered"):
        kernels_cuda.get("nope")
