"""GPU-hours of a config per study, from the same computation as `lmcflow plan` and the jobs' SLURM requests.

Every compute job the plan submits (lmcflow.plan.summary.planned_jobs, grid groups and bundles included) with
its estimated run time (lmcflow.plan.cost: the job's counted work at the device rates documented there) and its
request; a job on a GPU counts its hours × its GPUs. The train job count is the plan's.

    .venv/bin/python benchmarks/estimate_gpu_hours.py config/paper_width.yaml

Last line: the total over studies.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from lmcflow.plan import load_plan
from lmcflow.plan.summary import planned_jobs


def study_hours(config_path: str) -> dict[str, dict]:
    """{study: {train_jobs, jobs, estimated_gpu_h, requested_gpu_h, estimated_train_gpu_h}} of a config's run."""
    out: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for j in planned_jobs(load_plan(config_path)):
        row = out[j.wildcards["study"]]
        est, req = j.request.seconds / 3600 * j.request.gpu, j.request.runtime / 60 * j.request.gpu
        row["jobs"] += 1
        row["estimated_gpu_h"] += est
        row["requested_gpu_h"] += req
        if j.rule == "train":
            row["train_jobs"] += 1
            row["estimated_train_gpu_h"] += est
    return {s: dict(r) for s, r in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    args = ap.parse_args(argv)
    rows = study_hours(args.config)
    for study, r in rows.items():
        print(f"{study:28s} ~{r['estimated_gpu_h']:8.1f} GPU-hours estimated (train {r['estimated_train_gpu_h']:.1f}), "
              f"{r['requested_gpu_h']:8.1f} requested  train jobs {int(r['train_jobs'])}, jobs {int(r['jobs'])}")
    tot = {k: sum(r[k] for r in rows.values()) for k in ("estimated_gpu_h", "requested_gpu_h", "train_jobs", "jobs",
                                                         "estimated_train_gpu_h")}
    print(f"{'total':28s} ~{tot['estimated_gpu_h']:8.1f} GPU-hours estimated "
          f"(train {tot['estimated_train_gpu_h']:.1f}), "
          f"{tot['requested_gpu_h']:8.1f} requested  train jobs {int(tot['train_jobs'])}, jobs {int(tot['jobs'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
