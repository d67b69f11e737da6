"""The jobs of a run, from the plan alone: every rule's jobs with their outputs and inputs, and the jobs a fresh
run needs (what ``snakemake -n`` plans in an empty directory)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

from lmcflow.config import mechanism_methods, merge_methods
from lmcflow.grouping import blocks_label
from lmcflow.plan.core import CONCAT_KINDS, RESULT_KINDS, is_merged, result_table_rule, study_table_rule
from lmcflow.plan.paths import EXTENSION_FIGURES, IDENT_FIGURES, MECHANISM_FIGURES
from lmcflow.plan.rules import Plan


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


def _job(rule, wildcards, output, **inputs):
    return Job(rule, wildcards, _listed(output), {k: _listed(v) for k, v in inputs.items()})


def rule_jobs(plan: Plan) -> list[Job]:
    """Every job each rule could run for this config (a superset of what a run needs)."""
    P, out = plan, []
    ns = SimpleNamespace
    for d in sorted({p.dataset for p in P.points.values()}):
        out.append(_job("prepare_data", {"dataset": d}, P.data_file(d)))
    for (s, g), pts in P.groups.items():
        for b in P.blocks[(s, g)]:
            wc = ns(study=s, group=g, block=str(b))
            if s in P.imports.files:  # a study of imported checkpoints (lmcflow.plan.imported)
                job = _job("import_models", vars(wc), P.bundle_dir(s, g, b), data=P.group_data_files(wc))
                job.sources = P.import_files(wc)
                out.append(job)
            else:
                out.append(_job("train", vars(wc), P.bundle_dir(s, g, b), data=P.group_data_files(wc)))
            if P.group_analysis_points(wc, "swap_costs"):
                out.append(_job("swap_costs", vars(wc), [P.ident_point_file(s, g, k, b) for k in
                                                         ("swap_costs", "swap_matrix")],
                                data=P.group_data_files(wc), bundle=P.bundle_dir(s, g, b)))
        for b in P.group_pair_blocks(s, g):
            wc = ns(study=s, group=g, blocks=blocks_label(*b))
            data, bundles = P.group_data_files(wc), P.block_bundles(wc)
            if any(is_merged(p) for p in pts):
                out.append(_job("interpolate", vars(wc), P.merge_file(s, g, wc.blocks), data=data, bundles=bundles,
                                alignment=P.merge_alignment_files(wc)))
            if P.group_analysis_points(wc, "identifiability"):
                out.append(_job("identifiability", vars(wc),
                                [P.ident_point_file(s, g, k, wc.blocks) for k in ("identifiability",
                                                                                   "identifiability_lmc")],
                                data=data, bundles=bundles, interpolation=P.identity_paths_file(wc)))
    for s in P.studies:
        for p in P.merged_points(s):
            for b in P.point_pair_blocks(p):
                blocks = blocks_label(*b)
                for m in merge_methods(p):
                    if m != "identity":
                        wc = ns(study=s, point=p.point, method=m, blocks=blocks)
                        out.append(_job("align", vars(wc), [P.align_file(s, p.point, m, blocks),
                                                            P.align_row_file(s, p.point, m, blocks)],
                                        data=P.point_data_file(wc), bundles=P.block_bundles(wc)))
                for m in mechanism_methods(p):
                    wc = ns(study=s, point=p.point, method=m, blocks=blocks)
                    out.append(_job("mechanism", vars(wc), [P.mechanism_file(s, p.point, m, blocks),
                                                            P.active_overlap_file(s, p.point, m, blocks)],
                                    data=P.point_data_file(wc), bundles=P.block_bundles(wc),
                                    alignment=P.mechanism_alignment_files(wc)))
        for p in P.many_points(s):
            wc = ns(study=s, point=p.point)
            out.append(_job("merge_many", vars(wc), P.merge_many_file(s, p.point), data=P.point_data_file(wc),
                            bundles=P.many_bundles(wc)))
        for kind in CONCAT_KINDS:
            out.append(_job(study_table_rule(kind), {"study": s}, P.study_table(s, kind),
                            **{"": P.study_inputs(s, kind)}))
        interpolation = P.study_table(s, "interpolation")
        out.append(_job("study_barriers", {"study": s}, P.study_table(s, "barriers"), **{"": interpolation}))
        out.append(_job("coherence_table", {"study": s}, P.study_table(s, "coherence"), interpolation=interpolation,
                        data=P.coherence_data_files(ns(study=s))))
        out += _figure_jobs(P, s)
    for kind in RESULT_KINDS:
        out.append(_job(result_table_rule(kind), {}, list(P.result_table_outputs(kind).values()),
                        **{"": P.result_table_files(kind)}))
    out.append(_job("paper_table1", {}, [P.table1_table, *P.table1_figures], **{"": P.table1_inputs()}))
    for c in P.claim_cfg:
        out.append(_job("claim", {"claim": c}, P.claim_file(c), **P.claim_inputs(ns(claim=c))))
    out.append(_job("claims_table", {}, P.claims_table, **{"": P.claims_table_inputs()}))
    out.append(_job("report_front_page", {}, P.front_page, **{"": P.claims_table}))
    out.append(_job("provenance", {}, P.provenance_files, runs=P.result_table("runs")))
    out.append(_job("all", {}, [], **{"": P.all_targets()}))
    return out


def _figure_jobs(P: Plan, s: str) -> list[Job]:
    t = lambda kind: P.study_table(s, kind)  # noqa: E731
    wc = {"study": s}
    return [
        _job("width_figures", wc, P.width_figures(s), barriers=t("barriers"), interpolation=t("interpolation")),
        _job("identifiability_figures", wc, P.figures(s, IDENT_FIGURES["identifiability"]),
             matching=t("identifiability"), lmc=t("identifiability_lmc")),
        _job("swap_cost_figures", wc, P.figures(s, IDENT_FIGURES["swap_costs"]), summary=t("swap_costs"),
             matrix=t("swap_matrix")),
        _job("lmc_vs_k_figure", wc, P.figures(s, ["lmc_vs_k"]), interpolation=t("interpolation"),
             summary=t("swap_costs")),
        _job("coherence_figures", wc, P.figures(s, IDENT_FIGURES["coherence"]), **{"": t("coherence")}),
        _job("mechanism_figures", wc, P.figures(s, MECHANISM_FIGURES), barriers=t("barriers"),
             layer_metrics=t("layer_metrics")),
        _job("extension_figures", wc, P.figures(s, EXTENSION_FIGURES), barriers=t("barriers"),
             merge_many=t("merge_many")),
    ]


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


def needed_jobs(plan: Plan) -> list[Job]:
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


def plan_job_counts(plan: Plan) -> dict[str, int]:
    """{rule: jobs} of a fresh run, and ``total``."""
    counts = Counter(j.rule for j in needed_jobs(plan))
    return dict(sorted(counts.items())) | {"total": sum(counts.values())}
