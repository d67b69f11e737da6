"""What each rule's jobs read (inputs) and are told (params), and what they ask a cluster for (resources).

Input and params functions take a wildcards-like object (any object with the rule's wildcards as attributes),
as Snakemake passes them; the rule files call them through ``workflow/rules/common.smk``.
"""
from __future__ import annotations

import math

from lmcflow.claims import claim_studies
from lmcflow.claims.gates import dataset_facts
from lmcflow.config import analysis_params, canonical, merge_methods, replicate_claim_cfg
from lmcflow.grouping import pair_blocks, parse_blocks, seed_blocks, stacks
from lmcflow.plan.core import PlanBase

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
        return seed_blocks(self.job_unit(wc))[int(wc.block)]

    def block_pairs(self, wc):
        return pair_blocks(self.job_unit(wc))[parse_blocks(wc.blocks)]

    def block_bundles(self, wc):
        """The bundle directories a pair-block job reads (one or two)."""
        group = wc.group if hasattr(wc, "group") else self.group_of[(wc.study, wc.point)]
        return sorted({self.bundle_dir(wc.study, group, b) for b in parse_blocks(wc.blocks)})

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

    def resources(self, block, key, per_model=False):
        """Per-job resources from the config point (train.resources / merge.resources), as a function of the
        wildcards.

        ``runtime`` and ``mem_mb`` are given for width 1 and scale as max(1, width)**width_exponent (compute of
        MLP hidden layers and conv layers grows with width squared), so one study asks SLURM for short jobs at
        narrow widths and long ones at wide widths; ``per_model`` runtimes (training) are multiplied by the
        bundle's model count. A grid group's job asks for the sum of its points' runtimes and the largest of
        their other resources.
        """

        def get(wc):
            values = []
            for point in self.group_points(wc) if hasattr(wc, "group") else [self.point_of(wc)]:
                res = getattr(point, block)["resources"]
                value = res[key]
                if key in ("runtime", "mem_mb"):
                    value = value * max(1.0, float(point.model["width"])) ** float(res["width_exponent"])
                if per_model and key == "runtime":
                    value = value * len(self.block_seeds(wc))
                values.append(value)
            return int(math.ceil(sum(values) if key == "runtime" else max(values)))

        return get

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

    # ----------------------------------------------------------------------- rules interpolate, align, mechanism
    def merge_entries(self, wc):
        """Rule interpolate's ``run_merge_group`` entries: per trained point of the group, what its paths
        depend on."""
        pairs = self.block_pairs(wc)
        return [
            {
                "point": p.job_dict("model", "train", "merge"),
                "methods": merge_methods(p),
                "models": self.pair_models(wc.study, p.point, pairs),
                "alignment": self.point_alignments(wc.study, p.point, wc.blocks, merge_methods(p)),
            }
            for p in self.group_points(wc)
            if p.train["epochs"] > 0
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
        return [self.bundle_dir(wc.study, group, b) for b in seed_blocks(self.point_of(wc))]

    def mechanism_alignment_files(self, wc):
        return self.block_alignments(wc, [wc.method]).get(wc.method, [])

    def mechanism_alignment(self, wc):
        return self.block_alignments(wc, [wc.method]).get(wc.method)

    # ----------------------------------------------------------------------- identifiability rules
    def identity_paths_file(self, wc):
        """Rule interpolate's file of the group and pair block when it holds identity paths rule identifiability
        reads."""
        if any(p.train["epochs"] > 0 and "identity" in merge_methods(p) for p in self.group_points(wc)):
            return [self.merge_file(wc.study, wc.group, wc.blocks)]
        return []

    def ident_points(self, wc):
        pairs = self.block_pairs(wc)
        return [
            {
                "point": point_job_dict(p, "model", "train", "merge", analysis=IDENT_ANALYSIS_KEYS["identifiability"]),
                "models": self.pair_models(wc.study, p.point, pairs),
            }
            for p in self.group_analysis_points(wc, "identifiability")
        ]

    def swap_points(self, wc):
        return [
            {
                "point": point_job_dict(p, "model", "train", analysis=IDENT_ANALYSIS_KEYS["swap_costs"]),
                "models": {s: self.model_paths(wc.study, p.point, s) for s in self.block_seeds(wc)},
            }
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
        return [p.job_dict("model", "train") | {"seeds": p.seeds} for s in studies for p in self.study_points(s)]

    def claim_datasets(self, wc):
        """Classes (the endpoint gate's chance level), d and n_train of the datasets of a claim's points."""
        return dataset_facts({p["dataset"] for p in self.claim_points(wc)}, self.config.get("data"))

    def claims_table_inputs(self):
        return [self.claim_file(c) for c in self.claim_cfg]
