"""A learner's notebooks as files, for the instructor: never by opening her server (review 4, R4-1).

On the classroom hub nobody but its owner may open a learner's server (the hub answers 403; course/classroom.md,
"Threat model"). An instructor who needs to see a learner's work, or to grade it, copies her notebooks out of her
home instead::

    sudo python -m labkit.classroom.collect --docker-volume labkit-home-alice --out collected/alice   # the DGX
    python -m labkit.classroom.collect --from /mnt/pvc/alice --out collected/alice                   # any folder

What is copied: the regular ``.ipynb`` files under the home's ``labkit-work/`` (or the folder given), at most
:data:`MAX_BYTES` each, never through a symbolic link (a learner could otherwise point one at a file of the host's,
which root would copy), and with every output that a browser would run or render as a page removed
(:data:`ACTIVE_MIME`: HTML, JavaScript, widgets), so opening the copy runs nothing of the learner's. Text and
images stay. The copies are then files like any submission: read them in your own JupyterLab, or grade them with
:mod:`labkit.classroom.grading`.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from labkit.errors import LabkitError
from labkit.validate import describe, require_path

__all__ = ["ACTIVE_MIME", "MAX_BYTES", "clean_notebook", "collect", "docker_volume_path"]

#: The largest notebook copied (bytes); larger ones are listed as skipped.
MAX_BYTES = 50 * 1024 * 1024
#: Output types removed from the copies: each is rendered as a page or run by a browser.
ACTIVE_MIME = frozenset(
    {
        "text/html",
        "application/javascript",
        "text/javascript",
        "image/svg+xml",
        "application/vnd.jupyter.widget-view+json",
        "application/vnd.jupyter.widget-state+json",
        "text/markdown",
        "text/latex",
    }
)


def _not_a_notebook(what: str, value: Any) -> LabkitError:
    return LabkitError(
        f"not a notebook: {what} must be {'a dict' if what == 'the notebook' else 'a list of dicts'}, got {describe(value)}.",
        fix="Give a notebook as json.load() reads a .ipynb file (a dict with a list of cells).",
    )


def clean_notebook(nb: dict[str, Any]) -> int:
    """Remove every :data:`ACTIVE_MIME` output (and the notebook's widget state) from ``nb`` in place; returns how
    many outputs were changed. A structure that is no notebook (cells or outputs that are not lists of dicts) is
    refused with a :class:`LabkitError` before anything is changed, so nothing active is left in a half-cleaned copy."""
    if not isinstance(nb, dict):
        raise _not_a_notebook("the notebook", nb)
    cells = nb.get("cells", [])
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise _not_a_notebook("its cells", cells)
    for cell in cells:
        outputs = cell.get("outputs") or []
        if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
            raise _not_a_notebook("a cell's outputs", outputs)
    changed = 0
    for cell in cells:
        for out in cell.get("outputs") or []:
            data = out.get("data")
            if isinstance(data, dict) and ACTIVE_MIME & set(data):
                out["data"] = {k: v for k, v in data.items() if k not in ACTIVE_MIME}
                changed += 1
        if isinstance(cell.get("metadata"), dict):
            cell["metadata"].pop("trusted", None)
    if isinstance(nb.get("metadata"), dict):
        nb["metadata"].pop("widgets", None)
        nb["metadata"].pop("signature", None)
    return changed


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file no larger than :data:`MAX_BYTES`, opened without following
    a symbolic link; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def _walk(base: Path) -> tuple[list[Path], list[Path]]:
    """Every ``.ipynb`` under ``base``, never entering a symbolic link (nor hidden folders such as checkpoints);
    and the symbolic links met."""
    found: list[Path] = []
    links: list[Path] = []
    todo = [base]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if e.is_symlink():
                links.append(Path(e.path))
                continue
            if e.name.startswith("."):
                continue
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
            elif e.name.endswith(".ipynb") and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
    return sorted(found), sorted(links)


def collect(source: Path, out: Path) -> tuple[list[Path], list[str]]:
    """Copy the learner's notebooks from ``source`` (her home: its ``labkit-work/`` is used when present) to
    ``out``, cleaned (:func:`clean_notebook`); returns (copies, what was skipped and why). ``out`` must lie outside
    the folder read (else the copies would overwrite the learner's notebooks, or be collected again)."""
    source = require_path(source, "source", fix="Give the learner's home (or a folder of her notebooks).")
    out = require_path(out, "out", fix="Give a folder for the copies, outside the learner's home.")
    if source.is_symlink() or not source.is_dir():
        raise LabkitError(f"{source} is not a folder.", fix="Give the learner's home (or a folder of her notebooks).")
    base = source / "labkit-work" if (source / "labkit-work").is_dir() and not (source / "labkit-work").is_symlink() else source
    where = out.resolve()
    if where == base.resolve() or base.resolve() in where.parents or where in base.resolve().parents:
        raise LabkitError(
            f"the copies' folder {out} overlaps the folder read ({base}).",
            fix="Give --out a folder outside the learner's home, e.g. collected/<learner>.",
        )
    found, links = _walk(base)
    copies: list[Path] = []
    skipped = [f"{link.relative_to(base)}: a symbolic link (not followed)" for link in links]
    for path in found:
        rel = path.relative_to(base)
        data = _read_regular(path)
        if data is None or len(data) > MAX_BYTES:
            skipped.append(f"{rel}: not a regular file, or larger than {MAX_BYTES // 2**20} MB")
            continue
        try:
            nb = json.loads(data)
        except ValueError:
            skipped.append(f"{rel}: not a notebook (not JSON)")
            continue
        try:
            clean_notebook(nb)
        except LabkitError:
            skipped.append(f"{rel}: not a notebook (its cells or outputs are not lists of dicts)")
            continue
        dst = out / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise LabkitError(
                f"cannot write the copy {dst}: {exc.strerror or exc}.", fix="Give --out a folder you can write to."
            ) from None
        copies.append(dst)
    return copies, skipped


def docker_volume_path(name: str) -> Path:
    """Where Docker keeps the named volume on this host (its ``Mountpoint``; reading it needs root)."""
    try:
        import docker

        return Path(docker.from_env().volumes.get(name).attrs["Mountpoint"])
    except Exception as exc:  # noqa: BLE001 - docker's errors: no daemon, no such volume
        raise LabkitError(
            f"cannot find the Docker volume {name!r}: {exc}", fix="Give the learner's volume, e.g. labkit-home-alice."
        ) from None


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.classroom.collect``: copy a learner's notebooks out of her home (see the module)."""
    p = argparse.ArgumentParser(prog="python -m labkit.classroom.collect", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--docker-volume", metavar="NAME", help="the learner's home volume, e.g. labkit-home-alice")
    where.add_argument("--from", dest="source", type=Path, help="a folder: the learner's home or her notebooks")
    p.add_argument("--out", type=Path, required=True, help="where the cleaned copies go")
    args = p.parse_args(argv)
    try:
        source = docker_volume_path(args.docker_volume) if args.docker_volume else args.source
        copies, skipped = collect(source, args.out)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 2
    print(f"{len(copies)} notebook(s) copied to {args.out} (scripts and HTML outputs removed)")
    for s in skipped:
        print(f"  skipped {s}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
