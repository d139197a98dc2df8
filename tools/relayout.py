"""Regroup src/labkit into packages by concern (issue 32), mechanically and idempotently.

Applied to main (issue 32): the tree has the layout below; its layer test is ``tests/test_layers.py``, its map
``docs/ARCHITECTURE.md``. Kept as the record of how the move was made.

Run from the repository root on a clean tree: ``python tools/relayout.py`` (``--dry-run`` prints the plan only).
What it does, in order (each step does nothing when it is already done, so a second run changes nothing):

1. the small code moves that break the circles: ``cuda_module`` (``check.harness``) into ``labkit.mode`` (the
   kernels and the video pipeline took it from the check harness); ``bit_fields_html`` and its colour helpers
   from ``widgets/precision.py`` into ``precision.py`` (the number-format module took a widget's HTML helper);
2. rewrites every import inside src/labkit that names a moved module, and every relative import inside a moved
   file, to the absolute new name (the file is parsed with ``ast``; only the import statements change);
3. ``git mv`` of each module into its package (``MOVES``), with each new package's ``__init__.py`` (``PACKAGES``)
   and the data-path fixes of modules that now sit one folder deeper (``PATH_FIXES``);
4. the old names keep working: ``labkit/_moved.py`` holds ``MOVES`` as a table, and ``labkit/__init__.py``
   installs a finder that makes ``import labkit.precision`` (and ``python -m labkit.hub_native``) give the one
   module object that lives at ``labkit.numerics.precision``; notebooks, COURSE.md and JupyterHub configs that
   name ``labkit.hub_native.CourseNativeAuthenticator`` stay unchanged;
5. rewrites file paths that name a moved module in tests/, tools/, benchmarks/, docs/, deploy/, the Makefile and .ci
   (``labkit/_rank_worker.py`` -> ``labkit/dist/_rank_worker.py``, and tests' ``"bench.py"`` under src/labkit);
   ``python -m labkit.<old>`` commands stay as they are: the finder runs the moved module;
6. with ``--format``: ``ruff check --fix`` and ``ruff format`` over src/labkit (pyproject.toml's [tool.ruff]);
7. with ``--mypy-debt``: pyproject.toml's list of modules mypy does not check yet, from mypy's report.

The whole change on a final tree: ``python tools/relayout.py --format --mypy-debt``, then ``make check``.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "labkit"

#: old module (under labkit.) -> new module (under labkit.). A module not named here stays where it is.
MOVES: dict[str, str] = {
    # hw: the hardware records and the models built on them (no GPU needed)
    "hw": "hw",  # hw.py becomes hw/__init__.py: labkit.hw is the records, as before
    "occupancy": "hw.occupancy",
    "roofline": "hw.roofline",
    "topology": "hw.topology",
    "nvml": "hw.nvml",
    # cuda: CUDA C++ and PTX (the C++ stand-in, NVRTC and ptxas compiles, the C++ kernel sources)
    "ptx": "cuda.ptx",
    "cuda_cpp": "cuda.cpp",
    "cuda_host": "cuda.host",
    "kernels_cuda": "cuda.sources",
    # numerics: number formats and block scaling (no GPU code)
    "precision": "numerics.precision",
    "scaling": "numerics.scaling",
    # gpu: running and measuring on a GPU (CuPy helpers, timing, bandwidth, Tensor Cores)
    "bench": "gpu.bench",
    "bandwidth": "gpu.bandwidth",
    "spin": "gpu.spin",
    "gpuerrors": "gpu.errors",
    "cupylab": "gpu.cupylab",
    "tensorcores": "gpu.tensorcores",
    # kernels: the course's Numba kernels and what runs them (lab 09's video pipeline over kernels/video.py)
    "video": "kernels.video_pipeline",
    # dist: many processes (ranks, the rank-side scripts, the MPI ring, DDP, collective cost models)
    "ranks": "dist.ranks",
    "_rank_worker": "dist._rank_worker",
    "_rank_gpu": "dist._rank_gpu",
    "_rank_ddp": "dist._rank_ddp",
    "mpi_ring": "dist.mpi_ring",
    "ddp": "dist.ddp",
    "collectives": "dist.collectives",
    # classroom: the server side of a course (hub, logins, progress, gradebook, MIG, export, work copies)
    "hub_setup": "classroom.hub_setup",
    "hub_native": "classroom.hub_native",
    "progress_service": "classroom.progress_service",
    "gradebook": "classroom.gradebook",
    "mig": "classroom.mig",
    "export": "classroom.export",
    "workcopy": "classroom.workcopy",
    # cli: the `labkit` command (cli.py becomes cli/__init__.py; the entry point labkit.cli:main is unchanged)
    "cli": "cli",
    "doctor": "cli.doctor",
}
#: modules that become a package's __init__.py (their name is unchanged)
BECOME_PACKAGE = {"hw", "cli"}

PACKAGES: dict[str, str] = {
    "hw": "",  # hw.py's own docstring heads it
    "cli": "",
    "cuda": '''"""CUDA C++ and PTX: the C++ stand-in that runs a learner's CUDA C++ on the CPU, NVRTC and ptxas compiles.

- :mod:`.cpp`: compile CUDA C++ (NVRTC on a GPU machine, the C++ stand-in in ``sim`` mode) and launch it;
- :mod:`.host`: the stand-in itself (the source compiled as C++ by the host compiler, with CUDA's built-ins);
- :mod:`.sources`: the course's CUDA C++ kernels (``labkit/kernels/cuda/*.cu``), compiled on demand;
- :mod:`.ptx`: PTX of a Numba kernel or of CUDA C++, and what it says (instructions, registers, spills).
"""
''',
    "numerics": '''"""Number formats and block scaling, exactly, on the CPU (no GPU code).

- :mod:`.precision`: FP32/TF32/FP16/BF16/FP8/FP4 and integer formats: bits, rounding, error, a GEMM in a format;
- :mod:`.scaling`: block scaling (MX formats, Transformer Engine's per-tensor scales).
"""
''',
    "gpu": '''"""Running and measuring on a GPU: CuPy helpers, timing, bandwidth, Tensor Cores.

- :mod:`.bench`: timing with CUDA events (simulator timings in ``sim`` mode), and the ``Timing`` it returns;
- :mod:`.bandwidth`: memory and link bandwidth, measured and modelled; :mod:`.spin`: a GPU kept busy on purpose;
- :mod:`.cupylab`: the CuPy side of labs 05-07 (streams, raw kernels, pipelines); :mod:`.errors`: CUDA errors in words;
- :mod:`.tensorcores`: WMMA and the GEMMs of lab 06.
"""
''',
    "dist": '''"""Many processes: ranks over MPI, the rank-side scripts, the MPI ring, data-parallel training, collective models.

- :mod:`.ranks`: start ``n`` ranks (``mpiexec``), run a function on each, collect the results;
- ``_rank_worker.py`` / ``_rank_gpu.py`` / ``_rank_ddp.py``: what each rank runs (scripts, imported by the worker
  inside each rank, never by labkit itself);
- :mod:`.mpi_ring`: the ring all-reduce of lab 08; :mod:`.ddp`: data-parallel training on ranks;
- :mod:`.collectives`: cost models of collectives (ring, tree, NVLS) on a topology.
"""
''',
    "classroom": '''"""The server side of a course: JupyterHub setup and logins, progress and the gradebook, MIG, export, work copies.

Nothing here is imported by the labs; the ``labkit`` command (:mod:`labkit.cli`) and JupyterHub's config use it.
"""
''',
}

CLI_MAIN = '''"""``python -m labkit.cli ...``: the ``labkit`` command."""

import os
import sys

from labkit.cli import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
'''

#: (new module, old text, new text): data paths of modules now one folder deeper
PATH_FIXES: list[tuple[str, str, str]] = [
    (
        "hw",
        'DATA_FILE = Path(__file__).with_name("data") / "hw.yml"',
        'DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "hw.yml"',
    ),
    (
        "cuda.sources",
        'CUDA_DIR = Path(__file__).parent / "kernels" / "cuda"',
        'CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"',
    ),
    (
        "cli",
        'LAB_CONFIG = Path(__file__).resolve().parent / "data" / "jupyter"',
        'LAB_CONFIG = Path(__file__).resolve().parents[1] / "data" / "jupyter"',
    ),
]

#: folders and files outside src/ whose paths and `python -m` commands are rewritten
OUTSIDE = [
    "tests",
    "tools",
    "benchmarks",
    "docs",
    "deploy",
    "notebooks/src",
    "site",
    "Makefile",
    ".ci",
    "README.md",
    "pyproject.toml",
]
TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".service", ".j2", ".json", ""}


def log(msg: str) -> None:
    print(f"relayout: {msg}")


def new_path(new_mod: str, old_mod: str) -> Path:
    """File of a module in the new layout."""
    if old_mod in BECOME_PACKAGE:
        return SRC / new_mod.replace(".", "/") / "__init__.py"
    return SRC / (new_mod.replace(".", "/") + ".py")


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def map_module(name: str) -> str:
    """labkit.<old>[.rest] -> labkit.<new>[.rest]; anything else unchanged."""
    if not name.startswith("labkit."):
        return name
    rest = name[len("labkit.") :]
    head, _, tail = rest.partition(".")
    if head in MOVES:
        return "labkit." + MOVES[head] + ("." + tail if tail else "")
    return name


# ---------------------------------------------------------------------------------------------- 1. code moves
def move_cuda_module(dry: bool) -> None:
    """``cuda_module()`` into labkit.mode; the harness re-exports it, kernels and video take it from mode."""
    mode = SRC / "mode.py"
    harness = SRC / "check" / "harness.py"
    text = harness.read_text()
    block = (
        "def cuda_module() -> Any:\n"
        '    """``numba.cuda`` (the simulator in ``sim`` mode: labkit.setup() must have run first)."""\n'
        "    current_mode()  # make sure the mode (and NUMBA_ENABLE_CUDASIM) is set before numba is imported\n"
        "    from numba import cuda\n\n    return cuda\n\n\n"
    )
    if block not in text:
        if "def cuda_module(" in text:
            log("WARNING: check/harness.py's cuda_module changed; move it to labkit.mode by hand (circle kernels <-> check)")
        return
    log("code move: check.harness.cuda_module -> labkit.mode.cuda_module")
    if dry:
        return
    harness.write_text(
        text.replace(block, "").replace(
            "from ..mode import current_mode\n",
            "from ..mode import cuda_module  # re-exported: checks and kernels call harness.cuda_module\n"
            "from ..mode import current_mode\n",
            1,
        )
    )
    mtext = mode.read_text()
    if "def cuda_module(" not in mtext:
        mtext = mtext.rstrip("\n") + "\n\n\n" + block.replace("    current_mode()", "    current_mode()").rstrip("\n") + "\n"
        mode.write_text(mtext)
    for rel in ("kernels/__init__.py", "video.py", "kernels/video_pipeline.py"):
        p = SRC / rel
        if p.exists():
            p.write_text(
                p.read_text()
                .replace("from ..check.harness import cuda_module", "from ..mode import cuda_module")
                .replace("from .check.harness import cuda_module", "from .mode import cuda_module")
                .replace("from labkit.check.harness import cuda_module", "from labkit.mode import cuda_module")
            )


def move_bit_fields_html(dry: bool) -> None:
    """``bit_fields_html`` (and ``_COLOURS``, ``_span``) from widgets/precision.py to the end of precision.py."""
    widget = SRC / "widgets" / "precision.py"
    prec = SRC / "precision.py" if (SRC / "precision.py").exists() else SRC / "numerics" / "precision.py"
    wtext = widget.read_text()
    tree = ast.parse(wtext)
    lines = wtext.splitlines(keepends=True)
    take = []
    for node in tree.body:
        names = (
            [node.name]
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            else [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        )
        if set(names) & {"bit_fields_html", "_span", "_COLOURS"}:
            start = node.lineno - 1 - (len(node.decorator_list) if hasattr(node, "decorator_list") else 0)
            take.append((start, node.end_lineno))
    if not take:
        return
    log("code move: widgets.precision.bit_fields_html -> precision.bit_fields_html")
    if dry:
        return
    moved = "".join("".join(lines[a:b]).rstrip("\n") + "\n\n\n" for a, b in take)
    moved = moved.replace("P.BitFields", "BitFields")
    for a, b in sorted(take, reverse=True):
        end = b
        while end < len(lines) and not lines[end].strip():
            end += 1
        del lines[a:end]
    wtext = "".join(lines)
    anchor = "from . import _reopen" if "from . import _reopen" in wtext else None
    imp = "from ..precision import _COLOURS, _span, bit_fields_html  # noqa: F401  (re-exported: the widget's names)\n"
    # after the last top-level import
    tree = ast.parse(wtext)
    last = max(n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    wl = wtext.splitlines(keepends=True)
    wl.insert(last, imp)
    widget.write_text("".join(wl))
    ptext = prec.read_text().replace("        from .widgets.precision import bit_fields_html\n", "")
    ptext = (
        ptext.rstrip("\n")
        + "\n\n\n# ------------------------------------------------ bit fields as HTML (the explorers and _repr_html_)\n"
        + moved.rstrip("\n")
        + "\n"
    )
    prec.write_text(ptext)
    del anchor


def trace_setup_import(dry: bool) -> None:
    """sim/trace.py's subprocess side called ``labkit.setup`` from inside the simulator package (sim -> mode -> sim,
    a circle); the subprocess's command line sets the mode up before it imports the simulator instead."""
    p = SRC / "sim" / "trace.py"
    old_setup = "        import labkit\n\n        labkit.setup(quiet=True)\n"
    old_cmd = '"from labkit.sim.trace import _serve; _serve()"'
    new_cmd = '"import labkit; labkit.setup(quiet=True); from labkit.sim.trace import _serve; _serve()"'
    text = p.read_text()
    if old_setup in text and old_cmd in text:
        log("sim/trace.py: the trace subprocess sets the mode up on its command line, not inside labkit.sim")
        if not dry:
            p.write_text(text.replace(old_setup, "").replace(old_cmd, new_cmd))
    elif old_setup in text or old_cmd in text:
        log("WARNING: sim/trace.py changed; edit by hand: the trace subprocess's setup out of _serve")


def bit_fields_imports(dry: bool) -> None:
    """What the moved ``bit_fields_html`` needs in precision.py: ``html`` and ``describe``."""
    prec = SRC / "precision.py" if (SRC / "precision.py").exists() else SRC / "numerics" / "precision.py"
    text = prec.read_text()
    if "def bit_fields_html" not in text or "\nimport html\n" in text:
        return
    log("precision.py: imports html and validate.describe for bit_fields_html")
    if not dry:
        text = text.replace("import difflib\n", "import difflib\nimport html\n", 1)
        text = text.replace(
            "from labkit.errors import LabkitError\n",
            "from labkit.errors import LabkitError\nfrom labkit.validate import describe\n",
            1,
        )
        text = text.replace(
            "from .errors import LabkitError\n", "from .errors import LabkitError\nfrom .validate import describe\n", 1
        )
        prec.write_text(text)


# --------------------------------------------------------------------------------------------- 2. import rewrite
def _resolve(base_pkg: str, node: ast.ImportFrom) -> str:
    base = node.module or ""
    if node.level:
        parts = base_pkg.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def rewrite_imports(path: Path, old_name: str, new_name: str, modules: set[str]) -> str | None:
    """The file's text with its imports rewritten for the new layout, or None if nothing changes."""
    text = path.read_text()
    tree = ast.parse(text)
    is_pkg = path.name == "__init__.py"
    old_pkg = old_name if is_pkg else old_name.rpartition(".")[0]
    moved = old_name != new_name or (old_name.rpartition(".")[2] in BECOME_PACKAGE and not is_pkg)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _resolve(old_pkg, node)
        if not base.startswith("labkit"):
            continue
        groups: dict[str, list[str]] = {}
        changed = bool(node.level) and moved
        for alias in node.names:
            full = f"{base}.{alias.name}"
            as_ = f" as {alias.asname}" if alias.asname else ""
            if full in modules:  # `from . import ptx`: a module
                target = map_module(full)
                parent, _, leaf = target.rpartition(".")
                if not alias.asname and leaf != alias.name:  # cuda_cpp -> cuda.cpp: the file keeps its local name
                    as_ = f" as {alias.name}"
                groups.setdefault(parent, []).append(f"{leaf}{as_}")
                changed |= target != full
            else:
                target = map_module(base)
                groups.setdefault(target, []).append(f"{alias.name}{as_}")
                changed |= target != base
        if not changed:
            continue
        indent = " " * node.col_offset
        stmt = f"\n{indent}".join(f"from {mod} import {', '.join(names)}" for mod, names in groups.items())
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, stmt))
    if not edits:
        return None
    for l0, c0, l1, c1, stmt in sorted(edits, reverse=True):
        first, last = lines[l0 - 1], lines[l1 - 1]
        lines[l0 - 1 : l1] = [first[:c0] + stmt + last[c1:]]
    return "".join(lines)


# ----------------------------------------------------------------------------------------------- 3. the moves
def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def do_moves(dry: bool) -> None:
    modules = {module_name(p) for p in SRC.rglob("*.py")}
    # imports first, while every file is still where its relative imports point
    for path in sorted(SRC.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        old = module_name(path)
        new = map_module(old) if old.count(".") == 1 else old  # only labkit.<module> files move
        out = rewrite_imports(path, old, new, modules)
        if out is not None:
            log(f"imports: {path.relative_to(ROOT)}")
            if not dry:
                path.write_text(out)
    for old, new in MOVES.items():
        src = SRC / f"{old}.py"
        dst = new_path(new, old)
        if not src.exists():
            continue
        log(f"git mv {src.relative_to(ROOT)} {dst.relative_to(ROOT)}")
        if dry:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(src), str(dst))
    for pkg, doc in PACKAGES.items():
        init = SRC / pkg / "__init__.py"
        if doc and not init.exists():
            log(f"new package {init.relative_to(ROOT)}")
            if not dry:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(doc)
                git("add", str(init))
    main = SRC / "cli" / "__main__.py"
    if (SRC / "cli" / "__init__.py").exists() and not main.exists():
        log("new file src/labkit/cli/__main__.py (`python -m labkit.cli`, as before)")
        if not dry:
            main.write_text(CLI_MAIN)
            git("add", str(main))
    for mod, old_text, new_text in PATH_FIXES:
        p = new_path(mod, next(k for k, v in MOVES.items() if v == mod))
        if p.exists() and old_text in p.read_text():
            log(f"data path: {p.relative_to(ROOT)}")
            if not dry:
                p.write_text(p.read_text().replace(old_text, new_text))


# ------------------------------------------------------------------------------------------- 4. the old names
MOVED_MODULE = '''"""Where labkit's modules moved (issue 32): old name -> new name. :mod:`labkit` installs a finder that makes
``import labkit.<old>`` (and ``python -m labkit.<old>``) give the module that lives at the new name: one module
object under both names, so a monkeypatch or a JupyterHub config that names the old one reaches the real one.
``tools/relayout.py`` wrote this table; tests/test_layers.py checks that every entry resolves."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

MOVED: dict[str, str] = {
%s}


#: new name -> the old (public) name: what notebooks and messages call a module
PUBLIC: dict[str, str] = {f"labkit.{v}": f"labkit.{k}" for k, v in MOVED.items()}


def public_name(module: str) -> str:
    """``labkit.numerics.precision`` -> ``labkit.precision`` (and ``labkit.numerics.precision.x`` likewise); other
    names unchanged."""
    for new in sorted(PUBLIC, key=len, reverse=True):
        if module == new or module.startswith(new + "."):
            return PUBLIC[new] + module[len(new):]
    return module


class _Alias(importlib.abc.Loader):
    """Loads an old name: imports the new one and leaves it in sys.modules under the old name, which is the
    module the import system then hands back (the placeholder it made is dropped)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module replaces it

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.target)

    def get_code(self, fullname: str) -> Any:  # `python -m labkit.<old>` runs the new module as __main__
        return compile(f"import runpy; runpy.run_module({self.target!r}, run_name='__main__', alter_sys=True)",
                       f"<labkit alias {fullname} -> {self.target}>", "exec")


class AliasFinder(importlib.abc.MetaPathFinder):
    """``labkit.<old>`` -> ``labkit.<new>`` for every entry of :data:`MOVED`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname[len("labkit."):]) if fullname.startswith("labkit.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias("labkit." + new))


def install() -> None:
    """Put the finder on sys.meta_path once."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(AliasFinder())
'''

INIT_HOOK = """
from ._moved import install as _install_moved

_install_moved()  # labkit.<old module> -> its new package (labkit._moved.MOVED)
"""


def write_aliases(dry: bool) -> None:
    table = "".join(f'    "{k}": "{v}",\n' for k, v in MOVES.items() if k != v)
    text = MOVED_MODULE % table
    p = SRC / "_moved.py"
    current = None
    if p.exists():  # compare the table, not the text (ruff format may have laid it out since)
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MOVED":
                current = ast.literal_eval(node.value)
    if current != {k: v for k, v in MOVES.items() if k != v}:
        log("labkit/_moved.py: the old names")
        if not dry:
            p.write_text(text)
            git("add", str(p))
    init = SRC / "__init__.py"
    itext = init.read_text()
    if "_install_moved" not in itext:
        log("labkit/__init__.py: installs the finder")
        if not dry:
            anchor = "from .mode import Environment, current_mode, env, setup, size\n"
            init.write_text(itext.replace(anchor, anchor + INIT_HOOK, 1))


# ------------------------------------------------------------------------------------------ 5. outside src/
def rewrite_outside(dry: bool) -> None:
    subs: list[tuple[re.Pattern[str], str]] = []
    for old, new in MOVES.items():
        if old == new:
            continue
        newfile = f"labkit/{new.replace('.', '/')}" + ("/__init__.py" if old in BECOME_PACKAGE else ".py")
        subs.append((re.compile(rf"labkit/{re.escape(old)}\.py\b"), newfile))
        subs.append(
            (
                re.compile(rf'"labkit" / "{re.escape(old)}\.py"'),
                " / ".join(f'"{p}"' for p in ["labkit", *new.split(".")[:-1], new.split(".")[-1] + ".py"]),
            )
        )
    # tests that name a module's file relative to src/labkit: "bench.py" -> "gpu/bench.py"
    quoted = [
        (
            re.compile(rf'(["\'])({re.escape(old)})\.py\1'),
            rf"\g<1>{new.replace('.', '/')}{'/__init__' if old in BECOME_PACKAGE else ''}.py\g<1>",
        )
        for old, new in MOVES.items()
        if old != new or old in BECOME_PACKAGE
    ]
    for f in sorted((ROOT / "tests").glob("test_*.py")):
        if f.name == "test_layers.py":
            continue
        text = f.read_text()
        out = text
        for pat, rep in quoted:
            out = pat.sub(rep, out)
        if out != text:
            log(f"file names: {f.relative_to(ROOT)}")
            if not dry:
                f.write_text(out)
    for entry in OUTSIDE:
        base = ROOT / entry
        files = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for f in files:
            if (
                not f.is_file()
                or f.suffix not in TEXT_SUFFIXES
                or "_build" in f.parts
                or f.name in ("relayout.py", "ARCHITECTURE.md")
            ):
                continue
            try:
                text = f.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            out = text
            for pat, rep in subs:
                out = pat.sub(rep, out)
            if out != text:
                log(f"paths: {f.relative_to(ROOT)}")
                if not dry:
                    f.write_text(out)


ENTRIES_DOC = '''"""PTX entries, compiles for the course's architectures and launch checks: what an NVRTC launch
(:mod:`labkit.cuda.cpp`) and the C++ stand-in (:mod:`labkit.cuda.host`) share. Split from ``cuda_cpp`` (issue 32)
so that the stand-in no longer imports the module that imports it; ``labkit.cuda.cpp`` re-exports every name."""

'''


def split_cuda_entries(dry: bool) -> None:
    """Break the circle cuda.cpp <-> cuda.host <-> cuda.sources: cpp's PTX-entry and launch-check half (from
    ``COURSE_ARCHES`` to ``_ptx_sm90``) becomes cuda/entries.py; ``CUDA_DIR`` moves to cuda/__init__.py."""
    cpp, entries, host, sources = (SRC / "cuda" / f"{n}.py" for n in ("cpp", "entries", "host", "sources"))
    if not cpp.exists() or entries.exists():
        return
    text = cpp.read_text()
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    body = tree.body
    try:
        first = next(
            i
            for i, n in enumerate(body)
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COURSE_ARCHES" for t in n.targets)
        )
        last = next(i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef) and n.name == "_ptx_sm90")
    except StopIteration:
        log("WARNING: cuda/cpp.py has no COURSE_ARCHES ... _ptx_sm90 block; split it by hand (circle cpp <-> host)")
        return
    imports_end = max(n.end_lineno for n in body[:first] if isinstance(n, (ast.Import, ast.ImportFrom)))
    start, end = imports_end, body[last].end_lineno  # 0-based start: the line after the imports (comments included)
    names: list[str] = []
    for n in body[first : last + 1]:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.append(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    log(f"code move: cuda/cpp.py's entries and launch checks -> cuda/entries.py ({len(names)} names)")
    if dry:
        return
    header = "".join(ln for ln in lines[:imports_end] if not ln.startswith("from labkit.cuda.host import"))
    header = header[header.index("from __future__") :]
    entries.write_text(ENTRIES_DOC + header.rstrip("\n") + "\n\n" + "".join(lines[start:end]).strip("\n") + "\n")
    reexport = (
        "from labkit.cuda.entries import "
        + ", ".join(names)
        + "  # noqa: F401  (re-exported: labkit.cuda_cpp's names as before)\n"
    )
    cpp.write_text("".join(lines[:start]) + reexport + "".join(lines[end:]))
    git("add", str(entries))
    h = host.read_text()
    h = re.sub(r"from labkit\.cuda\.cpp import ", "from labkit.cuda.entries import ", h)
    h = h.replace("from labkit.cuda.sources import CUDA_DIR", "from labkit.cuda import CUDA_DIR")
    host.write_text(h)
    src = sources.read_text()
    old_dir = 'CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"\n'
    if old_dir in src:
        sources.write_text(src.replace(old_dir, "from labkit.cuda import CUDA_DIR  # noqa: E402  (re-exported)\n"))
    init = SRC / "cuda" / "__init__.py"
    itext = init.read_text()
    if "CUDA_DIR" not in itext:
        init.write_text(
            itext
            + "\nfrom pathlib import Path\n\n#: The course's CUDA C++ sources (*.cu) and the stand-in's headers (host/*.h).\n"
            'CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"\n'
        )
    subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F401", "--fix", "--quiet", str(cpp), str(entries), str(sources)],
        cwd=ROOT,
        check=False,
    )


STANDALONE_DOC = '''"""A Numba kernel as the source of a module of its own: the kernel, its device functions and the globals it
uses, for another process (the PTX worker of :mod:`labkit.cuda.ptx`, the trace subprocess of :mod:`.trace`).
Moved from ``labkit.ptx`` (issue 32) so that the simulator no longer imports the CUDA package above it."""

'''
STANDALONE_NAMES = ("_module_import", "_names", "_function_source", "_UNSUPPORTED_GLOBAL", "_standalone_source")


def split_standalone_source(dry: bool) -> None:
    """sim/trace.py took ``_standalone_source`` from the PTX module (sim -> cuda, up a layer): the block from
    ``_module_import`` to ``_standalone_source`` becomes sim/standalone.py; cuda/ptx.py imports it from there."""
    ptx, new, trace = SRC / "cuda" / "ptx.py", SRC / "sim" / "standalone.py", SRC / "sim" / "trace.py"
    if not ptx.exists() or new.exists():
        return
    text = ptx.read_text()
    tree = ast.parse(text)
    body = tree.body
    idx = {
        getattr(n, "name", None) or next((t.id for t in getattr(n, "targets", []) if isinstance(t, ast.Name)), None): i
        for i, n in enumerate(body)
    }
    if any(name not in idx for name in STANDALONE_NAMES):
        log("WARNING: cuda/ptx.py's _standalone_source block changed; move it to sim/ by hand (sim.trace -> cuda.ptx)")
        return
    first, last = min(idx[n] for n in STANDALONE_NAMES), max(idx[n] for n in STANDALONE_NAMES)
    inside = {
        getattr(n, "name", None) or next((t.id for t in getattr(n, "targets", []) if isinstance(t, ast.Name)), None)
        for n in body[first : last + 1]
    }
    if inside != set(STANDALONE_NAMES):
        log(f"WARNING: cuda/ptx.py: other code between _module_import and _standalone_source ({inside}); move by hand")
        return
    log("code move: cuda/ptx.py's _standalone_source and its helpers -> sim/standalone.py")
    if dry:
        return
    lines = text.splitlines(keepends=True)
    start, end = body[first].lineno - 1, body[last].end_lineno
    imports_end = max(n.end_lineno for n in body[:first] if isinstance(n, (ast.Import, ast.ImportFrom)))
    header = "".join(lines[:imports_end])
    header = header[header.index("from __future__") :]
    new.write_text(STANDALONE_DOC + header.rstrip("\n") + "\n\n\n" + "".join(lines[start:end]).strip("\n") + "\n")
    git("add", str(new))
    reexport = (
        "from labkit.sim.standalone import "
        + ", ".join(sorted(STANDALONE_NAMES))
        + "  # noqa: F401  (re-exported: labkit.ptx's names as before)\n"
    )
    rest = lines[:start] + lines[end:]
    rest.insert(imports_end, reexport)
    ptx.write_text("".join(rest))
    t = trace.read_text()
    trace.write_text(
        t.replace("from labkit.cuda.ptx import _standalone_source", "from labkit.sim.standalone import _standalone_source")
    )
    subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F401", "--fix", "--quiet", str(new)], cwd=ROOT, check=False
    )


#: (file, old text, new text): tests that name labkit's modules by ``__module__`` (now the new name) and compare
#: with the public (old) names; they translate with labkit._moved.public_name
TEST_EDITS: list[tuple[str, str, str]] = [
    (
        "tests/test_api_junk.py",
        '    for info in pkgutil.walk_packages(labkit.__path__, "labkit."):\n        name = info.name\n',
        '    for info in pkgutil.walk_packages(labkit.__path__, "labkit."):\n        name = public_name(info.name)\n',
    ),
    (
        "tests/test_api_junk.py",
        "    return [importlib.import_module(n) for n in sorted(found)]\n",
        "    return [importlib.import_module(n) for n in sorted(set(found))]\n",
    ),
    (
        "tests/test_api_junk.py",
        '            out.append((f"{module.__name__}.{n}", v))\n',
        '            out.append((f"{public_name(module.__name__)}.{n}", v))\n',
    ),
    (
        "tests/test_api_junk.py",
        '            home = getattr(f, "__module__", "") or ""\n',
        '            home = public_name(getattr(f, "__module__", "") or "")\n',
    ),
    (
        "tests/test_api_junk.py",
        '            seen.setdefault(f"{f.__module__}.{f.__name__}" if f.__module__.startswith("labkit") else qual, f)\n',
        '            seen.setdefault(f"{public_name(f.__module__)}.{f.__name__}" if f.__module__.startswith("labkit") else qual, f)\n',
    ),
    (
        "tests/test_api_junk.py",
        "from labkit.errors import LabkitError\n",
        "from labkit._moved import public_name\nfrom labkit.errors import LabkitError\n",
    ),
]


def edit_tests(dry: bool) -> None:
    for rel, old, new in TEST_EDITS:
        p = ROOT / rel
        text = p.read_text() if p.exists() else ""
        if new in text:
            continue
        if old not in text:
            log(f"WARNING: {rel}: anchor not found, edit by hand: {old.strip()!r} -> {new.strip()!r}")
            continue
        log(f"test edit: {rel}")
        if not dry:
            p.write_text(text.replace(old, new, 1))


DEBT_BEGIN = "# relayout: mypy debt (begin)\n"
DEBT_END = "# relayout: mypy debt (end)\n"


def mypy_debt(dry: bool) -> None:
    """Write pyproject.toml's list of modules mypy does not check yet: those with type errors now, from mypy's report
    (run with the list empty). Afterwards the list may only shrink; a second run writes the same list."""
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text()
    if DEBT_BEGIN not in text or DEBT_END not in text:
        log("WARNING: pyproject.toml has no mypy debt markers; skipped")
        return
    head, rest = text.split(DEBT_BEGIN, 1)
    _, tail = rest.split(DEBT_END, 1)
    if dry:
        log("mypy debt: would run mypy and list the modules with errors")
        return
    pyproject.write_text(head + DEBT_BEGIN + DEBT_END + tail)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True, text=True)
    if "No module named mypy" in proc.stderr:
        log("WARNING: mypy is not installed (pip install -c constraints.txt -e '.[dev]'); the debt list is empty")
        pyproject.write_text(text)
        return
    bad = sorted({module_name(ROOT / m.group(1)) for m in re.finditer(r"^(src/labkit/\S+?\.py):\d+: error:", proc.stdout, re.M)})
    block = ""
    if bad:
        block = "[[tool.mypy.overrides]]\nmodule = [\n" + "".join(f'    "{m}",\n' for m in bad) + "]\nignore_errors = true\n"
    pyproject.write_text(head + DEBT_BEGIN + block + DEBT_END + tail)
    log(f"mypy debt: {len(bad)} modules not type-checked yet (pyproject.toml)")


#: top-level modules that stay in labkit/ (the foundation layer of tests/test_layers.py)
FOUNDATION = {"__init__", "_moved", "errors", "validate", "course", "figstyle", "device", "progress", "mode", "learner_frames"}


def unplaced() -> list[str]:
    """Top-level modules this script does not know: a module added since it was written (place it in MOVES or in
    FOUNDATION, and in tests/test_layers.py's LAYERS)."""
    return sorted(p.stem for p in SRC.glob("*.py") if p.stem not in FOUNDATION and p.stem not in MOVES)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    ap.add_argument("--format", action="store_true", help="then run ruff check --fix and ruff format over src/labkit")
    ap.add_argument("--mypy-debt", action="store_true", help="then list in pyproject.toml the modules mypy fails on")
    args = ap.parse_args(argv)
    for name in unplaced():
        log(f"WARNING: src/labkit/{name}.py is not in MOVES or FOUNDATION: it stays where it is; place it and rerun")
    move_cuda_module(args.dry_run)
    move_bit_fields_html(args.dry_run)
    bit_fields_imports(args.dry_run)
    trace_setup_import(args.dry_run)
    do_moves(args.dry_run)
    split_cuda_entries(args.dry_run)
    split_standalone_source(args.dry_run)
    write_aliases(args.dry_run)
    rewrite_outside(args.dry_run)
    edit_tests(args.dry_run)
    if args.format and not args.dry_run:
        subprocess.run([sys.executable, "-m", "ruff", "check", "--fix", "--quiet", "src/labkit"], cwd=ROOT, check=False)
        subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", "src/labkit"], cwd=ROOT, check=False)
        log("ruff: src/labkit fixed and formatted (pyproject.toml [tool.ruff])")
    if args.mypy_debt:
        mypy_debt(args.dry_run)
    left = unplaced()
    log("done" + (f"; not placed: {', '.join(left)}" if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
