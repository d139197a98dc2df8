"""labkit.bench: repetitions, median, spread, rates and honest labels."""

import time

import pytest

from labkit import bench
from labkit.errors import LabkitError


def test_measure_in_sim_is_labelled_cpu_time() -> None:
    t = bench.measure(time.sleep, 0.002, name="sleep", repeat=5, warmup=1, bytes=2e6)
    assert len(t.samples_s) == 5 and t.mode == "sim"
    assert 0.0015 < t.median_s < 0.05
    assert t.gbps == pytest.approx(2e6 / t.median_s / 1e9)
    assert t.percent_of_peak is None  # no GPU peak to compare with
    assert "not GPU speed" in str(t) and "no GB/s or TFLOP/s claimed" in str(t)  # issue 12: no "0.0 GB/s"
    assert not t.claims_rate and t.how == bench.WALL_CLOCK and t.launches == 1


def test_rates_and_percent_of_peak() -> None:
    t = bench.Timing("k", (0.001, 0.002, 0.003), "gpu", "NVIDIA H200", bytes=4e9, peak_gbps=4800.0)
    assert t.median_s == 0.002 and t.spread == pytest.approx(1.0)
    assert t.gbps == pytest.approx(2000.0)
    assert t.percent_of_peak == pytest.approx(100 * 2000 / 4800)
    f = bench.Timing("mm", (0.5,), "gpu", "x", flops=1e12, peak_tflops=4.0)
    assert f.tflops == pytest.approx(2.0) and f.percent_of_peak == pytest.approx(50.0)
    assert "CUDA-event time on x" in str(f)


def test_bad_arguments() -> None:
    with pytest.raises(LabkitError):
        bench.measure(lambda: None, repeat=0)
    with pytest.raises(LabkitError):
        bench.measure(42)  # type: ignore[arg-type]


def test_table() -> None:
    rows = bench.table([bench.Timing("a", (1e-3,), "sim", "cpu", bytes=1e6)])
    assert "a" in rows and "not GPU speed" in rows and "no GB/s" in rows
    assert rows.splitlines()[1].split()[-3:] == ["-", "-", "-"]  # no rate for simulator time
    g = bench.table([bench.Timing("a", (1e-3,), "gpu", "H200", bytes=1e6)])
    assert g.splitlines()[1].split()[-3] == "1.0"


# ---------------------------------------------------------------------------------------------- gpu timing (fake CuPy)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0  # GPU time, seconds
        self.log: list[str] = []


def _fake_cupy(per_call_s: float, blocks_host: bool = False):
    """The CuPy names bench uses (checked against the real module), with a GPU clock: each queued call costs
    ``per_call_s``; a spin kernel reports a timeout when the function synchronises while the stream is held."""
    import types

    import numpy as np

    real = pytest.importorskip("cupy")
    clock = _Clock()
    state = {"flag": None}

    class Stream:
        def synchronize(self) -> None:
            if blocks_host and state["flag"] is not None and state["flag"][0] == 0:
                state["flag"][1] = 1  # the host waited: the spin kernel gave up
            clock.log.append("sync")

    class Event:
        def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
            self.t = 0.0

        def record(self, stream=None) -> None:
            self.t = clock.t
            clock.log.append("event")

        def synchronize(self) -> None:
            pass

    class Kernel:
        attributes = {"num_regs": 8}  # read by labkit.spin.load: the spin kernel is loaded before it holds

        def __call__(self, grid, block, args, stream=None) -> None:
            import ctypes

            state["flag"] = (ctypes.c_int * 2).from_address(int(args[0]))
            clock.log.append("spin")

    class Device:
        def __init__(self, d=None) -> None: ...
        def __enter__(self): return self
        def __exit__(self, *a) -> None: ...

    rt_real = real.cuda.runtime
    runtime = types.SimpleNamespace(
        hostAllocPortable=rt_real.hostAllocPortable, hostAllocMapped=rt_real.hostAllocMapped, getDevice=lambda: 0,
        hostAlloc=lambda n, flags: __import__("ctypes").addressof(_buffers.setdefault(len(_buffers), (__import__("ctypes").c_char * n)())),
        freeHost=lambda p: None, deviceSynchronize=lambda: None, deviceGetAttribute=lambda a, d: 1_980_000)
    _buffers: dict = {}
    from gpu_fakes import check_fake_against

    check_fake_against(runtime, rt_real, ["getDevice", "hostAlloc", "freeHost", "deviceSynchronize", "deviceGetAttribute"])
    stream = Stream()
    cuda = types.SimpleNamespace(runtime=runtime, Event=Event, Device=Device, get_current_stream=lambda: stream,
                                 get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
    for name in ("runtime", "Event", "Device", "get_current_stream", "get_elapsed_time"):
        assert hasattr(real.cuda, name), name
    fake = types.SimpleNamespace(cuda=cuda, RawKernel=lambda src, name: Kernel(), uint64=np.uint64)

    def work() -> None:
        clock.t += per_call_s
        clock.log.append("call")
        if blocks_host:
            stream.synchronize()

    return fake, work, clock


def _gpu_env(monkeypatch: pytest.MonkeyPatch, fake) -> None:
    import sys

    from labkit import spin

    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(bench, "current_mode", lambda: "gpu")
    monkeypatch.setattr(bench, "device_peaks", lambda precision="fp32": (4800.0, None, "test"))

    class _Env:
        device_name, is_gpu = "NVIDIA H200", True

    monkeypatch.setattr(bench, "env", lambda: _Env())
    spin._KERNELS.clear()


def test_gpu_timing_queues_launches_behind_a_spin_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launch overhead is excluded: every sample is spin kernel, start event, N calls, stop event."""
    fake, work, clock = _fake_cupy(per_call_s=5e-6)
    _gpu_env(monkeypatch, fake)
    t = bench.measure(work, name="tiny", bytes=1e6, repeat=4, warmup=1)
    assert t.launches == 64  # 5 µs per call: as many as may queue behind the hold (about 1 ms asked)
    assert t.median_s == pytest.approx(5e-6) and t.how == bench.SPIN_HELD.format(n=64)
    samples = "".join("S" if e == "spin" else "E" if e == "event" else "c" if e == "call" else "" for e in clock.log)
    assert samples.endswith(("S" + "E" + "c" * 64 + "E") * 4)
    assert "Python's launch time excluded" in t.as_dict()["how"] and t.claims_rate and "GB/s" in str(t)
    assert "64 launches held behind a spin kernel" in t.label
    with pytest.raises(LabkitError, match="at most 64"):
        bench.measure(work, launches=500)


def test_gpu_timing_of_a_function_that_waits_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, work, clock = _fake_cupy(per_call_s=1e-3, blocks_host=True)
    _gpu_env(monkeypatch, fake)
    t = bench.measure(work, repeat=3, warmup=1, launches=2)
    assert t.how == bench.BETWEEN_EVENTS.format(n=2) and "makes the host wait" in t.how
    assert "2 calls between one pair of events" in t.label
    assert len(t.samples_s) == 3 and t.median_s == pytest.approx(1e-3)


def test_gpu_out_of_memory_while_timing_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = pytest.importorskip("cupy")
    fake, work, clock = _fake_cupy(per_call_s=1e-3)
    _gpu_env(monkeypatch, fake)

    def oom() -> None:
        raise cupy.cuda.memory.OutOfMemoryError(1 << 36, 1 << 30)

    with pytest.raises(LabkitError, match="ran out of GPU memory") as err:
        bench.measure(oom, name="big")
    assert "free_all_blocks" in err.value.fix

    def bug() -> None:
        raise KeyError("learner's own bug")

    with pytest.raises(KeyError):  # not dressed up as a GPU problem
        bench.measure(bug)


def test_gpu_timing_without_warmup_still_calls_once_before_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lazy loading: fn's kernels load at its first call, which must not come behind the spin kernel (it would wait
    for the device to go idle); with warmup=0 and launches given, one call still runs unheld first."""
    fake, work, clock = _fake_cupy(per_call_s=5e-6)
    _gpu_env(monkeypatch, fake)
    bench.measure(work, repeat=2, warmup=0, launches=3)
    first_spin = clock.log.index("spin")
    assert "call" in clock.log[:first_spin]


@pytest.mark.parametrize("call,match", [
    (lambda: bench.measure(time.sleep, 0, repeat="5"), r"repeat must be a whole number from 1 to 100000, got '5'"),
    (lambda: bench.measure(time.sleep, 0, repeat=2.5), r"repeat must be a whole number"),
    (lambda: bench.measure(time.sleep, 0, warmup=-1), r"warmup must be a whole number from 0"),
    (lambda: bench.measure(time.sleep, 0, bytes="1e6"), r"bytes must be a non-negative finite number"),
    (lambda: bench.measure(time.sleep, 0, flops=float("nan")), r"flops must be a non-negative finite number"),
    (lambda: bench.measure(time.sleep, 0, name=3), r"name must be a non-empty string"),
    (lambda: bench.measure(time.sleep, 0, precision="fp23"), r"unknown precision"),
    (lambda: bench.measure(time.sleep, 0, precision=None), r"precision is named by a string"),
    (lambda: bench.measure(None), r"measure\(\)'s first argument must be a function to call"),
    (lambda: bench.table(None), r"table\(\)'s argument must be a list of timings"),
    (lambda: bench.table([1, 2]), r"element 0 is 1"),
    (lambda: bench.table("x"), r"table\(\)'s argument must be a list of timings"),
])
def test_junk_arguments_are_labkit_errors(call, match) -> None:
    with pytest.raises(LabkitError, match=match):
        call()


def test_table_of_no_timings_is_a_header() -> None:
    assert bench.table([]).startswith("name")
