"""Jobs that only read and write tables: aggregation, claims and figures.

They import neither torch nor the models (``lmcflow.jobs`` holds the compute jobs): torch's import
costs ~2.5 s of CPU per job, and the default run has ~60 of these small jobs.
"""
from __future__ import annotations

import html
import json
import logging
from pathlib import Path

from lmcflow import claims as claims_mod
from lmcflow.config import Point
from lmcflow.io import write_json, write_text
from lmcflow.provenance import machine_provenance, provenance
from lmcflow.tables import (
    barrier_rows,
    concat_tables,
    read_table,
    write_table,
)

log = logging.getLogger(__name__)


class _LazyModule:
    """Imports a module on first attribute access: seaborn/matplotlib cost ~2 s per job, and only
    the figure jobs need them (the table and claim jobs import this module too)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        import importlib

        return getattr(importlib.import_module(self._name), attr)


figures = _LazyModule("lmcflow.figures")


def run_concat(paths: list, kind: str, out: str) -> None:
    write_table(out, kind, concat_tables(paths, kind))


def run_barriers(interp_path: str, out: str) -> None:
    write_table(out, "barriers", barrier_rows(read_table(interp_path, "interpolation")))


def study_scale(points: list[Point]) -> dict:
    """What a claim was measured at: enough to tell a CPU run from paper scale."""
    return {
        "dataset": sorted({p.dataset for p in points}), "arch": sorted({p.model["arch"] for p in points}),
        "widths": sorted({float(p.model["width"]) for p in points}),
        "weight_decays": sorted({float(p.train["weight_decay"]) for p in points}),
        "epochs": sorted({int(p.train["epochs"]) for p in points}),
        "seeds": sorted({s for p in points for s in p.seeds}),
    }


def run_claim(cid: str, ccfg: dict, table_paths: dict, points: list[Point], out_json: str, runs_paths) -> dict:
    """The claim's verdict from its studies' tables. ``table_paths``: kind -> path, or kind -> [path per study]
    for claims that read several studies. Adds ``provenance`` (code, torch, the studies' devices and precisions
    from their runs tables ``runs_paths``) and ``tables_read`` (every table path it read, as given: relative to
    the workflow's working directory) for ``lmcflow verify``."""
    runs_paths = [runs_paths] if isinstance(runs_paths, str) else list(runs_paths)
    tables = {kind: concat_tables([paths] if isinstance(paths, str) else list(paths), kind)
              for kind, paths in table_paths.items()}
    studies = claims_mod.claim_studies(ccfg)
    scales = {s: study_scale([p for p in points if p.study == s]) for s in studies}
    result = claims_mod.evaluate_claim(cid, ccfg, tables, scales[studies[0]], scales)
    result["provenance"] = provenance(concat_tables(runs_paths, "runs"))
    read = {str(p) for paths in table_paths.values() for p in ([paths] if isinstance(paths, str) else paths)}
    result["tables_read"] = sorted(read | {str(p) for p in runs_paths})
    write_json(out_json, result)

    def num(v):
        return "nan" if v is None else f"{v:.4g}"

    log.info(f"[claim] {cid}: {result['verdict']} ({result['statistic_name']} = {num(result['statistic'])} "
             f"[{num(result['ci_low'])}, {num(result['ci_high'])}], n_seeds={result['n_seeds']})"
             + (f" reason: {result['reason']}" if result["reason"] else ""))
    return result


def run_claims_table(json_paths: list, out: str) -> None:
    rows = [claims_mod.claim_row(json.loads(Path(p).read_text())) for p in json_paths]
    write_table(out, "claims", rows)


def run_provenance(runs_path: str, out_json: str, out_html: str, threads: dict | None = None) -> dict:
    """``results/provenance.json`` and its HTML rendering for the Snakemake report."""
    prov = {**provenance(read_table(runs_path, "runs")), **machine_provenance(threads)}
    write_json(out_json, prov)
    rows = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_plain(v))}</td></tr>" for k, v in prov.items())
    write_text(out_html, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>lmcflow provenance</title>"
                         "<style>th{text-align:left;padding-right:1em}</style></head><body>\n"
                         f"<h3>Code and machine that produced these results</h3>\n<table>\n{rows}\n</table>\n"
                         "</body></html>\n")
    log.info(f"[provenance] {prov}")
    return prov


def _plain(v) -> str:
    if v is None:
        return "unknown"
    return ", ".join(map(str, v)) if isinstance(v, list) else str(v)


def run_width_figures(barriers_path: str, interp_path: str, outputs: dict, definition: str) -> None:
    b = read_table(barriers_path, "barriers")
    i = read_table(interp_path, "interpolation")
    figures.save_figure(figures.barrier_vs_width(b, definition), outputs["barrier_png"], outputs["barrier_pdf"])
    figures.save_figure(figures.error_along_lambda(i), outputs["lambda_png"], outputs["lambda_pdf"])
    figures.save_figure(figures.loss_barrier_raw_vs_calibrated(b, definition), outputs["calib_png"],
                        outputs["calib_pdf"])
    figures.save_figure(figures.logit_norm_along_lambda(i), outputs["logit_png"], outputs["logit_pdf"])


def run_paper_table1(barrier_paths: list, studies: dict, out: str, out_png: str, out_pdf: str) -> None:
    """``paper_table1`` (``lmcflow.paper_table1``) from the width studies' barrier tables, and its figure."""
    from lmcflow.paper_table1 import table1_rows

    df = write_table(out, "paper_table1", table1_rows(concat_tables(list(barrier_paths), "barriers"), studies))
    figures.save_figure(figures.paper_table1(df), out_png, out_pdf)
    for r in df.to_dict("records"):
        log.info(f"[table1] {r['study']} {r['method']} width {r['width']:g} weight decay {r['weight_decay']:g}: "
                 f"{100 * r['barrier']:.2f}% [{100 * r['ci_low']:.2f}, {100 * r['ci_high']:.2f}] "
                 f"(n_seeds={r['n_seeds']}); paper {100 * r['reference_value']:.2f}% — {r['reference']}")


def run_identifiability_figures(matching_path: str, lmc_path: str, outputs: dict) -> None:
    m = read_table(matching_path, "identifiability")
    lmc = read_table(lmc_path, "identifiability_lmc")
    figures.save_figure(figures.objective_vs_sigma_f(m), outputs["objective_png"], outputs["objective_pdf"])
    figures.save_figure(figures.barrier_vs_sigma_f(lmc), outputs["barrier_png"], outputs["barrier_pdf"])
    figures.save_figure(figures.matching_modes(m), outputs["modes_png"], outputs["modes_pdf"])


def run_swap_cost_figures(summary_path: str, matrix_path: str, outputs: dict) -> None:
    s = read_table(summary_path, "swap_costs")
    m = read_table(matrix_path, "swap_matrix")
    figures.save_figure(figures.swap_cost_heatmaps(m), outputs["heatmaps_png"], outputs["heatmaps_pdf"])
    figures.save_figure(figures.swap_cost_vs_k(s), outputs["summary_png"], outputs["summary_pdf"])
    figures.save_figure(figures.swap_cost_ridge_heatmaps(m), outputs["ridge_png"], outputs["ridge_pdf"])
    figures.save_figure(figures.ridge_vs_closed_form(m, s), outputs["ridge_scatter_png"],
                        outputs["ridge_scatter_pdf"])
    figures.save_figure(figures.representation_geometry(s), outputs["geometry_png"], outputs["geometry_pdf"])


def run_lmc_vs_k_figure(interp_path: str, summary_path: str, outputs: dict) -> None:
    """Unaligned relative accuracy drop vs the data's intrinsic dimension k (the ``intrinsic-dimension-lmc``
    claim's statistic per pair), beside the paper's values."""
    from lmcflow.claims.identifiability import PAPER_UNALIGNED_DROP, unaligned_drops

    interp = read_table(interp_path, "interpolation")
    s = read_table(summary_path, "swap_costs")
    drops = unaligned_drops(interp[interp.epochs == interp.epochs.max()] if len(interp) else interp, "test",
                            "identity")
    drops["data_k"] = drops.dataset.map(dict(zip(s.dataset, s.data_k)))
    drops = drops[drops.data_k.notna() & (drops.data_k > 0)]
    figures.save_figure(figures.lmc_vs_k(drops, PAPER_UNALIGNED_DROP), outputs["png"], outputs["pdf"])


def run_coherence_figures(coherence_path: str, outputs: dict) -> None:
    c = read_table(coherence_path, "coherence")
    figures.save_figure(figures.barrier_vs_nu(c), outputs["barrier_png"], outputs["barrier_pdf"])


def run_mechanism_figures(barriers_path: str, layer_metrics_path: str, outputs: dict, definition: str) -> None:
    b = read_table(barriers_path, "barriers")
    lm = read_table(layer_metrics_path, "layer_metrics")
    figures.save_figure(figures.method_barrier_vs_width(b, definition), outputs["methods_png"], outputs["methods_pdf"])
    figures.save_figure(figures.lewc_vs_width(lm), outputs["lewc_png"], outputs["lewc_pdf"])
    figures.save_figure(figures.cross_ratio_vs_width(lm), outputs["cross_png"], outputs["cross_pdf"])
    figures.save_figure(figures.rank_vs_width(lm), outputs["rank_png"], outputs["rank_pdf"])
    figures.save_figure(figures.weight_decay_comparison(b, lm, definition), outputs["wd_png"],
                        outputs["wd_pdf"])


def run_report_front_page(claims_path: str, out: str, study_categories: list) -> None:
    """The report's landing text (``snakemake --report``): every claim's verdict, our statistic with its CI
    beside the paper's value, and a link to the study's figures (its report category). reStructuredText,
    rendered by Snakemake (``report:`` in the Snakefile).

    Snakemake centres the landing text vertically beside the rule graph, so text taller than the window is cut
    off at the top: one short line per claim, numbers only; what each number measures is in the claim's JSON
    (category ``claims``) and in ``lmcflow claims``."""
    df = read_table(claims_path, "claims")
    counts = df.verdict.value_counts()
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in ("supported", "not_supported", "inconclusive"))
    lines = [
        "lmcflow: the verdicts of this run",
        "=================================",
        "",
        f"{len(df)} claims: {summary}. Ours: the claim's statistic [95% CI]; paper: the paper's number where it "
        "gives one. What each measures: the claim JSONs under `claims`_ (or `lmcflow claims`); figures: the "
        "study links; the rule graph: Workflow in the menu.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - claim (figures)",
        "     - verdict",
        "     - ours [95% CI]",
        "     - paper",
    ]

    def num(v) -> str:
        return "–" if v is None or v != v else f"{v:.3g}"

    for r in df.to_dict("records"):
        ours = f"{num(r['statistic'])} [{num(r['ci_low'])}, {num(r['ci_high'])}]"
        if r.get("reason"):
            ours = r["reason"] if r["statistic"] != r["statistic"] else f"{ours} ({r['reason']})"
        paper = num(r.get("paper_value")) if r.get("paper_quantity") else "–"
        studies = [s for s in str(r["study"]).split(",") if s in study_categories]
        figures = ", ".join(f"`{s}`_" for s in studies)
        claim_cell = f"``{r['claim_id']}``" + (f" ({figures})" if figures else "")
        lines += [f"   * - {claim_cell}", f"     - **{r['verdict']}**", f"     - {_rst_cell(ours)}",
                  f"     - {_rst_cell(paper)}"]
    write_text(out, "\n".join(lines) + "\n")


def _rst_cell(text: str) -> str:
    """One line of table text, safe for reStructuredText and for the Jinja pass Snakemake makes first."""
    text = " ".join(str(text).split())
    return text.replace("{{", "{ {").replace("{%", "{ %").replace("*", "\\*").replace("`", "'")
