"""A run's points, grid groups and the files each study needs, from a resolved config (no Snakemake).

A train job trains one bundle: a block of seed values (lmcflow.grouping) of every point of a grid group (the
points of a study whose models stack: lmcflow.grouping.grid_groups; most groups are one point) into a directory
holding one checkpoint and one run row per model. Merge and analysis jobs serve a group and one pair block;
alignment and mechanism jobs one point and one pair block.
"""
from __future__ import annotations

from pathlib import Path

from lmcflow.claims import REGISTRY as CLAIMS
from lmcflow.claims import claim_studies
from lmcflow.config import (
    REPLICATE_INPUT,
    analysis_params,
    canonical,
    check_semantics,
    expand_points,
    many_sizes,
    mechanism_methods,
    merge_methods,
    repairs,
    replicate_claim_cfg,
    replicate_of,
    resolve_config,
    study_points,
    swept_values,
)
from lmcflow.config.catalog import ARCHITECTURES, dataset_names
from lmcflow.config.partners import REAL, real_point_id
from lmcflow.config.point_schema import validate_points
from lmcflow.grouping import all_grid_groups, blocks_label, pair_blocks
from lmcflow.io import folder_sha256
from lmcflow.plan.imported import Imports
from lmcflow.plan.kept import group_blocks
from lmcflow.plan.paths import (
    ALIGN_TABLE_KINDS,
    EXTENSION_FIGURES,
    IDENT_FIGURES,
    MANY_TABLE,
    MECHANISM_FIGURES,
    WIDTH_FIGURES,
    Paths,
)
from lmcflow.plan.requests import check_limits, group_fits
from lmcflow.tables import IDENT_TABLE_KINDS

# identifiability table kind -> the analysis flag (studies.<s>.analysis.<flag>) of the points that produce it
IDENT_TABLE_FLAG = {
    "identifiability": "identifiability",
    "identifiability_lmc": "identifiability",
    "swap_costs": "swap_costs",
    "swap_matrix": "swap_costs",
    "coherence": "coherence",
}
# study table kinds concatenated from per-job rows (rules study_table_<kind>); barriers and coherence have their
# own rules
CONCAT_KINDS = ("runs", "interpolation", *ALIGN_TABLE_KINDS, "identifiability", "identifiability_lmc",
                "swap_costs", "swap_matrix", MANY_TABLE)
# results/tables/<kind>.parquet, each made by rule result_table_<kind>
RESULT_KINDS = ("runs", "interpolation", "barriers", *ALIGN_TABLE_KINDS, *IDENT_TABLE_KINDS, MANY_TABLE)


def study_table_rule(kind: str) -> str:
    """The rule that writes work/tables/<study>/<kind>.parquet (tables.smk defines one per kind)."""
    return {"barriers": "study_barriers", "coherence": "coherence_table"}.get(kind, f"study_table_{kind}")


def result_table_rule(kind: str) -> str:
    """The rule that writes results/tables/<kind>.parquet."""
    return {"claims": "claims_table", "paper_table1": "paper_table1"}.get(kind, f"result_table_{kind}")


def is_merged(p) -> bool:
    """Whether a point's seed pairs are merged: a trained point, or a null-partner point (even untrained)."""
    return p.train["epochs"] > 0 or p.partner != REAL


class PlanError(LookupError):
    """A wildcard names no point or grid group of the config."""


class PlanBase(Paths):
    """The checked config, its points and grid groups, and which files each study and target needs."""

    def __init__(self, config: dict, default_front_page: str = "workflow/report/workflow.rst",
                 enforce_limits: bool = True):
        """``config``: a resolved config (``resolve_config``); raises ``ConfigError`` where it is invalid, or
        (``enforce_limits``) where a job cannot fit ``cluster.max_runtime`` / ``cluster.max_mem_mb``."""
        check_semantics(config, CLAIMS, dataset_names(config["data"]), ARCHITECTURES)
        self.points = expand_points(config)
        validate_points(self.points)
        self.config = config
        super().__init__(config["paths"]["results"], config["paths"]["work"], config["paths"]["logs"])
        self.claim_cfg = config.get("claims") or {}
        self.studies = list(config["studies"])
        self.replicates = replicate_of(config)  # {replicate study: the study it replicates}
        # the studies whose figures and Table-1 rows a run makes: a replicate only decides its claims again
        self.figure_studies = [s for s in self.studies if s not in self.replicates]
        # (study, group) -> [Point]; groups split where a job would exceed the cluster limit
        self.groups = all_grid_groups(self.points, group_fits(config))
        if enforce_limits:
            check_limits(self.groups, self.points, config)
        self.group_of = {(s, p.point): g for (s, g), pts in self.groups.items() for p in pts}
        # (study, group) -> {bundle label: seeds}: the seed blocks, with finished bundles kept where seeds were added
        self.blocks = {(s, g): group_blocks(self, s, g, pts) for (s, g), pts in self.groups.items()}
        self.block_of = {key: {seed: b for b, seeds in blocks.items() for seed in seeds}
                         for key, blocks in self.blocks.items()}
        self.default_front_page = default_front_page
        self.imports = Imports(self)  # studies of imported checkpoints (lmcflow.plan.imported)

    @classmethod
    def from_files(cls, configfiles=(), overrides=None, default_path=None, **kwargs):
        """The plan of a run given ``--configfile`` files (none: the embedded default) and ``--config``
        overrides."""
        extra = {} if default_path is None else {"default_path": default_path}
        return cls(resolve_config(list(configfiles), overrides, **extra), **kwargs)

    # ----------------------------------------------------------------------- points and grid groups
    def point_of(self, wc):
        try:
            return self.points[(wc.study, wc.point)]
        except KeyError:
            known = sorted(p for s, p in self.points if s == wc.study)
            raise PlanError(f"no point {wc.point!r} in study {wc.study!r}; known: {known}") from None

    def group_points(self, wc):
        try:
            return self.groups[(wc.study, wc.group)]
        except KeyError:
            known = sorted(g for s, g in self.groups if s == wc.study)
            raise PlanError(f"no grid group {wc.group!r} in study {wc.study!r}; known: {known}") from None

    def job_unit(self, wc):
        """The point that fixes a job's seeds, bundle size and model width: its point, or its group's first."""
        return self.group_points(wc)[0] if hasattr(wc, "group") else self.point_of(wc)

    def group_pair_blocks(self, study, group):
        """``pair_blocks`` of a grid group's points, over its bundles (``self.blocks``)."""
        return self.point_pair_blocks(self.groups[(study, group)][0])

    def point_pair_blocks(self, p):
        """``pair_blocks`` of a point, over its group's bundles (``self.blocks``)."""
        return pair_blocks(p, self.blocks[(p.study, self.group_of[(p.study, p.point)])])

    def study_groups(self, study):
        return [(g, pts) for (s, g), pts in self.groups.items() if s == study]

    def study_points(self, study):
        return study_points(self.points, study)

    def merged_points(self, study):
        """The points whose seed pairs are merged (and aligned, and analysed along λ): every trained point and
        every null-partner point (its pairs are real A, partner B). Untrained points (``train.epochs: 0``, e.g.
        the swap-cost arm on initialisations) have no path worth evaluating."""
        return [p for p in self.study_points(study) if is_merged(p)]

    def merged_groups(self, study):
        """The grid groups holding ``merged_points``."""
        return [(g, pts) for g, pts in self.study_groups(study) if any(is_merged(p) for p in pts)]

    def real_points(self, study):
        """A study's points without its null-partner points."""
        return [p for p in self.study_points(study) if p.partner == REAL]

    def analysis_points(self, study, flag):
        return [p for p in self.study_points(study) if analysis_params(p)[flag]]

    def sweeps(self, study, key):
        return bool(swept_values(self.config["studies"][study], key))

    def model_bundle(self, study, point, seed):
        """(bundle directory, the point id of the model) of one model of a point; model A of a null-partner
        pair belongs to the real point."""
        p = self.points[(study, point)]
        if p.partner != REAL and int(seed) not in p.seeds:
            point = real_point_id(p)
        group = self.group_of[(study, point)]
        return self.bundle_dir(study, group, self.block_of[(study, group)][int(seed)]), point

    def model_paths(self, study, point, seed):
        """[checkpoint, run row] of one trained model, inside its bundle's directory (in a subdirectory named by
        its point when the bundle holds several points)."""
        d, point = self.model_bundle(study, point, seed)
        return self.member_files(study, self.group_of[(study, point)], point, d, seed)

    @staticmethod
    def member_files(study, group, point, bundle, seed):
        """[checkpoint, run row] of one model of a point in the bundle directory ``bundle`` of its group."""
        d = bundle if group == point else f"{bundle}/{point}"
        return [f"{d}/seed-{seed}.safetensors", f"{d}/seed-{seed}.run.parquet"]

    def pair_models(self, study, point, pairs):
        """{seed: [checkpoint, run row]} of every model of some seed pairs of a point."""
        return {s: self.model_paths(study, point, s) for s in sorted({s for pair in pairs for s in pair})}

    def point_alignments(self, study, point, blocks, methods):
        """{method: [permutation file, alignment rows]} of rule align for the non-identity ``methods``."""
        return {
            m: [self.align_file(study, point, m, blocks), self.align_row_file(study, point, m, blocks)]
            for m in methods
            if m != "identity"
        }

    # ----------------------------------------------------------------------- what each study's tables concatenate
    def study_bundles(self, study):
        return [self.bundle_dir(study, g, b) for g, _ in self.study_groups(study) for b in self.blocks[(study, g)]]

    def study_run_rows(self, study):
        return [self.model_paths(study, p.point, s)[1] for p in self.study_points(study) for s in sorted(p.seeds)]

    def study_inputs(self, study, kind):
        """Per-job files that a study's table concatenates (runs: the bundle directories holding the run rows)."""
        if kind == "runs":
            return self.study_bundles(study)
        if kind == "interpolation":
            return [self.merge_file(study, g, blocks_label(*b))
                    for g, _ in self.merged_groups(study) for b in self.group_pair_blocks(study, g)]
        if kind in ALIGN_TABLE_KINDS:
            return self.align_study_inputs(study, kind)
        if kind == MANY_TABLE:
            return [self.merge_many_file(study, p.point) for p in self.many_points(study)]
        if kind in IDENT_TABLE_FLAG and kind != "coherence":
            return self.ident_study_inputs(study, kind)
        raise ValueError(kind)

    def study_table_files(self, study, kind):
        """The parquet files a study table concatenates (runs: one row file per model inside the bundles)."""
        return self.study_run_rows(study) if kind == "runs" else self.study_inputs(study, kind)

    def ident_study_inputs(self, study, kind):
        """Per-job files that a study's identifiability table concatenates (one per group with a flagged point)."""
        flag = IDENT_TABLE_FLAG[kind]
        groups = [(g, pts) for g, pts in self.study_groups(study) if any(analysis_params(p)[flag] for p in pts)]
        if kind in ("swap_costs", "swap_matrix"):
            return [self.ident_point_file(study, g, kind, b) for g, _ in groups for b in self.blocks[(study, g)]]
        return [self.ident_point_file(study, g, kind, blocks_label(*b))
                for g, _ in groups for b in self.group_pair_blocks(study, g)]

    def align_study_inputs(self, study, kind):
        pts = self.merged_points(study)
        if kind == "alignment":
            return [
                self.align_row_file(study, p.point, m, blocks_label(*b))
                for p in pts
                for m in merge_methods(p)
                if m != "identity"
                for b in self.point_pair_blocks(p)
            ]
        if kind in ("layer_metrics", "active_overlap"):
            out_file = self.mechanism_file if kind == "layer_metrics" else self.active_overlap_file
            return [
                out_file(study, p.point, m, blocks_label(*b))
                for p in pts
                for m in mechanism_methods(p)
                for b in self.point_pair_blocks(p)
            ]
        raise ValueError(kind)

    def many_points(self, study):
        """The points with N-way merges (``merge.many``): real models only (a merge of null partners tests nothing)."""
        return [p for p in self.real_points(study) if many_sizes(p)]

    def table_studies(self, kind):
        """Studies that have a table of this kind (every study has the foundation tables)."""
        if kind == MANY_TABLE:
            return [s for s in self.studies if self.many_points(s)]
        if kind in ALIGN_TABLE_KINDS:
            return [s for s in self.studies if self.align_study_inputs(s, kind)]
        if kind not in IDENT_TABLE_FLAG:
            return self.studies
        return [s for s in self.studies if self.analysis_points(s, IDENT_TABLE_FLAG[kind])]

    def table1_studies(self):
        """{study: {dataset, arch, bias}} of the width studies (sweeping model.width, one dataset, architecture
        and bias setting, an architecture of the paper's Table 1), in config order: the rows of paper_table1."""
        out = {}
        for study in self.figure_studies:
            kinds = {(p.dataset, p.model["arch"], bool(p.model["bias"])) for p in self.real_points(study)}
            if self.sweeps(study, "model.width") and len(kinds) == 1:
                dataset, arch, bias = kinds.pop()
                if arch in ("mlp", "vgg11", "resnet20"):
                    out[study] = {"dataset": dataset, "arch": arch, "bias": bias}
        return out

    def claim_tables(self, claim):
        """The tables a claim reads, per kind one file per study it reads (Table-1 claims may read several);
        with ``replicate_seeds``, the same tables of the replicate studies as ``replicate__<kind>``."""
        ccfg = self.claim_cfg[claim]
        out = {kind: [self.study_table(s, kind) for s in claim_studies(ccfg)] for kind in CLAIMS[claim].tables}
        if self.replicates:
            replicas = claim_studies(replicate_claim_cfg(ccfg))
            out |= {f"{REPLICATE_INPUT}{kind}": [self.study_table(s, kind) for s in replicas]
                    for kind in CLAIMS[claim].tables}
        return out

    def data_cfg_for(self, dataset):
        """The part of config["data"] that one dataset's preparation reads (adding a dataset reruns no other)."""
        d = self.config["data"]
        out = {k: d[k] for k in ("search_paths", "download", "val_size", "split_seed") if k in d}
        for group in ("synthetic", "subsets", "custom"):
            if dataset in (d.get(group) or {}):
                out[group] = {dataset: d[group][dataset]}
        folder = (out.get("custom") or {}).get(dataset, {}).get("image_folder")
        if folder is not None:  # the folder's content: a changed image reruns the preparation
            out["custom"] = {dataset: {**out["custom"][dataset], "sha256": folder_sha256(folder)}}
        return canonical(out)

    # ----------------------------------------------------------------------- targets
    def lmc_vs_k_study(self, study):
        """Studies with the unaligned-LMC-vs-k figure: swap costs (the data's k) and trained, merged models over
        a dataset sweep."""
        return bool(self.analysis_points(study, "swap_costs") and self.merged_points(study)
                    and self.sweeps(study, "dataset"))

    def width_figures(self, study):
        return self.figures(study, WIDTH_FIGURES)

    def ident_figures(self, study):
        names = [n for flag, names in IDENT_FIGURES.items() if self.analysis_points(study, flag) for n in names]
        if self.lmc_vs_k_study(study):
            names.append("lmc_vs_k")
        return self.figures(study, names)

    def mechanism_figures(self, study):
        if not (self.sweeps(study, "model.width") and self.align_study_inputs(study, "layer_metrics")):
            return []
        return self.figures(study, MECHANISM_FIGURES)

    def extension_figures(self, study):
        """REPAIR vs calibration and N-model average vs ensemble: width sweeps with REPAIR'd paths and N-way merges."""
        if not (self.sweeps(study, "model.width") and self.many_points(study)
                and any(repairs(p) for p in self.merged_points(study))):
            return []
        return self.figures(study, EXTENSION_FIGURES)

    def figure_targets(self):
        out = []
        for study in self.figure_studies:
            if self.sweeps(study, "model.width"):
                out += self.width_figures(study)
            out += self.ident_figures(study)
            out += self.mechanism_figures(study)
            out += self.extension_figures(study)
        return out

    def align_table_needed(self, kind):
        """The global alignment / layer_metrics table is a target when some study produces rows for it."""
        return any(self.align_study_inputs(s, kind) for s in self.studies)

    def all_targets(self):
        """The files of a whole run (rule all's inputs), in order."""
        tables = [self.result_table(k) for k in ("runs", "interpolation", "barriers")]
        claims = [self.claim_file(c) for c in self.claim_cfg]
        if claims:
            tables += [self.claims_table, self.front_page]
        tables += [self.result_table(k) for k in IDENT_TABLE_KINDS if self.table_studies(k)]
        tables += [self.result_table(k) for k in ALIGN_TABLE_KINDS if self.align_table_needed(k)]
        if self.table_studies(MANY_TABLE):
            tables.append(self.result_table(MANY_TABLE))
        if self.table1_studies():
            tables += [self.table1_table] + self.table1_figures
        return tables + self.figure_targets() + claims + self.provenance_files

    def report_front_page(self):
        """The report's landing text: the verdict page once a run has made it, else a short static note."""
        made = Path(self.front_page)
        return str(made.resolve()) if made.exists() else self.default_front_page
