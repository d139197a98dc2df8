"""Notebook trust in learners' servers (review 4, R4-1): a notebook the learner signed is never trusted there.

R4-1's first step: mallory signed a notebook whose stored output is a script with her own notary (its secret and
database live in her home), her server reported it trusted, and JupyterLab ran the script for whoever opened it.
Learners' servers under the hub use :class:`labkit.classroom.notary.UntrustingContentsManager`
(``--ServerApp.contents_manager_class``, set by :func:`labkit.hub_setup.configure_origins`; the real hub:
tests/test_redteam_hub.py). The control: jupyter_server's own contents manager trusts the same notebook."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("jupyter_server")

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager  # noqa: E402
from nbformat.sign import NotebookNotary  # noqa: E402

from labkit.classroom.notary import UntrustingContentsManager  # noqa: E402


def _signed(home: Path) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("help()", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/html": "<script>steal()</script>"})])])
    (home / ".local" / "share" / "jupyter").mkdir(parents=True)
    notary = NotebookNotary()  # what `jupyter trust` does, as her
    notary.sign(nb)
    path = home / "help-me.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_learners_signature_is_not_trusted_and_the_server_signs_nothing(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "mallory"
    home.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(home / ".local" / "share" / "jupyter"))  # her notary's home
    _signed(home)

    def trusted(cm) -> bool:
        return asyncio.run(cm.get("help-me.ipynb"))["content"].cells[0].metadata.get("trusted")

    ordinary = AsyncLargeFileManager(root_dir=str(home))
    assert trusted(ordinary) is True  # the control: her notary's signature counts in an ordinary server
    theirs = UntrustingContentsManager(root_dir=str(home))
    assert trusted(theirs) is False
    asyncio.run(theirs.trust_notebook("help-me.ipynb"))  # POST /api/contents/help-me.ipynb/trust
    assert trusted(theirs) is False
    # a save (her own session's outputs) signs nothing either: the file still opens untrusted
    model = asyncio.run(theirs.get("help-me.ipynb"))
    asyncio.run(theirs.save({"type": "notebook", "format": "json", "content": model["content"]}, "help-me.ipynb"))
    assert trusted(theirs) is False
