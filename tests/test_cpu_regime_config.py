"""config/cpu_regime.yaml: the width study ×1/16 … ×8 and intrinsic_dim on the authors' setup, planned as
snakemake -n plans it (lmcflow.plan), every claim configured for it."""
from pathlib import Path

from lmcflow.config import expand_points, resolve_config
from lmcflow.plan import job_counts

CONFIG = Path(__file__).resolve().parents[1] / "config" / "cpu_regime.yaml"


def test_the_regime_config_reaches_x2_in_octaves_with_five_seeds_trained_to_a_plateau():
    cfg = resolve_config([str(CONFIG)])
    points = expand_points(cfg).values()
    width = [p for p in points if p.study == "width"]
    default = sorted({float(p.model["width"]) for p in width if p.train["weight_decay"] == 3e-3})
    assert default == [2.0 ** e for e in range(-4, 2)]  # ×1/16 … ×2
    assert all(len(p.seeds) == 5 for p in points)
    assert all(p.model["depth"] == 3 and p.train["schedule"] == "step" and p.train["epochs"] == 20 for p in width
               if p.partner != "untrained")
    widest = [p for p in width if float(p.model["width"]) == 2.0 and p.partner == "real"]
    assert widest and all("weight_matching" in p.merge["methods"] for p in widest)
    # the weak arm at the narrowest and at the headline width
    assert {float(p.model["width"]) for p in width if p.train["weight_decay"] == 1e-4} == {0.0625, 2.0}


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
    assert counts["total"] == 287 and counts["claim"] == 14
    # the width study's bundles up to ×1 (both arms), 10 single ×2 models (both arms), 1 intrinsic_dim group,
    # the null partners' 3 bundles at ×1/16 and 15 single ×2 partners (untrained, shuffled-label, collapsed)
    assert counts["train"] == 34


def test_the_regime_config_trains_null_partners_at_the_narrowest_and_the_widest_width():
    cfg = resolve_config([str(CONFIG)])
    partners = [p for p in expand_points(cfg).values() if p.study == "width" and p.partner != "real"]
    assert {(float(p.model["width"]), p.partner) for p in partners} == {
        (w, k) for w in (0.0625, 2.0) for k in ("untrained", "shuffled_labels", "collapsed")}
