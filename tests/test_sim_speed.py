"""benchmarks/sim_speed.py (make bench-sim): both simulators time the same kernels and agree on their outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator benchmark")

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("sim_speed", ROOT / "benchmarks" / "sim_speed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sim_speed"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_every_reference_kernel_has_a_case() -> None:
    from labkit import kernels

    bench = _bench()
    names = {c.name for c in bench._cases()}
    assert set(kernels.names()) <= names
    assert {"fused_update", "erode3x3", "dilate3x3", "tile_counts"} <= names


def test_a_run_writes_json_and_markdown(tmp_path: Path) -> None:
    bench = _bench()
    assert bench.main(["--only", "copy,warp_sum", "--repeat", "1", "--no-first", "--out", str(tmp_path)]) == 0
    (json_file,) = tmp_path.glob("sim-speed-*.json")
    result = json.loads(json_file.read_text())
    rows = {r["kernel"]: r for r in result["rows"]}
    assert rows["copy"]["same_outputs"] is True and rows["copy"]["numba_s"] > 0 and rows["copy"]["labkit_strict_s"] > 0
    # Numba's simulator has no warp functions: the benchmark gives it some, and says so in the row and under the table
    assert rows["warp_sum"]["numba_warp_shim"] is True and rows["warp_sum"]["same_outputs"] is True
    assert rows["copy"]["numba_warp_shim"] is False
    table = json_file.with_suffix(".md").read_text()
    assert "| copy |" in table and "not GPU times" in table and "| warp_sum ¹ |" in table
    assert "threading.Barrier" in table and "first launch" in table


def test_a_first_launch_is_timed_in_a_fresh_process() -> None:
    bench = _bench()
    for simulator in ("labkit", "numba"):
        got = bench._first_launch(simulator, "copy")
        # a fresh process reports the imports and the jit + first launch as two timings (no ratio between them is
        # asserted: both are CPU times that move with the machine's load)
        assert "error" not in got and got["import_s"] > 0 and got["first_s"] > 0, got


def test_the_readme_shows_the_newest_committed_table() -> None:
    results = sorted((ROOT / "benchmarks" / "results").glob("sim-speed-*.md"))
    assert results, "run `make bench-sim` and commit benchmarks/results/sim-speed-<date>.md"
    table = [line for line in results[-1].read_text().splitlines() if line.startswith("|")]
    readme = (ROOT / "README.md").read_text()
    assert all(line in readme for line in table), "README.md's simulator table differs from " + results[-1].name
