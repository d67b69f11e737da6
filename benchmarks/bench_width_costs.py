"""Per-width CPU costs of the width study's jobs (MLP, 2 hidden layers of 512 × width, Fashion-MNIST shapes), on one
torch thread, for sizing configs from measured costs (config/workstation.yaml, config/gpu_fmnist_width.yaml).

For every width it measures, with lmcflow's own code on random inputs of the real shapes (costs do not depend on
the values, except the number of weight-matching sweeps, see below):

* ``train_step_ms``: one SGD step (momentum 0.9, batch 128, fp32) of a single model, median of ``--steps`` after
  3 warm-up steps; ``train_epoch_s`` = train_step_ms × ⌈55,000 / 128⌉ = 430 steps (the 55k training split).
* ``eval_ms_per_1k``: an eval-mode forward pass per 1,000 inputs (batch 4,096, best of 3); ``lambda_path_s``: the
  λ path of one pair and method as the CPU default evaluates it, 11 λ × (5,000 train + 5,000 validation +
  10,000 test inputs) forward passes (BatchNorm-free: no statistics pass).
* ``weight_matching_s``: ``lmcflow.alignment.weight_matching`` of two seeded random models (max_iter 100) and
  the sweeps it ran; trained models run a similar number of sweeps (2–5), so this is the order of magnitude.
* ``mechanism_s``: ``lmcflow.mechanism.layer_metrics`` of one pair on 2,000 inputs at λ ∈ {¼, ½, ¾} (every
  metric, with the perturbed control and the ranks).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_width_costs.py [--widths 0.0625 1 4 8] [--steps 20]
        [--skip wm,mechanism] [--out FILE.json]

``--estimate CONFIG --costs FILE.json [--cores 8] [--speed 1.0]`` instead prices a config's MLP width studies from
such a file (costs at other widths interpolated log-log between the measured ones, extrapolated from the two
widest): per point, training = epochs × train_epoch_s × seeds (bundling ignored: an upper bound, it only saves
time); λ paths = pairs × merge methods at the point × lambda_path_s scaled by λ count and inputs
(train_eval_size + val_size + test 10,000); alignment = pairs × weight_matching_s where weight matching runs;
mechanism = pairs × mechanism methods × mechanism_s scaled by samples and λ count; plus ``--startup`` s per job
(train and pair-block jobs). Wall time on ``--cores`` single-thread jobs: max(CPU total / cores, critical path =
the longest training job (a bundle trains its seeds one after another in one job) + weight matching + one λ path
+ one mechanism job at that point). ``--speed`` divides every cost (a faster core).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F

from lmcflow.alignment import permutation_spec, weight_matching
from lmcflow.mechanism import layer_metrics
from lmcflow.models import ModelSpec, build_model

STEPS_PER_EPOCH = math.ceil(55000 / 128)
PATH_INPUTS = 11 * (5000 + 5000 + 10000)


def spec(width: float) -> ModelSpec:
    return ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width, depth=2, base_width=512)


def model(width: float, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(spec(width))


def train_step_ms(width: float, steps: int) -> float:
    m = model(width, 0).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=3e-3)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(128, 1, 28, 28, generator=g), torch.randint(0, 10, (128,), generator=g)
    times = []
    for i in range(steps + 3):
        t0 = time.perf_counter()
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


@torch.no_grad()
def eval_ms_per_1k(width: float) -> float:
    m = model(width, 0).eval()
    x = torch.randn(4096, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        m(x)
        best = min(best, time.perf_counter() - t0)
    return 1000 * best / 4.096


def _interp(rows: list, key: str, width: float) -> float:
    """Cost ``key`` at ``width``: log-log interpolation between measured widths, extrapolated from the two nearest."""
    pts = sorted((r["width"], r[key]) for r in rows if key in r and r[key] > 0)
    xs = [math.log(w) for w, _ in pts]
    ys = [math.log(v) for _, v in pts]
    x = math.log(width)
    i = min(max(1, sum(xi <= x for xi in xs)), len(xs) - 1)
    t = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return math.exp(ys[i - 1] + t * (ys[i] - ys[i - 1]))


def estimate(config_path: str, costs_path: str, cores: int, speed: float, startup: float) -> dict:
    from lmcflow.config import (
        expand_points,
        mechanism_lambdas,
        mechanism_methods,
        mechanism_params,
        merge_methods,
        resolve_config,
    )

    rows = json.loads(open(costs_path).read())["rows"]
    cfg = resolve_config([config_path])
    totals = {"train": 0.0, "paths": 0.0, "alignment": 0.0, "mechanism": 0.0, "startup": 0.0}
    critical, jobs = 0.0, 0
    for (_study, _pid), p in expand_points(cfg).items():
        if (p.model.get("arch"), int(p.model["depth"]), int(p.model["base_width"])) != ("mlp", 2, 512) \
                or p.dataset not in ("fashion_mnist", "mnist"):
            raise SystemExit(f"{p.study}/{p.point}: only the measured MLP (2 hidden layers of 512 x width) on "
                             "(Fashion-)MNIST is priced")
        w = float(p.model["width"])
        n_seeds, n_pairs = len(p.seeds), len(p.pairs)
        k = min(n_seeds, int(p.train.get("bundle", 1)))
        epoch = _interp(rows, "train_epoch_s", w) / speed
        train = epoch * int(p.train["epochs"])
        methods = merge_methods(p)
        inputs = (p.merge["train_eval_size"] or 55000 - cfg["data"]["val_size"]) + cfg["data"]["val_size"] + 10000
        path = _interp(rows, "lambda_path_s", w) / speed * int(p.merge["lambdas"]) / 11 * inputs / 20000
        wm = _interp(rows, "weight_matching_s", w) / speed if "weight_matching" in methods else 0.0
        mech_m = mechanism_methods(p)
        mech = (_interp(rows, "mechanism_s", w) / speed * int(mechanism_params(p)["samples"]) / 2000
                * len(mechanism_lambdas(p)) / 3) if mech_m else 0.0
        totals["train"] += train * n_seeds
        totals["paths"] += path * n_pairs * len(methods)
        totals["alignment"] += wm * n_pairs
        totals["mechanism"] += mech * n_pairs * len(mech_m)
        blocks = math.ceil(n_seeds / k)
        pair_blocks = n_pairs if k == 1 else blocks * (blocks + 1) // 2
        n_jobs = blocks + pair_blocks * (1 + (wm > 0) + (len(mech_m) > 0))
        jobs += n_jobs
        totals["startup"] += startup * n_jobs
        critical = max(critical, train * k + wm + path + mech)
    cpu = sum(totals.values())
    return {"config": config_path, "cores": cores, "speed": speed, "cpu_s": totals, "cpu_total_s": cpu,
            "jobs_priced": jobs, "critical_path_s": critical, "wall_s": max(cpu / cores, critical)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--estimate", default=None, help="price this config from --costs instead of measuring")
    ap.add_argument("--costs", default=None)
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--startup", type=float, default=5.0, help="seconds of start-up per job")
    ap.add_argument("--widths", type=float, nargs="+", default=[0.0625, 1.0, 4.0, 8.0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--skip", default="", help="comma-separated: wm, mechanism")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.estimate:
        est = estimate(args.estimate, args.costs, args.cores, args.speed, args.startup)
        print(json.dumps(est, indent=1))
        h = est["wall_s"] / 3600
        print(f"{args.estimate}: {est['cpu_total_s'] / 3600:.1f} CPU-hours, critical path "
              f"{est['critical_path_s'] / 3600:.2f} h -> ~{h:.1f} h on {args.cores} cores")
        return
    skip = set(filter(None, args.skip.split(",")))
    torch.set_num_threads(1)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"# bench_width_costs: torch {torch.__version__}, 1 thread, {os.cpu_count()} cpus, load before "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    rows = []
    for w in args.widths:
        r = {"width": w, "hidden_units": int(512 * w)}
        r["train_step_ms"] = train_step_ms(w, args.steps)
        r["train_epoch_s"] = r["train_step_ms"] * STEPS_PER_EPOCH / 1000
        r["eval_ms_per_1k"] = eval_ms_per_1k(w)
        r["lambda_path_s"] = r["eval_ms_per_1k"] * PATH_INPUTS / 1000 / 1000
        a, b = model(w, 1), model(w, 2)
        if "wm" not in skip:
            t0 = time.perf_counter()
            _, info = weight_matching(permutation_spec(a), a.state_dict(), b.state_dict(), max_iter=100, seed=0)
            r["weight_matching_s"] = time.perf_counter() - t0
            r["weight_matching_sweeps"] = info.get("iterations", info.get("sweeps", float("nan"))) \
                if isinstance(info, dict) else float("nan")
        if "mechanism" not in skip:
            x = torch.randn(2000, 1, 28, 28, generator=torch.Generator().manual_seed(2))
            t0 = time.perf_counter()
            layer_metrics(a.eval(), b.eval(), x, [0.25, 0.5, 0.75], perturbation_seed="bench")
            r["mechanism_s"] = time.perf_counter() - t0
        rows.append(r)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"load_before": load, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
