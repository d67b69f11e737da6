"""Same-run null-partner controls: a pair claim's statistic must tell real partners from useless ones.

A study with ``analysis.null_partners`` (``lmcflow.config.partners``) holds, beside every real pair (a, b), the pair
(a, partner of b) for each partner kind, through the same jobs; its tables mark them in column ``partner``.
``split_partners`` gives the claim its real rows and, per kind, the partner rows indexed by the real seeds (seed_b =
b). ``null_controls`` evaluates the claim's own statistic on each kind's rows and compares its headline estimate
with the real one, one-sided in the paper's direction: the delete-one-seed jackknife interval of real − null (seed s
dropped from both) must lie beyond δ on the headline's side (real above null for a ">" headline, below for "<",
nearer 0 for a tolerance "within"), where δ = ``null_min_share`` × the real estimate's distance from the headline
criterion's threshold: at least that share of the real pairs' margin is something a useless partner does not have.
The width claims' headline statistics are chosen so that a useless partner lands on their failing side (a merge
that is "A plus nothing" is not the paper's merge: docs/claims.md), so a real pair passes this control by being
better than the null, never merely different from it. A claim with a ``reference_partner`` (the width mechanism
claims: ``lmcflow.claims.reference``) reads that kind's tables beside every evaluation, the real one and each
kind's. Why and how it enters the verdict: docs/claims.md ("Null partners").
"""
from __future__ import annotations

import math

import numpy as np

from lmcflow.claims.criterion import Criterion
from lmcflow.claims.stats import Estimate, difference
from lmcflow.config import ConfigError
from lmcflow.config.partners import PARTNER_KINDS, PARTNER_SEED_OFFSET, PARTNER_SEP, REAL

PARTNER = "partner"
NULL_DEFAULTS = {"null_min_share": 0.1}  # every pair claim's parameter (docs/claims.md, "Null partners")
CONTROL_SOURCE = ("control, minimum distance by convention: the same statistic on pairs (real A, null partner B) "
                  "of the same run; real − null, its seed-level interval must lie beyond null_min_share × the "
                  "real estimate's distance from the headline threshold, on the headline's side (one-sided)")


def check_null_params(cid, p, study, points) -> None:
    """``null_min_share`` is a number in [0, 1)."""
    v = p.get("null_min_share")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise ConfigError(f"claims.{cid}.null_min_share: {v!r} must be a number ≥ 0 and < 1 "
                          f"(docs/claims.md, 'Null partners')")


def min_distance(head: Criterion, real: Estimate, share: float) -> float:
    """δ: ``share`` of the real estimate's distance from the headline threshold (for a tolerance ``within ±t``,
    from the nearer of ±t); 0 where the real estimate is not finite."""
    x = real.value
    if x is None or not math.isfinite(x):
        return 0.0
    gap = head.threshold - abs(x) if head.side == "within" else x - head.threshold
    return share * abs(gap)


def control_side(head: Criterion, null: Estimate) -> tuple[str, float]:
    """(side, sign of δ) of the one-sided control on real − null: the headline's direction; for a tolerance
    ``within ±t`` the real estimate must be nearer 0 than the null's, i.e. below it where the null is positive."""
    if head.side == ">":
        return "ahead>", 1.0
    if head.side == "<":
        return "ahead<", -1.0
    positive = null.value is None or not math.isfinite(null.value) or null.value >= 0
    return ("ahead<", -1.0) if positive else ("ahead>", 1.0)


def split_partners(tables: dict) -> tuple[dict, dict]:
    """(the real rows of every table, {partner kind: tables of that kind's pairs as the claim reads real ones}).

    A kind's tables hold its pair rows with ``seed_b`` (and a per-model row's ``seed``) mapped back to the real seed b
    it stands in for and ``point`` to the real point's id; a table without a ``partner`` column (a hand-made one)
    is real only."""
    kinds = sorted({k for df in tables.values() if PARTNER in df.columns for k in df[PARTNER].unique()} - {REAL})
    real = {kind: df[df[PARTNER] == REAL] if PARTNER in df.columns else df for kind, df in tables.items()}
    nulls = {}
    for k in kinds:
        off = PARTNER_SEED_OFFSET[k]
        out = {}
        for kind, df in tables.items():
            if PARTNER not in df.columns:
                out[kind] = df.iloc[0:0]
                continue
            d = df[df[PARTNER] == k].copy()
            for col in ("seed_b", "seed"):  # a pair's B, a per-model row's model
                if col in d.columns:
                    d[col] = d[col].to_numpy(np.int64) - off
            if "point" in d.columns:
                d["point"] = d["point"].str.split(PARTNER_SEP).str[0]
            out[kind] = d
        nulls[k] = out
    return real, nulls


def null_controls(claim_, real_outcome, real: dict, nulls: dict, params: dict, no_data,
                  reference: dict | None = None) -> tuple[list, list]:
    """(control criteria to add to the verdict, one record per partner kind for the claim JSON).

    ``real``, ``nulls``: ``split_partners``'s tables; ``no_data``: the exception a statistic raises when its
    tables lack what it reads; ``reference``: the tables of the claim's ``reference_partner`` (None: it has none),
    which the statistic reads beside each kind's pairs as beside the real ones (for the reference's own kind the
    headline is then exactly 0). The real statistic is taken over the points the kind's pairs cover (the headline
    itself where they cover every point; the reference restricted alike), so both sides average the same grid. A
    kind whose rows do not hold what the statistic reads (the study's null partners do not cover the claim's
    points) is recorded as not run and adds no criterion."""
    if not real_outcome.criteria:
        return [], []
    head = real_outcome.criteria[0]
    criteria, records = [], []
    for kind, tables in sorted(nulls.items()):
        rec = {"kind": kind, "statistic_name": head.name, "real": head.estimate.as_dict()}
        try:
            null_out = claim_.statistic(tables, params, reference)
            covered = _points(tables)
            real_est = head.estimate if covered >= _points(real) else _named(claim_.statistic(
                _restrict(real, covered), params, None if reference is None else _restrict(reference, covered)),
                head.name)
        except no_data as why:
            records.append({**rec, "status": "not run", "reason": f"{kind} partner rows: {why}"})
            continue
        null_est = _named(null_out, head.name)
        if null_est is None or real_est is None:
            records.append({**rec, "status": "not run",
                            "reason": f"the statistic on {kind} partners has no estimate {head.name!r}"})
            continue
        rec["real"] = real_est.as_dict()
        rec["points"] = sorted(covered)
        diff = difference(real_est, null_est)
        delta = min_distance(head, real_est, params.get("null_min_share", NULL_DEFAULTS["null_min_share"]))
        side, sign = control_side(head, null_est) if claim_.null_control == "one_sided" else ("apart", 1.0)
        c = Criterion(f"real_vs_{kind}", f"{head.name}: real pairs − pairs with a {kind.replace('_', '-')} partner B "
                                         f"(same run, same seeds), beyond {sign * delta:.3g} in the paper's direction",
                      diff, side, sign * delta, CONTROL_SOURCE, kind="control", control=f"{kind} partners")
        criteria.append(c)
        null_head = next((t for t in null_out.criteria if t.name == head.name), None)
        records.append({**rec, "status": "run", "null": null_est.as_dict(), "difference": diff.as_dict(),
                        "min_distance": delta, "verdict": c.verdict, "n_pairs": null_out.n_pairs,
                        "null_verdict_on_criterion": null_head.verdict if null_head else None})
    return criteria, records


def _points(tables: dict) -> set:
    """The points of a claim's pair tables (not ``runs``: one row per model)."""
    return {p for kind, df in tables.items() if kind != "runs" and "point" in df.columns for p in df["point"]}


def _restrict(tables: dict, points: set) -> dict:
    return {kind: df if kind == "runs" or "point" not in df.columns else df[df["point"].isin(points)]
            for kind, df in tables.items()}


def _named(outcome, name: str) -> Estimate | None:
    for t in outcome.criteria:
        if t.name == name:
            return t.estimate
    return outcome.reported.get(name)


def null_summary(records: list | None) -> str:
    """claims.parquet's ``null_controls`` cell: per kind, real vs null and the control's verdict."""
    def num(v):
        return "nan" if v is None else f"{v:.3g}"

    parts = []
    for r in records or []:
        if r["status"] != "run":
            parts.append(f"{r['kind']}: not run ({r['reason']})")
            continue
        d = r["difference"]
        parts.append(f"{r['kind']}: real {num(r['real']['statistic'])} vs null {num(r['null']['statistic'])}, "
                     f"difference {num(d['statistic'])} [{num(d['ci_low'])}, {num(d['ci_high'])}] beyond "
                     f"±{num(r.get('min_distance', 0.0))}: {r['verdict']}")
    return "; ".join(parts)


def null_columns(records: list | None) -> dict:
    """claims.parquet's ``null_<kind>`` columns: the headline statistic on that kind's pairs (NaN: not run)."""
    run = {r["kind"]: r["null"]["statistic"] for r in records or [] if r["status"] == "run"}
    return {f"null_{k}": float("nan") if run.get(k) is None else float(run[k]) for k in PARTNER_KINDS}
