"""Claims of the width paper (Ito et al., ICLR 2026, arXiv 2510.08023).

Barrier claims read ``barriers`` (error = 1 − accuracy, raw, test split, plain averaging = method
``identity``) of the arm trained with ``weight_decay`` (3e-3, the paper's working value); by default the
midpoint barrier e(½) − ½(e_A + e_B), the quantity of the paper's Table 1. Mechanism claims read
``layer_metrics`` of the unaligned pairs (``method`` identity), averaged per pair over hidden layers
≥ ``min_layer`` (layer 1 reads the same input in both models: there LEWC = LLFC and the cross-norm ratios
are 1 by definition). LEWC is read at the interior λ ≠ ½ (at λ = ½ its target ½^l (f_A + f_B) is a
multiple of LLFC's and the cosine cannot tell them apart); the other metrics at λ = ``lam`` (½; the
λ-independent ones repeat on every λ). Every mechanism claim is tested against a same-run control
stored beside it in ``layer_metrics`` (results/README.md): the shuffled sample pairing (LEWC, weak
additivity), LLFC and a random perturbation of A as far away as B (LEWC), each model against a randomly
permuted copy of itself (reciprocal orthogonality, the cross-transformation cosine), independently placed
active sets (active-neuron overlap) and the weak weight-decay arm (low rank). ``logit-norm-decay`` reads the
logit norms and fitted β of ``interpolation``.

Every width claim may read several studies (``study: [a, b]``): each is decided on its own and the verdicts
are combined (the Table-1 claims read every Table-1 row a config has; the mechanism claims e.g. the MLP with
and without biases, or VGG-11 beside the MLP for the weak weight-decay ablation). ``TABLE1_ROWS`` holds the
paper's Table 1 (also ``results/tables/paper_table1.parquet``, ``lmcflow.paper_table1``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmcflow.claims.core import (
    Criterion,
    Outcome,
    PaperValue,
    claim,
    need,
    pivot,
    select,
)
from lmcflow.claims.stats import estimate, slope, spearman, trend_axis
from lmcflow.config import ConfigError, same_value

PAPER = "Ito et al., ICLR 2026 (arXiv 2510.08023)"
TABLE1 = "Ito et al. 2026, Table 1 (λ = ½ error barrier; as a fraction of test error, 0.0052 = 0.52%)"
WD = {"weight_decay": "train.weight_decay"}
MECH = {"method": "identity", "weight_decay": 3.0e-3}
NULL_SOURCE = "null: the same cosine with the pairing of samples between A and B shuffled (layer_metrics)"


@dataclass(frozen=True)
class Table1Row:
    """One row of the paper's Table 1: the midpoint (λ = ½) test error barrier of the plain average and with
    weight matching, at the widest width the paper trained (fractions of test error: 0.0052 = 0.52%)."""

    arch: str
    dataset: str
    width: float
    plain: float
    weight_matching: float
    label: str

    def value(self, method: str) -> float:
        return {"identity": self.plain, "weight_matching": self.weight_matching}[method]


TABLE1_ROWS = (
    Table1Row("mlp", "mnist", 16.0, 0.0052, -0.0003, "MLP, 16x width, MNIST"),
    Table1Row("vgg11", "cifar10", 16.0, 0.0131, 0.0700, "VGG-11, 16x width, CIFAR-10"),
    Table1Row("resnet20", "cifar10", 32.0, 0.0269, 0.0514, "ResNet-20, 32x width, CIFAR-10"),
)


def _table1(quantity: str, ours: str, value) -> tuple:
    return tuple(PaperValue(quantity, value(r), r.label, TABLE1, ours, {"arch": r.arch}) for r in TABLE1_ROWS)


# --------------------------------------------------------------------------- config requirements
def _arm(points: list, weight_decay) -> list:
    return [q for q in points if weight_decay is None or same_value(q.train["weight_decay"], weight_decay)]


def requires_methods(method_param: str | None = None, methods: tuple = (), at=("narrowest", "widest")):
    """The study must evaluate the merge method(s) at the narrowest / widest width of the claim's arm."""
    def check(cid, p, study, points) -> None:
        from lmcflow.config import merge_methods

        pts = _arm(points, p.get("weight_decay"))
        widths = sorted({float(q.model["width"]) for q in pts})
        wanted = list(methods) + ([p[method_param]] if method_param else [])
        for m in wanted:
            for where in at:
                w = widths[0] if where == "narrowest" else widths[-1]
                if not any(m in merge_methods(q) for q in pts if same_value(q.model["width"], w)):
                    raise ConfigError(
                        f"claims.{cid}: needs merge method {m!r} at the {where} width {w:g} (weight decay "
                        f"{p.get('weight_decay')}) of study {study!r}: add it to studies.{study}.merge.methods "
                        f"and let merge.alignment.at include that point")
    return check


def requires_mechanism(*wd_params: str, lam: bool = True, interior: bool = False):
    """analysis.mechanism must cover ``method`` at every point of each weight-decay arm the claim reads, with
    λ = ``lam`` (``lam``) and/or a λ in (0, 1) other than ½ (``interior``: LEWC against LLFC)."""
    def check(cid, p, study, points) -> None:
        from lmcflow.config import mechanism_lambdas, mechanism_methods

        for param in wd_params:
            arm = _arm(points, p.get(param))
            missing = [q.point for q in arm if p["method"] not in mechanism_methods(q)]
            if missing:
                raise ConfigError(
                    f"claims.{cid}: needs mechanism metrics for method {p['method']!r} at points {missing} of "
                    f"study {study!r}: set studies.{study}.analysis.mechanism.methods to include it")
            for q in arm:
                lams = mechanism_lambdas(q)
                if lam and not any(same_value(p["lam"], v) for v in lams):
                    raise ConfigError(f"claims.{cid}: reads λ = {p['lam']} but analysis.mechanism.lambdas of "
                                      f"study {study!r} (point {q.point}) does not contain it")
                if interior and not [v for v in lams if 0 < v < 1 and not same_value(v, 0.5)]:
                    raise ConfigError(f"claims.{cid}: compares LEWC with LLFC, which needs a λ in (0, 1) other "
                                      f"than ½; analysis.mechanism.lambdas of study {study!r} (point {q.point}) "
                                      f"has {lams}")
    return check


# --------------------------------------------------------------------------- helpers
def _error_barriers(t: dict, p: dict, weight_decay, **more):
    return select(t["barriers"], metric="error", calibrated=False, split=p["split"], weight_decay=weight_decay,
                  **more)


def _layer_rows(t: dict, p: dict, weight_decay, lam=None):
    df = select(t["layer_metrics"], method=p["method"], weight_decay=weight_decay)
    df = df[df.layer >= int(p["min_layer"])]
    return select(df, lam_paper=float(lam)) if lam is not None else df


def _interior(df):
    lam = df.lam_paper.to_numpy(dtype=float)
    return df[(lam > 0) & (lam < 1) & ~np.isclose(lam, 0.5)]


def _with_arms(t: dict, p: dict, frame):
    """``frame(weight_decay)`` for the default and the weak arm, with an ``arm`` column (0 default, 1 weak)."""
    return pd.concat([frame(p["weight_decay"]).assign(arm=0), frame(p["weak_weight_decay"]).assign(arm=1)])


def _widest_common(df) -> float:
    both = sorted(set(df[df.arm == 0].width) & set(df[df.arm == 1].width))
    need(bool(both), "no width that both weight-decay arms have")
    return both[-1]


def _over_widths(df, columns: list, requirement: str):
    """(seed sample of ``columns`` by width, the widths, their trend axis); ≥ 2 widths, else ``requirement``."""
    sample, lab = pivot(df, columns, ["width"])
    widths = lab["width"]
    need(len(widths) >= 2, requirement)
    x, _ = trend_axis(widths)
    return sample, widths, x


def _curve(m, *index) -> list:
    return np.asarray(m[index]).tolist()


# --------------------------------------------------------------------------- barrier claims
@claim(id="width-merge-accuracy", paper=PAPER,
       statement="Without permutation, the error barrier between independently trained models falls as width "
                 "grows (over the whole width grid) and is small at the widest width.",
       tables=("barriers",), sweep_key="model.width", selects=WD, multi_study=True,
       defaults={"definition": "midpoint", "method": "identity", "split": "test", "weight_decay": 3.0e-3,
                 "max_barrier_widest": 0.02},
       paper_values=_table1("plain-average midpoint error barrier at the widest width", "barrier_widest",
                            lambda r: r.plain))
def width_merge_accuracy(t: dict, p: dict) -> Outcome:
    b = _error_barriers(t, p, p["weight_decay"], method=p["method"])
    sample, lab = pivot(b, ["value"], ["definition", "width"])
    widths, defs = lab["width"], lab["definition"]
    need(p["definition"] in defs and len(widths) >= 2,
         f"{p['method']} error barriers ({p['definition']}) at fewer than 2 widths")
    d = defs.index(p["definition"])
    x, _ = trend_axis(widths)
    criteria = [
        Criterion("barrier_widest", f"{p['definition']} error barrier at the widest width {widths[-1]:g}",
             estimate(lambda m: m[0, d, -1], sample), "<", p["max_barrier_widest"],
             "convention: 2 points of test error, below the largest plain-average barrier the paper reports "
             "at its widest widths (ResNet-20 32x: 2.69%)"),
        Criterion("trend", f"least-squares slope of the mean {p['definition']} error barrier against log2 width, "
                      f"over all {len(widths)} widths", estimate(lambda m: slope(x, m[0, d]), sample), "<", 0.0,
             "paper: the barrier falls as width grows", kind="trend"),
    ]
    means = sample.means()
    reported = {f"barrier_widest_{dd}": estimate(lambda m, i=i: m[0, i, -1], sample)
                for i, dd in enumerate(defs) if dd != p["definition"]}
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "mean_barrier_by_width": {dd: _curve(means, 0, i) for i, dd in enumerate(defs)},
        "spearman_log_width_vs_mean_barrier": spearman(x, means[0, d])})


@claim(id="temperature-calibration", paper=PAPER,
       statement="After softmax-temperature calibration the loss barrier is far below the raw one and "
                 "approaches zero at the widest width.",
       tables=("barriers",), sweep_key="model.width", multi_study=True, selects=WD,
       defaults={"definition": "entezari", "method": "identity", "split": "test", "weight_decay": 3.0e-3,
                 "min_reduction": 0.5, "max_calibrated_barrier_widest": 0.05})
def temperature_calibration(t: dict, p: dict) -> Outcome:
    b = select(t["barriers"], metric="loss", definition=p["definition"], method=p["method"], split=p["split"],
               weight_decay=p["weight_decay"])
    sample, lab = pivot(b, ["value"], ["calibrated", "width"])
    widths = lab["width"]
    need(lab["calibrated"] == [False, True] and len(widths) >= 2, "raw and calibrated loss barriers at ≥ 2 widths")
    criteria = [
        Criterion("reduction", "fraction of the raw loss barrier removed by calibration, pooled over widths: "
                          "1 − Σ calibrated / Σ raw", estimate(lambda m: 1 - m[0, 1].sum() / m[0, 0].sum(), sample),
             ">", p["min_reduction"], "convention: calibration removes most (over half) of the raw barrier"),
        Criterion("calibrated_widest", f"calibrated {p['definition']} loss barrier (nats) at the widest width "
                                  f"{widths[-1]:g}", estimate(lambda m: m[0, 1, -1], sample), "<",
             p["max_calibrated_barrier_widest"], "convention: 0.05 nats, 'approaches zero' of the paper"),
    ]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_raw_by_width": _curve(means, 0, 0), "mean_calibrated_by_width": _curve(means, 0, 1)})


# --------------------------------------------------------------------------- mechanism claims
@claim(id="lewc", paper=PAPER,
       statement="Without permutation, the layer-wise exponentially weighted connectivity (LEWC) cosine "
                 "cos(f_l(θ_λ), λ^l f_l(θ_A) + (1−λ)^l f_l(θ_B)) rises with width toward 1, and at the widest "
                 "width holds at every interior λ ≠ ½, beats the same cosine with the sample pairing of A and B "
                 "shuffled, exceeds the LLFC form cos(f_l(θ_λ), λ f_l(θ_A) + (1−λ) f_l(θ_B)), and exceeds the "
                 "LEWC cosine of A with a random perturbation of A as far away as B (it is not flatness; layers "
                 "l ≥ 2).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay", lam=False, interior=True),),
       defaults={**MECH, "min_layer": 2, "min_lewc_widest": 0.9, "min_gain_over_shuffled": 0.5,
                 "min_gap_over_llfc": 0.0, "min_gap_over_perturbed": 0.0})
def lewc(t: dict, p: dict) -> Outcome:
    df = _interior(_layer_rows(t, p, p["weight_decay"]))
    sample, lab = pivot(df, ["lewc_cos", "lewc_cos_shuffled", "llfc_cos", "lewc_cos_perturbed"], ["width", "lam_paper"])
    widths, lams = lab["width"], lab["lam_paper"]
    need(len(widths) >= 2 and lams, f"LEWC rows at ≥ 2 widths, layers ≥ {p['min_layer']}, interior λ ≠ ½")
    x, _ = trend_axis(widths)

    def gain(m):  # fraction of the null's shortfall from a perfect cosine that LEWC closes, worst λ
        return np.min((m[0, -1] - m[1, -1]) / (1 - m[1, -1]))

    criteria = [
        Criterion("lewc_widest", f"LEWC cosine at the widest width {widths[-1]:g}, worst interior λ "
                            f"(min over λ ∈ {lams} of the mean over layers ≥ {p['min_layer']})",
             estimate(lambda m: m[0, -1].min(), sample), ">", p["min_lewc_widest"],
             "convention: a cosine of 0.9 (the paper: LEWC approaches 1 with width)"),
        Criterion("gain_over_shuffled", "(LEWC − null)/(1 − null) at the widest width, worst λ; null = the LEWC target "
                                   "built from the dominant model's features on shuffled samples",
             estimate(gain, sample), ">", p["min_gain_over_shuffled"],
             NULL_SOURCE + "; convention: LEWC closes over half of the null's gap to 1", kind="control",
             control="shuffled sample pairing"),
        Criterion("lewc_minus_llfc", "LEWC − LLFC cosine at the widest width, worst λ",
             estimate(lambda m: np.min(m[0, -1] - m[2, -1]), sample), ">", p["min_gap_over_llfc"],
             "paper: LEWC, not LLFC, describes the merged features without permutation", kind="control",
             control="LLFC"),
        Criterion("lewc_minus_perturbed", "LEWC cosine of A and B minus that of A and a random perturbation of A as "
                                          "far away as B (per parameter tensor ‖δ‖ = ‖θ_B − θ_A‖), at the widest "
                                          "width, worst λ",
             estimate(lambda m: np.min(m[0, -1] - m[3, -1]), sample), ">", p["min_gap_over_perturbed"],
             "control (layer_metrics.lewc_cos_perturbed): LEWC is not flatness; a merge that works because any point "
             "at that distance would (a flat landscape) gives the random direction the same cosine",
             kind="control", control="random perturbation of A of the size of θ_B − θ_A"),
        Criterion("trend", "slope of the worst-λ LEWC cosine against log2 width, over all widths",
             estimate(lambda m: slope(x, m[0].min(axis=1)), sample), ">", 0.0, "paper: LEWC rises with width",
             kind="trend"),
    ]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "lambdas": lams, "mean_lewc_by_width_and_lambda": _curve(means, 0),
        "mean_lewc_shuffled_by_width_and_lambda": _curve(means, 1), "mean_llfc_by_width_and_lambda": _curve(means, 2),
        "mean_lewc_perturbed_by_width_and_lambda": _curve(means, 3)})


@claim(id="weak-additivity", paper=PAPER,
       statement="ReLU is weakly additive on the two models' pre-activations: at the widest width "
                 "cos(σ(½z̃_A(x) + ½z̃_B(x)), ½σ(z̃_A(x)) + ½σ(z̃_B(x))) exceeds the same cosine for pre-activations "
                 "of unrelated inputs (the pairing of samples between A and B shuffled: the independent baseline).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 1, "min_gain_over_shuffled": 0.0})
def weak_additivity(t: dict, p: dict) -> Outcome:
    df = _layer_rows(t, p, p["weight_decay"], p["lam"])
    sample, widths, x = _over_widths(df, ["weak_additivity", "weak_additivity_shuffled", "weak_additivity_gaussian"],
                                     f"weak-additivity rows at ≥ 2 widths at λ = {p['lam']}")
    criteria = [Criterion("gain_over_shuffled", f"weak-additivity cosine minus its shuffled-pairing null at the "
                                                f"widest width "
                                        f"{widths[-1]:g} (λ = {p['lam']}, layers ≥ {p['min_layer']})",
                  estimate(lambda m: m[0, -1] - m[1, -1], sample), ">", p["min_gain_over_shuffled"],
                  NULL_SOURCE, kind="control", control="shuffled sample pairing")]
    reported = {"weak_additivity_widest": estimate(lambda m: m[0, -1], sample),
                "shuffled_widest": estimate(lambda m: m[1, -1], sample),
                "trend_log2_width": estimate(lambda m: slope(x, m[0]), sample)}
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "mean_by_width": _curve(means, 0), "mean_shuffled_by_width": _curve(means, 1),
        "gaussian_reference": float(np.nanmean(means[2]))})


@claim(id="reciprocal-orthogonality", paper=PAPER,
       statement="Reciprocal orthogonality: the cross terms W_A z_B and W_B z_A are small against W_A z_A and "
                 "W_B z_B at the widest width, the cross-norm ratio falls over the whole width grid, and it is no "
                 "larger than what each model gives against a randomly permuted copy of itself (the "
                 "orthogonality that low rank alone explains).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 2, "max_ratio_widest": 0.5, "max_excess_over_permuted": 0.1})
def reciprocal_orthogonality(t: dict, p: dict) -> Outcome:
    df = _layer_rows(t, p, p["weight_decay"], p["lam"]).assign(
        cross_ratio=lambda d: (d.cross_ratio_a + d.cross_ratio_b) / 2,
        cross_ratio_permuted=lambda d: (d.cross_ratio_permuted_a + d.cross_ratio_permuted_b) / 2)
    sample, widths, x = _over_widths(df, ["cross_ratio", "cross_ratio_permuted", "cross_cos"],
                                     f"cross-norm ratios at ≥ 2 widths with layers ≥ {p['min_layer']}")
    criteria = [
        Criterion("ratio_widest", f"cross-norm ratio ½(‖W_A z_B‖/‖W_A z_A‖ + ‖W_B z_A‖/‖W_B z_B‖) at the widest width "
                             f"{widths[-1]:g} (layers ≥ {p['min_layer']})",
             estimate(lambda m: m[0, -1], sample), "<", p["max_ratio_widest"],
             "convention: W_A z_B ≈ 0 read as a cross term at most half the size of the own term"),
        Criterion("trend", "slope of the mean cross-norm ratio against log2 width, over all widths",
             estimate(lambda m: slope(x, m[0]), sample), "<", 0.0, "paper: the cross terms shrink as width grows",
             kind="trend"),
        Criterion("excess_over_permuted", "cross-norm ratio minus the ratio of each model against a randomly permuted "
                                     "copy of itself, ½(‖W_A P z_A‖/‖W_A z_A‖ + ‖W_B P' z_B‖/‖W_B z_B‖), at the "
                                     "widest width",
             estimate(lambda m: m[0, -1] - m[1, -1], sample), "<", p["max_excess_over_permuted"],
             "control (direction: not above): a permuted copy has the model's own activity at random units, the "
             "orthogonality low rank alone gives; a pair above it by more than the convention 0.1 has cross "
             "terms low rank does not explain (an untrained or unrelated B: full-rank W_B)",
             kind="control", control="each model against a randomly permuted copy of itself"),
    ]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_ratio_by_width": _curve(means, 0), "mean_permuted_ratio_by_width": _curve(means, 1),
        "mean_cross_cos_by_width": _curve(means, 2)})


@claim(id="low-rank", paper=PAPER,
       statement="Weight decay makes the hidden weights relatively low-rank: the relative effective rank falls over "
                 "the whole width grid under the default weight decay, and at the widest width it is below that of "
                 "the weak weight-decay arm (weak decay raises the rank) and clearly below that of an unstructured "
                 "(random Gaussian) matrix of the same shape. A pair counts with its less low-rank model.",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True,
       selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
       requires=(requires_mechanism("weight_decay", "weak_weight_decay"),),
       defaults={**MECH, "weak_weight_decay": 1.0e-4, "lam": 0.5, "min_layer": 2, "max_rank_gap": 0.0,
                 "max_fraction_of_random": 0.9})
def low_rank(t: dict, p: dict) -> Outcome:
    df = _with_arms(t, p, lambda wd: _layer_rows(t, p, wd, p["lam"])).assign(
        erank_rel=lambda d: np.maximum(d.erank_rel_a, d.erank_rel_b),
        rank99_frac=lambda d: np.maximum(d.rank99_frac_a, d.rank99_frac_b))
    need(len(df), f"weight ranks of layers ≥ {p['min_layer']}")
    wmax = _widest_common(df)
    sample, lab = pivot(df, ["erank_rel", "rank99_frac", "erank_rel_random"], ["arm", "width"])
    widths = lab["width"]
    need(lab["arm"] == [0, 1], "both weight-decay arms")
    w = widths.index(wmax)
    default_widths = sorted(set(df[df.arm == 0].width))
    need(len(default_widths) >= 2, "the default arm at ≥ 2 widths")
    cols = [widths.index(v) for v in default_widths]
    x, _ = trend_axis(default_widths)
    criteria = [
        Criterion("default_minus_weak", f"relative effective rank erank/min(shape) (the pair's larger; layers ≥ "
                                   f"{p['min_layer']}) at width {wmax:g}: default − weak weight decay",
             estimate(lambda m: m[0, 0, w] - m[0, 1, w], sample), "<", p["max_rank_gap"],
             "control, paper: weak weight decay raises the rank", kind="control", control="weak weight-decay arm"),
        Criterion("fraction_of_random", f"relative effective rank (default arm) at width {wmax:g} as a fraction of "
                                   f"that of a random Gaussian matrix of the same shape",
             estimate(lambda m: m[0, 0, w] / m[2, 0, w], sample), "<", p["max_fraction_of_random"],
             "null: an unstructured weight (untrained, or memorising shuffled labels, sits at ≈ 1); convention: "
             "'low rank' means at least 10% below it", kind="control", control="random matrix of the same shape"),
        Criterion("trend", "slope of the relative effective rank (default arm) against log2 width, over all widths",
             estimate(lambda m: slope(x, m[0, 0, cols]), sample), "<", 0.0,
             "paper: the weights become relatively low-rank as width grows", kind="trend"),
    ]
    reported = {"erank_rel_default_widest": estimate(lambda m: m[0, 0, w], sample),
                "erank_rel_weak_widest": estimate(lambda m: m[0, 1, w], sample),
                "rank99_frac_default_minus_weak": estimate(lambda m: m[1, 0, w] - m[1, 1, w], sample)}
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "width_compared": wmax, "mean_erank_rel_by_width": {"default": _curve(means, 0, 0),
                                                                              "weak": _curve(means, 0, 1)},
        "mean_rank99_frac_by_width": {"default": _curve(means, 1, 0), "weak": _curve(means, 1, 1)},
        "random_matrix_erank_rel_by_width": _curve(means, 2, 0)})


@claim(id="weight-decay", paper=PAPER,
       statement="Weight decay drives LMC without permutation: with weight decay 1e-4 the error barrier at the "
                 "widest width is clearly larger, and the LEWC cosine lower, than with the default weight decay.",
       tables=("barriers", "layer_metrics"), sweep_key="train.weight_decay", multi_study=True,
       selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
       requires=(requires_mechanism("weight_decay", "weak_weight_decay", lam=False, interior=True),),
       defaults={"method": "identity", "weight_decay": 3.0e-3, "weak_weight_decay": 1.0e-4, "definition": "midpoint",
                 "split": "test", "min_layer": 2, "min_barrier_gap": 0.01, "min_lewc_gap": 0.0})
def weight_decay(t: dict, p: dict) -> Outcome:
    from lmcflow.claims.stats import common_seeds

    bars = _with_arms(t, p, lambda wd: _error_barriers(t, p, wd, method=p["method"], definition=p["definition"]))
    lm = _with_arms(t, p, lambda wd: _interior(_layer_rows(t, p, wd)))
    need(len(bars) and len(lm), "barriers and LEWC rows of both weight-decay arms")
    wmax = _widest_common(bars)
    b, _ = pivot(bars[bars.width == wmax], ["value"], ["arm"])
    le, lab = pivot(lm[lm.width == wmax], ["lewc_cos"], ["arm"])
    need(lab["arm"] == [0, 1], "LEWC of both weight-decay arms at the widest common width")
    b, le = common_seeds(b, le)
    criteria = [
        Criterion("barrier_gap", f"{p['definition']} error barrier at width {wmax:g}: weak − default weight decay",
             estimate(lambda m: m[0, 1] - m[0, 0], b), ">", p["min_barrier_gap"],
             "convention: one point of test error"),
        Criterion("lewc_gap", "LEWC cosine (interior λ ≠ ½, layers ≥ 2) at that width: default − weak weight decay",
             estimate(lambda m: m[0, 0] - m[0, 1], le), ">", p["min_lewc_gap"],
             "paper: weak weight decay breaks LEWC"),
    ]
    bm, lmm = b.means(), le.means()
    return Outcome(criteria, b.n_seeds, b.n_pairs, {}, {
        "width": wmax, "mean_barrier": {"default": float(bm[0, 0]), "weak": float(bm[0, 1])},
        "mean_lewc": {"default": float(lmm[0, 0]), "weak": float(lmm[0, 1])}})


# --------------------------------------------------------------------------- alignment claims
@claim(id="weight-matching-no-gain", paper=PAPER,
       statement="At the widest width weight matching removes less than half of the plain average's error barrier "
                 "(it gains little, or hurts), while at the narrowest width it lowers the barrier.",
       tables=("barriers",), sweep_key="model.width", selects=WD, multi_study=True,
       requires=(requires_methods("method"),),
       defaults={"method": "weight_matching", "weight_decay": 3.0e-3, "definition": "midpoint", "split": "test",
                 "max_relative_gain": 0.5, "min_gain_narrowest": 0.0},
       paper_values=_table1("gain of weight matching at the widest width: barrier(plain) − barrier(weight matching)",
                            "gain_widest", lambda r: r.plain - r.weight_matching))
def weight_matching_no_gain(t: dict, p: dict) -> Outcome:
    b = _error_barriers(t, p, p["weight_decay"], definition=p["definition"])
    b = b[b.method.isin(["identity", p["method"]])]
    widths = sorted(set(b[b.method == p["method"]].width))
    need(len(widths) >= 2, f"{p['method']} evaluated at fewer than 2 widths")
    sample, lab = pivot(b[b.width.isin([widths[0], widths[-1]])], ["value"], ["method", "width"])
    need(lab["method"] == sorted(["identity", p["method"]]), f"identity and {p['method']} barriers")
    i, j = lab["method"].index("identity"), lab["method"].index(p["method"])
    criteria = [
        Criterion("relative_gain_widest", f"gain of {p['method']} at the widest width {widths[-1]:g} as a fraction "
                                          f"of the "
                                     f"plain-average {p['definition']} error barrier: (plain − {p['method']}) / plain "
                                     f"(ratio of means)",
             estimate(lambda m: (m[0, i, -1] - m[0, j, -1]) / m[0, i, -1], sample), "<", p["max_relative_gain"],
             "convention: a tolerance relative to the plain-average barrier (the paper's Table 1: weight matching "
             "gains 0.55 points on MLP 16x, 106% of its 0.52% barrier, and hurts on VGG-11 and ResNet-20)"),
        Criterion("gain_narrowest", f"gain of {p['method']} at the narrowest width {widths[0]:g} (error points)",
             estimate(lambda m: m[0, i, 0] - m[0, j, 0], sample), ">", p["min_gain_narrowest"],
             "paper: permutations are needed where the model is narrow"),
    ]
    reported = {"gain_widest": estimate(lambda m: m[0, i, -1] - m[0, j, -1], sample)}
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "narrowest": widths[0], "widest": widths[-1],
        "mean_barrier_plain": _curve(means, 0, i), "mean_barrier_method": _curve(means, 0, j)})


@claim(id="random-permutation", paper=PAPER,
       statement="At the widest width a random permutation of model B leaves the merged (λ = ½) error within noise "
                 "of no permutation.",
       tables=("barriers",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_methods(methods=("random_permutation",), at=("widest",)),),
       defaults={"weight_decay": 3.0e-3, "definition": "midpoint", "split": "test", "tolerance": 0.01})
def random_permutation(t: dict, p: dict) -> Outcome:
    b = _error_barriers(t, p, p["weight_decay"], definition=p["definition"])
    b = b[b.method.isin(["identity", "random_permutation"])]
    widths = sorted(set(b[b.method == "random_permutation"].width))
    need(bool(widths), "random_permutation was not evaluated")
    sample, lab = pivot(b[b.width.isin(widths)], ["value"], ["method", "width"])
    need(lab["method"] == ["identity", "random_permutation"], "identity and random_permutation barriers")
    criteria = [Criterion("difference_widest", f"{p['definition']} error barrier at the widest width "
                                               f"{widths[-1]:g}: random "
                                       f"permutation − no permutation",
                  estimate(lambda m: m[0, 1, -1] - m[0, 0, -1], sample), "within", p["tolerance"],
                  "convention: one point of test error either way (the endpoints are the same functions, so this "
                  "is the difference of the merged errors)")]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_identity_by_width": _curve(means, 0, 0), "mean_random_by_width": _curve(means, 0, 1)})


# --------------------------------------------------------------------------- further mechanism analyses
@claim(id="cross-transformation-cosine", paper=PAPER,
       statement="The merged layer acts on the merged input like the sum of the two models' own layers: the "
                 "cross-transformation cosine cos((W_A + W_B)(z_A + z_B), W_A z_A + W_B z_B) of the paper's "
                 "orthogonality figure rises over the whole width grid toward 1, is near 1 at the widest width, and "
                 "is no lower than what each model gives with a randomly relabelled copy of itself (layers l ≥ 2).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 2, "min_cos_widest": 0.9, "max_shortfall_vs_permuted": 0.05})
def cross_transformation_cosine(t: dict, p: dict) -> Outcome:
    df = _layer_rows(t, p, p["weight_decay"], p["lam"]).assign(
        permuted=lambda d: (d.cross_transform_cos_permuted_a + d.cross_transform_cos_permuted_b) / 2)
    sample, widths, x = _over_widths(df, ["cross_transform_cos", "permuted", "cross_ratio_a"],
                                     f"cross-transformation cosines at ≥ 2 widths with layers ≥ {p['min_layer']}")
    criteria = [
        Criterion("cos_widest", f"cross-transformation cosine at the widest width {widths[-1]:g} (mean over layers "
                                f"≥ {p['min_layer']})", estimate(lambda m: m[0, -1], sample), ">", p["min_cos_widest"],
                  "convention: a cosine of 0.9, as for LEWC (the paper: the cosine goes to 1 with width)"),
        Criterion("trend", "slope of the mean cross-transformation cosine against log2 width, over all widths",
                  estimate(lambda m: slope(x, m[0]), sample), ">", 0.0, "paper: the cosine rises with width",
                  kind="trend"),
        Criterion("shortfall_vs_permuted", "cosine of each model with a randomly relabelled copy of itself minus the "
                                           "pair's cosine, at the widest width",
                  estimate(lambda m: m[1, -1] - m[0, -1], sample), "<", p["max_shortfall_vs_permuted"],
                  "control (direction: not below): the relabelled copy gives the cosine the model's own low rank "
                  "explains; a pair more than the convention 0.05 below it has cross terms low rank does not "
                  "explain (an untrained or unrelated B)", kind="control",
                  control="each model against a randomly relabelled copy of itself"),
    ]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_cos_by_width": _curve(means, 0), "mean_permuted_cos_by_width": _curve(means, 1),
        "mean_cross_ratio_a_by_width": _curve(means, 2)})


WEIGHT_LAYERS = {"mlp": lambda depth: depth + 1, "vgg11": lambda depth: 9, "resnet20": lambda depth: 20}


def n_weight_layers(arch: str, depth: int) -> int:
    """D, the weight layers from the input to the logits (MLP: hidden layers + head; VGG-11: 8 convs + head;
    ResNet-20: 19 main-path convs + head): LEWC scales the logits of θ_λ by λ^D + (1 − λ)^D."""
    return WEIGHT_LAYERS[arch](int(depth))


def lewc_logit_ratio(lam, depth) -> np.ndarray:
    """LEWC's logit norm of θ_λ relative to the endpoints' mean, for parallel endpoint logits of equal norm:
    λ^D + (1 − λ)^D."""
    lam = np.asarray(lam, dtype=float)
    return lam ** depth + (1 - lam) ** depth


def fitted_decay_exponent(lam, ratio) -> float:
    """D̂: the exponent whose λ^D + (1 − λ)^D fits the measured relative logit norms best (least squares on the log
    scale, interior λ), in [0.25, 64]; NaN if a ratio is not positive."""
    from scipy.optimize import minimize_scalar

    lam, ratio = np.asarray(lam, dtype=float), np.asarray(ratio, dtype=float)
    inside = (lam > 0) & (lam < 1)
    lam, ratio = lam[inside], ratio[inside]
    if not len(lam) or not np.all(ratio > 0):
        return float("nan")
    target = np.log(ratio)

    def loss(d):
        return float(np.sum((np.log(lewc_logit_ratio(lam, d)) - target) ** 2))

    return float(minimize_scalar(loss, bounds=(0.25, 64.0), method="bounded", options={"xatol": 1e-6}).x)


def requires_no_normalisation(cid, p, study, points) -> None:
    norms = sorted({q.model.get("norm", "none") for q in points} - {"none"})
    if norms:
        raise ConfigError(f"claims.{cid}: LEWC's logit decay λ^D assumes layers without normalisation (a norm layer "
                          f"re-estimated at every λ rescales each layer); study {study!r} uses model.norm {norms}")


@claim(id="logit-norm-decay", paper=PAPER,
       statement="Along the plain-average path the logits shrink as LEWC predicts, ‖z(θ_λ)‖ ≈ (λ^D + (1−λ)^D) × the "
                 "endpoints' norm for D weight layers (which is why the raw loss barrier is large and temperature "
                 "calibration removes it), and the fitted inverse temperature β undoes the decay: at the widest width "
                 "the exponent fitted to the logit norms along λ is within one layer of D, and β(½)·‖z(θ_½)‖ is "
                 "within a factor 2 of the endpoints' β·‖z‖.",
       tables=("interpolation",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_no_normalisation,),
       defaults={"method": "identity", "split": "test", "weight_decay": 3.0e-3, "max_exponent_error": 1.0,
                 "max_log2_compensation_error": 1.0})
def logit_norm_decay(t: dict, p: dict) -> Outcome:
    df = select(t["interpolation"], method=p["method"], split=p["split"], weight_decay=p["weight_decay"])
    need(len(df), f"{p['method']} {p['split']} interpolation rows at weight decay {p['weight_decay']}")
    layers = {n_weight_layers(a, d) for a, d in zip(df.arch, df.depth)}
    need(len(layers) == 1, f"one architecture per study, got weight-layer counts {sorted(layers)}")
    depth = layers.pop()
    widths = sorted(set(df.width))
    need(len(widths) >= 2, "interpolation rows at ≥ 2 widths")
    wide = df[np.isclose(df.width, widths[-1])].assign(scaled=lambda d: d.beta * d.logit_norm)
    sample, lab = pivot(wide, ["logit_norm", "scaled", "beta"], ["lam"])
    lams = np.asarray(lab["lam"], dtype=float)
    need(len(lams) >= 3 and lams[0] == 0 and lams[-1] == 1 and np.any(np.isclose(lams, 0.5)),
         "a λ grid with 0, ½ and 1")
    mid = int(np.argmin(np.abs(lams - 0.5)))

    def relative(m, row):  # the curve relative to the mean of its endpoints
        return m[row] / (0.5 * (m[row, 0] + m[row, -1]))

    criteria = [
        Criterion("exponent_error", f"fitted decay exponent D̂ of the mean logit norm along λ ({p['split']}, width "
                                    f"{widths[-1]:g}) minus LEWC's D = {depth}",
                  estimate(lambda m: fitted_decay_exponent(lams, relative(m, 0)) - depth, sample), "within",
                  p["max_exponent_error"],
                  "paper: LEWC scales the logits by λ^D + (1−λ)^D; convention: within one layer"),
        Criterion("log2_compensation", "log2 of β(½)·‖z(θ_½)‖ over the endpoints' mean β·‖z‖: how far calibration "
                                       "leaves the midpoint's logit scale from the endpoints'",
                  estimate(lambda m: np.log2(relative(m, 1)[mid]), sample), "within",
                  p["max_log2_compensation_error"],
                  "paper: temperature calibration undoes the decay; convention: within a factor 2"),
    ]
    reported = {"midpoint_norm_ratio": estimate(lambda m: relative(m, 0)[mid], sample),
                "midpoint_beta_ratio": estimate(lambda m: relative(m, 2)[mid], sample)}
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "width": widths[-1], "weight_layers": depth, "lambdas": lams.tolist(),
        "mean_norm_ratio_by_lambda": relative(means, 0).tolist(),
        "lewc_prediction_by_lambda": lewc_logit_ratio(lams, depth).tolist(),
        "mean_calibrated_norm_ratio_by_lambda": relative(means, 1).tolist()})


@claim(id="active-neuron-overlap", paper=PAPER,
       statement="Wide models use different neurons: at the widest width the Jaccard index of the two models' active "
                 "units (second moment above τ × the layer's largest) is small, it falls over the whole width grid, "
                 "and it is no larger than for active sets of the same sizes placed independently at random "
                 "(unaligned neurons do not share units beyond chance).",
       tables=("layer_metrics",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_mechanism("weight_decay"),),
       defaults={**MECH, "lam": 0.5, "min_layer": 1, "max_jaccard_widest": 0.5, "max_excess_over_independent": 0.05})
def active_neuron_overlap(t: dict, p: dict) -> Outcome:
    df = _layer_rows(t, p, p["weight_decay"], p["lam"])
    sample, widths, x = _over_widths(df, ["active_jaccard", "active_jaccard_independent", "frac_active_a"],
                                     f"active-unit overlaps at ≥ 2 widths with layers ≥ {p['min_layer']}")
    criteria = [
        Criterion("jaccard_widest", f"Jaccard index of the active units at the widest width {widths[-1]:g} (mean over "
                                    f"layers ≥ {p['min_layer']})", estimate(lambda m: m[0, -1], sample), "<",
                  p["max_jaccard_widest"], "convention: fewer than half of the units active in either model are "
                                           "active in both"),
        Criterion("trend", "slope of the mean Jaccard index against log2 width, over all widths",
                  estimate(lambda m: slope(x, m[0]), sample), "<", 0.0,
                  "paper: active neurons stop overlapping as width grows", kind="trend"),
        Criterion("excess_over_independent", "Jaccard index minus that of independently placed active sets of the same "
                                             "sizes, at the widest width",
                  estimate(lambda m: m[0, -1] - m[1, -1], sample), "<", p["max_excess_over_independent"],
                  "null (layer_metrics.active_jaccard_independent): chance overlap of sets of these sizes; "
                  "convention: at most 0.05 above it", kind="control",
                  control="independent placement of the active sets"),
    ]
    means = sample.means()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_jaccard_by_width": _curve(means, 0),
        "mean_independent_jaccard_by_width": _curve(means, 1), "mean_active_fraction_a_by_width": _curve(means, 2)})
