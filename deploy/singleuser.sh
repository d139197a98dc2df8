#!/usr/bin/env bash
# A learner's server under JupyterHub (DockerSpawner and KubeSpawner run this as the container's command):
# bring the learner's work copies of the notebooks up to date (labkit.workcopy: new labs copied in, nothing
# overwritten, no solved notebooks), then start JupyterHub's single-user server on them. Extra arguments go to jupyterhub-singleuser.
set -euo pipefail
course="${LABKIT_COURSE:-/opt/course}"
work="$(python -c 'from labkit import workcopy; print(workcopy.work_dir())')"
python - "$course" "$work" <<'PY'
import sys
from pathlib import Path
from labkit import workcopy

# classroom: the learner notebooks only, never the solved ones (self-paced `labkit lab` copies both)
report = workcopy.sync(Path(sys.argv[1]) / "notebooks", Path(sys.argv[2]), solutions=False)
print(*report.lines(), sep="\n")
PY
exec jupyterhub-singleuser --ServerApp.root_dir="$work" "$@"
