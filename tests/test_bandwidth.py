"""labkit.bandwidth: busbw maths, host measurements, models, bad input, and the GPU paths driven by a fake CuPy
(no GPU here: the fake checks the control flow — what is queued, what is freed, peer access put back)."""

from __future__ import annotations

import os

import json
import statistics
from typing import Any

import numpy as np
import pytest

from labkit import bandwidth as bw
from labkit.errors import LabkitError, NoGPUError

MiB = 2**20

# ---------------------------------------------------------------------------------------------- collectives maths


@pytest.mark.parametrize(
    "name,n,factor",
    [("all_reduce", 8, 2 * 7 / 8), ("all_reduce", 2, 1.0), ("all_reduce", 1, 0.0), ("all_gather", 8, 7 / 8),
     ("reduce_scatter", 16, 15 / 16), ("alltoall", 4, 3 / 4), ("broadcast", 8, 1.0), ("reduce", 8, 1.0)],
)
def test_busbw_factors_are_nccl_tests(name: str, n: int, factor: float) -> None:
    assert bw.busbw_factor(name, n) == pytest.approx(factor)


def test_busbw_from_algbw_and_aliases() -> None:
    assert bw.algbw(1e9, 0.01) == pytest.approx(100.0)
    assert bw.busbw(1e9, 0.01, "allreduce", 8) == pytest.approx(175.0)
    assert bw.busbw_factor("All-Reduce", 4) == bw.busbw_factor("all_reduce", 4)
    assert bw.busbw_formula("all_gather") == "(n-1)/n"
    assert set(bw.collectives()) == {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"}


@pytest.mark.parametrize("call", [
    lambda: bw.busbw_factor("allreduse", 8),
    lambda: bw.busbw_factor("all_reduce", 0),
    lambda: bw.busbw_factor("all_reduce", 2.5),
    lambda: bw.algbw(1e9, 0),
    lambda: bw.algbw(-1, 1.0),
    lambda: bw.algbw(1e9, float("nan")),
])
def test_collective_bad_input(call: Any) -> None:
    with pytest.raises(LabkitError):
        call()


def test_unknown_collective_suggests() -> None:
    with pytest.raises(LabkitError, match="all_reduce"):
        bw.busbw_factor("allreduse", 8)


# ---------------------------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("text,value", [(4096, 4096), ("4KiB", 4096), ("4 KiB", 4096), ("64M", 64 * MiB), ("1GiB", 2**30),
                                        ("1GB", 10**9), ("512MiB", 512 * MiB), ("8", 8), (2.0**20, MiB)])
def test_parse_size(text: Any, value: int) -> None:
    assert bw.parse_size(text) == value


@pytest.mark.parametrize("bad", [0, -1, "0KiB", "-4KiB", "lots", "1.5B", True, None, [1], 1.5])
def test_parse_size_rejects(bad: Any) -> None:
    with pytest.raises(LabkitError):
        bw.parse_size(bad)


# ---------------------------------------------------------------------------------------------- host memory


def test_host_stream_sane() -> None:
    for kernel, k in (("copy", 2), ("triad", 3)):
        r = bw.host_stream(kernel, "1MiB", samples=3)
        assert r.test == f"host_{kernel}" and r.kind == "measured" and r.direction == bw.STREAM_COUNT
        assert r.bytes == MiB and r.counted_bytes == k * MiB
        assert 0.1 < r.gbps < 5000  # GB/s: any real memory, never zero or absurd
        assert r.gbps == pytest.approx(r.counted_bytes / statistics.median(r.samples) / 1e9)
        assert "host" in r.device and "NumPy" in r.method


def test_triad_computes_triad() -> None:
    run, arrays = bw._host_kernel("triad", 100_000)
    run()
    a, b, c = arrays
    np.testing.assert_allclose(a, b + 3.0 * c)


def test_size_classes() -> None:
    caches = {"L1": 32 * 1024, "L2": MiB, "L3": 32 * MiB}
    assert bw.size_class(16 * 1024, caches) == "L1"
    assert bw.size_class(512 * 1024, caches) == "L2"
    assert bw.size_class(8 * MiB, caches) == "L3"
    assert bw.size_class(48 * MiB, caches) == "L3/DRAM"
    assert bw.size_class(256 * MiB, caches) == "DRAM"
    sizes = bw.default_host_sizes()
    assert sizes[0] == 4096 and 2 * sizes[-1] >= 2 * max(bw.cache_sizes().values())


def test_dram_is_not_faster_than_cache() -> None:
    """Cache-resident copies beat DRAM-sized ones. On a shared, noisy machine: medians, best of the cache classes,
    and up to three retries (keeping the fastest cache figure and the slowest DRAM one) before failing."""
    caches = bw.cache_sizes()
    small = [16 * 1024, 128 * 1024]  # working sets of 32 KiB (L1) and 256 KiB (L2)
    big = max(64 * MiB, 2 * max(caches.values()))  # copy working set >= 4x the last-level cache
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:  # other processes (the browser test's Chromium) preempt a 16 KiB copy more than a 64 MiB one
        pytest.skip(f"the machine is loaded ({load:.1f} on {cores} cores): cache and DRAM copies cannot be compared now")
    cached, dram = 0.0, float("inf")
    for attempt in range(4):  # the fastest cache-sized figure and the slowest DRAM one so far (load slows either)
        cached = max(cached, *(bw.host_stream("copy", s, samples=5).gbps for s in small))
        dram = min(dram, bw.host_stream("copy", big, samples=3).gbps)
        if dram <= cached:
            break
    assert dram <= cached, f"DRAM-sized copy {dram:.1f} GB/s faster than cache-sized {cached:.1f} GB/s"


def test_host_sweep_labels_and_bad_input() -> None:
    recs = bw.host_sweep(["4KiB", "256KiB"], kernels=("copy",), samples=2)
    assert [r.bytes for r in recs] == [4096, 256 * 1024]
    assert all(r.note for r in recs)
    assert set(bw.best_by_class(recs)) <= {"L1", "L2", "L3", "L3/DRAM", "DRAM"}
    with pytest.raises(LabkitError):
        bw.host_sweep([])
    with pytest.raises(LabkitError):
        bw.host_stream("scale")
    with pytest.raises(LabkitError):
        bw.host_stream("copy", 0)
    with pytest.raises(LabkitError, match="host memory"):
        bw.host_stream("copy", "64TiB")
    with pytest.raises(LabkitError):
        bw.host_stream("copy", "4KiB", samples=0)


# ---------------------------------------------------------------------------------------------- models, tables, plots


def test_model_peer_matrix_dgx1() -> None:
    recs = bw.model_peer_matrix("DGX-1 (V100)")
    assert len(recs) == 56 and all(r.kind == "model" and not r.samples for r in recs)
    cell = {(r.src, r.dst): r for r in recs}
    assert cell[("GPU0", "GPU3")].gbps == 50.0  # two NVLink 2 links, per direction
    assert cell[("GPU0", "GPU1")].gbps == 25.0
    assert cell[("GPU0", "GPU5")].gbps == pytest.approx(15.75) and "no NVLink" in cell[("GPU0", "GPU5")].note
    srcs, dsts, m = bw.matrix(recs)
    assert srcs == [f"GPU{i}" for i in range(8)] and m[0][0] is None
    text = bw.format_matrix(recs)
    assert "model" in text and "N/A" in text


def test_sum_convention_doubles_full_duplex_model() -> None:
    per_dir = bw.model_peer_matrix("DGX-2", bidirectional=True)
    sums = bw.sum_convention(per_dir)
    cell = {(r.src, r.dst): r.gbps for r in sums}
    assert cell[("GPU0", "GPU15")] == pytest.approx(300.0)  # DGX-2: any pair 300 GB/s bidirectional
    assert all(r.direction == bw.SUM_BOTH for r in sums)
    with pytest.raises(LabkitError):
        bw.sum_convention([r for r in per_dir if r.src == "GPU0"])


def test_pcie_peak() -> None:
    assert bw.pcie_peak(4, 16) == pytest.approx(31.5)
    assert bw.pcie_peak(5, 16) == pytest.approx(63.0)
    assert bw.pcie_peak(3, 8) == pytest.approx(15.75 / 2)
    for bad in ((9, 16), (4, 3), (0, 16), (4, 0)):
        with pytest.raises(LabkitError):
            bw.pcie_peak(*bad)


def test_peak_table_and_plots() -> None:
    from labkit import topology

    topo = topology.load("DGX-1 (V100)")
    recs = bw.model_peer_matrix("DGX-1 (V100)")
    rows = bw.peak_table(recs, topo)
    assert all(r["percent"] == pytest.approx(100.0) for r in rows)
    assert "link" in bw.format_peak_table(rows)
    fig = bw.heatmap(recs)
    assert "model" in fig.layout.title.text
    host = bw.host_sweep(["4KiB", "64KiB"], kernels=("copy",), samples=2)
    assert len(bw.sweep_figure(host).data) == 1
    with pytest.raises(LabkitError):
        bw.heatmap([])


def test_heatmap_cells_keep_the_figure_unrounded() -> None:
    """Lab 07's model heatmap of a DGX-1 (V100): pairs without NVLink go over PCIe Gen3 at 15.75 GB/s, and the cell
    says 15.75 (not "16"); whole figures stay whole, thousands get a separator."""
    fig = bw.heatmap(bw.model_peer_matrix("DGX-1 (V100)"))
    cells = {t for row in fig.data[0].text for t in row}
    assert "15.75" in cells and "16" not in cells and {"25", "50"} <= cells
    assert "15.75 GB/s" in {t for row in fig.data[0].customdata for t in row}
    assert [bw._cell_text(v) for v in (15.75, 31.5, 300.0, 1519.347, 0.0)] == ["15.75", "31.5", "300", "1,519.35", "0"]


def test_json_round_trip() -> None:
    recs = bw.model_peer_matrix("DGX-1 (V100)")[:3] + [bw.host_stream("copy", "64KiB", samples=2)]
    doc = json.loads(bw.to_json(recs, mode="sim"))
    assert doc["mode"] == "sim" and len(doc["records"]) == 4
    assert {"test", "src", "dst", "bytes", "gbps", "direction", "samples", "method", "device"} <= set(doc["records"][0])


# ---------------------------------------------------------------------------------------------- sim mode: GPU paths say why


@pytest.mark.parametrize("call", [
    lambda: bw.host_to_device(), lambda: bw.device_to_host(0, "4KiB", "pageable"), lambda: bw.device_local_copy(),
    lambda: bw.peer_matrix(), lambda: bw.latency(), lambda: bw.size_sweep(), lambda: bw.can_access_peer(),
    lambda: bw.p2p_status(), lambda: bw.active_nvlinks(), lambda: bw.pcie_link(), lambda: bw.discover(),
    lambda: bw.gpu_check_suite(),
])
def test_gpu_paths_raise_no_gpu_in_sim(call: Any) -> None:
    with pytest.raises(NoGPUError, match="sim mode"):
        call()


def test_cli_sim(capsys: pytest.CaptureFixture[str]) -> None:
    assert bw.cli(["--sizes", "4KiB,64KiB", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "Host memory" in out and "MODEL" in out and "not a measurement" in out
    assert bw.cli(["--json", "--sizes", "4KiB", "--samples", "2", "--system", "DGX-2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "sim" and any(r["kind"] == "model" for r in doc["records"])
    assert bw.cli(["--sizes", "0"]) == 2
    assert "positive" in capsys.readouterr().err
    assert bw.cli(["--system", "DGX-9"]) == 2


# ---------------------------------------------------------------------------------------------- GPU paths with a fake CuPy


from gpu_fakes import FakeCuPy, _FakeCudart, install_bandwidth_fake  # noqa: E402 - the fakes, shared with other tests


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Any:
    def make(**kw: Any) -> FakeCuPy:
        return install_bandwidth_fake(monkeypatch, **kw)

    yield make


def _all_freed(cp: FakeCuPy) -> bool:
    return not cp.runtime.device_mem and not cp.runtime.host_mem


def test_fake_host_to_device_pinned_and_pageable(fake_gpu: Any) -> None:
    cp = fake_gpu()
    r = bw.host_to_device(0, "64MiB")
    rate = 64 * MiB / (2e-6 + 64 * MiB / 50e9) / 1e9
    assert r.gbps == pytest.approx(rate) and r.direction == bw.ONE_WAY and r.src == "CPU" and r.dst == "GPU0"
    assert len(r.samples) == bw.DEFAULT_SAMPLES and "spin kernel" in r.method and r.note == "pinned"
    n_h2d = sum(1 for w, _ in cp.runtime.copies if w == "h2d")
    assert n_h2d == bw.DEFAULT_SAMPLES * (bw.DEFAULT_WARMUP + bw.DEFAULT_COPIES)  # warm-up copies in every sample
    assert bw.DEFAULT_COPIES == 16 and r.cv is not None and "CV" in str(r)
    assert "NUMA node not reported" in r.method  # no bus id here: said, not guessed
    p = bw.device_to_host(1, "1MiB", "pageable")
    assert p.src == "GPU1" and p.dst == "CPU" and "no spin kernel" in p.method
    assert _all_freed(cp)


def test_fake_device_local_copy_counts_bytes_once_and_labels_read_write(fake_gpu: Any) -> None:
    cp = fake_gpu()
    ce = bw.device_local_copy(0, "256MiB", "ce")
    sm = bw.device_local_copy(0, "256MiB", "sm")
    assert ce.counted_bytes == 256 * MiB and ce.direction == bw.COPY_ONCE  # nvbandwidth's convention
    assert ce.gbps == pytest.approx(256 * MiB / (2e-6 + 256 * MiB / 2000e9) / 1e9)
    assert ce.read_write_gbps == pytest.approx(2 * ce.gbps) and "read+write" in str(ce)
    assert sm.gbps > 0 and ("sm", 256 * MiB) in cp.runtime.copies
    assert _all_freed(cp)


def test_fake_peer_matrix_enabled_disabled_and_restored(fake_gpu: Any) -> None:
    cp = fake_gpu(n=3)
    cp.peer_enabled.add((0, 1))  # enabled before: must stay enabled after the 'disabled' run
    on = bw.peer_matrix("32MiB")
    assert len(on) == 6 and all(r.gbps and r.gbps > 50 for r in on)
    off = bw.peer_matrix("32MiB", peer_access=False)
    assert all(r.gbps and r.gbps < 11 for r in off) and "disabled" in off[0].method
    assert cp.peer_enabled == {(0, 1)}  # everything put back as it was
    waits = cp.waits
    bi = bw.peer_matrix("32MiB", bidirectional=True)
    assert len(bi) == 6 and all(r.direction == bw.PER_DIRECTION for r in bi)
    assert cp.waits - waits == 3 * bw.DEFAULT_SAMPLES  # per pair and sample, the second stream waits on the first
    assert len(bw.sum_convention(bi)) == 6
    assert _all_freed(cp)


def test_fake_peer_unsupported_reports_reason(fake_gpu: Any) -> None:
    cp = fake_gpu(n=2, can_peer=False)
    recs = bw.peer_matrix("1MiB")
    assert all(r.gbps is None for r in recs)
    notes = {(r.src, r.dst): r.note for r in recs}
    assert "PCIe topology" in notes[("GPU0", "GPU1")]  # NVML's reason where NVML gives one
    assert "cudaDeviceCanAccessPeer(1, 0) = 0" in notes[("GPU1", "GPU0")]  # CUDA's answer otherwise
    assert "N/A" in bw.format_matrix(recs)
    staged = bw.peer_matrix("1MiB", peer_access=False)  # staging through the host needs no peer access
    assert all(r.gbps for r in staged)
    with pytest.raises(LabkitError, match="cannot access"):
        bw.latency("peer")
    assert _all_freed(cp)


def test_fake_one_gpu_skips_peer(fake_gpu: Any) -> None:
    fake_gpu(n=1)
    with pytest.raises(NoGPUError, match="two GPUs"):
        bw.peer_matrix("1MiB")


def test_fake_latency_and_sweep(fake_gpu: Any) -> None:
    cp = fake_gpu()
    lat = bw.latency("host_to_device")
    assert lat.latency_us == pytest.approx(2.0, rel=0.01)
    sweep = bw.size_sweep("host_to_device", ["1KiB", "1MiB", "256MiB"])
    rates = [r.gbps for r in sweep]
    assert rates == sorted(rates) and rates[0] < 1 and rates[-1] > 45  # latency-bound, then bandwidth-bound
    d2d = bw.size_sweep("device_local_copy", ["4KiB", "64MiB"])
    assert all(r.counted_bytes == r.bytes and r.read_write_gbps == pytest.approx(2 * r.gbps) for r in d2d)
    peer = bw.size_sweep("peer", ["4KiB", "64MiB"])
    assert peer[-1].test == "peer_unidirectional"
    assert cp.peer_enabled == set()
    assert _all_freed(cp)


@pytest.mark.parametrize("call,match", [
    (lambda: bw.host_to_device(2), "does not exist"),
    (lambda: bw.host_to_device(-1), "does not exist"),
    (lambda: bw.device_local_copy(0, "60GiB"), "free"),
    (lambda: bw.host_to_device(0, 0), "positive"),
    (lambda: bw.host_to_device(0, "-1MiB"), "positive"),
    (lambda: bw.host_to_device(0, "1MiB", "locked"), "pinned"),
    (lambda: bw.device_local_copy(0, "1MiB", "dma"), "copy engine"),
    (lambda: bw.peer_matrix("1MiB", method="sm", peer_access=False), "peer access"),
    (lambda: bw.latency("peer", device=0, peer=0), "two different"),
    (lambda: bw.latency("peer", peer=5), "does not exist"),
    (lambda: bw.host_to_device(0, "1MiB", copies=0), "copies"),
    (lambda: bw.size_sweep("peer", peer=0), "two different"),
])
def test_fake_bad_input_leaves_nothing_allocated(fake_gpu: Any, call: Any, match: str) -> None:
    cp = fake_gpu(free=40 * 2**30)
    with pytest.raises(LabkitError, match=match):
        call()
    assert _all_freed(cp) and cp.peer_enabled == set()


def test_fake_allocation_failure_frees_what_was_allocated(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = fake_gpu()
    calls = {"n": 0}
    real = cp.runtime.malloc

    def flaky(n: int) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise MemoryError("cudaErrorMemoryAllocation")
        return real(n)

    monkeypatch.setattr(cp.runtime, "malloc", flaky)
    with pytest.raises(LabkitError, match="could not allocate"):
        bw.device_local_copy(0, "1MiB")
    assert _all_freed(cp)


def test_fake_cli_gpu(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake_gpu(n=2)

    class _Env:
        is_gpu, gpu_count, device_name, mode, gpus = True, 2, "Fake H200", "gpu", ()

    monkeypatch.setattr(bw, "env", lambda: _Env())
    assert bw.cli(["--size", "8MiB", "--samples", "1", "--sizes", "4KiB,1MiB"]) == 0
    out = capsys.readouterr().out
    assert "CPU(row) -> GPU(column)" in out and "bidirectional" in out and "µs per copy" in out


# ---------------------------------------------------------------------------------------------- NUMA, NVML, gpu-check


def test_numa_placement_from_sysfs(tmp_path: Any) -> None:
    dev = tmp_path / "0000:19:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    (dev / "local_cpulist").write_text("0-3,8,10-11\n")
    assert bw.numa_placement("0000:19:00.0", tmp_path) == (1, {0, 1, 2, 3, 8, 10, 11})
    (dev / "numa_node").write_text("-1\n")  # what a one-node machine (or a VM) reports
    assert bw.numa_placement("0000:19:00.0", tmp_path) == (None, set())
    assert bw.numa_placement("0000:aa:00.0", tmp_path) == (None, set())


def test_numa_local_binds_this_thread_and_restores(tmp_path: Any) -> None:
    import os

    before = os.sched_getaffinity(0)
    cpu = min(before)
    dev = tmp_path / "0000:19:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("0\n")
    (dev / "local_cpulist").write_text(f"{cpu}\n")
    near = bw._NumaLocal("0000:19:00.0", tmp_path)
    with near:
        assert os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == before
    assert "NUMA node 0" in near.note and "0000:19:00.0" in near.note


def _nvml_and_gpus(p2p_ok: bool = True) -> tuple[Any, tuple]:
    from gpu_fakes import FakeNvml, NvmlGpu
    from labkit.device import GPUInfo, normalise_bus_id

    nv = [NvmlGpu("NVIDIA H100 80GB HBM3", f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-0000-0000-000000000000",
                  f"00000000:{0x18 + i:02X}:00.0", [f"00000000:{0x19 - i:02X}:00.0"] * (2 + i) + [""], pcie=(5, 16 - 8 * i))
          for i in range(2)]
    cuda_order = (1, 0)  # CUDA_VISIBLE_DEVICES=1,0
    gpus = tuple(GPUInfo(index=c, name=nv[k].name, compute_capability=(9, 0), memory_bytes=1, sm_count=132, l2_bytes=1,
                         pci_bus=0, uuid=nv[k].uuid, pci_bus_id=normalise_bus_id(nv[k].bus_id))
                 for c, k in enumerate(cuda_order))
    return FakeNvml(nv, p2p_ok=p2p_ok), gpus


def test_nvml_queries_follow_cuda_order_and_the_real_read_constant() -> None:
    nvml, gpus = _nvml_and_gpus()
    assert bw._active_nvlinks_module(nvml, gpus) == {0: 3, 1: 2}  # CUDA 0 is NVML 1 (3 links)
    assert bw._pcie_link_module(nvml, gpus[0])["max"] == (5, 8)  # NVML 1's link, not NVML 0's
    status = bw._p2p_status_module(nvml, gpus)
    assert status[(0, 1)]["READ"] == "OK"  # the (0,) tuple unpacked, not an ArgumentError
    nvml, gpus = _nvml_and_gpus(p2p_ok=False)
    assert "not supported" in bw._p2p_status_module(nvml, gpus)[(1, 0)]["WRITE"]
    assert "nvmlDeviceGetHandleByIndex" not in nvml.calls


def test_gpu_check_suite_keeps_measurements_without_nvml(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect: a missing NVML failed the suite after the copies were measured, losing them."""
    from labkit.nvml import NvmlUnavailable

    fake_gpu()
    monkeypatch.setattr(bw, "_best_library_copy", lambda cp, n, s: [("cupy b[...] = a", 2000.0)])

    def no_nvml(device: int = 0) -> Any:
        raise NvmlUnavailable("NVML could not start (NVMLError_LibraryNotFound: NVML Shared Library Not Found).")

    monkeypatch.setattr(bw, "pcie_link", no_nvml)
    rows = {r["name"]: r for r in bw.gpu_check_suite("16MiB")}
    assert rows["bandwidth.d2d-vs-best-library"]["value"] > 0 and rows["bandwidth.d2d-repeatability"]["passed"] is not None
    h2d = rows["bandwidth.h2d-pinned-vs-pcie"]
    assert h2d["passed"] is None and h2d["details"]["h2d_gbps"] > 0
    assert "skipped, it needs NVML" in h2d["error"]


def test_discover_skips_each_nvml_section_with_a_reason(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import topology
    from labkit.nvml import NvmlUnavailable

    fake_gpu()

    def fail(*a: Any, **k: Any) -> Any:
        raise NvmlUnavailable("NVML queries need the package nvidia-ml-py, which is not installed.")

    for name in ("active_nvlinks", "p2p_status", "pcie_link"):
        monkeypatch.setattr(bw, name, fail)
    monkeypatch.setattr(topology, "from_nvml", fail)
    monkeypatch.setattr(bw, "nvidia_smi_topo", lambda: None)

    class _Env:
        is_gpu, gpu_count, device_name, mode, gpus = True, 1, "Fake H200", "gpu", ()

    monkeypatch.setattr(bw, "env", lambda: _Env())
    out = bw.discover()
    assert set(out["skipped"]) == {"nvml", "active_nvlinks", "p2p", "pcie"}
    assert all("needs NVML" in why and "nvidia-ml-py" in why for why in out["skipped"].values())


def test_pcie_link_from_sysfs_when_nvml_is_missing(tmp_path: Any) -> None:
    dev = tmp_path / "0000:19:00.0"
    dev.mkdir()
    for kind, speed, width in (("max", "32.0 GT/s PCIe", "16"), ("current", "2.5 GT/s PCIe", "16")):
        (dev / f"{kind}_link_speed").write_text(speed + "\n")
        (dev / f"{kind}_link_width").write_text(width + "\n")
    link = bw.pcie_from_sysfs("0000:19:00.0", tmp_path)
    assert link["max"] == (5, 16) and link["current"] == (1, 16)  # an idle GPU saves power on a slower link
    assert link["peak_gbps"] == bw.pcie_peak(5, 16) and "sysfs" in link["source"]
    assert bw.pcie_from_sysfs("0000:aa:00.0", tmp_path) is None


# ---------------------------------------------------------------------------------------------- lazy loading
def test_every_kernel_behind_the_spin_kernel_is_loaded_before_the_hold(fake_gpu: Any) -> None:
    """With lazy loading a first load waits for the device to go idle; behind a held stream that never happens.
    The fake fails such a load (gpu_fakes.LazyLoading): the SM copy and the spin kernel itself load unheld."""
    cp = fake_gpu()
    r = bw.device_local_copy(0, "64MiB", "sm")
    assert r.gbps and "spin kernel" in r.method
    assert ("labkit_sm_copy", False) in cp.lazy.loads and ("labkit_spin", False) in cp.lazy.loads
    assert not any(held for _, held in cp.lazy.loads)
    assert cp.lazy.holds  # the copies were held, so the test would have caught a load behind the hold
    assert _all_freed(cp)


def test_the_lazy_loading_fake_fails_a_first_load_behind_a_hold(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake is not vacuous: without the preload, the SM copy's first launch comes behind the hold and fails."""
    from gpu_fakes import LazyLoadDeadlock

    from labkit import spin

    cp = fake_gpu()
    monkeypatch.setattr(spin, "load", lambda cp_, kernel, device: None if kernel.name != "labkit_spin" else kernel.attributes)
    with pytest.raises(LazyLoadDeadlock, match="labkit_sm_copy is first loaded while a spin kernel holds"):
        bw.device_local_copy(0, "64MiB", "sm")
    assert ("labkit_sm_copy", True) in cp.lazy.loads


# ---------------------------------------------------------------------------------------------- issue 24's smaller items
def test_small_sweep_sizes_and_latency_stay_behind_the_spin_kernel(fake_gpu: Any) -> None:
    """The defect: a 1 KiB sweep step queued 128 copies + 2 warm-ups, more than a hold allows, so it ran unheld and
    said "the call blocks the host". Every step now fits behind the hold, and says so."""
    cp = fake_gpu()
    holds = len(cp.lazy.holds)
    sweep = bw.size_sweep("host_to_device", ["1KiB", "4KiB", "64MiB"], samples=2)
    assert all("queued behind a spin kernel" in r.method for r in sweep)
    assert len(cp.lazy.holds) - holds == 3 * 2  # one hold per sample of every size
    per_sample = {}
    for what, n in cp.runtime.copies:
        per_sample[n] = per_sample.get(n, 0) + 1
    assert per_sample[1024] // 2 <= bw._SPIN_LIMIT  # warm-up and timed copies of a sample, all behind one hold
    lat = bw.latency("host_to_device", copies=1000)
    assert "queued behind a spin kernel" in lat.method
    assert "blocks the host" not in lat.method


def test_a_run_too_long_to_hold_says_why_not_that_the_call_blocks(fake_gpu: Any) -> None:
    fake_gpu()
    r = bw.host_to_device(0, "1MiB", copies=200)
    assert "no spin kernel (204 operations per sample, more than the 128" in r.method
    assert "blocks the host" not in r.method
    assert "blocks the host" in bw.host_to_device(0, "1MiB", "pageable").method  # that one really does


def test_host_memory_guard_lets_the_default_size_try_on_a_vm_that_grows(fake_gpu: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A VM can show little MemAvailable and grow on demand: up to nvbandwidth's 512 MiB the allocation itself
    decides (and says "could not pin" when it fails); beyond it, the guard still refuses before allocating."""
    cp = fake_gpu()
    monkeypatch.setattr(bw, "host_available_bytes", lambda: 40 * MiB)
    assert bw.host_to_device(0, "64MiB").gbps  # 64 MiB > half of 40 MiB: refused before the fix
    with pytest.raises(LabkitError, match="host memory"):
        bw.host_to_device(0, "1GiB")
    assert not cp.runtime.host_mem  # refused before anything was pinned


def test_set_peer_access_checks_cuda_set_device(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.gpuerrors import GpuError

    cp = fake_gpu(n=2)

    class _NoSwitch(_FakeCudart):
        def cudaSetDevice(self, d: int) -> tuple[int]:
            return (101,)  # cudaErrorInvalidDevice: the current device did not change

    monkeypatch.setattr(bw, "_cudart", lambda: _NoSwitch(cp))
    cp.runtime.current = 0
    with pytest.raises(GpuError, match="could not make GPU1 current"):
        bw._set_peer_access(cp, 1, 0, True)
    assert cp.peer_enabled == set()  # nothing enabled for the wrong GPU (GPU0 -> GPU0)
    assert cp.runtime.current == 0


def test_peer_access_docstring_matches_cupy_14() -> None:
    cupy = pytest.importorskip("cupy")
    doc = bw._set_peer_access.__doc__ or ""
    assert "no call to disable" not in doc
    assert hasattr(cupy.cuda.runtime, "deviceDisablePeerAccess") and "deviceDisablePeerAccess" in doc


def test_h2d_above_the_reported_pcie_link_is_flagged_not_judged(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake copies host->device at 50 GB/s; a reported Gen3 x16 link carries 15.75: the link is wrong."""
    fake_gpu()
    monkeypatch.setattr(bw, "_best_library_copy", lambda cp, n, s: [("cupy b[...] = a", 2000.0)])
    monkeypatch.setattr(bw, "pcie_link", lambda device=0: {"current": (3, 16), "max": (3, 16), "peak_gbps": bw.pcie_peak(3, 16),
                                                           "source": "NVML; x16 figures from labkit.hw"})
    h2d = {r["name"]: r for r in bw.gpu_check_suite("16MiB")}["bandwidth.h2d-pinned-vs-pcie"]
    assert h2d["value"] > 100 and h2d["passed"] is None and h2d["implausible"] is True
    assert "above the 15.8 GB/s a PCIe Gen3 x16 link can carry" in h2d["error"] and "VM" in h2d["error"]
    monkeypatch.setattr(bw, "pcie_link", lambda device=0: {"current": (5, 16), "max": (5, 16), "peak_gbps": bw.pcie_peak(5, 16),
                                                           "source": "NVML"})
    h2d = {r["name"]: r for r in bw.gpu_check_suite("16MiB")}["bandwidth.h2d-pinned-vs-pcie"]
    assert 75 < h2d["value"] < 100 and "implausible" not in h2d and h2d["passed"] is (h2d["value"] >= 80)


class _MigEnv:
    """A 1g.10gb slice of an H100 SXM as labkit.mode.env() describes it."""

    mode, is_gpu, device_name, mig = "gpu", True, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"
    sm_count, memory_bytes, compute_capability, gpu_count, gpus = 16, 10 * 10**9, (9, 0), 1, ()


def test_peak_table_scales_a_mig_slices_memory_bandwidth(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import bench, hw

    monkeypatch.setattr(bench, "env", lambda: _MigEnv())
    rec = bw.Record("device_local_copy", "GPU0", "GPU0", MiB, 300.0, bw.COPY_ONCE, (1e-3,), "ce", _MigEnv.device_name)
    (row,) = bw.peak_table([rec])
    whole = hw.gpu("H100 SXM").memory_bandwidth.value
    assert row["peak"] == pytest.approx(whole * 10e9 / 80e9) and "MIG slice" in row["link"]
    other = bw.Record("device_local_copy", "GPU0", "GPU0", MiB, 300.0, bw.COPY_ONCE, (1e-3,), "ce", "NVIDIA H200")
    assert bw.peak_table([other])[0]["peak"] == hw.gpu("H200").memory_bandwidth.value  # another device: unscaled


def test_every_pcie_link_call_in_the_notebooks_is_guarded() -> None:
    """pcie_link raises NvmlUnavailable where neither NVML nor sysfs answers (a container): a notebook that calls
    it must catch labkit.LabkitError, or the whole notebook fails on such a GPU machine."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "notebooks" / "src"
    calls = 0
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        guarded: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any("LabkitError" in ast.unparse(h.type or ast.Name("")) for h in node.handlers):
                guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pcie_link":
                calls += 1
                assert id(node) in guarded, f"{path.name}:{node.lineno}: pcie_link() outside a try/except LabkitError"
    assert calls >= 1


def test_smi_bus_ids_parse() -> None:
    assert bw.parse_smi_bus_ids("0, 00000000:19:00.0\n1, 00000000:3B:00.0\n") == {0: "00000000:19:00.0", 1: "00000000:3B:00.0"}
    assert bw.parse_smi_bus_ids("No devices were found") is None


def test_discover_numbers_the_nvidia_smi_topology_as_cuda_does(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from labkit import topology
    from labkit.device import GPUInfo
    from labkit.nvml import NvmlUnavailable

    fake_gpu()
    text = (Path(__file__).parent / "fixtures" / "nvidia-smi-topo-dgx1-v100.txt").read_text()

    def fail(*a: Any, **k: Any) -> Any:
        raise NvmlUnavailable("no NVML here")

    for name in ("active_nvlinks", "p2p_status", "pcie_link"):
        monkeypatch.setattr(bw, name, fail)
    monkeypatch.setattr(topology, "from_nvml", fail)
    monkeypatch.setattr(bw, "nvidia_smi_topo", lambda: text)
    monkeypatch.setattr(bw, "nvidia_smi_bus_ids", lambda: {k: f"00000000:{0x10 + k:02X}:00.0" for k in range(8)})
    gpus = tuple(GPUInfo(index=c, name="Tesla V100-SXM2-16GB", compute_capability=(7, 0), memory_bytes=1, sm_count=80,
                         l2_bytes=1, pci_bus=0, uuid="", pci_bus_id=f"0000:{0x10 + 7 - c:02x}:00.0") for c in range(8))

    class _Env:
        is_gpu, gpu_count, device_name, mode = True, 8, "Tesla V100-SXM2-16GB", "gpu"

    _Env.gpus = gpus
    monkeypatch.setattr(bw, "env", lambda: _Env())
    smi = bw.discover()["nvidia_smi"]
    raw = topology.from_nvidia_smi(text, gpu="Tesla V100-SXM2-16GB")
    assert smi.relation(0, 1) == raw.relation(7, 6) and "nvidia-smi GPU7 is CUDA GPU0" in smi.notes[-1]
    monkeypatch.setattr(bw, "nvidia_smi_bus_ids", lambda: None)
    smi = bw.discover()["nvidia_smi"]
    assert smi.relation(0, 1) == raw.relation(0, 1) and "need not be CUDA's" in smi.notes[-1]
