"""Small command line for inspecting configs and results without Snakemake.

    lmcflow validate [my.yaml]            # schema + semantic checks, as at DAG construction
    lmcflow points [my.yaml]              # every study point, its seeds/pairs and grid group
    lmcflow claims [results]              # verdicts, statistic and CI, convention margin, endpoint gate, controls,
                                          # real vs null-partner statistics, the paper's value beside ours and
                                          # whether it is comparable
    lmcflow claims --markdown [results]   # the verdicts as a Markdown table, from results/claims/*.json
    lmcflow verify [results]              # rehash checkpoints/permutations, check tables and claims
    lmcflow verify evidence/RUN/results --published  # tables and claims of a published run
    lmcflow verify [results] --against DIR  # same bits? same verdicts? (exit 1 unless every verdict agrees)
    lmcflow trace CLAIM [--config my.yaml] # verdict -> statistic -> tables -> rules and job functions -> config keys
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from lmcflow.catalog import ARCHITECTURES, dataset_names
from lmcflow.claims import REGISTRY
from lmcflow.claims.margins import margin_text
from lmcflow.compare import compare
from lmcflow.config import ConfigError, check_semantics, expand_points
from lmcflow.grouping import all_grid_groups, pair_blocks
from lmcflow.inputs import MissingInput, claim_rows, read_config, results_folder
from lmcflow.io import CorruptFileError
from lmcflow.plan.trace import trace
from lmcflow.point_schema import validate_points
from lmcflow.verify import verify


def load_and_check(path: str | None) -> tuple[dict, dict]:
    """A config as a run would use it (``resolve_config``: ``path`` as --configfile, or the embedded default),
    checked like at DAG construction; returns (config, points)."""
    cfg = read_config(path)
    check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
    points = expand_points(cfg)
    validate_points(points)
    return cfg, points


def _g(v) -> str:
    return "—" if v is None or math.isnan(v) else f"{v:.4g}"


def format_claim(r: dict) -> str:
    """A claims.parquet row as text: verdict, our statistic with its CI, the controls, the paper's value
    beside ours (each at its scale)."""
    ci = "(no CI)" if _g(r["ci_low"]) == "—" else f"[{_g(r['ci_low'])}, {_g(r['ci_high'])}]"
    scale = json.loads(r["scale"]) if r["scale"] else {}
    ours_at = ", ".join(f"{k}={scale[k]}" for k in ("dataset", "arch", "widths", "epochs") if scale.get(k))
    lines = [(f"{r['claim_id']:28s} {r['verdict']:14s} {r['statistic_name']} = {_g(r['statistic'])} {ci} "
              f"(n_seeds={r['n_seeds']}, study={r['study']})")]
    if r["reason"]:
        lines.append(f"{'':28s} reason: {r['reason']}")
    if r.get("convention_margin"):  # the verdict rests on a threshold we chose
        lines.append(f"{'':28s} {r['convention_margin']}")
    if r.get("endpoint_gate"):
        lines.append(f"{'':28s} endpoint gate: {r['endpoint_gate']}")
    if r["controls"]:
        lines.append(f"{'':28s} controls: {r['controls']}")
    if r.get("null_controls"):  # the headline statistic on real pairs beside pairs with a null partner B
        lines.append(f"{'':28s} null partners: {r['null_controls']}")
    if r["paper_quantity"]:
        lines.append(f"{'':28s} paper: {r['paper_quantity']} = {_g(r['paper_value'])} ({r['paper_scale']}) | "
                     f"ours: {_g(r['our_value'])} ({ours_at})"
                     + (f" — {r['paper_comparable']}" if r.get("paper_comparable") else ""))
    if r.get("replicated"):
        rci = f"[{_g(r['replicate_ci_low'])}, {_g(r['replicate_ci_high'])}]"
        lines.append(f"{'':28s} replicate (seeds {r['replicate_seeds']}): {r['replicate_verdict']} "
                     f"{_g(r['replicate_statistic'])} {rci} — "
                     + ("replicated" if r["replicated"] == "yes" else "NOT REPLICATED"))
    return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _interval(statistic, low, high) -> str:
    if statistic is None:
        return "—"
    return f"{statistic:.3g}" + ("" if low is None or high is None else f" [{low:.3g}, {high:.3g}]")


def _seed_range(seeds: list) -> str:
    return f"{seeds[0]}–{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 1 else \
        ",".join(map(str, seeds))


def claims_markdown(results: str | Path) -> str:
    """A Markdown verdict table from ``results/claims/*.json``: claim, paper, verdict, the headline statistic
    with its 95% interval, and the paper's values that fit our study (all of them where none fits)."""
    rows = [json.loads(f.read_text()) for f in sorted((Path(results) / "claims").glob("*.json"))]
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
        line = (f"| `{r['claim_id']}` | {_md(r['paper'].split(',')[0])} | {r['verdict']} | {_md(stat)} | "
                f"{_md(values)} |")
        if replicated:
            rep = r.get("replication")
            line += (" — |" if rep is None else
                     f" {_md(_seed_range(rep['seeds']))}: {rep['verdict']}"
                     + ("" if rep["replicated"] else " (**not replicated**)") + " |")
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lmcflow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="check a config file (default: the embedded config/config.yaml)").add_argument(
        "config", nargs="?")
    sub.add_parser("points", help="list a config's study points").add_argument("config", nargs="?")
    c = sub.add_parser("claims", help="print claim verdicts")
    c.add_argument("results", nargs="?", default="results")
    c.add_argument("--markdown", action="store_true", help="a Markdown table from RESULTS/claims/*.json")
    v = sub.add_parser("verify", help="check that a results folder is what its tables say it is (exit 1 if not)")
    v.add_argument("results", nargs="?", default="results")
    v.add_argument("--workdir", help="the workflow's working directory, which the paths in the tables are "
                                     "relative to (default: the results folder's parent)")
    v.add_argument("--published", action="store_true", help="a published results folder (evidence/<run>/results): "
                   "tables and claims only; its checkpoints are not shipped and git keeps no file times")
    v.add_argument("--against", metavar="DIR", help="compare with another results folder instead: which files are "
                                                     "bit-identical, how tables differ, whether every verdict agrees")
    tr = sub.add_parser("trace", help="a claim's chain: verdict, statistic, tables, rules, job functions, config keys")
    tr.add_argument("claim")
    tr.add_argument("--config", help="the config that configures the claim (default: the first shipped one)")
    tr.add_argument("--results", help="the results folder holding its verdict (default: the config's)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "validate":
            _, points = load_and_check(args.config)
            print(f"{args.config or 'config/config.yaml'}: valid ({len(points)} points)")
        elif args.cmd == "points":
            _, points = load_and_check(args.config)
            group_of = {(s, p.point): g for (s, g), pts in all_grid_groups(points).items() for p in pts}
            for (study, pid), p in points.items():
                print(f"{study:24s} {pid:40s} dataset={p.dataset} seeds={p.seeds} "
                      f"pairs={sum(len(v) for v in pair_blocks(p).values())} "
                      f"group={group_of[(study, pid)]}")
        elif args.cmd == "claims" and args.markdown:
            print(claims_markdown(args.results))
        elif args.cmd == "claims":
            rows, note = claim_rows(args.results)
            if note:
                print(f"lmcflow claims: {note}", file=sys.stderr)
            for r in rows:
                print(format_claim(r))
        elif args.cmd == "trace":
            print(trace(args.claim, args.config, args.results))
        elif args.cmd == "verify" and args.against:
            comparison = compare(args.results, args.against)
            print("\n".join(comparison.report()))
            return 0 if comparison.verdicts_agree else 1
        elif args.cmd == "verify":
            return run_verify(args.results, args.workdir, args.published)
    except (ConfigError, CorruptFileError) as err:
        print(f"lmcflow {args.cmd}: {err}", file=sys.stderr)
        return 1 if isinstance(err, MissingInput) else 2
    return 0


def run_verify(results: str, workdir: str | None, published: bool = False) -> int:
    results_folder(results)  # a ConfigError if it is none
    if workdir is not None and not Path(workdir).is_dir():
        print(f"--workdir {workdir}: no such folder", file=sys.stderr)
        return 2
    result = verify(results, workdir, published)
    for problem in result.problems:
        print(problem)
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
