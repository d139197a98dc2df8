"""A GPU passed through to a virtual machine (review gpu-review-4, B5): its NVML refuses queries that bare metal
answers (nvidia-smi shows "N/A"), it has no NVLink, no persistence mode, and ncu may not read its counters. Every
labkit function that asks NVML must then say what it skips, in words, and keep what it measured: an NVMLError
escaping any of them took down the whole bandwidth suite and notebook 07."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import pytest

from gpu_fakes import VM_REFUSES, FakeNvml, NvmlGpu, vm_nvml

pytest.importorskip("pynvml")

ROOT = Path(__file__).resolve().parents[1]


def _queries_labkit_makes() -> list[str]:
    """Every ``nvmlDevice*`` query in labkit's source: a new one is covered here without being listed."""
    names: set[str] = set()
    for path in (ROOT / "src" / "labkit").rglob("*.py"):
        names |= set(re.findall(r"\b(nvmlDevice[A-Za-z0-9]+)\(", path.read_text()))
    return sorted(names)


def _gpus(nv: list[NvmlGpu]) -> tuple[Any, ...]:
    from labkit.device import GPUInfo, normalise_bus_id

    return tuple(GPUInfo(i, g.name, (9, 0), 80 << 30, 132, 50 << 20, 0x18 + i, g.uuid, normalise_bus_id(g.bus_id))
                 for i, g in enumerate(nv))


def _consumers(gpus: tuple[Any, ...]) -> dict[str, Callable[[Any], Any]]:
    """Each labkit entry point that opens an NVML session, with the NVML module passed in."""
    from labkit.cli import doctor
    from labkit.gpu import bandwidth as bw
    from labkit.hw import topology

    return {
        "doctor nvlink summary": lambda nvml: doctor._nvlink_summary(gpus, nvml),
        "topology.from_nvml": lambda nvml: topology._from_nvml_module(nvml, gpus=gpus),
        "bandwidth.active_nvlinks": lambda nvml: bw._active_nvlinks_module(nvml, gpus),
        "bandwidth.p2p_status": lambda nvml: bw._p2p_status_module(nvml, gpus),
        "bandwidth.pcie_link": lambda nvml: bw._pcie_link_module(nvml, gpus[0]),
    }


def _two_gpus() -> list[NvmlGpu]:
    return [NvmlGpu("NVIDIA H100 80GB HBM3", f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-0000-0000-000000000000",
                    f"00000000:{0x18 + i:02X}:00.0", [f"00000000:{0x19 - i:02X}:00.0"] * 4) for i in range(2)]


def test_the_vm_profile_covers_every_query_labkit_makes_that_a_vm_refuses() -> None:
    made = _queries_labkit_makes()
    assert len(made) >= 10 and "nvmlDeviceGetCurrPcieLinkGeneration" in made
    never_refused = {"nvmlDeviceGetHandleByUUID", "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo"}
    assert set(made) - never_refused <= set(VM_REFUSES), sorted(set(made) - never_refused - set(VM_REFUSES))


@pytest.mark.parametrize("query", _queries_labkit_makes())
def test_any_one_refused_query_is_a_skipped_section_never_an_nvml_error(query: str) -> None:
    """Close the class: whichever query NVML refuses, every consumer answers or raises a LabkitError with words."""
    from labkit.errors import LabkitError

    nv = _two_gpus()
    for code in ("NOT_SUPPORTED", "NO_PERMISSION", "UNKNOWN"):
        for name, call in _consumers(_gpus(nv)).items():
            try:
                call(FakeNvml(nv, refuse={query: code}))
            except LabkitError as exc:
                assert str(exc).strip(), (name, query)
            except Exception as exc:  # noqa: BLE001 - what the test exists to catch
                pytest.fail(f"{name}: {type(exc).__name__} escaped when NVML refused {query} ({code}): {exc}")


def test_pcie_link_in_a_vm_says_why_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """B5 itself: the PCIe link queries refused, no sysfs link: a LabkitError naming N/A, which the bandwidth suite and
    notebook 07 handle (they catch LabkitError)."""
    from labkit.errors import LabkitError
    from labkit.gpu import bandwidth as bw
    from labkit.mode import Environment

    nvml = vm_nvml()
    gpus = _gpus(nvml._gpus)
    e = Environment("gpu", gpus[0].name, (9, 0), 80 << 30, 132, 1, "580", "fake VM", gpus=gpus)
    monkeypatch.setattr(bw, "env", lambda: e)
    monkeypatch.setattr(bw, "_gpu", lambda what: None)
    monkeypatch.setattr(bw, "_check_device", lambda cp, d: d)
    monkeypatch.setattr(bw, "_nvml", lambda: nvml)
    monkeypatch.setattr(bw, "pcie_from_sysfs", lambda bus_id, root=None: None)
    with pytest.raises(LabkitError, match="N/A") as info:
        bw.pcie_link(0)
    assert "sysfs" not in str(info.value) or "does not give the link" in str(info.value)
    # where Linux does report the link, it is used instead
    link = {"current": (4, 16), "max": (4, 16), "peak_gbps": 31.5, "source": "Linux sysfs"}
    monkeypatch.setattr(bw, "pcie_from_sysfs", lambda bus_id, root=None: link)
    assert bw.pcie_link(0) == link


def test_doctor_in_a_vm_reports_no_nvlink_in_words() -> None:
    from labkit.cli import doctor

    nvml = vm_nvml(gpus=2)
    out = doctor._nvlink_summary(_gpus(nvml._gpus), nvml)
    assert out["available"] and out["per_gpu"] == [{"index": 0, "active_links": 0}, {"index": 1, "active_links": 0}]
    assert out["p2p"][0][1].startswith("unknown (")  # NVML's own words for the refused P2P query
