"""Benchmark: lmcflow's weight matching against the plain coordinate descent it reproduces, same run, same models.

Two seeded random MLPs of the width study (784 → 512w → 512w → 10, default ×8) are matched by
``lmcflow.alignment.weight_matching`` (cached cost terms updated by the moved rows, no-op steps skipped, the
objective read from the last cost) and by ``tests/reference_alignment.reference_weight_matching`` (every cost
recomputed every sweep, as before), alternately ``--reps`` times (medians: a change of load hits both). Both run
in float64 on one thread with the allocator set up as lmcflow's jobs do (``lmcflow.kernels.keep_freed_memory``).
Prints both times, the sweeps, the relative difference of the final objectives and whether the permutations are
identical; summary line last:
``weight_matching_speedup_x8=… objective_rel_diff=…``.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_weight_matching_mlp.py [--width 8] [--seed 0] [--reps 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reference_alignment

from lmcflow.alignment import permutation_spec, weight_matching  # noqa: E402
from lmcflow.kernels import keep_freed_memory, set_threads  # noqa: E402
from lmcflow.models import ModelSpec, build_model  # noqa: E402
from tests.reference_alignment import reference_weight_matching  # noqa: E402


def model(width: float, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width, depth=2,
                                 base_width=512))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3, help="alternated runs of each; medians")
    args = ap.parse_args(argv)
    keep_freed_memory()
    set_threads(1)
    load = os.getloadavg()
    print(f"# bench_weight_matching_mlp: MLP x{args.width:g}, torch {torch.__version__}, 1 thread, load before "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    a, b = model(args.width, 1), model(args.width, 2)
    spec = permutation_spec(a)
    sd_a, sd_b = a.state_dict(), b.state_dict()
    new_times, ref_times = [], []
    for rep in range(args.reps):  # alternated, so that a change of load hits both sides alike
        t0 = time.perf_counter()
        perms, info = weight_matching(spec, sd_a, sd_b, seed=args.seed)
        new_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref_perms, history = reference_weight_matching(spec, sd_a, sd_b, seed=args.seed)
        ref_times.append(time.perf_counter() - t0)
        print(f"rep {rep}: lmcflow weight_matching {new_times[-1]:.2f} s ({info['iterations']} sweeps, "
              f"{info['skipped_steps']} no-op steps skipped), plain coordinate descent {ref_times[-1]:.2f} s "
              f"({len(history) - 1} sweeps), load {os.getloadavg()[0]:.2f}", flush=True)
    new_s, ref_s = statistics.median(new_times), statistics.median(ref_times)
    rel = abs(info["objective"] - history[-1]) / abs(history[-1])
    same = all(torch.equal(perms[g], ref_perms[g]) for g in perms)
    print(f"J = {info['objective']:.10g} (lmcflow), {history[-1]:.10g} (plain); identical permutations: {same}")
    load = os.getloadavg()
    print(f"# load after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"weight_matching_speedup_x{args.width:g}={ref_s / new_s:.2f} objective_rel_diff={rel:.1e} "
          f"new_s={new_s:.1f} plain_s={ref_s:.1f}")


if __name__ == "__main__":
    main()
