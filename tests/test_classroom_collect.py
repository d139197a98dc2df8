"""A learner's work as files for the instructor (review 4, R4-1): ``python -m labkit.classroom.collect``.

The instructor no longer opens a learner's server (the hub answers 403: tests/test_hub.py); she copies the learner's
notebooks out of her home. The copy must run nothing of the learner's when opened (no HTML or script output), and
must not follow a symbolic link the learner planted (root copying ``/etc/shadow`` for her)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat

from labkit.classroom import collect


def test_collect_copies_notebooks_cleaned_and_never_through_a_link(tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    work = home / "labkit-work"
    (work / "solutions").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("help()", outputs=[
        nbformat.v4.new_output("display_data", data={"text/html": "<script>steal()</script>", "text/plain": "plot"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "steal()"}),
        nbformat.v4.new_output("stream", text="hello\n")])])
    nb.cells[0].metadata["trusted"] = True
    nbformat.write(nb, str(work / "03-memory.ipynb"))
    secret = tmp_path / "host-secret.ipynb"
    secret.write_text(json.dumps({"cells": [], "secret": "the host's"}))
    os.symlink(secret, work / "help-me.ipynb")  # a learner's link to a file of the host's
    os.symlink(tmp_path, work / "linked-dir")
    (work / "broken.ipynb").write_text("{not json")
    (home / "outside.ipynb").write_text("{}")  # outside labkit-work: not taken
    out = tmp_path / "out"
    assert collect.main(["--from", str(home), "--out", str(out)]) == 0
    copies = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.ipynb"))
    assert copies == ["03-memory.ipynb"], copies
    got = json.loads((out / "03-memory.ipynb").read_text())
    outputs = got["cells"][0]["outputs"]
    assert set(outputs[0]["data"]) == {"text/plain"} and outputs[1]["data"] == {}
    assert "".join(outputs[2]["text"]) == "hello\n"
    assert "trusted" not in got["cells"][0]["metadata"]
    text = capsys.readouterr().out
    assert "1 notebook(s) copied" in text and "help-me.ipynb" in text and "broken.ipynb" in text
    assert "the host's" not in (out / "03-memory.ipynb").read_text()


def test_collect_never_writes_into_the_folder_it_reads_and_skips_what_is_no_notebook(tmp_path: Path, capsys) -> None:
    """``--out`` inside (or equal to, or above) the learner's folder is refused before anything is written (the
    copies would overwrite her notebooks); a JSON file whose cells are not dicts is skipped, not a traceback."""
    work = tmp_path / "home" / "labkit-work"
    work.mkdir(parents=True)
    (work / "odd.ipynb").write_text(json.dumps({"cells": [1, "x"]}))
    nbformat.write(nbformat.v4.new_notebook(), str(work / "01-ok.ipynb"))
    before = {p: p.read_bytes() for p in work.iterdir()}
    for out in (work, work / "copies", tmp_path / "home", tmp_path):
        assert collect.main(["--from", str(tmp_path / "home"), "--out", str(out)]) == 2
        assert "overlaps the folder read" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in work.iterdir()} == before
    assert collect.main(["--from", str(tmp_path / "home"), "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "1 notebook(s) copied" in text and "odd.ipynb: not a notebook" in text
