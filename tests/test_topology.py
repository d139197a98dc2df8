"""labkit.topology: the wiring models reproduce the source figures; nvidia-smi and NVML parsing."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

import labkit

from labkit import topology
from labkit.errors import LabkitError, NoGPUError
from labkit.topology import DGX1_V100_DOUBLE, DGX1_V100_SINGLE

FIX = Path(__file__).parent / "fixtures"


def test_systems_and_load() -> None:
    assert topology.systems() == [
        "DGX-1 (P100)",
        "DGX-1 (V100)",
        "DGX-2",
        "DGX A100",
        "DGX H100",
        "DGX H200",
        "DGX B200",
        "DGX B300",
        "GB200 NVL72",
        "GB300 NVL72",
    ]
    for name in topology.systems():
        t = topology.load(name)
        assert len(t.gpus()) in (8, 16, 72)
    assert topology.load("dgx 2").name == "DGX-2"


def test_unknown_system_and_gpu_index() -> None:
    with pytest.raises(LabkitError, match="(?i)did you mean 'DGX-2'") as info:
        topology.load("DGX-3")
    assert "DGX H100" in str(info.value)  # the fix lists what is valid
    with pytest.raises(LabkitError, match="no wiring model"):
        topology.load("DGX SuperPOD (A100)")
    t = topology.load("DGX-1 (V100)")
    with pytest.raises(LabkitError, match="GPU 8 does not exist in DGX-1 \\(V100\\): it has GPUs 0-7"):
        t.peer_bandwidth(0, 8)
    with pytest.raises(LabkitError, match="not a GPU"):
        t.links_between("zero", 1)
    with pytest.raises(LabkitError, match="two different GPUs"):
        t.peer_bandwidth(3, "GPU3")


def test_dgx2_any_pair_300_bidirectional() -> None:
    t = topology.load("DGX-2")
    for a, b in [(0, 1), (0, 7), (0, 8), (3, 15), (9, 14)]:
        assert t.peer_bandwidth(a, b, bidirectional=True) == pytest.approx(300)
        assert t.peer_bandwidth(a, b) == pytest.approx(150)
        assert t.links_between(a, b) == 0  # all through NVSwitch
    assert len(t.nodes("nvswitch")) == 12
    for g in t.gpus():
        assert sum(d["links"] for _, n, d in t.graph.edges(f"GPU{g}", data=True) if d["kind"] == "nvlink") == 6


def test_dgx2_backplane_24_tbs() -> None:
    t = topology.load("DGX-2")
    assert t.max_flow(range(8), range(8, 16), bidirectional=True) == pytest.approx(2400)
    backplane = [
        d["links"]
        for u, v, d in t.graph.edges(data=True)
        if t.graph.nodes[u]["kind"] == "nvswitch" and t.graph.nodes[v]["kind"] == "nvswitch"
    ]
    assert backplane == [8] * 6
    assert t.bisection_bandwidth(bidirectional=True) == pytest.approx(2400)


def test_dgx1_v100_pairs_50_25_0() -> None:
    t = topology.load("DGX-1 (V100)")
    seen = set()
    for a, b in itertools.combinations(range(8), 2):
        bw = t.peer_bandwidth(a, b)
        seen.add(bw)
        if (a, b) in DGX1_V100_DOUBLE:
            assert bw == 50 and t.links_between(a, b) == 2
        elif (a, b) in DGX1_V100_SINGLE:
            assert bw == 25 and t.links_between(a, b) == 1
        else:
            assert bw == 0 and t.links_between(a, b) == 0 and t.relation(a, b) == "SYS"
    assert seen == {0, 25, 50}
    assert t.peer_bandwidth(0, 3, bidirectional=True) == 100
    for g in t.gpus():  # 6 NVLinks per GPU, 300 GB/s bidirectional
        assert sum(t.links_between(g, h) for h in t.gpus() if h != g) == 6
    assert t.route(0, 5)["kind"].startswith("no NVLink")
    assert t.max_flow([0], [5]) > 0  # other GPUs can relay
    assert t.max_flow([0], [5], relay=False) == 0


def test_dgx1_p100_link_map() -> None:
    t = topology.load("DGX-1 (P100)")
    assert t.peer_bandwidth(0, 1, bidirectional=True) == 40
    assert all(sum(t.links_between(g, h) for h in t.gpus() if h != g) == 4 for g in t.gpus())
    assert any("unconfirmed" in n for n in t.notes)


@pytest.mark.parametrize(
    ("name", "per_gpu"), [("DGX A100", 600), ("DGX H100", 900), ("DGX H200", 900), ("DGX B200", 1800), ("DGX B300", 1800)]
)
def test_switched_systems_per_gpu(name: str, per_gpu: float) -> None:
    t = topology.load(name)
    others = [g for g in t.gpus() if g != 0]
    assert t.max_flow([0], others, bidirectional=True, relay=False) == pytest.approx(per_gpu)
    for a, b in [(0, 1), (2, 7), (5, 6)]:
        assert t.peer_bandwidth(a, b, bidirectional=True) == pytest.approx(per_gpu)
    assert t.bisection_bandwidth() == pytest.approx(4 * per_gpu / 2)


def test_dgx_h100_links_5_4_4_5() -> None:
    t = topology.load("DGX H100")
    assert sorted(t.graph["GPU0"][s]["links"] for s in t.nodes("nvswitch")) == [4, 4, 5, 5]


def test_ring_allreduce_model() -> None:
    nbytes = 300e6 * 4  # 300 M FP32 gradients
    t1, a1 = topology.load("DGX-1 (V100)").ring_allreduce_time(nbytes)
    t2, a2 = topology.load("DGX-2").ring_allreduce_time(nbytes)
    tc, ac = topology.load("2x DGX-1 (V100)").ring_allreduce_time(nbytes)
    assert t1 == pytest.approx(2 * 7 / 8 * nbytes / 150e9)
    assert t2 == pytest.approx(2 * 15 / 16 * nbytes / 150e9)
    assert tc == pytest.approx(2 * 15 / 16 * nbytes / 50e9)  # 4 x EDR = 50 GB/s per direction between the boxes
    assert any("50 GB/s" in a for a in ac) and any("bandwidth only" in a for a in a1)
    half, _ = topology.load("DGX-1 (V100)").ring_allreduce_time(nbytes, n_gpus=4)
    assert half == pytest.approx(2 * 3 / 4 * nbytes / 100e9)
    assert topology.load("DGX A100").ring_allreduce_time(nbytes, efficiency=0.8)[0] == pytest.approx(2 * 7 / 8 * nbytes / 240e9)
    assert topology.load("DGX H100").ring_allreduce_time(nbytes, n_gpus=1)[0] == 0
    with pytest.raises(LabkitError, match="n_gpus must be 1 to 8"):
        topology.load("DGX H100").ring_allreduce_time(nbytes, n_gpus=9)
    with pytest.raises(LabkitError, match="non-negative"):
        topology.load("DGX H100").ring_allreduce_time(-1)


def test_cluster() -> None:
    c = topology.load("2x DGX-1 (V100)")
    assert c.gpus() == list(range(16))
    assert c.max_flow(range(8), range(8, 16)) == 0  # no NVLink between boxes
    assert c.max_flow(range(8), range(8, 16), over="all") == pytest.approx(50)
    assert c.bisection_bandwidth() == 0


def test_draw_returns_plotly_figure() -> None:
    import plotly.graph_objects as go

    for name in ("DGX-1 (V100)", "DGX-2", "DGX H100"):
        t = topology.load(name)
        fig = t.draw(highlight=t.route(0, 5)["path"])
        assert isinstance(fig, go.Figure) and "model" in fig.layout.title.text
        assert any(tr.name == "route" for tr in fig.data)
    assert "NVLink per GPU: 150 GB/s per direction" in topology.load("DGX-2").summary()


# ------------------------------------------------------------------------------------------ nvidia-smi topo -m


def test_from_nvidia_smi_dgx1() -> None:
    t = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-dgx1-v100.txt").read_text(), gpu="Tesla V100-SXM2-16GB")
    ref = topology.load("DGX-1 (V100)")
    for a, b in itertools.combinations(range(8), 2):
        assert t.links_between(a, b) == ref.links_between(a, b)
        assert t.peer_bandwidth(a, b) == ref.peer_bandwidth(a, b)
    assert t.relation(0, 5) == "SYS" and t.relation(0, 3) == "NV2" and t.relation(1, 1) == "X"
    assert len(t.nodes("cpu")) == 2 and len(t.nodes("nic")) == 4
    assert t.gpu_model == "V100 SXM2 16GB" and t.origin == "nvidia-smi topo -m"
    t.draw()


def test_from_nvidia_smi_dgx_a100_switched() -> None:
    t = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-dgx-a100.txt").read_text(), gpu="NVIDIA A100-SXM4-80GB")
    assert len(t.gpus()) == 8 and len(t.nodes("nvswitch")) == 1
    assert t.peer_bandwidth(0, 7, bidirectional=True) == pytest.approx(600)
    assert t.relation(0, 7) == "NV12"
    assert len(t.nodes("nic")) == 10 and "mlx5_9" in t.nodes("nic")
    assert len(t.nodes("cpu")) == 4  # four NUMA nodes
    assert "NUMA node 3" in t.graph.nodes["GPU0"]["detail"]


def test_from_nvidia_smi_single_gpu_and_unknown_model() -> None:
    t = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-single-gpu.txt").read_text())
    assert t.gpus() == [0] and t.gpu_model is None
    with pytest.raises(LabkitError, match="one GPU"):
        t.bisection_bandwidth()
    t.draw()
    t8 = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-dgx1-v100.txt").read_text())
    assert t8.links_between(0, 3) == 2
    with pytest.raises(LabkitError, match="does not know the bandwidth"):
        t8.peer_bandwidth(0, 3)


@pytest.mark.parametrize(
    "text", ["", "hello\nworld\n", "\tGPU0\tGPU1\nGPU0\t X \tNV1\n", "\tGPU0\tGPU1\nGPU0\t X \tQQ\nGPU1\tNV1\t X \n"]
)
def test_from_nvidia_smi_rejects_garbage(text: str) -> None:
    with pytest.raises(LabkitError, match="nvidia-smi topo -m"):
        topology.from_nvidia_smi(text)


# ------------------------------------------------------------------------------------------ NVML


def test_from_nvml_needs_gpu_mode() -> None:
    assert labkit.current_mode() == "sim"  # tests/conftest.py sets it
    with pytest.raises(NoGPUError, match="sim mode"):
        topology.from_nvml()


_BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:C1:00.0"]  # NVML's 8-digit-domain spelling


def _nvml_gpus() -> list:
    """Two H100s joined by 4 NVLinks and to an NVSwitch (bus C1) by two more; 18 link slots."""
    from gpu_fakes import NvmlGpu

    def links(other: str) -> list[str]:
        return [other] * 4 + [_BUSES[2]] * 2 + [""] * 12

    return [
        NvmlGpu("NVIDIA H100 80GB HBM3", "GPU-aaaaaaaa-0000-0000-0000-000000000000", _BUSES[0], links(_BUSES[1])),
        NvmlGpu("NVIDIA H100 80GB HBM3", "GPU-bbbbbbbb-0000-0000-0000-000000000000", _BUSES[1], links(_BUSES[0])),
    ]


def _cuda_gpus(order: tuple[int, ...] = (0, 1), uuids: bool = True) -> tuple:
    """The CUDA devices as labkit.device reports them: ``order`` picks NVML devices (CUDA_VISIBLE_DEVICES=1,0 gives (1, 0))."""
    from labkit.device import GPUInfo, normalise_bus_id

    nv = _nvml_gpus()
    return tuple(
        GPUInfo(
            index=i,
            name=nv[k].name,
            compute_capability=(9, 0),
            memory_bytes=80 * 2**30,
            sm_count=132,
            l2_bytes=50 * 2**20,
            pci_bus=int(nv[k].bus_id.split(":")[1], 16),
            uuid=nv[k].uuid if uuids else "",
            pci_bus_id=normalise_bus_id(nv[k].bus_id),
        )
        for i, k in enumerate(order)
    )


def test_from_nvml_with_a_fake_driver() -> None:
    """The fake is pynvml's own functions (autospec) and constants: NVML_P2P_CAPS_INDEX_READ is the real (0,)."""
    from gpu_fakes import FakeNvml

    fake = FakeNvml(_nvml_gpus())
    t = topology._from_nvml_module(fake, gpus=_cuda_gpus())
    assert t.origin == "NVML" and t.gpu_model == "H100 SXM"
    assert t.links_between(0, 1) == 4  # found through nvmlDeviceGetNvLinkRemotePciInfo (the _v2 name does not exist)
    assert t.peer_bandwidth(0, 1) == pytest.approx(4 * 25 + 2 * 25)  # direct links plus the path through the switch
    assert t.p2p[(0, 1)] is True and t.relation(0, 1) == "NV4"  # the tuple constant did not turn into "no P2P"
    assert "nvmlDeviceGetHandleByIndex" not in fake.calls  # matched by UUID, never by index
    t.draw()


def test_from_nvml_matches_cuda_devices_by_uuid_or_bus_id_not_index() -> None:
    """CUDA_VISIBLE_DEVICES=1 shows NVML's GPU 1 as CUDA device 0: its links and name must be NVML device 1's."""
    from gpu_fakes import FakeNvml

    nv = _nvml_gpus()
    nv[1].name = "NVIDIA H100 80GB HBM3"
    nv[1].nvlinks = [""] * 18  # only NVML's GPU 1 has no NVLink
    for uuids in (True, False):  # by UUID, and by PCI bus id when the UUID is not known
        fake = FakeNvml(nv)
        t = topology._from_nvml_module(fake, gpus=_cuda_gpus((1,), uuids=uuids))
        assert t.gpus() == [0] and not t.nodes("nvswitch")
        assert ("nvmlDeviceGetHandleByUUID" if uuids else "nvmlDeviceGetHandleByPciBusId") in fake.calls


def test_from_nvml_without_nvml_says_why() -> None:
    from gpu_fakes import FakeNvml
    from labkit.nvml import NvmlUnavailable

    with pytest.raises(NvmlUnavailable, match="NVML could not start"):
        topology._from_nvml_module(FakeNvml(_nvml_gpus(), init_error=True), gpus=_cuda_gpus())


def test_describe_matches_nvidia_smi_fixture() -> None:
    model = topology.load("DGX-1 (V100)")
    parsed = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-dgx1-v100.txt").read_text(), gpu="V100")
    for a, b in itertools.product(range(8), repeat=2):
        assert model.relation(a, b) == parsed.relation(a, b)
    text = model.describe()
    assert "GPU0        X    NV1    NV1    NV2    NV2    SYS" in text
    assert "NV6" in topology.load("DGX-2").describe()


def test_from_nvml_without_nvml_gives_the_cuda_gpus_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lab 01 calls from_nvml() in gpu mode: without NVML it must still draw the GPUs and say what is missing."""
    import labkit.mode
    from labkit import nvml
    from labkit.nvml import NvmlUnavailable

    class _Env:
        is_gpu, reason, gpus = True, "test", _cuda_gpus()

    monkeypatch.setattr(labkit.mode, "env", lambda: _Env())

    def missing() -> None:
        raise NvmlUnavailable("NVML queries need the package nvidia-ml-py, which is not installed.")

    monkeypatch.setattr(nvml, "load", missing)
    t = topology.from_nvml()
    assert t.gpus() == [0, 1] and t.origin.startswith("CUDA only") and t.gpu_model == "H100 SXM"
    assert "skipped, it needs NVML" in t.summary() and "nvidia-ml-py" in t.summary()
    t.draw()


def test_nvidia_smi_numbering_is_turned_into_cudas() -> None:
    """nvidia-smi numbers GPUs as NVML does (PCI order); a measurement's GPU0 is CUDA's. With CUDA's order reversed
    (CUDA_VISIBLE_DEVICES=7,6,...,0), CUDA GPU0 is nvidia-smi GPU7: its links must be asked for as GPU0."""
    t = topology.from_nvidia_smi((FIX / "nvidia-smi-topo-dgx1-v100.txt").read_text(), gpu="Tesla V100-SXM2-16GB")
    smi_bus = {k: f"00000000:{0x10 + k:02X}:00.0" for k in t.gpus()}
    cuda_bus = [f"0000:{0x10 + k:02x}:00.0" for k in reversed(t.gpus())]  # CUDA's spelling, 4-digit domain
    c = topology.in_cuda_order(t, smi_bus, cuda_bus)
    last = t.gpus()[-1]
    for a in t.gpus():
        for b in t.gpus():
            if a != b:
                assert c.relation(last - a, last - b) == t.relation(a, b)
                assert c.peer_bandwidth(last - a, last - b) == t.peer_bandwidth(a, b)
    assert "nvidia-smi GPU7 is CUDA GPU0" in c.notes[-1]
    same = topology.in_cuda_order(t, smi_bus, [smi_bus[k] for k in t.gpus()])
    assert same.relations == t.relations and "the same" in same.notes[-1]
    hidden = topology.in_cuda_order(t, smi_bus, cuda_bus[:4])  # CUDA sees 4 of the 8: nothing renumbered, and said
    assert hidden.relations == t.relations and "CUDA_VISIBLE_DEVICES" in hidden.notes[-1]


def test_from_nvidia_smi_names_a_mig_slice_by_its_parent() -> None:
    text = (FIX / "nvidia-smi-topo-dgx1-v100.txt").read_text()
    t = topology.from_nvidia_smi(text, gpu="NVIDIA A100-SXM4-80GB MIG 1g.10gb")
    assert t.gpu_model == "A100 SXM4 80GB"


@pytest.mark.parametrize("name", ["DGX B200", "DGX B300"])
def test_hgx_blackwell_two_switch_chips_nine_links_each(name: str) -> None:
    """HGX B200/B300: 2 NVLink 5 switch chips; 18 links per GPU, 9 on each; 8 x 18 = 144 = 2 x 72 ports."""
    t = topology.load(name)
    rec = labkit.hw.system(name)
    sws = t.nodes("nvswitch")
    assert len(sws) == rec.nvswitch_count.value == 2
    for g in t.gpus():
        assert sorted(t.graph[f"GPU{g}"][s]["links"] for s in sws) == [9, 9]
    ports = labkit.hw.link("NVSwitch 4").ports.value
    assert all(sum(d["links"] for _, _, d in t.graph.edges(s, data=True) if d["kind"] == "nvlink") == ports for s in sws)
    assert t.relation(0, 7) == "NV18" and t.peer_bandwidth(0, 7) == 900  # NVLink 5: 18 x 50 GB/s per direction


@pytest.mark.parametrize("name", ["GB200 NVL72", "GB300 NVL72"])
def test_nvl72_one_nvlink_domain_of_72(name: str) -> None:
    """18 switch chips, one link from every GPU to each: any two of the 72 GPUs (in different trays) at 900 GB/s."""
    t = topology.load(name)
    rec = labkit.hw.system(name)
    assert len(t.gpus()) == 72 and len(t.nodes("nvswitch")) == rec.nvswitch_count.value == 18
    assert t.peer_bandwidth(0, 71) == 900 and t.route(0, 71)["kind"] == "NVLink through NVSwitch"
    assert t.ring_allreduce_time(2**30)[0] == pytest.approx(2 * 71 / 72 * 2**30 / 900e9)


def test_every_model_has_its_records_nvswitch_count() -> None:
    """The wiring drawn and the comparison table agree on how many NVSwitch chips a system has."""
    for name in topology.systems():
        rec = labkit.hw.system(name)
        assert rec.nvswitch_count is not None, name
        assert len(topology.load(name).nodes("nvswitch")) == rec.nvswitch_count.value, name


def test_has_nvls_for_every_nvswitch_3_or_later_record() -> None:
    """NVLS (in-switch reduction) from the system's record: every NVSwitch 3+ system, wired model or not."""
    from labkit.dist import collectives as co

    for name in labkit.hw.systems():
        gen = labkit.hw.system(name).nvswitch
        expected = bool(gen) and int(str(gen).split()[-1]) >= 3
        assert co.has_nvls(name) is expected, name
    assert co.has_nvls("DGX B200") and co.has_nvls("GB300 NVL72") and not co.has_nvls("2x DGX H100")
    assert co.nccl_choice("DGX B200", 2**30).algorithm == "NVLS"
    assert co.nccl_choice("GB200 NVL72", 2**30).n == 72


def test_nvl72_trays_hold_four_gpus_each() -> None:
    """18 compute trays (operating-system nodes) of 4 GPUs: the figure lab 08's NVL72 exercise uses."""
    from labkit.check import lab08_nvl72

    for name in ("GB200 NVL72", "GB300 NVL72"):
        s = labkit.hw.system(name)
        assert s.gpu_count.value / s.compute_trays.value == lab08_nvl72.GPUS_PER_TRAY == 4
        assert "compute trays" in s.compute_trays.source
