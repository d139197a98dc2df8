"""The slides (course/slides/overview.md) checked against labkit.hw, the lab manifest and the labs' own models:
a figure or rule on a slide that disagrees with them fails here (review 3, item 5; N14 and the A1/A2/A15 residue)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import yaml

from labkit import collectives as co, hw
from labkit import precision as P
from labkit.roofline import roofline

ROOT = Path(__file__).resolve().parents[1]
SLIDES = (ROOT / "course" / "slides" / "overview.md").read_text(encoding="utf-8")
FLAT = re.sub(r"\s+", " ", SLIDES)


def _slide(title: str) -> str:
    """The text of the slide whose ``## `` heading starts with ``title``."""
    for part in SLIDES.split("\n---\n"):
        m = re.search(r"^## (.+)$", part, flags=re.M)
        if m and m.group(1).startswith(title):
            return part
    raise AssertionError(f"no slide titled {title!r}")


def _table(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return [r for r in rows[2:]]  # without the header and the |---| line


def _numbers(cell: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


def _gbps(cell: str) -> list[float]:
    """Bandwidths in a cell in GB/s (``1555 / 2039 GB/s``, ``3.35 TB/s``)."""
    scale = 1000 if "TB/s" in cell else 1
    return [v * scale for v in _numbers(cell)]


GPU_ROWS = {"P100 SXM2": ["P100"], "V100 SXM2": ["V100 SXM2 16GB", "V100 SXM2 32GB"],
            "A100 SXM4": ["A100 SXM4 40GB", "A100 SXM4 80GB"], "H100 SXM5": ["H100"], "H200 SXM": ["H200"],
            "B200 (HGX)": ["B200"], "B300 (HGX)": ["B300"]}


def test_gpu_table_matches_labkit_hw() -> None:
    rows = _table(_slide("Seven data-centre GPUs"))
    assert [r[0] for r in rows] == list(GPU_ROWS)
    checked = 0
    for name, memory, bandwidth, fp32, tensor in rows:
        gpus = [hw.gpu(n) for n in GPU_ROWS[name]]
        assert sorted(set(_numbers(memory.split("HBM")[0]))) == sorted({g.memory_size.value for g in gpus}), name
        if "as H100" not in fp32:
            assert _numbers(fp32) == [gpus[0].peak("fp32").value], name
            assert ("*" in fp32) == gpus[0].peak("fp32").unconfirmed, name
        assert sorted(set(_gbps(bandwidth))) == sorted({g.memory_bandwidth.to("GB/s").value for g in gpus}), name
        if "as H100" in tensor:
            h100 = hw.gpu("H100")
            assert {p: pk.dense.value for p, pk in gpus[0].peaks.items()} == {p: pk.dense.value for p, pk in h100.peaks.items()}
            continue
        for formats, value, star in re.findall(r"((?:[A-Z]+\d+/?)+) (\d[\d.]*)(\*?)", tensor):
            for fmt in formats.split("/"):
                for g in gpus:
                    peak = g.peak(fmt.lower())
                    assert peak.value == float(value), (name, fmt, peak)
                    assert bool(star) == peak.unconfirmed, (name, fmt, "a * marks exactly the unconfirmed figures")
                    checked += 1
    assert checked >= 20  # the tensor cells were parsed, not skipped


def test_nvlink_tables_match_labkit_hw() -> None:
    systems = {"DGX-1 (P100)": ["DGX-1 (P100)"], "DGX-1 (V100)": ["DGX-1 (V100)"], "DGX-2": ["DGX-2"],
               "DGX A100": ["DGX A100"], "DGX H100 / H200": ["DGX H100", "DGX H200"], "DGX B200 / B300": ["DGX B200", "DGX B300"]}
    rows = _table(_slide("Per-GPU NVLink bandwidth"))
    assert [r[0] for r in rows] == list(systems)
    for name, fabric, per_gpu in rows:
        for s in systems[name]:
            rec = hw.system(s)
            assert _gbps(per_gpu) == [rec.gpu_model.nvlink_bandwidth.to("GB/s").value], (name, s)
            assert rec.nvlink in fabric or rec.nvlink.replace("NVLink ", "NVLink ") in fabric or "NVLink 5" in fabric
    for row in _table(_slide("Links: per direction")):
        m = re.match(r"(NVLink \d)", row[0])
        if m:
            ln = hw.link(m.group(1))
            assert _numbers(row[1]) == [ln.per_link.value] and _numbers(row[2]) == [ln.links_per_gpu.value], row
            assert _gbps(row[3]) == [ln.per_gpu.to("GB/s").value], row
        else:
            assert _numbers(row[1])[1::2] == [hw.link(f"PCIe {g}").per_link.value for g in (3, 4, 5)], row


def test_system_figures_match_labkit_hw() -> None:
    text = re.sub(r"\s+", " ", _slide("DGX H100 / H200, and the Blackwell systems"))
    assert "32 PFLOP/s FP8 (with sparsity)" in text and hw.system("DGX H100").headline.to("PFLOP/s").value == 32
    for name in ("DGX B200", "DGX B300"):
        s = hw.system(name)
        assert s.headline.to("PFLOP/s").value == 72 and s.headline_sparse
        assert 8 * s.gpu_model.peak("fp4", sparse=True).value / 1000 == 144
    assert "72 PFLOP/s FP8 and 144 PFLOP/s FP4, both with sparsity" in text
    assert "1,440 GB and 2.3 TB" in text
    assert hw.system("DGX B200").gpu_memory_total.to("GB").value == 1440
    assert hw.system("DGX B300").gpu_memory_total.to("TB").value == 2.3
    for name in ("GB200 NVL72", "GB300 NVL72"):
        s = hw.system(name)
        assert s.headline.to("PFLOP/s").value == 720 and s.nvlink_domain_bandwidth.value == 130 and s.gpu_count.value == 72
    assert "720 PFLOP/s FP8 with sparsity" in text and "130 TB/s NVLink domain" in text
    assert "1.8 TB/s per GPU" in text and hw.link("NVLink 5").per_gpu.to("TB/s").value == 1.8
    dgx2 = re.sub(r"\s+", " ", _slide("DGX-2"))
    assert "**Any two GPUs: 300 GB/s bidirectional**" in dgx2 and hw.system("DGX-2").gpu_model.nvlink_bandwidth.value == 300
    assert f"NVSwitch: {int(hw.link('NVSwitch 1').ports.value)} ports" in dgx2


def test_ridge_points_and_allreduce_times_match_the_models() -> None:
    assert f"≈ **{roofline('H200', 'bf16').ridge_point:.0f} FLOP per byte**" in FLAT
    assert f"ridge point ({roofline('H200', 'fp32').ridge_point:.1f})" in FLAT
    from labkit.check.lab08 import _allreduce_ms  # lab 08's reference for exercise 08.allreduce-dgx

    want = _allreduce_ms()
    for name, label in (("DGX-1 (V100)", "DGX-1 (V100)"), ("DGX-2", "DGX-2"), ("DGX A100", "DGX A100"), ("DGX H100", "DGX H100")):
        assert f"{label} {want[name]:.1f} ms" in FLAT, (name, want[name])


def test_error_table_is_lab_06s_computation() -> None:
    """The slide's accuracy table is lab 06's table at K = 1024, computed here the way the lab computes it; the notes
    quote the same figures; the '[−1, 1): about ten times larger' remark holds."""
    lab = (ROOT / "notebooks" / "src" / "06-tensor-cores-mixed-precision.py").read_text(encoding="utf-8")
    m = re.search(r"^ks = (\[[\d, ]+\])$", lab, flags=re.M)
    assert m and "P.error_vs_k(fmt, acc, ks, m=16, seed=6)" in lab
    ks = eval(m.group(1))  # noqa: S307 - a literal list of ints from the lab's source
    fmts = {"FP32": "fp32", "TF32": "tf32", "FP16": "fp16", "BF16": "bf16", "FP8 E4M3": "fp8_e4m3"}
    notes = re.sub(r"\s+", " ", (ROOT / "course" / "instructor-notes.md").read_text(encoding="utf-8"))
    rows = _table(_slide("Number formats and what they cost"))
    assert [r[0] for r in rows] == list(fmts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.PrecisionWarning)
        for label, value in rows:
            err = P.error_vs_k(fmts[label], "fp32", ks, m=16, seed=6)[ks.index(1024)]
            assert value == f"{err:.1e}".replace("e-0", "e-"), (label, err)
            assert f"{value} for {label.split()[0]}" in notes or f"{value} for FP16 and TF32" in notes \
                or f"{value} for FP8 E4M3" in notes, (label, value)
            if label != "FP32":
                signed = P.error_vs_k(fmts[label], "fp32", [1024], m=16, seed=6, low=-1.0)[0]
                positive = P.error_vs_k(fmts[label], "fp32", [1024], m=16, seed=6)[0]
                assert 5 < signed / positive < 20, (label, signed / positive)
    assert "about ten times larger" in FLAT


def test_collective_rules_agree_with_lab_08() -> None:
    """N14: the busbw rule and the tree rule as lab 08 states them (ring against the per-direction rate, NVLS above
    it; the tree wins between nodes, inside a node it is a chain), and the NVLS figure from labkit.hw."""
    lab08 = re.sub(r"\s+", " ", re.sub(r"^\s*# ?", "", (ROOT / "notebooks" / "src" / "08-collectives-and-scaling.py")
                                        .read_text(encoding="utf-8"), flags=re.M))
    for text in (FLAT, lab08):
        assert re.search(r"[Ff]or a ring, busbw compares with the per-direction link bandwidth", text)
        assert "NVLS" in text and re.search(r"inside (a|one) node NCCL's tree is a chain", text)
    nvls = hw.system("DGX H200").allreduce_busbw_nvls
    per_dir = hw.gpu("H200").nvlink_bandwidth.value / 2
    assert f"{nvls.value:.0f} GB/s against {per_dir:.0f} on 8 × H200" in FLAT and "Bekman" in nvls.source


def test_labs_table_matches_the_manifest() -> None:
    labs = yaml.safe_load((ROOT / "src" / "labkit" / "data" / "labs.yml").read_text(encoding="utf-8"))["labs"]
    rows = _table(_slide("The labs"))
    assert [(r[0], r[1], int(r[2])) for r in rows] == [(lab["id"], lab["title"], int(lab["minutes"])) for lab in labs]


def test_every_measured_figure_says_where_and_who() -> None:
    """Item 4: no 'course measurement' label; a measured figure names the machine and who measured it."""
    for m in re.finditer(r"[Mm]easured[^*]{0,200}", FLAT):
        chunk = FLAT[max(0, m.start() - 200): m.end() + 400]
        if "H200" in chunk and ("TB/s" in chunk or "TFLOP/s" in chunk or "SMs" in chunk):
            assert "by the course's authors" in chunk or "device query by the course's authors" in chunk or \
                "published measurement" in chunk or "NVIDIA/nccl" in chunk, chunk[:200]


@pytest.mark.parametrize("phrase", ["course measurement", "comparable across GPU counts", "worst entry"])
def test_old_slide_rules_are_gone(phrase: str) -> None:
    assert phrase not in FLAT
