"""Every CUDA C++ kernel of the course (labkit.kernels_cuda, sources in src/labkit/kernels/cuda/*.cu) compiles to PTX
for sm_70, sm_80 and sm_90 without a GPU; the .cu files are the registry's sources and are installed as package data."""

import pytest

from labkit import cuda_cpp, kernels_cuda, ptx as P

pytestmark = pytest.mark.toolchain  # also run under CUDA 13 (.venv-cu13)

ARCHES = ("sm_70", "sm_80", "sm_90")


@pytest.mark.parametrize("name", kernels_cuda.names())
@pytest.mark.parametrize("arch", ARCHES)
def test_compiles(name: str, arch: str) -> None:
    k = kernels_cuda.get(name)
    if k.min_arch and P._cc(arch) < P._cc(k.min_arch):  # clusters before sm_90: NVRTC refuses, in words
        with pytest.raises(P.CompileError):
            P.compile_cuda(k.source(), arch, name=f"{name}.cu")
        return
    if not P.can_target(arch):  # NVRTC 13: sm_70 is left out, not failed
        assert cuda_cpp.compile_for(k.source(), name, (arch, "sm_90")).keys() == {"sm_90"}
        return
    ptx = cuda_cpp.compile_for(k.source(), name, (arch,))[arch]
    assert f".target {arch}" in ptx.text
    for entry in k.entry_names:
        e = cuda_cpp.find_entry(ptx.text, entry)
        assert not e.mangled
        assert cuda_cpp.stores_global(e)


@pytest.mark.parametrize("name", [n for n in kernels_cuda.names("05") if kernels_cuda.get(n).kind != "reduction"])
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


def test_whole_kernel_sources_are_the_cu_files() -> None:
    cu = sorted(p.stem for p in kernels_cuda.CUDA_DIR.glob("*.cu"))
    raw = sorted(n for n in kernels_cuda.names() if kernels_cuda.get(n).kind in ("raw", "module"))
    assert cu == raw  # every .cu file is registered, every whole-kernel source is a .cu file
    for name in raw:
        assert kernels_cuda.get(name).code == (kernels_cuda.CUDA_DIR / f"{name}.cu").read_text(encoding="utf-8")
    from labkit import tensorcores

    assert tensorcores.WMMA_SOURCE == kernels_cuda.get("wmma_gemm").code


def test_cu_files_and_stand_in_headers_are_package_data() -> None:
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["labkit"]
    pkg = root / "src" / "labkit"
    files = [p.relative_to(pkg).as_posix() for p in (pkg / "kernels" / "cuda").rglob("*") if p.is_file() and p.suffix in (".cu", ".h")]
    assert any(f.endswith("mma.h") for f in files) and any(f.endswith(".cu") for f in files)
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f
