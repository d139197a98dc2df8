#!/usr/bin/env python3
"""Put the newest ``benchmarks/results/sim-speed-*.md`` (its conditions, table and notes) into README.md, between its
sim-speed markers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    results = sorted((ROOT / "benchmarks" / "results").glob("sim-speed-*.md"))
    if not results:
        print("no benchmarks/results/sim-speed-*.md: run `make bench-sim` first", file=sys.stderr)
        return 1
    table = results[-1].read_text().strip()  # (its first line: the date, machine and load; the table; its notes)
    readme = ROOT / "README.md"
    text = re.sub(r"<!-- sim-speed -->.*?<!-- /sim-speed -->", f"<!-- sim-speed -->\n{table}\n<!-- /sim-speed -->",
                  readme.read_text(), flags=re.S)
    readme.write_text(text)
    print(f"README.md: table from {results[-1].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
