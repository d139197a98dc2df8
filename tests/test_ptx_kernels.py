"""Every reference kernel of labs 02-04 compiles to PTX for sm_70, sm_80 and sm_90 and shows its key instructions."""

from __future__ import annotations

import pytest

import labkit
from labkit import kernels, ptx

labkit.setup(quiet=True)

pytestmark = pytest.mark.toolchain  # `make test` runs this file under CUDA 12.9 and again under CUDA 13
ARCHS = ("sm_70", "sm_80", "sm_90")


@pytest.fixture(autouse=True)
def _only_what_the_toolchain_targets(request: pytest.FixtureRequest) -> None:
    """An architecture the installed NVRTC cannot target (CUDA 13 dropped sm_70) is skipped, saying so; that
    ptx.compile refuses it in words is tested below."""
    arch = getattr(request.node, "callspec", None) and request.node.callspec.params.get("arch")
    if arch and not ptx.can_target(arch):
        pytest.skip(ptx.skipped_note([arch]).strip(" ()"))


def _has(mix: ptx.InstructionMix, feature: str) -> bool:
    return {
        "barriers": mix.barriers > 0,
        "atomics_shared": mix.atomics_shared > 0,
        "atomics_global": mix.atomics_global > 0,
        "shuffles": mix.shuffles > 0,
        "shared_loads": sum(mix.shared_loads.values()) > 0,
    }[feature]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ref", kernels.REFERENCE, ids=lambda r: r.name)
def test_reference_kernel_compiles(ref: kernels.Reference, arch: str) -> None:
    code = ptx.compile(kernels.source(ref.name), ref.signature, arch)
    mix = code.summary()
    assert mix.total > 0
    for feature in ref.expect:
        assert _has(mix, feature), f"{ref.name} on {arch}: no {feature} in its PTX"
    if not ref.expect or "barriers" not in ref.expect:
        assert ("bar.sync" in code.text) == (mix.barriers > 0)


def test_key_instructions_by_name() -> None:
    assert "atom.shared" in ptx.compile(kernels.source("histogram_shared"), "void(uint8[:], int32[:])", "sm_80").text
    glob = ptx.compile(kernels.source("histogram_global"), "void(uint8[:], int32[:])", "sm_80")
    assert glob.summary().atomics_global > 0 and glob.summary().atomics_shared == 0
    assert "shfl.sync" in ptx.compile(kernels.source("warp_sum"), "void(float32[:], float32[:])", "sm_90").text
    old = ptx.targetable(("sm_70", "sm_75"))[0][0]  # the oldest the toolchain targets: Volta on CUDA 12, Turing on 13
    assert "bar.sync" in ptx.compile(kernels.source("matmul_tiled"), "void(float32[:,:], float32[:,:], float32[:,:])", old).text
    naive = ptx.compile(kernels.source("matmul_naive"), "void(float32[:,:], float32[:,:], float32[:,:])", old)
    assert naive.summary().barriers == 0 and not naive.summary().shared_loads


def test_factories_and_registry() -> None:
    assert len({r.name for r in kernels.REFERENCE}) == len(kernels.REFERENCE)
    for name, factory, signature, _ in kernels.REFERENCE:
        k = factory()
        assert callable(k) and signature.startswith("void(")
    with pytest.raises(labkit.LabkitError):
        kernels.get("no_such_kernel")


def test_benchmark_suite_runs_at_tiny_sizes_in_sim() -> None:
    records = kernels.benchmark_suite()
    names = [r["name"] for r in records]
    assert names[0].startswith("D2D copy") and any("saxpy" in n for n in names) and any("tiled" in n for n in names)
    for r in records:
        assert r["median_s"] > 0 and "not GPU speed" in r["label"]
        assert r["meets_target"] is None  # simulator times are never judged against GPU targets
    judged = [r for r in records if "threshold" in r]
    assert {r["threshold"] for r in judged} == {85, 75, 4}
    assert all("value" in r for r in judged)


VIDEO_KERNELS = {  # lab 09's reference kernels (labkit/kernels/video.py), with the types the pipeline uses
    "fused_update": ("void(uint8[:, :], float32[:, :], uint8[:, :], float32, float32)", ()),
    "erode3x3": ("void(uint8[:, :], uint8[:, :])", ()),
    "dilate3x3": ("void(uint8[:, :], uint8[:, :])", ()),
    "tile_counts": ("void(uint8[:, :], int64, int32[:, :])", ("barriers", "atomics_shared", "atomics_global")),
}


@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(VIDEO_KERNELS))
def test_video_reference_kernels_compile(name: str, arch: str) -> None:
    import labkit
    from labkit.kernels import video

    signature, expect = VIDEO_KERNELS[name]
    mix = labkit.ptx.compile(getattr(video, name), signature, arch).summary()
    for feature in expect:
        assert getattr(mix, feature), f"{name} for {arch}: no {feature} in its PTX"


def test_an_architecture_the_toolchain_cannot_target_is_refused_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ptx._SUPPORTED, "nvrtc", ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120"))
    with pytest.raises(ptx.ArchNotSupported, match="cannot target sm_70; it targets sm_75"):
        ptx.compile(kernels.source("saxpy"), "void(float32, float32[:], float32[:], float32[:])", "sm_70")
