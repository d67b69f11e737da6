"""The width paper's claims about merging (Ito et al., ICLR 2026): barriers without permutation, temperature
calibration, alignment and weight decay.

Barrier claims read ``barriers`` (error = 1 − accuracy, raw, test split, plain averaging = method ``identity``)
of the arm trained with ``weight_decay`` (3e-3, the paper's working value); by default the midpoint barrier
e(½) − ½(e_A + e_B) of the paper's Table 1. Criteria and thresholds: docs/claims.md.
"""
from __future__ import annotations

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot, select
from lmcflow.claims.regime import predicted_crossing
from lmcflow.claims.stats import common_seeds, estimate, slope, spearman, trend_axis
from lmcflow.claims.width import (
    PAPER,
    WD,
    arm_points,
    error_barriers,
    interior,
    layer_rows,
    requires_mechanism,
    table1_values,
    widest_common,
    with_arms,
)
from lmcflow.config import ConfigError, merge_methods, same_value


def requires_methods(method_param: str | None = None, methods: tuple = (), at=("narrowest", "widest")):
    """The study must evaluate the merge method(s) at the narrowest / widest width of the claim's arm."""
    def check(cid, p, study, points) -> None:
        pts = arm_points(points, p.get("weight_decay"))
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


# --------------------------------------------------------------------------- barriers without permutation
@claim(id="width-merge-accuracy", paper=PAPER, gate_endpoints=True,
       statement="Without permutation, the error barrier between independently trained models falls as width "
                 "grows (over the whole width grid) and is small at the widest width.",
       tables=("barriers",), sweep_key="model.width", selects=WD, multi_study=True,
       defaults={"definition": "midpoint", "method": "identity", "split": "test", "weight_decay": 3.0e-3,
                 "max_barrier_widest": 0.02},
       paper_values=table1_values("plain-average midpoint error barrier at the widest width", "barrier_widest",
                                  lambda r: r.plain))
def width_merge_accuracy(t: dict, p: dict) -> Outcome:
    b = error_barriers(t, p, p["weight_decay"], method=p["method"])
    sample, lab = pivot(b, ["value"], ["definition", "width"])
    widths, defs = lab["width"], lab["definition"]
    need(p["definition"] in defs and len(widths) >= 2,
         f"{p['method']} error barriers ({p['definition']}) at fewer than 2 widths")
    d, widest = p["definition"], widths[-1]
    x, _ = trend_axis(widths)
    criteria = [
        Criterion("barrier_widest", f"{p['definition']} error barrier at the widest width {widths[-1]:g}",
             estimate(lambda m: m["value", d, widest], sample), "<", p["max_barrier_widest"],
             "convention: 2 points of test error, below the largest plain-average barrier the paper reports "
             "at its widest widths (ResNet-20 32x: 2.69%)"),
        Criterion("trend", f"least-squares slope of the mean {p['definition']} error barrier against log2 width, "
                      f"over all {len(widths)} widths", estimate(lambda m: slope(x, m["value", d]), sample), "<", 0.0,
             "paper: the barrier falls as width grows", kind="trend"),
    ]
    means = sample.cells()
    reported = {f"barrier_widest_{dd}": estimate(lambda m, dd=dd: m["value", dd, widest], sample)
                for dd in defs if dd != d}
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "mean_barrier_by_width": {dd: means.list("value", dd) for dd in defs},
        "spearman_log_width_vs_mean_barrier": spearman(x, means["value", d]),
        "crossing": predicted_crossing(sample, lambda m: m["value", d], widths, p["max_barrier_widest"],
                                       "barrier_widest")})


@claim(id="temperature-calibration", paper=PAPER, gate_endpoints=True,
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
    raw, calibrated, widest = False, True, widths[-1]  # labels of the calibrated column
    need(lab["calibrated"] == [False, True] and len(widths) >= 2, "raw and calibrated loss barriers at ≥ 2 widths")
    criteria = [
        Criterion("reduction", "fraction of the raw loss barrier removed by calibration, pooled over widths: "
                               "1 − Σ calibrated / Σ raw",
                  estimate(lambda m: 1 - m["value", calibrated].sum() / m["value", raw].sum(), sample),
                  ">", p["min_reduction"], "convention: calibration removes most (over half) of the raw barrier"),
        Criterion("calibrated_widest", f"calibrated {p['definition']} loss barrier (nats) at the widest width "
                                  f"{widths[-1]:g}", estimate(lambda m: m["value", calibrated, widest], sample), "<",
             p["max_calibrated_barrier_widest"], "convention: 0.05 nats, 'approaches zero' of the paper"),
    ]
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, {}, {
        "widths": widths, "mean_raw_by_width": means.list("value", raw),
        "mean_calibrated_by_width": means.list("value", calibrated),
        "crossing": predicted_crossing(sample, lambda m: m["value", calibrated], widths,
                                       p["max_calibrated_barrier_widest"], "calibrated_widest")})


# --------------------------------------------------------------------------- alignment
@claim(id="weight-matching-no-gain", paper=PAPER, gate_endpoints=True,
       statement="At the widest width weight matching removes less than half of the plain average's error barrier "
                 "(it gains little, or hurts), while at the narrowest width it lowers the barrier.",
       tables=("barriers",), sweep_key="model.width", selects=WD, multi_study=True,
       requires=(requires_methods("method"),),
       defaults={"method": "weight_matching", "weight_decay": 3.0e-3, "definition": "midpoint", "split": "test",
                 "max_relative_gain": 0.5, "min_gain_narrowest": 0.0},
       paper_values=table1_values("gain of weight matching at the widest width: barrier(plain) − barrier(weight "
                                  "matching)", "gain_widest", lambda r: r.plain - r.weight_matching))
def weight_matching_no_gain(t: dict, p: dict) -> Outcome:
    b = error_barriers(t, p, p["weight_decay"], definition=p["definition"])
    b = b[b.method.isin(["identity", p["method"]])]
    widths = sorted(set(b[b.method == p["method"]].width))
    need(len(widths) >= 2, f"{p['method']} evaluated at fewer than 2 widths")
    sample, lab = pivot(b[b.width.isin([widths[0], widths[-1]])], ["value"], ["method", "width"])
    need(lab["method"] == sorted(["identity", p["method"]]), f"identity and {p['method']} barriers")
    plain, method, narrowest, widest = "identity", p["method"], widths[0], widths[-1]
    criteria = [
        Criterion("relative_gain_widest", f"gain of {p['method']} at the widest width {widths[-1]:g} as a fraction "
                                          f"of the "
                                     f"plain-average {p['definition']} error barrier: (plain − {p['method']}) / plain "
                                     f"(ratio of means)",
             estimate(lambda m: (m["value", plain, widest] - m["value", method, widest])
                      / m["value", plain, widest], sample), "<", p["max_relative_gain"],
             "convention: a tolerance relative to the plain-average barrier (the paper's Table 1: weight matching "
             "gains 0.55 points on MLP 16x, 106% of its 0.52% barrier, and hurts on VGG-11 and ResNet-20)"),
        Criterion("gain_narrowest", f"gain of {p['method']} at the narrowest width {widths[0]:g} (error points)",
             estimate(lambda m: m["value", plain, narrowest] - m["value", method, narrowest], sample), ">",
             p["min_gain_narrowest"],
             "paper: permutations are needed where the model is narrow"),
    ]
    reported = {"gain_widest": estimate(lambda m: m["value", plain, widest] - m["value", method, widest], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "narrowest": widths[0], "widest": widths[-1],
        "mean_barrier_plain": means.list("value", plain),
        "mean_barrier_method": means.list("value", method)})


@claim(id="random-permutation", paper=PAPER, gate_endpoints=True,
       statement="Which permutation B gets stops mattering as width grows: at the widest width a random permutation "
                 "of B merges no worse than the permutation weight matching searches for, and the searched "
                 "permutation's advantage over a random one shrinks from the narrowest to the widest width.",
       tables=("barriers",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_methods("method", methods=("random_permutation",)),),
       defaults={"method": "weight_matching", "weight_decay": 3.0e-3, "definition": "midpoint", "split": "test",
                 "tolerance": 0.01})
def random_permutation(t: dict, p: dict) -> Outcome:
    # A random permutation of B has B's distribution (i.i.d. initialisation per unit, SGD equivariant to unit order),
    # so random permutation − no permutation is zero in expectation at every width: reported, not tested.
    b = error_barriers(t, p, p["weight_decay"], definition=p["definition"])
    searched = p["method"]
    b = b[b.method.isin(["identity", "random_permutation", searched])]
    widths = sorted(set(b[b.method == "random_permutation"].width) & set(b[b.method == searched].width))
    need(len(widths) >= 2, f"random_permutation and {searched} evaluated at ≥ 2 common widths")
    sample, lab = pivot(b[b.width.isin([widths[0], widths[-1]])], ["value"], ["method", "width"])
    need(lab["method"] == sorted(["identity", "random_permutation", searched]),
         f"identity, random_permutation and {searched} barriers")
    narrowest, widest = widths[0], widths[-1]

    def advantage(m, w):  # how much the searched permutation beats a random one (error points)
        return m["value", "random_permutation", w] - m["value", searched, w]

    criteria = [
        Criterion("advantage_widest", f"{p['definition']} error barrier at the widest width {widest:g}: random "
                                      f"permutation − {searched}",
                  estimate(lambda m: advantage(m, widest), sample), "<", p["tolerance"],
                  "convention: one point of test error (the paper, Fig. 18: at large width random permutations do "
                  "not degrade the merge, so the search for a specific permutation becomes irrelevant)"),
        Criterion("advantage_shrinks", f"(random permutation − {searched}) at the widest width {widest:g} minus at "
                                       f"the narrowest {narrowest:g}",
                  estimate(lambda m: advantage(m, widest) - advantage(m, narrowest), sample), "<", 0.0,
                  "paper: the permutation matters less as width grows", kind="trend"),
    ]
    reported = {"random_minus_identity_widest": estimate(
        lambda m: m["value", "random_permutation", widest] - m["value", "identity", widest], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": [narrowest, widest], "mean_identity_by_width": means.list("value", "identity"),
        "mean_random_by_width": means.list("value", "random_permutation"),
        f"mean_{searched}_by_width": means.list("value", searched),
        "note": "random permutation − no permutation is zero in expectation at every width (a randomly permuted B "
                "has B's distribution); reported only"})


# --------------------------------------------------------------------------- weight decay
@claim(id="weight-decay", paper=PAPER, gate_endpoints=True,
       statement="Weight decay drives LMC without permutation: with weight decay 1e-4 the error barrier at the "
                 "widest width is clearly larger, and the LEWC cosine lower, than with the default weight decay.",
       tables=("barriers", "layer_metrics"), sweep_key="train.weight_decay", multi_study=True,
       selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
       requires=(requires_mechanism("weight_decay", "weak_weight_decay", lam=False, interior=True),),
       defaults={"method": "identity", "weight_decay": 3.0e-3, "weak_weight_decay": 1.0e-4, "definition": "midpoint",
                 "split": "test", "min_layer": 2, "min_barrier_gap": 0.01, "min_lewc_gap": 0.0})
def weight_decay(t: dict, p: dict) -> Outcome:
    bars = with_arms(p, lambda wd: error_barriers(t, p, wd, method=p["method"], definition=p["definition"]))
    lm = with_arms(p, lambda wd: interior(layer_rows(t, p, wd)))
    need(len(bars) and len(lm), "barriers and LEWC rows of both weight-decay arms")
    wmax = widest_common(bars)
    b, _ = pivot(bars[bars.width == wmax], ["value"], ["arm"])
    le, lab = pivot(lm[lm.width == wmax], ["lewc_cos"], ["arm"])
    need(lab["arm"] == ["default", "weak"], "LEWC of both weight-decay arms at the widest common width")
    b, le = common_seeds(b, le)
    criteria = [
        Criterion("barrier_gap", f"{p['definition']} error barrier at width {wmax:g}: weak − default weight decay",
             estimate(lambda m: m["value", "weak"] - m["value", "default"], b), ">", p["min_barrier_gap"],
             "convention: one point of test error"),
        Criterion("lewc_gap", "LEWC cosine (interior λ ≠ ½, layers ≥ 2) at that width: default − weak weight decay",
             estimate(lambda m: m["lewc_cos", "default"] - m["lewc_cos", "weak"], le), ">", p["min_lewc_gap"],
             "paper: weak weight decay breaks LEWC"),
    ]
    bm, lmm = b.cells(), le.cells()
    return Outcome(criteria, b.n_seeds, b.n_pairs, {}, {
        "width": wmax, "mean_barrier": {arm: float(bm["value", arm]) for arm in ("default", "weak")},
        "mean_lewc": {arm: float(lmm["lewc_cos", arm]) for arm in ("default", "weak")}})
