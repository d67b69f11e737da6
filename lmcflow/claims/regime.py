"""Where a claim's study stands against the scale at which the paper makes the claim, and where a barrier's decay
with width predicts it meets its criterion.

``Regime``: the paper's scale for a claim (per architecture, the width at which the paper makes it); a paper's
claims get theirs with ``register`` (``lmcflow.claims.width`` registers the width paper's). ``regime_block`` is
the claim JSON's ``regime`` entry: both scales, whether ours reached the paper's, a label ("not reached at ×1; the
paper: ×16") and the verdict qualifier ``below_regime`` for a not_supported verdict measured below it.
``predicted_crossing``: the power-law fit of the mean barrier against width over the whole grid and the width at
which it meets the criterion's threshold, with a delete-one-seed jackknife interval. Formats and names:
docs/claims.md, "Regime and predicted crossing width".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lmcflow.claims import stats

BELOW_REGIME = "below_regime"
DECAY_MODEL = "ln(mean barrier) = a + β·ln(width), least squares over the grid's widths"
FLOOR_MODEL = "ln(mean barrier) = ln(c + e^a·width^β), c ≥ 0 the floor, least squares over the grid's widths"
COMPARISON = ("AICc of the two fits on the log scale (n ln(RSS/n) + 2k + 2k(k+1)/(n−k−1), k = 2 and 3); the floor "
              "model is chosen where its AICc is lower, and only with n ≥ 5 widths (fewer: the power law)")


@dataclass(frozen=True)
class Regime:
    """The paper's scale for its claims: ``widths[arch]`` is the width at which the paper makes them for that
    architecture; ``source`` says where the paper does."""

    widths: dict
    source: str


REGIMES: dict[str, Regime] = {}  # paper -> its claims' regime


def register(paper: str, regime: Regime) -> None:
    REGIMES[paper] = regime


def _times(w: float) -> str:
    return f"×{w:g}" if w >= 1 else f"×1/{1 / w:g}"


def regime_block(paper: str, scale: dict, verdict: str, details: dict) -> dict | None:
    """The claim JSON's ``regime`` (None for a paper without a registered regime or a study without widths)."""
    regime = REGIMES.get(paper)
    ours = [float(w) for w in (scale or {}).get("widths") or []]
    archs = [a for a in (scale or {}).get("arch") or [] if a in (regime.widths if regime else {})]
    if regime is None or not ours or not archs:
        return None
    paper_width = min(float(regime.widths[a]) for a in archs)
    widest = max(ours)
    reached = widest >= paper_width
    label = (f"reached at {_times(widest)} (the paper: {_times(paper_width)})" if reached else
             f"not reached at {_times(widest)}; the paper: {_times(paper_width)}")
    crossing = (details or {}).get("crossing") or {}
    return {"key": "model.width", "paper_widths": {a: float(regime.widths[a]) for a in archs},
            "paper_width": paper_width, "our_widths": sorted(ours), "our_widest": widest, "reached": reached,
            "label": label, "source": regime.source,
            "verdict_qualifier": BELOW_REGIME if verdict == "not_supported" and not reached else "",
            "predicted_crossing_width": crossing.get("width"),
            "predicted_crossing_width_ci": crossing.get("width_ci")}


def qualified_verdict(result: dict) -> str:
    """The verdict as shown to readers: ``not_supported (below the paper's regime: not reached at ×1; the paper:
    ×16)`` where the qualifier applies, else the verdict."""
    reg = result.get("regime") or {}
    if reg.get("verdict_qualifier") == BELOW_REGIME:
        return f"{result['verdict']} (below the paper's regime: {reg['label']})"
    return result["verdict"]


# --------------------------------------------------------------------------- the barrier's decay with width
def decay_fit(widths, barriers) -> tuple[float, float]:
    """(a, β) of ``DECAY_MODEL``; NaN when a barrier is not positive (a power law cannot fit it) or < 2 widths."""
    w, b = np.asarray(widths, dtype=float), np.asarray(barriers, dtype=float)
    if len(w) < 2 or not np.all(np.isfinite(b)) or not np.all(b > 0) or np.ptp(w) == 0:
        return math.nan, math.nan
    x, y = np.log(w), np.log(b)
    beta = stats.slope(x, y)
    return float(y.mean() - beta * x.mean()), float(beta)


def log2_crossing_width(widths, barriers, threshold: float) -> float:
    """log2 of the width at which the fitted decay meets ``threshold``: (ln threshold − a) / (β ln 2), on the log
    scale so that a nearly flat fit's astronomically wide crossing stays a number; NaN unless the fit decays (β < 0)."""
    a, beta = decay_fit(widths, barriers)
    if not (math.isfinite(beta) and beta < 0) or threshold <= 0:
        return math.nan
    return (math.log(threshold) - a) / (beta * math.log(2))


def crossing_width(widths, barriers, threshold: float) -> float:
    """The width at which the fitted decay meets ``threshold``: exp((ln threshold − a) / β); NaN unless the fit
    decays (β < 0), inf beyond a float. Below the grid's narrowest width when the barrier is already under the
    threshold there."""
    log2w = log2_crossing_width(widths, barriers, threshold)
    return 2.0 ** log2w if not math.isfinite(log2w) or log2w < 1000 else math.inf


def _width_of(log2w: stats.Estimate) -> tuple[float | None, list | None]:
    """2 ** the log2 crossing width and its interval; None where the value (or a bound) is not finite or beyond what
    a float holds (a nearly flat fit of a useless partner puts the crossing at 2 ** 10⁴ units and more)."""
    def pow2(v):
        return 2.0 ** v if math.isfinite(v) and v < 1000 else None

    width = pow2(log2w.value)
    ci = [pow2(log2w.ci_low), pow2(log2w.ci_high)] if log2w.has_ci() else None
    return width, (ci if ci and None not in ci else None)


def predicted_crossing(sample: stats.Sample, barriers, widths, threshold: float, criterion: str) -> dict:
    """The claim details' ``crossing``: ``barriers(means) -> per-width mean barriers`` of ``sample`` fitted by
    ``DECAY_MODEL``; the exponent β and the crossing width with delete-one-seed jackknife intervals (the width's
    on the log2 scale, where the jackknife's symmetric interval fits a ratio). No interval when a leave-one-seed-out
    fit does not decay or puts a bound beyond 2 ** 1000."""
    widths = [float(w) for w in widths]
    exponent = stats.estimate(lambda m: decay_fit(widths, barriers(m))[1], sample)
    log2w = stats.estimate(lambda m: log2_crossing_width(widths, barriers(m), threshold), sample)
    width, ci = _width_of(log2w)
    means = np.asarray(barriers(sample.cells()), dtype=float)
    comparison = compare_decay_models(widths, means, threshold)
    floor = stats.estimate(lambda m: floor_fit(widths, barriers(m))[0], sample) if len(widths) >= 4 else None
    if comparison.get("chosen") == "floor":  # the prediction under the chosen model, its interval on log2

        def log2_cross(m):
            c = compare_decay_models(widths, np.asarray(barriers(m), dtype=float), threshold)
            return c.get("log2_crossing_width") if c.get("log2_crossing_width") is not None else math.nan

        log2w = stats.estimate(log2_cross, sample)
        width, ci = _width_of(log2w)
    return {"model": DECAY_MODEL, "criterion": criterion, "threshold": float(threshold), "widths": widths,
            "exponent": exponent.as_dict(), "log2_width": log2w.as_dict(), "width": width, "width_ci": ci,
            "beyond_grid": None if width is None else width > max(widths),
            "ci_method": stats.CI_METHOD, "model_comparison": comparison,
            "floor": floor.as_dict() if floor is not None else None,
            "chosen": comparison.get("chosen"), "floor_below_threshold": comparison.get("floor_below_threshold")}


def regime_columns(result: dict) -> dict:
    """claims.parquet's regime columns (empty strings and NaN for a claim without a regime)."""
    reg = result.get("regime") or {}
    ci = reg.get("predicted_crossing_width_ci") or [None, None]

    def num(v) -> float:
        return math.nan if v is None else float(v)

    return {"regime": reg.get("label", ""), "verdict_qualifier": reg.get("verdict_qualifier", ""),
            "paper_width": num(reg.get("paper_width")), "our_widest": num(reg.get("our_widest")),
            "crossing_width": num(reg.get("predicted_crossing_width")),
            "crossing_width_ci_low": num(ci[0]), "crossing_width_ci_high": num(ci[1])}


# --------------------------------------------------------------------------- a power law with a floor
def floor_fit(widths, barriers) -> tuple[float, float, float, float]:
    """(c, a, β, rss) of ``FLOOR_MODEL`` (NaN where a barrier is not positive or < 4 widths): the floor c on a grid
    of [0, min barrier) and, for each c, the power law of the barrier above it; the best c refined by golden
    section on the log-scale residual sum of squares."""
    w, b = np.asarray(widths, dtype=float), np.asarray(barriers, dtype=float)
    if len(w) < 4 or not np.all(np.isfinite(b)) or not np.all(b > 0):
        return (math.nan,) * 4
    x, y = np.log(w), np.log(b)

    def fit(c):
        z = np.log(b - c)
        beta = stats.slope(x, z)
        a = float(z.mean() - beta * x.mean())
        rss = float(np.sum((np.log(c + np.exp(a + beta * x)) - y) ** 2))
        return rss, a, beta

    grid = np.linspace(0.0, b.min() * 0.999, 200)
    rss = np.array([fit(c)[0] for c in grid])
    k = int(np.argmin(rss))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    for _ in range(40):  # golden-section refinement of c
        m1, m2 = lo + 0.382 * (hi - lo), lo + 0.618 * (hi - lo)
        if fit(m1)[0] < fit(m2)[0]:
            hi = m2
        else:
            lo = m1
    c = (lo + hi) / 2
    r, a, beta = fit(c)
    return float(c), a, float(beta), r


def aicc(rss: float, n: int, k: int) -> float:
    if n - k - 1 <= 0 or not math.isfinite(rss):
        return math.nan
    return n * math.log(max(rss, 1e-300) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def compare_decay_models(widths, barriers, threshold: float) -> dict:
    """Power law vs power law with a floor for the per-width mean barriers: both fits, their AICc, the chosen
    model, the crossing width under it (None where the floor lies at or above the threshold: no crossing), the
    residuals of the power law and the number of sign runs in them (few runs: curved residuals)."""
    w, b = np.asarray(widths, dtype=float), np.asarray(barriers, dtype=float)
    a, beta = decay_fit(w, b)
    out = {"models": {"power_law": DECAY_MODEL, "floor": FLOOR_MODEL}, "comparison": COMPARISON, "chosen": None}
    if not math.isfinite(beta):
        return out
    res = np.log(b) - (a + beta * np.log(w))
    runs = 1 + int(np.sum(np.sign(res[1:]) != np.sign(res[:-1])))
    c, fa, fbeta, frss = floor_fit(w, b)
    n = len(w)
    aic_p, aic_f = aicc(float(res @ res), n, 2), aicc(frss, n, 3)
    chosen = "floor" if math.isfinite(aic_f) and math.isfinite(aic_p) and aic_f < aic_p and n >= 5 else "power_law"
    if chosen == "floor":  # on log2, as log2_crossing_width
        log2c = (math.log(threshold - c) - fa) / (fbeta * math.log(2)) if threshold > c and fbeta < 0 else math.nan
    else:
        log2c = log2_crossing_width(w, b, threshold)
    crossing = 2.0 ** log2c if math.isfinite(log2c) and log2c < 1000 else None
    out.update({"chosen": chosen, "aicc": {"power_law": aic_p, "floor": aic_f},
                "power_law": {"a": a, "exponent": beta, "residuals": res.tolist(), "sign_runs": runs},
                "floor": {"c": c, "a": fa, "exponent": fbeta, "rss": frss},
                "floor_below_threshold": None if not math.isfinite(c) else bool(c < threshold),
                "crossing_width": crossing, "log2_crossing_width": log2c if math.isfinite(log2c) else None})
    return out
