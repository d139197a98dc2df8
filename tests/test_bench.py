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
    assert "not GPU speed" in str(t) and "GB/s" in str(t)


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
    assert "a" in rows and "1.0" in rows and "not GPU speed" in rows
