"""The width paper's claims about merging (Ito et al., ICLR 2026): barriers without permutation, temperature
calibration, alignment and weight decay.

Their headline statistics read the merge's path (``interpolation``: error = 1 − accuracy, raw or calibrated loss,
test split) of the arm trained with ``weight_decay`` (3e-3, the paper's working value) against BOTH endpoints
(``width.path_ends``): a partner B that is no working model (untrained, trained on shuffled labels, collapsed toward
zero) is far from A, so a merge that is "A plus nothing" lands on the failing side of each headline; the paper's
Table-1 barrier e(½) − ½(e_A + e_B) (``barriers``) is reported beside it. Criteria and thresholds: docs/claims.md.
"""
from __future__ import annotations

import numpy as np

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot, select
from lmcflow.claims.regime import predicted_crossing
from lmcflow.claims.stats import common_seeds, estimate, slope, spearman, trend_axis
from lmcflow.claims.thresholds import source
from lmcflow.claims.width import (
    PAPER,
    WD,
    WIDTH_CLAIM,
    arm_points,
    interior,
    layer_rows,
    path_ends,
    requires_mechanism,
    table1_values,
    upper_widths,
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
@claim(id="width-merge-accuracy", paper=PAPER, **WIDTH_CLAIM,
       statement="Without permutation, plain averaging of two wide models reaches the accuracy of both originals: at "
                 "the widest width the midpoint's test error is within 2 points of each endpoint's, and that gap "
                 "falls with width over the upper part of the grid (from ×1 up).",
       tables=("interpolation", "barriers"), sweep_key="model.width", selects=WD, multi_study=True,
       defaults={"method": "identity", "split": "test", "weight_decay": 3.0e-3, "max_gap_widest": 0.02,
                 "trend_from_width": 1.0},
       paper_values=table1_values("plain-average midpoint error barrier at the widest width", "barrier_widest",
                                  lambda r: r.plain))
def width_merge_accuracy(t: dict, p: dict) -> Outcome:
    ends = path_ends(t, p, p["weight_decay"], methods=[p["method"]])
    sample, lab = pivot(ends, ["gap", "barrier", "ends_gap"], ["width"])
    widths = lab["width"]
    need(len(widths) >= 2, f"{p['method']} paths at fewer than 2 widths")
    widest, up = widths[-1], upper_widths(widths, p["trend_from_width"])
    x_up, _ = trend_axis(up)
    x, _ = trend_axis(widths)
    criteria = [
        Criterion("gap_widest", f"test error of the plain-average midpoint: distance from the farther endpoint, "
                                f"max(|e(½) − e_A|, |e(½) − e_B|), at the widest width {widest:g}",
                  estimate(lambda m: m["gap", widest], sample), "<", p["max_gap_widest"], source("max_gap_widest")),
        Criterion("trend", f"least-squares slope of that mean distance against log2 width over the widths "
                           f"{', '.join(f'{w:g}' for w in up)}", estimate(lambda m: slope(x_up, m["gap", up]), sample),
                  "<", 0.0, "paper: the merge approaches the originals as width grows", kind="trend"),
    ]
    reported = {"barrier_widest": estimate(lambda m: m["barrier", widest], sample),
                "ends_gap_widest": estimate(lambda m: m["ends_gap", widest], sample),
                "trend_whole_grid": estimate(lambda m: slope(x, m["gap"]), sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "trend_widths": up, "mean_gap_by_width": means.list("gap"),
        "mean_barrier_by_width": means.list("barrier"),
        "spearman_log_width_vs_mean_barrier": spearman(x, means["barrier"]),
        "crossing": predicted_crossing(sample, lambda m: m["barrier"], widths, p["max_gap_widest"],
                                       "barrier_widest")})


@claim(id="temperature-calibration", paper=PAPER, **WIDTH_CLAIM,
       statement="After softmax-temperature calibration the merge's loss approaches that of both originals at the "
                 "widest width (the calibrated midpoint loss within 0.05 nats of each endpoint's), and calibration "
                 "removes over half of the raw loss barrier there.",
       tables=("interpolation", "barriers"), sweep_key="model.width", multi_study=True, selects=WD,
       defaults={"definition": "entezari", "method": "identity", "split": "test", "weight_decay": 3.0e-3,
                 "min_reduction": 0.5, "max_calibrated_gap_widest": 0.05})
def temperature_calibration(t: dict, p: dict) -> Outcome:
    ends = path_ends(t, p, p["weight_decay"], column="calibrated_loss", methods=[p["method"]])
    gaps, lab = pivot(ends, ["gap"], ["width"])
    b = select(t["barriers"], metric="loss", definition=p["definition"], method=p["method"], split=p["split"],
               weight_decay=p["weight_decay"])
    sample, blab = pivot(b, ["value"], ["calibrated", "width"])
    widths = blab["width"]
    raw, calibrated = False, True
    need(blab["calibrated"] == [False, True] and len(widths) >= 2 and lab["width"][-1] == widths[-1],
         "raw and calibrated loss barriers at ≥ 2 widths")
    widest = widths[-1]
    gaps, sample = common_seeds(gaps, sample)
    criteria = [
        Criterion("calibrated_gap_widest", f"calibrated test loss (nats) of the midpoint: distance from the farther "
                                           f"endpoint at the widest width {widest:g}",
                  estimate(lambda m: m["gap", widest], gaps), "<", p["max_calibrated_gap_widest"],
                  source("max_calibrated_gap_widest")),
        Criterion("reduction_widest", f"fraction of the raw {p['definition']} loss barrier removed by calibration at "
                                      f"the widest width: 1 − calibrated / raw (ratio of means)",
                  estimate(lambda m: 1 - m["value", calibrated, widest] / m["value", raw, widest], sample),
                  ">", p["min_reduction"], source("min_reduction")),
    ]
    reported = {"calibrated_barrier_widest": estimate(lambda m: m["value", calibrated, widest], sample),
                "reduction_pooled": estimate(lambda m: 1 - m["value", calibrated].sum() / m["value", raw].sum(),
                                             sample)}
    means = sample.cells()
    return Outcome(criteria, gaps.n_seeds, gaps.n_pairs, reported, {
        "widths": widths, "mean_raw_by_width": means.list("value", raw),
        "mean_calibrated_by_width": means.list("value", calibrated),
        "mean_calibrated_gap_by_width": gaps.cells().list("gap"),
        "crossing": predicted_crossing(sample, lambda m: m["value", calibrated], widths,
                                       p["max_calibrated_gap_widest"], "calibrated_widest")})


# --------------------------------------------------------------------------- alignment
@claim(id="weight-matching-no-gain", paper=PAPER, **WIDTH_CLAIM,
       statement="At the widest width weight matching brings no significant accuracy gain over plain averaging of two "
                 "equally good models: the gain in midpoint test error is inside a one-point equivalence margin "
                 "(and the two endpoints within it of each other), while at the narrowest width weight matching "
                 "lowers the barrier.",
       tables=("interpolation", "barriers"), sweep_key="model.width", selects=WD, multi_study=True,
       requires=(requires_methods("method"),),
       defaults={"method": "weight_matching", "weight_decay": 3.0e-3, "definition": "midpoint", "split": "test",
                 "max_gain": 0.01, "min_gain_narrowest": 0.0},
       paper_values=table1_values("gain of weight matching at the widest width: barrier(plain) − barrier(weight "
                                  "matching)", "gain_widest", lambda r: r.plain - r.weight_matching))
def weight_matching_no_gain(t: dict, p: dict) -> Outcome:
    ends = path_ends(t, p, p["weight_decay"], methods=["identity", p["method"]])
    wide = ends.pivot_table(index=["seed_a", "seed_b", "width"], columns="method", values=["mid", "ends_gap"])
    need(("mid", p["method"]) in wide.columns and ("mid", "identity") in wide.columns,
         f"identity and {p['method']} paths")
    wide = wide.dropna()
    gain = (wide["mid", "identity"] - wide["mid", p["method"]]).to_numpy(float)
    ends_gap = wide["ends_gap", "identity"].to_numpy(float)
    per = wide.index.to_frame(index=False).assign(gain=gain, ends_gap=ends_gap, no_gain=np.maximum(gain, ends_gap))
    widths = sorted(set(per.width))
    need(len(widths) >= 2, f"{p['method']} evaluated at fewer than 2 widths")
    sample, _ = pivot(per, ["gain", "ends_gap", "no_gain"], ["width"])
    narrowest, widest = widths[0], widths[-1]
    criteria = [
        Criterion("gain_widest", f"max(gain of {p['method']} over plain averaging in midpoint test error, |e_A − e_B|) "
                                 f"at the widest width {widest:g}: the gain, on a pair of equally good endpoints",
                  estimate(lambda m: m["no_gain", widest], sample), "<", p["max_gain"], source("max_gain")),
        Criterion("gain_narrowest", f"gain of {p['method']} at the narrowest width {narrowest:g} (error points)",
                  estimate(lambda m: m["gain", narrowest], sample), ">", p["min_gain_narrowest"],
                  source("min_gain_narrowest")),
    ]
    reported = {"gain_only_widest": estimate(lambda m: m["gain", widest], sample),
                "ends_gap_widest": estimate(lambda m: m["ends_gap", widest], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "narrowest": narrowest, "widest": widest, "widths": widths, "mean_gain_by_width": means.list("gain")})


@claim(id="random-permutation", paper=PAPER, **WIDTH_CLAIM,
       statement="Which permutation B gets stops mattering as width grows: at the widest width the merge with B "
                 "randomly permuted has, pair by pair, the test error of the merge without permutation (within one "
                 "point, on a pair of equally good endpoints), and that per-pair sensitivity to the permutation "
                 "shrinks from the narrowest to the widest width.",
       tables=("interpolation",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_methods(methods=("random_permutation",)),),
       defaults={"weight_decay": 3.0e-3, "split": "test", "max_permutation_sensitivity": 0.01})
def random_permutation(t: dict, p: dict) -> Outcome:
    # the signed difference random − identity is zero in expectation at every width (a randomly permuted B has B's
    # distribution); its absolute value per pair is not: it measures how much this pair's merge depends on the
    # permutation, which the paper says vanishes with width (weight-matching-no-gain tests the searched one)
    ends = path_ends(t, p, p["weight_decay"], methods=["identity", "random_permutation"])
    wide = ends.pivot_table(index=["seed_a", "seed_b", "width"], columns="method", values=["mid", "ends_gap"]).dropna()
    need(("mid", "random_permutation") in wide.columns, "random_permutation paths")
    signed = (wide["mid", "random_permutation"] - wide["mid", "identity"]).to_numpy(float)
    ends_gap = wide["ends_gap", "identity"].to_numpy(float)
    per = wide.index.to_frame(index=False).assign(diff=np.abs(signed), ends_gap=ends_gap, signed=signed,
                                                  sensitivity=np.maximum(np.abs(signed), ends_gap))
    widths = sorted(set(per.width))
    need(len(widths) >= 2, "random_permutation evaluated at ≥ 2 widths")
    sample, _ = pivot(per, ["diff", "ends_gap", "sensitivity", "signed"], ["width"])
    narrowest, widest = widths[0], widths[-1]
    criteria = [
        Criterion("sensitivity_widest", f"max(|e(½) with B randomly permuted − e(½) without|, |e_A − e_B|) per pair, "
                                        f"at the widest width {widest:g}",
                  estimate(lambda m: m["sensitivity", widest], sample), "<", p["max_permutation_sensitivity"],
                  source("max_permutation_sensitivity")),
        Criterion("sensitivity_shrinks", f"|random − unpermuted| midpoint error at the widest width {widest:g} minus "
                                         f"at the narrowest {narrowest:g}",
                  estimate(lambda m: m["diff", widest] - m["diff", narrowest], sample), "<", 0.0,
                  "paper: the permutation matters less as width grows", kind="trend"),
    ]
    reported = {"random_minus_identity_widest": estimate(lambda m: m["signed", widest], sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "mean_abs_difference_by_width": means.list("diff"),
        "note": "random permutation − no permutation is zero in expectation at every width; its absolute value per "
                "pair is the criterion"})


# --------------------------------------------------------------------------- weight decay
@claim(id="weight-decay", paper=PAPER, **WIDTH_CLAIM,
       statement="Weight decay drives LMC without permutation: with weight decay 1e-4 the plain merge at the widest "
                 "width both arms have is clearly further from its endpoints (by over a point of test error), and "
                 "the LEWC cosine lower, than with the default weight decay.",
       tables=("interpolation", "layer_metrics"), sweep_key="train.weight_decay", multi_study=True,
       selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
       requires=(requires_mechanism("weight_decay", "weak_weight_decay", lam=False, interior=True),),
       defaults={"method": "identity", "weight_decay": 3.0e-3, "weak_weight_decay": 1.0e-4, "split": "test",
                 "min_layer": 2, "min_gap_difference": 0.01, "min_lewc_gap": 0.0})
def weight_decay(t: dict, p: dict) -> Outcome:
    ends = with_arms(p, lambda wd: path_ends(t, p, wd, methods=[p["method"]]))
    lm = with_arms(p, lambda wd: interior(layer_rows(t, p, wd)))
    need(len(ends) and len(lm), "paths and LEWC rows of both weight-decay arms")
    wmax = widest_common(ends)
    b, _ = pivot(ends[ends.width == wmax], ["gap", "barrier"], ["arm"])
    le, lab = pivot(lm[lm.width == wmax], ["lewc_cos"], ["arm"])
    need(lab["arm"] == ["default", "weak"], "LEWC of both weight-decay arms at the widest common width")
    b, le = common_seeds(b, le)
    criteria = [
        Criterion("gap_difference", f"midpoint test error's distance from the farther endpoint at width {wmax:g}: "
                                    f"weak − default weight decay",
                  estimate(lambda m: m["gap", "weak"] - m["gap", "default"], b), ">", p["min_gap_difference"],
                  source("min_gap_difference")),
        Criterion("lewc_gap", "LEWC cosine (interior λ ≠ ½, layers ≥ 2) at that width: default − weak weight decay",
                  estimate(lambda m: m["lewc_cos", "default"] - m["lewc_cos", "weak"], le), ">", p["min_lewc_gap"],
                  source("min_lewc_gap")),
    ]
    reported = {"barrier_gap": estimate(lambda m: m["barrier", "weak"] - m["barrier", "default"], b)}
    bm, lmm = b.cells(), le.cells()
    return Outcome(criteria, b.n_seeds, b.n_pairs, reported, {
        "width": wmax, "mean_gap": {arm: float(bm["gap", arm]) for arm in ("default", "weak")},
        "mean_lewc": {arm: float(lmm["lewc_cos", arm]) for arm in ("default", "weak")}})
