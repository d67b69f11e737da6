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


def crossing_width(widths, barriers, threshold: float) -> float:
    """The width at which the fitted decay meets ``threshold``: exp((ln threshold − a) / β); NaN unless the fit
    decays (β < 0). Below the grid's narrowest width when the barrier is already under the threshold there."""
    a, beta = decay_fit(widths, barriers)
    if not (math.isfinite(beta) and beta < 0) or threshold <= 0:
        return math.nan
    return math.exp((math.log(threshold) - a) / beta)


def predicted_crossing(sample: stats.Sample, barriers, widths, threshold: float, criterion: str) -> dict:
    """The claim details' ``crossing``: ``barriers(means) -> per-width mean barriers`` of ``sample`` fitted by
    ``DECAY_MODEL``; the exponent β and the crossing width with delete-one-seed jackknife intervals (the width's
    on the log2 scale, where the jackknife's symmetric interval fits a ratio). No interval when a leave-one-seed-out
    fit does not decay."""
    widths = [float(w) for w in widths]
    exponent = stats.estimate(lambda m: decay_fit(widths, barriers(m))[1], sample)
    log2w = stats.estimate(lambda m: math.log2(crossing_width(widths, barriers(m), threshold))
                           if math.isfinite(crossing_width(widths, barriers(m), threshold)) else math.nan, sample)
    width = 2.0 ** log2w.value if math.isfinite(log2w.value) else None
    ci = [2.0 ** log2w.ci_low, 2.0 ** log2w.ci_high] if log2w.has_ci() else None
    return {"model": DECAY_MODEL, "criterion": criterion, "threshold": float(threshold), "widths": widths,
            "exponent": exponent.as_dict(), "log2_width": log2w.as_dict(), "width": width, "width_ci": ci,
            "beyond_grid": None if width is None else width > max(widths),
            "ci_method": stats.CI_METHOD}


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
