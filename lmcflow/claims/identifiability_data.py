"""Claims of the identifiability paper about the data's geometry: the intrinsic dimension k and the subspace
coherence ν, against swap costs (untrained and trained networks) and unaligned barriers, each beside a control arm
that must train as well as the treated one (``ARM_MARGIN``). Criteria and thresholds: docs/claims.md.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lmcflow.claims.core import Criterion, NoData, Outcome, PaperValue, claim, need, pivot, select
from lmcflow.claims.identifiability import (
    ARM_MARGIN,
    PAPER,
    arm_accuracy,
    requires_analysis,
    requires_epochs,
    requires_sigma_values,
)
from lmcflow.claims.stats import MIN_SEEDS, estimate, slope, spearman, trend_axis
from lmcflow.claims.thresholds import source
from lmcflow.config import ConfigError
from lmcflow.metrics import relative_accuracy_barrier


def _swap_arm(df, epochs: int):
    return pivot(select(df, epochs=int(epochs)), ["swap_q10_relative", "swap_frac_cheap", "swap_mean"],
                 ["sigma_f", "data_k"], unit="seed")


@claim(id="intrinsic-dimension", paper=PAPER, converged=True,
       statement="With σ_F = 1 on gaussian_subspace data the low tail of the swap costs, relative to the neurons' "
                 "own realization costs, moves up over the whole k grid as the data's intrinsic dimension k grows "
                 "(cheap swaps become rarer: neurons become identifiable), in untrained networks (the paper's "
                 "measurement) and in trained ones; with σ_F = 0 (mask only) the swap costs of untrained networks "
                 "are small against σ_F = 1 at every k.",
       tables=("swap_costs",), sweep_key="dataset", unit="seed",
       requires=(requires_sigma_values, requires_analysis("swap_costs"), requires_epochs),
       defaults={"layer": "layers.0", "epochs": 0, "trained_epochs": None, "sigma_f_high": None,
                 "max_cost_ratio_at_zero": 0.1})
def intrinsic_dimension(t: dict, p: dict) -> Outcome:
    df = t["swap_costs"]
    df = df[(df.layer == p["layer"]) & (df.data_k > 0)]
    need(len(df), f"swap costs of layer {p['layer']!r} on datasets with a nominal k")
    arms = sorted(set(df.epochs))
    need(int(p["epochs"]) in arms, f"no swap costs of models trained {p['epochs']} epochs (have {arms})")

    def parts(epochs):
        sample, lab = _swap_arm(df, epochs)
        sigmas, ks = lab["sigma_f"], lab["data_k"]
        high = p["sigma_f_high"] if p["sigma_f_high"] is not None else sigmas[-1]
        need(0.0 in sigmas and high in sigmas and high > 0 and len(ks) >= 2,
             "swap costs at σ_F = 0 and a σ_F > 0, at ≥ 2 values of k")
        x, _ = trend_axis(ks)
        tail = estimate(lambda m: slope(x, m["swap_q10_relative", high]), sample)
        ratio = estimate(lambda m: m["swap_mean", 0.0].sum() / m["swap_mean", high].sum(), sample)
        cheap = estimate(lambda m: slope(x, m["swap_frac_cheap", high]), sample)
        means = sample.cells()
        detail = {"k": ks, "sigma_f_high": high, "mean_q10_relative_by_k": means.list("swap_q10_relative", high),
                  "mean_frac_cheap_by_k": means.list("swap_frac_cheap", high),
                  "mean_swap_cost_by_k": means.list("swap_mean", high),
                  "mean_swap_cost_by_k_at_sigma0": means.list("swap_mean", 0.0),
                  "mean_frac_cheap_by_k_at_sigma0": means.list("swap_frac_cheap", 0.0),
                  "spearman_log2_k_vs_q10_relative": spearman(x, means["swap_q10_relative", high])}
        return sample, high, tail, ratio, cheap, detail

    def name(epochs):
        return "untrained" if int(epochs) == 0 else f"trained {epochs} epochs"

    sample, high, tail, ratio, cheap, detail = parts(p["epochs"])
    arm = name(p["epochs"])
    criteria = [
        Criterion("low_tail_trend", f"slope of the mean q10(off-diagonal T_ij)/mean_i M_ii against log2 k at σ_F = "
                                    f"{high:g} ({arm}, layer {p['layer']})", tail, ">", 0.0,
                  "paper: identifiability improves with the intrinsic dimension k (fewer cheap swaps)", kind="trend"),
        Criterion("cost_ratio_at_zero", f"mean swap cost at σ_F = 0 / at σ_F = {high:g}, pooled over k ({arm})", ratio,
                  "<", p["max_cost_ratio_at_zero"],
                  "convention: an order of magnitude below σ_F = 1 (theory: E[T] ≥ 0 and small with mask-only "
                  "symmetry breaking)"),
    ]
    reported = {"frac_cheap_trend": cheap}
    details = {"arm": arm, **detail}
    trained = [a for a in arms if a > 0 and a != int(p["epochs"])]
    if p["trained_epochs"] is not None:
        need(int(p["trained_epochs"]) in arms, f"no swap costs of models trained {p['trained_epochs']} epochs "
                                               f"(have {arms})")
        trained = [int(p["trained_epochs"])]
    if trained:  # the same low-tail trend on the networks after training: the paper's statement about them
        e = trained[-1]
        _, _, o_tail, o_ratio, o_cheap, o_detail = parts(e)
        criteria.append(Criterion("low_tail_trend_trained", f"the same slope in networks {name(e)} (σ_F = {high:g})",
                                  o_tail, ">", 0.0, "paper: the trend holds for the trained networks whose features "
                                                    "it explains", kind="trend"))
        reported |= {f"cost_ratio_at_zero_epochs_{e}": o_ratio, f"frac_cheap_trend_epochs_{e}": o_cheap}
        details[f"epochs_{e}"] = o_detail
    else:
        details["trained_arm"] = "none: the study trains no swap-cost arm beside this one"
    return Outcome(criteria, sample.n_seeds, 0, reported, details)


PAPER_UNALIGNED_DROP = {2: 46.4, 8: 15.7, 32: 6.1}  # % at σ_F = 1 (Bürgin et al. 2026)
PAPER_DATA = {"dataset": "gaussian_subspace", "arch": "mlp", "d": 512, "n_train": 45000}  # their generator's size


def requires_trained(cid, p, study, points) -> None:
    trained = sorted({int(q.train["epochs"]) for q in points if int(q.train["epochs"]) > 0})
    if not trained:
        raise ConfigError(f"claims.{cid}: study {study!r} trains no model (train.epochs is 0 everywhere); the "
                          f"unaligned interpolation needs trained models")
    if p["epochs"] is not None and int(p["epochs"]) not in trained:
        raise ConfigError(f"claims.{cid}.epochs: {p['epochs']} is not a trained arm of study {study!r}; its points "
                          f"train {trained} epochs")


def unaligned_drops(interp: pd.DataFrame, split: str, method: str) -> pd.DataFrame:
    """One row per curve (point, seed pair) of ``interp``: the relative accuracy drop 100·(max(acc_A, acc_B) −
    min_λ acc)/max(acc_A, acc_B) along the path (the authors' ``compute_barrier``, sign flipped: in %)."""
    df = select(interp, split=split, method=method)
    keys = ["point", "dataset", "sigma_f", "epochs", "seed_a", "seed_b"]
    rows = [{**dict(zip(keys, k)), "unaligned_drop": -100.0 * relative_accuracy_barrier(g.lam.to_numpy(float),
                                                                                        g.acc.to_numpy(float))}
            for k, g in df.sort_values("lam").groupby(keys, sort=True)]
    return pd.DataFrame(rows, columns=keys + ["unaligned_drop"])


def arm_gaps(acc: pd.DataFrame, arm: str, treated, control, grid: str) -> list[dict]:
    """Per value of ``grid``: the treated and the control arm's mean test accuracy (``arm_accuracy`` rows)."""
    a = acc.set_index([arm, grid]).acc
    return [{grid: g, "treated": float(a[treated, g]), "control": float(a[control, g]),
             "gap": float(a[treated, g] - a[control, g])} for g in sorted(set(acc[grid]))
            if (treated, g) in a.index and (control, g) in a.index]


def unmatched_reason(gaps: list[dict], grid: str, control: str, margin: float, what: str = "test accuracy") -> str:
    """"" when every control is within ``margin`` of its treated arm, else why the claim cannot compare them."""
    off = [g for g in gaps if abs(g["gap"]) > margin]
    if not off:
        return ""
    g = off[0]
    return (f"the control arm ({control}) did not train as well as the treated one: at {grid} = {g[grid]:g} its mean "
            f"{what} is {g['control']:.3g} against {g['treated']:.3g} (|gap| > {margin:g}"
            + (f"; {len(off) - 1} more value(s) of {grid}" if len(off) > 1 else "") + "): their slopes compare "
            "networks that learned different amounts")


@claim(id="intrinsic-dimension-lmc", paper=PAPER, converged=True, gate_endpoints=True,
       statement="With σ_F = 1 on gaussian_subspace data the unaligned interpolation of two trained W-MLPs loses "
                 "less accuracy over the whole k grid as the data's intrinsic dimension k grows, faster than the "
                 "same networks with σ_F = 0 (mask only), trained as well, do (the paper: a relative accuracy drop "
                 "of 46.4 / 15.7 / 6.1 % at k = 2 / 8 / 32).",
       tables=("interpolation", "swap_costs"), sweep_key="dataset",
       requires=(requires_sigma_values, requires_analysis("swap_costs"), requires_trained),
       defaults={"epochs": None, "sigma_f_high": None, "split": "train", "method": "identity",
                 "control_max_acc_gap": ARM_MARGIN},
       paper_values=tuple(PaperValue(f"unaligned relative accuracy drop (%) at k = {k}, σ_F = 1", v,
                                     "W-MLP on the authors' Gaussian-subspace data (d = 512, 45000 training "
                                     "examples)", "Bürgin et al. 2026", ours=f"unaligned_drop_k{k}", at=PAPER_DATA)
                          for k, v in PAPER_UNALIGNED_DROP.items()))
def intrinsic_dimension_lmc(t: dict, p: dict) -> Outcome:
    # the data's nominal k per dataset (the interpolation table names datasets only; the swap-cost table has both)
    sc = t["swap_costs"]
    k_of = dict(zip(sc.dataset, sc.data_k))
    interp = t["interpolation"]
    need(len(interp), "interpolation curves of trained models (train.epochs > 0)")
    # curves only exist for trained points; rows that all say 0 are pairs whose B is an untrained null partner
    trained = sorted(e for e in set(interp.epochs) if e > 0) or [0]
    epochs = int(p["epochs"]) if p["epochs"] is not None else trained[-1]
    drops = unaligned_drops(interp[interp.epochs == epochs], p["split"], p["method"])
    drops["data_k"] = drops.dataset.map(k_of)
    drops = drops[drops.data_k.notna() & (drops.data_k > 0)]
    need(len(drops), f"curves of {p['method']!r} on split {p['split']!r} on datasets with a nominal k (models "
                     f"trained {epochs} epochs)")
    sample, lab = pivot(drops, ["unaligned_drop"], ["sigma_f", "data_k"])
    sigmas, ks = lab["sigma_f"], [int(k) for k in lab["data_k"]]
    high = p["sigma_f_high"] if p["sigma_f_high"] is not None else max(sigmas)
    need(high in sigmas and high > 0 and len(ks) >= 2, "curves at a σ_F > 0, at ≥ 2 values of k")
    x, axis = trend_axis(ks)
    need(0.0 in sigmas, "curves at σ_F = 0 (the mask-only control arm) beside σ_F > 0")
    criteria = [Criterion("trend", f"slope of the mean unaligned relative accuracy drop (%, {p['split']}) against "
                                   f"log2 k at σ_F = {high:g} (trained {epochs} epochs)",
                          estimate(lambda m: slope(x, m["unaligned_drop", high]), sample), "<", 0.0,
                          "paper: unaligned LMC improves with the intrinsic dimension k", kind="trend"),
                Criterion("trend_vs_sigma0", f"that slope minus the same slope at σ_F = 0 (mask only): how much "
                                             f"faster the drop falls with k when σ_F = {high:g} breaks the symmetry",
                          estimate(lambda m: slope(x, m["unaligned_drop", high]) - slope(x, m["unaligned_drop", 0.0]),
                                   sample), "<", 0.0,
                          "control (the σ_F = 0 arm of the same study and seeds): a task that gets easier with k "
                          "lowers the drop of any network; the paper attributes the fall to identifiability, "
                          "which σ_F = 0 lacks", kind="control", control="σ_F = 0 (mask only)")]
    reported = {f"unaligned_drop_k{int(k)}": estimate(lambda m, k=k: m["unaligned_drop", high, k], sample)
                for k in lab["data_k"]}
    means = sample.cells()
    details = {"k": ks, "sigma_f_high": high, "epochs": epochs, "mean_drop_by_k": means.list("unaligned_drop", high),
               "paper_drop_by_k": {str(k): v for k, v in PAPER_UNALIGNED_DROP.items()}}
    reported["trend_at_sigma0"] = estimate(lambda m: slope(x, m["unaligned_drop", 0.0]), sample)
    details["mean_drop_by_k_at_sigma0"] = means.list("unaligned_drop", 0.0)
    out = Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, details)
    # the σ_F = 0 control must have learned what the σ_F = 1 networks learned, at every k
    rows = select(interp, epochs=epochs)[["point", "sigma_f", "dataset"]].drop_duplicates()
    gaps = arm_gaps(arm_accuracy(t["runs"], rows, ["sigma_f", "dataset"]), "sigma_f", high, 0.0, "dataset")
    details["control_accuracy"] = gaps
    if sample.n_seeds >= MIN_SEEDS:  # fewer: inconclusive already (too few seeds), the gaps in details
        out.reason = unmatched_reason([{**g, "k": k_of.get(g["dataset"], np.nan)} for g in gaps], "k",
                                      "σ_F = 0", p["control_max_acc_gap"])
    return out


def requires_unmasked_arm(cid, p, study, points) -> None:
    """The study trains a standard (unmasked) network beside the masked one at every dataset (ν) of its grid."""
    kinds = {}
    for q in points:
        kinds.setdefault(q.dataset, set()).add((q.model.get("symmetry") or {}).get("kind", "standard"))
    lacking = sorted(d for d, k in kinds.items() if "standard" not in k or len(k) < 2)
    if lacking:
        raise ConfigError(f"claims.{cid}: study {study!r} must train the masked network and an unmasked one "
                          f"(model.symmetry.kind: standard) on every dataset of its ν grid, the control arm; "
                          f"datasets {lacking} lack one (sweep model.symmetry.kind over [w_asymmetric, standard])")


@claim(id="subspace-coherence", paper=PAPER, converged=True, gate_endpoints=True,
       statement="With F = 0 and only a random mask, two unaligned networks are linearly connected at the highest "
                 "subspace coherence ν of the grid (their midpoint explains as much of the target variance as the "
                 "better of them, within 0.05), and the unaligned midpoint barrier falls over the whole ν grid as ν "
                 "rises from 0.1 to 1, faster than that of the same network without the mask, fitting the data as "
                 "well, on the same ν grid (the mask, not easier data, lowers the barrier).",
       tables=("coherence",), sweep_key="dataset", requires=(requires_analysis("coherence"), requires_unmasked_arm),
       defaults={"barrier": "regression_midpoint_barrier", "method": "identity", "split": "test", "embedding": None,
                 "control_max_r2_gap": ARM_MARGIN, "max_midpoint_r2_loss": ARM_MARGIN})
def subspace_coherence(t: dict, p: dict) -> Outcome:
    # embedding None: every embedding (exact copies, random tight frames) and outer seed of the study pooled per ν
    df = select(t["coherence"], split=p["split"], method=p["method"], embedding=p["embedding"])
    need(len(df), f"coherence rows (split {p['split']!r}, method {p['method']!r}, embedding {p['embedding']!r})")
    df = df.assign(arm=lambda d: np.where(d.symmetry == "standard", "unmasked", "masked"))
    need({"loss_mid", "baseline_mse"} <= set(df.columns), "coherence rows with loss_mid and baseline_mse (the "
         "midpoint's and the mean predictor's MSE): recompute the coherence table")
    # the fraction of the target variance the midpoint explains less than the better endpoint does: relative to the
    # endpoints, so a useless partner B (its MSE the baseline's or worse) cannot make a pair look connected, as the
    # authors' barrier against the worse endpoint lets it
    df = df.assign(midpoint_r2_loss=(df.loss_mid - np.minimum(df.loss_a, df.loss_b)) / df.baseline_mse)
    sample, lab = pivot(df, [p["barrier"], "midpoint_r2_loss"], ["arm", "nu"])
    nus = lab["nu"]
    need(len(nus) >= 2, "fewer than 2 ν values")
    need(lab["arm"] == ["masked", "unmasked"], "coherence rows of the masked and the unmasked (standard) network")
    x, _ = trend_axis(nus)
    barrier = p["barrier"]
    top = nus[-1]
    criteria = [
        Criterion("connected_at_max_nu", f"the masked network's midpoint (λ = ½, unaligned) R² below its better "
                                         f"endpoint's at the highest ν ({top:g}): (MSE(θ½) − min endpoint MSE) / "
                                         f"the mean predictor's MSE",
                  estimate(lambda m: m["midpoint_r2_loss", "masked", top], sample), "<", p["max_midpoint_r2_loss"],
                  source("max_midpoint_r2_loss")),
        Criterion("trend", f"slope of the mean {p['barrier']} of the masked network against log2 ν over all "
                           f"{len(nus)} values", estimate(lambda m: slope(x, m[barrier, "masked"]), sample), "<", 0.0,
                  "paper: higher coherence makes the mask break the symmetry (lower unaligned barrier)", kind="trend"),
        Criterion("trend_vs_unmasked", "that slope minus the same slope of the unmasked network on the same ν grid",
                  estimate(lambda m: slope(x, m[barrier, "masked"]) - slope(x, m[barrier, "unmasked"]), sample),
                  "<", 0.0,
                  "control (an unmasked network of the same study and seeds): data whose coherence makes any "
                  "merge easier lower the unmasked barrier too; the paper attributes the fall to the mask",
                  kind="control", control="unmasked network on the same ν grid"),
    ]
    reported = {"drop_min_to_max_nu": estimate(lambda m: m[barrier, "masked", nus[0]] - m[barrier, "masked", nus[-1]],
                                               sample),
                "unmasked_trend": estimate(lambda m: slope(x, m[barrier, "unmasked"]), sample),
                "unmasked_midpoint_r2_loss_at_max_nu": estimate(lambda m: m["midpoint_r2_loss", "unmasked", top],
                                                                sample)}
    means = sample.cells()
    out = Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "nu": nus, "mean_barrier_by_nu": means.list(barrier, "masked"),
        "mean_unmasked_barrier_by_nu": means.list(barrier, "unmasked"),
        "mean_midpoint_r2_loss_by_nu": means.list("midpoint_r2_loss", "masked"),
        "mean_unmasked_midpoint_r2_loss_by_nu": means.list("midpoint_r2_loss", "unmasked"),
        "spearman_log2_nu_vs_barrier": spearman(x, means[barrier, "masked"])})
    # the unmasked control must fit the data as well as the masked network: the endpoints' fraction of the target
    # variance explained (the pair rows' endpoint losses against the mean predictor's, ``baseline_mse``)
    try:
        out.details["control_fit"] = gaps = _fit_gaps(df)
        why = unmatched_reason(gaps, "nu", "unmasked", p["control_max_r2_gap"],
                               "fraction of the target variance explained (R²)")
    except NoData as err:
        why = str(err)
    if sample.n_seeds >= MIN_SEEDS:  # fewer: inconclusive already (too few seeds)
        out.reason = why
    return out


def _fit_gaps(df: pd.DataFrame) -> list[dict]:
    need("baseline_mse" in df.columns and df.baseline_mse.notna().all() and (df.baseline_mse > 0).all(),
         "coherence rows lack baseline_mse (the mean predictor's MSE on the split), which the fit of the arms is "
         "measured against: recompute the coherence table")
    r2 = df.assign(r2=1.0 - 0.5 * (df.loss_a + df.loss_b) / df.baseline_mse)
    acc = r2.groupby(["arm", "nu"]).r2.mean().rename("acc").reset_index()
    return arm_gaps(acc, "arm", "masked", "unmasked", "nu")
