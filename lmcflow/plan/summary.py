"""``lmcflow plan``: what a run would ask a cluster for, per rule, from the plan alone (no data, no Snakemake).

Per compute rule: its jobs, the longest request, the hours requested and estimated (core-hours: × the job's
threads; GPU-hours: × its GPUs), and the jobs above 24 h, 72 h and the config's ``cluster.max_runtime``.
The requests are the ones the rules' ``resources:`` pass to Snakemake (``Plan.job_request``, from the rule
table's cost column).
"""
from __future__ import annotations

from dataclasses import dataclass

from lmcflow.plan.dag import needed_jobs
from lmcflow.plan.requests import Request, cluster_cfg
from lmcflow.plan.ruletable import COMPUTE_RULES, RULES


@dataclass(frozen=True)
class PlannedJob:
    rule: str
    wildcards: dict
    request: Request
    threads: int

    @property
    def label(self) -> str:
        return "/".join(str(v) for v in self.wildcards.values())


def planned_jobs(plan) -> list[PlannedJob]:
    """Every compute job a fresh run of the plan submits, with its request."""
    out = []
    for job in needed_jobs(plan):
        if job.rule in COMPUTE_RULES:
            threads = int(plan.config["threads"][RULES[job.rule].cost.threads])
            out.append(PlannedJob(job.rule, job.wildcards, plan.job_request(job.rule, job.wc), threads))
    return out


def rule_rows(jobs: list[PlannedJob], max_runtime: int | None) -> list[dict]:
    """One row per rule (in COMPUTE_RULES order) of ``jobs``."""
    rows = []
    for rule in COMPUTE_RULES:
        js = [j for j in jobs if j.rule == rule]
        if not js:
            continue
        req_h = [j.request.runtime / 60 for j in js]
        est_h = [j.request.seconds / 3600 for j in js]
        rows.append({
            "rule": rule, "jobs": len(js), "longest_h": max(req_h), "requested_h": sum(req_h),
            "estimated_h": sum(est_h),
            "core_h_requested": sum(h * j.threads for h, j in zip(req_h, js)),
            "core_h_estimated": sum(h * j.threads for h, j in zip(est_h, js)),
            "gpu_h_requested": sum(h * j.request.gpu for h, j in zip(req_h, js)),
            "gpu_h_estimated": sum(h * j.request.gpu for h, j in zip(est_h, js)),
            "over_24h": sum(h > 24 for h in req_h), "over_72h": sum(h > 72 for h in req_h),
            "over_limit": sum(max_runtime is not None and j.request.runtime > max_runtime for j in js),
            "max_mem_mb": max(j.request.mem_mb for j in js),
        })
    return rows


def _h(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def format_plan(plan, name: str = "") -> str:
    """The plan's Markdown table (and every job above the limit, if any)."""
    cl = cluster_cfg(plan.config)
    jobs = planned_jobs(plan)
    limit = cl["max_runtime"]
    head = (f"{name}: " if name else "") + (f"cluster.max_runtime {limit} min ({limit / 60:g} h)" if limit
                                            else "no cluster.max_runtime")
    if cl["max_mem_mb"]:
        head += f", cluster.max_mem_mb {cl['max_mem_mb']}"
    lines = [head, "",
             "| rule | jobs | longest request | jobs > 24 h | jobs > 72 h | jobs > limit | hours requested | "
             "hours estimated | core-h requested / estimated | GPU-h requested / estimated | largest mem_mb |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = rule_rows(jobs, limit)
    for r in rows:
        lines.append(f"| {r['rule']} | {r['jobs']} | {_h(r['longest_h'])} h | {r['over_24h']} | {r['over_72h']} | "
                     f"{r['over_limit'] if limit else '—'} | {_h(r['requested_h'])} | {_h(r['estimated_h'])} | "
                     f"{_h(r['core_h_requested'])} / {_h(r['core_h_estimated'])} | "
                     f"{_h(r['gpu_h_requested'])} / {_h(r['gpu_h_estimated'])} | {r['max_mem_mb']:,} |")
    total = {k: sum(r[k] for r in rows) for k in ("jobs", "requested_h", "estimated_h", "core_h_requested",
                                                   "core_h_estimated", "gpu_h_requested", "gpu_h_estimated")}
    lines.append(f"| **all** | {total['jobs']} | | | | | {_h(total['requested_h'])} | {_h(total['estimated_h'])} | "
                 f"{_h(total['core_h_requested'])} / {_h(total['core_h_estimated'])} | "
                 f"{_h(total['gpu_h_requested'])} / {_h(total['gpu_h_estimated'])} | |")
    over = [j for j in jobs if limit is not None and j.request.runtime > limit]
    if over:
        lines += ["", f"jobs above the limit ({len(over)}):"]
        lines += [f"- {j.rule} {j.label}: {j.request.runtime} min" for j in over]
    return "\n".join(lines)
