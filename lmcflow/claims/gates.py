"""Endpoint gates: a claim that reads barriers or merged models is decided only on pairs of working models.

Every barrier is measured against the mean of its two endpoints, so a partner at chance makes
e(½) − ½(e_A + e_B) strongly negative and passes a barrier claim; the gate checks every trained model of the
points a gated claim reads (``runs``: one row per model) before its verdict counts. Criteria and why:
docs/claims.md ("Endpoint gate").
"""
from __future__ import annotations

import math

import numpy as np

from lmcflow.config import ConfigError
from lmcflow.config.catalog import COHERENCE_DEFAULTS, GAUSSIAN_SUBSPACE_DEFAULTS, TORCHVISION_DATASETS

# conventions (the papers give none): see docs/claims.md
GATE_DEFAULTS = {"endpoint_max_drop": 0.05, "endpoint_min_above_chance": 0.5, "endpoint_min_learned": 0.25}
GATE_SOURCE = ("convention: a working model is within endpoint_max_drop test accuracy of its point's seed median, "
               "keeps endpoint_min_above_chance of that median's lead over chance (1/classes), its point's median "
               "closes endpoint_min_learned of the way from chance to perfect accuracy, and its test loss is finite; "
               "a regression task reads the fraction of the target variance explained (1 − MSE / the mean "
               "predictor's) as its accuracy, chance 0")


def check_gate_params(cid, p, study, points) -> None:
    """The gate's parameters are numbers ≥ 0, the shares (``endpoint_min_above_chance``, ``endpoint_min_learned``)
    at most 1."""
    for key in GATE_DEFAULTS:
        v = p.get(key)
        share = key != "endpoint_max_drop"
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= (1 if share else math.inf):
            raise ConfigError(f"claims.{cid}.{key}: {v!r} must be a number ≥ 0"
                              + (" and ≤ 1" if share else "") + " (docs/claims.md, 'Endpoint gate')")


def dataset_facts(names, data_cfg: dict | None = None) -> dict:
    """Per dataset name, what the config says about it without reading data: ``family`` (the torchvision
    name, the subset's own name, or the synthetic generator), ``base``, ``task``, ``num_classes``, ``d``,
    ``n_train`` (None where the config does not fix it: a full torchvision training split)."""
    cfg = data_cfg or {}
    out = {}
    for name in sorted(set(names)):
        syn = (cfg.get("synthetic") or {}).get(name)
        sub = (cfg.get("subsets") or {}).get(name)
        if syn is not None:
            gen = syn.get("generator")
            if gen == "gaussian_subspace":
                p = {**GAUSSIAN_SUBSPACE_DEFAULTS, **syn}
                out[name] = {"family": gen, "base": gen, "task": "classification",
                             "num_classes": int(p["classes"]), "d": int(p["d"]), "n_train": int(p["n_train"])}
            else:  # coherence: a regression task, y = relu(z₁ + z₂) + noise with z ~ N(0, I₂)
                noise = float(syn.get("noise", COHERENCE_DEFAULTS["noise"]))
                out[name] = {"family": gen, "base": gen, "task": "regression", "num_classes": None,
                             "d": syn.get("d"), "n_train": syn.get("n_train"),
                             "baseline_mse": 1.0 - 1.0 / math.pi + noise ** 2}  # Var y: the mean predictor's MSE
            continue
        base = (sub or {}).get("base", name)
        tv = TORCHVISION_DATASETS.get(base)
        out[name] = {"family": name, "base": base, "task": "classification",
                     "num_classes": tv.num_classes if tv else None, "d": None,
                     "n_train": (sub or {}).get("n_train")}
    return out


def _chance(dataset: str, data: dict) -> float | None:
    k = (data.get(dataset) or {}).get("num_classes")
    if k is None and dataset in TORCHVISION_DATASETS:
        k = TORCHVISION_DATASETS[dataset].num_classes
    return 1.0 / k if k else None


def endpoint_gate(tables: dict, params: dict, scale: dict) -> dict:
    """Check every model of the trained points (``runs``, some epochs > 0) the claim's other tables hold.

    Returns ``{passed, checked_models, failed: [{study, point, seed, test_acc, test_loss, reason}], criteria}``;
    without a runs table nothing can be checked and the gate fails (the claim cannot tell a working partner
    from a useless one)."""
    p = {k: float(params.get(k, v)) for k, v in GATE_DEFAULTS.items()}
    data = (scale or {}).get("data") or {}
    criteria = {**p, "reference": "median test_acc of the point's seeds", "source": GATE_SOURCE,
                "chance": {}}
    runs = tables.get("runs")
    if runs is None or not len(runs):
        return {"passed": False, "checked_models": 0, "failed": [], "criteria": criteria,
                "reason": "no runs table: the endpoints cannot be checked"}
    read = {q for kind, df in tables.items() if kind != "runs" and "point" in df.columns for q in df["point"]}
    # an untrained arm (a point whose every model has epochs 0) is at chance by design; an untrained model among
    # trained ones (a pair's useless partner B) is checked
    trained = runs.groupby(["study", "point"]).epochs.transform("max") > 0
    runs = runs[trained]
    if read:
        runs = runs[runs.point.isin(read)]
    if not len(runs):
        return {"passed": False, "checked_models": 0, "failed": [], "criteria": criteria,
                "reason": "no trained model of the points the claim reads in the runs table"}
    failed = []
    for (study, point), g in runs.groupby(["study", "point"], sort=True):
        name = str(g.dataset.iloc[0])
        baseline = (data.get(name) or {}).get("baseline_mse")
        # a regression task: the fraction of the target variance explained stands in for accuracy (chance 0)
        score = 1.0 - g.test_loss.to_numpy(float) / baseline if baseline else g.test_acc.to_numpy(float)
        chance = 0.0 if baseline else _chance(name, data)
        criteria["chance"][name] = chance
        median = float(np.nanmedian(score)) if np.isfinite(score).any() else math.nan
        for row, acc in zip(g.itertuples(), score, strict=True):
            why = _why(acc, row.test_loss, median, chance, p, "R²" if baseline else "test accuracy")
            if why:
                failed.append({"study": study, "point": point, "seed": int(row.seed), "test_acc": row.test_acc,
                               "test_loss": row.test_loss, "reason": why})
    return {"passed": not failed, "checked_models": len(runs), "failed": failed, "criteria": criteria,
            "reason": "" if not failed else gate_reason(failed)}


def _why(acc, loss, median, chance, p: dict, what: str = "test accuracy") -> str:
    """Why a model is not a working endpoint ("" if it is); ``acc``: its test accuracy (regression: R²)."""
    if not math.isfinite(loss):
        return f"test loss {loss}"
    if not math.isfinite(acc):  # a regression task without a known baseline: only the loss is checked
        return ""
    if acc < median - p["endpoint_max_drop"]:
        return f"{what} {acc:.4g} more than {p['endpoint_max_drop']:g} below its point's median {median:.4g}"
    if chance is not None:
        learned = chance + p["endpoint_min_learned"] * (1.0 - chance)
        if median < learned:
            return f"its point's median {what} {median:.4g} is below {learned:.4g}: less than " \
                   f"{p['endpoint_min_learned']:g} of the way from chance {chance:.4g} to 1"
        floor = chance + p["endpoint_min_above_chance"] * (median - chance)
        if acc < floor:
            return f"{what} {acc:.4g} below {floor:.4g} (chance {chance:.4g} + " \
                   f"{p['endpoint_min_above_chance']:g} × the median's lead over it)"
    return ""


def gate_reason(failed: list) -> str:
    seeds = ", ".join(f"{f['study']}/{f['point']} seed {f['seed']}" for f in failed[:5])
    more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
    return f"endpoint gate: {len(failed)} model(s) are not working endpoints ({seeds}{more}): {failed[0]['reason']}"


def merge_gates(gates: list[dict]) -> dict:
    """One gate record for a claim that reads several studies."""
    failed = [f for g in gates for f in g["failed"]]
    reasons = [g.get("reason", "") for g in gates if not g["passed"]]
    return {"passed": all(g["passed"] for g in gates), "checked_models": sum(g["checked_models"] for g in gates),
            "failed": failed, "criteria": gates[0]["criteria"] if gates else {}, "reason": "; ".join(reasons)}


def gate_summary(gate: dict | None) -> str:
    """The claims.parquet cell: "" (not gated), "passed (n models)" or the reason."""
    if not gate:
        return ""
    return f"passed ({gate['checked_models']} models)" if gate["passed"] else gate.get("reason", "failed")

