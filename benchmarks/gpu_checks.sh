#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run (a few minutes on one H100/H200):
#   1. tests/test_cuda.py: every job function on CUDA against the CPU (tables, permutations), bit-identical
#      retraining on the GPU, TF32 off for fp32 metrics, checkpoints portable to CPU-only machines;
#   2. bench_gpu_training.py: bf16/fp32/nondeterministic training throughput of the paper models;
#   3. bench_weight_matching.py on the GPU;
#   4. estimate_gpu_hours.py for the paper configs from the measured rates.
# Usage (repo root, a Python with torch and lmcflow's dependencies):
#   benchmarks/gpu_checks.sh [OUTDIR]        PYTHON=... to pick the interpreter
# Every step runs even if an earlier one fails; the exit status is the first failure's.
set -uo pipefail
out=${1:-gpu_checks}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
step() {  # step NAME CMD...: run, tee its output to OUTDIR/NAME.log, remember the first failure
    local name=$1; shift
    echo "=== $name: $*"
    local t0=$SECONDS
    "$@" 2>&1 | tee "$out/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "=== $name: rc=$rc in $((SECONDS - t0)) s"
    [ "$status" -ne 0 ] || status=$rc
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
step test_cuda "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
step bench_gpu_training "$py" benchmarks/bench_gpu_training.py --out "$out/gpu_throughput.json"
step bench_weight_matching "$py" benchmarks/bench_weight_matching.py --device cuda --width 8
for cfg in config/paper_width.yaml config/paper_identifiability.yaml; do
    step "gpu_hours_$(basename "$cfg" .yaml)" "$py" benchmarks/estimate_gpu_hours.py "$cfg" \
        --throughput "$out/gpu_throughput.json"
done
exit "$status"
