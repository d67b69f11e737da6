"""What each rule's jobs read (inputs) and are told (params), one small object per rule family. The rule files
name these functions in one hop (``PLAN.merge.entries`` is ``MergeRules.entries``); ``lmcflow.plan.ruletable``
lists which rule names which. Functions of ``wc`` take a wildcards-like object, as Snakemake passes them.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from lmcflow.claims import claim_studies
from lmcflow.claims.gates import dataset_facts
from lmcflow.config import canonical, merge_methods, repairs, replicate_claim_cfg
from lmcflow.config.partners import REAL
from lmcflow.grouping import stacks
from lmcflow.io import folder_sha256
from lmcflow.payloads import MergeEntry, Models, ModelsEntry, TrainModels
from lmcflow.plan.grid import Grid, is_merged
from lmcflow.plan.requests import cluster_cfg
from lmcflow.plan.targets import Targets
from lmcflow.tables import REPAIR_KINDS

# analysis keys each identifiability job reads (its params carry these only)
IDENT_ANALYSIS_KEYS = {
    "identifiability": ["identifiability", "n_random", "n_samples", "matching_features", "matching_similarities"],
    "swap_costs": ["swap_costs", "n_samples", "var_threshold", "heatmap_units", "swap_layers", "ridge_beta",
                   "ridge_steps", "ridge_lr", "anisotropy_delta"],
    "coherence": ["coherence", "n_samples", "var_threshold"],
}


def point_job_dict(p, *blocks, **keys) -> dict:
    """A point's ``job_dict`` of whole ``blocks`` plus only the listed keys of others (e.g.
    ``merge=["alignment"]``), so a setting the job does not read never reruns it."""
    out = p.job_dict(*blocks)
    for block, names in keys.items():
        out[block] = canonical({k: getattr(p, block)[k] for k in names})
    return out


class DataRules:
    """Rule prepare_data."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def runtime(self, wc) -> int:
        """Minutes the job asks for: reading (or downloading) and normalising one dataset, 30 at most and within
        ``cluster.max_runtime``."""
        limit = cluster_cfg(self.grid.config)["max_runtime"]
        return 30 if limit is None else min(30, int(limit))

    def cfg(self, wc) -> dict:
        return self.cfg_for(wc.dataset)

    def cfg_for(self, dataset) -> dict:
        """The part of config["data"] that one dataset's preparation reads (adding a dataset reruns no other)."""
        d = self.grid.config["data"]
        out = {k: d[k] for k in ("search_paths", "download", "val_size", "split_seed") if k in d}
        for group in ("synthetic", "subsets", "custom"):
            if dataset in (d.get(group) or {}):
                out[group] = {dataset: d[group][dataset]}
        folder = (out.get("custom") or {}).get(dataset, {}).get("image_folder")
        if folder is not None:  # the folder's content: a changed image reruns the preparation
            out["custom"] = {dataset: {**out["custom"][dataset], "sha256": folder_sha256(folder)}}
        return canonical(out)


class TrainRules:
    """Rule train (``lmcflow.payloads.TrainParams``)."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def points(self, wc) -> list[dict]:
        return [p.job_dict("model", "train") for p in self.grid.group_points(wc)]

    def bundles(self, wc) -> list[list[str]]:
        """The point ids of each bundle of a train job: the group's points whose models stack."""
        return [[p.point for p in pts] for pts in stacks(self.grid.group_points(wc), self.grid.config["data"])]

    def models(self, wc) -> TrainModels:
        return self.grid.group_models(wc)

    def stack_alone(self, wc) -> bool:
        """Whether a train job's bundle of one model trains stacked: a bundle added beside kept ones
        (``lmcflow.plan.kept``), whose models would otherwise stack with theirs."""
        return "s" in str(wc.block)

    def members(self, wc) -> list[str]:
        """Every file a train job leaves in its bundle directory (its output): each model's checkpoint and run
        row."""
        return [f for seeds in self.models(wc).values() for files in seeds.values() for f in files]

    def incomplete_bundles(self) -> dict:
        """{bundle directory: the member files it lacks} of every train job whose directory exists without all
        of them (a damaged checkpoint deleted, say). Snakemake sees only the directory, so the workflow marks
        these out of date (``lmcflow.io.mark_out_of_date``) and their train jobs rerun."""
        out = {}
        for study, group in self.grid.groups:
            for block in self.grid.blocks[(study, group)]:
                bundle = self.grid.paths.bundle_dir(study, group, block)
                if Path(bundle).is_dir():
                    wc = SimpleNamespace(study=study, group=group, block=str(block))
                    missing = [f for f in self.members(wc) if not Path(f).is_file()]
                    if missing:
                        out[bundle] = missing
        return out


class MergeRules:
    """Rules interpolate, align and merge_many."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def entries(self, wc) -> list[MergeEntry]:
        """Rule interpolate's ``entries`` (``run_merge_group``): per merged point of the group, what its paths
        depend on."""
        g, pairs = self.grid, self.grid.block_pairs(wc)
        return [
            MergeEntry(
                point=p.job_dict("model", "train", "merge"),
                methods=merge_methods(p),
                models=g.pair_models(wc.study, p.point, pairs),
                alignment=g.point_alignments(wc.study, p.point, wc.blocks, merge_methods(p)),
            )
            for p in g.group_points(wc)
            if is_merged(p)
        ]

    def alignment_files(self, wc) -> list[str]:
        return [f for e in self.entries(wc) for fs in e["alignment"].values() for f in fs]

    def align_point(self, wc) -> dict:
        return point_job_dict(self.grid.point_of(wc), "model", "train", merge=["alignment"])

    def many_point(self, wc) -> dict:
        return point_job_dict(self.grid.point_of(wc), "model", "train",
                              merge=["train_eval_size", "bn_reset_size", "alignment", "repair", "many"])

    def many_models(self, wc) -> Models:
        """{seed: [checkpoint, run row]} of every model of a point (rule merge_many)."""
        p = self.grid.point_of(wc)
        return {s: self.grid.model_paths(wc.study, p.point, s) for s in sorted(p.seeds)}

    def many_bundles(self, wc) -> list[str]:
        group = self.grid.group_of[(wc.study, wc.point)]
        return [self.grid.paths.bundle_dir(wc.study, group, b) for b in self.grid.blocks[(wc.study, group)]]


class MechanismRules:
    """Rule mechanism (``lmcflow.payloads.MechanismParams``)."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def point(self, wc) -> dict:
        return point_job_dict(self.grid.point_of(wc), "model", "train", merge=["bn_reset_size"],
                              analysis=["mechanism"])

    def alignment_files(self, wc) -> list[str]:
        return self.grid.point_alignments(wc.study, wc.point, wc.blocks, [wc.method]).get(wc.method, [])

    def alignment(self, wc) -> list[str] | None:
        return self.grid.point_alignments(wc.study, wc.point, wc.blocks, [wc.method]).get(wc.method)


class IdentRules:
    """Rules identifiability, swap_costs and coherence_table."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def identity_paths_file(self, wc) -> list[str]:
        """Rule interpolate's file of the group and pair block when it holds identity paths rule identifiability
        reads."""
        if any(is_merged(p) and "identity" in merge_methods(p) for p in self.grid.group_points(wc)):
            return [self.grid.paths.merge_file(wc.study, wc.group, wc.blocks)]
        return []

    def entries(self, wc) -> list[ModelsEntry]:
        """Rule identifiability's ``entries`` (``run_identifiability_group``)."""
        g, pairs = self.grid, self.grid.block_pairs(wc)
        return [
            ModelsEntry(
                point=point_job_dict(p, "model", "train", "merge", analysis=IDENT_ANALYSIS_KEYS["identifiability"]),
                models=g.pair_models(wc.study, p.point, pairs),
            )
            for p in g.group_analysis_points(wc, "identifiability")
        ]

    def swap_entries(self, wc) -> list[ModelsEntry]:
        """Rule swap_costs' ``entries`` (``run_swap_costs_group``)."""
        g = self.grid
        return [
            ModelsEntry(
                point=point_job_dict(p, "model", "train", analysis=IDENT_ANALYSIS_KEYS["swap_costs"]),
                models={s: g.model_paths(wc.study, p.point, s) for s in g.block_seeds(wc)},
            )
            for p in g.group_analysis_points(wc, "swap_costs")
        ]

    def coherence_data_files(self, wc) -> list[str]:
        return sorted({self.grid.paths.data_file(p.dataset) for p in self.grid.analysis_points(wc.study, "coherence")})

    def coherence_points(self, wc) -> list[dict]:
        keys = IDENT_ANALYSIS_KEYS["coherence"]
        return [
            p.job_dict("model", "train") | {"analysis": {k: p.analysis[k] for k in keys}}
            for p in self.grid.analysis_points(wc.study, "coherence")
        ]

    def coherence_data(self, wc) -> dict:
        points = self.grid.analysis_points(wc.study, "coherence")
        return {p.dataset: self.grid.paths.data_file(p.dataset) for p in points}


class TableRules:
    """Rules study_table_<kind>, result_table_<kind> and paper_table1 (their kinds: lmcflow.plan.targets)."""

    def __init__(self, targets: Targets):
        self.targets, self.paths = targets, targets.paths

    def study_inputs(self, kind):
        """The input function (of the wildcard study) of rule study_table_<kind>."""
        return lambda wc: self.targets.study_inputs(wc.study, kind)

    def study_files(self, kind):
        """The params function (of the wildcard study) of rule study_table_<kind>: the files it concatenates."""
        return lambda wc: self.targets.study_table_files(wc.study, kind)

    def result_files(self, kind) -> list[str]:
        return [self.paths.study_table(s, kind) for s in self.targets.table_studies(kind)]

    def result_outputs(self, kind) -> dict:
        """The outputs of rule result_table_<kind>: the table of real pairs without REPAIR (``real``) and, where the
        config has such rows, the null partners' and the REPAIR'd rows, each in a table of its own."""
        grid = self.targets.grid
        points = [p for s in self.targets.table_studies(kind) for p in grid.study_points(s)]
        out = {"real": self.paths.result_table(kind)}
        if any(p.partner != REAL for p in points):
            out["null_partners"] = self.paths.part_table(kind, "null_partners")
        if kind in REPAIR_KINDS and any(repairs(p) for p in points):
            out["repair"] = self.paths.part_table(kind, "repair")
        return out

    def table1_inputs(self, wc=None) -> list[str]:
        return [self.paths.study_table(s, "barriers") for s in self.targets.table1_studies()]


class ClaimRules:
    """Rules claim and claims_table."""

    def __init__(self, targets: Targets):
        self.targets, self.grid, self.paths = targets, targets.grid, targets.paths
        self.cfg_of = targets.claim_cfg  # {claim: its config}

    def names(self) -> list[str]:
        return list(self.cfg_of)

    def inputs(self, wc) -> dict:
        """The tables a claim reads, and its studies' runs tables (device and precision, for its provenance)."""
        studies = claim_studies(self.cfg_of[wc.claim])
        return self.targets.claim_tables(wc.claim) | {
            "provenance_runs": [self.paths.study_table(s, "runs") for s in studies]}

    def cfg(self, wc) -> dict:
        return canonical(self.cfg_of[wc.claim])

    def points(self, wc) -> list[dict]:
        """What a claim job needs of its studies' points (their scale), and nothing that never changes a
        verdict."""
        ccfg = self.cfg_of[wc.claim]
        studies = claim_studies(ccfg) + (claim_studies(replicate_claim_cfg(ccfg)) if self.grid.replicates else [])
        return [p.job_dict("model", "train") | {"seeds": p.seeds} for s in studies for p in self.grid.real_points(s)]

    def datasets(self, wc) -> dict:
        """Classes (the endpoint gate's chance level), d and n_train of the datasets of a claim's points."""
        return dataset_facts({p["dataset"] for p in self.points(wc)}, self.grid.config.get("data"))

    def table_inputs(self) -> list[str]:
        return [self.paths.claim_file(c) for c in self.cfg_of]
