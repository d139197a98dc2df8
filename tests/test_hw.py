"""labkit.hw: the figures the course quotes, lookups, and the loader's checks on a broken data file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labkit import hw
from labkit.errors import LabkitError
from labkit.hw import Figure, HardwareDataError


def test_lists_cover_the_issue() -> None:
    assert hw.gpus() == ["P100 SXM2", "V100 SXM2 16GB", "V100 SXM2 32GB", "V100 SXM3 32GB", "A100 SXM4 40GB", "A100 SXM4 80GB",
                         "H100 SXM", "H200", "H200 NVL", "B200", "B200 (GB200)", "B300", "B300 (GB300)"]
    assert hw.systems() == ["DGX-1 (P100)", "DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100", "DGX H200", "DGX B200", "DGX B300",
                            "GB200 NVL72", "GB300 NVL72", "DGX SuperPOD (A100)"]
    for name in ["NVLink 1", "NVLink 5", "NVSwitch 1", "NVSwitch 3", "PCIe 3", "PCIe 5", "InfiniBand EDR", "InfiniBand NDR"]:
        assert name in hw.links()


def test_figure_str_and_conversion() -> None:
    bw = hw.gpu("H200").memory_bandwidth
    assert str(bw) == "4800 GB/s (NVIDIA H200 datasheet)"
    assert bw.to("TB/s").value == pytest.approx(4.8)
    assert bw.to("TB/s").to("GB/s").value == pytest.approx(4800)
    assert hw.system("DGX A100").headline.to("TFLOP/s").value == pytest.approx(5000)
    assert float(bw) == 4800.0
    with pytest.raises(LabkitError, match="cannot convert"):
        bw.to("TFLOP/s")
    assert "unconfirmed" in str(hw.gpu("B200").peak("fp8"))


@pytest.mark.parametrize(
    ("gpu", "size", "bw", "sms"),
    [("P100", 16, 732, 56), ("V100 SXM2 16GB", 16, 900, 80), ("V100 32GB", 32, 900, 80), ("A100 40GB", 40, 1555, 108),
     ("A100 80GB", 80, 2039, 108), ("H100", 80, 3350, 132), ("H200", 141, 4800, 132), ("B200", 180, 8000, 148)],
)
def test_memory_and_sms(gpu: str, size: float, bw: float, sms: int) -> None:
    g = hw.gpu(gpu)
    assert g.memory_size.value == size and g.memory_size.unit == "GB"
    assert g.memory_bandwidth.value == bw and g.memory_bandwidth.unit == "GB/s"
    assert int(g.sm_count) == sms


@pytest.mark.parametrize(
    ("gpu", "precision", "sparse", "value"),
    [("P100", "fp32", False, 10.6), ("P100", "fp16", False, 21.2), ("P100", "fp64", False, 5.3),
     ("V100", "fp32", False, 15.7), ("V100", "fp16", False, 125), ("V100", "fp64", False, 7.8),
     ("A100", "fp32", False, 19.5), ("A100", "tf32", False, 156), ("A100", "tf32", True, 312),
     ("A100", "fp16", False, 312), ("A100", "bf16", True, 624), ("A100", "int8", False, 624),
     ("H100", "fp32", False, 66.9), ("H100", "bf16", False, 989), ("H100", "fp8", False, 1979), ("H100", "fp8", True, 3958),
     ("H200", "bf16", False, 989)],
)
def test_peaks(gpu: str, precision: str, sparse: bool, value: float) -> None:
    fig = hw.gpu(gpu).peak(precision, sparse=sparse)
    assert fig.value == pytest.approx(value)
    assert fig.unit == ("TOPS" if precision == "int8" else "TFLOP/s")
    assert fig.source


def test_undefined_precisions_raise_with_the_reason() -> None:
    with pytest.raises(LabkitError, match="TF32 does not exist on the P100"):
        hw.gpu("P100").peak("tf32")
    with pytest.raises(LabkitError, match="does not exist on the V100"):
        hw.gpu("V100").peak("bf16")
    with pytest.raises(LabkitError, match="FP8 does not exist on the A100"):
        hw.gpu("A100").peak("fp8")
    with pytest.raises(LabkitError, match="no structured-sparsity"):
        hw.gpu("V100").peak("fp16", sparse=True)
    with pytest.raises(LabkitError, match="unknown precision"):
        hw.gpu("H100").peak("fp128")
    assert hw.gpu("V100").peak("fp16", tensor_core=False).value == pytest.approx(31.4)
    assert hw.gpu("A100").peak("fp64", tensor_core=False).value == pytest.approx(9.7)


def test_nvlink_per_gpu() -> None:
    expect = {"P100": (4, 160), "V100": (6, 300), "A100": (12, 600), "H100": (18, 900), "H200": (18, 900), "B200": (18, 1800)}
    for name, (links, bw) in expect.items():
        g = hw.gpu(name)
        assert int(g.nvlink_links) == links and g.nvlink_bandwidth.value == bw
        assert links * hw.link(g.nvlink).per_link.value * 2 == bw


def test_systems() -> None:
    d1 = hw.system("DGX-1 (P100)")
    assert d1.headline.value == 170 and int(d1.gpu_count) == 8
    d1v = hw.system("DGX-1")
    assert d1v.name == "DGX-1 (V100)" and d1v.power.value == 3500 and d1v.network_bandwidth.value == 400
    d2 = hw.system("dgx-2")
    assert int(d2.gpu_count) == 16 and int(d2.nvswitch_count) == 12 and d2.headline.to("TFLOP/s").value == 2000
    assert d2.gpu_memory_total.value == 512 and d2.memory_bandwidth_total.value == pytest.approx(14.4)
    a = hw.system("DGX A100")
    assert a.price.value == 199000 and a.price.unit == "USD" and a.headline.value == 5 and int(a.mig_instances) == 56
    h = hw.system("DGX H100")
    assert h.headline.value == 32 and h.headline_precision == "fp8" and h.headline_sparse
    pod = hw.system("SuperPOD")
    assert int(pod.system_count) == 140 and pod.headline.value == 700 and int(pod.gpu_count) == 1120
    assert hw.system("GB200 NVL72").nvlink_domain_bandwidth.value == 130
    for name in hw.systems():
        for fname, fig in hw.system(name).figures().items():
            assert fig.unit in hw.UNITS and fig.source, (name, fname)


def test_every_system_headline_is_a_compute_rate_with_its_format_and_sparsity() -> None:
    """Each system's headline is compute (TFLOP/s or PFLOP/s; TOPS or POPS for int8), names its number format and
    says dense or sparse, and is n GPUs x that GPU's peak; bandwidths are figures of their own."""
    for name in hw.systems():
        s = hw.system(name)
        assert s.headline_precision in hw.PRECISIONS, name
        assert isinstance(s.headline_sparse, bool), name
        kind = "int" if s.headline_precision == "int8" else "float"
        assert s.headline.unit in hw.HEADLINE_UNITS[kind], (name, s.headline.unit)
        assert s.headline.to("POPS" if kind == "int" else "PFLOP/s").value > 0
        peak = s.gpu_model.peak(s.headline_precision, sparse=s.headline_sparse)
        per_gpu = s.gpu_count.value * peak.to("TOPS" if kind == "int" else "TFLOP/s").value
        assert s.headline.to(peak.unit).value == pytest.approx(per_gpu, rel=hw.data().headline_tolerance), name
        assert s.headline_text().startswith(s.headline.text()) and s.headline_precision.upper() in s.headline_text()
    nvl = hw.system("GB200 NVL72")
    assert nvl.headline.text() == "720 PFLOP/s" and nvl.headline_precision == "fp8" and nvl.headline_sparse
    assert nvl.headline_text() == "720 PFLOP/s FP8 (sparse)" and nvl.headline.source == "NVIDIA GB200 NVL72 spec table"
    assert nvl.nvlink_domain_bandwidth.text() == "130 TB/s"


def test_a_bandwidth_or_untyped_headline_is_refused(tmp_path: Path) -> None:
    def bandwidth(r: dict) -> None:
        r["systems"]["GB200 NVL72"]["headline"] = {"value": 130, "unit": "TB/s", "precision": "fp8", "sparse": True}
    with pytest.raises(HardwareDataError, match="GB200 NVL72.headline: unit 'TB/s' is not a compute rate"):
        hw.load(_write(tmp_path, bandwidth))

    def untyped(r: dict) -> None:
        r["systems"]["DGX H100"]["headline"].pop("precision")
    with pytest.raises(HardwareDataError, match="DGX H100.headline: no precision"):
        hw.load(_write(tmp_path, untyped))

    def kind(r: dict) -> None:
        r["systems"]["DGX H100"]["headline"]["kind"] = "nvlink"
    with pytest.raises(HardwareDataError, match=r"unknown key\(s\) \['kind'\]"):
        hw.load(_write(tmp_path, kind))

    def domain(r: dict) -> None:
        r["systems"]["GB200 NVL72"]["nvlink_domain_bandwidth"] = "65 TB/s"
    with pytest.raises(HardwareDataError, match="72 GPUs x 1800 GB/s = 129600 GB/s, but nvlink_domain_bandwidth says 65 TB/s"):
        hw.load(_write(tmp_path, domain))


def test_links() -> None:
    assert hw.link("NVLink 2").per_link.value == 25 and hw.link("nvlink1").per_link.value == 20
    assert hw.link("NVLink 5").per_gpu.value == 1800
    sw = hw.link("NVSwitch 1")
    assert int(sw.ports) == 18 and sw.per_port.value * 2 == 50 and sw.transistors.value == 2
    assert [hw.link(f"PCIe {g}").per_link.value for g in (3, 4, 5)] == [15.75, 31.5, 63]
    assert [hw.link(n).per_link.value for n in ("EDR", "HDR", "NDR")] == [12.5, 25, 50]


def test_lookup_aliases_and_did_you_mean() -> None:
    assert hw.gpu("h100").name == hw.gpu("H100 SXM").name == hw.gpu(" h-100 sxm ").name == "H100 SXM"
    assert hw.gpu("DGX H100").name == "H100 SXM"
    assert hw.system("DGX H100").name == hw.system("dgxh100").name == "DGX H100"
    with pytest.raises(LabkitError, match="(?i)did you mean 'H100 SXM'"):
        hw.gpu("H1000")
    with pytest.raises(LabkitError, match="(?i)did you mean 'DGX A100'"):
        hw.system("DGX A10")
    with pytest.raises(LabkitError, match="no link"):
        hw.link("NVLonk 9")


@pytest.mark.parametrize(
    ("driver", "record"),
    [("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
     ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB"), ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
     ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"), ("NVIDIA B200", "B200"), ("Tesla P100-SXM2-16GB", "P100 SXM2")],
)
def test_match_device(driver: str, record: str) -> None:
    assert hw.match_device(driver).name == record


def test_match_device_unknown_is_none() -> None:
    assert hw.match_device("NVIDIA H100 PCIe") is None
    assert hw.match_device("NVIDIA GeForce RTX 4090") is None


# ------------------------------------------------------------------------------------------ broken data files


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(hw.DATA_FILE.read_text(encoding="utf-8"))
    mutate(raw)
    p = tmp_path / "hw.yml"
    p.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return p


def test_packaged_file_loads() -> None:
    data = hw.load()
    assert data.headline_tolerance == pytest.approx(0.02)


def test_broken_nvlink_total(tmp_path: Path) -> None:
    p = _write(tmp_path, lambda r: r["gpus"]["H100 SXM"].__setitem__("nvlink_links", "12 count"))
    with pytest.raises(HardwareDataError, match=r"H100 SXM: 12 links x 25 GB/s per direction x 2 = 600 GB/s"):
        hw.load(p)


def test_broken_link_table_total(tmp_path: Path) -> None:
    p = _write(tmp_path, lambda r: r["links"]["NVLink 3"].__setitem__("per_gpu", "300 GB/s"))
    with pytest.raises(HardwareDataError, match="NVLink 3"):
        hw.load(p)


def test_broken_headline(tmp_path: Path) -> None:
    def mutate(r: dict) -> None:
        r["systems"]["DGX A100"]["headline"]["sparse"] = False  # 8 x 312 = 2.5 PFLOP/s, not 5
    with pytest.raises(HardwareDataError, match="DGX A100: 8 GPUs x per-GPU figure = 2496 TFLOP/s"):
        hw.load(_write(tmp_path, mutate))


def test_broken_unit_and_source(tmp_path: Path) -> None:
    p = _write(tmp_path, lambda r: r["gpus"]["H200"].__setitem__("memory_bandwidth", "4800 GiB/sec"))
    with pytest.raises(HardwareDataError, match="unknown unit 'GiB/sec'"):
        hw.load(p)
    p = _write(tmp_path, lambda r: r["gpus"]["H200"].__setitem__("memory_bandwidth", {"value": 4800, "unit": "GB/s", "source": " "}))
    with pytest.raises(HardwareDataError, match="no source"):
        hw.load(p)
    p = _write(tmp_path, lambda r: r["gpus"]["H200"].__setitem__("power", 700))
    with pytest.raises(HardwareDataError, match="has no unit"):
        hw.load(p)
    p = _write(tmp_path, lambda r: r["gpus"]["P100 SXM2"]["undefined"].pop("tf32"))
    with pytest.raises(HardwareDataError, match="tf32 is neither"):
        hw.load(p)


def test_figure_dataclass() -> None:
    f = Figure(1555.0, "GB/s", "NVIDIA A100 datasheet")
    assert str(f) == "1555 GB/s (NVIDIA A100 datasheet)" and f.note is None
    assert f.to("TB/s").value == pytest.approx(1.555)
    assert Figure(700, "PFLOP/s", "x").to("TFLOP/s").value == 700_000


def test_unconfirmed_listing() -> None:
    rows = hw.unconfirmed()
    names = {(r, f) for r, f, _ in rows}
    assert ("B200", "peak fp8") in names and ("NVSwitch 2", "ports") in names
    assert all(fig.unconfirmed for _, _, fig in rows)
    assert not any(r == "H100 SXM" for r, _, _ in rows)


# ------------------------------------------------------------------------- the source talk against the datasheets


def test_dgx1_datasheet_figures_with_the_talks_in_a_note() -> None:
    v, p = hw.system("DGX-1 (V100)"), hw.system("DGX-1 (P100)")
    assert v.power.value == 3500 and "3,200 W" in v.power.note and "datasheet" in v.power.source
    assert p.power.value == 3200
    assert p.storage.value == pytest.approx(4 * 1.92) and "7 TB" in p.storage.note
    assert v.storage.value == pytest.approx(7.68) and "8 TB" in v.storage.note


def test_claims_pair_the_talk_with_the_datasheet() -> None:
    by_key = {(c.record, c.field): c for c in hw.claims()}
    power = by_key[("DGX-1 (V100)", "power")]
    assert power.claimed.value == 3200 and power.datasheet.value == 3500
    assert power.claimed.source == "DGX-2 technical talk (GTC 2018)"
    assert power.difference == pytest.approx(-300 / 3500)
    ssd = by_key[("DGX-1 (P100)", "storage")]
    assert ssd.claimed.value == 7 and ssd.datasheet.value == pytest.approx(7.68)
    assert "+4%" in str(by_key[("DGX-1 (V100)", "storage")])
    assert all(c.datasheet.source != c.claimed.source for c in hw.claims())


def test_broken_claim(tmp_path: Path) -> None:
    p = _write(tmp_path, lambda r: r["claims"][0].__setitem__("field", "wattage"))
    with pytest.raises(HardwareDataError, match="has no figure 'wattage'"):
        hw.load(p)
    p = _write(tmp_path, lambda r: r["claims"][0].__setitem__("claimed", {"value": 3200, "unit": "GB/s", "source": "a talk"}))
    with pytest.raises(HardwareDataError, match="does not convert"):
        hw.load(p)


def test_gb200_gpu_is_its_own_record() -> None:
    g = hw.gpu("GB200 NVL72")
    assert g.name == "B200 (GB200)" and hw.gpu("GB200").name == "B200 (GB200)"
    assert g.memory_size.value == 186 and g.power.value == 1200
    assert g.peak("fp8", sparse=True).value == 10000 and not g.peak("fp8", sparse=True).unconfirmed
    hgx = hw.gpu("B200")
    assert hgx.memory_size.value == 180 and hgx.power.value == 1000
    nvl = hw.system("GB200 NVL72")
    assert nvl.gpu_memory_total.value == pytest.approx(72 * 186 / 1000, abs=0.01)
    assert hw.match_device("NVIDIA GB200").name == "B200 (GB200)"


def test_dgx2_gpu_is_the_sxm3_part_and_dgx2h_is_not_an_alias() -> None:
    d2 = hw.system("DGX-2")
    assert d2.gpu == "V100 SXM3 32GB" and d2.gpu_model.memory_size.value == 32
    assert d2.gpu_model.peak("fp16").value == 125
    assert hw.match_device("Tesla V100-SXM3-32GB").name == "V100 SXM3 32GB"
    assert hw.match_device("Tesla V100-SXM2-32GB").name == "V100 SXM2 32GB"
    assert "DGX-2H" in d2.note
    with pytest.raises(LabkitError, match="no system called 'DGX-2H'"):
        hw.system("DGX-2H")


def test_fp64_peaks_say_where_they_run() -> None:
    assert hw.gpu("P100").runs_on("fp64") == hw.gpu("V100").runs_on("fp64") == "CUDA cores"
    assert hw.gpu("A100").runs_on("fp64") == hw.gpu("H100").runs_on("fp64") == "Tensor Cores"
    assert hw.gpu("A100").peak("fp64", tensor_core=False).value == pytest.approx(9.7)
    assert hw.gpu("V100").peak("fp64", tensor_core=False).value == 7.8
    assert hw.gpu("B200").runs_on("fp64") == "Tensor Cores and CUDA cores"
    assert hw.gpu("V100").runs_on("fp16") == "Tensor Cores" and hw.gpu("P100").runs_on("fp16") == "CUDA cores"
    assert all(hw.gpu(n).runs_on("fp32") == "CUDA cores" for n in hw.gpus())
    with pytest.raises(LabkitError, match="does not exist on the P100"):
        hw.gpu("P100").runs_on("tf32")


def test_h200_nvl_is_its_own_record_with_the_nvl_figures() -> None:
    """The PCIe card (600 W, lower clocks) is not the SXM part: a GEMM on it is judged against its own peak."""
    nvl, sxm = hw.match_device("NVIDIA H200 NVL"), hw.match_device("NVIDIA H200")
    assert nvl.name == "H200 NVL" and sxm.name == "H200"
    assert nvl.peak("bf16").value == pytest.approx(835.5) and nvl.peak("bf16", sparse=True).value == pytest.approx(1671)
    assert nvl.peak("fp16").value < sxm.peak("fp16").value and nvl.memory_bandwidth.value == sxm.memory_bandwidth.value
    assert nvl.sm_count.unconfirmed  # the datasheet gives no SM count
