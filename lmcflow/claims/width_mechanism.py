"""The width paper's mechanism claims (Ito et al., ICLR 2026): LEWC, weak additivity, reciprocal orthogonality,
low rank, the cross-transformation cosine, active-neuron overlap and the logit-norm decay.

They read ``layer_metrics`` of the unaligned pairs (method ``identity``), per pair averaged over hidden layers
≥ ``min_layer``, each against a same-run control stored beside it; ``logit-norm-decay`` reads
``interpolation``. Why those layers and λ, and each claim's control and thresholds: docs/claims.md.
"""
from __future__ import annotations

import numpy as np

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot
from lmcflow.claims.reference import (
    REFERENCE_CONTROL,
    REFERENCE_KIND,
    over_reference,
    requires_reference_partner,
    share_over_reference,
    widest_samples,
)
from lmcflow.claims.stats import estimate, slope, trend_axis
from lmcflow.claims.thresholds import source
from lmcflow.claims.width import (
    MECH,
    PAPER,
    WD,
    WIDTH_CLAIM,
    interior,
    layer_rows,
    over_widths,
    requires_mechanism,
    tau_sweep,
    upper_widths,
    widest_common,
    with_arms,
)

NULL_SOURCE = "null: the same cosine with the pairing of samples between A and B shuffled (layer_metrics)"


@claim(id="lewc", paper=PAPER, **WIDTH_CLAIM,
       statement="Without permutation, the layer-wise exponentially weighted connectivity (LEWC) cosine "
                 "cos(f_l(θ_λ), λ^l f_l(θ_A) + (1−λ)^l f_l(θ_B)) rises with width toward 1, and at the widest "
                 "width holds at every interior λ ≠ ½, beats the same cosine with the sample pairing of A and B "
                 "shuffled, by more than with an untrained (random-feature) partner B of the same width, and "
                 "exceeds the LLFC form cos(f_l(θ_λ), λ f_l(θ_A) + (1−λ) f_l(θ_B)) (layers l ≥ 2; "
                 "the LEWC cosine of A with a random perturbation of A as far away as B is reported beside it).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay", lam=False, interior=True), requires_reference_partner),
       reference_partner=REFERENCE_KIND,
       defaults={**MECH, "min_layer": 2, "min_gain_over_random_features": 0.5, "min_gain_over_shuffled": 0.5,
                 "min_gap_over_llfc": 0.0, "trend_from_width": 1.0})
def lewc(t: dict, p: dict, ref: dict) -> Outcome:
    rows = lambda tables: interior(layer_rows(tables, p, p["weight_decay"]))  # noqa: E731
    columns, cells = ["lewc_cos", "lewc_cos_shuffled", "llfc_cos", "lewc_cos_perturbed"], ["width", "lam_paper"]
    df = rows(t)
    sample, lab = pivot(df, columns, cells)
    widths, lams = lab["width"], lab["lam_paper"]
    need(len(widths) >= 2 and lams, f"LEWC rows at ≥ 2 widths, layers ≥ {p['min_layer']}, interior λ ≠ ½")
    x, _ = trend_axis(widths)
    widest = widths[-1]

    def gain(m):  # fraction of the null's shortfall from a perfect cosine that LEWC closes, worst λ
        null = m["lewc_cos_shuffled", widest]
        return np.min((m["lewc_cos", widest] - null) / (1 - null))

    up = upper_widths(widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    at_widest, random_features = widest_samples(t, ref, rows, columns, cells, widest, sample.seeds)
    criteria = [
        Criterion("gain_over_random_features", "B's part of the merged features over random features, worst "
                                               "interior λ at the widest width "
                                               f"{widest:g}: (gain − gain_rf)/(1 − gain_rf), gain = "
                                               "gain_over_shuffled on the real pairs, gain_rf the same on pairs (A, "
                                               "untrained B) of the same run, paired by seed",
                  share_over_reference(gain, at_widest, random_features), ">", p["min_gain_over_random_features"],
                  source("min_gain_over_random_features"), kind="control", control=REFERENCE_CONTROL),
        Criterion("gain_over_shuffled", "B's part of the merged features, worst interior λ at the widest width "
                                        f"{widest:g}: (LEWC − null)/(1 − null), null = the LEWC target with the "
                                        "dominant model's features (B's at λ < ½) taken at other inputs (mean over "
                                        f"layers ≥ {p['min_layer']})",
                  estimate(gain, sample), ">", p["min_gain_over_shuffled"], source("min_gain_over_shuffled"),
                  kind="control", control="shuffled sample pairing"),
        Criterion("lewc_minus_llfc", "LEWC − LLFC cosine at the widest width, worst λ",
                  estimate(lambda m: np.min(m["lewc_cos", widest] - m["llfc_cos", widest]), sample),
                  ">", p["min_gap_over_llfc"], source("min_gap_over_llfc"), kind="control", control="LLFC"),
        Criterion("trend", f"slope of the worst-λ LEWC cosine against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}",
                  estimate(lambda m: slope(x_up, m["lewc_cos", up].min(axis=1)), sample), ">", 0.0,
                  "paper: LEWC rises with width", kind="trend"),
    ]
    # reported, not a criterion: the paper claims LEWC holds, not that it is specific to B; A plus a random direction
    # of B's size keeps A's features almost exactly (0.998-0.999 at every width of the default run), so the
    # difference measures how linear a random step is, not whether LEWC holds (docs/claims.md)
    worst = lambda column: estimate(lambda m: np.min(m["lewc_cos", widest] - m[column, widest]), sample)
    reported = {"lewc_minus_perturbed": worst("lewc_cos_perturbed"),
                "lewc_widest": estimate(lambda m: m["lewc_cos", widest].min(), sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "lambdas": lams, "mean_lewc_by_width_and_lambda": means.list("lewc_cos"),
        "mean_lewc_shuffled_by_width_and_lambda": means.list("lewc_cos_shuffled"),
        "mean_llfc_by_width_and_lambda": means.list("llfc_cos"),
        "mean_lewc_perturbed_by_width_and_lambda": means.list("lewc_cos_perturbed")})


@claim(id="weak-additivity", paper=PAPER, **WIDTH_CLAIM,
       statement="ReLU is weakly additive on the two models' pre-activations: at the widest width "
                 "cos(σ(½z̃_A(x) + ½z̃_B(x)), ½σ(z̃_A(x)) + ½σ(z̃_B(x))) is above what independent Gaussian vectors "
                 "of each input's own norm balance give by more than that balance alone adds over equal norms (a B "
                 "whose pre-activations are small gets its high cosine from its smallness, not from additivity), "
                 "and by more than an untrained (random-feature) partner B of the same width does, "
                 "it rises with width over the upper part of the grid, and it is not below the same cosine for "
                 "unrelated inputs (the sample pairing of A and B shuffled).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"), requires_reference_partner),
       reference_partner=REFERENCE_KIND,
       defaults={**MECH, "lam": 0.5, "min_layer": 1, "min_net_excess_over_random_features": 0.0,
                 "min_net_excess": 0.0, "max_shortfall_vs_shuffled": 0.05, "trend_from_width": 1.0})
def weak_additivity(t: dict, p: dict, ref: dict) -> Outcome:
    def rows(tables):
        # imbalance: what the norm balance alone adds over equal norms (→ 0.07 as B's pre-activations vanish), so a
        # partner that takes no part, with its tiny excess, has a negative net excess
        return layer_rows(tables, p, p["weight_decay"], p["lam"]).assign(
            excess=lambda d: d.weak_additivity - d.weak_additivity_reference,
            imbalance=lambda d: d.weak_additivity_reference - d.weak_additivity_gaussian,
            net_excess=lambda d: d.excess - d.imbalance)
    df = rows(t)
    need(df.weak_additivity_reference.notna().any(),
         "no weak_additivity_reference (tables made before it: rerun the mechanism jobs)")
    columns = ["net_excess", "excess", "imbalance", "weak_additivity", "weak_additivity_shuffled",
               "weak_additivity_reference", "weak_additivity_gaussian"]
    sample, widths, x = over_widths(df, columns, f"weak-additivity rows at ≥ 2 widths at λ = {p['lam']}")
    widest, up = widths[-1], upper_widths(widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    at_widest, random_features = widest_samples(t, ref, rows, ["net_excess"], ["width"], widest, sample.seeds)
    criteria = [
        Criterion("net_excess_over_random_features", "net excess of the weak-additivity cosine (net_excess) on the "
                                                     "real pairs minus the same on pairs (A, untrained B) of the same "
                                                     f"run, paired by seed, at the widest width {widest:g}",
                  over_reference(lambda m: m["net_excess", widest], at_widest, random_features), ">",
                  p["min_net_excess_over_random_features"], source("min_net_excess_over_random_features"),
                  kind="control", control=REFERENCE_CONTROL),
        Criterion("net_excess", f"weak-additivity cosine minus the independent-Gaussian cosine at each input's "
                                f"norm balance (λ‖z̃_A‖, (1 − λ)‖z̃_B‖), less that reference's rise over equal norms, "
                                f"widest width {widest:g} (λ = {p['lam']}, mean over layers ≥ {p['min_layer']})",
                  estimate(lambda m: m["net_excess", widest], sample), ">", p["min_net_excess"],
                  source("min_net_excess")),
        Criterion("trend", f"slope of the mean weak-additivity cosine against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}",
                  estimate(lambda m: slope(x_up, m["weak_additivity", up]), sample), ">", 0.0,
                  "paper: weak additivity is a high-dimensional effect (it grows with width)", kind="trend"),
        Criterion("shortfall_vs_shuffled", "weak-additivity cosine with the sample pairing of A and B shuffled minus "
                                           "the pair's, at the widest width",
                  estimate(lambda m: m["weak_additivity_shuffled", widest] - m["weak_additivity", widest], sample),
                  "<", p["max_shortfall_vs_shuffled"], NULL_SOURCE + "; " + source("max_shortfall_vs_shuffled"),
                  kind="control", control="shuffled sample pairing"),
    ]
    at_widest = lambda column: estimate(lambda m: m[column, widest], sample)
    reported = {"cos_widest": at_widest("weak_additivity"), "excess_widest": at_widest("excess"),
                "imbalance_widest": at_widest("imbalance"), "reference_widest": at_widest("weak_additivity_reference"),
                "shuffled_widest": at_widest("weak_additivity_shuffled")}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "trend_widths": up, "mean_by_width": means.list("weak_additivity"),
        "mean_reference_by_width": means.list("weak_additivity_reference"),
        "mean_shuffled_by_width": means.list("weak_additivity_shuffled"),
        "gaussian_reference_equal_norms": float(np.nanmean(means["weak_additivity_gaussian"]))})


@claim(id="reciprocal-orthogonality", paper=PAPER, **WIDTH_CLAIM,
       statement="Reciprocal orthogonality: the cross terms W_A z_B and W_B z_A are small against W_A z_A and "
                 "W_B z_B at the widest width, the cross-norm ratio falls over the whole width grid, and it is no "
                 "larger than what each model gives against a randomly permuted copy of itself (the "
                 "orthogonality that low rank alone explains).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 2, "max_ratio_widest": 0.5, "max_excess_over_permuted": 0.1,
                 "trend_from_width": 1.0})
def reciprocal_orthogonality(t: dict, p: dict) -> Outcome:
    df = layer_rows(t, p, p["weight_decay"], p["lam"]).assign(
        cross_ratio=lambda d: (d.cross_ratio_a + d.cross_ratio_b) / 2,
        cross_ratio_permuted=lambda d: (d.cross_ratio_permuted_a + d.cross_ratio_permuted_b) / 2)
    sample, widths, x = over_widths(df, ["cross_ratio", "cross_ratio_permuted", "cross_cos"],
                                    f"cross-norm ratios at ≥ 2 widths with layers ≥ {p['min_layer']}")
    widest, up = widths[-1], upper_widths(widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    criteria = [
        Criterion("ratio_widest", f"cross-norm ratio ½(‖W_A z_B‖/‖W_A z_A‖ + ‖W_B z_A‖/‖W_B z_B‖) at the widest width "
                             f"{widths[-1]:g} (layers ≥ {p['min_layer']})",
             estimate(lambda m: m["cross_ratio", widest], sample), "<", p["max_ratio_widest"],
             source("max_ratio_widest")),
        Criterion("trend", f"slope of the mean cross-norm ratio against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}",
             estimate(lambda m: slope(x_up, m["cross_ratio", up]), sample),
             "<", 0.0, "paper: the cross terms shrink as width grows",
             kind="trend"),
        Criterion("excess_over_permuted", "cross-norm ratio minus the ratio of each model against a randomly permuted "
                                     "copy of itself, ½(‖W_A P z_A‖/‖W_A z_A‖ + ‖W_B P' z_B‖/‖W_B z_B‖), at the "
                                     "widest width",
             estimate(lambda m: m["cross_ratio", widest] - m["cross_ratio_permuted", widest], sample),
             "<", p["max_excess_over_permuted"],
             "control (direction: not above): a permuted copy has the model's own activity at random units, the "
             "orthogonality low rank alone gives; a pair above it by more than the convention 0.1 has cross "
             "terms low rank does not explain (an untrained or unrelated B: full-rank W_B)",
             kind="control", control="each model against a randomly permuted copy of itself"),
    ]
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_ratio_by_width": means.list("cross_ratio"),
        "mean_permuted_ratio_by_width": means.list("cross_ratio_permuted"),
        "mean_cross_cos_by_width": means.list("cross_cos")})


@claim(id="low-rank", paper=PAPER, **WIDTH_CLAIM,
       statement="Weight decay makes the hidden weights relatively low-rank: the relative effective rank falls over "
                 "the whole width grid under the default weight decay, and at the widest width it is below that of "
                 "the weak weight-decay arm (weak decay raises the rank) and clearly below that of an unstructured "
                 "(random Gaussian) matrix of the same shape. A pair counts with its less low-rank model.",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True,
       selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
       requires=(requires_mechanism("weight_decay", "weak_weight_decay"),),
       defaults={**MECH, "weak_weight_decay": 1.0e-4, "lam": 0.5, "min_layer": 2, "max_rank_gap": 0.0,
                 "max_fraction_of_random": 0.9, "trend_from_width": 1.0})
def low_rank(t: dict, p: dict) -> Outcome:
    df = with_arms(p, lambda wd: layer_rows(t, p, wd, p["lam"])).assign(
        erank_rel=lambda d: np.maximum(d.erank_rel_a, d.erank_rel_b),
        rank99_frac=lambda d: np.maximum(d.rank99_frac_a, d.rank99_frac_b))
    need(len(df), f"weight ranks of layers ≥ {p['min_layer']}")
    wmax = widest_common(df)
    sample, lab = pivot(df, ["erank_rel", "rank99_frac", "erank_rel_random"], ["arm", "width"])
    widths = lab["width"]
    need(lab["arm"] == ["default", "weak"], "both weight-decay arms")
    default_widths = sorted(set(df[df.arm == "default"].width))
    need(len(default_widths) >= 2, "the default arm at ≥ 2 widths")
    x, _ = trend_axis(default_widths)
    up = upper_widths(default_widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    criteria = [
        Criterion("fraction_of_random", f"relative effective rank (default arm, the pair's larger) at width {wmax:g} "
                                        f"as a fraction of that of a random Gaussian matrix of the same shape",
                  estimate(lambda m: m["erank_rel", "default", wmax] / m["erank_rel_random", "default", wmax], sample),
                  "<", p["max_fraction_of_random"], source("max_fraction_of_random"), kind="control",
                  control="random matrix of the same shape"),
        Criterion("default_minus_weak", f"relative effective rank erank/min(shape) (the pair's larger; layers ≥ "
                                        f"{p['min_layer']}) at width {wmax:g}: default − weak weight decay",
                  estimate(lambda m: m["erank_rel", "default", wmax] - m["erank_rel", "weak", wmax], sample),
                  "<", p["max_rank_gap"], source("max_rank_gap"), kind="control", control="weak weight-decay arm"),
        Criterion("trend", f"slope of the relative effective rank (default arm) against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}",
                  estimate(lambda m: slope(x_up, m["erank_rel", "default", up]), sample), "<", 0.0,
                  "paper: the weights become relatively low-rank as width grows", kind="trend"),
    ]
    reported = {"erank_rel_default_widest": estimate(lambda m: m["erank_rel", "default", wmax], sample),
                "erank_rel_weak_widest": estimate(lambda m: m["erank_rel", "weak", wmax], sample),
                "rank99_frac_default_minus_weak": estimate(
                    lambda m: m["rank99_frac", "default", wmax] - m["rank99_frac", "weak", wmax], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "width_compared": wmax,
        "mean_erank_rel_by_width": {arm: means.list("erank_rel", arm) for arm in ("default", "weak")},
        "mean_rank99_frac_by_width": {arm: means.list("rank99_frac", arm) for arm in ("default", "weak")},
        "random_matrix_erank_rel_by_width": means.list("erank_rel_random", "default")})


@claim(id="cross-transformation-cosine", paper=PAPER, **WIDTH_CLAIM,
       statement="Each model's layer acts on the merged input as on its own: at the widest width "
                 "cos(W_A(z_A + z_B), W_A z_A) and cos(W_B(z_A + z_B), W_B z_B), the worse of the two per pair, are "
                 "above what they are with an untrained (random-feature) partner B of the same width and above what "
                 "a full-rank random layer gives with an independent input of the same norm (1/√2), "
                 "rising with width over the upper part of the grid; the paper's cross-transformation cosine "
                 "cos((W_A + W_B)(z_A + z_B), W_A z_A + W_B z_B) is no lower than each model gives with a randomly "
                 "relabelled copy of itself (layers l ≥ 2).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"), requires_reference_partner),
       reference_partner=REFERENCE_KIND,
       defaults={**MECH, "lam": 0.5, "min_layer": 2, "min_own_input_cos_over_random_features": 0.5,
                 "min_own_input_cos": float(1 / np.sqrt(2)), "max_shortfall_vs_permuted": 0.05,
                 "trend_from_width": 1.0})
def cross_transformation_cosine(t: dict, p: dict, ref: dict) -> Outcome:
    def rows(tables):
        return layer_rows(tables, p, p["weight_decay"], p["lam"]).assign(
            permuted=lambda d: (d.cross_transform_cos_permuted_a + d.cross_transform_cos_permuted_b) / 2,
            own=lambda d: np.minimum(d.own_input_cos_a, d.own_input_cos_b))
    df = rows(t)
    need(df.own_input_cos_a.notna().any(), "no own_input_cos_a/b (tables made before them: rerun the mechanism jobs)")
    sample, widths, x = over_widths(df, ["own", "cross_transform_cos", "permuted", "own_norm_ratio"],
                                    f"cross-transformation cosines at ≥ 2 widths with layers ≥ {p['min_layer']}")
    widest, up = widths[-1], upper_widths(widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    at_widest, random_features = widest_samples(t, ref, rows, ["own"], ["width"], widest, sample.seeds)
    criteria = [
        Criterion("own_input_cos_over_random_features", "worse own-input cosine (own_input_cos_widest) over random "
                                                        f"features at the widest width {widest:g}: (cos − cos_rf)/(1 − "
                                                        "cos_rf), cos_rf the same on pairs (A, untrained B) of the "
                                                        "same run, paired by seed",
                  share_over_reference(lambda m: m["own", widest], at_widest, random_features), ">",
                  p["min_own_input_cos_over_random_features"], source("min_own_input_cos_over_random_features"),
                  kind="control", control=REFERENCE_CONTROL),
        Criterion("own_input_cos_widest", f"worse of cos(W_A(z_A + z_B), W_A z_A) and cos(W_B(z_A + z_B), W_B z_B) per "
                                          f"pair at the widest width {widest:g} (mean over layers ≥ {p['min_layer']})",
                  estimate(lambda m: m["own", widest], sample), ">", p["min_own_input_cos"],
                  source("min_own_input_cos")),
        Criterion("trend", f"slope of that mean cosine against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}",
                  estimate(lambda m: slope(x_up, m["own", up]), sample), ">", 0.0,
                  "paper: the cross-transformation approaches the sum of the own ones with width", kind="trend"),
        Criterion("shortfall_vs_permuted", "cross-transformation cosine of each model with a randomly relabelled copy "
                                           "of itself minus the pair's, at the widest width",
                  estimate(lambda m: m["permuted", widest] - m["cross_transform_cos", widest], sample),
                  "<", p["max_shortfall_vs_permuted"], source("max_shortfall_vs_permuted"), kind="control",
                  control="each model against a randomly relabelled copy of itself"),
    ]
    reported = {"cross_transform_cos_widest": estimate(lambda m: m["cross_transform_cos", widest], sample),
                "own_norm_ratio_widest": estimate(lambda m: m["own_norm_ratio", widest], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "trend_widths": up, "mean_own_input_cos_by_width": means.list("own"),
        "mean_cos_by_width": means.list("cross_transform_cos"), "mean_permuted_cos_by_width": means.list("permuted"),
        "mean_own_norm_ratio_by_width": means.list("own_norm_ratio")})


RETIRED = ("retired: for two independently trained, unaligned models the order of units is arbitrary, so any overlap "
           "of their active unit sets equals its independent-placement value in expectation at every width and "
           "cannot test the paper; the basis-free form of 'the two models use different directions' is "
           "reciprocal-orthogonality's cross-norm ratio. The Jaccard, its chance value and the τ sweep are reported")


@claim(id="active-neuron-overlap", paper=PAPER, **WIDTH_CLAIM,
       statement="Wide models use different neurons: at the widest width the two models' active units (second "
                 "moment above τ × the layer's largest) overlap no more than active sets of the same sizes placed "
                 "independently at random, whose expected Jaccard index is pq/(p + q − pq) for active fractions "
                 "p and q (τ: analysis.mechanism.active_threshold, stated in the criterion; the τ sweep of "
                 "analysis.mechanism.active_thresholds is reported beside it).",
       tables=("layer_metrics", "active_overlap"), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 1})
def active_neuron_overlap(t: dict, p: dict) -> Outcome:
    df = layer_rows(t, p, p["weight_decay"], p["lam"]).assign(
        excess=lambda d: d.active_jaccard - d.active_jaccard_independent,
        frac_active=lambda d: (d.frac_active_a + d.frac_active_b) / 2)
    taus = sorted(set(df.active_threshold.dropna())) if "active_threshold" in df.columns else []
    need(len(taus) <= 1, f"one activity threshold τ per study (analysis.mechanism.active_threshold), got {taus}")
    sample, widths, x = over_widths(df, ["active_jaccard", "active_jaccard_independent", "excess", "frac_active"],
                                    f"active-unit overlaps at ≥ 2 widths with layers ≥ {p['min_layer']}")
    widest = widths[-1]
    reported = {"jaccard_widest": estimate(lambda m: m["active_jaccard", widest], sample),
                "independent_widest": estimate(lambda m: m["active_jaccard_independent", widest], sample),
                "active_fraction_widest": estimate(lambda m: m["frac_active", widest], sample),
                "jaccard_trend": estimate(lambda m: slope(x, m["active_jaccard"]), sample),
                "excess_trend": estimate(lambda m: slope(x, m["excess"]), sample)}
    means = sample.cells()
    sweep, sweep_details = tau_sweep(t.get("active_overlap"), p, widest)
    return Outcome([], sample.n_seeds, sample.n_pairs, reported | sweep, {
        "widths": widths, "active_threshold": taus[0] if taus else None, "retired": RETIRED,
        "mean_jaccard_by_width": means.list("active_jaccard"),
        "mean_independent_jaccard_by_width": means.list("active_jaccard_independent"),
        "mean_active_fraction_by_width": means.list("frac_active"), "tau_sweep": sweep_details}, reason=RETIRED)

