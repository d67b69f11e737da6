"""Claim registry: each paper claim is a statistic computed from tables and a test.

A verdict is always computed from data: ``supported`` when the bootstrap
confidence interval (over seed pairs) lies on the claim's side of its
threshold, ``not_supported`` when it lies clearly on the other side, and
``inconclusive`` otherwise. Thresholds are claim parameters in the config
(``claims.<id>``), with the defaults documented here and in config/README.md.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lmcflow.config import ConfigError, point_value, same_value, swept_values
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
    # claim params that select points (param -> dotted point key, e.g. weight_decay -> train.weight_decay):
    # check_config verifies that the configured value occurs in the study (None: no selection)
    selects: dict = field(default_factory=dict)

    def params(self, ccfg: dict | None) -> dict:
        return {**self.defaults, **{k: v for k, v in (ccfg or {}).items() if k != "study"}}

    def check_config(self, cid: str, ccfg: dict, study: dict, points: list) -> None:
        unknown = set(ccfg or {}) - set(self.defaults) - {"study"}
        if unknown:
            raise ConfigError(f"claims.{cid}: unknown parameter(s) {sorted(unknown)}; "
                              f"allowed: study, {', '.join(sorted(self.defaults))}")
        if self.sweep_key and len(swept_values(study, self.sweep_key)) < 2:
            raise ConfigError(f"claims.{cid}: study {ccfg.get('study')!r} must sweep {self.sweep_key} "
                              f"over at least 2 values (studies.{ccfg.get('study')}.sweep.{self.sweep_key})")
        n_seeds = len(study.get("seeds", []))
        n_pairs = n_seeds * (n_seeds - 1) // 2
        if n_pairs < self.min_pairs:
            raise ConfigError(f"claims.{cid}: needs at least {self.min_pairs} seed pairs for its bootstrap "
                              f"CI, study {ccfg.get('study')!r} has {n_seeds} seeds ({n_pairs} pairs); "
                              f"add seeds to studies.{ccfg.get('study')}.seeds")
        params = self.params(ccfg)
        for name, key in self.selects.items():
            if params.get(name) is None:
                continue
            have = sorted({point_value(p, key) for p in points}, key=str)
            if not any(same_value(params[name], v) for v in have):
                raise ConfigError(f"claims.{cid}.{name}: {params[name]!r} is not a value of {key} in study "
                                  f"{ccfg.get('study')!r}; its points have {have}")


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


def select_weight_decay(df: pd.DataFrame, weight_decay: float | None) -> pd.DataFrame:
    """Rows trained with ``weight_decay`` (relative tolerance 1e-6); None (or a table without the
    column, e.g. a hand-made one) keeps every row."""
    if weight_decay is None or "weight_decay" not in df.columns:
        return df
    return df[np.isclose(df.weight_decay.to_numpy(dtype=float), float(weight_decay), rtol=1e-6, atol=0.0)]


def drop_and_last(mat: np.ndarray, drop_label: str, last_label: str) -> tuple[tuple, tuple]:
    """Bootstrap CIs over pairs (rows) of the drop from the first to the last column (narrowest to
    widest width, smallest to largest σ_F or ν) and of the last column itself."""
    return (bootstrap_ci(mat, lambda a: np.mean(a[:, 0] - a[:, -1]), seed_label=drop_label),
            bootstrap_ci(mat[:, -1], seed_label=last_label))


def _ci_dict(name, ci):
    return {f"{name}": ci[0], f"{name}_ci_low": ci[1], f"{name}_ci_high": ci[2]}


# --------------------------------------------------------------------------- width paper claims
def _width_merge_accuracy(tables: dict, p: dict) -> dict:
    b = select_barriers(select_weight_decay(tables["barriers"], p["weight_decay"]), metric="error",
                        calibrated=False, definition=p["definition"], method=p["method"], split=p["split"])
    mat, widths = pair_matrix(b, "width")
    if mat.shape[0] < 2 or len(widths) < 2:
        return {"verdict": "inconclusive", "reason": "fewer than 2 complete pairs or widths", "n_pairs": len(mat)}
    drop, widest = drop_and_last(mat, "drop", "widest")
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
    defaults={"definition": "entezari", "method": "identity", "split": "test", "max_barrier_widest": 0.02,
              "weight_decay": 3.0e-3},
    selects={"weight_decay": "train.weight_decay"},
))


def _temperature_calibration(tables: dict, p: dict) -> dict:
    df = select_weight_decay(tables["barriers"], p["weight_decay"])
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
              "max_calibrated_barrier_widest": 0.05, "weight_decay": 3.0e-3},
    selects={"weight_decay": "train.weight_decay"},
))


# --------------------------------------------------------------------------- width paper: alignment and mechanism claims
# Mechanism claims read layer_metrics of the unaligned pairs (``method``) at λ_paper = ``lam`` (½),
# averaged per pair over hidden layers ≥ ``min_layer`` (layer 1 reads the same input in both
# models, so there LEWC = LLFC and the cross-norm ratios are 1 by definition). LEWC is read at the
# interior λ ≠ ½ instead: at λ = ½ its target ½^l (f_A + f_B) is a multiple of LLFC's ½(f_A + f_B),
# and the cosine cannot tell them apart. Every claim reads the arm trained with ``weight_decay``
# (default 3e-3, the paper's working value).
class WidthClaim(Claim):
    """A width-paper claim with extra config requirements (methods / mechanism where it reads them)."""

    def __init__(self, *args, requires=None, **kw):
        super().__init__(*args, **kw)
        self.requires = requires

    def check_config(self, cid: str, ccfg: dict, study: dict, points: list) -> None:
        super().check_config(cid, ccfg, study, points)
        if self.requires:
            self.requires(cid, self.params(ccfg), ccfg.get("study"), points)


def _arm(points: list, weight_decay) -> list:
    return [q for q in points if weight_decay is None or same_value(q.train["weight_decay"], weight_decay)]


def _requires_methods(method_param: str | None = None, methods: tuple = (), at=("narrowest", "widest")):
    """The study must evaluate the merge method(s) at the narrowest / widest width of the claim's arm."""
    def check(cid, p, study, points) -> None:
        from lmcflow.config import merge_methods

        pts = _arm(points, p.get("weight_decay"))
        widths = sorted({float(q.model["width"]) for q in pts})
        need = list(methods) + ([p[method_param]] if method_param else [])
        for m in need:
            for where in at:
                w = widths[0] if where == "narrowest" else widths[-1]
                if not any(m in merge_methods(q) for q in pts if same_value(q.model["width"], w)):
                    raise ConfigError(
                        f"claims.{cid}: needs merge method {m!r} at the {where} width {w:g} (weight decay "
                        f"{p.get('weight_decay')}) of study {study!r}: add it to studies.{study}.merge.methods "
                        f"and let merge.alignment.at include that point")
    return check


def _requires_mechanism(*wd_params: str):
    """analysis.mechanism must cover ``method`` at every point of each weight-decay arm the claim reads."""
    def check(cid, p, study, points) -> None:
        from lmcflow.config import mechanism_lambdas, mechanism_methods

        for param in wd_params:
            missing = [q.point for q in _arm(points, p.get(param)) if p["method"] not in mechanism_methods(q)]
            if missing:
                raise ConfigError(
                    f"claims.{cid}: needs mechanism metrics for method {p['method']!r} at points {missing} of "
                    f"study {study!r}: set studies.{study}.analysis.mechanism.methods to include it")
            for q in _arm(points, p.get(param)):
                lams = mechanism_lambdas(q)
                if "lam" in p and not any(same_value(p["lam"], v) for v in lams):
                    raise ConfigError(f"claims.{cid}: reads λ = {p['lam']} but analysis.mechanism.lambdas of "
                                      f"study {study!r} (point {q.point}) does not contain it")
                if "lam" not in p and not [v for v in lams if 0 < v < 1 and not same_value(v, 0.5)]:
                    raise ConfigError(f"claims.{cid}: compares LEWC with LLFC, which needs a λ in (0, 1) other "
                                      f"than ½; analysis.mechanism.lambdas of study {study!r} (point {q.point}) "
                                      f"has {lams}")
    return check


def _pair_matrices(df: pd.DataFrame, column: str, values: list) -> tuple[dict, list]:
    """{value: (pairs × sorted ``column``) matrix}, one pivot so every matrix has the same complete pairs."""
    if df.empty:
        return {v: np.empty((0, 0)) for v in values}, []
    wide = df.pivot_table(index=["seed_a", "seed_b"], columns=column, values=values, aggfunc="mean").dropna()
    cols = sorted(set(wide.columns.get_level_values(1)))
    return {v: wide[v][cols].to_numpy() for v in values}, cols


def _layer_frame(lm: pd.DataFrame, p: dict, weight_decay) -> pd.DataFrame:
    df = select_weight_decay(lm, weight_decay)
    df = df[(df.method == p["method"]) & np.isclose(df.lam_paper.to_numpy(dtype=float), float(p["lam"]))]
    return df[df.layer >= int(p["min_layer"])].copy()


def _lewc_frame(lm: pd.DataFrame, p: dict, weight_decay) -> pd.DataFrame:
    """LEWC/LLFC rows at interior λ ≠ ½ (see the section comment), layers ≥ ``min_layer``."""
    df = select_weight_decay(lm, weight_decay)
    lam = df.lam_paper.to_numpy(dtype=float)
    df = df[(df.method == p["method"]) & (lam > 0) & (lam < 1) & ~np.isclose(lam, 0.5)]
    return df[df.layer >= int(p["min_layer"])].copy()


def _by_width(mat: np.ndarray) -> list:
    return mat.mean(0).tolist() if mat.size else []


def _spearman_log_width(widths, curve) -> float:
    if len(widths) < 2:
        return float("nan")
    return float(pd.Series(list(curve)).corr(pd.Series(np.log2(widths)), method="spearman"))


def _short(reason: str, n: int) -> dict:
    return {"verdict": "inconclusive", "reason": reason, "n_pairs": int(n)}


MECH_DEFAULTS = {"method": "identity", "lam": 0.5, "weight_decay": 3.0e-3}


def _lewc(tables: dict, p: dict) -> dict:
    df = _lewc_frame(tables["layer_metrics"], p, p["weight_decay"])
    m, widths = _pair_matrices(df, "width", ["lewc_cos", "llfc_cos"])
    lewc, llfc = m["lewc_cos"], m["llfc_cos"]
    if lewc.shape[0] < 2 or len(widths) < 2:
        return _short(f"fewer than 2 complete pairs or widths with layers ≥ {p['min_layer']} and λ ∉ {{0, ½, 1}}",
                      len(lewc))
    widest = bootstrap_ci(lewc[:, -1], seed_label="lewc/widest")
    rise = bootstrap_ci(lewc, lambda a: np.mean(a[:, -1] - a[:, 0]), seed_label="lewc/rise")
    gap = bootstrap_ci(np.stack([lewc[:, -1], llfc[:, -1]], 1), lambda a: np.mean(a[:, 0] - a[:, 1]),
                       seed_label="lewc/gap")
    verdict = combine(verdict_above(rise, p["min_rise"]), verdict_above(widest, p["min_lewc_widest"]),
                      verdict_above(gap, p["min_gap_over_llfc"]))
    return {
        "verdict": verdict,
        "statistic_name": f"LEWC cosine at widest width (mean over layers ≥ {p['min_layer']} and λ ∈ (0,1) \\ {{½}})",
        "statistic": widest[0], "ci_low": widest[1], "ci_high": widest[2], "n_pairs": int(lewc.shape[0]),
        "details": {**_ci_dict("rise_narrow_to_wide", rise), **_ci_dict("lewc_minus_llfc_widest", gap),
                    "widths": widths, "mean_lewc_by_width": _by_width(lewc), "mean_llfc_by_width": _by_width(llfc),
                    "spearman_width_vs_mean_lewc": _spearman_log_width(widths, lewc.mean(0)),
                    "threshold_lewc_widest": p["min_lewc_widest"], "threshold_rise": p["min_rise"],
                    "threshold_gap_over_llfc": p["min_gap_over_llfc"]},
    }


register(WidthClaim(
    id="lewc", paper=WIDTH_PAPER,
    statement="Without permutation, the layer-wise exponentially weighted connectivity (LEWC) cosine "
              "cos(f_l(θ_λ), λ^l f_l(θ_A) + (1−λ)^l f_l(θ_B)) rises with width toward 1 and at the widest width "
              "exceeds the LLFC form cos(f_l(θ_λ), λ f_l(θ_A) + (1−λ) f_l(θ_B)) (layers l ≥ 2, interior λ ≠ ½).",
    tables=("layer_metrics",), evaluate=_lewc, sweep_key="model.width",
    defaults={"method": "identity", "weight_decay": 3.0e-3, "min_layer": 2, "min_lewc_widest": 0.9, "min_rise": 0.0, "min_gap_over_llfc": 0.0},
    selects={"weight_decay": "train.weight_decay"}, requires=_requires_mechanism("weight_decay"),
))


def _weak_additivity(tables: dict, p: dict) -> dict:
    df = _layer_frame(tables["layer_metrics"], p, p["weight_decay"])
    m, widths = _pair_matrices(df, "width", ["weak_additivity", "weak_additivity_gaussian"])
    wa = m["weak_additivity"]
    if wa.shape[0] < 2 or len(widths) < 2:
        return _short("fewer than 2 complete pairs or widths", len(wa))
    widest = bootstrap_ci(wa[:, -1], seed_label="weak-additivity/widest")
    change = bootstrap_ci(wa, lambda a: np.mean(a[:, -1] - a[:, 0]), seed_label="weak-additivity/change")
    verdict = combine(verdict_above(widest, p["min_widest"]), verdict_above(change, -p["max_fall"]))
    return {
        "verdict": verdict, "statistic_name": "weak-additivity cosine at λ=½ at widest width (mean over layers)",
        "statistic": widest[0], "ci_low": widest[1], "ci_high": widest[2], "n_pairs": int(wa.shape[0]),
        "details": {**_ci_dict("change_narrow_to_wide", change), "widths": widths,
                    "mean_by_width": _by_width(wa), "gaussian_reference": float(np.mean(m["weak_additivity_gaussian"])),
                    "spearman_width_vs_mean": _spearman_log_width(widths, wa.mean(0)),
                    "threshold_widest": p["min_widest"], "tolerated_fall": p["max_fall"]},
    }


register(WidthClaim(
    id="weak-additivity", paper=WIDTH_PAPER,
    statement="ReLU is weakly additive on the two models' pre-activations: cos(σ(½z̃_A + ½z̃_B), ½σ(z̃_A) + "
              "½σ(z̃_B)) is high (Gaussian reference 0.93) and does not fall with width.",
    tables=("layer_metrics",), evaluate=_weak_additivity, sweep_key="model.width",
    defaults={**MECH_DEFAULTS, "min_layer": 1, "min_widest": 0.9, "max_fall": 0.02},
    selects={"weight_decay": "train.weight_decay"}, requires=_requires_mechanism("weight_decay"),
))


def _reciprocal_orthogonality(tables: dict, p: dict) -> dict:
    df = _layer_frame(tables["layer_metrics"], p, p["weight_decay"])
    df["cross_ratio"] = (df.cross_ratio_a + df.cross_ratio_b) / 2
    m, widths = _pair_matrices(df, "width", ["cross_ratio", "cross_cos"])
    r = m["cross_ratio"]
    if r.shape[0] < 2 or len(widths) < 2:
        return _short(f"fewer than 2 complete pairs or widths with layers ≥ {p['min_layer']}", len(r))
    drop, widest = drop_and_last(r, "reciprocal/drop", "reciprocal/widest")
    verdict = verdict_above(drop, p["min_drop"])
    return {
        "verdict": verdict,
        "statistic_name": "drop of the mean cross-norm ratio ‖W_A z_B‖/‖W_A z_A‖, ‖W_B z_A‖/‖W_B z_B‖ from "
                          f"narrowest to widest width (layers ≥ {p['min_layer']})",
        "statistic": drop[0], "ci_low": drop[1], "ci_high": drop[2], "n_pairs": int(r.shape[0]),
        "details": {**_ci_dict("cross_ratio_widest", widest), "widths": widths,
                    "mean_cross_ratio_by_width": _by_width(r), "mean_cross_cos_by_width": _by_width(m["cross_cos"]),
                    "spearman_width_vs_mean_ratio": _spearman_log_width(widths, r.mean(0)),
                    "threshold_drop": p["min_drop"]},
    }


register(WidthClaim(
    id="reciprocal-orthogonality", paper=WIDTH_PAPER,
    statement="Reciprocal orthogonality: the cross terms W_A z_B and W_B z_A shrink relative to W_A z_A and "
              "W_B z_B as width grows (the cross-norm ratios fall with width).",
    tables=("layer_metrics",), evaluate=_reciprocal_orthogonality, sweep_key="model.width",
    defaults={**MECH_DEFAULTS, "min_layer": 2, "min_drop": 0.0},
    selects={"weight_decay": "train.weight_decay"}, requires=_requires_mechanism("weight_decay"),
))


def _low_rank(tables: dict, p: dict) -> dict:
    df = _layer_frame(tables["layer_metrics"], p, p["weight_decay"])
    df["erank_rel"] = (df.erank_rel_a + df.erank_rel_b) / 2
    df["rank99_frac"] = (df.rank99_frac_a + df.rank99_frac_b) / 2
    m, widths = _pair_matrices(df, "width", ["erank_rel", "rank99_frac"])
    e = m["erank_rel"]
    if e.shape[0] < 2 or len(widths) < 2:
        return _short(f"fewer than 2 complete pairs or widths with layers ≥ {p['min_layer']}", len(e))
    drop, widest = drop_and_last(e, "low-rank/drop", "low-rank/widest")
    return {
        "verdict": verdict_above(drop, p["min_drop"]),
        "statistic_name": f"drop of the relative effective rank erank/min(shape) of the weights from narrowest to "
                          f"widest width (layers ≥ {p['min_layer']}, mean of A and B)",
        "statistic": drop[0], "ci_low": drop[1], "ci_high": drop[2], "n_pairs": int(e.shape[0]),
        "details": {**_ci_dict("erank_rel_widest", widest), "widths": widths, "mean_erank_rel_by_width": _by_width(e),
                    "mean_rank99_frac_by_width": _by_width(m["rank99_frac"]),
                    "spearman_width_vs_mean_erank_rel": _spearman_log_width(widths, e.mean(0)),
                    "threshold_drop": p["min_drop"]},
    }


register(WidthClaim(
    id="low-rank", paper=WIDTH_PAPER,
    statement="Under the default weight decay the weights become relatively low-rank as width grows: the "
              "relative (entropy) effective rank of the hidden weights falls with width.",
    tables=("layer_metrics",), evaluate=_low_rank, sweep_key="model.width",
    defaults={**MECH_DEFAULTS, "min_layer": 2, "min_drop": 0.0},
    selects={"weight_decay": "train.weight_decay"}, requires=_requires_mechanism("weight_decay"),
))


def _arms_at_widest(df: pd.DataFrame, p: dict, value: str) -> tuple[np.ndarray, float]:
    """(pairs × [default, weak]) matrix of ``value`` at the widest width both weight-decay arms have."""
    d, w = select_weight_decay(df, p["weight_decay"]), select_weight_decay(df, p["weak_weight_decay"])
    common = sorted(set(d.width) & set(w.width))
    if not common:
        return np.empty((0, 2)), float("nan")
    wmax = common[-1]
    both = pd.concat([d[d.width == wmax].assign(arm="0_default"), w[w.width == wmax].assign(arm="1_weak")])
    wide = both.pivot_table(index=["seed_a", "seed_b"], columns="arm", values=value, aggfunc="mean").dropna()
    if list(wide.columns) != ["0_default", "1_weak"]:
        return np.empty((0, 2)), wmax
    return wide.to_numpy(), float(wmax)


def _weight_decay(tables: dict, p: dict) -> dict:
    b = select_barriers(tables["barriers"], metric="error", calibrated=False, definition=p["definition"],
                        method=p["method"], split=p["split"])
    bar, wmax = _arms_at_widest(b, p, "value")
    lm = _lewc_frame(tables["layer_metrics"], p, None)
    lewc, _ = _arms_at_widest(lm, p, "lewc_cos")
    if bar.shape[0] < 2 or lewc.shape[0] < 2:
        return _short("fewer than 2 complete pairs in both weight-decay arms at a common widest width",
                      min(len(bar), len(lewc)))
    gap = bootstrap_ci(bar, lambda a: np.mean(a[:, 1] - a[:, 0]), seed_label="weight-decay/barrier")
    lewc_gap = bootstrap_ci(lewc, lambda a: np.mean(a[:, 0] - a[:, 1]), seed_label="weight-decay/lewc")
    verdict = combine(verdict_above(gap, p["min_barrier_gap"]), verdict_above(lewc_gap, p["min_lewc_gap"]))
    return {
        "verdict": verdict,
        "statistic_name": f"{p['definition']} error barrier at widest width: weak − default weight decay",
        "statistic": gap[0], "ci_low": gap[1], "ci_high": gap[2], "n_pairs": int(bar.shape[0]),
        "details": {**_ci_dict("lewc_default_minus_weak", lewc_gap), "width": wmax,
                    "mean_barrier_default": float(bar[:, 0].mean()), "mean_barrier_weak": float(bar[:, 1].mean()),
                    "mean_lewc_default": float(lewc[:, 0].mean()), "mean_lewc_weak": float(lewc[:, 1].mean()),
                    "threshold_barrier_gap": p["min_barrier_gap"], "threshold_lewc_gap": p["min_lewc_gap"]},
    }


register(WidthClaim(
    id="weight-decay", paper=WIDTH_PAPER,
    statement="Weight decay drives LMC without permutation: with weight decay 1e-4 the error barrier at the "
              "widest width is clearly larger, and the LEWC cosine lower, than with the default weight decay.",
    tables=("barriers", "layer_metrics"), evaluate=_weight_decay, sweep_key="train.weight_decay",
    defaults={"method": "identity", "weight_decay": 3.0e-3, "weak_weight_decay": 1.0e-4, "definition": "entezari",
              "split": "test", "min_layer": 2, "min_barrier_gap": 0.01, "min_lewc_gap": 0.0},
    selects={"weight_decay": "train.weight_decay", "weak_weight_decay": "train.weight_decay"},
    requires=_requires_mechanism("weight_decay", "weak_weight_decay"),
))


def _method_vs_identity(b: pd.DataFrame, method: str, width: float) -> np.ndarray:
    """(pairs × [identity, method]) barrier matrix at one width."""
    sub = b[(b.width == width) & b.method.isin(["identity", method])]
    wide = sub.pivot_table(index=["seed_a", "seed_b"], columns="method", values="value", aggfunc="mean").dropna()
    if set(wide.columns) != {"identity", method}:
        return np.empty((0, 2))
    return wide[["identity", method]].to_numpy()


def _weight_matching_no_gain(tables: dict, p: dict) -> dict:
    b = select_weight_decay(tables["barriers"], p["weight_decay"])
    b = b[(b.metric == "error") & ~b.calibrated & (b.definition == p["definition"]) & (b.split == p["split"])]
    widths = sorted(set(b[b.method == p["method"]].width))
    if len(widths) < 2:
        return _short(f"{p['method']} evaluated at fewer than 2 widths", 0)
    wide, narrow = _method_vs_identity(b, p["method"], widths[-1]), _method_vs_identity(b, p["method"], widths[0])
    if wide.shape[0] < 2 or narrow.shape[0] < 2:
        return _short("fewer than 2 complete pairs at the narrowest or widest width", min(len(wide), len(narrow)))
    gain_wide = bootstrap_ci(wide, lambda a: np.mean(a[:, 0] - a[:, 1]), seed_label="wm-no-gain/widest")
    gain_narrow = bootstrap_ci(narrow, lambda a: np.mean(a[:, 0] - a[:, 1]), seed_label="wm-no-gain/narrowest")
    verdict = combine(verdict_below(gain_wide, p["max_gain_widest"]),
                      verdict_above(gain_narrow, p["min_gain_narrowest"]))
    return {
        "verdict": verdict,
        "statistic_name": f"{p['definition']} error barrier at widest width: no permutation − {p['method']}",
        "statistic": gain_wide[0], "ci_low": gain_wide[1], "ci_high": gain_wide[2], "n_pairs": int(wide.shape[0]),
        "details": {**_ci_dict("gain_narrowest", gain_narrow), "widest": widths[-1], "narrowest": widths[0],
                    "mean_barrier_identity_widest": float(wide[:, 0].mean()),
                    "mean_barrier_method_widest": float(wide[:, 1].mean()),
                    "mean_barrier_identity_narrowest": float(narrow[:, 0].mean()),
                    "mean_barrier_method_narrowest": float(narrow[:, 1].mean()),
                    "threshold_gain_widest": p["max_gain_widest"], "threshold_gain_narrowest": p["min_gain_narrowest"]},
    }


register(WidthClaim(
    id="weight-matching-no-gain", paper=WIDTH_PAPER,
    statement="At the widest width weight matching does not lower the error barrier significantly below no "
              "permutation (paper Table 1: MLP 16x MNIST 0.52% vs −0.03%, VGG-11 16x 1.31% vs 7.00%, ResNet-20 "
              "32x 2.69% vs 5.14%), while at the narrowest width it does help.",
    tables=("barriers",), evaluate=_weight_matching_no_gain, sweep_key="model.width",
    defaults={"method": "weight_matching", "weight_decay": 3.0e-3, "definition": "entezari", "split": "test",
              "max_gain_widest": 0.01, "min_gain_narrowest": 0.0},
    selects={"weight_decay": "train.weight_decay"}, requires=_requires_methods("method"),
))


def _random_permutation(tables: dict, p: dict) -> dict:
    b = select_weight_decay(tables["barriers"], p["weight_decay"])
    b = b[(b.metric == "error") & ~b.calibrated & (b.definition == p["definition"]) & (b.split == p["split"])]
    widths = sorted(set(b[b.method == "random_permutation"].width))
    if not widths:
        return _short("random_permutation was not evaluated", 0)
    mat = _method_vs_identity(b, "random_permutation", widths[-1])
    if mat.shape[0] < 2:
        return _short("fewer than 2 complete pairs at the widest width", len(mat))
    diff = bootstrap_ci(mat, lambda a: np.mean(a[:, 1] - a[:, 0]), seed_label="random-permutation/diff")
    tol = p["tolerance"]
    details = {"width": widths[-1], "mean_identity": float(mat[:, 0].mean()), "mean_random": float(mat[:, 1].mean()),
               "identity_pair_std": float(mat[:, 0].std(ddof=1)), "tolerance": tol}
    if len(widths) > 1:
        narrow = _method_vs_identity(b, "random_permutation", widths[0])
        if len(narrow):
            details.update({"narrowest": widths[0], "mean_identity_narrowest": float(narrow[:, 0].mean()),
                            "mean_random_narrowest": float(narrow[:, 1].mean())})
    return {
        "verdict": combine(verdict_above(diff, -tol), verdict_below(diff, tol)),
        "statistic_name": f"{p['definition']} error barrier at widest width: random permutation − no permutation",
        "statistic": diff[0], "ci_low": diff[1], "ci_high": diff[2], "n_pairs": int(mat.shape[0]),
        "details": details,
    }


register(WidthClaim(
    id="random-permutation", paper=WIDTH_PAPER,
    statement="At the widest width a random permutation of model B leaves the merged (λ = ½) error within noise "
              "of no permutation.",
    tables=("barriers",), evaluate=_random_permutation, sweep_key="model.width",
    defaults={"weight_decay": 3.0e-3, "definition": "midpoint", "split": "test", "tolerance": 0.01},
    selects={"weight_decay": "train.weight_decay"},
    requires=_requires_methods(methods=("random_permutation",), at=("widest",)),
))


# --------------------------------------------------------------------------- identifiability paper claims
class IdentClaim(Claim):
    """A claim with extra config requirements: values its sweep must contain (e.g. σ_F = 0)."""

    requires: Callable | None = None  # (cid, ccfg, study dict, points) -> None, raises ConfigError

    def __init__(self, *args, requires=None, **kw):
        super().__init__(*args, **kw)
        self.requires = requires

    def check_config(self, cid: str, ccfg: dict, study: dict, points: list) -> None:
        super().check_config(cid, ccfg, study, points)
        if self.requires:
            self.requires(cid, ccfg, study, points)


def seed_matrix(df: pd.DataFrame, column: str, value: str) -> tuple[np.ndarray, list]:
    """(seeds × sorted values of ``column``) matrix of ``value`` (mean over other rows); drops incomplete seeds.

    For per-model quantities (accuracy, swap costs) the bootstrap resamples seeds, not pairs.
    """
    wide = df.pivot_table(index="seed", columns=column, values=value, aggfunc="mean").dropna()
    return wide.to_numpy(), list(wide.columns)


def _spearman(x, y) -> float:
    return float(pd.Series(list(y)).corr(pd.Series(list(x)), method="spearman"))


def _inconclusive(reason: str, n: int) -> dict:
    return {"verdict": "inconclusive", "reason": reason, "n_pairs": int(n)}


def _requires_sigma_values(cid, ccfg, study, points) -> None:
    from lmcflow.symmetry import (
        check_symmetry,  # σ_F as the layers use it (default 1.0 when unset)
    )

    sigmas = {float(check_symmetry(p.model.get("symmetry"))["sigma_f"]) for p in points}
    kinds = {(p.model.get("symmetry") or {}).get("kind", "standard") for p in points}
    if 0.0 not in sigmas or kinds & {"standard", "sigma_asymmetric"}:
        raise ConfigError(f"claims.{cid}: study {ccfg.get('study')!r} must sweep model.symmetry.sigma_f "
                          f"including 0 with a masked kind (w_asymmetric or syre); got σ_F {sorted(sigmas)} "
                          f"and kinds {sorted(kinds)}")


def _requires_analysis(flag: str):
    def check(cid, ccfg, study, points) -> None:
        if not all((p.analysis or {}).get(flag) for p in points):
            raise ConfigError(f"claims.{cid}: study {ccfg.get('study')!r} must set analysis.{flag}: true "
                              f"(studies.{ccfg.get('study')}.analysis.{flag})")
    return check


def _all(*checks):
    def check(*args) -> None:
        for c in checks:
            c(*args)
    return check


def _sigma_f_identity(tables: dict, p: dict) -> dict:
    df = tables["identifiability"]
    if p["layers"] is not None:
        df = df[df.layer.isin(p["layers"])]
    # identity_normalized = (identity − random)/(optimal − random), averaged over the chosen layers per pair
    mat, sigmas = pair_matrix(df, "sigma_f", value="identity_normalized")
    if mat.shape[0] < 2 or len(sigmas) < 2:
        return _inconclusive("fewer than 2 complete pairs or σ_F values", len(mat))
    top = bootstrap_ci(mat[:, -1], seed_label="sigma-f-identity/top")
    zero = bootstrap_ci(mat[:, 0], seed_label="sigma-f-identity/zero")
    rise = bootstrap_ci(mat, lambda m: np.mean(m[:, -1] - m[:, 0]), seed_label="sigma-f-identity/rise")
    verdict = combine(verdict_above(top, p["min_normalized_at_max"]),
                      verdict_below(zero, p["max_normalized_at_zero"]))
    by_layer = df.groupby(["sigma_f", "layer"])[["optimal", "identity", "random_mean"]].mean().reset_index()
    return {
        "verdict": verdict,
        "statistic_name": f"normalized identity objective (identity − random)/(optimal − random) at σ_F = {sigmas[-1]:g}",
        "statistic": top[0], "ci_low": top[1], "ci_high": top[2], "n_pairs": int(mat.shape[0]),
        "details": {**_ci_dict(f"normalized_at_sigma_{sigmas[0]:g}", zero), **_ci_dict("normalized_rise", rise),
                    "sigma_f": sigmas, "mean_normalized_by_sigma_f": mat.mean(0).tolist(),
                    "spearman_sigma_f_vs_mean_normalized": _spearman(sigmas, mat.mean(0)),
                    "mean_by_sigma_f_and_layer": by_layer.to_dict("records"),
                    "threshold_at_max": p["min_normalized_at_max"], "threshold_at_zero": p["max_normalized_at_zero"]},
    }


register(IdentClaim(
    id="sigma-f-identity", paper=IDENT_PAPER,
    statement="As σ_F grows, the identity permutation's activation-matching objective approaches the optimal "
              "one; at σ_F = 0 it is near the level of a random permutation.",
    tables=("identifiability",), evaluate=_sigma_f_identity, sweep_key="model.symmetry.sigma_f",
    defaults={"layers": None, "min_normalized_at_max": 0.9, "max_normalized_at_zero": 0.1},
    requires=_all(_requires_sigma_values, _requires_analysis("identifiability")),
))


def _sigma_f_unaligned_barrier(tables: dict, p: dict) -> dict:
    df = tables["identifiability_lmc"]
    df = df[df.split == p["split"]]
    col = f"{p['metric']}_barrier_{p['definition']}"
    wide = df.pivot_table(index=["seed_a", "seed_b"], columns=["method", "sigma_f"], values=col,
                          aggfunc="mean").dropna()
    if "identity" not in wide.columns.get_level_values(0) or \
            "activation_matching" not in wide.columns.get_level_values(0):
        return _inconclusive("identifiability_lmc lacks the identity or activation_matching rows", len(wide))
    un, al = wide["identity"], wide["activation_matching"]
    sigmas = sorted(set(un.columns) & set(al.columns))
    if len(wide) < 2 or len(sigmas) < 2:
        return _inconclusive("fewer than 2 complete pairs or σ_F values", len(wide))
    both = np.stack([un[sigmas].to_numpy(), al[sigmas].to_numpy()], axis=-1)  # pairs × σ_F × (unaligned, aligned)
    drop = bootstrap_ci(both, lambda m: np.mean(m[:, 0, 0] - m[:, -1, 0]), seed_label="sigma-f-barrier/drop")
    # Fraction of the unaligned−aligned gap at the smallest σ_F that remains at the largest (ratio of means).
    gap_ratio = bootstrap_ci(both, lambda m: np.mean(m[:, -1, 0] - m[:, -1, 1]) / np.mean(m[:, 0, 0] - m[:, 0, 1]),
                             seed_label="sigma-f-barrier/gap")
    verdict = combine(verdict_above(drop, p["min_drop"]), verdict_below(gap_ratio, p["max_gap_ratio"]))
    return {
        "verdict": verdict,
        "statistic_name": f"drop of the unaligned {p['definition']} {p['metric']} barrier from σ_F = {sigmas[0]:g} "
                          f"to σ_F = {sigmas[-1]:g}",
        "statistic": drop[0], "ci_low": drop[1], "ci_high": drop[2], "n_pairs": int(both.shape[0]),
        "details": {**_ci_dict("remaining_gap_ratio", gap_ratio), "sigma_f": sigmas,
                    "mean_unaligned_by_sigma_f": both[..., 0].mean(0).tolist(),
                    "mean_aligned_by_sigma_f": both[..., 1].mean(0).tolist(),
                    "spearman_sigma_f_vs_mean_unaligned": _spearman(sigmas, both[..., 0].mean(0)),
                    "threshold_drop": p["min_drop"], "threshold_gap_ratio": p["max_gap_ratio"]},
    }


register(IdentClaim(
    id="sigma-f-unaligned-barrier", paper=IDENT_PAPER,
    statement="The barrier between independently trained W-asymmetric models without alignment falls as σ_F "
              "grows, towards the barrier after activation-matching alignment.",
    tables=("identifiability_lmc",), evaluate=_sigma_f_unaligned_barrier, sweep_key="model.symmetry.sigma_f",
    defaults={"metric": "error", "definition": "entezari", "split": "test", "min_drop": 0.0, "max_gap_ratio": 0.25},
    requires=_all(_requires_sigma_values, _requires_analysis("identifiability")),
))


def _intrinsic_dimension(tables: dict, p: dict) -> dict:
    df = tables["swap_costs"]
    df = df[df.layer == p["layer"]]
    if df.empty or (df.data_k < 0).any():
        return _inconclusive(f"no swap costs for layer {p['layer']!r} on datasets with a nominal k", 0)
    high = p["sigma_f_high"] if p["sigma_f_high"] is not None else float(df.sigma_f.max())
    mh, ks = seed_matrix(df[df.sigma_f == high], "data_k", "swap_median")
    rel0, ks0 = seed_matrix(df[df.sigma_f == 0], "data_k", "swap_median_relative")
    neg0, _ = seed_matrix(df[df.sigma_f == 0], "data_k", "swap_frac_negative")
    n = min(len(mh), len(rel0))
    if n < 2 or len(ks) < 2 or len(ks0) < 2 or high == 0:
        return _inconclusive("fewer than 2 complete seeds or k values at σ_F = 0 and the high σ_F", n)
    growth = bootstrap_ci(mh, lambda m: np.mean(m[:, -1] - m[:, 0]), seed_label="intrinsic-dimension/growth")
    near_zero = bootstrap_ci(rel0, lambda m: np.max(np.abs(m.mean(0))), seed_label="intrinsic-dimension/zero")
    negatives = bootstrap_ci(neg0, lambda m: np.min(m.mean(0)), seed_label="intrinsic-dimension/negative")
    verdict = combine(verdict_above(growth, 0.0), verdict_below(near_zero, p["max_relative_median_at_zero"]),
                      verdict_above(negatives, p["min_frac_negative_at_zero"]))
    return {
        "verdict": verdict,
        "statistic_name": f"growth of the median swap cost ({p['layer']}) from k = {ks[0]} to k = {ks[-1]} at "
                          f"σ_F = {high:g}",
        "statistic": growth[0], "ci_low": growth[1], "ci_high": growth[2], "n_pairs": int(n),
        "details": {"resampling_unit": "seed (swap costs are per model)",
                    **_ci_dict("max_abs_relative_median_at_sigma0", near_zero),
                    **_ci_dict("min_frac_negative_at_sigma0", negatives), "k": ks, "sigma_f_high": high,
                    "mean_median_by_k_at_high": mh.mean(0).tolist(),
                    "spearman_k_vs_median_at_high": _spearman(ks, mh.mean(0)),
                    "mean_relative_median_by_k_at_sigma0": rel0.mean(0).tolist(),
                    "mean_frac_negative_by_k_at_sigma0": neg0.mean(0).tolist(),
                    "threshold_relative_median_at_zero": p["max_relative_median_at_zero"],
                    "threshold_frac_negative_at_zero": p["min_frac_negative_at_zero"]},
    }


register(IdentClaim(
    id="intrinsic-dimension", paper=IDENT_PAPER,
    statement="With σ_F = 1 on gaussian_subspace data, swap costs grow with the data's intrinsic dimension k; "
              "with σ_F = 0 they stay near zero, with many negative values, at every k.",
    tables=("swap_costs",), evaluate=_intrinsic_dimension, sweep_key="dataset",
    defaults={"layer": "layers.0", "sigma_f_high": None, "max_relative_median_at_zero": 0.05,
              "min_frac_negative_at_zero": 0.25},
    requires=_all(_requires_sigma_values, _requires_analysis("swap_costs")),
))


def _subspace_coherence(tables: dict, p: dict) -> dict:
    df = tables["coherence"]
    df = df[(df.split == p["split"]) & (df.method == p["method"])]
    mat, nus = pair_matrix(df, "nu", value=p["barrier"])
    if mat.shape[0] < 2 or len(nus) < 2:
        return _inconclusive("fewer than 2 complete pairs or ν values", len(mat))
    drop = bootstrap_ci(mat, lambda m: np.mean(m[:, 0] - m[:, -1]), seed_label="subspace-coherence/drop")
    logx = np.log10(np.asarray(nus, dtype=float))
    logx = logx - logx.mean()

    def mean_slope(m):  # least-squares slope of the barrier vs log10 ν, per pair, averaged
        return float(np.mean((m - m.mean(1, keepdims=True)) @ logx / (logx @ logx)))

    slope = bootstrap_ci(mat, mean_slope, seed_label="subspace-coherence/slope")
    verdict = combine(verdict_above(drop, p["min_drop"]), verdict_below(slope, 0.0))
    return {
        "verdict": verdict,
        "statistic_name": f"drop of the {p['barrier']} from ν = {nus[0]:.3g} to ν = {nus[-1]:.3g}",
        "statistic": drop[0], "ci_low": drop[1], "ci_high": drop[2], "n_pairs": int(mat.shape[0]),
        "details": {**_ci_dict("slope_per_decade_of_nu", slope), "nu": nus,
                    "mean_barrier_by_nu": mat.mean(0).tolist(), "spearman_nu_vs_mean_barrier": _spearman(nus, mat.mean(0)),
                    "threshold_drop": p["min_drop"]},
    }


register(IdentClaim(
    id="subspace-coherence", paper=IDENT_PAPER,
    statement="With F = 0 and only a random mask, the unaligned midpoint barrier falls as the subspace "
              "coherence ν of the inputs rises from 0.1 to 1.",
    tables=("coherence",), evaluate=_subspace_coherence, sweep_key="dataset",
    defaults={"barrier": "regression_midpoint_barrier", "method": "identity", "split": "test", "min_drop": 0.0},
    requires=_requires_analysis("coherence"),
))


def _identifiability_tradeoff(tables: dict, p: dict) -> dict:
    runs = tables["runs"]
    std = runs[runs.symmetry == "standard"]
    asym = runs[runs.symmetry != "standard"]
    if std.empty or asym.empty:
        return _inconclusive("the study needs standard and symmetry-breaking points", 0)
    high = float(asym.sigma_f.max())
    both = pd.concat([std.assign(kind="standard"), asym[asym.sigma_f == high].assign(kind="broken")])
    mat, kinds = seed_matrix(both, "kind", p["metric"])  # columns sorted: broken, standard
    if len(mat) < 2:
        return _inconclusive("fewer than 2 seeds with both models", len(mat))
    drop = bootstrap_ci(mat, lambda m: np.mean(m[:, 1] - m[:, 0]), seed_label="identifiability-tradeoff")
    return {
        "verdict": verdict_above(drop, p["min_drop"]),
        "statistic_name": f"{p['metric']} of the standard network minus that of the symmetry-broken one at "
                          f"σ_F = {high:g}",
        "statistic": drop[0], "ci_low": drop[1], "ci_high": drop[2], "n_pairs": int(len(mat)),
        "details": {"resampling_unit": "seed (accuracy is per model)", "sigma_f_high": high,
                    "mean_standard": float(mat[:, 1].mean()), "mean_broken": float(mat[:, 0].mean()),
                    "threshold_drop": p["min_drop"]},
    }


def _requires_kinds(cid, ccfg, study, points) -> None:
    kinds = {(p.model.get("symmetry") or {}).get("kind", "standard") for p in points}
    if "standard" not in kinds or len(kinds) < 2:
        raise ConfigError(f"claims.{cid}: study {ccfg.get('study')!r} must sweep model.symmetry.kind over "
                          f"standard and a symmetry-breaking kind; got {sorted(kinds)}")


register(IdentClaim(
    id="identifiability-tradeoff", paper=IDENT_PAPER,
    statement="Strong symmetry breaking (the largest σ_F) costs test accuracy against the standard network "
              "trained the same way.",
    tables=("runs",), evaluate=_identifiability_tradeoff, sweep_key="model.symmetry.kind",
    defaults={"metric": "test_acc", "min_drop": 0.0},
    requires=_requires_kinds,
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
