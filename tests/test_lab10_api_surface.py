"""Every API name lab 10's GPU cells (and lab 05's graph and memory cells, and the 10.cluster / 05.graph checks) use
exists in the installed package, and module-level calls take the arguments they are given (issue 20). No GPU:
CuPy, cuda.core, cuda.tile (cuTile Python) and cuda.coop import without one.

- Names are read from the notebook sources and check modules with ``ast``, not listed by hand: every import, and
  every attribute chain rooted at an imported name (``cp.cuda.runtime.memPrefetchAsync``, ``ct.load``).
- Methods of objects the cells create (``stream.begin_capture()``, ``graph.launch()``) cannot be typed from the source:
  :data:`METHODS` lists them by class, and a test keeps that list in step with the sources.
- ``cuda.compute`` imports without a driver but then exposes none of its algorithms; its names are checked in the
  installed package's own ``__init__.py``. numba-cuda-mlir and nvmath-python are not in the test environment (the
  first would replace the course's compiler path; the second needs the GPU stack): the notebook says how to install
  them, and :data:`NOT_INSTALLED` must name every package the cells use that is left unchecked.
Cost: about 2 s (imports CuPy, cuda.core, cuda.tile, cuda.coop).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "notebooks" / "src" / "10-where-next.py", ROOT / "notebooks" / "src" / "05-cupy.py",
           ROOT / "src" / "labkit" / "check" / "lab10_clusters.py", ROOT / "src" / "labkit" / "check" / "lab05_graphs.py"]
CUDA_SUBPACKAGES = {"compute", "core", "tile", "coop", "bindings"}
CHECKED = ("cupy", "cupyx", "cuda.core", "cuda.tile", "cuda.coop", "cuda.compute", "numba")
NOT_INSTALLED = {"numba_cuda_mlir": "pip install numba-cuda-mlir", "nvmath": "pip install nvmath-python"}
#: (class, method) of objects the cells create and call methods on.
METHODS = [
    ("cupy.cuda.Stream", "begin_capture"), ("cupy.cuda.Stream", "end_capture"), ("cupy.cuda.Stream", "synchronize"),
    ("cupy.cuda.graph.Graph", "launch"), ("cupy.cuda.graph.Graph", "upload"),
    ("cupy.cuda.MemoryPool", "used_bytes"), ("cupy.cuda.MemoryPool", "total_bytes"),
    ("cupy.cuda.MemoryPool", "free_all_blocks"), ("cupy.cuda.Event", "record"), ("cupy.ndarray", "fill"),
    ("cuda.core.Device", "set_current"), ("cuda.core.Device", "create_stream"), ("cuda.core.Device", "arch"),
    ("cuda.core.Program", "compile"), ("cuda.core.ObjectCode", "get_kernel"), ("cuda.core.Stream", "sync"),
]


def _resolve(dotted: str) -> Any:
    """The object called ``dotted`` (a module, or attributes of one, importing submodules as needed)."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for k, name in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: k + 1]))
    return obj


def _doc_params(obj: Any) -> list[str] | None:
    """Parameter names from the signature Cython embeds as a docstring's first line (``Name(a: T = x, int b=...)``),
    read with brackets balanced (annotations such as ``tuple[int, ...]`` hold commas)."""
    first = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    name = getattr(obj, "__name__", "")
    if not first or not first[0].startswith(f"{name}("):
        return None
    text, depth, part, parts = first[0][len(name) + 1:], 0, "", []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    parts.append(part)
    names = []
    for piece in parts:
        head = piece.split(":")[0].split("=")[0].split()
        if head and head[-1] not in ("self", "/", "*"):
            names.append(head[-1].lstrip("*"))
    return names


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _uses() -> list[dict[str, Any]]:
    """Every imported name and attribute chain on one, with the file and line, and the call's argument counts."""
    out = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, set[str]] = {}  # a name may be bound by several imports (cuda: cuda.compute, numba's cuda)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases.setdefault(a.asname or a.name.split(".")[0], set()).add(
                        a.name if a.asname else a.name.split(".")[0])
                    out.append({"name": a.name, "where": f"{path.name}:{node.lineno}"})
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    aliases.setdefault(a.asname or a.name, set()).add(f"{node.module}.{a.name}")
                    out.append({"name": f"{node.module}.{a.name}", "where": f"{path.name}:{node.lineno}"})
        calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or isinstance(getattr(node, "ctx", None), ast.Store):
                continue
            chain = _chain(node)
            if not chain or chain[0] not in aliases:
                continue
            targets = sorted(aliases[chain[0]])
            base = targets[0]
            if len(targets) > 1:  # `cuda` bound by `import cuda.compute` and by `from numba import cuda`
                package = len(chain) > 1 and chain[1] in CUDA_SUBPACKAGES
                base = next(t for t in targets if (t == chain[0]) == package)
            use = {"name": ".".join([base, *chain[1:]]), "where": f"{path.name}:{node.lineno}"}
            call = calls.get(id(node))
            if call is not None and not any(isinstance(a, ast.Starred) for a in call.args) \
                    and not any(k.arg is None for k in call.keywords):
                use["nargs"], use["kwargs"] = len(call.args), [k.arg for k in call.keywords]
            out.append(use)
        for node in ast.walk(tree):  # calls of a from-imported name: Device(), LaunchConfig(grid=..., cluster=...)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in aliases \
                    and len(aliases[node.func.id]) == 1 and not any(isinstance(a, ast.Starred) for a in node.args) \
                    and not any(k.arg is None for k in node.keywords):
                out.append({"name": next(iter(aliases[node.func.id])), "where": f"{path.name}:{node.lineno}",
                            "nargs": len(node.args), "kwargs": [k.arg for k in node.keywords]})
    # keep only the outermost chain of each expression (a.b.c, not also a.b) where both are plain lookups
    names = {u["name"] for u in out}
    return [u for u in out if "nargs" in u or not any(n.startswith(u["name"] + ".") for n in names)]


#: Packages the GPU cells test for (``have(...)``) and the H200 image lacks: where one is not installed (the rehearsal
#: of the image, tests/test_rehearsal_cupy.py) its names are skipped; the suite's .venv has them (the dev extra).
OPTIONAL = ("cuda.tile", "cuda.coop", "cuda.compute")


def _skip_if_absent(name: str) -> None:
    for pkg in OPTIONAL:
        if _under(name, (pkg,)) and importlib.util.find_spec(pkg) is None:
            pytest.skip(f"{pkg} is not installed here (the GPU image lacks it too: the cell says so)")


def _under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


USES = [u for u in _uses() if _under(u["name"], CHECKED) and not _under(u["name"], ("cuda.compute", "numba.cuda"))]
#: numba.cuda in this process is the simulator (conftest): those names are asked of the real target in a subprocess.
NUMBA_CUDA = sorted({u["name"] for u in _uses() if _under(u["name"], ("numba.cuda",))})
COMPUTE = sorted({u["name"] for u in _uses() if u["name"].startswith("cuda.compute.")})


def test_the_scan_finds_the_new_gpu_cells() -> None:
    names = {u["name"] for u in USES}
    for expected in ("cuda.tile.load", "cuda.tile.store", "cuda.tile.launch", "cuda.tile.bid", "cuda.tile.kernel",
                     "cuda.coop._experimental.block.make_sum", "cuda.core.LaunchConfig", "cuda.core.launch",
                     "cupy.cuda.malloc_managed", "cupy.get_default_memory_pool", "cupy.ElementwiseKernel"):
        assert expected in names, expected


@pytest.mark.parametrize("use", USES, ids=lambda u: f"{u['name']}@{u['where']}")
def test_name_exists_and_takes_the_arguments_used(use: dict[str, Any]) -> None:
    _skip_if_absent(use["name"])
    try:
        obj = _resolve(use["name"])
    except (AttributeError, ImportError) as exc:
        pytest.fail(f"{use['where']}: {use['name']} does not exist in the installed package ({exc})")
    if "nargs" not in use or not callable(obj):
        return
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        names = _doc_params(obj)  # a Cython class: the signature it embeds in its docstring
        if names is None:
            return  # no signature anywhere: existence is what can be checked
        assert set(use["kwargs"]) <= set(names) and use["nargs"] <= len(names), \
            f"{use['where']}: {use['name']}({', '.join(names)}) does not take {use['nargs']} positional and {use['kwargs']}"
        return
    try:
        sig.bind(*[object()] * use["nargs"], **{k: object() for k in use["kwargs"]})
    except TypeError as exc:
        pytest.fail(f"{use['where']}: {use['name']}{sig} does not take {use['nargs']} positional argument(s) "
                    f"and {use['kwargs']}: {exc}")


@pytest.mark.parametrize("owner, method", METHODS)
def test_methods_of_created_objects_exist(owner: str, method: str) -> None:
    assert hasattr(_resolve(owner), method), f"{owner} has no {method!r}"


def test_method_list_is_in_step_with_the_sources() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)
    missing = [m for _, m in METHODS if f".{m}" not in text]
    assert not missing, f"METHODS lists names the sources no longer use: {missing}"
    for what in ("begin_capture", "end_capture", "get_kernel", "create_stream"):
        assert any(m == what for _, m in METHODS)


def test_cuda_compute_names_are_in_the_installed_package() -> None:
    """cuda.compute hides its algorithms without a CUDA driver; its __init__ imports them by name."""
    _skip_if_absent("cuda.compute")
    spec = importlib.util.find_spec("cuda.compute")
    assert spec is not None and spec.origin, "cuda-cccl is in the dev extra"
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    exported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert COMPUTE, "lab 10 uses cuda.compute"
    for name in COMPUTE:
        assert name.split(".")[2] in exported, name


def test_unchecked_packages_are_named_and_the_notebook_says_how_to_install_them() -> None:
    roots = {u["name"].split(".")[0] for u in _uses()}
    text = SOURCES[0].read_text(encoding="utf-8")
    for pkg, install in NOT_INSTALLED.items():
        assert pkg in roots, f"{pkg} is no longer used: drop it from NOT_INSTALLED"
        assert install in text, f"lab 10 must say `{install}`"
        assert importlib.util.find_spec(pkg) is None, f"{pkg} is installed now: check its names like the others"
    import sys

    third_party = roots - set(sys.stdlib_module_names) - {"labkit", "numpy", "IPython", "plotly", "__future__"}
    assert third_party <= {*CHECKED, "cuda", *NOT_INSTALLED}, third_party - {*CHECKED, "cuda", *NOT_INSTALLED}


def test_numba_cuda_names_exist_in_the_real_target() -> None:
    import json
    import os
    import subprocess
    import sys

    assert "numba.cuda.grid" in NUMBA_CUDA
    code = ("import json, sys\nfrom numba import cuda\nmissing = []\n"
            "for name in json.loads(sys.argv[1]):\n"
            "    obj = cuda\n"
            "    for part in name.split('.')[2:]:\n"
            "        obj = getattr(obj, part, None)\n"
            "    if obj is None: missing.append(name)\n"
            "print(json.dumps(missing))")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "LABKIT_MODE")}
    res = subprocess.run([sys.executable, "-c", code, json.dumps(NUMBA_CUDA)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


def _compute_def(name: str) -> ast.FunctionDef | ast.ClassDef | None:
    """The definition of ``cuda.compute.<name>`` in the installed package, found by following its imports with ``ast``
    (the package hides its algorithms without a CUDA driver, so they cannot be imported here)."""
    spec = importlib.util.find_spec("cuda.compute")
    assert spec is not None and spec.submodule_search_locations
    base = Path(spec.submodule_search_locations[0])
    todo, seen = [(base / "__init__.py", "cuda.compute")], set()
    while todo:
        path, module = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body + [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return node
            if isinstance(node, ast.ImportFrom) and any(a.name == name and (a.asname in (None, name)) for a in node.names):
                parts = module.split(".")[: len(module.split(".")) - node.level + (1 if path.name == "__init__.py" else 0)] \
                    if node.level else []
                target = ".".join(parts + ([node.module] if node.module else [])) if node.level else node.module or ""
                rel = Path(*target.split(".")[2:]) if target.startswith("cuda.compute") else None
                if rel is not None:
                    todo += [(base / rel / "__init__.py", target), (base / rel.with_suffix(".py"), target)]
    return None


def _signature_of(fn: ast.FunctionDef) -> inspect.Signature:
    """An ``inspect.Signature`` with ``fn``'s parameter names, kinds and which have defaults (no annotations)."""
    a = fn.args
    P = inspect.Parameter
    params = []
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(P(arg.arg, kind, default=None if i >= first_default else P.empty))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=P.empty if default is None else None))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


COMPUTE_CALLS = [u for u in _uses() if u["name"].startswith("cuda.compute.") and "nargs" in u]


def test_cuda_compute_calls_bind_to_the_installed_signatures() -> None:
    """content-review-3 N2: ``reduce_into`` takes keywords only (cuda-cccl 1.1.1), so a positional call is a TypeError
    on every GPU. Each call's arguments are bound to the signature read from the installed source."""
    _skip_if_absent("cuda.compute")
    assert any(u["name"] == "cuda.compute.reduce_into" for u in COMPUTE_CALLS), "lab 10 calls cuda.compute.reduce_into"
    for use in COMPUTE_CALLS:
        node = _compute_def(use["name"].split(".")[2])
        assert node is not None, f"{use['where']}: {use['name']} is not defined in the installed cuda-cccl"
        if not isinstance(node, ast.FunctionDef):
            continue
        sig = _signature_of(node)
        try:
            sig.bind(*[object()] * use["nargs"], **{k: object() for k in use["kwargs"]})
        except TypeError as exc:
            pytest.fail(f"{use['where']}: {use['name']}{sig} does not take {use['nargs']} positional argument(s) "
                        f"and {use['kwargs']}: {exc}")


def test_the_compute_signature_reader_sees_keyword_only_parameters() -> None:
    """The reader above must not pass a wrong call: reduce_into's positional form is refused."""
    _skip_if_absent("cuda.compute")
    node = _compute_def("reduce_into")
    assert isinstance(node, ast.FunctionDef)
    sig = _signature_of(node)
    assert list(sig.parameters)[:5] == ["d_in", "d_out", "num_items", "op", "h_init"], sig
    with pytest.raises(TypeError):
        sig.bind(*[object()] * 5)
    sig.bind(d_in=1, d_out=2, num_items=3, op=4, h_init=5)
