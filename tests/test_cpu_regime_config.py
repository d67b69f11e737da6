"""config/cpu_regime.yaml: the width study ×1/16 … ×8 and intrinsic_dim on the authors' setup, planned as
snakemake -n plans it (lmcflow.plan), every claim configured for it."""
from pathlib import Path

from lmcflow.config import expand_points, resolve_config
from lmcflow.plan import job_counts

CONFIG = Path(__file__).resolve().parents[1] / "config" / "cpu_regime.yaml"


def test_the_regime_config_reaches_x8_in_octaves_with_five_seeds():
    cfg = resolve_config([str(CONFIG)])
    points = expand_points(cfg).values()
    width = [p for p in points if p.study == "width"]
    default = sorted({float(p.model["width"]) for p in width if p.train["weight_decay"] == 3e-3})
    assert default == [2.0 ** e for e in range(-4, 4)]  # ×1/16 … ×8
    assert all(len(p.seeds) == 5 for p in points)
    widest = [p for p in width if float(p.model["width"]) == 8.0]
    assert widest and all("weight_matching" in p.merge["methods"] and p.train["epochs"] == 5 for p in widest)
    assert {float(p.model["width"]) for p in width if p.train["weight_decay"] == 1e-4} == {0.0625, 1.0}


def test_intrinsic_dim_trains_on_the_authors_setup():
    cfg = resolve_config([str(CONFIG)])
    data = {name: d for name, d in cfg["data"]["synthetic"].items() if d["generator"] == "gaussian_subspace"}
    assert {(d["d"], d["n_train"], d["n_val"], d["classes"]) for d in data.values()} == {(512, 45000, 5000, 20)}
    trained = [p for p in expand_points(cfg).values() if p.study == "intrinsic_dim" and p.train["epochs"] > 0]
    assert {p.train["epochs"] for p in trained} == {30} and {p.dataset for p in trained} == set(data)
    assert all(p.model["norm"] == "layernorm" and p.model["activation"] == "gelu" for p in trained)
    assert all(p.model["symmetry"]["n_fixed"] == 64 and p.model["init"]["weights"] == "paper" for p in trained)
    assert set(cfg["claims"]) >= {"width-merge-accuracy", "temperature-calibration", "intrinsic-dimension-lmc"}


def test_the_regime_config_plans_its_jobs():
    counts = job_counts(CONFIG)
    assert counts["total"] == 179 and counts["claim"] == 14
    # 5 bundled width groups, 15 single ×2 … ×8 models, 1 intrinsic_dim group, and the null partners' 4 bundles
    # (untrained and shuffled-label partners at ×1/16 and ×1)
    assert counts["train"] == 25


def test_the_regime_config_trains_null_partners_beside_the_narrowest_and_default_width():
    cfg = resolve_config([str(CONFIG)])
    partners = [p for p in expand_points(cfg).values() if p.study == "width" and p.partner != "real"]
    assert {(float(p.model["width"]), p.partner) for p in partners} == {
        (w, k) for w in (0.0625, 1.0) for k in ("untrained", "shuffled_labels")}
