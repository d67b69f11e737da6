"""The CPU rates of lmcflow's cost model (lmcflow.plan.cost, docs/cluster.md), measured on this machine.

One torch thread, fp32, CPU time of this process (``time.process_time``: another process holding the core
stretches the wall clock, much less the CPU time), median of repeats:

* ``train_gflops`` and ``train_step_overhead_s``: SGD steps (momentum 0.9, batch 128) of the width study's MLP
  (784 → h → h → 10) at h = 32, 512, 1024, fitted as step time = overhead + 3 × forward FLOPs × 128 / rate
  (least squares): the overhead is what a step costs beyond its arithmetic (the optimizer, the autograd graph,
  small-kernel dispatch), which dominates at small width.
* ``loop_step_overhead_s`` and ``loop_step_overhead_per_model_s``: the same fit's remainder for lmcflow's own
  training loop (``lmcflow.bundle_training.train_bundle``, one epoch of 100 steps of h = 32 models, bundles of 1
  and 5): per step of a stacked bundle of K models, overhead = a + b × (K − 1) (the data order, the per-step
  checks, the learning-rate schedule, the stacked optimizer).
* ``eval_gflops``: eval-mode forward passes at batch 4,096, h = 512 and 1024 (the λ path and the analyses).
* ``lap_s_per_n_power`` and ``lap_power``: ``scipy.optimize.linear_sum_assignment`` of n × n random costs
  (n = 128, 256, 512), fitted as c × n^p (weight and activation matching).
* ``startup_cpu_s``: CPU seconds of a child ``python -c 'import torch, lmcflow.training'`` (what every
  torch job pays before its work; a job log's ``[job] start-up`` line measures the same in a real job).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_cost_rates.py [--out benchmarks/results/cpu/cost_rates.json]

The last line is the summary. lmcflow.plan.cost.CPU_RATES holds the committed values (tests/test_cost.py checks
they equal benchmarks/results/cpu/cost_rates.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment


def cpu_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def mlp(h: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(784, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
                               torch.nn.Linear(h, 10))


def forward_flops(h: int) -> float:
    return 2.0 * (784 * h + h * h + h * 10)


def train_steps(h: int, steps: int) -> float:
    torch.manual_seed(0)
    model = mlp(h)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=3e-3)
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    return cpu_time(step, steps)


def loop_overhead(k: int, rate: float) -> float:
    """CPU seconds per step of lmcflow's bundle loop beyond its arithmetic at ``rate`` FLOP/s."""
    from lmcflow.bundle_training import Member, train_bundle
    from lmcflow.checkpoints import init_model
    from lmcflow.data import Dataset
    from lmcflow.models import ModelSpec

    g = torch.Generator().manual_seed(0)
    n, steps = 12800, 100
    x = {s: torch.randn(m, 1, 28, 28, generator=g) for s, m in (("train", n), ("val", 256), ("test", 256))}
    y = {s: torch.randint(0, 10, (len(v),), generator=g) for s, v in x.items()}
    data = Dataset(x, y, {"in_shape": [1, 28, 28], "num_classes": 10, "task": "classification"})
    spec = ModelSpec("mlp", (1, 28, 28), 10, width=32 / 512, depth=2)
    cfg = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "nesterov": False, "weight_decay": 3e-3, "epochs": 1,
           "batch_size": 128, "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32",
           "checkpoint_every": 0, "weight_decay_on": "all", "lr_growth": 1.0}
    members = [Member(init_model(spec, s), data, s, cfg, name=str(s)) for s in range(k)]
    t = time.process_time()
    train_bundle(members, torch.device("cpu"))
    cpu = time.process_time() - t
    return max(0.0, (cpu - k * 3 * forward_flops(32) * n / rate) / steps)


def eval_rate(h: int) -> float:
    model = mlp(h).eval()
    x = torch.randn(4096, 784)
    with torch.no_grad():
        model(x)
        t = cpu_time(lambda: model(x), 5)
    return forward_flops(h) * 4096 / t / 1e9


def lap_fit() -> tuple[float, float]:
    rng = np.random.default_rng(0)
    ns, ts = [128, 256, 512], []
    for n in ns:
        c = rng.standard_normal((n, n))
        ts.append(cpu_time(lambda c=c: linear_sum_assignment(c, maximize=True), 3))
    p, log_c = np.polyfit(np.log(ns), np.log(ts), 1)
    return float(np.exp(log_c)), float(p)


def startup_cpu() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    runs = 3
    for _ in range(runs):
        subprocess.run([sys.executable, "-c", "import torch, lmcflow.training"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    widths = [32, 512, 1024]
    step_s = [train_steps(h, args.steps) for h in widths]
    flops = [3 * forward_flops(h) * 128 for h in widths]
    slope, overhead = np.polyfit(flops, step_s, 1)
    train_gflops = 1.0 / slope / 1e9
    loop1, loop5 = loop_overhead(1, train_gflops * 1e9), loop_overhead(5, train_gflops * 1e9)
    evals = [eval_rate(h) for h in (512, 1024)]
    lap_c, lap_p = lap_fit()
    out = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
        "torch": torch.__version__,
        "load_before": [round(v, 2) for v in load_before],
        "load_after": [round(v, 2) for v in os.getloadavg()],
        "train_step_s": dict(zip(map(str, widths), [round(s, 6) for s in step_s])),
        "train_gflops": round(train_gflops, 2),
        "train_step_overhead_s": round(max(float(overhead), 0.0), 6),
        "loop_step_overhead_s": round(loop1, 6),
        "loop_step_overhead_per_model_s": round(max(0.0, (loop5 - loop1) / 4), 6),
        "eval_gflops": round(min(evals), 2),
        "lap_s_per_n_power": float(f"{lap_c:.4g}"),
        "lap_power": round(lap_p, 3),
        "startup_cpu_s": round(startup_cpu(), 3),
    }
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)
    print(f"train_gflops={out['train_gflops']} loop_step_overhead_ms={1e3 * loop1:.2f} "
          f"+{1e3 * out['loop_step_overhead_per_model_s']:.2f}/model "
          f"eval_gflops={out['eval_gflops']} lap={out['lap_s_per_n_power']:.3g}*n^{out['lap_power']} "
          f"startup_cpu_s={out['startup_cpu_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
