"""The course's website (``make site``, site/README.md): built from the notebooks with no warning, every internal link
resolving, nothing fetched from outside, and every page drawn in a real Chromium, served over HTTP and opened from the
file system.

One build per run (``tools/site_pages.py``, then ``sphinx-build -W --keep-going -n``, as ``make site`` runs them) into
a temporary folder; the tests below read it. The Chromium tests use Debian's ``chromium`` through Playwright, as
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
    gen = subprocess.run([sys.executable, "tools/site_pages.py", "--out", str(out / "src")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                            "-c", "site", str(out / "src"), str(out / "html")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    print(f"\nsite built in {took:.0f} s ({gen.stdout.strip()})")
    assert build.returncode == 0 and "WARNING" not in build.stderr + build.stdout, build.stderr + build.stdout
    return out / "html"


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


def test_every_lab_has_a_page_with_its_launch_bar_and_downloads(site: Path) -> None:
    for lab in LABS:
        page = _text(site / "labs" / f"{lab.notebook}.html")
        assert f"Lab {lab.id} — {lab.title}" in page
        assert "(solutions)" not in page.split("</h1>")[0], "the site's title is the lab's, the banner says it is solved"
        assert "labkit-hub" in page, lab.id
        for rel in (f"notebooks/{lab.filename}", f"notebooks/solutions/{lab.filename}"):
            assert f'href="../{rel}" download' in page, (lab.id, rel)
            assert (site / rel).read_bytes() == (ROOT / rel).read_bytes(), f"{rel} is served as the course has it"


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
    # no hub set: the button says so and leads to the page for the admin, never to a made-up address
    monkeypatch.delenv("LABKIT_SITE_HUB_URL")
    bare = site_pages.lab_page(LABS[2].notebook, LABS[2].id, {}, site_pages.Settings.from_conf())[0]
    assert 'labkit-hub-unset" href="../hub.html"' in bare.cells[0].source and "no hub set up" in bare.cells[0].source


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
  return {
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


def _visit(browser: Any, urls: list[str], local: tuple[str, ...], shots: dict[str, Path] | None = None,
           block: str | None = None) -> dict[str, dict[str, Any]]:
    """Open each URL in one page; what went wrong on each (console errors, page errors, failed or outside requests)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))

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
    page.close()
    return seen


def _assert_clean(seen: dict[str, dict[str, Any]]) -> None:
    bad = {url: info for url, info in seen.items()
           if info["problems"] or info["drawn"] != info["figures"] or info["broken_images"]}
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
    print(f"\n{len(seen)} pages, {figures} figures drawn; screenshots in {shots_dir}")
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
