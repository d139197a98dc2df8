"""Sphinx configuration of the course's website (``make site``; site/README.md says how to build and publish it).

The sources are assembled by ``tools/site_pages.py`` into ``site/_build/src`` and built with this file
(``sphinx-build -c site``). Nothing is executed and nothing is fetched: the pages show what the solution notebooks
store, and every theme file, script (plotly.js included) and font comes from the installed packages.

The course's repository is one setting, ``[tool.labkit] repository`` in ``pyproject.toml`` (the notebooks' first cell
installs labkit from it too). With it, every page says ``git clone <it> && make lab`` and each lab page has Binder and
Colab launch buttons (the theme's own, in the header, and the same links in the lab's launch bar); without it, there
are none and the pages say to get the course and run ``make lab``. For an admin: the ``labkit_*`` settings below (or
the environment variables named beside them) add an "Open in JupyterHub" button, an nbgitpuller link to your hub.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

_TOOL = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()).get("tool", {})

# ---- settings for the site's admin ------------------------------------------------------------------------------
#: your JupyterHub, e.g. "https://hub.example.edu" (nbgitpuller must be installed in its user image; the course's is)
labkit_hub_url = os.environ.get("LABKIT_SITE_HUB_URL", "")
#: the public git repository, e.g. "https://github.com/you/dgx-course": pyproject.toml's, or (a site for a fork, the
#: tests) LABKIT_SITE_REPOSITORY_URL, set to "" for none
labkit_repository_url = os.environ.get("LABKIT_SITE_REPOSITORY_URL", _TOOL.get("labkit", {}).get("repository", "")).rstrip("/")
#: where a reader can launch a lab without an account (Binder, from environment.yml by repo2docker) and in Colab
#: (GitHub repositories only); set to "" to leave a button out
labkit_binder_url = os.environ.get("LABKIT_SITE_BINDER_URL", "https://mybinder.org")
labkit_colab_url = os.environ.get("LABKIT_SITE_COLAB_URL", "https://colab.research.google.com")
#: the branch nbgitpuller pulls
labkit_repository_branch = os.environ.get("LABKIT_SITE_BRANCH", "main")
#: the folder the clone gets in a learner's home (default: the repository's name)
labkit_clone_dir = os.environ.get("LABKIT_SITE_CLONE_DIR", "")

# ---- Sphinx ------------------------------------------------------------------------------------------------------
project = "GPU computing on NVIDIA DGX systems, from Python"
author = "the course's authors"
copyright = "the course's authors, Apache-2.0"
extensions = ["myst_nb", "sphinx_design", "sphinx_copybutton"]
exclude_patterns = ["_extra", "_static", "**.ipynb_checkpoints"]
nitpicky = True  # a reference that resolves nowhere is a warning, and a warning fails the build (-W)
suppress_warnings: list[str] = []
language = "en"

# MyST and MyST-NB: read the notebooks' stored outputs, never execute them
nb_execution_mode = "off"
nb_merge_streams = True
nb_ipywidgets_js: dict = {}  # no widget manager from a CDN: the notebooks store a static picture of each explorer
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
nb_render_markdown_format = "myst"

# HTML: the book theme, every asset local
html_theme = "sphinx_book_theme"
html_title = "GPU computing on DGX, from Python"
html_static_path = ["_static"]  # and the source tree's _static (plotly.min.js) and _extra (the notebooks): setup()
html_css_files = ["labkit-site.css"]
html_js_files = ["labkit-site.js"]
html_copy_source = False  # the notebooks are downloadable as they are, from notebooks/
html_show_sourcelink = False
html_last_updated_fmt = None
html_show_search_summary = False  # summaries fetch() each page, which a browser refuses from file://
_launch = {"binderhub_url": labkit_binder_url, "notebook_interface": "jupyterlab",
           # the theme links Colab for GitHub only (and warns otherwise, which -W makes an error)
           "colab_url": labkit_colab_url if labkit_repository_url.startswith("https://github.com/") else ""}
html_favicon = "_static/favicon.svg"
html_theme_options = {
    **({"repository_url": labkit_repository_url, "repository_branch": labkit_repository_branch,
        "use_repository_button": True, "path_to_docs": "", "launch_buttons": _launch} if labkit_repository_url else {}),
    "use_download_button": False,  # each lab page has its own download buttons (learner and solution notebooks)
    "use_fullscreen_button": True,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
pygments_style = "default"
html_context = {"default_mode": "light"}  # the theme logs a console error when the mode is left unset


def _plotly_where_drawn(app, pagename, templatename, context, doctree):  # noqa: ANN001
    """plotly.js (4.6 MB, from the plotly package) only on the pages that draw a figure."""
    if doctree is not None and "labkit-plotly" in context.get("body", ""):
        app.add_js_file("plotly.min.js", priority=400)


def _launch_the_learner_notebook(app, pagename, templatename, context, doctree):  # noqa: ANN001
    """The theme's launch buttons open the page's own source (``labs/NN-topic.ipynb``, the solved lab the site shows);
    a reader launches the lab to *do* it: the learner notebook, ``notebooks/NN-topic.ipynb`` in the repository."""
    if not pagename.startswith("labs/"):
        return
    old, new = f"{pagename}.ipynb", f"notebooks/{pagename.removeprefix('labs/')}.ipynb"

    def fix(buttons):  # noqa: ANN001, ANN202
        for b in buttons:
            if isinstance(b.get("url"), str):
                b["url"] = b["url"].replace(old, new)
            fix(b.get("buttons", []))

    fix(context.get("header_buttons", []))


def _generated_files(app, config):  # noqa: ANN001
    """tools/site_pages.py writes plotly.js under <source>/_static and the notebooks under <source>/_extra."""
    config.html_static_path.append(os.path.join(app.srcdir, "_static"))
    config.html_extra_path.append(os.path.join(app.srcdir, "_extra"))


def setup(app):  # noqa: ANN001
    app.connect("config-inited", _generated_files)
    app.connect("html-page-context", _plotly_where_drawn)
    app.connect("html-page-context", _launch_the_learner_notebook, priority=900)  # after the theme made the buttons
