"""The width paper's logit-norm claim (Ito et al., ICLR 2026): along the plain-average path the logits shrink as LEWC
predicts, and temperature calibration undoes it. It reads ``interpolation``; why and its thresholds: docs/claims.md.
"""
from __future__ import annotations

import numpy as np

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot, select
from lmcflow.claims.stats import estimate
from lmcflow.claims.thresholds import source
from lmcflow.claims.width import PAPER, WD, WIDTH_CLAIM, fitted_decay_exponent, lewc_logit_ratio, n_weight_layers
from lmcflow.config import ConfigError


def requires_no_normalisation(cid, p, study, points) -> None:
    """The study's models have no normalisation layers (LEWC's logit decay assumes none)."""
    norms = sorted({q.model.get("norm", "none") for q in points} - {"none"})
    if norms:
        raise ConfigError(f"claims.{cid}: LEWC's logit decay λ^D assumes layers without normalisation (a norm layer "
                          f"re-estimated at every λ rescales each layer); study {study!r} uses model.norm {norms}")


@claim(id="logit-norm-decay", paper=PAPER, **WIDTH_CLAIM,
       statement="Along the plain-average path the logits shrink as LEWC predicts, ‖z(θ_λ)‖ ≈ (λ^D + (1−λ)^D) × the "
                 "endpoints' norm for D weight layers (which is why the raw loss barrier is large and temperature "
                 "calibration removes it), and the fitted inverse temperature β undoes the decay: at the widest width "
                 "the exponent fitted to the logit norms along λ is within half a layer of D, and β(½)·‖z(θ_½)‖ is "
                 "within a factor 2 of the endpoints' β·‖z‖.",
       tables=("interpolation",), sweep_key="model.width", multi_study=True, selects=WD,
       requires=(requires_no_normalisation,),
       defaults={"method": "identity", "split": "test", "weight_decay": 3.0e-3, "max_exponent_error": 0.5,
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
    need(len(lams) >= 3 and lams[0] == 0 and lams[-1] == 1 and np.any(np.isclose(lams, 0.5)), "a λ grid with 0, ½, 1")
    mid = lab["lam"][int(np.argmin(np.abs(lams - 0.5)))]  # the λ nearest ½

    def relative(m, column, lam=slice(None)):  # the curve (at lam) relative to the mean of its endpoints
        return m[column, lam] / (0.5 * (m[column, 0.0] + m[column, 1.0]))

    def to_smaller(m, column):  # relative to the smaller endpoint: LEWC's λ^D + (1−λ)^D needs endpoints of equal
        # norm; a B without logits of A's size (untrained, collapsed) leaves the curve far above 1, no such decay
        return m[column] / np.minimum(m[column, 0.0], m[column, 1.0])

    criteria = [
        Criterion("exponent_error", f"fitted decay exponent D̂ of the mean logit norm along λ relative to the smaller "
                                    f"endpoint's ({p['split']}, width {widths[-1]:g}) minus LEWC's D = {depth}",
                  estimate(lambda m: fitted_decay_exponent(lams, to_smaller(m, "logit_norm")) - depth, sample),
                  "within", p["max_exponent_error"],
                  "paper: LEWC scales the logits by λ^D + (1−λ)^D; " + source("max_exponent_error")),
        Criterion("log2_compensation", "log2 of β(½)·‖z(θ_½)‖ over the endpoints' mean β·‖z‖: how far calibration "
                                       "leaves the midpoint's logit scale from the endpoints'",
                  estimate(lambda m: np.log2(relative(m, "scaled", mid)), sample), "within",
                  p["max_log2_compensation_error"],
                  "paper: temperature calibration undoes the decay; convention: within a factor 2"),
    ]
    reported = {"midpoint_norm_ratio": estimate(lambda m: relative(m, "logit_norm", mid), sample),
                "midpoint_beta_ratio": estimate(lambda m: relative(m, "beta", mid), sample)}
    means = sample.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "width": widths[-1], "weight_layers": depth, "lambdas": lams.tolist(),
        "mean_norm_ratio_by_lambda": relative(means, "logit_norm").tolist(),
        "lewc_prediction_by_lambda": lewc_logit_ratio(lams, depth).tolist(),
        "mean_calibrated_norm_ratio_by_lambda": relative(means, "scaled").tolist()})
