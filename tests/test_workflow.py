"""End to end: the workflow on a tiny config in a temp directory."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmcflow.tables import TABLES

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/configs/tiny.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]


def snakemake(workdir, *args, timeout=900):
    cmd = [SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--configfile", str(TINY),
           "--directory", str(workdir), "--cores", "2", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def test_claim_target_builds_only_what_it_needs(tmp_path):
    out = snakemake(tmp_path, "-n", "results/claims/width-merge-accuracy.json")
    assert "rule train" in out and "rule interpolate" in out
    assert "width_figures" not in out and "result_table" not in out and "claims_table" not in out


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory):
    wd = tmp_path_factory.mktemp("e2e")
    snakemake(wd)
    return wd


def test_tables_have_declared_schemas(workflow_run):
    for kind in ("runs", "interpolation", "barriers", "claims"):
        df = pd.read_parquet(workflow_run / f"results/tables/{kind}.parquet")
        assert list(df.columns) == [c for c, _ in TABLES[kind]], kind
        assert len(df) > 0
    runs = pd.read_parquet(workflow_run / "results/tables/runs.parquet")
    assert len(runs) == 6 and set(runs.width) == {0.25, 1.0} and runs.checkpoint_sha256.str.len().eq(64).all()
    assert (runs.test_acc > 0.5).all()  # one epoch on real Fashion-MNIST already learns
    interp = pd.read_parquet(workflow_run / "results/tables/interpolation.parquet")
    # 2 widths × 3 pairs × 3 λ × 2 splits
    assert len(interp) == 36 and set(interp.lam) == {0.0, 0.5, 1.0}
    # λ=0 and λ=1 are the endpoint models: their test loss equals the run's test loss.
    ends = interp[(interp.split == "test") & (interp.lam == 0)].merge(
        runs, left_on=["width", "seed_a"], right_on=["width", "seed"])
    assert (ends.loss - ends.test_loss).abs().max() < 1e-5
    barriers = pd.read_parquet(workflow_run / "results/tables/barriers.parquet")
    assert set(barriers.definition) == {"midpoint", "max_minus_mean", "entezari"}


def test_claim_json_and_figures(workflow_run):
    for cid in ("width-merge-accuracy", "temperature-calibration"):
        res = json.loads((workflow_run / f"results/claims/{cid}.json").read_text())
        assert res["verdict"] in {"supported", "not_supported", "inconclusive"}
        assert res["n_pairs"] == 3 and res["ci_low"] <= res["statistic"] <= res["ci_high"]
        assert res["scale"]["widths"] == [0.25, 1.0]
    claims = pd.read_parquet(workflow_run / "results/tables/claims.parquet")
    assert sorted(claims.claim_id) == ["temperature-calibration", "width-merge-accuracy"]
    for name in ("barrier_vs_width", "error_along_lambda", "loss_barrier_raw_vs_calibrated"):
        for ext in ("png", "pdf"):
            assert (workflow_run / f"results/figures/width/{name}.{ext}").stat().st_size > 1000


def test_rerun_is_a_no_op_and_report_builds(workflow_run):
    out = snakemake(workflow_run, "-n")
    assert "Nothing to be done" in out
    snakemake(workflow_run, "--report", "results/report.html")
    assert (workflow_run / "results/report.html").stat().st_size > 10000
