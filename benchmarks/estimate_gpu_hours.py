"""Estimate GPU-hours of a config from counted FLOPs and an assumed sustained throughput.

FLOPs of one forward pass are counted exactly with torch's FlopCounterMode on a batch of the point's
input shape; training costs 3x forward (forward + backward) per example per epoch, plus the merge stage
(11 λ points x forward over train + val + test, plus a BatchNorm pass for BN models) per pair and method.
Throughput is either an assumption you pass in (default 40 TFLOP/s sustained: ~30-40% of an A100/H100's
dense bf16 peak; the estimate scales inversely with it) or measured: ``--throughput FILE`` takes the JSON
of ``bench_gpu_training.py --out FILE`` and uses, for every point, the bf16 training rate measured for
the same architecture at the nearest width (log scale); evaluation is charged at that rate too.

Bundled training (``train.bundle``, or ``--bundle K`` for every point; a bundle never holds more models
than the point has seeds): when a throughput file also holds ``bench_gpu_bundle.py``'s ``bundle_rows``,
a point trained in bundles of K runs at min(rate × s_K, best rate measured for the architecture), with
s_K the speed-up of a bundle of K (largest measured size ≤ K) over single-model training measured for
the same architecture (at width 1): bundling removes launch overhead, it cannot beat the compute
rate the architecture reaches at its widest. ``--throughput`` can be given several times.

    .venv/bin/python benchmarks/estimate_gpu_hours.py config/paper_width.yaml [--tflops 40 | --throughput F ...]
        [--bundle K]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from lmcflow.catalog import TORCHVISION_DATASETS
from lmcflow.config import expand_points
from lmcflow.models import ModelSpec, build_model

TRAIN_SIZES = {"mnist": 55000, "fashion_mnist": 55000, "cifar10": 45000, "cifar100": 45000}
EVAL_SIZES = {"mnist": 70000, "fashion_mnist": 70000, "cifar10": 60000, "cifar100": 60000}


def forward_flops(model: torch.nn.Module, in_shape) -> float:
    """FLOPs of one example's forward pass (eval mode), counted by torch on a batch of two (on the model's
    device: ``spec_flops`` uses the meta device, shapes without data)."""
    was_training = model.training
    model.eval()
    device = next(iter(model.parameters())).device
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(torch.zeros(2, *in_shape, device=device))
    model.train(was_training)
    return fc.get_total_flops() / 2


def spec_flops(spec: ModelSpec) -> float:
    """``forward_flops`` of a model built on the meta device: exact counts without allocating its weights (VGG-11
    16x has 2.4 B parameters)."""
    with torch.device("meta"):
        model = build_model(spec)
    return forward_flops(model, spec.in_shape)


def measured_tflops(rows: list, arch: str, width: float) -> float | None:
    """bf16 training TFLOP/s measured for ``arch`` at the width nearest to ``width`` (log scale)."""
    same = [r for r in rows if r["arch"] == arch]
    if not same:
        return None
    return min(same, key=lambda r: abs(math.log(r["width"] / width)))["bf16_tflops"]


def bundle_speedup(bundle_rows: list, arch: str, k: int, compile_mode: str = "") -> float:
    """Measured speed-up of a bundle of ``k`` over single-model training (largest measured size ≤ k), 1 if none."""
    same = [r for r in bundle_rows if r.get("arch") == arch and r.get("compile", "") == (compile_mode or "")
            and r.get("speedup_vs_single") and r["bundle"] <= k]
    if not same:
        return 1.0
    return max(1.0, max(same, key=lambda r: r["bundle"])["speedup_vs_single"])


def point_rate(rows: list, bundle_rows: list, arch: str, width: float, k: int, compile_mode, default: float) -> float:
    """TFLOP/s charged for a point: measured single-model rate, times the bundle speed-up, capped (see doc)."""
    rate = measured_tflops(rows, arch, width) if rows else None
    if rate is None:
        return default
    if k > 1:
        best = max(r["bf16_tflops"] for r in rows if r["arch"] == arch)
        rate = max(rate, min(rate * bundle_speedup(bundle_rows, arch, k, compile_mode or ""), best))
    return rate


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--tflops", type=float, default=40.0, help="assumed sustained TFLOP/s per GPU")
    ap.add_argument("--throughput", action="append", default=[],
                    help="JSON from bench_gpu_training.py / bench_gpu_bundle.py --out (repeatable)")
    ap.add_argument("--bundle", type=int, default=None, help="bundle size for every point (default: train.bundle)")
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text())
    rows, bundle_rows = [], []
    for path in args.throughput:
        data = json.loads(Path(path).read_text())
        rows += data.get("rows", [])
        bundle_rows += data.get("bundle_rows", [])
    total, hours, hours_single, jobs, jobs_single = {}, {}, {}, {}, {}
    for (study, _pid), p in expand_points(cfg).items():
        k = min(len(p.seeds), int(args.bundle or p.train.get("bundle", 1)))
        jobs[study] = jobs.get(study, 0) + math.ceil(len(p.seeds) / k)
        jobs_single[study] = jobs_single.get(study, 0) + len(p.seeds)
        subset = (cfg.get("data", {}).get("subsets") or {}).get(p.dataset, {})
        base = subset.get("base", p.dataset)  # a subset of a torchvision dataset costs as its base
        ds = TORCHVISION_DATASETS.get(base)
        if ds is None:
            continue  # synthetic data: negligible
        fields = {k: v for k, v in p.model.items() if k in ModelSpec.__dataclass_fields__}
        spec = ModelSpec(in_shape=ds.in_shape, num_classes=ds.num_classes, **fields)
        f = spec_flops(spec)
        n_train = min(subset.get("n_train") or TRAIN_SIZES[base], TRAIN_SIZES[base])
        train = 3 * f * n_train * p.train["epochs"] * len(p.seeds)
        merge = (f * (EVAL_SIZES[base] + n_train) * p.merge["lambdas"]
                 * len(p.pairs) * len(p.merge["methods"]))
        rate1 = point_rate(rows, bundle_rows, spec.arch, spec.width, 1, None, args.tflops)
        rate = point_rate(rows, bundle_rows, spec.arch, spec.width, k, p.train.get("compile"), args.tflops)
        total[study] = total.get(study, 0.0) + train + merge
        # merge jobs evaluate single models: charged at the single-model rate either way
        hours[study] = hours.get(study, 0.0) + (train / rate + merge / rate1) / 1e12 / 3600
        hours_single[study] = hours_single.get(study, 0.0) + (train + merge) / (rate1 * 1e12) / 3600
    bundled = bool(bundle_rows) and any(jobs[s] != jobs_single[s] for s in jobs)
    for study, flops in total.items():
        line = f"{study:28s} {flops / 1e15:10.1f} PFLOP  ~{hours_single[study]:8.1f} GPU-hours"
        if bundled:
            line += f"  ~{hours[study]:8.1f} bundled"
        print(line + f"  train jobs {jobs_single[study]} -> {jobs[study]}")
    s = sum(total.values())
    how = f"measured rates from {', '.join(args.throughput)}" if rows else f"{args.tflops:g} TFLOP/s"
    line = f"{'total':28s} {s / 1e15:10.1f} PFLOP  ~{sum(hours_single.values()):8.1f} GPU-hours"
    if bundled:
        line += f"  ~{sum(hours.values()):8.1f} bundled"
    print(line + f"  train jobs {sum(jobs_single.values())} -> {sum(jobs.values())} at {how}")


if __name__ == "__main__":
    sys.exit(main())
