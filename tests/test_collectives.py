"""labkit.collectives: the simulated ring all-reduce is exact and counts its bytes; the models are sane; figures build."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labkit import bandwidth as bw
from labkit import collectives as co
from labkit import hw
from labkit.errors import LabkitError, NoGPUError

# ---------------------------------------------------------------------------------------------- ring simulation


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 16])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 16, 100, 1001])
def test_ring_allreduce_is_exact(n: int, size: int) -> None:
    rng = np.random.default_rng(n * 1000 + size)
    arrays = [rng.integers(-1000, 1000, size).astype(np.float64) for _ in range(n)]
    keep = [a.copy() for a in arrays]
    r = co.ring_allreduce(arrays)
    want = np.sum(np.stack(arrays), axis=0)
    assert all(np.array_equal(o, want) for o in r.outputs)
    assert r.correct()
    assert all(np.array_equal(a, k) for a, k in zip(arrays, keep)), "inputs must not be modified"
    assert len(r.steps) == 2 * (n - 1)
    assert all(len(s.transfers) == (n if n > 1 else 0) for s in r.steps)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_bytes_equal_busbw_factor_times_size(n: int, dtype: type) -> None:
    size = 24 * n  # divisible: every GPU sends exactly 2(n-1)/n x the buffer
    r = co.ring_allreduce([np.ones(size, dtype) for _ in range(n)])
    want = bw.busbw_factor("all_reduce", n) * size * np.dtype(dtype).itemsize
    assert r.bytes_sent_per_gpu() == [pytest.approx(want)] * n
    assert r.bytes_received_per_gpu() == [pytest.approx(want)] * n
    assert r.expected_bytes_per_gpu() == pytest.approx(want)
    assert r.total_bytes() == pytest.approx(2 * (n - 1) * size * np.dtype(dtype).itemsize)


@pytest.mark.parametrize("n,size", [(3, 10), (5, 1003), (8, 21), (8, 3)])
def test_bytes_mean_matches_when_not_divisible(n: int, size: int) -> None:
    r = co.ring_allreduce([np.ones(size) for _ in range(n)])
    sent = r.bytes_sent_per_gpu()
    assert sum(sent) / n == pytest.approx(r.expected_bytes_per_gpu())
    assert max(sent) - min(sent) <= 2 * 8  # chunks differ by at most one element, sent twice


def test_schedule_and_contributions() -> None:
    assert co.ring_schedule(4, co.RS, 0) == [(0, 1, 0), (1, 2, 1), (2, 3, 2), (3, 0, 3)]
    assert co.ring_schedule(4, co.AG, 0) == [(0, 1, 1), (1, 2, 2), (2, 3, 3), (3, 0, 0)]
    r = co.ring_allreduce([np.ones(8) for _ in range(4)])
    after_rs = r.steps[2].contributions
    for g in range(4):
        assert after_rs[g, (g + 1) % 4] == 4  # GPU g completes chunk g + 1
    assert (r.steps[-1].contributions == 4).all()


def test_custom_step_and_chunks() -> None:
    assert co.chunk_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert co.chunk_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    calls = []

    def step(chunks, phase, s):  # noqa: ANN001
        calls.append((phase, s))
        co.ring_step(chunks, phase, s)

    r = co.ring_allreduce([np.arange(9.0) for _ in range(3)], step_fn=step)
    assert calls == [(co.RS, 0), (co.RS, 1), (co.AG, 0), (co.AG, 1)]
    assert r.correct() and "SIMULATED" in r.describe()


def test_ring_input_validation() -> None:
    with pytest.raises(LabkitError):
        co.ring_allreduce([])
    with pytest.raises(LabkitError):
        co.ring_allreduce([np.ones(3), np.ones(4)])
    with pytest.raises(LabkitError):
        co.ring_allreduce([np.ones((2, 2))])
    with pytest.raises(LabkitError):
        co.ring_schedule(4, "gather", 0)
    with pytest.raises(LabkitError):
        co.ring_schedule(4, co.RS, 3)


# ---------------------------------------------------------------------------------------------- models


def test_ring_cost_formula() -> None:
    m = co.ring_cost(1.2e9, 8, 150.0, alpha_us=5.0)
    assert m.bandwidth_s == pytest.approx(1.75 * 1.2e9 / 150e9)
    assert m.latency_s == pytest.approx(14 * 5e-6)
    assert m.busbw == pytest.approx(m.algbw * 1.75)
    assert "MODEL" in m.assumptions[0] and "[model]" in str(m)
    assert co.ring_cost(1e9, 1, 100.0).seconds == 0


def test_tree_cost_and_crossover() -> None:
    for n in (2, 3, 8, 16, 64):
        t, r = co.tree_cost(1e9, n, 100.0), co.ring_cost(1e9, n, 100.0)
        assert t.steps == 2 * co.tree_depth(n)
        assert t.bandwidth_s >= r.bandwidth_s  # the pipelined tree sends a little more
        plain = co.tree_cost(1e9, n, 100.0, pipelined=False).seconds
        assert plain > t.seconds if n > 2 else plain == pytest.approx(t.seconds)  # two GPUs: nothing to pipeline
    n, B = 8, 300.0
    x = co.crossover_bytes(n, B)
    assert x > 0
    assert co.tree_cost(x / 2, n, B).seconds < co.ring_cost(x / 2, n, B).seconds
    assert co.tree_cost(x * 2, n, B).seconds > co.ring_cost(x * 2, n, B).seconds
    assert co.tree_cost(x, n, B).seconds == pytest.approx(co.ring_cost(x, n, B).seconds)
    assert co.crossover_bytes(2, B) == 0.0 and co.crossover_bytes(3, B) > 0


@pytest.mark.parametrize("fn", [co.ring_cost, co.tree_cost])
def test_costs_monotone(fn) -> None:  # noqa: ANN001
    sizes = [2.0**k for k in range(10, 32, 3)]
    times = [fn(s, 8, 100.0).seconds for s in sizes]
    assert times == sorted(times)
    assert fn(1e9, 8, 200.0).seconds < fn(1e9, 8, 100.0).seconds
    assert fn(1e9, 8, 100.0, alpha_us=10).seconds > fn(1e9, 8, 100.0, alpha_us=1).seconds


def test_model_validation() -> None:
    for bad in ((-1, 8, 100.0), (1e9, 0, 100.0), (1e9, 8, 0.0), (1e9, 8, float("nan")), (1e9, 2.5, 100.0)):
        with pytest.raises(LabkitError):
            co.ring_cost(*bad)
    with pytest.raises(LabkitError):
        co.allreduce_time("DGX A100", 1e9, algorithm="butterfly")
    with pytest.raises(LabkitError):
        co.ring_bandwidth("DGX A100", 9)
    with pytest.raises(LabkitError):
        co.step_time(0.1, 0.01, overlap=1.5)


def test_ring_bandwidth_from_wiring() -> None:
    for name in ("DGX-2", "DGX A100", "DGX H100"):
        per_dir = hw.system(name).gpu_model.nvlink_bandwidth.value / 2
        assert co.ring_bandwidth(name) == pytest.approx(per_dir)
    assert co.ring_bandwidth("DGX-1 (V100)") == pytest.approx(150.0)
    assert co.ring_bandwidth("DGX-1 (V100)", 2) == pytest.approx(25.0)  # GPUs 0 and 1 share one NVLink
    t = co.allreduce_time("DGX H100", 1.2e9, alpha_us=0)
    assert t.seconds == pytest.approx(1.75 * 1.2e9 / 450e9)
    assert co.allreduce_time("DGX H100", 1.2e9, efficiency=0.8).seconds > co.allreduce_time("DGX H100", 1.2e9).seconds


def test_step_time_overlap() -> None:
    assert co.step_time(0.1, 0.02) == (pytest.approx(0.12), 0.0)
    assert co.step_time(0.1, 0.02, overlap=0.5) == (pytest.approx(0.1), pytest.approx(0.02))
    assert co.step_time(0.1, 0.08, overlap=0.5) == (pytest.approx(0.13), pytest.approx(0.05))


@pytest.mark.parametrize("system", list(co.SYSTEMS) + ["2x DGX-1 (V100)"])
def test_scaling_sane(system: str) -> None:
    m = co.scaling(system)
    assert m.points[0].n == 1 and m.points[0].speedup == pytest.approx(1.0)
    for p in m.points:
        assert 0 < p.efficiency <= 1 + 1e-12
        assert p.speedup <= p.n + 1e-9
        assert p.step_s == pytest.approx(p.compute_s + p.allreduce_s - p.hidden_s)
    hid = co.scaling(system, overlap=0.5)
    assert all(h.efficiency >= p.efficiency for h, p in zip(hid.points, m.points))
    assert any("MODEL" in a for a in m.assumptions) and "MODEL" in m.table()


def test_scaling_faster_gpu_lower_efficiency() -> None:
    eff = {s: co.scaling(s).point(8).efficiency for s in ("DGX A100", "DGX H100")}
    assert eff["DGX H100"] < eff["DGX A100"]  # compute shrinks more than the all-reduce does
    assert co.scaling("DGX-2").point(16).efficiency > co.scaling("2x DGX-1 (V100)").point(16).efficiency
    given = co.scaling("DGX A100", compute_s=0.05, gpu_counts=[1, 2, 4, 8])
    assert [p.n for p in given.points] == [1, 2, 4, 8] and given.points[0].compute_s == 0.05
    with pytest.raises(LabkitError):
        given.point(3)


def test_compute_time_from_peak() -> None:
    seconds, notes = co.compute_time(300e6, "H100", items_per_gpu=1000, precision="bf16", utilisation=0.5)
    assert seconds == pytest.approx(6 * 300e6 * 1000 / (hw.gpu("H100").peak("bf16").value * 1e12 * 0.5))
    assert any("assumed" in n for n in notes)


def test_mig_and_mps() -> None:
    m = co.mig_summary()
    s = hw.system("DGX A100")
    assert m["instances_per_gpu"] == s.mig_instances.value / s.gpu_count.value == 7
    assert m["smallest_instance_memory_gb"] == s.gpu_model.memory_size.value / co.MIG_MEMORY_SLICES
    with pytest.raises(LabkitError):
        co.mig_summary("DGX-1 (V100)")
    share = co.sharing_model([0.25, 0.25])
    assert share["time_sliced"] == 0.25 and share["mps"] == 0.5 and share["gain"] == 2
    assert co.sharing_model([0.9, 0.9])["mps"] == 1.0
    with pytest.raises(LabkitError):
        co.sharing_model([1.5])


# ---------------------------------------------------------------------------------------------- figures, gpu path


def test_figures_build_headless() -> None:
    r = co.ring_allreduce([np.ones(10) for _ in range(4)])
    fig = co.ring_figure(r)
    assert len(fig.frames) == 1 + len(r.steps)
    assert "SIMULATED" in fig.layout.title.text
    f2 = co.scaling_figure([co.scaling("DGX A100"), co.scaling("DGX H100")])
    assert len(f2.data) == 3 and "MODEL" in f2.layout.title.text
    assert len(co.scaling_figure(co.scaling("DGX-2"), metric="speedup").data) == 2
    f3 = co.cost_figure(8, 300.0)
    assert len(f3.data) == 2 and "MODEL" in f3.layout.title.text
    for f in (fig, f2, f3):
        json.loads(f.to_json())
    with pytest.raises(LabkitError):
        co.scaling_figure(co.scaling("DGX-2"), metric="latency")


def test_measure_needs_gpus_in_sim() -> None:
    ok, why = co.nccl_status()
    assert not ok and "sim mode" in why
    with pytest.raises(NoGPUError):
        co.measure_allreduce(2**20)


# ---------------------------------------------------------------------------------------------- measured path, fake CuPy


class _Buf:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.ptr = id(self)


class _FakeArray:
    registry: dict[int, "_FakeArray"] = {}

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.data = _Buf(a)
        _FakeArray.registry[self.data.ptr] = self

    def __eq__(self, value: object) -> np.ndarray:  # type: ignore[override]
        return self.a == value

    __hash__ = None  # type: ignore[assignment]


def _fake_modules(n_gpus: int, broken_rank: int | None = None):  # noqa: ANN202
    import types

    calls = {"groups": 0, "allreduce": 0, "destroyed": 0, "synced": 0}
    nccl = types.SimpleNamespace(NCCL_FLOAT32=7, NCCL_SUM=0, available=True)
    pending: list = []

    class Comm:
        def __init__(self, rank: int) -> None:
            self.rank = rank

        @staticmethod
        def initAll(devs):  # noqa: ANN001, ANN205
            return [Comm(r) for r in range(len(devs))]

        def allReduce(self, send, recv, count, dtype, op, stream):  # noqa: ANN001, ANN201
            assert dtype == nccl.NCCL_FLOAT32 and op == nccl.NCCL_SUM and isinstance(stream, int)
            # the buffers were filled on the default streams: every GPU must be synchronised before NCCL reads them
            assert calls["synced"] >= n_gpus, "all-reduce queued on a non-blocking stream before the fills finished"
            calls["allreduce"] += 1
            pending.append((self.rank, send, recv, count))

        def destroy(self) -> None:
            calls["destroyed"] += 1

    def group_start() -> None:
        pending.clear()

    def group_end() -> None:
        calls["groups"] += 1
        assert len(pending) == n_gpus, "one allReduce per rank inside each group"
        total = sum(_FakeArray.registry[s].a[: c] for _, s, _, c in pending)
        for rank, _, r, c in pending:
            _FakeArray.registry[r].a[:c] = total + (1 if rank == broken_rank else 0)

    nccl.NcclCommunicator = Comm
    nccl.groupStart, nccl.groupEnd = group_start, group_end

    class Ctx:
        def __init__(self, d: int) -> None:
            pass

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *a):  # noqa: ANN002, ANN204
            return False

        def synchronize(self) -> None:
            calls["synced"] += 1

    class Event:
        def record(self, stream=None) -> None:  # noqa: ANN001
            self.t = calls["groups"]

        def synchronize(self) -> None:
            pass

    class Stream:
        def __init__(self, non_blocking: bool = False) -> None:
            self.ptr = id(self)

    runtime = types.SimpleNamespace(getDeviceCount=lambda: n_gpus, getDeviceProperties=lambda d: {"name": b"Fake H200"})
    cuda = types.SimpleNamespace(Device=Ctx, Event=Event, Stream=Stream, runtime=runtime, nccl=nccl,
                                 get_elapsed_time=lambda a, b: 0.5 * (b.t - a.t))  # 0.5 ms per all-reduce

    class Scalar:
        def __init__(self, v: bool) -> None:
            self.v = v

        def get(self) -> bool:
            return self.v

    cp = types.SimpleNamespace(cuda=cuda, float32=np.float32,
                               full=lambda n, v, dtype: _FakeArray(np.full(n, v, dtype)),
                               zeros=lambda n, dtype: _FakeArray(np.zeros(n, dtype)),
                               all=lambda x: Scalar(bool(np.all(x))))
    return cp, nccl, calls


@pytest.mark.parametrize("broken", [None, 1])
def test_measure_allreduce_with_fake_nccl(monkeypatch: pytest.MonkeyPatch, broken: int | None) -> None:
    import sys

    cp, nccl, calls = _fake_modules(4, broken)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    monkeypatch.setattr(co, "nccl_status", lambda: (True, "fake"))
    m = co.measure_allreduce(2**20, iters=6, warmup=2)
    assert calls["groups"] == 8 and calls["allreduce"] == 32 and calls["destroyed"] == 4
    assert m["kind"] == "measured" and m["devices"] == [0, 1, 2, 3] and m["device"] == "Fake H200"
    assert m["seconds"] == pytest.approx(0.5e-3)
    assert m["algbw"] == pytest.approx(2**20 / 0.5e-3 / 1e9)
    assert m["busbw"] == pytest.approx(m["algbw"] * bw.busbw_factor("all_reduce", 4))
    assert m["correct"] is (broken is None)
    with pytest.raises(LabkitError):
        co.measure_allreduce(2**20, devices=[0])


# ---------------------------------------------------------------------------------------------- NVLS, chain, NCCL's choice


def test_nvls_sends_the_buffer_once_and_its_busbw_exceeds_the_link() -> None:
    B = 450.0
    for n in (2, 4, 8):
        m = co.nvls_cost(2**30, n, B, alpha_us=0.0)
        assert m.bytes_per_gpu == pytest.approx(2**30)
        assert m.algbw == pytest.approx(B)
        assert m.busbw == pytest.approx(B * 2 * (n - 1) / n)
    assert co.nvls_cost(2**30, 8, B, 0.0).busbw > B  # the ring's factor on a switch-reduced algbw
    assert co.ring_cost(2**30, 8, B, 0.0).busbw == pytest.approx(B)  # a ring's busbw is the link rate at best
    assert co.nvls_cost(1e9, 1, B).seconds == 0.0


def test_chain_is_nccls_tree_inside_a_node() -> None:
    c, r = co.chain_cost(2**20, 8, 450.0, 5.0), co.ring_cost(2**20, 8, 450.0, 5.0)
    assert c.steps == r.steps == 14 and c.bandwidth_s > r.bandwidth_s
    assert "chain" in " ".join(c.assumptions)


def test_nccl_choice_and_algorithm_list() -> None:
    assert set(co.NCCL_ALGORITHMS) == {"Ring", "Tree", "NVLS", "NVLSTree", "CollNetDirect", "CollNetChain", "PAT"}
    assert co.has_nvls("DGX H100") and co.has_nvls("DGX H200")
    assert not co.has_nvls("DGX A100") and not co.has_nvls("DGX-2") and not co.has_nvls("2x DGX-1 (V100)")
    h = co.nccl_choice("DGX H200", 2**30)
    assert h.algorithm == "NVLS" and set(h.models) == {"Ring", "Tree", "NVLS"} and "[model]" in str(h)
    a = co.nccl_choice("DGX A100", 2**30)
    assert a.algorithm == "Ring" and "NVLS" not in a.models
    with pytest.raises(LabkitError, match="NVLS"):
        co.allreduce_time("DGX A100", 1e9, algorithm="nvls")
    assert co.allreduce_time("DGX H200", 1e9, algorithm="nvls").algorithm == "NVLS"
    with pytest.raises(LabkitError):
        co.nccl_choice("DGX H200", 1e9, n=1)


def test_measured_nvls_reference_is_in_hw_with_its_source() -> None:
    s = hw.system("DGX H200")
    per_direction = s.gpu_model.nvlink_bandwidth.value / 2
    assert s.allreduce_busbw_nvls.value == 480 and s.allreduce_busbw_ring.value == 367
    assert s.allreduce_busbw_nvls.value > per_direction > s.allreduce_busbw_ring.value
    assert "measurement" in s.allreduce_busbw_nvls.source
