#!/usr/bin/env bash
# The width study at the paper's width on one GPU machine (config/gpu_fmnist_width.yaml: MLP on Fashion-MNIST,
# x1/16 … x16, 5 seeds, every width claim; ≈ 10–13 minutes on one H200, see the config's header), and everything a
# reader needs afterwards copied under OUTDIR:
#   OUTDIR/tables/*.parquet  claims/*.json  figures/**  provenance.json   the run's results/
#   OUTDIR/claims.txt        `lmcflow claims` (verdicts beside the paper's numbers)
#   OUTDIR/verify.txt        `lmcflow verify` of the results
#   OUTDIR/plan.txt          the dry run (jobs by rule)
#   OUTDIR/run.log           snakemake's output;  OUTDIR/logs.tar.gz  every job log
#   OUTDIR/summary.txt       machine, versions, wall time of each step and its exit status
# Usage (from any folder; OUTDIR and CONFIG relative to it, CONFIG also relative to the checkout):
#   benchmarks/gpu_width_run.sh [OUTDIR]
# Environment:
#   PYTHON       interpreter with torch (CUDA), lmcflow's dependencies and snakemake (default: python3)
#   SNAKEMAKE    the snakemake command (default: "$PYTHON -m snakemake")
#   CONFIG       config file (default: config/gpu_fmnist_width.yaml)
#   CORES        snakemake --cores (default: all cores)
#   RUN_TIMEOUT  seconds for the run before it is stopped (default 1200); what finished is still copied, and
#                rerunning the script resumes (snakemake reruns only what is missing or incomplete)
#   WORKDIR      the workflow's working directory (default: OUTDIR/workdir; its data/ links to the checkout's)
#   PLAN_ONLY=1  check the environment and write the plan, run nothing
#   REQUIRE_CUDA=0  run without a GPU (for testing the script on a CPU with a small CONFIG)
# Fashion-MNIST: the raw files (train-images-idx3-ubyte.gz, …) in /usr/share/datasets/fashion-mnist or in the
# checkout's data/ (the config's search paths; the machine is offline, nothing is downloaded).
# The exit status is the first failing step's (124: the run hit RUN_TIMEOUT); every copy step runs regardless.
set -uo pipefail
out=${1:-gpu_width_run}
py=${PYTHON:-python3}
config=${CONFIG:-config/gpu_fmnist_width.yaml}
cores=${CORES:-$(nproc)}
run_timeout=${RUN_TIMEOUT:-1200}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
workdir=${WORKDIR:-$out/workdir}
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
[ -f "$config" ] || config="$repo/$config"
[ -f "$config" ] || { echo "CONFIG $config: no such file" >&2; exit 2; }
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
read -r -a snake <<< "${SNAKEMAKE:-$py -m snakemake}"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
summary="$out/summary.txt"
status=0
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME TIMEOUT CMD...: run with a timeout, log to OUTDIR/NAME.log, remember the first failure
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "=== $name: $*"
    timeout --kill-after=30 "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    tail -n 5 "$out/$name.log"
    note "step $name: rc=$rc in $((SECONDS - t0)) s"
    [ "$status" -ne 0 ] || status=$rc
    return $rc
}

note "gpu_width_run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), config $config, cores $cores"
note "commit $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (tree dirty)')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$summary" 2>&1 || note "no nvidia-smi"

# 1. environment: torch (with CUDA unless REQUIRE_CUDA=0), snakemake, the data
step environment 120 "$py" - "${REQUIRE_CUDA:-1}" <<'EOF' || { note "environment check failed: see $out/environment.log"; exit "$status"; }
import sys
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
if sys.argv[1] == "1" and not torch.cuda.is_available():
    sys.exit("no CUDA device: this script runs config/gpu_fmnist_width.yaml on a GPU (REQUIRE_CUDA=0 to test it on a CPU)")
import lmcflow  # noqa: F401  (the checkout, via PYTHONPATH)
EOF
step snakemake_version 120 "${snake[@]}" --version || { note "snakemake not found: set SNAKEMAKE or PYTHON"; exit "$status"; }
if [ ! -e "$workdir/data" ] && [ -d "$repo/data" ]; then ln -s "$repo/data" "$workdir/data"; fi
found=""
for d in /usr/share/datasets/fashion-mnist "$repo/data" "$repo/data/FashionMNIST/raw"; do
    [ -e "$d/train-images-idx3-ubyte.gz" ] || [ -e "$d/train-images-idx3-ubyte" ] && found=$d && break
done
note "Fashion-MNIST raw files: ${found:-not found in /usr/share/datasets/fashion-mnist or data/ (prepare_data will fail)}"

run_snake=("${snake[@]}" --snakefile "$repo/Snakefile" --configfile "$config" --directory "$workdir")

# 2. the plan
step plan 300 "${run_snake[@]}" -n --cores "$cores" --quiet rules
cp "$out/plan.log" "$out/plan.txt" 2>/dev/null
if [ "${PLAN_ONLY:-0}" = "1" ]; then note "PLAN_ONLY: nothing run"; exit "$status"; fi

# 3. the run (resumable: an interrupted run is completed by the next one)
t0=$SECONDS
step run "$run_timeout" "${run_snake[@]}" --cores "$cores" --rerun-incomplete --keep-going
run_rc=$?
note "run wall time: $((SECONDS - t0)) s (limit $run_timeout s)"
# a run killed at the timeout leaves a lock behind; one that finished released it (unlocking reads the workflow anew)
[ "$run_rc" -eq 0 ] || "${run_snake[@]}" --unlock > /dev/null 2>&1 || true

# 4. what it produced, whatever its status
results="$workdir/results"
for sub in tables claims figures; do
    [ -d "$results/$sub" ] && mkdir -p "$out/$sub" && cp -r "$results/$sub/." "$out/$sub/"
done
for f in provenance.json provenance.html; do [ -f "$results/$f" ] && cp "$results/$f" "$out/"; done
[ -d "$workdir/logs" ] && tar -czf "$out/logs.tar.gz" -C "$workdir" logs
if [ -f "$results/tables/claims.parquet" ]; then
    step claims 120 "$py" -m lmcflow.cli claims "$results"
    cp "$out/claims.log" "$out/claims.txt"
fi
if [ -d "$results" ]; then
    step verify 600 "$py" -m lmcflow.cli verify "$results" --workdir "$workdir" --configfile "$config"
    cp "$out/verify.log" "$out/verify.txt"
fi
note "copied: $(cd "$out" && find tables claims figures -type f 2>/dev/null | wc -l) files; exit status $status"
exit "$status"
