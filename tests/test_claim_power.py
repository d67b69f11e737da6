"""Every claim can pass and can fail: for each of the 18 claims, tables built so that the claim holds give
``supported`` and tables built to violate it give ``not_supported``, through the real registry and claim
functions on tables with the real schemas (6 seeds, per-seed effects plus noise).

What real useless models B do to each claim is tested on tables a real run recorded (tests/test_claim_nulls.py:
untrained and shuffled-label partners). The violated tables here stay because they test what those cannot: a
claim reaching ``not_supported`` with working endpoints, each criterion on its wrong side (a null partner fails the
endpoint gate, which makes a claim inconclusive, never not_supported)."""
import pytest

from lmcflow.claims import REGISTRY
from tests.claim_tables import (
    DEFAULT_WD,
    PAIRS,
    WEAK_WD,
    WIDTHS,
    Noise,
    pair_rows,
    seed_rows,
    table,
    verdict,
)

SD = {"seed_sd": 0.002, "row_sd": 0.002}


def by_width(curve):
    return dict(zip(WIDTHS, curve, strict=True))


# --------------------------------------------------------------------------- width paper
def width_merge_accuracy(holds):
    curve = by_width((0.2, 0.05, 0.005) if holds else (0.05, 0.1, 0.2))
    rows = pair_rows({"width": WIDTHS, "definition": ["midpoint", "entezari", "max_minus_mean"]},
                     lambda width, definition: {"value": curve[width]}, Noise(**SD), metric="error")
    return {"barriers": table("barriers", rows)}


def temperature_calibration(holds):
    raw = by_width((1.0, 0.8, 0.6))
    cal = by_width((0.1, 0.03, 0.01)) if holds else raw
    rows = pair_rows({"width": WIDTHS, "calibrated": [False, True]},
                     lambda width, calibrated: {"value": (cal if calibrated else raw)[width]}, Noise(**SD),
                     metric="loss", definition="entezari")
    return {"barriers": table("barriers", rows)}


def lewc(holds):
    lewc_ = by_width((0.9, 0.95, 0.98) if holds else (0.6, 0.7, 0.75))

    def values(width, layer, lam_paper):
        v = lewc_[width]
        return {"lewc_cos": v, "lewc_cos_shuffled": 0.3 if holds else 0.7,
                "llfc_cos": v - 0.03 if holds else v + 0.02, "lewc_cos_perturbed": 0.5 if holds else v + 0.01}
    rows = pair_rows({"width": WIDTHS, "layer": [2, 3], "lam_paper": [0.25, 0.75]}, values, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


def weak_additivity(holds):
    rows = pair_rows({"width": WIDTHS, "layer": [1, 2], "lam_paper": [0.5]},
                     lambda **_: {"weak_additivity": 0.96 if holds else 0.90, "weak_additivity_shuffled": 0.93,
                                  "weak_additivity_gaussian": 0.9304}, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


def reciprocal_orthogonality(holds):
    ratio = by_width((0.8, 0.5, 0.3) if holds else (0.8, 0.9, 1.0))
    permuted = by_width((0.75, 0.45, 0.28) if holds else (0.3, 0.3, 0.3))
    rows = pair_rows({"width": WIDTHS, "layer": [2, 3], "lam_paper": [0.5]},
                     lambda width, **_: {"cross_ratio_a": ratio[width], "cross_ratio_b": ratio[width],
                                         "cross_ratio_permuted_a": permuted[width],
                                         "cross_ratio_permuted_b": permuted[width], "cross_cos": 0.5}, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


def low_rank(holds):
    curves = {DEFAULT_WD: by_width((0.6, 0.4, 0.3)), WEAK_WD: by_width((0.7, 0.6, 0.5))} if holds else \
             {DEFAULT_WD: by_width((0.3, 0.4, 0.6)), WEAK_WD: by_width((0.2, 0.3, 0.4))}
    rows = pair_rows({"width": WIDTHS, "weight_decay": [DEFAULT_WD, WEAK_WD], "layer": [2], "lam_paper": [0.5]},
                     lambda width, weight_decay, **_: {"erank_rel_a": curves[weight_decay][width],
                                                       "erank_rel_b": curves[weight_decay][width],
                                                       "rank99_frac_a": 0.5, "rank99_frac_b": 0.5,
                                                       "erank_rel_random": 0.8}, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


def weight_decay(holds):
    barrier = {DEFAULT_WD: 0.01, WEAK_WD: 0.1} if holds else {DEFAULT_WD: 0.05, WEAK_WD: 0.01}
    lewc_ = {DEFAULT_WD: 0.97, WEAK_WD: 0.5} if holds else {DEFAULT_WD: 0.5, WEAK_WD: 0.9}
    arms = {"width": WIDTHS, "weight_decay": [DEFAULT_WD, WEAK_WD]}
    bars = pair_rows({**arms, "definition": ["midpoint"]},
                     lambda width, weight_decay, **_: {"value": barrier[weight_decay]}, Noise(**SD), metric="error")
    lm = pair_rows({**arms, "layer": [2], "lam_paper": [0.25, 0.75]},
                   lambda width, weight_decay, **_: {"lewc_cos": lewc_[weight_decay]}, Noise(**SD))
    return {"barriers": table("barriers", bars), "layer_metrics": table("layer_metrics", lm)}


def weight_matching_no_gain(holds):
    plain = by_width((0.3, 0.1, 0.03))
    matched = by_width((0.05, 0.05, 0.025) if holds else (0.05, 0.05, 0.0))
    rows = pair_rows({"width": WIDTHS, "method": ["identity", "weight_matching"], "definition": ["midpoint"]},
                     lambda width, method, **_: {"value": (plain if method == "identity" else matched)[width]},
                     Noise(**SD), metric="error")
    return {"barriers": table("barriers", rows)}


def random_permutation(holds):
    rows = pair_rows({"width": WIDTHS, "method": ["identity", "random_permutation"], "definition": ["midpoint"]},
                     lambda width, method, **_: {"value": 0.02 if holds or method == "identity" else 0.1},
                     Noise(**SD), metric="error")
    return {"barriers": table("barriers", rows)}


def cross_transformation_cosine(holds):
    cos = by_width((0.8, 0.9, 0.97) if holds else (0.8, 0.75, 0.7))
    permuted = by_width((0.82, 0.92, 0.98) if holds else (0.95, 0.95, 0.95))
    rows = pair_rows({"width": WIDTHS, "layer": [2, 3], "lam_paper": [0.5]},
                     lambda width, **_: {"cross_transform_cos": cos[width], "cross_transform_cos_permuted_a":
                                         permuted[width], "cross_transform_cos_permuted_b": permuted[width],
                                         "cross_ratio_a": 0.3}, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


LAMS = tuple(i / 10 for i in range(11))


def logit_norm_decay(holds):
    """MLP with 2 hidden layers (D = 3 weight layers): LEWC's decay λ³ + (1−λ)³ of the logit norm and a β that
    undoes it (holds), or logits that do not shrink while β still grows (violated)."""
    def values(width, lam):
        lewc = lam ** 3 + (1 - lam) ** 3
        norm = 10.0 * (lewc if holds else 1.0)
        return {"logit_norm": norm, "beta": 0.8 / lewc}
    rows = pair_rows({"width": WIDTHS, "lam": LAMS}, values, Noise(**SD), arch="mlp", depth=2)
    return {"interpolation": table("interpolation", rows)}


def active_neuron_overlap(holds):
    jac = by_width((0.8, 0.5, 0.2) if holds else (0.9, 0.92, 0.95))
    independent = by_width((0.7, 0.45, 0.25) if holds else (0.5, 0.5, 0.5))
    rows = pair_rows({"width": WIDTHS, "layer": [1, 2], "lam_paper": [0.5]},
                     lambda width, **_: {"active_jaccard": jac[width], "active_jaccard_independent": independent[width],
                                         "frac_active_a": 0.5}, Noise(**SD))
    return {"layer_metrics": table("layer_metrics", rows)}


# --------------------------------------------------------------------------- identifiability paper
SIGMAS = (0.0, 0.3, 1.0, 3.0)


def sigma_f_identity(holds):
    curve = dict(zip(SIGMAS, (0.02, 0.4, 0.9, 0.97) if holds else (0.5, 0.4, 0.3, 0.2), strict=True))
    rows = pair_rows({"sigma_f": SIGMAS, "layer": [0, 1]}, lambda sigma_f, layer: {
        "identity_normalized": curve[sigma_f]}, Noise(**SD), symmetry="w_asymmetric", feature="post_activation",
        similarity="pearson")
    return {"identifiability": table("identifiability", rows)}


def sigma_f_unaligned_barrier(holds):
    un = dict(zip(SIGMAS, (0.4, 0.3, 0.1, 0.02) if holds else (0.1, 0.2, 0.3, 0.4), strict=True))
    al = dict(zip(SIGMAS, (0.05, 0.03, 0.01, 0.0), strict=True))
    rows = pair_rows({"sigma_f": SIGMAS, "method": ["identity", "activation_matching"]},
                     lambda sigma_f, method: {"error_barrier_entezari": (un if method == "identity" else al)[sigma_f]},
                     Noise(**SD), symmetry="w_asymmetric")
    return {"identifiability_lmc": table("identifiability_lmc", rows)}


def intrinsic_dimension(holds):
    def values(data_k, sigma_f, epochs):
        tail = {2: 10.0, 8: 50.0, 32: 120.0} if holds else {2: 120.0, 8: 50.0, 32: 10.0}
        cost = {2: 1.0, 8: 4.0, 32: 16.0}
        if sigma_f == 0 and holds:
            return {"swap_q10_relative": -0.05, "swap_frac_cheap": 0.9, "swap_mean": 0.001 * data_k}
        return {"swap_q10_relative": tail[data_k], "swap_frac_cheap": 0.2 / data_k, "swap_mean": cost[data_k]}
    rows = seed_rows({"data_k": [2, 8, 32], "sigma_f": [0.0, 1.0], "epochs": [0, 10]}, values, Noise(**SD),
                     layer="layers.0", symmetry="w_asymmetric")
    return {"swap_costs": table("swap_costs", rows)}


def interpolation_curves(drop: dict, noise: Noise, epochs: int = 10) -> list[dict]:
    """Unaligned interpolation curves (3 λ, test split) whose relative accuracy drop in % is ``drop[(σ_F, k)]``
    plus the pair's noise: endpoints at 0.9, the midpoint lowered accordingly."""
    rows = []
    for (a, b) in PAIRS:
        for (sigma_f, k), d in drop.items():
            dd = max(0.0, noise.pair(d, a, b))
            for lam, acc in ((0.0, 0.9), (0.5, 0.9 * (1 - dd / 100)), (1.0, 0.9)):
                rows.append({"seed_a": a, "seed_b": b, "sigma_f": sigma_f, "dataset": f"gs_k{k}", "point": f"k{k}",
                             "epochs": epochs, "lam": lam, "acc": acc, "symmetry": "w_asymmetric"})
    return rows


def intrinsic_dimension_lmc(holds):
    ks = (2, 8, 32)
    high = (46.0, 16.0, 6.0) if holds else (6.0, 16.0, 46.0)
    drop = {(1.0, k): v for k, v in zip(ks, high)} | {(0.0, k): 50.0 for k in ks}
    interp = table("interpolation", interpolation_curves(drop, Noise(1.0, 1.0)))
    swap = table("swap_costs", [{"dataset": f"gs_k{k}", "data_k": k, "seed": 0} for k in ks])
    return {"interpolation": interp, "swap_costs": swap}


def subspace_coherence(holds):
    nus = (0.1, 0.2, 0.5, 1.0)
    rows = pair_rows({"nu": nus}, lambda nu: {"regression_midpoint_barrier": 0.3 * (1 - nu) if holds else 0.3 * nu},
                     Noise(**SD), symmetry="w_asymmetric")
    return {"coherence": table("coherence", rows)}


def identifiability_tradeoff(holds):
    def values(symmetry):
        acc = 0.84 if symmetry == "standard" else (0.80 if holds else 0.86)
        return {"test_acc": acc, "train_acc": acc + 0.1, "train_loss": 0.01, "test_loss": 0.5,
                "train_loss_late_drop": 0.004}
    rows = seed_rows({"symmetry": ["standard", "w_asymmetric"]}, values, Noise(**SD), sigma_f=3.0)
    return {"runs": table("runs", rows)}


CASES = {
    "width-merge-accuracy": width_merge_accuracy, "temperature-calibration": temperature_calibration,
    "lewc": lewc, "weak-additivity": weak_additivity, "reciprocal-orthogonality": reciprocal_orthogonality,
    "low-rank": low_rank, "weight-decay": weight_decay, "weight-matching-no-gain": weight_matching_no_gain,
    "random-permutation": random_permutation, "sigma-f-identity": sigma_f_identity,
    "sigma-f-unaligned-barrier": sigma_f_unaligned_barrier, "intrinsic-dimension": intrinsic_dimension,
    "intrinsic-dimension-lmc": intrinsic_dimension_lmc,
    "subspace-coherence": subspace_coherence, "identifiability-tradeoff": identifiability_tradeoff,
    "cross-transformation-cosine": cross_transformation_cosine, "logit-norm-decay": logit_norm_decay,
    "active-neuron-overlap": active_neuron_overlap,
}


def test_every_claim_has_a_power_case():
    assert sorted(CASES) == sorted(REGISTRY) and len(CASES) == 18


@pytest.mark.parametrize("cid", sorted(CASES))
def test_claim_supported_when_it_holds(cid):
    res = verdict(cid, CASES[cid](True))
    assert res["verdict"] == "supported", (res["reason"], [(t["name"], t["statistic"], t["ci_low"], t["ci_high"],
                                                              t["verdict"]) for t in res["criteria"]])
    assert res["n_seeds"] == 6 and res["ci_low"] <= res["statistic"] <= res["ci_high"]
    assert all(t["verdict"] == "supported" for t in res["criteria"])


@pytest.mark.parametrize("cid", sorted(CASES))
def test_claim_not_supported_when_violated(cid):
    res = verdict(cid, CASES[cid](False))
    assert res["verdict"] == "not_supported", (res["reason"], [(t["name"], t["statistic"], t["ci_low"],
                                                                  t["ci_high"], t["verdict"]) for t in res["criteria"]])
