"""The Markdown tables the docs quote from a run's claim JSONs, and their rewriting in place.

``claims_markdown``: one row per claim (verdict, headline statistic with its interval, the paper's value beside
ours). ``nulls_markdown``: per pair claim, the headline statistic on real pairs and on each null partner kind
(``lmcflow.claims.nulls``) with the verdict the headline criterion alone gives each, so a reader sees that a useless
partner lands on the failing side. ``training_markdown``: per study point kind (width, weight decay, partner) the
epochs, training time and how far the models are from a plateau, from the run's ``runs`` table. A doc marks a table
with ``<!-- verdicts: lmcflow claims --markdown DIR -->``, ``<!-- nulls: lmcflow claims --nulls-markdown DIR -->``
or ``<!-- training: lmcflow claims --training-markdown DIR -->`` … ``<!-- /verdicts -->`` (``/nulls``, ``/training``);
``lmcflow claims --update-doc FILE`` rewrites them from DIR, and tests/test_docs.py keeps them equal to it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from lmcflow.claims.margins import margin_text
from lmcflow.claims.regime import qualified_verdict
from lmcflow.config import ConfigError
from lmcflow.config.partners import PARTNER_KINDS
from lmcflow.inputs import MissingInput, results_folder


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _interval(statistic, low, high) -> str:
    if statistic is None:
        return "—"
    return f"{statistic:.3g}" + ("" if low is None or high is None else f" [{low:.3g}, {high:.3g}]")


def _seed_range(seeds: list) -> str:
    return f"{seeds[0]}–{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 1 else \
        ",".join(map(str, seeds))


def _claim_jsons(results: str | Path) -> list[dict]:
    files = sorted((results_folder(results) / "claims").glob("*.json"))
    if not files:
        raise MissingInput(f"{Path(results) / 'claims'}: no claim JSONs to tabulate; a run makes them: "
                           "`snakemake --cores all` (one claim: `snakemake --cores all RESULTS/claims/CLAIM_ID.json`)")
    rows = []
    for f in files:
        try:
            rows.append(json.loads(f.read_text()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"{f}: not a claim JSON written by lmcflow ({err}); rebuild it with "
                              f"`snakemake --cores all --forcerun {f}`") from err
    return rows


def claims_markdown(results: str | Path) -> str:
    """A Markdown verdict table from ``results/claims/*.json``: claim, paper, verdict, the headline statistic
    with its 95% interval, and the paper's values that fit our study (all of them where none fits)."""
    rows = _claim_jsons(results)
    replicated = any("replication" in r for r in rows)
    lines = ["| claim | paper | verdict | ours: statistic [95% CI] | paper's value (ours) |"
             + (" replicate seeds: verdict |" if replicated else ""),
             "|---|---|---|---|---|" + ("---|" if replicated else "")]
    for r in sorted(rows, key=lambda r: (r["paper"], r["claim_id"])):
        paper = [p for p in r["paper_values"] if p["fits_our_study"]] or r["paper_values"]
        values = "; ".join(
            f"{p['quantity']}: {p['value']:.3g} ({p['scale']})"
            + (f" (ours {_interval(p['ours']['statistic'], p['ours']['ci_low'], p['ours']['ci_high'])})"
               if p["ours"] else "")
            + ("" if p.get("comparable", True) else f" (not comparable: {p['comparable_reason']})")
            for p in paper) or "—"
        stat = f"{r['statistic_name']}: {_interval(r['statistic'], r['ci_low'], r['ci_high'])}"
        if r["reason"]:
            stat += f" ({r['reason']})"
        if r.get("decided_by_convention"):
            stat += f" ({margin_text(r['decided_by_convention'])})"
        reg = r.get("regime") or {}
        if reg.get("predicted_crossing_width"):
            ci = reg.get("predicted_crossing_width_ci")
            stat += (f"; predicted crossing width ×{reg['predicted_crossing_width']:.3g}"
                     + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""))
        shown = qualified_verdict(r) if reg.get("verdict_qualifier") else (
            f"{r['verdict']} ({reg['label']})" if reg and not reg.get("reached") else r["verdict"])
        line = (f"| `{r['claim_id']}` | {_md(r['paper'].split(',')[0])} | {_md(shown)} | {_md(stat)} | "
                f"{_md(values)} |")
        if replicated:
            rep = r.get("replication")
            line += (" — |" if rep is None else
                     f" {_md(_seed_range(rep['seeds']))}: {rep['verdict']}"
                     + ("" if rep["replicated"] else " (**not replicated**)") + " |")
        lines.append(line)
    return "\n".join(lines)


def _null_cell(rec: dict | None, head: dict) -> str:
    """A null kind's cell: the headline statistic on its pairs [95% CI], the verdict the headline criterion alone
    gives it, and the one-sided control's verdict (real − null beyond δ in the paper's direction)."""
    if rec is None:
        return "—"
    if rec["status"] != "run":
        return f"not run ({rec['reason']})"
    n = rec["null"]
    on_head = rec.get("null_verdict_on_criterion") or "—"
    fails = "" if on_head == "—" else (" (fails the headline)" if on_head != "supported"
                                       else " (**passes the headline**)")
    return (f"{_interval(n['statistic'], n['ci_low'], n['ci_high'])} → {on_head}{fails}; "
            f"control: {rec['verdict']}")


def nulls_markdown(results: str | Path) -> str:
    """Per claim with null-partner controls: the headline criterion (statistic, side, threshold), the real pairs'
    estimate, and per partner kind the same statistic, the headline criterion's verdict on it (whether it lands on
    the failing side) and the one-sided control's verdict. Claims without null partners in the run are left out."""
    rows = [r for r in _claim_jsons(results) if r.get("null_controls")]
    if not rows:
        return "(no claim of this run has null-partner controls)"
    lines = ["| claim | headline criterion | real pairs | " + " | ".join(k.replace("_", "-") for k in PARTNER_KINDS)
             + " |", "|---|---|---|" + "---|" * len(PARTNER_KINDS)]
    for r in sorted(rows, key=lambda r: (r["paper"], r["claim_id"])):
        # the criterion the null records were computed on (a claim's headline may be a control, as LEWC's is)
        named = {rec.get("statistic_name") for rec in r["null_controls"]} - {None}
        head = next((c for c in r["criteria"] if c["name"] in named),
                    next((c for c in r["criteria"] if c.get("kind") != "control"), r["criteria"][0]))
        by_kind = {rec["kind"]: rec for rec in r["null_controls"]}
        side = {">": ">", "<": "<", "within": "within ±"}.get(head["side"], head["side"])
        crit = f"`{head['name']}` {side} {head['threshold']:.3g}"
        real = _interval(head["statistic"], head["ci_low"], head["ci_high"]) + f" → {head['verdict']}"
        lines.append(f"| `{r['claim_id']}` | {_md(crit)} | {_md(real)} | "
                     + " | ".join(_md(_null_cell(by_kind.get(k), head)) for k in PARTNER_KINDS) + " |")
    return "\n".join(lines)


def training_markdown(results: str | Path, max_late_drop: float = 0.01) -> str:
    """One row per study, dataset, width, weight decay, σ_F and partner kind of the run's trained models: how many,
    their epochs, the median training seconds per model (one thread; bundled models share a job), the largest late
    loss drop (``runs.train_loss_late_drop``) and how many are below ``max_late_drop`` (the convergence gate's
    convention), and the median test accuracy."""
    import pandas as pd  # here, not at the top: the claim tables and the CLI import this module without needing it

    path = results_folder(results) / "tables" / "runs.parquet"
    if not path.is_file():
        raise MissingInput(f"{path}: no runs table; a run makes it: `snakemake --cores all`")
    runs = pd.read_parquet(path)
    runs = runs[runs.epochs > 0]  # untrained partners: no training to report
    lines = ["| study | dataset | width | weight decay | σ_F | partner | models | epochs | train s (median) | "
             f"late drop (max) | below {max_late_drop:g} | test acc (median) |", "|---" * 12 + "|"]
    keys = ["study", "dataset", "width", "weight_decay", "sigma_f", "partner"]
    for (study, dataset, width, wd, sigma_f, partner), g in runs.groupby(keys, sort=True, dropna=False):
        drop = g.train_loss_late_drop
        cells = [study, dataset, f"{width:g}", f"{wd:g}", "—" if pd.isna(sigma_f) else f"{sigma_f:g}", partner,
                 len(g), "/".join(str(e) for e in sorted(set(g.epochs))), f"{g.train_seconds.median():.0f}",
                 f"{drop.max():.4f}", int((drop < max_late_drop).sum()), f"{g.test_acc.median():.3f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


VERDICT_BLOCK = re.compile(r"(<!-- verdicts: lmcflow claims --markdown (\S+) -->\n)(.*?)(\n<!-- /verdicts -->)", re.S)
NULLS_BLOCK = re.compile(r"(<!-- nulls: lmcflow claims --nulls-markdown (\S+) -->\n)(.*?)(\n<!-- /nulls -->)", re.S)
TRAINING_BLOCK = re.compile(
    r"(<!-- training: lmcflow claims --training-markdown (\S+) -->\n)(.*?)(\n<!-- /training -->)", re.S)


def verdict_table(repo: Path, results: str) -> str:
    """A doc's verdict table of the run in ``repo / results``: ``claims_markdown``, or a line saying the run is not
    there yet (a regime run whose evidence has not been committed)."""
    if not (repo / results / "claims").is_dir():
        return f"(no verdicts yet: `{results}` does not exist; it is written by the run named above)"
    return claims_markdown(repo / results)


def nulls_table(repo: Path, results: str) -> str:
    """A doc's real-vs-null table of the run in ``repo / results`` (``nulls_markdown``), or the not-yet-run line."""
    if not (repo / results / "claims").is_dir():
        return f"(no null-partner table yet: `{results}` does not exist; it is written by the run named above)"
    return nulls_markdown(repo / results)


def training_table(repo: Path, results: str) -> str:
    """A doc's training table of the run in ``repo / results`` (``training_markdown``), or the not-yet-run line."""
    if not (repo / results / "tables" / "runs.parquet").is_file():
        return f"(no training table yet: `{results}` does not exist; it is written by the run named above)"
    return training_markdown(repo / results)


DOC_BLOCKS = ((VERDICT_BLOCK, verdict_table), (NULLS_BLOCK, nulls_table), (TRAINING_BLOCK, training_table))


def update_doc_tables(doc: Path, repo: Path) -> bool:
    """Rewrite every verdict and real-vs-null block of ``doc`` from the run it names (relative to ``repo``); True
    if the file changed."""
    if not doc.is_file():
        raise MissingInput(f"{doc}: no such file" + (" (a folder)" if doc.is_dir() else "") + "; --update-doc "
                           "rewrites the verdict tables of a Markdown file such as README.md")
    text = doc.read_text()
    if not any(block.search(text) for block, _ in DOC_BLOCKS):
        raise MissingInput(f"{doc}: holds no verdict table to update (a block '<!-- verdicts: lmcflow claims "
                           "--markdown DIR -->' … '<!-- /verdicts -->', or '<!-- nulls: lmcflow claims "
                           "--nulls-markdown DIR -->' … '<!-- /nulls -->', or its --training-markdown form)")
    new = text
    for block, table in DOC_BLOCKS:
        new = block.sub(lambda m, table=table: m.group(1) + table(repo, m.group(2)) + m.group(4), new)
    if new != text:
        doc.write_text(new)
    return new != text

