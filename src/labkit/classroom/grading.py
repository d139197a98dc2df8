"""Grading learners' submissions where their code reaches nothing of the grader's (review 4, R4-2).

``otter run`` executes a submitted notebook in a kernel, in the grader's account, and runs the tests in that same
process: a cell of the learner's wrote into the grader's home, copied a key, and replaced ``labkit.check.run`` so
that the notebook graded itself 1/1. Here a submission is graded in two steps:

1. **What is graded** (:func:`grading_notebook`): the lab's own handout notebook, with each cell tagged
   ``exercise`` replaced by the learner's cell of the same id. Cells the learner added (R4-2's cell at the top),
   and edits to any other cell (setup, check calls), are not run at all. An exercise cell whose code reaches into
   the grader (``labkit``, ``otter``, ``sys.modules``, ``builtins``, ``setattr`` on a module, ``ctypes``, ...) is
   *flagged* (:func:`flags`) for the instructor to read; it is still graded.
2. **Where it runs** (:func:`sandbox_argv`): as a throwaway user id with no account, in its own network namespace
   (no network: only the namespace's own loopback, which reaches nothing of the host's), its own PID namespace, and a mount namespace in which the homes,
   ``/root``, ``/tmp``, ``/srv`` (the hub's state) and the like are empty, with only the course's Python
   environment and a fresh folder of its own (0700, the submission and the autograder in it) put back; no new
   privileges, no capabilities. This needs root (``sudo``): ``unshare`` and ``setpriv`` from util-linux.
   Where Docker is available, ``otter grade`` (Otter's own container grading) is the alternative the docs give.

What this does **not** do: the checks still run in the kernel that ran the learner's exercise cells, so an exercise
cell written to subvert the check (a patch inside the graded function itself) can still change its own score:
that is what the flags are for. Its reach ends at the sandbox.

``python -m labkit.classroom.grading --autograder ZIP --handout NB --out RESULTS SUBMISSION.ipynb ...`` grades
each submission into ``RESULTS/<name>/results.json`` (what :func:`labkit.gradebook.read_otter_results` reads) and
prints each score with its flags.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import LabkitError
from labkit.validate import describe, require_int, require_number, require_path, require_sequence

__all__ = ["GradeResult", "flags", "grade", "grading_notebook", "hidden_paths", "sandbox_argv"]

#: Folders that are empty inside the sandbox (besides the grader's own home): other users' homes, root's, temporary
#: folders, the hub's state (/srv/labkit-hub), mounted media.
HIDDEN = ("/home", "/root", "/tmp", "/var/tmp", "/dev/shm", "/srv", "/run/user", "/mnt", "/media", "/opt/secrets")
#: Names an exercise cell has no business touching: each is a way into the grader's checks or the process.
SUSPECT_NAMES = frozenset(
    {
        "labkit",
        "otter",
        "sys",
        "builtins",
        "__builtins__",
        "importlib",
        "ctypes",
        "gc",
        "inspect",
        "setattr",
        "globals",
        "locals",
        "vars",
        "exec",
        "eval",
        "compile",
        "__import__",
        "os",
        "subprocess",
        "socket",
        "open",
    }
)
#: The range throwaway user ids are drawn from (no account has them on a normal system).
UID_RANGE = (2_000_000, 2_100_000)


@dataclass
class GradeResult:
    """One graded submission: its score, the flags to read, and where Otter's results are."""

    submission: Path
    score: float | None
    possible: float | None
    flags: list[str] = field(default_factory=list)
    dropped: int = 0
    results: Path | None = None
    log: str = ""


def _uid(value: Any, name: str = "uid") -> int:
    """``value`` as a throwaway user id: a whole number from 1 to 2**32 - 2 that no account on this host has (an
    account's id would give the sandbox that account's files; 0 is root)."""
    fix = f"Leave uid out (one from {UID_RANGE[0]} to {UID_RANGE[1] - 1} is drawn)."
    uid = require_int(value, name, min=1, fix=fix)
    if uid > 2**32 - 2:
        raise LabkitError(f"{name} must be a user id from 1 to {2**32 - 2}, got {uid}.", fix=fix)
    try:
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid
    raise LabkitError(
        f"{name}={uid} belongs to the account {owner!r}: the sandbox runs as an id with no account.",
        fix=f"Leave uid out (one from {UID_RANGE[0]} to {UID_RANGE[1] - 1} is drawn), or give an id no account has.",
    )


def _absolute(value: Any, name: str) -> str:
    """``value`` as an absolute path's text (a folder to hide or keep in the sandbox)."""
    path = require_path(value, name, fix="Give absolute paths, e.g. /home.")
    if not path.is_absolute():
        raise LabkitError(f"{name} must be an absolute path, got {describe(value)}.", fix="Give absolute paths, e.g. /home.")
    return str(path)


def _arg(value: Any, name: str) -> str:
    """``value`` as one word of a command line: a string without NUL characters (kept exactly, blanks included)."""
    if not isinstance(value, str) or "\x00" in value:
        raise LabkitError(f"{name} must be a string (one word of the command), got {describe(value)}.")
    return value


def _file(value: Any, name: str, what: str) -> Path:
    """``value`` as the path of an existing regular file."""
    path = require_path(value, name, fix=f"Give {what}.")
    if not path.is_file():
        raise LabkitError(f"{name}: {path} is not a file.", fix=f"Give {what}.")
    return path


def _notebook(nb: Any) -> list[dict[str, Any]]:
    """The cells of ``nb`` (an nbformat notebook, or a dict as json.load() reads a .ipynb file), checked to be a
    list of dicts whose metadata is a dict."""
    fix = "Give a notebook: nbformat.read(path, as_version=4), or json.load() of a .ipynb file."
    if not isinstance(nb, dict):
        raise LabkitError(f"nb must be a notebook, got {describe(nb)}.", fix=fix)
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("metadata", {}), dict) for c in cells):
        raise LabkitError(f"nb's cells must be a list of cells (dicts), got {describe(cells)}.", fix=fix)
    return cells


def _source(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat joins it; a raw .ipynb may hold a list of lines)."""
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(line, str) for line in src):
        return "".join(src)
    if not isinstance(src, str):
        raise LabkitError(f"cell {cell.get('id')}: its source must be text, got {describe(src)}.")
    return src


def _read(path: Path) -> Any:
    import nbformat

    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError) as exc:
        raise LabkitError(f"cannot read the notebook {path}: {exc}", fix="Give a .ipynb file.") from None


def grading_notebook(handout: Path, submission: Path) -> tuple[Any, int]:
    """The notebook that is graded: ``handout``'s cells, each ``exercise``-tagged one replaced by ``submission``'s
    cell of the same id (kept as the handout has it when the learner's notebook has no such cell); outputs cleared.
    Returns it and how many of the submission's code cells were left out (added or edited outside the exercises)."""
    handout = require_path(handout, "handout", fix="Give the lab's learner notebook (a .ipynb file).")
    submission = require_path(submission, "submission", fix="Give the learner's .ipynb file.")
    given, sub = _read(handout), _read(submission)
    _notebook(given), _notebook(sub)
    theirs = {c.get("id"): c for c in sub.cells if c.cell_type == "code" and c.get("id")}
    handout_sources = {c.source for c in given.cells if c.cell_type == "code"}
    used = set()
    for cell in given.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if "exercise" in cell.metadata.get("tags", []) and cell.get("id") in theirs:
            cell.source = theirs[cell.get("id")].source
            used.add(cell.get("id"))
    dropped = sum(
        1
        for c in sub.cells
        if c.cell_type == "code" and c.get("id") not in used and c.source.strip() and c.source not in handout_sources
    )
    return given, dropped


def flags(nb: Any) -> list[str]:
    """What to read in ``nb``'s exercise cells: each name from :data:`SUSPECT_NAMES` a cell uses, with the cell's id
    (a cell that does not parse is flagged too). ``nb`` is an nbformat notebook or a dict as json.load() reads one."""
    out = []
    for cell in _notebook(nb):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") != "code" or not isinstance(tags, list) or "exercise" not in tags:
            continue
        text = _source(cell)
        source = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            out.append(f"cell {cell.get('id')}: does not parse")
            continue
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in SUSPECT_NAMES:
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    root = (getattr(node, "module", None) or alias.name).split(".")[0]
                    if root not in ("numpy", "math", "numba", "cupy", "cuda"):
                        names.add(f"import {root}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr != "__init__":
                names.add(node.attr)
        if text.lstrip().startswith(("%", "!")) or any(line.lstrip().startswith("!") for line in text.splitlines()):
            names.add("shell/magic")
        if names:
            out.append(f"cell {cell.get('id')}: uses {', '.join(sorted(names))}")
    return out


def hidden_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """The folders emptied in the sandbox: :data:`HIDDEN`, the grader's home (and the invoking user's, under
    ``sudo``), and ``extra`` (absolute paths); those that exist."""
    more = require_sequence(extra, "extra", item=_absolute, what="a list of absolute paths")
    homes = {str(Path.home())}
    if os.environ.get("SUDO_USER"):
        try:
            homes.add(pwd.getpwnam(os.environ["SUDO_USER"]).pw_dir)
        except KeyError:
            pass
    return [p for p in dict.fromkeys([*HIDDEN, *sorted(homes), *more]) if p and os.path.isdir(p)]


def _keep_paths(workdir: Path) -> list[str]:
    """What the sandbox needs back inside the emptied folders: the course's Python environment, the labkit
    package, and its own working folder."""
    package = Path(__file__).resolve().parents[1]  # labkit/ (this file is labkit/classroom/grading.py)
    keep = {
        sys.prefix,
        sys.base_prefix,
        str(Path(sys.executable).resolve().parent.parent),
        str(package.parent),
        str(workdir),
    }
    return sorted(p for p in keep if p and os.path.isdir(p))


def sandbox_argv(command: list[str], *, workdir: Path, uid: int, hide: list[str], keep: list[str]) -> list[str]:
    """The command line that runs ``command`` as ``uid`` (no account, no groups, no capabilities, no new
    privileges) in new network, PID and mount namespaces, with ``hide`` emptied and ``keep`` put back (root only).
    ``uid`` must be an id no account has (:func:`_uid`); ``workdir``, ``hide`` and ``keep`` absolute paths."""
    command = require_sequence(command, "command", item=_arg, min_len=1, what="a command line (a list of strings)")
    workdir = Path(_absolute(workdir, "workdir"))
    uid = _uid(uid)
    hide = require_sequence(hide, "hide", item=_absolute, what="a list of absolute paths")
    keep = require_sequence(keep, "keep", item=_absolute, what="a list of absolute paths")
    spec = json.dumps({"hide": hide, "keep": keep, "uid": uid, "cwd": str(workdir), "command": command})
    return [
        "unshare",
        "--net",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        sys.executable,
        "-I",
        "-m",
        "labkit.classroom.grading",
        "--sandbox-init",
        spec,
    ]


def _sandbox_init(spec_text: str) -> None:  # pragma: no cover - runs as root inside the new namespaces
    """Inside the namespaces, as root: empty the hidden folders, put the kept ones back, drop to the throwaway user."""
    spec = json.loads(spec_text)
    run = subprocess.run
    run(["mount", "--make-rprivate", "/"], check=True)
    # the namespace's own loopback (the kernel talks to Otter over it); no other interface exists in it
    run(["ip", "link", "set", "lo", "up"], check=True)
    fds = {}
    for path in spec["keep"]:
        fds[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
    hidden: list[str] = []
    for path in sorted(spec["hide"], key=len):  # a folder inside one already emptied is gone with it
        if any(path == h or path.startswith(h.rstrip("/") + "/") for h in hidden):
            continue
        run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=64m,nosuid,nodev", "labkit-empty", path], check=True)
        hidden.append(path)
    for path, fd in fds.items():
        os.makedirs(path, exist_ok=True)
        run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{fd}", path], check=True, pass_fds=[fd])
        if path != spec["cwd"]:
            run(["mount", "-o", "remount,bind,ro", path], check=True)
        os.close(fd)
    uid = str(spec["uid"])
    os.chdir(spec["cwd"])
    os.execvp(
        "setpriv",
        [
            "setpriv",
            "--reuid",
            uid,
            "--regid",
            uid,
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            *spec["command"],
        ],
    )


def grade(
    autograder: Path,
    submission: Path,
    handout: Path,
    out: Path,
    *,
    timeout_s: float = 900,
    uid: int | None = None,
    keep: Path | None = None,
) -> GradeResult:
    """Grade ``submission`` (what :func:`grading_notebook` makes of it) with Otter's ``otter run`` in the sandbox;
    Otter's ``results.json`` is copied to ``out/results.json``. The sandbox's folder is deleted afterwards, or moved
    to ``keep`` (to inspect what the submission did there). Raises :class:`LabkitError` when not root or when
    ``unshare``/``setpriv``/``ip`` are missing, and for arguments that are not files, paths or numbers as above
    (``keep`` must not exist yet)."""
    import nbformat

    autograder = _file(autograder, "autograder", "the autograder.zip that labkit export --otter made")
    submission = _file(submission, "submission", "the learner's .ipynb file")
    handout = _file(handout, "handout", "the lab's learner notebook (the export's copy)")
    out = require_path(out, "out", fix="Give a folder for results.json.")
    timeout_s = require_number(timeout_s, "timeout_s", min=0, min_open=True, max=86_400.0)
    if uid is not None:
        uid = _uid(uid)
    if keep is not None:
        keep = require_path(keep, "keep", fix="Give a path that does not exist yet, or leave keep out.")
        if keep.exists() or keep.is_symlink():
            raise LabkitError(f"keep: {keep} exists already.", fix="Give a path that does not exist yet, or leave keep out.")
    if os.geteuid() != 0:
        raise LabkitError(
            "grading in a sandbox needs root (a throwaway user and new namespaces).",
            fix="Run it with sudo, or grade with Otter's containers: otter grade (Docker).",
        )
    for tool in ("unshare", "setpriv", "mount", "ip"):
        if shutil.which(tool) is None:
            raise LabkitError(
                f"{tool} is not installed.", fix="Install util-linux and iproute2 (apt-get install util-linux mount iproute2)."
            )
    nb, dropped = grading_notebook(handout, submission)
    found = flags(nb)
    uid = uid if uid is not None else secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0]
    work = Path(tempfile.mkdtemp(prefix="labkit-grade-"))
    try:
        os.chmod(work, 0o700)
        shutil.copyfile(autograder, work / "autograder.zip")
        nbformat.write(nb, str(work / "submission.ipynb"))
        for sub in ("out", "tmp"):
            (work / sub).mkdir()
        for path in (work, *work.rglob("*")):
            os.chown(path, uid, uid, follow_symlinks=False)
        env_bin = str(Path(sys.executable).parent)
        inner = [
            "env",
            "-i",
            f"PATH={env_bin}:/usr/bin:/bin",
            f"HOME={work}",
            f"TMPDIR={work / 'tmp'}",
            "LABKIT_PROGRESS=off",
            "LABKIT_MODE=" + os.environ.get("LABKIT_MODE", "sim"),
            "PYTHONNOUSERSITE=1",
            f"NUMBA_CACHE_DIR={work / 'tmp'}",
            f"MPLCONFIGDIR={work / 'tmp'}",
            "PYTHONUNBUFFERED=1",
            sys.executable,
            "-m",
            "otter",
            "run",
            "--no-logo",
            "-a",
            "autograder.zip",
            "-o",
            "out",
            "submission.ipynb",
        ]
        argv = sandbox_argv(inner, workdir=work, uid=uid, hide=hidden_paths(), keep=_keep_paths(work))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, start_new_session=True)
            log = done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            log = f"grading took longer than {timeout_s:g} s and was stopped\n{partial}"
        result = GradeResult(Path(submission), None, None, found, dropped, None, log)
        results = work / "out" / "results.json"
        if results.is_file() and not results.is_symlink() and results.stat().st_size < 5_000_000:
            data = json.loads(results.read_text())
            out.mkdir(parents=True, exist_ok=True)
            (out / "results.json").write_text(json.dumps(data, indent=1))
            result.results = out / "results.json"
            result.score = float(data.get("score", 0.0))
            result.possible = float(
                sum(t.get("max_score", 0) or 0 for t in data.get("tests", []) if t.get("name") != "Public Tests")
            )
        return result
    finally:
        if keep is not None:
            shutil.move(str(work), str(keep))
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.classroom.grading``: grade submissions in the sandbox (see the module's docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--sandbox-init"]:  # pragma: no cover - inside the namespaces
        _sandbox_init(argv[1])
        return 1
    p = argparse.ArgumentParser(prog="python -m labkit.classroom.grading", description=__doc__.split("\n\n")[0])
    p.add_argument("--autograder", type=Path, required=True, help="autograder.zip from labkit export --otter")
    p.add_argument("--handout", type=Path, required=True, help="the lab's learner notebook (the export's copy)")
    p.add_argument("--out", type=Path, required=True, help="results folder: OUT/<submission name>/results.json")
    p.add_argument("submissions", type=Path, nargs="+")
    args = p.parse_args(argv)
    try:
        for sub in args.submissions:
            r = grade(args.autograder, sub, args.handout, args.out / sub.stem)
            score = "no result (see the log)" if r.score is None else f"{r.score:g} / {r.possible:g}"
            print(f"{sub.stem}: {score}; {r.dropped} cell(s) outside the exercises not run")
            for f in r.flags:
                print(f"  FLAG {f}")
            if r.score is None:
                print(r.log[-2000:])
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
