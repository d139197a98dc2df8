#!/bin/sh
# An overlay venv for `make test`: VENV gets the wheels pinned in CONSTRAINTS (installed with --no-deps) and, after
# its own, the base .venv's packages (a .pth file), so a second toolchain or hub version is tested without a
# second copy of everything else. Usage: tools/overlay_venv.sh BASE_PYTHON VENV CONSTRAINTS
set -eu
base_py=$1 venv=$2 constraints=$3
rm -rf "$venv"
"$base_py" -m venv --without-pip "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
base=$("$base_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$base_py" -m pip install --quiet --no-deps --target "$site" -r "$constraints"
echo "import site; site.addsitedir('$base')" > "$site/labkit-base-venv.pth"
