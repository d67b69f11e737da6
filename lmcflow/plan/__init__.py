"""The workflow's DAG as a module without Snakemake: a ``Plan`` from a resolved config holds the run's points
and grid groups, every path builder, each rule's input, params and resource functions (``rules``), the targets
of a run, and its jobs (``dag``). ``workflow/rules/common.smk`` builds one, ``PLAN``, and the
rules name its functions directly (``PLAN.merge_entries``)."""
from __future__ import annotations

from lmcflow.plan.core import CONCAT_KINDS, RESULT_KINDS, PlanError
from lmcflow.plan.dag import DuplicateOutput, Job, needed_jobs, plan_job_counts, producers, rule_jobs
from lmcflow.plan.rules import Plan


def load_plan(config_path=None) -> Plan:
    """The plan of ``snakemake --configfile config_path`` (None: the embedded default config)."""
    return Plan.from_files([config_path] if config_path else [])


def job_counts(config_path=None) -> dict[str, int]:
    """{rule: jobs} and ``total`` of a run of ``config_path`` (None: the embedded default) on a fresh
    directory, as ``snakemake -n`` counts them."""
    return plan_job_counts(load_plan(config_path))


__all__ = ["CONCAT_KINDS", "RESULT_KINDS", "DuplicateOutput", "Job", "Plan", "PlanError", "job_counts", "load_plan",
           "needed_jobs", "plan_job_counts", "producers", "rule_jobs"]
