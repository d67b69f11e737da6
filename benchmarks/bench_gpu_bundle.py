"""Bundled training throughput on a GPU (models per second), with and without torch.compile.

For MLP ×1 (MNIST shape, depth 3, base width 512) and ResNet-20 ×1 (CIFAR-10 shape, BatchNorm,
crop+flip), both launch-bound on an H200 when trained alone, this times ``lmcflow.bundle_training.train_bundle``
(bf16 autocast, deterministic algorithms, as a ``train`` job runs) for bundles of 1, 4, 8 and 16
members on a synthetic dataset of the real input shape held on the GPU, after one warm-up epoch
(cuDNN plans, allocator, compilation). Baseline: the bundle of 1, which is single-model training
(``training.train``), measured in the same run. ``--compile`` modes (``train.compile``) are timed for
the bundles of 8 and 16: kept only where they beat eager.

It also times the λ-path evaluation of ResNet-20 ×1 (11 λ, BatchNorm reset) per λ vs batched
(``merging.evaluate_path``), which decides whether conv nets should default to batched on GPUs.

Run from the repository root with it on PYTHONPATH (``gpu_checks.sh`` does). Writes ``--out FILE`` (JSON,
``bundle_rows`` and ``lambda_rows``): the figures lmcflow.plan.cost.GPU_RATES' bundle overhead should be checked
against (not measured yet).

    python benchmarks/bench_gpu_bundle.py [--steps 20] [--bundles 1,4,8,16] [--compile default,reduce-overhead]
        [--out gpu_bundle.json] [--device cuda]
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from lmcflow.bundle_training import Member, train_bundle
from lmcflow.checkpoints import init_model
from lmcflow.data import TORCHVISION_DATASETS, Dataset
from lmcflow.evaluation import resolve_device
from lmcflow.io import write_json
from lmcflow.models import ModelSpec, count_parameters

CASES = [  # (arch, dataset, width, model fields, augment) as in config/paper_width.yaml
    ("mlp", "mnist", 1.0, {"depth": 3, "base_width": 512}, "none"),
    ("resnet20", "cifar10", 1.0, {"norm": "batchnorm"}, "crop_flip"),
]


def synthetic(spec: ModelSpec, n: int, device) -> Dataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *spec.in_shape, generator=g).to(device)
    y = torch.randint(0, spec.num_classes, (n,), generator=g).to(device)
    return Dataset({"train": x, "val": x[:0], "test": x[:256]}, {"train": y, "val": y[:0], "test": y[:256]},
                   {"in_shape": list(spec.in_shape), "num_classes": spec.num_classes, "task": "classification"})


def time_bundle(spec: ModelSpec, data: Dataset, k: int, batch: int, steps: int, device, precision: str = "auto",
                augment: str = "none", compile_mode=False) -> float:
    """Seconds per optimizer step of a bundle of ``k`` in steady state: the second epoch of a run
    (the first warms up cuDNN plans, the allocator and compiled graphs). A bundle of one is
    ``training.train``, which has no per-step hook: it is run twice and the second run timed."""
    cfg = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 3e-3, "epochs": 1, "batch_size": batch,
           "schedule": "cosine", "warmup_epochs": 0, "augment": augment, "precision": precision,
           "checkpoint_every": 0, "compile": compile_mode}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def members(epochs):
        return [Member(init_model(spec, s).to(device), data, s, dict(cfg, epochs=epochs), name=f"seed={s}")
                for s in range(k)]

    if k == 1:
        train_bundle(members(1), device)
        sync()
        return train_bundle(members(1), device)[0]["train_seconds"] / steps
    start = []

    def on_batch(epoch, step, _names, _xb, _yb):
        if epoch == 1 and step == 0:
            sync()
            start.append(time.perf_counter())

    train_bundle(members(2), device, on_batch=on_batch)
    sync()
    return (time.perf_counter() - start[0]) / steps


def time_lambda_path(spec: ModelSpec, device, n: int = 10000, reps: int = 2) -> dict:
    from lmcflow.config import lambda_grid
    from lmcflow.merging import evaluate_path

    g = torch.Generator().manual_seed(1)
    splits = ("train", "val", "test")
    data = Dataset({s: torch.randn(n, *spec.in_shape, generator=g).to(device) for s in splits},
                   {s: torch.randint(0, spec.num_classes, (n,), generator=g).to(device) for s in splits},
                   {"in_shape": list(spec.in_shape), "num_classes": spec.num_classes, "task": "classification"})
    a, b = init_model(spec, 0).to(device), init_model(spec, 1).to(device)
    times, rows = {}, {}
    for batched in (False, True, False, True)[: 2 * reps]:
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        rows[batched] = evaluate_path(init_model(spec, 2).to(device), a.state_dict(), b.state_dict(), data,
                                      lambda_grid(11), batched=batched)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times[batched] = min(times.get(batched, float("inf")), time.perf_counter() - t0)
    diff = max(abs(r0["loss"] - r1["loss"]) for r0, r1 in zip(rows[False], rows[True], strict=True))
    return {"arch": spec.arch, "width": spec.width, "n": n, "loop_s": times[False], "batched_s": times[True],
            "speedup": times[False] / times[True], "max_abs_loss_diff": diff}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--bundles", default="1,4,8,16")
    ap.add_argument("--compile", default="default,reduce-overhead", help="modes tried for bundles ≥ 8 ('' = none)")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only to check the script itself")
    ap.add_argument("--lambda-examples", type=int, default=10000, help="examples per split of the λ-path timing")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_bundle: torch sees no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    device = resolve_device(args.device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    bundles = [int(k) for k in args.bundles.split(",") if k]
    modes = [m for m in args.compile.split(",") if m] if device.type == "cuda" else []
    rows, lambda_rows = [], []
    for arch, dataset, width, fields, augment in CASES:
        ds = TORCHVISION_DATASETS[dataset]
        spec = ModelSpec(arch=arch, in_shape=tuple(ds.in_shape), num_classes=ds.num_classes, width=width, **fields)
        data = synthetic(spec, args.batch * args.steps, device)
        single = None
        for k in bundles:
            for mode in [False] + (modes if k >= 8 else []):
                try:
                    step = time_bundle(spec, data, k, args.batch, args.steps, device, augment=augment,
                                       compile_mode=mode)
                except (RuntimeError, AssertionError, NotImplementedError) as err:  # OOM, compile errors: a result too
                    print(f"{arch} x{width:g} bundle {k} compile={mode}: FAILED {type(err).__name__}: {err}",
                          flush=True)
                    rows.append({"arch": arch, "width": width, "bundle": k, "compile": mode or "", "error": str(err)})
                    continue
                if k == 1 and not mode:
                    single = step
                row = {"arch": arch, "dataset": dataset, "width": width,
                       "params": count_parameters(init_model(spec, 0)),
                       "batch": args.batch, "bundle": k, "compile": mode or "", "step_s": step,
                       "model_steps_per_s": k / step,
                       "speedup_vs_single": (k * single / step) if single else None}
                rows.append(row)
                print(f"{arch:9s} x{width:<4g} bundle {k:2d} {'compile=' + mode if mode else 'eager':24s} "
                      f"step {step * 1e3:8.2f} ms  {k / step:9.1f} model-steps/s"
                      + (f"  {row['speedup_vs_single']:.2f}x single-model training" if single else ""), flush=True)
        if arch == "resnet20":
            lam = time_lambda_path(spec, device, n=args.lambda_examples)
            lambda_rows.append(lam)
            print(f"λ path {arch} x{width:g}, 11 λ, {lam['n']} examples per split: loop {lam['loop_s']:.2f} s, "
                  f"batched {lam['batched_s']:.2f} s -> {lam['speedup']:.2f}x (max |Δloss| "
                  f"{lam['max_abs_loss_diff']:.1e})", flush=True)
    if args.out:
        write_json(args.out, {"device": name, "torch": torch.__version__, "steps": args.steps, "bundle_rows": rows,
                              "lambda_rows": lambda_rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
