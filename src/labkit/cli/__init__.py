"""The ``labkit`` command: ``doctor``, ``lab``, ``bench``, ``topo``."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from labkit.errors import LabkitError


def _course_root() -> Path:
    """The repository root (the folder holding notebooks/), found from the current folder or the package."""
    for start in (Path.cwd(), Path(__file__).resolve()):
        for folder in (start, *start.parents):
            if (folder / "notebooks" / "00-start-here.ipynb").exists():
                return folder
    raise LabkitError("cannot find the course's notebooks/ folder.", fix="Run `labkit lab` inside the course repository.")


LAB_HELP = """usage: labkit lab [--reset NN [NN ...]] [--work DIR] [JUPYTER-LAB FLAGS ...]

Start JupyterLab on your own copy of the course's notebooks (simulator mode without a GPU).

Your copies live outside the repository, in {work}
(set LABKIT_WORK_DIR to choose another folder). The first start copies every notebook there; later starts
copy in only labs that are new in the course, and never overwrite your copies, so `git pull` updates the
course without touching your work.

options:
  -h, --help         show this help (JupyterLab's own flags: jupyter lab --help)
  --reset NN ...     give lab NN a fresh copy (learner and solution notebooks); a copy you changed moves to
                     old/ in the work folder (an untouched one is just replaced); JupyterLab is not started
  --work DIR         use DIR as the work folder (default above)

Any other flag goes to `jupyter lab` unchanged, e.g. labkit lab --no-browser --port 8899
"""

_INFO_FLAGS = ("--version", "--help-all", "--generate-config", "--paths", "list")
#: Where ``labkit lab`` lands, with or without a local browser: the first notebook of the course.
START_URL = "/lab/tree/00-start-here.ipynb"


def _lab_args(extra: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="labkit lab", add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--reset", nargs="+", metavar="NN")
    parser.add_argument("--work", type=Path)
    return parser.parse_known_args(extra)


def lab_command(extra: list[str]) -> int:
    """Start JupyterLab on the learner's work copies (``labkit.workcopy``); other flags go to ``jupyter lab``."""
    from labkit.classroom import workcopy

    args, rest = _lab_args(extra)
    work = args.work.expanduser() if args.work else workcopy.work_dir()
    if args.help:
        print(LAB_HELP.format(work=work))
        return 0
    root = _course_root()
    if args.reset:
        for lab_id in args.reset:
            print(*workcopy.reset(root / "notebooks", lab_id, work), sep="\n")
        return 0
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or shutil.which("jupyter")
    if jupyter is None:
        raise LabkitError("JupyterLab is not installed in this environment.", fix="Run `make lab`, which installs it.")
    cmd = [jupyter, "lab"]
    if not any(flag in rest for flag in _INFO_FLAGS):  # `--version` and friends answer without a course
        print(*workcopy.sync(root / "notebooks", work).lines(), sep="\n")
        # The start notebook is both the file a local browser opens and JupyterLab's default URL, so the URL printed
        # for --no-browser or a remote machine (and "/" itself) lands on it rather than on the Launcher.
        cmd += [f"--ServerApp.root_dir={work}", f"--LabApp.default_url={START_URL}", "00-start-here.ipynb"]
    cmd += rest
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in rest:
        cmd.append("--allow-root")  # containers and cloud images often run as root; Jupyter refuses without it
    print("starting:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=work if work.is_dir() else root, env=_lab_env())


#: JupyterLab defaults for the course (labconfig/default_setting_overrides.json): no "Jupyter news?" question
#: over the start notebook. A learner's own settings still win over these defaults.
LAB_CONFIG = Path(__file__).resolve().parents[1] / "data" / "jupyter"


def _lab_env() -> dict[str, str]:
    """The environment for ``jupyter lab``: labkit's JupyterLab defaults first on JUPYTER_CONFIG_PATH."""
    env = dict(os.environ)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (str(LAB_CONFIG), env.get("JUPYTER_CONFIG_PATH", "")) if p)
    return env


def bench_command(args: list[str]) -> int:
    """``labkit bench bandwidth ...``: nvbandwidth-style measurements."""
    if not args or args[0] in ("-h", "--help"):
        print("usage: labkit bench bandwidth [--json] [--sizes ...]\n\nSuites: bandwidth")
        return 0
    suite, rest = args[0], args[1:]
    if suite == "bandwidth":
        from labkit.gpu import bandwidth

        return int(bandwidth.cli(rest) or 0)
    raise LabkitError(f"there is no benchmark suite {suite!r}.", fix="Use `labkit bench bandwidth`.")


def topo_command(system: str | None) -> int:
    """``labkit topo [SYSTEM]``: list systems, or describe one system's NVLink topology."""
    from labkit.hw import topology

    if system is None:
        print("systems:", ", ".join(topology.systems()))
        return 0
    topo = topology.load(system)
    print(topo.describe() if hasattr(topo, "describe") else topo)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labkit", description="Helper for the DGX GPU-computing course.")
    sub = parser.add_subparsers(dest="command", required=True)
    doc = sub.add_parser("doctor", help="report the environment (mode, GPUs, NVLink, PTX toolchain)")
    doc.add_argument("--json", action="store_true", help="machine-readable output (keys documented in labkit.doctor)")
    doc.add_argument("--profile", metavar="GPU", help="what each lab does on a device profile instead (T4, L4, H100, ...)")
    sub.add_parser("lab", help="start JupyterLab on your own copy of the notebooks (labkit lab --help)", add_help=False)
    sub.add_parser("bench", help="run a benchmark suite: labkit bench bandwidth [--json] [--sizes ...]", add_help=False)
    topo = sub.add_parser("topo", help="describe a DGX system's topology")
    topo.add_argument("system", nargs="?", help="e.g. 'DGX-2'; omit to list systems")
    from labkit.classroom import mig

    mig.add_cli(sub)
    from labkit.classroom import export

    export.add_cli(sub)
    from labkit.classroom import hub_setup

    hub_setup.add_cli(sub)
    prog = sub.add_parser("progress", help="your map of the course: every exercise's checks from your progress file")
    prog.add_argument("--json", action="store_true", help="machine-readable output")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "lab":
            return lab_command(argv[1:])
        if argv and argv[0] == "bench":
            return bench_command(argv[1:])
        args = parser.parse_args(argv)
        if args.command == "doctor":
            from labkit.cli import doctor

            return doctor.main(as_json=args.json, profile=args.profile)
        if args.command == "topo":
            return topo_command(args.system)
        if args.command == "mig-plan":
            return mig.cli(args)
        if args.command == "hub":
            return hub_setup.cli()
        if args.command == "export":
            return export.cli(args, _course_root())
        if args.command == "progress":
            from labkit import check, progress

            return progress.cli(check.exercises(), as_json=args.json)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
