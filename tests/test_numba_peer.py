"""Peer parity: every test of numba-cuda's own suite that Numba's simulator passes, labkit's engine passes too.

tools/numba_peer.py runs the installed numba-cuda's ``numba.cuda.tests`` as numba-cuda's simulator CI does
(``NUMBA_ENABLE_CUDASIM=1``, ``pytest --pyargs numba.cuda.tests``, every warning an error, the suite's own
``skip_on_cudasim``), once as shipped and once with ``labkit.setup("sim")`` in every process, both at once; the
shipped run is read from its record for the installed versions (``tests/numba_peer/shipped-*.json``) where there is one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import numba_peer  # noqa: E402


def _run(outcomes: dict[str, str]) -> numba_peer.Run:
    return numba_peer.Run(outcomes, 1.0, 0)


def test_compare_finds_regressions_and_stale_allowances() -> None:
    shipped = _run({"a::x": "passed", "a::y": "passed", "a::z": "failed", "a::w": "passed"})
    mine = _run({"a::x": "passed", "a::y": "failed", "a::z": "passed"})  # w went missing: not a pass either
    c = numba_peer.compare(shipped, mine, {})
    assert c.regressions == ["a::w", "a::y"] and c.fixed == ["a::z"] and not c.ok
    c = numba_peer.compare(shipped, mine, {"a::y": "stricter", "a::w": "stricter", "a::x": "passes now"})
    assert not c.regressions and c.stale == ["a::x"] and not c.ok
    c = numba_peer.compare(shipped, mine, {"a::y": "stricter", "a::w": "stricter"})
    assert c.ok and c.summary()["pass_both"] == 1


def test_allow_list_entries_need_a_reason(tmp_path: Path) -> None:
    listed = tmp_path / "allowed.txt"
    listed.write_text("# comment\ncudapy.test_x.T::test_y  # a GPU gives an undefined value here\n")
    assert numba_peer.read_allowed(listed) == {"cudapy.test_x.T::test_y": "a GPU gives an undefined value here"}
    listed.write_text("cudapy.test_x.T::test_y\n")
    with pytest.raises(ValueError, match="no reason"):
        numba_peer.read_allowed(listed)


def test_shipped_allow_list_is_empty() -> None:
    assert numba_peer.read_allowed() == {}


def test_junit_outcomes(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text('<testsuites><testsuite>'
                      '<testcase classname="m.C" name="ok"/>'
                      '<testcase classname="m.C" name="bad"><failure message="x"/></testcase>'
                      '<testcase classname="m.C" name="err"><error message="x"/></testcase>'
                      '<testcase classname="m.C" name="skip"><skipped message="x"/></testcase>'
                      '</testsuite></testsuites>')
    assert numba_peer.outcomes(report) == {"m.C::ok": "passed", "m.C::bad": "failed", "m.C::err": "failed",
                                           "m.C::skip": "skipped"}


@pytest.mark.parametrize("with_labkit", [False, True])
def test_sitecustomize_puts_labkit_under_every_process(with_labkit: bool) -> None:
    """The comparison is not vacuous: in the labkit run a fresh process launches on labkit's engine, in the shipped
    run on Numba's own."""
    code = ("from numba.cuda.simulator import kernel; "
            "print(kernel.FakeCUDAKernel.__call__.__module__)")
    out = subprocess.run([sys.executable, "-c", code], env=numba_peer._environment(with_labkit), capture_output=True,
                         text=True, timeout=120, cwd=ROOT / "tests" / "numba_peer")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("labkit.sim.launch" if with_labkit else "numba.cuda.simulator.kernel")


def test_the_shipped_run_is_recorded_for_the_installed_versions() -> None:
    """The pinned numba-cuda, numba and numpy have a record (a version bump: `python tools/numba_peer.py --record`)."""
    shipped = numba_peer.recorded_shipped()
    assert shipped is not None, f"no {numba_peer.baseline_path().name}: run `python tools/numba_peer.py --record`"
    assert shipped.count("passed") > 500 and all(o in numba_peer.OUTCOMES for o in shipped.outcomes.values())


@pytest.mark.slow
def test_labkit_passes_every_test_numba_simulator_passes(tmp_path: Path) -> None:
    shipped, mine = numba_peer.run_both(workdir=tmp_path, timeout_s=540)
    assert shipped.count("passed") > 500, f"the suite did not run as shipped:\n{shipped.tail}"
    assert mine.count("passed") > 500, f"the suite did not run with labkit:\n{mine.tail}"
    c = numba_peer.compare(shipped, mine)
    summary = c.summary()
    print(json.dumps(summary, indent=1))
    assert not c.regressions, (f"{len(c.regressions)} test(s) of numba-cuda's suite pass under Numba's simulator and "
                               f"fail under labkit's engine: {c.regressions[:20]}\n{mine.tail}")
    assert not c.stale, f"allow-list entries no longer needed (remove them from tests/numba_peer/allowed.txt): {c.stale}"
