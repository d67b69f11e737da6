"""Small command line for inspecting configs and results without Snakemake.

    lmcflow validate config/config.yaml   # schema + semantic checks, as at DAG construction
    lmcflow points config/config.yaml     # every study point and its seeds/pairs
    lmcflow claims [results]              # verdicts, statistic and CI, controls, the paper's value beside ours
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

SCHEMA = Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml"


def load_and_check(path: str) -> dict:
    import jsonschema

    from lmcflow.claims import REGISTRY
    from lmcflow.config import check_semantics, expand_points
    from lmcflow.data import dataset_names
    from lmcflow.models import ARCHITECTURES
    from lmcflow.validation import validate_points

    cfg = yaml.safe_load(Path(path).read_text())
    try:
        jsonschema.validate(cfg, yaml.safe_load(SCHEMA.read_text()))
    except jsonschema.ValidationError as err:
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise SystemExit(f"{path}: {key}: {err.message}")
    check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
    points = expand_points(cfg)
    validate_points(points, str(SCHEMA))
    return cfg, points


def _g(v) -> str:
    import math

    return "—" if v is None or math.isnan(v) else f"{v:.4g}"


def format_claim(r: dict) -> str:
    """A claims.parquet row as text: verdict, our statistic with its CI, the controls, the paper's value
    beside ours (each at its scale)."""
    import json

    ci = "(no CI)" if _g(r["ci_low"]) == "—" else f"[{_g(r['ci_low'])}, {_g(r['ci_high'])}]"
    scale = json.loads(r["scale"]) if r["scale"] else {}
    ours_at = ", ".join(f"{k}={scale[k]}" for k in ("dataset", "arch", "widths", "epochs") if scale.get(k))
    lines = [(f"{r['claim_id']:28s} {r['verdict']:14s} {r['statistic_name']} = {_g(r['statistic'])} {ci} "
              f"(n_seeds={r['n_seeds']}, study={r['study']})")]
    if r["reason"]:
        lines.append(f"{'':28s} reason: {r['reason']}")
    if r["controls"]:
        lines.append(f"{'':28s} controls: {r['controls']}")
    if r["paper_quantity"]:
        lines.append(f"{'':28s} paper: {r['paper_quantity']} = {_g(r['paper_value'])} ({r['paper_scale']}) | "
                     f"ours: {_g(r['our_value'])} ({ours_at})")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lmcflow", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="check a config file").add_argument("config")
    sub.add_parser("points", help="list a config's study points").add_argument("config")
    c = sub.add_parser("claims", help="print claim verdicts")
    c.add_argument("results", nargs="?", default="results")
    args = ap.parse_args(argv)
    from lmcflow.config import ConfigError

    try:
        if args.cmd == "validate":
            _, points = load_and_check(args.config)
            print(f"{args.config}: valid ({len(points)} points)")
        elif args.cmd == "points":
            _, points = load_and_check(args.config)
            for (study, pid), p in points.items():
                print(f"{study:24s} {pid:40s} dataset={p.dataset} seeds={p.seeds} pairs={len(p.pairs)}")
        elif args.cmd == "claims":
            from lmcflow.io import read_parquet

            df = read_parquet(Path(args.results) / "tables/claims.parquet", "claims")
            for r in df.itertuples():
                print(format_claim(r._asdict()))
    except ConfigError as err:
        print(f"{getattr(args, 'config', '')}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
