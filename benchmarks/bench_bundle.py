"""Bundled training and batched λ-path evaluation against what they replace, measured in one run.

1. Training, MLP of the default config (depth 2, base width 512, SGD, batch 128, fp32, one thread) on the
   real Fashion-MNIST, 5 seeds, 1 epoch, at width 1/16 and 2: five single-model jobs as Snakemake runs
   them (five Python processes, each importing lmcflow, loading the prepared data, training and writing
   its checkpoint and run row: ``lmcflow.jobs.train.run_train``; the baseline) vs one bundled job (one
   process: ``lmcflow.jobs.train.run_train_bundle`` with the five seeds), run one after the other, start-up
   included. Also reports how far each bundle member is from its single run (max |Δweight|, Δ test acc).
2. λ-path evaluation at width 1/16 (11 λ, the default merge settings: train split curve on 10000
   examples, val 5000, test 10000): ``lmcflow.merging.evaluate_path`` with the per-λ loop (baseline) vs
   batched over λ, in this process, best of ``--repeats``.

Times are CPU seconds (user + sys of the job processes; of this process for 2): every job runs one
torch thread, so on a quiet machine they equal wall time, and on a shared one they are far less
disturbed by other load. Wall times are printed beside them. Last line:
``bundle_speedup_narrow=X bundle_speedup_wide=Y lambda_batch_speedup=Z`` (baseline / new; targets
≥ 3, ≥ 1, ≥ 2).

    .venv/bin/python benchmarks/bench_bundle.py [--workdir DIR] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's lmcflow, in this process and (PYTHONPATH) in the job processes
SEEDS = (0, 1, 2, 3, 4)
WIDTHS = {"narrow": 0.0625, "wide": 2.0}
FMNIST = "/usr/share/datasets/fashion-mnist"


def point_dict(width: float) -> dict:
    """A point of the default config's width study (config/config.yaml), trained for one epoch."""
    from lmcflow.config import Point

    model = {"arch": "mlp", "width": width, "depth": 2, "base_width": 512, "bias": True, "norm": "none",
             "norm_groups": 1, "activation": "relu", "symmetry": {"kind": "standard"}}
    train = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 3.0e-3, "epochs": 1,
             "batch_size": 128, "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32",
             "checkpoint_every": 1}
    merge = {"lambdas": 11, "methods": ["identity"], "train_eval_size": 10000, "bn_reset_size": None}
    return Point(study="bench", point=f"width-{width:g}", dataset="fashion_mnist", seeds=list(SEEDS), model=model,
                 train=train, merge=merge).to_dict()


# --------------------------------------------------------------------------- job processes
def worker(args) -> None:
    """One job as a Snakemake ``script:`` runs it: logging to a file, one torch thread, then the job."""
    from lmcflow.config import Point
    from lmcflow.jobs.train import run_train, run_train_bundle
    from lmcflow.kernels import set_threads
    from lmcflow.logs import job_log

    spec = json.loads(args.job)
    point = Point.from_dict(spec["point"])
    with job_log(spec["log"]):
        set_threads(1)
        if spec["kind"] == "single":
            run_train(point, spec["seed"], spec["data"], spec["ckpt"], spec["row"], device="cpu")
        else:
            members = [{"point": point, "seed": s, "ckpt": c, "row": r}
                       for s, c, r in zip(spec["seeds"], spec["ckpts"], spec["rows"], strict=True)]
            run_train_bundle(members, {"fashion_mnist": spec["data"]}, device="cpu")


def run_job(job: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys) of one job process."""
    err = Path(job["log"]).with_suffix(".stderr")
    err.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(err, "w") as fh:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(job)], cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=fh, stderr=fh)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"job failed: {err.read_text()[-2000:]}\nlog: {job['log']}")
    return wall, usage.ru_utime + usage.ru_stime


def bench_training(workdir: Path, data: str, width: float, tag: str) -> dict:
    point = point_dict(width)
    out = workdir / tag
    singles = []
    for s in SEEDS:
        job = {"kind": "single", "point": point, "seed": s, "data": data, "ckpt": str(out / f"single-{s}.safetensors"),
               "row": str(out / f"single-{s}.parquet"), "log": str(out / f"single-{s}.log")}
        singles.append(run_job(job))
    bundle = run_job({"kind": "bundle", "point": point, "seeds": list(SEEDS), "data": data,
                      "ckpts": [str(out / f"bundle-{s}.safetensors") for s in SEEDS],
                      "rows": [str(out / f"bundle-{s}.parquet") for s in SEEDS], "log": str(out / "bundle.log")})
    return {"singles": singles, "bundle": bundle, **member_drift(out)}  # (wall, cpu) per job


def member_drift(out: Path) -> dict:
    from lmcflow.io import load_tensors
    from lmcflow.tables import read_table

    dw, dacc = 0.0, 0.0
    for s in SEEDS:
        a, _ = load_tensors(out / f"single-{s}.safetensors")
        b, _ = load_tensors(out / f"bundle-{s}.safetensors")
        dw = max(dw, max((a[k] - b[k]).abs().max().item() for k in a))
        ra, rb = read_table(out / f"single-{s}.parquet", "runs"), read_table(out / f"bundle-{s}.parquet", "runs")
        dacc = max(dacc, abs(float(ra.test_acc[0]) - float(rb.test_acc[0])))
    return {"max_abs_weight_diff": dw, "max_abs_test_acc_diff": dacc}


# --------------------------------------------------------------------------- λ path
def bench_lambda(workdir: Path, data_path: str, repeats: int) -> dict:
    import torch

    from lmcflow.checkpoints import load_checkpoint
    from lmcflow.config import Point, lambda_grid
    from lmcflow.data import load_dataset
    from lmcflow.merging import evaluate_path

    torch.set_num_threads(1)
    out = workdir / "narrow"
    point = Point.from_dict(point_dict(WIDTHS["narrow"]))
    data = load_dataset(data_path)
    model, sd_a = load_checkpoint(str(out / "single-0.safetensors"), str(out / "single-0.parquet"), "cpu")
    _, sd_b = load_checkpoint(str(out / "single-1.safetensors"), str(out / "single-1.parquet"), "cpu")
    sd_a = {k: v.clone() for k, v in sd_a.items()}
    times, rows = {False: [], True: []}, {}
    for _ in range(repeats):
        for batched in (False, True):
            t0 = time.process_time()
            rows[batched] = evaluate_path(model, sd_a, sd_b, data, lambda_grid(11),
                                          train_eval_size=point.merge["train_eval_size"], batched=batched)
            times[batched].append(time.process_time() - t0)
    diff = {k: max(abs(a[k] - b[k]) for a, b in zip(rows[False], rows[True], strict=True))
            for k in ("loss", "acc", "calibrated_loss", "beta")}
    return {"loop": min(times[False]), "batched": min(times[True]), "all_loop": times[False],
            "all_batched": times[True], "max_abs_diff": diff}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help="keep prepared data and checkpoints here (default: a temporary folder)")
    ap.add_argument("--repeats", type=int, default=7, help="λ-path timings: best of this many")
    ap.add_argument("--only", choices=sorted(WIDTHS), help="train at one width only (no summary line)")
    args = ap.parse_args(argv)
    if args.worker:
        args.job = args.worker
        worker(args)
        return 0
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench_bundle."))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; cpus: {os.cpu_count()}; "
          f"workdir: {workdir}", flush=True)
    data = workdir / "fashion_mnist.safetensors"
    if not data.exists():
        from lmcflow.data import prepare_dataset

        prepare_dataset("fashion_mnist", {"search_paths": [FMNIST], "download": False, "val_size": 5000,
                                          "split_seed": 0}, data, workdir / "raw")
    speedups = {}
    for tag, width in WIDTHS.items():
        if args.only and tag not in (args.only, "narrow"):
            continue
        r = bench_training(workdir, str(data), width, tag)
        wall = (sum(w for w, _ in r["singles"]), r["bundle"][0])
        cpu = (sum(c for _, c in r["singles"]), r["bundle"][1])
        speedups[tag] = cpu[0] / cpu[1]
        print(f"MLP width {width:g}, {len(SEEDS)} seeds, 1 epoch: five single-model jobs {cpu[0]:.1f} CPU-s "
              f"({' '.join(f'{c:.1f}' for _, c in r['singles'])}; wall {wall[0]:.1f} s) vs one bundled job "
              f"{cpu[1]:.1f} CPU-s (wall {wall[1]:.1f} s) -> {speedups[tag]:.2f}x (wall {wall[0] / wall[1]:.2f}x); "
              f"bundle members vs single runs: max |Δweight| {r['max_abs_weight_diff']:.2e}, max |Δ test acc| "
              f"{r['max_abs_test_acc_diff']:.2e}", flush=True)
    lam = bench_lambda(workdir, str(data), args.repeats)
    speedups["lambda"] = lam["loop"] / lam["batched"]
    print(f"λ path, width {WIDTHS['narrow']:g}, 11 λ: per-λ loop {lam['loop']:.2f} CPU-s vs batched "
          f"{lam['batched']:.2f} CPU-s "
          f"(best of {args.repeats}; all: loop {[round(t, 2) for t in lam['all_loop']]}, batched "
          f"{[round(t, 2) for t in lam['all_batched']]}) -> {speedups['lambda']:.2f}x; max |Δ| batched vs loop: "
          + ", ".join(f"{k} {v:.1e}" for k, v in lam["max_abs_diff"].items()), flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.only:
        return 0
    print(f"bundle_speedup_narrow={speedups['narrow']:.2f} bundle_speedup_wide={speedups['wide']:.2f} "
          f"lambda_batch_speedup={speedups['lambda']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
