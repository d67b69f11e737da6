"""Figure jobs: each reads its study's tables (their real pairs: ``tables.real_rows``) and draws the figures of
``lmcflow.figures`` (PNG and PDF).

No torch: like the table and claim jobs (``lmcflow.jobs.report``) they only read tables."""
from __future__ import annotations

import logging

from lmcflow.claims.identifiability_data import PAPER_UNALIGNED_DROP, unaligned_drops
from lmcflow.figures import identifiability as ident_figures
from lmcflow.figures import mechanism as mechanism_figures
from lmcflow.figures import swap_costs as swap_figures
from lmcflow.figures import width as width_figures
from lmcflow.figures import width_extensions as extension_figures
from lmcflow.figures.common import save_figure
from lmcflow.paper_table1 import table1_rows
from lmcflow.tables import concat_tables, plain_merges, read_table, real_rows, write_table

log = logging.getLogger(__name__)


def run_width_figures(barriers_path: str, interp_path: str, outputs: dict, definition: str) -> None:
    b = plain_merges(real_rows(read_table(barriers_path, "barriers")))
    i = plain_merges(real_rows(read_table(interp_path, "interpolation")))
    save_figure(width_figures.barrier_vs_width(b, definition), outputs["barrier_png"], outputs["barrier_pdf"])
    save_figure(width_figures.error_along_lambda(i), outputs["lambda_png"], outputs["lambda_pdf"])
    save_figure(width_figures.loss_barrier_raw_vs_calibrated(b, definition), outputs["calib_png"],
                outputs["calib_pdf"])
    save_figure(width_figures.logit_norm_along_lambda(i), outputs["logit_png"], outputs["logit_pdf"])


def run_extension_figures(barriers_path: str, many_path: str, outputs: dict, definition: str) -> None:
    """The figures of claims repair-vs-calibration (barriers with and without REPAIR) and many-model-ensemble."""
    b = read_table(barriers_path, "barriers")
    many = read_table(many_path, "merge_many")
    save_figure(extension_figures.repair_vs_calibration(b, definition), outputs["repair_png"], outputs["repair_pdf"])
    save_figure(extension_figures.many_model_ensemble(many), outputs["many_png"], outputs["many_pdf"])


def run_paper_table1(barrier_paths: list, studies: dict, out: str, out_png: str, out_pdf: str) -> None:
    """``paper_table1`` (``lmcflow.paper_table1``) from the width studies' barrier tables, and its figure."""
    barriers = plain_merges(real_rows(concat_tables(list(barrier_paths), "barriers")))
    df = write_table(out, "paper_table1", table1_rows(barriers, studies))
    save_figure(width_figures.paper_table1(df), out_png, out_pdf)
    for r in df.to_dict("records"):
        log.info(f"[table1] {r['study']} {r['method']} width {r['width']:g} weight decay {r['weight_decay']:g}: "
                 f"{100 * r['barrier']:.2f}% [{100 * r['ci_low']:.2f}, {100 * r['ci_high']:.2f}] "
                 f"(n_seeds={r['n_seeds']}); paper {100 * r['reference_value']:.2f}% — {r['reference']}")


def run_identifiability_figures(matching_path: str, lmc_path: str, outputs: dict) -> None:
    m = real_rows(read_table(matching_path, "identifiability"))
    lmc = real_rows(read_table(lmc_path, "identifiability_lmc"))
    save_figure(ident_figures.objective_vs_sigma_f(m), outputs["objective_png"], outputs["objective_pdf"])
    save_figure(ident_figures.barrier_vs_sigma_f(lmc), outputs["barrier_png"], outputs["barrier_pdf"])
    save_figure(ident_figures.matching_modes(m), outputs["modes_png"], outputs["modes_pdf"])


def run_swap_cost_figures(summary_path: str, matrix_path: str, outputs: dict) -> None:
    s = real_rows(read_table(summary_path, "swap_costs"))
    m = real_rows(read_table(matrix_path, "swap_matrix"))
    save_figure(swap_figures.swap_cost_heatmaps(m), outputs["heatmaps_png"], outputs["heatmaps_pdf"])
    save_figure(swap_figures.swap_cost_vs_k(s), outputs["summary_png"], outputs["summary_pdf"])
    save_figure(swap_figures.swap_cost_ridge_heatmaps(m), outputs["ridge_png"], outputs["ridge_pdf"])
    save_figure(swap_figures.ridge_vs_closed_form(m, s), outputs["ridge_scatter_png"],
                outputs["ridge_scatter_pdf"])
    save_figure(swap_figures.representation_geometry(s), outputs["geometry_png"], outputs["geometry_pdf"])


def run_lmc_vs_k_figure(interp_path: str, summary_path: str, outputs: dict) -> None:
    """Unaligned relative accuracy drop vs the data's intrinsic dimension k (the ``intrinsic-dimension-lmc``
    claim's statistic per pair), beside the paper's values."""
    interp = plain_merges(real_rows(read_table(interp_path, "interpolation")))
    s = real_rows(read_table(summary_path, "swap_costs"))
    drops = unaligned_drops(interp[interp.epochs == interp.epochs.max()] if len(interp) else interp, "test",
                            "identity")
    drops["data_k"] = drops.dataset.map(dict(zip(s.dataset, s.data_k)))
    drops = drops[drops.data_k.notna() & (drops.data_k > 0)]
    save_figure(ident_figures.lmc_vs_k(drops, PAPER_UNALIGNED_DROP), outputs["png"], outputs["pdf"])


def run_coherence_figures(coherence_path: str, outputs: dict) -> None:
    c = real_rows(read_table(coherence_path, "coherence"))
    save_figure(swap_figures.barrier_vs_nu(c), outputs["barrier_png"], outputs["barrier_pdf"])


def run_mechanism_figures(barriers_path: str, layer_metrics_path: str, outputs: dict, definition: str) -> None:
    b = real_rows(read_table(barriers_path, "barriers"))
    lm = real_rows(read_table(layer_metrics_path, "layer_metrics"))
    save_figure(mechanism_figures.method_barrier_vs_width(b, definition), outputs["methods_png"],
                outputs["methods_pdf"])
    save_figure(mechanism_figures.lewc_vs_width(lm), outputs["lewc_png"], outputs["lewc_pdf"])
    save_figure(mechanism_figures.cross_ratio_vs_width(lm), outputs["cross_png"], outputs["cross_pdf"])
    save_figure(mechanism_figures.rank_vs_width(lm), outputs["rank_png"], outputs["rank_pdf"])
    save_figure(mechanism_figures.weight_decay_comparison(b, lm, definition), outputs["wd_png"],
                outputs["wd_pdf"])
