"""gpu mode on the GPUs learners have (issue 42, item 3): every device profile (T4, A100 40 GB, L4, RTX 4090, H100,
H200, B200, RTX 5090) rehearsed on the fakes: its figures carry sources, `labkit doctor` says what each lab does on it,
the per-lab decisions follow its compute capability, NVLink and GPU count, a feature it lacks is worded with what it
needs and what it is, the GEMM rows it cannot run say so instead of being tried, and nothing it measures is drawn
under another GPU's ceiling."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from labkit import hw
from labkit.cli import doctor
from labkit.gpu import profiles as P

ISSUE = {"T4": (7, 5), "A100 40GB": (8, 0), "L4": (8, 9), "RTX 4090": (8, 9), "H100": (9, 0), "H200": (9, 0),
         "B200": (10, 0), "RTX 5090": (12, 0)}


def test_every_profile_the_issue_names_with_sourced_figures() -> None:
    every = P.profiles()
    assert {k: p.compute_capability for k, p in every.items()} == ISSUE
    for p in every.values():
        for fig in (p.memory, p.memory_bandwidth, p.sm_count, *( [p.boost_clock] if p.boost_clock else [])):
            assert fig.value > 0 and fig.source.strip(), (p.key, fig)
        assert p.pcie_source and p.nvlink_source and p.mig_source and p.where
        assert P.match(p.name) is p and P.profile(p.key) is p
        if p.hw:  # a DGX GPU: its figures are labkit.hw's, and hw names its driver name too
            assert hw.match_device(p.name) is not None and hw.match_device(p.name).name == p.hw
        else:  # no datasheet peaks in labkit: no ceiling to draw against
            assert hw.match_device(p.name) is None and p.nvlink is None
    assert (every["T4"].mig_instances, every["H100"].mig_instances, every["RTX 4090"].nvlink) == (0, 7, None)
    assert every["H200"].nvlink == "NVLink 4" and every["B200"].nvlink == "NVLink 5"
    assert every["L4"].sm_count.unconfirmed  # no NVIDIA document gives it: marked
    with pytest.raises(Exception, match="no device profile"):
        P.profile("Voodoo 2")


@pytest.mark.parametrize("key", list(ISSUE))
def test_doctor_says_what_each_lab_does_on_every_profile(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    prof = P.profile(key)
    env = prof.environment()
    assert env.is_gpu and env.compute_capability == ISSUE[key] and env.device_name == prof.name
    plan = {(s.lab, s.part): s for s in P.lab_plan(env)}
    labs = {lab for lab, _ in plan}
    assert labs == {f"{i:02d}" for i in range(11)}  # every lab has a word
    assert all(s.action in ("runs", "model", "ptx", "skipped") for s in plan.values())
    assert all(s.why for s in plan.values() if s.action != "runs")  # every fallback says why
    cc = ISSUE[key]

    def action(lab: str, part: str) -> str:
        return plan[(lab, part)].action

    assert action("06", "TF32 GEMM") == ("runs" if cc >= (8, 0) else "model")
    assert action("06", "BF16 GEMM (cuBLAS)") == ("runs" if cc >= (8, 0) else "model")
    assert action("06", "FP8 GEMM") == ("runs" if cc >= (8, 9) else "model")
    assert action("10", "thread block clusters") == ("runs" if cc >= (9, 0) else "skipped")
    assert action("06", "wgmma/TMA tile") == "ptx"
    assert ("ptxas assembles it for this GPU" in plan[("06", "wgmma/TMA tile")].why) == (cc == (9, 0))
    assert action("08", "NCCL all-reduce") == "skipped"  # one GPU
    roof = plan[("09", "capstone stages timed, on the roofline")].why
    if prof.hw:
        assert f"the {prof.hw}'s own ceiling" in roof
    else:
        assert "not drawn under the H200's ceiling" in roof and prof.name in roof
    if cc < (8, 9):
        assert "FP8 Tensor Cores need compute capability 8.9 or later; this is a" in plan[("06", "FP8 GEMM")].why
    # the doctor's JSON and text for the profile, through the command
    assert doctor.main(as_json=True, profile=key) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profile"] == key and len(data["plan"]) == len(plan) and data["device"].startswith(prof.name)
    assert doctor.main(profile=key) == 0
    text = capsys.readouterr().out
    assert f"labs on {prof.name}" in text and "Traceback" not in text


def test_the_issues_sentence_for_a_t4_and_none_for_an_h100() -> None:
    t4, h100 = P.profile("T4").environment(), P.profile("H100").environment()
    assert P.needs("fp8_tensor", t4) == "FP8 Tensor Cores need compute capability 8.9 or later; this is a Tesla T4 (7.5)."
    assert P.needs("fp8_tensor", h100) is None and P.needs("clusters", h100) is None
    assert P.needs("wgmma", P.profile("B200").environment()).startswith("The wgmma.mma_async instruction")
    assert P.needs("tcgen05", P.profile("RTX 5090").environment()) is not None  # sm_120 has no tcgen05
    assert P.needs("fp4_tensor", P.profile("RTX 5090").environment()) is None
    sim = types.SimpleNamespace(is_gpu=False, compute_capability=None, device_name="CPU")
    assert P.needs("fp8_tensor", sim) is None and P.lab_plan(sim) == []
    with pytest.raises(Exception, match="no feature"):
        P.needs("warp_drive", h100)


def test_two_gpus_with_nvlink_run_the_peer_and_nccl_parts() -> None:
    plan = {(s.lab, s.part): s.action for s in P.lab_plan(P.profile("H200").environment(gpus=8))}
    assert plan[("07", "peer copies and NVLink")] == "runs" and plan[("08", "NCCL all-reduce")] == "runs"


def test_doctor_report_on_this_machine_has_the_labs_key() -> None:
    data = doctor.report()
    assert tuple(data) == doctor.KEYS and data["labs"]["plan"] == [] and "sim mode" in data["labs"]["note"]
    assert "labs: sim mode" in doctor.render(data)


# ---------------------------------------------------------------------------------------------- gpu mode's code paths


@pytest.mark.parametrize("key", ["T4", "L4", "H100"])
def test_gemm_rows_a_gpu_cannot_run_say_so_and_are_not_tried(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a T4 the TF32/BF16/FP8 rows say what they need (not a cuBLAS error); on an L4 only FP8 runs beyond BF16;
    the % of peak exists only where labkit.hw has the GPU (no other GPU's peak is used)."""
    import labkit.mode
    from labkit import tensorcores as tc
    from labkit.gpu import bench

    env = P.profile(key).environment()
    tried: list[str] = []

    class Gen:
        def standard_normal(self, shape: Any, dtype: Any = None) -> Any:
            tried.append(str(dtype))
            raise MemoryError("stop here: the rows tried are what this test counts")

    fake = types.SimpleNamespace(__version__="14.2.0", float32="float32", random=types.SimpleNamespace(default_rng=Gen),
                                 get_default_memory_pool=lambda: types.SimpleNamespace(free_all_blocks=lambda: None))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    for mod in (labkit.mode, bench):
        monkeypatch.setattr(mod, "env", lambda: env)
    monkeypatch.setattr(tc, "_tf32", lambda enabled: __import__("contextlib").nullcontext())
    rows = {r.precision: r for r in tc.gpu_gemm_throughput(("fp32", "tf32", "fp16", "bf16", "fp8"), n=64)}
    cc = ISSUE[key]
    for p, since in (("tf32", (8, 0)), ("bf16", (8, 0)), ("fp8", (8, 9))):
        if cc < since:
            assert rows[p].note.startswith(f"{p.upper()} Tensor Cores need compute capability"), rows[p].note
    assert len(tried) == 2 + (cc >= (8, 0)) * 2 + (cc >= (8, 9))  # only what the GPU has was tried
    has_peak = P.profile(key).hw is not None
    assert all((r.peak_tflops is not None) == has_peak for p, r in rows.items() if p in ("fp16", "fp32"))


@pytest.mark.parametrize("key", ["H100", "T4"])
def test_the_overlap_model_is_labelled_with_the_gpu_present(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """C5: an H100's overlap record said "H200, PCIe 5"."""
    import labkit.mode
    from labkit import cupylab

    env = P.profile(key).environment()
    monkeypatch.setattr(labkit.mode, "env", lambda: env)
    model, label = cupylab._overlap_model_here(1 << 30, 16)
    if key == "H100":
        assert label == "model (H100 SXM, PCIe 5 figures from labkit.hw)"
    else:
        assert label.startswith("model (H200, PCIe 3 figures") and "Tesla T4" in label
    assert model.speedup > 1


def test_the_bf16_gemm_runs_on_the_callers_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """C6: cuBLAS's handle is put on the current stream for the call and put back after."""
    from labkit import tensorcores as tc

    pytest.importorskip("cupy")
    from cupy.cuda import cublas as real  # what tensorcores._cublas loads
    calls: list[tuple] = []
    cublas = types.SimpleNamespace(
        CUBLAS_POINTER_MODE_HOST=0, CUBLAS_OP_N=0, getPointerMode=lambda h: 1, getStream=lambda h: 7,
        setPointerMode=lambda h, m: calls.append(("mode", m)), setStream=lambda h, s: calls.append(("stream", s)),
        gemmEx=lambda *a: calls.append(("gemm",)))
    for name in ("getStream", "setStream", "gemmEx", "getPointerMode", "setPointerMode"):
        assert hasattr(real, name), name  # the fake's names exist in CuPy's bindings

    class Arr:
        def __init__(self, shape: tuple[int, int]) -> None:
            self.shape, self.dtype = shape, "bfloat16"
            self.flags = types.SimpleNamespace(c_contiguous=True)
            self.data = types.SimpleNamespace(ptr=1)

    fake_cp = types.SimpleNamespace(cuda=types.SimpleNamespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 5),
                                                               get_current_stream=lambda: types.SimpleNamespace(ptr=42)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cp)
    monkeypatch.setattr(tc, "_cublas", lambda: cublas)
    tc.cublas_bf16_matmul(Arr((4, 8)), Arr((8, 2)), Arr((4, 2)))
    assert calls.index(("stream", 42)) < calls.index(("gemm",)) < calls.index(("stream", 7))


def test_no_notebook_draws_gpu_measurements_under_a_named_gpus_ceiling() -> None:
    """W8, as a class: a call that draws this machine's measurements (``... if env.is_gpu ...``) must take its GPU from
    the machine (``profiles.ceiling``), never a literal name: the capstone drew an H100's stages under the H200's."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "notebooks" / "src"
    bad = [(p.name, m.group(0)) for p in sorted(src.glob("*.py"))
           for m in re.finditer(r"\w+\(\s*\"(?:[A-Z]\d{2,4}[^\"]*)\"[^()\n]*env\.is_gpu[^\n]*", p.read_text())]
    assert not bad, bad
    assert "ceiling(env)" in (src / "09-capstone.py").read_text()
