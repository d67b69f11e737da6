"""config/paper_identifiability.yaml against the identifiability authors' setups, item by item.

``AUTHORS`` is a table of the authors' settings, written down from their public repository (GitHub
Vuenc/neuron-identifiability; the file each item comes from beside it). The test reads the same items out of our
paper config (after the schema's defaults and the study blocks are applied, i.e. what the jobs get) and compares:
a change on either side that is not also made in the other, or listed in ``STATED_DIFFERENCES`` (and in
docs/paper-scale.md with its reason), fails here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lmcflow.config import expand_points, resolve_config

REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- the authors' settings
AUTHORS = {
    # configs/model/mlp_mnist.yaml, configs/mlp_symmetry1_kappa1_noInterpolation.yaml, configs/optimizer/adamw.yaml,
    # configs/scheduler/none.yaml, configs/training/default.yaml, configs/dataset/mnist.yaml, src/models/mlp.py
    "mlp_mnist": {
        "dataset": "mnist", "val_fraction": 0.1, "hidden": 512, "hidden_layers": 3, "norm": "layernorm",
        "activation": "gelu", "optimizer": "adamw", "lr": 1e-3, "weight_decay": 1e-2, "weight_decay_on": "all",
        "schedule": "constant", "batch_size": 64, "epochs": 100, "models": 16, "precision": "fp32",
        "n_fixed": [64, 64, 64, 256], "sigma_f_scale": 1.0, "trainable_init": "paper",
        # checkpoint_directories.py "mlp-kappa-sweep"
        "sigma_f_grid": [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0],
        # plots.py: lmc-mlp-aligned-unaligned-37steps; measure_lmc_unaligned_aligned.py before f91efa2: models
        # (1, 2), (3, 4), … (8 pairs), the barrier on train accuracy relative to the better endpoint
        "lmc_steps": 37, "lmc_pairs": "disjoint", "lmc_split": "train", "lmc_barrier": "relative_accuracy_barrier",
        # measure_activation_matching_objective.py, src/utils/rebasin/common.py
        "matching_features": ["post_linear", "post_norm", "post_activation"],
        "matching_similarities": ["pearson", "dot_product"],
        # README / checkpoint_directories.py "mlp": MLP, W-MLP σ_F = 0 and 1, SyRe-MLP σ_F = 1 (+ the σ-MLP)
        "variants": [("standard", 0.0), ("w_asymmetric", 0.0), ("w_asymmetric", 1.0), ("syre", 1.0),
                     ("sigma_asymmetric", 0.0)],
    },
    # plots.py load_data_mnist / make_neuron_pair_cost_matrix_plots, src/eval/measure_realization_cost*.py
    "swap_heatmaps_mnist": {
        "dataset": "mnist", "norm": "batchnorm", "variants": [("standard", 0.0), ("w_asymmetric", 0.0),
                                                            ("w_asymmetric", 1.0), ("syre", 1.0)],
        "layers": "all", "var_threshold": 0.9, "ridge_beta": 0.01, "ridge_lr": 5e-3, "ridge_steps": 3000,
        "epochs": 100,
    },
    # configs/model/resnet_cifar.yaml, configs/resnet_symmetry*_noInterpolation.yaml, configs/scheduler/resnet.yaml,
    # configs/dataset/cifar10.yaml, src/models/resnet.py
    "resnet20_cifar10": {
        "dataset": "cifar10", "val_fraction": 0.1, "width": 8, "norm": "groupnorm", "norm_groups": 1,
        "optimizer": "adamw", "lr": 1e-4, "lr_growth": 1.259, "growth_epochs": 20, "weight_decay": 1e-2,
        "batch_size": 128, "epochs": 100, "augment": "crop_flip", "sigma_f_grid": [0.0, 2.0, 5.0],
        # per-layer fixed counts (× 3 at width 8): stem, per-stage 3x3 convs, per-stage 1x1 skips, head
        "n_fixed": {"stem": 36, "conv": (108, 162, 216), "skip": (12, 18, 24), "head": 24},
    },
    # configs/dataset/gaussian-subspace-dataset.yaml, src/data/synthetic.py, plots.py load_data_gmm
    "gaussian_subspace": {
        "classes": 20, "d": 512, "separation": 0.3, "noise_scales": "signed_normal", "standardize": False,
        "n_generated_train": 50000, "val_fraction": 0.1, "n_test": 10000, "batch_size": 128, "hidden": 64,
        "ks": [2, 8, 32], "untrained_arm": True, "swap_layer": "layers.0", "ridge_beta": 0.01,
    },
    # configs/synthetic_coherence.yaml, rebuttal_experiments/coherence_synthetic_experiment/run_scalar_*.py
    "coherence": {
        "copies": 10, "width": 128, "mask_density": 0.15, "n_train": 1024, "n_test": 2048, "batch_size": 512,
        "epochs": 100, "lr": 1e-2, "weight_decay": 1e-2, "weight_decay_on": "weights", "init_std": 0.05,
        "bias": "zero", "outer_seeds": 5, "models_per_outer_seed": 20, "lmc_steps": 21,
        "embeddings": ["exact_copy", "random_tight_frame"], "optimizer": "adamw", "schedule": "constant",
    },
}

# Items where our paper config deliberately differs (each listed with its reason in docs/paper-scale.md).
STATED_DIFFERENCES = {
    ("resnet20_cifar10", "models"): "8 seeds (28 all-pairs merges) where the authors train 16 models (8 pairs)",
}


# --------------------------------------------------------------------------- ours
@pytest.fixture(scope="module")
def ours():
    cfg = resolve_config([REPO / "config/paper_identifiability.yaml"])
    return cfg, expand_points(cfg)


def study(points, name):
    """The real points of a study (its null partners are our addition: docs/paper-scale.md)."""
    pts = [p for (s, _), p in points.items() if s == name and p.partner == "real"]
    assert pts, name
    return pts


def test_the_pair_claims_studies_train_every_null_partner_kind(ours):
    """The studies a pair claim reads train the three kinds at the points their `at` names, trained points only."""
    cfg, points = ours
    kinds = {"untrained", "shuffled_labels", "collapsed"}
    for name, at in {"sigma_f_mlp_mnist": 2, "intrinsic_dim": 4, "coherence": 20}.items():
        partners = [p for (s, _), p in points.items() if s == name and p.partner != "real"]
        assert {p.partner for p in partners} == kinds, name
        assert len(partners) == 3 * at and all(p.train["epochs"] > 0 or p.partner == "untrained" for p in partners)
    from lmcflow.claims import REGISTRY

    pair_claims = {cid for cid, c in REGISTRY.items() if c.unit == "pair" and c.paper.startswith("Bürgin")}
    assert {cfg["claims"][cid]["study"] for cid in pair_claims} == {"sigma_f_mlp_mnist", "intrinsic_dim", "coherence"}


def variants(points, name):
    return sorted({(p.model["symmetry"]["kind"], float(p.model["symmetry"].get("sigma_f", 1.0))) for p in
                   study(points, name)})


def test_mlp_sigma_f_sweep_matches(ours):
    cfg, points = ours
    a = AUTHORS["mlp_mnist"]
    pts = study(points, "sigma_f_mlp_mnist")
    p = pts[0]
    sub = cfg["data"]["subsets"][p.dataset]
    assert sub["base"] == a["dataset"] and sub["val_size"] == a["val_fraction"] * 60000 and "n_train" not in sub
    assert (p.model["base_width"], p.model["depth"], p.model["norm"], p.model["activation"]) == (
        a["hidden"], a["hidden_layers"], a["norm"], a["activation"])
    t = p.train
    assert (t["optimizer"], t["lr"], t["weight_decay"], t["weight_decay_on"], t["schedule"], t["batch_size"],
            t["epochs"], t["precision"]) == (a["optimizer"], a["lr"], a["weight_decay"], a["weight_decay_on"],
                                              a["schedule"], a["batch_size"], a["epochs"], a["precision"])
    assert len(p.seeds) == a["models"]
    sym = p.model["symmetry"]
    assert sym["n_fixed"] == a["n_fixed"] and sym["sigma_f_scale"] == a["sigma_f_scale"]
    assert p.model["init"]["weights"] == a["trainable_init"]
    assert sorted(q.model["symmetry"]["sigma_f"] for q in pts) == a["sigma_f_grid"]
    assert p.merge["lambdas"] == a["lmc_steps"] and p.merge["pairs"] == a["lmc_pairs"]
    assert p.pairs == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11), (12, 13), (14, 15)]
    barrier = cfg["claims"]["sigma-f-unaligned-barrier"]
    assert (barrier["split"], barrier["metric"]) == (a["lmc_split"], a["lmc_barrier"])
    assert cfg["claims"]["intrinsic-dimension-lmc"]["split"] == a["lmc_split"]
    assert p.analysis["matching_features"] == a["matching_features"]
    assert p.analysis["matching_similarities"] == a["matching_similarities"]


def test_mlp_variants_and_heatmaps_match(ours):
    _, points = ours
    a = AUTHORS["mlp_mnist"]
    assert variants(points, "variants_mlp_mnist") == sorted(a["variants"])
    for q in study(points, "variants_mlp_mnist"):
        assert q.train["schedule"] == a["schedule"] and q.merge["lambdas"] == a["lmc_steps"]
    h = AUTHORS["swap_heatmaps_mnist"]
    assert variants(points, "swap_heatmaps_mnist") == sorted(h["variants"])
    for q in study(points, "swap_heatmaps_mnist"):
        an = q.analysis
        assert q.model["norm"] == h["norm"] and q.train["epochs"] == h["epochs"]
        assert (an["swap_costs"], an["swap_layers"], an["var_threshold"], an["ridge_beta"], an["ridge_lr"],
                an["ridge_steps"]) == (True, h["layers"], h["var_threshold"], h["ridge_beta"], h["ridge_lr"],
                                       h["ridge_steps"])


def test_resnet20_matches(ours):
    cfg, points = ours
    a = AUTHORS["resnet20_cifar10"]
    pts = study(points, "sigma_f_resnet20_cifar10")
    p = pts[0]
    assert p.dataset == a["dataset"] and cfg["data"]["val_size"] == a["val_fraction"] * 50000
    m, t = p.model, p.train
    assert (m["arch"], m["width"], m["norm"], m["norm_groups"]) == ("resnet20", a["width"], a["norm"], a["norm_groups"])
    assert (t["optimizer"], t["lr"], t["schedule"], t["lr_growth"], t["warmup_epochs"], t["weight_decay"],
            t["batch_size"], t["epochs"], t["augment"]) == (a["optimizer"], a["lr"], "geometric_warmup", a["lr_growth"],
                                                             a["growth_epochs"], a["weight_decay"], a["batch_size"],
                                                             a["epochs"], a["augment"])
    assert sorted(q.model["symmetry"]["sigma_f"] for q in pts) == a["sigma_f_grid"]
    n = m["symmetry"]["n_fixed"]
    counts = a["n_fixed"]
    assert n[0] == counts["stem"] and n[-1] == counts["head"] and len(n) == 29
    for k in range(9):  # block k = 3s + b: conv1 1 + 3k, conv2 2 + 3k, 1x1 skip 3 + 3k
        s = k // 3
        assert (n[1 + 3 * k], n[2 + 3 * k], n[3 + 3 * k]) == (counts["conv"][s], counts["conv"][s], counts["skip"][s])
    assert len(p.seeds) != 16 and ("resnet20_cifar10", "models") in STATED_DIFFERENCES


def test_gaussian_subspace_study_matches(ours):
    cfg, points = ours
    a = AUTHORS["gaussian_subspace"]
    pts = study(points, "intrinsic_dim")
    synth = cfg["data"]["synthetic"]
    ks = set()
    for q in pts:
        g = synth[q.dataset]
        assert (g["classes"], g["d"], g["separation"], g["noise_scales"], g["standardize"]) == (
            a["classes"], a["d"], a["separation"], a["noise_scales"], a["standardize"])
        assert g["n_train"] + g["n_val"] == a["n_generated_train"] and g["n_val"] == a["val_fraction"] * 50000
        assert g["n_test"] == a["n_test"]
        assert q.model["base_width"] == a["hidden"] and q.train["batch_size"] == a["batch_size"]
        assert q.analysis["ridge_beta"] == a["ridge_beta"] and q.analysis["swap_layers"] == "all"
        ks.add(g["k"])
    assert set(a["ks"]) <= ks
    assert 0 in {q.train["epochs"] for q in pts}  # the untrained arm, the authors' swap-cost runs


def test_coherence_study_matches(ours):
    cfg, points = ours
    a = AUTHORS["coherence"]
    pts = study(points, "coherence")
    synth = cfg["data"]["synthetic"]
    outer = {(synth[q.dataset]["seed"], q.model["symmetry"]["mask_seed"]) for q in pts}
    assert len(outer) == a["outer_seeds"] and all(s == m for s, m in outer)  # a new mask and data per outer seed
    assert {synth[q.dataset]["embedding"] for q in pts} == set(a["embeddings"])
    assert {synth[q.dataset]["m"] for q in pts} == set(range(1, a["copies"] + 1))
    for q in pts:
        g = synth[q.dataset]
        assert g["d"] == 2 * a["copies"] and g["n_train"] == a["n_train"] and g["n_test"] == a["n_test"]
        m, t, sym = q.model, q.train, q.model["symmetry"]
        assert (m["arch"], m["base_width"], sym["sigma_f"], sym["mask_type"], sym["mask_density"]) == (
            "sum_relu", a["width"], 0.0, "bernoulli", a["mask_density"])
        assert (m["init"]["weights"], m["init"]["std"], m["init"]["bias"]) == ("normal", a["init_std"], a["bias"])
        assert (t["optimizer"], t["lr"], t["weight_decay"], t["weight_decay_on"], t["epochs"], t["batch_size"],
                t["schedule"]) == (a["optimizer"], a["lr"], a["weight_decay"], a["weight_decay_on"], a["epochs"],
                                   a["batch_size"], a["schedule"])
        assert len(q.seeds) == a["models_per_outer_seed"] and q.merge["lambdas"] == a["lmc_steps"]


def test_cpu_default_keeps_the_authors_generator_and_matching_modes():
    """The CPU default scales the authors' settings down (fewer examples, epochs, seeds), never changes them."""
    cfg = resolve_config()
    points = expand_points(cfg)
    g = AUTHORS["gaussian_subspace"]
    for q in study(points, "intrinsic_dim"):  # fewer examples (10000 for 45000): the CPU cost of the trained arm
        d = cfg["data"]["synthetic"][q.dataset]
        assert (d["classes"], d["separation"], d["noise_scales"], d["standardize"], d["d"]) == (
            g["classes"], g["separation"], g["noise_scales"], g["standardize"], g["d"])
        assert q.merge["pairs"] == "all"  # the CPU default: every pair of its 5 seeds (the jackknife's), its barrier
    assert "split" not in cfg["claims"]["sigma-f-unaligned-barrier"]  # the authors' train split: the claim default
    assert 0 in {q.train["epochs"] for q in study(points, "intrinsic_dim")}
    a = AUTHORS["mlp_mnist"]
    p = study(points, "variants")[0]  # the CPU default runs every matching mode on its variants
    assert p.analysis["matching_features"] == a["matching_features"]
    assert p.analysis["matching_similarities"] == a["matching_similarities"]
    assert set(variants(points, "variants")) <= set(a["variants"])  # a CPU subset: standard, SyRe, σ-asymmetric
    assert {"syre", "sigma_asymmetric"} <= {k for k, _ in variants(points, "variants")}


def test_disjoint_pairs_are_the_pairs_every_merge_job_gets():
    """``merge.pairs: disjoint`` reaches the jobs: the pair blocks of a point (and of its null partners) hold the
    authors' pairs (s0, s1), (s2, s3), … only; ``all`` keeps every pair."""
    from lmcflow.config import Point
    from lmcflow.config.partners import partner_point
    from lmcflow.grouping import pair_blocks

    def point(pairs, bundle):
        return Point(study="s", point="p", dataset="d", seeds=list(range(6)), merge={"pairs": pairs},
                     train={"bundle": bundle}, analysis={"null_partners": {"kinds": ["untrained"]}})

    for bundle in (1, 2, 6):
        got = sorted(q for pairs in pair_blocks(point("disjoint", bundle)).values() for q in pairs)
        assert got == [(0, 1), (2, 3), (4, 5)], bundle
        partner = partner_point(point("disjoint", bundle), "untrained")
        assert sorted(q for pairs in pair_blocks(partner).values() for q in pairs) == [(0, 1001), (2, 1003), (4, 1005)]
        assert len([q for pairs in pair_blocks(point("all", bundle)).values() for q in pairs]) == 15
