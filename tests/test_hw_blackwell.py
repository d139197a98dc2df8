"""The Blackwell generation in labkit.hw (review 3 N21, N22): B200 and B300 with FP6/FP4 peaks, DGX B200, DGX B300 and
GB300 NVL72; every figure sourced, per-GPU figures divided from system totals marked unconfirmed; and no figure called
a course measurement that this course's `make gpu-check` did not produce (N15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import hw
from labkit.errors import LabkitError

ROOT = Path(__file__).resolve().parents[1]


def _every_figure() -> list[tuple[str, str, hw.Figure]]:
    d = hw.data()
    out: list[tuple[str, str, hw.Figure]] = []
    for g in d.gpus.values():
        out += [(g.name, k, f) for k, f in g.figures().items()]
        out += [(g.name, f"peak {p}", f) for p, pk in g.peaks.items() for f in (pk.dense, pk.sparse, pk.simt) if f is not None]
    for s in d.systems.values():
        out += [(s.name, k, f) for k, f in s.figures().items()]
    return out


@pytest.mark.parametrize("gpu, fp8, fp4, fp4_sparse", [("B200", 4500, 9000, 18000), ("B300", 4500, 13500, 18000),
                                                       ("B200 (GB200)", 5000, 10000, 20000),
                                                       ("B300 (GB300)", 5000, 15000, 20000)])
def test_blackwell_low_precision_peaks(gpu, fp8, fp4, fp4_sparse) -> None:
    g = hw.gpu(gpu)
    assert g.peak("fp8").value == fp8 and g.peak("fp6").value == fp8  # FP6 runs at the FP8 rate
    assert g.peak("fp4").value == fp4 and g.peak("fp4", sparse=True).value == fp4_sparse
    for p in ("fp8", "fp6", "fp4"):
        for sparse in (False, True):
            f = g.peak(p, sparse=sparse)
            checked = gpu == "B200 (GB200)" and p == "fp8"  # 720 PFLOPS / 72 (dense half of it), checked in review 3
            assert f.source and f.unconfirmed != checked, (gpu, p, sparse, f)  # divided from 8- or 72-GPU totals


def test_blackwell_ultra_fp64_and_int8() -> None:
    b300 = hw.gpu("B300")
    assert b300.peak("fp64").value == 1.25 and b300.compute_capability == (10, 3)
    with pytest.raises(LabkitError, match="labkit has no INT8 figure for the B300"):
        b300.peak("int8")
    assert not b300.has("int8") and "fp4" in b300.precisions()


def test_older_gpus_have_no_fp4_and_say_why() -> None:
    for name in ("P100", "V100", "A100", "H100", "H200", "H200 NVL"):
        with pytest.raises(LabkitError, match="FP4 does not exist on the"):
            hw.gpu(name).peak("fp4")
    assert hw._normalise_precision("nvfp4") == "fp4" and hw._normalise_precision("FP6 E2M3") == "fp6"


def test_b200_tf32_source_matches_its_number() -> None:
    """N21: 1100/2200 is NVIDIA's rounded per-GPU figure (2.2 PFLOPS sparse), not the HGX table's 18 PFLOPS / 8."""
    tf32 = hw.gpu("B200").peak("tf32", sparse=True)
    assert tf32.value == 2200 and "2.2 PFLOPS" in tf32.source and "8-GPU totals divided by 8" not in tf32.source
    assert "2,250" in (tf32.note or "")


@pytest.mark.parametrize("system, gpu, count, fp8_sparse_pf, fp4_sparse_pf", [
    ("DGX B200", "B200", 8, 72, 144), ("DGX B300", "B300", 8, 72, 144), ("GB300 NVL72", "B300 (GB300)", 72, 720, 1440)])
def test_blackwell_systems(system, gpu, count, fp8_sparse_pf, fp4_sparse_pf) -> None:
    s = hw.system(system)
    assert s.gpu_model.name == gpu and s.gpu_count.value == count and s.nvlink == "NVLink 5"
    assert s.headline_precision == "fp8" and s.headline_sparse and s.headline.to("PFLOP/s").value == fp8_sparse_pf
    assert s.source and s.headline.source
    derived = count * s.gpu_model.peak("fp4", sparse=True).value / 1000
    assert derived == pytest.approx(fp4_sparse_pf, rel=0.01)
    assert str(fp4_sparse_pf) in s.headline_what.replace(",", "")
    assert system in hw.link("NVSwitch 4").used_in


def test_no_course_measurement_without_a_gpu_check_run() -> None:
    """A figure may be called a course measurement only when `make gpu-check` wrote a result under benchmarks/results/."""
    runs = [p for p in (ROOT / "benchmarks" / "results").glob("*.json") if not p.name.startswith("sim-speed")]
    text = (ROOT / "src" / "labkit" / "data" / "hw.yml").read_text()
    if not runs:
        assert "course measurement" not in text.lower()
    for record, field, fig in _every_figure():
        if "measur" in fig.source.lower():
            assert any(w in fig.source for w in ("by the course's authors", "published measurement", "not the course's")), \
                (record, field, fig.source)


#: Which GPU generation each generation-specific exercise is about (course/syllabus-2day.md's table); the others
#: are about any CUDA GPU.
_GENERATIONS = {
    "Pascal and Volta (P100, V100; DGX-1, DGX-2)": (
        "01.v100-vs-p100", "01.dgx1-pairs", "01.dgx2-backplane", "01.two-dgx1", "06.v100-fma", "07.dgx1-peer-matrix"
    ),
    "Ampere (A100; DGX A100, SuperPOD)": ("01.a100-20x", "01.dgx-a100-5pf", "01.superpod", "08.mig"),
    "Hopper (H100, H200; DGX H100/H200)": ("06.fp8-promotion", "06.te-scale", "06.wmma-peak", "08.nvls-busbw", "10.cluster"),
    "Blackwell (B200, B300; DGX B200/B300, NVL72)": (
        "06.mx-quantize", "06.nvfp4-quantize", "08.nvl72-allreduce", "08.mig-b200", "10.tcgen05-tmem"
    ),
    "Several generations side by side": ("01.ring-allreduce", "06.gemm-predict", "08.allreduce-dgx"),
}


def test_syllabus_table_of_minutes_per_generation() -> None:
    """Each lab's exercise minutes shared among its exercises, summed per generation, as the 2-day syllabus prints."""
    import re
    from pathlib import Path

    import labkit.check._labs  # noqa: F401  (registers every exercise)
    from labkit import course
    from labkit.check import core

    labs = {lab.id: lab for lab in course.labs()}
    per_lab: dict[str, int] = {}
    for ex_id in core._REGISTRY:
        per_lab[ex_id[:2]] = per_lab.get(ex_id[:2], 0) + 1

    def minutes(ids) -> int:
        return round(sum(labs[i[:2]].exercises / per_lab[i[:2]] for i in ids))

    tagged = {i for ids in _GENERATIONS.values() for i in ids}
    assert tagged <= set(core._REGISTRY)
    rows = {g: (len(ids), minutes(ids)) for g, ids in _GENERATIONS.items()}
    rest = [i for i in core._REGISTRY if i not in tagged]
    rows["Any CUDA GPU (kernels, formats, streams, collectives)"] = (len(rest), minutes(rest))
    text = (Path(__file__).resolve().parents[1] / "course" / "syllabus-2day.md").read_text(encoding="utf-8")
    for g, (n, m) in rows.items():
        assert re.search(rf"^\| {re.escape(g)} \| {n} \| {m} \|$", text, re.M), (g, n, m)
    assert rows["Blackwell (B200, B300; DGX B200/B300, NVL72)"][0] >= 4  # issue 41: Blackwell is done, not only read


def test_issue41_figures_carry_their_sources() -> None:
    """Every figure issue 41 added to hw.yml has its value and a source that says where it is from."""
    pcie6, xdr = hw.link("PCIe 6"), hw.link("InfiniBand XDR")
    assert pcie6.per_link.value == 16 * 64 / 8 and "PCI Express 6.0" in pcie6.per_link.source
    assert xdr.per_link.value == 800 / 8 and "InfiniBand" in xdr.per_link.source
    for name in ("GB200 NVL72", "GB300 NVL72"):
        s = hw.system(name)
        assert s.nvswitch_count.value == 18 and "switch trays" in s.nvswitch_count.source and s.nvswitch_count.unconfirmed
        assert s.compute_trays.value == 18 and "compute trays" in s.compute_trays.source
        assert s.gpu_count.value == 18 * 4
    for name in ("DGX B200", "DGX B300"):
        assert hw.system(name).nvswitch_count.value == 2
        assert hw.link(hw.system(name).nvswitch).ports.value * 2 == 8 * hw.gpu(hw.system(name).gpu).nvlink_links.value
