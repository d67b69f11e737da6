"""Where every file of a run lives: the path builders of the workflow, from the config's three roots."""
from __future__ import annotations

ALIGN_TABLE_KINDS = ("alignment", "layer_metrics", "active_overlap")
MANY_TABLE = "merge_many"  # N-way merges: one job per point with merge.many sizes

WIDTH_FIGURES = ["barrier_vs_width", "error_along_lambda", "loss_barrier_raw_vs_calibrated", "logit_norm_along_lambda"]
EXTENSION_FIGURES = ["repair_vs_calibration", "many_model_ensemble"]  # REPAIR and N-way merges of a width sweep
MECHANISM_FIGURES = [
    "method_barrier_vs_width",
    "lewc_vs_width",
    "cross_ratio_vs_width",
    "rank_vs_width",
    "weight_decay_comparison",
]
# identifiability analysis flag -> the figures of a study with a point that has it on
IDENT_FIGURES = {
    "identifiability": ["objective_vs_sigma_f", "barrier_vs_sigma_f", "matching_modes"],
    "swap_costs": [
        "swap_cost_heatmaps",
        "swap_cost_vs_k",
        "swap_cost_heatmaps_ridge",
        "ridge_vs_closed_form",
        "representation_geometry",
    ],
    "coherence": ["barrier_vs_nu"],
}


class Paths:
    """Path builders under ``results`` (what a run reports), ``work`` (per-job files) and ``logs``."""

    def __init__(self, results: str, work: str, logs: str):
        self.results, self.work, self.logs = results, work, logs
        self.table1_table = f"{results}/tables/paper_table1.parquet"
        self.table1_figures = [f"{results}/figures/paper_table1.{ext}" for ext in ("png", "pdf")]
        self.front_page = f"{results}/report/front_page.rst"
        self.provenance_files = [f"{results}/provenance.json", f"{results}/provenance.html"]
        self.claims_table = f"{results}/tables/claims.parquet"

    def data_file(self, dataset):
        return f"{self.work}/data/{dataset}.safetensors"

    def bundle_dir(self, study, group, block):
        return f"{self.work}/models/{study}/{group}/bundle-{block}"

    def merge_file(self, study, point, blocks):
        return f"{self.work}/merge/{study}/{point}/blocks-{blocks}.parquet"

    def study_table(self, study, kind):
        return f"{self.work}/tables/{study}/{kind}.parquet"

    def result_table(self, kind):
        """The table a reader queries first: real models and pairs, merges without REPAIR."""
        return f"{self.results}/tables/{kind}.parquet"

    def part_table(self, kind, part):
        """The rows ``result_table`` leaves out, by part (``lmcflow.tables.RESULT_PARTS``): null partners, REPAIR."""
        return f"{self.results}/tables/{part}/{kind}.parquet"

    def claim_file(self, claim):
        return f"{self.results}/claims/{claim}.json"

    def ident_point_file(self, study, group, kind, blocks):
        """Output of rule identifiability for one grid group and pair block, or of rule swap_costs for one grid
        group and bundle (``blocks``)."""
        return f"{self.work}/identifiability/{study}/{group}/{kind}-{blocks}.parquet"

    def align_file(self, study, point, method, blocks):
        return f"{self.work}/align/{study}/{point}/{method}/blocks-{blocks}.safetensors"

    def align_row_file(self, study, point, method, blocks):
        return f"{self.work}/align/{study}/{point}/{method}/blocks-{blocks}.parquet"

    def merge_many_file(self, study, point):
        return f"{self.work}/merge_many/{study}/{point}.parquet"

    def mechanism_file(self, study, point, method, blocks):
        return f"{self.work}/mechanism/{study}/{point}/{method}/blocks-{blocks}.parquet"

    def active_overlap_file(self, study, point, method, blocks):
        """Rule mechanism's second output: the τ sweep of the active-unit overlap."""
        return f"{self.work}/mechanism/{study}/{point}/{method}/blocks-{blocks}-active_overlap.parquet"

    @staticmethod
    def member_files(study, group, point, bundle, seed):
        """[checkpoint, run row] of one model of a point in the bundle directory ``bundle`` of its group (in a
        subdirectory named by its point when the bundle holds several points)."""
        d = bundle if group == point else f"{bundle}/{point}"
        return [f"{d}/seed-{seed}.safetensors", f"{d}/seed-{seed}.run.parquet"]

    def figures(self, study, names):
        """The png and pdf of each named figure of a study."""
        return [f"{self.results}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]
