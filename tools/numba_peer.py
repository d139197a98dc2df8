"""Peer parity: numba-cuda's own test suite, run as its simulator CI runs it, without and with labkit's engine.

numba-cuda tests its CUDA simulator with ``NUMBA_ENABLE_CUDASIM=1 pytest --pyargs numba.cuda.tests`` (every warning
an error, the suite's own ``skip_on_cudasim`` skips). This runs the *installed* package's suite that way twice, at
the same time, each in its own process tree:

- as shipped: Numba's simulator alone;
- with labkit: ``tests/numba_peer/sitecustomize.py`` calls ``labkit.setup("sim")`` at the start of every Python
  process (the suite starts subprocesses too), so every launch runs on :mod:`labkit.sim`.

A test that passes as shipped and does not pass with labkit is a *regression*, unless it is on the allow-list
(``tests/numba_peer/allowed.txt``: one test id per line, then ``#`` and why labkit is stricter and right for a real
GPU). ``python tools/numba_peer.py`` prints the counts and exits 1 on a regression or a stale allow-list entry.

The shipped run depends only on the installed packages, not on labkit: ``python tools/numba_peer.py --record`` runs
both and keeps the shipped outcomes in ``tests/numba_peer/shipped-<versions>.json`` (:func:`baseline_path`: numba-cuda,
numba, numpy and Python). Where that file matches the installed versions, :func:`run_both` reads the shipped run from
it and runs only labkit's (half the CPU); with other versions it runs both, as above.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "numba_peer"
ALLOWED = PEER / "allowed.txt"
OUTCOMES = ("passed", "failed", "skipped")


@dataclass
class Run:
    """One run of the suite: the outcome of every test, its wall time, and the end of its output."""

    outcomes: dict[str, str]
    seconds: float
    returncode: int
    tail: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


@dataclass
class Comparison:
    """The two runs side by side."""

    shipped: Run
    labkit: Run
    allowed: dict[str, str]
    regressions: list[str] = field(default_factory=list)  # pass as shipped, not with labkit, not allowed
    allowed_hits: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # allowed, but passing (or passing nowhere): remove them
    fixed: list[str] = field(default_factory=list)  # fail as shipped, pass with labkit

    @property
    def ok(self) -> bool:
        return not self.regressions and not self.stale

    def summary(self) -> dict:
        both = sum(1 for t, o in self.shipped.outcomes.items() if o == "passed" and self.labkit.outcomes.get(t) == "passed")
        return {
            "shipped": {o: self.shipped.count(o) for o in OUTCOMES} | {"seconds": round(self.shipped.seconds, 1)},
            "labkit": {o: self.labkit.count(o) for o in OUTCOMES} | {"seconds": round(self.labkit.seconds, 1)},
            "pass_both": both,
            "pass_shipped": self.shipped.count("passed"),
            "regressions": self.regressions,
            "allowed": self.allowed_hits,
            "stale_allowed": self.stale,
            "pass_only_with_labkit": self.fixed,
        }


def read_allowed(path: Path = ALLOWED) -> dict[str, str]:
    """The allow-list: {test id: reason}. Every entry must give a reason."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test, _, reason = line.partition("#")
        if not reason.strip():
            raise ValueError(f"{path}:{n}: {test.strip()} has no reason (write `test id  # why labkit is right`)")
        out[test.strip()] = reason.strip()
    return out


def outcomes(junit: Path) -> dict[str, str]:
    """{test id: passed | failed | skipped} from a JUnit XML report (a test reported twice keeps its worst)."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    out: dict[str, str] = {}
    for case in ET.parse(junit).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        if rank[outcome] >= rank.get(out.get(test, "passed"), 0) or test not in out:
            out[test] = outcome
    return out


def _command(junit: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-c", str(PEER / "pytest.ini"), "--rootdir", str(junit.parent), "-p", "peer_plugin",
            "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--timeout", "300",
            f"--junitxml={junit}", "--pyargs", "numba.cuda.tests", *extra]


def _environment(with_labkit: bool) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS",
                 "LABKIT_EXPECT", "LABKIT_PTX_AUDIT"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(PEER)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["LABKIT_PROGRESS"] = "off"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
    env["LABKIT_PEER_ENGINE"] = "1" if with_labkit else "0"
    if with_labkit:
        env["LABKIT_MODE"] = "sim"
    else:
        env.pop("LABKIT_MODE", None)
    return env


def baseline_path() -> Path:
    """Where the shipped run's outcomes for the installed numba-cuda, numba, numpy and Python are recorded."""
    from importlib.metadata import version

    key = "-".join(f"{pkg}{version(pkg)}" for pkg in ("numba-cuda", "numba", "numpy"))
    return PEER / f"shipped-{key}-py{sys.version_info.major}.{sys.version_info.minor}.json"


def recorded_shipped() -> Run | None:
    """The shipped run recorded for the installed versions, or None."""
    path = baseline_path()
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return Run(data["outcomes"], data["seconds"], 0, f"(recorded in {path.name})")


def record(shipped: Run) -> Path:
    """Keep ``shipped`` (a live run) as the installed versions' record."""
    path = baseline_path()
    path.write_text(json.dumps({"outcomes": dict(sorted(shipped.outcomes.items())), "seconds": round(shipped.seconds, 1)}, indent=0) + "\n")
    return path


def run_both(
    extra: list[str] | None = None, *, workdir: Path | None = None, timeout_s: float = 900, live: bool = False
) -> tuple[Run, Run]:
    """Run the suite as shipped and with labkit, at the same time; returns (shipped, labkit). The shipped run is read
    from its record (:func:`recorded_shipped`) where one matches the installed versions, unless ``live`` or ``extra``."""
    extra = extra or []
    recorded = None if (live or extra) else recorded_shipped()
    with tempfile.TemporaryDirectory(prefix="numba-peer-") as tmp:
        base = Path(workdir or tmp)
        procs = {}
        for name, with_labkit in (("shipped", False), ("labkit", True)):
            if name == "shipped" and recorded is not None:
                continue
            d = base / name
            d.mkdir(parents=True, exist_ok=True)
            log = open(d / "output.txt", "w")
            procs[name] = (subprocess.Popen(_command(d / "junit.xml", extra), cwd=d, env=_environment(with_labkit),
                                            stdout=log, stderr=subprocess.STDOUT), time.monotonic(), log, d)
        ended: dict[str, float] = {}
        deadline = time.monotonic() + timeout_s
        while len(ended) < len(procs):  # (each run's own wall time: they end at different times)
            for name, (proc, _, _, _) in procs.items():
                if name not in ended and (proc.poll() is not None or time.monotonic() > deadline):
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    ended[name] = time.monotonic()
            time.sleep(0.2)
        runs = {}
        for name, (proc, start, log, d) in procs.items():
            rc = proc.returncode
            seconds = ended[name] - start
            log.close()
            text = (d / "output.txt").read_text(errors="replace")
            junit = d / "junit.xml"
            runs[name] = Run(outcomes(junit) if junit.exists() else {}, seconds, rc, text[-4000:])
    return (recorded or runs["shipped"]), runs["labkit"]


def compare(shipped: Run, labkit: Run, allowed: dict[str, str] | None = None) -> Comparison:
    """Which tests pass as shipped and not with labkit (regressions), which of those are allowed, which entries
    of the allow-list are stale (the test now passes with labkit, or does not pass as shipped)."""
    allowed = read_allowed() if allowed is None else allowed
    c = Comparison(shipped, labkit, allowed)
    for test, outcome in sorted(shipped.outcomes.items()):
        mine = labkit.outcomes.get(test, "missing")
        if outcome == "passed" and mine != "passed":
            (c.allowed_hits if test in allowed else c.regressions).append(test)
        elif outcome != "passed" and mine == "passed":
            c.fixed.append(test)
    c.stale = sorted(t for t in allowed if t not in c.allowed_hits)
    return c


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    keep = "--record" in argv
    argv = [a for a in argv if a != "--record"]
    shipped, labkit = run_both(argv, live=keep)
    if keep and shipped.count("passed") > 500:
        print(f"recorded the shipped run in {record(shipped)}")
    c = compare(shipped, labkit)
    print(json.dumps(c.summary(), indent=1))
    if not shipped.outcomes or not labkit.outcomes:
        print("a run reported no tests:\n", shipped.tail if not shipped.outcomes else labkit.tail)
        return 1
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
