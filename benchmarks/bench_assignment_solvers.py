"""Benchmark: the assignment solvers for weight matching's step, on the cost matrices weight matching solves.

The matrices: every step of ``lmcflow.alignment.weight_matching`` (scipy solver) on the random-init MLP pair of
``bench_weight_matching_field.py`` (seeds 1 and 2, 784 → 512w → 512w → 10) at each ``--widths``, in the order
the sweeps solved them. Each matrix is solved by every solver in turn (one thread, alternating, so that a change
of load hits all alike), in the sweeps' order:

* ``scipy``: ``scipy.optimize.linear_sum_assignment(C, maximize=True)`` on float64 (the reference);
* ``lap-f64`` / ``lap-f32``: PyPI lap's ``lapjv(−C)`` on float64 / float32 (skipped when lap is absent);
* ``lapjv-cold``: PyPI lapjv's ``lapjv(−C)`` on float32, no warm start;
* ``lapjv-warm``: lmcflow's step (``_Assignment("lapjv")``): the same on the reduced cost of the group's previous
  duals.

Prints per width the total seconds of each solver, its ratio to scipy and how many of its assignments equal
scipy's; writes ``benchmarks/results/cpu/assignment_solvers.json``. The last line: ``<solver>_vs_scipy_x<w>=``
per width for the fastest solver whose assignments all equal scipy's.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_assignment_solvers.py [--widths 1 4]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recorded_steps(spec, sd_a: dict, sd_b: dict, seed: int) -> list:
    """(group, float64 cost) of every assignment step of a scipy-solved weight matching, in order."""
    from lmcflow.alignment import methods as wm_methods

    steps = []
    solve = wm_methods._Assignment.__call__

    def recording(self, grp, cost):
        steps.append((grp, cost.numpy().copy()))
        return solve(self, grp, cost)

    wm_methods._Assignment.__call__ = recording
    try:
        wm_methods.weight_matching(spec, sd_a, sd_b, seed=seed, solver="scipy")
    finally:
        wm_methods._Assignment.__call__ = solve
    return steps


def _solvers(lap) -> dict:
    """name -> solve(group, float64 cost) -> column of each row; lmcflow's warm start keeps its duals per group."""
    import lapjv
    import numpy as np
    import torch
    from scipy.optimize import linear_sum_assignment

    from lmcflow.alignment.methods import _Assignment

    warm = _Assignment("lapjv")
    out = {"scipy": lambda g, c: linear_sum_assignment(c, maximize=True)[1],
           "lapjv-cold": lambda g, c: lapjv.lapjv(np.negative(c, dtype=np.float32))[0],
           "lapjv-warm": lambda g, c: warm(g, torch.from_numpy(c)).numpy()}
    if lap is not None:
        out["lap-f64"] = lambda g, c: lap.lapjv(-c)[1]
        out["lap-f32"] = lambda g, c: lap.lapjv(np.negative(c, dtype=np.float32))[1]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu" / "assignment_solvers.json"))
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    import numpy as np
    import torch

    from lmcflow.alignment import permutation_spec
    from lmcflow.kernels import set_threads
    from lmcflow.models import ModelSpec, build_model
    from lmcflow.provenance import package_version

    set_threads(1)
    try:
        import lap
    except ImportError:
        lap = None
        print("# PyPI lap: skipped (not installed)")
    load = os.getloadavg()
    print(f"# bench_assignment_solvers: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"scipy {package_version('scipy')}, lapjv {package_version('lapjv')}, lap {package_version('lap')}, "
          f"1 thread, load before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    results = {"machine": {"cpus": os.cpu_count(), "load_before": load},
               "versions": {p: package_version(p) for p in ("scipy", "lapjv", "lap")}, "widths": {}}
    summary = []
    for width in args.widths:
        models = []
        for s in (1, 2):
            torch.manual_seed(s)
            models.append(build_model(ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width,
                                                depth=2, base_width=512)))
        spec = permutation_spec(models[0])
        steps = _recorded_steps(spec, models[0].state_dict(), models[1].state_dict(), args.seed)
        solvers = _solvers(lap)
        seconds = {k: 0.0 for k in solvers}
        same = {k: 0 for k in solvers}
        for grp, cost in steps:
            ref = None
            for name, fn in solvers.items():
                t0 = time.perf_counter()
                col = fn(grp, cost)
                seconds[name] += time.perf_counter() - t0
                ref = col if ref is None else ref
                same[name] += int(np.array_equal(col, ref))
        n = len(steps[0][1])
        row = {"units": n, "matrices": len(steps),
               "solvers": {k: {"seconds": seconds[k], "over_scipy": seconds[k] / seconds["scipy"],
                               "identical_to_scipy": same[k]} for k in solvers}}
        for k, r in row["solvers"].items():
            print(f"x{width:g} (n = {n}, {len(steps)} matrices) {k}: {r['seconds']:.3f} s, "
                  f"÷ scipy {r['over_scipy']:.3f}, assignments identical to scipy's {r['identical_to_scipy']}/"
                  f"{len(steps)}", flush=True)
        exact = [k for k in solvers if k != "scipy" and same[k] == len(steps)]
        if exact:
            best = min(exact, key=lambda k: seconds[k])
            summary.append(f"{best}_vs_scipy_x{width:g}={seconds[best] / seconds['scipy']:.3f}")
        results["widths"][f"{width:g}"] = row
    results["machine"]["load_after"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    load = results["machine"]["load_after"]
    print(f"# load after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; wrote {out}")
    print(" ".join(summary))


if __name__ == "__main__":
    main()
