"""Estimate GPU-hours of a config from counted FLOPs and an assumed sustained throughput.

FLOPs of one forward pass are counted exactly with torch's FlopCounterMode on a batch of the point's
input shape; training costs 3x forward (forward + backward) per example per epoch, plus the merge stage
(11 λ points x forward over train + val + test, plus a BatchNorm pass for BN models) per pair and method.
Throughput is either an assumption you pass in (default 40 TFLOP/s sustained: ~30-40% of an A100/H100's
dense bf16 peak; the estimate scales inversely with it) or measured: ``--throughput FILE`` takes the JSON
of ``bench_gpu_training.py --out FILE`` and uses, for every point, the bf16 training rate measured for
the same architecture at the nearest width (log scale); evaluation is charged at that rate too.

    .venv/bin/python benchmarks/estimate_gpu_hours.py config/paper_width.yaml [--tflops 40 | --throughput F]
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from lmcflow.config import expand_points
from lmcflow.data import TORCHVISION_DATASETS
from lmcflow.models import ModelSpec, build_model

TRAIN_SIZES = {"mnist": 55000, "fashion_mnist": 55000, "cifar10": 45000, "cifar100": 45000}
EVAL_SIZES = {"mnist": 70000, "fashion_mnist": 70000, "cifar10": 60000, "cifar100": 60000}


def forward_flops(model: torch.nn.Module, in_shape) -> float:
    """FLOPs of one example's forward pass (eval mode), counted by torch on a batch of two."""
    was_training = model.training
    model.eval()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(torch.zeros(2, *in_shape))
    model.train(was_training)
    return fc.get_total_flops() / 2


def measured_tflops(rows: list, arch: str, width: float) -> float | None:
    """bf16 training TFLOP/s measured for ``arch`` at the width nearest to ``width`` (log scale)."""
    same = [r for r in rows if r["arch"] == arch]
    if not same:
        return None
    return min(same, key=lambda r: abs(math.log(r["width"] / width)))["bf16_tflops"]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--tflops", type=float, default=40.0, help="assumed sustained TFLOP/s per GPU")
    ap.add_argument("--throughput", help="JSON from bench_gpu_training.py --out: measured rates per model")
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(open(args.config))
    rows = json.load(open(args.throughput))["rows"] if args.throughput else []
    total, hours = {}, {}
    for (study, pid), p in expand_points(cfg).items():
        ds = TORCHVISION_DATASETS.get(p.dataset)
        if ds is None:
            continue  # synthetic data: negligible
        fields = {k: v for k, v in p.model.items() if k in ModelSpec.__dataclass_fields__}
        spec = ModelSpec(in_shape=ds.in_shape, num_classes=ds.num_classes, **fields)
        f = forward_flops(build_model(spec), spec.in_shape)
        train = 3 * f * TRAIN_SIZES[p.dataset] * p.train["epochs"] * len(p.seeds)
        merge = f * (EVAL_SIZES[p.dataset] + TRAIN_SIZES[p.dataset]) * p.merge["lambdas"] * len(p.pairs) * len(p.merge["methods"])
        rate = (measured_tflops(rows, spec.arch, spec.width) if rows else None) or args.tflops
        total[study] = total.get(study, 0.0) + train + merge
        hours[study] = hours.get(study, 0.0) + (train + merge) / (rate * 1e12) / 3600
    for study, flops in total.items():
        print(f"{study:28s} {flops / 1e15:10.1f} PFLOP  ~{hours[study]:8.1f} GPU-hours")
    s = sum(total.values())
    how = f"measured rates from {args.throughput}" if rows else f"{args.tflops:g} TFLOP/s"
    print(f"{'total':28s} {s / 1e15:10.1f} PFLOP  ~{sum(hours.values()):8.1f} GPU-hours at {how}")


if __name__ == "__main__":
    sys.exit(main())
