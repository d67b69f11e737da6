"""Training throughput, reported as ratios against baselines measured in the same run.

1. bf16 autocast vs fp32 for one MLP training step (the AMX/AVX512-BF16 lever; on CPUs without
   them bf16 is emulated and slower, which is why ``precision: auto`` picks fp32 there).
2. Whole-dataset tensors with index batches (lmcflow.training) vs torch DataLoader over a
   TensorDataset (the usual baseline) for one epoch of batching only.

Run: .venv/bin/python benchmarks/bench_training.py [--width 1.0] [--steps 30]
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from lmcflow.evaluation import autocast, cpu_has_fast_bf16
from lmcflow.models import ModelSpec, build_model


def time_steps(model, x, y, precision, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    dev = torch.device("cpu")

    def step():
        with autocast(dev, precision):
            out = model(x)
        loss = F.cross_entropy(out.float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    spec = ModelSpec("mlp", (1, 28, 28), 10, width=args.width, depth=2)
    fp32 = time_steps(build_model(spec), x, y, "fp32", args.steps)
    bf16 = time_steps(build_model(spec), x, y, "bf16", args.steps)
    print(f"threads={torch.get_num_threads()} fast_bf16_cpu={cpu_has_fast_bf16()} "
          f"cpu_capability={torch.backends.cpu.get_cpu_capability()}")
    print(f"MLP width {args.width} batch {args.batch}: fp32 {fp32 * 1e3:.2f} ms/step (baseline), "
          f"bf16 {bf16 * 1e3:.2f} ms/step -> speed-up {fp32 / bf16:.2f}x")

    n = 55000
    xs = torch.randn(n, 1, 28, 28)
    ys = torch.randint(0, 10, (n,))
    t0 = time.perf_counter()
    for _xb, _yb in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=args.batch,
                                              shuffle=True):
        pass
    loader = time.perf_counter() - t0
    t0 = time.perf_counter()
    perm = torch.randperm(n)
    for i in range(0, n, args.batch):
        idx = perm[i:i + args.batch]
        xs[idx], ys[idx]  # the gather a training step does
    tensors = time.perf_counter() - t0
    print(f"one epoch of batches: DataLoader {loader:.2f} s (baseline), in-memory index batches "
          f"{tensors:.2f} s -> speed-up {loader / tensors:.1f}x")


if __name__ == "__main__":
    main()
