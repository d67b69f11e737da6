"""Estimated (lmcflow.plan.cost) vs measured run time of every compute job of one finished run, by rule.

Measured, from each job's log (lmcflow.logs): ``cpu_s`` = the ``[job] finished: … CPU-s in all`` line (one torch
thread: what the job's work cost, little stretched by other processes on the machine) and ``wall_s`` = the
``[job] start-up`` CPU-s + the ``… s wall since start-up`` of the same line (stretched by whatever else ran).
A job is within the cost model's tolerance when estimate / measured lies in [½, 2].

    .venv/bin/python benchmarks/cost_vs_measured.py RUN_DIR [--configfile F] [--markdown]

RUN_DIR is the run's working directory (its ``logs/``); the config is the embedded default unless given. The
last line is the summary: jobs within 2× of cpu_s and of wall_s.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

from lmcflow.plan import load_plan, needed_jobs

# the rules' log: paths (workflow/rules/*.smk), relative to paths.logs
LOGS = {
    "train": "train/{study}/{group}/bundle-{block}.log",
    "interpolate": "merge/{study}/{group}/blocks-{blocks}.log",
    "align": "align/{study}/{point}/{method}/blocks-{blocks}.log",
    "identifiability": "identifiability/{study}/{group}/identifiability-{blocks}.log",
    "swap_costs": "identifiability/{study}/{group}/swap_costs-{block}.log",
    "mechanism": "mechanism/{study}/{point}/{method}/blocks-{blocks}.log",
}
START = re.compile(r"\[job\] start-up: ([0-9.]+) CPU-s")
DONE = re.compile(r"\[job\] finished: ([0-9.]+) CPU-s in all, ([0-9.]+) s wall")


def measured(log: Path) -> tuple[float, float] | None:
    """(cpu_s, wall_s) of the last complete run the log records, None if it has none."""
    if not log.is_file():
        return None
    text = log.read_text()
    starts, dones = START.findall(text), DONE.findall(text)
    if not starts or not dones:
        return None
    cpu, wall = map(float, dones[-1])
    return cpu, float(starts[-1]) + wall


def rows(run: Path, configfile: str | None) -> list[dict]:
    plan = load_plan(configfile)
    out = []
    for job in needed_jobs(plan):
        if job.rule not in LOGS:
            continue
        m = measured(run / plan.config["paths"]["logs"] / LOGS[job.rule].format(**job.wildcards))
        if m is None:
            continue
        est = plan.job_request(job.rule, job.wc).seconds
        out.append({"rule": job.rule, "job": "/".join(job.wildcards.values()), "estimate_s": est,
                    "cpu_s": m[0], "wall_s": m[1]})
    return out


def within(est: float, meas: float) -> bool:
    return 0.5 <= est / meas <= 2.0 if meas > 0 else False


def table(rs: list[dict]) -> list[str]:
    lines = ["| rule | jobs | estimated s (sum) | measured CPU-s (sum) | measured wall s (sum) | "
             "est / CPU-s (min–max) | within 2× of CPU-s | within 2× of wall |", "|---|---|---|---|---|---|---|---|"]
    by = defaultdict(list)
    for r in rs:
        by[r["rule"]].append(r)
    for rule, g in by.items():
        ratios = [r["estimate_s"] / r["cpu_s"] for r in g]
        lines.append(f"| {rule} | {len(g)} | {sum(r['estimate_s'] for r in g):.0f} | "
                     f"{sum(r['cpu_s'] for r in g):.0f} | "
                     f"{sum(r['wall_s'] for r in g):.0f} | {min(ratios):.2f}–{max(ratios):.2f} | "
                     f"{sum(within(r['estimate_s'], r['cpu_s']) for r in g)}/{len(g)} | "
                     f"{sum(within(r['estimate_s'], r['wall_s']) for r in g)}/{len(g)} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--configfile", default=None)
    ap.add_argument("--jobs", action="store_true", help="one line per job as well")
    args = ap.parse_args(argv)
    rs = rows(Path(args.run), args.configfile)
    if not rs:
        print(f"no finished job logs under {args.run}", file=sys.stderr)
        return 1
    if args.jobs:
        for r in rs:
            print(f"{r['rule']:16s} {r['job']:60s} est {r['estimate_s']:7.1f}  cpu {r['cpu_s']:7.1f}  "
                  f"wall {r['wall_s']:7.1f}  est/cpu {r['estimate_s'] / r['cpu_s']:.2f}")
    print("\n".join(table(rs)))
    n = len(rs)
    cpu_ok = sum(within(r["estimate_s"], r["cpu_s"]) for r in rs)
    wall_ok = sum(within(r["estimate_s"], r["wall_s"]) for r in rs)
    print(f"jobs={n} within_2x_cpu={cpu_ok}/{n} ({100 * cpu_ok / n:.0f}%) within_2x_wall={wall_ok}/{n} "
          f"({100 * wall_ok / n:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
