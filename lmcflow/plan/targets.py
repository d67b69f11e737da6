"""What a run makes: the per-job files each study's tables concatenate, which studies have which tables, the
claims' tables, the figures and every file of a whole run (rule all's inputs), from a ``Grid``."""
from __future__ import annotations

from pathlib import Path

from lmcflow.claims import REGISTRY as CLAIMS
from lmcflow.claims import claim_studies
from lmcflow.config import (
    REPLICATE_INPUT,
    analysis_params,
    mechanism_methods,
    merge_methods,
    repairs,
    replicate_claim_cfg,
)
from lmcflow.grouping import blocks_label
from lmcflow.plan.grid import Grid
from lmcflow.plan.paths import (
    ALIGN_TABLE_KINDS,
    EXTENSION_FIGURES,
    IDENT_FIGURES,
    MANY_TABLE,
    MECHANISM_FIGURES,
    WIDTH_FIGURES,
)
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


class Targets:
    """The tables, figures and claims of a run (``grid``: its points and groups; ``default_front_page``: the
    report's landing text before a run has made its verdict page)."""

    def __init__(self, grid: Grid, default_front_page: str = "workflow/report/workflow.rst"):
        self.grid, self.paths, self.default_front_page = grid, grid.paths, default_front_page
        self.claim_cfg = grid.config.get("claims") or {}

    # ----------------------------------------------------------------------- what each study's tables concatenate
    def study_bundles(self, study):
        g = self.grid
        return [self.paths.bundle_dir(study, gr, b) for gr, _ in g.study_groups(study) for b in g.blocks[(study, gr)]]

    def study_run_rows(self, study):
        g = self.grid
        return [g.model_paths(study, p.point, s)[1] for p in g.study_points(study) for s in sorted(p.seeds)]

    def study_inputs(self, study, kind):
        """Per-job files that a study's table concatenates (runs: the bundle directories holding the run rows)."""
        if kind == "runs":
            return self.study_bundles(study)
        if kind == "interpolation":
            return [self.paths.merge_file(study, gr, blocks_label(*b))
                    for gr, _ in self.grid.merged_groups(study) for b in self.grid.group_pair_blocks(study, gr)]
        if kind in ALIGN_TABLE_KINDS:
            return self.align_study_inputs(study, kind)
        if kind == MANY_TABLE:
            return [self.paths.merge_many_file(study, p.point) for p in self.grid.many_points(study)]
        if kind in IDENT_TABLE_FLAG and kind != "coherence":
            return self.ident_study_inputs(study, kind)
        raise ValueError(kind)

    def study_table_files(self, study, kind):
        """The parquet files a study table concatenates (runs: one row file per model inside the bundles)."""
        return self.study_run_rows(study) if kind == "runs" else self.study_inputs(study, kind)

    def ident_study_inputs(self, study, kind):
        """Per-job files that a study's identifiability table concatenates (one per group with a flagged point)."""
        flag, g = IDENT_TABLE_FLAG[kind], self.grid
        groups = [(gr, pts) for gr, pts in g.study_groups(study) if any(analysis_params(p)[flag] for p in pts)]
        if kind in ("swap_costs", "swap_matrix"):
            return [self.paths.ident_point_file(study, gr, kind, b) for gr, _ in groups for b in g.blocks[(study, gr)]]
        return [self.paths.ident_point_file(study, gr, kind, blocks_label(*b))
                for gr, _ in groups for b in g.group_pair_blocks(study, gr)]

    def align_study_inputs(self, study, kind):
        pts, g = self.grid.merged_points(study), self.grid
        if kind == "alignment":
            return [
                self.paths.align_row_file(study, p.point, m, blocks_label(*b))
                for p in pts
                for m in merge_methods(p)
                if m != "identity"
                for b in g.point_pair_blocks(p)
            ]
        if kind in ("layer_metrics", "active_overlap"):
            out_file = self.paths.mechanism_file if kind == "layer_metrics" else self.paths.active_overlap_file
            return [
                out_file(study, p.point, m, blocks_label(*b))
                for p in pts
                for m in mechanism_methods(p)
                for b in g.point_pair_blocks(p)
            ]
        raise ValueError(kind)

    def table_studies(self, kind):
        """Studies that have a table of this kind (every study has the foundation tables)."""
        studies = self.grid.studies
        if kind == MANY_TABLE:
            return [s for s in studies if self.grid.many_points(s)]
        if kind in ALIGN_TABLE_KINDS:
            return [s for s in studies if self.align_study_inputs(s, kind)]
        if kind not in IDENT_TABLE_FLAG:
            return studies
        return [s for s in studies if self.grid.analysis_points(s, IDENT_TABLE_FLAG[kind])]

    def table1_studies(self):
        """{study: {dataset, arch, bias}} of the width studies (sweeping model.width, one dataset, architecture
        and bias setting, an architecture of the paper's Table 1), in config order: the rows of paper_table1."""
        out = {}
        for study in self.grid.figure_studies:
            kinds = {(p.dataset, p.model["arch"], bool(p.model["bias"])) for p in self.grid.real_points(study)}
            if self.grid.sweeps(study, "model.width") and len(kinds) == 1:
                dataset, arch, bias = kinds.pop()
                if arch in ("mlp", "vgg11", "resnet20"):
                    out[study] = {"dataset": dataset, "arch": arch, "bias": bias}
        return out

    def claim_tables(self, claim):
        """The tables a claim reads, per kind one file per study it reads (Table-1 claims may read several);
        with ``replicate_seeds``, the same tables of the replicate studies as ``replicate__<kind>``."""
        ccfg = self.claim_cfg[claim]
        out = {kind: [self.paths.study_table(s, kind) for s in claim_studies(ccfg)] for kind in CLAIMS[claim].tables}
        if self.grid.replicates:
            replicas = claim_studies(replicate_claim_cfg(ccfg))
            out |= {f"{REPLICATE_INPUT}{kind}": [self.paths.study_table(s, kind) for s in replicas]
                    for kind in CLAIMS[claim].tables}
        return out

    # ----------------------------------------------------------------------- figures and the whole run
    def lmc_vs_k_study(self, study):
        """Studies with the unaligned-LMC-vs-k figure: swap costs (the data's k) and trained, merged models over
        a dataset sweep."""
        g = self.grid
        return bool(g.analysis_points(study, "swap_costs") and g.merged_points(study) and g.sweeps(study, "dataset"))

    def width_figures(self, study):
        return self.paths.figures(study, WIDTH_FIGURES)

    def ident_figures(self, study):
        names = [n for flag, names in IDENT_FIGURES.items() if self.grid.analysis_points(study, flag) for n in names]
        if self.lmc_vs_k_study(study):
            names.append("lmc_vs_k")
        return self.paths.figures(study, names)

    def mechanism_figures(self, study):
        if not (self.grid.sweeps(study, "model.width") and self.align_study_inputs(study, "layer_metrics")):
            return []
        return self.paths.figures(study, MECHANISM_FIGURES)

    def extension_figures(self, study):
        """REPAIR vs calibration and N-model average vs ensemble: width sweeps with REPAIR'd paths and N-way merges."""
        g = self.grid
        if not (g.sweeps(study, "model.width") and g.many_points(study)
                and any(repairs(p) for p in g.merged_points(study))):
            return []
        return self.paths.figures(study, EXTENSION_FIGURES)

    def figure_targets(self):
        out = []
        for study in self.grid.figure_studies:
            if self.grid.sweeps(study, "model.width"):
                out += self.width_figures(study)
            out += self.ident_figures(study)
            out += self.mechanism_figures(study)
            out += self.extension_figures(study)
        return out

    def align_table_needed(self, kind):
        """The global alignment / layer_metrics table is a target when some study produces rows for it."""
        return any(self.align_study_inputs(s, kind) for s in self.grid.studies)

    def all_targets(self):
        """The files of a whole run (rule all's inputs), in order."""
        P = self.paths
        tables = [P.result_table(k) for k in ("runs", "interpolation", "barriers")]
        claims = [P.claim_file(c) for c in self.claim_cfg]
        if claims:
            tables += [P.claims_table, P.front_page]
        tables += [P.result_table(k) for k in IDENT_TABLE_KINDS if self.table_studies(k)]
        tables += [P.result_table(k) for k in ALIGN_TABLE_KINDS if self.align_table_needed(k)]
        if self.table_studies(MANY_TABLE):
            tables.append(P.result_table(MANY_TABLE))
        if self.table1_studies():
            tables += [P.table1_table] + P.table1_figures
        return tables + self.figure_targets() + claims + P.provenance_files

    def report_front_page(self):
        """The report's landing text: the verdict page once a run has made it, else a short static note."""
        made = Path(self.paths.front_page)
        return str(made.resolve()) if made.exists() else self.default_front_page
