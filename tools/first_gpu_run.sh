#!/bin/sh
# The course's first GPU run as one prepared command: `OUT=/some/folder sh tools/first_gpu_run.sh [RESULTS-FOLDER]`.
# RESULTS-FOLDER (default: a fresh /tmp/gpu-run-<time>) gets one sub-folder per phase. Limits per phase, 515 s in all,
# and the whole script is held to RUN_BUDGET_S (default 530 s: the device lends 15 minutes, its start takes 1-2, and
# the transfers need the rest); a phase gets at most what is left (docs/gpu-check.md has the estimate per phase, for
# an H100 and an H200). Every nvidia-smi and version query has its own 10 s limit (a fresh VM's first one can stall).
#   1 env: versions and memory 5 s, tool versions (ncu, nvcc), nvidia-smi (GPUs, topology, clocks, power, persistence),
#          labkit doctor 30 s                                   -> env/versions.txt, env/nvidia-smi.txt, env/doctor.json
#   2 benchmarks: gpu-check's four suites 150 s                 -> gpu-check/<gpu>-<date>.json and .md, clocks after
#   3 notebooks: every solution notebook in gpu mode 270 s (07 alone first, then 05 alone: they time the GPU; then the
#                others three at a time)                        -> gpu-check/ (the same JSON and MD), notebooks/*.ipynb
#   4 ncu: Nsight Compute reports of three reference kernels 60 s -> ncu/*.csv (or a note saying why none)
# gpu-check writes its JSON and MD whatever happens: with no usable GPU a no-gpu-<date>.json saying why, and when a
# phase's limit cuts it, the notebooks it did not finish.
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
        f=$(ls -t "$RES"/gpu-check/*.$ext 2>/dev/null | head -1)
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
smi() {  # nvidia-smi with a limit: a fresh VM without persistence mode can stall on its first query (C8)
    if command -v nvidia-smi >/dev/null 2>&1; then timeout 10 nvidia-smi "$@" 2>&1 || echo "nvidia-smi $*: exit $?"
    else echo "nvidia-smi: not found"; fi
}
clocks() {  # $1: file. Clocks, power and persistence mode, to read a GEMM at 70% of peak or a slow phase by (C8)
    { date -u; smi --query-gpu=name,persistence_mode,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.max --format=csv
      smi -q -d CLOCK,POWER,PERFORMANCE | head -80; } > "$1" 2>&1
}
{ for tool in ncu nvcc; do  # the profiler and the toolkit the PTX and WMMA paths use (C8)
      exe=$(command -v $tool || ls "${CUDA_HOME:-/usr/local/cuda}/bin/$tool" 2>/dev/null)
      if [ -n "$exe" ]; then echo "$tool ($exe): $(timeout 10 "$exe" --version 2>&1 | tail -1)"
      else echo "$tool: not found"; fi
  done; } 2>&1 | tee -a "$RES/env/versions.txt"
{ smi -L; smi topo -m | head -20; } 2>&1 | tee "$RES/env/nvidia-smi.txt"
clocks "$RES/env/clocks-before.txt"; head -3 "$RES/env/clocks-before.txt"
timeout "$(limit 30)" python3 -m labkit.doctor --json > "$RES/env/doctor.json" 2> "$RES/env/doctor.stderr.txt"; status=$?
head -c 3000 "$RES/env/doctor.json"; echo
phase_done 1 env $status

echo "== 2 benchmarks"
logged "$RES/gpu-check/benchmarks.log" timeout "$(limit 150)" python3 tools/gpu_check.py --skip-notebooks \
    --out "$RES/gpu-check"; status=$?
clocks "$RES/gpu-check/clocks-after-benchmarks.txt"
phase_done 2 gpu-check $status

echo "== 3 notebooks"
logged "$RES/notebooks/run.log" timeout "$(limit 270)" python3 tools/gpu_check.py --skip-benchmarks --jobs 3 \
    --timeout 120 --out "$RES/gpu-check" --save-notebooks "$RES/notebooks"; status=$?
clocks "$RES/notebooks/clocks-after-notebooks.txt"
phase_done 3 notebooks $status

echo "== 4 ncu"
logged "$RES/ncu/run.log" timeout "$(limit 60)" python3 tools/ncu_reference.py --out "$RES/ncu" --budget "$(limit 55)" \
    --kernels saxpy transpose_shared matmul_tiled; status=$?
phase_done 4 ncu $status

result=$(ls "$RES"/gpu-check/*.json 2>/dev/null | head -1)
[ -n "$result" ] && timeout 10 python3 tools/gpu_check.py --judge "$result"
echo "== done at $(( $(date +%s) - START )) s; results in $RES${OUT:+, archived in $OUT}"
