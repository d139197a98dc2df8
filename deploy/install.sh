#!/usr/bin/env bash
# The course image's install steps (deploy/Containerfile runs this; tests/test_image_install.py runs it too, in a
# fresh virtual environment, since no container engine runs in CI).
#
#   deploy/install.sh [--cuda 12|13|none] [--venv DIR] [--source DIR] [--system-site-packages]
#
# 1. makes a virtual environment at DIR (default /opt/labkit/venv);
# 2. installs the course (labkit, JupyterLab, JupyterHub's single-user server, the pinned CUDA wheels) from SOURCE
#    (default: the repository this script lives in), every package pinned by SOURCE/constraints.txt, with the
#    course's `cuda12` or `cuda13` extra (CuPy and its CUDA library wheels), or none (simulator mode only);
# 3. puts the IPython startup file that re-sends unsent progress records (deploy/ipython/) in the environment;
# 4. checks the result: labkit and its hub service import, the commands the image runs exist.
# --system-site-packages lets the new environment see the interpreter's packages. An existing environment at DIR is
# kept and completed (the test prepares one that sees the development environment's packages, so nothing is
# downloaded but the build backend).
set -euo pipefail

cuda=12
venv=/opt/labkit/venv
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_flags=()
python=${PYTHON:-python3}

while [ $# -gt 0 ]; do
    case "$1" in
        --cuda) cuda="$2"; shift 2 ;;
        --venv) venv="$2"; shift 2 ;;
        --source) source_dir="$2"; shift 2 ;;
        --system-site-packages) venv_flags+=(--system-site-packages); shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

case "$cuda" in
    12) extras="hub,cuda12" ;;
    13) extras="hub,cuda13" ;;
    none) extras="hub" ;;
    *) echo "install.sh: --cuda must be 12, 13 or none, not '$cuda'" >&2; exit 2 ;;
esac
[ -f "$source_dir/pyproject.toml" ] && [ -f "$source_dir/constraints.txt" ] || {
    echo "install.sh: $source_dir is not the course repository (no pyproject.toml / constraints.txt)" >&2; exit 2; }

echo "install.sh: course from $source_dir into $venv (extras: $extras)"
if [ -x "$venv/bin/python" ]; then
    echo "install.sh: $venv exists: kept and completed"
else
    "$python" -m venv ${venv_flags[@]+"${venv_flags[@]}"} "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
target="$source_dir[$extras]"
# editable: the notebooks and the package stay together in the course folder, where `labkit lab` finds them
"${pip[@]}" install --quiet -c "$source_dir/constraints.txt" -e "$target"

# every kernel of this environment runs IPython's startup files in <venv>/etc/ipython/startup: this one sends the check
# results an earlier kernel could not send to the classroom's progress service (labkit.progress.kernel_start)
mkdir -p "$venv/etc/ipython/startup"
cp "$source_dir/deploy/ipython/00-labkit-progress.py" "$venv/etc/ipython/startup/"

# what the image runs must be there
for cmd in labkit jupyter jupyterhub-singleuser; do
    [ -x "$venv/bin/$cmd" ] || command -v "$cmd" >/dev/null || { echo "install.sh: $cmd is missing after the install" >&2; exit 1; }
done
"$venv/bin/python" - <<'PY'
import importlib, sys
import labkit, labkit.progress, labkit.progress_service, labkit.mig  # noqa: F401
assert "numba" not in sys.modules, "importing labkit must not import numba"
for name in ("jupyterlab", "jupyterhub", "ipykernel", "numba", "numba.cuda", "nbgitpuller"):
    importlib.import_module(name)
print("install.sh: labkit", getattr(labkit, "__version__", "?"), "from", labkit.__file__)
PY
if [ "$cuda" != none ]; then  # the course's `cuda13` extra is the same CUDA 12.9 CuPy (a CUDA 13 driver runs it)
    "$venv/bin/python" -c "import importlib.metadata as m; print('install.sh: CuPy', m.version('cupy-cuda12x'))"
    "$venv/bin/python" -c "import importlib.metadata as m, jupyterlab_nvdashboard; print('install.sh: GPU dashboards: jupyterlab-nvdashboard', m.version('jupyterlab-nvdashboard'))"
fi
echo "install.sh: done"
