#!/bin/sh
# The first GPU run of issue 11, as one prepared script sized for one 10-minute command on the lab's H200
# (at most 60 + 240 + 100 + 180 s):
#   labkit doctor, the gpu-check benchmarks and their judgement, Nsight Compute reports of the reference kernels,
#   then the solution notebooks in gpu mode (each phase under its own time limit; results are written as they come).
# Before (here, with a registry):
#   echo /.whl/ >> .git/info/exclude
#   .venv/bin/python tools/wheelhouse.py .whl --python-version 3.12 --image benchmarks/gpu-image-h200.txt --notebooks --no-nvcc
# Then: run the device command `sh tools/first_gpu_run.sh` with carry [".whl"]; commit benchmarks/results/.
set -u
cd "$(dirname "$0")/.."
RES=benchmarks/results
mkdir -p "$RES"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "wheelhouse install failed"; exit 2; }
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DAY=$(date +%F)
echo "== nvidia-smi"; nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -20
echo "== labkit doctor"; timeout 60 python3 -m labkit.doctor --json > "$RES/doctor-$DAY.json" 2>&1; echo "doctor exit $?"
head -c 3000 "$RES/doctor-$DAY.json"; echo
echo "== gpu-check benchmarks"; timeout 240 python3 tools/gpu_check.py --skip-notebooks --out "$RES"; echo "benchmarks exit $?"
echo "== ncu"; timeout 100 python3 tools/ncu_reference.py --out "$RES" --kernels saxpy transpose_shared sum_all matmul_tiled wmma_gemm
echo "ncu exit $?"
echo "== notebooks"; timeout 180 python3 tools/gpu_check.py --skip-benchmarks --timeout 120 --out "$RES"; echo "notebooks exit $?"
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/results.tar.gz" "$RES"
    cp "$RES"/*-"$DAY".md "$OUT/" 2>/dev/null
fi
