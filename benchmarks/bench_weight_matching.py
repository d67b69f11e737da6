"""Benchmark: weight matching between two ResNet-20s at width x8 (random init).

Prints the wall time of ``lmcflow.alignment.weight_matching`` and, as the
ratio-against-baseline, its ratio to two baselines measured in the same run on
the same device:

* ``forward``: one eval-mode forward pass of model A over a batch of
  ``--batch`` CIFAR-sized inputs (median of 3, after one warm-up);
* ``one_sweep``: one coordinate-descent sweep (``max_iter=1``: every group's cost
  matrix and linear assignment once), so ``total / one_sweep`` ≈ sweeps run.

Usage: .venv/bin/python benchmarks/bench_weight_matching.py [--width 8] [--device auto]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lmcflow.alignment import permutation_spec, weight_matching
from lmcflow.evaluation import resolve_device
from lmcflow.models import ModelSpec, build_model, count_parameters


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=float, default=8.0)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = resolve_device(args.device)
    spec = ModelSpec(arch="resnet20", in_shape=(3, 32, 32), num_classes=10, width=args.width, norm="batchnorm")
    torch.manual_seed(args.seed)
    model_a = build_model(spec).to(device).eval()
    model_b = build_model(spec).to(device).eval()
    pspec = permutation_spec(model_a)
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()

    x = torch.randn(args.batch, 3, 32, 32, device=device)
    times = []
    with torch.no_grad():
        model_a(x)
        for _ in range(3):
            _sync(device)
            t0 = time.perf_counter()
            model_a(x)
            _sync(device)
            times.append(time.perf_counter() - t0)
    forward_s = statistics.median(times)

    _sync(device)
    t0 = time.perf_counter()
    weight_matching(pspec, sd_a, sd_b, max_iter=1, seed=args.seed)
    _sync(device)
    sweep_s = time.perf_counter() - t0

    _sync(device)
    t0 = time.perf_counter()
    _, info = weight_matching(pspec, sd_a, sd_b, max_iter=args.max_iter, seed=args.seed)
    _sync(device)
    total_s = time.perf_counter() - t0

    hist = info["objective_history"]
    result = {
        "device": str(device), "threads": torch.get_num_threads(), "width": args.width,
        "parameters": count_parameters(model_a), "groups": len(pspec.groups),
        "max_group_size": max(pspec.sizes.values()), "sweeps": info["iterations"],
        "converged": info["iterations"] < args.max_iter,
        "objective_start": hist[0], "objective_end": hist[-1],
        "weight_matching_s": round(total_s, 3), "baseline_forward_s": round(forward_s, 4),
        "baseline_one_sweep_s": round(sweep_s, 3),
        "ratio_vs_forward": round(total_s / forward_s, 1), "ratio_vs_one_sweep": round(total_s / sweep_s, 2),
    }
    print(f"weight matching, ResNet-20 x{args.width:g} ({result['parameters']:,} params, {result['groups']} groups) "
          f"on {device}: {total_s:.2f}s for {info['iterations']} sweeps; baseline forward(batch={args.batch}) "
          f"{forward_s * 1e3:.1f}ms -> ratio {total_s / forward_s:.1f}x; one sweep {sweep_s:.2f}s -> ratio "
          f"{total_s / sweep_s:.2f}x")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
