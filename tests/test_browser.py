"""What a learner sees in JupyterLab, in a real browser: every notebook runs and renders, every widget responds.

One JupyterLab server, started as a learner starts it (``labkit lab``, on work copies in a temporary folder, so
autosave never touches the tracked notebooks), one headless Chromium (Debian's ``chromium``, driven by Playwright
from PyPI), one page reused for all 20 notebooks. For each notebook, learner and solution:

- it opens without the unsaved-changes dot;
- Run All finishes with no error output and nothing on stderr (labkit's errors and warnings print there);
- every plotly figure is drawn (an SVG in a ``.js-plotly-plot``; no ``<plotly figure ...>`` text fallback) and every
  widget is drawn (no "Error displaying widget");
- each control of each widget, changed once, changes what the widget shows (in learner notebooks, whose widgets
  are mostly the solution's, the first control of each);
- nothing reaches only JupyterLab's log console (an exception in a widget's callback);
- the browser's console has no errors, and the page raised none;
- solution notebooks pass every check, and every kernel a check accepts compiles to PTX for sm_70, sm_80 and sm_90
  (``LABKIT_PTX_AUDIT``); learner notebooks report every exercise "not solved yet".

nbval does not run again a notebook this test runs (``notebooks/conftest.py``); without Chromium it runs them all.

On a failure the page is saved as a screenshot under the test's ``tmp_path``. Skips only when no Chromium is
installed (``apt-get install chromium``; CI's ``.ci/run`` installs it). Costs about 4.5 minutes (22 notebooks; Run All
itself about 2.5 of them) on the 2-core machine, other tests running beside it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PATHS = [p.relative_to(NOTEBOOKS).as_posix()
         for p in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")) + sorted((NOTEBOOKS / "solutions").glob("[0-9][0-9]-*.ipynb"))]
TOKEN = "labkit-browser-test"
RUN_TIMEOUT_S = 240  # one notebook's Run All; each runs in well under a minute in sim mode


def _chromium() -> str | None:
    """The system Chromium: $LABKIT_CHROMIUM, else Debian's `chromium` (or `chromium-browser`) on PATH."""
    if os.environ.get("LABKIT_CHROMIUM"):
        return os.environ["LABKIT_CHROMIUM"]
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM = _chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed: `apt-get install chromium` to run the browser "
                                                "test (CI's .ci/run installs it)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kernel_metadata() -> dict:
    from labkit import workcopy

    return workcopy.kernel_metadata()


def _learner_outputs() -> list[str]:
    """Tracked learner notebooks that hold outputs: what JupyterLab's autosave left there before work copies."""
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        if any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"):
            found.append(path.name)
    return found


class Lab:
    """The JupyterLab page and what its console said."""

    def __init__(self, page: Any, url: str, out: Path) -> None:
        self.page, self.url, self.out = page, url, out
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append(f"page error: {e}"))

    def js(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)

    def screenshot(self, name: str) -> Path:
        path = self.out / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
        self.page.screenshot(path=str(path), full_page=False)
        return path


# JavaScript run in the page; `window.jupyterapp` is there because the server runs with expose_app_in_browser.
OPEN = """async (path) => {
  const app = window.jupyterapp;
  const w = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  window.labkitCurrent = w;  // the notebook under test, whatever else takes the focus
  w.node.setAttribute('data-labkit-current', '');
  await w.context.ready; await w.sessionContext.ready;
  // JupyterLab writes the kernel's language_info into the notebook once the kernel has answered: wait for that
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const k = w.sessionContext.session && w.sessionContext.session.kernel;
    const info = w.context.model.getMetadata('language_info');
    if (k && k.status === 'idle' && info && info.version) { await k.info; break; }
    await new Promise(r => setTimeout(r, 50));
  }
  await new Promise(r => setTimeout(r, 200));
  // what the kernel reports outside cells (a widget callback's exception goes to JupyterLab's log console)
  window.labkitKernelErrors = [];
  w.sessionContext.session.kernel.iopubMessage.connect((_, msg) => {
    const t = msg.header.msg_type, c = msg.content;
    if (t === 'error') window.labkitKernelErrors.push(`${c.ename}: ${c.evalue}`);
    if (t === 'stream' && c.name === 'stderr') window.labkitKernelErrors.push(c.text);
  });
  return {dirty: w.context.model.dirty, title: w.title.label};
}"""
# Save and close every document, shutting its kernel down (no dialogs: disposing skips "save changes?")
CLOSE_ALL = """async () => {
  for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
    if (w.context) { try { await w.context.save(); } catch (e) {} }
    if (w.sessionContext) { try { await w.sessionContext.shutdown(); } catch (e) {} }
    w.dispose();
  }
  window.labkitCurrent = null;
}"""
RUN_ALL = """async () => {
  const app = window.jupyterapp, w = window.labkitCurrent;
  app.shell.activateById(w.id);  // notebook commands act on the active notebook
  const ok = await app.commands.execute('notebook:run-all-cells');
  return ok;
}"""
# Widget views at the top level of an output (not those nested in another widget) get data-labkit-widget="k".
FIND = """() => {
  const node = window.labkitCurrent.content.node;
  document.querySelectorAll('[data-labkit-widget]').forEach(e => e.removeAttribute('data-labkit-widget'));
  const views = [...node.querySelectorAll('.jp-OutputArea-output')]
      .filter(e => e.querySelector(':scope > .jupyter-widgets') && !e.parentElement.closest('.jupyter-widgets'));
  views.forEach((e, k) => e.setAttribute('data-labkit-widget', String(k)));
  return views.length;
}"""
SETTLED = """() => {
  const w = window.labkitCurrent, node = w.content.node;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  const busy = [...node.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));
  const loading = node.innerText.includes('Loading widget');
  const plots = [...node.querySelectorAll('.jp-RenderedPlotly')];
  return k && k.status === 'idle' && !busy && !loading && plots.every(p => p.querySelector('.main-svg'));
}"""
MODEL = "() => window.labkitCurrent.content.model.toJSON()"
# The outputs where JupyterLab says it cannot draw a widget (its own words, the whole text of the output; labkit's
# note beside each explorer quotes them inside a sentence, and is not one of these)
BROKEN = """node => [...node.querySelectorAll('.jupyter-widgets')]
    .map(e => e.textContent.trim()).filter(t => t.startsWith('Error displaying widget'))"""
DOM = """() => {
  const broken = """ + BROKEN + """;
  const node = window.labkitCurrent.content.node;
  const plots = [...node.querySelectorAll('.jp-RenderedPlotly')];
  const texts = [...node.querySelectorAll('.jp-RenderedText')].map(e => e.innerText);
  const widgets = [...node.querySelectorAll('[data-labkit-widget]')];
  return {
    plots: plots.length,
    undrawn: plots.filter(p => !p.querySelector('.main-svg')).length,
    fallbacks: texts.filter(t => /^\\s*(<plotly figure|Figure\\(\\{)/.test(t)).map(t => t.slice(0, 80)),
    widgets: widgets.map(e => e.innerText.slice(0, 300)),
    broken: broken(node),
  };
}"""
# What a widget shows: its text and, for each figure in it, the figure's data and title.
SHOWN = """(k) => {
  const el = window.labkitCurrent.content.node.querySelector(`[data-labkit-widget="${k}"]`);
  const figs = [...el.querySelectorAll('.js-plotly-plot')].map(g => JSON.stringify([g.data, g.layout && g.layout.title]));
  const tabs = [...el.querySelectorAll('.lm-TabBar-tab.lm-mod-current')].map(t => t.innerText);  // the tab in front
  return JSON.stringify([el.innerText, figs, tabs]);
}"""
# The kinds of control the test changes, and where they are in a widget's view.
CONTROLS = (("tab", ".lm-TabBar-tab"), ("dropdown", ".widget-dropdown select"), ("select", ".widget-select-multiple select"),
            ("toggle", ".widget-toggle-buttons"), ("checkbox", ".widget-checkbox input[type=checkbox]"),
            ("slider", ".widget-slider .noUi-handle"), ("text", ".widget-text input[type=text]"))
COUNT = """([k, selectors]) => {
  const el = window.labkitCurrent.content.node.querySelector(`[data-labkit-widget="${k}"]`);
  el.scrollIntoView({block: 'nearest'});
  return selectors.map(s => el.querySelectorAll(s).length);
}"""
# One look at control j of a kind, just before it is changed, in one round trip: what Playwright's is_visible(),
# is_disabled() and get_attribute() say (the same rules: a box and visibility "visible"; the disabled property, or
# aria-disabled="true" on it or the nearest ancestor that says either), its label, its options, and what the widget
# shows (SHOWN).
CONTROL = """([k, selector, j]) => {
  const el = window.labkitCurrent.content.node.querySelector(`[data-labkit-widget="${k}"]`);
  const c = el.querySelectorAll(selector)[j];
  if (!c) return {visible: false};  // gone since it was counted (Playwright's is_visible() says so too)
  const box = c.getBoundingClientRect(), style = getComputedStyle(c);
  const visible = (!c.checkVisibility || c.checkVisibility()) && style.visibility === 'visible' && box.width > 0 && box.height > 0;
  let aria = null;
  for (let e = c; e && aria === null; e = e.parentElement) {
    const a = (e.getAttribute('aria-disabled') || '').toLowerCase();
    if (a === 'true' || a === 'false') aria = a === 'true';
  }
  const label = (c.closest('.widget-inline-hbox, .widget-hbox, .widget-vbox')?.querySelector('.widget-label')?.innerText) || '';
  return {visible, disabled: !!c.disabled || aria === true, sliderOff: c.getAttribute('aria-disabled') === 'true',
          current: (c.getAttribute('class') || '').includes('lm-mod-current'), label,
          options: c.options ? c.options.length : 0, index: c.selectedIndex ?? -1,
          selected: c.options ? [...c.options].filter(o => o.selected).map(o => o.index) : [],
          before: (""" + SHOWN + """)(k)};
}"""


def _outputs(model: dict) -> Iterator[tuple[int, str, dict]]:
    for i, cell in enumerate(model["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for out in cell.get("outputs", []):
            yield i, src, out


def _text(out: dict) -> str:
    if out["output_type"] == "stream":
        return "".join(out["text"]) if isinstance(out["text"], list) else out["text"]
    data = out.get("data", {})
    value = data.get("text/plain", "")
    return "".join(value) if isinstance(value, list) else value


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab server started by `labkit lab` on work copies, and one Chromium page on it."""
    from playwright.sync_api import sync_playwright

    base = tmp_path_factory.mktemp("browser")
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # every cell in the page (JupyterLab otherwise renders only the cells in view), so every output can be checked
    (settings.parent / "notebook-extension").mkdir()
    (settings.parent / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = _free_port()
    env = dict(os.environ, LABKIT_MODE="sim", LABKIT_WORK_DIR=str(base / "work"), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               LABKIT_MAX_RANKS="4")  # MPI cells and checks: 4 processes at most on 2 cores, as nbval runs them
    for name in ("LABKIT_EXPECT", "PLOTLY_RENDERER"):
        env.pop(name, None)
    # every kernel a solution's check accepts must compile to PTX for the course's three architectures (nbval's
    # notebook run did this audit; it leaves the notebooks this test runs to it): learner notebooks accept none
    env["LABKIT_PTX_AUDIT"] = "sm_70,sm_80,sm_90"
    cmd = [sys.executable, "-m", "labkit.cli", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.token={TOKEN}", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    assert not _learner_outputs(), "tracked learner notebooks hold outputs before the test"
    log = (base / "server.log").open("w")
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=5):
                    break
            except OSError:
                assert server.poll() is None, f"labkit lab exited early; see {base / 'server.log'}"
                assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.3)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # nothing but this server: no fonts, news or telemetry from elsewhere
            page.route(re.compile(r"^(?!http://127\.0\.0\.1:%d/|ws://127\.0\.0\.1:%d/|data:|blob:)" % (port, port)),
                       lambda route: route.abort())
            page.set_default_timeout(60_000)
            here = Lab(page, url, base)
            page.goto(f"{url}/lab?token={TOKEN}")
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell && "
                                   "document.querySelector('.jp-DirListing-item')")
            page.evaluate("() => window.jupyterapp.restored")
            yield here
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
    written = _learner_outputs()
    assert not written, f"JupyterLab wrote outputs into the tracked notebooks {written}, not into the work copies"
    saved = [p.name for p in sorted((base / "work").rglob("[0-9][0-9]-*.ipynb"))
             if any(c.get("outputs") for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")]
    assert saved, "the work copies hold no outputs: where did JupyterLab save the runs?"


def _change_each_control(lab: Lab, index: int, problems: list[str], every: bool = True) -> int:
    """Change every enabled control of widget ``index`` once (or, ``every=False``, the first one); each change must
    change what the widget shows. A control is looked at in one round trip to the page (:data:`CONTROL`) and
    changed as a learner changes it (a click, a choice, a key: a slider's handle gets one PageUp, five steps)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    widget = lab.page.locator(f'[data-labkit-current] [data-labkit-widget="{index}"]')
    counts = lab.js(COUNT, [index, [selector for _, selector in CONTROLS]])
    controls = [(kind, selector, j) for (kind, selector), n in zip(CONTROLS, counts) for j in range(n)]
    changed = 0
    for kind, selector, j in controls:
        look = lab.js(CONTROL, [index, selector, j])
        if not look["visible"]:  # in a tab not shown, say: the tab's own turn comes with the tab bar
            continue
        if kind in ("dropdown", "select", "checkbox", "text") and look["disabled"]:
            continue
        if kind == "slider" and look["sliderOff"]:
            continue
        if kind == "tab" and look["current"]:
            continue
        label, before = look["label"] or kind, look["before"]
        control = widget.locator(selector).nth(j)
        if kind == "dropdown":
            control.select_option(index=(look["index"] + 1) % look["options"])
        elif kind == "select":
            current = look["selected"]
            control.select_option(index=sorted({*current[:1], (max(current or [0]) + 1) % look["options"]}))
        elif kind in ("checkbox", "tab"):
            control.click()
        elif kind == "toggle":
            control.locator("button:not(.mod-active)").first.click()
        elif kind == "slider":
            control.press("PageUp")
        elif kind == "text":
            control.fill("65520")
            control.press("Enter")
        try:  # polled in the page (every 100 ms, no round trip to the test per look), for 15 s at most
            lab.page.wait_for_function(f"([k, before]) => ({SHOWN})(k) !== before", arg=[index, before], timeout=15_000,
                                       polling=100)
        except PlaywrightTimeout:
            if lab.js(SHOWN, index) == before:
                problems.append(f"widget {index + 1}: changing its {kind} '{label.strip()}' changed nothing it shows")
        changed += 1
        if not every:
            break
    if not changed:
        problems.append(f"widget {index + 1} has no control the test could change")
    return changed


def _save_figures(lab: Lab, path: str, folder: Path) -> None:
    """For authors (LABKIT_BROWSER_SHOTS=DIR): a PNG of every figure and widget as the learner sees it."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = path.replace("/", "_").removesuffix(".ipynb")
    for kind, selector in (("fig", "[data-labkit-current] .jp-RenderedPlotly:not(.jupyter-widgets *)"), ("widget", "[data-labkit-current] [data-labkit-widget]")):
        items = lab.page.locator(selector)
        for k in range(items.count()):
            shot = str(folder / f"{stem}-{kind}{k + 1:02d}.png")
            if kind == "fig":
                items.nth(k).scroll_into_view_if_needed()
                items.nth(k).screenshot(path=shot)
            else:  # a widget can be taller than the notebook's scrolling area: the view from its top
                items.nth(k).evaluate("e => e.scrollIntoView({block: 'start'})")
                lab.page.screenshot(path=shot)


@pytest.mark.parametrize("path", PATHS[0::2])
def test_notebook_in_jupyterlab(lab: Lab, path: str) -> None:
    """Half of the notebooks (the other half: tests/test_browser_second_half.py, its own JupyterLab and Chromium,
    so that ``pytest -n 2 --dist loadscope`` runs the two halves on both workers)."""
    run_notebook_in_jupyterlab(lab, path)


def run_notebook_in_jupyterlab(lab: Lab, path: str) -> None:
    """Open, Run All, check outputs, figures and widgets, drive every widget control; then close."""
    solution = path.startswith("solutions/")
    lab.console.clear()
    problems: list[str] = []
    try:
        opened = lab.js(OPEN, path)
        if opened["dirty"]:
            problems.append("the notebook shows unsaved changes as soon as it opens")
        started = time.monotonic()
        lab.js(RUN_ALL)
        lab.page.wait_for_function(SETTLED, timeout=RUN_TIMEOUT_S * 1000, polling=250)
        took = time.monotonic() - started
        n_widgets = lab.js(FIND)
        model, dom = lab.js(MODEL), lab.js(DOM)
        plotly_outputs = 0
        for i, src, out in _outputs(model):
            head = src.strip().splitlines()[0][:70] if src.strip() else ""
            if out["output_type"] == "error":
                problems.append(f"cell {i} ({head}): {out['ename']}: {out['evalue'][:300]}")
            elif out["output_type"] == "stream" and out["name"] == "stderr":
                problems.append(f"cell {i} ({head}) wrote to stderr: {_text(out)[:300]}")
            plotly_outputs += "application/vnd.plotly.v1+json" in out.get("data", {})
        unexecuted = [i for i, c in enumerate(model["cells"]) if c["cell_type"] == "code" and c["execution_count"] is None]
        if unexecuted:
            problems.append(f"cells {unexecuted} did not run")
        if dom["undrawn"]:
            problems.append(f"{dom['undrawn']} of {dom['plots']} plotly figures not drawn")
        if dom["plots"] < plotly_outputs:
            problems.append(f"{plotly_outputs} plotly outputs but {dom['plots']} shown")
        problems += [f"a figure shown as text: {t!r}" for t in dom["fallbacks"]]
        problems += [f"a widget not shown: {t!r}" for t in dom["broken"]]
        everything = "\n".join(_text(out) for _, _, out in _outputs(model))
        verdicts = re.findall(r"^\[(PASSED|NOT YET|NOT SOLVED YET)\] (\S+):", everything, flags=re.MULTILINE)
        wanted = "PASSED" if solution else "NOT SOLVED YET"
        problems += [f"check {ex} says {mark}, expected {wanted}" for mark, ex in verdicts if mark != wanted]
        if "labkit.check." in json.dumps(model["cells"]) and not verdicts:
            problems.append("no check printed a verdict")
        if "make lab" in everything:
            problems.append("an output tells the learner, who is in JupyterLab already, to run `make lab`")
        first = "".join(model["cells"][0]["source"])
        if solution != ("**Solution notebook.**" in first and first.splitlines()[0].endswith("(solutions)")):
            problems.append("the first cell does not say whether this is the solution notebook")
        if os.environ.get("LABKIT_BROWSER_SHOTS"):
            _save_figures(lab, path, Path(os.environ["LABKIT_BROWSER_SHOTS"]))
        lab.js("() => { window.labkitKernelErrors.length = 0; }")
        # solution notebooks: every control; learner notebooks (the same widgets, mostly): one control each
        started = time.monotonic()
        controls = sum(_change_each_control(lab, k, problems, every=solution) for k in range(n_widgets))
        driven = time.monotonic() - started
        problems += [f"a widget control raised in the kernel (seen only in the log console): {e[:300]}"
                     for e in dict.fromkeys(lab.js("() => window.labkitKernelErrors"))]
        problems += list(dict.fromkeys(lab.console))
        print(f"{path}: Run All {took:.1f} s, {dom['plots']} figures, {n_widgets} widgets, {controls} controls in {driven:.1f} s")
        if problems:
            shot = lab.screenshot(path)
            pytest.fail(f"{path} in JupyterLab (screenshot {shot}):\n  " + "\n  ".join(problems), pytrace=False)
    except Exception:
        shot = lab.screenshot(path)
        print(f"screenshot: {shot}")
        raise
    finally:
        lab.js(CLOSE_ALL)


def test_a_widget_error_shows_in_the_widget(lab: Lab) -> None:
    """Lab 01's DGX comparison charting a metric whose figures are of different kinds (a made-up one: GB200 NVL72's
    130 TB/s NVLink beside DGX H100's 32 PFLOP/s): the widget itself says why there is no chart and what to do, and
    clears the old chart; nothing goes only to JupyterLab's log console."""
    import nbformat

    nb = nbformat.v4.new_notebook(metadata=json.loads(json.dumps(_kernel_metadata())))
    nb.cells = [nbformat.v4.new_code_cell(
        "from labkit.widgets import architecture as arch\n"
        "arch.METRICS['mixed'] = lambda s: s.nvlink_domain_bandwidth if s.name == 'GB200 NVL72' else s.headline\n"
        "box = arch.dgx_comparison(('DGX H100', 'GB200 NVL72'))\n"
        "box.controls['metric'].options = list(arch.METRICS)\n"
        "box")]
    nbformat.write(nb, lab.out / "work" / "scratch-widget-error.ipynb")
    lab.console.clear()
    try:
        lab.js(OPEN, "scratch-widget-error.ipynb")
        lab.js(RUN_ALL)
        lab.page.wait_for_function(SETTLED, timeout=RUN_TIMEOUT_S * 1000, polling=250)
        assert lab.js(FIND) == 1
        widget = lab.page.locator('[data-labkit-current] [data-labkit-widget="0"]')
        assert widget.locator(".js-plotly-plot").count() == 1
        lab.js("() => { window.labkitKernelErrors.length = 0; }")
        widget.locator(".widget-dropdown select").select_option(label="mixed")
        widget.get_by_text("What to do").wait_for(timeout=15_000)
        text = widget.inner_text()
        assert "130 TB/s" in text and "32 PFLOP/s" in text and "Unselect" in text
        assert widget.locator(".js-plotly-plot").count() == 0, "the chart for the old metric is still shown"
        assert lab.js("() => window.labkitKernelErrors") == [] and not lab.console
    except BaseException:
        print(f"screenshot: {lab.screenshot('widget-error')}")
        raise
    finally:
        lab.js(CLOSE_ALL)


def test_a_failed_checks_picture_opens_on_the_failing_thread_and_a_reopened_notebook_says_what_to_do(lab: Lab) -> None:
    """02.saxpy with `i <= n`: the picture the check offers has the thread its message names selected (slider, star
    in the grid of threads). Saved, closed and reopened (a new kernel): `labkit lab` saved the notebook without the
    widget view (labkit.widgets._reopen.drop_widget_views), so nothing asks for a model that is gone (no "Error
    displaying widget", no "model not found" in the console), and the note saved in its place says to run the cell
    again."""
    import nbformat

    nb = nbformat.v4.new_notebook(metadata=json.loads(json.dumps(_kernel_metadata())))
    nb.cells = [nbformat.v4.new_code_cell(
        "import labkit, numpy as np\nenv = labkit.setup(quiet=True)\nfrom numba import cuda\n\n"
        "@cuda.jit\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n    if i <= x.size:\n"
        "        out[i] = a * x[i] + y[i]\n\nresult = labkit.check.saxpy(saxpy)"),
        nbformat.v4.new_code_cell("labkit.show(saxpy, labkit.check.harness.failed_case())")]
    nbformat.write(nb, lab.out / "work" / "scratch-failed-picture.ipynb")
    lab.console.clear()
    try:
        lab.js(OPEN, "scratch-failed-picture.ipynb")
        lab.js(RUN_ALL)
        lab.page.wait_for_function(SETTLED, timeout=RUN_TIMEOUT_S * 1000, polling=250)
        model = lab.js(MODEL)
        message = "".join(_text(o) for _, _, o in _outputs(model))
        m = re.search(r"thread \((\d+), 0, 0\) of block \((\d+), 0, 0\)", message)
        assert m, message
        assert lab.js(FIND) == 1
        widget = lab.page.locator('[data-labkit-current] [data-labkit-widget="0"]')
        assert widget.locator(".widget-slider .widget-readout").first.inner_text().strip() == m.group(1)
        assert f"block ({m.group(2)}, 0, 0), threadIdx ({m.group(1)}, 0, 0)" in widget.inner_text()
        stars = widget.evaluate("el => [...el.querySelectorAll('.js-plotly-plot')].flatMap(g => g.data)"
                                ".filter(t => t.name === \"the check's thread\").map(t => t.x[0])")
        assert stars == [int(m.group(1))], stars
        assert "run this cell again" in lab.page.locator("[data-labkit-current]").inner_text()
        lab.js(CLOSE_ALL)  # saves, shuts the kernel down
        lab.js(OPEN, "scratch-failed-picture.ipynb")
        lab.page.wait_for_function("() => window.labkitCurrent.content.node.innerText.includes('run this cell again')",
                                   timeout=30_000, polling=250)
        lab.page.wait_for_timeout(2000)  # time for a widget view, were one saved, to fail to find its model
        assert lab.page.evaluate(f"() => ({BROKEN})(window.labkitCurrent.content.node).length") == 0
        text = lab.page.locator("[data-labkit-current]").inner_text()
        assert "run this cell again to bring the explorer back" in text
        assert not lab.console, lab.console
    except BaseException:
        print(f"screenshot: {lab.screenshot('failed-picture')}")
        raise
    finally:
        lab.js(CLOSE_ALL)


def test_review_3_widget_fixes_in_the_browser(lab: Lab) -> None:
    """Browser review 3, items 6-11, as a learner meets them in Chromium: the coalescing stride slider is disabled
    unless the pattern is "strided"; the occupancy calculator says "cannot launch" once; deselecting every DGX says
    so instead of charting DGX-1; the roofline says when a GPU change replaces FP8 and unticks sparsity; `labkit.show`
    in "warp" scope has a warp slider; and `labkit lab --no-browser` printed the start notebook's URL."""
    import nbformat

    log = (lab.out / "server.log").read_text()
    assert "/lab/tree/00-start-here.ipynb?token=" in log, "the printed URL does not land on the start notebook"
    nb = nbformat.v4.new_notebook(metadata=json.loads(json.dumps(_kernel_metadata())))
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import labkit, numpy as np\nenv = labkit.setup(quiet=True)\n"
        "from labkit.widgets import architecture as arch, kernels as kw",
        "kw.coalescing_explorer()",
        "kw.occupancy_calculator('sm_90', 1024, 72, 0)",
        "arch.dgx_comparison(('DGX H100', 'DGX B200'))",
        "arch.roofline_explorer('H100', 'fp8', 10)",
        "from numba import cuda\n\n@cuda.jit\ndef copy(x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
        "        out[i] = x[i]\n\nlabkit.show(copy, np.arange(128, dtype=np.float32), np.zeros(128, np.float32), "
        "grid=2, block=64)")]
    nbformat.write(nb, lab.out / "work" / "scratch-review3-widgets.ipynb")
    lab.console.clear()
    try:
        lab.js(OPEN, "scratch-review3-widgets.ipynb")
        lab.js(RUN_ALL)
        lab.page.wait_for_function(SETTLED, timeout=RUN_TIMEOUT_S * 1000, polling=250)
        assert lab.js(FIND) == 5
        w = [lab.page.locator(f'[data-labkit-current] [data-labkit-widget="{k}"]') for k in range(5)]

        def wait_text(widget: Any, text: str) -> str:
            widget.get_by_text(text, exact=False).first.wait_for(timeout=15_000)
            return widget.inner_text()

        # item 6: the stride slider is live only for "strided"; "1 line", not "1 lines"
        handle = w[0].locator(".widget-slider .noUi-handle").first
        assert handle.get_attribute("aria-disabled") == "true" or w[0].locator(".widget-slider.mod-disabled, "
                                                                                 ".widget-slider [disabled]").count() > 0
        w[0].locator(".widget-dropdown select").first.select_option(label="strided")
        wait_text(w[0], "stride 2,")
        assert handle.get_attribute("aria-disabled") != "true"
        # item 7
        text = wait_text(w[1], "cannot launch")
        assert text.count("cannot launch") == 1 and "What to do" in text
        # item 8: nothing selected, nothing charted, and the widget says why
        w[2].locator(".widget-select-multiple select").select_option([])
        text = wait_text(w[2], "no system is selected")
        assert w[2].locator(".js-plotly-plot").count() == 0
        # item 9: FP8 with sparsity on an H100, then a V100
        w[3].locator(".widget-checkbox input[type=checkbox]").check()
        w[3].locator(".widget-dropdown select").first.select_option(label="V100 SXM2 16GB")
        text = wait_text(w[3], "showing FP16 instead")
        assert "2:4 sparsity is off" in text and not w[3].locator(".widget-checkbox input[type=checkbox]").is_checked()
        # item 10: warp scope, warp slider
        w[4].get_by_role("button", name="warp").first.click()
        w[4].locator(".widget-slider .widget-label", has_text="warp").first.wait_for(timeout=15_000)
        assert lab.js("() => window.labkitKernelErrors") == [] and not lab.console
    except BaseException:
        print(f"screenshot: {lab.screenshot('review3-widgets')}")
        raise
    finally:
        lab.js(CLOSE_ALL)
