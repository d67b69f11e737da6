"""Small command line for inspecting configs and results without Snakemake.

    lmcflow validate [my.yaml] [--config defaults.train.epochs=3 ...]  # schema + semantic checks, as at DAG
                                          # construction
    lmcflow run [SNAKEMAKE ARGS]          # those checks on the run's --configfile/--config, then snakemake
    lmcflow points [my.yaml]              # every study point, its seeds/pairs and grid group
    lmcflow claims [results]              # verdicts, statistic and CI, convention margin, endpoint gate, controls,
                                          # real vs null-partner statistics, the paper's value beside ours and
                                          # whether it is comparable
    lmcflow claims --markdown [results]   # the verdicts as a Markdown table, from results/claims/*.json
    lmcflow claims --nulls-markdown [results]  # per pair claim: headline statistic, real vs each null partner kind
    lmcflow claims --training-markdown [results]  # per width and arm: epochs, time, late loss drop, test accuracy
    lmcflow claims --update-doc FILE      # rewrite FILE's marked verdict and null tables from the runs they name
    lmcflow verify [results]              # rehash checkpoints/permutations, check tables and claims
    lmcflow verify evidence/RUN/results --published  # tables and claims of a published run
    lmcflow verify [results] --against DIR  # same bits? same verdicts? (exit 1 unless every verdict agrees)
    lmcflow trace CLAIM [--config my.yaml] # verdict -> statistic -> tables -> rules and job functions -> config keys
    lmcflow plan --configfile my.yaml [--max-runtime MIN]  # per rule: jobs, longest request, hours requested and
                                          # estimated, jobs above the cluster limit (no data needed)
    lmcflow spec MODULE:FACTORY --in-shape 3,32,32 [--num-classes 10] [--kwargs JSON] [--override PATH=fixed]
                                          # a model's derived permutation groups, coverage by layer, the proof's
                                          # residual and what was refused (lmcflow/spec_report.py)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

from lmcflow.claims import REGISTRY
from lmcflow.claims.regime import BELOW_REGIME
from lmcflow.compare import compare
from lmcflow.config import ConfigError, check_semantics, expand_points, parse_overrides, resolve_config
from lmcflow.config.catalog import ARCHITECTURES, dataset_names
from lmcflow.config.point_schema import validate_points
from lmcflow.doc_tables import (  # noqa: F401  (the names tests and docs import from the command line)
    VERDICT_BLOCK,
    claims_markdown,
    nulls_markdown,
    training_markdown,
    update_doc_tables,
    verdict_table,
)
from lmcflow.grouping import all_grid_groups, pair_blocks
from lmcflow.inputs import MissingInput, claim_rows, read_config, results_folder
from lmcflow.io import CorruptFileError
from lmcflow.plan.facade import Plan
from lmcflow.plan.imported import Imports
from lmcflow.plan.requests import group_fits
from lmcflow.plan.summary import format_plan
from lmcflow.plan.trace import trace
from lmcflow.provenance import CHECKOUT
from lmcflow.verify import verify


def load_and_check(path: str | None, overrides: list[str] | None = None) -> tuple[dict, dict]:
    """A config as a run would use it (``resolve_config``: ``path`` as --configfile, or the embedded default,
    ``overrides`` as --config entries), checked like at DAG construction; returns (config, points)."""
    cfg = read_config(path, overrides)
    check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
    points = expand_points(cfg)
    validate_points(points)
    Imports(cfg)  # imported checkpoints exist, one per seed (relative to the cwd)
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
    if r.get("regime"):  # a width claim: the paper's scale beside ours, and where the barrier's fit meets its bound
        below = r.get("verdict_qualifier") == BELOW_REGIME
        crossing = ("" if _g(r.get("crossing_width")) == "—" else
                    f"; predicted crossing width ×{_g(r['crossing_width'])}"
                    + ("" if _g(r.get("crossing_width_ci_low")) == "—" else
                       f" [{_g(r['crossing_width_ci_low'])}, {_g(r['crossing_width_ci_high'])}]"))
        lines.append(f"{'':28s} regime: {r['regime']}{crossing}"
                     + (" — below the paper's regime: not evidence against the paper" if below else ""))
    if r["reason"]:
        lines.append(f"{'':28s} reason: {r['reason']}")
    if r.get("convention_margin"):  # the verdict rests on a threshold we chose
        lines.append(f"{'':28s} {r['convention_margin']}")
    if r.get("endpoint_gate"):
        gate = r["endpoint_gate"]  # "passed (n models)", or a failed gate's reason, which names the gate itself
        lines.append(f"{'':28s} {gate if gate.startswith('endpoint gate:') else f'endpoint gate: {gate}'}")
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lmcflow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    val = sub.add_parser("validate", help="check a config file (default: the embedded config/config.yaml)")
    val.add_argument("config", nargs="?")
    val.add_argument("--config", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                     help="overrides as a run takes them; a dotted KEY names a nested key (defaults.train.epochs=3)")
    sub.add_parser("run", help="check the config of a snakemake command line, then run it: `lmcflow run --cores "
                               "all --configfile my.yaml --config defaults.train.epochs=3`", add_help=False)
    sub.add_parser("points", help="list a config's study points").add_argument("config", nargs="?")
    c = sub.add_parser("claims", help="print claim verdicts")
    c.add_argument("results", nargs="?", default="results")
    c.add_argument("--markdown", action="store_true", help="a Markdown table from RESULTS/claims/*.json")
    c.add_argument("--nulls-markdown", action="store_true", help="a Markdown table of every pair claim's headline "
                   "statistic on real pairs and on each null partner kind, from RESULTS/claims/*.json")
    c.add_argument("--training-markdown", action="store_true", help="a Markdown table of the run's trained models "
                   "per study, width, weight decay and partner: epochs, time, late loss drop, test accuracy")
    c.add_argument("--update-doc", metavar="FILE", nargs="+", help="rewrite the verdict tables between "
                   "'<!-- verdicts: lmcflow claims --markdown DIR -->' and '<!-- /verdicts -->' in FILE from DIR "
                   "(relative to the current directory)")
    v = sub.add_parser("verify", help="check that a results folder is what its tables say it is (exit 1 if not)")
    v.add_argument("results", nargs="?", default="results")
    v.add_argument("--workdir", help="the workflow's working directory, which the paths in the tables are "
                                     "relative to (default: the results folder's parent)")
    v.add_argument("--configfile", action="append", default=[], metavar="FILE",
                   help="the run's --configfile (repeat for several; default: the embedded config/config.yaml): "
                        "the printed repair command rebuilds each damaged file in that run")
    v.add_argument("--published", action="store_true", help="a published results folder (evidence/<run>/results): "
                   "tables and claims only; its checkpoints are not shipped and git keeps no file times")
    v.add_argument("--against", metavar="DIR", help="compare with another results folder instead: which files are "
                                                     "bit-identical, how tables differ, whether every verdict agrees")
    tr = sub.add_parser("trace", help="a claim's chain: verdict, statistic, tables, rules, job functions, config keys")
    tr.add_argument("claim")
    tr.add_argument("--config", help="the config that configures the claim (default: the first shipped one)")
    tr.add_argument("--results", help="the results folder holding its verdict (default: the config's)")
    pl = sub.add_parser("plan", help="what a run asks a cluster for, per rule, before anything is submitted")
    pl.add_argument("config", nargs="?", help="a config file (default: the embedded config/config.yaml)")
    pl.add_argument("--configfile", action="append", default=[], help="as snakemake's (repeatable)")
    pl.add_argument("--max-runtime", type=int, metavar="MIN", help="cluster.max_runtime for this plan (minutes)")
    pl.add_argument("--no-limit", action="store_true", help="cluster.max_runtime and max_mem_mb unset")
    sub.add_parser("spec", help="the permutation spec lmcflow derives for MODULE:FACTORY (lmcflow spec --help)",
                   add_help=False)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:  # everything after it is snakemake's
        return run_workflow(argv[1:])
    if argv[:1] == ["spec"]:  # torch's own process: this command line stays torch-free
        os.execv(sys.executable, [sys.executable, "-m", "lmcflow.spec_report", *argv[1:]])
    args = ap.parse_args(argv)
    try:
        if args.cmd == "plan":
            return run_plan([*([args.config] if args.config else []), *args.configfile], args.max_runtime,
                            args.no_limit)
        if args.cmd == "validate":
            _, points = load_and_check(args.config, args.overrides)
            print(f"{args.config or 'config/config.yaml'}: valid ({len(points)} points)")
        elif args.cmd == "points":
            cfg, points = load_and_check(args.config)
            groups = all_grid_groups(points, group_fits(cfg))  # split to fit the cluster limit, as the plan's
            group_of = {(s, p.point): g for (s, g), pts in groups.items() for p in pts}
            for (study, pid), p in points.items():
                print(f"{study:24s} {pid:40s} dataset={p.dataset} seeds={p.seeds} "
                      f"pairs={sum(len(v) for v in pair_blocks(p).values())} "
                      f"group={group_of[(study, pid)]}")
        elif args.cmd == "claims" and args.update_doc:
            for doc in args.update_doc:
                changed = update_doc_tables(Path(doc), Path.cwd())
                print(f"{doc}: {'updated' if changed else 'unchanged'}")
        elif args.cmd == "claims" and args.markdown:
            print(claims_markdown(args.results))
        elif args.cmd == "claims" and args.nulls_markdown:
            print(nulls_markdown(args.results))
        elif args.cmd == "claims" and args.training_markdown:
            print(training_markdown(args.results))
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
            return run_verify(args.results, args.workdir, args.published, args.configfile)
    except (ConfigError, CorruptFileError) as err:
        print(f"lmcflow {args.cmd}: {err}", file=sys.stderr)
        return 1 if isinstance(err, MissingInput) else 2
    return 0


def run_plan(configfiles: list, max_runtime: int | None = None, no_limit: bool = False) -> int:
    """Print the plan's table; exit 1 where a job is above the limit (the table then shows the run unchecked)."""
    cluster = {"max_runtime": None, "max_mem_mb": None} if no_limit else {}
    if max_runtime is not None:
        cluster["max_runtime"] = max_runtime
    overrides = {"cluster": cluster} if cluster else None
    name = ", ".join(configfiles) or "config/config.yaml"
    try:
        print(format_plan(Plan.from_files(configfiles, overrides), name))
        return 0
    except ConfigError as err:
        if not str(err).startswith("cluster:"):
            raise
        print(f"lmcflow plan: {err}", file=sys.stderr)
        print(format_plan(Plan.from_files(configfiles, overrides, enforce_limits=False), name))
        return 1


def run_verify(results: str, workdir: str | None, published: bool = False, configfiles=()) -> int:
    results_folder(results)  # a ConfigError if it is none
    if workdir is not None and not Path(workdir).is_dir():
        print(f"--workdir {workdir}: no such folder", file=sys.stderr)
        return 2
    for f in configfiles:
        read_config(f)  # a missing or invalid config: its ConfigError, before any checking
    result = verify(results, workdir, published)
    for problem in result.problems:
        print(problem)
    print(result.summary())
    config = " ".join(configfiles) or "config/config.yaml (the embedded default)"
    missing, why_not = ([], "") if published else result.missing_outputs(configfiles)
    if missing:
        shown = missing[:12] + ([f"… and {len(missing) - 12} more"] if len(missing) > 12 else [])
        print(f"Incomplete: {len(missing)} output{'s' * (len(missing) != 1)} of the run of {config} missing:\n  "
              + "\n  ".join(shown) + f"\nMake them with:\n  {result.make_command(configfiles)}")
    elif why_not and result.ok:
        print(f"(not checked for missing outputs: {why_not})")
    if result.ok or published:
        return 0 if result.ok and not missing else 1
    targets, unowned = result.rebuild_targets(configfiles)
    if targets:
        print(f"Rebuild with the jobs that make {'these files' if len(result.problems) > 1 else 'this file'} and "
              f"those downstream, in the run of {config}:\n  {result.repair_command(targets, configfiles)}")
    if unowned:
        print(f"Made by no job of the run of {config} (give verify the run's --configfile): "
              + ", ".join(p.path for p in unowned))
    return 1


def run_workflow(args: list[str]) -> int:
    """``snakemake ARGS`` after lmcflow's checks of the config it names: Snakemake reads --configfile and
    --config before the workflow's code runs, so an empty or unparsable file or a dotted key would get
    Snakemake's error, not lmcflow's. Dotted --config keys are passed on as nested mappings."""
    try:
        configfiles, entries, rest = split_config_args(args)
        overrides = parse_overrides(entries)
        cfg = resolve_config(configfiles, overrides)
        check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
        validate_points(expand_points(cfg))
        Imports(cfg)
    except ConfigError as err:
        print(f"lmcflow run: {err}", file=sys.stderr)
        return 2
    exe = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))
    cmd = [exe, *rest]
    if not {"-s", "--snakefile"} & {a.split("=")[0] for a in rest}:
        cmd += ["--snakefile", str(CHECKOUT / "Snakefile")]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    if overrides:
        cmd += ["--config", *(f"{k}={snakemake_value(v)}" for k, v in overrides.items())]
    os.execv(exe, cmd)


def split_config_args(args: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(--configfile values, --config entries, the other arguments) of a snakemake command line; each option
    takes the values up to the next option, as Snakemake's own parser does."""
    files, entries, rest = [], [], []
    i = 0
    while i < len(args):
        opt, eq, value = args[i].partition("=") if args[i].startswith("--") else (args[i], "", "")
        target = {"--configfile": files, "--configfiles": files, "--config": entries, "-C": entries}.get(opt)
        if target is None:
            rest.append(args[i])
            i += 1
            continue
        if eq:
            target.append(value)
        i += 1
        while i < len(args) and not args[i].startswith("-"):
            target.append(args[i])
            i += 1
    return files, entries, rest


def snakemake_value(v) -> str:
    """A --config value as Snakemake's parser reads it back (mappings and lists as JSON, typed again by
    ``resolve_config``)."""
    if isinstance(v, bool):
        return str(v)
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


if __name__ == "__main__":
    sys.exit(main())
