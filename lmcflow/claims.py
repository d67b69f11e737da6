"""Claim registry: each paper claim is a statistic computed from tables and a test.

A verdict is always computed from data: ``supported`` when the bootstrap
confidence interval (over seed pairs) lies on the claim's side of its
threshold, ``not_supported`` when it lies clearly on the other side, and
``inconclusive`` otherwise. Thresholds are claim parameters in the config
(``claims.<id>``), with the defaults documented here and in config/README.md.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from lmcflow.config import ConfigError
from lmcflow.seeding import derive_seed

WIDTH_PAPER = "Ito et al., ICLR 2026 (arXiv 2510.08023)"
IDENT_PAPER = "Bürgin et al., ICML 2026 (arXiv 2606.04754)"


@dataclass
class Claim:
    id: str
    paper: str
    statement: str
    tables: tuple  # per-study tables the statistic reads
    evaluate: Callable[[dict, dict], dict]
    defaults: dict = field(default_factory=dict)
    sweep_key: str | None = None  # the study must sweep this key
    min_pairs: int = 2

    def params(self, ccfg: dict | None) -> dict:
        return {**self.defaults, **{k: v for k, v in (ccfg or {}).items() if k != "study"}}

    def check_config(self, cid: str, ccfg: dict, study: dict, points: list) -> None:
        unknown = set(ccfg or {}) - set(self.defaults) - {"study"}
        if unknown:
            raise ConfigError(f"claims.{cid}: unknown parameter(s) {sorted(unknown)}; "
                              f"allowed: study, {', '.join(sorted(self.defaults))}")
        sweep = study.get("sweep") or {}
        if self.sweep_key and len(sweep.get(self.sweep_key, [])) < 2:
            raise ConfigError(f"claims.{cid}: study {ccfg.get('study')!r} must sweep {self.sweep_key} "
                              f"over at least 2 values (studies.{ccfg.get('study')}.sweep.{self.sweep_key})")
        n_seeds = len(study.get("seeds", []))
        n_pairs = n_seeds * (n_seeds - 1) // 2
        if n_pairs < self.min_pairs:
            raise ConfigError(f"claims.{cid}: needs at least {self.min_pairs} seed pairs for its bootstrap "
                              f"CI, study {ccfg.get('study')!r} has {n_seeds} seeds ({n_pairs} pairs); "
                              f"add seeds to studies.{ccfg.get('study')}.seeds")


REGISTRY: dict[str, Claim] = {}


def register(claim: Claim) -> Claim:
    REGISTRY[claim.id] = claim
    return claim


# --------------------------------------------------------------------------- statistics helpers
def bootstrap_ci(values_by_pair: np.ndarray, stat=np.mean, n_boot: int = 2000, level: float = 0.95,
                 seed_label: str = "bootstrap") -> tuple[float, float, float]:
    """Statistic over pairs and its percentile bootstrap CI (resampling pairs with replacement).

    ``values_by_pair`` has one row per pair; ``stat`` maps an (n, ...) array to a scalar.
    """
    v = np.asarray(values_by_pair, dtype=float)
    rng = np.random.default_rng(derive_seed(seed_label) % (2**32))
    point = float(stat(v))
    idx = rng.integers(0, len(v), size=(n_boot, len(v)))
    boots = np.array([stat(v[i]) for i in idx])
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)


def verdict_below(ci: tuple[float, float, float], threshold: float) -> str:
    """Claim 'statistic < threshold': supported if the whole CI is below, refuted if wholly above."""
    _, lo, hi = ci
    if hi < threshold:
        return "supported"
    if lo > threshold:
        return "not_supported"
    return "inconclusive"


def verdict_above(ci, threshold: float) -> str:
    _, lo, hi = ci
    if lo > threshold:
        return "supported"
    if hi < threshold:
        return "not_supported"
    return "inconclusive"


def combine(*verdicts: str) -> str:
    """All parts supported -> supported; any part refuted -> not_supported; else inconclusive."""
    if all(v == "supported" for v in verdicts):
        return "supported"
    if any(v == "not_supported" for v in verdicts):
        return "not_supported"
    return "inconclusive"


def pair_matrix(df: pd.DataFrame, column: str, value: str = "value") -> tuple[np.ndarray, list]:
    """(pairs × sorted values of ``column``) matrix of ``value``; drops pairs missing a cell."""
    wide = df.pivot_table(index=["seed_a", "seed_b"], columns=column, values=value, aggfunc="mean")
    wide = wide.dropna()
    return wide.to_numpy(), list(wide.columns)


def select_barriers(df: pd.DataFrame, *, metric: str, calibrated: bool, definition: str,
                    method: str = "identity", split: str = "test") -> pd.DataFrame:
    return df[(df.metric == metric) & (df.calibrated == calibrated) & (df.definition == definition)
              & (df.method == method) & (df.split == split)]


def _ci_dict(name, ci):
    return {f"{name}": ci[0], f"{name}_ci_low": ci[1], f"{name}_ci_high": ci[2]}


# --------------------------------------------------------------------------- width paper claims
def _width_merge_accuracy(tables: dict, p: dict) -> dict:
    b = select_barriers(tables["barriers"], metric="error", calibrated=False, definition=p["definition"],
                        method=p["method"], split=p["split"])
    mat, widths = pair_matrix(b, "width")
    if mat.shape[0] < 2 or len(widths) < 2:
        return {"verdict": "inconclusive", "reason": "fewer than 2 complete pairs or widths", "n_pairs": len(mat)}
    drop = bootstrap_ci(mat, lambda m: np.mean(m[:, 0] - m[:, -1]), seed_label="drop")
    widest = bootstrap_ci(mat[:, -1], seed_label="widest")
    mean_curve = mat.mean(0)
    rho = float(pd.Series(mean_curve).corr(pd.Series(np.log2(widths)), method="spearman"))
    verdict = combine(verdict_above(drop, 0.0), verdict_below(widest, p["max_barrier_widest"]))
    return {
        "verdict": verdict, "statistic_name": f"{p['definition']} error barrier at widest width",
        "statistic": widest[0], "ci_low": widest[1], "ci_high": widest[2], "n_pairs": int(mat.shape[0]),
        "details": {**_ci_dict("barrier_drop_narrow_to_wide", drop), "spearman_width_vs_mean_barrier": rho,
                    "widths": widths, "mean_barrier_by_width": mean_curve.tolist(),
                    "threshold_widest": p["max_barrier_widest"]},
    }


register(Claim(
    id="width-merge-accuracy", paper=WIDTH_PAPER,
    statement="Without permutation, the error barrier between independently trained models falls as "
              "width grows and is small at the widest width.",
    tables=("barriers",), evaluate=_width_merge_accuracy, sweep_key="model.width",
    defaults={"definition": "entezari", "method": "identity", "split": "test", "max_barrier_widest": 0.02},
))


def _temperature_calibration(tables: dict, p: dict) -> dict:
    df = tables["barriers"]
    sel = dict(metric="loss", definition=p["definition"], method=p["method"], split=p["split"])
    raw, widths = pair_matrix(select_barriers(df, calibrated=False, **sel), "width")
    cal, widths_c = pair_matrix(select_barriers(df, calibrated=True, **sel), "width")
    if raw.shape[0] < 2 or raw.shape != cal.shape or widths != widths_c:
        return {"verdict": "inconclusive", "reason": "fewer than 2 complete pairs", "n_pairs": len(raw)}
    both = np.stack([raw, cal], axis=-1)  # pairs × widths × (raw, cal)
    # Fraction of the raw barrier removed by calibration, pooled over widths (ratio of means).
    reduction = bootstrap_ci(both, lambda m: 1 - m[..., 1].mean() / m[..., 0].mean(), seed_label="reduction")
    cal_widest = bootstrap_ci(cal[:, -1], seed_label="cal_widest")
    verdict = combine(verdict_above(reduction, p["min_reduction"]),
                      verdict_below(cal_widest, p["max_calibrated_barrier_widest"]))
    return {
        "verdict": verdict, "statistic_name": "fraction of the raw loss barrier removed by calibration",
        "statistic": reduction[0], "ci_low": reduction[1], "ci_high": reduction[2], "n_pairs": int(raw.shape[0]),
        "details": {**_ci_dict("calibrated_barrier_widest", cal_widest), "widths": widths,
                    "mean_raw_by_width": raw.mean(0).tolist(), "mean_calibrated_by_width": cal.mean(0).tolist(),
                    "threshold_reduction": p["min_reduction"],
                    "threshold_calibrated_widest": p["max_calibrated_barrier_widest"]},
    }


register(Claim(
    id="temperature-calibration", paper=WIDTH_PAPER,
    statement="After softmax-temperature calibration the loss barrier is far below the raw one and "
              "approaches zero at the widest width.",
    tables=("barriers",), evaluate=_temperature_calibration, sweep_key="model.width",
    defaults={"definition": "entezari", "method": "identity", "split": "test", "min_reduction": 0.5,
              "max_calibrated_barrier_widest": 0.05},
))


# --------------------------------------------------------------------------- evaluation entry point
def evaluate_claim(cid: str, ccfg: dict, tables: dict, scale: dict) -> dict:
    claim = REGISTRY[cid]
    params = claim.params(ccfg)
    res = claim.evaluate(tables, params)
    return {
        "claim_id": cid, "paper": claim.paper, "statement": claim.statement, "study": ccfg["study"],
        "verdict": res["verdict"], "statistic_name": res.get("statistic_name", ""),
        "statistic": res.get("statistic", float("nan")), "ci_low": res.get("ci_low", float("nan")),
        "ci_high": res.get("ci_high", float("nan")), "ci_level": 0.95, "n_pairs": res.get("n_pairs", 0),
        "scale": scale, "params": params, "details": res.get("details", {}), "reason": res.get("reason", ""),
    }


def claim_row(result: dict) -> dict:
    row = {k: result[k] for k in ("claim_id", "paper", "statement", "study", "verdict", "statistic_name",
                                  "statistic", "ci_low", "ci_high", "n_pairs")}
    row["scale"] = json.dumps(result["scale"], sort_keys=True)
    return row
