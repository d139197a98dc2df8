"""Layers point downwards: the simulator knows nothing of checks or widgets, checks know nothing of widgets."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "labkit"


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute, or relative resolved against labkit's package tree)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


@pytest.mark.parametrize(("layer", "forbidden"), [("sim", "labkit.check"), ("sim", "labkit.widgets"),
                                                 ("check", "labkit.widgets")])
def test_a_layer_does_not_import_the_one_above(layer: str, forbidden: str) -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(m for m in _imports(path) if m == forbidden or m.startswith(forbidden + "."))
        for path in sorted((SRC / layer).glob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}, f"{layer} imports {forbidden}: {offenders}"


def test_the_import_scan_sees_relative_imports() -> None:
    assert "labkit.sim.errors" in _imports(SRC / "check" / "harness.py") or "labkit.sim" in _imports(SRC / "check" / "harness.py")
