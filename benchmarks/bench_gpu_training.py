"""GPU training throughput of the paper-scale models, through lmcflow's own training loop.

For every (arch, width) of config/paper_width.yaml's sweeps this times ``lmcflow.training.train``
on a synthetic dataset of the real input shape held on the GPU, in the mode a ``train`` job runs
(``precision: auto`` = bf16 autocast, deterministic algorithms on, crop+flip for CIFAR models).
Reported against baselines measured in the same run on the same GPU:

* ``peak``: an 8192^3 bf16 matrix product (what the GPU can do at best): achieved / peak;
* ``fp32``: the same loop in IEEE fp32 (TF32 off, as lmcflow runs fp32): bf16 speed-up;
* ``nondeterministic``: deterministic algorithms off: the cost of bit-reproducibility.

Achieved TFLOP/s = 3 x counted forward FLOPs x samples / time. ``--out FILE`` writes the per-model
rates as JSON; lmcflow.plan.cost.GPU_RATES (the estimate of every GPU job's request) stays below them.

Usage: python benchmarks/bench_gpu_training.py [--steps 15] [--out gpu_throughput.json] [--quick]
"""
from __future__ import annotations

import argparse
import copy
import sys
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from lmcflow.data import TORCHVISION_DATASETS, Dataset
from lmcflow.evaluation import resolve_device
from lmcflow.io import write_json
from lmcflow.models import ModelSpec, build_model, count_parameters
from lmcflow.training import train


def forward_flops(model: torch.nn.Module, in_shape) -> float:
    """FLOPs of one example's forward pass (eval mode), counted by torch on a batch of two on the model's device
    (lmcflow.plan.cost.model_counts counts the same without torch; tests/test_cost.py checks they agree)."""
    was_training = model.training
    model.eval()
    device = next(iter(model.parameters())).device
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(torch.zeros(2, *in_shape, device=device))
    model.train(was_training)
    return fc.get_total_flops() / 2


# (study arch, dataset, widths, model fields) as in config/paper_width.yaml
CASES = [
    ("mlp", "mnist", [0.125, 0.25, 0.5, 1, 2, 4, 8, 16], {"depth": 3, "base_width": 512}),
    ("vgg11", "cifar10", [0.25, 0.5, 1, 2, 4, 8, 16], {"norm": "batchnorm"}),
    ("resnet20", "cifar10", [0.25, 0.5, 1, 2, 4, 8, 16, 32], {"norm": "batchnorm"}),
]
BASELINE_WIDTHS = {1, 16}  # fp32 and nondeterministic baselines only here (they are slow at full width)


def peak_bf16_tflops(device, n=8192, reps=10) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12


def time_training(init_model, spec, device, steps, batch, precision, deterministic, augment) -> float:
    """Seconds per optimizer step of lmcflow.training.train on a copy of ``init_model`` (after one
    warm-up epoch)."""
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    n = batch * steps
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *spec.in_shape, generator=g).to(device)
    y = torch.randint(0, spec.num_classes, (n,), generator=g).to(device)
    data = Dataset({"train": x}, {"train": y}, {"in_shape": list(spec.in_shape),
                                                  "num_classes": spec.num_classes, "task": "classification"})
    cfg = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 3e-3, "epochs": 1, "batch_size": batch,
           "schedule": "cosine", "warmup_epochs": 0, "augment": augment, "precision": precision,
           "checkpoint_every": 0}
    model = copy.deepcopy(init_model).to(device)
    train(model, data, dict(cfg, epochs=1), 0, device)  # warm-up: cuDNN plans, allocator
    torch.cuda.synchronize()
    info = train(model, data, cfg, 1, device)
    torch.cuda.synchronize()
    return info["train_seconds"] / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--quick", action="store_true", help="widths 1 and 16 only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gpu_training: torch sees no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    device = resolve_device("cuda")
    peak = peak_bf16_tflops(device)
    print(f"{torch.cuda.get_device_name(device)}: bf16 matmul baseline {peak:.0f} TFLOP/s", flush=True)
    rows = []
    for arch, dataset, widths, fields in CASES:
        ds = TORCHVISION_DATASETS[dataset]
        augment = "crop_flip" if ds.in_shape[0] == 3 else "none"
        for width in widths:
            if args.quick and width not in BASELINE_WIDTHS:
                continue
            spec = ModelSpec(arch=arch, in_shape=tuple(ds.in_shape), num_classes=ds.num_classes, width=width,
                             **fields)
            torch.manual_seed(0)
            init_model = build_model(spec)  # one init per model: every mode trains a copy of it
            flops = 3 * forward_flops(init_model, spec.in_shape) * args.batch  # per step: forward + backward
            row = {"arch": arch, "dataset": dataset, "width": width, "params": count_parameters(init_model),
                   "batch": args.batch, "train_gflop_per_step": flops / 1e9}
            modes = {"bf16": ("bf16", True)}
            if width in BASELINE_WIDTHS:
                modes.update({"fp32": ("fp32", True), "bf16_nondeterministic": ("bf16", False)})
            for name, (precision, det) in modes.items():
                s = time_training(init_model, spec, device, args.steps, args.batch, precision, det, augment)
                row[f"{name}_step_s"] = s
                row[f"{name}_tflops"] = flops / s / 1e12
            row["bf16_fraction_of_peak"] = row["bf16_tflops"] / peak
            if "fp32_step_s" in row:
                row["bf16_speedup_vs_fp32"] = row["fp32_step_s"] / row["bf16_step_s"]
                row["determinism_cost"] = row["bf16_step_s"] / row["bf16_nondeterministic_step_s"]
            rows.append(row)
            extra = (f"  fp32 {row['fp32_tflops']:.1f} TFLOP/s (bf16 {row['bf16_speedup_vs_fp32']:.1f}x faster), "
                     f"deterministic/non {row['determinism_cost']:.2f}x") if "fp32_step_s" in row else ""
            print(f"{arch:9s} x{width:<6g} {row['params'] / 1e6:8.2f}M params"
                  f"  step {row['bf16_step_s'] * 1e3:8.2f} ms"
                  f"  {row['bf16_tflops']:7.1f} TFLOP/s bf16"
                  f" ({100 * row['bf16_fraction_of_peak']:.1f}% of peak){extra}",
                  flush=True)
    result = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__,
              "peak_bf16_tflops": peak, "steps": args.steps, "rows": rows}
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
