"""List the public labkit functions that junk arguments still crash (the escapes of tests/test_api_junk.py).

    .venv/bin/python tools/junk_escapes.py              # print each escaping function and its first escape
    .venv/bin/python tools/junk_escapes.py --write      # also rewrite KNOWN_ESCAPES in tests/test_api_junk.py

``--write`` records every current escape as known (a strict xfail): use it after fixing some, to drop their lines,
not to hide a new escape in code you own: fix that instead.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Print the escapes; with ``--write``, rewrite the KNOWN_ESCAPES table. Returns the number of escaping functions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite KNOWN_ESCAPES in tests/test_api_junk.py")
    args = parser.parse_args(argv)
    os.environ.setdefault("LABKIT_MODE", "sim")
    os.environ.setdefault("LABKIT_PROGRESS", "off")
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]
    import labkit

    labkit.setup(quiet=True)
    import test_api_junk as T

    entries = []
    for qual, f in T.CALLABLES:
        if qual in T.KNOWN_HANGS:
            continue
        escapes = T._probe(qual, f)
        if not escapes:
            continue
        print(f"{qual}: {len(escapes)} escape(s), e.g. {escapes[0]}")
        call, _, what = escapes[0].partition(" -> ")
        call = re.sub(r"<object object at 0x[0-9a-f]+>", "object()", call.replace(qual, "", 1))
        what = re.sub(r"<object object at 0x[0-9a-f]+>", "object()", what)
        text = f"{len(escapes)} junk calls escape, e.g. {call} -> {what}".replace("\\", "\\\\").replace('"', "'")
        entries.append(f'    "{qual}": "{text[:110]}",')
    if args.write:
        path = ROOT / "tests" / "test_api_junk.py"
        source = path.read_text()
        start = source.index("KNOWN_ESCAPES: dict[str, str] = {")
        end = source.index("\n}\n", start) + 3
        path.write_text(source[:start] + "KNOWN_ESCAPES: dict[str, str] = {\n" + "\n".join(entries) + "\n}\n" + source[end:])
        print(f"wrote {len(entries)} known escapes to {path.relative_to(ROOT)}")
    return len(entries)


if __name__ == "__main__":
    main()
