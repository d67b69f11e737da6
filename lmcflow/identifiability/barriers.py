"""Barrier summaries of one interpolation curve for ``identifiability_lmc`` (classification or regression);
the regression midpoint barrier is MSE(θ_½) − max(MSE(θ_0), MSE(θ_1)).
"""
from __future__ import annotations

import numpy as np

from lmcflow.metrics import barriers, relative_accuracy_barrier


def regression_midpoint_barrier(lam, mse) -> float:
    """MSE(θ_½) − max(MSE(θ_0), MSE(θ_1)); the λ grid must hold 0, ½ and 1."""
    lam = np.asarray(lam, dtype=float)
    v = np.asarray(mse, dtype=float)
    def at(x):
        hit = np.flatnonzero(np.isclose(lam, x))
        if hit.size == 0:
            raise ValueError(f"the λ grid must include {x} for the regression midpoint barrier")
        return v[hit[0]]
    return float(at(0.5) - max(at(0.0), at(1.0)))


def path_barrier_row(path_rows: list[dict], split: str = "test") -> dict:
    """Barrier summary of ``merging.evaluate_path`` rows for one split (classification or regression)."""
    rows = sorted((r for r in path_rows if r["split"] == split), key=lambda r: r["lam"])
    if not rows:
        raise ValueError(f"no path rows for split {split!r}")
    lam = [r["lam"] for r in rows]
    loss = [r["loss"] for r in rows]
    out = {"split": split, "loss_midpoint_barrier": barriers(lam, loss)["midpoint"],
           "loss_max_minus_mean": barriers(lam, loss)["max_minus_mean"],
           "regression_midpoint_barrier": regression_midpoint_barrier(lam, loss),
           "loss_0": loss[0], "loss_1": loss[-1]}
    acc = [r["acc"] for r in rows]
    if all(a == a for a in acc):  # classification
        out.update(acc_0=acc[0], acc_1=acc[-1], acc_mid=float(acc[int(np.argmin(np.abs(np.asarray(lam) - 0.5)))]),
                   relative_accuracy_barrier=relative_accuracy_barrier(lam, acc),
                   error_midpoint_barrier=barriers(lam, [1 - a for a in acc])["midpoint"])
    return out


def lmc_summary_row(path_rows: list[dict], split: str) -> dict:
    """Wide summary of one ``merging.evaluate_path`` curve (one split) for ``identifiability_lmc``.

    Barrier definitions as ``lmcflow.metrics.barriers`` (midpoint, max_minus_mean, entezari) on
    error = 1 − acc and on the loss; ``relative_accuracy_barrier`` =
    (min_λ acc − max(acc_a, acc_b)) / max(acc_a, acc_b). Regression curves (acc NaN) give NaN
    accuracy columns.
    """
    rows = sorted((r for r in path_rows if r["split"] == split), key=lambda r: r["lam"])
    if not rows:
        raise ValueError(f"no path rows for split {split!r}")
    lam = np.asarray([r["lam"] for r in rows], dtype=float)
    loss = np.asarray([r["loss"] for r in rows], dtype=float)
    acc = np.asarray([r["acc"] for r in rows], dtype=float)
    mid = int(np.argmin(np.abs(lam - 0.5)))
    nan = float("nan")
    lb = barriers(lam, loss)
    out = {"split": split, "loss_a": float(loss[0]), "loss_b": float(loss[-1]), "loss_mid": float(loss[mid]),
           **{f"loss_barrier_{k}": v for k, v in lb.items()}}
    if np.all(np.isfinite(acc)):
        eb = barriers(lam, 1.0 - acc)
        out.update(acc_a=float(acc[0]), acc_b=float(acc[-1]), acc_mid=float(acc[mid]), acc_min=float(acc.min()),
                   relative_accuracy_barrier=relative_accuracy_barrier(lam, acc),
                   **{f"error_barrier_{k}": v for k, v in eb.items()})
    else:
        out.update(acc_a=nan, acc_b=nan, acc_mid=nan, acc_min=nan, relative_accuracy_barrier=nan,
                   **{f"error_barrier_{k}": nan for k in lb})
    return out
