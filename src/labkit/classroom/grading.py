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
    given, sub = _read(handout), _read(submission)
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
    (a cell that does not parse is flagged too)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "exercise" not in cell.metadata.get("tags", []):
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
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
        if cell.source.lstrip().startswith(("%", "!")) or any(line.lstrip().startswith("!") for line in cell.source.splitlines()):
            names.add("shell/magic")
        if names:
            out.append(f"cell {cell.get('id')}: uses {', '.join(sorted(names))}")
    return out


def hidden_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """The folders emptied in the sandbox: :data:`HIDDEN`, the grader's home (and the invoking user's, under
    ``sudo``), and ``extra``; those that exist."""
    homes = {str(Path.home())}
    if os.environ.get("SUDO_USER"):
        try:
            homes.add(pwd.getpwnam(os.environ["SUDO_USER"]).pw_dir)
        except KeyError:
            pass
    return [p for p in dict.fromkeys([*HIDDEN, *sorted(homes), *extra]) if p and os.path.isdir(p)]


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
    privileges) in new network, PID and mount namespaces, with ``hide`` emptied and ``keep`` put back (root only)."""
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
    ``unshare``/``setpriv``/``ip`` are missing."""
    import nbformat

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
    nb, dropped = grading_notebook(Path(handout), Path(submission))
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
            out = Path(out)
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
