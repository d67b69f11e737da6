"""The rule table: one row per rule of ``workflow/rules/*.smk`` and the Snakefile, saying which jobs it has (their
wildcards), what each makes, the ``input:`` and ``params:`` entries of its stanza (the same text, evaluated here as
Snakemake evaluates it), its script and the job function that script calls, its payload type and its cost. The
DAG mirror (``lmcflow.plan.dag``), the resource requests (``Plan.job_request``), ``lmcflow plan`` and
``lmcflow trace`` iterate it; ``tests/test_ruletable.py`` checks it against the rule files.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import SimpleNamespace

from lmcflow.config import mechanism_methods
from lmcflow.grouping import blocks_label
from lmcflow.payloads import AlignParams, MechanismParams, MergeManyParams, TrainParams
from lmcflow.plan import requests as rq
from lmcflow.plan.grid import is_merged
from lmcflow.plan.paths import EXTENSION_FIGURES, IDENT_FIGURES, MECHANISM_FIGURES, WIDTH_FIGURES
from lmcflow.plan.targets import CONCAT_KINDS, RESULT_KINDS

UNPACK = "*"  # the input name of an ``unpack(...)`` entry: its dict's names are the job's input names


@dataclass(frozen=True)
class Rule:
    name: str
    jobs: Callable  # plan -> the wildcards ({name: value}) of every job the rule could run
    output: Callable  # (plan, wildcards namespace) -> its output files, in order
    input: dict = field(default_factory=dict)  # input name ("" unnamed) -> the .smk expression
    params: dict = field(default_factory=dict)  # param name -> the .smk expression
    script: str | None = None  # workflow/scripts/<script>
    job: str | None = None  # "module.function": the lmcflow function the script calls with the params
    payload: type | None = None  # the TypedDict of its params (lmcflow.payloads)
    cost: rq.Compute | None = None  # compute rules: what a job asks a cluster for
    sources: tuple = ()  # input names of files from outside the run (imported checkpoints)
    loop: tuple | None = None  # (variable, value) of a rule defined in a ``for`` loop of its .smk
    table: tuple | None = None  # ("study", kind): it writes work/tables/<study>/<kind>.parquet; ("result", kind)


@cache
def _code(expr: str):
    return compile(expr, "<rule table>", "eval")


def evaluate(plan, rule: Rule, expr: str, wc):
    """An input or params expression of ``rule`` for one job, as Snakemake evaluates it: a function is called
    with the wildcards, a path pattern filled with them."""
    names = {"PLAN": plan, "config": plan.config, "unpack": lambda f: f, "RESULTS": plan.paths.results,
             "WORK": plan.paths.work, "LOGS": plan.paths.logs}
    if rule.loop:
        names[rule.loop[0]] = rule.loop[1]
    value = eval(_code(expr), names)  # noqa: S307 - the table's own expressions
    if callable(value):
        value = value(wc)
    return _fill(value, vars(wc))


def _fill(value, wildcards: dict):
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: str(wildcards[m.group(1)]), value)
    if isinstance(value, list):
        return [_fill(v, wildcards) for v in value]
    return value


# ------------------------------------------------------------------------------------------- which jobs a rule has
def _datasets(P):
    return [{"dataset": d} for d in sorted({p.dataset for p in P.grid.points.values()})]


def _group_blocks(P):
    return [{"study": s, "group": g, "block": str(b)} for (s, g) in P.grid.groups for b in P.grid.blocks[(s, g)]]


def _group_pairs(P):
    return [{"study": s, "group": g, "blocks": blocks_label(*b)} for (s, g) in P.grid.groups
            for b in P.grid.group_pair_blocks(s, g)]


def _point_pairs(methods):
    return lambda P: [{"study": s, "point": p.point, "method": m, "blocks": blocks_label(*b)}
                      for s in P.grid.studies for p in P.grid.merged_points(s) for b in P.grid.point_pair_blocks(p)
                      for m in methods(p)]


def _studies(P):
    return [{"study": s} for s in P.grid.studies]


def _one(P):
    return [{}]


def _flagged(jobs, flag):
    """The jobs of ``jobs`` whose grid group has a point with ``analysis.<flag>``."""
    return lambda P: [w for w in jobs(P) if P.grid.group_analysis_points(SimpleNamespace(**w), flag)]


def _figures(names):
    return lambda P, wc: P.paths.figures(wc.study, names)


def _table(kind):
    return lambda P, wc: P.paths.study_table(wc.study, kind)


STUDY_FIGURE_INPUTS = {
    "width_figures": (WIDTH_FIGURES, {"barriers": "barriers", "interpolation": "interpolation"}),
    "identifiability_figures": (IDENT_FIGURES["identifiability"],
                                {"matching": "identifiability", "lmc": "identifiability_lmc"}),
    "swap_cost_figures": (IDENT_FIGURES["swap_costs"], {"summary": "swap_costs", "matrix": "swap_matrix"}),
    "lmc_vs_k_figure": (["lmc_vs_k"], {"interpolation": "interpolation", "summary": "swap_costs"}),
    "coherence_figures": (IDENT_FIGURES["coherence"], {"": "coherence"}),
    "mechanism_figures": (MECHANISM_FIGURES, {"barriers": "barriers", "layer_metrics": "layer_metrics"}),
    "extension_figures": (EXTENSION_FIGURES, {"barriers": "barriers", "merge_many": "merge_many"}),
}
GROUP_DATA = "PLAN.grid.group_data_files"
DEVICE = 'config["device"]'


def _rows() -> list[Rule]:
    P_ = "PLAN.paths."
    rows = [
        Rule("prepare_data", _datasets, lambda P, wc: [P.paths.data_file(wc.dataset)],
             params={"data_cfg": "PLAN.data.cfg", "cache_root": 'f"{WORK}/data/raw"'}, script="prepare_data.py",
             job="lmcflow.jobs.data.run_prepare_data"),
        Rule(rq.TRAIN.name, lambda P: [w for w in _group_blocks(P) if w["study"] not in P.imports.checkpoints],
             lambda P, wc: [P.paths.bundle_dir(wc.study, wc.group, wc.block)], {"data": GROUP_DATA},
             {"points": "PLAN.train.points", "bundles": "PLAN.train.bundles", "models": "PLAN.train.models",
              "data": "PLAN.grid.group_data", "device": DEVICE, "state_dir": 'f"{WORK}/state"',
              "stack_alone": "PLAN.train.stack_alone"},
             "train.py", "lmcflow.jobs.train.run_train_job", TrainParams, rq.TRAIN),
        Rule("import_models", lambda P: [w for w in _group_blocks(P) if w["study"] in P.imports.checkpoints],
             lambda P, wc: [P.paths.bundle_dir(wc.study, wc.group, wc.block)],
             {"data": GROUP_DATA, "checkpoints": "PLAN.imports.files"},
             {"point": "PLAN.imports.point", "models": "PLAN.imports.models", "sources": "PLAN.imports.sources",
              "device": DEVICE}, "import_models.py", "lmcflow.jobs.imported.run_import", sources=("checkpoints",)),
        Rule(rq.SWAP_COSTS.name, _flagged(_group_blocks, "swap_costs"),
             lambda P, wc: [P.paths.ident_point_file(wc.study, wc.group, k, wc.block) for k in ("swap_costs",
                                                                                                 "swap_matrix")],
             {"data": GROUP_DATA, "bundle": P_ + 'bundle_dir("{study}", "{group}", "{block}")'},
             {"entries": "PLAN.ident.swap_entries", "data": "PLAN.grid.group_data", "device": DEVICE},
             "swap_costs.py", "lmcflow.jobs.identifiability.run_swap_costs_group", cost=rq.SWAP_COSTS),
        Rule(rq.INTERPOLATE.name,
             lambda P: [w for w in _group_pairs(P) if any(is_merged(p) for p in P.grid.groups[(w["study"],
                                                                                                 w["group"])])],
             lambda P, wc: [P.paths.merge_file(wc.study, wc.group, wc.blocks)],
             {"data": GROUP_DATA, "bundles": "PLAN.grid.block_bundles", "alignment": "PLAN.merge.alignment_files"},
             {"entries": "PLAN.merge.entries", "pairs": "PLAN.grid.block_pairs", "data": "PLAN.grid.group_data",
              "device": DEVICE}, "interpolate.py", "lmcflow.jobs.merge.run_merge_group", cost=rq.INTERPOLATE),
        Rule(rq.IDENTIFIABILITY.name, _flagged(_group_pairs, "identifiability"),
             lambda P, wc: [P.paths.ident_point_file(wc.study, wc.group, k, wc.blocks)
                            for k in ("identifiability", "identifiability_lmc")],
             {"data": GROUP_DATA, "bundles": "PLAN.grid.block_bundles",
              "interpolation": "PLAN.ident.identity_paths_file"},
             {"entries": "PLAN.ident.entries", "pairs": "PLAN.grid.block_pairs", "data": "PLAN.grid.group_data",
              "device": DEVICE}, "identifiability.py", "lmcflow.jobs.identifiability.run_identifiability_group",
             cost=rq.IDENTIFIABILITY),
        Rule(rq.ALIGN.name, _point_pairs(rq.ALIGN.methods),
             lambda P, wc: [P.paths.align_file(wc.study, wc.point, wc.method, wc.blocks),
                            P.paths.align_row_file(wc.study, wc.point, wc.method, wc.blocks)],
             {"data": "PLAN.grid.point_data_file", "bundles": "PLAN.grid.block_bundles"},
             {"point": "PLAN.merge.align_point", "pairs": "PLAN.grid.block_pairs", "models": "PLAN.grid.block_models",
              "device": DEVICE}, "align.py", "lmcflow.jobs.align.run_align_block", AlignParams, rq.ALIGN),
        Rule(rq.MECHANISM.name, _point_pairs(mechanism_methods),
             lambda P, wc: [P.paths.mechanism_file(wc.study, wc.point, wc.method, wc.blocks),
                            P.paths.active_overlap_file(wc.study, wc.point, wc.method, wc.blocks)],
             {"data": "PLAN.grid.point_data_file", "bundles": "PLAN.grid.block_bundles",
              "alignment": "PLAN.mechanism.alignment_files"},
             {"point": "PLAN.mechanism.point", "pairs": "PLAN.grid.block_pairs", "models": "PLAN.grid.block_models",
              "alignment": "PLAN.mechanism.alignment", "device": DEVICE}, "mechanism.py",
             "lmcflow.jobs.mechanism.run_mechanism_block", MechanismParams, rq.MECHANISM),
        Rule(rq.MERGE_MANY.name, lambda P: [{"study": s, "point": p.point} for s in P.grid.studies
                                            for p in P.grid.many_points(s)],
             lambda P, wc: [P.paths.merge_many_file(wc.study, wc.point)],
             {"data": "PLAN.grid.point_data_file", "bundles": "PLAN.merge.many_bundles"},
             {"point": "PLAN.merge.many_point", "models": "PLAN.merge.many_models", "device": DEVICE},
             "merge_many.py", "lmcflow.jobs.merge_many.run_merge_many", MergeManyParams, rq.MERGE_MANY),
    ]
    rows += [Rule(f"study_table_{kind}", _studies, _table(kind), {"": "PLAN.tables.study_inputs(kind)"},
                  {"kind": "kind", "files": "PLAN.tables.study_files(kind)"}, "concat_table.py",
                  "lmcflow.jobs.report.run_concat", loop=("kind", kind), table=("study", kind))
             for kind in CONCAT_KINDS]
    rows += [
        Rule("study_barriers", _studies, _table("barriers"), {"": P_ + 'study_table("{study}", "interpolation")'},
             script="barriers.py", job="lmcflow.jobs.report.run_barriers", table=("study", "barriers")),
        Rule("coherence_table", _studies, _table("coherence"),
             {"interpolation": P_ + 'study_table("{study}", "interpolation")',
              "data": "PLAN.ident.coherence_data_files"},
             {"points": "PLAN.ident.coherence_points", "data": "PLAN.ident.coherence_data"},
             "coherence_table.py", "lmcflow.jobs.identifiability.run_coherence_table", table=("study", "coherence")),
    ]
    rows += [Rule(name, _studies, _figures(names), {k: P_ + f'study_table("{{study}}", "{kind}")'
                                                    for k, kind in inputs.items()},
                  {"definition": '"entezari"'} if name in ("width_figures", "mechanism_figures", "extension_figures")
                  else {}, f"{name}.py", f"lmcflow.jobs.figures.run_{name}")
             for name, (names, inputs) in STUDY_FIGURE_INPUTS.items()]
    rows += [Rule(f"result_table_{kind}", _one, lambda P, wc, kind=kind: list(P.tables.result_outputs(kind).values()),
                  {"": "PLAN.tables.result_files(kind)"}, {"kind": "kind", "files": "PLAN.tables.result_files(kind)"},
                  "result_table.py", "lmcflow.jobs.report.run_result_table", loop=("kind", kind),
                  table=("result", kind))
             for kind in RESULT_KINDS]
    rows += [
        Rule("paper_table1", _one, lambda P, wc: [P.paths.table1_table, *P.paths.table1_figures],
             {"": "PLAN.tables.table1_inputs"}, {"studies": "PLAN.targets.table1_studies()"}, "paper_table1.py",
             "lmcflow.jobs.figures.run_paper_table1", table=("result", "paper_table1")),
        Rule("claim", lambda P: [{"claim": c} for c in P.claims.names()], lambda P, wc: [P.paths.claim_file(wc.claim)],
             {UNPACK: "unpack(PLAN.claims.inputs)"},
             {"claim": "lambda wc: wc.claim", "claim_cfg": "PLAN.claims.cfg", "points": "PLAN.claims.points",
              "datasets": "PLAN.claims.datasets"}, "claim.py", "lmcflow.jobs.report.run_claim"),
        Rule("claims_table", _one, lambda P, wc: [P.paths.claims_table], {"": "PLAN.claims.table_inputs()"},
             script="claims_table.py", job="lmcflow.jobs.report.run_claims_table", table=("result", "claims")),
        Rule("report_front_page", _one, lambda P, wc: [P.paths.front_page], {"": "PLAN.paths.claims_table"},
             {"studies": "PLAN.grid.studies"}, "report_front_page.py",
             "lmcflow.jobs.report.run_report_front_page"),
        Rule("provenance", _one, lambda P, wc: P.paths.provenance_files, {"runs": P_ + 'result_table("runs")'},
             {"imported": "PLAN.imports.provenance()"}, "provenance.py",
             "lmcflow.jobs.report.run_provenance"),
        Rule("all", _one, lambda P, wc: [], {"": "PLAN.targets.all_targets()"}),
    ]
    return rows


RULES: dict[str, Rule] = {r.name: r for r in _rows()}
COMPUTE_RULES = tuple(c.name for c in rq.COMPUTE)  # ``lmcflow plan``'s rows, in its order


TABLE_RULES = {r.table: r.name for r in RULES.values() if r.table}


def study_table_rule(kind: str) -> str:
    """The rule that writes work/tables/<study>/<kind>.parquet."""
    return TABLE_RULES.get(("study", kind), f"study_table_{kind}")


def result_table_rule(kind: str) -> str:
    """The rule that writes results/tables/<kind>.parquet."""
    return TABLE_RULES.get(("result", kind), f"result_table_{kind}")


__all__ = ["COMPUTE_RULES", "RULES", "Rule", "evaluate", "result_table_rule", "study_table_rule"]
