"""The notebooks' own GPU cells that depend on which GPU is present, run on the CPU for device profiles (issue 42,
items 2-3; review 4, W8): the cells are read from notebooks/src and executed as written, with the environment a
profile gives and stand-ins only for what needs a device (the measured timings). An H100's measured stages are drawn
under the H100's own roofline; a T4's (labkit.hw has no figures for it) are not drawn under any ceiling, and the cell
says why; lab 06's GEMM predictions are made for the GPU present, or labelled as another GPU's."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import labkit
from labkit.gpu import profiles

ROOT = Path(__file__).resolve().parents[1]


def _cells(stem: str) -> list[str]:
    """The code cells of a notebook source (jupytext percent format), in order."""
    text = (ROOT / "notebooks" / "src" / f"{stem}.py").read_text()
    parts = re.split(r"^# %%.*$", text, flags=re.M)
    return [p for p in parts[1:] if p.strip() and not p.lstrip().startswith("# ")]


def _cell(stem: str, marker: str) -> str:
    found = [c for c in _cells(stem) if marker in c]
    assert len(found) == 1, (stem, marker, len(found))
    return found[0]


def _stage_timings(device: str) -> list[Any]:
    """GPU timings of the capstone's four stages at 1080p, as a GPU run's time_stages gives them (figures made up)."""
    from labkit import video
    from labkit.bench import Timing

    pixels = 1080 * 1920
    return [Timing(name=s.name, samples_s=(2e-4, 2e-4, 2e-4), mode="gpu", device=device,
                   bytes=s.bytes_per_pixel * pixels, how="stand-in GPU timing (test)")
            for s in video.STAGES.values()]


@pytest.mark.parametrize("key", ["H100", "T4", "H200"])
def test_capstone_roofline_cells_draw_this_gpus_own_ceiling_or_none(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit import hw, video

    env = profiles.profile(key).environment()
    ns: dict[str, Any] = {"labkit": labkit, "env": env, "video": video, "hw": hw,
                          "stage_times": _stage_timings(env.device_name)}
    exec(_cell("09-capstone", "roof, not_here = ceiling(env)"), ns)
    table = capsys.readouterr().out
    cell = _cell("09-capstone", "video.roofline_figure(roof")
    last = cell.strip().splitlines()[-1]
    assert last.startswith("video.roofline_figure(")
    exec(cell.replace(last, "fig = " + last), ns)  # the cell as written; its last line's figure kept to read
    printed = capsys.readouterr().out
    title = ns["fig"].layout.title.text
    if key == "T4":
        assert ns["roof"] == "H200" and "Tesla T4" in printed and "not drawn under the H200's ceiling" in printed
        assert "model only" in title  # the T4's measurements are not placed under the H200's roof
    else:
        want = hw.match_device(env.device_name).name
        assert ns["roof"] == want and printed == "" and "measured on this GPU" in title and want in title
    assert table.strip()  # the stage table for that roof


@pytest.mark.parametrize("key", ["H100", "L4"])
def test_lab06_gemm_prediction_cell_predicts_for_the_gpu_present(key: str, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The 3b cell: each line is the prediction for this GPU's own record, or, on a GPU labkit has no figures for,
    the H200's model with the measurement labelled as another GPU's."""
    from labkit import hw
    from labkit.bench import Timing

    env = profiles.profile(key).environment()

    class FakeCupy(types.ModuleType):  # only what the cell calls: random matrices and a matmul, timed by a stand-in
        float16, float32 = np.float16, np.float32
        random = types.SimpleNamespace(standard_normal=lambda shape, dtype=None: np.zeros((1, 1), np.float32))
        matmul = staticmethod(lambda a, b: None)

    monkeypatch.setitem(sys.modules, "cupy", FakeCupy("cupy"))
    monkeypatch.setattr(labkit.bench, "measure", lambda fn, *a, name="", flops=0.0, **k: Timing(
        name=name, samples_s=(1e-3,) * 3, mode="gpu", device=env.device_name, flops=flops, how="stand-in"))
    ns: dict[str, Any] = {"labkit": labkit, "env": env, "hw": hw,
                          "predict_gemm": lambda m, n, k, p, g: 1.0}
    monkeypatch.setattr(labkit.check, "solved_or_reference", lambda exercise_id, fn: fn)
    exec(_cell("06-tensor-cores-mixed-precision", "gpu_name, not_here = ceiling(env)"), ns)
    lines = capsys.readouterr().out.strip().splitlines()
    if key == "H100":
        assert ns["gpu_name"] == "H100 SXM" and all(line.startswith("H100 SXM fp16") for line in lines)
        assert all("measured" in line and "another GPU" not in line for line in lines)
    else:
        assert ns["gpu_name"] == "H200" and "NVIDIA L4" in lines[0]  # the note first
        assert all("on the NVIDIA L4, another GPU" in line for line in lines[1:]) and len(lines) == 6


def test_lab07_copy_cell_in_a_vm_says_the_link_is_unknown_and_keeps_its_measurements(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """B5 where review 4 saw it: notebook 07's copy cell, as written, on an H100 whose VM's NVML refuses the PCIe
    link (and no sysfs link): the three copies are printed, and the link line says why it is unknown, in words.
    (Before the fix the NVMLError escaped the cell's ``except labkit.LabkitError``.)"""
    from gpu_fakes import VM_REFUSES, FakeNvml, NvmlGpu, install_bandwidth_fake
    from labkit.gpu import bandwidth as bw

    env = profiles.profile("H100").environment()
    gpu = env.gpus[0]
    nvml = FakeNvml([NvmlGpu(gpu.name, gpu.uuid, "0000" + gpu.pci_bus_id)], refuse=VM_REFUSES)
    install_bandwidth_fake(monkeypatch, n=1)
    monkeypatch.setattr(bw, "env", lambda: env)
    monkeypatch.setattr(bw, "_nvml", lambda: nvml)
    monkeypatch.setattr(bw, "pcie_from_sysfs", lambda bus_id, root=None: None)
    monkeypatch.setattr(bw, "host_stream", lambda *a, **k: types.SimpleNamespace(gbps=20.0))  # the CPU's, not asked here
    ns: dict[str, Any] = {"labkit": labkit, "env": env, "bw": bw}
    cell = _cell("07-bandwidth-and-nvlink", "link = bw.pcie_link(0)")
    assert 'size = "512MiB"' in cell
    exec(cell.replace('size = "512MiB"', 'size = "16MiB"'), ns)  # as written but the size: host buffers are real here
    out = capsys.readouterr().out
    assert out.count("GB/s") >= 3 and "CPU" in out and "GPU0" in out  # the measured copies, kept
    assert ns["link"] is None and "PCIe link: not known here (NVML could not answer" in out and "N/A" in out


@pytest.mark.parametrize("key", ["T4", "A100 40GB", "H100", "B200", "RTX 5090"])
def test_lab10_cluster_cell_runs_on_hopper_and_later_and_says_so_before(key: str, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Lab 10's cluster cell, as written: from compute capability 9.0 it launches with clusters (cuda.core stand-in
    that computes what the kernel would, as in test_gpu_paths_graph_cluster), before it the cell says why not."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_gpu_paths_graph_cluster as g
    from labkit.check import lab10_clusters

    prof = profiles.profile(key)
    env = prof.environment()
    seen = g._fake_cuda_core(monkeypatch)
    arch = "".join(map(str, prof.compute_capability))
    sys.modules["cuda.core"].Device = lambda: types.SimpleNamespace(
        arch=arch, set_current=lambda: None, create_stream=lambda: types.SimpleNamespace(sync=lambda: None))
    ns: dict[str, Any] = {"env": env, "np": np, "my_cluster": lab10_clusters.reference_source()}
    exec(_cell("10-where-next", "lab10_clusters.run_on_gpu(my_cluster"), ns)
    out = capsys.readouterr().out
    if prof.compute_capability >= (9, 0):
        assert "match NumPy: True" in out and seen["clusters"] == [4] and seen["options"].arch == f"sm_{arch}"
    else:
        assert f"{prof.name} has compute capability" in out and "no clusters" in out and "clusters" not in seen
