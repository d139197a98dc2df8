"""The learner's own copy of the notebooks ("work copies"), kept outside the course repository.

``labkit lab`` opens JupyterLab on a work folder, not on the tracked ``notebooks/``: what a learner types, runs
and saves (outputs included) stays in their copy, the repository stays clean, and ``git pull`` brings new
versions of the course without conflicts.

- :func:`work_dir`: where the copies live: ``$LABKIT_WORK_DIR``, else ``$XDG_DATA_HOME/labkit/work``, else
  ``~/labkit-work``.
- :func:`sync`: on every start, copy in each course notebook the folder lacks (all of them the first time, a new
  lab after an update); never overwrite a copy. A copy whose course version changed since it was copied is
  reported as ``updated``, so the learner can choose ``labkit lab --reset NN``.
- :func:`reset`: a fresh copy of one lab (learner and solution notebooks); a copy the learner changed moves to
  ``<work>/old/`` with a time stamp, never deleted; a copy still as it was made (nothing typed, run or saved in it)
  is simply replaced, so ``old/`` holds only work.

A copy is stamped with this machine's Python kernel (its kernelspec and ``language_info``): JupyterLab writes the
running kernel's ``language_info`` into a notebook it opens, and where that differs from the file (another Python
version, say) it marks the notebook changed before the learner has done anything.

The folder mirrors ``notebooks/`` (``NN-topic.ipynb`` and ``solutions/NN-topic.ipynb``), so the notebooks'
relative links work in the copies too. ``.labkit-work.json`` records the hash of the course version each copy
was made from (key: the notebook's path) and the hash of the copy's content as written (key: ``copy:`` + the path;
cells, sources and outputs, not the notebook metadata JupyterLab may rewrite on opening).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitError

__all__ = ["MANIFEST", "SyncReport", "course_notebooks", "kernel_metadata", "reset", "sync", "work_dir"]

#: The file in the work folder recording, per copy, the hash of the course notebook it was copied from.
MANIFEST = ".labkit-work.json"


def work_dir() -> Path:
    """The work folder: ``$LABKIT_WORK_DIR``, else ``$XDG_DATA_HOME/labkit/work``, else ``~/labkit-work``."""
    if os.environ.get("LABKIT_WORK_DIR"):
        return Path(os.environ["LABKIT_WORK_DIR"]).expanduser()
    if os.environ.get("XDG_DATA_HOME"):
        return Path(os.environ["XDG_DATA_HOME"]).expanduser() / "labkit" / "work"
    return Path.home() / "labkit-work"


def course_notebooks(notebooks: Path) -> list[Path]:
    """The course's notebooks relative to ``notebooks/``: ``NN-topic.ipynb`` and ``solutions/NN-topic.ipynb``."""
    found = sorted(notebooks.glob("[0-9][0-9]-*.ipynb")) + sorted((notebooks / "solutions").glob("[0-9][0-9]-*.ipynb"))
    return [p.relative_to(notebooks) for p in found]


@dataclass
class SyncReport:
    """What :func:`sync` did: copies made, copies kept although the course version changed, the folder."""

    work: Path
    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Short sentences for the terminal."""
        out = [f"your notebooks: {self.work}"]
        if self.copied:
            every = "all labs and their solutions" if any(n.startswith("solutions/") for n in self.copied) else "all labs"
            names = ", ".join(self.copied) if len(self.copied) <= 4 else every
            out.append(f"copied {len(self.copied)} notebook(s) from the course: {names}")
        if self.updated:
            labs = sorted({Path(n).name[:2] for n in self.updated})
            out.append(
                f"the course has a newer version of {', '.join(self.updated)}; your copy is kept. "
                f"For a fresh copy (one you changed moves to old/): labkit lab --reset {' '.join(labs)}"
            )
        return out


def kernel_metadata() -> dict[str, dict]:
    """The notebook metadata JupyterLab's Python kernel reports here: ``kernelspec`` and ``language_info``."""
    import platform

    info = {
        "name": "python",
        "version": platform.python_version(),
        "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3},
        "pygments_lexer": "ipython3",
        "nbconvert_exporter": "python",
        "file_extension": ".py",
    }
    try:  # what ipykernel itself answers, where it differs from the sketch above
        from ipykernel.ipkernel import IPythonKernel

        info = dict(IPythonKernel.language_info)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - JupyterLab always brings ipykernel
        pass
    return {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": info,
    }


def _copy(src: Path, dst: Path) -> None:
    """Copy a notebook, stamped with this machine's kernel metadata (a file that is not JSON is copied as is)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        nb = json.loads(src.read_text(encoding="utf-8"))
        nb.setdefault("metadata", {}).update(kernel_metadata())
    except (ValueError, AttributeError):
        shutil.copyfile(src, dst)
        return
    dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _content_digest(path: Path) -> str:
    """Hash of what a learner can change in a notebook: everything but the notebook's and the cells' metadata and
    cell ids (which JupyterLab may rewrite by only opening it). A file that is not a JSON object: its bytes."""
    raw = path.read_bytes()
    try:
        nb = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        nb = None
    if not isinstance(nb, dict):
        return hashlib.sha256(raw).hexdigest()[:16]
    body = {k: v for k, v in nb.items() if k != "metadata"}
    if isinstance(body.get("cells"), list):
        body["cells"] = [
            {k: v for k, v in c.items() if k not in ("metadata", "id")} if isinstance(c, dict) else c for c in body["cells"]
        ]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _copy_key(key: str) -> str:
    return f"copy:{key}"


def _untouched(work: Path, key: str, manifest: dict[str, str]) -> bool:
    """True when the copy ``work/key`` is still as labkit wrote it (a copy from before labkit recorded that: False)."""
    recorded = manifest.get(_copy_key(key))
    return recorded is not None and _content_digest(work / key) == recorded


def _load(work: Path) -> dict[str, str]:
    try:
        data = json.loads((work / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save(work: Path, manifest: dict[str, str]) -> None:
    (work / MANIFEST).write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def _prepare(notebooks: Path, work: Path) -> None:
    if not (notebooks / "00-start-here.ipynb").exists():
        raise LabkitError(
            f"{notebooks} does not hold the course's notebooks.", fix="Run `labkit lab` inside the course repository."
        )
    if work.resolve() == notebooks.resolve() or notebooks.resolve() in work.resolve().parents:
        raise LabkitError(
            f"the work folder {work} is inside the course's notebooks/ folder.",
            fix="Set LABKIT_WORK_DIR to a folder outside the repository, e.g. ~/labkit-work.",
        )
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitError(
            f"cannot create the work folder {work}: {exc.strerror}.", fix="Set LABKIT_WORK_DIR to a folder you can write to."
        ) from None


def sync(notebooks: Path, work: Path | None = None, *, solutions: bool = True) -> SyncReport:
    """Copy every course notebook the work folder lacks; keep every existing copy as it is. ``solutions=False``
    (a learner's server under the classroom hub: ``deploy/singleuser.sh``) copies the learner notebooks only; the
    solved ones stay out of the learners' work folders (self-paced ``labkit lab`` keeps them)."""
    work = work_dir() if work is None else Path(work)
    _prepare(notebooks, work)
    manifest, report = _load(work), SyncReport(work)
    for rel in course_notebooks(notebooks):
        if not solutions and rel.parts[0] == "solutions":
            continue
        src, dst, key = notebooks / rel, work / rel, rel.as_posix()
        if not dst.exists():
            _copy(src, dst)
            manifest[key], manifest[_copy_key(key)] = _digest(src), _content_digest(dst)
            report.copied.append(key)
        elif key in manifest and manifest[key] != _digest(src):
            report.updated.append(key)
        elif key not in manifest:
            manifest[key] = _digest(src)  # a copy from before the manifest existed: take it as of today's course
    _save(work, manifest)
    return report


def reset(notebooks: Path, lab_id: str, work: Path | None = None) -> list[str]:
    """A fresh copy of lab ``lab_id`` (e.g. ``"03"``), learner and solution notebooks.

    A copy the learner changed goes to ``old/`` first; one still as labkit made it is replaced (nothing of the
    learner's is lost, and ``old/`` does not fill with untouched copies). Returns one line per notebook saying what
    happened."""
    from labkit import course

    work = work_dir() if work is None else Path(work)
    _prepare(notebooks, work)
    name = course.lab(lab_id).filename
    manifest, lines = _load(work), []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for rel in (Path(name), Path("solutions") / name):
        src, dst, key = notebooks / rel, work / rel, rel.as_posix()
        if not src.exists():
            continue
        if dst.exists() and _untouched(work, key, manifest):
            lines.append(f"your {key} was untouched: replaced, nothing kept")
        elif dst.exists():
            aside = work / "old" / rel.parent / f"{rel.stem}.{stamp}{rel.suffix}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            dst.replace(aside)
            lines.append(f"your {key} moved to {aside}")
        _copy(src, dst)
        manifest[key], manifest[_copy_key(key)] = _digest(src), _content_digest(dst)
        lines.append(f"fresh copy: {dst}")
    _save(work, manifest)
    return lines
