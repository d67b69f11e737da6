"""Jobs that only read and write tables: concatenation, barriers, claims, the claims table, provenance and the
report's front page.

They import neither torch nor the models: torch's import costs ~2.5 s of CPU per job, and the default run has ~60
of these small jobs (figure jobs: ``lmcflow.jobs.figures``).
"""
from __future__ import annotations

import html
import json
import logging
from pathlib import Path

from lmcflow import claims as claims_mod
from lmcflow.claims.gates import dataset_facts
from lmcflow.config import REPLICATE_INPUT, Point, replicate_claim_cfg
from lmcflow.io import json_content_sha256, write_json, write_text
from lmcflow.provenance import machine_provenance, provenance
from lmcflow.tables import (
    barrier_rows,
    concat_tables,
    plain_merges,
    read_table,
    result_part,
    write_table,
)

log = logging.getLogger(__name__)


def run_concat(paths: list, kind: str, out: str) -> None:
    write_table(out, kind, concat_tables(paths, kind))


def run_result_table(paths: list, kind: str, outputs: dict) -> None:
    """All studies' rows of one kind, split by ``result_part`` into the outputs named by part ("real",
    "null_partners", "repair"); a part the outputs do not name must have no rows."""
    df = concat_tables(paths, kind)
    part = result_part(df)
    stray = sorted(set(part) - set(outputs))
    if stray:
        raise ValueError(f"table {kind!r}: rows of part {stray} but no output for them (outputs: {sorted(outputs)})")
    for name, out in outputs.items():
        write_table(out, kind, df[(part == name).to_numpy()])


def run_barriers(interp_path: str, out: str) -> None:
    write_table(out, "barriers", barrier_rows(read_table(interp_path, "interpolation")))


def study_scale(points: list[Point], datasets: dict | None = None) -> dict:
    """What a claim was measured at: enough to tell a CPU run from paper scale. ``datasets``: the config's facts
    of each dataset (``claims.gates.dataset_facts``: classes for the endpoint gate, d and n_train)."""
    names = sorted({p.dataset for p in points})
    facts = datasets if datasets is not None else dataset_facts(names)
    return {
        "dataset": sorted({p.dataset for p in points}), "arch": sorted({p.model["arch"] for p in points}),
        "widths": sorted({float(p.model["width"]) for p in points}),
        "weight_decays": sorted({float(p.train["weight_decay"]) for p in points}),
        "epochs": sorted({int(p.train["epochs"]) for p in points}),
        "seeds": sorted({s for p in points for s in p.seeds}),
        "data": {n: facts[n] for n in names if n in facts},
    }


def run_claim(cid: str, ccfg: dict, table_paths: dict, points: list[Point], out_json: str, runs_paths,
              datasets: dict | None = None) -> dict:
    """The claim's verdict from its studies' tables. ``table_paths``: kind -> path, or kind -> [path per study]
    for claims that read several studies. Adds ``provenance`` (code, torch, the studies' devices and precisions
    from their runs tables ``runs_paths``) and ``tables_read`` (every table path it read, as given: relative to
    the workflow's working directory) for ``lmcflow verify``."""
    runs_paths = [runs_paths] if isinstance(runs_paths, str) else list(runs_paths)
    replicate_paths = {k.removeprefix(REPLICATE_INPUT): v for k, v in table_paths.items()
                       if k.startswith(REPLICATE_INPUT)}
    result = _evaluate(cid, ccfg, {k: v for k, v in table_paths.items() if not k.startswith(REPLICATE_INPUT)},
                       points, datasets)
    if replicate_paths:
        replica = _evaluate(cid, replicate_claim_cfg(ccfg), replicate_paths, points, datasets)
        result["replication"] = {
            "studies": replica["studies"], "seeds": replica["scale"]["seeds"], "verdict": replica["verdict"],
            "replicated": replica["verdict"] == result["verdict"], "reason": replica["reason"],
            **{k: replica[k] for k in ("statistic", "ci_low", "ci_high", "n_seeds", "n_pairs")}}
    result["provenance"] = provenance(concat_tables(runs_paths, "runs"))
    read = {str(p) for paths in table_paths.values() for p in ([paths] if isinstance(paths, str) else paths)}
    result["tables_read"] = sorted(read | {str(p) for p in runs_paths})
    result["content_sha256"] = json_content_sha256(result)
    write_json(out_json, result)

    def num(v):
        return "nan" if v is None else f"{v:.4g}"

    log.info(f"[claim] {cid}: {result['verdict']} ({result['statistic_name']} = {num(result['statistic'])} "
             f"[{num(result['ci_low'])}, {num(result['ci_high'])}], n_seeds={result['n_seeds']})"
             + (f" reason: {result['reason']}" if result["reason"] else ""))
    reg = result.get("regime")
    if reg:
        ci = reg.get("predicted_crossing_width_ci")
        log.info(f"[claim] {cid}: regime {reg['label']}"
                 + (" — below the paper's regime, not evidence against it" if reg["verdict_qualifier"] else "")
                 + ("" if reg.get("predicted_crossing_width") is None else
                    f"; predicted crossing width ×{num(reg['predicted_crossing_width'])}"
                    + (f" [{num(ci[0])}, {num(ci[1])}]" if ci else "")))
    if "replication" in result:
        rep = result["replication"]
        log.info(f"[claim] {cid} on the replicate seeds {rep['seeds']}: {rep['verdict']} ({num(rep['statistic'])} "
                 f"[{num(rep['ci_low'])}, {num(rep['ci_high'])}]): "
                 + ("replicated" if rep["replicated"] else "NOT replicated"))
    return result


def _evaluate(cid: str, ccfg: dict, table_paths: dict, points: list[Point], datasets: dict | None) -> dict:
    tables = {kind: concat_tables([paths] if isinstance(paths, str) else list(paths), kind)
              for kind, paths in table_paths.items()}
    if cid not in claims_mod.READS_REPAIRED:  # the paper claims read merges without REPAIR
        tables = {kind: plain_merges(df) for kind, df in tables.items()}
    studies = claims_mod.claim_studies(ccfg)
    scales = {s: study_scale([p for p in points if p.study == s], datasets) for s in studies}
    return claims_mod.evaluate_claim(cid, ccfg, tables, scales[studies[0]], scales)


def run_claims_table(json_paths: list, out: str) -> None:
    rows = [claims_mod.claim_row(json.loads(Path(p).read_text())) for p in json_paths]
    write_table(out, "claims", rows)


def run_provenance(runs_path: str, out_json: str, out_html: str, imported: dict | None = None) -> dict:
    """``results/provenance.json`` and its HTML rendering for the Snakemake report; ``imported``: the files and
    SHA-256 of imported checkpoints (``lmcflow.plan.imported.Imports.provenance``), recorded where there are any."""
    prov = {**provenance(read_table(runs_path, "runs")), **machine_provenance(),
            **{k: v for k, v in (imported or {}).items() if v}}
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
        f"{len(df)} claims: {summary}. Ours: the claim's statistic [95% CI]; null: the same statistic with "
        "model B an untrained, a shuffled-label or a collapsed partner of the same run (the verdict needs ours "
        "beyond each, in the paper's direction, for the width claims); paper: the paper's number where it "
        "gives one. What each measures: the claim JSONs under `claims`_ (or `lmcflow claims`); figures: the "
        "study links; the rule graph: Workflow in the menu.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - claim (figures)",
        "     - verdict",
        "     - ours [95% CI]",
        "     - null: untrained, shuffled, collapsed",
        "     - paper",
    ]

    def num(v) -> str:
        return "–" if v is None or v != v else f"{v:.3g}"

    for r in df.to_dict("records"):
        ours = f"{num(r['statistic'])} [{num(r['ci_low'])}, {num(r['ci_high'])}]"
        if r.get("reason"):
            ours = r["reason"] if r["statistic"] != r["statistic"] else f"{ours} ({r['reason']})"
        paper = num(r.get("paper_value")) if r.get("paper_quantity") else "–"
        if r.get("replicated"):
            ours += " (replicated)" if r["replicated"] == "yes" else " (not replicated)"
        nulls = ", ".join(num(r.get(f"null_{k}")) for k in ("untrained", "shuffled_labels", "collapsed"))
        nulls = "–" if nulls == "–, –, –" else nulls
        studies = [s for s in str(r["study"]).split(",") if s in study_categories]
        figures = ", ".join(f"`{s}`_" for s in studies)
        claim_cell = f"``{r['claim_id']}``" + (f" ({figures})" if figures else "")
        regime = ""
        if r.get("regime"):  # a width claim: where our widest width stands against the paper's
            short = r["regime"].replace("not reached at ", "")  # "×1; the paper: ×16"
            regime = (f"(below regime: {short})" if r.get("verdict_qualifier") else
                      f"({r['regime']})" if not short.startswith("reached") else "")
            if r.get("crossing_width") == r.get("crossing_width"):
                ours += f"; crossing ×{num(r['crossing_width'])}"
        verdict = f"**{r['verdict']}**" + (f" {_rst_cell(regime)}" if regime else "")
        lines += [f"   * - {claim_cell}", f"     - {verdict}", f"     - {_rst_cell(ours)}",
                  f"     - {_rst_cell(nulls)}", f"     - {_rst_cell(paper)}"]
    write_text(out, "\n".join(lines) + "\n")


def _rst_cell(text: str) -> str:
    """One line of table text, safe for reStructuredText and for the Jinja pass Snakemake makes first."""
    text = " ".join(str(text).split())
    return text.replace("{{", "{ {").replace("{%", "{ %").replace("*", "\\*").replace("`", "'")
