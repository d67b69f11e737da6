"""Extensions of the width paper's claims (not claims of either paper): REPAIR against temperature calibration, and
the N-model plain average against the N-model ensemble.

``repair-vs-calibration`` reads ``barriers`` with and without REPAIR (column ``repair``; the only claim that does,
``READS_REPAIRED``); ``many-model-ensemble`` reads ``merge_many``, whose unit is a seed subset: its interval is
the delete-one-seed jackknife of ``stats.estimate`` with every subset holding the deleted seed left out
(``subset_estimate``). Criteria and thresholds: docs/claims.md.
"""
from __future__ import annotations

import math

import numpy as np

from lmcflow.claims.core import Criterion, Outcome, claim, need, pivot, select
from lmcflow.claims.stats import MIN_SEEDS, Estimate, estimate, slope, t_quantile, trend_axis
from lmcflow.claims.width import PAPER, WD, arm_points
from lmcflow.config import ConfigError, many_sizes, repairs, same_value

EXTENSION = f"extension of {PAPER} (beyond the paper; REPAIR: Jordan et al., ICLR 2023)"
READS_REPAIRED = ("repair-vs-calibration",)  # every other claim reads merges without REPAIR (jobs.report)


def requires_repair(cid, p, study, points) -> None:
    pts = arm_points(points, p.get("weight_decay"))
    widths = sorted({float(q.model["width"]) for q in pts})
    for w in (widths[:1] + widths[-1:]) if widths else []:
        if not any(repairs(q) for q in pts if same_value(q.model["width"], w)):
            raise ConfigError(f"claims.{cid}: needs merge.repair.enabled at width {w:g} (weight decay "
                              f"{p.get('weight_decay')}) of study {study!r}: set studies.{study}.merge.repair")


def requires_many(cid, p, study, points) -> None:
    pts = arm_points(points, p.get("weight_decay"))
    widths = {float(q.model["width"]) for q in pts if int(p["n_models"]) in many_sizes(q)
              and p["method"] in q.merge["many"]["methods"]}
    if len(widths) < 2:
        raise ConfigError(f"claims.{cid}: needs N-way merges of {p['n_models']} models with method {p['method']!r} "
                          f"at ≥ 2 widths (weight decay {p.get('weight_decay')}) of study {study!r}: set "
                          f"studies.{study}.merge.many (sizes, methods, at)")
    n_seeds = min(len(q.seeds) for q in pts)
    if int(p["n_models"]) > n_seeds - 1:
        raise ConfigError(f"claims.{cid}: n_models {p['n_models']} needs ≥ {int(p['n_models']) + 1} seeds (the "
                          f"jackknife deletes one), study {study!r} has {n_seeds}")


# --------------------------------------------------------------------------- REPAIR vs temperature calibration
@claim(id="repair-vs-calibration", paper=EXTENSION, gate_endpoints=True,
       statement="Extension: at the widest width, temperature calibration alone removes as much of the plain "
                 "average's loss barrier as REPAIR (within 10% of the plain barrier).",
       tables=("barriers",), sweep_key="model.width", selects=WD, requires=(requires_repair,), multi_study=True,
       defaults={"definition": "entezari", "method": "identity", "split": "test", "weight_decay": 3.0e-3,
                 "margin": 0.1})
def repair_vs_calibration(t: dict, p: dict) -> Outcome:
    b = select(t["barriers"], metric="loss", definition=p["definition"], method=p["method"], split=p["split"],
               weight_decay=p["weight_decay"])
    sample, lab = pivot(b, ["value"], ["repair", "calibrated", "width"])
    widths = lab["width"]
    need(lab["repair"] == [False, True] and lab["calibrated"] == [False, True] and len(widths) >= 2,
         f"{p['method']} loss barriers with and without REPAIR and calibration at ≥ 2 widths")
    narrow, widest = widths[0], widths[-1]
    arms = {"calibration": (False, True), "repair": (True, False), "both": (True, True)}

    def removed(m, arm, w):
        return 1 - m["value", arms[arm][0], arms[arm][1], w] / m["value", False, False, w]

    means = sample.cells()
    need(means["value", False, False, widest] > 0, f"no plain loss barrier at the widest width {widest:g} to remove")
    criteria = [
        Criterion("calibration_minus_repair_widest",
                  f"fraction of the plain {p['definition']} loss barrier removed by calibration minus that removed "
                  f"by REPAIR, at the widest width {widest:g} (fractions of the mean barriers)",
                  estimate(lambda m: removed(m, "calibration", widest) - removed(m, "repair", widest), sample),
                  ">", -float(p["margin"]),
                  "convention (no paper compares them): 'as much' = within 10% of the plain barrier"),
        Criterion("repair_removes_narrowest",
                  f"fraction of the plain loss barrier REPAIR removes at the narrowest width {narrow:g}",
                  estimate(lambda m: removed(m, "repair", narrow), sample), ">", 0.0,
                  "control: REPAIR, from the same models, works where the barrier is large (else calibration "
                  "matching it says nothing)", kind="control", control="REPAIR at the narrowest width"),
    ]
    reported = {f"removed_by_{arm}_widest": estimate(lambda m, arm=arm: removed(m, arm, widest), sample)
                for arm in arms}
    return Outcome(criteria, sample.n_seeds, sample.n_pairs, reported, {
        "widths": widths, "mean_plain_barrier_by_width": means.list("value", False, False),
        **{f"removed_by_{arm}_by_width": [float(removed(means, arm, w)) for w in widths] for arm in arms}})


# --------------------------------------------------------------------------- N-model average vs ensemble
def subset_estimate(fn, df, seeds: list, level: float = 0.95) -> Estimate:
    """T = fn(rows) and its delete-one-seed jackknife interval over seed subsets (column ``seeds``, "0,1,2"):
    deleting seed k deletes every subset holding k. NaN interval below ``MIN_SEEDS`` seeds."""
    value = float(fn(df))
    n = len(seeds)
    if n < MIN_SEEDS or not math.isfinite(value):
        return Estimate(value, math.nan, math.nan, n)
    members = df["seeds"].map(lambda s: {int(v) for v in s.split(",")})
    loo = np.array([float(fn(df[~members.map(lambda m, k=k: k in m)])) if len(df) else math.nan for k in seeds])
    if not np.all(np.isfinite(loo)):
        return Estimate(value, math.nan, math.nan, n)
    se = math.sqrt((n - 1) / n * float(np.sum((loo - loo.mean()) ** 2)))
    half = t_quantile(level, n - 1) * se
    return Estimate(value, value - half, value + half, n)


@claim(id="many-model-ensemble", paper=EXTENSION, gate_endpoints=True,
       statement="Extension: the gap between the plain average of N models and their logit ensemble falls as width "
                 "grows (the width paper's ensemble reading of the merged model, for N > 2).",
       tables=("merge_many",), sweep_key="model.width", selects=WD, requires=(requires_many,), multi_study=True,
       defaults={"n_models": 3, "method": "identity", "split": "test", "calibrated": True, "weight_decay": 3.0e-3})
def many_model_ensemble(t: dict, p: dict) -> Outcome:
    df = select(t["merge_many"], n_models=int(p["n_models"]), method=p["method"], repair=False,
                calibrated=bool(p["calibrated"]), weight_decay=p["weight_decay"])
    widths = sorted(set(df["width"]))
    need(len(widths) >= 2, f"{p['n_models']}-model {p['method']} merges at fewer than 2 widths")
    seeds = sorted({int(v) for s in df["seeds"] for v in s.split(",")})
    x, _ = trend_axis(widths)
    s = p["split"]
    df = df.assign(gap=df[f"merged_{s}_loss"] - df[f"ensemble_{s}_loss"],
                   gain=df[f"endpoint_{s}_loss"] - df[f"ensemble_{s}_loss"])

    def by_width(rows, col):
        g = rows.groupby("width")[col].mean()
        return np.array([g.get(w, math.nan) for w in widths])

    loss = "calibrated loss" if p["calibrated"] else "loss"
    criteria = [
        Criterion("gap_trend", f"least-squares slope against log2 width of the mean {s} {loss} gap, "
                               f"{p['n_models']}-model average minus ensemble, over all {len(widths)} widths",
                  subset_estimate(lambda r: slope(x, by_width(r, "gap")), df, seeds), "<", 0.0,
                  "paper (ensemble reading): the merged model approaches the ensemble as width grows", kind="trend"),
        Criterion("relative_gap_trend", "the same slope of the gap in units of the ensemble's own gain over the "
                                        "mean endpoint (gap / (mean endpoint − ensemble))",
                  subset_estimate(lambda r: slope(x, by_width(r, "gap") / by_width(r, "gain")), df, seeds), "<",
                  0.0, "control: not only every loss shrinking with width — the average closes on the ensemble "
                       "faster than single models do", kind="control",
                  control="the mean endpoint's gap to the same ensemble"),
    ]
    reported = {"gap_widest": subset_estimate(lambda r: by_width(r, "gap")[-1], df, seeds),
                "gap_narrowest": subset_estimate(lambda r: by_width(r, "gap")[0], df, seeds)}
    return Outcome(criteria, len(seeds), 0, reported, {
        "widths": widths, "n_subsets_per_width": int(len(df) / len(widths)),
        "mean_gap_by_width": by_width(df, "gap").tolist(), "mean_ensemble_gain_by_width": by_width(df, "gain").tolist(),
        "mean_merged_error_by_width": by_width(df, f"merged_{s}_error").tolist(),
        "mean_ensemble_error_by_width": by_width(df, f"ensemble_{s}_error").tolist()})
