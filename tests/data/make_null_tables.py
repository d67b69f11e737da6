"""Remake tests/data/null_tables/: the tables the 18 claims read, from two small real runs
(tests/configs/null_tables.yaml: the width study; tests/configs/null_tables_identifiability.yaml: the
identifiability studies) whose every point has null partners (``analysis.null_partners``: untrained,
shuffled-label and collapsed), for tests/test_claim_nulls.py.

    PYTHONPATH=. .venv/bin/python tests/data/make_null_tables.py [--workdir DIR] [--cores N] [--config C ...]

``--config``: remake only these configs' tables (the others' stay, with their provenance records).

Runs ``snakemake`` per config in DIR/<config name> (default: a temporary directory; a finished run there is
reused) and keeps, per study, the tables its claims read with the rows they read (the width and coherence pair
tables of the test split; the σ_F and k claims read the train split, the authors' barrier),
real and partner rows (column ``partner``), as ``<study>/<kind>.parquet``, plus ``provenance.json`` (commit,
config hashes, torch, row counts). About ten minutes on one free core. Only when a config or the science changes
on purpose.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lmcflow.provenance import package_version  # noqa: E402
from lmcflow.tables import read_table, write_table  # noqa: E402

OUT = REPO / "tests/data/null_tables"
TEST_SPLIT = {"split": "test"}
# config -> study -> the tables its claims read ({column: value}: the rows kept)
RECORDED = {
    "tests/configs/null_tables.yaml": {
        "width": {"barriers": TEST_SPLIT, "interpolation": TEST_SPLIT, "layer_metrics": {}, "active_overlap": {},
                  "runs": {}}},
    "tests/configs/null_tables_identifiability.yaml": {
        "sym": {"identifiability": {}, "identifiability_lmc": {}, "interpolation": {},
                "swap_costs": {}, "runs": {}},
        "tradeoff": {"runs": {}},
        "coh": {"coherence": TEST_SPLIT, "runs": {}}},
}


def run(config: str, workdir: Path, cores: int) -> None:
    tables = [f"work/tables/{study}/{kind}.parquet" for study, kinds in RECORDED[config].items() for kind in kinds]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile", str(REPO / config),
           "--cores", str(cores), "--directory", str(workdir), *tables]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def record(config: str, workdir: Path) -> dict:
    counts = {}
    for study, kinds in RECORDED[config].items():
        (OUT / study).mkdir(parents=True, exist_ok=True)
        for kind, where in kinds.items():
            df = read_table(workdir / f"work/tables/{study}/{kind}.parquet", kind)
            for col, value in where.items():
                df = df[df[col] == value]
            write_table(OUT / study / f"{kind}.parquet", kind, df.reset_index(drop=True))
            counts[f"{study}/{kind}"] = {str(k): int(v) for k, v in df["partner"].value_counts().sort_index().items()}
    return {"config": config, "config_sha256": hashlib.sha256((REPO / config).read_bytes()).hexdigest(),
            "rows_by_partner": counts}


def write_provenance(records: list) -> None:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    prov = {"commit": commit.strip(), "torch": package_version("torch"), "runs": records}
    (OUT / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", help="run directory, one subdirectory per config (default: a temporary one)")
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--config", action="append", choices=list(RECORDED), help="only these configs (repeatable)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.workdir or tmp)
        chosen = args.config or list(RECORDED)
        old = OUT / "provenance.json"
        records = [r for r in (json.loads(old.read_text())["runs"] if old.exists() else [])
                   if r["config"] not in chosen]
        for config in chosen:
            workdir = base / Path(config).stem
            workdir.mkdir(parents=True, exist_ok=True)
            run(config, workdir, args.cores)
            records.append(record(config, workdir))
        write_provenance(sorted(records, key=lambda r: list(RECORDED).index(r["config"])))
    print(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()
