"""Wide MLPs at the machine's fp32 GEMM rate: training step, λ-path evaluation and mechanism metrics against the
bare matmuls of the same shapes, timed in the same run and process.

For each width (default ×4 and ×8 of the width study's MLP, 784 → 512w → 512w → 10, batch 128, SGD lr 0.1
momentum 0.9 weight decay 3e-3, fp32):

* ``gemm``: the eight matmuls of one training step (3 forward, 2 input gradients, 3 weight gradients) into
  preallocated outputs: the step's arithmetic at the machine's rate;
* ``step``: one training step as ``lmcflow.training.train`` takes it (forward, cross-entropy, zero_grad,
  backward, the optimizer from ``lmcflow.training.optimizer_for``);
* ``eval``: ``lmcflow.evaluation.predict`` of the λ = ½ model over 4,096 inputs (what a λ path does, per λ) against
  the three forward matmuls of that batch;
* ``mechanism`` (widest width only): ``lmcflow.mechanism.layer_metrics`` of two models on 2,000 inputs at
  λ ∈ {¼, ½, ¾}, reported as seconds, as a multiple of one forward pass of those inputs at the GEMM rate, and
  as its own matmuls' time at the GEMM rate ÷ its time (FLOPs counted by torch's FlopCounterMode).

Ratios (GEMM time ÷ measured time, 1 = at the GEMM rate) are medians over repetitions; the process sets up its
allocator and threads as every lmcflow job does (``lmcflow.kernels.start_job``). Load from other processes
shifts both sides of a ratio; the load average is printed. Summary line last:
``wide_step_vs_gemm_x8=… gflops_step_x8=… gflops_gemm_x8=… eval_vs_gemm_x8=… mechanism_vs_gemm_x8=…``.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_wide_training.py [--widths 4 8] [--threads 1] [--reps 7]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

from lmcflow.evaluation import predict
from lmcflow.kernels import keep_freed_memory, set_threads
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model
from lmcflow.training import optimizer_for

TRAIN = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 3e-3}


def model(width: float, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width, depth=2,
                                 base_width=512))


def median_s(fn, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def dims(width: float) -> list[int]:
    h = int(512 * width)
    return [784, h, h, 10]


def step_gemms(batch: int, d: list[int]):
    """The eight matmuls of one step on preallocated tensors, and their FLOPs."""
    g = torch.Generator().manual_seed(0)
    w = [torch.randn(d[i + 1], d[i], generator=g) for i in range(3)]
    acts = [torch.randn(batch, d[i], generator=g) for i in range(4)]
    outs = [torch.empty(batch, d[i + 1]) for i in range(3)]
    gin = [torch.empty(batch, d[i]) for i in range(1, 3)]
    gw = [torch.empty(d[i + 1], d[i]) for i in range(3)]

    def run():
        for i in range(3):
            torch.mm(acts[i], w[i].T, out=outs[i])
        for i in (1, 2):
            torch.mm(acts[i + 1], w[i], out=gin[i - 1])
        for i in range(3):
            torch.mm(acts[i + 1].T, acts[i], out=gw[i])

    flops = 2 * batch * (3 * sum(d[i] * d[i + 1] for i in range(3)) - d[0] * d[1])
    return run, flops


def forward_gemms(batch: int, d: list[int]):
    g = torch.Generator().manual_seed(1)
    w = [torch.randn(d[i + 1], d[i], generator=g) for i in range(3)]
    acts = [torch.randn(batch, d[i], generator=g) for i in range(3)]
    outs = [torch.empty(batch, d[i + 1]) for i in range(3)]

    def run():
        for i in range(3):
            torch.mm(acts[i], w[i].T, out=outs[i])

    return run, 2 * batch * sum(d[i] * d[i + 1] for i in range(3))


def training_step(width: float, batch: int):
    m = model(width, 0).train()
    opt = optimizer_for([p for p in m.parameters() if p.requires_grad], TRAIN)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g)

    def run():
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return run


def bench_width(width: float, reps: int, batch: int, eval_batch: int) -> dict:
    d = dims(width)
    gemm, flops = step_gemms(batch, d)
    gemm_s, step_s = median_s(gemm, reps), median_s(training_step(width, batch), reps)
    fwd, fwd_flops = forward_gemms(eval_batch, d)
    a, b = model(width, 1), model(width, 2)
    mid = model(width, 3)
    mid.load_state_dict(interpolate_state(a.state_dict(), b.state_dict(), 0.5))
    x = torch.randn(eval_batch, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        fwd_s = median_s(fwd, reps)
        eval_s = median_s(lambda: predict(mid, x), reps)
    return {"width": width, "hidden_units": d[1], "gemm_ms": 1e3 * gemm_s, "step_ms": 1e3 * step_s,
            "step_vs_gemm": gemm_s / step_s, "gflops_gemm": flops / gemm_s / 1e9, "gflops_step": flops / step_s / 1e9,
            "eval_forward_gemm_ms": 1e3 * fwd_s, "eval_ms": 1e3 * eval_s, "eval_vs_gemm": fwd_s / eval_s,
            "gflops_eval": fwd_flops / eval_s / 1e9, "_forward_flop_per_input": fwd_flops / eval_batch,
            "_gflops_forward": fwd_flops / fwd_s / 1e9}


def bench_mechanism(width: float, n: int = 2000, batch: int = 500) -> dict:
    """Seconds of ``layer_metrics`` on n inputs, and its matmul FLOPs: counted by torch's FlopCounterMode on one
    batch of ``batch`` inputs (untimed) and scaled to n, since every matmul of the metrics is per batch."""
    from torch.utils.flop_counter import FlopCounterMode

    from lmcflow.mechanism import layer_metrics

    a, b = model(width, 1).eval(), model(width, 2).eval()
    x = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    with FlopCounterMode(display=False) as counter:
        layer_metrics(a, b, x[:batch], [0.25, 0.5, 0.75], batch_size=batch, perturbation_seed="bench")
    t0 = time.perf_counter()
    layer_metrics(a, b, x, [0.25, 0.5, 0.75], batch_size=batch, perturbation_seed="bench")
    return {"mechanism_s": time.perf_counter() - t0, "_mechanism_flops": counter.get_total_flops() * n / batch}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=float, nargs="+", default=[4.0, 8.0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--eval-batch", type=int, default=4096)
    ap.add_argument("--no-mechanism", action="store_true")
    args = ap.parse_args(argv)
    kept = keep_freed_memory()
    set_threads(args.threads)
    load = os.getloadavg()
    print(f"# bench_wide_training: torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} cpus, "
          f"freed memory kept: {kept}, load before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    rows = []
    for w in args.widths:
        r = bench_width(w, args.reps, args.batch, args.eval_batch)
        if w == max(args.widths) and not args.no_mechanism:
            r.update(bench_mechanism(w))
            # one forward of the mechanism's 2,000 inputs through one model at the GEMM rate, for scale
            r["mechanism_vs_one_forward"] = r["mechanism_s"] / (2000 * r["_forward_flop_per_input"]
                                                               / (r["_gflops_forward"] * 1e9))
            # its matmuls at the forward GEMM rate of this run ÷ its time (1 = at the GEMM rate)
            r["mechanism_vs_gemm"] = r["_mechanism_flops"] / (r["_gflops_forward"] * 1e9) / r["mechanism_s"]
        rows.append(r)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()
                          if not k.startswith("_")}), flush=True)
    load = os.getloadavg()
    print(f"# load after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    last = rows[-1]
    tag = f"x{last['width']:g}"
    print(f"wide_step_vs_gemm_{tag}={last['step_vs_gemm']:.2f} gflops_step_{tag}={last['gflops_step']:.1f} "
          f"gflops_gemm_{tag}={last['gflops_gemm']:.1f} eval_vs_gemm_{tag}={last['eval_vs_gemm']:.2f} "
          + (f"mechanism_vs_gemm_{tag}={last['mechanism_vs_gemm']:.2f} " if "mechanism_vs_gemm" in last else "")
          + " ".join(f"wide_step_vs_gemm_x{r['width']:g}={r['step_vs_gemm']:.2f}" for r in rows[:-1]))


if __name__ == "__main__":
    main()
