#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run (a few minutes on one H100/H200):
#   1. tests/test_cuda.py: every job function on CUDA against the CPU (tables, permutations), bit-identical
#      retraining on the GPU, TF32 off for fp32 metrics, checkpoints portable to CPU-only machines,
#      bundled training and the batched λ path on CUDA;
#   2. bench_gpu_training.py: bf16/fp32/nondeterministic training throughput of the paper models;
#   3. bench_gpu_bundle.py: bundled training (MLP x1, ResNet-20 x1; bundles of 1, 4, 8, 16; torch.compile
#      modes for 8 and 16) and the batched λ path of ResNet-20 x1;
#   4. bench_weight_matching.py on the GPU;
#   5. estimate_gpu_hours.py for the paper configs (the plan's estimate; compare with the measured rates above).
# Usage (repo root, a Python with torch and lmcflow's dependencies):
#   benchmarks/gpu_checks.sh [OUTDIR]        PYTHON=... to pick the interpreter
#   STEP_TIMEOUT=seconds per step (default 900); QUICK=1 for widths 1 and 16 only in step 2
# Everything goes to OUTDIR. Every step runs even if an earlier one fails or times out (rc 124); the exit
# status is the first failure's. The bundle steps (3, the bundle tests of 1, 5's bundled column) were
# written without a GPU at hand: their CPU-runnable parts are tested (tests/test_gpu_scripts.py), the
# CUDA paths are not.
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
    timeout --kill-after=30 "${STEP_TIMEOUT:-900}" "$@" 2>&1 | tee "$out/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "=== $name: rc=$rc in $((SECONDS - t0)) s"
    [ "$status" -ne 0 ] || status=$rc
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
step test_cuda "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
step bench_gpu_training "$py" benchmarks/bench_gpu_training.py --out "$out/gpu_throughput.json" \
    ${QUICK:+--quick}
step bench_gpu_bundle "$py" benchmarks/bench_gpu_bundle.py --out "$out/gpu_bundle.json"
step bench_weight_matching "$py" benchmarks/bench_weight_matching.py --device cuda --width 8
for cfg in config/paper_width.yaml config/paper_identifiability.yaml; do
    step "gpu_hours_$(basename "$cfg" .yaml)" "$py" benchmarks/estimate_gpu_hours.py "$cfg"
done
exit "$status"
