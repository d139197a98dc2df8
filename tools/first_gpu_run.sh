#!/bin/sh
# The course's first GPU run as one prepared command: `sh tools/first_gpu_run.sh [OUTPUT-FOLDER]`
# (default benchmarks/results/). Every phase has its own time limit and they add up to 540 s with margin
# (docs/gpu-check.md has the estimate per phase):
#   versions and memory 10 s, labkit doctor 30 s, the gpu-check benchmarks 170 s, the solution notebooks 230 s
#   (three at a time; the bandwidth notebook alone), ncu reports of the reference kernels 60 s  ->  500 s.
# gpu-check writes its JSON and Markdown after every suite and every notebook, and this script copies the output
# folder to $OUT (when set) after every phase, so a crash or a timeout keeps everything measured before it.
# With a wheelhouse in .whl it installs that first, without a registry; the wheelhouse for the H200 image is made by
#   .venv/bin/python tools/wheelhouse.py .whl --python-version 3.12 --image benchmarks/gpu-image-h200.txt --notebooks --no-nvcc
set -u
cd "$(dirname "$0")/.."
RES=${1:-benchmarks/results}
mkdir -p "$RES"
DAY=$(date +%F)
START=$(date +%s)

phase_done() {  # $1: phase name, $2: its exit status
    echo "== $1 finished (exit $2) at $(( $(date +%s) - START )) s"
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT/results" && cp -r "$RES"/. "$OUT/results/" 2>/dev/null
    fi
}

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "wheelhouse install failed"; exit 2; }
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

echo "== versions and memory"
timeout 10 python3 - <<'EOF' 2>&1 | tee "$RES/versions-$DAY.txt"
import importlib.metadata as md
for name in ("cuda-bindings", "numba-cuda", "cuda-pathfinder", "cupy-cuda13x", "cupy-cuda12x"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} not installed")
try:
    print(next(line for line in open("/proc/meminfo") if line.startswith("MemAvailable")).strip())
except (OSError, StopIteration):
    print("MemAvailable: unknown")
EOF
nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -20
phase_done versions 0

echo "== labkit doctor"
timeout 30 python3 -m labkit.doctor --json > "$RES/doctor-$DAY.json" 2>&1; status=$?
head -c 3000 "$RES/doctor-$DAY.json"; echo
phase_done doctor $status

echo "== gpu-check benchmarks"
timeout 170 python3 tools/gpu_check.py --skip-notebooks --out "$RES"; status=$?
phase_done benchmarks $status

echo "== notebooks"
timeout 230 python3 tools/gpu_check.py --skip-benchmarks --jobs 3 --timeout 120 --out "$RES"; status=$?
phase_done notebooks $status

echo "== ncu"
timeout 60 python3 tools/ncu_reference.py --out "$RES" --kernels saxpy transpose_shared sum_all matmul_tiled wmma_gemm; status=$?
phase_done ncu $status
