"""The workflow's DAG as a module without Snakemake: a ``Plan`` (``lmcflow.plan.facade``) from a resolved config,
composed of its paths, its points and grid groups, its targets and one object per rule family; the rule table
(``lmcflow.plan.ruletable``) of every rule's jobs, inputs, params, job function and cost; and the jobs of a run
(``dag``). ``workflow/rules/common.smk`` builds one, ``PLAN``, and the rules name its functions in one hop
(``PLAN.merge.entries``)."""
from __future__ import annotations

from lmcflow.plan.dag import DuplicateOutput, Job, needed_jobs, plan_job_counts, producers, rule_jobs
from lmcflow.plan.facade import Plan
from lmcflow.plan.grid import PlanError
from lmcflow.plan.targets import CONCAT_KINDS, RESULT_KINDS


def load_plan(config_path=None) -> Plan:
    """The plan of ``snakemake --configfile config_path`` (None: the embedded default config)."""
    return Plan.from_files([config_path] if config_path else [])


def job_counts(config_path=None) -> dict[str, int]:
    """{rule: jobs} and ``total`` of a run of ``config_path`` (None: the embedded default) on a fresh
    directory, as ``snakemake -n`` counts them."""
    return plan_job_counts(load_plan(config_path))


__all__ = ["CONCAT_KINDS", "RESULT_KINDS", "DuplicateOutput", "Job", "Plan", "PlanError", "job_counts", "load_plan",
           "needed_jobs", "plan_job_counts", "producers", "rule_jobs"]
