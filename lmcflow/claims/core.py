"""Claim registry, verdict logic and the one result builder (results/claims/<id>.json).

A claim is a declarative ``@claim(...)`` entry plus a statistic ``fn(tables, params) -> Outcome`` that
pivots its tables (``pivot``: a ``stats.Sample`` with labelled axes), forms seed-level estimates and
returns them as ``Criterion``s. How a criterion and a claim get their verdict: ``Criterion.verdict``,
``Outcome.verdict`` and docs/claims.md.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lmcflow.claims import convergence, gates, margins, nulls, regime, stats, thresholds
from lmcflow.claims.criterion import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Criterion
from lmcflow.config import ConfigError, point_value, same_value, swept_values

RESULT_FORMAT = 2


# --------------------------------------------------------------------------- outcomes
@dataclass
class Outcome:
    """What a claim's statistic function returns: its criteria (the first is the headline), estimates
    reported beside them (not part of the verdict), per-grid-value means and other details."""

    criteria: list[Criterion]
    n_seeds: int
    n_pairs: int = 0
    reported: dict[str, stats.Estimate] = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    reason: str = ""  # set: the data cannot decide the claim (inconclusive)

    @property
    def verdict(self) -> str:
        """``combine`` of the criteria; inconclusive when the data cannot decide (``reason``, e.g. too few seeds)."""
        if self.reason or not self.criteria:
            return INCONCLUSIVE
        return combine(*(t.verdict for t in self.criteria))


def combine(*verdicts: str) -> str:
    """All parts supported -> supported; any part refuted -> not_supported; else inconclusive."""
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    if any(v == NOT_SUPPORTED for v in verdicts):
        return NOT_SUPPORTED
    return INCONCLUSIVE


class NoData(Exception):
    """The tables lack what the claim reads; the message says what (the claim is inconclusive)."""


def need(condition: bool, reason: str) -> None:
    if not condition:
        raise NoData(reason)


# --------------------------------------------------------------------------- the paper beside us
@dataclass(frozen=True)
class PaperValue:
    """A number the paper reports, the scale it was measured at, and the name of our criterion or reported
    estimate that measures the same quantity (None when ours is a different quantity)."""

    quantity: str
    value: float
    scale: str
    source: str
    ours: str | None = None
    match: dict = field(default_factory=dict)  # e.g. {"arch": "mlp"}: the row shown beside a study
    at: dict = field(default_factory=dict)  # the paper's dataset, arch and scale (width, d, n_train)

    def fits(self, scale: dict) -> bool:
        return all(v in (scale.get(k) or []) for k, v in self.match.items())

    def comparable(self, scale: dict) -> tuple[bool, str]:
        """Whether the paper measured at our study's dataset, architecture and scale, and why not."""
        return margins.comparability(self.at, scale)


# --------------------------------------------------------------------------- the registry
@dataclass
class Claim:
    id: str
    paper: str
    statement: str
    tables: tuple  # per-study tables the statistic reads
    evaluate: Callable[[dict, dict], Outcome]
    defaults: dict = field(default_factory=dict)
    sweep_key: str | None = None  # the study must sweep this key over ≥ 2 values
    selects: dict = field(default_factory=dict)  # param -> dotted key whose value the param must name
    requires: tuple = ()  # extra config checks: fn(cid, params, study name, points) -> None or ConfigError
    paper_values: tuple = ()
    multi_study: bool = False  # `study` may list several studies (e.g. Table 1's three rows)
    unit: str = "pair"  # "pair": needs ≥ 2 seeds; "seed": per-model statistics
    gate_endpoints: bool = False  # reads barriers or merged models: decided only on working endpoints (gates)
    # the null-partner control: "apart" (real − null beyond ±δ) or "one_sided" (beyond δ in the headline's direction)
    null_control: str = "apart"
    converged: bool = False  # decided only on endpoints trained to a plateau (convergence.convergence_gate)
    # a null-partner kind whose pairs (A, partner B) the statistic reads beside the real ones as its same-run
    # reference (``statistic``): "untrained", random features of B's architecture and width
    reference_partner: str | None = None

    def statistic(self, tables: dict, params: dict, reference: dict | None = None) -> Outcome:
        """The claim's statistic on ``tables``; a claim with a ``reference_partner`` also gets that partner's tables
        (``nulls.split_partners``'s, indexed by the real seeds; ``{}`` where the study has none), else it reads
        ``tables`` alone."""
        if self.reference_partner:
            return self.evaluate(tables, params, reference or {})
        return self.evaluate(tables, params)

    def params(self, ccfg: dict | None) -> dict:
        return {**self.defaults, **{k: v for k, v in (ccfg or {}).items() if k != "study"}}

    def check_config(self, cid: str, ccfg: dict, study_name: str, study: dict, points: list) -> None:
        unknown = set(ccfg or {}) - set(self.defaults) - {"study"}
        if unknown:
            raise ConfigError(f"claims.{cid}: unknown parameter(s) {sorted(unknown)}; "
                              f"allowed: study, {', '.join(sorted(self.defaults))}")
        if self.sweep_key and len(swept_values(study, self.sweep_key)) < 2:
            raise ConfigError(f"claims.{cid}: study {study_name!r} must sweep {self.sweep_key} over at least 2 "
                              f"values (studies.{study_name}.sweep.{self.sweep_key})")
        n_seeds = len(study.get("seeds", []))
        need_seeds = 2 if self.unit == "pair" else 1
        if n_seeds < need_seeds:
            raise ConfigError(f"claims.{cid}: compares {'seed pairs' if need_seeds == 2 else 'seeds'}; study "
                              f"{study_name!r} has {n_seeds} seeds (a verdict needs ≥ {stats.MIN_SEEDS}); add "
                              f"seeds to studies.{study_name}.seeds")
        params = self.params(ccfg)
        for name, key in self.selects.items():
            if params.get(name) is None:
                continue
            have = sorted({point_value(p, key) for p in points}, key=str)
            if not any(same_value(params[name], v) for v in have):
                raise ConfigError(f"claims.{cid}.{name}: {params[name]!r} is not a value of {key} in study "
                                  f"{study_name!r}; its points have {have}")
        for check in self.requires + ((gates.check_gate_params,) if self.gate_endpoints else ()):
            check(cid, params, study_name, points)


REGISTRY: dict[str, Claim] = {}


def claim(**entry) -> Callable:
    """Decorator: register ``fn(tables, params) -> Outcome`` as the statistic of a claim entry (with
    ``reference_partner``: ``fn(tables, params, reference_tables)``)."""
    def register(fn):
        if entry.get("gate_endpoints"):  # the gate's parameters and its table (one row per model)
            entry["defaults"] = {**entry.get("defaults", {}), **gates.GATE_DEFAULTS}
            entry["tables"] = tuple(entry["tables"]) + (() if "runs" in entry["tables"] else ("runs",))
        if entry.get("converged"):  # the convergence gate's parameter
            entry["defaults"] = {**entry.get("defaults", {}), **convergence.CONVERGENCE_DEFAULTS}
            entry["tables"] = tuple(entry["tables"]) + (() if "runs" in entry["tables"] else ("runs",))
            entry["requires"] = tuple(entry.get("requires", ())) + (convergence.check_convergence_params,)
        if entry.get("unit", "pair") == "pair":  # the null-partner control's minimum distance
            entry["defaults"] = {**entry.get("defaults", {}), **nulls.NULL_DEFAULTS}
            entry["requires"] = tuple(entry.get("requires", ())) + (nulls.check_null_params,)
        REGISTRY[entry["id"]] = Claim(evaluate=fn, **entry)
        return fn
    return register


def claim_studies(ccfg: dict) -> list[str]:
    """The study (or, for multi-study claims, the studies) a claim reads, in config order."""
    s = (ccfg or {}).get("study")
    return list(s) if isinstance(s, (list, tuple)) else [s]


# --------------------------------------------------------------------------- pivoting tables
def pivot(df: pd.DataFrame, values, cells=(), unit: str = "pair", seeds=None) -> tuple[stats.Sample, dict]:
    """(Sample, labels): ``values`` of ``df`` by seed (``unit="seed"``, column ``seed``) or seed pair
    (``seed_a``, ``seed_b``) × the sorted values of each ``cells`` column, averaged over all other rows
    (layers, λ, …). Array shape (n[, n], len(values), *len(labels[c]) for c in cells); the sample's axes
    are ``("value", values)`` and ``(c, labels[c])`` for each cell column, so a statistic reads its means
    by name: ``m["lewc_cos", widest]``."""
    values, cells = list(values), list(cells)
    keys = ["seed"] if unit == "seed" else ["seed_a", "seed_b"]
    if seeds is None:
        seeds = sorted(set(df["seed"]) if unit == "seed" else set(df["seed_a"]) | set(df["seed_b"]))
    seeds = [int(s) for s in seeds]
    labels = {c: sorted(df[c].unique().tolist()) for c in cells}
    n = len(seeds)
    shape = ((n,) if unit == "seed" else (n, n)) + (len(values),) + tuple(len(labels[c]) for c in cells)
    arr = np.full(shape, np.nan)
    if len(df) and n:
        g = df.groupby(keys + cells, sort=True)[values].mean().reset_index()
        where = {s: i for i, s in enumerate(seeds)}
        g = g[g[keys].isin(list(where)).all(axis=1)]
        idx = [g[k].map(where).to_numpy(int) for k in keys]
        cell_idx = [g[c].map({v: i for i, v in enumerate(labels[c])}).to_numpy(int) for c in cells]
        for vi, v in enumerate(values):
            arr[tuple(idx) + (vi,) + tuple(cell_idx)] = g[v].to_numpy(float)
            if unit == "pair":
                arr[tuple(idx[::-1]) + (vi,) + tuple(cell_idx)] = g[v].to_numpy(float)
    axes = (("value", tuple(values)),) + tuple((c, tuple(labels[c])) for c in cells)
    return stats.Sample(tuple(seeds), arr, unit, axes), labels


def select(df: pd.DataFrame, **equal) -> pd.DataFrame:
    """Rows whose columns equal the given values (floats with relative tolerance 1e-6); a None value, or a
    column the table lacks (a hand-made table), does not filter."""
    mask = np.ones(len(df), dtype=bool)
    for col, want in equal.items():
        if want is None or col not in df.columns:
            continue
        if isinstance(want, float):
            mask &= np.isclose(df[col].to_numpy(dtype=float), want, rtol=1e-6, atol=1e-12)
        else:
            mask &= (df[col] == want).to_numpy()
    return df[mask]


# --------------------------------------------------------------------------- evaluation and results
def _outcome(claim_: Claim, tables: dict, params: dict, scale: dict) -> tuple[Outcome, dict | None, list | None]:
    """The statistic's outcome on the real pairs, with a pair claim's null-partner controls among its criteria
    (``nulls``: their records, None for a per-model claim), and, for a gated claim, its endpoint gate (a failed
    gate: inconclusive)."""
    real, null_tables = nulls.split_partners(tables)
    reference = null_tables.get(claim_.reference_partner, {}) if claim_.reference_partner else None
    try:
        out = claim_.statistic(real, params, reference)
    except NoData as why:
        out = Outcome(criteria=[], n_seeds=0, reason=str(why))
    if out.n_seeds < stats.MIN_SEEDS and not out.reason:
        out.reason = f"too few seeds ({out.n_seeds} < {stats.MIN_SEEDS}): no confidence interval"
    records = None
    if claim_.unit == "pair":
        controls, records = nulls.null_controls(claim_, out, real, null_tables, params, NoData, reference)
        out.criteria = out.criteria + controls
    conv = convergence.convergence_gate(real, params) if claim_.converged else None
    if conv and not conv["passed"]:
        out.reason = conv["reason"] + (f"; {out.reason}" if out.reason else "")
    gate = gates.endpoint_gate(real, params, scale) if claim_.gate_endpoints else None
    if gate and not gate["passed"]:  # first in the reason: a useless model matters more than an unfinished one
        out.reason = gate["reason"] + (f"; {out.reason}" if out.reason else "")
    out.details = {**out.details, **({"convergence_gate": conv} if conv else {})}
    return out, gate, records


def _by_study(tables: dict, study: str) -> dict:
    return {k: (df[df["study"] == study] if "study" in df.columns else df) for k, df in tables.items()}


def _paper(claim_: Claim, outcome: Outcome, scale: dict) -> list[dict]:
    found = {t.name: t.estimate for t in outcome.criteria} | outcome.reported
    rows = []
    for pv in claim_.paper_values:
        ours = found.get(pv.ours) if pv.ours else None
        comparable, why = pv.comparable(scale)
        rows.append({"quantity": pv.quantity, "value": pv.value, "scale": pv.scale, "source": pv.source,
                     "fits_our_study": pv.fits(scale), "comparable": comparable, "comparable_reason": why,
                     "ours": {"name": pv.ours, **ours.as_dict()} if ours is not None else None})
    return rows


def evaluate_claim(cid: str, ccfg: dict, tables: dict, scale: dict, scales: dict | None = None) -> dict:
    """The claim's result (the JSON of results/claims/<id>.json; format documented in results/README.md).

    ``scale``: what the (first) study was measured at; ``scales``: per study, for multi-study claims."""
    claim_ = REGISTRY[cid]
    params = claim_.params(ccfg)
    studies = claim_studies(ccfg)
    if claim_.multi_study and len(studies) > 1:
        gated = {s: _outcome(claim_, _by_study(tables, s), params, (scales or {}).get(s, {})) for s in studies}
        per_study = {s: o for s, (o, _, _) in gated.items()}
        gate = gates.merge_gates([g for _, g, _ in gated.values()]) if claim_.gate_endpoints else None
        null_records = gated[studies[0]][2]
        outcome = per_study[studies[0]]
        verdict = combine(*(o.verdict for o in per_study.values()))
        by_study = {s: {"verdict": o.verdict, "reason": o.reason, "n_seeds": o.n_seeds, "n_pairs": o.n_pairs,
                        "criteria": [t.as_dict() for t in o.criteria],
                        "reported": {k: e.as_dict() for k, e in o.reported.items()}, "details": o.details,
                        "paper": _paper(claim_, o, (scales or {}).get(s, {})), "endpoint_gate": gated[s][1],
                        "null_controls": gated[s][2],
                        "decided_by_convention": _convention(o)}
                    for s, o in per_study.items()}
    else:
        outcome, gate, null_records = _outcome(claim_, tables, params, scale)
        verdict, by_study = outcome.verdict, None
    head = outcome.criteria[0] if outcome.criteria else None
    est = head.estimate if head else stats.Estimate(math.nan, math.nan, math.nan, outcome.n_seeds)
    result = {
        "format": RESULT_FORMAT, "claim_id": cid, "paper": claim_.paper, "statement": claim_.statement,
        "study": studies[0], "studies": studies, "verdict": verdict,
        "reason": outcome.reason if not by_study else "; ".join(f"{s}: {o['reason']}" for s, o in by_study.items()
                                                               if o["reason"]),
        "statistic_name": head.description if head else "", **est.as_dict(),
        "ci_level": stats.LEVEL, "ci_method": stats.CI_METHOD, "n_seeds": outcome.n_seeds,
        "n_pairs": outcome.n_pairs,
        "criteria": [t.as_dict() for t in outcome.criteria],
        "controls": [{"control": t.control, "test": t.name, "verdict": t.verdict} for t in outcome.criteria
                     if t.kind == "control"],
        "reported": {k: e.as_dict() for k, e in outcome.reported.items()},
        "paper_values": _paper(claim_, outcome, scale), "scale": scale, "params": params,
        "details": outcome.details, "endpoint_gate": gate, "null_controls": null_records,
        "convergence_gate": (outcome.details or {}).get("convergence_gate"),
        "thresholds": thresholds.thresholds_block(params),
        "decided_by_convention": _convention(outcome) if not by_study else _first_convention(by_study, verdict),
    }
    if by_study:
        result["by_study"] = by_study
    result["regime"] = regime.regime_block(claim_.paper, scale, verdict, outcome.details)
    return _plain(result)


def _convention(o: Outcome) -> dict | None:
    return None if o.reason else margins.decided_by_convention(o.criteria, o.verdict)


def _first_convention(by_study: dict, verdict: str) -> dict | None:
    """Several studies: the convention margin of the first study whose verdict is the combined one."""
    return next((s["decided_by_convention"] for s in by_study.values() if s["verdict"] == verdict), None)


def _plain(obj):
    """Plain JSON values: numpy scalars as Python numbers, NaN and infinities as null."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


def claim_row(result: dict) -> dict:
    """One row of claims.parquet from a claim JSON (columns in lmcflow.tables.TABLES["claims"])."""
    paper = [p for p in result.get("paper_values", []) if p["fits_our_study"]] or result.get("paper_values", [])
    first = paper[0] if paper else None
    ours = (first or {}).get("ours") or {}
    controls = "; ".join(f"{c['control']}: {c['verdict']}" for c in result.get("controls", []))
    return {
        "claim_id": result["claim_id"], "paper": result["paper"], "statement": result["statement"],
        "study": ",".join(result.get("studies") or [result["study"]]), "verdict": result["verdict"],
        "reason": result.get("reason", ""), "statistic_name": result["statistic_name"],
        "statistic": _nan(result.get("statistic")), "ci_low": _nan(result.get("ci_low")),
        "ci_high": _nan(result.get("ci_high")), "ci_method": result.get("ci_method", ""),
        "n_seeds": int(result.get("n_seeds", 0)), "n_pairs": int(result.get("n_pairs", 0)),
        "controls": controls,
        "paper_quantity": first["quantity"] if first else "", "paper_value": _nan(first["value"] if first else None),
        "paper_scale": first["scale"] if first else "", "our_value": _nan(ours.get("statistic")),
        "paper_comparable": "" if not first or "comparable" not in first else
        "comparable" if first["comparable"] else f"not comparable: {first['comparable_reason']}",
        "scale": json.dumps(result["scale"], sort_keys=True),
        "endpoint_gate": gates.gate_summary(result.get("endpoint_gate")),
        "null_controls": nulls.null_summary(result.get("null_controls"))
        or ("not run: no null partners at the claim's points" if result.get("null_controls") == [] else ""),
        **nulls.null_columns(result.get("null_controls")),
        "convention_margin": margins.margin_text(result.get("decided_by_convention")),
        **replication_columns(result.get("replication")),
        **regime.regime_columns(result),
    }


def replication_columns(rep: dict | None) -> dict:
    """claims.parquet's replicate columns: empty strings and NaN where the run had no replicate seeds."""
    rep = rep or {}
    return {"replicate_seeds": ",".join(map(str, rep.get("seeds", []))), "replicate_verdict": rep.get("verdict", ""),
            "replicate_statistic": _nan(rep.get("statistic")), "replicate_ci_low": _nan(rep.get("ci_low")),
            "replicate_ci_high": _nan(rep.get("ci_high")),
            "replicated": "" if not rep else ("yes" if rep["replicated"] else "no")}
