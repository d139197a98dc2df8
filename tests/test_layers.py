"""Layers point downwards (docs/ARCHITECTURE.md): every import inside labkit, at module level or inside a function,
goes to its own package or to a lower layer; no two modules import each other, directly or round a circle.

The order, bottom to top: foundation (errors, validate, course, figstyle, device, learner_frames, progress, _version,
mode) < hw < sim < numerics
< cuda < gpu < dist < kernels < check | widgets (side by side: neither imports the other) < classroom < cli. The package
root ``labkit/__init__.py`` is the facade over all of them (``labkit.setup``, ``labkit.show``): nothing inside imports it.
There are no exceptions: an import against the order, an import of the root from inside, or a circle fails."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "labkit"

LAYERS: list[tuple[str, ...]] = [
    (
        "labkit.errors",
        "labkit.validate",
        "labkit.course",
        "labkit.figstyle",
        "labkit.device",
        "labkit.learner_frames",
        "labkit.progress",
        "labkit.mode",
        "labkit._moved",
        "labkit._version",
    ),
    ("labkit.hw",),
    ("labkit.sim",),
    ("labkit.numerics",),
    ("labkit.cuda",),
    ("labkit.gpu",),
    ("labkit.dist",),
    ("labkit.kernels",),
    ("labkit.check", "labkit.widgets"),
    ("labkit.classroom",),
    ("labkit.cli",),
]
SIDE_BY_SIDE = {("labkit.check", "labkit.widgets"), ("labkit.widgets", "labkit.check")}


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        if "__pycache__" in p.parts:
            continue
        rel = p.relative_to(SRC.parent).with_suffix("")
        out[".".join(rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts)] = p
    return out


MODULES = _modules()


def _moved() -> dict[str, str]:
    sys.path.insert(0, str(SRC.parent))
    try:
        from labkit._moved import MOVED
    except ImportError:
        return {}
    return {f"labkit.{k}": f"labkit.{v}" for k, v in MOVED.items()}


MOVED = _moved()


def _canonical(name: str) -> str | None:
    """The labkit module a dotted name lives in (through the old names of labkit._moved), or None."""
    name = MOVED.get(name, name)
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


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


def _edges(path: Path, me: str, text: str | None = None) -> set[str]:
    """The labkit modules a file depends on: ``from labkit.sim import engine`` is labkit.sim.engine (a module), while
    ``from labkit.sim import launch_strict`` is labkit.sim (a name of the package)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = MOVED.get(f"{base}.{alias.name}", f"{base}.{alias.name}")
                named.add(full if full in MODULES else base)
    out = {_canonical(m) for m in named if m.startswith("labkit")}
    return {m for m in out if m and m != me}


GRAPH = {name: _edges(path, name) for name, path in MODULES.items()}


def _layer(name: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def _package(name: str) -> str:
    return next(p for ps in LAYERS for p in ps if name == p or name.startswith(p + "."))


def test_every_module_has_a_layer() -> None:
    assert not [m for m in MODULES if m != "labkit" and _layer(m) is None], "add the new package to LAYERS"


def test_nothing_inside_imports_the_package_root() -> None:
    assert not {m for m, deps in GRAPH.items() if "labkit" in deps and m != "labkit"}


def _up_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) for every import against the layer order."""
    up = set()
    for m, deps in graph.items():
        if m == "labkit":
            continue
        for d in deps:
            if d == "labkit" or _package(d) == _package(m):
                continue
            if _layer(d) > _layer(m) or (_layer(d) == _layer(m) and (_package(m), _package(d)) in SIDE_BY_SIDE):
                up.add((m, d))
    return up


def test_imports_point_down() -> None:
    assert not sorted(_up_imports(GRAPH)), "imports against the layer order (docs/ARCHITECTURE.md)"


def _circles(graph_in: dict[str, set[str]] | None = None) -> list[frozenset[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    graph = {m: {d for d in deps if d != "labkit"} for m, deps in (graph_in or GRAPH).items() if m != "labkit"}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_circles() -> None:
    assert not [sorted(c) for c in _circles()], "import circles"


def test_the_old_names_resolve_to_the_moved_modules() -> None:
    import importlib

    for old, new in MOVED.items():
        if old.rpartition(".")[2].startswith("_rank_"):
            continue  # rank-side scripts: run by path inside each rank, not imported as labkit modules
        assert importlib.import_module(old) is importlib.import_module(new), old


def test_an_old_name_runs_with_python_m() -> None:
    """``python -m labkit.gradebook`` (the instructor's command in the docs) runs the moved module as __main__."""
    import subprocess

    if "labkit.gradebook" not in MOVED:
        pytest.skip("gradebook has not moved")
    env = {**__import__("os").environ, "PYTHONPATH": str(SRC.parent)}
    out = subprocess.run(
        [sys.executable, "-m", "labkit.gradebook", "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0 and "--otter" in out.stdout, out.stderr


@pytest.mark.parametrize(
    ("layer", "forbidden"), [("sim", "labkit.check"), ("sim", "labkit.widgets"), ("check", "labkit.widgets")]
)
def test_a_layer_does_not_import_the_one_above(layer: str, forbidden: str) -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(m for m in _imports(path) if m == forbidden or m.startswith(forbidden + "."))
        for path in sorted((SRC / layer).glob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}, f"{layer} imports {forbidden}: {offenders}"


def test_the_import_scan_sees_relative_imports() -> None:
    assert "labkit.sim.errors" in _imports(SRC / "check" / "harness.py") or "labkit.sim" in _imports(SRC / "check" / "harness.py")


def test_the_scan_catches_an_import_against_the_order() -> None:
    """The tests can fail: a lazy import of the checks inside a hw model is an import up the layers, and an import
    of validate from errors (validate imports errors) is a circle."""
    occupancy = SRC / "hw" / "occupancy.py"
    text = occupancy.read_text() + "\n\ndef _late() -> None:\n    from labkit.check import core  # noqa: F401\n"
    graph = {**GRAPH, "labkit.hw.occupancy": _edges(occupancy, "labkit.hw.occupancy", text)}
    assert ("labkit.hw.occupancy", "labkit.check.core") in _up_imports(graph)
    graph = {**GRAPH, "labkit.errors": GRAPH["labkit.errors"] | {"labkit.validate"}}
    assert frozenset({"labkit.errors", "labkit.validate"}) in _circles(graph)
    assert ("labkit.widgets.precision", "labkit.check.core") in _up_imports({"labkit.widgets.precision": {"labkit.check.core"}})
