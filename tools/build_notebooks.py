#!/usr/bin/env python3
"""Build the learner and solution notebooks from their one source, ``notebooks/src/NN-topic.py``.

The source is a jupytext "percent" script. Exercise cells carry the tag ``exercise`` and hold both
versions of the learner's code::

    # BEGIN SOLUTION
    ...the solved code...
    # END SOLUTION
    # BEGIN SKELETON
    ...what the learner starts from (``...`` or a body that does nothing)...
    # END SKELETON

``notebooks/NN-topic.ipynb`` gets the skeletons and no outputs; ``notebooks/solutions/NN-topic.ipynb``
gets the solutions. In the solution notebook every check cell (a cell calling ``labkit.check.``) is tagged
``nbval-check-output``; ``--execute`` runs the notebook in ``sim`` mode and stores the outputs of those cells,
which the tests compare (after sanitising), and what the other cells showed, text and figures, which nothing
compares but a reader (and the website, ``make site``) sees: ``tools/notebook_outputs.py`` says what is kept.

    python tools/build_notebooks.py [--execute] [--check] [NAMES...]

``--check`` rebuilds in memory and fails if a committed notebook differs from its source (outputs aside).

A solution notebook says what it is: its title ends in "(solutions)", a banner under it links the lab to try first,
and its notebook metadata carries ``labkit: {"notebook": "solution"}``. Its links to other notebooks lead to the
learner labs (``../NN-topic.ipynb``): after reading a solution a learner goes on to *do* the next lab, and every
"Next" link in the course leads the same way. Nothing else differs from the learner notebook outside exercises
(:func:`solution_markdown` is the whole difference; tests/test_structure.py holds the two in lockstep with it).

The lab's first code cell, ``import labkit`` then ``env = labkit.setup()``, carries the tag ``bootstrap`` in the
source; both notebooks get it as :func:`bootstrap_source` writes it: when labkit cannot be imported (the notebook opened
in Colab, Binder or on its own after a download) it installs the course's labkit from the repository set in
``pyproject.toml`` (``[tool.labkit] repository``, at the tag ``ref``, default ``v<version>``) and says so in one line,
or, with no repository set, says the one command to run; inside the course (``labkit lab``, a hub) it only imports.

Both notebooks get the kernelspec that JupyterLab's Python kernel reports (``python3``, "Python 3 (ipykernel)"),
so JupyterLab has nothing to rewrite when it opens one; ``labkit lab``'s work copies add this machine's
``language_info`` (labkit.workcopy), the other field JupyterLab fills in from the running kernel.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import tomllib
from pathlib import Path

import jupytext
import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_outputs  # noqa: E402  (tools/notebook_outputs.py)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "notebooks" / "src"
LEARNER = ROOT / "notebooks"
SOLUTIONS = ROOT / "notebooks" / "solutions"
CHECKED = "nbval-check-output"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN SKELETON", "END SKELETON")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
#: a Markdown link to a sibling notebook, ``[Lab 02](02-first-kernels.ipynb#part)``
SIBLING = re.compile(r"\]\((\d\d-[A-Za-z0-9_-]+\.ipynb(?:#[^)\s]*)?)\)")
TITLE = re.compile(r"\A(# Lab (\d\d) — [^\n]*)")


BOOTSTRAP = "bootstrap"
#: what a source's bootstrap cell holds (the build adds the install guard around it)
BOOTSTRAP_SOURCE = "import labkit\n\nenv = labkit.setup()"


def course_repository() -> tuple[str, str]:
    """(repository URL, git ref) from ``pyproject.toml``'s ``[tool.labkit]``: the one place the course says where it
    lives; ("", ref) when no repository is set. The ref defaults to the tag ``v<version>``."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tool = pyproject.get("tool", {}).get("labkit", {})
    ref = tool.get("ref") or f"v{pyproject['project']['version']}"
    return str(tool.get("repository", "")).strip().rstrip("/"), ref


def clone_command(repository: str) -> str:
    """The shell line that gets and starts the course from ``repository``."""
    name = repository.rsplit("/", 1)[-1].removesuffix(".git")
    return f"git clone {repository} && cd {name} && make lab"


def bootstrap_source(repository: str, ref: str) -> str:
    """The lab's first code cell: import labkit; where it is missing, install it from ``repository`` at ``ref`` (with
    CuPy for the driver's CUDA major when ``nvidia-smi`` sees a GPU) and say so in one line; then ``labkit.setup()``,
    which chooses the mode (gpu where a GPU and CuPy work, else sim) and says it in its own line. With no repository,
    a missing labkit is a short error naming the one thing to do."""
    if not repository:
        return (
            "try:  # labkit, the course's library, comes with the course\n"
            "    import labkit\n"
            "except ModuleNotFoundError:\n"
            "    raise ModuleNotFoundError(\n"
            "        \"labkit is not installed: this notebook is a lab of a course; get the course and run `make lab` in \"\n"
            "        \"its folder (its README says how)\"\n"
            "    ) from None\n\n" + BOOTSTRAP_SOURCE.split("\n")[-1]
        )
    want = f"git+{repository}@{ref}"
    return f"""try:  # labkit, the course's library; opened outside the course (Colab, Binder, a download), this installs it
    import labkit
except ModuleNotFoundError:
    import importlib, shutil, subprocess, sys

    smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout if shutil.which("nvidia-smi") else ""
    extra = "[cuda13]" if "CUDA Version: 13" in smi else "[cuda12]" if "CUDA Version" in smi else ""
    want = f"labkit{{extra}} @ {want}"
    print(f"labkit is missing: installing {{want}}" + (" (a GPU is here: with CuPy)" if extra else ""), end=" ... ", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", want], capture_output=True, text=True)
    if pip.returncode:
        raise ModuleNotFoundError(
            f"failed:\\n{{pip.stderr[-1500:]}}\\nGet the course instead: {clone_command(repository)}"
        ) from None
    importlib.invalidate_caches()
    print("done")
    import labkit

{BOOTSTRAP_SOURCE.split(chr(10))[-1]}"""


def solution_markdown(source: str, index: int, stem: str) -> str:
    """A learner notebook's Markdown cell as the solution notebook shows it: links to the learner labs; in the
    first cell, "(solutions)" after the title and a banner under it."""
    out = SIBLING.sub(r"](../\1)", source)
    if index == 0:
        out = TITLE.sub(lambda m: (
            f"{m.group(1)} (solutions)\n\n"
            f"> **Solution notebook.** Every exercise here is solved and every check passes. Try it yourself first "
            f"in [Lab {m.group(2)}](../{stem}.ipynb); links in this notebook lead to the learner labs."), out, count=1)
    return out


def split_exercise(source: str, keep: str) -> str:
    """Keep the ``SOLUTION`` or the ``SKELETON`` blocks of an exercise cell's source."""
    drop = "SKELETON" if keep == "SOLUTION" else "SOLUTION"
    out, skipping, seen = [], False, set()
    for line in source.splitlines():
        marker = line.strip().lstrip("#").strip()
        if marker in MARKERS:
            seen.add(marker)
            skipping = marker == f"BEGIN {drop}"
            continue
        if not skipping:
            out.append(line)
    if not {"BEGIN SOLUTION", "END SOLUTION", "BEGIN SKELETON", "END SKELETON"} <= seen:
        raise ValueError(f"exercise cell lacks SOLUTION or SKELETON markers:\n{source[:200]}")
    return "\n".join(out).rstrip() + "\n" if out else ""


def build(src: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(learner, solution) notebooks from one source file."""
    nb = jupytext.read(src)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    bootstrap = bootstrap_source(*course_repository())
    for cell in nb.cells:
        if BOOTSTRAP in cell.metadata.get("tags", []):
            if cell.source.strip() != BOOTSTRAP_SOURCE:
                raise ValueError(f"{src.name}: the cell tagged {BOOTSTRAP!r} must hold exactly {BOOTSTRAP_SOURCE!r}")
            cell.source = bootstrap
    learner, solution = copy.deepcopy(nb), copy.deepcopy(nb)
    solution.metadata["labkit"] = {"notebook": "solution"}
    for version, keep in ((learner, "SKELETON"), (solution, "SOLUTION")):
        for i, cell in enumerate(version.cells):
            cell.id = f"{src.stem[:2]}-{i:03d}"  # stable ids keep diffs small
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
                tags = cell.metadata.get("tags", [])
                if "exercise" in tags:
                    cell.source = split_exercise(cell.source, keep).rstrip("\n")
                elif keep == "SOLUTION" and "labkit.check." in cell.source and "nbval-ignore-output" not in tags:
                    cell.metadata["tags"] = [*tags, CHECKED]
            else:
                cell.pop("outputs", None)
                cell.pop("execution_count", None)
                if keep == "SOLUTION" and cell.cell_type == "markdown":
                    cell.source = solution_markdown(cell.source, i, src.stem)
    return learner, solution


def execute(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    """Run a notebook in ``sim`` mode as the solution tests do, keeping its outputs."""
    from nbclient import NotebookClient

    os.environ["LABKIT_MODE"] = "sim"
    os.environ["LABKIT_EXPECT"] = "solved"
    os.environ.pop("LABKIT_PTX_AUDIT", None)
    # as notebooks/conftest.py runs them: MPI cells and checks start 4 processes at most, so the outputs they store
    # (process counts) are the ones the notebook tests compare with, whatever machine builds them
    os.environ["LABKIT_MAX_RANKS"] = "4"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    # check cells keep their outputs for nbval; the others keep text and figures (the website shows them), each
    # explorer becomes a static picture of its state, and the widget state (large, dead without a kernel) goes
    notebook_outputs.keep(nb, CHECKED)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def _strip(nb: nbformat.NotebookNode) -> list[tuple[str, str, tuple[str, ...]]]:
    """What must agree between a committed notebook and its source: each cell's type, source and tags."""
    return [(c.cell_type, c.source, tuple(c.metadata.get("tags", []))) for c in nb.cells]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="notebook stems, e.g. 02-first-kernels (default: all)")
    ap.add_argument("--execute", action="store_true", help="run each solution notebook in sim mode and store its outputs")
    ap.add_argument("--check", action="store_true", help="only check the committed notebooks match their sources")
    args = ap.parse_args(argv)
    sources = sorted(SRC.glob("*.py"))
    if args.names:
        sources = [s for s in sources if any(s.stem.startswith(n) for n in args.names)]
    stale = []
    for src in sources:
        learner, solution = build(src)
        lpath, spath = LEARNER / f"{src.stem}.ipynb", SOLUTIONS / f"{src.stem}.ipynb"
        if args.check:
            for built, path in ((learner, lpath), (solution, spath)):
                if not path.exists() or _strip(nbformat.read(path, as_version=4)) != _strip(built):
                    stale.append(path.relative_to(ROOT))
            continue
        nbformat.write(learner, lpath)
        if args.execute:
            print(f"executing {spath.relative_to(ROOT)} ...", flush=True)
            execute(solution, SOLUTIONS)
        nbformat.write(solution, spath)
        print(f"built {lpath.relative_to(ROOT)} and {spath.relative_to(ROOT)}")
    if stale:
        print("out of date with notebooks/src (run `make notebooks`):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
