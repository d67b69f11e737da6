"""The CLI on missing, empty and partial folders and bad config files: lmcflow's own message naming what is
missing and the command that makes it, never a traceback (each case as a user runs it, in a subprocess)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmcflow.io import write_json
from lmcflow.tables import write_table

REPO = Path(__file__).resolve().parents[1]


def lmcflow(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmcflow.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


def claim_json() -> dict:
    from tests.claim_tables import verdict
    from tests.test_claim_power import CASES

    res = verdict("width-merge-accuracy", CASES["width-merge-accuracy"](True))
    res["scale"] = {"dataset": ["fashion_mnist"], "arch": ["mlp"], "widths": [0.25, 1.0, 4.0], "epochs": [5]}
    return res


@pytest.fixture
def folders(tmp_path):
    """empty/, claims_only/ (claim JSONs, no claims.parquet), tables_only/ (a table, no claims), old/ (a
    claims.parquet of no lmcflow schema version), truncated/ (a cut claims.parquet), bad_json/ (a claim file
    that is not JSON)."""
    (tmp_path / "empty").mkdir()
    write_json(tmp_path / "claims_only/claims/width-merge-accuracy.json", claim_json())
    write_table(tmp_path / "tables_only/tables/runs.parquet", "runs", [])
    (tmp_path / "old/tables").mkdir(parents=True)
    pq.write_table(pa.table({"claim_id": ["c"]}), tmp_path / "old/tables/claims.parquet")
    write_table(tmp_path / "truncated/tables/claims.parquet", "claims", [])
    path = tmp_path / "truncated/tables/claims.parquet"
    path.write_bytes(path.read_bytes()[:100])
    (tmp_path / "bad_json/claims").mkdir(parents=True)
    (tmp_path / "bad_json/claims/c.json").write_text("{not json")
    (tmp_path / "bad.yaml").write_text("studies: [\n")
    return tmp_path


CASES = {  # args (folder names relative to the fixture), exit status, start of stderr's first line
    "claims-missing-folder": (("claims", "nope"), 2, "lmcflow claims: {t}/nope: no such results folder; a run "
                                                     "makes it: `snakemake --cores all`"),
    "claims-empty-folder": (("claims", "empty"), 1, "lmcflow claims: {t}/empty: no claims: neither "
                                                    "{t}/empty/tables/claims.parquet nor {t}/empty/claims/*.json; "
                                                    "make them with `snakemake --cores all "
                                                    "{t}/empty/tables/claims.parquet`"),
    "claims-tables-only": (("claims", "tables_only"), 1, "lmcflow claims: {t}/tables_only: no claims: neither"),
    "claims-old-table": (("claims", "old"), 2, "lmcflow claims: {t}/old/tables/claims.parquet: table schema "
                                               "version missing != 2"),
    "claims-truncated-table": (("claims", "truncated"), 2, "lmcflow claims: {t}/truncated/tables/claims.parquet: "
                                                           "not a readable Parquet file ("),
    "claims-bad-json": (("claims", "bad_json"), 2, "lmcflow claims: {t}/bad_json/claims/c.json: not a claim JSON "
                                                   "written by lmcflow (JSONDecodeError"),
    "markdown-missing-folder": (("claims", "--markdown", "nope"), 2, "lmcflow claims: {t}/nope: no such results "
                                                                   "folder"),
    "markdown-empty-folder": (("claims", "--markdown", "tables_only"), 1, "lmcflow claims: {t}/tables_only/claims: "
                                                                         "no claim JSONs to tabulate; a run makes"),
    "markdown-bad-json": (("claims", "--markdown", "bad_json"), 2, "lmcflow claims: {t}/bad_json/claims/c.json: "
                                                                   "not a claim JSON written by lmcflow"),
    "update-doc-missing-file": (("claims", "--update-doc", "MISSING.md"), 1, "lmcflow claims: {t}/MISSING.md: no "
                                                                            "such file; --update-doc rewrites"),
    "update-doc-no-block": (("claims", "--update-doc", "bad.yaml"), 1, "lmcflow claims: {t}/bad.yaml: holds no "
                                                                       "verdict table to update"),
    "verify-missing-folder": (("verify", "nope"), 2, "lmcflow verify: {t}/nope: no such results folder"),
    "verify-empty-folder": (("verify", "empty"), 2, "lmcflow verify: {t}/empty: not a results folder (no tables/, "
                                                    "claims/ or provenance.json); a run makes one: "
                                                    "`snakemake --cores all`"),
    "against-empty-folder": (("verify", "claims_only", "--against", "empty"), 2,
                             "lmcflow verify: --against {t}/empty: not a results folder"),
    "against-missing-folder": (("verify", "nope", "--against", "claims_only"), 2,
                               "lmcflow verify: {t}/nope: no such results folder"),
    "validate-missing-config": (("validate", "nope.yaml"), 2, "lmcflow validate: {t}/nope.yaml: no such config "
                                                              "file; give a YAML config"),
    "points-folder-as-config": (("points", "empty"), 2, "lmcflow points: {t}/empty: no such config file (a folder)"),
    "validate-bad-yaml": (("validate", "bad.yaml"), 2, "lmcflow validate: {t}/bad.yaml:2:1: not valid YAML: "),
}


@pytest.mark.parametrize("case", CASES)
def test_missing_inputs_are_named_without_a_traceback(folders, case):
    args, status, first = CASES[case]
    literal = ("claims", "verify", "validate", "points", "--against", "--markdown", "--update-doc")
    args = [a if a in literal else folders / a for a in args]
    res = lmcflow(*args)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode == status, res.stderr
    assert res.stderr.splitlines()[0].startswith(first.format(t=folders)), res.stderr


def test_claims_read_the_jsons_when_the_table_is_missing(folders):
    """The README's `snakemake --cores all results/claims/width-merge-accuracy.json` leaves no claims.parquet."""
    res = lmcflow("claims", folders / "claims_only")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines() == [
        f"lmcflow claims: {folders}/claims_only/tables/claims.parquet is missing: read the 1 claim JSONs in "
        f"{folders}/claims_only/claims; `snakemake --cores all {folders}/claims_only/tables/claims.parquet` "
        "writes the table"]
    assert res.stdout.startswith("width-merge-accuracy") and "supported" in res.stdout and "n_seeds=6" in res.stdout
    # the same text as from the table rule claims_table writes from these JSONs
    from lmcflow.jobs.report import run_claims_table

    run_claims_table([folders / "claims_only/claims/width-merge-accuracy.json"],
                     folders / "claims_only/tables/claims.parquet")
    from_table = lmcflow("claims", folders / "claims_only")
    assert from_table.returncode == 0 and from_table.stderr == "" and from_table.stdout == res.stdout
