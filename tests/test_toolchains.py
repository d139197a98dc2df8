"""Both CUDA toolchains: headers, architectures and doctor's report come from what is installed.

`make test` runs this file in .venv (the pinned CUDA 12.9 wheels) and again in .venv-cu13 (cuda-bindings 13, NVRTC 13,
the CUDA 13 runtime and crt wheels, laid out under nvidia/cu13/include). The fakes below (a wheel's RECORD, a toolkit
folder, NVRTC's list of architectures) show each layout and rule on either toolchain."""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import sys
from pathlib import Path

import pytest

from labkit import cuda_cpp, doctor, ptx, tensorcores

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[1]
MAJOR = int(md.version("cuda-bindings").split(".")[0])


@pytest.fixture(autouse=True)
def _fresh_caches():
    ptx._HEADER_CACHE.clear()
    ptx._SUPPORTED.clear()
    yield
    ptx._HEADER_CACHE.clear()
    ptx._SUPPORTED.clear()


def _fake_wheel(site: Path, name: str, version: str, files: list[str]) -> None:
    """A wheel as pip leaves it: its files, and a dist-info whose RECORD lists them."""
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_text("/* header */\n")
    (dist / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _fake_toolkit(root: Path, version: str) -> Path:
    inc = root / "include"
    for h in ("cuda_runtime.h", "cuda_fp16.h", "mma.h", "crt/mma.h"):
        (inc / h).parent.mkdir(parents=True, exist_ok=True)
        (inc / h).write_text("")
    (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}))
    return inc


# ---------------------------------------------------------------------------------------------- the installed toolchain
def test_nvrtc_is_the_one_of_the_installed_cuda_bindings() -> None:
    v = ptx.nvrtc_version()
    assert v is not None and v[0] == MAJOR
    assert ptx.toolchain()["toolchain"] == f"CUDA {v[0]}.{v[1]}"


def test_header_folders_are_of_the_nvrtc_cuda_version_only() -> None:
    dirs = ptx.header_dirs()
    assert dirs and all(h.cuda_major in (None, MAJOR) for h in dirs), dirs
    paths = [Path(h.path) for h in dirs]
    for header in ("cuda_runtime.h", "cuda_fp16.h", "mma.h", "crt/mma.h"):
        assert any((p / header).is_file() for p in paths), header
    wheel_origins = [h.origin for h in dirs if h.origin.startswith("wheel ")]
    if MAJOR == 13:  # the CUDA 13 wheels share one folder, and no CUDA 12 wheel of the base venv leaks in
        assert any(h.path.endswith("nvidia/cu13/include") for h in dirs)
        assert not any("-cu12" in o for o in wheel_origins)
    else:
        assert any(h.path.endswith("nvidia/cuda_runtime/include") for h in dirs)
        assert not any("cu13" in h.path for h in dirs)


def test_the_architectures_are_nvrtcs_own_list() -> None:
    from cuda.bindings import nvrtc

    _, archs = nvrtc.nvrtcGetSupportedArchs()
    assert ptx.supported_arches() == tuple(f"sm_{a}" for a in archs)
    assert ptx.can_target("sm_90") and ptx.can_target("sm_80")
    assert ptx.can_target("sm_70") == (MAJOR == 12)  # NVRTC 13 dropped Volta


def test_course_kernels_compile_for_every_architecture_nvrtc_has_and_skip_the_rest() -> None:
    kept, skipped = ptx.targetable(list(cuda_cpp.COURSE_ARCHES))
    assert skipped == ([] if MAJOR == 12 else ["sm_70"])
    src = 'extern "C" __global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 1.0f; }'
    assert sorted(cuda_cpp.compile_for(src, "k")) == sorted(kept)
    note = cuda_cpp.arches_compiled()
    assert note.startswith(", ".join(kept))
    assert ("sm_70 skipped: NVRTC 13." in note) == (MAJOR == 13)


def test_wmma_and_fp16_headers_compile_with_the_wheels_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA toolkit on the machine (CUDA_HOME unset, no /usr/local/cuda): the wheels have every header."""
    monkeypatch.setattr(ptx, "toolkit_roots", lambda: [])
    src = tensorcores.WMMA_SOURCE if "cuda_fp16.h" in tensorcores.WMMA_SOURCE else "#include <cuda_fp16.h>\n" + tensorcores.WMMA_SOURCE
    for arch in ("sm_80", "sm_90", "sm_100"):
        assert ptx.compile_cuda(src, arch, name="wmma_gemm.cu").summary().tensor_core >= 1, arch


def test_lab10_saxpy_source_compiles() -> None:
    text = (ROOT / "notebooks" / "src" / "10-where-next.py").read_text()
    source = re.search(r'SAXPY_CU = r?"""(.*?)"""', text, re.S).group(1)
    for arch in ptx.targetable(["sm_70", "sm_80", "sm_90", "sm_100"])[0]:
        assert ".entry saxpy" in ptx.compile_cuda(source, arch, name="saxpy.cu").text


def test_lab05_checks_pass_on_this_nvrtc_and_say_what_was_skipped() -> None:
    from labkit import check

    r = check.leaky_relu(check.core._get("05.leaky-relu").reference())
    assert r, r.message
    assert ("sm_70 skipped" in r.message) == (MAJOR == 13)


def test_doctor_names_the_toolchain_and_where_headers_came_from() -> None:
    data = doctor.report()
    p = data["ptx"]
    assert p["toolchain"] == f"CUDA {p['nvrtc']}" and p["nvrtc"].startswith(f"{MAJOR}.")
    assert p["cuda_bindings"] == md.version("cuda-bindings") and "sm_90" in p["arches"]
    assert p["headers_from"] and all(h["origin"] for h in p["headers_from"])
    text = doctor.render(data)
    assert f"PTX toolchain: CUDA {p['nvrtc']} (NVRTC {p['nvrtc']}" in text
    origins = list(dict.fromkeys(h["origin"] for h in p["headers_from"]))
    assert any(o.startswith("wheel nvidia-cuda-runtime") for o in origins), origins  # --json names each source
    if p["ok"]:  # working headers are summed up in the text (browser review 3, item 12); --json lists them
        assert f"CUDA headers: found ({len(origins)} source" in text and "labkit doctor --json lists them" in text
    else:
        assert "CUDA headers from: wheel nvidia-cuda-runtime" in text
    assert data["packages"]["cuda-pathfinder"]


# ---------------------------------------------------------------------------------------------- each layout, faked
def test_cuda13_wheel_layout_is_read_from_the_wheels_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_wheel(tmp_path, "nvidia-cuda-runtime", "13.0.96",
                ["nvidia/cu13/include/cuda_runtime.h", "nvidia/cu13/include/cuda_fp16.h", "nvidia/cu13/include/mma.h"])
    _fake_wheel(tmp_path, "nvidia-cuda-crt", "13.0.88", ["nvidia/cu13/include/crt/mma.h"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ptx, "toolkit_roots", lambda: [])
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (13, 0))
    dirs = ptx.header_dirs()
    assert dirs[0] == ptx.HeaderDir(str(tmp_path / "nvidia/cu13/include"), "wheel nvidia-cuda-runtime 13.0.96", 13)
    assert all(h.cuda_major == 13 for h in dirs)  # the CUDA 12 wheels of the base venv are left out
    ptx._HEADER_CACHE.clear()
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (12, 9))
    assert str(tmp_path / "nvidia/cu13/include") not in ptx.cuda_include_dirs()


def test_cupys_own_cuda_13_nvrtc_gets_cuda_13_headers_beside_cuda_bindings_12(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    """`.[cuda13]`: cuda-bindings 12.9 (Numba's toolchain) and cupy-cuda13x with the CUDA 13 wheels. The WMMA kernel
    CuPy compiles gets the CUDA 13 headers of CuPy's NVRTC; labkit's own NVRTC keeps the CUDA 12 ones."""
    _fake_wheel(tmp_path, "nvidia-cuda-runtime", "13.0.96", ["nvidia/cu13/include/cuda_runtime.h", "nvidia/cu13/include/mma.h"])
    _fake_wheel(tmp_path, "nvidia-cuda-crt", "13.0.88", ["nvidia/cu13/include/crt/mma.h"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ptx, "toolkit_roots", lambda: [])
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (12, 9))
    cu13 = str(tmp_path / "nvidia/cu13/include")
    assert cu13 not in ptx.cuda_include_dirs() and ptx.cuda_include_dirs(13)[0] == cu13
    assert tensorcores.wmma_include_dirs(13)[0] == cu13 and cu13 not in tensorcores.wmma_include_dirs()


def test_cuda12_wheel_layout_is_read_from_the_wheels_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_wheel(tmp_path, "nvidia-cuda-runtime-cu12", "12.9.79", ["nvidia/cuda_runtime/include/cuda_runtime.h"])
    _fake_wheel(tmp_path, "nvidia-cuda-nvcc-cu12", "12.9.86", ["nvidia/cuda_nvcc/include/crt/mma.h"])
    _fake_wheel(tmp_path, "nvidia-cuda-cccl-cu12", "12.9.27", ["nvidia/cuda_cccl/include/cuda/std/cstdint"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ptx, "toolkit_roots", lambda: [])
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (12, 9))
    paths = ptx.cuda_include_dirs()
    for folder in ("nvidia/cuda_runtime/include", "nvidia/cuda_nvcc/include", "nvidia/cuda_cccl/include"):
        assert str(tmp_path / folder) in paths, folder
    assert str(tmp_path / "nvidia/cuda_nvcc/include/crt") not in paths  # a header's own folder is not an include root


def test_toolkit_headers_of_the_same_cuda_version_fill_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The H200 image: CUDA 13 wheels without crt/, and a CUDA 13.0 toolkit at /usr/local/cuda (here CUDA_HOME)."""
    inc = _fake_toolkit(tmp_path / "cuda-13.0", "13.0.88")
    (inc / "cccl" / "cuda" / "std").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-13.0"))
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (13, 0))
    found = {h.path: h.origin for h in ptx.header_dirs()}
    assert found[str(inc)] == f"toolkit CUDA_HOME={tmp_path / 'cuda-13.0'} (CUDA 13.0)"
    assert str(inc / "cccl") in found  # CUDA 13 keeps libcu++, CUB and Thrust under include/cccl
    ptx._HEADER_CACHE.clear()
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (12, 9))  # a CUDA 12 NVRTC never gets CUDA 13 headers
    assert str(inc) not in ptx.cuda_include_dirs()


def test_toolkit_version_from_cuda_h_when_there_is_no_version_json(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    assert ptx.toolkit_version(tmp_path) == (13, 0)
    (tmp_path / "include" / "cuda.h").write_text("#define CUDA_VERSION 12090\n")
    assert ptx.toolkit_version(tmp_path) == (12, 9)
    assert ptx.toolkit_version(tmp_path / "nowhere") is None


def test_an_architecture_nvrtc_lacks_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC 13's list, on either toolchain: sm_70 is left out of compile_for, and a direct compile says why."""
    monkeypatch.setattr(ptx, "supported_arches", lambda: ("sm_75", "sm_80", "sm_90", "sm_100"))
    monkeypatch.setattr(ptx, "nvrtc_version", lambda: (13, 0))
    src = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 0.0f; }'
    assert sorted(cuda_cpp.compile_for(src, "k", ("sm_70", "sm_80", "sm_90"))) == ["sm_80", "sm_90"]
    assert cuda_cpp.skipped_arches() == ["sm_70"]
    assert cuda_cpp.arches_compiled() == "sm_80, sm_90 (sm_70 skipped: NVRTC 13.0 cannot target it.)"
    with pytest.raises(ptx.ArchNotSupported, match="NVRTC 13.0 cannot target sm_70; it targets sm_75"):
        ptx.compile_cuda(src, "sm_70")
    with pytest.raises(ptx.ArchNotSupported):
        cuda_cpp.compile_for(src, "k", ("sm_70",))
    from labkit import check

    r = check.leaky_relu(check.core._get("05.leaky-relu").reference())
    assert r and "sm_80, sm_90 (sm_70 skipped: NVRTC 13.0 cannot target it.)" in r.message


def test_cu13_environment_pins_the_image_versions() -> None:
    pins = dict(line.split("==") for line in (ROOT / "constraints-cu13.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    assert pins["cuda-bindings"].startswith("13.") and pins["nvidia-cuda-nvrtc"].startswith("13.")
    assert {"nvidia-cuda-runtime", "nvidia-cuda-crt"} <= set(pins)
    make = (ROOT / "Makefile").read_text()
    assert "constraints-cu13.txt" in make and re.search(r"^test: .*\$\(CU13_STAMP\)", make, re.M)
    if sys.prefix.endswith(".venv-cu13"):
        for name, version in pins.items():
            assert md.version(name) == version, name


def test_the_ptx_audit_builds_for_the_course_architectures_the_toolchain_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """LABKIT_PTX_AUDIT=sm_70,sm_80,sm_90 (the solution notebooks' tests) on CUDA 13, whose NVRTC (and so Numba)
    dropped sm_70: the kernel is built for sm_80 and sm_90, and sm_70 is not an audit failure."""
    from labkit.check import core

    built = []
    monkeypatch.setitem(ptx._SUPPORTED, "nvrtc", ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"))
    monkeypatch.setenv("LABKIT_PTX_AUDIT", "sm_70,sm_80,sm_90")
    monkeypatch.setattr(core, "_take_launched", lambda: [("kernel", "void(float32[:])")])
    monkeypatch.setattr(ptx, "compile", lambda kernel, signature, arch: built.append(arch))
    monkeypatch.setattr("labkit.mode.current_mode", lambda: "sim")
    core._build_for_gpu("02.saxpy")
    assert built == ["sm_80", "sm_90"]
