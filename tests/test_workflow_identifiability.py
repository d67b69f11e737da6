"""End to end: the identifiability studies on a tiny synthetic config in a temp directory."""
import json
from pathlib import Path

import pandas as pd
import pytest

from lmcflow.tables import TABLES
from tests.conftest import run_snakemake

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/configs/tiny_identifiability.yaml"
CLAIMS = ("sigma-f-identity", "sigma-f-unaligned-barrier", "intrinsic-dimension", "identifiability-tradeoff",
          "subspace-coherence")

pytestmark = [pytest.mark.slow]


def snakemake(workdir, *args, timeout=900):
    return run_snakemake(TINY, workdir, *args, timeout=timeout)


def test_claim_targets_build_only_what_they_need(tmp_path):
    out = snakemake(tmp_path, "-n", "results/claims/identifiability-tradeoff.json")
    assert "rule train" in out
    for rule in ("interpolate", "identifiability", "swap_costs", "coherence_table", "result_table"):
        assert f"rule {rule}:" not in out, rule
    out = snakemake(tmp_path, "-n", "results/claims/intrinsic-dimension.json")
    assert "rule swap_costs:" in out and "rule identifiability:" not in out and "rule interpolate:" not in out
    out = snakemake(tmp_path, "-n", "results/claims/subspace-coherence.json")
    assert "rule coherence_table:" in out and "rule swap_costs:" not in out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    wd = tmp_path_factory.mktemp("e2e_ident")
    snakemake(wd)
    return wd


def table(wd, kind):
    df = pd.read_parquet(wd / f"results/tables/{kind}.parquet")
    assert list(df.columns) == [c for c, _ in TABLES[kind]], kind
    assert len(df) > 0, kind
    return df


def test_identifiability_tables(run):
    ident = table(run, "identifiability")
    # study sym: 2 datasets × 2 σ_F × 3 pairs × 2 hidden layers
    assert len(ident) == 24 and set(ident.layer) == {0, 1} and set(ident.sigma_f) == {0.0, 1.0}
    assert (ident.optimal >= ident.identity - 1e-6).all() and (ident.optimal >= ident.random_mean - 1e-6).all()
    assert set(ident.data_k) == {2, 8} and (ident.n_fixed == "[0.25, 0.25, 0.5]").all()
    lmc = table(run, "identifiability_lmc")
    assert len(lmc) == 4 * 3 * 2 * 2 and set(lmc.method) == {"identity", "activation_matching"}
    assert (lmc.relative_accuracy_barrier <= 1e-9).all()
    # same endpoints on both paths: B permuted is the same function
    piv = lmc.pivot_table(index=["point", "seed_a", "seed_b", "split"], columns="method", values="loss_b")
    assert (piv.identity - piv.activation_matching).abs().max() < 1e-4
    swap = table(run, "swap_costs")
    assert len(swap) == 4 * 3 * 2 and set(swap.layer) == {"layers.0", "layers.1"}
    assert swap.swap_frac_negative.between(0, 1).all() and swap.swap_frac_cheap.between(0, 1).all()
    mat = table(run, "swap_matrix")
    assert len(mat) == 4 * 3 * 2 * 8 * 8
    coh = table(run, "coherence")
    assert set(coh.data_nu.round(6)) == {1.0, 0.2} and (coh.nu - coh.data_nu).abs().max() < 1e-6
    assert set(coh.k) == {2} and len(coh) == 2 * 3 * 2  # 2 ν × 3 pairs × 2 splits
    # foundation tables hold every study
    runs = table(run, "runs")
    assert set(runs.study) == {"sym", "tradeoff", "coh"} and len(runs) == 24


def test_claims_and_figures(run):
    for cid in CLAIMS:
        res = json.loads((run / f"results/claims/{cid}.json").read_text())
        # 3 seeds: statistics computed, no interval, so no verdict (a verdict needs ≥ 4 seeds)
        assert res["verdict"] == "inconclusive" and res["reason"].startswith("too few seeds (3 < 4)"), cid
        assert res["n_seeds"] == 3 and res["statistic"] is not None and res["ci_low"] is None, cid
        assert res["paper"].startswith("Bürgin"), cid
    intrinsic = json.loads((run / "results/claims/intrinsic-dimension.json").read_text())
    assert intrinsic["details"]["arm"] == "trained 2 epochs" and intrinsic["details"]["k"] == [2, 8]
    claims = pd.read_parquet(run / "results/tables/claims.parquet")
    assert sorted(claims.claim_id) == sorted(CLAIMS)
    figs = {"sym": ["objective_vs_sigma_f", "barrier_vs_sigma_f", "swap_cost_heatmaps", "swap_cost_vs_k"],
            "coh": ["barrier_vs_nu"]}
    for study, names in figs.items():
        for name in names:
            for ext in ("png", "pdf"):
                assert (run / f"results/figures/{study}/{name}.{ext}").stat().st_size > 1000, (study, name)


def test_rerun_is_a_no_op(run):
    assert "Nothing to be done" in snakemake(run, "-n")
