"""Old wordings that expert review 3 found wrong, misleading, outdated or imprecise (N3-N20 and the partly fixed A1,
A2, A7, A14, A15) must not come back, in any lab, solution, hint, check message, instructor note, slide or syllabus.

Each banned phrase is searched in whitespace-normalised text (notebook comment markers and string-literal line
breaks removed), so a phrase split over two lines is still found."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sources() -> list[Path]:
    files = sorted((ROOT / "notebooks" / "src").glob("*.py"))
    files += sorted((ROOT / "course").rglob("*.md"))
    files += sorted((ROOT / "src" / "labkit").rglob("*.py")) + sorted((ROOT / "src" / "labkit" / "data").glob("*.yml"))
    files += [ROOT / "README.md"]
    return [f for f in files if f.is_file()]


def _normalise(text: str) -> str:
    text = re.sub(r"^\s*# ?", "", text, flags=re.M)  # notebook markdown cells and comments
    text = re.sub(r"\"\s*\n\s*f?\"", "", text)  # "..." "..." literals continued on the next line
    return re.sub(r"\s+", " ", text)


def _strings(value: object) -> list[str]:
    """Every string in a YAML document (keys and values), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _read(f: Path) -> str:
    """A source's text; a YAML file's also as YAML reads it (the exercises' hints: quotes undone, folded lines joined)."""
    text = f.read_text(encoding="utf-8")
    if f.suffix == ".yml":
        import yaml

        text += "\n" + "\n".join(_strings(yaml.safe_load(text)))
    return _normalise(text)


TEXTS = {f.relative_to(ROOT).as_posix(): _read(f) for f in _sources()}

#: (finding, regex of the old wording, why it is wrong)
BANNED = [
    ("N3", r"tileiras` compiler of a CUDA 13\.2 or later", "Hopper needs CUDA 13.3 or later"),
    ("N3", r"the `tileiras` compiler of CUDA 13\)", "the architecture rule is missing"),
    ("N4", r"Hopper's FP8 accumulator keeps about 14 bits", "libraries promote by default; 14 bits is fast accumulation"),
    ("N4", r"Hopper's FP8 GEMMs are further off", "not every FP8 GEMM on Hopper"),
    ("N4", r"accumulator of Hopper's FP8 GEMMs keeps", "not every FP8 GEMM on Hopper"),
    ("N5", r"On Hopper, NVIDIA's Transformer Engine uses one FP32 scale per tensor", "TE 2.x has block scaling on Hopper"),
    ("N5", r"Blackwell's Tensor Cores read \*\*block-scaled\*\* formats instead", "block scaling is not Blackwell-only"),
    ("N5", r"per tensor on Hopper \(Transformer Engine\)", "TE 2.x has block scaling on Hopper"),
    ("N6", r"The measured side is in section 4 on a GPU: cuBLAS reaches", "the measured gap is the naive kernel's"),
    ("N6", r"On a GPU the next cell measures the gap: the WMMA kernel", "the measured gap is the naive kernel's"),
    ("N7", r"warp-level WMMA kernel fed from shared memory needs 4×", "4× holds without fragment reuse only"),
    ("N7", r"the warp waits for each product", ".sync is convergence, not waiting for the result"),
    ("N7", r"Why WMMA cannot reach the H200's peak", "the model alone does not show it"),
    ("N8", r"multiplies tiles up to 64×256×16 reading its operands straight from shared memory", "A may be in registers; K varies"),
    ("N9", r"(?<!data-centre )Blackwell has `tcgen05`", "only sm_100/sm_103 have tcgen05"),
    ("N10", r"False by default since PyTorch 1\.12\), CuPy", "PyTorch's fp32_precision controls; convolutions use TF32"),
    ("N10", r"PyTorch `allow_tf32`, False by default", "PyTorch's fp32_precision controls"),
    ("N11", r"lower bound on a Tensor Core", "round-to-nearest sums are usually smaller, not a bound"),
    ("N11", r"between about two and ten times the FP32 unit roundoff", "held on some CPUs only"),
    ("N11", r"about 4e-7 for FP32", "held on some CPUs only; the lab prints 1.4e-6"),
    ("N12", r"worst of a million entries", "the figures are normwise errors"),
    ("N12", r"A full 1024² product's worst entry", "the figures are normwise errors"),
    ("N12", r"in a 1024² GEMM, max relative error", "not what the figures were"),
    ("N13/A7", r"if i < x\.size else 0\.0`", "a float64 literal the course's own check warns about"),
    ("N13/A7", r"cuda\.blockIdx\.x > 0 else 0\.0\)", "a float64 literal the course's own check warns about"),
    ("N14/A2", r"A tree needs 2 log₂n steps: it wins for small messages", "inside a node NCCL's tree is a chain"),
    ("N14/A1", r"for all-reduce, comparable across GPU counts", "with NVLS busbw exceeds the link rate"),
    ("N15", r"course measurement", "only for what this course's make gpu-check measured"),
    ("N16", r"NVLS gives the switch's reduction few SMs", "an unsupported cause"),
    ("N17", r"cannot launch clusters, which is why this kernel is CUDA C\+\+\. This lab", "its successor numba-cuda-mlir can"),
    ("N18", r"Announced next \(CES 2026", "Rubin is in production"),
    ("N18", r"is an announcement \(NVIDIA, CES 2026\)", "Rubin is in production"),
    ("N19", r"DDP's 1 MB first-bucket size", "a 1 MiB cap on every bucket is not DDP's plan"),
    ("N20", r"NumPy's FP8 type", "ml_dtypes provides it, not NumPy"),
]

#: A figure may be called a course measurement once `make gpu-check` has written one (benchmarks/results/).
GPU_CHECK_RUNS = [p for p in (ROOT / "benchmarks" / "results").glob("*.json") if not p.name.startswith("sim-speed")]


@pytest.mark.parametrize("finding, pattern, why", BANNED, ids=[f"{b[0]}:{b[1][:30]}" for b in BANNED])
def test_old_wording_is_gone(finding: str, pattern: str, why: str) -> None:
    if finding == "N15" and GPU_CHECK_RUNS:
        pytest.skip("a gpu-check result exists: 'course measurement' may name it")
    hits = [name for name, text in TEXTS.items() if re.search(pattern, text)]
    assert not hits, f"{finding}: {pattern!r} is back in {hits} ({why})"


def test_the_sources_are_read() -> None:
    """The search covers the labs, the course folder, labkit and its data (a test that reads nothing cannot fail)."""
    assert any(n.startswith("notebooks/src/06-") for n in TEXTS) and "course/slides/overview.md" in TEXTS
    assert "src/labkit/check/lab04.py" in TEXTS and "src/labkit/data/hw.yml" in TEXTS
    assert "np.float32(0.0)" in TEXTS["src/labkit/data/exercises.yml"]  # lab 04's block_sum hint
    assert "the V100's FP32 rate: only one comes out near 20" in TEXTS["src/labkit/data/exercises.yml"]  # a hint, as YAML reads it
    assert re.search(BANNED[0][1], "the `tileiras` compiler of a CUDA 13.2 or later toolkit")


def test_new_wording_is_there() -> None:
    """The corrections themselves, where a learner or instructor reads them."""
    lab06, notes, slides = (TEXTS["notebooks/src/06-tensor-cores-mixed-precision.py"], TEXTS["course/instructor-notes.md"],
                            TEXTS["course/slides/overview.md"])
    for text in (lab06, notes, slides):
        assert "fast accumulation" in text and "fp32_precision" in text and "sm_103a" in text
    assert "13.3 or later for Hopper" in TEXTS["notebooks/src/10-where-next.py"] and "13.3+ for Hopper" in notes
    assert "NVLS" in slides and "inside a node NCCL's tree is a chain" in slides
    assert "1 MiB buckets" in TEXTS["notebooks/src/08-collectives-and-scaling.py"]
