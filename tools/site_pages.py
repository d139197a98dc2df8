#!/usr/bin/env python3
"""Assemble the website's Sphinx sources (``make site``) from the course's own files, executing nothing.

    python tools/site_pages.py [--out site/_build/src]

Writes a fresh source tree that ``sphinx-build -c site`` turns into ``site/_build/html`` (site/README.md):

- ``index.md``: the README's pitch (who the course is for, the two commands) and the lab map, its links made the site's;
- ``labs/NN-topic.ipynb``: each *solution* notebook with the outputs it stores (``make notebooks`` stores text,
  figures and a static picture of each explorer; see tools/notebook_outputs.py), a launch bar (Binder and Colab when
  the repository is set, JupyterHub through nbgitpuller when a hub is, download the learner's ``.ipynb`` or the
  solution) and how to get and run the course, plotly figures as HTML that the site's local plotly.js draws, and a
  target before each exercise's check cell;
- ``exercises.md``: every exercise (``labkit.check.exercises()``) with its kind and lab, linked to its check;
- ``course/``: the instructor material, links made the site's; ``benchmarks.md``: the simulator benchmark tables;
- ``hub.md`` and the other hand-written pages of ``site/pages/``;
- ``_extra/notebooks/``: the learner and solution notebooks, served as they are at ``notebooks/...`` for download;
- ``_static/plotly.min.js``: plotly.js from the installed plotly package (nothing is fetched).

The hub and repository addresses come from ``site/conf.py`` (``labkit_hub_url``, ``labkit_repository_url``, ...); the
repository's default is the course's one setting, ``[tool.labkit] repository`` in ``pyproject.toml``.
"""

from __future__ import annotations

import argparse
import html
import json
import posixpath
import re
import runpy
import shutil
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_notebooks  # noqa: E402  (the notebooks' bootstrap cell and the course's repository setting)

SITE = ROOT / "site"
NOTEBOOKS = ROOT / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
SITE_FIGURE = "application/vnd.labkit.plotly+json"  # how tools/notebook_outputs.py stores one
WIDGET = "application/vnd.jupyter.widget-view+json"
REOPEN_NOTE_CLASS = "labkit-reopen-note"
CHECKED = "nbval-check-output"
GET_COURSE = "get-the-course"  # the home page's section on getting and running the course
#: ``[text](target)`` in Markdown (not images: those start with ``!``)
LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
NB_LINK = re.compile(r"^notebooks/(?:solutions/)?(\d\d-[A-Za-z0-9_-]+)\.ipynb$")


@dataclass(frozen=True)
class Settings:
    """What site/conf.py says about the hub and the repository (an admin's settings; site/README.md)."""

    hub_url: str
    repository_url: str
    branch: str
    clone_dir: str
    binder_url: str = ""
    colab_url: str = ""

    @classmethod
    def from_conf(cls) -> "Settings":
        conf = runpy.run_path(str(SITE / "conf.py"))
        repo = conf.get("labkit_repository_url", "").rstrip("/")
        clone = conf.get("labkit_clone_dir") or posixpath.basename(repo).removesuffix(".git")
        return cls(conf.get("labkit_hub_url", "").rstrip("/"), repo, conf.get("labkit_repository_branch", "main"), clone,
                   conf.get("labkit_binder_url", "").rstrip("/"), conf.get("labkit_colab_url", "").rstrip("/"))

    def _github(self) -> str | None:
        """``owner/name`` of a GitHub repository, else None."""
        m = re.match(r"^https://github\.com/([^/]+/[^/]+?)(?:\.git)?$", self.repository_url)
        return m.group(1) if m else None

    def binder_link(self, notebook_path: str) -> str | None:
        """mybinder.org (no account): repo2docker builds the repository from environment.yml (and .binder/), then
        JupyterLab opens the notebook. The same link the theme's launch button makes (site/conf.py)."""
        if not (self.binder_url and self.repository_url):
            return None
        gh = self._github()
        where = f"gh/{gh}" if gh else f"git/{urllib.parse.quote(self.repository_url, safe='')}"
        return f"{self.binder_url}/v2/{where}/{self.branch}?urlpath=lab/tree/{notebook_path}"

    def colab_link(self, notebook_path: str) -> str | None:
        """Google Colab opens a notebook straight from a GitHub repository (not from other hosts)."""
        gh = self._github()
        return f"{self.colab_url}/github/{gh}/blob/{self.branch}/{notebook_path}" if gh and self.colab_url else None

    def clone_command(self) -> str | None:
        return build_notebooks.clone_command(self.repository_url) if self.repository_url else None

    def hub_link(self, notebook_path: str) -> str | None:
        """The nbgitpuller link that clones (or updates) the course in the learner's hub home and opens a notebook."""
        if not (self.hub_url and self.repository_url):
            return None
        query = urllib.parse.urlencode({"repo": self.repository_url, "branch": self.branch,
                                        "urlpath": f"lab/tree/{self.clone_dir}/{notebook_path}"})
        return f"{self.hub_url}/hub/user-redirect/git-pull?{query}"

    def repo_link(self, path: str) -> str | None:
        return f"{self.repository_url}/blob/{self.branch}/{path}" if self.repository_url else None


def site_target(repo_path: str) -> str | None:
    """Where a file of the repository lives on the site (a site-relative source path), or None when it does not."""
    m = NB_LINK.match(repo_path)
    if m:
        return f"labs/{m.group(1)}.ipynb"
    if repo_path in ("notebooks", "notebooks/solutions"):
        return "labs/index.md"
    if repo_path == "README.md":
        return "index.md"
    if repo_path == "course/README.md":
        return "course/index.md"
    if repo_path.startswith("course/") and repo_path.endswith(".md"):
        return repo_path
    if repo_path.startswith("benchmarks/results"):
        return "benchmarks.md"
    return None


def rewrite_links(text: str, repo_dir: str, site_dir: str, settings: Settings) -> str:
    """Make the relative links of a Markdown text written at ``repo_dir`` in the repository work at ``site_dir`` on
    the site: to the page that shows the file, else to the file in the repository, else plain text."""

    def one(m: re.Match[str]) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(repo_dir, path)).rstrip("/") if path else repo_dir
        page = site_target(repo_path)
        if page is not None:
            rel = posixpath.relpath(page, site_dir or ".")
            return f"[{label}]({rel}{'#' + anchor if anchor else ''})"
        link = settings.repo_link(repo_path)
        if link:
            return f"[{label}]({link})"
        get = posixpath.relpath("index.md", site_dir or ".") + f"#{GET_COURSE}"
        if label.strip("`") in (repo_path, posixpath.basename(repo_path), target):
            return f"`{repo_path}` (in the [course repository]({get}))"
        return f"{label} (`{repo_path}` in the [course repository]({get}))"

    return LINK.sub(one, text)


# ---------------------------------------------------------------------------------------------------------- labs


def plotly_html(fig: dict[str, Any]) -> str:
    """A figure as HTML that site/_static/labkit-site.js draws with the local plotly.js."""
    data = json.dumps(fig, separators=(",", ":")).replace("</", "<\\/")
    return (f'<div class="labkit-plotly"><script type="application/json" class="labkit-plotly-data">{data}</script>'
            f"</div>")


def site_outputs(outputs: list[Any], settings: Settings) -> list[Any]:
    """A cell's stored outputs as the site shows them: plotly JSON as HTML the page draws; Markdown with its links
    made the site's (it was written in notebooks/solutions/); no widget views (the notebook stores a static picture
    of each explorer instead) and no note about reopening one."""
    out = []
    for o in outputs:
        data = o.get("data", {})
        if WIDGET in data or REOPEN_NOTE_CLASS in str(data.get("text/html", "")):
            continue
        fig = data.get(SITE_FIGURE, data.get(PLOTLY))
        if fig is not None:
            o = nbformat.from_dict({"output_type": "display_data", "metadata": {},
                                    "data": {"text/html": plotly_html(fig)}})
        elif "text/markdown" in data:
            data["text/markdown"] = rewrite_links(data["text/markdown"], "notebooks/solutions", "labs", settings)
        out.append(o)
    return out


def check_names() -> dict[str, tuple[str, str, str]]:
    """Every exercise: id -> (check function name, title, kind)."""
    import labkit.check as check
    from labkit.check import core

    rows = {}
    for ex_id, title, _status in check.exercises():
        ex = core._get(ex_id)
        rows[ex_id] = (ex.check.__name__, title, ex.kind or "-")
    return rows


def exercise_target(ex_id: str) -> str:
    return "ex-" + re.sub(r"[^a-z0-9]+", "-", ex_id.lower()).strip("-")


def how_to_run(lab_id: str, settings: Settings) -> str:
    """The lab page's few lines on running the lab yourself (Markdown): clone and ``make lab``, Binder or Colab, or
    the downloaded notebook, as far as this site's settings make them possible."""
    clone = settings.clone_command()
    if clone:
        local = (f"- **On your machine** (Python 3.10+, `git` and `make`; no GPU needed, the labs then run in a CUDA "
                 f"simulator): `{clone}`, then open Lab {lab_id} in the JupyterLab it starts.")
    else:
        local = (f"- **On your machine** (Python 3.10+ and `make`; no GPU needed, the labs then run in a CUDA "
                 f"simulator): get the course's repository ([how](../index.md#{GET_COURSE})), run `make lab` in its "
                 f"folder, then open Lab {lab_id} in the JupyterLab it starts.")
    lines = [f"**Do Lab {lab_id} yourself** (this page shows it solved):", "", local]
    launch = [name for name, link in (("Binder", settings.binder_link("x")), ("Colab", settings.colab_link("x")))
              if link]
    if launch:
        lines.append(f"- **In your browser:** {' or '.join(launch)} (the buttons above"
                     + ("; Binder needs no account and takes a few minutes to start" if "Binder" in launch else "")
                     + ("; Colab needs a Google account" if "Colab" in launch else "") + ").")
    if settings.hub_url and settings.repository_url:
        lines.append("- **On your class's JupyterHub:** the JupyterHub button above.")
    if clone:
        lines.append("- **Anywhere with Python and pip:** download the lab; its first cell installs labkit, the "
                     "course's library, from the course repository.")
    else:
        lines.append("- A downloaded lab runs inside the course: on its own, its first cell says what to do.")
    return "\n".join(lines)


def lab_banner(stem: str, lab_id: str, settings: Settings, stored: bool) -> str:
    """The launch bar under a lab page's title (raw HTML in a Markdown cell) and how to do the lab yourself."""
    learner, solution = f"notebooks/{stem}.ipynb", f"notebooks/solutions/{stem}.ipynb"
    buttons = []
    hub = settings.hub_link(learner)
    if hub:
        buttons.append(f'<a class="sd-btn sd-btn-primary labkit-hub" href="{html.escape(hub)}">'
                       f"Open Lab {lab_id} in JupyterHub</a>")
    binder, colab = settings.binder_link(learner), settings.colab_link(learner)
    if binder:
        buttons.append(f'<a class="sd-btn sd-btn-primary labkit-binder" href="{html.escape(binder)}">'
                       f"Launch on Binder</a>")
    if colab:
        buttons.append(f'<a class="sd-btn sd-btn-primary labkit-colab" href="{html.escape(colab)}">Open in Colab</a>')
    parts = [
        '<div class="labkit-launch">',
        *buttons,
        f'<a class="sd-btn sd-btn-outline-primary labkit-download" href="../{learner}" download>'
        f"Download the lab (.ipynb)</a>",
        f'<a class="sd-btn sd-btn-outline-secondary labkit-download" href="../{solution}" download>'
        f"Download the solution (.ipynb)</a>",
        "</div>",
        "",
        how_to_run(lab_id, settings),
        "",
        "This page shows what the solved notebook stored when it ran in `sim` mode (no GPU: timings there are CPU "
        "times). Interactive explorers appear as a static picture; run the lab to move their sliders.",
    ]
    if not stored:
        parts += ["", "```{note}\nThis notebook stores only its checks' outputs: its figures are not shown here until "
                      "it is rebuilt with `make notebooks` (tools/build_notebooks.py --execute).\n```"]
    return "\n".join(parts)


def lab_page(stem: str, lab_id: str, checks: dict[str, tuple[str, str, str]], settings: Settings
             ) -> tuple[nbformat.NotebookNode, list[str]]:
    """The site's page of one lab, and the exercises whose check cell it found."""
    nb = nbformat.read(NOTEBOOKS / "solutions" / f"{stem}.ipynb", as_version=4)
    nb.metadata.pop("widgets", None)
    stored = any(c.get("outputs") for c in nb.cells
                 if c.cell_type == "code" and CHECKED not in c.metadata.get("tags", []))
    found: list[str] = []
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            src = cell.source
            if i == 0:
                src = re.sub(r"^(# Lab \d\d — [^\n]*?) \(solutions\)", r"\1", src, count=1)
                src = re.sub(r"\n> \*\*Solution notebook\.\*\*[^\n]*(\n>[^\n]*)*", "", src, count=1)
                title, _, rest = src.partition("\n")  # the banner's links are the site's already
                rest = rewrite_links(rest, "notebooks/solutions", "labs", settings)
                cell.source = f"{title}\n\n{lab_banner(stem, lab_id, settings, stored)}\n{rest}"
            else:
                cell.source = rewrite_links(src, "notebooks/solutions", "labs", settings)
        elif cell.cell_type == "code":
            for ex_id, (name, _title, _kind) in checks.items():
                if ex_id.startswith(lab_id + ".") and ex_id not in found and (
                        re.search(rf"\bcheck\.{re.escape(name)}\(", cell.source) or
                        re.search(rf"check\.run\(\s*['\"]{re.escape(ex_id)}['\"]", cell.source)):
                    found.append(ex_id)
                    cells.append(nbformat.v4.new_markdown_cell(f"({exercise_target(ex_id)})="))
            cell.outputs = site_outputs(cell.get("outputs", []), settings)
        cells.append(cell)
    nb.cells = cells
    for k, cell in enumerate(nb.cells):
        cell.id = f"site-{k:03d}"
    return nb, found


# --------------------------------------------------------------------------------------------------------- pages


def readme_parts() -> dict[str, str]:
    """The README's sections by heading (``""`` for what comes before the first ``##``)."""
    parts, key = {"": []}, ""
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"^(##+) (.*)$", line)
        if m:
            key = m.group(2).strip()
            parts[key] = []
        else:
            parts[key].append(line)
    return {k: "\n".join(v).strip() + "\n" for k, v in parts.items()}


def get_the_course(settings: Settings) -> str:
    """The home page's section on getting and running the course (Markdown, site links)."""
    clone = settings.clone_command()
    lines = ["## Get the course\n"]
    if clone:
        lines += [f"The course is a git repository, [{settings.repository_url}]({settings.repository_url}). "
                  "With Python 3.10 or newer, `git` and `make` (no GPU needed: without one the labs run in a CUDA "
                  "simulator):\n",
                  "```bash\n" + clone.replace(" && ", "\n") + "     # installs the labs' packages, opens JupyterLab\n```\n"]
        start = "notebooks/00-start-here.ipynb"
        launch = [f"[on Binder]({link})" for link in [settings.binder_link(start)] if link]
        launch += [f"[in Colab]({link})" for link in [settings.colab_link(start)] if link]
        if launch:
            lines.append(f"Nothing installed? Open the first lab {' or '.join(launch)} (Binder needs no account); "
                         "every lab page has these buttons, and a lab's first cell installs labkit, the course's "
                         "library, wherever it is missing.\n")
    else:
        lines += ["The course is a git repository; this copy of the site was built without its address, so ask "
                  "whoever gave you the site for it (`git clone <address>`). Then, in the course's folder, with "
                  "Python 3.10 or newer and `make` (no GPU needed: without one the labs run in a CUDA simulator):\n",
                  "```bash\nmake lab     # installs the labs' packages, opens JupyterLab at the first lab\n```\n"]
    lines.append("Every lab page here shows the lab solved, with its figures: read it to see what you will build, "
                 "then do it yourself.\n")
    return "\n".join(lines)


def home_page(settings: Settings, labs: list[Any]) -> str:
    parts = readme_parts()
    intro = parts[""]
    start = parts.get("Start", "")
    lab_map = parts.get("The labs", "")
    readme = "\n".join([intro, "## Start\n", start, "## The labs\n", lab_map])
    site_own = "\n".join([
        "More: [every exercise](exercises.md) with its kind and lab, the [course material](course/index.md) for "
        "instructors (syllabi, notes, slides), and the [simulator benchmark](benchmarks.md).\n",
        "```{toctree}\n:hidden:\n:caption: Labs\n\n" + "\n".join(f"labs/{lab.notebook}" for lab in labs) + "\n```\n",
        "```{toctree}\n:hidden:\n:caption: Reference\n\nexercises\nlabs/index\ncourse/index\nbenchmarks\nhub\n```\n",
    ])
    # the README's links are the repository's (made the site's); the page's own are the site's already
    readme = rewrite_links(readme, "", "", settings)
    intro_part, _, rest = readme.partition("\n## Start\n")
    return "\n".join([intro_part, get_the_course(settings), "## Start\n" + rest, site_own])


def labs_index(settings: Settings) -> str:
    lab_map = readme_parts().get("The labs", "")
    return rewrite_links("# All labs\n\n" + lab_map, "", "labs", settings)


def exercises_page(checks: dict[str, tuple[str, str, str]], found: set[str], labs: list[Any]) -> str:
    titles = {lab.id: lab.title for lab in labs}
    stems = {lab.id: lab.notebook for lab in labs}
    kinds = {k: sum(1 for v in checks.values() if v[2] == k) for k in ("kernel", "code", "numeric")}
    lines = [
        "# Every exercise\n",
        f"{len(checks)} exercises: {kinds['kernel']} kernels (you write a GPU kernel), {kinds['code']} code "
        f"(host code: streams, measurement, models) and {kinds['numeric']} numeric (a figure reasoned out). "
        "Each has a check, `labkit.check.<name>(answer)`, and levelled hints, `labkit.check.hint(\"<id>\")`; "
        "`labkit.check.exercises()` prints this list in a notebook.\n",
        "Each exercise links to its check on the lab's page; the lab column to the lab.\n",
        "| exercise | title | kind | lab |",
        "|---|---|---|---|",
    ]
    for ex_id, (name, title, kind) in checks.items():
        lab_id = ex_id[:2]
        lab = f"[Lab {lab_id}](labs/{stems[lab_id]}.ipynb)" if lab_id in stems else lab_id
        where = f"{{ref}}`{ex_id} <{exercise_target(ex_id)}>`" if ex_id in found else f"`{ex_id}`"
        lines.append(f"| {where} | {title.replace('|', '&#124;')} (`labkit.check.{name}`) | {kind} | {lab} |")
    lines.append("\nLabs: " + ", ".join(f"[{lab_id} {t}](labs/{stems[lab_id]}.ipynb)" for lab_id, t in titles.items()
                                       if lab_id in stems) + ".")
    return "\n".join(lines) + "\n"


def benchmarks_page(settings: Settings) -> str:
    results = ROOT / "benchmarks" / "results"
    parts = ["# Benchmarks\n"]
    readme = results / "README.md"
    if readme.exists():
        body = readme.read_text().split("\n", 1)[1] if readme.read_text().startswith("# ") else readme.read_text()
        parts.append(rewrite_links(body, "benchmarks/results", "", settings))
    for md in sorted(results.glob("*.md"), reverse=True):
        if md.name == "README.md":
            continue
        text = re.sub(r"^(#+) ", r"#\1 ", md.read_text(), flags=re.M)  # one level under the page title
        parts.append(f"## {md.stem}\n\n" + rewrite_links(text, "benchmarks/results", "", settings))
    return "\n".join(parts)


def course_page(path: Path, settings: Settings) -> str:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    if path.parent.name == "slides":  # Marp slides: drop the front matter and the slide breaks, one title
        text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
        text = re.sub(r"^---\s*$", "", text, flags=re.M)
        first = True

        def demote(m: re.Match[str]) -> str:
            nonlocal first
            if first:
                first = False
                return m.group(0)
            return "#" + m.group(0)

        text = re.sub(r"^# ", demote, text, flags=re.M)
    site_rel = site_target(rel) or rel
    text = rewrite_links(text, posixpath.dirname(rel), posixpath.dirname(site_rel), settings)
    if rel == "course/README.md":
        pages = sorted(p.relative_to(ROOT / "course").with_suffix("").as_posix()
                       for p in (ROOT / "course").rglob("*.md") if p.name != "README.md")
        text += "\n```{toctree}\n:hidden:\n\n" + "\n".join(pages) + "\n```\n"
    return text


def served_notebook(path: Path, repository: str, ref: str) -> nbformat.NotebookNode:
    """A course notebook with its bootstrap cell written for ``repository`` (what the site serves for download when it
    is built for another repository than pyproject.toml names)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if build_notebooks.BOOTSTRAP in cell.metadata.get("tags", []):
            cell.source = build_notebooks.bootstrap_source(repository, ref)
    return nb


# ---------------------------------------------------------------------------------------------------------- main


def build(out: Path) -> dict[str, Any]:
    """Write the source tree under ``out`` (emptied first); returns a summary for the log."""
    from labkit import course

    settings = Settings.from_conf()
    if out.exists():
        shutil.rmtree(out)
    (out / "labs").mkdir(parents=True)
    labs = [lab for lab in course.labs() if lab.ready]
    checks = check_names()
    found: set[str] = set()
    figures = 0
    for lab in labs:
        nb, got = lab_page(lab.notebook, lab.id, checks, settings)
        found.update(got)
        figures += sum("labkit-plotly" in str(o.get("data", {}).get("text/html", ""))
                       for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        nbformat.write(nb, out / "labs" / f"{lab.notebook}.ipynb")
    (out / "index.md").write_text(home_page(settings, labs))
    (out / "labs" / "index.md").write_text(labs_index(settings))
    (out / "exercises.md").write_text(exercises_page(checks, found, labs))
    (out / "benchmarks.md").write_text(benchmarks_page(settings))
    for md in sorted((ROOT / "course").rglob("*.md")):
        rel = site_target(md.relative_to(ROOT).as_posix()) or md.relative_to(ROOT).as_posix()
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(course_page(md, settings))
    for page in sorted((SITE / "pages").glob("*.md")):
        shutil.copy(page, out / page.name)
    extra = out / "_extra" / "notebooks"
    (extra / "solutions").mkdir(parents=True)
    course_repo, ref = build_notebooks.course_repository()
    for lab in labs:
        for rel in (lab.filename, f"solutions/{lab.filename}"):
            if settings.repository_url == course_repo:
                shutil.copy(NOTEBOOKS / rel, extra / rel)
            else:  # a site built for another repository: its downloads install labkit from there
                nbformat.write(served_notebook(NOTEBOOKS / rel, settings.repository_url, ref), extra / rel)
    (out / "_extra" / ".nojekyll").write_text("")  # GitHub Pages: serve _static/ and _sphinx_design_static/ as they are
    static = out / "_static"
    static.mkdir()
    import plotly

    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", static / "plotly.min.js")
    if settings.repository_url != course_repo:
        print(f"note: the site is built for {settings.repository_url or 'no repository'}, pyproject.toml names "
              f"{course_repo or 'none'}: the downloads are written for the site's, the notebooks Colab and Binder "
              f"open are the repository's own")
    return {"labs": len(labs), "exercises": len(checks), "exercises_linked": len(found), "figures": figures,
            "repository": settings.repository_url or "(none set)",
            "hub": settings.hub_link("notebooks/00-start-here.ipynb") or "(none set)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=SITE / "_build" / "src")
    args = ap.parse_args(argv)
    summary = build(args.out)
    print("site sources:", ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
