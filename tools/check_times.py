#!/usr/bin/env python3
"""Time every exercise's check on labkit's reference answer in the current mode; print median and maximum per lab.

    python tools/check_times.py [--json]

The reference answers are what ``labkit.check.solved_or_reference`` falls back on; an exercise whose reference takes
several arguments (a tuple) is called with them. Used for the grader's time budget (median <= 5 s per lab in sim).
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import time


def main() -> int:
    import labkit

    labkit.setup(quiet=True)
    from labkit.check import core

    core._load_all()
    times: dict[str, dict[str, float]] = {}
    for ex_id, ex in sorted(core._REGISTRY.items()):
        if ex.reference is None:
            continue
        answer = ex.reference()
        args = answer if isinstance(answer, tuple) else (answer,)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            result = core.run(ex_id, *args)
        seconds = time.perf_counter() - start
        times.setdefault(ex_id[:2], {})[ex_id] = round(seconds, 2)
        if not result.passed:
            print(f"warning: {ex_id} reference did not pass: {result.message[:120]}", file=sys.stderr)
    summary = {lab: {"median_s": round(statistics.median(t.values()), 2), "max_s": max(t.values()),
                     "slowest": max(t, key=t.get), "checks": len(t)} for lab, t in times.items()}
    if "--json" in sys.argv:
        print(json.dumps({"per_lab": summary, "per_check": times}, indent=1))
    else:
        for lab, s in summary.items():
            print(f"lab {lab}: {s['checks']} checks, median {s['median_s']:.2f} s, max {s['max_s']:.2f} s ({s['slowest']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
