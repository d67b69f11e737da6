"""Claims of the identifiability paper (Bürgin et al., ICML 2026, arXiv 2606.04754): σ_F and the trade-off.

σ_F against identifiability and unaligned barriers, read over the σ_F values whose networks train as well as the
symmetric σ_F = 0 control (``matched_sigmas``), and the cost of symmetry breaking in the paper's terms (what a
network fits within a weight-norm budget). The data-geometry claims (k, ν): ``identifiability_data``. Criteria and
thresholds: docs/claims.md.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot, select
from lmcflow.claims.stats import estimate, slope, trend_axis
from lmcflow.config import ConfigError
from lmcflow.config.catalog import check_symmetry

PAPER = "Bürgin et al., ICML 2026 (arXiv 2606.04754)"
# a control arm trains as well as the treated one when its mean test accuracy (a regression task: the fraction of
# the target variance it explains) is within this much of it
ARM_MARGIN = 0.05
ARM_MARGIN_SOURCE = ("convention: arms are compared only where their mean test accuracy is within "
                     "control_max_acc_gap (0.05, the endpoint gate's tolerance endpoint_max_drop, set before these "
                     "data) of the control's")


# --------------------------------------------------------------------------- config requirements
def requires_sigma_values(cid, p, study, points) -> None:
    # σ_F as the layers use it (default 1.0 when unset)
    sigmas = {float(check_symmetry(q.model.get("symmetry"))["sigma_f"]) for q in points}
    kinds = {(q.model.get("symmetry") or {}).get("kind", "standard") for q in points}
    if 0.0 not in sigmas or kinds & {"standard", "sigma_asymmetric"}:
        raise ConfigError(f"claims.{cid}: study {study!r} must sweep model.symmetry.sigma_f including 0 with a "
                          f"masked kind (w_asymmetric or syre); got σ_F {sorted(sigmas)} and kinds {sorted(kinds)}")


def requires_analysis(flag: str):
    def check(cid, p, study, points) -> None:
        if not all((q.analysis or {}).get(flag) for q in points):
            raise ConfigError(f"claims.{cid}: study {study!r} must set analysis.{flag}: true "
                              f"(studies.{study}.analysis.{flag})")
    return check


def requires_kinds(cid, p, study, points) -> None:
    kinds = {(q.model.get("symmetry") or {}).get("kind", "standard") for q in points}
    if "standard" not in kinds or len(kinds) < 2:
        raise ConfigError(f"claims.{cid}: study {study!r} must sweep model.symmetry.kind over standard and a "
                          f"symmetry-breaking kind; got {sorted(kinds)}")


def requires_epochs(cid, p, study, points) -> None:
    have = sorted({int(q.train["epochs"]) for q in points if q.partner == "real"})  # not an untrained null partner
    if int(p["epochs"]) not in have:
        raise ConfigError(f"claims.{cid}.epochs: {p['epochs']} is not a value of train.epochs in study {study!r}; "
                          f"its points have {have} (0 = untrained, the paper's arm)")


# --------------------------------------------------------------------------- arms that train alike
def arm_accuracy(runs: pd.DataFrame, rows: pd.DataFrame, arm: list[str]) -> pd.DataFrame:
    """Mean and spread over seeds of the models' test accuracy per arm (the ``arm`` columns of the claim's
    table ``rows``, whose ``point`` names the models' point in ``runs``): columns ``arm + [acc, acc_sd, n]``."""
    cols = list(arm)
    where = rows[["point", *cols]].drop_duplicates()
    need(not where.point.duplicated().any(), f"each point of the table must hold one {'/'.join(cols)} value: the "
                                             f"models' accuracies cannot be told apart")
    m = runs[["point", "seed", "test_acc"]].merge(where, on="point")
    need(len(m), "the runs table holds no model of the claim's points (the arms' accuracies)")
    g = m.groupby(cols).test_acc
    return g.mean().rename("acc").to_frame().join(g.std().rename("acc_sd")).join(g.size().rename("n")).reset_index()


def matched_sigmas(runs: pd.DataFrame, rows: pd.DataFrame, sigmas: list, margin: float) -> tuple[list, dict]:
    """(the σ_F values, from 0 up, whose networks' mean test accuracy stays within ``margin`` of σ_F = 0's,
    the record of every σ_F's accuracy and where the cost begins). The σ_F = 0 network is the symmetric control;
    a σ_F beyond the first one that costs more than ``margin`` is not compared with it."""
    acc = arm_accuracy(runs, rows, ["sigma_f"]).set_index("sigma_f")
    missing = [s for s in sigmas if s not in acc.index]
    need(not missing, f"no trained model accuracy at σ_F {missing} in the runs table")
    ref = float(acc.acc[sigmas[0]])
    matched = []
    for s in sigmas:
        if float(acc.acc[s]) < ref - margin:
            break
        matched.append(s)
    cost = sigmas[len(matched)] if len(matched) < len(sigmas) else None
    return matched, {"test_acc_by_sigma_f": [float(acc.acc[s]) for s in sigmas], "control_max_acc_gap": margin,
                     "accuracy_matched_sigma_f": matched, "accuracy_cost_begins_at_sigma_f": cost}


def _matched(df, runs, p):
    sigmas = sorted(set(df.sigma_f))
    need(len(sigmas) >= 2 and sigmas[0] == 0.0, "rows at σ_F = 0 and at least one σ_F > 0")
    matched, acc = matched_sigmas(runs, df, sigmas, p["control_max_acc_gap"])
    need(len(matched) >= 2, f"no σ_F > 0 trains within {p['control_max_acc_gap']:g} test accuracy of σ_F = 0 "
                            f"(mean test accuracy by σ_F {np.round(acc['test_acc_by_sigma_f'], 4).tolist()}): the "
                            f"symmetry-broken networks are not compared with a control that trained as well")
    return sigmas, matched, acc


# --------------------------------------------------------------------------- claims
@claim(id="sigma-f-identity", paper=PAPER, converged=True,
       statement="As σ_F grows the identity permutation's activation-matching objective rises to near the optimal "
                 "one, while the networks still train as well as the σ_F = 0 control; at σ_F = 0 it is near the "
                 "level of a random permutation.",
       tables=("identifiability", "runs"), sweep_key="model.symmetry.sigma_f",
       requires=(requires_sigma_values, requires_analysis("identifiability")),
       defaults={"layers": None, "min_normalized_at_max": 0.9, "max_normalized_at_zero": 0.1,
                 "feature": "post_activation", "similarity": "pearson", "control_max_acc_gap": ARM_MARGIN})
def sigma_f_identity(t: dict, p: dict) -> Outcome:
    df = select(t["identifiability"], feature=p["feature"], similarity=p["similarity"])
    need(len(df), f"activation-matching rows at feature point {p['feature']!r} with similarity {p['similarity']!r} "
                  f"(analysis.matching_features / matching_similarities)")
    if p["layers"] is not None:
        df = df[df.layer.isin(p["layers"])]
    sigmas, matched, acc = _matched(df, t["runs"], p)
    sample, lab = pivot(df[df.sigma_f.isin(matched)], ["identity_normalized"], ["sigma_f"])
    x, axis = trend_axis(matched)
    top = matched[-1]
    criteria = [
        Criterion("normalized_at_matched_max", f"normalized identity objective (identity − random)/(optimal − "
                                               f"random) at σ_F = {top:g}, the largest σ_F that costs at most "
                                               f"{p['control_max_acc_gap']:g} test accuracy (mean over layers)",
                  estimate(lambda m: m["identity_normalized", top], sample), ">", p["min_normalized_at_max"],
                  "convention: the identity reaches 90% of the way from a random permutation to the optimal one"),
        Criterion("normalized_at_zero", "normalized identity objective at σ_F = 0",
                  estimate(lambda m: m["identity_normalized", 0.0], sample), "<", p["max_normalized_at_zero"],
                  "convention: within 10% of the random-permutation level"),
        Criterion("trend", f"slope of the mean normalized identity objective against the accuracy-matched σ_F grid "
                           f"{matched} ({axis})",
                  estimate(lambda m: slope(x, m["identity_normalized"]), sample), ">", 0.0,
                  "paper: identifiability rises with σ_F", kind="trend"),
    ]
    full, _ = pivot(df, ["identity_normalized"], ["sigma_f"])
    means = full.cells().list("identity_normalized")
    near = next((s for s, v in zip(sigmas, means) if v >= p["min_normalized_at_max"]), None)
    by_layer = df.groupby(["sigma_f", "layer"])[["optimal", "identity", "random_mean"]].mean().reset_index()
    reported = {"normalized_at_max": estimate(lambda m: m["identity_normalized", sigmas[-1]], full)}
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "sigma_f": sigmas, "mean_normalized_by_sigma_f": means, "identity_near_optimal_from_sigma_f": near, **acc,
        "mean_by_sigma_f_and_layer": by_layer.to_dict("records")})


def relative_drop(df: pd.DataFrame, metric: str) -> pd.Series:
    """The unaligned path's cost per row: for ``relative_accuracy_barrier`` the authors' relative accuracy drop in %,
    100·(max(acc_A, acc_B) − min_λ acc)/max(acc_A, acc_B) (their barrier, sign flipped); else the column itself."""
    return -100.0 * df[metric] if metric == "relative_accuracy_barrier" else df[metric]


@claim(id="sigma-f-unaligned-barrier", paper=PAPER, converged=True, gate_endpoints=True,
       statement="The barrier between independently trained W-asymmetric models without alignment, relative to "
                 "their accuracy, falls as σ_F grows, over the σ_F values whose networks train as well as the "
                 "σ_F = 0 control.",
       tables=("identifiability_lmc",), sweep_key="model.symmetry.sigma_f",
       requires=(requires_sigma_values, requires_analysis("identifiability")),
       defaults={"metric": "relative_accuracy_barrier", "split": "train", "control_max_acc_gap": ARM_MARGIN})
def sigma_f_unaligned_barrier(t: dict, p: dict) -> Outcome:
    df = select(t["identifiability_lmc"], split=p["split"])
    need(len(df), f"identifiability_lmc rows of split {p['split']!r}")
    df = df[df.method.isin(["identity", "activation_matching"])].assign(drop=lambda d: relative_drop(d, p["metric"]))
    sigmas, matched, acc = _matched(df, t["runs"], p)
    sample, lab = pivot(df[df.sigma_f.isin(matched)], ["drop"], ["method", "sigma_f"])
    need(lab["method"] == ["activation_matching", "identity"], "identity and activation_matching rows")
    x, axis = trend_axis(matched)
    what = "relative accuracy drop (%)" if p["metric"] == "relative_accuracy_barrier" else p["metric"]
    criteria = [Criterion("trend", f"slope of the mean unaligned {what} ({p['split']}) against the accuracy-matched "
                                   f"σ_F grid {matched} ({axis})",
                          estimate(lambda m: slope(x, m["drop", "identity"]), sample), "<", 0.0,
                          "paper: the unaligned barrier falls as σ_F grows", kind="trend")]
    full, _ = pivot(df, ["drop"], ["method", "sigma_f"])
    xf, _ = trend_axis(sigmas)
    reported = {"unaligned_drop": estimate(lambda m: m["drop", "identity", 0.0] - m["drop", "identity", matched[-1]],
                                           sample),
                "trend_full_grid": estimate(lambda m: slope(xf, m["drop", "identity"]), full)}
    means = full.cells()
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "sigma_f": sigmas, "statistic": what, "mean_unaligned_by_sigma_f": means.list("drop", "identity"),
        "mean_aligned_by_sigma_f": means.list("drop", "activation_matching"), **acc})


# --------------------------------------------------------------------------- the trade-off
@claim(id="identifiability-tradeoff", paper=PAPER,
       statement="Strong symmetry breaking (the largest σ_F) restricts what a network fits within a weight-norm "
                 "budget: the standard network, trained the same way, fits the training data better with no more "
                 "trainable weight norm, at a training length where both networks have converged.",
       tables=("runs",), sweep_key="model.symmetry.kind", unit="seed", requires=(requires_kinds,),
       defaults={"metric": "train_loss", "min_drop": 0.0, "max_late_loss_drop": 0.01})
def identifiability_tradeoff(t: dict, p: dict) -> Outcome:
    runs = t["runs"]
    std, broken = runs[runs.symmetry == "standard"], runs[runs.symmetry != "standard"]
    need(len(std) and len(broken), "the study needs standard and symmetry-breaking runs")
    need("weight_norm" in runs.columns and runs.weight_norm.notna().all(),
         "runs lack weight_norm (the trainable weight norm, written by the train job since the trade-off is read "
         "at a norm budget): retrain")
    high = float(broken.sigma_f.max())
    both = pd.concat([std.assign(arm="standard"), broken[broken.sigma_f == high].assign(arm="broken")])
    cols = list(dict.fromkeys([p["metric"], "train_acc", "train_loss", "test_acc", "test_loss", "weight_norm",
                               "train_loss_late_drop"]))
    sample, lab = pivot(both, cols, ["arm"], unit="seed")
    need(lab["arm"] == ["broken", "standard"], "standard and broken runs of the same seeds")
    metric, late = p["metric"], "train_loss_late_drop"
    sign = -1.0 if "loss" in metric else 1.0  # a loss: the broken network's minus the standard one's
    converged = {arm: Criterion(f"{arm}_converged", f"decrease of the {arm} network's training loss over the last "
                                                   f"fifth of the epochs (nats)",
                                estimate(lambda v, arm=arm: v[late, arm], sample), "<", p["max_late_loss_drop"],
                                "convention: the training loss moves less than 0.01 nats over the last fifth of "
                                "training") for arm in ("standard", "broken")}
    norm = estimate(lambda v: v["weight_norm", "standard"] / v["weight_norm", "broken"] - 1.0, sample)
    criteria = [Criterion("fit_drop", f"{metric} of the standard network minus the symmetry-broken one at "
                                      f"σ_F = {high:g}" + (" (sign flipped: the broken one's excess loss)"
                                                           if sign < 0 else ""),
                          estimate(lambda v: sign * (v[metric, "standard"] - v[metric, "broken"]), sample), ">",
                          p["min_drop"], "paper: strong symmetry breaking limits the features a network learns "
                                         "within a norm budget")]
    reported = {"standard_converged": converged["standard"].estimate, "broken_late_loss_drop":
                converged["broken"].estimate, "norm_excess_of_standard": norm,
                "test_acc_drop": estimate(lambda v: v["test_acc", "standard"] - v["test_acc", "broken"], sample),
                "train_acc_drop": estimate(lambda v: v["train_acc", "standard"] - v["train_acc", "broken"], sample)}
    means = sample.cells()
    out = Outcome(criteria, sample.n_seeds, 0, reported, {
        "sigma_f_high": high, "mean": {c: {arm: float(means[c, arm]) for arm in ("standard", "broken")} for c in cols},
        "convergence": {arm: c.as_dict() for arm, c in converged.items()}})
    # both arms must have converged (the slower, symmetry-broken one above all): else the drop could be speed
    slow = [arm for arm, c in converged.items() if c.verdict != "supported"]
    if sample.n_seeds >= 4 and slow:
        c = converged[slow[0]]
        out.reason = (f"the {' and the '.join(slow)} network{'s have' if len(slow) > 1 else ' has'} not converged: "
                      f"the {slow[0]} training loss fell by {c.estimate.value:.3g} nats over the last fifth of "
                      f"training (CI high {c.estimate.ci_high:.3g}, threshold {p['max_late_loss_drop']}); train longer")
    elif sample.n_seeds >= 4 and norm.has_ci() and norm.ci_low > 0:
        # the standard network's better fit may be bought with more norm: not a comparison within one budget
        out.reason = (f"the standard network uses {100 * norm.value:.3g}% more trainable weight norm than the "
                      f"symmetry-broken one (CI low {100 * norm.ci_low:.3g}%): its better fit is not within the "
                      f"broken network's norm budget")
    if not math.isfinite(norm.value):
        out.reason = out.reason or "the weight norms are not finite"
    return out
