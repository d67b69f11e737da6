"""What each rule's jobs read (inputs) and are told (params), and what they ask a cluster for (resources).

Input and params functions take a wildcards-like object (any object with the rule's wildcards as attributes),
as Snakemake passes them; the rule files name them directly (``PLAN.merge_entries``).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from lmcflow.claims import claim_studies
from lmcflow.claims.gates import dataset_facts
from lmcflow.config import analysis_params, canonical, merge_methods, repairs, replicate_claim_cfg
from lmcflow.config.partners import REAL
from lmcflow.grouping import parse_blocks, stacks
from lmcflow.payloads import MergeEntry, ModelsEntry
from lmcflow.plan.core import PlanBase, is_merged
from lmcflow.plan.requests import GROUP_BLOCK_RULES, GROUP_PAIR_RULES, cluster_cfg, merge_request, train_request
from lmcflow.tables import REPAIR_KINDS

# analysis keys each identifiability job reads (its params carry these only)
IDENT_ANALYSIS_KEYS = {
    "identifiability": ["identifiability", "n_random", "n_samples", "matching_features", "matching_similarities"],
    "swap_costs": [
        "swap_costs",
        "n_samples",
        "var_threshold",
        "heatmap_units",
        "swap_layers",
        "ridge_beta",
        "ridge_steps",
        "ridge_lr",
        "anisotropy_delta",
    ],
    "coherence": ["coherence", "n_samples", "var_threshold"],
}


def point_job_dict(p, *blocks, **keys):
    """A point's ``job_dict`` of whole ``blocks`` plus only the listed keys of others (e.g.
    ``merge=["alignment"]``), so a setting the job does not read never reruns it."""
    out = p.job_dict(*blocks)
    for block, names in keys.items():
        out[block] = canonical({k: getattr(p, block)[k] for k in names})
    return out


class Plan(PlanBase):
    """A run's DAG as data: its points, paths, targets and every rule's inputs, params and resources."""

    # ----------------------------------------------------------------------- blocks of a job
    def block_seeds(self, wc):
        return self.blocks[(wc.study, self.job_group(wc))][wc.block]

    def block_pairs(self, wc):
        return self.point_pair_blocks(self.job_unit(wc))[parse_blocks(wc.blocks)]

    def job_group(self, wc):
        return wc.group if hasattr(wc, "group") else self.group_of[(wc.study, wc.point)]

    def block_bundles(self, wc):
        """The bundle directories a pair-block job reads (one or two; a null-partner pair block: the real
        point's bundle of A and the partner's of B)."""
        group = wc.group if hasattr(wc, "group") else self.group_of[(wc.study, wc.point)]
        unit = self.job_unit(wc)
        if unit.partner == REAL:
            return sorted({self.bundle_dir(wc.study, group, b) for b in parse_blocks(wc.blocks)})
        pts = self.group_points(wc) if hasattr(wc, "group") else [unit]
        return sorted({self.model_bundle(wc.study, p.point, s)[0] for p in pts for pair in self.block_pairs(wc)
                       for s in pair})

    def block_models(self, wc):
        """{seed: [checkpoint, run row]} of every model of a point's pair block."""
        return self.pair_models(wc.study, wc.point, self.block_pairs(wc))

    def block_alignments(self, wc, methods):
        return self.point_alignments(wc.study, wc.point, wc.blocks, methods)

    def group_data(self, wc):
        """{dataset: prepared file} of a group job's points."""
        return {p.dataset: self.data_file(p.dataset) for p in self.group_points(wc)}

    def group_data_files(self, wc):
        return sorted(self.group_data(wc).values())

    def group_analysis_points(self, wc, flag):
        """The points of a group job's group with ``analysis.<flag>`` on."""
        return [p for p in self.group_points(wc) if analysis_params(p)[flag]]

    def job_point(self, wc, *blocks, **keys):
        """``params.point`` of a point job (see ``point_job_dict``)."""
        return point_job_dict(self.point_of(wc), *blocks, **keys)

    def job_request(self, rule, wc):
        """The ``lmcflow.plan.requests.Request`` of one job of ``rule`` (its estimate and what it asks for)."""
        key = (rule, *(str(getattr(wc, k, "")) for k in ("study", "group", "point", "method", "block", "blocks")))
        cache = self.__dict__.setdefault("_requests", {})
        if key not in cache:
            cache[key] = self._job_request(rule, wc)
        return cache[key]

    def _job_request(self, rule, wc):
        if rule in GROUP_BLOCK_RULES:
            pts, n = self.group_points(wc), len(self.block_seeds(wc))
            return train_request(pts, n, self.config) if rule == "train" else merge_request(rule, pts, n, self.config)
        if rule == "merge_many":
            return merge_request(rule, [self.point_of(wc)], 0, self.config)
        n = len(self.block_pairs(wc))
        if rule in GROUP_PAIR_RULES:
            return merge_request(rule, self.group_points(wc), n, self.config)
        return merge_request(rule, [self.point_of(wc)], n, self.config, wc.method)

    def resources(self, rule, key):
        """A resource of ``rule``'s jobs (``runtime`` in minutes, ``mem_mb``, ``gpu``) as a function of the
        wildcards: the job's ``job_request``. Resources are not params: a changed estimate reruns nothing."""
        return lambda wc: getattr(self.job_request(rule, wc), key)

    def prepare_data_runtime(self, wc):
        """Minutes rule prepare_data asks for: reading (or downloading) and normalising one dataset, 30 at most
        and within ``cluster.max_runtime``."""
        limit = cluster_cfg(self.config)["max_runtime"]
        return 30 if limit is None else min(30, int(limit))

    def prepare_data_cfg(self, wc):
        return self.data_cfg_for(wc.dataset)

    # ----------------------------------------------------------------------- rule train
    def train_points(self, wc):
        return [p.job_dict("model", "train") for p in self.group_points(wc)]

    def train_stacks(self, wc):
        """The point ids of each bundle of a train job: the group's points whose models stack."""
        return [[p.point for p in pts] for pts in stacks(self.group_points(wc), self.config["data"])]

    def train_models(self, wc):
        seeds = self.block_seeds(wc)
        return {p.point: {s: self.model_paths(wc.study, p.point, s) for s in seeds} for p in self.group_points(wc)}

    def train_stack_alone(self, wc):
        """Whether a train job's bundle of one model trains stacked: a bundle added beside kept ones
        (``lmcflow.plan.kept``), whose models would otherwise stack with theirs."""
        return "s" in str(wc.block)

    def train_members(self, wc):
        """Every file a train job leaves in its bundle directory (its output): each model's checkpoint and run
        row."""
        return [f for seeds in self.train_models(wc).values() for files in seeds.values() for f in files]

    def incomplete_bundles(self):
        """{bundle directory: the member files it lacks} of every train job whose directory exists without all
        of them (a damaged checkpoint deleted, say). Snakemake sees only the directory, so the workflow marks
        these out of date (``lmcflow.io.mark_out_of_date``) and their train jobs rerun."""
        out = {}
        for study, group in self.groups:
            for block in self.blocks[(study, group)]:
                bundle = self.bundle_dir(study, group, block)
                if Path(bundle).is_dir():
                    wc = SimpleNamespace(study=study, group=group, block=str(block))
                    missing = [f for f in self.train_members(wc) if not Path(f).is_file()]
                    if missing:
                        out[bundle] = missing
        return out

    # ----------------------------------------------------------------------- rule import_models
    def import_point(self, wc):
        return self.imports.import_point(wc)

    def import_models(self, wc):
        return self.imports.import_models(wc)

    def import_sources(self, wc):
        return self.imports.import_sources(wc)

    def import_files(self, wc):
        return self.imports.import_files(wc)

    def imported_provenance(self):
        return self.imports.provenance()

    # ----------------------------------------------------------------------- rules interpolate, align, mechanism
    def merge_entries(self, wc) -> list[MergeEntry]:
        """Rule interpolate's ``entries`` (``run_merge_group``): per merged point of the group, what its paths
        depend on."""
        pairs = self.block_pairs(wc)
        return [
            MergeEntry(
                point=p.job_dict("model", "train", "merge"),
                methods=merge_methods(p),
                models=self.pair_models(wc.study, p.point, pairs),
                alignment=self.point_alignments(wc.study, p.point, wc.blocks, merge_methods(p)),
            )
            for p in self.group_points(wc)
            if is_merged(p)
        ]

    def merge_alignment_files(self, wc):
        return [f for e in self.merge_entries(wc) for fs in e["alignment"].values() for f in fs]

    def point_data_file(self, wc):
        return self.data_file(self.point_of(wc).dataset)

    def align_point(self, wc):
        return self.job_point(wc, "model", "train", merge=["alignment"])

    def mechanism_point(self, wc):
        return self.job_point(wc, "model", "train", merge=["bn_reset_size"], analysis=["mechanism"])

    def many_point(self, wc):
        return self.job_point(wc, "model", "train", merge=["train_eval_size", "bn_reset_size", "alignment", "repair",
                                                           "many"])

    def many_models(self, wc):
        """{seed: [checkpoint, run row]} of every model of a point (rule merge_many)."""
        p = self.point_of(wc)
        return {s: self.model_paths(wc.study, p.point, s) for s in sorted(p.seeds)}

    def many_bundles(self, wc):
        group = self.group_of[(wc.study, wc.point)]
        return [self.bundle_dir(wc.study, group, b) for b in self.blocks[(wc.study, group)]]

    def mechanism_alignment_files(self, wc):
        return self.block_alignments(wc, [wc.method]).get(wc.method, [])

    def mechanism_alignment(self, wc):
        return self.block_alignments(wc, [wc.method]).get(wc.method)

    # ----------------------------------------------------------------------- identifiability rules
    def identity_paths_file(self, wc):
        """Rule interpolate's file of the group and pair block when it holds identity paths rule identifiability
        reads."""
        if any(is_merged(p) and "identity" in merge_methods(p) for p in self.group_points(wc)):
            return [self.merge_file(wc.study, wc.group, wc.blocks)]
        return []

    def ident_entries(self, wc) -> list[ModelsEntry]:
        """Rule identifiability's ``entries`` (``run_identifiability_group``)."""
        pairs = self.block_pairs(wc)
        return [
            ModelsEntry(
                point=point_job_dict(p, "model", "train", "merge", analysis=IDENT_ANALYSIS_KEYS["identifiability"]),
                models=self.pair_models(wc.study, p.point, pairs),
            )
            for p in self.group_analysis_points(wc, "identifiability")
        ]

    def swap_entries(self, wc) -> list[ModelsEntry]:
        """Rule swap_costs' ``entries`` (``run_swap_costs_group``)."""
        return [
            ModelsEntry(
                point=point_job_dict(p, "model", "train", analysis=IDENT_ANALYSIS_KEYS["swap_costs"]),
                models={s: self.model_paths(wc.study, p.point, s) for s in self.block_seeds(wc)},
            )
            for p in self.group_analysis_points(wc, "swap_costs")
        ]

    def coherence_data_files(self, wc):
        return sorted({self.data_file(p.dataset) for p in self.analysis_points(wc.study, "coherence")})

    def coherence_points(self, wc):
        keys = IDENT_ANALYSIS_KEYS["coherence"]
        return [
            p.job_dict("model", "train") | {"analysis": {k: p.analysis[k] for k in keys}}
            for p in self.analysis_points(wc.study, "coherence")
        ]

    def coherence_data_paths(self, wc):
        return {p.dataset: self.data_file(p.dataset) for p in self.analysis_points(wc.study, "coherence")}

    # ----------------------------------------------------------------------- tables and claims
    def study_table_inputs(self, kind):
        """The input function (of the wildcard study) of rule study_table_<kind>."""
        return lambda wc: self.study_inputs(wc.study, kind)

    def study_table_params_files(self, kind):
        """The params function (of the wildcard study) of rule study_table_<kind>: the files it concatenates."""
        return lambda wc: self.study_table_files(wc.study, kind)

    def result_table_files(self, kind):
        return [self.study_table(s, kind) for s in self.table_studies(kind)]

    def result_table_outputs(self, kind) -> dict:
        """The outputs of rule result_table_<kind>: the table of real pairs without REPAIR (``real``) and, where the
        config has such rows, the null partners' and the REPAIR'd rows, each in a table of its own."""
        points = [p for s in self.table_studies(kind) for p in self.study_points(s)]
        out = {"real": self.result_table(kind)}
        if any(p.partner != REAL for p in points):
            out["null_partners"] = self.part_table(kind, "null_partners")
        if kind in REPAIR_KINDS and any(repairs(p) for p in points):
            out["repair"] = self.part_table(kind, "repair")
        return out

    def table1_inputs(self, wc=None):
        return [self.study_table(s, "barriers") for s in self.table1_studies()]

    def claim_inputs(self, wc):
        """The tables a claim reads, and its studies' runs tables (device and precision, for its provenance)."""
        studies = claim_studies(self.claim_cfg[wc.claim])
        return self.claim_tables(wc.claim) | {"provenance_runs": [self.study_table(s, "runs") for s in studies]}

    def claim_params_cfg(self, wc):
        return canonical(self.claim_cfg[wc.claim])

    def claim_points(self, wc):
        """What a claim job needs of its studies' points (their scale), and nothing that never changes a
        verdict."""
        ccfg = self.claim_cfg[wc.claim]
        studies = claim_studies(ccfg) + (claim_studies(replicate_claim_cfg(ccfg)) if self.replicates else [])
        return [p.job_dict("model", "train") | {"seeds": p.seeds} for s in studies for p in self.real_points(s)]


    def claim_datasets(self, wc):
        """Classes (the endpoint gate's chance level), d and n_train of the datasets of a claim's points."""
        return dataset_facts({p["dataset"] for p in self.claim_points(wc)}, self.config.get("data"))

    def claims_table_inputs(self):
        return [self.claim_file(c) for c in self.claim_cfg]
