#!/usr/bin/env python3
"""``make gpu-check``: on a machine with an NVIDIA GPU, run every solution notebook in ``gpu`` mode and the
benchmark suite, and write ``benchmarks/results/<gpu>-<date>.json`` and ``.md``.

It needs no package registry: labkit is taken from ``src/`` (no install), and the machine's own CuPy,
numba-cuda and Jupyter are used; packages it lacks come as wheels (see docs/gpu-check.md).

    python3 tools/gpu_check.py [--out DIR] [--skip-notebooks] [--notebooks 00 02 ...] [--timeout S]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ["LABKIT_MODE"] = "gpu"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_notebooks(stems: list[str] | None, timeout: int) -> list[dict[str, Any]]:
    """Execute each solution notebook in gpu mode with every check required to pass."""
    import nbformat
    from nbclient import NotebookClient

    env = {"LABKIT_MODE": "gpu", "LABKIT_EXPECT": "solved"}
    os.environ.update(env)
    rows = []
    for path in sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb")):
        if stems and not any(path.stem.startswith(s) for s in stems):
            continue
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            status, error = "passed", None
        except Exception as exc:  # noqa: BLE001 - a failing notebook is a result to report
            status, error = "failed", f"{type(exc).__name__}: {str(exc)[-1500:]}"
        rows.append({"notebook": path.name, "status": status, "seconds": round(time.perf_counter() - t0, 1), "error": error})
        print(f"{path.name}: {status} in {rows[-1]['seconds']} s", flush=True)
    return rows


def _suite(name: str, fn: Callable[[], Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        result = fn()
        return {"suite": name, "ok": True, "seconds": round(time.perf_counter() - t0, 1), "records": result}
    except Exception as exc:  # noqa: BLE001 - keep going: one failing suite must not hide the others
        return {"suite": name, "ok": False, "seconds": round(time.perf_counter() - t0, 1),
                "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


def run_benchmarks() -> list[dict[str, Any]]:
    """The course's performance targets (COURSE.md), each suite from the module that owns it."""
    import labkit

    suites = [
        ("numba kernels (labs 02-04)", lambda: labkit.kernels.benchmark_suite()),
        ("tensor cores (lab 06)", lambda: labkit.tensorcores.gpu_check()),
        ("cupy fusion and overlap (lab 05)", lambda: labkit.cupylab.benchmarks()),
        ("bandwidth (lab 07)", lambda: labkit.bandwidth.gpu_check_suite()),
    ]
    out = []
    for name, fn in suites:
        print(f"benchmark suite: {name} ...", flush=True)
        out.append(_suite(name, fn))
    return out


def _targets(suites: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every record that states a target, flattened for the summary."""
    rows = []

    def visit(obj: Any, suite: str) -> None:
        if isinstance(obj, dict):
            if "passed" in obj or "meets_target" in obj:
                rows.append({"suite": suite, **{k: v for k, v in obj.items() if not isinstance(v, (dict, list))}})
            for v in obj.values():
                if isinstance(v, (dict, list)):
                    visit(v, suite)
        elif isinstance(obj, list):
            for v in obj:
                visit(v, suite)

    for s in suites:
        visit(s.get("records"), s["suite"])
    return rows


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# gpu-check: {report['device']['name']} — {report['date']}", "",
             f"labkit {report['labkit']}, Python {report['python']}, driver {report['device']['driver']}, "
             f"{report['device']['sm_count']} SMs, {report['device']['memory_gib']} GiB.", "",
             "## Solution notebooks in gpu mode", "", "| notebook | status | seconds |", "|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['status']} | {r['seconds']} |" for r in report["notebooks"]]
    lines += ["", "## Targets", "", "| suite | record | value | target | passed |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        name = t.get("name") or t.get("test") or t.get("kernel") or "?"
        value = t.get("value", t.get("speedup", t.get("percent_of_peak", "")))
        target = t.get("threshold", t.get("target", t.get("target_speedup", "")))
        passed = t.get("passed", t.get("meets_target"))
        lines.append(f"| {t['suite']} | {name} | {value} | {target} | {passed} |")
    failed = [s for s in report["benchmarks"] if not s["ok"]]
    if failed:
        lines += ["", "## Suites that failed to run", ""] + [f"- {s['suite']}: {s['error']}" for s in failed]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--skip-notebooks", action="store_true")
    ap.add_argument("--notebooks", nargs="*", help="only these notebook stems (e.g. 02 03)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per notebook cell")
    args = ap.parse_args(argv)

    import labkit

    try:
        env = labkit.setup()
    except labkit.LabkitError as exc:
        print(f"gpu-check needs a GPU: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {
        "labkit": labkit.__version__, "python": platform.python_version(),
        "date": dt.date.today().isoformat(),
        "device": {"name": env.device_name, "compute_capability": env.compute_capability, "sm_count": env.sm_count,
                   "memory_gib": round((env.memory_bytes or 0) / 2**30, 1), "gpu_count": env.gpu_count,
                   "driver": env.driver_version},
    }
    report["benchmarks"] = run_benchmarks()
    report["targets"] = _targets(report["benchmarks"])
    report["notebooks"] = [] if args.skip_notebooks else run_notebooks(args.notebooks, args.timeout)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{_slug(env.device_name)}-{report['date']}"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=str))
    (out / f"{stem}.md").write_text(markdown(report))
    print(f"wrote {out / stem}.json and .md")
    bad = [n for n in report["notebooks"] if n["status"] != "passed"] + [s for s in report["benchmarks"] if not s["ok"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
