"""End to end: one config run twice in two folders gives byte-identical artifacts, and `lmcflow verify`
passes on a clean run and names each damaged file.

The config is a cut-down tiny.yaml (``tests.conftest.small_config``, 32 jobs): a 2000-example Fashion-MNIST
subset, two widths, three seeds, weight matching at the wider width, one claim; every kind of artifact the width
study writes (prepared data, checkpoints, permutation files, tables, figures, a claim JSON, provenance) occurs.
One run is the session's (``small_run``, made under umask 022), the other is made here.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lmcflow.cli import main
from lmcflow.io import TABLE_KIND_KEY
from lmcflow.provenance import code_version, torch_version
from lmcflow.tables import RUN_SPECIFIC_COLUMNS
from tests.conftest import copy_run as copy_whole_run
from tests.conftest import run_snakemake

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]

# Not artifacts: job logs carry timestamps and timings, Snakemake's report embeds run times and its
# creation date, and .snakemake/ is Snakemake's own bookkeeping.
EXCLUDED = ("logs", ".snakemake", "results/report.html")


@pytest.fixture(scope="module")
def config(small_config_file):
    return small_config_file


@pytest.fixture(scope="module")
def run_a(small_run, tmp_path_factory):
    """The session's run of ``small_config`` (copied: the report test writes into it), shared by the provenance and
    verify tests (they copy it before damaging anything)."""
    return copy_whole_run(small_run, tmp_path_factory.mktemp("run_a") / "run")


@pytest.fixture(scope="module")
def run_b(config, tmp_path_factory):
    """The same config run again in another folder."""
    wd = tmp_path_factory.mktemp("run_b")
    run_snakemake(config, wd)
    return wd


def artifacts(wd: Path) -> list[str]:
    files = [str(p.relative_to(wd)) for top in ("work", "results") for p in (wd / top).rglob("*") if p.is_file()]
    return sorted(f for f in files if not f.startswith(EXCLUDED))


def test_two_runs_give_byte_identical_artifacts(run_a, run_b):
    a, b = run_a, run_b
    files = artifacts(a)
    assert files == artifacts(b)
    for kind in ("work/data/fmnist_small.safetensors", "work/models/width/width-1/bundle-0/seed-2.safetensors",
                 "work/align/width/width-1/weight_matching/blocks-0-0.safetensors", "results/claims/",
                 "results/figures/width/barrier_vs_width.pdf", "results/figures/width/barrier_vs_width.png",
                 "results/provenance.json", "results/provenance.html", "results/tables/claims.parquet"):
        assert any(f.startswith(kind) for f in files), kind
    differ, timing_tables = [], set()
    for f in files:
        if (a / f).read_bytes() == (b / f).read_bytes():
            continue
        if not f.endswith(".parquet"):
            differ.append(f)
            continue
        kind = pq.read_schema(a / f).metadata[TABLE_KIND_KEY].decode()
        drop = list(RUN_SPECIFIC_COLUMNS.get(kind, ()))
        assert drop, f"{f}: a {kind!r} table has no run-specific columns, yet its bytes differ"
        ta, tb = pd.read_parquet(a / f), pd.read_parquet(b / f)
        pd.testing.assert_frame_equal(ta.drop(columns=drop), tb.drop(columns=drop), obj=f)
        timing_tables.add(kind)
    assert differ == [], f"artifacts whose bytes differ between two runs: {differ}"
    assert timing_tables == {"runs", "alignment"}  # the timings differ, as they should


def test_claim_records_provenance_and_tables_read(run_a):
    a = run_a
    claim = json.loads((a / "results/claims/width-merge-accuracy.json").read_text())
    # the Table-1 barrier, the midpoint against both endpoints (interpolation) and the gates' models (runs)
    assert claim["tables_read"] == ["work/tables/width/barriers.parquet", "work/tables/width/interpolation.parquet",
                                    "work/tables/width/runs.parquet"]
    runs = pd.read_parquet(a / "results/tables/runs.parquet")
    assert claim["provenance"] == {**code_version(), "torch_version": torch_version(),
                                   "device": sorted(set(runs.device)), "precision": ["fp32"],
                                   "cpu_kernels": ["native"], "cpu_capability": sorted(set(runs.cpu_capability)),
                                   "train_threads": [1]}
    prov = json.loads((a / "results/provenance.json").read_text())
    assert {k: prov[k] for k in claim["provenance"]} == claim["provenance"]  # plus the machine's facts
    assert {"mkl_version", "onednn_version", "cpu_model", "cpu_simd", "train_threads"} <= set(prov)


def test_report_shows_provenance(run_a, config):
    a = run_a
    run_snakemake(config, a, "--report", "results/report.html")
    report = (a / "results/report.html").read_text()
    # the report embeds each result file as a base64 data URI
    found = re.findall(r"data:text/html;charset=[^;]+;filename=provenance\.html;base64,([A-Za-z0-9+/=]+)", report)
    assert found, "provenance.html is not in the report"
    page = base64.b64decode(found[0]).decode()
    assert page == (a / "results/provenance.html").read_text()
    assert torch_version() in page and "cpu:" in page and str(code_version()["lmcflow_commit"] or "") in page


def test_clean_run_verifies(run_a, capsys):
    a = run_a
    assert main(["verify", str(a / "results")]) == 0
    out = capsys.readouterr().out
    # 3 seeds form one pair block: one permutation file holds its 3 pairs
    assert out.startswith("lmcflow verify: 0 problems") and "6 checkpoints, 1 permutation file, 1 claim)" in out


def copy_run(src: Path, dst: Path) -> Path:
    """A copy of a run (mtimes kept) without what verify does not read."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("data", "logs", ".snakemake"))
    return dst


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:1000])


def edit_table(path: Path) -> None:
    df = pd.read_parquet(path)
    df.loc[df.index[0], "value"] = -1.0  # a barrier made to look better
    df.to_parquet(path)


@pytest.mark.parametrize("damage,path,expect", [
    (truncate, "work/models/width/width-1/bundle-0/seed-2.safetensors", "recorded in results/tables/runs.parquet"),
    (Path.unlink, "work/align/width/width-1/weight_matching/blocks-0-0.safetensors",
     "missing (named in results/tables/alignment.parquet"),
    (edit_table, "results/tables/barriers.parquet", "no lmcflow schema version"),
], ids=["truncated-checkpoint", "deleted-permutation-file", "hand-edited-table"])
def test_damage_is_named(run_a, tmp_path, capsys, damage, path, expect):
    wd = copy_run(run_a, tmp_path / "run")
    damage(wd / path)
    assert main(["verify", str(wd / "results")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}: ") and expect in lines[0], lines
    if path.startswith("results/tables/"):  # every config's run makes its result tables: the command, for the default
        assert len(lines) == 4 and lines[2].startswith("Rebuild with the jobs that make this file"), lines
        assert lines[3].strip().endswith(f"--forcerun {path}"), lines
    else:  # verify had no --configfile: the default's run makes no such file
        assert len(lines) == 3 and lines[2].startswith("Made by no job of the run of config/config.yaml"), lines
    rules = {"work/models": "train", "work/align": "align", "results/tables": f"result_table_{Path(path).stem}"}
    rule = rules["/".join(path.split("/")[:2])]
    assert lines[0].endswith(f"[rule {rule}]") and lines[1].startswith("lmcflow verify: 1 problem in")
    # the CLI as a user calls it, from the working directory
    res = subprocess.run([sys.executable, "-m", "lmcflow.cli", "verify"], cwd=wd, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert res.returncode == 1 and res.stdout.startswith(f"{path}: "), res.stdout + res.stderr
