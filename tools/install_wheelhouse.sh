#!/bin/sh
# Install a wheelhouse (tools/wheelhouse.py) the way the first GPU run does, with no registry, and print the environment
# it needs as `export` lines: `eval "$(PY=python3 sh tools/install_wheelhouse.sh WHL SITE MPI_PREFIX)"`.
# Used by tools/first_gpu_run.sh on the GPU machine and by the Makefile's rehearsal venv (.venv-rehearsal), so the
# rehearsal installs exactly what the run installs.
#   WHL/*.whl      labkit and the pure-Python packages: `pip install --target SITE`, SITE first on PYTHONPATH;
#   WHL/mpi/*.whl  the MPICH wheel (lab 08): `pip install --prefix MPI_PREFIX` (--target would drop its lib/, with
#                  libmpi.so.12), then MPI_PREFIX/bin on PATH (mpiexec) and MPI_PREFIX/lib on LD_LIBRARY_PATH (mpi4py).
# Messages go to stderr; the exit status is non-zero when an install fails.
# Install once, before anything runs from SITE: `--upgrade --target` replaces the packages in place, so a second
# install into a SITE that a running kernel imports from breaks that kernel mid-run (review 4, C10).
set -eu
whl=$1 site=$2 mpi=$3
case $site in /*) ;; *) site=$PWD/$site ;; esac  # absolute: the exports hold wherever the caller then runs
case $mpi in /*) ;; *) mpi=$PWD/$mpi ;; esac
PY=${PY:-python3}
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$whl"/*.whl >&2
echo "export PYTHONPATH='$site'\${PYTHONPATH:+:\$PYTHONPATH}"
if ls "$whl"/mpi/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --prefix "$mpi" "$whl"/mpi/*.whl >&2
    test -x "$mpi/bin/mpiexec" || { echo "install_wheelhouse: no $mpi/bin/mpiexec after installing MPICH" >&2; exit 1; }
    echo "export PATH='$mpi/bin':\$PATH"
    echo "export LD_LIBRARY_PATH='$mpi/lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
fi
