#!/bin/sh
# The course's first GPU run as one prepared command: `OUT=/some/folder sh tools/first_gpu_run.sh [RESULTS-FOLDER]`.
# RESULTS-FOLDER (default: a fresh /tmp/gpu-run-<time>) gets one sub-folder per phase. Limits per phase, 520 s in all,
# and the whole script is held to RUN_BUDGET_S (default 530 s: the device lends 15 minutes, its start takes 1-2, and
# the transfers need the rest); a phase gets at most what is left (docs/gpu-check.md has the estimate per phase):
#   1 env: versions and memory 5 s, labkit doctor 30 s          -> env/versions.txt, env/nvidia-smi.txt, env/doctor.json
#   2 benchmarks: gpu-check's four suites 170 s                 -> gpu-check/<gpu>-<date>.json and .md
#   3 notebooks: every solution notebook in gpu mode 230 s (three at a time; 05 and 07, which time the GPU, alone)
#                                                               -> gpu-check/ (the same JSON and MD), notebooks/*.ipynb
#   4 ncu: Nsight Compute reports of five reference kernels 85 s -> ncu/*.csv
# What comes back from the device: at most 8 files, 2 folders deep. After every phase, with OUT set, OUT holds
#   OUT/<n>-<phase>.tgz     that phase's folder and its log (4 archives in all)
#   OUT/gpu-check.json, OUT/gpu-check.md   the judged targets and the notebooks, copied flat after every phase
# so a crash or a timeout keeps everything measured before it, and OUT never holds more than 6 files.
# With a wheelhouse in WHL (default .whl) it installs that first, without a registry (tools/install_wheelhouse.sh: the
# wheels with --target into SITE, the MPICH wheel with --prefix, on PATH and LD_LIBRARY_PATH). The wheelhouse for the
# H200 image is made by
#   .venv/bin/python tools/wheelhouse.py .whl --python-version 3.12 --image benchmarks/gpu-image-h200.txt --notebooks --no-nvcc
# `make test` rehearses this script end to end on the image's package versions (tests/test_rehearsal_run.py).
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
RES=${1:-/tmp/gpu-run-$START}
WHL=${WHL:-.whl}
SITE=${SITE:-/tmp/labkit-site}
MPI_PREFIX=${MPI_PREFIX:-/tmp/labkit-mpi}
BUDGET=${RUN_BUDGET_S:-530}
mkdir -p "$RES/env" "$RES/gpu-check" "$RES/notebooks" "$RES/ncu"
[ -n "${OUT:-}" ] && mkdir -p "$OUT"

limit() {  # the phase's own limit ($1 s), or what is left of the budget if that is less (at least 1 s)
    left=$(( BUDGET - ($(date +%s) - START) ))
    [ "$left" -lt "$1" ] && echo $(( left > 1 ? left : 1 )) || echo "$1"
}

logged() {  # $1: log file, then the command: its output to the terminal and the log; returns the command's status
    log=$1; shift
    { "$@"; echo $? > "$log.status"; } 2>&1 | tee "$log"
    s=$(cat "$log.status" 2>/dev/null || echo 1); rm -f "$log.status"; return "$s"
}

phase_done() {  # $1: number, $2: phase (its folder), $3: its exit status
    echo "== $2 finished (exit $3) at $(( $(date +%s) - START )) s"
    [ -n "${OUT:-}" ] || return 0
    tar czf "$OUT/.$1-$2.tgz" -C "$RES" "$2" && mv "$OUT/.$1-$2.tgz" "$OUT/$1-$2.tgz"
    for ext in json md; do
        f=$(ls "$RES"/gpu-check/*.$ext 2>/dev/null | head -1)
        [ -n "$f" ] && cp "$f" "$OUT/.gpu-check.$ext" && mv "$OUT/.gpu-check.$ext" "$OUT/gpu-check.$ext"
    done
    return 0
}

if [ -d "$WHL" ]; then
    exports=$(PY=python3 sh tools/install_wheelhouse.sh "$WHL" "$SITE" "$MPI_PREFIX") || { echo "wheelhouse install failed"; exit 2; }
    eval "$exports"
    echo "== wheelhouse installed at $(( $(date +%s) - START )) s"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

echo "== 1 env: versions, memory, GPUs, MPI, doctor"
{
timeout "$(limit 5)" python3 - <<'EOF'
import importlib.metadata as md, shutil, subprocess, sys
print("python", sys.version.split()[0])
for name in ("numpy", "numba", "numba-cuda", "llvmlite", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cupy-cuda13x",
             "cupy-cuda12x", "torch", "mpi4py", "mpich", "labkit"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} not installed")
res = subprocess.run([sys.executable, "-c", "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"],
                     capture_output=True, text=True)
print("mpi4py.MPI:", res.stdout.strip() if res.returncode == 0 else "does not load: " + (res.stderr.strip().splitlines() or ["?"])[-1])
print("mpiexec:", shutil.which("mpiexec") or "not found")
try:
    print(next(line for line in open("/proc/meminfo") if line.startswith("MemAvailable")).strip())
except (OSError, StopIteration):
    print("MemAvailable: unknown")
EOF
} 2>&1 | tee "$RES/env/versions.txt"
{ nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -20; } 2>&1 | tee "$RES/env/nvidia-smi.txt"
timeout "$(limit 30)" python3 -m labkit.doctor --json > "$RES/env/doctor.json" 2> "$RES/env/doctor.stderr.txt"; status=$?
head -c 3000 "$RES/env/doctor.json"; echo
phase_done 1 env $status

echo "== 2 benchmarks"
logged "$RES/gpu-check/benchmarks.log" timeout "$(limit 170)" python3 tools/gpu_check.py --skip-notebooks \
    --out "$RES/gpu-check"; status=$?
phase_done 2 gpu-check $status

echo "== 3 notebooks"
logged "$RES/notebooks/run.log" timeout "$(limit 230)" python3 tools/gpu_check.py --skip-benchmarks --jobs 3 \
    --timeout 120 --out "$RES/gpu-check" --save-notebooks "$RES/notebooks"; status=$?
phase_done 3 notebooks $status

echo "== 4 ncu"
logged "$RES/ncu/run.log" timeout "$(limit 85)" python3 tools/ncu_reference.py --out "$RES/ncu" --budget "$(limit 80)" \
    --kernels saxpy transpose_shared sum_all matmul_tiled wmma_gemm; status=$?
phase_done 4 ncu $status

result=$(ls "$RES"/gpu-check/*.json 2>/dev/null | head -1)
[ -n "$result" ] && timeout 10 python3 tools/gpu_check.py --judge "$result"
echo "== done at $(( $(date +%s) - START )) s; results in $RES${OUT:+, archived in $OUT}"
