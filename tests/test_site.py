"""The course's website (``make site``, site/README.md): built from the notebooks with no warning, every internal link
resolving, nothing fetched from outside, and every page drawn in a real Chromium, served over HTTP and opened from the
file system, on a desktop and on a phone (390 and 700 px, touch): the menu opens, nothing scrolls sideways, figure
titles are whole and clear of the modebar. Every page says how to get and run the course; lab pages launch on Binder
and Colab when the site knows the repository, and have no such buttons when it does not.

One full build per run (``tools/site_pages.py``, then ``sphinx-build -W --keep-going -n``, as ``make site`` runs them)
with a repository URL set, into a temporary folder; the tests below read it. The rendering with no repository is
checked on a second, small build: every source is written, and Sphinx builds the home page and Lab 02 only. The Chromium tests use Debian's ``chromium`` through Playwright, as
tests/test_browser.py does, and skip without it. They save screenshots of the home page and of Lab 01 under the
build folder; with ``LABKIT_SITE_SCREENSHOTS=1`` also as ``site/screenshot-home.png`` and ``site/screenshot-lab01.png``.
About 45 s on the 2-core machine (the build about 25 s of it).
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import nbformat
import pytest

from labkit import course

ROOT = Path(__file__).resolve().parents[1]
LABS = [lab for lab in course.labs() if lab.ready]
pytestmark = pytest.mark.slow


REPO = "https://github.com/someone/dgx-course"  # the repository the full build is made for (pyproject.toml sets none)


def _site_env(repository: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABKIT_SITE_")}
    return {**env, "LABKIT_SITE_REPOSITORY_URL": repository}


def _tool(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"{name}_tool", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


site_pages = _tool("site_pages")
notebook_outputs = _tool("notebook_outputs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's html folder (sources beside it); fails on any Sphinx warning."""
    if importlib.util.find_spec("myst_nb") is None:
        pytest.fail("the site's builder is not installed: pip install -c constraints.txt -e '.[dev,docs]' (make test does)")
    out = tmp_path_factory.mktemp("site")
    start = time.monotonic()
    # tools/site_pages.py's main() in this process (as bare_src does: no second interpreter importing labkit and
    # nbformat again), with the environment make site would give it
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LABKIT_SITE_")]:
            mp.delenv(key)
        mp.setenv("LABKIT_SITE_REPOSITORY_URL", REPO)
        assert site_pages.main(["--out", str(out / "src")]) == 0
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                            "-c", "site", str(out / "src"), str(out / "html")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env=_site_env(REPO))
    took = time.monotonic() - start
    print(f"\nsite built in {took:.0f} s")
    assert build.returncode == 0 and "WARNING" not in build.stderr + build.stdout, build.stderr + build.stdout
    return out / "html"


@pytest.fixture(scope="module")
def bare_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site's sources as ``make site`` writes them with no repository URL (in this process, a few seconds; the
    full build above renders the same code with one). Sphinx turns them into pages as they are."""
    out = tmp_path_factory.mktemp("bare") / "src"
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LABKIT_SITE_")]:
            mp.delenv(key)
        mp.setenv("LABKIT_SITE_REPOSITORY_URL", "")
        summary = site_pages.build(out)
    assert summary["repository"] == "(none set)"
    return out


@pytest.fixture(scope="module")
def bare_site(bare_src: Path) -> Path:
    """The URL-less sources built into pages by Sphinx, as ``make site`` builds them when pyproject.toml names no
    repository (about 15 s): what a reader of such a site gets, for the browser."""
    html_dir = bare_src.parent / "html"
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                            "-c", "site", str(bare_src), str(html_dir)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env=_site_env(""))
    assert build.returncode == 0 and "WARNING" not in build.stderr + build.stdout, build.stderr + build.stdout
    return html_dir


# ------------------------------------------------------------------------------------------------ what it contains


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _plain(page: str) -> str:
    """A page's text without tags (code blocks are split into highlighted spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_home_page_has_the_pitch_the_audience_and_the_two_commands(site: Path) -> None:
    home = _text(site / "index.html")
    text = _plain(home)
    assert "GPU computing on NVIDIA DGX systems, from Python" in text
    assert "For Python programmers and ML engineers" in text  # who it is for (the README's **For** paragraph)
    assert "make lab     # creates .venv" in text and "make test    # the same install" in text
    for lab in LABS:
        assert f'href="labs/{lab.notebook}.html"' in home, lab.id
    # how to get the course: the clone, then make lab; or a lab on Binder or Colab with nothing installed
    get = _plain(home[home.index('id="get-the-course"'):home.index('id="start"')])
    assert "git clone https://github.com/someone/dgx-course\ncd dgx-course\nmake lab" in get
    assert f'href="{REPO}"' in home
    assert (f'href="https://mybinder.org/v2/gh/someone/dgx-course/main?urlpath=lab/tree/notebooks/'
            f'{LABS[0].filename}"') in home
    assert f'href="https://colab.research.google.com/github/someone/dgx-course/blob/main/notebooks/{LABS[0].filename}"' in home
    # the site's own pages are linked as pages, never as files "in the course repository"
    more = home[home.index("More:"):]
    assert all(f'href="{p}.html"' in more for p in ("exercises", "course/index", "benchmarks"))


def _served_as_the_site_says(served: Path, course: Path, repository: str) -> None:
    """A downloaded notebook is the course's, its bootstrap cell written for the site's repository."""
    bn = site_pages.build_notebooks
    got, want = nbformat.read(served, as_version=4), nbformat.read(course, as_version=4)
    assert len(got.cells) == len(want.cells)
    for a, b in zip(got.cells, want.cells):
        if "bootstrap" in a.metadata.get("tags", []):
            assert a.source == bn.bootstrap_source(repository, bn.course_repository()[1])
        else:
            assert a == b


def test_every_lab_has_a_page_with_its_launch_bar_and_downloads(site: Path) -> None:
    for lab in LABS:
        page = _text(site / "labs" / f"{lab.notebook}.html")
        text = _plain(page)
        assert f"Lab {lab.id} — {lab.title}" in page
        assert "(solutions)" not in page.split("</h1>")[0], "the site's title is the lab's, the banner says it is solved"
        assert "no hub set up" not in page and "labkit-hub" not in page, "no hub is set: no hub button"
        # Binder and Colab open the learner's notebook; the theme's own launch buttons (header) say the same
        binder = f"https://mybinder.org/v2/gh/someone/dgx-course/main?urlpath=lab/tree/notebooks/{lab.filename}"
        colab = f"https://colab.research.google.com/github/someone/dgx-course/blob/main/notebooks/{lab.filename}"
        for url in (binder, colab):
            assert page.count(f'href="{url}"') == 2, (lab.id, url, "in the launch bar and the theme's launch menu")
        assert "/labs/" not in " ".join(re.findall(r'href="(https://(?:mybinder|colab)[^"]+)"', page))
        assert f"git clone {REPO} && cd dgx-course && make lab" in text, lab.id
        assert "its first cell installs labkit" in text
        for rel in (f"notebooks/{lab.filename}", f"notebooks/solutions/{lab.filename}"):
            assert f'href="../{rel}" download' in page, (lab.id, rel)
            _served_as_the_site_says(site / rel, ROOT / rel, REPO)


def test_launch_button_is_an_nbgitpuller_link_to_the_learner_notebook(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setenv("LABKIT_SITE_HUB_URL", "https://hub.example.edu/")
    monkeypatch.setenv("LABKIT_SITE_REPOSITORY_URL", "https://github.com/someone/dgx-course")
    monkeypatch.setenv("LABKIT_SITE_BRANCH", "spring")
    settings = site_pages.Settings.from_conf()
    nb, _found = site_pages.lab_page(LABS[2].notebook, LABS[2].id, site_pages.check_names(), settings)
    link = re.search(r'class="[^"]*labkit-hub[^"]*" href="([^"]+)"', nb.cells[0].source).group(1)
    url = urllib.parse.urlsplit(link.replace("&amp;", "&"))
    assert (url.scheme, url.netloc, url.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    query = dict(urllib.parse.parse_qsl(url.query))
    assert query == {"repo": "https://github.com/someone/dgx-course", "branch": "spring",
                     "urlpath": f"lab/tree/dgx-course/notebooks/{LABS[2].filename}"}
    assert (ROOT / "notebooks" / LABS[2].filename).exists()  # the clone holds the learner notebook there
    assert "On your class's JupyterHub" in nb.cells[0].source
    # no hub set: no hub button at all (the page says how else to run the lab), never a made-up address
    monkeypatch.delenv("LABKIT_SITE_HUB_URL")
    bare = site_pages.lab_page(LABS[2].notebook, LABS[2].id, {}, site_pages.Settings.from_conf())[0]
    assert "labkit-hub" not in bare.cells[0].source and "JupyterHub" not in bare.cells[0].source


def test_without_a_repository_there_are_no_launch_buttons_and_the_pages_say_how_to_get_the_course(
        bare_src: Path) -> None:
    import runpy

    home = (bare_src / "index.md").read_text()
    lab = nbformat.read(bare_src / "labs" / f"{LABS[2].notebook}.ipynb", as_version=4)
    banner = lab.cells[0].source
    for text in (home, banner):
        assert "mybinder.org" not in text and "colab.research" not in text and "github.com" not in text
        assert "labkit-hub" not in text and "no hub set up" not in text
    get = home[home.index("## Get the course"):home.index("## Start")]
    assert "built without its address" in get and "make lab" in get
    assert f"get the course's repository ([how](../index.md#get-the-course)), run `make lab` in its folder" in banner
    assert "on its own, its first cell says what to do" in banner
    assert "labkit-download" in banner  # the downloads stay
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABKIT_SITE_REPOSITORY_URL", "")
        conf = runpy.run_path(str(ROOT / "site" / "conf.py"))
    assert conf["labkit_repository_url"] == ""
    assert "launch_buttons" not in conf["html_theme_options"] and "repository_url" not in conf["html_theme_options"]
    # a downloaded lab holds the bootstrap that names the one thing to do
    for rel in (LABS[2].filename, f"solutions/{LABS[2].filename}"):
        _served_as_the_site_says(bare_src / "_extra" / "notebooks" / rel, ROOT / "notebooks" / rel, "")


def test_no_page_sends_a_reader_to_the_repository_for_a_page_the_site_has(bare_src: Path) -> None:
    """With no repository URL, a link to a repository file the site does not show becomes "`path` (in the course
    repository)", linked to how to get the course; a file the site has a page for must be linked to that page (the
    home page's "More:" links once were not)."""
    pages = {p.relative_to(bare_src).with_suffix("").as_posix() for p in bare_src.rglob("*")
             if p.suffix in (".md", ".ipynb") and "_extra" not in p.parts}
    named = []
    for path in bare_src.rglob("*"):
        if path.suffix in (".md", ".ipynb") and "_extra" not in path.parts:
            text = path.read_text(encoding="utf-8")
            named += re.findall(r"`([^`]+)`\)? \(?(?:in the )?\[course repository\]", text)
            assert "in the course repository" not in text.replace("[course repository]", ""), path
    assert named, "the check found the phrase it looks for"
    for repo_path in named:
        assert site_pages.site_target(repo_path) is None, repo_path
        assert repo_path.removesuffix(".md").removeprefix("./") not in pages, f"{repo_path} has a page on the site"
    more = (bare_src / "index.md").read_text().split("More:")[1]
    assert "[every exercise](exercises.md)" in more and "[simulator benchmark](benchmarks.md)" in more


def test_exercise_index_lists_every_exercise_with_kind_and_lab(site: Path) -> None:
    import labkit.check as check
    from labkit.check import core

    page = _text(site / "exercises.html")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, flags=re.S)
    for ex_id, _title, _status in check.exercises():
        row = next((r for r in rows if f">{ex_id}</span>" in r), None)
        assert row is not None, f"{ex_id} missing from the exercise index"
        kind = core._get(ex_id).kind
        assert kind and f"<td><p>{kind}</p></td>" in row, (ex_id, kind)
        lab = next(lab for lab in LABS if ex_id.startswith(lab.id + "."))
        assert f'href="labs/{lab.notebook}.html#ex-' in row, f"{ex_id} is not linked to its check cell in its lab"


def test_instructor_material_and_benchmarks_are_there(site: Path) -> None:
    for md in (ROOT / "course").rglob("*.md"):
        rel = md.relative_to(ROOT).with_suffix(".html").as_posix().replace("course/README.html", "course/index.html")
        assert (site / rel).exists(), rel
    bench = _text(site / "benchmarks.html")
    latest = sorted((ROOT / "benchmarks" / "results").glob("sim-speed-*.md"))[-1]
    assert latest.stem in bench and "Numba's simulator" in _plain(bench).replace("’", "'")
    first_row = next(line for line in latest.read_text().splitlines() if line.startswith("| saxpy"))
    assert first_row.split("|")[3].strip() in bench  # the measured time of the first kernel


def test_figures_and_explorers_stored_by_the_notebooks_are_on_the_pages(site: Path) -> None:
    """A solution notebook's stored plotly figures become drawable figures; a stored explorer shows as its static
    picture with the note, and no page offers a widget that cannot run."""
    for lab in LABS:
        nb = nbformat.read(ROOT / "notebooks" / "solutions" / lab.filename, as_version=4)
        outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        stored = sum(notebook_outputs.SITE_FIGURE in o.get("data", {}) for o in outs)
        assert not any(notebook_outputs.PLOTLY in o.get("data", {}) for o in outs), "JupyterLab would mark it changed"
        page = _text(site / "labs" / f"{lab.notebook}.html")
        assert page.count('<div class="labkit-plotly">') == stored, lab.id
        assert "application/vnd.jupyter.widget-view+json" not in page and "Error displaying widget" not in page
        snapshots = sum(notebook_outputs.SNAPSHOT_CLASS in str(o.get("data", {}).get("text/html", "")) for o in outs)
        assert page.count("Run it in JupyterLab to move the slider") == snapshots, lab.id


def test_a_warning_fails_the_build(tmp_path: Path) -> None:
    """The flags ``make site`` and the fixture use turn a broken cross-reference into a failed build (site/conf.py
    is nitpicky), so a green build above means there was no warning."""
    src = tmp_path / "src"
    for sub in ("_static", "_extra"):
        (src / sub).mkdir(parents=True)
    (src / "index.md").write_text("# A page\n\nSee [the lab](labs/99-nowhere.ipynb) and {ref}`no-such-label`.\n")
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                            "-c", "site", str(src), str(tmp_path / "html")], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert build.returncode != 0
    assert "99-nowhere" in build.stderr and "no-such-label" in build.stderr, build.stderr


def test_an_explorer_is_stored_as_a_static_picture_of_its_state() -> None:
    """tools/notebook_outputs.py on real ipywidgets state: the note names each control's value, then the HTML and the
    figure the explorer showed; errors, stderr and labkit's reopen note go; check cells stay as they ran."""
    import ipywidgets as w
    import plotly.graph_objects as go
    from ipywidgets.embed import dependency_state

    out = w.Output()
    out.outputs = ({"output_type": "display_data", "metadata": {},
                    "data": {notebook_outputs.PLOTLY: json.loads(go.Figure(go.Bar(y=[1, 2])).to_json())}},)
    box = w.VBox([w.HBox([w.IntSlider(5, description="n"),
                          w.Dropdown(options=["contiguous", "strided"], value="strided", description="pattern")]),
                  w.HTML("<b>bandwidth</b>"), out])
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {notebook_outputs.WIDGET_STATE: {"state": dependency_state(box, drop_defaults=False)}}
    view = {"output_type": "display_data", "metadata": {},
            "data": {notebook_outputs.WIDGET: {"model_id": box.model_id}, "text/plain": "VBox(...)"}}
    reopen = {"output_type": "display_data", "metadata": {},
              "data": {"text/html": "<div class='labkit-reopen-note'>run this cell again</div>"}}
    err = {"output_type": "stream", "name": "stderr", "text": "RuntimeWarning"}
    said = {"output_type": "stream", "name": "stdout", "text": "[PASSED] 02.x: ok\n"}
    nb.cells = [nbformat.v4.new_code_cell("explorer()", outputs=[nbformat.from_dict(o) for o in (view, reopen, err)]),
                nbformat.v4.new_code_cell("labkit.check.x(k)", outputs=[nbformat.from_dict(said)],
                                          metadata={"tags": ["nbval-check-output"]})]
    notebook_outputs.keep(nb, "nbval-check-output")
    note, html, fig = nb.cells[0].outputs
    assert "n = 5" in note.data["text/plain"] and "pattern = strided" in note.data["text/plain"]
    assert "Run it in JupyterLab to move the slider" in note.data["text/html"]
    assert html.data["text/html"] == "<b>bandwidth</b>"
    assert fig.data[notebook_outputs.SITE_FIGURE]["data"][0]["y"] == [1, 2]
    assert fig.data["text/plain"] == notebook_outputs.FIGURE_TEXT  # what JupyterLab shows until the cell runs
    assert nb.cells[1].outputs[0].text == said["text"] and "widgets" not in nb.metadata


# ------------------------------------------------------------------------------------------------------ link check


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            if name in ("href", "src") and tag in ("a", "link", "script", "img", "iframe", "source"):
                self.refs.append((tag, name, value))


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_internal_link_resolves_and_nothing_loads_from_outside(site: Path) -> None:
    broken, external_assets, checked = [], [], 0
    pages = [p for p in sorted(site.rglob("*.html")) if "_static" not in p.relative_to(site).parts]  # not theme macros
    for page in pages:
        for tag, _attr, value in _parse(page).refs:
            url = urllib.parse.urlsplit(value)
            if url.scheme in ("http", "https") or value.startswith("//"):
                if tag != "a":
                    external_assets.append(f"{page.relative_to(site)}: <{tag}> {value}")
                continue
            if url.scheme in ("mailto", "javascript", "data"):
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {value}")
            elif url.fragment and target.suffix == ".html" and url.fragment not in _parse(target).ids:
                broken.append(f"{page.relative_to(site)}: {value} (no such anchor)")
    assert len(pages) > 20 and checked > 500
    print(f"\n{checked} internal links and assets on {len(pages)} pages resolve")
    assert not broken, "\n".join(broken[:40])
    assert not external_assets, "the site must work offline:\n" + "\n".join(external_assets[:20])


# ------------------------------------------------------------------------------------------------------- Chromium


def _chromium() -> str | None:
    if os.environ.get("LABKIT_CHROMIUM"):
        return os.environ["LABKIT_CHROMIUM"]
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM = _chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed: `apt-get install chromium` "
                                                              "(CI's .ci/run installs it)")
PAGES = ["index.html", "exercises.html", *(f"labs/{lab.notebook}.html" for lab in LABS), "search.html?q=coalescing"]
# What the page says about itself once loaded: figures (each must be drawn), images (each must have loaded)
INSPECT = """() => {
  const figs = [...document.querySelectorAll('div.labkit-plotly')];
  const imgs = [...document.querySelectorAll('img')];
  const box = (e) => e.getBoundingClientRect();
  const meets = (a, b) => !(a.right <= b.left || a.left >= b.right || a.bottom <= b.top || a.top >= b.bottom);
  // a figure's title must lie inside the figure and clear of the modebar (drawn over the top right corner, shown
  // on hover on a desktop; a phone has none)
  const titles = figs.map(d => [d.querySelector('svg.main-svg'), d.querySelector('.gtitle'), d.querySelector('.modebar')])
    .filter(([svg, t]) => svg && t && t.textContent);
  const exercise = document.querySelector('div.cell.tag_exercise');
  return {
    titles: titles.length,
    titles_clipped: titles.filter(([svg, t]) => { const s = box(svg), r = box(t);
      return r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1; }).map(([, t]) => t.textContent),
    titles_covered: titles.filter(([, t, m]) => m && box(m).width > 0 && meets(box(m), box(t))).map(([, t]) => t.textContent),
    sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    favicon: document.querySelector('link[rel="icon"]')?.getAttribute('href') || '',
    exercise_label: exercise ? getComputedStyle(exercise, '::before').content : null,
    figures: figs.length,
    drawn: figs.filter(d => d.getAttribute('data-drawn') === 'yes' && d.querySelector('svg.main-svg')).length,
    undrawn: figs.filter(d => d.getAttribute('data-drawn') !== 'yes').map(d => d.closest('.cell')?.id || '?'),
    images: imgs.length,
    broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    title: document.title,
    search_results: document.querySelectorAll('#search-results li').length,
  };
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


PHONE = {"is_mobile": True, "has_touch": True}


def _visit(browser: Any, urls: list[str], local: tuple[str, ...], shots: dict[str, Path] | None = None,
           block: str | None = None, width: int = 1280, menu: bool = False,
           probe: Any = None) -> dict[str, dict[str, Any]]:
    """Open each URL in one page; what went wrong on each (console errors, page errors, failed or outside requests).
    Below 1280 px wide the page is a phone's (touch); with ``menu`` each page's ☰ is tapped and what it opened is
    recorded; ``probe(page, url)``, when given, is called on each page once it has drawn (before the menu is
    tapped) and what it returns is recorded as ``probe``."""
    context = browser.new_context(viewport={"width": width, "height": 900 if width >= 1280 else 844},
                                  **(PHONE if width < 1280 else {}))
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # Chromium cancels a favicon's load when the page navigates on (net::ERR_ABORTED, seen once in a full run): not
    # a missing file, which fails as ERR_FILE_NOT_FOUND or a 404 and is still reported
    page.on("requestfailed", lambda r: None if r.url.endswith("favicon.svg") and "ERR_ABORTED" in str(r.failure)
            else problems.append(f"request failed: {r.url} ({r.failure})"))

    def route(r: Any) -> None:
        if block and block in r.request.url:
            r.abort()  # on purpose: the test that the checks catch a figure that does not draw
        elif r.request.url.startswith(local):
            r.continue_()
        else:
            problems.append(f"request outside the site: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    seen = {}
    for url in urls:
        problems.clear()
        page.goto(url, wait_until="load")
        try:
            page.wait_for_function("() => [...document.querySelectorAll('div.labkit-plotly')]"
                                   ".every(d => d.hasAttribute('data-drawn'))", timeout=30_000)
            if "search.html" in url:
                page.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0",
                                       timeout=30_000)
        except Exception as e:  # noqa: BLE001  (reported below as undrawn figures or no search results)
            problems.append(f"figures still drawing, or no search results, after 30 s: {e}")
        info = page.evaluate(INSPECT)
        if probe is not None:
            info["probe"] = probe(page, url)
        if menu:
            page.locator("button.primary-toggle:visible").first.tap()
            menu_state = """() => {
              const d = document.querySelector('#pst-primary-sidebar-modal');
              const links = d ? [...d.querySelectorAll('a')].filter(a => a.getBoundingClientRect().width > 0
                && getComputedStyle(a).visibility !== 'hidden') : [];
              return {open: !!(d && d.open), links: links.map(a => a.textContent.trim())}; }"""
            try:  # until the menu is open with links showing (was a fixed 400 ms); a menu that never opens is
                # reported below as not open
                page.wait_for_function(f"() => {{ const m = ({menu_state})(); return m.open && m.links.length > 0; }}",
                                       timeout=5_000)
            except Exception:  # noqa: BLE001
                pass
            info["menu"] = page.evaluate(menu_state)
        info["problems"] = list(problems)
        seen[url] = info
        for name, path in (shots or {}).items():
            if url.endswith(name):
                first = page.locator("div.labkit-plotly").first
                if first.count():
                    first.scroll_into_view_if_needed()
                    page.evaluate("() => window.scrollBy(0, -120)")
                    page.wait_for_timeout(300)
                page.screenshot(path=str(path))
    context.close()
    return seen


def _assert_clean(seen: dict[str, dict[str, Any]]) -> None:
    bad = {url: info for url, info in seen.items()
           if info["problems"] or info["drawn"] != info["figures"] or info["broken_images"] or info["titles_clipped"]
           or info["titles_covered"] or info["sideways"] > 0 or not info["favicon"]}
    assert not bad, json.dumps(bad, indent=1)[:4000]


@needs_chromium
def test_every_page_draws_in_chromium_over_http(site: Path, server: str, browser: Any) -> None:
    shots_dir = site.parent / "screenshots"
    shots_dir.mkdir(exist_ok=True)
    shots = {"index.html": shots_dir / "screenshot-home.png",
             f"labs/{LABS[1].notebook}.html": shots_dir / "screenshot-lab01.png"}
    seen = _visit(browser, [f"{server}/{p}" for p in PAGES], (server,), shots)
    _assert_clean(seen)
    figures = sum(info["figures"] for info in seen.values())
    titles = sum(info["titles"] for info in seen.values())
    print(f"\n{len(seen)} pages, {figures} figures drawn, {titles} titles whole and clear; screenshots in {shots_dir}")
    labels = {info["exercise_label"] for info in seen.values() if info["exercise_label"]}
    assert labels == {'"Exercise, shown solved. In the lab you run, this cell is yours to write."'}, labels
    assert all(p.stat().st_size > 10_000 for p in shots.values())
    if os.environ.get("LABKIT_SITE_SCREENSHOTS"):
        for path in shots.values():
            shutil.copy(path, ROOT / "site" / path.name)


@needs_chromium
def test_a_figure_that_does_not_draw_is_caught(site: Path, server: str, browser: Any) -> None:
    """The checks above can fail: without plotly.js, Lab 01's figures stay undrawn and the page says so."""
    url = f"{server}/labs/{LABS[1].notebook}.html"
    info = _visit(browser, [url], (server,), block="plotly.min.js")[url]
    assert info["figures"] > 0 and info["drawn"] == 0
    assert any("figure not drawn" in p for p in info["problems"]), info["problems"]
    with pytest.raises(AssertionError):
        _assert_clean({url: info})


@needs_chromium
def test_an_image_that_does_not_load_is_caught(tmp_path: Path, browser: Any) -> None:
    """No page shows an <img> today (figures are plotly); the check for one that does not load works all the same."""
    probe = tmp_path / "probe.html"
    probe.write_text('<!DOCTYPE html><html><body><img src="missing.png" alt="x"></body></html>')
    info = _visit(browser, [probe.as_uri()], ("file://",))[probe.as_uri()]
    assert info["broken_images"] == ["missing.png"]
    with pytest.raises(AssertionError):
        _assert_clean({probe.as_uri(): info})


@needs_chromium
def test_site_works_opened_from_the_file_system(site: Path, browser: Any) -> None:
    """What an instructor gets by opening site/_build/html/index.html: the same pages, figures and links."""
    urls = [(site / p).as_uri() for p in ("index.html", f"labs/{LABS[1].notebook}.html", "exercises.html")]
    urls.append((site / "search.html").as_uri() + "?q=coalescing")  # search, without fetch() (refused from file://)
    seen = _visit(browser, urls, ("file://",))
    _assert_clean(seen)
    assert seen[urls[-1]]["search_results"] > 0


@needs_chromium
@pytest.mark.parametrize("width", [390, 700])
def test_a_phone_reader_can_open_the_menu_and_read_the_pages(site: Path, server: str, browser: Any, width: int) -> None:
    """A phone (touch, 390 and 700 px wide): ☰ opens the menu with every lab in it; no page scrolls sideways; every
    figure draws with its title whole (no modebar to cover it). At 700 px the home page only (the menu)."""
    pages = ["index.html", f"labs/{LABS[3].notebook}.html", "exercises.html"] if width == 390 else ["index.html"]
    seen = _visit(browser, [f"{server}/{p}" for p in pages], (server,), width=width, menu=True)
    _assert_clean(seen)
    for url, info in seen.items():
        assert info["menu"]["open"], (url, "the menu did not open")
        assert all(any(f"Lab {lab.id}" in t for t in info["menu"]["links"]) for lab in LABS), (url, info["menu"])
    if width == 390:  # every figure the lab's solution notebook stores is drawn with its title
        nb = nbformat.read(ROOT / "notebooks" / "solutions" / LABS[3].filename, as_version=4)
        stored = sum(notebook_outputs.SITE_FIGURE in o.get("data", {})
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert stored > 0 and sum(info["titles"] for info in seen.values()) >= stored


@needs_chromium
def test_a_clipped_or_covered_title_and_a_sideways_page_are_caught(site: Path, browser: Any, tmp_path: Path) -> None:
    """The checks above can fail: figures drawn as plotly draws them (no wrapping, the modebar always shown), on a
    page wider than the phone, give a clipped title, a title under the modebar, and a page that scrolls sideways."""
    probe = tmp_path / "probe.html"
    long = "a title far too long for the figure it belongs to, as plotly clips it at the edge of the figure"
    figures = "".join(
        f'Plotly.newPlot("f{i}", [{{y: [1, 3, 2]}}], {{title: {json.dumps(title)}, width: 600}}, {{displayModeBar: true}})'
        f'.then(() => document.getElementById("d{i}").setAttribute("data-drawn", "yes"));'
        for i, title in enumerate([{"text": long}, {"text": "under the modebar", "x": 1, "xanchor": "right",
                                                       "yref": "container", "y": 1, "yanchor": "top"}]))
    probe.write_text(
        f'<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"><link rel="icon" href="x.svg">'
        f'<script src="{(site / "_static" / "plotly.min.js").as_uri()}"></script></head><body>'
        + "".join(f'<div class="labkit-plotly" id="d{i}" style="width:600px"><div id="f{i}"></div></div>' for i in (0, 1))
        + f"<script>{figures}</script></body></html>")
    (tmp_path / "x.svg").write_text((ROOT / "site" / "_static" / "favicon.svg").read_text())
    info = _visit(browser, [probe.as_uri()], ("file://",), width=390)[probe.as_uri()]
    assert info["drawn"] == 2 and long in info["titles_clipped"] and "under the modebar" in info["titles_covered"]
    assert info["sideways"] > 0 and not info["problems"], info
    with pytest.raises(AssertionError):
        _assert_clean({probe.as_uri(): info})


@needs_chromium
@pytest.mark.parametrize("width", [1280, 390])
def test_a_site_built_without_a_repository_draws_with_no_launch_buttons(bare_site: Path, browser: Any,
                                                                        width: int) -> None:
    """The same site built with no repository URL, in Chromium (desktop, and a phone with touch): every page draws
    cleanly, no page has a Binder, Colab or repository link or the theme's launch menu, the home page shows how to
    get the course, and on a phone the menu opens with every lab."""
    pages = ["index.html", f"labs/{LABS[2].notebook}.html"]
    urls = [(bare_site / p).as_uri() for p in pages]
    links = """() => ({links: [...document.querySelectorAll('a[href]')].map(a => a.href)
                         .filter(h => /mybinder\\.org|colab\\.research|github\\.com/.test(h)),
                       menus: document.querySelectorAll('.dropdown-launch-buttons, .btn-launch, [class*="launch-"]').length,
                       get: !!document.getElementById('get-the-course')})"""

    def probe(page: Any, url: str) -> dict[str, Any]:  # in the same visit, at this test's width
        found = page.evaluate(links)
        found["get_visible"] = page.locator("#get-the-course").is_visible() if found["get"] else False
        return found

    seen = _visit(browser, urls, ("file://",), width=width, menu=width < 1280, probe=probe)
    _assert_clean(seen)
    for url in urls:
        found = seen[url]["probe"]
        assert not found["links"] and not found["menus"], (url, found)
        if url.endswith("index.html"):
            assert found["get"] and found["get_visible"], url
    if width < 1280:
        for url, info in seen.items():
            assert info["menu"]["open"], (url, "the menu did not open")
            assert all(any(f"Lab {lab.id}" in t for t in info["menu"]["links"]) for lab in LABS), (url, info["menu"])
