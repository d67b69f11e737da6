"""Convergence gate: a width claim is decided only on endpoints trained to a plateau.

A model whose training loss still falls is not an endpoint of the paper's kind (the paper trains to convergence):
a barrier or a mechanism metric between two unfinished models cannot tell "a floor" from "slow decay". Every model
of the trained real points a claim reads (``runs``, epochs > 0) must have ``train_loss_late_drop`` — the per-epoch
mean training loss over the last fifth of its epochs, L[E − ⌈E/5⌉] − L[E] (``lmcflow.training.late_loss_drop``) —
below ``max_late_loss_drop`` (0.01 nats, the convention ``identifiability-tradeoff`` uses). Why: docs/claims.md
("Convergence gate").
"""
from __future__ import annotations

import math

from lmcflow.config import ConfigError

CONVERGENCE_DEFAULTS = {"max_late_loss_drop": 0.01}
CONVERGENCE_SOURCE = ("convention: a model has reached its plateau when its per-epoch mean training loss falls by "
                      "less than max_late_loss_drop nats over the last fifth of its epochs (the convergence "
                      "convention of identifiability-tradeoff)")


def check_convergence_params(cid, p, study, points) -> None:
    v = p.get("max_late_loss_drop")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ConfigError(f"claims.{cid}.max_late_loss_drop: {v!r} must be a number > 0 "
                          f"(docs/claims.md, 'Convergence gate')")


def convergence_gate(tables: dict, params: dict) -> dict:
    """``{passed, checked_models, failed: [{study, point, seed, train_loss_late_drop}], criteria, reason}`` for the
    trained models of the points the claim's other tables hold (no runs table, or none with a late drop: failed)."""
    limit = float(params.get("max_late_loss_drop", CONVERGENCE_DEFAULTS["max_late_loss_drop"]))
    criteria = {"max_late_loss_drop": limit, "source": CONVERGENCE_SOURCE}
    runs = tables.get("runs")
    if runs is None or not len(runs) or "train_loss_late_drop" not in runs.columns:
        return {"passed": False, "checked_models": 0, "failed": [], "criteria": criteria,
                "reason": "convergence gate: no runs table with train_loss_late_drop"}
    read = {q for kind, df in tables.items() if kind != "runs" and "point" in df.columns for q in df["point"]}
    runs = runs[runs.epochs > 0]
    if read:
        runs = runs[runs.point.isin(read)]
    failed = []
    for row in runs.itertuples():
        drop = float(row.train_loss_late_drop)
        if not (math.isfinite(drop) and drop < limit):
            failed.append({"study": row.study, "point": row.point, "seed": int(row.seed),
                           "train_loss_late_drop": drop if math.isfinite(drop) else None})
    reason = ""
    if failed:
        worst = max((f["train_loss_late_drop"] or math.inf) for f in failed)
        reason = (f"convergence gate: {len(failed)} of {len(runs)} model(s) still training (training loss falls by "
                  f"≥ {limit:g} nats over the last fifth of the epochs; up to {worst:.3g}), e.g. "
                  f"{failed[0]['study']}/{failed[0]['point']} seed {failed[0]['seed']}")
    return {"passed": not failed and len(runs) > 0, "checked_models": len(runs), "failed": failed,
            "criteria": criteria, "reason": reason or ("" if len(runs) else "convergence gate: no trained model")}


def gate_summary(gate: dict | None) -> str:
    if not gate:
        return ""
    return f"passed ({gate['checked_models']} models)" if gate["passed"] else gate.get("reason", "failed")
