"""What a verdict rests on: the margin of a threshold that is a convention, and whether a paper's number was
measured at our scale.

A criterion whose threshold is a convention (not the paper's) records the thresholds that keep its verdict
and the one that flips it (``convention_margin``); a paper value is comparable only where dataset,
architecture and scale match (``comparability``). docs/claims.md ("Margins and comparability").
"""
from __future__ import annotations

import math

INF = math.inf


def is_convention(source: str) -> bool:
    return "convention" in source


def keeps_for(side: str, threshold: float, low: float, high: float) -> tuple[float, float, float]:
    """(lo, hi, flips_at): the thresholds t in [lo, hi] that give the verdict the interval [low, high] has at
    ``threshold`` (ends as in ``core.Criterion.verdict``), and the end nearest ``threshold`` where it flips."""
    if side == ">":  # supported: t < low; not_supported: t >= high
        lo, hi = (-INF, low) if threshold < low else (high, INF) if threshold >= high else (low, high)
    elif side == "<":  # supported: t > high; not_supported: t <= low
        lo, hi = (high, INF) if threshold > high else (-INF, low) if threshold <= low else (low, high)
    elif side == "ahead>":  # a one-sided control: supported t < low, else inconclusive
        lo, hi = (-INF, low) if threshold < low else (low, INF)
    elif side == "ahead<":  # supported t > high, else inconclusive
        lo, hi = (high, INF) if threshold > high else (-INF, high)
    elif side == "apart":  # supported: t < max(low, −high), the interval's distance from 0; else inconclusive
        far = max(low, -high, 0.0)
        lo, hi = (0.0, far) if threshold < far else (far, INF)
    else:  # within ±t: supported t > max(−low, high); not_supported t <= max(low, −high)
        inside, outside = max(-low, high), max(low, -high)
        lo, hi = (inside, INF) if threshold > inside else (0.0, outside) if threshold <= outside else \
            (max(outside, 0.0), inside)
    # a tolerance (within) or a minimum distance (apart) is positive: 0 bounds its range without flipping anything
    ends = [e for e in (lo, hi) if math.isfinite(e) and not (side in ("within", "apart") and e <= 0)]
    flips = min(ends, key=lambda e: abs(e - threshold)) if ends else math.nan
    return lo, hi, flips


def convention_margin(c) -> dict | None:
    """For a ``Criterion`` whose threshold is a convention and that has an interval: ``{convention, keeps_for,
    flips_at, margin}`` (an open end of keeps_for is null in the JSON); else None."""
    e = c.estimate
    if not is_convention(c.source) or not e.has_ci():
        return None
    lo, hi, flips = keeps_for(c.side, c.threshold, e.ci_low, e.ci_high)
    return {"convention": True, "keeps_for": [lo, hi], "flips_at": flips, "margin": abs(c.threshold - flips)}


def decided_by_convention(criteria: list, verdict: str) -> dict | None:
    """The convention criterion the claim's verdict rests on, or None where a paper or null criterion decides
    it alone. Supported: any criterion flipping flips it (the smallest margin); not supported or inconclusive:
    the criteria with that verdict decide, and it rests on a convention only if all of them are conventions
    (the largest margin: all must flip)."""
    deciding = criteria if verdict == "supported" else [c for c in criteria if c.verdict == verdict]
    # a convention whose verdict no threshold flips (a null control whose interval reaches 0) decides nothing
    marked = [(c, m if m and math.isfinite(m["flips_at"]) else None) for c in deciding for m in [convention_margin(c)]]
    if verdict != "supported" and (not marked or any(m is None for _, m in marked)):
        return None
    marked = [(c, m) for c, m in marked if m is not None]
    if not marked:
        return None
    pick = min if verdict == "supported" else max
    c, m = pick(marked, key=lambda cm: cm[1]["margin"])
    return {"criterion": c.name, "threshold": c.threshold, "side": c.side, **m}


def margin_text(d: dict | None) -> str:
    """``by convention, margin …`` for the CLI and the claims table ("" where no convention decides)."""
    if not d:
        return ""
    lo, hi = ((end if v is None or math.isinf(v) else f"{v:.3g}") for v, end in zip(d["keeps_for"], ("−∞", "∞")))
    return (f"by convention, margin {d['margin']:.3g}: {d['criterion']} threshold {d['threshold']:.3g} keeps the "
            f"verdict for thresholds in [{lo}, {hi}], flips at {d['flips_at']:.3g}")


# --------------------------------------------------------------------------- the paper's scale against ours
def our_scale(scale: dict) -> dict:
    """What a paper value's ``at`` is compared with: dataset families, architectures, the widest width, and the
    datasets' d and n_train (from ``scale["data"]``, the config's description of each dataset)."""
    data = scale.get("data") or {}
    names = scale.get("dataset") or []
    widths = scale.get("widths") or []
    return {"dataset": sorted({(data.get(n) or {}).get("family", n) for n in names}),
            "arch": list(scale.get("arch") or []),
            "width": [max(widths)] if widths else [],
            "d": sorted({data[n]["d"] for n in names if (data.get(n) or {}).get("d") is not None}),
            "n_train": sorted({data[n]["n_train"] for n in names if (data.get(n) or {}).get("n_train") is not None})}


def comparability(at: dict, scale: dict) -> tuple[bool, str]:
    """(comparable, reason): every key of the paper's ``at`` (dataset, arch, width, d, n_train) has the same
    value in our study; the reason names each key that differs (or that we cannot tell)."""
    if not at:
        return False, "the paper's scale is not recorded"
    ours = our_scale(scale or {})
    differ = []
    for key, want in at.items():
        have = ours.get(key, [])
        if not any(_same(want, h) for h in have):
            differ.append(f"{key} {_fmt(want)} vs ours {', '.join(_fmt(h) for h in have) or 'unknown'}")
    if differ:
        return False, "paper: " + "; ".join(differ)
    return True, "same " + ", ".join(f"{k} {_fmt(v)}" for k, v in at.items())


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
