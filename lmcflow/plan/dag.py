"""The jobs of a run, from the plan and the rule table (``lmcflow.plan.ruletable``) alone: every rule's jobs with
their outputs and inputs, and the jobs a fresh run needs (what ``snakemake -n`` plans in an empty directory)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

from lmcflow.plan.ruletable import RULES, UNPACK, Rule, evaluate


@dataclass
class Job:
    rule: str
    wildcards: dict
    output: list
    input: dict = field(default_factory=dict)  # input name (or "" for unnamed) -> [files], in the rule's order
    sources: list = field(default_factory=list)  # input files from outside the run (imported checkpoints)

    @property
    def wc(self):
        return SimpleNamespace(**self.wildcards)

    def input_files(self) -> list:
        return [f for files in self.input.values() for f in files]


def _listed(value) -> list:
    return [value] if isinstance(value, str) else list(value)


def rule_jobs(plan) -> list[Job]:
    """Every job each rule of the rule table could run for this config (a superset of what a run needs), its
    inputs evaluated from the rule's ``input:`` entries as Snakemake evaluates them."""
    return [_job(plan, rule, wildcards) for rule in RULES.values() for wildcards in rule.jobs(plan)]


def _job(plan, rule: Rule, wildcards: dict) -> Job:
    wc = SimpleNamespace(**wildcards)
    job = Job(rule.name, wildcards, _listed(rule.output(plan, wc)))
    for name, expr in rule.input.items():
        value = evaluate(plan, rule, expr, wc)
        if name == UNPACK:
            job.input |= {k: _listed(v) for k, v in value.items()}
        elif name in rule.sources:
            job.sources = _listed(value)
        else:
            job.input[name] = _listed(value)
    return job


class DuplicateOutput(ValueError):
    """Two jobs would make one file."""


def producers(jobs: list[Job]) -> dict[str, Job]:
    """output file -> the one job that makes it."""
    made: dict[str, Job] = {}
    for job in jobs:
        for f in job.output:
            if f in made:
                raise DuplicateOutput(f"{f}: made by {made[f].rule} {made[f].wildcards} and {job.rule} {job.wildcards}")
            made[f] = job
    return made


def needed_jobs(plan) -> list[Job]:
    """The jobs a run on a fresh directory runs: rule all and everything upstream of it, in dependency order
    (each job after the jobs making its inputs)."""
    jobs = rule_jobs(plan)
    made = producers(jobs)
    order: list[Job] = []
    seen: set[int] = set()

    def visit(job: Job) -> None:
        if id(job) in seen:
            return
        seen.add(id(job))
        for f in job.input_files():
            if f not in made:
                raise LookupError(f"{job.rule} {job.wildcards} reads {f}, which no rule makes")
            visit(made[f])
        order.append(job)

    visit(next(j for j in jobs if j.rule == "all"))
    return order


def plan_job_counts(plan) -> dict[str, int]:
    """{rule: jobs} of a fresh run, and ``total``."""
    counts = Counter(j.rule for j in needed_jobs(plan))
    return dict(sorted(counts.items())) | {"total": sum(counts.values())}
